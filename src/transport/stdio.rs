//! stdio transport: the server is a child process speaking newline-delimited JSON-RPC.
//!
//! The child runs in its own process group with an allowlisted environment. Writes are coalesced:
//! every message queued while the pipe is busy goes out in the next single `write`. stderr is drained
//! continuously so a chatty server never blocks, and its last bytes are kept for diagnostics.

use super::{describe_garbage, BoxFuture, MessageSink, Outbound, Transport};
use crate::error::{McpError, Result};
use crate::limits::{STDERR_TAIL_BYTES, STDIO_EXIT_GRACE_MS, STDIO_TERM_GRACE_MS};
use std::path::PathBuf;
use std::process::{ExitStatus, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::process::{ChildStdin, ChildStdout, Command};
use std::os::fd::{AsRawFd, RawFd};
use tokio::sync::{watch, Notify};

/// How to start one stdio server. `env` is the complete environment the child gets.
#[derive(Clone)]
pub struct StdioSpec {
    pub program: PathBuf,
    pub args: Vec<String>,
    pub env: Vec<(String, String)>,
    pub cwd: Option<PathBuf>,
    /// Read stdout on the host's event loop rather than in an engine task (see [`ExternalReader`]).
    pub reader_host: Option<Arc<dyn ReaderHost>>,
}

impl std::fmt::Debug for StdioSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StdioSpec").field("program", &self.program).field("args", &self.args).field("cwd", &self.cwd).finish()
    }
}

/// Bytes of an oversized line kept so the connection can still find which request it answered.
const OVERSIZED_HEAD_BYTES: usize = 4096;
const READ_BUFFER_BYTES: usize = 16 * 1024;
/// stderr is diagnostics only: small reads keep an idle connection's footprint small.
const STDERR_READ_CHUNK_BYTES: usize = 1024;
/// A burst larger than this is written in more than one go, so one huge burst can't hog memory twice.
const MAX_COALESCED_WRITE_BYTES: usize = 1024 * 1024;

pub struct StdioTransport {
    outbox: Arc<Outbox>,
    process_group: i32,
    stderr_tail: Arc<Mutex<TailBuffer>>,
    exit: watch::Receiver<Option<ExitStatus>>,
    closing: Arc<AtomicBool>,
}

impl StdioTransport {
    pub fn spawn(spec: &StdioSpec, sink: Arc<dyn MessageSink>, max_message_bytes: usize) -> Result<Arc<Self>> {
        let mut command = Command::new(&spec.program);
        command
            .args(&spec.args)
            .env_clear()
            .envs(spec.env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0);
        if let Some(cwd) = &spec.cwd {
            command.current_dir(cwd);
        }
        let mut child = command
            .spawn()
            .map_err(|e| McpError::Transport(format!("failed to start {}: {e}", spec.program.display())))?;
        let process_group = child.id().map(|pid| pid as i32).unwrap_or(0);
        let stdin = child.stdin.take().expect("stdin is piped");
        let stdout = child.stdout.take().expect("stdout is piped");
        let stderr = child.stderr.take().expect("stderr is piped");

        let outbox = Arc::new(Outbox::new(stdin.as_raw_fd()));
        let stderr_tail = Arc::new(Mutex::new(TailBuffer::default()));
        let closing = Arc::new(AtomicBool::new(false));
        let (exit_tx, exit_rx) = watch::channel(None);

        tokio::spawn(write_loop(stdin, outbox.clone()));
        tokio::spawn(drain_stderr(stderr, stderr_tail.clone()));
        tokio::spawn(async move {
            let status = child.wait().await.ok();
            let _ = exit_tx.send(status);
        });
        let duplicate = spec.reader_host.as_ref().map(|_| unsafe { libc::dup(stdout.as_raw_fd()) });
        match (&spec.reader_host, duplicate) {
            (Some(host), Some(fd)) if fd >= 0 => {
                // The host reads a duplicate; ours closes here, so end of file reaches the host alone.
                drop(stdout);
                let reader = Arc::new(ExternalReader {
                    lines: Mutex::new(LineReader::new(max_message_bytes)),
                    sink,
                    exit: exit_rx.clone(),
                    closing: closing.clone(),
                    ended: AtomicBool::new(false),
                });
                host.attach(reader, fd);
            }
            _ => {
                tokio::spawn(read_loop(stdout, sink, max_message_bytes, exit_rx.clone(), closing.clone()));
            }
        }

        Ok(Arc::new(StdioTransport { outbox, process_group, stderr_tail, exit: exit_rx, closing }))
    }
}

