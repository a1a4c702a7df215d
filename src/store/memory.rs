//! A store that lives as long as the process: for tests, and for callers who want drift detection
//! within one long-running process without a file.

use super::{unknown_row_error, ConnectionStore, Fingerprints, StoredServer};
use crate::error::Result;
use futures_util::future::BoxFuture;
use std::collections::BTreeMap;
use std::future::ready;
use std::sync::{Mutex, MutexGuard};

#[derive(Debug, Default)]
pub struct MemoryStore {
    rows: Mutex<BTreeMap<String, StoredServer>>,
}

impl MemoryStore {
    pub fn new() -> Self {
        Self::default()
    }

    /// Every operation leaves the map consistent before it can panic, so a poisoned lock is safe to
    /// keep using; one panicking caller must not take the store down for the rest.
    fn rows(&self) -> MutexGuard<'_, BTreeMap<String, StoredServer>> {
        self.rows.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

impl ConnectionStore for MemoryStore {
    fn get(&self, id: &str) -> BoxFuture<'_, Result<Option<StoredServer>>> {
        Box::pin(ready(Ok(self.rows().get(id).cloned())))
    }

    fn list(&self) -> BoxFuture<'_, Result<Vec<StoredServer>>> {
        Box::pin(ready(Ok(self.rows().values().cloned().collect())))
    }

    fn save(&self, mut row: StoredServer) -> BoxFuture<'_, Result<()>> {
        let mut rows = self.rows();
        if let Some(recorded) = rows.get_mut(&row.id).and_then(|existing| existing.tool_fingerprints.take()) {
            row.tool_fingerprints = Some(recorded);
        }
        rows.insert(row.id.clone(), row);
        Box::pin(ready(Ok(())))
    }

    fn remove(&self, id: &str) -> BoxFuture<'_, Result<()>> {
        self.rows().remove(id);
        Box::pin(ready(Ok(())))
    }

    fn claim_baseline(&self, id: &str, fingerprints: Fingerprints) -> BoxFuture<'_, Result<Fingerprints>> {
        let claimed = match self.rows().get_mut(id) {
            None => Err(unknown_row_error(id)),
            Some(row) => Ok(row.tool_fingerprints.get_or_insert(fingerprints).clone()),
        };
        Box::pin(ready(claimed))
    }

    fn clear_baseline(&self, id: &str) -> BoxFuture<'_, Result<()>> {
        if let Some(row) = self.rows().get_mut(id) {
            row.tool_fingerprints = None;
        }
        Box::pin(ready(Ok(())))
    }
}

#[cfg(test)]
mod tests {
    use super::super::contract;
    use super::*;
    use std::sync::Arc;

    #[tokio::test]
    async fn meets_the_store_contract() {
        contract::run_all(MemoryStore::new).await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn concurrent_claims_agree_on_one_baseline() {
        let store = Arc::new(MemoryStore::new());
        store.save(contract::row("docs:1", "docs", vec![], None)).await.unwrap();
        let claims: Vec<_> = (0..16)
            .map(|n| {
                let store = Arc::clone(&store);
                tokio::spawn(async move {
                    let mine: Fingerprints = [("a".to_owned(), format!("claimant-{n}"))].into();
                    store.claim_baseline("docs:1", mine).await.unwrap()
                })
            })
            .collect();
        let mut winners = Vec::new();
        for claim in claims {
            winners.push(claim.await.unwrap());
        }
        assert!(winners.iter().all(|w| *w == winners[0]), "{winners:?}");
        assert_eq!(store.get("docs:1").await.unwrap().unwrap().tool_fingerprints, Some(winners[0].clone()));
    }

    #[tokio::test]
    async fn survives_a_poisoned_lock() {
        let store = Arc::new(MemoryStore::new());
        store.save(contract::row("docs:1", "docs", vec![], None)).await.unwrap();
        let poisoner = Arc::clone(&store);
        let _ = std::thread::spawn(move || {
            let _held = poisoner.rows.lock().unwrap();
            panic!("poison the lock on purpose");
        })
        .join();
        assert!(store.rows.is_poisoned());
        assert!(store.get("docs:1").await.unwrap().is_some());
    }
}
