//! One live session with one server: request ids, the pending map, idle timeouts reset by progress,
//! cancellation (`notifications/cancelled`), server-to-client requests and notifications.
//!
//! Server-to-client requests are answered inline, except `elicitation/create`, which waits for the
//! host: each runs as a task this connection owns (at most `MAX_ELICITATIONS_IN_FLIGHT`, each bounded
//! by the elicitor's timeout, all cancelled when the connection ends).
//!
//! Requests are started synchronously ([`Connection::start`]) and answered through a [`Reply`]: a
//! callback for tool calls (so a JavaScript caller needs no task or promise per call on our side) or a
//! channel for the engine's own `async` requests. One sweeper task per connection owns every deadline,
//! so a request costs no timer of its own.

//!
//! | file               | concern                                                                       |
//! |--------------------|-------------------------------------------------------------------------------|
//! | `mod.rs`           | the connection: ids, the pending map, the sweeper, what the server sends      |
//! | `negotiation/`     | the era and version: the handshake, and each server's era remembered         |
//! | `rounds.rs`        | a call sent again: after a round of input, or once after a `-32020`           |
//! | `elicitations.rs`  | the server's `elicitation/create`, answered through the host in owned tasks   |
//!
//! What a call's result means (`isError`, depth) is `session::outcome`'s.

mod elicitations;
mod negotiation;
mod rounds;

pub use negotiation::memory::{EraMemory, Known};
use negotiation::{negotiate, with_meta, Budget, Negotiation};
use rounds::{rounds, CallAgain};
pub use rounds::{HeaderMismatch, Headers};

use crate::error::{McpError, Result};
use crate::limits::{MAX_ELICITATIONS_IN_FLIGHT, MAX_JSON_DEPTH};
use crate::progress::ProgressListener;
use crate::protocol::era::{self, Era};
use crate::protocol::jsonrpc::{self, Message, RawMessage, RequestId, INVALID_PARAMS, METHOD_NOT_FOUND};
use crate::protocol::mcp::{self, InitializeResult};
use crate::protocol::nesting;
use crate::session::elicitation::{self, Elicitor};
use crate::transport::{self, MessageSink, ModernRequest, Outbound, Transport, TransportOptions, TransportSpec};
// Locks that do not poison: a panic in one request's path must not turn every later lock into a panic.
use parking_lot::Mutex;
use serde_json::value::RawValue;
use std::collections::HashMap;
use std::panic::AssertUnwindSafe;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock, Weak};
use std::time::Duration;
use tokio::sync::{oneshot, Notify};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

/// What a connection tells its owner.
pub trait ConnectionEvents: Send + Sync + 'static {
    /// The server sent `notifications/tools/list_changed`.
    fn tools_list_changed(&self);
    /// A `subscriptions/listen` took effect: changes made before it were announced to nobody, so the
    /// tools may have changed (not that the server said they did).
    fn tools_may_have_changed(&self) {
        self.tools_list_changed();
    }
    /// The server sent `notifications/resources/updated` for `uri` (a subscription's).
    fn resource_updated(&self, _uri: &str) {}
    /// The server sent `notifications/resources/list_changed` (`"resources"`) or
    /// `notifications/prompts/list_changed` (`"prompts"`).
    fn list_changed(&self, _list: &'static str) {}
    /// The connection ended without the owner asking (the server died, or broke the protocol).
    fn connection_lost(&self, reason: &McpError);
    /// The server expired the HTTP session and a new one replaced it (session `generation`): a restarted
    /// server may publish other tools. Resolves once they were listed and vetted again (once per
    /// generation); until then no call goes on that session.
    fn session_renewed(&self, _generation: u64) -> futures_util::future::BoxFuture<'_, Result<()>> {
        Box::pin(std::future::ready(Ok(())))
    }
    /// The server sent `notifications/message` (a log); `params` as sent, untrusted (see `server_log`).
    fn server_log(&self, _params: &RawValue) {}
    /// A request the engine made on its own ended (see `telemetry::operation`).
    fn operation(&self, _operation: crate::telemetry::operation::Operation) {}
    /// Whether [`Self::operation`] goes anywhere (the toolset's telemetry is on): if not, no operation is
    /// timed or built.
    fn wants_operations(&self) -> bool {
        false
    }
}

/// Called once with a request's outcome.
pub type Completion = Box<dyn FnOnce(Result<Box<RawValue>>) + Send>;

/// Where a request's outcome goes.
pub enum Reply {
    Callback(Completion),
    Channel(oneshot::Sender<Result<Box<RawValue>>>),
}

impl Reply {
    /// Deliver the outcome. Never called with a lock of the connection held (over Node's stdio, from within
    /// the transport's line feed, whose lock no callback takes). A callback that panics loses only its own
    /// outcome: the panic stops here, so the reader, the sweeper, and the other requests being settled in
    /// the same pass carry on.
    fn send(self, outcome: Result<Box<RawValue>>) {
        match self {
            Reply::Callback(done) => {
                let _ = std::panic::catch_unwind(AssertUnwindSafe(move || done(outcome)));
            }
            Reply::Channel(tx) => {
                let _ = tx.send(outcome);
            }
        }
    }
}

/// Set from JavaScript when the caller's AbortSignal fires. Works before and after the request starts.
#[derive(Default)]
pub struct AbortHandle {
    aborted: AtomicBool,
    wake: Notify,
    /// The request this handle cancels, once started.
    started: Mutex<Option<(Weak<ConnectionCore>, RequestId)>>,
}

impl AbortHandle {
    pub fn abort(&self) {
        self.aborted.store(true, Ordering::SeqCst);
        self.wake.notify_waiters();
        let started = self.started.lock().take();
        if let Some((shared, id)) = started {
            if let Some(shared) = shared.upgrade() {
                shared.give_up(id, McpError::Aborted);
            }
        }
    }

