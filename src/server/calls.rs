//! One tool call on the server side, from the wire or from `callTool` in process: the arguments
//! checked, `execute` run under the server's concurrency bound, its value shaped into a
//! `CallToolResult`, and — with a journal and an idempotency key — run once per key.
//!
//! Exactly-once: a keyed call first looks for a result recorded under (key, tool); failing that, the
//! first of any concurrent calls with that key in this process leads (as its own task, so a client that
//! hangs up does not cut a side effect in half) and every other waits for its result. The leader takes
//! the call in the journal under a lease it renews while `execute` runs: a process sharing the journal
//! (SQLite) that asks meanwhile waits and then reads the result, and takes the call over only if the lease
//! lapses (its owner died). A successful result is recorded; an `isError` result or a failure gives the
//! call up, so a retry runs again.

use super::{Execution, McpServerCore};
use crate::error::{McpError, Result};
use crate::store::journal::{call_fingerprint, CallSlot, McpJournal, RecordedCall};
use parking_lot::Mutex;
use serde_json::Value;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// A result that ran but is not recorded yet: its arguments' fingerprint and the result's JSON.
type Unrecorded = (String, String);
use crate::limits::{CALL_LEASE_MS, MAX_CONCURRENT_SERVER_CALLS, MAX_QUEUED_KEYED_CALLS, MAX_TOOL_ERROR_MESSAGE_BYTES};
use tokio::sync::{watch, OwnedSemaphorePermit, Semaphore};

/// What a call may fail with before `execute` is reached (a JSON-RPC error on the wire, a typed error
/// in process). Everything after is a result, `isError` or not.
#[derive(Debug)]
pub enum Refusal {
    UnknownTool(String),
    BadArguments(String),
    /// Every execution slot is taken and `MAX_QUEUED_KEYED_CALLS` keyed calls are already started or
    /// waiting: the call is not started (retry later).
    Busy,
    /// The idempotency key was used before with other arguments: the call is not run, and the first
    /// call's result is not given to it.
    KeyReused,
    /// The engine failed (a journal that cannot be read or written, the host gone).
    Failed(McpError),
}

impl From<Refusal> for McpError {
    fn from(refusal: Refusal) -> Self {
        match refusal {
            Refusal::UnknownTool(name) => McpError::ToolUnavailable(format!("no tool named {name:?} on this server")),
            Refusal::BadArguments(why) => McpError::InvalidArguments(why),
            Refusal::KeyReused => McpError::InvalidArguments(KEY_REUSED_MESSAGE.to_owned()),
            Refusal::Busy => McpError::Rpc { code: SERVER_BUSY, message: BUSY_MESSAGE.to_owned(), data: None },
            Refusal::Failed(e) => e,
        }
    }
}

/// The JSON-RPC error code of [`Refusal::Busy`] (the implementation-defined server-error range).
pub const SERVER_BUSY: i64 = -32000;
pub const BUSY_MESSAGE: &str = "Server busy: too many calls are running or waiting; retry later";
/// [`Refusal::KeyReused`]'s text (JSON-RPC invalid params on the wire; `mcp_invalid_arguments` in process).
pub const KEY_REUSED_MESSAGE: &str = "Idempotency key reused: it was first used with other arguments (or another tool), so this call is refused; use a new key for a new call";

/// A keyed call whose key was recorded (or is running) with other arguments.
#[derive(Debug, Clone, Copy)]
struct KeyReused;

/// What the leader of a keyed call found: the `CallToolResult` JSON, or a key used with other arguments.
type Led = std::result::Result<String, KeyReused>;
/// The result every waiter of one keyed call receives: the `CallToolResult` JSON, or why there is none.
type Shared = std::result::Result<std::result::Result<Arc<str>, KeyReused>, Arc<McpError>>;
/// Where one keyed call's result is announced: `None` until it is known.
type Announced = watch::Receiver<Option<Shared>>;

/// Words of the error a keyed call ends with when its lease is lost (matched by the wire's error text).
pub(crate) const OUTCOME_UNKNOWN: &str = "outcome is unknown";
/// Attempts at recording a finished call's result before it is kept in memory (answering repeats in
/// this process) and recorded in the background, and the wait between attempts, in ms.
const FINISH_ATTEMPTS: u32 = 3;
const FINISH_RETRY_MS: u64 = 200;
/// How often a result kept in memory is offered to the journal again, in ms.
const FINISH_BACKGROUND_RETRY_MS: u64 = 5_000;
/// How often a call another process is running is looked at again, in ms: from the first to the last, doubling.
const CALL_POLL_MIN_MS: u64 = 20;
const CALL_POLL_MAX_MS: u64 = 1_000;

pub struct Calls {
    journal: Option<Arc<dyn McpJournal>>,
    /// This server's name for itself as the owner of calls in a shared journal (random), and a counter.
    owner: String,
    runs: AtomicU64,
    permits: Arc<Semaphore>,
    /// Places for keyed calls' leader tasks (running or waiting for a permit): `MAX_QUEUED_KEYED_CALLS`.
    queue: Arc<Semaphore>,
    /// Keyed calls executing now, by (key, tool): their arguments' fingerprint and the channel their
    /// result is announced on.
    in_flight: Mutex<HashMap<(String, String), (String, Announced)>>,
    /// Results of calls that ran here but could not be recorded yet, by (key, tool): fingerprint and
    /// result, answered to repeats until the journal takes them.
    unrecorded: Arc<Mutex<HashMap<(String, String), Unrecorded>>>,
}

