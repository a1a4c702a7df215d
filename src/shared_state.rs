//! Process-wide state, in named places. Everything the engine keeps for the whole process, who owns
//! it, and what bounds it:
//!
//! | state                    | where                                       | owner and bound                                        |
//! |--------------------------|---------------------------------------------|--------------------------------------------------------|
//! | era and discovery memory | `session::connection::negotiation::memory`  | the memory itself; `MAX_REMEMBERED_SERVERS` servers     |
//! | shared HTTP clients      | `egress::clients`                           | the toolsets holding a client; a [`WeakRegistry`]       |
//! | shared catalogue texts   | `session::catalog::shared`                  | the listings holding them; a [`WeakRegistry`]           |
//! | objects JavaScript holds | `napi::registry` (stores, token stores)     | the JS objects; a [`WeakRegistry`] by id                |
//! | routed log sinks         | `logging`                                   | the toolsets routing their logs; weak, by toolset id    |
//! | refresh-claim turns      | `auth::store::claim`                        | whoever holds or waits for a turn; removed by the last  |
//! | this process's stdin     | `server::stdio`                             | the one serving that claimed it                         |
//!
//! JavaScript's shared tool texts are the package's (`lib/`).
//!
//! A [`WeakRegistry`] keeps nothing alive: the holders own the values, and an entry whose last holder
//! is gone is swept on the next insertion, so the map stays as small as the live set.

use parking_lot::Mutex;
use std::collections::HashMap;
use std::hash::Hash;
use std::sync::{Arc, Weak};

/// Values by key, held weakly (see the module doc).
pub struct WeakRegistry<K, V: ?Sized> {
    entries: Mutex<Option<HashMap<K, Weak<V>>>>,
}

impl<K: Eq + Hash, V: ?Sized> WeakRegistry<K, V> {
    pub const fn new() -> Self {
        WeakRegistry { entries: Mutex::new(None) }
    }

    /// The live value at `key`, if any.
    pub fn get(&self, key: &K) -> Option<Arc<V>> {
        self.entries.lock().as_ref()?.get(key)?.upgrade()
    }

    /// File `value` at `key` (replacing what was there), sweeping entries nobody holds any more.
    pub fn insert(&self, key: K, value: &Arc<V>) {
        let mut entries = self.entries.lock();
        let entries = entries.get_or_insert_with(HashMap::new);
        entries.retain(|_, weak| weak.strong_count() > 0);
        entries.insert(key, Arc::downgrade(value));
    }

    /// The live value at `key`, or the one `make` builds, filed. `make` runs outside the lock: two
    /// callers racing for a new key may each build one, and the first filed is the one both get.
    pub fn get_or_make<E>(&self, key: K, make: impl FnOnce() -> Result<Arc<V>, E>) -> Result<Arc<V>, E> {
        if let Some(found) = self.get(&key) {
            return Ok(found);
        }
        let made = make()?;
        let mut entries = self.entries.lock();
        let entries = entries.get_or_insert_with(HashMap::new);
        if let Some(found) = entries.get(&key).and_then(Weak::upgrade) {
            return Ok(found);
        }
        entries.retain(|_, weak| weak.strong_count() > 0);
        entries.insert(key, Arc::downgrade(&made));
        Ok(made)
    }
}

impl<K: Eq + Hash, V: ?Sized> Default for WeakRegistry<K, V> {
    fn default() -> Self {
        Self::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_are_shared_while_held_and_swept_once_released() {
        let registry = WeakRegistry::<&str, String>::new();
        let first = registry.get_or_make("a", || Ok::<_, ()>(Arc::new("one".to_owned()))).unwrap();
        let again = registry.get_or_make("a", || Ok::<_, ()>(Arc::new("two".to_owned()))).unwrap();
        assert!(Arc::ptr_eq(&first, &again), "a live value is shared, not built again");
        drop((first, again));
        assert_eq!(registry.get(&"a"), None, "nothing keeps a released value alive");
        let other = Arc::new("b".to_owned());
        registry.insert("b", &other);
        assert_eq!(registry.entries.lock().as_ref().unwrap().len(), 1, "the dead entry was swept");
        assert_eq!(registry.get_or_make("c", || Err("failed")), Err("failed"));
    }
}
