//! The two formats that cross on the hot path, one crossing each way per burst of calls.
//!
//! Calls go in as one string, one call per line: `callId \t abortId \t name \t contextJson \t
//! argumentsJson` (names are provider-safe and compact JSON has no raw tabs or newlines; `contextJson`,
//! the call's `{ runId, toolCallId, idempotencyKey }`, is empty when it has none). An `abortId` ending in
//! `p` (`0p`, `7p`) marks a call whose caller listens to its progress. Outcomes come back as a JSON
//! array of `[callId, errorCode, resultOrMessage, properties?, report?]` (`errorCode` empty on success;
//! the result is the server's JSON, embedded verbatim, never re-serialized; `properties`, on some
//! failures, are the JS error's extra fields such as `{"sent":true}`, see `McpError::js_properties`, and
//! `null` when a report follows; a measured call's outcome has the engine's report of it fifth:
//! `crate::telemetry::CallReport`); progress updates of listening calls come in
//! the same array, before the outcomes, as `[callId, "progress", {progress, total?, message?}]`.

use crate::error::{McpError, Result};
use crate::toolset::{CallRequest, CallSink};
use napi::bindgen_prelude::*;
use napi::threadsafe_function::{ThreadsafeFunction, ThreadsafeFunctionCallMode};
use parking_lot::Mutex;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Weak};
use std::time::Duration;

/// See [`crate::limits::MIN_PROGRESS_INTERVAL_MS`].
const PROGRESS_INTERVAL: Duration = Duration::from_millis(crate::limits::MIN_PROGRESS_INTERVAL_MS);

/// Parses a call batch. A malformed line fails the whole batch: it can only come from a broken caller.
pub(crate) fn parse_calls(batch: &str) -> Result<Vec<CallRequest>> {
    let mut calls = Vec::new();
    for line in batch.split('\n').filter(|l| !l.is_empty()) {
        let mut fields = line.splitn(5, '\t');
        let (Some(call_id), Some(abort_id), Some(name), Some(context), Some(arguments)) =
            (fields.next(), fields.next(), fields.next(), fields.next(), fields.next())
        else {
            return Err(McpError::InvalidArguments("malformed call batch".to_owned()));
        };
        let call_id = call_id.parse().map_err(|_| McpError::InvalidArguments("malformed call id".to_owned()))?;
        let (abort_id, progress) = match abort_id.strip_suffix('p') {
            Some(abort_id) => (abort_id, true),
            None => (abort_id, false),
        };
        let abort_id = abort_id.parse().map_err(|_| McpError::InvalidArguments("malformed abort id".to_owned()))?;
        let call = CallRequest::new(call_id, abort_id, name.to_owned(), arguments.to_owned());
        let call = if context.is_empty() { call } else { call.with_context(context) };
        calls.push(if progress { call.with_progress() } else { call });
    }
    Ok(calls)
}

/// No payload: it only says "drain now". Weak: pending calls keep the process alive from JS instead.
pub(crate) type CompletionWake = ThreadsafeFunction<(), (), (), Status, false, true>;

/// Call outcomes wait here until JavaScript drains them. The first one after a drain sends a single
/// wake-up through a threadsafe function; a burst of outcomes costs one crossing, not one each.
///
/// Progress updates of listening calls wait here too, coalesced: one per call, the latest replacing the
/// one before it until the drain, so a server flooding progress grows nothing (and costs at most one
/// wake-up per drain, like outcomes). They drain before the outcomes, so a call's last update reaches its
/// caller before its result does.
///
/// And paced, per call: one update is delivered at once, then none for
/// [`crate::limits::MIN_PROGRESS_INTERVAL_MS`]; the latest one within that time is held, delivered when
/// it ends (a timer on the engine runtime), or put in ahead of the call's outcome when that comes first.
pub(crate) struct Completions {
    batch: Mutex<Batch>,
    /// For the pacing timers, which must not keep the sink alive.
    this: Weak<Completions>,
    /// The pacing timers' owner: they are tracked here and end when the sink does (see `Drop`).
    timers: tokio_util::task::TaskTracker,
    timers_stop: tokio_util::sync::CancellationToken,
    wake: CompletionWake,
    /// Set while JavaScript feeds stdout synchronously: it drains right after, so no wake-up is needed.
    feeding: AtomicBool,
}

