//! `NativeToolset`: one toolset behind the boundary, and the stdio readers JavaScript runs for it.

use super::errors::{guard, settle};
use super::hooks::{hook, hosts_hook, EventCallback, JsCallback, JsEvents};
use super::runtime::{release_freed_memory, within_runtime};
use super::store::{toolset_store, StoreDispatcher};
use super::token_store::{toolset_token_store, TokenStoreDispatcher};
use super::wire::{parse_calls, CompletionWake, Completions};
use crate::diagnostics::Diagnostic;
use crate::error::McpError;
use crate::hooks::Hooks;
use crate::projection::ProjectedTool;
use crate::toolset::{CallSink, Toolset, ToolsetEvents, LOCAL_SERVER};
use crate::transport::stdio::{ExternalReader, ReaderHost};
use napi::bindgen_prelude::*;
use napi_derive::napi;
use parking_lot::Mutex;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;

/// Hands stdio servers' stdout to JavaScript to read on its own event loop (Node): an `stdio-reader`
/// event carries the reader id and a file descriptor; bytes come back through `feedStdout`.
struct JsReaderHost {
    events: Arc<JsEvents>,
    readers: Mutex<HashMap<u32, Arc<ExternalReader>>>,
    next_id: AtomicU32,
}

impl ReaderHost for JsReaderHost {
    fn attach(&self, reader: Arc<ExternalReader>, fd: crate::transport::stdio::RawFd) {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        self.readers.lock().insert(id, reader);
        self.events.emit("stdio-reader", serde_json::json!({ "readerId": id, "fd": fd }).to_string());
    }
}

/// `{"tools": [...], "diagnostics": [...]}`, what `connect` and `rebuild` resolve to.
fn opened(tools: Vec<ProjectedTool>, diagnostics: Vec<Diagnostic>) -> String {
    let out = serde_json::json!({ "tools": tools, "diagnostics": diagnostics }).to_string();
    drop(tools);
    release_freed_memory();
    out
}

/// A set of MCP server connections behind one tool map.
#[napi]
pub struct NativeToolset {
    pub(super) inner: Arc<Toolset>,
    completions: Arc<Completions>,
    readers: Option<Arc<JsReaderHost>>,
    events: Arc<JsEvents>,
}

impl NativeToolset {
    /// `guard`, plus an `internal-error` diagnostic when a panic was contained, so the application's
    /// `onDiagnostic` hears of the engine bug even where the thrown error is caught and absorbed.
    fn guarded<T>(
        &self,
        entry: &'static str,
        body: impl FnOnce() -> crate::error::Result<T>,
    ) -> napi::Result<T, String> {
        guard(entry, body).inspect_err(|error| {
            if error.status == McpError::Internal(String::new()).code() {
                let diagnostic =
                    Diagnostic::InternalError { server: LOCAL_SERVER.to_owned(), message: error.reason.clone() };
                self.events.diagnostic(&diagnostic);
            }
        })
    }
}

