//! One live session with one server: request ids, the pending map, idle timeouts reset by progress,
//! cancellation (`notifications/cancelled`), server-to-client requests and notifications.

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

/// Set from JavaScript when the caller's AbortSignal fires.
#[derive(Default)]
pub struct AbortHandle {
    aborted: AtomicBool,
    wake: Notify,
}

impl AbortHandle {
    pub fn abort(&self) {
        self.aborted.store(true, Ordering::SeqCst);
        self.wake.notify_waiters();
    }

    pub fn is_aborted(&self) -> bool {
        self.aborted.load(Ordering::SeqCst)
    }

    async fn wait(&self) {
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

struct Shared {
    state: Mutex<State>,
    next_id: AtomicU64,
    transport: OnceLock<Weak<dyn Transport>>,
    events: Arc<dyn ConnectionEvents>,
}

#[derive(Default)]
struct State {
    pending: HashMap<RequestId, Pending>,
    /// Set once; every later request fails with it at once.
    ended: Option<McpError>,
}

struct Pending {
    reply: oneshot::Sender<Result<Box<RawValue>>>,
    last_progress: Option<Instant>,
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
        });
        let transport = transport::open(spec, shared.clone(), options).map_err(|e| (e, None))?;
        let _ = shared.transport.set(Arc::downgrade(&transport));
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
        self.shared.request(&self.transport, method, |_| params.map(str::to_owned), opts).await
    }

    /// `tools/call`. A result with `isError: true` becomes `McpError::Tool` carrying the server's text.
    pub async fn call_tool(&self, remote_name: &str, arguments: &RawValue, opts: &RequestOptions<'_>) -> Result<Box<RawValue>> {
        let params = |id| Some(mcp::call_tool_params(remote_name, arguments, id));
        let result = self.shared.request(&self.transport, "tools/call", params, opts).await?;
        let view: mcp::CallResultView = serde_json::from_str(result.get())
            .map_err(|e| McpError::Protocol(format!("tools/call returned a malformed result: {e}")))?;
        if view.is_error == Some(true) {
            return Err(McpError::Tool(mcp::tool_error_text(&view)));
        }
        Ok(result)
    }

    pub fn stderr_tail(&self) -> Option<String> {
        self.transport.stderr_tail()
    }

    pub fn is_alive(&self) -> bool {
        self.shared.state.lock().unwrap().ended.is_none()
    }

    /// Fail what is pending with `Closed` and release the transport. Idempotent.
    pub async fn close(&self) {
        self.shared.end(McpError::Closed);
        self.transport.close().await;
    }
}

async fn handshake_with(shared: &Arc<Shared>, transport: &Arc<dyn Transport>, opts: &RequestOptions<'_>) -> Result<SessionInfo> {
    let params = mcp::initialize_params();
    let raw = shared.request(transport, "initialize", |_| Some(params), opts).await?;
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

impl Shared {
    async fn request(
        &self,
        transport: &Arc<dyn Transport>,
        method: &str,
        params: impl FnOnce(RequestId) -> Option<String>,
        opts: &RequestOptions<'_>,
    ) -> Result<Box<RawValue>> {
        if opts.abort.is_some_and(AbortHandle::is_aborted) {
            return Err(McpError::Aborted);
        }
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let (reply, mut response) = oneshot::channel();
        {
            let mut state = self.state.lock().unwrap();
            if let Some(ended) = &state.ended {
                return Err(ended.clone());
            }
            state.pending.insert(id, Pending { reply, last_progress: None });
        }
        let mut guard = PendingGuard { shared: self, id, armed: true };
        let message = jsonrpc::request(id, method, params(id).as_deref());
        transport.send(Outbound::request(id, message, method == "initialize"))?;

        let mut deadline = Instant::now() + opts.timeout;
        let outcome = loop {
            let abort = async {
                match opts.abort {
                    Some(handle) => handle.wait().await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                biased;
                reply = &mut response => {
                    guard.armed = false;
                    return reply.unwrap_or(Err(McpError::Closed));
                }
                _ = abort => break McpError::Aborted,
                _ = tokio::time::sleep_until(deadline) => {
                    let last_progress = match self.state.lock().unwrap().pending.get(&id) {
                        Some(p) => p.last_progress,
                        None => continue, // the reply is in the channel already
                    };
                    match last_progress {
                        Some(at) if at + opts.timeout > deadline => deadline = at + opts.timeout,
                        _ => break McpError::Timeout { after_ms: opts.timeout.as_millis() as u64 },
                    }
                }
            }
        };
        drop(guard);
        transport.request_ended(id);
        // Tell the server to stop working on it. `initialize` is never cancelled, per the spec.
        if method != "initialize" {
            let reason = if outcome == McpError::Aborted { "aborted by the client" } else { "timed out" };
            let params = serde_json::json!({ "requestId": id, "reason": reason }).to_string();
            let _ = transport.send(Outbound::other(jsonrpc::notification("notifications/cancelled", Some(&params))));
        }
        Err(outcome)
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
        for (_, p) in pending {
            let _ = p.reply.send(Err(reason.clone()));
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
                let Some(pending) = self.state.lock().unwrap().pending.remove(&id) else { return };
                let outcome = outcome.map(|raw| raw.to_owned()).map_err(|e| {
                    McpError::Protocol(format!("MCP error {}: {}", e.code, e.message))
                });
                let _ = pending.reply.send(outcome);
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
                            pending.last_progress = Some(Instant::now());
                        }
                    }
                }
                "notifications/tools/list_changed" => self.events.tools_list_changed(),
                _ => {}
            },
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
        if let Some(pending) = self.state.lock().unwrap().pending.remove(&id) {
            let _ = pending.reply.send(Err(error));
        }
    }

    fn is_pending(&self, id: RequestId) -> bool {
        self.state.lock().unwrap().pending.contains_key(&id)
    }

    fn on_closed(&self, reason: McpError) {
        self.lose(reason);
    }
}

/// Removes a pending entry if the waiting future goes away before its reply arrives.
struct PendingGuard<'a> {
    shared: &'a Shared,
    id: RequestId,
    armed: bool,
}

impl Drop for PendingGuard<'_> {
    fn drop(&mut self) {
        if self.armed {
            self.shared.state.lock().unwrap().pending.remove(&self.id);
        }
    }
}