    pub fn is_aborted(&self) -> bool {
        self.aborted.load(Ordering::SeqCst)
    }

    pub async fn wait(&self) {
        loop {
            let notified = self.wake.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if self.is_aborted() {
                return;
            }
            notified.await;
        }
    }

    fn attach(&self, shared: &Arc<ConnectionCore>, id: RequestId) {
        *self.started.lock() = Some((Arc::downgrade(shared), id));
        // An abort that landed between the check and the attach still cancels.
        if self.is_aborted() {
            self.abort();
        }
    }
}

pub struct RequestOptions<'a> {
    /// Idle timeout: how long without a response or a progress notification.
    pub timeout: Duration,
    pub abort: Option<&'a AbortHandle>,
}

/// What the server said about itself in `initialize` or `server/discover` (or, reused, to an earlier
/// connection's `server/discover`).
#[derive(Debug)]
pub struct SessionInfo {
    pub protocol_version: &'static str,
    pub server_name: String,
    pub server_version: String,
    pub tools_list_changed: bool,
    /// The server declared `resources.subscribe`: it takes `resources/subscribe` (before 2026-07-28) or
    /// `resourceSubscriptions` in `subscriptions/listen` (2026-07-28).
    pub resources_subscribe: bool,
    /// It declared `resources.listChanged` / `prompts.listChanged`: only then is its announcement of a
    /// change passed on (see `ConnectionEvents::list_changed`).
    pub resources_list_changed: bool,
    pub prompts_list_changed: bool,
    /// It declared the Skills extension (`extensions["io.modelcontextprotocol/skills"]`, SEP-2640): only
    /// then are `skills/list` and `skills/get` sent.
    pub skills: bool,
    /// The names of the capabilities the server declared, for display.
    pub capabilities: Vec<String>,
    /// Never shown to a model: third-party text is a prompt-injection seam.
    pub instructions: Option<String>,
    pub era: Era,
    /// The era was found from the server's answer (worth remembering), not assumed after a failure.
    pub era_evidence: bool,
    /// Modern, opened with a remembered discovery answer: nothing was asked before the first request.
    pub discovery_reused: bool,
}

impl SessionInfo {
    fn reusing(discovered: &negotiation::memory::DiscoveryAnswer) -> SessionInfo {
        SessionInfo {
            protocol_version: discovered.version,
            // Not kept across connections (see `negotiation::memory::DiscoveryAnswer`): unknown to a connection that did not ask.
            server_name: String::new(),
            server_version: String::new(),
            tools_list_changed: discovered.tools_list_changed,
            resources_subscribe: discovered.resources_subscribe,
            resources_list_changed: discovered.resources_list_changed,
            prompts_list_changed: discovered.prompts_list_changed,
            skills: discovered.skills,
            capabilities: discovered.capabilities.iter().map(|c| (*c).to_owned()).collect(),
            instructions: None,
            era: Era::Modern(discovered.version),
            era_evidence: true,
            discovery_reused: true,
        }
    }

    /// A modern server's own `server/discover` answer, at `version`.
    fn discovered(version: &'static str, result: era::DiscoverResult) -> SessionInfo {
        let info = result.server_info();
        SessionInfo {
            protocol_version: version,
            server_name: info.name,
            server_version: info.version,
            capabilities: result.capabilities.names(),
            resources_subscribe: result.capabilities.resources_subscribe(),
            resources_list_changed: result.capabilities.list_changed("resources"),
            prompts_list_changed: result.capabilities.list_changed("prompts"),
            skills: result.capabilities.skills(),
            tools_list_changed: result.capabilities.tools.and_then(|t| t.list_changed).unwrap_or(false),
            instructions: result.instructions,
            era: Era::Modern(version),
            era_evidence: true,
            discovery_reused: false,
        }
    }

    /// What is worth remembering of this server for the next connection to it (`Known::Nothing`: the
    /// era was assumed, not found).
    pub fn known(&self) -> Known {
        match self.era {
            _ if !self.era_evidence => Known::Nothing,
            Era::Legacy => Known::Era(Era::Legacy),
            Era::Modern(version) => {
                let mut discovered =
                    negotiation::memory::DiscoveryAnswer::of(version, &self.capabilities, self.tools_list_changed);
                discovered.resources_subscribe = self.resources_subscribe;
                discovered.resources_list_changed = self.resources_list_changed;
                discovered.prompts_list_changed = self.prompts_list_changed;
                discovered.skills = self.skills;
                Known::Discovered(Arc::new(discovered))
            }
        }
    }
}

pub struct Connection {
    shared: Arc<ConnectionCore>,
    transport: Arc<dyn Transport>,
    pub session: SessionInfo,
}

/// The connection itself, as its handle, its sweeper and its tasks, and its transport (through
/// [`MessageSink`]) share it: the pending map, the ids, the events owner, the server's open requests.
pub struct ConnectionCore {
    state: Mutex<State>,
    next_id: AtomicU64,
    transport: OnceLock<Weak<dyn Transport>>,
    events: Arc<dyn ConnectionEvents>,
    /// Wakes the sweeper when a request's deadline is earlier than the one it sleeps towards.
    sweep_wake: Notify,
    /// This connection, for the tasks it starts (elicitations).
    me: Weak<ConnectionCore>,
    /// Set when the host answers elicitations (`onElicitation`).
    elicitations: Option<Elicitations>,
    /// The host renders MCP Apps: the extension is declared.
    apps: bool,
    /// Set while probing and for a modern-era connection: every request carries its `_meta`.
    modern: arc_swap::ArcSwapOption<ModernWire>,
    /// Multi-round-trip calls waiting on the host between two rounds (modern era), and their stop.
    rounds: TaskTracker,
    stop_rounds: CancellationToken,
    /// Prompts multi-round-trip calls may have open at once (as many as the server's own elicitations).
    round_prompts: Arc<tokio::sync::Semaphore>,
    /// Set once the connection is open; losses are reported to the owner from then on.
    open: AtomicBool,
    /// Set by the first answer that is not an error: the server took a request of this connection's era.
    answered: AtomicBool,
    /// Makes the sweeper panic, to test its supervision.
    #[cfg(test)]
    sweep_fault: AtomicBool,
}

