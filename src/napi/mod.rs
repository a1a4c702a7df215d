//! The JavaScript boundary. It converts and delegates; every decision is made in the engine.
//!
//! JSON crosses as strings, never as napi objects (a string crosses in under a microsecond, an object
//! graph in tens). Errors cross as `Error`s whose message starts with `[code] `; the TypeScript layer
//! turns that into typed error classes with a stable `code`.

use crate::diagnostics::Diagnostic;
use crate::error::McpError;
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
    /// `diagnostic` and `tools` (tool-map change) events.
    #[napi(constructor)]
    pub fn new(
        config_json: String,
        #[napi(ts_arg_type = "(kind: string, payloadJson: string) => void")] on_event: EventCallback,
    ) -> Result<Self> {
        let config = crate::config::parse(&config_json).map_err(to_js_error)?;
        let events = Arc::new(JsEvents { callback: on_event });
        Ok(NativeToolset { inner: Arc::new(Toolset::new(config, events)) })
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
