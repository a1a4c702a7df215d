//! A bounded `text/event-stream` parser (the WHATWG server-sent events format).
//!
//! Hand-written rather than taken from a crate because the engine needs two controls the crates we
//! checked don't give together: a hard cap on one event's size, enforced while the event is still
//! arriving (so an oversized event is refused without buffering the rest), and the `id` and `retry`
//! fields of events that carry no data (the "priming" events resumable streams start with).
//!
//! A stream that carries the answers to many requests (the legacy transport's one stream, the
//! standalone GET stream) can't fail on one oversized event: [`EventStreamParser::skipping_oversized`]
//! skips it instead, keeping only its head and its tail (see `transport::oversized`), and hands those on
//! as an [`Oversized`] event so the call it answers fails. Skipping is bounded too: an event that goes on
//! for `MAX_SKIPPED_LINE_BYTES` past the limit is [`EventStreamError::TooLarge`].

use super::oversized::{TailWindow, OVERSIZED_HEAD_BYTES};
use crate::limits::MAX_SKIPPED_LINE_BYTES;

pub const DEFAULT_EVENT_TYPE: &str = "message";

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Event {
    pub event: String,
    pub data: String,
    /// Set when the event was too large and skipped: `data` is empty, this is what was kept of it.
    pub oversized: Option<Oversized>,
}

/// What is kept of an oversized event's data.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Oversized {
    pub head: Vec<u8>,
    /// `None` when handed on the moment the limit passed, because the head names the call (no more is
    /// handed on for that event); else its last bytes, once it ended.
    pub tail: Option<Vec<u8>>,
}

/// The state while an oversized event is skipped.
#[derive(Debug)]
struct Skipping {
    head: Vec<u8>,
    tail: TailWindow,
    /// The head named the call and was handed on already.
    reported: bool,
    bytes: usize,
    /// The start of the current line, until it shows whether the line is a `data` field.
    field: Vec<u8>,
    line_is_data: Option<bool>,
    /// The line's `data:` has just been read: a space next is the separator, not data.
    separator_next: bool,
    line_empty: bool,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EventStreamError {
    /// One event (or one line) grew past the limit.
    TooLarge,
    /// A line is not UTF-8.
    InvalidUtf8,
}

#[derive(Debug)]
pub struct EventStreamParser {
    max_event_bytes: usize,
    line: Vec<u8>,
    /// The previous chunk ended in `\r`; a `\n` starting this one belongs to the same line break.
    after_cr: bool,
    data: String,
    has_data: bool,
    event: String,
    /// The stream's last event id, as the spec defines it: kept across events until changed.
    pub last_event_id: Option<String>,
    /// The reconnection delay the server asked for, in milliseconds.
    pub retry_ms: Option<u64>,
    /// Skip an oversized event (instead of failing the stream) and hand on what is kept of it.
    skip_oversized: bool,
    skipping: Option<Skipping>,
}

impl EventStreamParser {
    pub fn new(max_event_bytes: usize) -> Self {
        EventStreamParser {
            max_event_bytes,
            line: Vec::new(),
            after_cr: false,
            data: String::new(),
            has_data: false,
            event: String::new(),
            last_event_id: None,
            retry_ms: None,
            skip_oversized: false,
            skipping: None,
        }
    }

    /// A parser for a stream that carries many answers: an oversized event is skipped (see the module).
    pub fn skipping_oversized(max_event_bytes: usize) -> Self {
        EventStreamParser { skip_oversized: true, ..Self::new(max_event_bytes) }
    }

    /// Start on a new response (a reconnection): forget any half-read line or event, keep the last
    /// event id and the retry delay, which belong to the stream, not to one connection.
    pub fn reset_connection(&mut self) {
        self.line.clear();
        self.after_cr = false;
        self.data.clear();
        self.has_data = false;
        self.event.clear();
        self.skipping = None;
    }