impl Calls {
    pub fn new(journal: Option<Arc<dyn McpJournal>>) -> Self {
        let mut random = [0u8; 8];
        // Without randomness, the pid and the clock still tell processes apart.
        let _ = ring::rand::SecureRandom::fill(&ring::rand::SystemRandom::new(), &mut random);
        let random: String = random.iter().map(|b| format!("{b:02x}")).collect();
        let owner = format!("{}:{}:{random}", std::process::id(), crate::store::now_ms());
        Calls {
            journal,
            owner,
            runs: AtomicU64::new(0),
            permits: Arc::new(Semaphore::new(MAX_CONCURRENT_SERVER_CALLS)),
            queue: Arc::new(Semaphore::new(MAX_QUEUED_KEYED_CALLS)),
            in_flight: Mutex::new(HashMap::new()),
            unrecorded: Arc::default(),
        }
    }

    fn next_owner(&self) -> String {
        format!("{}:{}", self.owner, self.runs.fetch_add(1, Ordering::Relaxed))
    }
}

/// What one call came to, and whether this request ran the host's `execute` for it.
pub struct Called {
    pub outcome: std::result::Result<String, Refusal>,
    /// `false` for a call refused before `execute` (by the engine's or the host's own schema check), answered
    /// from the journal or from memory (a replay), or that joined a keyed call another request runs.
    pub executed: bool,
}

impl McpServerCore {
    /// Calls `name` with `arguments` (JSON): the `CallToolResult` as JSON. `key` is the call's idempotency
    /// key (`params._meta.idempotencyKey`); without a journal it changes nothing.
    pub async fn call(
        self: &Arc<Self>,
        name: &str,
        arguments: Option<Value>,
        key: Option<&str>,
    ) -> std::result::Result<String, Refusal> {
        self.call_seen(name, arguments, key).await.outcome
    }

    /// [`Self::call`], saying whether this request ran `execute` (the host's telemetry records the calls that
    /// did as they run, and is told of the others: `dispatch::Served`).
    pub async fn call_seen(self: &Arc<Self>, name: &str, arguments: Option<Value>, key: Option<&str>) -> Called {
        let executed = Arc::new(AtomicBool::new(false));
        let outcome = self.call_marking(name, arguments, key, &executed).await;
        Called { outcome, executed: executed.load(Ordering::Acquire) }
    }

    async fn call_marking(
        self: &Arc<Self>,
        name: &str,
        arguments: Option<Value>,
        key: Option<&str>,
        executed: &Arc<AtomicBool>,
    ) -> std::result::Result<String, Refusal> {
        let Some(tool) = self.tools.get(name) else { return Err(Refusal::UnknownTool(name.to_owned())) };
        let arguments = match arguments {
            None | Some(Value::Null) => Value::Object(Default::default()),
            Some(object @ Value::Object(_)) => object,
            Some(_) => return Err(Refusal::BadArguments(format!("the arguments of {name:?} must be an object"))),
        };
        if let Some(key) = key {
            if key.is_empty() || key.len() > crate::limits::MAX_IDEMPOTENCY_KEY_BYTES {
                return Err(Refusal::BadArguments(format!(
                    "the idempotency key must be 1 to {} bytes",
                    crate::limits::MAX_IDEMPOTENCY_KEY_BYTES
                )));
            }
        }
        // Checked before anything runs or is recorded: a refused call is a model's mistake to correct.
        if let Some(check) = &tool.check {
            if let Err(why) = check(&arguments) {
                return Ok(error_result(&format!("Invalid arguments for tool {name}: {why}")));
            }
        }
        match (&self.calls.journal, key) {
            (Some(journal), Some(key)) => self.call_once(journal.clone(), name, arguments, key, executed).await,
            _ => self.execute(name, arguments, key, executed).await.map_err(Refusal::Failed),
        }
    }

