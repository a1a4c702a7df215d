//! What the stdio transport does differently on Windows: the server's process tree is held in a Job
//! Object instead of a process group, it is stopped without signals, and its stdin is written only
//! by the writer task.
//!
//! | Unix (mod.rs)                                     | Windows (here)                                             |
//! |---------------------------------------------------|------------------------------------------------------------|
//! | own process group (`process_group(0)`)            | a Job Object with `JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE`; the child is created suspended, assigned, then resumed, so nothing it starts escapes the job |
//! | terminal's Ctrl+C does not reach the server       | `CREATE_NO_WINDOW`: no console, so no console Ctrl events  |
//! | close: stdin EOF, 300 ms, SIGTERM group, 1 s, SIGKILL group, 500 ms | stdin EOF, 1.3 s (the time Unix gives before SIGKILL; there is no SIGTERM to send), `TerminateJobObject`, 500 ms |
//! | group alive: `kill(-pgrp, 0)` then a /proc scan    | the job's count of active processes                        |
//! | drop: SIGKILL to the group                         | `TerminateJobObject` (and closing the job's last handle kills it too) |
//! | writes: `write(2)` on the non-blocking fd from the sending thread, else the writer task | always the writer task, through tokio's `ChildStdin`: an anonymous pipe has no non-blocking mode, and tokio already does the blocking `WriteFile` on its blocking pool; bursts queued meanwhile still go out in one write |
//! | stdout may be read by the host (Node) from a duplicated fd | always read by the engine: a pipe handle can't be handed to Node as a file descriptor (its C runtime's descriptor table is not ours) |
//! | exit: code or signal                              | exit code; NTSTATUS failures (0xC0000005, …) in hex        |
//!
//! Reads too go through tokio's blocking pool (tokio has no async anonymous pipes on Windows): each
//! connected server keeps two of its threads (stdout, stderr) waiting, so the engine's pool bound
//! (`MAX_BLOCKING_THREADS` in napi/runtime.rs) caps how many stdio servers one process can hold.
//!
//! Handle inheritance: std creates the three pipes non-inheritable and makes only the child's ends
//! inheritable, under a lock, for the duration of `CreateProcessW`; every handle created here (the job,
//! the thread snapshot) is non-inheritable. std does not restrict inheritance to a handle list, so a
//! handle that other code in the host process marked inheritable itself would still be inherited.

use super::Outbox;
use crate::limits::{STDIO_EXIT_GRACE_MS, STDIO_KILL_WAIT_MS, STDIO_TERM_GRACE_MS};
use std::io;
use std::os::windows::io::{AsRawHandle, FromRawHandle, OwnedHandle};
use std::process::ExitStatus;
use std::sync::Arc;
use std::time::Duration;
use tokio::process::{Child, Command};
use tokio::sync::watch;
use windows_sys::Win32::Foundation::{FALSE, INVALID_HANDLE_VALUE};
use windows_sys::Win32::System::Diagnostics::ToolHelp::{
    CreateToolhelp32Snapshot, Thread32First, Thread32Next, TH32CS_SNAPTHREAD, THREADENTRY32,
};
use windows_sys::Win32::System::JobObjects::{
    AssignProcessToJobObject, CreateJobObjectW, JobObjectBasicAccountingInformation, JobObjectExtendedLimitInformation,
    QueryInformationJobObject, SetInformationJobObject, TerminateJobObject, JOBOBJECT_BASIC_ACCOUNTING_INFORMATION,
    JOBOBJECT_EXTENDED_LIMIT_INFORMATION, JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE,
};
use windows_sys::Win32::System::Threading::{
    OpenThread, ResumeThread, CREATE_NO_WINDOW, CREATE_SUSPENDED, THREAD_SUSPEND_RESUME,
};

/// The exit code of every process in a terminated job: what `taskkill /F` gives.
const TERMINATED_EXIT_CODE: u32 = 1;
/// How often close() looks whether the server and everything it started are gone.
const EXIT_POLL_MS: u64 = 10;
/// Exit codes from here up are NTSTATUS failures (0xC0000005 access violation, 0xC0000409 stack
/// buffer overrun, …): shown in hex, as Windows documents them.
const NTSTATUS_ERROR_FLOOR: u32 = 0xC000_0000;

