//! A bounded `text/event-stream` parser (the WHATWG server-sent events format).
//!
//! Hand-written rather than taken from a crate because the engine needs two controls the crates we
//! checked don't give together: a hard cap on one event's size, enforced while the event is still
//! arriving (so an oversized event is refused without buffering the rest), and the `id` and `retry`
//! fields of events that carry no data (the "priming" events resumable streams start with).

pub const DEFAULT_EVENT_TYPE: &str = "message";

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Event {
    pub event: String,
    pub data: String,
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
        }
    }

    /// Start on a new response (a reconnection): forget any half-read line or event, keep the last
    /// event id and the retry delay, which belong to the stream, not to one connection.
    pub fn reset_connection(&mut self) {
        self.line.clear();
        self.after_cr = false;
        self.data.clear();
        self.has_data = false;
        self.event.clear();
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
            self.line.extend_from_slice(head);
            self.check_size()?;
            let line = std::mem::take(&mut self.line);
            self.process_line(&line, out)?;
            self.line = line;
            self.line.clear();
            chunk = if rest[0] == b'\r' && rest.get(1) == Some(&b'\n') {
                &rest[2..]
            } else {
                if rest[0] == b'\r' && rest.len() == 1 {
                    self.after_cr = true;
                }
                &rest[1..]
            };
        }
        self.line.extend_from_slice(chunk);
        self.check_size()
    }

    fn check_size(&self) -> Result<(), EventStreamError> {
        if self.line.len() + self.data.len() > self.max_event_bytes {
            Err(EventStreamError::TooLarge)
        } else {
            Ok(())
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
            out.push(Event { event, data: std::mem::take(&mut self.data) });
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
        assert_eq!(events, vec![Event { event: "endpoint".into(), data: "/messages?s=1".into() }]);
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
}