/// What every request of a modern-era connection carries.
struct ModernWire {
    version: &'static str,
    /// The `_meta` members (protocol version, client capabilities, client info), as object members.
    meta: String,
}

impl ModernWire {
    fn new(version: &'static str, capabilities: &serde_json::Map<String, serde_json::Value>) -> Arc<ModernWire> {
        Arc::new(ModernWire { version, meta: era::meta_members(version, capabilities) })
    }
}

/// The elicitations the host is answering for this connection.
struct Elicitations {
    elicitor: Arc<Elicitor>,
    /// Cancelled when the connection ends: every open elicitation stops waiting for the host.
    cancel: CancellationToken,
    tasks: TaskTracker,
    /// Open elicitations by request id (its JSON text), each with the token the server's
    /// `notifications/cancelled` for it trips.
    open: Mutex<HashMap<String, CancellationToken>>,
    /// When the last one ended: the server's answer to the request that asked comes after it.
    last_ended: Mutex<Option<Instant>>,
}

#[derive(Default)]
struct State {
    pending: HashMap<RequestId, Pending>,
    /// Set once; every later request fails with it at once.
    ended: Option<McpError>,
    /// The deadline the sweeper sleeps towards, if any.
    sweep_target: Option<Instant>,
}

struct Pending {
    reply: Reply,
    /// Handed to the transport. A request given up before that is never sent, and not cancelled.
    dispatched: bool,
    timeout: Duration,
    /// Moved later by every progress notification for this request.
    deadline: Instant,
    /// `initialize` is never cancelled, per the spec.
    cancellable: bool,
    /// Sent in the modern era (its cancellation may be the closing of its exchange).
    modern: bool,
    /// Answered by a stream that may stay quiet for good (`subscriptions/listen`).
    long_lived: bool,
    /// Hears this request's progress (a tool call whose caller gave `onProgress`); `None` for the rest.
    progress: Option<Arc<dyn ProgressListener>>,
}

impl Connection {
    /// Open the transport and run the handshake: `initialize`, version check, `notifications/initialized`.
    /// With an `elicitor`, the client declares the elicitation capability (its modes) and answers the
    /// server's `elicitation/create` requests through the host; without one, it declares none.
    /// `known`: what an earlier connection found the server to be (see [`negotiate`]).
    pub async fn open(
        spec: &TransportSpec,
        events: Arc<dyn ConnectionEvents>,
        options: TransportOptions,
        handshake: &RequestOptions<'_>,
        elicitor: Option<Arc<Elicitor>>,
        apps: bool,
        known: &Known,
    ) -> std::result::Result<Connection, (McpError, Option<String>)> {
        let (mut hint, reuse) = match known {
            Known::Nothing => (None, None),
            Known::Era(era) => (Some(*era), None),
            Known::Discovered(discovered) => (Some(Era::Modern(discovered.version)), Some(discovered.as_ref())),
        };
        // `connectTimeoutMs` bounds the whole opening: the probe, `initialize`, a restart.
        let budget = Budget::new(handshake);
        loop {
            let shared = ConnectionCore::new(events.clone(), elicitor.clone(), apps);
            let transport = transport::open(spec, shared.clone(), options.clone()).map_err(|e| (e, None))?;
            let _ = shared.transport.set(Arc::downgrade(&transport));
            start_sweeper(&shared);
            let failure = match negotiate(&shared, &transport, &budget, hint, reuse).await {
                Ok(session) => {
                    shared.opened();
                    return Ok(Connection { shared, transport, session });
                }
                Err(failure) => failure,
            };
            shared.end(McpError::Closed);
            shared.elicitations_stopped().await;
            transport.close().await;
            match failure {
                // A child that died of the modern probe: start it again for `initialize`.
                Negotiation::Restart if hint != Some(Era::Legacy) => hint = Some(Era::Legacy),
                Negotiation::Restart => {
                    let reason = McpError::Transport("the server exited before answering initialize".into());
                    return Err((reason, transport.stderr_tail()));
                }
                Negotiation::Failed(e) => return Err((budget.timed_out(e), transport.stderr_tail())),
            }
        }
    }

    /// Whether this connection speaks the modern era (2026-07-28): stateless, `_meta` on every request.
    pub fn is_modern(&self) -> bool {
        self.shared.modern.load().is_some()
    }

    /// Whether the server has answered a request of this connection with a result (not an error).
    pub fn was_answered(&self) -> bool {
        self.shared.answered.load(Ordering::Relaxed)
    }

