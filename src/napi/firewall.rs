//! Firewall journals and the firewall across the boundary. Journals: the engine's own (memory, SQLite)
//! and JavaScript ones reached through one dispatcher, all as `NativeJournal`; the firewall takes one
//! by id. Decisions cross as JSON (`{ kind, reason? }`); every journal failure is `mcp_storage_error`.

use super::errors::{guard, settle};
use super::hooks::{ask_storage, JsDispatcher};
use super::registry::Registry;
use crate::error::{McpError, Result};
use crate::guard::firewall::{Firewall, FirewallRequest};
use crate::store::journal::{McpJournal, MemoryJournal};
use crate::store::journal_postgres::PostgresJournal;
use crate::store::journal_sqlite::SqliteJournal;
use crate::store::PostgresOptions;
use futures_util::future::BoxFuture;
use napi::bindgen_prelude::*;
use napi_derive::napi;
use std::sync::Arc;

/// A journal implemented in JavaScript: `(op, argsJson) => Promise<resultJson>`, ops `claim`, `get`,
/// `reserve`, `release`, `count` with their arguments as a JSON array.
struct JsJournal(Arc<JsDispatcher>);

impl JsJournal {
    fn call<T: serde::de::DeserializeOwned + Send + 'static>(
        &self,
        op: &'static str,
        args: serde_json::Value,
    ) -> BoxFuture<'static, Result<T>> {
        let reply = ask_storage(&self.0, "journal", op, args);
        Box::pin(async move {
            serde_json::from_str(&reply.await?)
                .map_err(|e| McpError::Storage(format!("journal: {op} returned malformed data: {e}")))
        })
    }
}

impl McpJournal for JsJournal {
    fn claim(&self, key: &str, value: &str) -> BoxFuture<'_, Result<String>> {
        self.call("claim", serde_json::json!([key, value]))
    }
    fn get(&self, key: &str) -> BoxFuture<'_, Result<Option<String>>> {
        self.call("get", serde_json::json!([key]))
    }
    fn reserve(&self, run_id: &str, counter: &str, limit: u64) -> BoxFuture<'_, Result<Option<u64>>> {
        self.call("reserve", serde_json::json!([run_id, counter, limit]))
    }
    fn release(&self, run_id: &str, counter: &str) -> BoxFuture<'_, Result<()>> {
        let reply: BoxFuture<'static, Result<serde_json::Value>> =
            self.call("release", serde_json::json!([run_id, counter]));
        Box::pin(async move { reply.await.map(drop) })
    }
    fn count(&self, run_id: &str, counter: &str) -> BoxFuture<'_, Result<u64>> {
        self.call("count", serde_json::json!([run_id, counter]))
    }
}

pub(super) static JOURNALS: Registry<dyn McpJournal> = Registry::new("the firewall journal was released");

#[napi]
pub struct NativeJournal {
    journal: Arc<dyn McpJournal>,
    id: u32,
    /// The same journal when it is a Postgres one, whose pool `close()` can shut.
    postgres: Option<Arc<PostgresJournal>>,
}

#[napi]
impl NativeJournal {
    fn register(journal: Arc<dyn McpJournal>) -> Self {
        NativeJournal { id: JOURNALS.register(&journal), journal, postgres: None }
    }

    #[napi(factory)]
    pub fn memory() -> napi::Result<Self, String> {
        guard("NativeJournal.memory", || Ok(Self::register(Arc::new(MemoryJournal::new()))))
    }

    /// A SQLite journal at `path` (WAL, shared by processes). Returns at once; the file opens on first use.
    #[napi(factory)]
    pub fn sqlite(path: String) -> napi::Result<Self, String> {
        guard("NativeJournal.sqlite", || {
            if path.is_empty() || path.contains('\0') {
                return Err(McpError::config("createSqliteMcpJournal needs a file path"));
            }
            Ok(Self::register(Arc::new(SqliteJournal::open_lazily(std::path::Path::new(&path)))))
        })
    }

    /// A Postgres journal shared by a fleet, from `createPostgresMcpJournal`'s options as JSON (those of
    /// the Postgres connection store). Returns at once: it connects and sets up its tables on first use.
    #[napi(factory)]
    pub fn postgres(options_json: String) -> napi::Result<Self, String> {
        guard("NativeJournal.postgres", || {
            let postgres =
                Arc::new(PostgresJournal::new(PostgresOptions::from_json(&options_json, "createPostgresMcpJournal")?)?);
            let mut native = Self::register(postgres.clone());
            native.postgres = Some(postgres);
            Ok(native)
        })
    }

