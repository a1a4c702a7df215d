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
    /// Records a call's result unless one is recorded for (`key`, `tool`) already; the recorded result either way.
    fn record_call_result(&self, key: &str, tool: &str, result: &str) -> BoxFuture<'_, Result<String>> {
        let (claim_key, result) = (call_claim_key(key, tool), result.to_owned());
        Box::pin(async move { self.claim(&claim_key, &result).await })
    }
}

/// Where a journal with no call-results table of its own (Postgres, a JavaScript one without
/// `callResult`) keeps a recorded call result: a claim, first writer wins like the table's primary key.
pub fn call_claim_key(key: &str, tool: &str) -> String {
    format!("__mcp_call__:{tool}:{key}")
}

/// A journal that lives as long as the process.
#[derive(Default)]
pub struct MemoryJournal {
    claims: Mutex<HashMap<String, String>>,
    counters: Mutex<HashMap<(String, String), u64>>,
    /// Recorded call results by (idempotency key, tool).
    call_results: Mutex<HashMap<(String, String), String>>,
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
        Box::pin(ready(Ok(self.call_results.lock().get(&(key.to_owned(), tool.to_owned())).cloned())))
    }

    fn record_call_result(&self, key: &str, tool: &str, result: &str) -> BoxFuture<'_, Result<String>> {
        let mut results = self.call_results.lock();
        let recorded = results.entry((key.to_owned(), tool.to_owned())).or_insert_with(|| result.to_owned()).clone();
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

    pub async fn call_results_are_first_writer_wins_per_key_and_tool(journal: &dyn McpJournal) {
        assert_eq!(journal.call_result("order-1:call-7", "charge").await.unwrap(), None);
        assert_eq!(journal.record_call_result("order-1:call-7", "charge", "{\"a\":1}").await.unwrap(), "{\"a\":1}");
        assert_eq!(journal.record_call_result("order-1:call-7", "charge", "{\"a\":2}").await.unwrap(), "{\"a\":1}");
        assert_eq!(journal.call_result("order-1:call-7", "charge").await.unwrap().as_deref(), Some("{\"a\":1}"));
        assert_eq!(journal.call_result("order-1:call-7", "refund").await.unwrap(), None, "per tool");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn the_memory_journal_keeps_the_contract() {
        contract::claims_are_first_writer_wins(&MemoryJournal::new()).await;
        contract::counters_stop_at_the_limit_and_give_back(&MemoryJournal::new()).await;
        contract::call_results_are_first_writer_wins_per_key_and_tool(&MemoryJournal::new()).await;
    }
}