impl Transport for StdioTransport {
    fn send(&self, message: Outbound) -> Result<()> {
        self.outbox.push(std::iter::once(message.json))
    }

    fn send_all(&self, messages: Vec<Outbound>) -> Result<()> {
        self.outbox.push(messages.into_iter().map(|m| m.json))
    }

    fn close(&self) -> BoxFuture<'static, ()> {
        let first = !self.closing.swap(true, Ordering::SeqCst);
        let outbox = self.outbox.clone();
        let group = self.process_group;
        let mut exit = self.exit.clone();
        Box::pin(async move {
            if first {
                // Ending stdin is the polite request to exit; most servers take it.
                outbox.close();
                if !wait_for_exit(&mut exit, STDIO_EXIT_GRACE_MS).await || group_alive(group).await {
                    // The whole group: a server's own children must not outlive it.
                    signal_group(group, libc::SIGTERM);
                    let deadline = tokio::time::Instant::now() + Duration::from_millis(STDIO_TERM_GRACE_MS);
                    let mut alive = true;
                    while tokio::time::Instant::now() < deadline {
                        alive = exit.borrow().is_none() || group_alive(group).await;
                        if !alive {
                            break;
                        }
                        tokio::time::sleep(Duration::from_millis(10)).await;
                    }
                    if alive {
                        signal_group(group, libc::SIGKILL);
                    }
                }
            }
            wait_for_exit(&mut exit, u64::MAX).await;
        })
    }

    fn stderr_tail(&self) -> Option<String> {
        let tail = self.stderr_tail.lock().unwrap();
        (!tail.is_empty()).then(|| tail.text())
    }
}

impl Drop for StdioTransport {
    fn drop(&mut self) {
        // A toolset dropped without close() still must not leave processes behind.
        if !self.closing.load(Ordering::SeqCst) && self.exit.borrow().is_none() {
            signal_group(self.process_group, libc::SIGKILL);
        }
    }
}

async fn wait_for_exit(exit: &mut watch::Receiver<Option<ExitStatus>>, within_ms: u64) -> bool {
    let wait = exit.wait_for(|s| s.is_some());
    if within_ms == u64::MAX {
        return wait.await.is_ok();
    }
    matches!(tokio::time::timeout(Duration::from_millis(within_ms), wait).await, Ok(Ok(_)))
}

fn signal_group(group: i32, signal: i32) {
    if group > 0 {
        // SAFETY: kill(2) with a negative pid signals a process group; no memory is touched.
        unsafe { libc::kill(-group, signal) };
    }
}

async fn group_alive(group: i32) -> bool {
    // Signal 0 checks for existence (zombies count); then /proc tells live members from zombies. The
    // scan reads files, so it runs on the blocking pool, not on the engine's one worker.
    if group <= 0 || unsafe { libc::kill(-group, 0) } != 0 {
        return false;
    }
    tokio::task::spawn_blocking(move || group_has_live_member(group)).await.unwrap_or(true)
}

/// True when some member of the group is not a zombie. Zombies reparented to an init that never
/// reaps them hold no resources and cannot be signalled away.
fn group_has_live_member(group: i32) -> bool {
    let Ok(entries) = std::fs::read_dir("/proc") else { return true };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(pid) = name.to_str().and_then(|n| n.parse::<u32>().ok()) else { continue };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else { continue };
        // Fields after the parenthesised command: state ppid pgrp ...
        let Some(rest) = stat.rfind(')').map(|i| &stat[i + 2..]) else { continue };
        let mut fields = rest.split(' ');
        let state = fields.next().unwrap_or("");
        let pgrp = fields.nth(1).and_then(|f| f.parse::<i32>().ok());
        if pgrp == Some(group) && state != "Z" && state != "X" {
            return true;
        }
    }
    false
}

/// Outgoing bytes. A burst of messages is written with one `write(2)`, straight from the sending
/// thread when the pipe is idle (no task wake on the way out); what the pipe can't take at once goes
/// to the writer task.
struct Outbox {
    state: Mutex<OutboxState>,
    wake: Notify,
    /// The child's stdin, non-blocking. Written here only under `state`'s lock while not closed; the
    /// writer task closes it only after setting `closed` under the same lock.
    fd: RawFd,
}

#[derive(Default)]
struct OutboxState {
    pending: Vec<u8>,
    /// The writer task holds a batch it is still writing: keep order, queue behind it.
    writer_busy: bool,
    closed: bool,
}