    /// Feed the next chunk; complete events are appended to `out`.
    pub fn feed(&mut self, mut chunk: &[u8], out: &mut Vec<Event>) -> Result<(), EventStreamError> {
        // An empty chunk says nothing: it must not forget a `\r` that ended the previous one.
        if chunk.is_empty() {
            return Ok(());
        }
        if self.after_cr && chunk.first() == Some(&b'\n') {
            chunk = &chunk[1..];
        }
        self.after_cr = false;
        while let Some(end) = memchr::memchr2(b'\n', b'\r', chunk) {
            let (head, rest) = chunk.split_at(end);
            match self.skipping {
                Some(_) => self.skip(head)?,
                None => self.take(head, out)?,
            }
            if self.skipping.is_some() {
                self.skip_line_end(out);
            } else {
                let line = std::mem::take(&mut self.line);
                self.process_line(&line, out)?;
                self.line = line;
                self.line.clear();
            }
            chunk = if rest[0] == b'\r' && rest.get(1) == Some(&b'\n') {
                &rest[2..]
            } else {
                if rest[0] == b'\r' && rest.len() == 1 {
                    self.after_cr = true;
                }
                &rest[1..]
            };
        }
        if self.skipping.is_some() {
            self.skip(chunk)
        } else {
            self.take(chunk, out)
        }
    }

    /// Add `piece` to the current line; past the limit, fail or start skipping the event.
    fn take(&mut self, piece: &[u8], out: &mut Vec<Event>) -> Result<(), EventStreamError> {
        self.line.extend_from_slice(piece);
        if self.line.len() + self.data.len() <= self.max_event_bytes {
            return Ok(());
        }
        if !self.skip_oversized {
            return Err(EventStreamError::TooLarge);
        }
        // What is kept: the data so far, then the current line's value if it is a data line.
        let line_is_data = self.line.starts_with(b"data:");
        let value = line_is_data.then(|| {
            let value = &self.line[5..];
            value.strip_prefix(b" ").unwrap_or(value)
        });
        let mut head = self.data.as_bytes()[..self.data.len().min(OVERSIZED_HEAD_BYTES)].to_vec();
        if let Some(value) = value {
            if self.has_data && head.len() < OVERSIZED_HEAD_BYTES {
                head.push(b'\n');
            }
            head.extend_from_slice(
                &value[..value.len().min(OVERSIZED_HEAD_BYTES - head.len().min(OVERSIZED_HEAD_BYTES))],
            );
        }
        let mut tail = TailWindow::default();
        tail.push(self.data.as_bytes());
        if let Some(value) = value {
            tail.push(value);
        }
        let reported = crate::protocol::jsonrpc::sniff_head(&head).id.is_some();
        if reported {
            out.push(Event {
                event: std::mem::take(&mut self.event),
                data: String::new(),
                oversized: Some(Oversized { head: head.clone(), tail: None }),
            });
        }
        self.skipping = Some(Skipping {
            head,
            tail,
            reported,
            bytes: 0,
            field: Vec::new(),
            line_is_data: Some(line_is_data),
            separator_next: self.line == b"data:",
            line_empty: self.line.is_empty(),
        });
        self.line.clear();
        self.data.clear();
        self.has_data = false;
        Ok(())
    }

    /// Part of a line of the event being skipped: only a data line's bytes are kept, in the tail.
    fn skip(&mut self, mut piece: &[u8]) -> Result<(), EventStreamError> {
        let skipping = self.skipping.as_mut().expect("skipping");
        skipping.line_empty &= piece.is_empty();
        skipping.bytes += piece.len();
        if skipping.bytes > MAX_SKIPPED_LINE_BYTES {
            return Err(EventStreamError::TooLarge);
        }
        if skipping.line_is_data.is_none() {
            let wanted = 5usize.saturating_sub(skipping.field.len()).min(piece.len());
            skipping.field.extend_from_slice(&piece[..wanted]);
            piece = &piece[wanted..];
            if skipping.field.len() < 5 {
                return Ok(());
            }
            let is_data = skipping.field == b"data:";
            skipping.line_is_data = Some(is_data);
            if is_data {
                skipping.tail.push(b"\n");
                skipping.separator_next = true;
            }
        }
        if skipping.separator_next && !piece.is_empty() {
            skipping.separator_next = false;
            piece = piece.strip_prefix(b" ").unwrap_or(piece);
        }
        if skipping.line_is_data == Some(true) {
            skipping.tail.push(piece);
        }
        Ok(())
    }