    /// Listen for tool-list changes (modern era: `subscriptions/listen`) until the server or the
    /// connection ends the subscription. Its notifications arrive like any other.
    pub async fn listen_for_tool_changes(&self, abort: Option<&AbortHandle>) -> Result<()> {
        self.listen(r#"{"notifications":{"toolsListChanged":true}}"#, abort).await
    }

    /// `subscriptions/listen` with `params` (its filter), until the server or the connection ends the
    /// subscription or `abort` fires. Its notifications arrive like any other.
    pub async fn listen(&self, params: &str, abort: Option<&AbortHandle>) -> Result<()> {
        let opts = RequestOptions { timeout: Duration::from_millis(crate::limits::LISTEN_TIMEOUT_MS), abort };
        request(&self.shared, &self.transport, "subscriptions/listen", None, |_| Some(params.to_owned()), &opts, true)
            .await
            .map(drop)
    }

    pub async fn request(
        &self,
        method: &str,
        params: Option<&str>,
        opts: &RequestOptions<'_>,
    ) -> Result<Box<RawValue>> {
        request(&self.shared, &self.transport, method, None, |_| params.map(str::to_owned), opts, false).await
    }

    /// [`Connection::request`] of a request that names what it is for (`resources/read`'s URI,
    /// `prompts/get`'s prompt): the modern era's `Mcp-Name` header carries `name`.
    pub async fn request_named(
        &self,
        method: &str,
        name: &str,
        params: &str,
        opts: &RequestOptions<'_>,
    ) -> Result<Box<RawValue>> {
        request(&self.shared, &self.transport, method, Some(name), |_| Some(params.to_owned()), opts, false).await
    }

    /// [`Connection::request_named`] begun now, its outcome given to `reply` (a callback is called on
    /// whichever thread reads the answer): nothing is awaited and nothing spawned, as for a tool call.
    pub fn start_named(&self, method: &str, name: &str, params: String, opts: &RequestOptions<'_>, reply: Reply) {
        let params = move |_, meta: Option<&str>| with_meta(Some(params), meta);
        if let Some(message) = self.shared.register(method, Some(name), params, opts.timeout, opts.abort, reply) {
            self.shared.dispatch(&self.transport, vec![message]);
        }
    }

    /// Start `tools/call` for each `(remote name, arguments, reply)` and send them in one write.
    /// A result with `isError: true` is turned into `McpError::Tool` by `session::outcome::tool_outcome`.
    pub fn start_calls<'a>(&self, calls: impl IntoIterator<Item = StartCall<'a>>, timeout: Duration) {
        let mut outbound = Vec::new();
        let modern = self.is_modern();
        for call in calls {
            // Modern servers may answer `input_required` (or `-32020`): the call is kept, its arguments
            // moved in, not copied, to be sent again (the legacy era has no such answer, and keeps nothing).
            let (reply, kept, arguments) = if modern {
                let again = Arc::new(CallAgain {
                    name: call.remote_name.into(),
                    arguments: call.arguments,
                    headers: call.headers.clone(),
                    abort: call.abort.clone(),
                    timeout,
                    on_header_mismatch: call.on_header_mismatch,
                    resent_after_mismatch: false,
                    caller_meta: call.caller_meta.clone(),
                    progress: call.progress.clone(),
                });
                (Reply::Callback(rounds(Arc::downgrade(&self.shared), again.clone(), call.reply, 0)), Some(again), None)
            } else {
                (call.reply, None, Some(call.arguments))
            };
            let arguments: &RawValue = match (&kept, &arguments) {
                (Some(again), _) => &again.arguments,
                (None, Some(arguments)) => arguments,
                (None, None) => unreachable!("one of the two holds the arguments"),
            };
            let caller_meta = call.caller_meta.as_deref();
            let params = |id, meta: Option<&str>| {
                Some(mcp::call_tool_params(call.remote_name, arguments, id, meta, caller_meta))
            };
            if let Some(mut message) = self.shared.register(
                "tools/call",
                Some(call.remote_name),
                params,
                timeout,
                call.abort.as_deref(),
                reply,
            ) {
                if let (Some(cell), Some(id)) = (&call.sent_id, message.request_id) {
                    cell.store(id, Ordering::Relaxed);
                }
                message.extra_headers = call.headers;
                message.admitted = call.admitted;
                self.shared.listen_for_progress(&message, call.progress);
                outbound.push(message);
            }
        }
        if !outbound.is_empty() {
            self.shared.dispatch(&self.transport, outbound);
        }
    }

    pub fn stderr_tail(&self) -> Option<String> {
        self.transport.stderr_tail()
    }

    /// Ask the server for its logs from `level` up (`serverLogLevel`), if it declared `logging`: on a
    /// session-era server `logging/setLevel`, awaited; on a 2026-07-28 one the per-request `_meta` level
    /// on every request from now on (that era has no `setLevel`). Whether it was asked.
    pub async fn ask_log_level(&self, level: crate::server_log::Level, opts: &RequestOptions<'_>) -> Result<bool> {
        if !self.session.capabilities.iter().any(|c| c == "logging") {
            return Ok(false);
        }
        if let Some(wire) = self.shared.modern.load_full() {
            let meta = format!("{},{}", wire.meta, level.meta_member());
            self.shared.modern.store(Some(Arc::new(ModernWire { version: wire.version, meta })));
            return Ok(true);
        }
        self.request("logging/setLevel", Some(&level.set_level_params()), opts).await.map(|_| true)
    }

    /// Fail what is pending with `Closed`, stop the open elicitations (the server gets no answer to
    /// them) and release the transport. Idempotent.
    pub async fn close(&self) {
        self.shared.end(McpError::Closed);
        self.shared.elicitations_stopped().await;
        self.transport.close().await;
    }
}

impl Drop for Connection {
    fn drop(&mut self) {
        self.shared.end(McpError::Closed);
    }
}