impl Outbox {
    fn new(fd: RawFd) -> Self {
        Outbox { state: Mutex::new(OutboxState::default()), wake: Notify::new(), fd }
    }

    fn push(&self, messages: impl Iterator<Item = String>) -> Result<()> {
        let mut state = self.state.lock().unwrap();
        if state.closed {
            return Err(McpError::Closed);
        }
        let was_empty = state.pending.is_empty();
        for message in messages {
            state.pending.extend_from_slice(message.as_bytes());
            state.pending.push(b'\n');
        }
        if !was_empty || state.writer_busy {
            return Ok(()); // the writer task will take it with what is queued
        }
        // SAFETY: `fd` is open while `closed` is false, and we hold the lock that orders closing.
        let written = unsafe { libc::write(self.fd, state.pending.as_ptr().cast(), state.pending.len()) };
        if written > 0 {
            state.pending.drain(..written as usize);
        }
        if !state.pending.is_empty() {
            drop(state);
            self.wake.notify_one();
        }
        Ok(())
    }

    fn close(&self) {
        self.state.lock().unwrap().closed = true;
        self.wake.notify_one();
    }

    /// Swap the queued bytes into `spare`. `None` once closed and drained (the writer then drops the fd).
    async fn take(&self, spare: &mut Vec<u8>) -> Option<()> {
        loop {
            {
                let mut state = self.state.lock().unwrap();
                if !state.pending.is_empty() {
                    if state.pending.len() <= MAX_COALESCED_WRITE_BYTES {
                        std::mem::swap(&mut state.pending, spare);
                    } else {
                        spare.extend(state.pending.drain(..MAX_COALESCED_WRITE_BYTES));
                    }
                    state.writer_busy = true;
                    return Some(());
                }
                state.writer_busy = false;
                if state.closed {
                    return None;
                }
            }
            self.wake.notified().await;
        }
    }
}

/// Owns the child's stdin for the writer task. However the task ends (drained, failed, or dropped with
/// the runtime), the outbox is marked closed before the descriptor is: a direct write from another
/// thread can never reach a closed or reused descriptor.
struct StdinOwner {
    stdin: ChildStdin,
    outbox: Arc<Outbox>,
}

impl Drop for StdinOwner {
    fn drop(&mut self) {
        self.outbox.close();
        // `stdin` is dropped after this, closing the pipe: the server's signal to exit.
    }
}

async fn write_loop(stdin: ChildStdin, outbox: Arc<Outbox>) {
    let mut owner = StdinOwner { stdin, outbox: outbox.clone() };
    let mut batch = Vec::new();
    while outbox.take(&mut batch).await.is_some() {
        if owner.stdin.write_all(&batch).await.is_err() {
            // The reader sees the same death as EOF and reports it; nothing more to send.
            break;
        }
        batch.clear();
    }
}

/// Splits a byte stream into newline-delimited messages and hands each to the sink: whole lines
/// straight from the caller's buffer, partial ones accumulated; a line over the limit is dropped as it
/// arrives (only its head is kept, to find the call it answered).
pub struct LineReader {
    line: Vec<u8>,
    oversized: bool,
    max_message_bytes: usize,
}

impl LineReader {
    pub fn new(max_message_bytes: usize) -> Self {
        LineReader { line: Vec::new(), oversized: false, max_message_bytes }
    }

    /// Deliver every complete line in `bytes`. An error is a line that is not JSON-RPC: fatal.
    pub fn feed(&mut self, mut bytes: &[u8], sink: &dyn MessageSink) -> Result<()> {
        while !bytes.is_empty() {
            let (chunk, complete) = match memchr::memchr(b'\n', bytes) {
                Some(end) => (&bytes[..end], true),
                None => (bytes, false),
            };
            bytes = &bytes[chunk.len() + usize::from(complete)..];
            if complete && self.line.is_empty() && !self.oversized {
                // The common case: a whole message in the buffer, handed over without a copy.
                if chunk.len() <= self.max_message_bytes {
                    deliver(sink, chunk)?;
                } else {
                    refuse_oversized(sink, &chunk[..OVERSIZED_HEAD_BYTES.min(chunk.len())], self.max_message_bytes);
                }
                continue;
            }
            if !self.oversized {
                self.line.extend_from_slice(chunk);
                if self.line.len() > self.max_message_bytes {
                    self.oversized = true;
                    self.line.truncate(OVERSIZED_HEAD_BYTES);
                }
            }
            if complete {
                let line = std::mem::take(&mut self.line);
                let outcome = if self.oversized {
                    refuse_oversized(sink, &line, self.max_message_bytes);
                    Ok(())
                } else {
                    deliver(sink, &line)
                };
                self.line = line;
                self.line.clear();
                self.oversized = false;
                outcome?;
            }
        }
        Ok(())
    }
}

