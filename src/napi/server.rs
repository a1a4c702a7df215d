//! `createMcpServer` across the boundary: `NativeServer` holds a server core (src/server/) and its
//! listeners; the host's `execute` is one dispatcher `(tool, requestJson) => Promise<replyJson>`, where
//! the reply is `{"value": …}`, `{"error": "message"}` or `{"invalid": "why"}` (the TS layer catches
//! every throw, so no JavaScript exception reaches the engine as anything but an `error` reply).

use super::errors::{guard, settle};
use super::firewall::JOURNALS;
use super::hooks::JsDispatcher;
use crate::error::{McpError, Result};
use crate::server::http::{self, HttpListener, HttpOptions};
use crate::server::{stdio, ArgumentCheck, Execution, McpServerCore, ToolHost};
use futures_util::future::BoxFuture;
use napi::bindgen_prelude::*;
use napi_derive::napi;
use parking_lot::Mutex;
use serde::Deserialize;
use serde_json::value::RawValue;
use std::sync::atomic::Ordering;
use std::sync::Arc;

/// The host's dispatcher, and the served reports sent to it and not yet taken (bounded: see `served`).
struct JsHost(Arc<JsDispatcher>, crate::server::ReportBacklog);

#[derive(Deserialize)]
#[serde(rename_all = "lowercase")]
enum Reply {
    Value(Box<RawValue>),
    Error(String),
    Invalid(String),
    /// `execute` did not settle within `callTimeoutMs` (its signal was aborted).
    Timeout(serde::de::IgnoredAny),
}

/// The dispatcher's reserved "tool" that aborts a running execute's signal (`{"callId": n}`); tool
/// names cannot contain NUL, so no published tool has it.
pub(crate) const ABORT_CALL: &str = "\0abort";
/// The dispatcher's reserved "tool" that tells the host of a request the engine answered itself (its
/// report as the request JSON, `dispatch::Served`), for its telemetry; its reply is ignored.
pub(crate) const SERVED_REPORT: &str = "\0served";
static NEXT_CALL_ID: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);

/// While a call's execute runs: dropped before it settles (its lease was lost, the engine stopped
/// waiting), it aborts the execute's signal in JavaScript.
struct AbortUnlessSettled {
    dispatcher: Arc<JsDispatcher>,
    call_id: u64,
    settled: bool,
}

impl Drop for AbortUnlessSettled {
    fn drop(&mut self) {
        if !self.settled {
            let request = serde_json::json!({ "callId": self.call_id }).to_string();
            let _ = self.dispatcher.call(
                (ABORT_CALL.to_owned(), request).into(),
                napi::threadsafe_function::ThreadsafeFunctionCallMode::NonBlocking,
            );
        }
    }
}

impl ToolHost for JsHost {
    fn execute(&self, tool: &str, request: String) -> BoxFuture<'static, Result<Execution>> {
        let dispatcher = self.0.clone();
        let tool = tool.to_owned();
        let call_id = NEXT_CALL_ID.fetch_add(1, Ordering::Relaxed);
        // `request` is a JSON object with members: the call's id joins them.
        let request = match request.strip_prefix('{') {
            Some(rest) => format!("{{\"callId\":{call_id},{rest}"),
            None => request,
        };
        Box::pin(async move {
            let mut running = AbortUnlessSettled { dispatcher: dispatcher.clone(), call_id, settled: false };
            let promise = dispatcher.call_async_catch((tool.clone(), request).into()).await.map_err(|e| {
                McpError::Internal(format!("the execute of {tool:?} could not be called: {}", e.reason))
            })?;
            let settled = promise.await;
            running.settled = true;
            let reply = match settled {
                Ok(reply) => reply,
                Err(e) => return Ok(Execution::Failed(e.reason)),
            };
            match serde_json::from_str::<Reply>(&reply) {
                Ok(Reply::Value(value)) => Ok(Execution::Value(value.get().to_owned())),
                Ok(Reply::Error(message)) => Ok(Execution::Failed(message)),
                Ok(Reply::Invalid(why)) => Ok(Execution::Invalid(why)),
                Ok(Reply::Timeout(_)) => Ok(Execution::TimedOut),
                Err(e) => Err(McpError::Internal(format!("the execute of {tool:?} replied with malformed data: {e}"))),
            }
        })
    }

    fn served(&self, report: String) {
        // The threadsafe function's queue has no bound: past the backlog's, a report is dropped, not queued.
        let Some(place) = self.1.admit() else { return };
        // The place is given back once JavaScript took the report (or, if it could not be queued, now).
        let _ = self.0.call_with_return_value(
            (SERVED_REPORT.to_owned(), report).into(),
            napi::threadsafe_function::ThreadsafeFunctionCallMode::NonBlocking,
            move |_, _| {
                drop(place);
                Ok(())
            },
        );
    }
}

