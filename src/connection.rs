//! One live session with one server: request ids, the pending map, idle timeouts reset by progress,
//! cancellation (`notifications/cancelled`), server-to-client requests and notifications.
//!
//! Requests are started synchronously ([`Connection::start`]) and answered through a [`Reply`]: a
//! callback for tool calls (so a JavaScript caller needs no task or promise per call on our side) or a
//! channel for the engine's own `async` requests. One sweeper task per connection owns every deadline,
//! so a request costs no timer of its own.

use crate::error::{McpError, Result};
use crate::limits::MAX_JSON_DEPTH;
use crate::protocol::jsonrpc::{self, Message, RawMessage, RequestId, METHOD_NOT_FOUND};
use crate::protocol::mcp::{self, InitializeResult};
use crate::protocol::nesting;
use crate::transport::{self, MessageSink, Outbound, Transport, TransportOptions, TransportSpec};
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

/// What a connection tells its owner.
pub trait ConnectionEvents: Send + Sync + 'static {
    /// The server sent `notifications/tools/list_changed`.
    fn tools_list_changed(&self);
    /// The connection ended without the owner asking (the server died, or broke the protocol).
    fn connection_lost(&self, reason: &McpError);
}

/// Called once with a request's outcome.
pub type Completion = Box<dyn FnOnce(Result<Box<RawValue>>) + Send>;

/// Where a request's outcome goes.
pub enum Reply {
    Callback(Completion),
    Channel(oneshot::Sender<Result<Box<RawValue>>>),
}

impl Reply {
    /// Deliver the outcome. Never called with a lock held. A callback that panics loses only its own
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

/// What the server said about itself in `initialize`.
#[derive(Debug)]
pub struct SessionInfo {
    pub protocol_version: &'static str,
    pub server_name: String,
    pub server_version: String,
    pub tools_list_changed: bool,
    /// Never shown to a model: third-party text is a prompt-injection seam.
    pub instructions: Option<String>,
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
    /// Makes the sweeper panic, to test its supervision.
    #[cfg(test)]
    sweep_fault: AtomicBool,
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
}

impl Connection {
    /// Open the transport and run the handshake: `initialize`, version check, `notifications/initialized`.
    pub async fn open(
        spec: &TransportSpec,
        events: Arc<dyn ConnectionEvents>,
        options: TransportOptions,
        handshake: &RequestOptions<'_>,
    ) -> std::result::Result<Connection, (McpError, Option<String>)> {
        let shared = Shared::new(events);
        let transport = transport::open(spec, shared.clone(), options).map_err(|e| (e, None))?;
        let _ = shared.transport.set(Arc::downgrade(&transport));
        start_sweeper(&shared);
        match handshake_with(&shared, &transport, handshake).await {
            Ok(session) => Ok(Connection { shared, transport, session }),
            Err(e) => {
                shared.end(McpError::Closed);
                transport.close().await;
                Err((e, transport.stderr_tail()))
            }
        }
    }

    pub async fn request(&self, method: &str, params: Option<&str>, opts: &RequestOptions<'_>) -> Result<Box<RawValue>> {
        request(&self.shared, &self.transport, method, |_| params.map(str::to_owned), opts).await
    }

