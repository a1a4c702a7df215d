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
#[derive(Debug, Clone)]
pub struct StdioSpec {
    pub program: PathBuf,
    pub args: Vec<String>,
    pub env: Vec<(String, String)>,
    pub cwd: Option<PathBuf>,
}

/// Bytes of an oversized line kept so the connection can still find which request it answered.
const OVERSIZED_HEAD_BYTES: usize = 4096;
const READ_BUFFER_BYTES: usize = 16 * 1024;
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
        tokio::spawn(read_loop(stdout, sink, max_message_bytes, exit_rx.clone(), closing.clone()));

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
                if !wait_for_exit(&mut exit, STDIO_EXIT_GRACE_MS).await || group_alive(group) {
                    // The whole group: a server's own children must not outlive it.
                    signal_group(group, libc::SIGTERM);
                    let deadline = tokio::time::Instant::now() + Duration::from_millis(STDIO_TERM_GRACE_MS);
                    while (exit.borrow().is_none() || group_alive(group)) && tokio::time::Instant::now() < deadline {
                        tokio::time::sleep(Duration::from_millis(10)).await;
                    }
                    signal_group(group, libc::SIGKILL);
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

fn group_alive(group: i32) -> bool {
    // Signal 0 checks for existence. Exited members that nobody reaps still count, as the kernel does.
    group > 0 && unsafe { libc::kill(-group, 0) } == 0 && group_has_live_member(group)
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

async fn write_loop(mut stdin: ChildStdin, outbox: Arc<Outbox>) {
    let mut batch = Vec::with_capacity(8 * 1024);
    while outbox.take(&mut batch).await.is_some() {
        if stdin.write_all(&batch).await.is_err() {
            // The reader sees the same death as EOF and reports it; nothing more to send.
            outbox.close();
            break;
        }
        batch.clear();
    }
    // Dropping stdin closes the pipe: the server's signal to exit.
}

async fn read_loop(
    stdout: ChildStdout,
    sink: Arc<dyn MessageSink>,
    max_message_bytes: usize,
    mut exit: watch::Receiver<Option<ExitStatus>>,
    closing: Arc<AtomicBool>,
) {
    let mut reader = BufReader::with_capacity(READ_BUFFER_BYTES, stdout);
    let mut line: Vec<u8> = Vec::new();
    let mut oversized = false;
    let failure = loop {
        let available = match reader.fill_buf().await {
            Ok([]) => break None,
            Ok(bytes) => bytes,
            Err(e) => break Some(McpError::Transport(format!("MCP server stdout failed: {e}"))),
        };
        let (chunk, complete) = match memchr::memchr(b'\n', available) {
            Some(end) => (&available[..end], true),
            None => (available, false),
        };
        let consumed = chunk.len() + usize::from(complete);
        if !oversized {
            if line.is_empty() && complete {
                // The common case: a whole message already in the buffer, handed over without a copy.
                let delivered = if chunk.len() <= max_message_bytes {
                    deliver(&*sink, chunk)
                } else {
                    refuse_oversized(&*sink, &chunk[..OVERSIZED_HEAD_BYTES.min(chunk.len())], max_message_bytes);
                    Ok(())
                };
                reader.consume(consumed);
                match delivered {
                    Ok(()) => continue,
                    Err(garbage) => break Some(garbage),
                }
            }
            line.extend_from_slice(chunk);
            if line.len() > max_message_bytes {
                oversized = true;
                line.truncate(OVERSIZED_HEAD_BYTES);
            }
        }
        reader.consume(consumed);
        if complete {
            if oversized {
                refuse_oversized(&*sink, &line, max_message_bytes);
            } else if let Err(garbage) = deliver(&*sink, &line) {
                break Some(garbage);
            }
            line.clear();
            oversized = false;
        }
    };
    let reason = if closing.load(Ordering::SeqCst) {
        McpError::Closed
    } else {
        // Give the exit status a moment to arrive so the error can say how the server ended.
        let _ = tokio::time::timeout(Duration::from_millis(200), exit.wait_for(|s| s.is_some())).await;
        let how = match *exit.borrow() {
            Some(status) => describe_exit(status),
            None => "closed its stdout".to_owned(),
        };
        failure.unwrap_or_else(|| McpError::Transport(format!("MCP server process {how}")))
    };
    sink.on_closed(reason);
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
    let mut chunk = vec![0u8; 4096];
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
