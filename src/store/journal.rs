//! The firewall's journal: what every worker and every resume of a run must agree on. Claims are
//! first-writer-wins for ever (a tool's pinned hash of description + input schema); per-run counters
//! hold the slots of a tool's calls in a run (`maxCallsPerRun`), reserved before a call in one atomic
//! step and given back when the call fails. Built-ins: memory (one process) and SQLite (one file shared
//! by processes, `journal_sqlite.rs`); JavaScript journals implement the same five operations.

use crate::error::Result;
use futures_util::future::BoxFuture;
use parking_lot::Mutex;
use std::collections::HashMap;
use std::future::ready;

pub trait McpJournal: Send + Sync {
    /// Records `value` under `key` unless something is recorded there already; the recorded value either way.
    fn claim(&self, key: &str, value: &str) -> BoxFuture<'_, Result<String>>;
    fn get(&self, key: &str) -> BoxFuture<'_, Result<Option<String>>>;
    /// Takes one slot of `counter` in `run_id` if fewer than `limit` are taken: the new count, or `None` at the ceiling.
    fn reserve(&self, run_id: &str, counter: &str, limit: u64) -> BoxFuture<'_, Result<Option<u64>>>;
    /// Gives one slot back (a reserved call that did not succeed); never below zero.
    fn release(&self, run_id: &str, counter: &str) -> BoxFuture<'_, Result<()>>;
    fn count(&self, run_id: &str, counter: &str) -> BoxFuture<'_, Result<u64>>;

    /// `createMcpServer`'s exactly-once: the result recorded for `tool` called with idempotency key `key`,
    /// with the fingerprint of the arguments it ran with. Journals without a table of their own keep it
    /// as a claim under `__mcp_call__:<tool>:<key>` (the value: [`claim_value`]).
    fn call_result(&self, key: &str, tool: &str) -> BoxFuture<'_, Result<Option<RecordedCall>>> {
        let claim_key = call_claim_key(key, tool);
        Box::pin(async move { Ok(self.get(&claim_key).await?.map(|value| RecordedCall::from_claim(&value))) })
    }
    /// Takes the call (`key`, `tool`) for `owner` for `lease_ms`, unless its result is recorded or another
    /// owner's lease on it is still running. The built-ins share this across processes; a journal that
    /// keeps results as claims answers only `Taken` or `Done` (exactly-once within one process).
    /// `fingerprint` is the call's [`call_fingerprint`], kept with it.
    fn take_call(
        &self,
        key: &str,
        tool: &str,
        _fingerprint: &str,
        _owner: &str,
        _lease_ms: u64,
    ) -> BoxFuture<'_, Result<CallSlot>> {
        let found = self.call_result(key, tool);
        Box::pin(async move { Ok(found.await?.map_or(CallSlot::Taken, CallSlot::Done)) })
    }
    /// Extends `owner`'s lease on a call it is still running: `false` if the call is no longer its own
    /// (the lease lapsed and another owner took it, or it is gone).
    fn renew_call(&self, _key: &str, _tool: &str, _owner: &str, _lease_ms: u64) -> BoxFuture<'_, Result<bool>> {
        Box::pin(ready(Ok(true)))
    }
    /// Ends `owner`'s run of a call: `Some(result)` records it (first writer wins: the recorded result is
    /// returned), `None` gives the call up (it failed; a retry runs it again).
    fn finish_call(
        &self,
        key: &str,
        tool: &str,
        fingerprint: &str,
        _owner: &str,
        result: Option<&str>,
    ) -> BoxFuture<'_, Result<Option<RecordedCall>>> {
        let (claim_key, value) = (call_claim_key(key, tool), result.map(|result| claim_value(fingerprint, result)));
        Box::pin(async move {
            match value {
                Some(value) => {
                    self.claim(&claim_key, &value).await.map(|recorded| Some(RecordedCall::from_claim(&recorded)))
                }
                None => Ok(None),
            }
        })
    }
}

/// A recorded call: its `CallToolResult` JSON, and the fingerprint of the call that recorded it
/// (`None`: recorded before fingerprints were kept, so any arguments match).
#[derive(Debug, Clone, PartialEq)]
pub struct RecordedCall {
    pub result: String,
    pub fingerprint: Option<String>,
}

