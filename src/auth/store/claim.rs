//! Spending a refresh token is a claim exactly one holder wins. Holders of one store in this process
//! (toolsets sharing it, by [`TokenStore::identity`]) take turns per key: a tokio mutex per (store,
//! key), waited for within a deadline, so a refresher that lost waits for the winner and then reads
//! the winner's tokens from the store. A store shared across processes adds its own lock
//! ([`TokenStore::lock_across_processes`]), taken after this process's turn and released before it.
//! Nothing here spawns a task; a claim ends when its holder drops it (or its process ends).

use super::TokenStore;
use crate::error::{McpError, Result};
use parking_lot::Mutex;
use std::collections::HashMap;
use std::sync::{Arc, LazyLock};
use std::time::Duration;

type Turns = Arc<tokio::sync::Mutex<()>>;

/// One mutex per (store identity, key) while anyone holds or waits for it; removed by the last one.
static TURNS: LazyLock<Mutex<HashMap<(String, String), Turns>>> = LazyLock::new(Default::default);

/// A held claim on the value under one key of one store. Dropping it lets the next holder in.
pub struct Claim {
    // Fields drop in this order: the cross-process lock, then this process's turn, then the entry.
    across_processes: Option<Box<dyn Send + Sync>>,
    _turn: tokio::sync::OwnedMutexGuard<()>,
    _entry: Entry,
}

impl Claim {
    /// Whether the store's cross-process lock is held too: then no other process is spending either.
    pub fn across_processes(&self) -> bool {
        self.across_processes.is_some()
    }
}

/// A reference to a key's mutex that removes the map entry when it is the last one.
struct Entry {
    key: (String, String),
    turns: Option<Turns>,
}

impl Drop for Entry {
    fn drop(&mut self) {
        let mut map = TURNS.lock();
        // Clones are only made under the map lock, so the count read here is exact: the map's and ours.
        if self.turns.take().is_some_and(|turns| Arc::strong_count(&turns) == 2) {
            map.remove(&self.key);
        }
    }
}

/// Waits (within `within`) for this process's turn on `key` of `store`, then for the store's lock
/// across processes where it has one.
pub async fn claim(store: &dyn TokenStore, key: &str, within: Duration) -> Result<Claim> {
    let deadline = tokio::time::Instant::now() + within;
    let key = (store.identity().await?, key.to_owned());
    let turns = TURNS.lock().entry(key.clone()).or_default().clone();
    let entry = Entry { key, turns: Some(turns.clone()) };
    let turn = tokio::time::timeout_at(deadline, turns.lock_owned()).await.map_err(|_| {
        McpError::Auth(format!(
            "another toolset sharing the token store was still refreshing these tokens after {} ms; not refreshing meanwhile",
            within.as_millis()
        ))
    })?;
    let across_processes =
        store.lock_across_processes(deadline.saturating_duration_since(tokio::time::Instant::now())).await?;
    Ok(Claim { across_processes, _turn: turn, _entry: entry })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::auth::store::MemoryTokenStore;

    #[tokio::test]
    async fn one_holder_at_a_time_per_store_and_key_and_the_map_empties() {
        let (store, other) = (MemoryTokenStore::new(), MemoryTokenStore::new());
        let held = claim(&store, "k", Duration::from_secs(5)).await.unwrap();
        assert!(!held.across_processes());
        // Another key, and the same key of another store, are not held.
        let _elsewhere = claim(&store, "k2", Duration::from_secs(5)).await.unwrap();
        let _other_store = claim(&other, "k", Duration::from_secs(5)).await.unwrap();
        let refused = claim(&store, "k", Duration::from_millis(20)).await.err().expect("the key is held");
        assert_eq!(refused.code(), "mcp_auth_error");
        let clone = store.clone(); // one store's clones share its contents, and its identity
        let waiting = tokio::spawn(async move { claim(&clone, "k", Duration::from_secs(30)).await.map(drop) });
        drop(held);
        waiting.await.unwrap().unwrap();
        drop((_elsewhere, _other_store));
        assert!(TURNS.lock().keys().all(|(_, key)| !key.starts_with('k')), "entries left behind");
    }
}
