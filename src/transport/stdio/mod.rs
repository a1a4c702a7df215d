//! stdio transport: the server is a child process speaking newline-delimited JSON-RPC.
//!
//! The child runs in its own process group with an allowlisted environment. Writes are coalesced:
//! every message queued while the pipe is busy goes out in the next single `write`. stderr is drained
//! continuously so a chatty server never blocks, and its last bytes are kept for diagnostics.
//!
//! What a hostile or broken server can make us hold is bounded: the stdin queue
//! (`MAX_STDIO_PENDING_WRITE_BYTES`), one line (`max_message_bytes`, then skipped up to
//! `MAX_SKIPPED_LINE_BYTES` before the connection is given up), the stderr tail. Every descriptor we
//! create is close-on-exec, so no server inherits another's pipes. Every task runs under the
//! transport's tracker and token, and close() ends within `STDIO_CLOSE_MAX_MS` with none left running.

use super::oversized::{self, TailWindow, OVERSIZED_HEAD_BYTES, OVERSIZED_TAIL_BYTES};
use super::{describe_garbage, MessageSink, Outbound, Transport, TransportOptions};
use crate::error::{McpError, Result};
use crate::guard::redact::Secrets;
use crate::limits::{
    MAX_COALESCED_WRITE_BYTES, MAX_QUOTED_BYTES, MAX_SKIPPED_LINE_BYTES, MAX_STDIO_PENDING_WRITE_BYTES,
    STDIO_CLOSE_MAX_MS, STDIO_EXIT_REPORT_WAIT_MS, STDIO_TASK_JOIN_MS,
};
#[cfg(unix)]
use crate::limits::{STDIO_EXIT_GRACE_MS, STDIO_KILL_WAIT_MS, STDIO_TERM_GRACE_MS};
use futures_util::future::BoxFuture;
use parking_lot::Mutex;
use std::future::Future;
#[cfg(unix)]
pub use std::os::fd::RawFd;
#[cfg(unix)]
use std::os::fd::{AsFd, AsRawFd, IntoRawFd};
use std::path::PathBuf;
use std::process::{ExitStatus, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::process::{ChildStdin, ChildStdout, Command};
use tokio::sync::{watch, Notify};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

/// Where stderr goes, its tail, and its lines delivered while the server runs.
mod stderr;
pub use stderr::{StderrEvent, StderrListener, StderrMode, TailBuffer};

/// The process tree, stop sequence and exit wording on Windows (a Job Object for the process group).
#[cfg(windows)]
mod windows;
#[cfg(windows)]
use windows::{describe_exit, stop_process};
/// Never handed to a host on Windows (the engine reads stdout there); the type keeps [`ReaderHost`] one trait.
#[cfg(windows)]
pub type RawFd = i32;

/// How to start one stdio server. `env` is the complete environment the child gets.
#[derive(Clone)]
pub struct StdioSpec {
    pub program: PathBuf,
    pub args: Vec<String>,
    pub env: Vec<(String, String)>,
    pub cwd: Option<PathBuf>,
    /// Read stdout on the host's event loop rather than in an engine task (see [`ExternalReader`]).
    pub reader_host: Option<Arc<dyn ReaderHost>>,
    pub stderr: StderrMode,
    /// Where its lines go with [`StderrMode::Diagnostics`].
    pub on_stderr: Option<StderrListener>,
}

impl std::fmt::Debug for StdioSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StdioSpec")
            .field("program", &self.program)
            .field("args", &self.args)
            .field("cwd", &self.cwd)
            .field("stderr", &self.stderr)
            .finish()
    }
}

const READ_BUFFER_BYTES: usize = 16 * 1024;
/// How long one scan of /proc for live members of a server's process group may take before close()
/// assumes the group is still alive and escalates.
#[cfg(unix)]
const GROUP_SCAN_MS: u64 = 200;
/// How often a stopping server's exit and process group are looked at, in ms.
#[cfg(unix)]
const EXIT_POLL_MS: u64 = 10;

/// Every task of one transport runs under its tracker and stops at its token: close() cancels the
/// token and joins the tracker, so no task outlives it.
#[derive(Clone, Default)]
struct Tasks {
    tracker: TaskTracker,
    cancel: CancellationToken,
}

impl Tasks {
    /// Run `task` until it finishes or the transport is cancelled.
    fn spawn(&self, task: impl Future<Output = ()> + Send + 'static) {
        let cancel = self.cancel.clone();
        self.tracker.spawn(async move {
            tokio::select! {
                biased;
                _ = cancel.cancelled() => {}
                _ = task => {}
            }
        });
    }

    /// Let the tasks finish what they are doing for `grace`, then cancel those still running and
    /// wait (boundedly) for them to stop.
    async fn join(&self, grace: Duration) {
        self.tracker.close();
        if tokio::time::timeout(grace, self.tracker.wait()).await.is_err() {
            self.cancel.cancel();
            let _ = tokio::time::timeout(Duration::from_millis(STDIO_TASK_JOIN_MS), self.tracker.wait()).await;
        }
    }
}

pub struct StdioTransport {
    outbox: Arc<Outbox>,
    #[cfg(unix)]
    process_group: i32,
    #[cfg(windows)]
    process_group: Arc<windows::ProcessTree>,
    stderr_tail: Arc<Mutex<TailBuffer>>,
    secrets: Arc<Secrets>,
    exit: watch::Receiver<Option<ExitStatus>>,
    closing: Arc<AtomicBool>,
    /// Set once the first close() has finished, for later calls to wait on.
    closed: watch::Sender<bool>,
    tasks: Tasks,
}

