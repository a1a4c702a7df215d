//! The JavaScript boundary. It converts and delegates; every decision is made in the engine.
//!
//! JSON crosses as strings, never as napi objects (a string crosses in under a microsecond, an object
//! graph in tens). Errors cross as `Error`s whose message starts with `[code] `; the TypeScript layer
//! turns that into typed error classes with a stable `code`.

use crate::diagnostics::Diagnostic;
use crate::error::McpError;
use crate::hooks::{Callback, Hooks};
use crate::transport::BoxFuture;
use crate::store::{self, ConnectionStore, Fingerprints, MemoryStore, SqliteStore, StoredServer};
use crate::toolset::{CallRequest, CallSink, Toolset, ToolsChange, ToolsetEvents};
use crate::transport::stdio::{ExternalReader, ReaderHost};
use std::collections::HashMap;
use std::sync::{Mutex, Weak};
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

/// A store implemented in JavaScript, reached through one dispatcher `(op, argsJson) => Promise<json>`.
type StoreDispatcher = ThreadsafeFunction<FnArgs<(String, String)>, Promise<String>, FnArgs<(String, String)>, Status, false, true>;

struct JsStore(Arc<StoreDispatcher>);

impl JsStore {
    fn call(&self, op: &'static str, args: serde_json::Value) -> store::BoxFuture<'static, crate::error::Result<String>> {
        let dispatcher = self.0.clone();
        Box::pin(async move {
            let failed = |e: napi::Error| McpError::Storage(format!("store: {op} failed: {}", e.reason));
            let promise = dispatcher.call_async_catch((op.to_owned(), args.to_string()).into()).await.map_err(failed)?;
            promise.await.map_err(failed)
        })
    }
}

fn parse_reply<T: serde::de::DeserializeOwned>(op: &str, json: &str) -> crate::error::Result<T> {
    serde_json::from_str(json).map_err(|e| McpError::Storage(format!("store: {op} returned malformed data: {e}")))
}

impl ConnectionStore for JsStore {
    fn get(&self, id: &str) -> store::BoxFuture<'_, crate::error::Result<Option<StoredServer>>> {
        let reply = self.call("get", serde_json::json!([id]));
        Box::pin(async move { parse_reply("get", &reply.await?) })
    }

    fn list(&self) -> store::BoxFuture<'_, crate::error::Result<Vec<StoredServer>>> {
        let reply = self.call("list", serde_json::json!([]));
        Box::pin(async move { parse_reply("list", &reply.await?) })
    }

    fn save(&self, row: StoredServer) -> store::BoxFuture<'_, crate::error::Result<()>> {
        let reply = self.call("save", serde_json::json!([row]));
        Box::pin(async move { reply.await.map(drop) })
    }

    fn remove(&self, id: &str) -> store::BoxFuture<'_, crate::error::Result<()>> {
        let reply = self.call("remove", serde_json::json!([id]));
        Box::pin(async move { reply.await.map(drop) })
    }

    fn claim_baseline(&self, id: &str, fingerprints: Fingerprints) -> store::BoxFuture<'_, crate::error::Result<Fingerprints>> {
        let reply = self.call("claimBaseline", serde_json::json!([id, fingerprints]));
        Box::pin(async move { parse_reply("claimBaseline", &reply.await?) })
    }

    fn clear_baseline(&self, id: &str) -> store::BoxFuture<'_, crate::error::Result<()>> {
        let reply = self.call("clearBaseline", serde_json::json!([id]));
        Box::pin(async move { reply.await.map(drop) })
    }
}

/// Native stores by id, so a toolset can be handed one through its config without a JS round trip.
static NATIVE_STORES: Mutex<Option<HashMap<u32, Weak<dyn ConnectionStore>>>> = Mutex::new(None);
static NEXT_STORE_ID: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(1);

fn native_store(id: u32) -> Option<Arc<dyn ConnectionStore>> {
    NATIVE_STORES.lock().unwrap().as_ref()?.get(&id)?.upgrade()
}

/// A connection store that lives in the engine: in memory, or a SQLite file.
#[napi]
pub struct NativeStore {
    store: Arc<dyn ConnectionStore>,
    id: u32,
}

#[napi]
impl NativeStore {
    fn register(store: Arc<dyn ConnectionStore>) -> Self {
        let id = NEXT_STORE_ID.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        NATIVE_STORES.lock().unwrap().get_or_insert_with(HashMap::new).insert(id, Arc::downgrade(&store));
        NativeStore { store, id }
    }

    #[napi(factory)]
    pub fn memory() -> Self {
        Self::register(Arc::new(MemoryStore::new()))
    }

