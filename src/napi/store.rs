//! Connection stores across the boundary: the engine's own (memory, SQLite) as `NativeStore`, and
//! stores implemented in JavaScript, reached through one dispatcher function.
//!
//! Every failure of either kind crosses as `mcp_storage_error`.

use super::errors::{guard, settle};
use super::registry::Registry;
use crate::error::McpError;
type Result<T, E = McpError> = std::result::Result<T, E>;
use crate::store::{self, BoxFuture, ConnectionStore, Fingerprints, MemoryStore, SqliteStore, StoredServer};
use napi::bindgen_prelude::*;
use napi::threadsafe_function::ThreadsafeFunction;
use napi_derive::napi;
use std::sync::Arc;

/// A store implemented in JavaScript: `(op, argsJson) => Promise<resultJson>`. Weak, like every callback.
pub(crate) type StoreDispatcher = ThreadsafeFunction<FnArgs<(String, String)>, Promise<String>, FnArgs<(String, String)>, Status, false, true>;

pub(crate) struct JsStore(Arc<StoreDispatcher>);

impl JsStore {
    pub(crate) fn new(dispatcher: StoreDispatcher) -> Self {
        JsStore(Arc::new(dispatcher))
    }

    fn call(&self, op: &'static str, args: serde_json::Value) -> BoxFuture<'static, Result<String>> {
        let dispatcher = self.0.clone();
        Box::pin(async move {
            let failed = |e: napi::Error| McpError::Storage(format!("store: {op} failed: {}", e.reason));
            let promise = dispatcher.call_async_catch((op.to_owned(), args.to_string()).into()).await.map_err(failed)?;
            promise.await.map_err(failed)
        })
    }
}

fn parse_reply<T: serde::de::DeserializeOwned>(op: &str, json: &str) -> Result<T> {
    serde_json::from_str(json).map_err(|e| McpError::Storage(format!("store: {op} returned malformed data: {e}")))
}

impl ConnectionStore for JsStore {
    fn get(&self, id: &str) -> BoxFuture<'_, Result<Option<StoredServer>>> {
        let reply = self.call("get", serde_json::json!([id]));
        Box::pin(async move { parse_reply("get", &reply.await?) })
    }

    fn list(&self) -> BoxFuture<'_, Result<Vec<StoredServer>>> {
        let reply = self.call("list", serde_json::json!([]));
        Box::pin(async move { parse_reply("list", &reply.await?) })
    }

    fn save(&self, row: StoredServer) -> BoxFuture<'_, Result<()>> {
        let reply = self.call("save", serde_json::json!([row]));
        Box::pin(async move { reply.await.map(drop) })
    }

    fn remove(&self, id: &str) -> BoxFuture<'_, Result<()>> {
        let reply = self.call("remove", serde_json::json!([id]));
        Box::pin(async move { reply.await.map(drop) })
    }

    fn claim_baseline(&self, id: &str, fingerprints: Fingerprints) -> BoxFuture<'_, Result<Fingerprints>> {
        let reply = self.call("claimBaseline", serde_json::json!([id, fingerprints]));
        Box::pin(async move { parse_reply("claimBaseline", &reply.await?) })
    }

    fn clear_baseline(&self, id: &str) -> BoxFuture<'_, Result<()>> {
        let reply = self.call("clearBaseline", serde_json::json!([id]));
        Box::pin(async move { reply.await.map(drop) })
    }
}

/// Native stores by id, so a toolset can be handed one through its config without a JS round trip.
static NATIVE_STORES: Registry<dyn ConnectionStore> = Registry::new("the storage store was released");

pub(crate) fn native_store(id: u32) -> Result<Arc<dyn ConnectionStore>> {
    NATIVE_STORES.get(id)
}

/// A connection store that lives in the engine: in memory, or a SQLite file.
#[napi]
pub struct NativeStore {
    store: Arc<dyn ConnectionStore>,
    id: u32,
}

fn to_json<T: serde::Serialize>(value: &T) -> String {
    serde_json::to_string(value).expect("rows and maps serialize")
}

fn from_json<T: serde::de::DeserializeOwned>(json: &str, what: &str) -> Result<T> {
    serde_json::from_str(json).map_err(|e| McpError::InvalidArguments(format!("not {what}: {e}")))
}