impl StdioTransport {
    pub fn spawn(spec: &StdioSpec, sink: Arc<dyn MessageSink>, options: TransportOptions) -> Result<Arc<Self>> {
        let mut command = Command::new(&spec.program);
        command
            .args(&spec.args)
            .env_clear()
            .envs(spec.env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(match spec.stderr {
                StderrMode::Pipe | StderrMode::Diagnostics => Stdio::piped(),
                StderrMode::Inherit => host_stderr(),
                StderrMode::Ignore => Stdio::null(),
            });
        #[cfg(unix)]
        command.process_group(0);
        #[cfg(windows)]
        windows::prepare(&mut command);
        if let Some(cwd) = &spec.cwd {
            command.current_dir(cwd);
        }
        // std creates the pipes close-on-exec (pipe2 with O_CLOEXEC); the child's ends become its 0/1/2.
        let mut child = command
            .spawn()
            .map_err(|e| McpError::Transport(format!("failed to start {}: {e}", spec.program.display())))?;
        #[cfg(unix)]
        let process_group = child.id().map(|pid| pid as i32).unwrap_or(0);
        #[cfg(windows)]
        let process_group = match windows::ProcessTree::contain(&child) {
            Ok(tree) => Arc::new(tree),
            Err(e) => {
                let _ = child.start_kill();
                return Err(McpError::Transport(format!(
                    "cannot contain {} in a job object: {e}",
                    spec.program.display()
                )));
            }
        };
        let stdin = child.stdin.take().expect("stdin is piped");
        let stdout = child.stdout.take().expect("stdout is piped");
        let stderr = child.stderr.take();

        #[cfg(unix)]
        let outbox = Arc::new(Outbox::new(stdin.as_raw_fd()));
        #[cfg(windows)]
        let outbox = Arc::new(Outbox::new());
        let stderr_tail = Arc::new(Mutex::new(TailBuffer::default()));
        let closing = Arc::new(AtomicBool::new(false));
        let (exit_tx, exit_rx) = watch::channel(None);
        let tasks = Tasks::default();
        let secrets = options.secrets.clone();
        let lines = || LineReader::new(options.max_message_bytes, secrets.clone());
        let (stderr_tail_for_drain, secrets_for_drain) = (stderr_tail.clone(), secrets.clone());

        tasks.spawn(write_loop(stdin, outbox.clone()));
        // Not read (inherited or discarded): there are no last words to wait for.
        let (stderr_closed_tx, stderr_closed) = watch::channel(stderr.is_none());
        if let Some(stderr) = stderr {
            let lines = match (spec.stderr, &spec.on_stderr) {
                (StderrMode::Diagnostics, Some(listener)) => {
                    Some(stderr::LineForwarder::new(listener.clone(), secrets.clone()))
                }
                _ => None,
            };
            tasks.spawn(async move {
                stderr::drain(stderr, stderr_tail_for_drain, secrets_for_drain, lines).await;
                stderr_closed_tx.send_replace(true);
            });
        }
        let last_words = LastWords { tail: stderr_tail.clone(), closed: stderr_closed, secrets: secrets.clone() };
        tasks.spawn(async move {
            let status = child.wait().await.ok();
            let _ = exit_tx.send(status);
        });
        match &spec.reader_host {
            #[cfg(unix)]
            Some(host) => {
                // The host reads a duplicate, made close-on-exec (F_DUPFD_CLOEXEC) like every descriptor
                // we hold: a server spawned later must not inherit another server's stdout. Ours closes
                // here, so end of file reaches the host alone.
                let duplicate = stdout.as_fd().try_clone_to_owned().map_err(|e| {
                    McpError::Transport(format!(
                        "cannot hand the stdout of {} to the host: {e}",
                        spec.program.display()
                    ))
                });
                drop(stdout);
                let duplicate = match duplicate {
                    Ok(fd) => fd,
                    Err(e) => {
                        signal_group(process_group, libc::SIGKILL);
                        tasks.cancel.cancel();
                        return Err(e);
                    }
                };
                let reader = Arc::new(ExternalReader {
                    lines: Mutex::new(lines()),
                    sink,
                    exit: exit_rx.clone(),
                    last_words,
                    closing: closing.clone(),
                    ended: AtomicBool::new(false),
                    tasks: tasks.clone(),
                });
                host.attach(reader, duplicate.into_raw_fd());
            }
            _ => {
                tasks.spawn(read_loop(stdout, sink, lines(), exit_rx.clone(), last_words, closing.clone()));
            }
        }

        let closed = watch::channel(false).0;
        Ok(Arc::new(StdioTransport {
            outbox,
            process_group,
            stderr_tail,
            secrets,
            exit: exit_rx,
            closing,
            closed,
            tasks,
        }))
    }
}

impl Transport for StdioTransport {
    fn is_stdio(&self) -> bool {
        true
    }

    fn input_unread(&self) -> Option<bool> {
        self.outbox.unread()
    }

    fn send(&self, message: Outbound) -> Result<()> {
        self.outbox.push(std::iter::once(message.json))
    }

    fn send_all(&self, messages: Vec<Outbound>) -> Result<()> {
        self.outbox.push(messages.into_iter().map(|m| m.json))
    }

