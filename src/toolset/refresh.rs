//! A supervisor's catalogue: listing and vetting it against the drift baseline, refreshing it on
//! `list_changed` (coalesced: at most one refresh running and one pending, however many notifications
//! arrive), re-listing after a `-32020`, and revalidating a catalogue whose `ttlMs` lapsed.

use super::routes::Vetting;
use super::supervisor::{State, Supervisor};
use crate::config::ServerKind;
use crate::diagnostics::Diagnostic;
use crate::error::{McpError, Result};

use crate::limits::{
    LISTEN_STREAM_HEALTHY_MS, LISTEN_STREAM_RETRY_MS, MAX_LISTEN_STREAM_FAILURES, MAX_REVALIDATION_BACKOFF_MS,
    MIN_REFRESH_INTERVAL_MS, MIN_REVALIDATION_INTERVAL_MS, REVALIDATION_JITTER_PERCENT,
};
use crate::protocol::mcp::Tool;
use crate::session::catalog::{self, Listing};
use crate::session::connection::{Connection, RequestOptions};
use crate::store::{self, StoredServer};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;

/// What a supervisor keeps about its catalogue's refreshes.
pub(crate) struct RefreshState {
    /// A `list_changed` arrived that no refresh has started on yet.
    pending: AtomicBool,
    /// A refresh task is running (it takes the pending flag before each listing).
    running: AtomicBool,
    /// A `list_changed` was reported to the host (client mode) since the refresh task last took the
    /// pending flag: a flood of announcements is reported once per refresh cycle, not once each.
    announce_pending: AtomicBool,
    /// How long the catalogue in use stays fresh and whether the server tells of changes itself:
    /// what the revalidation task ([`Supervisor::revalidate_when_stale`]) watches.
    freshness: Arc<watch::Sender<Freshness>>,
    /// The revalidation task was started (once per server, on its first connection).
    revalidating: AtomicBool,
    /// Listings put in use so far (connections and refreshes), so a re-list asked for by several
    /// refused calls at once runs once.
    listings: AtomicU64,
    /// Held by the re-list after a `-32020`, one at a time; the last one's outcome.
    relisting: tokio::sync::Mutex<Option<Result<()>>>,
    /// Re-listings after a `-32020` completed so far (see [`Supervisor::relist`]).
    relist_attempts: AtomicU64,
}

impl Default for RefreshState {
    fn default() -> Self {
        RefreshState {
            pending: AtomicBool::new(false),
            running: AtomicBool::new(false),
            announce_pending: AtomicBool::new(false),
            freshness: Arc::new(watch::channel(Freshness::default()).0),
            revalidating: AtomicBool::new(false),
            listings: AtomicU64::new(0),
            relisting: tokio::sync::Mutex::new(None),
            relist_attempts: AtomicU64::new(0),
        }
    }
}

/// The caching state of a server's live catalogue (2026-07-28 `ttlMs` on `tools/list`).
#[derive(Debug, Clone, Copy, Default)]
struct Freshness {
    /// When the catalogue in use stops being fresh; `None`: the server gave no positive TTL.
    fresh_until: Option<tokio::time::Instant>,
    /// The server announces changes itself (`listChanged`, and in 2026-07-28 a live subscription):
    /// then its notification is the signal, and the TTL no reason to re-list.
    notifies: bool,
    /// Re-listings that failed in a row (reset by one that succeeds).
    failures: u32,
    /// When the catalogue in use was listed.
    listed: Option<tokio::time::Instant>,
}

impl Supervisor {
    /// How many listings were put in use so far.
    pub fn listings(&self) -> u64 {
        self.refresh.listings.load(Ordering::SeqCst)
    }

    /// Re-listings after a `-32020` completed so far: a call sent while one runs sees the count
    /// before it, and so shares that one's outcome.
    pub fn relist_attempts(&self) -> u64 {
        self.refresh.relist_attempts.load(Ordering::SeqCst)
    }

    /// The server announced that its tools changed: reported to a single-server client's owner (once per
    /// refresh cycle), then re-listed.
    pub(super) fn announced(self: &Arc<Self>) {
        if self.shared.is_client() && !self.refresh.announce_pending.swap(true, Ordering::SeqCst) {
            self.shared.events.tools_list_announced(&self.entry.name);
        }
        self.list_changed();
    }