/// One `tools/call` to start.
pub struct StartCall<'a> {
    pub remote_name: &'a str,
    /// Owned: a modern-era call keeps them to be sent again, without a copy.
    pub arguments: Box<RawValue>,
    pub abort: Option<Arc<AbortHandle>>,
    pub reply: Reply,
    /// Sent with this call only, over HTTP (the `Mcp-Param-*` headers of the 2026-07-28 revision).
    pub headers: Vec<(reqwest::header::HeaderName, reqwest::header::HeaderValue)>,
    /// Asked once if the server refuses the call's headers (`-32020`, 2026-07-28 only).
    pub on_header_mismatch: Option<Arc<dyn HeaderMismatch>>,
    /// The caller's `params._meta` members (idempotency key, trace context: `CallContext::meta_members`),
    /// on every sending of this call (input rounds and resends too).
    pub caller_meta: Option<Box<str>>,
    /// Asked before the call goes on an HTTP session that replaced an expired one (see `Outbound::admitted`).
    pub admitted: Option<Arc<dyn crate::transport::AdmittedCall>>,
    /// Hears the call's progress notifications (every round of it); `None`: nobody listens.
    pub progress: Option<Arc<dyn ProgressListener>>,
    /// Told the JSON-RPC id the call is sent with, for a measured call's report: its first round's (input
    /// rounds and a `-32020` resend keep it); a call sent again to a server that came back is told again.
    pub sent_id: Option<Arc<AtomicU64>>,
}

/// An engine-internal request awaited in place (handshake, listings).
async fn request(
    shared: &Arc<ConnectionCore>,
    transport: &Arc<dyn Transport>,
    method: &str,
    name: Option<&str>,
    params: impl FnOnce(RequestId) -> Option<String>,
    opts: &RequestOptions<'_>,
    long_lived: bool,
) -> Result<Box<RawValue>> {
    let (reply, response) = oneshot::channel();
    // A read and a prompt get are their caller's spans already (`lib/telemetry.ts`); a listen lasts as
    // long as the connection and is no operation to time. Nothing is timed or kept unless operations go somewhere.
    let timed = !long_lived && !matches!(method, "resources/read" | "prompts/get") && shared.events.wants_operations();
    let started = timed.then(crate::telemetry::operation::Started::now);
    let (mut sent_id, mut uri) = (None, None);
    let params = |id, meta: Option<&str>| {
        sent_id = Some(id);
        let params = params(id);
        if timed && matches!(method, "resources/subscribe" | "resources/unsubscribe") {
            uri = params.as_deref().and_then(subscription_uri);
        }
        with_meta(params, meta)
    };
    let message = shared.register(method, name, params, opts.timeout, opts.abort, Reply::Channel(reply));
    if let Some(mut message) = message {
        message.long_lived = long_lived;
        shared.dispatch(transport, vec![message]);
    }
    let outcome = response.await.unwrap_or(Err(McpError::Closed));
    if let Some(started) = started {
        let operation = crate::telemetry::operation::Operation::request(method, uri, sent_id, started.stop(), &outcome);
        shared.events.operation(operation);
    }
    outcome
}

/// The `uri` of a subscribe's or unsubscribe's params.
fn subscription_uri(params: &str) -> Option<String> {
    #[derive(serde::Deserialize)]
    struct Subscription {
        uri: String,
    }
    serde_json::from_str::<Subscription>(params).ok().map(|s| s.uri)
}

impl ConnectionCore {
    fn new(events: Arc<dyn ConnectionEvents>, elicitor: Option<Arc<Elicitor>>, apps: bool) -> Arc<ConnectionCore> {
        Arc::new_cyclic(|me| ConnectionCore {
            state: Mutex::new(State::default()),
            next_id: AtomicU64::new(1),
            transport: OnceLock::new(),
            events,
            sweep_wake: Notify::new(),
            me: me.clone(),
            elicitations: elicitor.map(|elicitor| Elicitations {
                elicitor,
                cancel: CancellationToken::new(),
                tasks: TaskTracker::new(),
                open: Mutex::new(HashMap::new()),
                last_ended: Mutex::new(None),
            }),
            apps,
            modern: arc_swap::ArcSwapOption::empty(),
            rounds: TaskTracker::new(),
            stop_rounds: CancellationToken::new(),
            round_prompts: Arc::new(tokio::sync::Semaphore::new(crate::limits::MAX_ELICITATIONS_IN_FLIGHT)),
            open: AtomicBool::new(false),
            answered: AtomicBool::new(false),
            #[cfg(test)]
            sweep_fault: AtomicBool::new(false),
        })
    }

    /// What this client declares to the server, in either era.
    fn capabilities(&self) -> serde_json::Map<String, serde_json::Value> {
        mcp::client_capabilities(self.elicitations.as_ref().map(|e| e.elicitor.modes.capability()), self.apps)
    }

    /// Enter a request in the pending map and serialize it. `None` if it was answered at once
    /// (connection ended, already aborted). `params` gets the id and, in the modern era, the `_meta`
    /// members to add; `name` is what the modern era's `Mcp-Name` header carries.
    fn register(
        self: &Arc<Self>,
        method: &str,
        name: Option<&str>,
        params: impl FnOnce(RequestId, Option<&str>) -> Option<String>,
        timeout: Duration,
        abort: Option<&AbortHandle>,
        reply: Reply,
    ) -> Option<Outbound> {
        if abort.is_some_and(AbortHandle::is_aborted) {
            reply.send(Err(McpError::Aborted));
            return None;
        }
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let deadline = Instant::now() + timeout;
        let modern = self.modern.load_full();
        let wake_sweeper = {
            let mut state = self.state.lock();
            if let Some(ended) = &state.ended {
                let ended = ended.clone();
                drop(state);
                reply.send(Err(ended));
                return None;
            }
            let cancellable = method != "initialize";
            let pending = Pending {
                reply,
                dispatched: false,
                timeout,
                deadline,
                cancellable,
                modern: modern.is_some(),
                long_lived: false,
                progress: None,
            };
            state.pending.insert(id, pending);
            match state.sweep_target {
                Some(target) if target <= deadline => false,
                _ => {
                    state.sweep_target = Some(deadline);
                    true
                }
            }
        };
        if wake_sweeper {
            self.sweep_wake.notify_one();
        }
        if let Some(abort) = abort {
            abort.attach(self, id);
        }
        let json = jsonrpc::request(id, method, params(id, modern.as_ref().map(|m| m.meta.as_str())).as_deref());
        let mut message = Outbound::request(id, json, method == "initialize", method != "tools/call");
        if method == "tools/call" {
            message.tool = name.map(Into::into);
        }
        message.modern =
            modern.map(|m| ModernRequest { version: m.version, method: method.into(), name: name.map(Into::into) });
        Some(message)
    }