    /// A line of the skipped event ended; a blank one ends the event, handed on unless it was already.
    fn skip_line_end(&mut self, out: &mut Vec<Event>) {
        let skipping = self.skipping.as_mut().expect("skipping");
        if !skipping.line_empty {
            skipping.field.clear();
            skipping.line_is_data = None;
            skipping.separator_next = false;
            skipping.line_empty = true;
            return;
        }
        let skipped = self.skipping.take().expect("skipping");
        let event = std::mem::take(&mut self.event);
        if !skipped.reported {
            let oversized = Oversized { head: skipped.head, tail: Some(skipped.tail.bytes().to_vec()) };
            out.push(Event { event, data: String::new(), oversized: Some(oversized) });
        }
    }

    fn process_line(&mut self, line: &[u8], out: &mut Vec<Event>) -> Result<(), EventStreamError> {
        if line.is_empty() {
            self.dispatch(out);
            return Ok(());
        }
        if line[0] == b':' {
            return Ok(()); // a comment, often a keep-alive
        }
        let line = std::str::from_utf8(line).map_err(|_| EventStreamError::InvalidUtf8)?;
        let (field, value) = match line.find(':') {
            Some(i) => (&line[..i], line[i + 1..].strip_prefix(' ').unwrap_or(&line[i + 1..])),
            None => (line, ""),
        };
        match field {
            "data" => {
                if self.has_data {
                    self.data.push('\n');
                }
                self.data.push_str(value);
                self.has_data = true;
            }
            "event" => self.event = value.to_owned(),
            "id" if !value.contains('\0') => self.last_event_id = Some(value.to_owned()),
            "retry" if !value.is_empty() && value.bytes().all(|b| b.is_ascii_digit()) => {
                self.retry_ms = value.parse().ok();
            }
            _ => {}
        }
        Ok(())
    }