    async fn call_once(
        self: &Arc<Self>,
        journal: Arc<dyn McpJournal>,
        name: &str,
        arguments: Value,
        key: &str,
        executed: &Arc<AtomicBool>,
    ) -> std::result::Result<String, Refusal> {
        let slot = (key.to_owned(), name.to_owned());
        let fingerprint = call_fingerprint(name, &arguments);
        loop {
            if let Some((recorded, result)) = self.calls.unrecorded.lock().get(&slot).cloned() {
                return if recorded == fingerprint { Ok(result) } else { Err(Refusal::KeyReused) };
            }
            if let Some(recorded) = journal.call_result(key, name).await.map_err(Refusal::Failed)? {
                return if recorded.matches(&fingerprint) { Ok(recorded.result) } else { Err(Refusal::KeyReused) };
            }
            let mut receiver = {
                let mut in_flight = self.calls.in_flight.lock();
                match in_flight.get(&slot) {
                    Some((running, _)) if *running != fingerprint => return Err(Refusal::KeyReused),
                    Some((_, receiver)) => receiver.clone(),
                    None => {
                        // A place in the bounded queue first: the task keeps the arguments until it runs.
                        let Ok(place) = self.calls.queue.clone().try_acquire_owned() else { return Err(Refusal::Busy) };
                        let (announce, receiver) = watch::channel(None);
                        in_flight.insert(slot.clone(), (fingerprint.clone(), receiver.clone()));
                        // The first: run it as a task of its own, so the side effect finishes whoever waits.
                        let leader = Leader { core: self.clone(), slot: slot.clone(), announce };
                        // This request leads: whether `execute` ran is told to it (a joiner's stays false).
                        let (journal, arguments, fingerprint, executed) =
                            (journal.clone(), arguments.clone(), fingerprint.clone(), executed.clone());
                        tokio::spawn(crate::telemetry::incoming::inherit(async move {
                            let _place = place;
                            let Ok(permit) = leader.core.calls.permits.clone().acquire_owned().await else {
                                return leader.announce(Err(McpError::Closed));
                            };
                            if leader.abandoned() {
                                return;
                            }
                            let outcome = leader
                                .core
                                .execute_and_record(&journal, &leader.slot, &fingerprint, arguments, permit, &executed)
                                .await;
                            leader.announce(outcome);
                        }));
                        receiver
                    }
                }
            };
            let outcome = match receiver.wait_for(Option::is_some).await {
                Ok(outcome) => outcome.clone().expect("waited for Some"),
                // The leader gave the call up because nobody waited for it any more: look again.
                Err(_) => continue,
            };
            return match outcome {
                Ok(Ok(result)) => Ok(result.to_string()),
                Ok(Err(KeyReused)) => Err(Refusal::KeyReused),
                Err(e) => Err(Refusal::Failed((*e).clone())),
            };
        }
    }

    /// The leader of a keyed call in this process: takes the call in the journal (waiting while another
    /// process runs it), runs it under a renewed lease, and records its result.
    async fn execute_and_record(
        &self,
        journal: &Arc<dyn McpJournal>,
        slot: &(String, String),
        fingerprint: &str,
        arguments: Value,
        permit: OwnedSemaphorePermit,
        executed: &AtomicBool,
    ) -> Result<Led> {
        let (key, name) = slot;
        let owner = self.calls.next_owner();
        let mut wait = Duration::from_millis(CALL_POLL_MIN_MS);
        loop {
            match journal.take_call(key, name, fingerprint, &owner, CALL_LEASE_MS).await? {
                CallSlot::Done(recorded) => {
                    return Ok(if recorded.matches(fingerprint) { Ok(recorded.result) } else { Err(KeyReused) })
                }
                CallSlot::Taken => break,
                CallSlot::Running => {
                    tokio::time::sleep(wait).await;
                    wait = (wait * 2).min(Duration::from_millis(CALL_POLL_MAX_MS));
                }
            }
        }
        let (lost, lease_lost) = tokio::sync::oneshot::channel::<String>();
        let _renewing = AbortOnDrop({
            let (journal, key, name, owner) = (journal.clone(), key.clone(), name.clone(), owner.clone());
            tokio::spawn(async move {
                loop {
                    tokio::time::sleep(Duration::from_millis(CALL_LEASE_MS / 3)).await;
                    // Not knowing the lease is still ours is losing it: another process may take the call
                    // over once it lapses, so this one must not go on as if it were the only one.
                    let why = match journal.renew_call(&key, &name, &owner, CALL_LEASE_MS).await {
                        Ok(true) => continue,
                        Ok(false) => "another process took the call over".to_owned(),
                        Err(e) => format!("renewing it failed: {e}"),
                    };
                    let _ = lost.send(why);
                    return;
                }
            })
            .abort_handle()
        });
        let outcome = self.execute_holding(permit, name, arguments, Some(key), Some(lease_lost), executed).await;
        drop(_renewing);
        match outcome {
            Ok(result) if !is_error_result(&result) => {
                // Another owner's record (had the lease lapsed) with other arguments is not this call's.
                let recorded = match self.finish_with_retries(journal, key, name, fingerprint, &owner, &result).await {
                    Some(recorded) => recorded,
                    None => return Ok(Ok(result)),
                };
                Ok(match recorded {
                    Some(recorded) if !recorded.matches(fingerprint) => Err(KeyReused),
                    Some(recorded) => Ok(recorded.result),
                    None => Ok(result),
                })
            }
            Ok(result) => {
                journal.finish_call(key, name, fingerprint, &owner, None).await?;
                Ok(Ok(result))
            }
            Err(e) => {
                let _ = journal.finish_call(key, name, fingerprint, &owner, None).await;
                Err(e)
            }
        }
    }

    /// Runs `execute` under the concurrency bound and shapes what it returned.
    async fn execute(&self, name: &str, arguments: Value, key: Option<&str>, executed: &AtomicBool) -> Result<String> {
        let permit = self.calls.permits.clone().acquire_owned().await.map_err(|_| McpError::Closed)?;
        self.execute_holding(permit, name, arguments, key, None, executed).await
    }

