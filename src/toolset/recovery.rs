//! How a supervisor brings its server back: after a loss (the old connection closed first — a stdio
//! server's process group reaped — so two never run at once), it waits a capped exponential backoff with
//! jitter and reconnects exactly as a first connect does (spawn or session, era, listing, vetting against
//! the drift baseline, publication), and only then lets calls through again.
//!
//! Bounded so a broken server can never make the engine spawn without end: `crash_loop_exits` ends of a
//! stdio server (losses and failed attempts) within `crash_loop_window_ms`, or `max_attempts` failed
//! attempts in a row (any server), make the server `failed`; it then rests `cool_down_ms` (or less, if a call asks for it, but never less than
//! `max_delay_ms` after the last attempt) before one new attempt. A failure no attempt can cure (a
//! containment violation, a host outside `allowedHosts`, authorization) leaves it `failed` for good.
//! A first connection that fails is `failed` the same way: one attempt after the cool-down.

use super::supervisor::{Failure, State, Supervisor};
use crate::config::ReconnectConfig;
use crate::diagnostics::Diagnostic;
use crate::error::McpError;
use crate::limits::RECONNECT_JITTER_PERCENT;
use parking_lot::Mutex;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::Notify;
use tokio::time::Instant;

#[derive(Default)]
pub(crate) struct RecoveryState {
    /// When the server recently ended (losses and failed attempts), oldest first: the crash-loop record.
    ends: Mutex<VecDeque<Instant>>,
    /// When the last attempt started.
    last_attempt: Mutex<Option<Instant>>,
    /// A call to a `failed` server asks for an early attempt.
    nudge: Notify,
    /// A recovery task runs (one per server at a time).
    running: AtomicBool,
    /// The server's last stderr tail (redacted), kept across its restarts for `server-failed`.
    stderr_tail: Mutex<Option<String>>,
}

impl RecoveryState {
    /// Note an end now; whether the ends within the window reach the crash-loop bound.
    fn note_end(&self, config: &ReconnectConfig) -> bool {
        let now = Instant::now();
        let window = Duration::from_millis(config.crash_loop_window_ms);
        let mut ends = self.ends.lock();
        ends.push_back(now);
        while ends.front().is_some_and(|at| now.duration_since(*at) > window)
            || ends.len() as u64 > config.crash_loop_exits
        {
            ends.pop_front();
        }
        ends.len() as u64 >= config.crash_loop_exits
    }
}

/// Clears the running flag however the recovery task ends (finished, cancelled, panicked).
struct Running<'a>(&'a AtomicBool);

impl Drop for Running<'_> {
    fn drop(&mut self) {
        self.0.store(false, Ordering::SeqCst);
    }
}

/// Why the supervisor stopped trying, for `server-failed`.
enum GaveUp {
    CrashLoop,
    Attempts(u64),
    Incurable,
    /// The one attempt after a rest failed too.
    StillFailing,
    /// A guard (`allowedHosts`, a redirect) or authorization refused the attempt.
    Refused,
    /// A failed start, which its `server-degraded` already told of.
    Quietly,
}

impl Supervisor {
    /// The connection was lost (and is closed now): recover, or with `reconnect: false` give up at once.
    pub(super) async fn recover_after_loss(self: Arc<Self>, reason: McpError) {
        let Some(config) = self.shared.reconnect else {
            self.give_up(&reason, GaveUp::Incurable, None);
            return;
        };
        let crash_loop = self.note_end(&config, true);
        self.recover(config, Instant::now(), crash_loop.then_some((reason, GaveUp::CrashLoop))).await;
    }

    /// A first connection (or a rebuild's reconciliation) failed with `error`, already reported as
    /// `server-degraded`: the server is `failed`, and is tried once more after the cool-down unless no
    /// attempt can cure it.
    pub(super) fn after_failed_start(self: &Arc<Self>, error: &McpError) {
        // That start was an attempt: a call's nudge waits `max_delay_ms` from it.
        *self.recovery.last_attempt.lock() = Some(Instant::now());
        self.note_error(error);
        self.set_state(State::Failed);
        let Some(config) = self.shared.reconnect else { return };
        if incurable(error) || self.cancel.is_cancelled() {
            return;
        }
        self.tasks.spawn(self.clone().recover(config, Instant::now(), Some((error.clone(), GaveUp::Quietly))));
    }