    /// Opens (or creates) a SQLite store at `path`: WAL, a schema version, safe for several processes.
    #[napi(factory)]
    pub fn sqlite(path: String) -> Result<Self> {
        let store = SqliteStore::open(std::path::Path::new(&path)).map_err(to_js_error)?;
        Ok(Self::register(Arc::new(store)))
    }

    #[napi(getter)]
    pub fn id(&self) -> u32 {
        self.id
    }

    /// The row as JSON, or null.
    #[napi]
    pub async fn get(&self, id: String) -> Result<Option<String>> {
        let row = self.store.get(&id).await.map_err(to_js_error)?;
        Ok(row.map(|r| serde_json::to_string(&r).expect("rows serialize")))
    }

    #[napi]
    pub async fn list(&self) -> Result<String> {
        let rows = self.store.list().await.map_err(to_js_error)?;
        Ok(serde_json::to_string(&rows).expect("rows serialize"))
    }

    #[napi]
    pub async fn save(&self, row_json: String) -> Result<()> {
        let row: StoredServer = serde_json::from_str(&row_json)
            .map_err(|e| to_js_error(McpError::config(format!("not a stored server row: {e}"))))?;
        self.store.save(row).await.map_err(to_js_error)
    }

    #[napi]
    pub async fn remove(&self, id: String) -> Result<()> {
        self.store.remove(&id).await.map_err(to_js_error)
    }

    #[napi]
    pub async fn claim_baseline(&self, id: String, fingerprints_json: String) -> Result<String> {
        let fingerprints: Fingerprints = serde_json::from_str(&fingerprints_json)
            .map_err(|e| to_js_error(McpError::config(format!("not a fingerprint map: {e}"))))?;
        let baseline = self.store.claim_baseline(&id, fingerprints).await.map_err(to_js_error)?;
        Ok(serde_json::to_string(&baseline).expect("maps serialize"))
    }

    #[napi]
    pub async fn clear_baseline(&self, id: String) -> Result<()> {
        self.store.clear_baseline(&id).await.map_err(to_js_error)
    }