    fn dispatch(&mut self, out: &mut Vec<Event>) {
        let event = std::mem::take(&mut self.event);
        if self.has_data && !self.data.is_empty() {
            let event = if event.is_empty() { DEFAULT_EVENT_TYPE.to_owned() } else { event };
            out.push(Event { event, data: std::mem::take(&mut self.data), oversized: None });
        }
        self.data.clear();
        self.has_data = false;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_all(chunks: &[&[u8]]) -> (Vec<Event>, EventStreamParser) {
        let mut parser = EventStreamParser::new(1024);
        let mut out = Vec::new();
        for chunk in chunks {
            parser.feed(chunk, &mut out).unwrap();
        }
        (out, parser)
    }

    #[test]
    fn parses_events_split_anywhere() {
        let text = b"event: message\ndata: {\"a\":1}\n\n: keep-alive\n\ndata: line1\ndata: line2\r\n\r\n";
        for split in 0..text.len() {
            let (events, _) = parse_all(&[&text[..split], &text[split..]]);
            assert_eq!(events.len(), 2, "split at {split}");
            assert_eq!(events[0].data, "{\"a\":1}");
            assert_eq!(events[1].data, "line1\nline2");
            assert_eq!(events[1].event, "message");
        }
    }

    #[test]
    fn a_priming_event_sets_id_and_retry_but_dispatches_nothing() {
        let (events, parser) = parse_all(&[b"id: event-7\nretry: 500\ndata: \n\n"]);
        assert!(events.is_empty());
        assert_eq!(parser.last_event_id.as_deref(), Some("event-7"));
        assert_eq!(parser.retry_ms, Some(500));
    }

    #[test]
    fn bare_cr_line_endings_and_named_events() {
        let (events, _) = parse_all(&[b"event: endpoint\rdata: /messages?s=1\r", b"\r"]);
        assert_eq!(events, vec![Event { event: "endpoint".into(), data: "/messages?s=1".into(), oversized: None }]);
    }

    #[test]
    fn a_reconnection_drops_the_half_read_event_but_keeps_the_id() {
        let mut parser = EventStreamParser::new(1024);
        let mut out = Vec::new();
        parser.feed(b"id: 6\ndata: ok\n\ndata: {\"partial", &mut out).unwrap();
        parser.reset_connection();
        parser.feed(b"id: 7\ndata: {\"whole\":1}\n\n", &mut out).unwrap();
        assert_eq!(out.iter().map(|e| e.data.as_str()).collect::<Vec<_>>(), ["ok", "{\"whole\":1}"]);
        assert_eq!(parser.last_event_id.as_deref(), Some("7"));
    }

    #[test]
    fn an_event_over_the_limit_is_refused_while_it_arrives() {
        let mut parser = EventStreamParser::new(16);
        let mut out = Vec::new();
        assert_eq!(parser.feed(b"data: 0123456789", &mut out), Ok(()));
        assert_eq!(parser.feed(b"abcdefghij", &mut out), Err(EventStreamError::TooLarge));
        let mut parser = EventStreamParser::new(16);
        assert_eq!(parser.feed(b"data: 0123456789\ndata: 0123456789\n", &mut out), Err(EventStreamError::TooLarge));
    }

    #[test]
    fn an_oversized_event_on_a_shared_stream_is_skipped_keeping_its_head_and_tail() {
        let id_last = format!("data: {{\"result\":\"{}\",\n\ndata: ok\n\n", "x".repeat(5000));
        let id_last = id_last.replacen(",\n\n", "\ndata: ,\"jsonrpc\":\"2.0\",\"id\":9}\nid: ev-3\n\n", 1);
        let id_first = format!(
            "data: {{\"jsonrpc\":\"2.0\",\"id\":4,\"result\":\"{}\"}}\r\n\r\ndata: ok\r\n\r\n",
            "x".repeat(5000)
        );
        for split in [1, 7, 100, 100_000] {
            let mut parser = EventStreamParser::skipping_oversized(1024);
            let mut out = Vec::new();
            for piece in id_last.as_bytes().chunks(split) {
                parser.feed(piece, &mut out).unwrap();
            }
            assert_eq!(out.len(), 2, "split {split}");
            let kept = out[0].oversized.as_ref().expect("skipped");
            assert!(kept.head.starts_with(b"{\"result\":\"xxx") && kept.head.len() <= OVERSIZED_HEAD_BYTES);
            let tail = kept.tail.as_deref().expect("its tail");
            assert!(tail.ends_with(b"xxx\"\n,\"jsonrpc\":\"2.0\",\"id\":9}"), "{}", String::from_utf8_lossy(tail));
            assert_eq!(crate::protocol::jsonrpc::sniff_tail(tail).id, Some(9));
            assert_eq!((out[1].data.as_str(), out[1].oversized.is_none()), ("ok", true), "the next event is intact");

            let mut parser = EventStreamParser::skipping_oversized(1024);
            let mut out = Vec::new();
            for piece in id_first.as_bytes()[..2000].chunks(split) {
                parser.feed(piece, &mut out).unwrap();
            }
            assert_eq!(out.len(), 1, "handed on as the limit passed, split {split}");
            assert_eq!(out[0].oversized.as_ref().map(|o| o.tail.is_none()), Some(true));
            for piece in id_first.as_bytes()[2000..].chunks(split) {
                parser.feed(piece, &mut out).unwrap();
            }
            assert_eq!(out.len(), 2, "split {split}: only once, then the next event");
            assert_eq!(out[1].data, "ok");
        }
    }

    #[test]
    fn skipping_an_event_that_never_ends_is_bounded() {
        let mut parser = EventStreamParser::skipping_oversized(1024);
        let mut out = Vec::new();
        parser.feed(b"data: ", &mut out).unwrap();
        let piece = vec![b'x'; 1024 * 1024];
        let mut fed = 0;
        let error = loop {
            match parser.feed(&piece, &mut out) {
                Ok(()) => fed += piece.len(),
                Err(e) => break e,
            }
            assert!(fed <= MAX_SKIPPED_LINE_BYTES + 2 * piece.len());
        };
        assert_eq!(error, EventStreamError::TooLarge);
    }
}
