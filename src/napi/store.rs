//! Connection stores across the boundary: the engine's own (memory, SQLite) as `NativeStore`, and
//! stores implemented in JavaScript, reached through one dispatcher function.
//!
//! Every failure of either kind crosses as `mcp_storage_error`.

use super::errors::{guard, settle};
use super::hooks::{ask_storage, JsDispatcher};
use super::registry::Registry;
use crate::error::McpError;
type Result<T, E = McpError> = std::result::Result<T, E>;
use crate::store::{
    self, ConnectionStore, Fingerprints, MemoryStore, PostgresOptions, PostgresStore, SqliteStore, StoredServer,
};
use futures_util::future::BoxFuture;
use napi::bindgen_prelude::*;
use napi_derive::napi;
use std::sync::Arc;

pub(crate) struct JsStore(Arc<JsDispatcher>);

impl JsStore {
    pub(crate) fn new(dispatcher: JsDispatcher) -> Self {
        JsStore(Arc::new(dispatcher))
    }

    fn call(&self, op: &'static str, args: serde_json::Value) -> BoxFuture<'static, Result<String>> {
        ask_storage(&self.0, "store", op, args)
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

/// A connection store that lives in the engine: in memory, a SQLite file, or a Postgres database.
#[napi]
pub struct NativeStore {
    store: Arc<dyn ConnectionStore>,
    id: u32,
    /// What the store is and where it points, never a credential: for `String(store)` and inspection.
    label: String,
    /// The same store when it is a Postgres one, whose pool `close()` can shut.
    postgres: Option<Arc<PostgresStore>>,
}

const POSTGRES_FACTORY: &str = "createPostgresMcpConnectionStore";

fn to_json<T: serde::Serialize>(value: &T) -> String {
    serde_json::to_string(value).expect("rows and maps serialize")
}

fn from_json<T: serde::de::DeserializeOwned>(json: &str, what: &str) -> Result<T> {
    serde_json::from_str(json).map_err(|e| McpError::InvalidArguments(format!("not {what}: {e}")))
}

#[napi]
impl NativeStore {
    fn register(store: Arc<dyn ConnectionStore>, label: String) -> Self {
        NativeStore { id: NATIVE_STORES.register(&store), store, label, postgres: None }
    }

    #[napi(factory)]
    pub fn memory() -> napi::Result<Self, String> {
        guard("NativeStore.memory", || Ok(Self::register(Arc::new(MemoryStore::new()), "memory".to_owned())))
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
            Ok(Self::register(
                Arc::new(SqliteStore::open_lazily(std::path::Path::new(&path))),
                format!("sqlite {path}"),
            ))
        })
    }

    /// A Postgres store shared by a fleet, from `createPostgresMcpConnectionStore`'s options as JSON.
    /// Returns at once: the pool connects, and the schema is set up, on first use; a wrong address or
    /// password rejects that operation with `mcp_storage_error`. Bad options are `mcp_config_invalid`.
    #[napi(factory)]
    pub fn postgres(options_json: String) -> napi::Result<Self, String> {
        guard("NativeStore.postgres", || {
            let postgres = Arc::new(PostgresStore::new(PostgresOptions::from_json(&options_json, POSTGRES_FACTORY)?)?);
            let label = format!("postgres {}", postgres.target());
            let mut native = Self::register(postgres.clone(), label);
            native.postgres = Some(postgres);
            Ok(native)
        })
    }

    #[napi(getter)]
    pub fn id(&self) -> u32 {
        self.id
    }

    /// `memory`, `sqlite <path>` or `postgres <user>@<host>:<port>/<database>`: no credential.
    #[napi(getter)]
    pub fn label(&self) -> String {
        self.label.clone()
    }

    /// Closes a Postgres store's pooled connections now; its later operations reject with
    /// `mcp_storage_error`. Nothing to close for the other stores.
    #[napi]
    pub fn close(&self) -> napi::Result<(), String> {
        guard("NativeStore.close", || {
            if let Some(postgres) = &self.postgres {
                postgres.close();
            }
            Ok(())
        })
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
        settle(
            env,
            "NativeStore.save",
            async move { store.save(from_json(&row_json, "a stored server row")?).await },
            drop,
        )
    }

    #[napi(ts_return_type = "Promise<void>")]
    pub fn remove<'env>(&self, env: &'env Env, id: String) -> napi::Result<PromiseRaw<'env, ()>> {
        let store = self.store.clone();
        settle(env, "NativeStore.remove", async move { store.remove(&id).await }, drop)
    }

    #[napi(ts_return_type = "Promise<string>")]
    pub fn claim_baseline<'env>(
        &self,
        env: &'env Env,
        id: String,
        fingerprints_json: String,
    ) -> napi::Result<PromiseRaw<'env, String>> {
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
pub(crate) fn toolset_store(
    native_id: Option<u32>,
    js: Option<JsDispatcher>,
) -> Result<Option<Arc<dyn ConnectionStore>>> {
    Ok(match (native_id, js) {
        (Some(id), _) => Some(native_store(id)?),
        (None, Some(dispatcher)) => Some(Arc::new(JsStore::new(dispatcher))),
        (None, None) => None,
    })
}