    /// Note an end for the crash-loop bound: every end of a stdio server (each costs a spawn); for HTTP
    /// only the loss of a live session (a server that is down costs an attempt each backoff, bounded by
    /// `max_attempts`; one that keeps accepting and dropping sessions is a crash loop too).
    fn note_end(&self, config: &ReconnectConfig, loss: bool) -> bool {
        (loss || !self.entry.is_http()) && self.recovery.note_end(config)
    }

    /// Keep the newest stderr tail there is (an attempt that wrote nothing keeps the one before).
    pub(super) fn keep_stderr_tail(&self, tail: Option<String>) {
        if let Some(tail) = tail.filter(|t| !t.is_empty()) {
            *self.recovery.stderr_tail.lock() = Some(self.secrets.redact(&tail));
        }
    }

    /// Whether the ends on record already reach the crash-loop bound (noting none).
    fn crash_looping(&self, config: &ReconnectConfig) -> bool {
        let window = Duration::from_millis(config.crash_loop_window_ms);
        let ends = self.recovery.ends.lock();
        ends.iter().filter(|at| at.elapsed() <= window).count() as u64 >= config.crash_loop_exits
    }

    /// A call found the server `failed`: an early attempt, if the last one is at least `max_delay_ms` old.
    pub(super) fn nudge(&self) {
        let Some(config) = self.shared.reconnect else { return };
        let last = *self.recovery.last_attempt.lock();
        if last.is_none_or(|at| at.elapsed() >= Duration::from_millis(config.max_delay_ms)) {
            self.recovery.nudge.notify_waiters();
        }
    }

    /// Bring the server back, attempt after attempt; `failed`: start as given up (crash loop, a failed
    /// start), resting first.
    async fn recover(self: Arc<Self>, config: ReconnectConfig, lost_at: Instant, failed: Option<(McpError, GaveUp)>) {
        if self.recovery.running.swap(true, Ordering::SeqCst) {
            return; // the run under way sees the new loss: the server is reconnecting, not live
        }
        let mut start = Some((lost_at, failed));
        while let Some((lost_at, failed)) = start.take() {
            {
                let _running = Running(&self.recovery.running);
                self.clone().recover_run(config, lost_at, failed).await;
            }
            // A loss handled while this run was ending found it running and left the server to it.
            let lost_again = self.current_state() == State::Reconnecting && !self.cancel.is_cancelled();
            if lost_again && !self.recovery.running.swap(true, Ordering::SeqCst) {
                start = Some((Instant::now(), None));
            }
        }
    }