impl RecordedCall {
    pub fn new(result: &str, fingerprint: &str) -> Self {
        RecordedCall { result: result.to_owned(), fingerprint: Some(fingerprint.to_owned()) }
    }

    /// A claim's value: `{"argumentsSha256", "result"}`, or (written before fingerprints) the result alone.
    fn from_claim(value: &str) -> Self {
        #[derive(serde::Deserialize)]
        #[serde(deny_unknown_fields)]
        struct Claimed<'a> {
            #[serde(rename = "argumentsSha256")]
            fingerprint: String,
            #[serde(borrow)]
            result: &'a serde_json::value::RawValue,
        }
        match serde_json::from_str::<Claimed>(value) {
            Ok(claimed) => {
                RecordedCall { result: claimed.result.get().to_owned(), fingerprint: Some(claimed.fingerprint) }
            }
            Err(_) => RecordedCall { result: value.to_owned(), fingerprint: None },
        }
    }

    /// Whether this record answers a call with `fingerprint`.
    pub fn matches(&self, fingerprint: &str) -> bool {
        self.fingerprint.as_deref().is_none_or(|f| f == fingerprint)
    }
}

/// A recorded call as a claim's value (Postgres and JavaScript journals).
pub fn claim_value(fingerprint: &str, result: &str) -> String {
    let mut value = String::from("{\"argumentsSha256\":");
    crate::protocol::jsonrpc::push_json_string(&mut value, fingerprint);
    value.push_str(",\"result\":");
    value.push_str(result);
    value.push('}');
    value
}

/// What identifies a keyed call besides its key: SHA-256 (hex) of the tool's name and its arguments'
/// canonical JSON (serde_json's maps are sorted by key). A key used again with other arguments or another
/// tool is a different call, refused rather than answered with the first one's result.
pub fn call_fingerprint(tool: &str, arguments: &serde_json::Value) -> String {
    let mut context = ring::digest::Context::new(&ring::digest::SHA256);
    context.update(tool.as_bytes());
    context.update(&[0]);
    context.update(arguments.to_string().as_bytes());
    context.finish().as_ref().iter().map(|b| format!("{b:02x}")).collect()
}

/// What [`McpJournal::take_call`] found.
#[derive(Debug, Clone, PartialEq)]
pub enum CallSlot {
    /// The caller owns the call now: run it, then `finish_call`.
    Taken,
    /// Recorded: the result.
    Done(RecordedCall),
    /// Another owner is running it under a live lease: ask again later.
    Running,
}

/// Where a journal with no call-results table of its own (Postgres, a JavaScript one) keeps a recorded
/// call result: a claim, first writer wins like the table's primary key.
pub fn call_claim_key(key: &str, tool: &str) -> String {
    format!("__mcp_call__:{tool}:{key}")
}

/// One call in the memory journal.
#[derive(Debug, Clone)]
enum CallState {
    Running { owner: String, lease_until_ms: i64 },
    Done(RecordedCall),
}

#[derive(Default)]
pub struct MemoryJournal {
    claims: Mutex<HashMap<String, String>>,
    counters: Mutex<HashMap<(String, String), u64>>,
    /// Calls by (idempotency key, tool): running under a lease, or done with their result.
    calls: Mutex<HashMap<(String, String), CallState>>,
}

impl MemoryJournal {
    pub fn new() -> Self {
        Self::default()
    }
}

