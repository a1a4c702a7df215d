//! One supervisor per server. It owns everything that server's life involves: connecting and vetting,
//! reconciling after a rebuild, refreshing on `list_changed` (coalesced: at most one refresh running
//! and one pending, however many notifications arrive), noticing a lost connection, and closing. Each
//! of its tasks is tracked under its own cancellation token, a child of the toolset's, so `close()`
//! ends them all and can wait for them.

use super::routes::Vetting;
use super::{panic_error, Inner};
use crate::catalog::{self, Listing};
use crate::config::{ServerEntry, ServerKind};
use crate::connection::{AbortHandle, Connection, ConnectionEvents, RequestOptions};
use crate::diagnostics::{Diagnostic, ServerInfo};
use crate::error::{McpError, Result};
use crate::guard::containment;
use crate::guard::hosts::HostGuard;
use crate::guard::redact::Secrets;
use crate::elicitation::Elicitor;
use crate::limits::{
    ELICITATION_TIMEOUT_MS, MAX_REVALIDATION_BACKOFF_MS, MAX_STDERR_LINES_PER_SECOND, MIN_REFRESH_INTERVAL_MS,
    MIN_REVALIDATION_INTERVAL_MS, REVALIDATION_JITTER_PERCENT,
};
use crate::protocol::mcp::Tool;
use crate::store::{self, StoredServer};
use crate::protocol::era::{self, Era, Known};
use crate::transport::http::{self, Credential, HttpSpec};
use crate::transport::stdio::{StderrEvent, StderrListener, StderrMode, StdioSpec};
use crate::transport::{TransportOptions, TransportSpec};
use parking_lot::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock, Weak};
use std::time::Duration;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

/// Whether calls to a server can go ahead, must wait for its (re)connection, or fail.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SlotState {
    Connecting,
    Ready,
    Down,
}

pub(crate) struct Supervisor {
    pub entry: ServerEntry,
    pub label: String,
    /// The entry's identity (kind, command or URL), for names and store ids.
    pub identity: String,
    /// What the server's era (and a modern server's discovery answer) is remembered under: its identity
    /// and everything else configured that reaches it (a stdio entry's env, an HTTP entry's headers), so
    /// entries that differ there are asked apart. Not the `auth` bearer: the discovery answer describes
    /// the server, not a session. Hashed where it is kept (`protocol::era`): values may be secrets.
    era_key: String,
    /// The bearer sent to this server, rotated by `auth` on every call, or by its OAuth authorizer.
    pub credential: Credential,
    /// The OAuth authorizer of an entry with `oauth`, once it first connected.
    pub authorizer: Mutex<Option<Arc<crate::auth::Authorizer>>>,
    /// Values never to appear in anything this server's failures produce; shared with its transport,
    /// which redacts before it truncates.
    pub secrets: Arc<Secrets>,
    pub state: watch::Sender<SlotState>,
    connection: Mutex<Option<Installed>>,
    /// Connecting, reconciling and refreshing this server happen one at a time, each from its listing
    /// to the publication of its table and the server's state.
    cycle: Arc<tokio::sync::Mutex<()>>,
    /// A `list_changed` arrived that no refresh has started on yet.
    refresh_pending: AtomicBool,
    /// A refresh task is running (it takes the pending flag before each listing).
    refresh_running: AtomicBool,
    /// A `list_changed` was reported to the host (client mode) since the refresh task last took the
    /// pending flag: a flood of announcements is reported once per refresh cycle, not once each.
    announce_pending: AtomicBool,
    /// How long the catalogue in use stays fresh and whether the server tells of changes itself:
    /// what the revalidation task ([`Inner::revalidate_when_stale`]) watches.
    freshness: Arc<watch::Sender<Freshness>>,
    /// The revalidation task was started (once per server, on its first connection).
    revalidating: AtomicBool,
    /// Listings put in use so far (connections and refreshes), so a re-list asked for by several
    /// refused calls at once runs once.
    listings: AtomicU64,
    /// Held by the re-list after a `-32020`, one at a time; the last one's outcome.
    relisting: tokio::sync::Mutex<Option<Result<()>>>,
    /// Re-listings after a `-32020` completed so far (see [`Inner::relist`]).
    relist_attempts: AtomicU64,
    /// A stored catalogue a rebuild projected that is public and was fresh: the reconciliation's
    /// connection may use it instead of listing, if it is still fresh then.
    pub reusable: Mutex<Option<(Vec<Tool>, catalog::CacheHints)>>,
    pub cancel: CancellationToken,
    pub tasks: TaskTracker,
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

/// The live connection, with the listener that reports its loss.
struct Installed {
    connection: Arc<Connection>,
    listener: Arc<ServerListener>,
}

/// A server connected, listed, vetted and installed (still `Connecting` to callers), not yet in the map.
/// Holds the server's cycle lock until the owner has published its table and marked it ready.
pub(crate) struct Attached {
    pub listing: Listing,
    pub vetting: Vetting,
    /// What vetting found, reported by the owner in server order.
    pub diagnostics: Vec<Diagnostic>,
    pub cycle: tokio::sync::OwnedMutexGuard<()>,
}

type Failure = (McpError, Option<String>);

impl Supervisor {
    pub fn new(entry: ServerEntry, label: String, proxy: Option<&url::Url>, cancel: CancellationToken) -> Self {
        let secrets = Arc::new(Secrets::default());
        match &entry.kind {
            ServerKind::Stdio { env, args, .. } => secrets.add_stdio_entry(env, args),
            // Raw bytes: a value that isn't ASCII is still a secret.
            ServerKind::StreamableHttp { headers, url, .. } | ServerKind::Sse { headers, url, .. } => {
                headers.values().for_each(|v| secrets.add_header_value(v.as_bytes()));
                secrets.add_url_credentials(url);
            }
        }
        Supervisor {
            identity: entry.identity(),
            era_key: era_key(&entry, proxy),
            entry,
            label,
            credential: Credential::default(),
            authorizer: Mutex::default(),
            secrets,
            state: watch::channel(SlotState::Connecting).0,
            connection: Mutex::new(None),
            cycle: Arc::new(tokio::sync::Mutex::new(())),
            refresh_pending: AtomicBool::new(false),
            refresh_running: AtomicBool::new(false),
            announce_pending: AtomicBool::new(false),
            freshness: Arc::new(watch::channel(Freshness::default()).0),
            revalidating: AtomicBool::new(false),
            listings: AtomicU64::new(0),
            relisting: tokio::sync::Mutex::new(None),
            relist_attempts: AtomicU64::new(0),
            reusable: Mutex::new(None),
            cancel,
            tasks: TaskTracker::new(),
        }
    }