    /// Closes a Postgres journal's pooled connections now; its later operations reject with
    /// `mcp_storage_error`. Nothing to close for the other journals.
    #[napi]
    pub fn close(&self) -> napi::Result<(), String> {
        guard("NativeJournal.close", || {
            if let Some(postgres) = &self.postgres {
                postgres.close();
            }
            Ok(())
        })
    }

    #[napi(factory, ts_args_type = "dispatcher: (op: string, argsJson: string) => Promise<string>")]
    pub fn from_dispatcher(dispatcher: JsDispatcher) -> napi::Result<Self, String> {
        guard("NativeJournal.fromDispatcher", || Ok(Self::register(Arc::new(JsJournal(Arc::new(dispatcher))))))
    }

    #[napi(getter)]
    pub fn id(&self) -> u32 {
        self.id
    }

    #[napi(ts_return_type = "Promise<string>")]
    pub fn claim<'env>(&self, env: &'env Env, key: String, value: String) -> napi::Result<PromiseRaw<'env, String>> {
        let journal = self.journal.clone();
        settle(env, "NativeJournal.claim", async move { journal.claim(&key, &value).await }, |winner| winner)
    }

    #[napi(ts_return_type = "Promise<string | null>")]
    pub fn get<'env>(&self, env: &'env Env, key: String) -> napi::Result<PromiseRaw<'env, Option<String>>> {
        let journal = self.journal.clone();
        settle(env, "NativeJournal.get", async move { journal.get(&key).await }, |value| value)
    }

    /// The new count, or null at the ceiling `limit`.
    #[napi(ts_return_type = "Promise<number | null>")]
    pub fn reserve<'env>(
        &self,
        env: &'env Env,
        run_id: String,
        counter: String,
        limit: f64,
    ) -> napi::Result<PromiseRaw<'env, Option<f64>>> {
        let journal = self.journal.clone();
        // A JS number: anything not a whole number ≥ 0 is no limit a count can reach below.
        let limit = if limit.is_finite() && limit >= 0.0 { limit as u64 } else { u64::MAX };
        settle(env, "NativeJournal.reserve", async move { journal.reserve(&run_id, &counter, limit).await }, |count| {
            count.map(|c| c as f64)
        })
    }

    #[napi(ts_return_type = "Promise<void>")]
    pub fn release<'env>(&self, env: &'env Env, run_id: String, counter: String) -> napi::Result<PromiseRaw<'env, ()>> {
        let journal = self.journal.clone();
        settle(env, "NativeJournal.release", async move { journal.release(&run_id, &counter).await }, drop)
    }

    #[napi(ts_return_type = "Promise<number>")]
    pub fn count<'env>(&self, env: &'env Env, run_id: String, counter: String) -> napi::Result<PromiseRaw<'env, f64>> {
        let journal = self.journal.clone();
        settle(env, "NativeJournal.count", async move { journal.count(&run_id, &counter).await }, |count| count as f64)
    }
}

#[napi]
pub struct NativeFirewall {
    firewall: Arc<Firewall>,
}

fn request(json: &str) -> Result<FirewallRequest> {
    serde_json::from_str(json).map_err(|e| McpError::InvalidArguments(format!("not a policy request: {e}")))
}

#[napi]
impl NativeFirewall {
    /// From `mcpFirewall`'s options as JSON and the journal's id.
    #[napi(factory)]
    pub fn create(options_json: String, journal_id: u32) -> napi::Result<Self, String> {
        guard("NativeFirewall.create", || {
            Ok(NativeFirewall { firewall: Arc::new(Firewall::new(&options_json, JOURNALS.get(journal_id)?)?) })
        })
    }

    /// The decision for a `policy.decide` request (JSON), as `{ kind, reason? }` JSON.
    #[napi(ts_return_type = "Promise<string>")]
    pub fn decide<'env>(&self, env: &'env Env, request_json: String) -> napi::Result<PromiseRaw<'env, String>> {
        let firewall = self.firewall.clone();
        let decided = async move { firewall.decide(&request(&request_json)?).await };
        settle(env, "NativeFirewall.decide", decided, |decision| {
            serde_json::to_string(&decision).expect("decisions serialize")
        })
    }

    /// A call the firewall decided has settled (`succeeded`: it returned a result).
    #[napi(ts_return_type = "Promise<void>")]
    pub fn record<'env>(
        &self,
        env: &'env Env,
        request_json: String,
        succeeded: bool,
    ) -> napi::Result<PromiseRaw<'env, ()>> {
        let firewall = self.firewall.clone();
        settle(
            env,
            "NativeFirewall.record",
            async move { firewall.record(&request(&request_json)?, succeeded).await },
            drop,
        )
    }
}