async fn read_loop(
    stdout: ChildStdout,
    sink: Arc<dyn MessageSink>,
    max_message_bytes: usize,
    exit: watch::Receiver<Option<ExitStatus>>,
    closing: Arc<AtomicBool>,
) {
    let mut reader = BufReader::with_capacity(READ_BUFFER_BYTES, stdout);
    let mut lines = LineReader::new(max_message_bytes);
    let failure = loop {
        let available = match reader.fill_buf().await {
            Ok([]) => break None,
            Ok(bytes) => bytes,
            Err(e) => break Some(McpError::Transport(format!("MCP server stdout failed: {e}"))),
        };
        let consumed = available.len();
        let fed = lines.feed(available, &*sink);
        reader.consume(consumed);
        if let Err(garbage) = fed {
            break Some(garbage);
        }
    };
    report_end(&*sink, failure, exit, &closing).await;
}

/// The server's stdout ended (or broke): say how, once the exit status had a moment to arrive.
async fn report_end(sink: &dyn MessageSink, failure: Option<McpError>, mut exit: watch::Receiver<Option<ExitStatus>>, closing: &AtomicBool) {
    let reason = if closing.load(Ordering::SeqCst) {
        McpError::Closed
    } else {
        let _ = tokio::time::timeout(Duration::from_millis(200), exit.wait_for(|s| s.is_some())).await;
        let how = match *exit.borrow() {
            Some(status) => describe_exit(status),
            None => "closed its stdout".to_owned(),
        };
        failure.unwrap_or_else(|| McpError::Transport(format!("MCP server process {how}")))
    };
    sink.on_closed(reason);
}

/// A server's stdout read by the host's event loop instead of an engine task. In Node, reading on the
/// JS thread itself saves a thread wake-up per response: the response is parsed here, synchronously,
/// when the host feeds the bytes, and the outcome is ready before the host's callback returns.
pub struct ExternalReader {
    lines: Mutex<LineReader>,
    sink: Arc<dyn MessageSink>,
    exit: watch::Receiver<Option<ExitStatus>>,
    closing: Arc<AtomicBool>,
    ended: AtomicBool,
}

impl ExternalReader {
    pub fn feed(&self, bytes: &[u8]) {
        if self.ended.load(Ordering::SeqCst) {
            return;
        }
        let fed = self.lines.lock().unwrap().feed(bytes, &*self.sink);
        if let Err(garbage) = fed {
            self.end(Some(garbage));
        }
    }

    /// The host saw end of file (or an error) on the stream.
    pub fn end(&self, failure: Option<McpError>) {
        if self.ended.swap(true, Ordering::SeqCst) {
            return;
        }
        let (sink, exit, closing) = (self.sink.clone(), self.exit.clone(), self.closing.clone());
        tokio::spawn(async move { report_end(&*sink, failure, exit, &closing).await });
    }
}

/// Where a stdio transport offers its stdout to be read by the host. Given the reader and a file
/// descriptor the host now owns (a duplicate: closing it is the host's job).
pub trait ReaderHost: Send + Sync {
    fn attach(&self, reader: Arc<ExternalReader>, fd: RawFd);
}

/// Hand one line to the sink. A line that is not JSON-RPC ends the session: on a pipe there is no
/// telling which request it was meant to answer, or what the server will write next.
fn deliver(sink: &dyn MessageSink, line: &[u8]) -> Result<()> {
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    if line.iter().all(u8::is_ascii_whitespace) || sink.on_message(line) {
        Ok(())
    } else {
        Err(McpError::Protocol(describe_garbage(line)))
    }
}

/// An oversized line was dropped unread; fail the one call it answered, found from its first bytes.
fn refuse_oversized(sink: &dyn MessageSink, head: &[u8], limit_bytes: usize) {
    if let Some(id) = crate::protocol::jsonrpc::sniff_response_id(head) {
        sink.on_request_failed(id, McpError::ResultTooLarge { limit_bytes });
    }
}

fn describe_exit(status: ExitStatus) -> String {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (Some(code), _) => format!("exited with code {code}"),
        (None, Some(signal)) => format!("was killed by signal {signal}"),
        _ => "exited".to_owned(),
    }
}