#[derive(Default)]
struct Batch {
    /// `[` and the outcomes so far, comma-separated; empty when there are none.
    outcomes: String,
    /// The latest update of each listening call since the last drain, as JSON.
    progress: HashMap<u32, String>,
    /// Calls within their progress interval: the update held for its end, if any.
    paced: HashMap<u32, Option<String>>,
}

impl Batch {
    fn is_empty(&self) -> bool {
        self.outcomes.is_empty() && self.progress.is_empty()
    }
}

impl Completions {
    pub(crate) fn new(wake: CompletionWake) -> Arc<Self> {
        Arc::new_cyclic(|this| Completions {
            batch: Mutex::new(Batch::default()),
            this: this.clone(),
            timers: tokio_util::task::TaskTracker::new(),
            timers_stop: tokio_util::sync::CancellationToken::new(),
            wake,
            feeding: AtomicBool::new(false),
        })
    }

    /// Queue `update` for the drain and open the call's interval, whose end delivers what it held.
    /// Returns whether the batch was empty (a wake-up is due).
    fn deliver_progress(&self, batch: &mut Batch, call_id: u32, update: String) -> bool {
        let first = batch.is_empty();
        batch.progress.insert(call_id, update);
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            batch.paced.insert(call_id, None);
            let (this, stop) = (self.this.clone(), self.timers_stop.clone());
            self.timers.spawn_on(
                async move {
                    tokio::select! {
                        _ = stop.cancelled() => {}
                        _ = tokio::time::sleep(PROGRESS_INTERVAL) => {
                            if let Some(this) = this.upgrade() {
                                this.interval_ended(call_id);
                            }
                        }
                    }
                },
                &runtime,
            );
        }
        first
    }

    fn interval_ended(&self, call_id: u32) {
        let first = {
            let mut batch = self.batch.lock();
            match batch.paced.remove(&call_id) {
                Some(Some(held)) => self.deliver_progress(&mut batch, call_id, held),
                _ => false,
            }
        };
        if first {
            self.wake();
        }
    }

    fn wake(&self) {
        if !self.feeding.load(Ordering::SeqCst) {
            self.wake.call((), ThreadsafeFunctionCallMode::NonBlocking);
        }
    }

    pub(crate) fn drain(&self) -> String {
        let mut batch = self.batch.lock();
        if batch.is_empty() {
            return "[]".to_owned();
        }
        let outcomes = std::mem::take(&mut batch.outcomes);
        if batch.progress.is_empty() {
            let mut out = outcomes;
            out.push(']');
            return out;
        }
        let mut out =
            String::with_capacity(outcomes.len() + batch.progress.values().map(|u| u.len() + 24).sum::<usize>() + 2);
        out.push('[');
        for (call_id, update) in batch.progress.drain() {
            if out.len() > 1 {
                out.push(',');
            }
            out.push_str(&format!("[{call_id},\"progress\","));
            out.push_str(&update);
            out.push(']');
        }
        if !outcomes.is_empty() {
            out.push(',');
            out.push_str(&outcomes[1..]);
        }
        out.push(']');
        out
    }

    /// Runs `feed` (JavaScript handing over stdout bytes) without wake-ups, then drains. The flag is
    /// cleared even if `feed` panics, or no wake-up would ever be sent again.
    pub(crate) fn feeding(&self, feed: impl FnOnce()) -> String {
        struct Clear<'a>(&'a AtomicBool);
        impl Drop for Clear<'_> {
            fn drop(&mut self) {
                self.0.store(false, Ordering::SeqCst);
            }
        }
        self.feeding.store(true, Ordering::SeqCst);
        let clear = Clear(&self.feeding);
        feed();
        drop(clear);
        self.drain()
    }
}