    /// Records a finished call's result, trying `FINISH_ATTEMPTS` times. If the journal still fails, the
    /// result is kept in memory (repeats here are answered from it) and offered to the journal in the
    /// background until it takes it: `None`.
    async fn finish_with_retries(
        &self,
        journal: &Arc<dyn McpJournal>,
        key: &str,
        name: &str,
        fingerprint: &str,
        owner: &str,
        result: &str,
    ) -> Option<Option<RecordedCall>> {
        for attempt in 1..=FINISH_ATTEMPTS {
            match journal.finish_call(key, name, fingerprint, owner, Some(result)).await {
                Ok(recorded) => return Some(recorded),
                Err(_) if attempt < FINISH_ATTEMPTS => {
                    tokio::time::sleep(Duration::from_millis(FINISH_RETRY_MS * u64::from(attempt))).await
                }
                Err(_) => {}
            }
        }
        let slot = (key.to_owned(), name.to_owned());
        self.calls.unrecorded.lock().insert(slot.clone(), (fingerprint.to_owned(), result.to_owned()));
        // The retry lives as long as this server: it holds the map weakly and ends once the server is gone.
        let (journal, unrecorded) = (journal.clone(), Arc::downgrade(&self.calls.unrecorded));
        let (fingerprint, owner, result) = (fingerprint.to_owned(), owner.to_owned(), result.to_owned());
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(Duration::from_millis(FINISH_BACKGROUND_RETRY_MS)).await;
                let Some(unrecorded) = unrecorded.upgrade() else { return };
                if journal.finish_call(&slot.0, &slot.1, &fingerprint, &owner, Some(&result)).await.is_ok() {
                    unrecorded.lock().remove(&slot);
                    return;
                }
            }
        });
        None
    }

    /// Runs `execute` in the slot `permit` holds. The slot is given back when the host's execution
    /// settles, not when this caller stops waiting: a client that hangs up (hyper then drops this
    /// future) does not free a slot while its JavaScript `execute` runs on.
    /// `lease_lost` (a keyed call's lease renewal) stops the execution: its outcome is then unknown.
    /// `executed` is set once the host is asked to run `execute` (and cleared when the host's own schema
    /// refused the arguments first: `execute` did not run).
    async fn execute_holding(
        &self,
        permit: OwnedSemaphorePermit,
        name: &str,
        arguments: Value,
        key: Option<&str>,
        lease_lost: Option<tokio::sync::oneshot::Receiver<String>>,
        executed: &AtomicBool,
    ) -> Result<String> {
        let mut request = serde_json::json!({ "arguments": arguments, "idempotencyKey": key }).to_string();
        // The caller's trace context, for the host's server span (`lib/telemetry.ts`).
        if let Some(trace) = crate::telemetry::incoming::current() {
            request.insert_str(1, &trace.members());
        }
        executed.store(true, Ordering::Release);
        let running = self.host.execute(name, request);
        // The host aborts `execute` at the timeout and answers `TimedOut`; past the margin the engine
        // stops waiting for it, so neither the slot nor a journal lease outlives timeout + margin.
        let timeout_ms = self.call_timeout_ms;
        let bound = Duration::from_millis(timeout_ms.saturating_add(crate::limits::SERVER_CALL_TIMEOUT_MARGIN_MS));
        let mut task = tokio::spawn(async move {
            let _permit = permit;
            tokio::time::timeout(bound, running).await.unwrap_or(Ok(Execution::TimedOut))
        });
        let joined = match lease_lost {
            None => task.await,
            Some(lease_lost) => tokio::select! {
                joined = &mut task => joined,
                Ok(why) = lease_lost => {
                    task.abort();
                    return Err(McpError::Storage(format!(
                        "the call to {name:?} was stopped and its {OUTCOME_UNKNOWN}: its lease in the journal was lost ({why}); it was not recorded"
                    )));
                }
            },
        };
        let execution = joined.map_err(|e| {
            McpError::Internal(format!(
                "the execute of {name:?} failed in the engine ({})",
                if e.is_panic() { "a panic" } else { "cancelled" }
            ))
        })??;
        let output_schema = self.tools.get(name).and_then(|t| t.spec.output_schema.as_ref()).is_some();
        Ok(match execution {
            Execution::Value(json) => value_result(&json, output_schema)?,
            Execution::Failed(message) => error_result(&message),
            Execution::Invalid(why) => {
                executed.store(false, Ordering::Release);
                error_result(&format!("Invalid arguments for tool {name}: {why}"))
            }
            Execution::TimedOut => return Err(McpError::Timeout { after_ms: timeout_ms }),
        })
    }
}

/// The task leading one keyed call in this process. However it ends — announced, given up, or a panic
/// — its `in_flight` entry goes; waiters are told, never left on a channel nobody will write.
struct Leader {
    core: Arc<McpServerCore>,
    slot: (String, String),
    announce: watch::Sender<Option<Shared>>,
}

