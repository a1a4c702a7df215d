//! The operating system's secret store, through keyring-core and the platform's own store crate:
//! Keychain on macOS, Credential Manager on Windows, the Secret Service (over D-Bus, pure Rust) on
//! Linux and the BSDs. One entry per key: the entry's service is the store's `service`, its user the key.
//!
//! Every call into the OS store blocks (a D-Bus round trip, perhaps an unlock prompt), so each runs on
//! the blocking pool, under [`KEYRING_OPERATION_TIMEOUT_MS`]. The connection is made on first use, not
//! at creation (creation happens on the JS thread); a failed connect is not remembered, so a secret
//! service that starts later is found by the next operation; the connection made is then kept for the
//! store's life.
//!
//! Values are stored as UTF-8 bytes. Windows' Credential Manager holds at most 2 560 bytes per entry: a
//! larger value is refused there with `McpError::Storage` (the OS's limit, reported as such).

use super::{on_blocking_pool, TokenStore};
use crate::error::{McpError, Result};
use crate::limits::KEYRING_OPERATION_TIMEOUT_MS;
use futures_util::future::BoxFuture;
use keyring_core::api::CredentialStore;
use keyring_core::{Entry, Error as KeyringError};
use std::sync::Arc;
use std::time::Duration;

pub struct KeyringTokenStore {
    service: String,
    os_store: Arc<tokio::sync::OnceCell<Arc<CredentialStore>>>,
}

impl std::fmt::Debug for KeyringTokenStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KeyringTokenStore")
            .field("service", &self.service)
            .field("connected", &self.os_store.initialized())
            .finish()
    }
}

impl KeyringTokenStore {
    /// The service name entries are filed under when the host names none.
    pub const DEFAULT_SERVICE: &'static str = "mcpferry";

    /// A store whose entries are filed under `service` (the name the OS's secret viewer shows).
    /// Nothing is contacted yet: an OS without a usable secret store fails the first operation.
    pub fn new(service: impl Into<String>) -> Result<Self> {
        let service = service.into();
        if service.trim().is_empty() || service.contains('\0') {
            return Err(McpError::config("createKeyringTokenStore: `service` must be a non-empty name"));
        }
        Ok(Self { service, os_store: Arc::default() })
    }

    pub fn service(&self) -> &str {
        &self.service
    }

    /// Runs `work` on the entry for `key`, connecting to the OS store first if this is the first use.
    fn with_entry<T: Send + 'static>(
        &self,
        what: &'static str,
        key: &str,
        work: impl FnOnce(Entry) -> keyring_core::Result<T> + Send + 'static,
    ) -> BoxFuture<'static, Result<T>> {
        let (os_store, service, key) = (self.os_store.clone(), self.service.clone(), key.to_owned());
        let operation = async move {
            let os_store = os_store
                .get_or_try_init(|| on_blocking_pool("connecting to the OS secret store", connect))
                .await?
                .clone();
            on_blocking_pool(what, move || {
                let entry = Entry::new_in_store(&os_store, &service, &key).map_err(|e| failure(what, e))?;
                work(entry).map_err(|e| failure(what, e))
            })
            .await
        };
        Box::pin(async move {
            tokio::time::timeout(Duration::from_millis(KEYRING_OPERATION_TIMEOUT_MS), operation).await.unwrap_or_else(|_| {
                Err(McpError::Storage(format!(
                    "token store: the OS secret store did not answer {what} within {KEYRING_OPERATION_TIMEOUT_MS} ms (is it locked, waiting for a password?)"
                )))
            })
        })
    }
}