    async fn recover_run(
        self: Arc<Self>,
        config: ReconnectConfig,
        lost_at: Instant,
        mut failed: Option<(McpError, GaveUp)>,
    ) {
        // A run restarted for a loss another task noted may find the crash-loop bound reached already.
        if failed.is_none() && self.crash_looping(&config) {
            let error = self.last_error().unwrap_or_else(|| McpError::Transport("the server keeps exiting".into()));
            failed = Some((error, GaveUp::CrashLoop));
        }
        let mut attempt = 0u64;
        let mut failures_in_row = 0u64;
        loop {
            // The one attempt after a rest: if it fails too, the server rests again.
            let after_rest = failed.is_some();
            let delay = match failed.take() {
                Some((error, why)) => {
                    // Listening before the server is seen failed, so a call's nudge right after is not lost.
                    let nudged = self.recovery.nudge.notified();
                    tokio::pin!(nudged);
                    nudged.as_mut().enable();
                    // A login is tried again only when a call asks: a timer would put a person before a
                    // login page every cool-down.
                    let timed = !matches!(error, McpError::Auth(_) | McpError::Reauthorized(_));
                    self.give_up(&error, why, timed.then_some(config.cool_down_ms));
                    let rested = tokio::select! {
                        _ = self.cancel.cancelled() => false,
                        _ = tokio::time::sleep(Duration::from_millis(config.cool_down_ms)), if timed => true,
                        _ = nudged => true,
                    };
                    if !rested {
                        return;
                    }
                    // The crash-loop record is not cleared: the window ages it, so a rest buys one attempt.
                    failures_in_row = 0;
                    Duration::ZERO
                }
                None => backoff(&config, failures_in_row),
            };
            attempt += 1;
            self.set_state(State::Reconnecting);
            self.report_reconnecting(attempt, delay);
            tokio::select! {
                _ = self.cancel.cancelled() => return,
                _ = tokio::time::sleep(delay) => {}
            }
            *self.recovery.last_attempt.lock() = Some(Instant::now());
            match self.clone().reconnect_once().await {
                Ok(()) => {
                    self.report_reconnected(attempt, lost_at.elapsed());
                    return;
                }
                Err((error, stderr_tail)) => {
                    if self.cancel.is_cancelled() {
                        return;
                    }
                    self.note_error(&error);
                    self.keep_stderr_tail(stderr_tail);
                    failures_in_row += 1;
                    let name = &self.entry.name;
                    tracing::warn!(toolset = self.shared.log_id, server = %name, attempt, code = error.code(), "reconnecting failed");
                    let crash_loop = self.note_end(&config, false);
                    failed = if incurable(&error) {
                        self.give_up(&error, GaveUp::Incurable, None);
                        return;
                    } else if refused(&error) {
                        // A guard or authorization said no: asking again at once would get the same answer.
                        Some((error, GaveUp::Refused))
                    } else if crash_loop {
                        Some((error, GaveUp::CrashLoop))
                    } else if after_rest {
                        Some((error, GaveUp::StillFailing))
                    } else if failures_in_row >= config.max_attempts {
                        Some((error, GaveUp::Attempts(failures_in_row)))
                    } else {
                        None
                    };
                }
            }
        }
    }

    /// One attempt: connect, list, vet and publish as a first connect does; live once published.
    pub(super) async fn reconnect_once(self: Arc<Self>) -> Result<(), Failure> {
        let attached = self.clone().attach().await?;
        self.shared.apply(&self.identity_view(), attached.listing, &attached.vetting, attached.diagnostics);
        let live = self.go_live();
        drop(attached.cycle);
        match live {
            true => Ok(()),
            false if self.cancel.is_cancelled() => Err((McpError::Closed, None)),
            // Lost again between its listing and going live: that loss was reported; try again.
            false => Err((
                self.last_error().unwrap_or_else(|| McpError::Transport("the server was lost again at once".into())),
                None,
            )),
        }
    }

    fn report_reconnecting(&self, attempt: u64, delay: Duration) {
        let name = &self.entry.name;
        let delay_ms = delay.as_millis() as u64;
        self.shared.report(Diagnostic::ServerReconnecting {
            server: name.clone(),
            attempt,
            delay_ms,
            message: format!("reconnecting to MCP server {name:?} in {delay_ms} ms (attempt {attempt})"),
        });
    }

    fn report_reconnected(&self, attempt: u64, elapsed: Duration) {
        let restarts = self.count_restart();
        let name = &self.entry.name;
        let elapsed_ms = elapsed.as_millis() as u64;
        let protocol_version = self.connection().map_or("", |c| c.session.protocol_version);
        tracing::info!(toolset = self.shared.log_id, server = %name, attempt, elapsed_ms, restarts, "reconnected");
        self.shared.report(Diagnostic::ServerReconnected {
            server: name.clone(),
            attempt,
            elapsed_ms,
            protocol_version,
            message: format!("MCP server {name:?} is back after {elapsed_ms} ms (attempt {attempt}); its tools were listed and vetted again"),
        });
    }

