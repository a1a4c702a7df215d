//! Token stores across the boundary: the engine's own (memory, OS keyring, encrypted file) as
//! `NativeTokenStore`, and stores implemented in JavaScript, reached through one dispatcher function.
//!
//! Values are secrets: they cross as plain strings (never inside an error), and every failure crosses
//! as `mcp_storage_error` whose text holds no value.

use super::errors::{guard, settle};
use super::registry::Registry;
use crate::auth::store::{EncryptedFileTokenStore, KeyringTokenStore, MemoryTokenStore, TokenFileKey, TokenStore};
use crate::error::McpError;
use crate::transport::BoxFuture;
use napi::bindgen_prelude::*;
use napi::threadsafe_function::ThreadsafeFunction;
use napi_derive::napi;
use std::sync::Arc;

type Result<T, E = McpError> = std::result::Result<T, E>;

/// A token store implemented in JavaScript: `(op, argsJson) => Promise<resultJson>`, with op `get`
/// (`[key]` → a string or null), `set` (`[key, value]`), `delete` (`[key]`), `identity` (`[]` → a
/// string naming the JS object, or null) or `compareAndSet` (`[key, expected, value]` → true or false,
/// or null when the store has no `compareAndSet`). Weak, like every callback.
pub(crate) type TokenStoreDispatcher =
    ThreadsafeFunction<FnArgs<(String, String)>, Promise<String>, FnArgs<(String, String)>, Status, false, true>;

pub(crate) struct JsTokenStore {
    dispatcher: Arc<TokenStoreDispatcher>,
    /// The JS object's identity, asked once: each toolset gets its own dispatcher for one object.
    identity: Arc<tokio::sync::OnceCell<String>>,
}

impl JsTokenStore {
    pub(crate) fn new(dispatcher: TokenStoreDispatcher) -> Self {
        JsTokenStore { dispatcher: Arc::new(dispatcher), identity: Arc::default() }
    }

    /// Calls the dispatcher; a throw, a rejection or a released function is a storage failure. Its
    /// message is the JS error's own (the host's code; the engine never puts a value in it).
    fn call(&self, op: &'static str, args: serde_json::Value) -> BoxFuture<'static, Result<String>> {
        let dispatcher = self.dispatcher.clone();
        Box::pin(async move {
            let failed = |e: napi::Error| McpError::Storage(format!("token store: {op} failed: {}", e.reason));
            let promise =
                dispatcher.call_async_catch((op.to_owned(), args.to_string()).into()).await.map_err(failed)?;
            promise.await.map_err(failed)
        })
    }
}

impl TokenStore for JsTokenStore {
    fn get(&self, key: &str) -> BoxFuture<'static, Result<Option<String>>> {
        let reply = self.call("get", serde_json::json!([key]));
        Box::pin(async move {
            // Only the shape is reported: the reply may be a token.
            serde_json::from_str(&reply.await?).map_err(|_| {
                McpError::Storage("token store: get returned something other than a string or null".to_owned())
            })
        })
    }

    fn set(&self, key: &str, value: &str) -> BoxFuture<'static, Result<()>> {
        let reply = self.call("set", serde_json::json!([key, value]));
        Box::pin(async move { reply.await.map(drop) })
    }

    fn delete(&self, key: &str) -> BoxFuture<'static, Result<()>> {
        let reply = self.call("delete", serde_json::json!([key]));
        Box::pin(async move { reply.await.map(drop) })
    }

    /// The JS object's (the dispatcher names it), so toolsets given one object take turns; a dispatcher
    /// that names none is this store's own.
    fn identity(&self) -> BoxFuture<'static, Result<String>> {
        let (cell, reply, own) = (
            self.identity.clone(),
            self.call("identity", serde_json::json!([])),
            format!("js:{:p}", Arc::as_ptr(&self.dispatcher)),
        );
        Box::pin(async move {
            let named = cell
                .get_or_try_init(|| async move {
                    let named: Option<String> = serde_json::from_str(&reply.await?).map_err(|_| {
                        McpError::Storage(
                            "token store: identity returned something other than a string or null".to_owned(),
                        )
                    })?;
                    Ok::<_, McpError>(named.map_or(own, |name| format!("js:{name}")))
                })
                .await?;
            Ok(named.clone())
        })
    }

    fn compare_and_set(
        &self,
        key: &str,
        expected: Option<&str>,
        value: &str,
    ) -> BoxFuture<'static, Result<Option<bool>>> {
        let reply = self.call("compareAndSet", serde_json::json!([key, expected, value]));
        Box::pin(async move {
            serde_json::from_str(&reply.await?).map_err(|_| {
                McpError::Storage("token store: compareAndSet returned something other than true or false".to_owned())
            })
        })
    }
}