impl Leader {
    fn announce(self, outcome: Result<Led>) {
        self.core.calls.in_flight.lock().remove(&self.slot);
        let _ = self.announce.send(Some(outcome.map(|led| led.map(Arc::from)).map_err(Arc::new)));
    }

    /// Nobody waits for the call any more (their clients left before it started): it is dropped
    /// unrun. Checked under the `in_flight` lock, under which a new waiter would subscribe.
    fn abandoned(&self) -> bool {
        let mut in_flight = self.core.calls.in_flight.lock();
        // The map's own receiver is the one left.
        let abandoned = self.announce.receiver_count() <= 1;
        if abandoned {
            in_flight.remove(&self.slot);
        }
        abandoned
    }
}

impl Drop for Leader {
    fn drop(&mut self) {
        if self.announce.borrow().is_none() {
            let mut in_flight = self.core.calls.in_flight.lock();
            if in_flight.get(&self.slot).is_some_and(|(_, receiver)| receiver.same_channel(&self.announce.subscribe()))
            {
                in_flight.remove(&self.slot);
            }
            drop(in_flight);
            let failed = McpError::Internal("the call ended in the engine without a result".to_owned());
            let _ = self.announce.send(Some(Err(Arc::new(failed))));
        }
    }
}

/// Aborts a task (the lease renewal) when dropped, however the call's run ends.
struct AbortOnDrop(tokio::task::AbortHandle);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

fn is_error_result(result: &str) -> bool {
    serde_json::from_str::<IsError>(result).is_ok_and(|r| r.is_error == Some(true))
}

#[derive(serde::Deserialize)]
struct IsError {
    #[serde(default, rename = "isError")]
    is_error: Option<bool>,
}

/// `{ content: [text], isError: true }` with the message, bounded.
pub(crate) fn error_result(message: &str) -> String {
    let mut message = message;
    if message.len() > MAX_TOOL_ERROR_MESSAGE_BYTES {
        let mut end = MAX_TOOL_ERROR_MESSAGE_BYTES;
        while !message.is_char_boundary(end) {
            end -= 1;
        }
        message = &message[..end];
    }
    serde_json::json!({ "content": [{ "type": "text", "text": message }], "isError": true }).to_string()
}

/// What `execute` returned as a `CallToolResult`: one with a `content` array passes as it is; any other
/// value becomes a text block (a string as itself, anything else as its JSON), and an object (or any
/// value, for a tool with an output schema) is also its `structuredContent`. A value nested deeper
/// than serde_json reads (128 levels) fails the call (`mcp_result_too_deep`), never becomes an empty
/// result recorded as a success.
pub(crate) fn value_result(json: &str, output_schema: bool) -> Result<String> {
    let value: Value = serde_json::from_str(json).map_err(|e| {
        if e.to_string().contains("recursion limit exceeded") {
            McpError::ResultTooDeep { max_depth: crate::limits::MAX_VALUE_DEPTH_LEVELS }
        } else {
            McpError::Internal(format!("the host's value is not JSON: {e}"))
        }
    })?;
    if let Value::Object(object) = &value {
        if object.get("content").is_some_and(Value::is_array) {
            return Ok(json.to_owned());
        }
    }
    let text = match &value {
        Value::String(text) => text.clone(),
        Value::Null => String::new(),
        other => other.to_string(),
    };
    let mut result = serde_json::json!({ "content": [{ "type": "text", "text": text }] });
    if value.is_object() || (output_schema && !value.is_null()) {
        result["structuredContent"] = value;
    }
    Ok(result.to_string())
}

#[cfg(test)]
mod tests {
    use super::super::testing;
    use super::*;
    use crate::store::journal::MemoryJournal;
    use std::sync::atomic::Ordering;

    fn journal() -> Option<Arc<dyn McpJournal>> {
        Some(Arc::new(MemoryJournal::new()))
    }

    #[tokio::test]
    async fn a_call_says_whether_this_request_ran_execute() {
        let (core, _) = testing::server(journal());
        let args = || Some(serde_json::json!({ "ms": 50 }));
        let (a, b) =
            tokio::join!(core.call_seen("slow", args(), Some("k-1")), core.call_seen("slow", args(), Some("k-1")));
        assert_eq!(a.outcome.unwrap(), b.outcome.unwrap());
        assert!(a.executed ^ b.executed, "the leader ran it, the other joined");
        assert!(!core.call_seen("slow", args(), Some("k-1")).await.executed, "a replay");
        assert!(core.call_seen("slow", args(), None).await.executed);
        assert!(!core.call_seen("strict", Some(serde_json::json!({})), None).await.executed, "refused by the schema");
        assert!(!core.call_seen("nope", None, None).await.executed);
    }

