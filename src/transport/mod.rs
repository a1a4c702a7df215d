//! Transports move JSON-RPC messages between the engine and one server. They know framing,
//! processes, HTTP and sessions; they know nothing of MCP methods beyond the handshake.
//!
//! | transport        | file                 | framing                                                   |
//! |------------------|----------------------|-----------------------------------------------------------|
//! | stdio            | `stdio/`             | newline-delimited JSON over a child's pipes (`windows.rs`: the Job Object; `stderr.rs`) |
//! | Streamable HTTP  | `streamable_http.rs` | POST per message; JSON or SSE responses; GET stream; sessions, resumption |
//! | HTTP+SSE (legacy)| `sse.rs`             | one GET event stream in, POSTs to its `endpoint` out       |
//!
//! `event_stream.rs` parses server-sent events for both HTTP transports; `http.rs` holds what they share.
//! A transport delivers every inbound message to a [`MessageSink`] from its own task, so a response
//! reaches its waiting caller without an extra channel hop.
//!
//! Nothing that was sent is sent again unless it is `resendable` (a tool call is not), with one exemption,
//! `use_dpop_nonce`: a 401 whose DPoP challenge is `use_dpop_nonce` and that names a new `DPoP-Nonce` is
//! sent again once with a fresh proof carrying it, a tool call included. It is the resource server
//! refusing the request's proof, an answer given before the request is processed (RFC 9449 §9; HTTP's
//! 401: the request was not applied), with nothing changed on our side but the nonce: the same token,
//! the same identity, the same scope. A refusal that needs a new token is different, since what the call
//! would then run under changed, and there the agent decides. A server that runs the call and then says
//! `use_dpop_nonce` anyway could run it twice, as it could with any answer it misstates; the retry comes
//! only when the answer names a nonce that is new (a second refusal fails the call), so it happens at
//! most once per call. Refusing the retry would instead fail a tool call every time the server rotates
//! its nonce.

pub mod event_stream;
pub mod http;
pub mod oversized;
pub mod sse;
pub mod stdio;
pub mod streamable_http;

use crate::error::{McpError, Result};
use crate::guard::redact::Secrets;
use crate::protocol::jsonrpc::RequestId;
use futures_util::future::BoxFuture;
use std::sync::Arc;
use std::time::Duration;

/// Receives what a transport reads. Called from the transport's tasks.
pub trait MessageSink: Send + Sync + 'static {
    /// One complete JSON-RPC message (or batch), as sent. Returns false if it is not JSON-RPC.
    fn on_message(&self, frame: &[u8]) -> bool;
    /// A request failed in the transport (HTTP error, oversized or malformed response, broken stream).
    fn on_request_failed(&self, id: RequestId, error: McpError);
    /// Whether the connection still waits for the response to `id`.
    fn is_pending(&self, id: RequestId) -> bool;
    /// The requests sent and still waiting for an answer (a long-lived one, such as a subscription's,
    /// left out): those an oversized response that names none of them may answer.
    fn awaited(&self) -> Vec<RequestId> {
        Vec::new()
    }
    /// The transport ended for good.
    fn on_closed(&self, reason: McpError);
    /// A new HTTP session (`generation`) replaced one the server expired: resolves once its tools were
    /// listed and vetted again (see `ConnectionEvents::session_renewed`). No call goes on it before.
    fn session_renewed(&self, _generation: u64) -> BoxFuture<'_, Result<()>> {
        Box::pin(std::future::ready(Ok(())))
    }
    /// Work on the request's behalf is under way (a login): restart its idle timeout, as progress does.
    fn keep_waiting(&self, _id: RequestId) {}
    /// Whether the connection was waiting on the host (an open elicitation) at any time in the last
    /// `within`: a response stream quiet that long is then waiting on a person, not on the server.
    fn waited_on_host(&self, _within: std::time::Duration) -> bool {
        false
    }
}

/// One outgoing message, with what a transport needs to know about it.
#[derive(Debug)]
pub struct Outbound {
    pub json: String,
    /// Set for requests: their failures are reported against this id.
    pub request_id: Option<RequestId>,
    pub is_initialize: bool,
    /// Whether the transport may send it again after the server refused it for authorization. Never
    /// for `tools/call`: a call reaches a server at most once.
    pub resendable: bool,
    /// Headers sent with this message only (HTTP transports; ignored on stdio): `Mcp-Param-*` of a call.
    pub extra_headers: Vec<(reqwest::header::HeaderName, reqwest::header::HeaderValue)>,
    /// A request of the modern era (2026-07-28): what its HTTP headers say.
    pub modern: Option<ModernRequest>,
    /// A request answered by a stream that may stay quiet for good (`subscriptions/listen`).
    pub long_lived: bool,
    /// The tool a `tools/call` calls (by its remote name).
    pub tool: Option<Box<str>>,
    /// For a `tools/call`: whether the tool, as the call was approved against it, is still what the
    /// current (vetted) map holds — asked before it goes on a session that replaced an expired one.
    pub admitted: Option<Arc<dyn AdmittedCall>>,
}

