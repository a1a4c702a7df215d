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

mod encrypted_file;
mod keyring;
mod memory;

pub use encrypted_file::{EncryptedFileTokenStore, TokenFileKey};
pub use keyring::KeyringTokenStore;
pub use memory::MemoryTokenStore;

use crate::error::Result;
use crate::transport::BoxFuture;

/// Async get/set/delete of secret values by key. Every failure is `McpError::Storage`, whose text
/// never holds a value.
pub trait TokenStore: Send + Sync + 'static {
    /// The value stored under `key`, or `None`.
    fn get(&self, key: &str) -> BoxFuture<'static, Result<Option<String>>>;
    /// Stores `value` under `key`, replacing any earlier one.
    fn set(&self, key: &str, value: &str) -> BoxFuture<'static, Result<()>>;
    /// Forgets `key`. A key that is not there is not an error.
    fn delete(&self, key: &str) -> BoxFuture<'static, Result<()>>;
}

/// Runs blocking store work (a file, the OS secret store) on tokio's blocking pool; a task that died
/// (a panic in the work) is a storage failure of this operation.
async fn on_blocking_pool<T: Send + 'static>(what: &'static str, work: impl FnOnce() -> Result<T> + Send + 'static) -> Result<T> {
    tokio::task::spawn_blocking(work)
        .await
        .map_err(|e| crate::error::McpError::Storage(format!("token store: {what} did not finish: {e}")))?
}