    /// The live connection, if the server is ready.
    pub fn connection(&self) -> Option<Arc<Connection>> {
        self.connection.lock().as_ref().map(|i| i.connection.clone())
    }

    /// How many listings were put in use so far.
    pub fn listings(&self) -> u64 {
        self.listings.load(Ordering::SeqCst)
    }

    /// Re-listings after a `-32020` completed so far: a call sent while one runs sees the count
    /// before it, and so shares that one's outcome.
    pub fn relist_attempts(&self) -> u64 {
        self.relist_attempts.load(Ordering::SeqCst)
    }
}

impl Inner {
    /// Connect, list, vet and install one server, holding its cycle lock, which the result carries on:
    /// the caller publishes the server's tools and only then marks it ready ([`Inner::mark_ready`]), so
    /// no call is admitted against a table older than the vetting.
    ///
    /// Cancelled by `close()`, it does not just stop: the handshake or listing in flight fails with the
    /// cancellation, and the half-open connection is closed properly (a stdio server's process group
    /// is signalled and waited for) before this returns, so no child outlives `close()`.
    pub(super) async fn attach(self: Arc<Self>, index: usize) -> std::result::Result<Attached, Failure> {
        let slot = &self.servers[index];
        let cycle = slot.cycle.clone().lock_owned().await;
        let stop = AbortHandle::default();
        let trip = async {
            slot.cancel.cancelled().await;
            stop.abort();
            std::future::pending::<()>().await
        };
        let work = async {
            let started = std::time::Instant::now();
            self.report_connecting(index);
            let (connection, listener, listing) = self.connect_server(index, &stop).await?;
            self.report_connected(index, &connection, &listing, started.elapsed());
            let vetted = tokio::select! {
                biased;
                _ = slot.cancel.cancelled() => Err(McpError::Closed),
                vetted = self.vet(index, &listing) => vetted,
            };
            match vetted {
                Ok((vetting, diagnostics)) => {
                    self.install(index, connection, listener).await?;
                    self.catalogue_listed(index, &listing);
                    self.start_revalidation(index);
                    Ok(Attached { listing, vetting, diagnostics, cycle })
                }
                Err(e) => {
                    connection.close().await;
                    Err((e, None))
                }
            }
        };
        let outcome = tokio::select! {
            outcome = work => outcome,
            _ = trip => unreachable!("never completes"),
        };
        outcome.map_err(|(error, tail)| if slot.cancel.is_cancelled() { (McpError::Closed, tail) } else { (error, tail) })
    }

