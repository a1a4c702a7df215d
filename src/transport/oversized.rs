//! A message too large to read, and which call it fails. Shared by every transport that drops one
//! unread (a stdio line, an event of a stream that carries many answers): only its head and its tail
//! are kept, [`OVERSIZED_HEAD_BYTES`] and [`OVERSIZED_TAIL_BYTES`], whatever its size.
//!
//! The call is found, in order: from the top-level `"id"` at the head (most servers write it first);
//! from the one at the tail (the TypeScript SDK writes `{"result":…,"jsonrpc":"2.0","id":N}`); else, a
//! message that names no method is a response, and it can only answer a call in flight: the only one, or,
//! when several are, any of them, so all of them fail. An oversized message never turns into a silent
//! wait for its caller's timeout. The connection itself stays: the message was skipped whole, so what
//! comes next is still read as messages.

use super::MessageSink;
use crate::error::McpError;
pub use crate::limits::{OVERSIZED_HEAD_BYTES, OVERSIZED_TAIL_BYTES};
use crate::protocol::jsonrpc::{sniff_head, sniff_tail};

/// The head of an oversized message may already name its call: fail it now, before the rest arrives.
/// True when it did.
pub fn refuse_by_head(sink: &dyn MessageSink, head: &[u8], limit_bytes: usize) -> bool {
    match sniff_head(head).id {
        Some(id) => {
            sink.on_request_failed(id, McpError::ResultTooLarge { limit_bytes });
            true
        }
        None => false,
    }
}

/// The whole oversized message has gone by (kept: its `head` and its `tail`) and its head named no call:
/// fail the call it answers, found as the module says.
pub fn refuse_at_end(sink: &dyn MessageSink, head: &[u8], tail: &[u8], limit_bytes: usize) {
    let (at_head, at_tail) = (sniff_head(head), sniff_tail(tail));
    let failed = || McpError::ResultTooLarge { limit_bytes };
    if let Some(id) = at_head.id.or(at_tail.id) {
        sink.on_request_failed(id, failed());
    } else if !(at_head.names_method || at_tail.names_method) {
        let awaited = sink.awaited();
        if awaited.len() > 1 {
            tracing::warn!(
                calls = awaited.len(),
                limit_bytes,
                "an oversized response names no request; every call in flight fails"
            );
        }
        for id in awaited {
            sink.on_request_failed(id, failed());
        }
    }
}

/// An event a shared stream skipped (see `event_stream`): fail the call it answers.
pub fn refuse_event(sink: &dyn MessageSink, skipped: &super::event_stream::Oversized, limit_bytes: usize) {
    match &skipped.tail {
        None => {
            refuse_by_head(sink, &skipped.head, limit_bytes);
        }
        Some(tail) => refuse_at_end(sink, &skipped.head, tail, limit_bytes),
    }
}

/// The last bytes of a message that goes by in pieces, kept in at most twice [`OVERSIZED_TAIL_BYTES`].
#[derive(Debug, Default)]
pub struct TailWindow {
    bytes: Vec<u8>,
}

impl TailWindow {
    pub fn push(&mut self, data: &[u8]) {
        let data = &data[data.len().saturating_sub(OVERSIZED_TAIL_BYTES)..];
        if self.bytes.len() + data.len() > 2 * OVERSIZED_TAIL_BYTES {
            self.bytes.drain(..self.bytes.len() + data.len() - OVERSIZED_TAIL_BYTES);
        }
        self.bytes.extend_from_slice(data);
    }

    pub fn bytes(&self) -> &[u8] {
        &self.bytes[self.bytes.len().saturating_sub(OVERSIZED_TAIL_BYTES)..]
    }

    pub fn clear(&mut self) {
        self.bytes.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_tail_window_keeps_the_last_bytes_only() {
        let mut tail = TailWindow::default();
        for piece in (0..10_000u32).map(|i| i.to_string()) {
            tail.push(piece.as_bytes());
            assert!(tail.bytes.len() <= 2 * OVERSIZED_TAIL_BYTES);
        }
        assert!(tail.bytes().ends_with(b"99989999"));
        assert_eq!(tail.bytes().len(), OVERSIZED_TAIL_BYTES);
        tail.push(&vec![b'z'; 3 * OVERSIZED_TAIL_BYTES]);
        assert!(tail.bytes().iter().all(|b| *b == b'z'));
    }
}
