//! Where OAuth credentials are kept between runs: an interface with three built-ins.
//!
//! A value is an opaque JSON string holding secrets (tokens, a client secret); a key is not secret (it
//! names a server and its authorization server). The engine never writes a value anywhere else, so the
//! choice of store is the whole of where a credential can end up:
//!
//! | store                       | where                                        | survives the process |
//! |-----------------------------|----------------------------------------------|----------------------|
//! | [`MemoryTokenStore`]        | this process's memory (the default)           | no                   |
//! | [`KeyringTokenStore`]       | the OS secret store (Keychain, Credential Manager, Secret Service) | yes |
//! | [`EncryptedFileTokenStore`] | one AES-256-GCM file, under a key the host must give | yes          |
//!
//! There is no plaintext store. Every store's `Debug` names the store, never a value or a key.
//!
//! Spending a refresh token is a claim exactly one holder of a store wins ([`claim`]): in this process
//! by the store's [`TokenStore::identity`], across processes by the store's own lock
//! ([`TokenStore::lock_across_processes`], the encrypted file's) or compare-and-set
//! ([`TokenStore::compare_and_set`], a JavaScript store that offers `compareAndSet`).

mod claim;
mod encrypted_file;
mod keyring;
mod memory;

pub use claim::{claim, Claim};
pub use encrypted_file::{EncryptedFileTokenStore, TokenFileKey};
pub use keyring::KeyringTokenStore;
pub use memory::MemoryTokenStore;

use crate::error::Result;
use futures_util::future::BoxFuture;

/// Async get/set/delete of secret values by key. Every failure is `McpError::Storage`, whose text
/// never holds a value.
pub trait TokenStore: Send + Sync + 'static {
    /// The value stored under `key`, or `None`.
    fn get(&self, key: &str) -> BoxFuture<'static, Result<Option<String>>>;
    /// Stores `value` under `key`, replacing any earlier one.
    fn set(&self, key: &str, value: &str) -> BoxFuture<'static, Result<()>>;
    /// Forgets `key`. A key that is not there is not an error.
    fn delete(&self, key: &str) -> BoxFuture<'static, Result<()>>;

    /// What names this store's contents in this process: two stores with one identity hold the same
    /// values (one file, one JavaScript object), so their holders take turns spending a refresh token.
    /// By default the store itself (its address).
    fn identity(&self) -> BoxFuture<'static, Result<String>> {
        let identity = format!("at:{:p}", self);
        Box::pin(async move { Ok(identity) })
    }

    /// The lock other processes sharing this store respect, taken within `within` and held until the
    /// returned guard drops; the store's own writes meanwhile go on under it. `None`: the store has no
    /// such lock (memory, the OS keyring, a JavaScript store).
    fn lock_across_processes(
        &self,
        within: std::time::Duration,
    ) -> BoxFuture<'static, Result<Option<Box<dyn Send + Sync>>>> {
        let _ = within;
        Box::pin(async { Ok(None) })
    }

    /// Stores `value` under `key` only if the value there is still `expected` (`None`: no value),
    /// atomically for every holder of the store: `Some(true)` when stored, `Some(false)` when another
    /// value was there. `None`: the store cannot compare and set (and nothing was stored).
    fn compare_and_set(
        &self,
        key: &str,
        expected: Option<&str>,
        value: &str,
    ) -> BoxFuture<'static, Result<Option<bool>>> {
        let _ = (key, expected, value);
        Box::pin(async { Ok(None) })
    }
}

/// Runs blocking store work (a file, the OS secret store) on tokio's blocking pool; a task that died
/// (a panic in the work) is a storage failure of this operation.
async fn on_blocking_pool<T: Send + 'static>(
    what: &'static str,
    work: impl FnOnce() -> Result<T> + Send + 'static,
) -> Result<T> {
    tokio::task::spawn_blocking(work)
        .await
        .map_err(|e| crate::error::McpError::Storage(format!("token store: {what} did not finish: {e}")))?
}