    async fn connect_server(
        self: &Arc<Self>,
        index: usize,
        stop: &AbortHandle,
    ) -> std::result::Result<(Arc<Connection>, Arc<ServerListener>, Listing), Failure> {
        let slot = &self.servers[index];
        // Nothing is running yet while the spec is prepared (callbacks, file system): simply dropped.
        let spec = tokio::select! {
            biased;
            _ = slot.cancel.cancelled() => Err(McpError::Closed),
            spec = self.transport_spec(index) => spec,
        }
        .map_err(|e| (e, None))?;
        let handshake = RequestOptions { timeout: self.connect_timeout, abort: Some(stop) };
        let options = TransportOptions { max_message_bytes: self.max_result_bytes, idle_timeout: self.timeout, secrets: slot.secrets.clone() };
        let elicitor = self.hooks.elicit.clone().map(|callback| {
            let (server, modes, timeout) = (slot.entry.name.clone(), self.elicitation_modes, Duration::from_millis(ELICITATION_TIMEOUT_MS));
            let events = Arc::downgrade(&self.events);
            let withdrawn: Arc<dyn Fn(u64) + Send + Sync> = Arc::new(move |ask_id| {
                if let Some(events) = events.upgrade() {
                    events.elicitation_withdrawn(ask_id);
                }
            });
            Arc::new(Elicitor { server, modes, callback, timeout, withdrawn: Some(withdrawn) })
        });
        // What this server was found to be before (this process): a session-based one skips the probe, a
        // modern one's fresh discovery answer replaces it. Held until what this connection finds is
        // remembered: the claim on probing a stale answer again, if this connection took it.
        let (mut known, _reprobe_claim) = era::recall(&slot.era_key);
        if let Known::Discovered(discovered) = &known {
            // A stored catalogue will replace the listing: no first request would check a reused answer.
            let stored = slot.reusable.lock().as_ref().is_some_and(|(_, cache)| cache.is_fresh_at(store::now_ms()));
            // A single server's client shows the server's own name and instructions, which are not reused.
            if stored || self.client_mode.load(std::sync::atomic::Ordering::Relaxed) {
                known = Known::Era(Era::Modern(discovered.version));
            }
        }
        loop {
            let listener = Arc::new(ServerListener { toolset: Arc::downgrade(self), index, lost: OnceLock::new(), installed: AtomicBool::new(false) });
            let opened = Connection::open(&spec, listener.clone(), options.clone(), &handshake, elicitor.clone(), &known).await;
            let connection = match opened {
                Ok(connection) => {
                    let session = &connection.session;
                    tracing::debug!(
                        toolset = self.log_id,
                        server = %slot.entry.name,
                        era = ?session.era,
                        remembered = known != Known::Nothing,
                        from_answer = session.era_evidence,
                        discovery = if session.discovery_reused { "reused" } else { "asked" },
                        "era negotiated"
                    );
                    // A reused answer keeps the time it was fetched: only asking again refreshes it.
                    if !session.discovery_reused {
                        era::remember(&slot.era_key, session.known());
                    }
                    connection
                }
                Err(failure) => {
                    // A server that changed its era fails under the old assumption: probe it afresh next time.
                    // Other failures (authorization, a server down, limits) say nothing of its era, and the
                    // memory is every session's: it is left as it is.
                    if era::contradicts_memory(&failure.0, http::refused_request(&failure.0)) {
                        era::forget(&slot.era_key, &known);
                    }
                    return Err(failure);
                }
            };
            let reusable = slot.reusable.lock().take().filter(|(_, cache)| cache.is_fresh_at(store::now_ms()));
            if let Some((tools, cache)) = reusable {
                // Public and fresh by the server's own ttlMs: anyone may reuse it, now. Vetted as any listing.
                let listing = catalog::from_stored(tools, connection.is_modern(), cache);
                return Ok((Arc::new(connection), listener, listing));
            }
            let opts = RequestOptions { timeout: self.timeout, abort: Some(stop) };
            let error = match self.list_tools(index, &connection, &opts).await {
                Ok(listing) => return Ok((Arc::new(connection), listener, listing)),
                Err(e) => e,
            };
            connection.close().await;
            let contradicted = connection.session.discovery_reused
                && !connection.was_answered()
                && era::contradicts_memory(&error, http::refused_request(&error));
            if !contradicted {
                return Err((error, connection.stderr_tail()));
            }
            // The server is not (or no longer) what was remembered: ask it, once. What it answers replaces
            // the memory; a failure leaves it to the sessions it still serves.
            tracing::debug!(toolset = self.log_id, server = %slot.entry.name, code = error.code(), "the reused discovery answer did not hold; probing");
            known = Known::Nothing;
        }
    }

    /// The server's stderr lines (`stderr: 'diagnostics'`), delivered at once as they come; the transport
    /// has redacted and bounded them.
    fn stderr_listener(&self, index: usize) -> StderrListener {
        // Weak, as every other hold on the host's events: a live server must not keep the toolset's owner alive.
        let events = Arc::downgrade(&self.events);
        let server = self.servers[index].entry.name.clone();
        Arc::new(move |event| {
            let Some(events) = events.upgrade() else { return };
            let diagnostic = match event {
                StderrEvent::Line { text, truncated } => {
                    Diagnostic::ServerStderr { server: server.clone(), message: format!("{server}: {text}"), line: text, truncated }
                }
                StderrEvent::Dropped { lines } => Diagnostic::ServerStderrDropped {
                    server: server.clone(),
                    message: format!("dropped {lines} stderr lines of MCP server {server:?} (over {MAX_STDERR_LINES_PER_SECOND} a second)"),
                    dropped: lines,
                },
            };
            events.diagnostic(&diagnostic);
        })
    }

    /// Progress, delivered at once (not held with the startup diagnostics): a host shows what is pending.
    fn report_connecting(&self, index: usize) {
        let entry = &self.servers[index].entry;
        tracing::debug!(toolset = self.log_id, server = %entry.name, transport = entry.kind_name(), "connecting");
        let message = format!("connecting to MCP server {:?} ({})", entry.name, entry.kind_name());
        self.events.diagnostic(&Diagnostic::ServerConnecting { server: entry.name.clone(), transport: entry.kind_name(), message });
    }

