//! Engine objects JavaScript holds (connection stores, token stores), by id, so a toolset can be handed
//! one through its config without a JS round trip. Weak: the JS object owns it, and an id whose object
//! JavaScript released resolves to an error, not to a store kept alive by the registry.

use crate::error::{McpError, Result};
use parking_lot::Mutex;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Weak};

pub(crate) struct Registry<T: ?Sized> {
    entries: Mutex<Option<HashMap<u32, Weak<T>>>>,
    next_id: AtomicU32,
    /// The error when an id no longer resolves.
    released: &'static str,
}

impl<T: ?Sized> Registry<T> {
    pub(crate) const fn new(released: &'static str) -> Self {
        Registry { entries: Mutex::new(None), next_id: AtomicU32::new(1), released }
    }

    pub(crate) fn register(&self, item: &Arc<T>) -> u32 {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let mut entries = self.entries.lock();
        let entries = entries.get_or_insert_with(HashMap::new);
        // Forget what JavaScript has released, so the registry stays as small as the live set.
        entries.retain(|_, item| item.strong_count() > 0);
        entries.insert(id, Arc::downgrade(item));
        id
    }

    pub(crate) fn get(&self, id: u32) -> Result<Arc<T>> {
        let found = self.entries.lock().as_ref().and_then(|entries| entries.get(&id)?.upgrade());
        found.ok_or_else(|| McpError::config(self.released))
    }
}