/// The owner's check that a call may still go as it was admitted (see [`Outbound::admitted`]).
pub trait AdmittedCall: Send + Sync {
    fn still_admitted(&self) -> Result<()>;
}

impl std::fmt::Debug for dyn AdmittedCall {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("AdmittedCall")
    }
}

/// What the modern era's HTTP headers carry for one request.
#[derive(Debug, Clone)]
pub struct ModernRequest {
    pub version: &'static str,
    pub method: Box<str>,
    /// `Mcp-Name`: the tool's name (or the prompt's, the resource's URI).
    pub name: Option<Box<str>>,
}

impl Outbound {
    pub fn request(id: RequestId, json: String, is_initialize: bool, resendable: bool) -> Self {
        Outbound {
            json,
            request_id: Some(id),
            is_initialize,
            resendable,
            extra_headers: Vec::new(),
            modern: None,
            long_lived: false,
            tool: None,
            admitted: None,
        }
    }

    pub fn other(json: String) -> Self {
        Outbound {
            json,
            request_id: None,
            is_initialize: false,
            resendable: true,
            extra_headers: Vec::new(),
            modern: None,
            long_lived: false,
            tool: None,
            admitted: None,
        }
    }
}

pub trait Transport: Send + Sync {
    /// Queue one message. Never blocks; fails once the transport is closed.
    fn send(&self, message: Outbound) -> Result<()>;
    /// Queue several messages to go out together (one write on a pipe).
    fn send_all(&self, messages: Vec<Outbound>) -> Result<()> {
        messages.into_iter().try_for_each(|m| self.send(m))
    }
    /// The connection stopped waiting for `id` (timeout, abort): stop any work kept for it.
    fn request_ended(&self, _id: RequestId) {}
    /// Send `notifications/initialized` and finish the handshake at `protocol_version`. Nothing else is
    /// sent before this completes, so a server never sees a request ahead of the notification.
    fn complete_handshake(
        &self,
        initialized: Outbound,
        _protocol_version: &'static str,
    ) -> BoxFuture<'static, Result<()>> {
        let sent = self.send(initialized);
        Box::pin(std::future::ready(sent))
    }
    /// End the session and release everything behind it. Idempotent.
    fn close(&self) -> BoxFuture<'static, ()>;
    /// Whether it talks to a child process over its pipes.
    fn is_stdio(&self) -> bool {
        false
    }
    /// Whether the server has yet to read some of what was sent to it (stdio: bytes still queued or in its
    /// stdin pipe, as in a child still starting); `None` when that can't be told.
    fn input_unread(&self) -> Option<bool> {
        None
    }
    /// Whether the server behind it may speak the modern era (the legacy HTTP+SSE transport never does,
    /// so it is not probed).
    fn may_be_modern(&self) -> bool {
        true
    }
    /// Whether ending a modern request's exchange is its cancellation (Streamable HTTP: closing the
    /// response stream), so no `notifications/cancelled` is sent for it.
    fn closing_cancels(&self) -> bool {
        false
    }
    /// The most recent diagnostic output of the server (a stdio server's stderr), if any.
    fn stderr_tail(&self) -> Option<String> {
        None
    }
}

/// Everything needed to open a transport to one server.
#[derive(Debug, Clone)]
pub enum TransportSpec {
    Stdio(stdio::StdioSpec),
    StreamableHttp(http::HttpSpec),
    Sse(http::HttpSpec),
}

#[derive(Debug, Clone)]
pub struct TransportOptions {
    /// Largest single message accepted from the server.
    pub max_message_bytes: usize,
    /// How long a response stream may stay silent before the transport gives up on it.
    pub idle_timeout: Duration,
    /// The server's secrets: text a transport puts into an error or a stderr tail is redacted with
    /// them before it is cut to size (see `guard::redact`).
    pub secrets: Arc<Secrets>,
}

pub fn open(spec: &TransportSpec, sink: Arc<dyn MessageSink>, options: TransportOptions) -> Result<Arc<dyn Transport>> {
    Ok(match spec {
        TransportSpec::Stdio(s) => stdio::StdioTransport::spawn(s, sink, options)?,
        TransportSpec::StreamableHttp(s) => streamable_http::StreamableHttpTransport::open(s, sink, options)?,
        TransportSpec::Sse(s) => sse::SseTransport::open(s, sink, options)?,
    })
}

pub fn describe_garbage(frame: &[u8], secrets: &Secrets) -> String {
    format!("MCP server sent a message that is not JSON-RPC: {}", crate::guard::redact::quote_bytes(frame, secrets))
}

impl From<std::io::Error> for McpError {
    fn from(e: std::io::Error) -> Self {
        McpError::Transport(e.to_string())
    }
}