    /// Give a request registered (not yet dispatched) the listener of its progress, if it has one.
    fn listen_for_progress(&self, message: &Outbound, listener: Option<Arc<dyn ProgressListener>>) {
        let (Some(listener), Some(id)) = (listener, message.request_id) else { return };
        if let Some(pending) = self.state.lock().pending.get_mut(&id) {
            pending.progress = Some(listener);
        }
    }

    /// `notifications/progress`: the request's idle timeout restarts, and its listener (if its caller
    /// gave one) hears the update, validated (`progress::parse`). Nothing more for a request nobody
    /// listens to, and nothing at all once it settled.
    fn progressed(&self, params: Option<&RawValue>) {
        let Some(params) = params else { return };
        let token = serde_json::from_str::<mcp::ProgressParams>(params.get())
            .ok()
            .and_then(|p| jsonrpc::parse_request_id(p.progress_token));
        let Some(token) = token else { return };
        let listener = {
            let mut state = self.state.lock();
            let Some(pending) = state.pending.get_mut(&token) else { return };
            // Later only, so the sweeper (sleeping towards an earlier time) needs no wake.
            pending.deadline = Instant::now() + pending.timeout;
            pending.progress.clone()
        };
        let Some(listener) = listener else { return };
        let Some(update) = crate::progress::parse(params) else { return };
        // A listener that panics loses its own update only.
        let _ = std::panic::catch_unwind(AssertUnwindSafe(move || listener.progress(update)));
    }

    /// Hand requests to the transport, skipping any given up since they were registered (an abort that
    /// raced the start). Done under the state lock, so a `notifications/cancelled` for one of them is
    /// always queued after the request itself.
    fn dispatch(&self, transport: &Arc<dyn Transport>, messages: Vec<Outbound>) {
        let (ids, sent) = {
            let mut state = self.state.lock();
            let messages: Vec<Outbound> = messages
                .into_iter()
                .filter(|m| match m.request_id.and_then(|id| state.pending.get_mut(&id)) {
                    Some(pending) => {
                        pending.dispatched = true;
                        pending.long_lived = m.long_lived;
                        true
                    }
                    None => m.request_id.is_none(),
                })
                .collect();
            let ids: Vec<RequestId> = messages.iter().filter_map(|m| m.request_id).collect();
            (ids, if messages.is_empty() { Ok(()) } else { transport.send_all(messages) })
        };
        if let Err(error) = sent {
            for id in ids {
                self.settle(id, Err(error.clone()));
            }
        }
    }

    /// Deliver the outcome of request `id`, if it is still pending.
    fn settle(&self, id: RequestId, outcome: Result<Box<RawValue>>) {
        let pending = self.state.lock().pending.remove(&id);
        if let Some(pending) = pending {
            if outcome.is_ok() && !self.answered.load(Ordering::Relaxed) {
                self.answered.store(true, Ordering::Relaxed);
            }
            pending.reply.send(outcome);
        }
    }

    /// Stop waiting for `id` without a word to the server or the caller: a request of the stdio probe the
    /// handshake no longer needs (its answer, if one comes, is dropped as any unknown id's).
    fn forget(&self, id: RequestId) {
        let forgotten = self.state.lock().pending.remove(&id);
        if forgotten.is_some() {
            if let Some(transport) = self.transport.get().and_then(Weak::upgrade) {
                transport.request_ended(id);
            }
        }
    }

    /// Stop waiting for `id` (timeout or abort): tell the transport and the server, fail the caller.
    fn give_up(&self, id: RequestId, reason: McpError) {
        self.give_up_if(id, reason, |_| true);
    }

    /// `give_up` when `still` holds for the pending entry (checked under the lock).
    fn give_up_if(&self, id: RequestId, reason: McpError, still: impl FnOnce(&Pending) -> bool) {
        let pending = {
            let mut state = self.state.lock();
            if !state.pending.get(&id).is_some_and(still) {
                return;
            }
            state.pending.remove(&id).expect("checked above")
        };
        if !pending.dispatched {
            pending.reply.send(Err(reason));
            return;
        }
        if let Some(transport) = self.transport.get().and_then(Weak::upgrade) {
            transport.request_ended(id);
            // In the modern era over HTTP, ending the exchange (above) was the cancellation.
            if pending.cancellable && !(pending.modern && transport.closing_cancels()) {
                let why = if reason == McpError::Aborted { "aborted by the client" } else { "timed out" };
                let params = serde_json::json!({ "requestId": id, "reason": why }).to_string();
                let _ =
                    transport.send(Outbound::other(jsonrpc::notification("notifications/cancelled", Some(&params))));
            }
        }
        pending.reply.send(Err(reason));
    }

    /// End the connection: every pending request fails with `reason`. Returns false if already ended.
    fn end(&self, reason: McpError) -> bool {
        self.end_then(reason, |_| {})
    }