    fn report_connected(&self, index: usize, connection: &Connection, listing: &Listing, elapsed: Duration) {
        let slot = &self.servers[index];
        let session = &connection.session;
        let elapsed_ms = elapsed.as_millis() as u64;
        let name = &slot.entry.name;
        tracing::info!(
            toolset = self.log_id,
            server = %name,
            elapsed_ms,
            protocol = session.protocol_version,
            tools = listing.tools.len(),
            "connected and listed"
        );
        let message = format!("connected to MCP server {name:?} in {elapsed_ms} ms (protocol {})", session.protocol_version);
        self.events.diagnostic(&Diagnostic::ServerConnected {
            server: name.clone(),
            elapsed_ms,
            protocol_version: session.protocol_version,
            // The server's own words: redacted like anything else that leaves the engine.
            server_info: ServerInfo { name: slot.secrets.redact(&session.server_name), version: slot.secrets.redact(&session.server_version) },
            capabilities: session.capabilities.clone(),
            tool_count: listing.tools.len(),
            message,
        });
    }

    /// Make `connection` the server's live one (its state is left to [`Inner::mark_ready`]). Fails, with
    /// the connection closed, if it was lost before this or the toolset is closing.
    async fn install(&self, index: usize, connection: Arc<Connection>, listener: Arc<ServerListener>) -> std::result::Result<(), Failure> {
        let slot = &self.servers[index];
        let refused = {
            let mut current = slot.connection.lock();
            if slot.cancel.is_cancelled() {
                Some(McpError::Closed)
            } else if let Some(reason) = listener.lost.get() {
                // Checked under the lock the loss handler takes, so a loss is handled here or there, once.
                Some(reason.clone())
            } else {
                listener.installed.store(true, Ordering::SeqCst);
                if let Some(previous) = current.replace(Installed { connection: connection.clone(), listener }) {
                    slot.tasks.spawn(async move { previous.connection.close().await });
                }
                let notifies = connection.session.tools_list_changed;
                slot.freshness.send_modify(|f| f.notifies = notifies);
                if connection.is_modern() && notifies {
                    let (connection, cancel, freshness) = (connection.clone(), slot.cancel.clone(), slot.freshness.clone());
                    slot.tasks.spawn(async move {
                        // Given up (not offered, or failing): the TTL is the only signal left.
                        if listen_for_tool_changes(connection, cancel).await == Listen::GivenUp {
                            freshness.send_modify(|f| f.notifies = false);
                        }
                    });
                }
                None
            }
        };
        match refused {
            None => Ok(()),
            Some(reason) => {
                connection.close().await;
                Err((reason, connection.stderr_tail()))
            }
        }
    }

    /// The server's tools are published: calls may go to it now.
    pub(super) fn mark_ready(&self, index: usize) {
        let slot = &self.servers[index];
        if !slot.cancel.is_cancelled() && slot.connection.lock().is_some() {
            slot.state.send_replace(SlotState::Ready);
        }
    }

    /// The installed connection ended without being asked to.
    fn connection_lost(&self, index: usize, listener: &ServerListener, reason: &McpError) {
        let slot = &self.servers[index];
        if slot.cancel.is_cancelled() {
            return;
        }
        let mut current = slot.connection.lock();
        let is_current = current.as_ref().is_some_and(|i| std::ptr::eq(Arc::as_ptr(&i.listener), listener));
        if !listener.installed.load(Ordering::SeqCst) || !is_current {
            return; // not installed yet: `install` sees the loss and reports it
        }
        let lost = current.take().expect("checked above");
        drop(current);
        tracing::warn!(toolset = self.log_id, server = %slot.entry.name, code = reason.code(), "connection lost");
        slot.state.send_replace(SlotState::Down);
        self.report_degraded(index, reason, lost.connection.stderr_tail());
        // Its kill sequence is tracked, so close() waits for the process group to be gone.
        slot.tasks.spawn(async move { lost.connection.close().await });
    }

    /// Close one server's connection. Its tasks are cancelled by the toolset's token.
    pub(super) async fn close_server(self: Arc<Self>, index: usize) {
        let slot = &self.servers[index];
        slot.state.send_replace(SlotState::Down);
        let installed = slot.connection.lock().take();
        if let Some(installed) = installed {
            installed.connection.close().await;
        }
    }

    /// `notifications/tools/list_changed`: mark a refresh pending and start the refresh task unless
    /// one runs (it takes the pending mark before its next listing). A flood costs one flag store each.
    fn list_changed(self: &Arc<Self>, index: usize) {
        let slot = &self.servers[index];
        slot.refresh_pending.store(true, Ordering::SeqCst);
        if slot.refresh_running.swap(true, Ordering::SeqCst) || slot.cancel.is_cancelled() {
            return;
        }
        let inner = self.clone();
        slot.tasks.spawn(async move {
            let slot = &inner.servers[index];
            // Clears the running flag if this task ends while it owns it (cancelled, panicked).
            let mut running = RunningFlag { flag: &slot.refresh_running, owned: true };
            loop {
                // Cleared before the take: an announcement after it is reported again, and the listing
                // this take starts comes after it.
                while {
                    slot.announce_pending.store(false, Ordering::SeqCst);
                    slot.refresh_pending.swap(false, Ordering::SeqCst)
                } {
                    tokio::select! {
                        biased;
                        _ = slot.cancel.cancelled() => return,
                        // A server that announces a change after every listing is re-listed at most this
                        // often, not back to back.
                        _ = async {
                            let _reported_by_refresh = inner.refresh(index).await;
                            tokio::time::sleep(Duration::from_millis(MIN_REFRESH_INTERVAL_MS)).await;
                        } => {}
                    }
                }
                running.release();
                // A notification between the last take and the release started no task: run it here,
                // unless another task took the flag meanwhile.
                if !slot.refresh_pending.load(Ordering::SeqCst) || slot.refresh_running.swap(true, Ordering::SeqCst) {
                    return;
                }
                running.owned = true;
            }
        });
    }