/// Created suspended, so it can be put in its job before it runs (and can start anything); no console.
pub(super) fn prepare(command: &mut Command) {
    command.creation_flags(CREATE_SUSPENDED | CREATE_NO_WINDOW);
}

/// The server and every process it starts: the Windows stand-in for its process group.
pub(super) struct ProcessTree {
    job: OwnedHandle,
}

impl ProcessTree {
    /// Put the just-spawned (suspended) `child` in a new job and let it run. On error the caller
    /// kills the child: a server outside a job could leave processes behind.
    pub(super) fn contain(child: &Child) -> io::Result<Self> {
        let (Some(process), Some(pid)) = (child.raw_handle(), child.id()) else {
            return Err(io::Error::other("the server process is already gone"));
        };
        // SAFETY: plain Win32 calls; every pointer passed points to a live local of the size given,
        // and the job handle is owned (closed) by the OwnedHandle from here on.
        unsafe {
            let job = CreateJobObjectW(std::ptr::null(), std::ptr::null());
            if job.is_null() {
                return Err(io::Error::last_os_error());
            }
            let tree = ProcessTree { job: OwnedHandle::from_raw_handle(job) };
            let mut limits: JOBOBJECT_EXTENDED_LIMIT_INFORMATION = std::mem::zeroed();
            // The job dies with its last handle: if the engine's process goes, so does every server.
            limits.BasicLimitInformation.LimitFlags = JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE;
            let set = SetInformationJobObject(
                job,
                JobObjectExtendedLimitInformation,
                (&raw const limits).cast(),
                size_of::<JOBOBJECT_EXTENDED_LIMIT_INFORMATION>() as u32,
            );
            if set == FALSE || AssignProcessToJobObject(job, process) == FALSE {
                return Err(io::Error::last_os_error());
            }
            resume_threads(pid)?;
            Ok(tree)
        }
    }

    /// End every process in the tree at once (the SIGKILL of Windows).
    pub(super) fn kill(&self) {
        // SAFETY: the job handle is open for as long as `self` lives.
        unsafe { TerminateJobObject(self.job.as_raw_handle(), TERMINATED_EXIT_CODE) };
    }

    /// Whether some process of the tree still runs. An unanswered query counts as alive, so close()
    /// escalates rather than leaves something behind.
    fn alive(&self) -> bool {
        self.active_processes().is_none_or(|count| count > 0)
    }

    /// How many processes of the tree run now; `None` when the job can't be queried.
    fn active_processes(&self) -> Option<u32> {
        // SAFETY: the out-pointer is a live local of the size given.
        unsafe {
            let mut accounting: JOBOBJECT_BASIC_ACCOUNTING_INFORMATION = std::mem::zeroed();
            let queried = QueryInformationJobObject(
                self.job.as_raw_handle(),
                JobObjectBasicAccountingInformation,
                (&raw mut accounting).cast(),
                size_of::<JOBOBJECT_BASIC_ACCOUNTING_INFORMATION>() as u32,
                std::ptr::null_mut(),
            );
            (queried != FALSE).then_some(accounting.ActiveProcesses)
        }
    }
}

/// Resume the threads of a process created suspended (it has one, its first; std closed our handle to it).
fn resume_threads(pid: u32) -> io::Result<()> {
    // SAFETY: plain Win32 calls on handles opened and closed here; the entry is a live local with its
    // size set as Thread32First requires.
    unsafe {
        let snapshot = CreateToolhelp32Snapshot(TH32CS_SNAPTHREAD, 0);
        if snapshot == INVALID_HANDLE_VALUE {
            return Err(io::Error::last_os_error());
        }
        let snapshot = OwnedHandle::from_raw_handle(snapshot);
        let mut entry: THREADENTRY32 = std::mem::zeroed();
        entry.dwSize = size_of::<THREADENTRY32>() as u32;
        let mut resumed = 0;
        let mut more = Thread32First(snapshot.as_raw_handle(), &mut entry) != FALSE;
        while more {
            if entry.th32OwnerProcessID == pid {
                let thread = OpenThread(THREAD_SUSPEND_RESUME, FALSE, entry.th32ThreadID);
                if !thread.is_null() {
                    let thread = OwnedHandle::from_raw_handle(thread);
                    if ResumeThread(thread.as_raw_handle()) != u32::MAX {
                        resumed += 1;
                    }
                }
            }
            more = Thread32Next(snapshot.as_raw_handle(), &mut entry) != FALSE;
        }
        if resumed == 0 {
            return Err(io::Error::other("could not resume the server's first thread"));
        }
        Ok(())
    }
}