    /// [`Self::end`], with `before_replies` run once the connection is marked ended and before any
    /// pending request hears of it (told whether the connection was open).
    fn end_then(&self, reason: McpError, before_replies: impl FnOnce(bool)) -> bool {
        let pending = {
            let mut state = self.state.lock();
            if state.ended.is_some() {
                return false;
            }
            state.ended = Some(reason.clone());
            std::mem::take(&mut state.pending)
        };
        self.sweep_wake.notify_one();
        if let Some(elicitations) = &self.elicitations {
            elicitations.cancel.cancel();
        }
        self.stop_rounds.cancel();
        // Before the connection is open only its handshake is out, and its failure is the opening's to read.
        let opened = self.open.load(Ordering::SeqCst);
        before_replies(opened);
        for (_, p) in pending {
            p.reply.send(Err(lost_request_error(&reason, opened && p.dispatched)));
        }
        true
    }

    /// The server broke the protocol or died: fail everything, tell the owner, release the transport.
    fn lose(&self, reason: McpError) {
        // The transport is closed by the connection's owner, whose close() is awaited and tracked (the
        // toolset's supervisor), not by a task nobody waits for. Before the connection is open, its
        // opening reports the failure (a probe that killed a stdio child is not the server's loss).
        // The owner hears of the loss before the calls do: a caller reacting to its failed call finds the
        // server no longer live (purra's catalogue stale at once), never a call sent towards what comes back.
        self.end_then(reason.clone(), |opened| {
            if opened {
                self.events.connection_lost(&reason);
            }
        });
    }

    /// The connection is open: from now on a loss is reported to the owner (one that happened just
    /// before is reported now).
    fn opened(&self) {
        self.open.store(true, Ordering::SeqCst);
        let ended = self.state.lock().ended.clone();
        if let Some(reason) = ended {
            self.events.connection_lost(&reason);
        }
    }

    fn send(&self, message: String) {
        if let Some(transport) = self.transport.get().and_then(Weak::upgrade) {
            let _ = transport.send(Outbound::other(message));
        }
    }

    fn handle(&self, message: Message<'_>) {
        match message {
            Message::Response { id: Some(id), outcome } => {
                let outcome = outcome.map(|raw| raw.to_owned()).map_err(|e| McpError::Rpc {
                    code: e.code,
                    message: e.message.to_string(),
                    data: e.data.map(|d| d.get().to_owned()),
                });
                self.settle(id, outcome);
            }
            // An error with a null id answers something unparseable we never send; nothing waits on it.
            Message::Response { id: None, .. } => {}
            // Server-to-client requests are answered inline, one at a time, before the next message is read:
            // no task or queue per request here, so a flood costs nothing beyond the transport's own bounds,
            // and each answer is small whatever the request carried.
            Message::Request { id, .. } if !jsonrpc::is_echoable_id(id) => {}
            // The modern era has no server-to-client requests (input comes back in `input_required`): a
            // server sending one anyway gets `-32601` below, and nothing reaches the host.
            Message::Request { id, method, params }
                if method == "elicitation/create" && self.elicitations.is_some() && self.modern.load().is_none() =>
            {
                self.elicit(id, params);
            }
            Message::Request { id, method, .. } => {
                let reply = if method == "ping" {
                    jsonrpc::result_response(id, "{}")
                } else {
                    // This text goes back to the server that sent it, not out of the engine: nothing to redact.
                    let method =
                        crate::guard::redact::quote_bytes(method.as_bytes(), &crate::guard::redact::Secrets::default());
                    jsonrpc::error_response(id, METHOD_NOT_FOUND, &format!("this client does not handle {method}"))
                };
                self.send(reply);
            }
            Message::Notification { method, params } => match method.as_ref() {
                "notifications/progress" => self.progressed(params),
                "notifications/message" => {
                    if let Some(params) = params {
                        self.events.server_log(params);
                    }
                }
                "notifications/tools/list_changed" => self.events.tools_list_changed(),
                "notifications/resources/updated" => {
                    if let Some(uri) = params.and_then(|p| serde_json::from_str::<mcp::UriParams>(p.get()).ok()) {
                        self.events.resource_updated(&uri.uri);
                    }
                }
                "notifications/resources/list_changed" => self.events.list_changed("resources"),
                "notifications/prompts/list_changed" => self.events.list_changed("prompts"),
                // The acknowledgement of a listen for resources only (its honored filter has no tools).
                "notifications/subscriptions/acknowledged"
                    if params.is_some_and(|p| mcp::acknowledges_no_tools(p.get())) => {}
                // A `subscriptions/listen` took effect. A change made between our last listing and now
                // was announced to nobody (the first listing precedes the subscription; a re-opened one
                // leaves a gap), so treat the acknowledgement as a change: one coalesced re-list.
                "notifications/subscriptions/acknowledged" => self.events.tools_may_have_changed(),
                "notifications/cancelled" => self.elicitation_cancelled(params),
                // `notifications/elicitation/complete` (URL mode) has nothing waiting on it here: the
                // accept was the host's whole part, and the spec lets a client ignore it.
                _ => {}
            },
        }
    }
}

/// A server request's id as a key: its JSON text, normalized (`"a"` and `"\u0061"` are one id).
fn request_key(id: &RawValue) -> String {
    serde_json::from_str::<serde_json::Value>(id.get()).map_or_else(|_| id.get().to_owned(), |id| id.to_string())
}