    /// Re-list one server after a `-32020` on a call sent when `seen` listings had been put in use:
    /// unless a listing came since (another refused call's, a `list_changed`'s), in which case that
    /// one is current enough. Fails if the re-listing does.
    /// `attempted`: the server's re-list attempts when the call was sent. A re-listing attempted since
    /// (for another refused call) answers this one too, failed or not: a server that refuses many calls
    /// and stalls its listing costs each of them one listing's wait, not one per call queued before it.
    pub(super) async fn relist(&self, index: usize, seen: u64, attempted: u64) -> Result<()> {
        let slot = &self.servers[index];
        let mut last = slot.relisting.lock().await;
        if slot.listings() != seen {
            return Ok(());
        }
        if slot.relist_attempts() != attempted {
            return last.clone().unwrap_or(Ok(()));
        }
        let outcome = self.refresh(index).await;
        *last = Some(outcome.clone());
        slot.relist_attempts.fetch_add(1, Ordering::SeqCst);
        outcome
    }

    /// Re-list one server, vet it against the baseline, update the map in place. Fails (after
    /// reporting) if the listing or the vetting does, or the server is not ready.
    async fn refresh(&self, index: usize) -> Result<()> {
        let _ = self.projected.subscribe().wait_for(|done| *done).await;
        let slot = &self.servers[index];
        let unavailable = || McpError::Transport(format!("server {:?} is unavailable", slot.entry.name));
        let settled = slot.state.subscribe().wait_for(|s| *s != SlotState::Connecting).await.map(|s| *s);
        if !matches!(settled, Ok(SlotState::Ready)) {
            return Err(unavailable());
        }
        let _one_at_a_time = slot.cycle.lock().await;
        let Some(connection) = slot.connection() else { return Err(unavailable()) };
        let opts = RequestOptions { timeout: self.timeout, abort: None };
        let vetted = match self.list_tools(index, &connection, &opts).await {
            Ok(listing) => self.vet(index, &listing).await.map(|vetted| (listing, vetted)),
            Err(e) => Err(McpError::Protocol(format!("re-listing tools failed: {e}"))),
        };
        if slot.cancel.is_cancelled() {
            return Err(McpError::Closed);
        }
        match vetted {
            Ok((listing, (vetting, diagnostics))) => {
                diagnostics.into_iter().for_each(|d| self.report(d));
                self.catalogue_listed(index, &listing);
                self.apply(index, listing, &vetting);
                Ok(())
            }
            Err(e) => {
                // A TTL'd catalogue of a server that does not announce changes: this was a revalidation.
                let revalidating = {
                    let freshness = slot.freshness.borrow();
                    freshness.fresh_until.is_some() && !freshness.notifies
                };
                slot.freshness.send_modify(|f| f.failures = f.failures.saturating_add(1));
                if revalidating {
                    // The spec lets a client serve a stale result when refetching fails: the tools stay.
                    let name = &slot.entry.name;
                    self.report(Diagnostic::CatalogueStale {
                        server: name.clone(),
                        message: slot.secrets.redact(&format!(
                            "revalidating the tools of server {name:?} after their ttlMs failed; the last listing stays in use: {e}"
                        )),
                        error_code: e.code(),
                    });
                } else {
                    self.report_degraded(index, &e, None);
                }
                Err(e)
            }
        }
    }

    /// After a rebuild: connect, list, vet and correct the map in place, in the background. The server
    /// stays `Connecting` (calls wait) until the corrected table is published.
    pub(super) fn start_reconcile(self: &Arc<Self>, index: usize) {
        self.reconciling.send_modify(|n| *n += 1);
        let inner = self.clone();
        self.servers[index].tasks.spawn(async move {
            // Counted down however the task ends: finished, cancelled by close(), or panicked.
            let _done = CountDownOnDrop(&inner.reconciling);
            let slot = &inner.servers[index];
            match inner.clone().attach(index).await {
                Ok(attached) => {
                    attached.diagnostics.into_iter().for_each(|d| inner.report(d));
                    inner.apply(index, attached.listing, &attached.vetting);
                    inner.mark_ready(index);
                    drop(attached.cycle);
                }
                Err((error, stderr_tail)) => {
                    slot.state.send_replace(SlotState::Down);
                    if !slot.cancel.is_cancelled() {
                        inner.report_degraded(index, &error, stderr_tail);
                    }
                }
            }
        });
    }

