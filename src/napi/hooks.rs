//! The application's callbacks (`auth`, the `allowedHosts` resolver, `policy.decide`, `policy.ask`,
//! `onElicitation`) and the event channel, as threadsafe functions the engine can call from any thread.
//!
//! Every one is weak: a toolset the program forgot to close never keeps the process alive. Each is
//! called with `call_async_catch`, so a callback that throws synchronously becomes an error the
//! engine handles, not a crash.

use crate::diagnostics::Diagnostic;
use crate::hooks::Callback;
use crate::toolset::{ToolsChange, ToolsetEvents};
use futures_util::future::BoxFuture;
use napi::bindgen_prelude::*;
use napi::threadsafe_function::{ThreadsafeFunction, ThreadsafeFunctionCallMode};
use std::sync::Arc;

/// A user callback taking one string and returning a Promise.
pub(crate) type JsCallback<R> = ThreadsafeFunction<String, Promise<R>, String, Status, false, true>;

/// `(kind, payloadJson)`: `diagnostic`, `tools` (a tool-map change) and `stdio-reader` events.
pub(crate) type EventCallback =
    ThreadsafeFunction<FnArgs<(String, String)>, (), FnArgs<(String, String)>, Status, false, true>;

struct JsHook<R: FromNapiValue + Send + 'static>(Arc<JsCallback<R>>);

impl<R: FromNapiValue + Send + 'static> Callback<String, R> for JsHook<R> {
    fn call(&self, arg: String) -> BoxFuture<'static, std::result::Result<R, String>> {
        let callback = self.0.clone();
        Box::pin(async move {
            let promise = callback.call_async_catch(arg).await.map_err(|e| e.reason.clone())?;
            promise.await.map_err(|e| e.reason.clone())
        })
    }
}

/// An object implemented in JavaScript, reached through one function `(op, argsJson) => Promise<resultJson>`:
/// a connection store, a token store, a journal, a server's `execute` host. Weak, like every callback.
pub(crate) type JsDispatcher =
    ThreadsafeFunction<FnArgs<(String, String)>, Promise<String>, FnArgs<(String, String)>, Status, false, true>;

/// Asks a storage object implemented in JavaScript (`what`: `store`, `token store`, `journal`) for `op`
/// with `args`. A throw, a rejection or a released function is `mcp_storage_error` with the JS error's
/// own message (the host's code; the engine never puts a value in it).
pub(crate) fn ask_storage(
    dispatcher: &Arc<JsDispatcher>,
    what: &'static str,
    op: &'static str,
    args: serde_json::Value,
) -> BoxFuture<'static, crate::error::Result<String>> {
    let dispatcher = dispatcher.clone();
    Box::pin(async move {
        let failed = |e: napi::Error| crate::error::McpError::Storage(format!("{what}: {op} failed: {}", e.reason));
        let promise = dispatcher.call_async_catch((op.to_owned(), args.to_string()).into()).await.map_err(failed)?;
        promise.await.map_err(failed)
    })
}

pub(crate) fn hook<R: FromNapiValue + Send + 'static>(
    callback: Option<JsCallback<R>>,
) -> Option<Arc<dyn Callback<String, R>>> {
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

pub(crate) fn hosts_hook(callback: Option<JsCallback<String>>) -> Option<Arc<dyn Callback<String, Vec<String>>>> {
    hook(callback).map(|h| Arc::new(HostsHook(h)) as Arc<dyn Callback<String, Vec<String>>>)
}

pub(crate) struct JsEvents {
    callback: EventCallback,
}

impl JsEvents {
    pub(crate) fn new(callback: EventCallback) -> Self {
        JsEvents { callback }
    }

    pub(crate) fn emit(&self, kind: &str, payload: String) {
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

    fn elicitation_withdrawn(&self, ask_id: u64) {
        self.emit("elicitation-withdrawn", format!(r#"{{"askId":{ask_id}}}"#));
    }

    fn tools_list_announced(&self, server: &str) {
        self.emit("tools-announced", serde_json::json!({ "server": server }).to_string());
    }

    fn resource_updated(&self, server: &str, uri: &str) {
        self.emit("resource-updated", serde_json::json!({ "server": server, "uri": uri }).to_string());
    }

    fn operation(&self, server: &str, operation: &crate::telemetry::operation::Operation) {
        self.emit("operation", operation.to_json(server));
    }
}