    /// A new connection is installed: note whether it announces its changes, and in the modern era listen
    /// for them on a subscription.
    pub(super) fn watch_for_changes(&self, connection: &Arc<Connection>) {
        let notifies = connection.session.tools_list_changed;
        self.refresh.freshness.send_modify(|f| f.notifies = notifies);
        if connection.is_modern() && notifies {
            let (connection, cancel, freshness) =
                (connection.clone(), self.cancel.clone(), self.refresh.freshness.clone());
            self.tasks.spawn(async move {
                // Given up (not offered, or failing): the TTL is the only signal left.
                if listen_for_tool_changes(connection, cancel).await == Listen::GivenUp {
                    freshness.send_modify(|f| f.notifies = false);
                }
            });
        }
    }

    /// `notifications/tools/list_changed`: mark a refresh pending and start the refresh task unless
    /// one runs (it takes the pending mark before its next listing). A flood costs one flag store each.
    pub(super) fn list_changed(self: &Arc<Self>) {
        let state = &self.refresh;
        state.pending.store(true, Ordering::SeqCst);
        if state.running.swap(true, Ordering::SeqCst) || self.cancel.is_cancelled() {
            return;
        }
        let supervisor = self.clone();
        self.tasks.spawn(async move {
            let state = &supervisor.refresh;
            // Clears the running flag if this task ends while it owns it (cancelled, panicked).
            let mut running = RunningFlag { flag: &state.running, owned: true };
            loop {
                // Cleared before the take: an announcement after it is reported again, and the listing
                // this take starts comes after it.
                while {
                    state.announce_pending.store(false, Ordering::SeqCst);
                    state.pending.swap(false, Ordering::SeqCst)
                } {
                    tokio::select! {
                        biased;
                        _ = supervisor.cancel.cancelled() => return,
                        // A server that announces a change after every listing is re-listed at most this
                        // often, not back to back.
                        _ = async {
                            let _reported_by_refresh = supervisor.refresh_catalogue().await;
                            tokio::time::sleep(Duration::from_millis(MIN_REFRESH_INTERVAL_MS)).await;
                        } => {}
                    }
                }
                running.release();
                // A notification between the last take and the release started no task: run it here,
                // unless another task took the flag meanwhile.
                if !state.pending.load(Ordering::SeqCst) || state.running.swap(true, Ordering::SeqCst) {
                    return;
                }
                running.owned = true;
            }
        });
    }

    /// Re-list after a `-32020` on a call sent when `seen` listings had been put in use: unless a listing
    /// came since (another refused call's, a `list_changed`'s), in which case that one is current
    /// enough. Fails if the re-listing does.
    /// `attempted`: the server's re-list attempts when the call was sent. A re-listing attempted since
    /// (for another refused call) answers this one too, failed or not: a server that refuses many calls
    /// and stalls its listing costs each of them one listing's wait, not one per call queued before it.
    pub(super) async fn relist(&self, seen: u64, attempted: u64) -> Result<()> {
        let mut last = self.refresh.relisting.lock().await;
        if self.listings() != seen {
            return Ok(());
        }
        if self.relist_attempts() != attempted {
            return last.clone().unwrap_or(Ok(()));
        }
        let outcome = self.refresh_catalogue().await;
        *last = Some(outcome.clone());
        self.refresh.relist_attempts.fetch_add(1, Ordering::SeqCst);
        outcome
    }

    /// The server expired its HTTP session and a new one (`generation`) replaced it: a restarted server
    /// may publish other tools, so they are listed and vetted again, once per session however many calls
    /// wait for it (each then checks its own tool: `calls::AdmittedRoute`). `vetted`: the newest
    /// generation of this connection's session already vetted (generations count per connection).
    pub(super) async fn revet_after_renewal(&self, vetted: &tokio::sync::Mutex<u64>, generation: u64) -> Result<()> {
        let mut vetted = vetted.lock().await;
        if *vetted < generation {
            // A new session knows nothing of the old one's: the log level is asked again, as on connect
            // (before the listing), and the subscriptions are kept again once it is vetted.
            if let (Some(level), Some(connection)) = (self.shared.server_log_level, self.connection()) {
                self.ask_log_level(&connection, level, &crate::session::connection::AbortHandle::default()).await;
            }
            self.refresh_catalogue().await?;
            *vetted = generation;
            self.renewals.send_replace(generation);
        }
        Ok(())
    }