    pub(super) fn store_id(&self, index: usize) -> String {
        let slot = &self.servers[index];
        store::server_id(&slot.entry.name, slot.entry.kind_name(), &slot.identity)
    }

    /// Persist this listing and check it against the drift baseline (recorded now if there is none).
    async fn vet(&self, index: usize, listing: &Listing) -> Result<(Vetting, Vec<Diagnostic>)> {
        let tools = &listing.tools[..];
        let Some(store) = &self.store else { return Ok((Vetting::default(), Vec::new())) };
        let entry = &self.servers[index].entry;
        let id = self.store_id(index);
        let row = StoredServer {
            id: id.clone(),
            name: entry.name.clone(),
            kind: entry.kind_name().to_owned(),
            // Origin and path, with any key-like path segment redacted: a store row is durable.
            url: entry.url().map(|url| self.servers[index].secrets.redact(&url)),
            tools: tools.to_vec(),
            tool_fingerprints: None,
            listed_at: (listing.cache.listed_at_ms > 0).then_some(listing.cache.listed_at_ms),
            ttl_ms: listing.cache.ttl_ms,
            cache_scope: listing.cache.scope,
        };
        store.save(row).await?;
        let baseline = store.claim_baseline(&id, store::fingerprints(tools)).await?;
        Ok(self.vet_against(index, Some(&baseline), tools))
    }

    /// What the baseline says of `tools`, and the diagnostics that tell it.
    pub(super) fn vet_against(&self, index: usize, baseline: Option<&store::Fingerprints>, tools: &[Tool]) -> (Vetting, Vec<Diagnostic>) {
        let Some(baseline) = baseline else { return (Vetting::default(), Vec::new()) };
        let drift = store::compare(baseline, tools);
        let server = &self.servers[index].entry.name;
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
        let vetting = Vetting { quarantined: drift.changed.into_iter().collect(), withheld: drift.added.into_iter().collect() };
        (vetting, diagnostics)
    }

    /// List the server's tools, with the catalogue's cache scope settled for this server (see
    /// [`catalog::CacheHints::scope_for`]).
    async fn list_tools(&self, index: usize, connection: &Connection, opts: &RequestOptions<'_>) -> Result<Listing> {
        let modern = connection.is_modern();
        let mut listing = catalog::list_tools(connection, opts, modern, &self.servers[index].identity).await?;
        listing.cache.scope = listing.cache.scope_for(modern, self.is_authorized(index));
        Ok(listing)
    }

    /// The server is reached with credentials, so what it lists may depend on who asks: an `auth`
    /// callback or OAuth for HTTP, any configured header (an API key is one) including one read from
    /// the environment (`headersFromEnv`, `bearerTokenEnv`: each worker or tenant may hold its own),
    /// or a stdio env var that looks like a secret.
    fn is_authorized(&self, index: usize) -> bool {
        let entry = &self.servers[index].entry;
        match &entry.kind {
            ServerKind::StreamableHttp { headers, oauth, .. } | ServerKind::Sse { headers, oauth, .. } => {
                self.hooks.auth.is_some() || oauth.is_some() || !headers.is_empty() || !entry.headers_from_env.is_empty()
            }
            ServerKind::Stdio { env, .. } => env.keys().any(|name| crate::guard::redact::looks_secret(name)),
        }
    }

    /// A listing is in use now: it is fresh until its TTL lapses, and no re-listing has failed since.
    fn catalogue_listed(&self, index: usize, listing: &Listing) {
        let remaining = listing.cache.fresh_until_ms().map(|until| until.saturating_sub(store::now_ms()).max(0));
        let fresh_until = remaining.map(|ms| tokio::time::Instant::now() + Duration::from_millis(ms as u64));
        self.servers[index].listings.fetch_add(1, Ordering::SeqCst);
        self.servers[index].freshness.send_modify(|f| {
            f.fresh_until = fresh_until;
            f.failures = 0;
            f.listed = Some(tokio::time::Instant::now());
        });
    }

    /// Start the server's revalidation task, once for its life.
    fn start_revalidation(self: &Arc<Self>, index: usize) {
        let slot = &self.servers[index];
        if !slot.revalidating.swap(true, Ordering::SeqCst) {
            slot.tasks.spawn(self.clone().revalidate_when_stale(index));
        }
    }

    /// A catalogue with a TTL from a server that does not announce changes is re-listed when the TTL
    /// lapses, through the same coalesced refresh (and drift vetting) as a `list_changed`. Not a poll:
    /// at most once per `MIN_REVALIDATION_INTERVAL_MS`, jittered, backing off after failures; and
    /// nothing at all for a catalogue without a TTL, or while the server announces its changes.
    async fn revalidate_when_stale(self: Arc<Self>, index: usize) {
        let slot = &self.servers[index];
        let (mut freshness, mut state) = (slot.freshness.subscribe(), slot.state.subscribe());
        let mut last_attempt = None;
        loop {
            let current = *freshness.borrow_and_update();
            let ready = *state.borrow_and_update() == SlotState::Ready;
            let due = match current.fresh_until {
                Some(fresh_until) if ready && !current.notifies => {
                    let last = last_attempt.max(current.listed);
                    Some(revalidation_due(fresh_until, current.failures, last, tokio::time::Instant::now()))
                }
                _ => None,
            };
            tokio::select! {
                _ = slot.cancel.cancelled() => return,
                changed = freshness.changed() => if changed.is_err() { return },
                changed = state.changed() => if changed.is_err() { return },
                _ = tokio::time::sleep_until(due.unwrap_or_else(tokio::time::Instant::now)), if due.is_some() => {
                    last_attempt = Some(tokio::time::Instant::now());
                    self.list_changed(index);
                }
            }
        }
    }