    /// Clear the baseline of every row of `serverName`; resolves to how many rows had that name.
    #[napi]
    pub async fn retrust(&self, server_name: String) -> Result<u32> {
        let rows = store::retrust(self.store.as_ref(), &server_name).await.map_err(to_js_error)?;
        Ok(rows as u32)
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

/// Call outcomes wait here until JavaScript drains them. The first one after a drain sends a single
/// wake-up through a threadsafe function; a burst of outcomes costs one crossing, not one each.
struct Completions {
    batch: Mutex<String>,
    wake: CompletionWake,
    /// Set while JavaScript feeds stdout synchronously: it drains right after, so no wake-up is needed.
    feeding: std::sync::atomic::AtomicBool,
}

/// No payload: it only says "drain now". Weak: pending calls keep the process alive from JS instead.
type CompletionWake = ThreadsafeFunction<(), (), (), Status, false, true>;

impl Completions {
    fn drain(&self) -> String {
        let mut batch = self.batch.lock().unwrap();
        if batch.is_empty() {
            return "[]".to_owned();
        }
        let mut out = std::mem::take(&mut *batch);
        out.push(']');
        out
    }
}

impl CallSink for Completions {
    fn complete(&self, call_id: u32, outcome: crate::error::Result<Box<str>>) {
        let first = {
            let mut batch = self.batch.lock().unwrap();
            let first = batch.is_empty();
            batch.push(if first { '[' } else { ',' });
            match outcome {
                Ok(result) => {
                    batch.push_str(&format!("[{call_id},\"\","));
                    batch.push_str(&result);
                }
                Err(error) => {
                    batch.push_str(&format!("[{call_id},\"{}\",", error.code()));
                    batch.push_str(&serde_json::to_string(&error.to_string()).expect("strings serialize"));
                }
            }
            batch.push(']');
            first
        };
        if first && !self.feeding.load(std::sync::atomic::Ordering::SeqCst) {
            self.wake.call((), ThreadsafeFunctionCallMode::NonBlocking);
        }
    }
}

/// Hands stdio servers' stdout to JavaScript to read on its own event loop (Node): an `stdio-reader`
/// event carries the reader id and a file descriptor; bytes come back through `feedStdout`.
struct JsReaderHost {
    events: Arc<JsEvents>,
    readers: Mutex<HashMap<u32, Arc<ExternalReader>>>,
    next_id: std::sync::atomic::AtomicU32,
}

impl ReaderHost for JsReaderHost {
    fn attach(&self, reader: Arc<ExternalReader>, fd: std::os::fd::RawFd) {
        let id = self.next_id.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        self.readers.lock().unwrap().insert(id, reader);
        self.events.emit("stdio-reader", serde_json::json!({ "readerId": id, "fd": fd }).to_string());
    }
}

/// A set of MCP server connections behind one tool map.
#[napi]
pub struct NativeToolset {
    inner: Arc<Toolset>,
    completions: Arc<Completions>,
    readers: Option<Arc<JsReaderHost>>,
}

#[napi]
impl NativeToolset {
    /// `configJson` is the server list and options as JSON; `onEvent(kind, payloadJson)` receives
    /// `diagnostic` and `tools` (tool-map change) events. The optional callbacks are the application's
    /// `auth` (server → token), `allowedHosts` resolver (server → JSON array), `policy.decide`
    /// (request JSON → decision JSON) and `policy.ask` (question JSON → approved).
    #[napi(constructor)]
    #[allow(clippy::too_many_arguments)] // each optional callback is its own argument so JS passes plain functions
    pub fn new(
        config_json: String,
        #[napi(ts_arg_type = "(kind: string, payloadJson: string) => void")] on_event: EventCallback,
        #[napi(ts_arg_type = "() => void")] on_completions: CompletionWake,
        #[napi(ts_arg_type = "((server: string) => Promise<string>) | undefined | null")] auth: Option<JsCallback<String>>,
        #[napi(ts_arg_type = "((server: string) => Promise<string>) | undefined | null")] allowed_hosts: Option<JsCallback<String>>,
        #[napi(ts_arg_type = "((requestJson: string) => Promise<string>) | undefined | null")] decide: Option<JsCallback<String>>,
        #[napi(ts_arg_type = "((questionJson: string) => Promise<boolean>) | undefined | null")] ask: Option<JsCallback<bool>>,
        native_store_id: Option<u32>,
        read_stdio_in_js: bool,
        #[napi(ts_arg_type = "((op: string, argsJson: string) => Promise<string>) | undefined | null")] js_store: Option<StoreDispatcher>,
    ) -> Result<Self> {
        let config = crate::config::parse(&config_json).map_err(to_js_error)?;
        let events = Arc::new(JsEvents { callback: on_event });
        let readers = read_stdio_in_js.then(|| {
            Arc::new(JsReaderHost { events: events.clone(), readers: Mutex::new(HashMap::new()), next_id: 1.into() })
        });
        let hooks = Hooks {
            auth: hook(auth),
            allowed_hosts: hook(allowed_hosts).map(|h| Arc::new(HostsHook(h)) as Arc<dyn Callback<String, Vec<String>>>),
            decide: hook(decide),
            ask: hook(ask),
            stdio_reader: readers.clone().map(|r| r as Arc<dyn ReaderHost>),
        };
        let store: Option<Arc<dyn ConnectionStore>> = match (native_store_id, js_store) {
            (Some(id), _) => Some(native_store(id).ok_or_else(|| to_js_error(McpError::config("the storage store was released")))?),
            (None, Some(dispatcher)) => Some(Arc::new(JsStore(Arc::new(dispatcher)))),
            (None, None) => None,
        };
        let toolset = Toolset::new(config, hooks, store, events).map_err(to_js_error)?;
        let completions = Arc::new(Completions { batch: Mutex::new(String::new()), wake: on_completions, feeding: false.into() });
        Ok(NativeToolset { inner: Arc::new(toolset), completions, readers })
    }

    /// Connect every enabled server; resolves to `{"tools": [...], "diagnostics": [...]}` as JSON.
    #[napi]
    pub async fn connect(&self) -> Result<String> {
        let (tools, diagnostics) = self.inner.connect().await;
        let out = serde_json::json!({ "tools": tools, "diagnostics": diagnostics }).to_string();
        drop(tools);
        release_freed_memory();
        Ok(out)
    }

    /// Project the tool map from storage (no server is asked anything first); reconnection and
    /// reconciliation continue in the background. Same JSON shape as `connect`.
    #[napi]
    pub async fn rebuild(&self, stdio_allowed: bool) -> Result<String> {
        let (tools, diagnostics) = self.inner.rebuild(stdio_allowed).await.map_err(to_js_error)?;
        let out = serde_json::json!({ "tools": tools, "diagnostics": diagnostics }).to_string();
        drop(tools);
        release_freed_memory();
        Ok(out)
    }

    /// The MCP section of a system prompt for this toolset (never server instructions).
    #[napi]
    pub fn system_prompt(&self) -> String {
        self.inner.system_prompt()
    }

    /// Resolves when background reconciliation after `rebuild` has finished.
    #[napi]
    pub async fn reconciled(&self) -> Result<()> {
        self.inner.reconciled().await;
        Ok(())
    }

    /// Start tool calls. `batch` holds one call per line: `callId \t abortId \t name \t argumentsJson`
    /// (names are provider-safe and compact JSON has no raw tabs or newlines). Outcomes arrive through
    /// the `onCompletions` callback and `drainCompletions`.
    #[napi]
    pub fn call_tools(&self, batch: String) -> Result<()> {
        let mut calls = Vec::new();
        for line in batch.split('\n').filter(|l| !l.is_empty()) {
            let mut fields = line.splitn(4, '\t');
            let (Some(call_id), Some(abort_id), Some(name), Some(arguments)) = (fields.next(), fields.next(), fields.next(), fields.next())
            else {
                return Err(to_js_error(McpError::config("malformed call batch")));
            };
            let call_id = call_id.parse().map_err(|_| to_js_error(McpError::config("malformed call id")))?;
            let abort_id = abort_id.parse().map_err(|_| to_js_error(McpError::config("malformed abort id")))?;
            calls.push(CallRequest::new(call_id, abort_id, name.to_owned(), arguments.to_owned()));
        }
        let sink = self.completions.clone() as Arc<dyn CallSink>;
        // The engine may spawn (gated calls, timers): run inside the runtime even from the JS thread.
        napi::bindgen_prelude::within_runtime_if_available(|| self.inner.start_calls(calls, &sink));
        Ok(())
    }

    /// Every outcome since the last drain, as a JSON array of `[callId, errorCode, resultOrMessage]`
    /// (`errorCode` empty on success; the result is the server's JSON, embedded verbatim).
    #[napi]
    pub fn drain_completions(&self) -> String {
        self.completions.drain()
    }

    /// Bytes a stdio server wrote, read by JavaScript. Returns the call outcomes they completed, in the
    /// `drainCompletions` format, so a response costs no wake-up at all.
    #[napi]
    pub fn feed_stdout(&self, reader_id: u32, chunk: Buffer) -> String {
        let reader = self.readers.as_ref().and_then(|r| r.readers.lock().unwrap().get(&reader_id).cloned());
        if let Some(reader) = reader {
            self.completions.feeding.store(true, std::sync::atomic::Ordering::SeqCst);
            napi::bindgen_prelude::within_runtime_if_available(|| reader.feed(&chunk));
            self.completions.feeding.store(false, std::sync::atomic::Ordering::SeqCst);
        }
        self.completions.drain()
    }

    /// The stdout JavaScript was reading ended (`error` set if it failed).
    #[napi]
    pub fn stdout_ended(&self, reader_id: u32, error: Option<String>) {
        let reader = self.readers.as_ref().and_then(|r| r.readers.lock().unwrap().remove(&reader_id));
        if let Some(reader) = reader {
            let failure = error.map(|e| McpError::Transport(format!("MCP server stdout failed: {e}")));
            napi::bindgen_prelude::within_runtime_if_available(|| reader.end(failure));
        }
    }

    /// Abort the call started with `abortId`.
    #[napi]
    pub fn abort(&self, abort_id: u32) {
        napi::bindgen_prelude::within_runtime_if_available(|| self.inner.abort(abort_id));
    }

    #[napi]
    pub async fn close(&self) -> Result<()> {
        self.inner.close().await;
        Ok(())
    }
}

/// One worker thread: the engine's work per message is microseconds of parsing, so a second worker
/// only adds cross-thread wake-ups and another malloc arena (resident memory) for nothing.
const ENGINE_WORKER_THREADS: usize = 1;
/// Blocking-pool threads (SQLite, DNS); they exit after idling this long.
const MAX_BLOCKING_THREADS: usize = 8;
const BLOCKING_THREAD_KEEP_ALIVE_SECS: u64 = 10;

#[napi_derive::module_init]
fn init_runtime() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(ENGINE_WORKER_THREADS)
        .max_blocking_threads(MAX_BLOCKING_THREADS)
        .thread_keep_alive(std::time::Duration::from_secs(BLOCKING_THREAD_KEEP_ALIVE_SECS))
        .thread_name("mcpferry")
        .enable_all()
        .build()
        .expect("the engine's runtime starts");
    napi::bindgen_prelude::create_custom_tokio_runtime(runtime);
}

/// Give memory freed after a large burst of allocation (a big catalog parsed on an engine thread)
/// back to the system: glibc keeps per-thread arenas otherwise, and resident memory stays high.
fn release_freed_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    unsafe {
        libc::malloc_trim(0);
    }
}

/// The engine's own version, to check that the loaded binary matches the package.
#[napi]
#[allow(dead_code)] // called from JavaScript only
pub fn engine_version() -> String {
    env!("CARGO_PKG_VERSION").to_owned()
}