    /// Ends within [`STDIO_CLOSE_MAX_MS`] whatever the server does; a second call waits for the first
    /// as long (no longer).
    fn close(&self) -> BoxFuture<'static, ()> {
        let first = !self.closing.swap(true, Ordering::SeqCst);
        let outbox = self.outbox.clone();
        #[cfg(unix)]
        let group = self.process_group;
        #[cfg(windows)]
        let group = self.process_group.clone();
        let exit = self.exit.clone();
        let tasks = self.tasks.clone();
        let closed = self.closed.clone();
        Box::pin(async move {
            if first {
                stop_process(&outbox, group, exit).await;
                // The pipes end with the process: give the readers a moment for its last words (stderr),
                // then cancel what still runs (a descendant that left the group may hold the pipes open).
                tasks.join(Duration::from_millis(STDIO_TASK_JOIN_MS)).await;
                closed.send_replace(true);
            } else {
                let mut done = closed.subscribe();
                let _ = tokio::time::timeout(Duration::from_millis(STDIO_CLOSE_MAX_MS), done.wait_for(|d| *d)).await;
            }
        })
    }

    fn stderr_tail(&self) -> Option<String> {
        let mut tail = self.stderr_tail.lock();
        (!tail.is_empty()).then(|| tail.text(&self.secrets))
    }
}

impl Drop for StdioTransport {
    fn drop(&mut self) {
        // A toolset dropped without close() still must not leave processes or tasks behind. A close()
        // under way (it owns clones of what it needs) finishes the job itself, with its graces.
        if self.closing.load(Ordering::SeqCst) {
            return;
        }
        #[cfg(unix)]
        if self.exit.borrow().is_none() {
            signal_group(self.process_group, libc::SIGKILL);
        }
        #[cfg(windows)]
        self.process_group.kill();
        self.tasks.cancel.cancel();
    }
}

/// The host's own stderr for a child, as the child's fd 2 and nothing else. Handed over as a duplicate:
/// the host's fd 2 may be close-on-exec (Node marks its stdio so), which plain inheritance would lose.
fn host_stderr() -> Stdio {
    #[cfg(unix)]
    if let Ok(fd) = std::io::stderr().as_fd().try_clone_to_owned() {
        return Stdio::from(fd);
    }
    Stdio::inherit()
}

/// Ask the server to exit (stdin EOF), then make it (SIGTERM, then SIGKILL to its whole group), each
/// step with its grace. Returns within STDIO_EXIT_GRACE_MS + STDIO_TERM_GRACE_MS + STDIO_KILL_WAIT_MS
/// (plus one bounded /proc scan), even if the exit is never seen.
#[cfg(unix)]
async fn stop_process(outbox: &Outbox, group: i32, mut exit: watch::Receiver<Option<ExitStatus>>) {
    // Ending stdin is the polite request to exit; most servers take it.
    outbox.close();
    if wait_for_exit(&mut exit, STDIO_EXIT_GRACE_MS).await && !group_alive(group).await {
        return;
    }
    // The whole group: a server's own children must not outlive it.
    signal_group(group, libc::SIGTERM);
    if group_gone_within(group, &exit, STDIO_TERM_GRACE_MS).await {
        return;
    }
    signal_group(group, libc::SIGKILL);
    // Until the whole group is gone, not just the server: a killed grandchild on a loaded machine can
    // still be running for a moment. Bounded: a process stuck in uninterruptible sleep (or an exit we
    // never get to see) must not hold close() forever; tokio reaps an orphan later.
    group_gone_within(group, &exit, STDIO_KILL_WAIT_MS).await;
}

/// Whether, within `within_ms`, the server's exit was seen and no member of its group is left alive.
#[cfg(unix)]
async fn group_gone_within(group: i32, exit: &watch::Receiver<Option<ExitStatus>>, within_ms: u64) -> bool {
    let deadline = tokio::time::Instant::now() + Duration::from_millis(within_ms);
    while tokio::time::Instant::now() < deadline {
        if exit.borrow().is_some() && !group_alive(group).await {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(EXIT_POLL_MS)).await;
    }
    false
}

#[cfg(unix)]
async fn wait_for_exit(exit: &mut watch::Receiver<Option<ExitStatus>>, within_ms: u64) -> bool {
    let wait = exit.wait_for(|s| s.is_some());
    matches!(tokio::time::timeout(Duration::from_millis(within_ms), wait).await, Ok(Ok(_)))
}

#[cfg(unix)]
fn signal_group(group: i32, signal: i32) {
    if group > 0 {
        // SAFETY: kill(2) with a negative pid signals a process group; no memory is touched.
        unsafe { libc::kill(-group, signal) };
    }
}

#[cfg(unix)]
async fn group_alive(group: i32) -> bool {
    // Signal 0 checks for existence (zombies count); then /proc tells live members from zombies. The
    // scan reads files, so it runs on the blocking pool, not on the engine's one worker.
    if group <= 0 || unsafe { libc::kill(-group, 0) } != 0 {
        return false;
    }
    let scan = tokio::task::spawn_blocking(move || group_has_live_member(group));
    matches!(tokio::time::timeout(Duration::from_millis(GROUP_SCAN_MS), scan).await, Ok(Ok(true)) | Err(_))
}