impl CallSink for Completions {
    fn progress(&self, call_id: u32, update_json: String) {
        let first = {
            let mut batch = self.batch.lock();
            match batch.paced.get_mut(&call_id) {
                Some(held) => {
                    *held = Some(update_json);
                    false
                }
                None => self.deliver_progress(&mut batch, call_id, update_json),
            }
        };
        if first {
            self.wake();
        }
    }

    fn complete(&self, call_id: u32, outcome: Result<Box<str>>) {
        self.push_outcome(call_id, outcome, None);
    }

    fn complete_measured(&self, call_id: u32, outcome: Result<Box<str>>, report: &crate::telemetry::CallReport) {
        self.push_outcome(call_id, outcome, Some(report));
    }
}

impl Completions {
    /// `[callId, code, payload, properties?]`; a measured call's has its report fifth, `properties` then
    /// `null` when there are none.
    fn push_outcome(&self, call_id: u32, outcome: Result<Box<str>>, report: Option<&crate::telemetry::CallReport>) {
        let first = {
            let mut guard = self.batch.lock();
            let first = guard.is_empty();
            // The update its interval held goes first: a caller hears the last progress before the result.
            if let Some(Some(held)) = guard.paced.remove(&call_id) {
                guard.progress.insert(call_id, held);
            }
            let batch = &mut guard.outcomes;
            batch.push(if batch.is_empty() { '[' } else { ',' });
            match outcome {
                Ok(result) => {
                    batch.push_str(&format!("[{call_id},\"\","));
                    batch.push_str(&result);
                    if report.is_some() {
                        batch.push_str(",null");
                    }
                }
                Err(error) => {
                    batch.push_str(&format!("[{call_id},\"{}\",", error.code()));
                    batch.push_str(&serde_json::to_string(&error.to_string()).expect("strings serialize"));
                    match (error.js_properties(), report) {
                        (Some(properties), _) => {
                            batch.push(',');
                            batch.push_str(properties);
                        }
                        (None, Some(_)) => batch.push_str(",null"),
                        (None, None) => {}
                    }
                }
            }
            if let Some(report) = report {
                batch.push(',');
                batch.push_str(&report.to_json());
            }
            batch.push(']');
            first
        };
        if first {
            self.wake();
        }
    }
}

/// The sink's pacing timers end with it: none outlives the toolset that listened.
impl Drop for Completions {
    fn drop(&mut self) {
        self.timers.close();
        self.timers_stop.cancel();
    }
}

#[cfg(test)]
mod tests {
    use super::parse_calls;

    #[test]
    fn a_batch_is_one_call_per_line() {
        let calls = parse_calls("1\t0\ta__x\t\t{}\n2\t2\tb__y\t{\"runId\":\"r\",\"toolCallId\":\"c\"}\t{\"k\":\"a\\tb\"}\n3\t3p\tc__z\t\t{}\n4\t0p\td__w\t\t{}\n").unwrap();
        let seen: Vec<_> = calls.iter().map(|c| (c.call_id, c.abort_id, c.name.as_str(), c.progress)).collect();
        assert_eq!(seen, [(1, 0, "a__x", false), (2, 2, "b__y", false), (3, 3, "c__z", true), (4, 0, "d__w", true)]);
        for bad in ["1\t0\tname\t{}", "x\t0\tn\t\t{}", "1\t-1\tn\t\t{}", "1\tp\tn\t\t{}", "1\t0pp\tn\t\t{}"] {
            assert_eq!(parse_calls(bad).err().map(|e| e.code()), Some("mcp_invalid_arguments"), "{bad}");
        }
    }
}
