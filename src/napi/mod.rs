//! The JavaScript boundary. It converts and delegates; every decision is made in the engine.
//!
//! JSON crosses as strings, never as napi objects (a string crosses in under a microsecond, an object
//! graph in tens). Errors cross as `Error`s whose message starts with `[code] `; the TypeScript layer
//! turns that into typed error classes with a stable `code`.

use crate::diagnostics::Diagnostic;
use crate::error::McpError;
use crate::hooks::{Callback, Hooks};
use crate::transport::BoxFuture;
use crate::toolset::{Toolset, ToolsChange, ToolsetEvents};
use napi::bindgen_prelude::*;
use napi::threadsafe_function::{ThreadsafeFunction, ThreadsafeFunctionCallMode};
use napi_derive::napi;
use std::sync::Arc;

/// `(kind, payloadJson)`; weak so a toolset the program forgot to close never keeps the process alive.
type EventCallback = ThreadsafeFunction<FnArgs<(String, String)>, (), FnArgs<(String, String)>, Status, false, true>;

fn to_js_error(error: McpError) -> napi::Error {
    napi::Error::new(Status::GenericFailure, format!("[{}] {}", error.code(), error))
}

/// A user callback taking one string and returning a Promise. Weak: it never keeps the process alive.
type JsCallback<R> = ThreadsafeFunction<String, Promise<R>, String, Status, false, true>;

struct JsHook<R: FromNapiValue + Send + 'static>(Arc<JsCallback<R>>);

impl<R: FromNapiValue + Send + 'static> Callback<String, R> for JsHook<R> {
    fn call(&self, arg: String) -> BoxFuture<'static, std::result::Result<R, String>> {
        let callback = self.0.clone();
        Box::pin(async move {
            // `call_async_catch`: a callback that throws synchronously becomes an error, not a crash.
            let promise = callback.call_async_catch(arg).await.map_err(|e| e.reason.clone())?;
            promise.await.map_err(|e| e.reason.clone())
        })
    }
}

fn hook<R: FromNapiValue + Send + 'static>(callback: Option<JsCallback<R>>) -> Option<Arc<dyn Callback<String, R>>> {
    callback.map(|c| Arc::new(JsHook(Arc::new(c))) as Arc<dyn Callback<String, R>>)
}

/// The allowedHosts resolver answers with a JSON array of hosts.
struct HostsHook(Arc<dyn Callback<String, String>>);

impl Callback<String, Vec<String>> for HostsHook {
    fn call(&self, arg: String) -> BoxFuture<'static, std::result::Result<Vec<String>, String>> {
        let inner = self.0.call(arg);
        Box::pin(async move {
            let json = inner.await?;
            serde_json::from_str(&json).map_err(|_| "allowedHosts must resolve to an array of strings".to_owned())
        })
    }
}

struct JsEvents {
    callback: EventCallback,
}

impl JsEvents {
    fn emit(&self, kind: &str, payload: String) {
        self.callback.call((kind.to_owned(), payload).into(), ThreadsafeFunctionCallMode::NonBlocking);
    }
}

impl ToolsetEvents for JsEvents {
    fn diagnostic(&self, diagnostic: &Diagnostic) {
        self.emit("diagnostic", serde_json::to_string(diagnostic).expect("diagnostics serialize"));
    }

    fn tools_changed(&self, change: &ToolsChange) {
        self.emit("tools", serde_json::to_string(change).expect("tool changes serialize"));
    }
}

/// A set of MCP server connections behind one tool map.
#[napi]
pub struct NativeToolset {
    inner: Arc<Toolset>,
}

#[napi]
impl NativeToolset {
    /// `configJson` is the server list and options as JSON; `onEvent(kind, payloadJson)` receives
    /// `diagnostic` and `tools` (tool-map change) events. The optional callbacks are the application's
    /// `auth` (server → token), `allowedHosts` resolver (server → JSON array), `policy.decide`
    /// (request JSON → decision JSON) and `policy.ask` (question JSON → approved).
    #[napi(constructor)]
    pub fn new(
        config_json: String,
        #[napi(ts_arg_type = "(kind: string, payloadJson: string) => void")] on_event: EventCallback,
        #[napi(ts_arg_type = "((server: string) => Promise<string>) | undefined | null")] auth: Option<JsCallback<String>>,
        #[napi(ts_arg_type = "((server: string) => Promise<string>) | undefined | null")] allowed_hosts: Option<JsCallback<String>>,
        #[napi(ts_arg_type = "((requestJson: string) => Promise<string>) | undefined | null")] decide: Option<JsCallback<String>>,
        #[napi(ts_arg_type = "((questionJson: string) => Promise<boolean>) | undefined | null")] ask: Option<JsCallback<bool>>,
    ) -> Result<Self> {
        let config = crate::config::parse(&config_json).map_err(to_js_error)?;
        let events = Arc::new(JsEvents { callback: on_event });
        let hooks = Hooks {
            auth: hook(auth),
            allowed_hosts: hook(allowed_hosts).map(|h| Arc::new(HostsHook(h)) as Arc<dyn Callback<String, Vec<String>>>),
            decide: hook(decide),
            ask: hook(ask),
        };
        let toolset = Toolset::new(config, hooks, events).map_err(to_js_error)?;
        Ok(NativeToolset { inner: Arc::new(toolset) })
    }

    /// Connect every enabled server; resolves to `{"tools": [...], "diagnostics": [...]}` as JSON.
    #[napi]
    pub async fn connect(&self) -> Result<String> {
        let (tools, diagnostics) = self.inner.connect().await;
        let out = serde_json::json!({ "tools": tools, "diagnostics": diagnostics });
        Ok(out.to_string())
    }

    /// Call a projected tool with JSON arguments; resolves to the raw JSON result text.
    #[napi]
    pub async fn call_tool(&self, name: String, arguments_json: String, abort_id: u32) -> Result<String> {
        let result = self.inner.call_tool(&name, &arguments_json, abort_id).await.map_err(to_js_error)?;
        Ok(result.into())
    }

    /// Abort the call started with `abortId`.
    #[napi]
    pub fn abort(&self, abort_id: u32) {
        self.inner.abort(abort_id);
    }

    #[napi]
    pub async fn close(&self) -> Result<()> {
        self.inner.close().await;
        Ok(())
    }
}

/// The engine's own version, to check that the loaded binary matches the package.
#[napi]
#[allow(dead_code)] // called from JavaScript only
pub fn engine_version() -> String {
    env!("CARGO_PKG_VERSION").to_owned()
}
