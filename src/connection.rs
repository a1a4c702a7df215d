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

use crate::elicitation::{self, Elicitor};
use crate::error::{McpError, Result};
use crate::limits::{MAX_ELICITATIONS_IN_FLIGHT, MAX_JSON_DEPTH};
use crate::progress::ProgressListener;
use crate::protocol::era::{self, Era};
use crate::protocol::jsonrpc::{self, Message, RawMessage, RequestId, INVALID_PARAMS, METHOD_NOT_FOUND};
use crate::protocol::mcp::{self, InitializeResult};
use crate::protocol::nesting;
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
    fn session_renewed(&self, _generation: u64) -> crate::transport::BoxFuture<'_, Result<()>> {
        Box::pin(std::future::ready(Ok(())))
    }
    /// The server sent `notifications/message` (a log); `params` as sent, untrusted (see `server_log`).
    fn server_log(&self, _params: &RawValue) {}
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
    started: Mutex<Option<(Weak<Shared>, RequestId)>>,
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

    fn attach(&self, shared: &Arc<Shared>, id: RequestId) {
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
    fn reusing(discovered: &era::Discovered) -> SessionInfo {
        SessionInfo {
            protocol_version: discovered.version,
            // Not kept across connections (see `era::Discovered`): unknown to a connection that did not ask.
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
    pub fn known(&self) -> era::Known {
        match self.era {
            _ if !self.era_evidence => era::Known::Nothing,
            Era::Legacy => era::Known::Era(Era::Legacy),
            Era::Modern(version) => {
                let mut discovered = era::Discovered::of(version, &self.capabilities, self.tools_list_changed);
                discovered.resources_subscribe = self.resources_subscribe;
                discovered.resources_list_changed = self.resources_list_changed;
                discovered.prompts_list_changed = self.prompts_list_changed;
                discovered.skills = self.skills;
                era::Known::Discovered(Arc::new(discovered))
            }
        }
    }
}

pub struct Connection {
    shared: Arc<Shared>,
    transport: Arc<dyn Transport>,
    pub session: SessionInfo,
}

pub struct Shared {
    state: Mutex<State>,
    next_id: AtomicU64,
    transport: OnceLock<Weak<dyn Transport>>,
    events: Arc<dyn ConnectionEvents>,
    /// Wakes the sweeper when a request's deadline is earlier than the one it sleeps towards.
    sweep_wake: Notify,
    /// This connection, for the tasks it starts (elicitations).
    me: Weak<Shared>,
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
        known: &era::Known,
    ) -> std::result::Result<Connection, (McpError, Option<String>)> {
        let (mut hint, reuse) = match known {
            era::Known::Nothing => (None, None),
            era::Known::Era(era) => (Some(*era), None),
            era::Known::Discovered(discovered) => (Some(Era::Modern(discovered.version)), Some(discovered.as_ref())),
        };
        // `connectTimeoutMs` bounds the whole opening: the probe, `initialize`, a restart.
        let budget = Budget::new(handshake);
        loop {
            let shared = Shared::new(events.clone(), elicitor.clone(), apps);
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
    /// A result with `isError: true` is turned into `McpError::Tool` by [`tool_outcome`].
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
}

pub type Headers = Vec<(reqwest::header::HeaderName, reqwest::header::HeaderValue)>;

/// The owner's side of a `-32020` HeaderMismatch on a `tools/call`: the server refused the request
/// before handling it, most likely because the client's copy of the tool's `x-mcp-header` annotations
/// is out of date. The owner re-lists the server's tools and answers with the headers the call must
/// carry now, or with why it must not be sent again (the tool is gone or failed vetting).
pub trait HeaderMismatch: Send + Sync {
    fn relisted<'a>(&'a self, arguments: &'a RawValue) -> transport::BoxFuture<'a, Result<Headers>>;
}

/// A modern-era call, kept to be sent again after a round of input (`input_required`).
struct CallAgain {
    name: Box<str>,
    arguments: Box<RawValue>,
    headers: Vec<(reqwest::header::HeaderName, reqwest::header::HeaderValue)>,
    abort: Option<Arc<AbortHandle>>,
    timeout: Duration,
    /// Set until the call has been sent again after a `-32020` (once at most).
    on_header_mismatch: Option<Arc<dyn HeaderMismatch>>,
    /// This is that second sending.
    resent_after_mismatch: bool,
    caller_meta: Option<Box<str>>,
    progress: Option<Arc<dyn ProgressListener>>,
}

/// The reply of round `round` of a call: a complete result (or a failure) goes to `reply`; an
/// `input_required` is fulfilled through the host (in a task the connection owns, stopped with it or
/// with the call's abort) and the call is sent again with a new id, the answers and the server's
/// `requestState` byte for byte. Every path ends in `reply`, so no caller waits forever.
fn rounds(shared: Weak<Shared>, call: Arc<CallAgain>, reply: Reply, round: usize) -> Completion {
    Box::new(move |outcome| {
        let result = match outcome {
            Ok(result) => result,
            Err(McpError::Rpc { code: era::HEADER_MISMATCH, message, .. }) => {
                return resend_after_header_mismatch(shared, call, reply, round, message);
            }
            Err(e) => return reply.send(Err(e)),
        };
        // A nesting bomb is the depth check's to report (`tool_outcome`), not the parser's.
        if nesting::exceeds_depth(result.get().as_bytes(), MAX_JSON_DEPTH) {
            return reply.send(Ok(result));
        }
        let required = match crate::mrtr::input_required(&result) {
            Ok(None) => return reply.send(Ok(result)),
            Ok(Some(required)) => required,
            Err(e) => return reply.send(Err(e)),
        };
        if round >= crate::limits::MAX_INPUT_ROUNDS {
            return reply.send(Err(crate::mrtr::too_many_rounds()));
        }
        let Some(owner) = shared.upgrade() else { return reply.send(Err(McpError::Closed)) };
        let stop = owner.stop_rounds.clone();
        owner.rounds.spawn(async move {
            let Some(shared) = shared.upgrade() else { return reply.send(Err(McpError::Closed)) };
            let elicitor = shared.elicitations.as_ref().map(|e| e.elicitor.clone());
            let aborted = async {
                match &call.abort {
                    Some(abort) => abort.wait().await,
                    None => std::future::pending().await,
                }
            };
            let prompts = shared.round_prompts.clone();
            let fulfilling = async {
                // Rounds that ask the host nothing (state only) take no prompt slot.
                let _slot = match required.requests.is_empty() {
                    true => None,
                    false => Some(prompts.acquire_owned().await.map_err(|_| McpError::Closed)?),
                };
                crate::mrtr::fulfil(&required.requests, elicitor.as_deref()).await
            };
            let fulfilled = tokio::select! {
                biased;
                _ = stop.cancelled() => Err(McpError::Closed),
                _ = aborted => Err(McpError::Aborted),
                fulfilled = fulfilling => fulfilled,
            };
            let responses = match fulfilled {
                Ok(responses) => responses,
                Err(e) => return reply.send(Err(e)),
            };
            let state = required.request_state.as_deref();
            let params = |id, meta: Option<&str>| {
                Some(crate::mrtr::retry_params(
                    &mcp::call_tool_params(&call.name, &call.arguments, id, meta, call.caller_meta.as_deref()),
                    &responses,
                    state,
                ))
            };
            let next = Reply::Callback(rounds(Arc::downgrade(&shared), call.clone(), reply, round + 1));
            send_again(&shared, &call, params, next);
        });
    })
}

/// Send a kept call again under a new id (the params say what it carries this time).
fn send_again(
    shared: &Arc<Shared>,
    call: &CallAgain,
    params: impl FnOnce(RequestId, Option<&str>) -> Option<String>,
    next: Reply,
) {
    if let Some(mut message) =
        shared.register("tools/call", Some(&call.name), params, call.timeout, call.abort.as_deref(), next)
    {
        message.extra_headers = call.headers.clone();
        shared.listen_for_progress(&message, call.progress.clone());
        match shared.transport.get().and_then(Weak::upgrade) {
            Some(transport) => shared.dispatch(&transport, vec![message]),
            // The transport is gone: ending the connection fails this call with everything pending.
            None => {
                shared.end(McpError::Closed);
            }
        }
    }
}

/// `-32020` HeaderMismatch: the server refused the call before executing it, so sending it again is
/// not a replay of a call that ran. Once per call: the owner re-lists the tools (the annotations that
/// decide the `Mcp-Param-*` headers may have changed) and, if the tool is still published and vetted,
/// the call goes again with the headers of the new listing, under a new id and in the same round (an
/// `input_required` round's answers are not carried over: the server never saw them). A second
/// refusal fails the call.
fn resend_after_header_mismatch(
    shared: Weak<Shared>,
    call: Arc<CallAgain>,
    reply: Reply,
    round: usize,
    message: String,
) {
    let Some(hook) = call.on_header_mismatch.clone() else {
        let again = if call.resent_after_mismatch { " again, after the tools were re-listed" } else { "" };
        return reply.send(Err(McpError::Protocol(format!(
            "the server refused the call's headers{again} (-32020 HeaderMismatch: {message}); it was not executed"
        ))));
    };
    let Some(owner) = shared.upgrade() else { return reply.send(Err(McpError::Closed)) };
    let stop = owner.stop_rounds.clone();
    owner.rounds.spawn(async move {
        let aborted = async {
            match &call.abort {
                Some(abort) => abort.wait().await,
                None => std::future::pending().await,
            }
        };
        let relisted = tokio::select! {
            biased;
            _ = stop.cancelled() => Err(McpError::Closed),
            _ = aborted => Err(McpError::Aborted),
            relisted = hook.relisted(&call.arguments) => relisted,
        };
        let headers = match relisted {
            Ok(headers) => headers,
            Err(e) => return reply.send(Err(e)),
        };
        let Some(shared) = shared.upgrade() else { return reply.send(Err(McpError::Closed)) };
        let again = Arc::new(CallAgain {
            name: call.name.clone(),
            arguments: call.arguments.clone(),
            headers,
            abort: call.abort.clone(),
            timeout: call.timeout,
            on_header_mismatch: None,
            resent_after_mismatch: true,
            caller_meta: call.caller_meta.clone(),
            progress: call.progress.clone(),
        });
        let params = |id, meta: Option<&str>| {
            Some(mcp::call_tool_params(&again.name, &again.arguments, id, meta, again.caller_meta.as_deref()))
        };
        let next = Reply::Callback(rounds(Arc::downgrade(&shared), again.clone(), reply, round));
        send_again(&shared, &again, params, next);
    });
}

/// The outcome of a `tools/call`: `isError: true` becomes `McpError::Tool` with the server's own text,
/// and a result nested deeper than `MAX_JSON_DEPTH` becomes `McpError::ResultTooDeep` (it would break
/// the agent's `JSON.parse`/`JSON.stringify`, or anything else that walks it recursively).
pub fn tool_outcome(outcome: Result<Box<RawValue>>) -> Result<Box<RawValue>> {
    let result = outcome?;
    if nesting::exceeds_depth(result.get().as_bytes(), MAX_JSON_DEPTH) {
        return Err(McpError::ResultTooDeep { max_depth: MAX_JSON_DEPTH });
    }
    // Most results carry no `isError` key at all; the already-validated text need not be parsed again.
    if !result.get().starts_with('{') {
        return Err(McpError::Protocol("tools/call returned a result that is not an object".into()));
    }
    if memchr::memmem::find(result.get().as_bytes(), b"\"isError\"").is_none() {
        return Ok(result);
    }
    let view: mcp::CallResultView = serde_json::from_str(result.get())
        .map_err(|e| McpError::Protocol(format!("tools/call returned a malformed result: {e}")))?;
    if view.is_error == Some(true) {
        return Err(McpError::Tool(mcp::tool_error_text(&view)));
    }
    Ok(result)
}

/// Why a connection could not be opened.
enum Negotiation {
    Failed(McpError),
    /// The server's process ended on the modern probe: a session-based server that exits on an unknown
    /// request. Started again, it gets `initialize`.
    Restart,
}

/// How long the whole opening may take (`connectTimeoutMs`), and what aborts it: every request of the
/// handshake gets what is left, so a probe, `initialize` and a restart together take no longer.
struct Budget<'a> {
    deadline: Instant,
    total: Duration,
    abort: Option<&'a AbortHandle>,
}

impl<'a> Budget<'a> {
    fn new(handshake: &RequestOptions<'a>) -> Budget<'a> {
        Budget { deadline: Instant::now() + handshake.timeout, total: handshake.timeout, abort: handshake.abort }
    }

    /// What a request sent now may wait.
    fn left(&self) -> RequestOptions<'a> {
        RequestOptions { timeout: self.deadline.saturating_duration_since(Instant::now()), abort: self.abort }
    }

    /// A request that ran out of the budget timed out after the whole of it, not after what was left.
    fn timed_out(&self, error: McpError) -> McpError {
        match error {
            McpError::Timeout { .. } => McpError::Timeout { after_ms: self.total.as_millis() as u64 },
            other => other,
        }
    }
}

/// Find the server's era and open it: `server/discover` first (unless it is known to be session-based),
/// then `initialize` if the answer was not a modern one. Over stdio both may be in flight at once (see
/// [`probe_stdio`]). A server remembered as session-based that refuses `initialize` with `-32022` naming
/// a modern version we speak has turned modern: it is asked `server/discover` at that version.
///
/// With a modern server's remembered discovery answer (`reuse`), nothing is asked over HTTP: the
/// connection is modern at once, and its first request is the check (the caller opens it again with
/// the probe if that request says the server is not what was remembered). Over stdio the probe is sent
/// anyway: the process is new each time (it may be another build of the server since), a
/// session-based child may ignore or die of a request it does not expect without `initialize` (which
/// the quiet period and the restart above are for), and asking a local pipe costs next to nothing.
async fn negotiate(
    shared: &Arc<Shared>,
    transport: &Arc<dyn Transport>,
    budget: &Budget<'_>,
    hint: Option<Era>,
    reuse: Option<&era::Discovered>,
) -> std::result::Result<SessionInfo, Negotiation> {
    let capabilities = shared.capabilities();
    if let Some(discovered) = reuse.filter(|_| transport.may_be_modern() && !transport.is_stdio()) {
        shared.modern.store(Some(ModernWire::new(discovered.version, &capabilities)));
        return Ok(SessionInfo::reusing(discovered));
    }
    let mut version = match hint {
        Some(Era::Modern(version)) => version,
        _ => era::MODERN_PROTOCOL_VERSION,
    };
    let mut refused = None;
    if hint == Some(Era::Legacy) || !transport.may_be_modern() {
        match handshake_with(shared, transport, &budget.left()).await {
            Err(e) if transport.may_be_modern() => match era::modern_version_named(&e) {
                Some(named) => {
                    version = named;
                    refused = Some(e);
                }
                None => return Err(Negotiation::Failed(e)),
            },
            done => return done.map_err(Negotiation::Failed),
        }
    }
    if transport.is_stdio() {
        return probe_stdio(shared, transport, budget, version, &capabilities, refused).await;
    }
    // Over HTTP one question at a time: a concurrent `initialize` would open a session on a modern server.
    let mut evidence = true;
    let mut retried = false;
    loop {
        shared.modern.store(Some(ModernWire::new(version, &capabilities)));
        let outcome = request(shared, transport, "server/discover", None, |_| None, &budget.left(), false).await;
        match era::classify(outcome, version) {
            era::Verdict::Modern(version, result) => return Ok(SessionInfo::discovered(version, result)),
            // Once: a server that refuses the version it just named is not worth a loop.
            era::Verdict::Retry(next) if !retried => {
                retried = true;
                version = next;
            }
            era::Verdict::Retry(_) => return Err(Negotiation::Failed(refused_again(version))),
            era::Verdict::Fatal(e) => return Err(Negotiation::Failed(e)),
            era::Verdict::Legacy => break,
            era::Verdict::Unknown => {
                evidence = false;
                break;
            }
        }
    }
    shared.modern.store(None);
    if shared.state.lock().ended.is_some() {
        return Err(Negotiation::Restart);
    }
    // `initialize` was refused as on a modern server, and the probe did not find one: nothing more to try.
    if let Some(refused) = refused {
        return Err(Negotiation::Failed(refused));
    }
    let mut session = handshake_with(shared, transport, &budget.left()).await.map_err(Negotiation::Failed)?;
    session.era_evidence = evidence;
    Ok(session)
}

fn refused_again(version: &str) -> McpError {
    McpError::Protocol(format!("the server refused protocol version {version} again after naming it as supported"))
}

/// Which request of a stdio probe an answer is for.
#[derive(Clone, Copy)]
enum Probe {
    Discover(&'static str),
    Initialize,
}

/// The requests of a stdio probe, by the index their answers come back with: what each asked, and while it
/// is pending `Some` of its id (`Some(None)`: refused before it was sent, its error on the way).
type Asked = Vec<(Probe, Option<Option<RequestId>>)>;

/// The stdio probe. A child process says nothing until it is ready, which may take a first `uvx` or
/// `docker run` download or a loaded machine's while: its silence is no evidence of an era. So
/// `server/discover` stays pending for the whole of `connectTimeoutMs`; once the server has read it (its
/// stdin pipe drained, where that can be told) and been quiet for `STDIO_PROBE_QUIET_MS` (or half the
/// budget) since, `initialize` goes out beside it, for a session-based server that ignores requests it
/// does not know. A server reads its pipe in order, so one that answers
/// `server/discover` has read it before `initialize`; the first answer that proves an era decides it:
///
/// - a discovery answer: modern, unless `initialize` is in flight too. Then its answer, read by the server
///   after the probe, says which era the connection serves from now on: refused (the Python SDK 2.x ties a
///   connection to its first request's era and answers `-32022`) or unanswered for `STDIO_PROBE_QUIET_MS`
///   more, modern; accepted (the TypeScript SDK 2.x's `serveStdio` falls back to a session when
///   `initialize` follows its probe), session-based, as below: never a session left half open;
/// - an `initialize` result: session-based, and the handshake is completed (`notifications/initialized`);
///   a discovery answer after it is dropped;
/// - `-32022` to `initialize` naming a modern version we speak: modern. `server/discover` is asked again
///   at that version, and whichever discovery answer comes first (the late one or the new) opens it;
/// - an error or a session-based answer to `server/discover`: `initialize` is sent at once if it was not.
async fn probe_stdio(
    shared: &Arc<Shared>,
    transport: &Arc<dyn Transport>,
    budget: &Budget<'_>,
    version: &'static str,
    capabilities: &serde_json::Map<String, serde_json::Value>,
    mut refused: Option<McpError>,
) -> std::result::Result<SessionInfo, Negotiation> {
    let (answers, mut answered) = tokio::sync::mpsc::unbounded_channel::<(usize, Result<Box<RawValue>>)>();
    let mut asked: Asked = Vec::new();
    let ask = |probe: Probe, asked: &mut Asked| {
        let index = asked.len();
        let answers = answers.clone();
        let reply = Reply::Callback(Box::new(move |outcome| {
            let _ = answers.send((index, outcome));
        }));
        let opts = budget.left();
        let (method, params) = match probe {
            Probe::Discover(version) => {
                shared.modern.store(Some(ModernWire::new(version, capabilities)));
                ("server/discover", None)
            }
            Probe::Initialize => {
                shared.modern.store(None);
                ("initialize", Some(mcp::initialize_params(capabilities)))
            }
        };
        let message = shared.register(method, None, |_, meta| with_meta(params, meta), opts.timeout, opts.abort, reply);
        let id = message.as_ref().and_then(|m| m.request_id);
        if let Some(message) = message {
            shared.dispatch(transport, vec![message]);
        }
        asked.push((probe, Some(id)));
    };
    let forget_all = |asked: &mut Asked| {
        for (_, pending) in asked.iter_mut() {
            if let Some(Some(id)) = pending.take() {
                shared.forget(id);
            }
        }
    };
    let quiet = Duration::from_millis(crate::limits::STDIO_PROBE_QUIET_MS).min(budget.total / 2);
    // The quiet period runs from when the child has read the probe: one still starting reads nothing.
    let mut read_at: Option<Instant> = None;
    let mut wake_at = Instant::now();
    let mut initialize_sent = refused.is_some();
    // One more `server/discover` at most: at a version the server named, by either request.
    let mut asked_again = false;
    let mut evidence = true;
    // A discovery answer, held while `initialize` (sent beside it) is answered, until `modern_by` at most.
    let mut modern: Option<(&'static str, era::DiscoverResult)> = None;
    let mut modern_by = budget.deadline;
    let open_modern = |asked: &mut Asked, modern: Option<(&'static str, era::DiscoverResult)>| {
        forget_all(asked);
        let (version, result) = modern.expect("a discovery answer is held");
        shared.modern.store(Some(ModernWire::new(version, capabilities)));
        SessionInfo::discovered(version, result)
    };
    let aborted = async {
        match budget.abort {
            Some(abort) => abort.wait().await,
            None => std::future::pending().await,
        }
    };
    tokio::pin!(aborted);
    ask(Probe::Discover(version), &mut asked);
    loop {
        let (index, outcome) = tokio::select! {
            biased;
            _ = &mut aborted => {
                forget_all(&mut asked);
                return Err(Negotiation::Failed(McpError::Aborted));
            }
            Some(answer) = answered.recv() => answer,
            _ = tokio::time::sleep_until(wake_at), if !initialize_sent => {
                let now = Instant::now();
                match read_at {
                    None if transport.input_unread() == Some(true) => {
                        wake_at = now + Duration::from_millis(crate::limits::STDIO_PROBE_READ_POLL_MS);
                    }
                    None => {
                        read_at = Some(now);
                        wake_at = now + quiet;
                    }
                    Some(_) => {
                        initialize_sent = true;
                        ask(Probe::Initialize, &mut asked);
                    }
                }
                continue;
            }
            _ = tokio::time::sleep_until(modern_by), if modern.is_some() => return Ok(open_modern(&mut asked, modern)),
        };
        let Some((probe, pending)) = asked.get_mut(index) else { continue };
        if pending.take().is_none() {
            continue; // forgotten
        }
        match *probe {
            Probe::Discover(at) => match era::classify(outcome, at) {
                era::Verdict::Modern(version, result) => {
                    let initializing =
                        asked.iter().any(|(probe, pending)| matches!(probe, Probe::Initialize) && pending.is_some());
                    if !initializing {
                        forget_all(&mut asked);
                        shared.modern.store(Some(ModernWire::new(version, capabilities)));
                        return Ok(SessionInfo::discovered(version, result));
                    }
                    // `initialize` is on its way too, and what the server makes of it says which era it
                    // serves from now on. Read in order after the probe, it is answered soon after it.
                    modern = Some((version, result));
                    modern_by = (Instant::now() + quiet).min(budget.deadline);
                }
                era::Verdict::Retry(next) if !asked_again => {
                    asked_again = true;
                    ask(Probe::Discover(next), &mut asked);
                }
                era::Verdict::Retry(_) => {
                    forget_all(&mut asked);
                    return Err(Negotiation::Failed(refused_again(at)));
                }
                era::Verdict::Fatal(e) => {
                    forget_all(&mut asked);
                    return Err(Negotiation::Failed(e));
                }
                era::Verdict::Legacy => {}
                era::Verdict::Unknown => evidence = false,
            },
            Probe::Initialize => match outcome {
                // Refused (or not answered) after the probe found a modern server: modern.
                Err(_) if modern.is_some() => return Ok(open_modern(&mut asked, modern)),
                Ok(raw) => {
                    forget_all(&mut asked);
                    shared.modern.store(None);
                    let mut session = initialized(transport, raw, &budget.left()).await.map_err(Negotiation::Failed)?;
                    session.era_evidence = evidence;
                    return Ok(session);
                }
                Err(e @ (McpError::Aborted | McpError::Closed)) => {
                    forget_all(&mut asked);
                    return Err(Negotiation::Failed(e));
                }
                Err(e) => {
                    if let Some(named) = era::modern_version_named(&e).filter(|_| !asked_again) {
                        asked_again = true;
                        ask(Probe::Discover(named), &mut asked);
                    }
                    refused = Some(e);
                }
            },
        }
        if modern.is_some() {
            continue;
        }
        // No era proven by this answer. A child that died of the probe is started again for `initialize`.
        if shared.state.lock().ended.is_some() {
            forget_all(&mut asked);
            shared.modern.store(None);
            return Err(Negotiation::Restart);
        }
        if asked.iter().any(|(_, pending)| pending.is_some()) {
            continue;
        }
        if !initialize_sent {
            initialize_sent = true;
            ask(Probe::Initialize, &mut asked);
            continue;
        }
        shared.modern.store(None);
        let failure = refused
            .unwrap_or_else(|| McpError::Protocol("the server answered neither server/discover nor initialize".into()));
        return Err(Negotiation::Failed(failure));
    }
}

async fn handshake_with(
    shared: &Arc<Shared>,
    transport: &Arc<dyn Transport>,
    opts: &RequestOptions<'_>,
) -> Result<SessionInfo> {
    let params = mcp::initialize_params(&shared.capabilities());
    let raw = request(shared, transport, "initialize", None, |_| Some(params), opts, false).await?;
    initialized(transport, raw, opts).await
}

/// Complete the session-based handshake `initialize` answered with `raw`: version check,
/// `notifications/initialized`.
async fn initialized(
    transport: &Arc<dyn Transport>,
    raw: Box<RawValue>,
    opts: &RequestOptions<'_>,
) -> Result<SessionInfo> {
    let init: InitializeResult = serde_json::from_str(raw.get())
        .map_err(|e| McpError::Protocol(format!("initialize returned a malformed result: {e}")))?;
    let protocol_version = mcp::check_negotiated_version(&init.protocol_version).map_err(McpError::Protocol)?;
    let initialized = Outbound::other(jsonrpc::notification("notifications/initialized", None));
    // Bounded like the request before it, and cancelled with it: a server that never answers the
    // `initialized` POST holds the handshake no longer than an unanswered `initialize` would.
    let completing = tokio::time::timeout(opts.timeout, transport.complete_handshake(initialized, protocol_version));
    let aborted = async {
        match opts.abort {
            Some(abort) => abort.wait().await,
            None => std::future::pending().await,
        }
    };
    tokio::select! {
        completed = completing => completed.map_err(|_| McpError::Timeout { after_ms: opts.timeout.as_millis() as u64 })??,
        _ = aborted => return Err(McpError::Aborted),
    }
    let info = init.server_info.unwrap_or_default();
    Ok(SessionInfo {
        protocol_version,
        server_name: info.name,
        server_version: info.version,
        capabilities: init.capabilities.names(),
        resources_subscribe: init.capabilities.resources_subscribe(),
        resources_list_changed: init.capabilities.list_changed("resources"),
        prompts_list_changed: init.capabilities.list_changed("prompts"),
        skills: init.capabilities.skills(),
        tools_list_changed: init.capabilities.tools.and_then(|t| t.list_changed).unwrap_or(false),
        instructions: init.instructions,
        era: Era::Legacy,
        era_evidence: true,
        discovery_reused: false,
    })
}

/// A request's params with the modern era's `_meta` members added, if it is sent in that era.
fn with_meta(params: Option<String>, meta: Option<&str>) -> Option<String> {
    match meta {
        Some(meta) => Some(era::with_meta(params.as_deref(), meta)),
        None => params,
    }
}

/// An engine-internal request awaited in place (handshake, listings).
async fn request(
    shared: &Arc<Shared>,
    transport: &Arc<dyn Transport>,
    method: &str,
    name: Option<&str>,
    params: impl FnOnce(RequestId) -> Option<String>,
    opts: &RequestOptions<'_>,
    long_lived: bool,
) -> Result<Box<RawValue>> {
    let (reply, response) = oneshot::channel();
    let params = |id, meta: Option<&str>| with_meta(params(id), meta);
    let message = shared.register(method, name, params, opts.timeout, opts.abort, Reply::Channel(reply));
    if let Some(mut message) = message {
        message.long_lived = long_lived;
        shared.dispatch(transport, vec![message]);
    }
    response.await.unwrap_or(Err(McpError::Closed))
}

impl Shared {
    fn new(events: Arc<dyn ConnectionEvents>, elicitor: Option<Arc<Elicitor>>, apps: bool) -> Arc<Shared> {
        Arc::new_cyclic(|me| Shared {
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
        mcp::client_capabilities(self.elicitations.as_ref().map(|e| e.elicitor.modes), self.apps)
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
        if self.end(reason.clone()) && self.open.load(Ordering::SeqCst) {
            self.events.connection_lost(&reason);
        }
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
                    let method = transport::quote_bytes(method.as_bytes(), &crate::guard::redact::Secrets::default());
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

/// Elicitations: the host's answer is awaited in a task the connection owns, never inline.
impl Shared {
    /// Answer `elicitation/create` through the host: refused at once (invalid params) when it asks for
    /// an undeclared mode or breaks the spec's schema rules, or (busy) when `MAX_ELICITATIONS_IN_FLIGHT`
    /// are open; otherwise the host is asked in a task, and its answer, checked, goes back to this
    /// server only. The request's text goes to the host and nowhere else.
    fn elicit(&self, id: &RawValue, params: Option<&RawValue>) {
        let Some(elicitations) = &self.elicitations else { return };
        let request = match elicitation::parse_request(params, elicitations.elicitor.modes) {
            Ok(request) => request,
            Err(why) => return self.send(jsonrpc::error_response(id, INVALID_PARAMS, &why)),
        };
        let Some(shared) = self.me.upgrade() else { return };
        let key = request_key(id);
        let (ended, cancelled_by_server) = {
            let mut open = elicitations.open.lock();
            let refusal = if open.contains_key(&key) {
                Some("an elicitation with this id is already open")
            } else if open.len() >= MAX_ELICITATIONS_IN_FLIGHT {
                Some("too many elicitations in flight; try again when one is answered")
            } else {
                None
            };
            if let Some(refusal) = refusal {
                drop(open);
                return self.send(jsonrpc::error_response(id, elicitation::BUSY_ERROR_CODE, refusal));
            }
            // The server's `notifications/cancelled` stops the answer, not the slot: the slot is freed only
            // once the host's callback settles, so cancelling cannot open more than the bound of prompts.
            let cancelled_by_server = CancellationToken::new();
            open.insert(key.clone(), cancelled_by_server.clone());
            (elicitations.cancel.child_token(), cancelled_by_server)
        };
        let elicitor = &elicitations.elicitor;
        // The host is told if the question is withdrawn: ended, timed out, or cancelled by the server.
        let mut question = elicitation::Asking::new(elicitor);
        let asking = elicitor.callback.call(elicitation::host_request(&elicitor.server, question.id, &request));
        let timeout = elicitor.timeout;
        let id = id.to_owned();
        elicitations.tasks.spawn(async move {
            let answering = async {
                let mut asking = std::pin::pin!(tokio::time::timeout(timeout, asking));
                tokio::select! {
                    biased;
                    answered = &mut asking => answered,
                    _ = cancelled_by_server.cancelled() => {
                        question.withdraw();
                        asking.await
                    }
                }
            };
            let result = tokio::select! {
                biased;
                // The connection ended: nobody is left to answer.
                _ = ended.cancelled() => None,
                answered = answering => match answered {
                    // The server withdrew the request meanwhile: it gets no answer.
                    _ if cancelled_by_server.is_cancelled() => None,
                    Ok(Ok(answer)) => {
                        question.answered();
                        Some(elicitation::answer(&request, &answer))
                    }
                    // The host threw or rejected; its reason stays with the host.
                    Ok(Err(_)) => {
                        question.answered();
                        Some(elicitation::DECLINE.to_owned())
                    }
                    Err(_) => Some(elicitation::CANCEL.to_owned()),
                },
            };
            shared.elicitation_ended(&key, &id, result);
        });
    }

    fn elicitation_ended(&self, key: &str, id: &RawValue, result: Option<String>) {
        if let Some(elicitations) = &self.elicitations {
            elicitations.open.lock().remove(key);
            *elicitations.last_ended.lock() = Some(Instant::now());
        }
        let ended = {
            let mut state = self.state.lock();
            // Like progress: the server's requests get a full idle period from the answer on. Later
            // only, so the sweeper needs no wake.
            let now = Instant::now();
            for pending in state.pending.values_mut() {
                pending.deadline = pending.deadline.max(now + pending.timeout);
            }
            state.ended.is_some()
        };
        if let (Some(result), false) = (result, ended) {
            self.send(jsonrpc::result_response(id, &result));
        }
    }

    /// The server's `notifications/cancelled` for an open elicitation: stop waiting for the host and
    /// send nothing (the spec's answer to a cancelled request).
    fn elicitation_cancelled(&self, params: Option<&RawValue>) {
        let Some(elicitations) = &self.elicitations else { return };
        let Some(request) = params.and_then(|p| serde_json::from_str::<mcp::CancelledParams>(p.get()).ok()) else {
            return;
        };
        if let Some(stop) = elicitations.open.lock().get(&request_key(request.request_id)) {
            stop.cancel();
        }
    }

    /// While the host is answering an elicitation, the server's requests are not timed out: the tool
    /// call that asked is waiting on the person, not on the server.
    fn elicitation_open(&self) -> bool {
        self.elicitations.as_ref().is_some_and(|e| !e.open.lock().is_empty())
    }

    /// Wait until every elicitation task has stopped (after `end`, which cancels them all).
    async fn elicitations_stopped(&self) {
        if let Some(elicitations) = &self.elicitations {
            elicitations.tasks.close();
            elicitations.tasks.wait().await;
        }
        self.rounds.close();
        self.rounds.wait().await;
    }
}

/// A server request's id as a key: its JSON text, normalized (`"a"` and `"\u0061"` are one id).
fn request_key(id: &RawValue) -> String {
    serde_json::from_str::<serde_json::Value>(id.get()).map_or_else(|_| id.get().to_owned(), |id| id.to_string())
}

/// Start the sweeper under a supervisor: if it ever panics, no timeout would fire again, so the
/// connection ends with `McpError::Internal` and every pending request settles with it.
fn start_sweeper(shared: &Arc<Shared>) {
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
async fn sweep(connection: Arc<Shared>) {
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

impl Shared {
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

impl MessageSink for Shared {
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

    fn session_renewed(&self, generation: u64) -> crate::transport::BoxFuture<'_, Result<()>> {
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
mod tests {
    use super::*;
    use crate::transport::BoxFuture;
    use std::sync::atomic::AtomicUsize;

    /// A transport that records what the connection sends.
    #[derive(Default)]
    struct Recorder {
        sent: Mutex<Vec<String>>,
    }

    impl Transport for Recorder {
        fn send(&self, message: Outbound) -> Result<()> {
            self.sent.lock().push(message.json);
            Ok(())
        }
        fn close(&self) -> BoxFuture<'static, ()> {
            Box::pin(async {})
        }
    }

    #[derive(Default)]
    struct Events {
        lost: Mutex<Option<McpError>>,
    }

    impl ConnectionEvents for Events {
        fn tools_list_changed(&self) {}
        fn connection_lost(&self, reason: &McpError) {
            *self.lost.lock() = Some(reason.clone());
        }
    }

    struct Harness {
        shared: Arc<Shared>,
        transport: Arc<dyn Transport>,
        recorder: Arc<Recorder>,
        events: Arc<Events>,
    }

    type Outcome = Result<String>;

    impl Harness {
        fn new() -> Harness {
            let events = Arc::new(Events::default());
            let shared = Shared::new(events.clone(), None, false);
            let recorder = Arc::new(Recorder::default());
            let transport: Arc<dyn Transport> = recorder.clone();
            let _ = shared.transport.set(Arc::downgrade(&transport));
            start_sweeper(&shared);
            shared.opened();
            Harness { shared, transport, recorder, events }
        }

        /// Start a request whose outcome arrives on the returned channel (through a callback, as tool
        /// calls do); the callback panics after delivering when `panics` is set.
        fn start(&self, timeout_ms: u64, panics: bool) -> (RequestId, tokio::sync::mpsc::UnboundedReceiver<Outcome>) {
            let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
            let done: Completion = Box::new(move |outcome| {
                let _ = tx.send(tool_outcome(outcome).map(|raw| raw.get().to_owned()));
                if panics {
                    panic!("injected panic in a completion");
                }
            });
            let id = self.shared.next_id.load(Ordering::SeqCst);
            let message = self.shared.register(
                "tools/call",
                None,
                |_, _| None,
                Duration::from_millis(timeout_ms),
                None,
                Reply::Callback(done),
            );
            // None when it was answered at once (the connection had ended).
            if let Some(message) = message {
                self.shared.dispatch(&self.transport, vec![message]);
            }
            (id, rx)
        }

        fn receive(&self, frame: &str) -> bool {
            self.shared.on_message(frame.as_bytes())
        }
    }

    async fn outcome(rx: &mut tokio::sync::mpsc::UnboundedReceiver<Outcome>) -> Outcome {
        tokio::time::timeout(Duration::from_secs(5), rx.recv()).await.expect("the request settles").expect("an outcome")
    }

    fn code(outcome: &Outcome) -> &'static str {
        outcome.as_ref().map_or_else(McpError::code, |_| "ok")
    }

    fn response(id: RequestId, result: &str) -> String {
        format!(r#"{{"jsonrpc":"2.0","id":{id},"result":{result}}}"#)
    }

    struct Heard(Mutex<Vec<crate::progress::Progress>>);

    impl crate::progress::ProgressListener for Heard {
        fn progress(&self, update: crate::progress::Progress) {
            self.0.lock().push(update);
        }
    }

    #[tokio::test]
    async fn only_a_listening_request_hears_its_valid_progress_and_nothing_after_it_settles() {
        let harness = Harness::new();
        let heard = Arc::new(Heard(Mutex::new(Vec::new())));
        let (listening, mut rx) = harness.start(60_000, false);
        let (_, mut deaf) = harness.start(60_000, false);
        {
            let mut state = harness.shared.state.lock();
            state.pending.get_mut(&listening).unwrap().progress = Some(heard.clone());
        }
        let progress = |token: RequestId, body: &str| {
            format!(
                r#"{{"jsonrpc":"2.0","method":"notifications/progress","params":{{"progressToken":{token},{body}}}}}"#
            )
        };
        assert!(harness.receive(&progress(listening, r#""progress":1,"total":2"#)));
        assert!(harness.receive(&progress(listening, r#""progress":"x""#)));
        assert!(harness.receive(&progress(listening + 1, r#""progress":1"#)));
        assert!(harness.receive(&response(listening, r#"{"content":[]}"#)));
        assert_eq!(code(&outcome(&mut rx).await), "ok");
        assert!(harness.receive(&progress(listening, r#""progress":2,"total":2"#)));
        assert_eq!(*heard.0.lock(), [crate::progress::Progress { progress: 1.0, total: Some(2.0), message: None }]);
        assert!(harness.receive(&response(listening + 1, r#"{"content":[]}"#)));
        assert_eq!(code(&outcome(&mut deaf).await), "ok");
    }

    #[tokio::test]
    async fn a_progress_notification_restarts_the_idle_timeout_without_a_listener() {
        let harness = Harness::new();
        let (id, mut rx) = harness.start(300, false);
        for _ in 0..4 {
            tokio::time::sleep(Duration::from_millis(150)).await;
            assert!(harness.receive(&format!(r#"{{"jsonrpc":"2.0","method":"notifications/progress","params":{{"progressToken":{id},"progress":1}}}}"#)));
        }
        assert!(harness.receive(&response(id, r#"{"content":[]}"#)));
        assert_eq!(code(&outcome(&mut rx).await), "ok", "600 ms under a 300 ms idle timeout, kept alive by progress");
    }

    #[tokio::test]
    async fn a_panicking_completion_does_not_take_other_completions_with_it() {
        let harness = Harness::new();
        let (a, mut a_rx) = harness.start(60_000, true);
        let (b, mut b_rx) = harness.start(60_000, false);
        let batch = format!("[{},{}]", response(a, r#"{"content":[]}"#), response(b, r#"{"content":[]}"#));
        assert!(harness.receive(&batch));
        assert_eq!(code(&outcome(&mut a_rx).await), "ok");
        assert_eq!(code(&outcome(&mut b_rx).await), "ok");
        // The connection is intact: a later request still completes.
        let (c, mut c_rx) = harness.start(60_000, false);
        assert!(harness.receive(&response(c, "{}")));
        assert_eq!(code(&outcome(&mut c_rx).await), "ok");
    }

    #[tokio::test]
    async fn a_completion_panicking_on_timeout_leaves_the_other_timeouts_running() {
        let harness = Harness::new();
        let (_, mut first) = harness.start(20, true);
        let (_, mut second) = harness.start(200, false);
        assert_eq!(code(&outcome(&mut first).await), "mcp_timeout");
        assert_eq!(code(&outcome(&mut second).await), "mcp_timeout");
    }

    #[tokio::test]
    async fn a_panicking_sweeper_ends_the_connection_so_every_request_settles() {
        let harness = Harness::new();
        let (_, mut pending) = harness.start(60_000, false);
        harness.shared.sweep_fault.store(true, Ordering::SeqCst);
        harness.shared.sweep_wake.notify_one();
        assert_eq!(code(&outcome(&mut pending).await), "mcp_internal_error");
        assert_eq!(harness.events.lost.lock().as_ref().map(McpError::code), Some("mcp_internal_error"));
        let (_, mut later) = harness.start(60_000, false);
        assert_eq!(code(&outcome(&mut later).await), "mcp_internal_error", "later requests fail at once");
    }

    #[tokio::test]
    async fn deep_nesting_fails_only_the_call_it_answers() {
        let harness = Harness::new();
        let deep = "[".repeat(100_000) + &"]".repeat(100_000);
        let (a, mut a_rx) = harness.start(60_000, false);
        let (b, mut b_rx) = harness.start(60_000, false);
        let (c, mut c_rx) = harness.start(60_000, false);
        let deep_error =
            format!(r#"{{"jsonrpc":"2.0","id":{a},"error":{{"code":-32000,"message":"boom","data":{deep}}}}}"#);
        assert!(harness.receive(&deep_error));
        let error = outcome(&mut a_rx).await.unwrap_err();
        assert_eq!((error.code(), error.to_string().as_str()), ("mcp_protocol_error", "MCP error -32000: boom"));
        assert!(harness.receive(&response(b, &format!(r#"{{"structuredContent":{deep}}}"#))));
        assert_eq!(outcome(&mut b_rx).await, Err(McpError::ResultTooDeep { max_depth: MAX_JSON_DEPTH }));
        assert!(harness.receive(&response(c, r#"{"content":[{"type":"text","text":"fine"}]}"#)));
        assert_eq!(code(&outcome(&mut c_rx).await), "ok");
        assert!(harness.events.lost.lock().is_none());
    }

    #[tokio::test]
    async fn results_up_to_the_depth_limit_pass_untouched() {
        let harness = Harness::new();
        // The result object is one level; the rest brings it to exactly MAX_JSON_DEPTH.
        let nested = "[".repeat(MAX_JSON_DEPTH - 1) + &"]".repeat(MAX_JSON_DEPTH - 1);
        let result = format!(r#"{{"structuredContent":{nested}}}"#);
        let (id, mut rx) = harness.start(60_000, false);
        assert!(harness.receive(&response(id, &result)));
        assert_eq!(outcome(&mut rx).await, Ok(result));
    }

    #[tokio::test]
    async fn an_undecodable_response_with_a_readable_id_fails_only_its_call() {
        let harness = Harness::new();
        let (a, mut a_rx) = harness.start(60_000, false);
        let (b, mut b_rx) = harness.start(60_000, false);
        let (c, mut c_rx) = harness.start(60_000, false);
        let mut invalid_utf8 = format!(r#"{{"jsonrpc":"2.0","id":{a},"result":{{"text":"#).into_bytes();
        invalid_utf8.extend_from_slice(b"\"\xff\xfe\"}}");
        assert!(harness.shared.on_message(&invalid_utf8));
        assert_eq!(code(&outcome(&mut a_rx).await), "mcp_protocol_error");
        assert!(harness.receive(&format!(r#"{{"jsonrpc":"2.0","id":{b},"error":{{"code":"x","message":5}}}}"#)));
        assert_eq!(code(&outcome(&mut b_rx).await), "mcp_protocol_error");
        assert!(harness.receive(&format!(r#"{{"jsonrpc":"2.0","id":{c}}}"#)));
        let error = outcome(&mut c_rx).await.unwrap_err();
        assert!(error.to_string().contains("neither result nor error"), "{error}");
        // Garbage that answers no request of ours still ends the session.
        assert!(!harness.receive("this is not json"));
        assert!(!harness.receive(r#"{"jsonrpc":"2.0","id":999,"result":"#));
    }

    #[tokio::test]
    async fn unknown_duplicate_and_late_responses_are_ignored() {
        let harness = Harness::new();
        let calls = Arc::new(AtomicUsize::new(0));
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        let counted = calls.clone();
        let done: Completion = Box::new(move |outcome| {
            counted.fetch_add(1, Ordering::SeqCst);
            let _ = tx.send(outcome.map(|raw| raw.get().to_owned()));
        });
        let id = harness.shared.next_id.load(Ordering::SeqCst);
        let message = harness.shared.register(
            "tools/call",
            None,
            |_, _| None,
            Duration::from_secs(60),
            None,
            Reply::Callback(done),
        );
        harness.shared.dispatch(&harness.transport, vec![message.unwrap()]);
        assert!(harness.receive(&response(id + 1_000, r#""unknown""#)));
        assert!(harness.receive(&response(id, r#""first""#)));
        assert!(harness.receive(&response(id, r#""second""#)));
        assert_eq!(outcome(&mut rx).await, Ok(r#""first""#.to_owned()));
        assert_eq!(calls.load(Ordering::SeqCst), 1);

        // A response after the caller aborted is dropped too.
        let abort = AbortHandle::default();
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        let done: Completion = Box::new(move |outcome| {
            let _ = tx.send(outcome.map(|raw| raw.get().to_owned()));
        });
        let id = harness.shared.next_id.load(Ordering::SeqCst);
        let message = harness.shared.register(
            "tools/call",
            None,
            |_, _| None,
            Duration::from_secs(60),
            Some(&abort),
            Reply::Callback(done),
        );
        harness.shared.dispatch(&harness.transport, vec![message.unwrap()]);
        abort.abort();
        assert_eq!(code(&outcome(&mut rx).await), "mcp_aborted");
        assert!(harness.recorder.sent.lock().last().unwrap().contains("notifications/cancelled"));
        assert!(harness.receive(&response(id, r#""late""#)));
        assert!(rx.try_recv().is_err());
        assert!(harness.events.lost.lock().is_none());
    }

    /// The host's side of elicitation, driven by the test: each request arrives with the sender of its answer.
    type Asked = (String, oneshot::Sender<std::result::Result<String, String>>);

    struct Host(tokio::sync::mpsc::UnboundedSender<Asked>);

    impl crate::hooks::Callback<String, String> for Host {
        fn call(&self, request: String) -> BoxFuture<'static, std::result::Result<String, String>> {
            let (tx, rx) = oneshot::channel();
            let _ = self.0.send((request, tx));
            Box::pin(async move { rx.await.unwrap_or_else(|_| Err("dropped".into())) })
        }
    }

    fn elicitation_harness(
        modes: elicitation::Modes,
        timeout: Duration,
    ) -> (Harness, tokio::sync::mpsc::UnboundedReceiver<Asked>) {
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
        let elicitor = Elicitor { server: "srv".into(), modes, callback: Arc::new(Host(tx)), timeout, withdrawn: None };
        let events = Arc::new(Events::default());
        let shared = Shared::new(events.clone(), Some(Arc::new(elicitor)), false);
        let recorder = Arc::new(Recorder::default());
        let transport: Arc<dyn Transport> = recorder.clone();
        let _ = shared.transport.set(Arc::downgrade(&transport));
        start_sweeper(&shared);
        shared.opened();
        (Harness { shared, transport, recorder, events }, rx)
    }

    const FORM: &str = r#"{"message":"Your name?","requestedSchema":{"type":"object","properties":{"name":{"type":"string","default":"Ada"},"n":{"type":"integer"}}}}"#;

    fn elicit(id: &str, params: &str) -> String {
        format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"elicitation/create","params":{params}}}"#)
    }

    /// The answers sent so far, parsed.
    fn sent(harness: &Harness) -> Vec<serde_json::Value> {
        harness.recorder.sent.lock().iter().map(|m| serde_json::from_str(m).unwrap()).collect()
    }

    async fn answered(harness: &Harness, count: usize) -> Vec<serde_json::Value> {
        for _ in 0..500 {
            if harness.recorder.sent.lock().len() >= count {
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        sent(harness)
    }

    #[tokio::test]
    async fn an_elicitation_is_answered_by_the_host_with_defaults_and_checked() {
        let (harness, mut host) = elicitation_harness(elicitation::Modes::default(), Duration::from_secs(60));
        assert!(harness.receive(&elicit(r#""e1""#, FORM)));
        let (request, reply) = host.recv().await.unwrap();
        let request: serde_json::Value = serde_json::from_str(&request).unwrap();
        assert_eq!(request["server"], "srv");
        assert_eq!(request["request"]["message"], "Your name?");
        reply.send(Ok(r#"{"action":"accept","content":{"n":3}}"#.into())).unwrap();
        let sent = answered(&harness, 1).await;
        assert_eq!(
            sent,
            vec![
                serde_json::json!({"jsonrpc":"2.0","id":"e1","result":{"action":"accept","content":{"name":"Ada","n":3}}})
            ]
        );

        // A wrong type is not sent as accept; a throwing host declines.
        assert!(harness.receive(&elicit("2", FORM)));
        host.recv().await.unwrap().1.send(Ok(r#"{"action":"accept","content":{"n":"3"}}"#.into())).unwrap();
        assert!(harness.receive(&elicit("3", FORM)));
        host.recv().await.unwrap().1.send(Err("host failure".into())).unwrap();
        let sent = answered(&harness, 3).await;
        assert_eq!(sent[1]["result"], serde_json::json!({"action":"decline"}));
        assert_eq!(sent[2]["result"], serde_json::json!({"action":"decline"}));
        assert!(!harness.recorder.sent.lock().concat().contains("host failure"));
    }

    #[tokio::test]
    async fn elicitations_in_flight_are_bounded_and_the_excess_refused_at_once() {
        let (harness, mut host) = elicitation_harness(elicitation::Modes::default(), Duration::from_secs(60));
        let flood = MAX_ELICITATIONS_IN_FLIGHT + 3;
        for id in 0..flood {
            assert!(harness.receive(&elicit(&id.to_string(), FORM)));
        }
        let refused = sent(&harness);
        assert_eq!(refused.len(), 3, "the excess is answered at once");
        assert!(refused.iter().all(|r| r["error"]["code"] == elicitation::BUSY_ERROR_CODE));
        let mut open = Vec::new();
        while let Ok(asked) = host.try_recv() {
            open.push(asked);
        }
        assert_eq!(open.len(), MAX_ELICITATIONS_IN_FLIGHT, "the host sees only what is in flight");
        // A duplicate id is refused too; an answer frees a slot.
        assert!(harness.receive(&elicit("0", FORM)));
        assert_eq!(sent(&harness).len(), 4);
        open.pop().unwrap().1.send(Ok(r#"{"action":"cancel"}"#.into())).unwrap();
        answered(&harness, 5).await;
        assert!(harness.receive(&elicit(r#""next""#, FORM)));
        assert!(tokio::time::timeout(Duration::from_secs(5), host.recv()).await.unwrap().is_some());
    }

    #[tokio::test]
    async fn undeclared_modes_and_bad_schemas_are_invalid_params_and_nothing_is_asked() {
        let (harness, mut host) = elicitation_harness(elicitation::Modes::default(), Duration::from_secs(60));
        let url = r#"{"mode":"url","message":"m","url":"https://example.com/","elicitationId":"x"}"#;
        assert!(harness.receive(&elicit("1", url)));
        assert!(harness.receive(&elicit(
            "2",
            r#"{"message":"m","requestedSchema":{"type":"object","properties":{"a":{"type":"object"}}}}"#
        )));
        let sent = sent(&harness);
        assert!(sent.iter().all(|r| r["error"]["code"] == INVALID_PARAMS), "{sent:?}");
        assert!(host.try_recv().is_err());
    }

    #[tokio::test]
    async fn a_timed_out_elicitation_is_cancelled_and_a_server_cancelled_one_keeps_its_slot_until_the_host_settles() {
        let (harness, mut host) = elicitation_harness(elicitation::Modes::default(), Duration::from_millis(50));
        assert!(harness.receive(&elicit("7", FORM)));
        let _never_answered = host.recv().await.unwrap();
        let sent = answered(&harness, 1).await;
        assert_eq!(sent[0], serde_json::json!({"jsonrpc":"2.0","id":7,"result":{"action":"cancel"}}));

        let (harness, mut host) = elicitation_harness(elicitation::Modes::default(), Duration::from_secs(60));
        assert!(harness.receive(&elicit(r#""c""#, FORM)));
        let (_, reply) = host.recv().await.unwrap();
        assert!(harness.receive(r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"c"}}"#));
        tokio::time::sleep(Duration::from_millis(50)).await;
        // The prompt is still the host's: cancelling must not let a server open more than the bound.
        assert!(harness.shared.elicitation_open());
        let _ = reply.send(Ok(r#"{"action":"accept","content":{"name":"Late"}}"#.into()));
        for _ in 0..500 {
            if !harness.shared.elicitation_open() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        assert!(!harness.shared.elicitation_open(), "the slot is freed once the host settled");
        assert!(harness.recorder.sent.lock().is_empty(), "a cancelled request gets no answer");
    }

    #[tokio::test]
    async fn an_open_elicitation_holds_the_servers_timeouts_and_the_end_stops_it() {
        let (harness, mut host) = elicitation_harness(elicitation::Modes::default(), Duration::from_secs(60));
        let (_, mut call) = harness.start(100, false);
        assert!(harness.receive(&elicit("9", FORM)));
        let (_, reply) = host.recv().await.unwrap();
        tokio::time::sleep(Duration::from_millis(300)).await;
        assert!(call.try_recv().is_err(), "the call waits on the person, not on the server");
        harness.shared.end(McpError::Closed);
        tokio::time::timeout(Duration::from_secs(5), harness.shared.elicitations_stopped())
            .await
            .expect("every elicitation task stops");
        assert!(reply.is_closed());
        assert_eq!(code(&outcome(&mut call).await), "mcp_connection_closed");
        let sent = harness.recorder.sent.lock().clone();
        assert!(sent.len() == 1 && sent[0].contains("tools/call"), "only the call went out, no answer: {sent:?}");
    }

    #[tokio::test]
    async fn without_an_elicitor_elicitation_is_method_not_found() {
        let harness = Harness::new();
        assert!(harness.receive(&elicit("1", FORM)));
        assert_eq!(sent(&harness)[0]["error"]["code"], METHOD_NOT_FOUND);
    }

    #[tokio::test]
    async fn server_requests_get_small_answers_or_none() {
        let harness = Harness::new();
        let huge = "m".repeat(1_000_000);
        assert!(harness.receive(&format!(r#"{{"jsonrpc":"2.0","id":1,"method":"{huge}"}}"#)));
        assert!(harness.receive(&format!(r#"{{"jsonrpc":"2.0","id":"{huge}","method":"ping"}}"#)));
        assert!(harness.receive(r#"{"jsonrpc":"2.0","id":{"nested":[1]},"method":"ping"}"#));
        assert!(harness.receive(r#"{"jsonrpc":"2.0","id":"p","method":"ping"}"#));
        let sent = harness.recorder.sent.lock().clone();
        assert_eq!(sent.len(), 2, "unechoable ids get no answer");
        assert!(sent[0].len() < 512 && sent[0].contains("-32601"), "{}", sent[0].len());
        assert_eq!(sent[1], r#"{"jsonrpc":"2.0","id":"p","result":{}}"#);
    }
}