/// True when some member of the group is not a zombie. Zombies reparented to an init that never
/// reaps them hold no resources and cannot be signalled away.
#[cfg(unix)]
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
    #[cfg(unix)]
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
    fn new(#[cfg(unix)] fd: RawFd) -> Self {
        Outbox {
            state: Mutex::new(OutboxState::default()),
            wake: Notify::new(),
            #[cfg(unix)]
            fd,
        }
    }

    fn push(&self, messages: impl Iterator<Item = String>) -> Result<()> {
        let mut state = self.state.lock();
        if state.closed {
            return Err(McpError::Closed);
        }
        let was_empty = state.pending.is_empty();
        let messages: Vec<String> = messages.collect();
        let incoming: usize = messages.iter().map(|m| m.len() + 1).sum();
        // What waits here is what the pipe would not take: the server is not reading. A burst is
        // always taken when nothing waits, so one large message still goes out.
        if !was_empty && state.pending.len() + incoming > MAX_STDIO_PENDING_WRITE_BYTES {
            return Err(McpError::Transport(format!(
                "MCP server is not reading its input: {} bytes already wait to be written to its stdin (limit {MAX_STDIO_PENDING_WRITE_BYTES})",
                state.pending.len()
            )));
        }
        state.pending.reserve(incoming);
        for message in messages {
            state.pending.extend_from_slice(message.as_bytes());
            state.pending.push(b'\n');
        }
        if !was_empty || state.writer_busy {
            return Ok(()); // the writer task will take it with what is queued
        }
        // Windows: an anonymous pipe can't be written without blocking, so the writer task takes it all.
        #[cfg(unix)]
        {
            // SAFETY: `fd` is open while `closed` is false, and we hold the lock that orders closing.
            let written = unsafe { libc::write(self.fd, state.pending.as_ptr().cast(), state.pending.len()) };
            if written > 0 {
                state.pending.drain(..written as usize);
            }
        }
        if !state.pending.is_empty() {
            drop(state);
            self.wake.notify_one();
        }
        Ok(())
    }

    fn close(&self) {
        self.state.lock().closed = true;
        self.wake.notify_one();
    }

    /// Whether bytes pushed here wait to be read by the server: queued, being written, or in the pipe
    /// (`FIONREAD` on its write end, Linux). `None` once closed, or where the pipe can't be asked.
    fn unread(&self) -> Option<bool> {
        let state = self.state.lock();
        if state.closed {
            return None;
        }
        if !state.pending.is_empty() || state.writer_busy {
            return Some(true);
        }
        #[cfg(target_os = "linux")]
        {
            let mut in_pipe: libc::c_int = 0;
            // SAFETY: `fd` is open while `closed` is false, and we hold the lock that orders closing.
            let asked = unsafe { libc::ioctl(self.fd, libc::FIONREAD, &mut in_pipe) };
            if asked == 0 {
                return Some(in_pipe > 0);
            }
        }
        None
    }

    /// Swap the queued bytes into `spare`. `None` once closed and drained (the writer then drops the fd).
    async fn take(&self, spare: &mut Vec<u8>) -> Option<()> {
        loop {
            {
                let mut state = self.state.lock();
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
/// straight from the caller's buffer, partial ones accumulated. A line over the limit is skipped up to
/// its newline and fails the call it answers (see `oversized`): the moment the limit is passed when its
/// head names the call, else at its newline, from its tail (kept while the middle is dropped) or the
/// calls in flight. A line that goes on for [`MAX_SKIPPED_LINE_BYTES`] more with no newline is fatal.
pub struct LineReader {
    line: Vec<u8>,
    /// When the current line is oversized: how many of its bytes lie past the limit so far.
    skipped: Option<usize>,
    /// The head of the oversized line being skipped, when it named no call; its last bytes go to `tail`.
    unattributed: Option<Vec<u8>>,
    tail: TailWindow,
    max_message_bytes: usize,
    max_skipped_bytes: usize,
    secrets: Arc<Secrets>,
}

impl LineReader {
    /// `secrets` redact what a fatal error quotes from the stream.
    pub fn new(max_message_bytes: usize, secrets: Arc<Secrets>) -> Self {
        Self::with_skip_limit(max_message_bytes, MAX_SKIPPED_LINE_BYTES, secrets)
    }

    /// Like [`LineReader::new`], with the bound on an unterminated oversized line given.
    pub fn with_skip_limit(max_message_bytes: usize, max_skipped_bytes: usize, secrets: Arc<Secrets>) -> Self {
        LineReader {
            line: Vec::new(),
            skipped: None,
            unattributed: None,
            tail: TailWindow::default(),
            max_message_bytes,
            max_skipped_bytes,
            secrets,
        }
    }

    /// Deliver every complete line in `bytes`. An error is fatal for the stream: a line that is not
    /// JSON-RPC, or an oversized line that never ends.
    pub fn feed(&mut self, mut bytes: &[u8], sink: &dyn MessageSink) -> Result<()> {
        while !bytes.is_empty() {
            let (chunk, complete) = match memchr::memchr(b'\n', bytes) {
                Some(end) => (&bytes[..end], true),
                None => (bytes, false),
            };
            bytes = &bytes[chunk.len() + usize::from(complete)..];
            if complete && self.line.is_empty() && self.skipped.is_none() {
                // The common case: a whole message in the buffer, handed over without a copy.
                if chunk.len() <= self.max_message_bytes {
                    deliver(sink, chunk, &self.secrets)?;
                } else {
                    let head = &chunk[..OVERSIZED_HEAD_BYTES.min(chunk.len())];
                    if !oversized::refuse_by_head(sink, head, self.max_message_bytes) {
                        let tail = &chunk[chunk.len().saturating_sub(OVERSIZED_TAIL_BYTES)..];
                        oversized::refuse_at_end(sink, head, tail, self.max_message_bytes);
                    }
                }
                continue;
            }
            match &mut self.skipped {
                Some(skipped) => {
                    *skipped += chunk.len();
                    if self.unattributed.is_some() {
                        self.tail.push(chunk);
                    }
                }
                None => {
                    self.line.extend_from_slice(chunk);
                    // Below a 4 KiB limit, wait for the whole head (or the line's end) before refusing:
                    // the id may come after the limit, and a line read whole would show it.
                    let head_known = self.line.len() >= OVERSIZED_HEAD_BYTES
                        || complete
                        || (self.line.len() > self.max_message_bytes
                            && crate::protocol::jsonrpc::sniff_response_id(&self.line).is_some());
                    if self.line.len() > self.max_message_bytes && head_known {
                        // Fail the call now, not when (or if) the newline comes.
                        let past_limit = self.line.len() - self.max_message_bytes;
                        let head = &self.line[..OVERSIZED_HEAD_BYTES.min(self.line.len())];
                        if !oversized::refuse_by_head(sink, head, self.max_message_bytes) {
                            // Found at its end instead: keep the head and what is read of the tail.
                            self.tail.push(&self.line);
                            self.unattributed = Some(head.to_vec());
                        }
                        self.line.clear();
                        self.skipped = Some(past_limit);
                    }
                }
            }
            if complete {
                let outcome = match self.skipped.take() {
                    Some(_) => {
                        if let Some(head) = self.unattributed.take() {
                            oversized::refuse_at_end(sink, &head, self.tail.bytes(), self.max_message_bytes);
                            self.tail.clear();
                        }
                        Ok(())
                    }
                    None => deliver(sink, &self.line, &self.secrets),
                };
                self.line.clear();
                outcome?;
            } else if self.skipped.is_some_and(|skipped| skipped > self.max_skipped_bytes) {
                return Err(McpError::Transport(format!(
                    "MCP server wrote a line of more than {} bytes with no end (limit {} bytes); its output can no longer be read as messages",
                    self.max_message_bytes + self.max_skipped_bytes,
                    self.max_message_bytes
                )));
            }
        }
        Ok(())
    }
}

async fn read_loop(
    stdout: ChildStdout,
    sink: Arc<dyn MessageSink>,
    mut lines: LineReader,
    exit: watch::Receiver<Option<ExitStatus>>,
    last_words: LastWords,
    closing: Arc<AtomicBool>,
) {
    let mut reader = BufReader::with_capacity(READ_BUFFER_BYTES, stdout);
    let failure = loop {
        let available = match reader.fill_buf().await {
            Ok([]) => break None,
            Ok(bytes) => bytes,
            Err(e) => break Some(McpError::Transport(format!("MCP server stdout failed: {e}"))),
        };
        let consumed = available.len();
        let fed = lines.feed(available, &*sink);
        reader.consume(consumed);
        if let Err(fatal) = fed {
            break Some(fatal);
        }
    };
    report_end(&*sink, failure, exit, last_words, &closing).await;
}

/// The server's stdout ended (or broke): say how, once the exit status had a moment to arrive.
/// The exit's description names the server's own last words (its last error line on stderr), which
/// usually say why: `Error: Cannot find module '/srv/missing.js'` rather than only `exited with code 1`.
async fn report_end(
    sink: &dyn MessageSink,
    failure: Option<McpError>,
    mut exit: watch::Receiver<Option<ExitStatus>>,
    mut last_words: LastWords,
    closing: &AtomicBool,
) {
    let reason = if closing.load(Ordering::SeqCst) {
        McpError::Closed
    } else {
        let _ = tokio::time::timeout(Duration::from_millis(STDIO_EXIT_REPORT_WAIT_MS), exit.wait_for(|s| s.is_some()))
            .await;
        let how = match *exit.borrow() {
            Some(status) => describe_exit(status),
            None => "closed its stdout".to_owned(),
        };
        match failure {
            Some(failure) => failure,
            None => {
                // stderr ends with the process (unless a descendant holds it): its last bytes may still be in flight.
                let _ = tokio::time::timeout(
                    Duration::from_millis(STDIO_EXIT_REPORT_WAIT_MS),
                    last_words.closed.wait_for(|c| *c),
                )
                .await;
                let tail = last_words.tail.lock().text(&last_words.secrets);
                match last_error_line(&tail) {
                    Some(line) => McpError::Transport(format!("MCP server process {how}: {line}")),
                    None => McpError::Transport(format!("MCP server process {how}")),
                }
            }
        }
    };
    sink.on_closed(reason);
}

/// What a stdio server wrote to stderr, for the description of its exit.
#[derive(Clone)]
struct LastWords {
    tail: Arc<Mutex<TailBuffer>>,
    /// Becomes true when the server's stderr reached its end.
    closed: watch::Receiver<bool>,
    secrets: Arc<Secrets>,
}

/// The line of an (already redacted) stderr tail that best says why a process ended: the last one that
/// mentions an error (runtimes print a version banner or a stack after it), else the last non-empty
/// one; stack frames (`at …`, `File "…"`) are skipped. At most [`MAX_QUOTED_BYTES`] bytes of it.
fn last_error_line(tail: &str) -> Option<String> {
    let lines: Vec<&str> = tail
        .lines()
        .map(str::trim)
        .filter(|l| {
            !l.is_empty() && !l.starts_with("at ") && !l.starts_with("File \"") && l.chars().any(char::is_alphanumeric)
        })
        .collect();
    let line = lines.iter().rev().find(|l| l.to_ascii_lowercase().contains("error")).or(lines.last())?;
    let mut end = line.len().min(MAX_QUOTED_BYTES);
    while !line.is_char_boundary(end) {
        end -= 1;
    }
    let printable: String = line[..end].chars().map(|c| if c.is_control() { ' ' } else { c }).collect();
    Some(if end < line.len() { format!("{printable}…") } else { printable })
}

/// A server's stdout read by the host's event loop instead of an engine task. In Node, reading on the
/// JS thread itself saves a thread wake-up per response: the response is parsed here, synchronously,
/// when the host feeds the bytes, and the outcome is ready before the host's callback returns.
pub struct ExternalReader {
    lines: Mutex<LineReader>,
    sink: Arc<dyn MessageSink>,
    exit: watch::Receiver<Option<ExitStatus>>,
    last_words: LastWords,
    closing: Arc<AtomicBool>,
    ended: AtomicBool,
    tasks: Tasks,
}

impl ExternalReader {
    pub fn feed(&self, bytes: &[u8]) {
        if self.ended.load(Ordering::SeqCst) {
            return;
        }
        let fed = self.lines.lock().feed(bytes, &*self.sink);
        if let Err(fatal) = fed {
            self.end(Some(fatal));
        }
    }

    /// The host saw end of file (or an error) on the stream, or what it fed was fatal.
    pub fn end(&self, failure: Option<McpError>) {
        if self.ended.swap(true, Ordering::SeqCst) {
            return;
        }
        if self.closing.load(Ordering::SeqCst) {
            self.sink.on_closed(McpError::Closed);
            return;
        }
        let (sink, exit, closing) = (self.sink.clone(), self.exit.clone(), self.closing.clone());
        // Under the transport's tracker: close() waits for (or cancels) it like its own readers.
        let last_words = self.last_words.clone();
        self.tasks.spawn(async move { report_end(&*sink, failure, exit, last_words, &closing).await });
    }
}

/// Where a stdio transport offers its stdout to be read by the host. Given the reader and a file
/// descriptor the host now owns (a close-on-exec duplicate: closing it is the host's job).
pub trait ReaderHost: Send + Sync {
    fn attach(&self, reader: Arc<ExternalReader>, fd: RawFd);
}

/// Hand one line to the sink. A line that is not JSON-RPC ends the session: on a pipe there is no
/// telling which request it was meant to answer, or what the server will write next.
fn deliver(sink: &dyn MessageSink, line: &[u8], secrets: &Secrets) -> Result<()> {
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    if line.iter().all(u8::is_ascii_whitespace) || sink.on_message(line) {
        Ok(())
    } else {
        Err(McpError::Protocol(describe_garbage(line, secrets)))
    }
}

#[cfg(unix)]
fn describe_exit(status: ExitStatus) -> String {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (Some(code), _) => format!("exited with code {code}"),
        (None, Some(signal)) => format!("was killed by signal {signal}"),
        _ => "exited".to_owned(),
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
        /// The calls in flight it reports.
        awaited: Vec<RequestId>,
    }

    impl MessageSink for Recorder {
        fn on_message(&self, frame: &[u8]) -> bool {
            let text = String::from_utf8_lossy(frame).into_owned();
            let ok = serde_json::from_str::<serde_json::Value>(&text).is_ok();
            self.messages.lock().push(text);
            ok
        }
        fn on_request_failed(&self, id: RequestId, error: McpError) {
            self.failed.lock().push((id, error.code().to_owned()));
        }
        fn is_pending(&self, _: RequestId) -> bool {
            true
        }
        fn awaited(&self) -> Vec<RequestId> {
            self.awaited.clone()
        }
        fn on_closed(&self, _: McpError) {}
    }

    fn failed_ids(sink: &Recorder) -> Vec<RequestId> {
        let mut failed: Vec<RequestId> = sink
            .failed
            .lock()
            .iter()
            .map(|(id, code)| {
                assert_eq!(code, "mcp_result_too_large");
                *id
            })
            .collect();
        failed.sort();
        failed
    }

    #[test]
    fn an_oversized_line_with_its_id_last_fails_that_call_at_its_newline() {
        // As the TypeScript SDK writes it; calls 3 and 9 in flight, the line answers 9.
        let line = format!("{{\"result\":{{\"content\":[{{\"type\":\"text\",\"text\":\"{}\"}}]}},\"jsonrpc\":\"2.0\",\"id\":9}}\n{{\"id\":8}}\n", "x".repeat(50_000));
        for chunk in [line.len(), 1000, 7] {
            let sink = Recorder { awaited: vec![3, 9], ..Recorder::default() };
            let mut lines = LineReader::new(1000, Arc::default());
            for piece in line.as_bytes().chunks(chunk) {
                lines.feed(piece, &sink).unwrap();
            }
            assert_eq!(failed_ids(&sink), [9], "chunks of {chunk}");
            assert_eq!(*sink.messages.lock(), ["{\"id\":8}"], "the next message still arrives");
            assert!(lines.tail.bytes().is_empty() && lines.unattributed.is_none());
        }
    }

    #[test]
    fn an_oversized_line_that_names_no_call_fails_the_calls_in_flight_and_a_notification_none() {
        let nameless = format!("{{\"result\":\"{}\",\"jsonrpc\":\"2.0\",\"id\":\"x\"}}\n", "x".repeat(5000));
        let notification = format!(
            "{{\"method\":\"notifications/message\",\"params\":{{\"data\":\"{}\"}},\"jsonrpc\":\"2.0\"}}\n",
            "x".repeat(5000)
        );
        for (line, awaited, failed) in [
            (&nameless, vec![4], vec![4]),
            (&nameless, vec![4, 5, 6], vec![4, 5, 6]),
            (&nameless, vec![], vec![]),
            (&notification, vec![4], vec![]),
        ] {
            for chunk in [line.len(), 100] {
                let sink = Recorder { awaited: awaited.clone(), ..Recorder::default() };
                let mut lines = LineReader::new(1000, Arc::default());
                for piece in line.as_bytes().chunks(chunk) {
                    lines.feed(piece, &sink).unwrap();
                }
                assert_eq!(failed_ids(&sink), failed, "in flight {awaited:?}, chunks of {chunk}");
            }
        }
    }

    #[test]
    fn line_reader_splits_anywhere_and_skips_blank_lines() {
        let stream = b"{\"id\":1}\r\n\n{\"id\":2,\"x\":\"a b\"}\n{\"id\":3}\n";
        for split in 0..stream.len() {
            let sink = Recorder::default();
            let mut lines = LineReader::new(1024, Arc::default());
            lines.feed(&stream[..split], &sink).unwrap();
            lines.feed(&stream[split..], &sink).unwrap();
            let got = sink.messages.lock().clone();
            assert_eq!(got, ["{\"id\":1}", "{\"id\":2,\"x\":\"a b\"}", "{\"id\":3}"], "split at {split}");
        }
    }

    #[test]
    fn line_reader_refuses_an_oversized_line_and_carries_on() {
        let big = format!("{{\"jsonrpc\":\"2.0\",\"id\":7,\"result\":\"{}\"}}\n{{\"id\":8}}\n", "x".repeat(5000));
        for chunk in [big.len(), 100] {
            let sink = Recorder::default();
            let mut lines = LineReader::new(1000, Arc::default());
            for piece in big.as_bytes().chunks(chunk) {
                lines.feed(piece, &sink).unwrap();
            }
            assert_eq!(*sink.failed.lock(), [(7, "mcp_result_too_large".to_owned())]);
            assert_eq!(*sink.messages.lock(), ["{\"id\":8}"], "the next message still arrives");
        }
    }

    #[test]
    fn an_oversized_line_fails_its_call_before_its_newline_and_only_once() {
        let sink = Recorder::default();
        let mut lines = LineReader::new(1000, Arc::default());
        lines.feed(br#"{"jsonrpc":"2.0","id":7,"result":""#, &sink).unwrap();
        lines.feed(&[b'x'; 999], &sink).unwrap();
        assert_eq!(*sink.failed.lock(), [(7, "mcp_result_too_large".to_owned())], "failed as the limit passed");
        lines.feed(&[b'x'; 5000], &sink).unwrap();
        lines.feed(b"\"}\n{\"id\":8}\n", &sink).unwrap();
        assert_eq!(sink.failed.lock().len(), 1, "not again at the newline");
        assert_eq!(*sink.messages.lock(), ["{\"id\":8}"]);
    }

    #[test]
    fn a_line_that_never_ends_is_fatal() {
        let sink = Recorder::default();
        let mut lines = LineReader::with_skip_limit(1000, 10_000, Arc::default());
        let head = br#"{"jsonrpc":"2.0","id":3,"result":""#;
        lines.feed(head, &sink).unwrap();
        let mut fed = head.len();
        let error = loop {
            fed += 700;
            match lines.feed(&[b'x'; 700], &sink) {
                Ok(()) => assert!(fed <= 1000 + 10_000, "still reading after {fed} bytes with no newline"),
                Err(e) => break e,
            }
        };
        assert!(fed > 1000 + 10_000, "the bound is the skip limit past the message limit ({fed})");
        assert_eq!(error.code(), "mcp_transport_error");
        assert!(error.to_string().contains("with no end"), "{error}");
        assert_eq!(*sink.failed.lock(), [(3, "mcp_result_too_large".to_owned())]);
    }

    #[test]
    fn garbage_is_quoted_with_secrets_redacted_before_the_cut() {
        let secrets = Arc::new(Secrets::default());
        secrets.add("sk-secret-123");
        // The quote's cut (MAX_QUOTED_BYTES) falls inside the secret.
        let line = format!("{}sk-secret-123 trailing\n", "x".repeat(crate::limits::MAX_QUOTED_BYTES - 11));
        let error = LineReader::new(1024, secrets).feed(line.as_bytes(), &Recorder::default()).unwrap_err().to_string();
        assert!(error.contains("x[redacted]"), "{error}");
        assert!(!error.contains("sk-s") && !error.contains("-123"), "{error}");
    }

    #[cfg(unix)]
    fn spec(script: &str) -> StdioSpec {
        StdioSpec {
            program: "/bin/sh".into(),
            args: vec!["-c".to_owned(), script.to_owned()],
            env: vec![("PATH".to_owned(), std::env::var("PATH").unwrap_or_default())],
            cwd: None,
            reader_host: None,
            stderr: StderrMode::Pipe,
            on_stderr: None,
        }
    }

    #[cfg(unix)]
    fn options() -> TransportOptions {
        TransportOptions { max_message_bytes: 1024, idle_timeout: Duration::from_secs(5), secrets: Arc::default() }
    }

    #[cfg(unix)]
    #[tokio::test]
    async fn a_server_that_never_reads_its_input_makes_sends_fail_instead_of_queueing() {
        let transport =
            StdioTransport::spawn(&spec("exec sleep 30"), Arc::new(Recorder::default()), options()).unwrap();
        let message = "x".repeat(1024 * 1024);
        let mut accepted = 0usize;
        let error = loop {
            match transport.send(Outbound::other(message.clone())) {
                Ok(()) => accepted += 1,
                Err(e) => break e,
            }
            assert!(accepted * message.len() <= 2 * MAX_STDIO_PENDING_WRITE_BYTES, "queued {accepted} MiB");
            tokio::task::yield_now().await;
        };
        assert_eq!(error.code(), "mcp_transport_error");
        assert!(error.to_string().contains("not reading its input"), "{error}");
        let pending = transport.outbox.state.lock().pending.len();
        assert!(pending <= MAX_STDIO_PENDING_WRITE_BYTES, "{pending}");
        transport.close().await;
    }

    #[cfg(unix)]
    #[tokio::test]
    async fn a_close_under_way_survives_the_transport_being_dropped() {
        // The server exits as soon as its stdin ends; the close must see that, not escalate to signals.
        let transport =
            StdioTransport::spawn(&spec("read line; exit 0"), Arc::new(Recorder::default()), options()).unwrap();
        let tasks = transport.tasks.tracker.clone();
        let started = std::time::Instant::now();
        let closing = tokio::spawn(transport.close());
        drop(transport);
        closing.await.unwrap();
        assert!(started.elapsed() < Duration::from_millis(STDIO_EXIT_GRACE_MS), "took {:?}", started.elapsed());
        assert!(tasks.is_empty());
    }

    #[cfg(unix)]
    #[tokio::test]
    async fn close_is_bounded_and_leaves_no_task_when_a_descendant_holds_the_pipes() {
        // A descendant that left the process group keeps stdout and stderr open: the readers never see
        // end of file by themselves.
        let pidfile = std::env::temp_dir().join(format!("mcpferry-escaped-{}", std::process::id()));
        let script = format!("setsid sh -c 'echo $$ > {}; exec sleep 30' & trap '' TERM; sleep 30", pidfile.display());
        let transport = StdioTransport::spawn(&spec(&script), Arc::new(Recorder::default()), options()).unwrap();
        let mut escaped = None;
        for _ in 0..200 {
            escaped = std::fs::read_to_string(&pidfile).ok().and_then(|p| p.trim().parse::<i32>().ok());
            if escaped.is_some() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        let started = std::time::Instant::now();
        transport.close().await;
        let took = started.elapsed();
        if let Some(pid) = escaped {
            unsafe { libc::kill(pid, libc::SIGKILL) };
        }
        let _ = std::fs::remove_file(&pidfile);
        assert!(escaped.is_some(), "the descendant started");
        assert!(took <= Duration::from_millis(STDIO_CLOSE_MAX_MS), "close took {took:?}");
        assert!(transport.tasks.tracker.is_empty(), "{} tasks outlived close()", transport.tasks.tracker.len());
        let again = std::time::Instant::now();
        transport.close().await;
        assert!(again.elapsed() < Duration::from_millis(50), "a second close returns once the first is done");
    }

    #[test]
    fn line_reader_reports_garbage() {
        let sink = Recorder::default();
        let err = LineReader::new(1024, Arc::default()).feed(b"Starting server on port 3000...\n", &sink).unwrap_err();
        assert_eq!(err.code(), "mcp_protocol_error");
        assert!(err.to_string().contains("Starting server"), "{err}");
    }

    #[test]
    fn the_exit_names_the_last_error_line_not_the_banner_after_it() {
        let node = "node:internal/modules/cjs/loader:1228\n  throw err;\n  ^\n\nError: Cannot find module '/tmp/missing.js'\n    at Module._resolveFilename (node:internal)\n{\n  code: 'MODULE_NOT_FOUND'\n}\n\nNode.js v20.20.2\n";
        assert_eq!(last_error_line(node).as_deref(), Some("Error: Cannot find module '/tmp/missing.js'"));
        let python = "Traceback (most recent call last):\n  File \"/srv/s.py\", line 1, in <module>\nModuleNotFoundError: No module named 'mcp'\n";
        assert_eq!(last_error_line(python).as_deref(), Some("ModuleNotFoundError: No module named 'mcp'"));
        assert_eq!(last_error_line("starting\nbye\n").as_deref(), Some("bye"));
        assert_eq!(last_error_line("\n  \n"), None);
        let long = last_error_line(&format!("error: {}", "é".repeat(300))).unwrap();
        assert!(long.len() <= MAX_QUOTED_BYTES + "…".len() && long.ends_with('…'), "{long}");
    }
}