    /// Everything checked before a server is contacted: containment for stdio; for HTTP the host
    /// guard (no request at all to a host outside it) and the connect-time credential.
    async fn transport_spec(&self, index: usize) -> Result<TransportSpec> {
        let slot = &self.servers[index];
        match &slot.entry.kind {
            ServerKind::Stdio { command, args, env, cwd, root, stderr } => {
                let env = containment::child_environment(|name| std::env::var(name).ok(), env);
                let (command, cwd, root, resolve_env) = (command.clone(), cwd.clone(), root.clone(), env.clone());
                // canonicalize and PATH lookups touch the file system: off the engine's worker.
                let (program, cwd) = tokio::task::spawn_blocking(move || -> Result<_> {
                    match root {
                        Some(root) => {
                            let contained = containment::contain(&root, &command, cwd.as_deref())?;
                            let program = match contained.program {
                                Some(program) => program,
                                None => containment::resolve_program(&command, &resolve_env, Some(&contained.cwd))?,
                            };
                            Ok((program, Some(contained.cwd)))
                        }
                        None => Ok((containment::resolve_program(&command, &resolve_env, cwd.as_deref())?, cwd)),
                    }
                })
                .await
                .map_err(|e| panic_error("resolving the server's command", e))??;
                let reader_host = self.hooks.stdio_reader.clone();
                let on_stderr = (*stderr == StderrMode::Diagnostics).then(|| self.stderr_listener(index));
                Ok(TransportSpec::Stdio(StdioSpec { program, args: args.clone(), env, cwd, reader_host, stderr: *stderr, on_stderr }))
            }
            ServerKind::StreamableHttp { url, headers, oauth } | ServerKind::Sse { url, headers, oauth } => {
                let guard = self.host_guard(index).await?;
                if let Some(guard) = &guard {
                    guard.check_url(url)?;
                }
                if self.hooks.auth.is_some() {
                    self.authenticate(index).await?;
                }
                let authorizer = match oauth {
                    Some(settings) => Some(self.authorizer(index, url, settings, &guard)?),
                    None => None,
                };
                // Read now, never kept in the configuration; redacted from then on like static headers.
                let mut headers = headers.clone();
                for from_env in &slot.entry.headers_from_env {
                    let value = from_env.resolve(&slot.entry.name)?;
                    slot.secrets.add_header_value(value.as_bytes());
                    headers.insert(from_env.name.clone(), value);
                }
                let spec = HttpSpec {
                    url: url.clone(),
                    headers,
                    guard,
                    proxy: self.proxy.clone(),
                    credential: slot.credential.clone(),
                    authorizer,
                };
                Ok(match slot.entry.kind {
                    ServerKind::Sse { .. } => TransportSpec::Sse(spec),
                    _ => TransportSpec::StreamableHttp(spec),
                })
            }
        }
    }

    /// The server's OAuth authorizer: made on its first connection and kept for every later one, so the
    /// token in use (and a flow under way) outlives a reconnection.
    fn authorizer(
        &self,
        index: usize,
        url: &url::Url,
        settings: &crate::auth::OAuthSettings,
        guard: &Option<Arc<HostGuard>>,
    ) -> Result<Arc<crate::auth::Authorizer>> {
        let slot = &self.servers[index];
        if let Some(authorizer) = slot.authorizer.lock().clone() {
            return Ok(authorizer);
        }
        let policy = crate::egress::EgressPolicy { guard: guard.clone(), proxy: self.proxy.clone() };
        let authorizer = Arc::new(crate::auth::Authorizer::new(
            slot.entry.name.clone(),
            url.clone(),
            settings.clone(),
            self.auth_host.clone(),
            &policy,
            slot.credential.clone(),
            slot.secrets.clone(),
            slot.cancel.clone(),
        )?);
        Ok(slot.authorizer.lock().get_or_insert(authorizer).clone())
    }

    /// The static list, or the resolver's answer for this server.
    async fn host_guard(&self, index: usize) -> Result<Option<Arc<HostGuard>>> {
        if let Some(resolver) = &self.hooks.allowed_hosts {
            let name = self.servers[index].entry.name.clone();
            let hosts = resolver
                .call(name.clone())
                .await
                .map_err(|_| McpError::HostNotAllowed(format!("the allowedHosts resolver failed for server {name:?}; refusing")))?;
            return Ok(Some(Arc::new(HostGuard::new(&hosts)?)));
        }
        Ok(self.allowed_hosts.clone())
    }