impl McpJournal for MemoryJournal {
    fn claim(&self, key: &str, value: &str) -> BoxFuture<'_, Result<String>> {
        let winner = self.claims.lock().entry(key.to_owned()).or_insert_with(|| value.to_owned()).clone();
        Box::pin(ready(Ok(winner)))
    }

    fn get(&self, key: &str) -> BoxFuture<'_, Result<Option<String>>> {
        Box::pin(ready(Ok(self.claims.lock().get(key).cloned())))
    }

    fn reserve(&self, run_id: &str, counter: &str, limit: u64) -> BoxFuture<'_, Result<Option<u64>>> {
        let mut counters = self.counters.lock();
        let count = counters.entry((run_id.to_owned(), counter.to_owned())).or_insert(0);
        let reserved = (*count < limit).then(|| {
            *count += 1;
            *count
        });
        Box::pin(ready(Ok(reserved)))
    }

    fn release(&self, run_id: &str, counter: &str) -> BoxFuture<'_, Result<()>> {
        if let Some(count) = self.counters.lock().get_mut(&(run_id.to_owned(), counter.to_owned())) {
            *count = count.saturating_sub(1);
        }
        Box::pin(ready(Ok(())))
    }

    fn count(&self, run_id: &str, counter: &str) -> BoxFuture<'_, Result<u64>> {
        Box::pin(ready(Ok(self.counters.lock().get(&(run_id.to_owned(), counter.to_owned())).copied().unwrap_or(0))))
    }

    fn call_result(&self, key: &str, tool: &str) -> BoxFuture<'_, Result<Option<RecordedCall>>> {
        let done = match self.calls.lock().get(&(key.to_owned(), tool.to_owned())) {
            Some(CallState::Done(result)) => Some(result.clone()),
            _ => None,
        };
        Box::pin(ready(Ok(done)))
    }

    fn take_call(
        &self,
        key: &str,
        tool: &str,
        _fingerprint: &str,
        owner: &str,
        lease_ms: u64,
    ) -> BoxFuture<'_, Result<CallSlot>> {
        let now = super::now_ms();
        let mut calls = self.calls.lock();
        let slot = calls
            .entry((key.to_owned(), tool.to_owned()))
            .or_insert_with(|| CallState::Running { owner: String::new(), lease_until_ms: i64::MIN });
        let taken = match slot {
            CallState::Done(result) => CallSlot::Done(result.clone()),
            CallState::Running { lease_until_ms, .. } if *lease_until_ms >= now => CallSlot::Running,
            CallState::Running { .. } => {
                *slot =
                    CallState::Running { owner: owner.to_owned(), lease_until_ms: now.saturating_add(lease_ms as i64) };
                CallSlot::Taken
            }
        };
        Box::pin(ready(Ok(taken)))
    }

    fn renew_call(&self, key: &str, tool: &str, owner: &str, lease_ms: u64) -> BoxFuture<'_, Result<bool>> {
        let mut renewed = false;
        if let Some(CallState::Running { owner: holder, lease_until_ms }) =
            self.calls.lock().get_mut(&(key.to_owned(), tool.to_owned()))
        {
            if holder == owner {
                *lease_until_ms = super::now_ms().saturating_add(lease_ms as i64);
                renewed = true;
            }
        }
        Box::pin(ready(Ok(renewed)))
    }

    fn finish_call(
        &self,
        key: &str,
        tool: &str,
        fingerprint: &str,
        owner: &str,
        result: Option<&str>,
    ) -> BoxFuture<'_, Result<Option<RecordedCall>>> {
        let mut calls = self.calls.lock();
        let slot = (key.to_owned(), tool.to_owned());
        let ours = matches!(calls.get(&slot), Some(CallState::Running { owner: holder, .. }) if holder == owner);
        let recorded = match (result, ours) {
            (Some(result), true) => {
                let recorded = RecordedCall::new(result, fingerprint);
                calls.insert(slot, CallState::Done(recorded.clone()));
                Some(recorded)
            }
            (None, true) => {
                calls.remove(&slot);
                None
            }
            // Taken over meanwhile: whatever is recorded now (or ours, if nothing is yet).
            (result, false) => match calls.get(&slot) {
                Some(CallState::Done(recorded)) => Some(recorded.clone()),
                _ => result.map(|result| RecordedCall::new(result, fingerprint)),
            },
        };
        Box::pin(ready(Ok(recorded)))
    }
}

#[cfg(test)]
pub(crate) mod contract {
    //! What every journal must do; run against each built-in.
    use super::McpJournal;

    pub async fn claims_are_first_writer_wins(journal: &dyn McpJournal) {
        assert_eq!(journal.get("__mcp_pin__:s:t").await.unwrap(), None);
        assert_eq!(journal.claim("__mcp_pin__:s:t", "first").await.unwrap(), "first");
        assert_eq!(journal.claim("__mcp_pin__:s:t", "second").await.unwrap(), "first");
        assert_eq!(journal.get("__mcp_pin__:s:t").await.unwrap().as_deref(), Some("first"));
    }