/// The platform's secret store. Each constructor connects (the Secret Service one over D-Bus).
fn connect() -> Result<Arc<CredentialStore>> {
    #[cfg(target_os = "macos")]
    let opened = apple_native_keyring_store::keychain::Store::new().map(|s| s as Arc<CredentialStore>);
    #[cfg(target_os = "windows")]
    let opened = windows_native_keyring_store::Store::new().map(|s| s as Arc<CredentialStore>);
    #[cfg(all(unix, not(any(target_os = "macos", target_os = "ios", target_os = "android"))))]
    let opened = zbus_secret_service_keyring_store::Store::new().map(|s| s as Arc<CredentialStore>);
    #[cfg(not(any(
        target_os = "macos",
        target_os = "windows",
        all(unix, not(any(target_os = "ios", target_os = "android")))
    )))]
    let opened: keyring_core::Result<Arc<CredentialStore>> =
        Err(KeyringError::NotSupportedByStore("this operating system".to_owned()));
    opened.map_err(|e| McpError::Storage(format!("token store: no OS secret store is available: {}", describe(&e))))
}

/// A keyring error as text that holds no secret: the variants carrying the stored bytes are named,
/// never printed.
fn describe(error: &KeyringError) -> String {
    match error {
        KeyringError::BadEncoding(_) => "the stored value is not UTF-8 text".to_owned(),
        KeyringError::BadDataFormat(_, _) => "the stored value is not in the format the OS store expects".to_owned(),
        KeyringError::Ambiguous(entries) => format!("{} entries match this key", entries.len()),
        other => other.to_string(),
    }
}

fn failure(what: &str, error: KeyringError) -> McpError {
    McpError::Storage(format!("token store: the OS secret store failed {what}: {}", describe(&error)))
}

impl TokenStore for KeyringTokenStore {
    fn get(&self, key: &str) -> BoxFuture<'static, Result<Option<String>>> {
        self.with_entry("get", key, |entry| match entry.get_secret() {
            Ok(bytes) => String::from_utf8(bytes).map(Some).map_err(|e| KeyringError::BadEncoding(e.into_bytes())),
            Err(KeyringError::NoEntry) => Ok(None),
            Err(e) => Err(e),
        })
    }

    fn set(&self, key: &str, value: &str) -> BoxFuture<'static, Result<()>> {
        let value = value.to_owned();
        // As UTF-8 bytes, not as a "password": Windows keeps a password as UTF-16, halving what fits.
        self.with_entry("set", key, move |entry| entry.set_secret(value.as_bytes()))
    }

    fn delete(&self, key: &str) -> BoxFuture<'static, Result<()>> {
        self.with_entry("delete", key, |entry| match entry.delete_credential() {
            Err(KeyringError::NoEntry) => Ok(()),
            done => done,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn service_is_required_and_debug_is_plain() {
        assert!(matches!(KeyringTokenStore::new(" "), Err(McpError::ConfigInvalid(_))));
        let store = KeyringTokenStore::new("mcpferry-test").unwrap();
        assert_eq!(format!("{store:?}"), r#"KeyringTokenStore { service: "mcpferry-test", connected: false }"#);
    }

    /// Where a secret store runs (a desktop session, or gnome-keyring under `dbus-run-session`), a real round
    /// trip; where none does (CI containers), the typed error that says so. Either way something is
    /// checked: a store that neither works nor says why fails.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn round_trip_or_typed_unavailability() {
        let store = KeyringTokenStore::new("mcpferry-unit-test").unwrap();
        let key = format!("round-trip-{}", std::process::id());
        match store.set(&key, "secret-value-1").await {
            Ok(()) => {
                assert_eq!(store.get(&key).await.unwrap().as_deref(), Some("secret-value-1"));
                store.set(&key, "secret-value-2").await.unwrap();
                assert_eq!(store.get(&key).await.unwrap().as_deref(), Some("secret-value-2"));
                store.delete(&key).await.unwrap();
                store.delete(&key).await.unwrap();
                assert_eq!(store.get(&key).await.unwrap(), None);
                println!("keyring round trip ran against the OS secret store");
            }
            Err(McpError::Storage(message)) => {
                assert!(message.contains("no OS secret store is available"), "{message}");
                assert!(!message.contains("secret-value"), "{message}");
                let again = store.get(&key).await.unwrap_err();
                assert!(
                    matches!(again, McpError::Storage(ref m) if m.contains("no OS secret store is available")),
                    "{again:?}"
                );
                println!("keyring round trip skipped: {message}");
            }
            Err(other) => panic!("not a storage error: {other:?}"),
        }
    }
}