    /// Re-list, vet against the baseline, update the map in place. Fails (after reporting) if the
    /// listing or the vetting does, or the server is not live.
    async fn refresh_catalogue(&self) -> Result<()> {
        let shared = &self.shared;
        let _ = shared.projected.subscribe().wait_for(|done| *done).await;
        // A first connection or a reconciliation under way lists by itself; wait for it, then look.
        let settled =
            self.state.subscribe().wait_for(|s| !matches!(s, State::Connecting | State::Stale)).await.map(|s| *s);
        if !matches!(settled, Ok(State::Live)) {
            return Err(self.unavailable());
        }
        let _one_at_a_time = self.cycle.lock().await;
        let Some(connection) = self.connection() else { return Err(self.unavailable()) };
        let opts = RequestOptions { timeout: shared.timeout, abort: None };
        let vetted = match self.list_tools(&connection, &opts).await {
            Ok(listing) => self.vet(&listing).await.map(|vetted| (listing, vetted)),
            Err(e) => Err(McpError::Protocol(format!("re-listing tools failed: {e}"))),
        };
        if self.cancel.is_cancelled() {
            return Err(McpError::Closed);
        }
        match vetted {
            Ok((listing, (vetting, diagnostics))) => {
                self.catalogue_listed(&listing);
                shared.apply(&self.identity_view(), listing, &vetting, diagnostics);
                Ok(())
            }
            Err(e) => {
                // A TTL'd catalogue of a server that does not announce changes: this was a revalidation.
                let revalidating = {
                    let freshness = self.refresh.freshness.borrow();
                    freshness.fresh_until.is_some() && !freshness.notifies
                };
                self.refresh.freshness.send_modify(|f| f.failures = f.failures.saturating_add(1));
                if revalidating {
                    // The spec lets a client serve a stale result when refetching fails: the tools stay.
                    let name = &self.entry.name;
                    shared.report(Diagnostic::CatalogueStale {
                        server: name.clone(),
                        message: self.secrets.redact(&format!(
                            "revalidating the tools of server {name:?} after their ttlMs failed; the last listing stays in use: {e}"
                        )),
                        error_code: e.code(),
                    });
                } else if self.current_state() == State::Live {
                    // A loss in the meantime was reported as one, and is being recovered.
                    self.report_degraded(&e, None);
                }
                Err(e)
            }
        }
    }

    /// Persist this listing and check it against the drift baseline (recorded now if there is none).
    pub(super) async fn vet(&self, listing: &Listing) -> Result<(Vetting, Vec<Diagnostic>)> {
        let tools = &listing.tools[..];
        let Some(store) = &self.shared.store else { return Ok((Vetting::default(), Vec::new())) };
        let entry = &self.entry;
        let id = self.store_id();
        let row = StoredServer {
            id: id.clone(),
            name: entry.name.clone(),
            kind: entry.kind_name().to_owned(),
            // Origin and path, with any key-like path segment redacted: a store row is durable.
            url: entry.url().map(|url| self.secrets.redact(&url)),
            tools: tools.to_vec(),
            tool_fingerprints: None,
            listed_at: (listing.cache.listed_at_ms > 0).then_some(listing.cache.listed_at_ms),
            ttl_ms: listing.cache.ttl_ms,
            cache_scope: listing.cache.scope,
        };
        store.save(row).await?;
        let baseline = store.claim_baseline(&id, store::fingerprints(tools)).await?;
        Ok(self.vet_against(Some(&baseline), tools))
    }

    /// What the baseline says of `tools`, and the diagnostics that tell it.
    pub(super) fn vet_against(
        &self,
        baseline: Option<&store::Fingerprints>,
        tools: &[Tool],
    ) -> (Vetting, Vec<Diagnostic>) {
        let Some(baseline) = baseline else { return (Vetting::default(), Vec::new()) };
        let drift = store::compare(baseline, tools);
        let server = &self.entry.name;
        let mut diagnostics = Vec::new();
        for tool in &drift.changed {
            diagnostics.push(Diagnostic::ToolQuarantined {
                server: server.clone(),
                tool: tool.clone(),
                message: format!("tool {tool:?} of server {server:?} changed since it was trusted; it is quarantined"),
            });
        }
        for tool in &drift.added {
            diagnostics.push(Diagnostic::ToolWithheld {
                server: server.clone(),
                tool: tool.clone(),
                message: format!("tool {tool:?} of server {server:?} is not in its trusted baseline; it is withheld"),
            });
        }
        for tool in &drift.removed {
            diagnostics.push(Diagnostic::ToolRemoved {
                server: server.clone(),
                tool: tool.clone(),
                message: format!("tool {tool:?} of server {server:?} is no longer published"),
            });
        }
        let vetting =
            Vetting { quarantined: drift.changed.into_iter().collect(), withheld: drift.added.into_iter().collect() };
        (vetting, diagnostics)
    }