    pub async fn counters_stop_at_the_limit_and_give_back(journal: &dyn McpJournal) {
        assert_eq!(journal.reserve("run", "s:t", 2).await.unwrap(), Some(1));
        assert_eq!(journal.reserve("run", "s:t", 2).await.unwrap(), Some(2));
        assert_eq!(journal.reserve("run", "s:t", 2).await.unwrap(), None, "the ceiling");
        assert_eq!(journal.reserve("other-run", "s:t", 2).await.unwrap(), Some(1), "per run");
        journal.release("run", "s:t").await.unwrap();
        assert_eq!(journal.count("run", "s:t").await.unwrap(), 1);
        journal.release("run", "s:t").await.unwrap();
        journal.release("run", "s:t").await.unwrap();
        assert_eq!(journal.count("run", "s:t").await.unwrap(), 0, "never below zero");
        assert_eq!(journal.count("nobody", "s:t").await.unwrap(), 0);
    }

    /// Two owners (two processes) and one call: one runs it, the other waits, then reads its result.
    pub async fn calls_are_taken_once_and_recorded(journal: &dyn McpJournal) {
        use super::{CallSlot, RecordedCall};
        let done = |result: &str| RecordedCall::new(result, "f");
        let (key, tool) = ("order-1:call-7", "charge");
        assert_eq!(journal.call_result(key, tool).await.unwrap(), None);
        assert_eq!(journal.take_call(key, tool, "f", "a", 60_000).await.unwrap(), CallSlot::Taken);
        assert_eq!(
            journal.take_call(key, tool, "f", "b", 60_000).await.unwrap(),
            CallSlot::Running,
            "a's lease is live"
        );
        assert!(journal.renew_call(key, tool, "a", 60_000).await.unwrap());
        assert!(!journal.renew_call(key, tool, "b", 60_000).await.unwrap(), "not b's to renew");
        assert_eq!(journal.finish_call(key, tool, "f", "a", Some("{\"a\":1}")).await.unwrap(), Some(done("{\"a\":1}")));
        assert_eq!(journal.take_call(key, tool, "f", "b", 60_000).await.unwrap(), CallSlot::Done(done("{\"a\":1}")));
        assert_eq!(
            journal.call_result(key, tool).await.unwrap(),
            Some(done("{\"a\":1}")),
            "kept with its arguments' fingerprint"
        );
        assert_eq!(journal.call_result(key, "refund").await.unwrap(), None, "per tool");
        // A failed run gives the call up; a lapsed lease (its owner died) may be taken over.
        assert_eq!(journal.take_call("k2", tool, "f", "a", 60_000).await.unwrap(), CallSlot::Taken);
        assert_eq!(journal.finish_call("k2", tool, "f", "a", None).await.unwrap(), None);
        assert_eq!(journal.take_call("k2", tool, "f", "b", 0).await.unwrap(), CallSlot::Taken);
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
        assert_eq!(journal.take_call("k2", tool, "f", "c", 60_000).await.unwrap(), CallSlot::Taken, "b's lease lapsed");
        assert!(
            !journal.renew_call("k2", tool, "b", 60_000).await.unwrap(),
            "b's renewal tells it the call was taken over"
        );
        assert_eq!(
            journal.finish_call("k2", tool, "f", "b", Some("{\"late\":1}")).await.unwrap(),
            Some(done("{\"late\":1}")),
            "b lost it: nothing recorded yet"
        );
        assert_eq!(journal.finish_call("k2", tool, "f", "c", Some("{}")).await.unwrap(), Some(done("{}")));
        assert_eq!(journal.call_result("k2", tool).await.unwrap(), Some(done("{}")));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn the_memory_journal_keeps_the_contract() {
        contract::claims_are_first_writer_wins(&MemoryJournal::new()).await;
        contract::counters_stop_at_the_limit_and_give_back(&MemoryJournal::new()).await;
        contract::calls_are_taken_once_and_recorded(&MemoryJournal::new()).await;
    }
}