#[napi]
impl NativeStore {
    fn register(store: Arc<dyn ConnectionStore>) -> Self {
        NativeStore { id: NATIVE_STORES.register(&store), store }
    }

    #[napi(factory)]
    pub fn memory() -> napi::Result<Self, String> {
        guard("NativeStore.memory", || Ok(Self::register(Arc::new(MemoryStore::new()))))
    }

    /// A SQLite store at `path`: WAL, a schema version, safe for several processes. Returns at once;
    /// the file is opened on the engine's blocking pool (never on the JS thread), and a failure to
    /// open surfaces as `mcp_storage_error` on first use.
    #[napi(factory)]
    pub fn sqlite(path: String) -> napi::Result<Self, String> {
        guard("NativeStore.sqlite", || {
            if path.is_empty() || path.contains('\0') {
                return Err(McpError::config("createSqliteMcpConnectionStore needs a file path"));
            }
            Ok(Self::register(Arc::new(SqliteStore::open_lazily(std::path::Path::new(&path)))))
        })
    }

    #[napi(getter)]
    pub fn id(&self) -> u32 {
        self.id
    }

    /// The row as JSON, or null.
    #[napi(ts_return_type = "Promise<string | null>")]
    pub fn get<'env>(&self, env: &'env Env, id: String) -> napi::Result<PromiseRaw<'env, Option<String>>> {
        let store = self.store.clone();
        settle(env, "NativeStore.get", async move { store.get(&id).await }, |row| row.map(|r| to_json(&r)))
    }

    #[napi(ts_return_type = "Promise<string>")]
    pub fn list<'env>(&self, env: &'env Env) -> napi::Result<PromiseRaw<'env, String>> {
        let store = self.store.clone();
        settle(env, "NativeStore.list", async move { store.list().await }, |rows| to_json(&rows))
    }

    #[napi(ts_return_type = "Promise<void>")]
    pub fn save<'env>(&self, env: &'env Env, row_json: String) -> napi::Result<PromiseRaw<'env, ()>> {
        let store = self.store.clone();
        settle(env, "NativeStore.save", async move { store.save(from_json(&row_json, "a stored server row")?).await }, drop)
    }

    #[napi(ts_return_type = "Promise<void>")]
    pub fn remove<'env>(&self, env: &'env Env, id: String) -> napi::Result<PromiseRaw<'env, ()>> {
        let store = self.store.clone();
        settle(env, "NativeStore.remove", async move { store.remove(&id).await }, drop)
    }

    #[napi(ts_return_type = "Promise<string>")]
    pub fn claim_baseline<'env>(&self, env: &'env Env, id: String, fingerprints_json: String) -> napi::Result<PromiseRaw<'env, String>> {
        let store = self.store.clone();
        let claim = async move { store.claim_baseline(&id, from_json(&fingerprints_json, "a fingerprint map")?).await };
        settle(env, "NativeStore.claimBaseline", claim, |baseline| to_json(&baseline))
    }

    #[napi(ts_return_type = "Promise<void>")]
    pub fn clear_baseline<'env>(&self, env: &'env Env, id: String) -> napi::Result<PromiseRaw<'env, ()>> {
        let store = self.store.clone();
        settle(env, "NativeStore.clearBaseline", async move { store.clear_baseline(&id).await }, drop)
    }

    /// Clear the baseline of every row of `serverName`; resolves to how many rows had that name.
    #[napi(ts_return_type = "Promise<number>")]
    pub fn retrust<'env>(&self, env: &'env Env, server_name: String) -> napi::Result<PromiseRaw<'env, u32>> {
        let store = self.store.clone();
        settle(env, "NativeStore.retrust", async move { store::retrust(store.as_ref(), &server_name).await }, |rows| {
            u32::try_from(rows).unwrap_or(u32::MAX)
        })
    }
}

/// The store a toolset is given: a native one by id, or a JavaScript one through its dispatcher.
pub(crate) fn toolset_store(native_id: Option<u32>, js: Option<StoreDispatcher>) -> Result<Option<Arc<dyn ConnectionStore>>> {
    Ok(match (native_id, js) {
        (Some(id), _) => Some(native_store(id)?),
        (None, Some(dispatcher)) => Some(Arc::new(JsStore::new(dispatcher))),
        (None, None) => None,
    })
}
