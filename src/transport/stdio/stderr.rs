//! A stdio server's stderr: where it goes ([`StderrMode`]), the tail kept to describe its exit, and,
//! when asked, its lines delivered while it runs.
//!
//! Delivered lines are bounded three ways, so a chatty or hostile server can't flood the host: each is
//! cut to [`MAX_STDERR_LINE_BYTES`] (after redaction, so a secret at the cut goes whole), at most
//! [`MAX_STDERR_LINES_PER_SECOND`] go out in one second, and the lines over that are counted and reported
//! as one [`StderrEvent::Dropped`] when the second is over. Every line is redacted with the server's
//! secrets first, exactly like the tail.

use crate::guard::redact::{head_of, tail_of, Secrets};
use crate::limits::{MAX_STDERR_LINES_PER_SECOND, MAX_STDERR_LINE_BYTES, STDERR_TAIL_BYTES};
use parking_lot::Mutex;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::io::AsyncReadExt;

/// stderr is diagnostics only: small reads keep an idle connection's footprint small.
const STDERR_READ_CHUNK_BYTES: usize = 1024;
const RATE_WINDOW: Duration = Duration::from_secs(1);

/// Where a stdio server's stderr goes (the entry's `stderr`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum StderrMode {
    /// Read and kept: its tail is shown when the server fails (`stderrTail`). The default.
    #[default]
    Pipe,
    /// As `Pipe`, and each line is delivered as it comes (`server-stderr` diagnostics), bounded.
    Diagnostics,
    /// The host's own stderr, passed through; nothing is kept.
    Inherit,
    /// Discarded (`/dev/null`); nothing is kept.
    Ignore,
}

impl StderrMode {
    pub const NAMES: &'static [&'static str] = &["pipe", "diagnostics", "inherit", "ignore"];

    pub fn parse(name: &str) -> Option<Self> {
        Some(match name {
            "pipe" => StderrMode::Pipe,
            "diagnostics" => StderrMode::Diagnostics,
            "inherit" => StderrMode::Inherit,
            "ignore" => StderrMode::Ignore,
            _ => return None,
        })
    }

    /// Whether the engine reads it (and so keeps a tail).
    pub fn captured(self) -> bool {
        matches!(self, StderrMode::Pipe | StderrMode::Diagnostics)
    }
}

/// What a server's stderr gives the host while it runs (`StderrMode::Diagnostics`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StderrEvent {
    /// One line, redacted, without its line break; `truncated` when it was cut to the line bound.
    Line { text: String, truncated: bool },
    /// Lines not delivered because the second's bound was reached.
    Dropped { lines: u64 },
}

/// Receives a server's stderr lines; called from the transport's task.
pub type StderrListener = Arc<dyn Fn(StderrEvent) + Send + Sync>;

