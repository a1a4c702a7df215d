//! The engine's tokio runtime, installed when the addon loads.
//!
//! One worker thread: the engine's work per message is microseconds of parsing, so a second worker
//! only adds cross-thread wake-ups and another malloc arena (resident memory) for nothing. Work that
//! blocks a thread — SQLite (which waits up to its busy timeout on a locked file), `canonicalize`,
//! `which`, DNS resolution — must never run on that worker: it goes to the blocking pool, which is
//! sized so that a handful of stalled SQLite calls cannot starve DNS lookups or a stdio spawn. Its
//! threads exist only while there is blocking work, and exit after idling.

/// The worker threads polling every connection.
const ENGINE_WORKER_THREADS: usize = 1;
/// Stack of each engine thread (worker and blocking pool), in bytes: twice tokio's 2 MiB default, as
/// defence in depth for work that recurses (schema validation is bounded to fit half of 2 MiB in a
/// debug build, `limits::MAX_VALIDATION_NESTED_CHECKS`). Reserved address space; only what is touched
/// is resident.
const ENGINE_THREAD_STACK_BYTES: usize = 4 * 1024 * 1024;
/// Upper bound on concurrent blocking operations. Each SQLite call may hold a thread for up to the
/// store's busy timeout (5 s) while another process writes; with 8 threads (the previous bound), a
/// burst of 8 such calls stalled every DNS lookup and stdio spawn behind them. 64 leaves room for
/// one stalled store call per server of a large toolset plus the lookups, at ~8 MiB of reserved
/// (not resident) stack each.
#[cfg(not(windows))]
const MAX_BLOCKING_THREADS: usize = 64;
/// On Windows each stdio server also holds two blocking threads for its whole life (its stdout and
/// stderr pipes are read with blocking reads: anonymous pipes have no overlapped mode), so the bound
/// is the Unix one plus two per server for up to `MAX_WINDOWS_STDIO_SERVERS` servers: stalled pipe
/// readers must not starve DNS lookups, store calls or spawns.
#[cfg(windows)]
const MAX_BLOCKING_THREADS: usize = 64 + 2 * MAX_WINDOWS_STDIO_SERVERS;
/// Stdio servers one process is sized for on Windows (see `MAX_BLOCKING_THREADS`).
#[cfg(windows)]
const MAX_WINDOWS_STDIO_SERVERS: usize = 512;
/// How long an idle blocking thread lives before it exits, in seconds.
const BLOCKING_THREAD_KEEP_ALIVE_SECS: u64 = 10;

#[napi_derive::module_init]
fn init_runtime() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(ENGINE_WORKER_THREADS)
        .thread_stack_size(ENGINE_THREAD_STACK_BYTES)
        .max_blocking_threads(MAX_BLOCKING_THREADS)
        .thread_keep_alive(std::time::Duration::from_secs(BLOCKING_THREAD_KEEP_ALIVE_SECS))
        .thread_name("mcpferry")
        .enable_all()
        .build()
        .expect("the engine's runtime starts");
    napi::bindgen_prelude::create_custom_tokio_runtime(runtime);
}

/// Give memory freed after a burst of allocation (a catalog parsed on an engine thread) back to the
/// system: glibc keeps per-thread arenas otherwise, and resident memory stays high. A trim walks the whole
/// heap, so it costs more the more a process holds: done after every toolset, a process's thousandth
/// session opened slower than its first (W10's connect CPU was 15% over the same run without). So it runs
/// at once when `big`, and otherwise at most once per `RELEASE_FREED_MEMORY_INTERVAL_MS`: a trim asked for
/// sooner is made when that interval ends (one pending at a time), so a burst of sessions still ends trimmed.
pub(crate) fn release_freed_memory(big: bool) {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
        static LAST: AtomicU64 = AtomicU64::new(0);
        static PENDING: AtomicBool = AtomicBool::new(false);
        fn now_ms() -> u64 {
            use std::time::{SystemTime, UNIX_EPOCH};
            SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64)
        }
        fn trim() {
            LAST.store(now_ms(), Ordering::Relaxed);
            // SAFETY: malloc_trim only returns free pages of glibc's arenas to the system.
            unsafe {
                libc::malloc_trim(0);
            }
        }
        let since = now_ms().saturating_sub(LAST.load(Ordering::Relaxed));
        if big || since >= RELEASE_FREED_MEMORY_INTERVAL_MS {
            return trim();
        }
        if PENDING.swap(true, Ordering::AcqRel) {
            return;
        }
        let wait = std::time::Duration::from_millis(RELEASE_FREED_MEMORY_INTERVAL_MS - since);
        match tokio::runtime::Handle::try_current() {
            Ok(runtime) => {
                runtime.spawn(async move {
                    tokio::time::sleep(wait).await;
                    PENDING.store(false, Ordering::Release);
                    trim();
                });
            }
            Err(_) => {
                PENDING.store(false, Ordering::Release);
                trim();
            }
        }
    }
    #[cfg(not(all(target_os = "linux", target_env = "gnu")))]
    let _ = big;
}

/// The shortest time between two trims after small toolsets, in ms (see `release_freed_memory`).
#[cfg(all(target_os = "linux", target_env = "gnu"))]
const RELEASE_FREED_MEMORY_INTERVAL_MS: u64 = 100;

/// Runs `work` inside the engine's runtime even when called from the JS thread: the engine may
/// spawn (gated calls, timers) from a sync entry point.
pub(crate) fn within_runtime<T>(work: impl FnOnce() -> T) -> T {
    napi::bindgen_prelude::within_runtime_if_available(work)
}