#[napi]
impl NativeToolset {
    /// `configJson` is the server list and options as JSON, validated by the engine (see `config.rs`);
    /// `onEvent(kind, payloadJson)` receives `diagnostic`, `tools` (tool-map change) and
    /// `stdio-reader` events. The optional callbacks are the application's `auth` (server → token),
    /// `allowedHosts` resolver (server → JSON array), `policy.decide` (request JSON → decision JSON)
    /// and `policy.ask` (question JSON → approved); `onElicitation` (request JSON → result JSON) is last.
    #[napi(constructor)]
    #[allow(clippy::too_many_arguments)] // each optional callback is its own argument so JS passes plain functions
    pub fn new(
        config_json: String,
        #[napi(ts_arg_type = "(kind: string, payloadJson: string) => void")] on_event: EventCallback,
        #[napi(ts_arg_type = "() => void")] on_completions: CompletionWake,
        #[napi(ts_arg_type = "((server: string) => Promise<string>) | undefined | null")] auth: Option<
            JsCallback<String>,
        >,
        #[napi(ts_arg_type = "((server: string) => Promise<string>) | undefined | null")] allowed_hosts: Option<
            JsCallback<String>,
        >,
        #[napi(ts_arg_type = "((requestJson: string) => Promise<string>) | undefined | null")] decide: Option<
            JsCallback<String>,
        >,
        #[napi(ts_arg_type = "((questionJson: string) => Promise<boolean>) | undefined | null")] ask: Option<
            JsCallback<bool>,
        >,
        native_store_id: Option<u32>,
        read_stdio_in_js: bool,
        #[napi(ts_arg_type = "((op: string, argsJson: string) => Promise<string>) | undefined | null")]
        js_store: Option<StoreDispatcher>,
        #[napi(ts_arg_type = "((promptJson: string) => Promise<string>) | undefined | null")]
        on_authorization_url: Option<JsCallback<String>>,
        native_token_store_id: Option<u32>,
        #[napi(ts_arg_type = "((op: string, argsJson: string) => Promise<string>) | undefined | null")] js_token_store: Option<TokenStoreDispatcher>,
        #[napi(ts_arg_type = "((requestJson: string) => Promise<string>) | undefined | null")] on_elicitation: Option<
            JsCallback<String>,
        >,
    ) -> Result<Self, String> {
        guard("NativeToolset.new", || {
            let config = crate::config::parse(&config_json)?;
            config.callbacks.check_given(auth.is_some(), allowed_hosts.is_some(), decide.is_some(), ask.is_some())?;
            if config.callbacks.authorization_url != on_authorization_url.is_some() {
                return Err(McpError::config("the callbacks handed to the engine do not match the options"));
            }
            config.callbacks.check_elicitation_given(on_elicitation.is_some())?;
            let store = toolset_store(native_store_id, js_store)?;
            let token_store = toolset_token_store(native_token_store_id, js_token_store)?;
            if config.token_store != token_store.is_some() {
                return Err(McpError::config("options.tokenStore was not handed to the engine as a token store"));
            }
            if config.storage != store.is_some() {
                return Err(McpError::config("options.storage was not handed to the engine as a store"));
            }
            let events = Arc::new(JsEvents::new(on_event));
            let events_for_panics = events.clone();
            let readers = read_stdio_in_js.then(|| {
                Arc::new(JsReaderHost {
                    events: events.clone(),
                    readers: Mutex::new(HashMap::new()),
                    next_id: AtomicU32::new(1),
                })
            });
            let hooks = Hooks {
                auth: hook(auth),
                allowed_hosts: hosts_hook(allowed_hosts),
                decide: hook(decide),
                ask: hook(ask),
                stdio_reader: readers.clone().map(|r| r as Arc<dyn ReaderHost>),
                authorization_url: hook(on_authorization_url),
                token_store,
                elicit: hook(on_elicitation),
            };
            let toolset = Toolset::new(config, hooks, store, events)?;
            let completions = Completions::new(on_completions);
            Ok(NativeToolset { inner: Arc::new(toolset), completions, readers, events: events_for_panics })
        })
    }