/// Read stderr to its end: into the tail, and to `lines` if given.
pub(super) async fn drain(
    mut stderr: tokio::process::ChildStderr,
    tail: Arc<Mutex<TailBuffer>>,
    secrets: Arc<Secrets>,
    mut lines: Option<LineForwarder>,
) {
    let mut chunk = vec![0u8; STDERR_READ_CHUNK_BYTES];
    loop {
        // Lines were dropped: report them when their second ends, even if the server falls silent.
        let report_at = lines.as_ref().and_then(LineForwarder::report_due);
        let read = match report_at {
            Some(at) => match tokio::time::timeout_at(at.into(), stderr.read(&mut chunk)).await {
                Ok(read) => read,
                Err(_) => {
                    if let Some(lines) = &mut lines {
                        lines.roll(Instant::now());
                    }
                    continue;
                }
            },
            None => stderr.read(&mut chunk).await,
        };
        let n = match read {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        tail.lock().push(&chunk[..n], secrets.longest_bytes());
        if let Some(lines) = &mut lines {
            lines.feed(&chunk[..n], Instant::now());
        }
    }
    if let Some(lines) = &mut lines {
        lines.finish(Instant::now());
    }
}

/// Splits stderr into lines and hands them to the listener, bounded and redacted (see the module).
pub(super) struct LineForwarder {
    listener: StderrListener,
    secrets: Arc<Secrets>,
    /// The current line: its first `MAX_STDERR_LINE_BYTES` plus as many as the longest secret, so
    /// one split by the cut is still recognised.
    line: Vec<u8>,
    /// The current line went on past what is kept.
    cut: bool,
    window_start: Instant,
    sent_in_window: usize,
    dropped: u64,
}

impl LineForwarder {
    pub(super) fn new(listener: StderrListener, secrets: Arc<Secrets>) -> Self {
        LineForwarder {
            listener,
            secrets,
            line: Vec::new(),
            cut: false,
            window_start: Instant::now(),
            sent_in_window: 0,
            dropped: 0,
        }
    }

    pub(super) fn feed(&mut self, mut bytes: &[u8], now: Instant) {
        while !bytes.is_empty() {
            let (piece, complete) = match memchr::memchr(b'\n', bytes) {
                Some(end) => (&bytes[..end], true),
                None => (bytes, false),
            };
            bytes = &bytes[piece.len() + usize::from(complete)..];
            let keep = MAX_STDERR_LINE_BYTES + self.secrets.longest_bytes();
            let room = keep.saturating_sub(self.line.len());
            self.line.extend_from_slice(&piece[..piece.len().min(room)]);
            self.cut |= piece.len() > room;
            if complete {
                self.end_line(now);
            }
        }
    }

    /// The stream ended: its last line (if unterminated) and any count of dropped lines go out.
    pub(super) fn finish(&mut self, now: Instant) {
        if !self.line.is_empty() {
            self.end_line(now);
        }
        self.report_dropped();
    }

    /// When dropped lines are to be reported.
    fn report_due(&self) -> Option<Instant> {
        (self.dropped > 0).then_some(self.window_start + RATE_WINDOW)
    }

    /// Start a new second if the current one is over, reporting what it dropped.
    fn roll(&mut self, now: Instant) {
        if now.duration_since(self.window_start) >= RATE_WINDOW {
            self.report_dropped();
            self.window_start = now;
            self.sent_in_window = 0;
        }
    }

    fn report_dropped(&mut self) {
        if self.dropped > 0 {
            (self.listener)(StderrEvent::Dropped { lines: std::mem::take(&mut self.dropped) });
        }
    }

    fn end_line(&mut self, now: Instant) {
        let line = std::mem::take(&mut self.line);
        let cut = std::mem::take(&mut self.cut);
        let body = line.strip_suffix(b"\r").unwrap_or(&line);
        if body.iter().all(u8::is_ascii_whitespace) {
            return;
        }
        self.roll(now);
        if self.sent_in_window >= MAX_STDERR_LINES_PER_SECOND {
            self.dropped += 1;
            return;
        }
        self.sent_in_window += 1;
        let redacted = self.secrets.redact_window(body, 0..body.len().min(MAX_STDERR_LINE_BYTES));
        let shown = head_of(&redacted, MAX_STDERR_LINE_BYTES);
        let truncated = cut || body.len() > MAX_STDERR_LINE_BYTES;
        // Terminal control sequences stay out of the host's logs.
        let text =
            String::from_utf8_lossy(shown).chars().map(|c| if c.is_control() && c != '\t' { ' ' } else { c }).collect();
        (self.listener)(StderrEvent::Line { text, truncated });
    }
}

/// The last bytes a server wrote to stderr: the last [`STDERR_TAIL_BYTES`] are shown, and as many
/// again as the longest secret is long are kept before them, so that a secret split by the cut is
/// still recognised and redacted whole.
#[derive(Default)]
pub struct TailBuffer {
    bytes: std::collections::VecDeque<u8>,
    /// Bytes have been dropped from the front: the first kept bytes may be the end of a secret.
    cut: bool,
}

impl TailBuffer {
    /// Append `data`, keeping `STDERR_TAIL_BYTES + context_bytes`.
    pub fn push(&mut self, data: &[u8], context_bytes: usize) {
        let keep = STDERR_TAIL_BYTES + context_bytes;
        let data = &data[data.len().saturating_sub(keep)..];
        let overflow = (self.bytes.len() + data.len()).saturating_sub(keep);
        self.cut |= overflow > 0;
        self.bytes.drain(..overflow.min(self.bytes.len()));
        self.bytes.extend(data);
    }

    pub fn is_empty(&self) -> bool {
        self.bytes.is_empty()
    }

    /// The last `STDERR_TAIL_BYTES` bytes of the text, redacted before they were cut (a marker at the
    /// cut is shown whole).
    pub fn text(&mut self, secrets: &Secrets) -> String {
        let all = self.bytes.make_contiguous();
        // The shown part starts far enough in that a secret cut off at the front lies wholly before it.
        let context = if self.cut { secrets.longest_bytes().min(all.len()) } else { 0 };
        let start = all.len().saturating_sub(STDERR_TAIL_BYTES).max(context);
        let redacted = secrets.redact_window(all, start..all.len());
        String::from_utf8_lossy(tail_of(&redacted, STDERR_TAIL_BYTES)).into_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::guard::redact::REDACTED;

    fn forwarder(secrets: Arc<Secrets>) -> (LineForwarder, Arc<Mutex<Vec<StderrEvent>>>) {
        let events = Arc::new(Mutex::new(Vec::new()));
        let sink = events.clone();
        (LineForwarder::new(Arc::new(move |e| sink.lock().push(e)), secrets), events)
    }

    #[test]
    fn lines_are_redacted_whole_then_cut_and_cleaned() {
        let secrets = Arc::new(Secrets::default());
        secrets.add("sk-secret-123");
        let (mut lines, events) = forwarder(secrets);
        // The cut falls inside the secret; a second line in the same chunk, a blank one, a CRLF one.
        let long = format!("{}sk-secret-123{}", "a".repeat(MAX_STDERR_LINE_BYTES - 5), "b".repeat(5000));
        let stream = format!("token sk-secret-123 ok\n\n\x1b[31mred\x1b[0m\r\n{long}\nlast");
        for piece in stream.as_bytes().chunks(333) {
            lines.feed(piece, Instant::now());
        }
        lines.finish(Instant::now());
        let got = events.lock().clone();
        let texts: Vec<(&str, bool)> = got
            .iter()
            .map(|e| match e {
                StderrEvent::Line { text, truncated } => (text.as_str(), *truncated),
                other => panic!("{other:?}"),
            })
            .collect();
        assert_eq!(texts[0], ("token [redacted] ok", false));
        assert_eq!(texts[1], (" [31mred [0m", false));
        assert_eq!(texts[2].0, format!("{}{REDACTED}", "a".repeat(MAX_STDERR_LINE_BYTES - 5)));
        assert!(texts[2].1, "cut");
        assert_eq!(texts[3], ("last", false));
        assert_eq!(texts.len(), 4);
    }

    #[test]
    fn a_flood_is_bounded_per_second_and_the_dropped_lines_are_counted() {
        let (mut lines, events) = forwarder(Arc::default());
        let start = Instant::now();
        let flood = "line\n".repeat(10_000);
        lines.feed(flood.as_bytes(), start);
        assert_eq!(events.lock().len(), MAX_STDERR_LINES_PER_SECOND, "the second's bound");
        assert_eq!(lines.report_due(), Some(lines.window_start + RATE_WINDOW));
        // The next second: the count of the last one first, then lines again.
        lines.feed(b"next\n", start + RATE_WINDOW);
        let got = events.lock().split_off(MAX_STDERR_LINES_PER_SECOND);
        assert_eq!(
            got,
            [
                StderrEvent::Dropped { lines: (10_000 - MAX_STDERR_LINES_PER_SECOND) as u64 },
                StderrEvent::Line { text: "next".into(), truncated: false },
            ]
        );
        assert_eq!(lines.report_due(), None);
    }

    #[test]
    fn the_stderr_tail_redacts_a_secret_split_by_its_cut() {
        let secrets = Secrets::default();
        secrets.add("sk-secret-123");
        for split in 1..13 {
            let mut tail = TailBuffer::default();
            // Written in small pieces, as a pipe delivers it; the tail's cut falls `split` bytes into the secret.
            let stderr = format!("{}sk-secret-123{}", "a".repeat(3000), "y".repeat(STDERR_TAIL_BYTES - (13 - split)));
            for piece in stderr.as_bytes().chunks(1000) {
                tail.push(piece, secrets.longest_bytes());
            }
            let text = tail.text(&secrets);
            assert!(text.len() < STDERR_TAIL_BYTES + REDACTED.len());
            assert!(text.starts_with("[redacted]y") && text.ends_with('y'), "split {split}: {}", &text[..40]);
            for fragment in ["sk-s", "cret", "-123", "t-12", "et-1"] {
                assert!(!text.contains(fragment), "split {split}: {}", &text[..40]);
            }
        }
    }

    #[test]
    fn tail_keeps_only_the_last_bytes() {
        let none = Secrets::default();
        let mut tail = TailBuffer::default();
        tail.push(&vec![b'a'; STDERR_TAIL_BYTES], 0);
        tail.push(b"end", 0);
        let text = tail.text(&none);
        assert_eq!(text.len(), STDERR_TAIL_BYTES);
        assert!(text.ends_with("aend"));
        tail.push(&vec![b'z'; STDERR_TAIL_BYTES * 2], 0);
        assert!(tail.text(&none).bytes().all(|b| b == b'z'));
    }
}