/// Ask the server to exit (stdin EOF), then end its whole tree. Windows has no SIGTERM to send a
/// console-less process, so stdin EOF gets the time Unix gives EOF and SIGTERM together, and the
/// bound on close() is the same. Returns within STDIO_EXIT_GRACE_MS + STDIO_TERM_GRACE_MS +
/// STDIO_KILL_WAIT_MS, even if the exit is never seen.
pub(super) async fn stop_process(
    outbox: &Outbox,
    tree: Arc<ProcessTree>,
    mut exit: watch::Receiver<Option<ExitStatus>>,
) {
    outbox.close();
    if gone_within(&tree, &mut exit, STDIO_EXIT_GRACE_MS + STDIO_TERM_GRACE_MS).await {
        return;
    }
    tree.kill();
    gone_within(&tree, &mut exit, STDIO_KILL_WAIT_MS).await;
}

/// True once the server has exited and nothing else in its job runs, polled until `within_ms`.
async fn gone_within(tree: &ProcessTree, exit: &mut watch::Receiver<Option<ExitStatus>>, within_ms: u64) -> bool {
    let deadline = tokio::time::Instant::now() + Duration::from_millis(within_ms);
    loop {
        if exit.borrow().is_some() && !tree.alive() {
            return true;
        }
        if tokio::time::Instant::now() >= deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(EXIT_POLL_MS)).await;
    }
}

pub(super) fn describe_exit(status: ExitStatus) -> String {
    match status.code().map(|code| code as u32) {
        Some(code) if code >= NTSTATUS_ERROR_FLOOR => format!("exited with status {code:#010X}"),
        Some(code) => format!("exited with code {code}"),
        None => "exited".to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::super::{StdioSpec, StdioTransport};
    use crate::error::McpError;
    use crate::limits::{STDIO_CLOSE_MAX_MS, STDIO_EXIT_GRACE_MS, STDIO_TERM_GRACE_MS};
    use crate::protocol::jsonrpc::RequestId;
    use crate::transport::{MessageSink, Transport, TransportOptions};
    use std::sync::Arc;
    use std::time::{Duration, Instant};

    struct Ignore;

    impl MessageSink for Ignore {
        fn on_message(&self, _: &[u8]) -> bool {
            true
        }
        fn on_request_failed(&self, _: RequestId, _: McpError) {}
        fn is_pending(&self, _: RequestId) -> bool {
            false
        }
        fn on_closed(&self, _: McpError) {}
    }

    #[tokio::test]
    async fn close_ends_a_server_that_ignores_stdin_with_the_children_it_started() {
        let system_root = std::env::var("SYSTEMROOT").unwrap_or_else(|_| r"C:\Windows".to_owned());
        // Two pings that never read stdin: one started in the background (the server's own child), one in front.
        let spec = StdioSpec {
            program: format!(r"{system_root}\System32\cmd.exe").into(),
            args: vec!["/c".to_owned(), "start /b ping -n 60 127.0.0.1 >nul & ping -n 60 127.0.0.1 >nul".to_owned()],
            env: vec![("SYSTEMROOT".to_owned(), system_root)],
            cwd: None,
            reader_host: None,
            stderr: super::StderrMode::Pipe,
            on_stderr: None,
        };
        let options =
            TransportOptions { max_message_bytes: 1024, idle_timeout: Duration::from_secs(5), secrets: Arc::default() };
        let transport = StdioTransport::spawn(&spec, Arc::new(Ignore), options).unwrap();
        let tree = transport.process_group.clone();
        let mut running = None;
        for _ in 0..200 {
            running = tree.active_processes();
            if running >= Some(3) {
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        assert!(running >= Some(3), "cmd and both pings run in the job ({running:?})");
        let started = Instant::now();
        transport.close().await;
        let took = started.elapsed();
        assert_eq!(tree.active_processes(), Some(0), "a process of the tree outlived close()");
        assert!(
            took >= Duration::from_millis(STDIO_EXIT_GRACE_MS + STDIO_TERM_GRACE_MS),
            "stdin's end got its grace: {took:?}"
        );
        assert!(took <= Duration::from_millis(STDIO_CLOSE_MAX_MS), "close took {took:?}");
    }
}