    /// Connect every enabled server; resolves to `{"tools": [...], "diagnostics": [...]}` as JSON.
    #[napi(ts_return_type = "Promise<string>")]
    pub fn connect<'env>(&self, env: &'env Env) -> napi::Result<PromiseRaw<'env, String>> {
        let inner = self.inner.clone();
        // Serialized (and memory trimmed) on the engine's thread, not in the JS-thread resolve.
        let connected = async move {
            let (tools, diagnostics) = inner.connect().await;
            Ok(opened(tools, diagnostics))
        };
        settle(env, "NativeToolset.connect", connected, |json| json)
    }

    /// Project the tool map from storage (no server is asked anything first); reconnection and
    /// reconciliation continue in the background. Same JSON shape as `connect`.
    #[napi(ts_return_type = "Promise<string>")]
    pub fn rebuild<'env>(&self, env: &'env Env, stdio_allowed: bool) -> napi::Result<PromiseRaw<'env, String>> {
        let inner = self.inner.clone();
        let rebuilt =
            async move { inner.rebuild(stdio_allowed).await.map(|(tools, diagnostics)| opened(tools, diagnostics)) };
        settle(env, "NativeToolset.rebuild", rebuilt, |json| json)
    }

    /// The MCP section of a system prompt for this toolset (never server instructions).
    #[napi]
    pub fn system_prompt(&self) -> Result<String, String> {
        self.guarded("NativeToolset.systemPrompt", || Ok(self.inner.system_prompt()))
    }

    /// Every configured server's state (`toolset.servers()`), as JSON.
    #[napi]
    pub fn servers(&self) -> Result<String, String> {
        self.guarded("NativeToolset.servers", || {
            Ok(serde_json::to_string(&self.inner.servers()).expect("statuses serialize"))
        })
    }

    /// Resolves when background reconciliation after `rebuild` has finished.
    #[napi(ts_return_type = "Promise<void>")]
    pub fn reconciled<'env>(&self, env: &'env Env) -> napi::Result<PromiseRaw<'env, ()>> {
        let inner = self.inner.clone();
        let reconciled = async move {
            inner.reconciled().await;
            Ok(())
        };
        settle(env, "NativeToolset.reconciled", reconciled, drop)
    }

    /// Start tool calls (the batch format is in `wire.rs`). Outcomes arrive through the
    /// `onCompletions` callback and `drainCompletions`.
    #[napi]
    pub fn call_tools(&self, batch: String) -> Result<(), String> {
        self.guarded("NativeToolset.callTools", || {
            let calls = parse_calls(&batch)?;
            let sink = self.completions.clone() as Arc<dyn CallSink>;
            within_runtime(|| self.inner.start_calls(calls, &sink));
            Ok(())
        })
    }

    /// Every outcome since the last drain (the format is in `wire.rs`).
    #[napi]
    pub fn drain_completions(&self) -> Result<String, String> {
        self.guarded("NativeToolset.drainCompletions", || Ok(self.completions.drain()))
    }

    /// Bytes a stdio server wrote, read by JavaScript. Returns the call outcomes they completed, in the
    /// `drainCompletions` format, so a response costs no wake-up at all. (Typed `Uint8Array`, which a
    /// Buffer is, so the generated types need no @types/node.)
    #[napi(ts_args_type = "readerId: number, chunk: Uint8Array")]
    pub fn feed_stdout(&self, reader_id: u32, chunk: Buffer) -> Result<String, String> {
        self.guarded("NativeToolset.feedStdout", || {
            let reader = self.readers.as_ref().and_then(|r| r.readers.lock().get(&reader_id).cloned());
            Ok(match reader {
                Some(reader) => self.completions.feeding(|| within_runtime(|| reader.feed(&chunk))),
                None => self.completions.drain(),
            })
        })
    }

    /// The stdout JavaScript was reading ended (`error` set if it failed).
    #[napi]
    pub fn stdout_ended(&self, reader_id: u32, error: Option<String>) -> Result<(), String> {
        self.guarded("NativeToolset.stdoutEnded", || {
            let reader = self.readers.as_ref().and_then(|r| r.readers.lock().remove(&reader_id));
            if let Some(reader) = reader {
                let failure = error.map(|e| McpError::Transport(format!("MCP server stdout failed: {e}")));
                within_runtime(|| reader.end(failure));
            }
            Ok(())
        })
    }

    /// Abort the call started with `abortId`.
    #[napi]
    pub fn abort(&self, abort_id: u32) -> Result<(), String> {
        self.guarded("NativeToolset.abort", || {
            within_runtime(|| self.inner.abort(abort_id));
            Ok(())
        })
    }

    /// The host's `signal` fired: end every login in progress (`mcp_aborted`); none starts again.
    #[napi]
    pub fn abort_logins(&self) -> Result<(), String> {
        self.guarded("NativeToolset.abortLogins", || {
            within_runtime(|| self.inner.abort_logins());
            Ok(())
        })
    }

    /// Close every connection; resolves once the engine has let go of every server.
    #[napi(ts_return_type = "Promise<void>")]
    pub fn close<'env>(&self, env: &'env Env) -> napi::Result<PromiseRaw<'env, ()>> {
        let inner = self.inner.clone();
        let closed = async move {
            inner.close().await;
            Ok(())
        };
        settle(env, "NativeToolset.close", closed, drop)
    }
}

/// `logoutMcpServer`: `configJson` is `{"servers": [entry], "options": {tokenStore, allowedHosts?, proxy?}}`;
/// the tokens kept for the entry are revoked where the authorization server offers it, then forgotten.
#[napi(ts_return_type = "Promise<void>")]
#[cfg_attr(test, allow(dead_code))] // Node calls it; napi registers no free function in a test build
pub fn logout_server<'env>(
    env: &'env Env,
    config_json: String,
    native_token_store_id: Option<u32>,
    #[napi(ts_arg_type = "((op: string, argsJson: string) => Promise<string>) | undefined | null")]
    js_token_store: Option<TokenStoreDispatcher>,
) -> napi::Result<PromiseRaw<'env, ()>> {
    let logout = async move {
        let config = crate::config::parse(&config_json)?;
        let [entry] = <[_; 1]>::try_from(config.servers)
            .map_err(|_| McpError::config("logoutMcpServer takes one server entry"))?;
        let store = toolset_token_store(native_token_store_id, js_token_store)?
            .ok_or_else(|| McpError::config("logoutMcpServer needs the tokenStore the server's tokens are kept in"))?;
        let guard = config.allowed_hosts.as_deref().map(crate::guard::hosts::HostGuard::new).transpose()?.map(Arc::new);
        crate::auth::logout(&entry, store, &crate::egress::EgressPolicy { guard, proxy: config.proxy }).await
    };
    settle(env, "logoutServer", logout, |()| ())
}