async fn drain_stderr(mut stderr: tokio::process::ChildStderr, tail: Arc<Mutex<TailBuffer>>) {
    let mut chunk = vec![0u8; STDERR_READ_CHUNK_BYTES];
    while let Ok(n) = stderr.read(&mut chunk).await {
        if n == 0 {
            break;
        }
        tail.lock().unwrap().push(&chunk[..n]);
    }
}

/// The last `STDERR_TAIL_BYTES` bytes written.
#[derive(Default)]
pub struct TailBuffer {
    bytes: std::collections::VecDeque<u8>,
}

impl TailBuffer {
    pub fn push(&mut self, data: &[u8]) {
        let data = &data[data.len().saturating_sub(STDERR_TAIL_BYTES)..];
        let overflow = (self.bytes.len() + data.len()).saturating_sub(STDERR_TAIL_BYTES);
        self.bytes.drain(..overflow);
        self.bytes.extend(data);
    }

    pub fn is_empty(&self) -> bool {
        self.bytes.is_empty()
    }

    pub fn text(&self) -> String {
        let (a, b) = self.bytes.as_slices();
        let mut all = Vec::with_capacity(a.len() + b.len());
        all.extend_from_slice(a);
        all.extend_from_slice(b);
        String::from_utf8_lossy(&all).into_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::jsonrpc::RequestId;

    /// Records what a transport hands over.
    #[derive(Default)]
    struct Recorder {
        messages: Mutex<Vec<String>>,
        failed: Mutex<Vec<(RequestId, String)>>,
    }

    impl MessageSink for Recorder {
        fn on_message(&self, frame: &[u8]) -> bool {
            let text = String::from_utf8_lossy(frame).into_owned();
            let ok = serde_json::from_str::<serde_json::Value>(&text).is_ok();
            self.messages.lock().unwrap().push(text);
            ok
        }
        fn on_request_failed(&self, id: RequestId, error: McpError) {
            self.failed.lock().unwrap().push((id, error.code().to_owned()));
        }
        fn is_pending(&self, _: RequestId) -> bool {
            true
        }
        fn on_closed(&self, _: McpError) {}
    }

    #[test]
    fn line_reader_splits_anywhere_and_skips_blank_lines() {
        let stream = b"{\"id\":1}\r\n\n{\"id\":2,\"x\":\"a b\"}\n{\"id\":3}\n";
        for split in 0..stream.len() {
            let sink = Recorder::default();
            let mut lines = LineReader::new(1024);
            lines.feed(&stream[..split], &sink).unwrap();
            lines.feed(&stream[split..], &sink).unwrap();
            let got = sink.messages.lock().unwrap().clone();
            assert_eq!(got, ["{\"id\":1}", "{\"id\":2,\"x\":\"a b\"}", "{\"id\":3}"], "split at {split}");
        }
    }

    #[test]
    fn line_reader_refuses_an_oversized_line_and_carries_on() {
        let big = format!("{{\"jsonrpc\":\"2.0\",\"id\":7,\"result\":\"{}\"}}\n{{\"id\":8}}\n", "x".repeat(5000));
        for chunk in [big.len(), 100] {
            let sink = Recorder::default();
            let mut lines = LineReader::new(1000);
            for piece in big.as_bytes().chunks(chunk) {
                lines.feed(piece, &sink).unwrap();
            }
            assert_eq!(*sink.failed.lock().unwrap(), [(7, "mcp_result_too_large".to_owned())]);
            assert_eq!(*sink.messages.lock().unwrap(), ["{\"id\":8}"], "the next message still arrives");
        }
    }

    #[test]
    fn line_reader_reports_garbage() {
        let sink = Recorder::default();
        let err = LineReader::new(1024).feed(b"Starting server on port 3000...\n", &sink).unwrap_err();
        assert_eq!(err.code(), "mcp_protocol_error");
        assert!(err.to_string().contains("Starting server"), "{err}");
    }

    #[test]
    fn tail_keeps_only_the_last_bytes() {
        let mut tail = TailBuffer::default();
        tail.push(&vec![b'a'; STDERR_TAIL_BYTES]);
        tail.push(b"end");
        let text = tail.text();
        assert_eq!(text.len(), STDERR_TAIL_BYTES);
        assert!(text.ends_with("aend"));
        tail.push(&vec![b'z'; STDERR_TAIL_BYTES * 2]);
        assert!(tail.text().bytes().all(|b| b == b'z'));
    }
}