    #[tokio::test]
    async fn a_keyed_call_runs_once_even_when_two_arrive_together() {
        let (core, host) = testing::server(journal());
        let args = || Some(serde_json::json!({ "ms": 50 }));
        let (a, b) = tokio::join!(
            core.call("slow", args(), Some("order-1:call-7")),
            core.call("slow", args(), Some("order-1:call-7"))
        );
        assert_eq!(a.unwrap(), b.unwrap());
        assert_eq!(host.executions.load(Ordering::SeqCst), 1);
        let again = core.call("slow", args(), Some("order-1:call-7")).await.unwrap();
        assert!(again.contains("\"executions\":1"), "{again}");
        assert_eq!(host.executions.load(Ordering::SeqCst), 1, "the recorded result, not a second charge");
        core.call("slow", args(), Some("order-1:call-8")).await.unwrap();
        assert_eq!(host.executions.load(Ordering::SeqCst), 2, "another key runs");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn two_servers_sharing_a_sqlite_journal_run_a_key_once() {
        use crate::store::journal_sqlite::SqliteJournal;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("journal.db");
        // Two handles on one file, as two processes would have.
        let (a, host_a) = testing::server(Some(Arc::new(SqliteJournal::open_lazily(&path))));
        let (b, host_b) = testing::server(Some(Arc::new(SqliteJournal::open_lazily(&path))));
        let args = || Some(serde_json::json!({ "ms": 200 }));
        let (x, y) = tokio::join!(
            a.call("slow", args(), Some("order-2:call-1")),
            b.call("slow", args(), Some("order-2:call-1"))
        );
        assert_eq!(x.unwrap(), y.unwrap(), "the second server waited and read the first one's result");
        assert_eq!(host_a.executions.load(Ordering::SeqCst) + host_b.executions.load(Ordering::SeqCst), 1);
    }

    #[tokio::test]
    async fn without_a_journal_or_a_key_every_call_runs() {
        let (core, host) = testing::server(None);
        core.call("slow", None, Some("k")).await.unwrap();
        core.call("slow", None, Some("k")).await.unwrap();
        let (core2, host2) = testing::server(journal());
        core2.call("slow", None, None).await.unwrap();
        core2.call("slow", None, None).await.unwrap();
        assert_eq!((host.executions.load(Ordering::SeqCst), host2.executions.load(Ordering::SeqCst)), (2, 2));
    }

    #[tokio::test]
    async fn failures_are_error_results_and_are_not_recorded() {
        let journal = Arc::new(MemoryJournal::new());
        let (core, _) = testing::server(Some(journal.clone()));
        let result: Value = serde_json::from_str(&core.call("boom", None, Some("k")).await.unwrap()).unwrap();
        assert_eq!(result["isError"], true);
        assert_eq!(result["content"][0]["text"], "the card was declined");
        assert_eq!(journal.call_result("k", "boom").await.unwrap(), None);
    }

    #[tokio::test]
    async fn bad_calls_are_refused_before_execute() {
        let (core, host) = testing::server(journal());
        assert!(matches!(core.call("nope", None, None).await, Err(Refusal::UnknownTool(_))));
        assert!(matches!(core.call("echo", Some(serde_json::json!([1])), None).await, Err(Refusal::BadArguments(_))));
        let invalid: Value =
            serde_json::from_str(&core.call("strict", Some(serde_json::json!({})), Some("k")).await.unwrap()).unwrap();
        assert_eq!(invalid["isError"], true);
        assert!(invalid["content"][0]["text"].as_str().unwrap().contains("missing x"));
        assert_eq!(host.executions.load(Ordering::SeqCst), 0);
    }

    // ---- review-server: findings as failing tests ----

    /// Clients that send a keyed call and hang up while every permit is busy: each call's leader is a
    /// detached task that keeps its arguments and waits for a permit, with nothing bounding how many.
    #[tokio::test]
    async fn keyed_calls_abandoned_behind_the_bound_do_not_pile_up() {
        let (core, _) = testing::server(journal());
        let mut busy = Vec::new();
        for i in 0..MAX_CONCURRENT_SERVER_CALLS {
            let core = core.clone();
            busy.push(tokio::spawn(async move {
                core.call("slow", Some(serde_json::json!({ "ms": 5_000 })), Some(&format!("busy-{i}"))).await.is_ok()
            }));
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
        for i in 0..1_000 {
            // The client hangs up: its request future is dropped.
            let _ = tokio::time::timeout(
                Duration::from_millis(1),
                core.call(
                    "slow",
                    Some(serde_json::json!({ "ms": 0, "pad": "x".repeat(10_000) })),
                    Some(&format!("gone-{i}")),
                ),
            )
            .await;
        }
        let held = core.calls.in_flight.lock().len();
        assert!(
            held <= 2 * MAX_CONCURRENT_SERVER_CALLS,
            "{held} keyed calls (and their arguments) held for clients that left"
        );
    }

    /// A key reused with other arguments is answered with the first call's result: a client (or a second
    /// client that knows or guesses the key) asking to charge 1 gets the receipt of the 5000 charge.
    #[tokio::test]
    async fn a_key_reused_with_other_arguments_is_not_answered_with_the_first_result() {
        let (core, _) = testing::server(journal());
        let first =
            core.call("echo", Some(serde_json::json!({ "amount": 5000 })), Some("order-9:call-1")).await.unwrap();
        let second = core.call("echo", Some(serde_json::json!({ "amount": 1 })), Some("order-9:call-1")).await;
        if let Ok(second) = &second {
            assert_ne!(second, &first, "the second call (amount 1) was answered with the first call's result");
        }
        assert!(matches!(second, Err(Refusal::KeyReused)), "{second:?}");
        // The same arguments (in another key order) still get the recorded result.
        let again = core
            .call("echo", Some(serde_json::from_str(r#"{"amount":5000}"#).unwrap()), Some("order-9:call-1"))
            .await
            .unwrap();
        assert_eq!(again, first);
        // While the first call runs, a second with other arguments is refused too, not made to wait for it.
        let (a, b) = tokio::join!(
            core.call("slow", Some(serde_json::json!({ "ms": 100 })), Some("order-9:call-2")),
            core.call("slow", Some(serde_json::json!({ "ms": 1 })), Some("order-9:call-2"))
        );
        assert!(a.is_ok() && matches!(b, Err(Refusal::KeyReused)), "{b:?}");
    }

    /// The leader task's panic is anticipated (`Err(_) => continue`), but its `in_flight` entry is never
    /// removed: every waiter loops on a closed channel for ever (and the lease renewer is never aborted).
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_keyed_call_whose_execute_panics_fails_instead_of_spinning() {
        let (core, _) = testing::server(journal());
        let called = tokio::time::timeout(
            Duration::from_secs(3),
            core.call("echo", Some(serde_json::json!({ "panic": true })), Some("k-panic")),
        )
        .await;
        assert!(
            matches!(called, Ok(Err(Refusal::Failed(_)))),
            "the call did not end within 3 s: {:?}",
            called.map(|r| r.map_err(|e| format!("{e:?}")))
        );
        assert!(core.calls.in_flight.lock().is_empty(), "a stale in-flight entry is left for the key");
    }

    /// The 64-call bound counts only calls someone still awaits. An unkeyed call whose client hangs up
    /// (hyper drops the request future on EOF) gives its permit back at once, but a JavaScript `execute`
    /// cannot be cancelled and keeps running: hang-ups run any number of executions at once.
    #[tokio::test]
    async fn hang_ups_do_not_lift_the_concurrency_bound() {
        use futures_util::future::BoxFuture;
        use std::sync::atomic::AtomicUsize;
        struct Detached {
            running: Arc<AtomicUsize>,
            most: Arc<AtomicUsize>,
        }
        impl super::super::ToolHost for Detached {
            fn execute(&self, _tool: &str, _request: String) -> BoxFuture<'static, Result<Execution>> {
                let (running, most) = (self.running.clone(), self.most.clone());
                // As a JavaScript promise does: the work goes on whether or not anyone awaits it.
                let work = tokio::spawn(async move {
                    let now = running.fetch_add(1, Ordering::SeqCst) + 1;
                    most.fetch_max(now, Ordering::SeqCst);
                    tokio::time::sleep(Duration::from_millis(500)).await;
                    running.fetch_sub(1, Ordering::SeqCst);
                });
                Box::pin(async move {
                    let _ = work.await;
                    Ok(Execution::Value("null".into()))
                })
            }
        }
        let most = Arc::new(AtomicUsize::new(0));
        let host = Detached { running: Arc::new(AtomicUsize::new(0)), most: most.clone() };
        let spec = serde_json::json!({ "tools": [{ "name": "work" }] }).to_string();
        let core = McpServerCore::new(&spec, Arc::new(host), None, &|_| None).unwrap();
        for _ in 0..300 {
            let _ = tokio::time::timeout(Duration::from_millis(1), core.call("work", None, None)).await;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
        let most = most.load(Ordering::SeqCst);
        assert!(
            most <= MAX_CONCURRENT_SERVER_CALLS,
            "{most} executions ran at once (the bound is {MAX_CONCURRENT_SERVER_CALLS})"
        );
    }

    /// A live owner whose renewals fail (SQLite busy past BUSY_TIMEOUT on each tick, a stalled blocking
    /// pool, a suspended process) cannot know its lease still holds: it stops its run at the first failed
    /// renewal and answers that the outcome is unknown, without recording anything, so the process that
    /// takes the call over once the lease lapses is the only one to run it.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_live_owner_whose_renewals_fail_stops_instead_of_running_beside_its_successor() {
        use crate::store::journal::RecordedCall;
        use futures_util::future::BoxFuture;
        struct NoRenewal(MemoryJournal);
        impl McpJournal for NoRenewal {
            fn claim(&self, key: &str, value: &str) -> BoxFuture<'_, Result<String>> {
                self.0.claim(key, value)
            }
            fn get(&self, key: &str) -> BoxFuture<'_, Result<Option<String>>> {
                self.0.get(key)
            }
            fn reserve(&self, run_id: &str, counter: &str, limit: u64) -> BoxFuture<'_, Result<Option<u64>>> {
                self.0.reserve(run_id, counter, limit)
            }
            fn release(&self, run_id: &str, counter: &str) -> BoxFuture<'_, Result<()>> {
                self.0.release(run_id, counter)
            }
            fn count(&self, run_id: &str, counter: &str) -> BoxFuture<'_, Result<u64>> {
                self.0.count(run_id, counter)
            }
            fn call_result(&self, key: &str, tool: &str) -> BoxFuture<'_, Result<Option<RecordedCall>>> {
                self.0.call_result(key, tool)
            }
            fn take_call(
                &self,
                key: &str,
                tool: &str,
                fingerprint: &str,
                owner: &str,
                lease_ms: u64,
            ) -> BoxFuture<'_, Result<CallSlot>> {
                self.0.take_call(key, tool, fingerprint, owner, lease_ms)
            }
            fn renew_call(&self, _: &str, _: &str, _: &str, _: u64) -> BoxFuture<'_, Result<bool>> {
                Box::pin(async { Err(McpError::Storage("store: SQLite: database is locked".into())) })
            }
            fn finish_call(
                &self,
                key: &str,
                tool: &str,
                fingerprint: &str,
                owner: &str,
                result: Option<&str>,
            ) -> BoxFuture<'_, Result<Option<RecordedCall>>> {
                self.0.finish_call(key, tool, fingerprint, owner, result)
            }
        }
        let shared: Arc<dyn McpJournal> = Arc::new(NoRenewal(MemoryJournal::new()));
        let (a, host_a) = testing::server(Some(shared.clone()));
        let (b, host_b) = testing::server(Some(shared.clone()));
        let first = tokio::spawn(async move {
            a.call("slow", Some(serde_json::json!({ "ms": CALL_LEASE_MS + 1_000 })), Some("order-5:call-1")).await
        });
        tokio::time::sleep(Duration::from_millis(200)).await;
        // The successor's renewals would fail too: its run is shorter than a renewal tick.
        let second = b.call("slow", Some(serde_json::json!({ "ms": 0 })), Some("order-5:call-1")).await;
        let first = first.await.unwrap();
        assert!(
            matches!(&first, Err(Refusal::Failed(McpError::Storage(m))) if m.contains("outcome is unknown")),
            "{first:?}"
        );
        assert!(second.is_ok(), "{second:?}");
        tokio::time::sleep(Duration::from_millis(CALL_LEASE_MS + 1_500)).await;
        let executions = host_a.executions.load(Ordering::SeqCst) + host_b.executions.load(Ordering::SeqCst);
        assert_eq!(executions, 1, "the call ran in both processes while its first owner was alive");
        assert_eq!(
            shared.call_result("order-5:call-1", "slow").await.unwrap().map(|r| r.result),
            second.ok(),
            "the successor's result is the one recorded"
        );
    }

    /// A value nested deeper than serde_json's 128 levels fails the call with a typed error, instead of
    /// becoming an empty text result recorded as a success.
    #[test]
    fn a_deep_value_is_not_silently_emptied() {
        let deep = format!("{}1{}", "{\"a\":".repeat(200), "}".repeat(200));
        let shaped = value_result(&deep, false);
        assert!(matches!(shaped, Err(McpError::ResultTooDeep { .. })), "{shaped:?}");
    }

    /// An execute that never settles fails the call with `mcp_timeout` after `callTimeoutMs` (plus the
    /// margin the host gets to answer), and gives its slot back.
    #[tokio::test]
    async fn an_execute_that_never_settles_times_out_and_frees_its_slot() {
        let host = Arc::new(testing::Host { executions: Default::default(), served: Default::default() });
        let spec = serde_json::json!({ "tools": [{ "name": "slow" }], "callTimeoutMs": 20 }).to_string();
        let core = McpServerCore::new(&spec, Arc::new(host), Some(Arc::new(MemoryJournal::new())), &|_| None).unwrap();
        let called = core.call("slow", Some(serde_json::json!({ "ms": 3_600_000 })), Some("k-timeout")).await;
        assert!(matches!(called, Err(Refusal::Failed(McpError::Timeout { after_ms: 20 }))), "{called:?}");
        assert_eq!(core.calls.permits.available_permits(), MAX_CONCURRENT_SERVER_CALLS, "the slot is given back");
        assert!(core.calls.in_flight.lock().is_empty());
        let refused = McpServerCore::new(
            &serde_json::json!({ "tools": [], "callTimeoutMs": 0 }).to_string(),
            Arc::new(testing::server(None).1),
            None,
            &|_| None,
        );
        assert_eq!(refused.err().map(|e| e.code()), Some("mcp_config_invalid"));
    }

    #[test]
    fn values_become_call_results() {
        let shaped =
            |json: &str, output: bool| serde_json::from_str::<Value>(&value_result(json, output).unwrap()).unwrap();
        assert_eq!(shaped(r#""hi""#, false), serde_json::json!({ "content": [{ "type": "text", "text": "hi" }] }));
        assert_eq!(shaped(r#"{"a":1}"#, false)["structuredContent"], serde_json::json!({ "a": 1 }));
        assert_eq!(shaped("3", true)["structuredContent"], 3);
        assert!(shaped("3", false).get("structuredContent").is_none());
        let passed = r#"{"content":[{"type":"text","text":"x"}],"isError":true}"#;
        assert_eq!(value_result(passed, false).unwrap(), passed);
        assert!(error_result(&"é".repeat(MAX_TOOL_ERROR_MESSAGE_BYTES)).len() < MAX_TOOL_ERROR_MESSAGE_BYTES + 100);
    }
}
