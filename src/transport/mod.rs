//! Transports move JSON-RPC messages between the engine and one server. They know framing,
//! processes and sockets; they know nothing of MCP methods.
//!
//! | transport | file        | framing                                   |
//! |-----------|-------------|-------------------------------------------|
//! | stdio     | `stdio.rs`  | newline-delimited JSON over a child's pipes |
//!
//! A transport delivers every inbound message to a [`MessageSink`] from its own reader task, so a
//! response reaches its waiting caller without an extra channel hop.

pub mod stdio;

use crate::error::{McpError, Result};
use std::future::Future;
use std::pin::Pin;

pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// Receives what a transport reads. Called from the transport's reader task.
pub trait MessageSink: Send + Sync + 'static {
    /// One complete JSON-RPC message (or batch), as sent.
    fn on_message(&self, frame: &[u8]);
    /// A message larger than the limit was dropped unread; `head` is its first bytes, kept to find the id.
    fn on_oversized(&self, head: &[u8], limit_bytes: usize);
    /// The transport ended for good. Called once.
    fn on_closed(&self, reason: McpError);
}

pub trait Transport: Send + Sync {
    /// Queue one serialized message. Never blocks; fails once the transport is closed.
    fn send(&self, message: String) -> Result<()>;
    /// End the session and release everything behind it. Idempotent.
    fn close(&self) -> BoxFuture<'static, ()>;
    /// The most recent diagnostic output of the server (a stdio server's stderr), if any.
    fn stderr_tail(&self) -> Option<String> {
        None
    }
}

/// Everything needed to open a transport to one server.
#[derive(Debug, Clone)]
pub enum TransportSpec {
    Stdio(stdio::StdioSpec),
}

pub fn open(spec: &TransportSpec, sink: std::sync::Arc<dyn MessageSink>, max_message_bytes: usize) -> Result<std::sync::Arc<dyn Transport>> {
    match spec {
        TransportSpec::Stdio(s) => Ok(stdio::StdioTransport::spawn(s, sink, max_message_bytes)?),
    }
}

/// Quote at most a few hundred bytes of untrusted text in an error message.
pub fn quote_bytes(bytes: &[u8]) -> String {
    let limit = crate::limits::MAX_QUOTED_BYTES;
    let text = String::from_utf8_lossy(&bytes[..bytes.len().min(limit)]);
    let mut quoted: String = text.chars().map(|c| if c.is_control() { ' ' } else { c }).collect();
    if bytes.len() > limit {
        quoted.push('…');
    }
    quoted
}

impl From<std::io::Error> for McpError {
    fn from(e: std::io::Error) -> Self {
        McpError::Transport(e.to_string())
    }
}