    /// Start `tools/call` for each `(remote name, arguments, reply)` and send them in one write.
    /// A result with `isError: true` is turned into `McpError::Tool` by [`tool_outcome`].
    pub fn start_calls<'a>(&self, calls: impl IntoIterator<Item = StartCall<'a>>, timeout: Duration) {
        let mut outbound = Vec::new();
        for call in calls {
            let params = |id| Some(mcp::call_tool_params(call.remote_name, call.arguments, id));
            if let Some(message) = self.shared.register("tools/call", params, timeout, call.abort, call.reply) {
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

    /// Fail what is pending with `Closed` and release the transport. Idempotent.
    pub async fn close(&self) {
        self.shared.end(McpError::Closed);
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
    pub arguments: &'a RawValue,
    pub abort: Option<&'a AbortHandle>,
    pub reply: Reply,
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

async fn handshake_with(shared: &Arc<Shared>, transport: &Arc<dyn Transport>, opts: &RequestOptions<'_>) -> Result<SessionInfo> {
    let params = mcp::initialize_params();
    let raw = request(shared, transport, "initialize", |_| Some(params), opts).await?;
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
        tools_list_changed: init.capabilities.tools.and_then(|t| t.list_changed).unwrap_or(false),
        instructions: init.instructions,
    })
}

/// An engine-internal request awaited in place (handshake, listings).
async fn request(
    shared: &Arc<Shared>,
    transport: &Arc<dyn Transport>,
    method: &str,
    params: impl FnOnce(RequestId) -> Option<String>,
    opts: &RequestOptions<'_>,
) -> Result<Box<RawValue>> {
    let (reply, response) = oneshot::channel();
    let message = shared.register(method, params, opts.timeout, opts.abort, Reply::Channel(reply));
    if let Some(message) = message {
        shared.dispatch(transport, vec![message]);
    }
    response.await.unwrap_or(Err(McpError::Closed))
}

impl Shared {
    fn new(events: Arc<dyn ConnectionEvents>) -> Arc<Shared> {
        Arc::new(Shared {
            state: Mutex::new(State::default()),
            next_id: AtomicU64::new(1),
            transport: OnceLock::new(),
            events,
            sweep_wake: Notify::new(),
            #[cfg(test)]
            sweep_fault: AtomicBool::new(false),
        })
    }

    /// Enter a request in the pending map and serialize it. `None` if it was answered at once
    /// (connection ended, already aborted).
    fn register(
        self: &Arc<Self>,
        method: &str,
        params: impl FnOnce(RequestId) -> Option<String>,
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
        let wake_sweeper = {
            let mut state = self.state.lock();
            if let Some(ended) = &state.ended {
                let ended = ended.clone();
                drop(state);
                reply.send(Err(ended));
                return None;
            }
            let cancellable = method != "initialize";
            state.pending.insert(id, Pending { reply, dispatched: false, timeout, deadline, cancellable });
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
        Some(Outbound::request(id, jsonrpc::request(id, method, params(id).as_deref()), method == "initialize", method != "tools/call"))
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
            pending.reply.send(outcome);
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
            if pending.cancellable {
                let why = if reason == McpError::Aborted { "aborted by the client" } else { "timed out" };
                let params = serde_json::json!({ "requestId": id, "reason": why }).to_string();
                let _ = transport.send(Outbound::other(jsonrpc::notification("notifications/cancelled", Some(&params))));
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
        for (_, p) in pending {
            p.reply.send(Err(reason.clone()));
        }
        true
    }

    /// The server broke the protocol or died: fail everything, tell the owner, release the transport.
    fn lose(&self, reason: McpError) {
        // The transport is closed by the connection's owner, whose close() is awaited and tracked (the
        // toolset's supervisor), not by a task nobody waits for.
        if self.end(reason.clone()) {
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
                let outcome = outcome
                    .map(|raw| raw.to_owned())
                    .map_err(|e| McpError::Protocol(format!("MCP error {}: {}", e.code, e.message)));
                self.settle(id, outcome);
            }
            // An error with a null id answers something unparseable we never send; nothing waits on it.
            Message::Response { id: None, .. } => {}
            // Server-to-client requests are answered inline, one at a time, before the next message is read:
            // no task or queue per request here, so a flood costs nothing beyond the transport's own bounds,
            // and each answer is small whatever the request carried.
            Message::Request { id, .. } if !jsonrpc::is_echoable_id(id) => {}
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
                "notifications/progress" => {
                    let token = params
                        .and_then(|p| serde_json::from_str::<mcp::ProgressParams>(p.get()).ok())
                        .and_then(|p| jsonrpc::parse_request_id(p.progress_token));
                    if let Some(token) = token {
                        self.keep_waiting(token);
                    }
                }
                "notifications/tools/list_changed" => self.events.tools_list_changed(),
                _ => {}
            },
        }
    }
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
            let expired: Vec<RequestId> = state.pending.iter().filter(|(_, p)| p.deadline <= now).map(|(id, _)| *id).collect();
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

    fn on_closed(&self, reason: McpError) {
        self.lose(reason);
    }

    fn keep_waiting(&self, id: RequestId) {
        if let Some(pending) = self.state.lock().pending.get_mut(&id) {
            // Later only, so the sweeper (sleeping towards an earlier time) needs no wake.
            pending.deadline = Instant::now() + pending.timeout;
        }
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
            let shared = Shared::new(events.clone());
            let recorder = Arc::new(Recorder::default());
            let transport: Arc<dyn Transport> = recorder.clone();
            let _ = shared.transport.set(Arc::downgrade(&transport));
            start_sweeper(&shared);
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
            let message = self.shared.register("tools/call", |_| None, Duration::from_millis(timeout_ms), None, Reply::Callback(done));
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
        let deep_error = format!(r#"{{"jsonrpc":"2.0","id":{a},"error":{{"code":-32000,"message":"boom","data":{deep}}}}}"#);
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
        let message = harness.shared.register("tools/call", |_| None, Duration::from_secs(60), None, Reply::Callback(done));
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
        let message = harness.shared.register("tools/call", |_| None, Duration::from_secs(60), Some(&abort), Reply::Callback(done));
        harness.shared.dispatch(&harness.transport, vec![message.unwrap()]);
        abort.abort();
        assert_eq!(code(&outcome(&mut rx).await), "mcp_aborted");
        assert!(harness.recorder.sent.lock().last().unwrap().contains("notifications/cancelled"));
        assert!(harness.receive(&response(id, r#""late""#)));
        assert!(rx.try_recv().is_err());
        assert!(harness.events.lost.lock().is_none());
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