    /// List the server's tools, with the catalogue's cache scope settled for this server (see
    /// [`catalog::CacheHints::scope_for`]).
    pub(super) async fn list_tools(&self, connection: &Connection, opts: &RequestOptions<'_>) -> Result<Listing> {
        let modern = connection.is_modern();
        let mut listing = catalog::list_tools(connection, opts, modern, &self.identity).await?;
        listing.cache.scope = listing.cache.scope_for(modern, self.is_authorized());
        Ok(listing)
    }

    /// The server is reached with credentials, so what it lists may depend on who asks: an `auth`
    /// callback or OAuth for HTTP, any configured header (an API key is one) including one read from
    /// the environment (`headersFromEnv`, `bearerTokenEnv`: each worker or tenant may hold its own),
    /// or a stdio env var that looks like a secret.
    fn is_authorized(&self) -> bool {
        let entry = &self.entry;
        match &entry.kind {
            ServerKind::StreamableHttp { headers, oauth, .. } | ServerKind::Sse { headers, oauth, .. } => {
                self.shared.hooks.auth.is_some()
                    || oauth.is_some()
                    || !headers.is_empty()
                    || !entry.headers_from_env.is_empty()
            }
            ServerKind::Stdio { env, .. } => env.keys().any(|name| crate::guard::redact::looks_secret(name)),
        }
    }

    /// A listing is in use now: it is fresh until its TTL lapses, and no re-listing has failed since.
    pub(super) fn catalogue_listed(&self, listing: &Listing) {
        let remaining = listing.cache.fresh_until_ms().map(|until| until.saturating_sub(store::now_ms()).max(0));
        let fresh_until = remaining.map(|ms| tokio::time::Instant::now() + Duration::from_millis(ms as u64));
        self.refresh.listings.fetch_add(1, Ordering::SeqCst);
        self.refresh.freshness.send_modify(|f| {
            f.fresh_until = fresh_until;
            f.failures = 0;
            f.listed = Some(tokio::time::Instant::now());
        });
    }

    /// Start the server's revalidation task, once for its life.
    pub(super) fn start_revalidation(self: &Arc<Self>) {
        if !self.refresh.revalidating.swap(true, Ordering::SeqCst) {
            self.tasks.spawn(self.clone().revalidate_when_stale());
        }
    }

    /// A catalogue with a TTL from a server that does not announce changes is re-listed when the TTL
    /// lapses, through the same coalesced refresh (and drift vetting) as a `list_changed`. Not a poll:
    /// at most once per `MIN_REVALIDATION_INTERVAL_MS`, jittered, backing off after failures; and
    /// nothing at all for a catalogue without a TTL, or while the server announces its changes.
    async fn revalidate_when_stale(self: Arc<Self>) {
        let (mut freshness, mut state) = (self.refresh.freshness.subscribe(), self.state.subscribe());
        let mut last_attempt = None;
        loop {
            let current = *freshness.borrow_and_update();
            let live = *state.borrow_and_update() == State::Live;
            let due = match current.fresh_until {
                Some(fresh_until) if live && !current.notifies => {
                    let last = last_attempt.max(current.listed);
                    Some(revalidation_due(fresh_until, current.failures, last, tokio::time::Instant::now()))
                }
                _ => None,
            };
            tokio::select! {
                _ = self.cancel.cancelled() => return,
                changed = freshness.changed() => if changed.is_err() { return },
                changed = state.changed() => if changed.is_err() { return },
                _ = tokio::time::sleep_until(due.unwrap_or_else(tokio::time::Instant::now)), if due.is_some() => {
                    last_attempt = Some(tokio::time::Instant::now());
                    self.list_changed();
                }
            }
        }
    }
}

