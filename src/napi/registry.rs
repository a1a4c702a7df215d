//! Engine objects JavaScript holds (connection stores, token stores), by id, so a toolset can be handed
//! one through its config without a JS round trip. Weak: the JS object owns it, and an id whose object
//! JavaScript released resolves to an error, not to a store kept alive by the registry.

use crate::error::{McpError, Result};
use crate::shared_state::WeakRegistry;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;

pub(crate) struct Registry<T: ?Sized> {
    entries: WeakRegistry<u32, T>,
    next_id: AtomicU32,
    /// The error when an id no longer resolves.
    released: &'static str,
}

impl<T: ?Sized> Registry<T> {
    pub(crate) const fn new(released: &'static str) -> Self {
        Registry { entries: WeakRegistry::new(), next_id: AtomicU32::new(1), released }
    }

    pub(crate) fn register(&self, item: &Arc<T>) -> u32 {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        // What JavaScript has released is forgotten, so the registry stays as small as the live set.
        self.entries.insert(id, item);
        id
    }

    pub(crate) fn get(&self, id: u32) -> Result<Arc<T>> {
        self.entries.get(&id).ok_or_else(|| McpError::config(self.released))
    }
}