/// Start the sweeper under a supervisor: if it ever panics, no timeout would fire again, so the
/// connection ends with `McpError::Internal` and every pending request settles with it.
fn start_sweeper(shared: &Arc<ConnectionCore>) {
    let sweeper = tokio::spawn(sweep(shared.clone()));
    let owner = Arc::downgrade(shared);
    tokio::spawn(async move {
        let Err(failure) = sweeper.await else { return };
        if let (true, Some(shared)) = (failure.is_panic(), owner.upgrade()) {
            shared.lose(McpError::Internal("the connection's timeout task panicked; the connection was ended".into()));
        }
    });
}

/// The one timer of a connection: fails every request whose idle deadline has passed, then sleeps
/// until the earliest remaining one (or until woken for an earlier one).
async fn sweep(connection: Arc<ConnectionCore>) {
    loop {
        #[cfg(test)]
        if connection.sweep_fault.load(Ordering::SeqCst) {
            panic!("injected sweeper fault");
        }
        let now = Instant::now();
        let (expired, next) = {
            let mut state = connection.state.lock();
            if state.ended.is_some() {
                return;
            }
            if connection.elicitation_open() {
                state.pending.values_mut().filter(|p| p.deadline <= now).for_each(|p| p.deadline = now + p.timeout);
            }
            let expired: Vec<RequestId> =
                state.pending.iter().filter(|(_, p)| p.deadline <= now).map(|(id, _)| *id).collect();
            let next = state.pending.values().filter(|p| p.deadline > now).map(|p| p.deadline).min();
            state.sweep_target = next;
            (expired, next)
        };
        for id in expired {
            let timeout = connection.state.lock().pending.get(&id).map(|p| p.timeout);
            if let Some(timeout) = timeout {
                // Re-checked under the lock: a progress notification may have just moved the deadline.
                let error = McpError::Timeout { after_ms: timeout.as_millis() as u64 };
                connection.give_up_if(id, error, |p| p.deadline <= now);
            }
        }
        // Held across the wait: `end` (close, loss, or the Connection dropped) wakes and stops this task.
        let wake = connection.sweep_wake.notified();
        tokio::pin!(wake);
        wake.as_mut().enable();
        match next {
            Some(deadline) => {
                tokio::select! {
                    _ = tokio::time::sleep_until(deadline) => {}
                    _ = &mut wake => {}
                }
            }
            None => wake.await,
        }
    }
}

impl ConnectionCore {
    /// One message (not a batch). Parsing keeps every payload (`params`, `result`, `error.data`) as raw
    /// text, which serde_json scans without recursion, so nesting depth cannot break the frame; a message
    /// that still does not decode fails only the request it answers, when its id can be read.
    fn deliver(&self, frame: &[u8]) -> bool {
        let problem = match serde_json::from_slice::<RawMessage>(frame) {
            Ok(raw) => match raw.classify() {
                Some(message) => {
                    self.handle(message);
                    return true;
                }
                None => "a response with neither result nor error".to_owned(),
            },
            Err(e) => format!("a malformed response ({e})"),
        };
        match jsonrpc::sniff_response_id(frame) {
            // One of our ids: fail that request (a no-op when it already settled) and keep the session,
            // since the framing is intact and the server can still answer the others.
            Some(id) if id > 0 && id < self.next_id.load(Ordering::Relaxed) => {
                self.settle(id, Err(McpError::Protocol(format!("MCP server sent {problem}"))));
                true
            }
            _ => false,
        }
    }
}

/// What a request still waiting fails with when its connection ends for `reason`. A request handed to the
/// transport when the server broke or died may have run: its error says so (`sent: true`,
/// [`McpError::Sent`]), so no caller takes it for one that never left.
fn lost_request_error(reason: &McpError, dispatched: bool) -> McpError {
    match dispatched {
        true => reason.clone().after_send(),
        false => reason.clone(),
    }
}

impl MessageSink for ConnectionCore {
    fn on_message(&self, frame: &[u8]) -> bool {
        let delivered = std::panic::catch_unwind(AssertUnwindSafe(|| {
            let is_batch = frame.iter().find(|b| !b.is_ascii_whitespace()) == Some(&b'[');
            if !is_batch {
                return self.deliver(frame);
            }
            let Ok(items) = serde_json::from_slice::<Vec<&RawValue>>(frame) else { return false };
            items.into_iter().all(|item| self.deliver(item.get().as_bytes()))
        }));
        // A bug while handling a message: end the session so every pending request settles, rather than
        // let the panic take the transport's reader (and with it every later response) down.
        delivered.unwrap_or_else(|_| {
            self.lose(McpError::Internal("the engine panicked while handling a message from the server".into()));
            true
        })
    }

    fn on_request_failed(&self, id: RequestId, error: McpError) {
        self.settle(id, Err(error));
    }

    fn is_pending(&self, id: RequestId) -> bool {
        self.state.lock().pending.contains_key(&id)
    }

    fn awaited(&self) -> Vec<RequestId> {
        self.state.lock().pending.iter().filter(|(_, p)| p.dispatched && !p.long_lived).map(|(id, _)| *id).collect()
    }

    fn on_closed(&self, reason: McpError) {
        self.lose(reason);
    }

    fn session_renewed(&self, generation: u64) -> futures_util::future::BoxFuture<'_, Result<()>> {
        self.events.session_renewed(generation)
    }

    fn keep_waiting(&self, id: RequestId) {
        if let Some(pending) = self.state.lock().pending.get_mut(&id) {
            // Later only, so the sweeper (sleeping towards an earlier time) needs no wake.
            pending.deadline = Instant::now() + pending.timeout;
        }
    }

    fn waited_on_host(&self, within: Duration) -> bool {
        self.elicitation_open()
            || self.elicitations.as_ref().is_some_and(|e| e.last_ended.lock().is_some_and(|at| at.elapsed() < within))
    }
}

#[cfg(test)]
mod tests;