/// The modern era's replacement for the GET stream: `subscriptions/listen` for tool-list changes, opened
/// again when the server ends it, until the connection ends; given up after
/// `MAX_LISTEN_STREAM_FAILURES` short-lived attempts in a row, or at once if the server doesn't offer it.
async fn listen_for_tool_changes(connection: Arc<Connection>, cancel: tokio_util::sync::CancellationToken) -> Listen {
    let mut failures = 0u32;
    while failures < MAX_LISTEN_STREAM_FAILURES {
        let opened = std::time::Instant::now();
        let ended = tokio::select! {
            _ = cancel.cancelled() => return Listen::Ended,
            ended = connection.listen_for_tool_changes(None) => ended,
        };
        match ended {
            Err(McpError::Closed) => return Listen::Ended,
            Err(McpError::Rpc { .. }) => return Listen::GivenUp,
            _ if opened.elapsed() >= Duration::from_millis(LISTEN_STREAM_HEALTHY_MS) => failures = 0,
            _ => failures += 1,
        }
        tokio::select! {
            _ = cancel.cancelled() => return Listen::Ended,
            _ = tokio::time::sleep(Duration::from_millis(LISTEN_STREAM_RETRY_MS * u64::from(failures.max(1)))) => {}
        }
    }
    Listen::GivenUp
}

/// How a subscription ended: with its connection or the toolset, or given up while the connection lives.
#[derive(Debug, PartialEq, Eq)]
enum Listen {
    Ended,
    GivenUp,
}

/// When to revalidate a TTL'd catalogue: when it lapses, but never sooner than
/// `MIN_REVALIDATION_INTERVAL_MS` after the last attempt; after failures, from the last attempt with
/// a wait doubling up to `MAX_REVALIDATION_BACKOFF_MS`. Plus up to `REVALIDATION_JITTER_PERCENT` of
/// the wait, so the clients of one server spread out.
/// `last_attempt`: the later of the last listing and the last revalidation asked for.
fn revalidation_due(
    fresh_until: tokio::time::Instant,
    failures: u32,
    last_attempt: Option<tokio::time::Instant>,
    now: tokio::time::Instant,
) -> tokio::time::Instant {
    let from_last = match failures {
        0 => MIN_REVALIDATION_INTERVAL_MS,
        n => MIN_REVALIDATION_INTERVAL_MS.saturating_mul(1u64 << n.min(20)).min(MAX_REVALIDATION_BACKOFF_MS),
    };
    let earliest = match last_attempt {
        Some(last) => last + Duration::from_millis(from_last),
        None if failures == 0 => now,
        None => now + Duration::from_millis(from_last),
    };
    let base = if failures == 0 { fresh_until.max(earliest) } else { earliest };
    let wait = base.saturating_duration_since(now);
    base + Duration::from_millis(super::recovery::jitter(wait.as_millis() as u64, REVALIDATION_JITTER_PERCENT))
}

/// The refresh task's claim on `running`: released explicitly, or on drop while still owned.
struct RunningFlag<'a> {
    flag: &'a AtomicBool,
    owned: bool,
}

impl RunningFlag<'_> {
    fn release(&mut self) {
        self.owned = false;
        self.flag.store(false, Ordering::SeqCst);
    }
}

impl Drop for RunningFlag<'_> {
    fn drop(&mut self) {
        if self.owned {
            self.flag.store(false, Ordering::SeqCst);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::time::Instant;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    /// `due` lies in `[at, at + jitter share of the wait from now]`.
    fn assert_due(due: Instant, now: Instant, at: Duration) {
        let wait = at.as_millis() as u64;
        let latest = at + ms(wait * REVALIDATION_JITTER_PERCENT / 100);
        assert!(due >= now + at && due <= now + latest, "{:?} not within [{at:?}, {latest:?}]", due - now);
    }

    #[test]
    fn revalidation_waits_for_the_ttl_and_the_floor_and_backs_off_after_failures() {
        let now = Instant::now();
        let floor = MIN_REVALIDATION_INTERVAL_MS;
        // Fresh for a minute, listed just now: at the TTL.
        assert_due(revalidation_due(now + ms(60_000), 0, Some(now), now), now, ms(60_000));
        // A TTL shorter than the floor: at the floor after the listing, not a busy loop.
        assert_due(revalidation_due(now + ms(10), 0, Some(now), now), now, ms(floor));
        // Lapsed long ago, last attempt long ago: now.
        assert_due(revalidation_due(now, 0, None, now), now, ms(0));
        // Failures: the wait from the last attempt doubles, up to the cap.
        assert_due(revalidation_due(now, 1, Some(now), now), now, ms(2 * floor));
        assert_due(revalidation_due(now, 3, Some(now), now), now, ms(8 * floor));
        assert_due(revalidation_due(now, 40, Some(now), now), now, ms(MAX_REVALIDATION_BACKOFF_MS));
    }
}