    /// The server is `failed`: say why, and when (if ever) it is tried again.
    fn give_up(&self, error: &McpError, why: GaveUp, retry_in_ms: Option<u64>) {
        self.note_error(error);
        self.set_state(State::Failed);
        let name = &self.entry.name;
        let reason = match why {
            GaveUp::CrashLoop => "it keeps exiting (a crash loop)".to_owned(),
            GaveUp::Attempts(n) => format!("{n} attempts in a row failed"),
            GaveUp::StillFailing => "the attempt after its rest failed too".to_owned(),
            GaveUp::Refused => "a guard or authorization refused the attempt".to_owned(),
            GaveUp::Incurable if self.shared.reconnect.is_none() => "reconnect is off".to_owned(),
            GaveUp::Incurable => "no new attempt can cure this".to_owned(),
            GaveUp::Quietly => return, // a failed start: its server-degraded said it
        };
        let next = match (retry_in_ms, matches!(why, GaveUp::Incurable)) {
            (Some(ms), _) => format!("; one new attempt in {ms} ms, or sooner on a call"),
            (None, false) => "; one new attempt on the next call".to_owned(),
            (None, true) => String::new(),
        };
        // Read first: a guard taken inside the literal would be held through report().
        let stderr_tail = self.recovery.stderr_tail.lock().clone();
        self.shared.report(Diagnostic::ServerFailed {
            server: name.clone(),
            message: self
                .secrets
                .redact(&format!("gave up on MCP server {name:?} for now: {reason}{next}; last error: {error}")),
            error_code: error.code(),
            restarts: self.restarts(),
            retry_in_ms,
            stderr_tail,
        });
    }
}

/// The wait before an attempt after `failures` failed ones in a row: doubling from the initial delay
/// to the cap, plus up to `RECONNECT_JITTER_PERCENT` of itself.
fn backoff(config: &ReconnectConfig, failures: u64) -> Duration {
    let base = config.initial_delay_ms.saturating_mul(1u64 << failures.min(32)).min(config.max_delay_ms);
    Duration::from_millis(base + jitter(base, RECONNECT_JITTER_PERCENT))
}

/// A random share (up to `percent`) of `wait_ms`, so the clients of one server spread out.
pub(super) fn jitter(wait_ms: u64, percent: u64) -> u64 {
    match wait_ms.saturating_mul(percent) / 100 {
        0 => 0,
        spread => {
            std::hash::BuildHasher::hash_one(&std::collections::hash_map::RandomState::new(), std::time::Instant::now())
                % spread
        }
    }
}

/// A failure every attempt would meet again, however long it waits: the configuration itself.
fn incurable(error: &McpError) -> bool {
    matches!(error, McpError::ConfigInvalid(_) | McpError::ContainmentViolation(_) | McpError::Closed)
}

/// A refusal by a guard or by authorization (a hostile DNS answer, a captive portal's redirect, an `auth`
/// callback or login that failed): not retried at once, but after a rest, as it may pass later.
fn refused(error: &McpError) -> bool {
    matches!(
        error,
        McpError::HostNotAllowed(_) | McpError::RedirectRefused(_) | McpError::Auth(_) | McpError::Reauthorized(_)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_to_the_cap_with_bounded_jitter() {
        let config = ReconnectConfig { initial_delay_ms: 500, max_delay_ms: 30_000, ..Default::default() };
        for (failures, base) in [(0, 500), (1, 1_000), (2, 2_000), (5, 16_000), (6, 30_000), (60, 30_000)] {
            let wait = backoff(&config, failures).as_millis() as u64;
            assert!(
                wait >= base && wait <= base + base * RECONNECT_JITTER_PERCENT / 100,
                "{failures}: {wait} for {base}"
            );
        }
    }

    #[test]
    fn the_crash_loop_bound_counts_ends_within_the_window() {
        let config = ReconnectConfig { crash_loop_exits: 3, crash_loop_window_ms: 60_000, ..Default::default() };
        let state = RecoveryState::default();
        assert!(!state.note_end(&config));
        assert!(!state.note_end(&config));
        assert!(state.note_end(&config), "the third end within the window trips it");
        assert_eq!(state.ends.lock().len(), 3, "the record stays bounded");
        let short = ReconnectConfig { crash_loop_exits: 2, crash_loop_window_ms: 1, ..Default::default() };
        let spaced = RecoveryState::default();
        assert!(!spaced.note_end(&short));
        std::thread::sleep(Duration::from_millis(5));
        assert!(!spaced.note_end(&short), "an end outside the window no longer counts");
    }
}
