//! One live session with one server: request ids, the pending map, idle timeouts reset by progress,
//! cancellation (`notifications/cancelled`), server-to-client requests and notifications.
//!
//! Requests are started synchronously ([`Connection::start`]) and answered through a [`Reply`]: a
//! callback for tool calls (so a JavaScript caller needs no task or promise per call on our side) or a
//! channel for the engine's own `async` requests. One sweeper task per connection owns every deadline,
//! so a request costs no timer of its own.

use crate::error::{McpError, Result};
use crate::protocol::jsonrpc::{self, Message, RawMessage, RequestId, METHOD_NOT_FOUND};
use crate::protocol::mcp::{self, InitializeResult};
use crate::transport::{self, MessageSink, Outbound, Transport, TransportOptions, TransportSpec};
use serde_json::value::RawValue;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, Weak};
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
    fn send(self, outcome: Result<Box<RawValue>>) {
        match self {
            Reply::Callback(done) => done(outcome),
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
        let started = self.started.lock().unwrap().take();
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
        *self.started.lock().unwrap() = Some((Arc::downgrade(shared), id));
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
        let shared = Arc::new(Shared {
            state: Mutex::new(State::default()),
            next_id: AtomicU64::new(1),
            transport: OnceLock::new(),
            events,
            sweep_wake: Notify::new(),
        });
        let transport = transport::open(spec, shared.clone(), options).map_err(|e| (e, None))?;
        let _ = shared.transport.set(Arc::downgrade(&transport));
        tokio::spawn(sweep(shared.clone()));
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

/// The outcome of a `tools/call`: `isError: true` becomes `McpError::Tool` with the server's own text.
pub fn tool_outcome(outcome: Result<Box<RawValue>>) -> Result<Box<RawValue>> {
    let result = outcome?;
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
    transport.complete_handshake(initialized, protocol_version).await?;
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
            let mut state = self.state.lock().unwrap();
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
        Some(Outbound::request(id, jsonrpc::request(id, method, params(id).as_deref()), method == "initialize"))
    }

    /// Hand requests to the transport, skipping any given up since they were registered (an abort that
    /// raced the start). Done under the state lock, so a `notifications/cancelled` for one of them is
    /// always queued after the request itself.
    fn dispatch(&self, transport: &Arc<dyn Transport>, messages: Vec<Outbound>) {
        let (ids, sent) = {
            let mut state = self.state.lock().unwrap();
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
        let pending = self.state.lock().unwrap().pending.remove(&id);
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
            let mut state = self.state.lock().unwrap();
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
            let mut state = self.state.lock().unwrap();
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
        if self.end(reason.clone()) {
            self.events.connection_lost(&reason);
            if let Some(transport) = self.transport.get().and_then(Weak::upgrade) {
                tokio::spawn(transport.close());
            }
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
            Message::Request { id, method, .. } => {
                let reply = if method == "ping" {
                    jsonrpc::result_response(id, "{}")
                } else {
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
                        if let Some(pending) = self.state.lock().unwrap().pending.get_mut(&token) {
                            // Later only, so the sweeper (sleeping towards an earlier time) needs no wake.
                            pending.deadline = Instant::now() + pending.timeout;
                        }
                    }
                }
                "notifications/tools/list_changed" => self.events.tools_list_changed(),
                _ => {}
            },
        }
    }
}

/// The one timer of a connection: fails every request whose idle deadline has passed, then sleeps
/// until the earliest remaining one (or until woken for an earlier one).
async fn sweep(connection: Arc<Shared>) {
    loop {
        let now = Instant::now();
        let (expired, next) = {
            let mut state = connection.state.lock().unwrap();
            if state.ended.is_some() {
                return;
            }
            let expired: Vec<RequestId> = state.pending.iter().filter(|(_, p)| p.deadline <= now).map(|(id, _)| *id).collect();
            let next = state.pending.values().filter(|p| p.deadline > now).map(|p| p.deadline).min();
            state.sweep_target = next;
            (expired, next)
        };
        for id in expired {
            let timeout = connection.state.lock().unwrap().pending.get(&id).map(|p| p.timeout);
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

impl MessageSink for Shared {
    fn on_message(&self, frame: &[u8]) -> bool {
        let is_batch = frame.iter().find(|b| !b.is_ascii_whitespace()) == Some(&b'[');
        if !is_batch {
            return match serde_json::from_slice::<RawMessage>(frame).ok().and_then(RawMessage::classify) {
                Some(message) => {
                    self.handle(message);
                    true
                }
                None => false,
            };
        }
        let Ok(items) = serde_json::from_slice::<Vec<&RawValue>>(frame) else { return false };
        items.into_iter().all(|item| {
            match serde_json::from_str::<RawMessage>(item.get()).ok().and_then(RawMessage::classify) {
                Some(message) => {
                    self.handle(message);
                    true
                }
                None => false,
            }
        })
    }

    fn on_request_failed(&self, id: RequestId, error: McpError) {
        self.settle(id, Err(error));
    }

    fn is_pending(&self, id: RequestId) -> bool {
        self.state.lock().unwrap().pending.contains_key(&id)
    }

    fn on_closed(&self, reason: McpError) {
        self.lose(reason);
    }
}