#[derive(Default)]
struct Listeners {
    http: Vec<HttpListener>,
    stdio: Option<stdio::StdinServing>,
}

#[napi]
pub struct NativeServer {
    core: Arc<McpServerCore>,
    listeners: Arc<Mutex<Listeners>>,
}

/// The engine's check of a tool's arguments against its JSON Schema (src/schema/). A schema the
/// validator cannot compile (a reference to another document, over its bounds) is published as it is
/// and not checked, rather than risk refusing good arguments.
fn compile(schema: &serde_json::Value) -> Option<ArgumentCheck> {
    let compiled = crate::schema::CompiledSchema::compile_value(schema).ok()?;
    Some(Box::new(move |arguments| compiled.validate(arguments).map_err(|violation| violation.to_string())))
}

#[napi]
impl NativeServer {
    /// From `createMcpServer`'s options as JSON, a journal id (or none) and the host's dispatcher.
    #[napi(
        factory,
        ts_args_type = "specJson: string, journalId: number | undefined | null, execute: (tool: string, requestJson: string) => Promise<string>"
    )]
    pub fn create(spec_json: String, journal_id: Option<u32>, execute: JsDispatcher) -> napi::Result<Self, String> {
        guard("NativeServer.create", || {
            let journal = journal_id.map(|id| JOURNALS.get(id)).transpose()?;
            let core = McpServerCore::new(
                &spec_json,
                Arc::new(JsHost(Arc::new(execute), Default::default())),
                journal,
                &compile,
            )?;
            Ok(NativeServer { core, listeners: Arc::default() })
        })
    }

    /// One call in process: the `CallToolResult` as JSON.
    #[napi(ts_return_type = "Promise<string>")]
    pub fn call_tool<'env>(
        &self,
        env: &'env Env,
        name: String,
        arguments_json: Option<String>,
        idempotency_key: Option<String>,
    ) -> napi::Result<PromiseRaw<'env, String>> {
        let core = self.core.clone();
        let called = async move {
            let arguments = arguments_json
                .map(|json| {
                    serde_json::from_str(&json)
                        .map_err(|e| McpError::InvalidArguments(format!("the arguments are not JSON: {e}")))
                })
                .transpose()?;
            core.call(&name, arguments, idempotency_key.as_deref()).await.map_err(McpError::from)
        };
        settle(env, "NativeServer.callTool", called, |result| result)
    }

    /// Serves Streamable HTTP; resolves with `{"host", "port", "path"}` once listening.
    #[napi(ts_return_type = "Promise<string>")]
    pub fn listen_http<'env>(&self, env: &'env Env, options_json: String) -> napi::Result<PromiseRaw<'env, String>> {
        let (core, listeners) = (self.core.clone(), self.listeners.clone());
        let listening = async move {
            let listener = http::listen(core, HttpOptions::parse(&options_json)?).await?;
            let address = serde_json::json!({ "host": listener.address.ip().to_string(), "port": listener.address.port(), "path": listener.path }).to_string();
            listeners.lock().http.push(listener);
            Ok(address)
        };
        settle(env, "NativeServer.listenHttp", listening, |address| address)
    }

    /// Serves this process's stdin/stdout; resolves when stdin ends or the server is closed.
    #[napi(ts_return_type = "Promise<void>")]
    pub fn serve_stdio<'env>(&self, env: &'env Env) -> napi::Result<PromiseRaw<'env, ()>> {
        // Claimed and registered now (see `stdio::serve_process_stdin`); a refusal rejects the promise.
        let claimed = stdio::serve_process_stdin(self.core.clone()).map(|(handle, serving)| {
            self.listeners.lock().stdio = Some(handle);
            serving
        });
        let serving = async move { claimed?.await };
        settle(env, "NativeServer.serveStdio", serving, drop)
    }

    /// Stops every listener (stdio stops reading; HTTP closes its socket and connections). Calls in
    /// process keep working.
    #[napi(ts_return_type = "Promise<void>")]
    pub fn close<'env>(&self, env: &'env Env) -> napi::Result<PromiseRaw<'env, ()>> {
        let listeners = std::mem::take(&mut *self.listeners.lock());
        let closing = async move {
            if let Some(serving) = listeners.stdio {
                serving.stop.cancel();
                // close() resolves once stdin is free for the next listen().
                let _ = serving.released.await;
            }
            for listener in listeners.http {
                listener.close().await;
            }
            Ok(())
        };
        settle(env, "NativeServer.close", closing, drop)
    }
}
