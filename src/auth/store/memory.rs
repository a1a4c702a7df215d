//! The default token store: a map in this process's memory, gone when the process ends.

use super::TokenStore;
use crate::error::Result;
use futures_util::future::BoxFuture;
use parking_lot::Mutex;
use std::collections::HashMap;
use std::sync::Arc;

#[derive(Default, Clone)]
pub struct MemoryTokenStore {
    entries: Arc<Mutex<HashMap<String, String>>>,
}

impl MemoryTokenStore {
    pub fn new() -> Self {
        Self::default()
    }
}

impl std::fmt::Debug for MemoryTokenStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MemoryTokenStore").field("entries", &self.entries.lock().len()).finish()
    }
}

impl TokenStore for MemoryTokenStore {
    fn get(&self, key: &str) -> BoxFuture<'static, Result<Option<String>>> {
        let (entries, key) = (self.entries.clone(), key.to_owned());
        Box::pin(async move { Ok(entries.lock().get(&key).cloned()) })
    }

    fn set(&self, key: &str, value: &str) -> BoxFuture<'static, Result<()>> {
        let (entries, key, value) = (self.entries.clone(), key.to_owned(), value.to_owned());
        Box::pin(async move {
            entries.lock().insert(key, value);
            Ok(())
        })
    }

    fn delete(&self, key: &str) -> BoxFuture<'static, Result<()>> {
        let (entries, key) = (self.entries.clone(), key.to_owned());
        Box::pin(async move {
            entries.lock().remove(&key);
            Ok(())
        })
    }

    /// The map itself: every clone of this store holds the same entries.
    fn identity(&self) -> BoxFuture<'static, Result<String>> {
        let identity = format!("memory:{:p}", Arc::as_ptr(&self.entries));
        Box::pin(async move { Ok(identity) })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn round_trip_and_delete() {
        let store = MemoryTokenStore::new();
        assert_eq!(store.get("a").await.unwrap(), None);
        store.set("a", "secret-1").await.unwrap();
        store.set("a", "secret-2").await.unwrap();
        assert_eq!(store.get("a").await.unwrap().as_deref(), Some("secret-2"));
        store.delete("a").await.unwrap();
        store.delete("a").await.unwrap();
        assert_eq!(store.get("a").await.unwrap(), None);
    }

    #[tokio::test]
    async fn debug_shows_no_value() {
        let store = MemoryTokenStore::new();
        store.set("server", "access-token-value").await.unwrap();
        let shown = format!("{store:?}");
        assert!(!shown.contains("access-token-value") && !shown.contains("server"), "{shown}");
    }
}