/// Native token stores by id, so a toolset can be handed one through its config without a JS round trip.
static NATIVE_TOKEN_STORES: Registry<dyn TokenStore> = Registry::new("the token store was released");

/// A token store that lives in the engine: in memory, in the OS secret store, or in an encrypted file.
#[napi]
pub struct NativeTokenStore {
    store: Arc<dyn TokenStore>,
    id: u32,
}

#[napi]
impl NativeTokenStore {
    fn register(store: Arc<dyn TokenStore>) -> Self {
        NativeTokenStore { id: NATIVE_TOKEN_STORES.register(&store), store }
    }

    #[napi(factory)]
    pub fn memory() -> napi::Result<Self, String> {
        guard("NativeTokenStore.memory", || Ok(Self::register(Arc::new(MemoryTokenStore::new()))))
    }

    /// The OS secret store, entries filed under `service` (default "mcpferry"). Returns at once; the
    /// OS store is contacted by the first operation, which rejects when there is none.
    #[napi(factory)]
    pub fn keyring(service: Option<String>) -> napi::Result<Self, String> {
        guard("NativeTokenStore.keyring", || {
            let service = service.unwrap_or_else(|| KeyringTokenStore::DEFAULT_SERVICE.to_owned());
            Ok(Self::register(Arc::new(KeyringTokenStore::new(service)?)))
        })
    }

    /// An encrypted file at `path`, under `key`: a Buffer of exactly 32 bytes, or a passphrase string.
    /// Returns at once; the file is read by the first operation, which rejects on a wrong key.
    #[napi(factory, ts_args_type = "path: string, key: Uint8Array | string")]
    pub fn encrypted_file(path: String, key: Option<Either<Buffer, String>>) -> napi::Result<Self, String> {
        guard("NativeTokenStore.encryptedFile", || {
            let key = match &key {
                Some(Either::A(bytes)) => TokenFileKey::raw(bytes)?,
                Some(Either::B(passphrase)) => TokenFileKey::passphrase(passphrase)?,
                None => {
                    return Err(McpError::config(
                        "createEncryptedFileTokenStore needs a key: a 32-byte Buffer or a passphrase",
                    ))
                }
            };
            Ok(Self::register(Arc::new(EncryptedFileTokenStore::open(path, key)?)))
        })
    }

    /// A store implemented in JavaScript, reached through `dispatcher`, registered like a native one:
    /// the engine's half of a JS store can be exercised directly and handed to a toolset by id.
    #[napi(factory, ts_args_type = "dispatcher: (op: string, argsJson: string) => Promise<string>")]
    pub fn from_dispatcher(dispatcher: TokenStoreDispatcher) -> napi::Result<Self, String> {
        guard("NativeTokenStore.fromDispatcher", || Ok(Self::register(Arc::new(JsTokenStore::new(dispatcher)))))
    }

    #[napi(getter)]
    pub fn id(&self) -> u32 {
        self.id
    }

    #[napi(ts_return_type = "Promise<string | null>")]
    pub fn get<'env>(&self, env: &'env Env, key: String) -> napi::Result<PromiseRaw<'env, Option<String>>> {
        let pending = self.store.get(&key);
        settle(env, "NativeTokenStore.get", pending, |value| value)
    }

    #[napi(ts_return_type = "Promise<void>")]
    pub fn set<'env>(&self, env: &'env Env, key: String, value: String) -> napi::Result<PromiseRaw<'env, ()>> {
        let pending = self.store.set(&key, &value);
        settle(env, "NativeTokenStore.set", pending, drop)
    }

    #[napi(ts_return_type = "Promise<void>")]
    pub fn delete<'env>(&self, env: &'env Env, key: String) -> napi::Result<PromiseRaw<'env, ()>> {
        let pending = self.store.delete(&key);
        settle(env, "NativeTokenStore.delete", pending, drop)
    }
}

/// The token store a toolset is given: a native one by id, or a JavaScript one through its dispatcher;
/// `None` when the host gave neither (the toolset then makes a fresh memory store).
#[allow(dead_code)] // called by NativeToolset's constructor once the OAuth wiring lands
pub(crate) fn toolset_token_store(
    native_id: Option<u32>,
    js: Option<TokenStoreDispatcher>,
) -> Result<Option<Arc<dyn TokenStore>>> {
    Ok(match (native_id, js) {
        (Some(id), _) => Some(NATIVE_TOKEN_STORES.get(id)?),
        (None, Some(dispatcher)) => Some(Arc::new(JsTokenStore::new(dispatcher))),
        (None, None) => None,
    })
}
