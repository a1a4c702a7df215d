//! `NativeToolset`: one toolset behind the boundary, and the stdio readers JavaScript runs for it.

use super::errors::{guard, settle};
use super::hooks::JsDispatcher;
use super::hooks::{hook, hosts_hook, EventCallback, JsCallback, JsEvents};
use super::runtime::{release_freed_memory, within_runtime};
use super::store::toolset_store;
use super::token_store::toolset_token_store;
use super::wire::{parse_calls, CompletionWake, Completions};
use crate::config::HandedOver;
use crate::diagnostics::Diagnostic;
use crate::error::McpError;
use crate::projection::ProjectedTool;
use crate::toolset::Hooks;
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
    /// Written straight to text: through a `Value` (`json!`), every tool and its schemas became a tree first.
    #[derive(serde::Serialize)]
    struct Opened<'a> {
        tools: &'a [ProjectedTool],
        diagnostics: &'a [Diagnostic],
    }
    let out =
        serde_json::to_string(&Opened { tools: &tools, diagnostics: &diagnostics }).expect("a tool map serializes");
    drop(tools);
    release_freed_memory(out.len() >= RELEASE_FREED_MEMORY_AT_ONCE_BYTES);
    out
}

/// The size of an opened tool map (its JSON) after which the memory its parsing freed is given back to the
/// system at once: some thousand tools (W5's 2 000 are ~0.5 MiB). After a smaller one (a session's few dozen
/// tools) it is given back at most once per `RELEASE_FREED_MEMORY_INTERVAL_MS` (see `release_freed_memory`).
const RELEASE_FREED_MEMORY_AT_ONCE_BYTES: usize = 256 * 1024;

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

/// What `new NativeToolset(options)` takes: the configuration as JSON (validated by the engine, see
/// `config.rs`), the two channels back to JavaScript, and the host's optional callbacks and objects, each
/// handed over exactly when the configuration's markers say the options hold it.
#[napi(object, object_to_js = false)]
pub struct NativeToolsetOptions {
    pub config_json: String,
    /// Receives `diagnostic`, `tools` (tool-map change) and `stdio-reader` events.
    #[napi(ts_type = "(kind: string, payloadJson: string) => void")]
    pub on_event: EventCallback,
    /// Says call outcomes are waiting to be drained.
    #[napi(ts_type = "() => void")]
    pub on_completions: CompletionWake,
    /// `auth`: server → bearer token.
    #[napi(ts_type = "((server: string) => Promise<string>) | undefined | null")]
    pub auth: Option<JsCallback<String>>,
    /// The `allowedHosts` resolver: server → JSON array of hosts.
    #[napi(ts_type = "((server: string) => Promise<string>) | undefined | null")]
    pub allowed_hosts: Option<JsCallback<String>>,
    /// `policy.decide`: request JSON → decision JSON.
    #[napi(ts_type = "((requestJson: string) => Promise<string>) | undefined | null")]
    pub decide: Option<JsCallback<String>>,
    /// `policy.ask`: question JSON → approved.
    #[napi(ts_type = "((questionJson: string) => Promise<boolean>) | undefined | null")]
    pub ask: Option<JsCallback<bool>>,
    /// `onAuthorizationUrl`: login prompt JSON.
    #[napi(ts_type = "((promptJson: string) => Promise<string>) | undefined | null")]
    pub on_authorization_url: Option<JsCallback<String>>,
    /// The servers' `oauth.assertion` callbacks: server → the workload's assertion (a JWT).
    #[napi(ts_type = "((server: string) => Promise<string>) | undefined | null")]
    pub workload_assertion: Option<JsCallback<String>>,
    /// `onElicitation`: request JSON → result JSON.
    #[napi(ts_type = "((requestJson: string) => Promise<string>) | undefined | null")]
    pub on_elicitation: Option<JsCallback<String>>,
    /// `storage`: a native store by id, or one implemented in JavaScript.
    pub native_store_id: Option<u32>,
    #[napi(ts_type = "((op: string, argsJson: string) => Promise<string>) | undefined | null")]
    pub js_store: Option<JsDispatcher>,
    /// `tokenStore`: a native token store by id, or one implemented in JavaScript.
    pub native_token_store_id: Option<u32>,
    #[napi(ts_type = "((op: string, argsJson: string) => Promise<string>) | undefined | null")]
    pub js_token_store: Option<JsDispatcher>,
    /// Stdio servers' stdout is read by JavaScript on its event loop (`stdio-reader` events).
    pub read_stdio_in_js: bool,
}

#[napi]
impl NativeToolset {
    /// A toolset from its options (see [`NativeToolsetOptions`]).
    #[napi(constructor)]
    pub fn new(options: NativeToolsetOptions) -> Result<Self, String> {
        guard("NativeToolset.new", || {
            let NativeToolsetOptions {
                config_json,
                on_event,
                on_completions,
                auth,
                allowed_hosts,
                decide,
                ask,
                on_authorization_url,
                workload_assertion,
                on_elicitation,
                native_store_id,
                js_store,
                native_token_store_id,
                js_token_store,
                read_stdio_in_js,
            } = options;
            let config = crate::config::parse(&config_json)?;
            let handed_over = HandedOver {
                auth: auth.is_some(),
                allowed_hosts: allowed_hosts.is_some(),
                decide: decide.is_some(),
                ask: ask.is_some(),
                authorization_url: on_authorization_url.is_some(),
                elicit: on_elicitation.is_some(),
                storage: native_store_id.is_some() || js_store.is_some(),
                token_store: native_token_store_id.is_some() || js_token_store.is_some(),
            };
            config.check_callbacks_handed_over(&handed_over)?;
            let store = toolset_store(native_store_id, js_store)?;
            let token_store = toolset_token_store(native_token_store_id, js_token_store)?;
            config.check_stores_handed_over(&handed_over)?;
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
                workload_assertion: hook(workload_assertion),
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
    js_token_store: Option<JsDispatcher>,
) -> napi::Result<PromiseRaw<'env, ()>> {
    let logout = async move {
        let store = || toolset_token_store(native_token_store_id, js_token_store);
        crate::toolset::logout_server(&config_json, store).await
    };
    settle(env, "logoutServer", logout, |()| ())
}
