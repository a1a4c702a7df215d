//! The firewall's journal: what every worker and every resume of a run must agree on. Claims are
//! first-writer-wins for ever (a tool's pinned hash of description + input schema); per-run counters
//! hold the slots of a tool's calls in a run (`maxCallsPerRun`), reserved before a call in one atomic
//! step and given back when the call fails. Built-ins: memory (one process) and SQLite (one file shared
//! by processes, `journal_sqlite.rs`); JavaScript journals implement the same five operations.

use super::BoxFuture;
use crate::error::Result;
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

    /// `createMcpServer`'s exactly-once: the result recorded for `tool` called with idempotency key `key`.
    /// Journals without a table of their own keep it as a claim under `__mcp_call__:<tool>:<key>`.
    fn call_result(&self, key: &str, tool: &str) -> BoxFuture<'_, Result<Option<String>>> {
        let claim_key = call_claim_key(key, tool);
        Box::pin(async move { self.get(&claim_key).await })
    }
    /// Takes the call (`key`, `tool`) for `owner` for `lease_ms`, unless its result is recorded or another
    /// owner's lease on it is still running. The built-ins share this across processes; a journal that
    /// keeps results as claims answers only `Taken` or `Done` (exactly-once within one process).
    fn take_call(&self, key: &str, tool: &str, _owner: &str, _lease_ms: u64) -> BoxFuture<'_, Result<CallSlot>> {
        let found = self.call_result(key, tool);
        Box::pin(async move { Ok(found.await?.map_or(CallSlot::Taken, CallSlot::Done)) })
    }
    /// Extends `owner`'s lease on a call it is still running.
    fn renew_call(&self, _key: &str, _tool: &str, _owner: &str, _lease_ms: u64) -> BoxFuture<'_, Result<()>> {
        Box::pin(ready(Ok(())))
    }
    /// Ends `owner`'s run of a call: `Some(result)` records it (first writer wins: the recorded result is
    /// returned), `None` gives the call up (it failed; a retry runs it again).
    fn finish_call(&self, key: &str, tool: &str, _owner: &str, result: Option<&str>) -> BoxFuture<'_, Result<Option<String>>> {
        let (claim_key, result) = (call_claim_key(key, tool), result.map(str::to_owned));
        Box::pin(async move {
            match result {
                Some(result) => self.claim(&claim_key, &result).await.map(Some),
                None => Ok(None),
            }
        })
    }
}

/// What [`McpJournal::take_call`] found.
#[derive(Debug, Clone, PartialEq)]
pub enum CallSlot {
    /// The caller owns the call now: run it, then `finish_call`.
    Taken,
    /// Recorded: the result.
    Done(String),
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
    Done(String),
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

    fn call_result(&self, key: &str, tool: &str) -> BoxFuture<'_, Result<Option<String>>> {
        let done = match self.calls.lock().get(&(key.to_owned(), tool.to_owned())) {
            Some(CallState::Done(result)) => Some(result.clone()),
            _ => None,
        };
        Box::pin(ready(Ok(done)))
    }

    fn take_call(&self, key: &str, tool: &str, owner: &str, lease_ms: u64) -> BoxFuture<'_, Result<CallSlot>> {
        let now = super::now_ms();
        let mut calls = self.calls.lock();
        let slot = calls.entry((key.to_owned(), tool.to_owned())).or_insert_with(|| CallState::Running { owner: String::new(), lease_until_ms: i64::MIN });
        let taken = match slot {
            CallState::Done(result) => CallSlot::Done(result.clone()),
            CallState::Running { lease_until_ms, .. } if *lease_until_ms >= now => CallSlot::Running,
            CallState::Running { .. } => {
                *slot = CallState::Running { owner: owner.to_owned(), lease_until_ms: now.saturating_add(lease_ms as i64) };
                CallSlot::Taken
            }
        };
        Box::pin(ready(Ok(taken)))
    }

    fn renew_call(&self, key: &str, tool: &str, owner: &str, lease_ms: u64) -> BoxFuture<'_, Result<()>> {
        if let Some(CallState::Running { owner: holder, lease_until_ms }) = self.calls.lock().get_mut(&(key.to_owned(), tool.to_owned())) {
            if holder == owner {
                *lease_until_ms = super::now_ms().saturating_add(lease_ms as i64);
            }
        }
        Box::pin(ready(Ok(())))
    }

    fn finish_call(&self, key: &str, tool: &str, owner: &str, result: Option<&str>) -> BoxFuture<'_, Result<Option<String>>> {
        let mut calls = self.calls.lock();
        let slot = (key.to_owned(), tool.to_owned());
        let ours = matches!(calls.get(&slot), Some(CallState::Running { owner: holder, .. }) if holder == owner);
        let recorded = match (result, ours) {
            (Some(result), true) => {
                calls.insert(slot, CallState::Done(result.to_owned()));
                Some(result.to_owned())
            }
            (None, true) => {
                calls.remove(&slot);
                None
            }
            // Taken over meanwhile: whatever is recorded now (or ours, if nothing is yet).
            (result, false) => match calls.get(&slot) {
                Some(CallState::Done(recorded)) => Some(recorded.clone()),
                _ => result.map(str::to_owned),
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
        use super::CallSlot;
        let (key, tool) = ("order-1:call-7", "charge");
        assert_eq!(journal.call_result(key, tool).await.unwrap(), None);
        assert_eq!(journal.take_call(key, tool, "a", 60_000).await.unwrap(), CallSlot::Taken);
        assert_eq!(journal.take_call(key, tool, "b", 60_000).await.unwrap(), CallSlot::Running, "a's lease is live");
        journal.renew_call(key, tool, "a", 60_000).await.unwrap();
        assert_eq!(journal.finish_call(key, tool, "a", Some("{\"a\":1}")).await.unwrap().as_deref(), Some("{\"a\":1}"));
        assert_eq!(journal.take_call(key, tool, "b", 60_000).await.unwrap(), CallSlot::Done("{\"a\":1}".into()));
        assert_eq!(journal.call_result(key, tool).await.unwrap().as_deref(), Some("{\"a\":1}"));
        assert_eq!(journal.call_result(key, "refund").await.unwrap(), None, "per tool");
        // A failed run gives the call up; a lapsed lease (its owner died) may be taken over.
        assert_eq!(journal.take_call("k2", tool, "a", 60_000).await.unwrap(), CallSlot::Taken);
        assert_eq!(journal.finish_call("k2", tool, "a", None).await.unwrap(), None);
        assert_eq!(journal.take_call("k2", tool, "b", 0).await.unwrap(), CallSlot::Taken);
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
        assert_eq!(journal.take_call("k2", tool, "c", 60_000).await.unwrap(), CallSlot::Taken, "b's lease lapsed");
        assert_eq!(journal.finish_call("k2", tool, "b", Some("late")).await.unwrap().as_deref(), Some("late"), "b lost it: nothing recorded yet");
        assert_eq!(journal.finish_call("k2", tool, "c", Some("{}")).await.unwrap().as_deref(), Some("{}"));
        assert_eq!(journal.call_result("k2", tool).await.unwrap().as_deref(), Some("{}"));
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