    /// Ask `auth` for this server's token and make it the credential. The token replaces the previous
    /// one among the secrets: the set holds live values only, however often the token rotates.
    pub(super) async fn authenticate(&self, index: usize) -> Result<()> {
        let Some(auth) = &self.hooks.auth else { return Ok(()) };
        let slot = &self.servers[index];
        let name = &slot.entry.name;
        let token = auth.call(name.clone()).await.map_err(|_| McpError::Auth(format!("the auth callback failed for server {name:?}")))?;
        if token.is_empty() {
            return Err(McpError::Auth(format!("the auth callback returned no token for server {name:?}")));
        }
        slot.secrets.set_rotating("bearer", token.as_bytes());
        slot.credential.set_bearer(&token)
    }
}

/// What the era memory knows a server by: its identity and everything configured that reaches it or
/// changes who answers (the environment, headers, headers from environment variables, the proxy), but
/// not the `auth` bearer. Hashed before use.
fn era_key(entry: &ServerEntry, proxy: Option<&url::Url>) -> String {
    let mut key = entry.identity();
    match &entry.kind {
        ServerKind::Stdio { env, .. } => env.iter().for_each(|(name, value)| key.push_str(&format!("\n{name}={value}"))),
        ServerKind::StreamableHttp { headers, .. } | ServerKind::Sse { headers, .. } => {
            for (name, value) in headers {
                key.push_str(&format!("\n{name}={}", String::from_utf8_lossy(value.as_bytes())));
            }
            for header in &entry.headers_from_env {
                let value = std::env::var(&header.variable).unwrap_or_default();
                key.push_str(&format!("\n{}={}{value}", header.name, header.prefix));
            }
            if let Some(proxy) = proxy {
                key.push_str(&format!("\nproxy={proxy}"));
            }
        }
    }
    key
}

/// The modern era's replacement for the GET stream: `subscriptions/listen` for tool-list changes, opened
/// again when the server ends it, until the connection ends; given up after
/// `MAX_LISTEN_FAILURES` short-lived attempts in a row, or at once if the server doesn't offer it.
async fn listen_for_tool_changes(connection: Arc<Connection>, cancel: CancellationToken) -> Listen {
    let mut failures = 0u32;
    while failures < MAX_LISTEN_FAILURES {
        let opened = std::time::Instant::now();
        let ended = tokio::select! {
            _ = cancel.cancelled() => return Listen::Ended,
            ended = connection.listen_for_tool_changes(None) => ended,
        };
        match ended {
            Err(McpError::Closed) => return Listen::Ended,
            Err(McpError::Rpc { .. }) => return Listen::GivenUp,
            _ if opened.elapsed() >= Duration::from_millis(LISTEN_HEALTHY_MS) => failures = 0,
            _ => failures += 1,
        }
        tokio::select! {
            _ = cancel.cancelled() => return Listen::Ended,
            _ = tokio::time::sleep(Duration::from_millis(LISTEN_RETRY_MS * u64::from(failures.max(1)))) => {}
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
    let spread = (wait.as_millis() as u64).saturating_mul(REVALIDATION_JITTER_PERCENT) / 100;
    let jitter = match spread {
        0 => 0,
        spread => std::hash::BuildHasher::hash_one(&std::collections::hash_map::RandomState::new(), now) % spread,
    };
    base + Duration::from_millis(jitter)
}

/// Attempts in a row that end within `LISTEN_HEALTHY_MS` before the subscription is given up.
const MAX_LISTEN_FAILURES: u32 = 5;
/// A subscription that lived this long was healthy.
const LISTEN_HEALTHY_MS: u64 = 5_000;
/// The wait before opening it again (times the failures in a row).
const LISTEN_RETRY_MS: u64 = 1_000;

/// A connection's link back to its toolset; weak, so a dropped toolset is not kept alive by its servers.
pub(crate) struct ServerListener {
    toolset: Weak<Inner>,
    index: usize,
    /// Why the connection ended, once it has.
    lost: OnceLock<McpError>,
    /// Set by `install` under the supervisor's connection lock.
    installed: AtomicBool,
}

impl ConnectionEvents for ServerListener {
    fn tools_list_changed(&self) {
        if let Some(toolset) = self.toolset.upgrade() {
            let slot = &toolset.servers[self.index];
            if toolset.client_mode.load(Ordering::Relaxed) && !slot.announce_pending.swap(true, Ordering::SeqCst) {
                toolset.events.tools_list_announced(&slot.entry.name);
            }
            toolset.list_changed(self.index);
        }
    }

    /// Re-listed like an announcement, but not reported as one: a change found is reported by the refresh.
    fn tools_may_have_changed(&self) {
        if let Some(toolset) = self.toolset.upgrade() {
            toolset.list_changed(self.index);
        }
    }

    fn connection_lost(&self, reason: &McpError) {
        let _ = self.lost.set(reason.clone());
        if let Some(toolset) = self.toolset.upgrade() {
            toolset.connection_lost(self.index, self, reason);
        }
    }
}

/// The refresh task's claim on `refresh_running`: released explicitly, or on drop while still owned.
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

struct CountDownOnDrop<'a>(&'a watch::Sender<usize>);

impl Drop for CountDownOnDrop<'_> {
    fn drop(&mut self) {
        self.0.send_modify(|n| *n -= 1);
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
