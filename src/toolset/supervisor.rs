//! One supervisor per server, as an object: it owns that server's whole life — connecting, negotiating
//! the era, vetting and installing a connection, noticing its loss, recovering it (`recovery.rs`),
//! refreshing its catalogue (`refresh.rs`) and closing. What it needs of its toolset (settings, the
//! route table, the way to the owner) it holds as [`ToolsetContext`]; the toolset holds its supervisors and never
//! does a server's work itself.
//!
//! Every task a supervisor starts is tracked by its own `TaskTracker` under its own cancellation token (a
//! child of the toolset's), so `close()` ends them all and can wait for them.

use super::routes::{ServerIdentity, Vetting};
use super::shared::ToolsetContext;
use crate::config::{ServerEntry, ServerKind};
use crate::diagnostics::{Diagnostic, ServerInfo};
use crate::error::McpError;
use crate::guard::redact::Secrets;
use crate::limits::ELICITATION_TIMEOUT_MS;
use crate::protocol::mcp::Tool;
use crate::session::catalog::{self, Listing};
use crate::session::connection::{AbortHandle, Connection, ConnectionEvents, EraMemory, Known, RequestOptions};
use crate::session::elicitation::Elicitor;
use crate::store;
use crate::transport::http::Credential;
use crate::transport::TransportOptions;
use parking_lot::Mutex;
use serde::Serialize;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock, Weak};
use std::time::Duration;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

/// Where a server is in its life, as callers and the host see it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub(crate) enum State {
    /// Its first connection is under way: calls wait for it (up to their timeout).
    Connecting,
    /// Connected, listed, vetted and published: calls go straight to it.
    Live,
    /// Lost, and being brought back: calls wait (up to `reconnect.waitMs`, or their timeout).
    Reconnecting,
    /// Given up for now: calls fail at once with `mcp_server_unavailable`.
    Failed,
    /// `enabled: false`.
    Disabled,
    /// Projected from a store by a rebuild, not reached yet: calls wait for its reconciliation.
    Stale,
    /// The toolset was closed.
    Closed,
}

impl State {
    /// Calls to a server in this state wait for it to settle.
    pub fn is_pending(self) -> bool {
        matches!(self, State::Connecting | State::Reconnecting | State::Stale)
    }

    pub fn name(self) -> &'static str {
        match self {
            State::Connecting => "connecting",
            State::Live => "live",
            State::Reconnecting => "reconnecting",
            State::Failed => "failed",
            State::Disabled => "disabled",
            State::Stale => "stale",
            State::Closed => "closed",
        }
    }
}

/// What `servers()` reports of one server.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ServerStatus {
    pub name: String,
    pub state: &'static str,
    /// When it entered its state, in milliseconds since the Unix epoch.
    pub since: i64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_error: Option<LastError>,
    /// Recoveries that brought it back so far.
    pub restarts: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub protocol_version: Option<&'static str>,
}

#[derive(Debug, Clone, Serialize)]
pub struct LastError {
    pub code: &'static str,
    pub message: String,
}

/// The parts of a server's status that change with its state.
#[derive(Default)]
struct Status {
    since_ms: i64,
    last_error: Option<LastError>,
}

pub(crate) struct Supervisor {
    pub(super) shared: Arc<ToolsetContext>,
    /// This server's place in the route table (and among the toolset's supervisors).
    pub(super) index: usize,
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
    pub state: watch::Sender<State>,
    /// The session generation last renewed on the installed connection (an HTTP session re-initialized
    /// after a 404) and vetted: what a subscription's keeping task waits on to subscribe again there.
    pub(super) renewals: watch::Sender<u64>,
    /// Taken after `connection` when both are held (never the other way round): see `status()`.
    status: Mutex<Status>,
    /// Recoveries that brought the server back.
    restarts: AtomicU64,
    connection: Mutex<Option<Installed>>,
    /// Connecting, reconciling and refreshing this server happen one at a time, each from its listing
    /// to the publication of its table and the server's state.
    pub(super) cycle: Arc<tokio::sync::Mutex<()>>,
    pub(super) refresh: super::refresh::RefreshState,
    pub(super) recovery: super::recovery::RecoveryState,
    /// A stored catalogue a rebuild projected that is public and was fresh: the reconciliation's
    /// connection may use it instead of listing, if it is still fresh then.
    pub reusable: Mutex<Option<(Vec<Tool>, catalog::CacheHints)>>,
    pub cancel: CancellationToken,
    pub tasks: TaskTracker,
    /// Its resource subscriptions, each kept across reconnections by a task of its own (`session.rs`).
    pub(super) subscriptions: super::session::Subscriptions,
    /// A resources / prompts change announced and not yet listed (announcements coalesce on it).
    pub(super) lists_pending: super::session::ListsPending,
    /// The skills it listed and the ones loaded from it (`skills.rs`): a skill's identity is this server
    /// and its URI.
    pub(super) skills: super::skills::Skills,
}

/// The live connection, with the listener that reports its loss.
struct Installed {
    connection: Arc<Connection>,
    listener: Arc<ServerListener>,
}

/// A server connected, listed, vetted and installed (not yet live to callers), not yet in the map.
/// Holds the server's cycle lock until the owner has published its table and made it live.
pub(crate) struct Attached {
    pub listing: Listing,
    pub vetting: Vetting,
    /// What vetting found, reported by the owner in server order.
    pub diagnostics: Vec<Diagnostic>,
    pub cycle: tokio::sync::OwnedMutexGuard<()>,
}

pub(super) type Failure = (McpError, Option<String>);

impl Supervisor {
    pub fn new(
        shared: Arc<ToolsetContext>,
        index: usize,
        entry: ServerEntry,
        label: String,
        cancel: CancellationToken,
    ) -> Self {
        let secrets = Arc::new(Secrets::default());
        match &entry.kind {
            ServerKind::Stdio { env, args, .. } => secrets.add_stdio_entry(env, args),
            // Raw bytes: a value that isn't ASCII is still a secret.
            ServerKind::StreamableHttp { headers, url, .. } | ServerKind::Sse { headers, url, .. } => {
                headers.values().for_each(|v| secrets.add_header_value(v.as_bytes()));
                secrets.add_url_credentials(url);
            }
        }
        let initial = if entry.enabled { State::Connecting } else { State::Disabled };
        Supervisor {
            identity: entry.identity(),
            era_key: era_key(&entry, shared.proxy.as_ref()),
            shared,
            index,
            entry,
            label,
            credential: Credential::default(),
            authorizer: Mutex::default(),
            secrets,
            state: watch::channel(initial).0,
            renewals: watch::channel(0).0,
            status: Mutex::new(Status { since_ms: store::now_ms(), last_error: None }),
            restarts: AtomicU64::new(0),
            connection: Mutex::new(None),
            cycle: Arc::new(tokio::sync::Mutex::new(())),
            refresh: Default::default(),
            recovery: Default::default(),
            reusable: Mutex::new(None),
            cancel,
            tasks: TaskTracker::new(),
            subscriptions: Default::default(),
            lists_pending: Default::default(),
            skills: Default::default(),
        }
    }

    /// Who this server is in the route table.
    pub(super) fn identity_view(&self) -> ServerIdentity<'_> {
        ServerIdentity {
            index: self.index,
            name: &self.entry.name,
            label: &self.label,
            identity: &self.identity,
            always_load: self.shared.disclosure.always_load.contains(&self.entry.name),
            tools: &self.entry.tools,
        }
    }

    /// The installed connection, if there is one.
    pub fn connection(&self) -> Option<Arc<Connection>> {
        self.connection.lock().as_ref().map(|i| i.connection.clone())
    }

    /// The connection to send on, if the server is live: state and connection read together, under the
    /// lock a loss and going live take.
    pub fn live_connection(&self) -> Option<Arc<Connection>> {
        let installed = self.connection.lock();
        installed.as_ref().filter(|_| self.current_state() == State::Live).map(|i| i.connection.clone())
    }

    fn is_installed(&self, listener: &ServerListener) -> bool {
        self.connection.lock().as_ref().is_some_and(|i| std::ptr::eq(Arc::as_ptr(&i.listener), listener))
    }

    pub fn current_state(&self) -> State {
        *self.state.borrow()
    }

    /// Move to `state` (a no-op if it is already there, or once closed), noting when.
    pub(super) fn set_state(&self, state: State) {
        let changed = self.state.send_if_modified(|current| {
            if *current == state || *current == State::Closed {
                return false;
            }
            *current = state;
            true
        });
        if changed {
            let mut status = self.status.lock();
            status.since_ms = store::now_ms();
            // What `servers()` shows: a server reconnecting or failed always says why (the error is
            // noted before the state moves). Checked in debug builds, where every test runs.
            debug_assert!(
                !matches!(state, State::Reconnecting | State::Failed) || status.last_error.is_some(),
                "{state:?} set before the error that caused it was noted"
            );
        }
    }

    /// Why the server last failed, as the host may see it (redacted).
    pub(super) fn note_error(&self, error: &McpError) {
        let message = self.secrets.redact(&error.to_string());
        self.status.lock().last_error = Some(LastError { code: error.code(), message });
    }

    /// The last failure as the host saw it (redacted), as a transport error: what a retry counts.
    pub(super) fn last_error(&self) -> Option<McpError> {
        self.status.lock().last_error.as_ref().map(|e| McpError::Transport(e.message.clone()))
    }

    pub(super) fn count_restart(&self) -> u64 {
        self.restarts.fetch_add(1, Ordering::SeqCst) + 1
    }

    pub fn restarts(&self) -> u64 {
        self.restarts.load(Ordering::SeqCst)
    }

    pub fn status(&self) -> ServerStatus {
        let state = self.current_state();
        // Lock order: `connection` before `status` (going live sets the state, and so `status`, under the
        // connection lock). The connection is read first and its lock let go before `status` is taken:
        // holding `status` while asking for `connection` deadlocked `servers()` against a reconnect.
        let protocol_version = match state {
            State::Live => self.connection().map(|c| c.session.protocol_version),
            _ => None,
        };
        let status = self.status.lock();
        ServerStatus {
            name: self.entry.name.clone(),
            state: state.name(),
            since: status.since_ms,
            last_error: status.last_error.clone(),
            restarts: self.restarts(),
            protocol_version,
        }
    }

    /// The error a call to this server fails with when it is not live (and not worth waiting for).
    pub(super) fn unavailable(&self) -> McpError {
        let state = self.current_state();
        if state == State::Closed || self.cancel.is_cancelled() {
            return McpError::Closed;
        }
        let name = &self.entry.name;
        // The code only: the last error's text may quote the server (its stderr, a body), and this reaches
        // the model; the host reads the text in `servers()` and the diagnostics.
        let why =
            self.status.lock().last_error.as_ref().map_or_else(String::new, |e| format!(" (last error: {})", e.code));
        McpError::ServerUnavailable(format!("MCP server {name:?} is {}{why}; the call was not sent", state.name()))
    }

    /// Connect, list, vet and install this server, holding its cycle lock, which the result carries on:
    /// the caller publishes the server's tools and only then makes it live ([`Supervisor::go_live`]), so
    /// no call is admitted against a table older than the vetting.
    ///
    /// Cancelled by `close()`, it does not just stop: the handshake or listing in flight fails with the
    /// cancellation, and the half-open connection is closed properly (a stdio server's process group
    /// is signalled and waited for) before this returns, so no child outlives `close()`.
    pub(super) async fn attach(self: Arc<Self>) -> std::result::Result<Attached, Failure> {
        let cycle = self.cycle.clone().lock_owned().await;
        let stop = AbortHandle::default();
        let trip = async {
            self.cancel.cancelled().await;
            stop.abort();
            std::future::pending::<()>().await
        };
        let work = async {
            let started = std::time::Instant::now();
            self.report_connecting();
            let (connection, listener, listing) = self.connect_server(&stop).await?;
            self.report_connected(&connection, &listing, started.elapsed());
            let vetted = tokio::select! {
                biased;
                _ = self.cancel.cancelled() => Err(McpError::Closed),
                vetted = self.vet(&listing) => vetted,
            };
            match vetted {
                Ok((vetting, diagnostics)) => {
                    self.install(connection, listener).await?;
                    self.catalogue_listed(&listing);
                    self.start_revalidation();
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
        outcome
            .map_err(|(error, tail)| if self.cancel.is_cancelled() { (McpError::Closed, tail) } else { (error, tail) })
    }

    async fn connect_server(
        self: &Arc<Self>,
        stop: &AbortHandle,
    ) -> std::result::Result<(Arc<Connection>, Arc<ServerListener>, Listing), Failure> {
        let shared = &self.shared;
        // Nothing is running yet while the spec is prepared (callbacks, file system): simply dropped.
        let spec = tokio::select! {
            biased;
            _ = self.cancel.cancelled() => Err(McpError::Closed),
            spec = self.transport_spec() => spec,
        }
        .map_err(|e| (e, None))?;
        let handshake = RequestOptions { timeout: shared.connect_timeout, abort: Some(stop) };
        let options = TransportOptions {
            max_message_bytes: shared.max_result_bytes,
            idle_timeout: shared.timeout,
            secrets: self.secrets.clone(),
        };
        let elicitor = shared.hooks.elicit.clone().map(|callback| {
            let (server, modes, timeout) =
                (self.entry.name.clone(), shared.elicitation_modes, Duration::from_millis(ELICITATION_TIMEOUT_MS));
            let events = Arc::downgrade(&shared.events);
            let withdrawn: Arc<dyn Fn(u64) + Send + Sync> = Arc::new(move |ask_id| {
                if let Some(events) = events.upgrade() {
                    events.elicitation_withdrawn(ask_id);
                }
            });
            Arc::new(Elicitor { server, modes, callback, timeout, withdrawn: Some(withdrawn) })
        });
        // What this server was found to be before (this process): a session-based one skips the probe, a
        // modern one's fresh discovery answer replaces it, unless a stored catalogue will replace the
        // listing or the toolset is a single server's client (see `EraMemory::recall`).
        let mut memory = EraMemory::recall(&self.era_key, || {
            let stored = self.reusable.lock().as_ref().is_some_and(|(_, cache)| cache.is_fresh_at(store::now_ms()));
            !stored && !shared.is_client()
        });
        loop {
            let listener = Arc::new(ServerListener {
                supervisor: Arc::downgrade(self),
                lost: OnceLock::new(),
                installed: AtomicBool::new(false),
                renewal_vetted: tokio::sync::Mutex::new(0),
                logs: Arc::new(parking_lot::Mutex::new(crate::server_log::RateWindow::default())),
            });
            let opened = Connection::open(
                &spec,
                listener.clone(),
                options.clone(),
                &handshake,
                elicitor.clone(),
                shared.apps,
                memory.known(),
            )
            .await;
            let connection = match opened {
                Ok(connection) => {
                    let session = &connection.session;
                    tracing::debug!(
                        toolset = shared.log_id,
                        server = %self.entry.name,
                        era = ?session.era,
                        remembered = *memory.known() != Known::Nothing,
                        from_answer = session.era_evidence,
                        discovery = if session.discovery_reused { "reused" } else { "asked" },
                        "era negotiated"
                    );
                    memory.opened(session);
                    connection
                }
                Err(failure) => {
                    memory.open_failed(&failure.0);
                    return Err(failure);
                }
            };
            if let Some(level) = shared.server_log_level {
                self.ask_log_level(&connection, level, stop).await;
            }
            self.list_skills_for_model(&connection, stop).await;
            let reusable = self.reusable.lock().take().filter(|(_, cache)| cache.is_fresh_at(store::now_ms()));
            if let Some((tools, cache)) = reusable {
                // Public and fresh by the server's own ttlMs: anyone may reuse it, now. Vetted as any listing.
                let listing = catalog::from_stored(tools, connection.is_modern(), cache);
                return Ok((Arc::new(connection), listener, listing));
            }
            let opts = RequestOptions { timeout: shared.timeout, abort: Some(stop) };
            let error = match self.list_tools(&connection, &opts).await {
                Ok(listing) => return Ok((Arc::new(connection), listener, listing)),
                Err(e) => e,
            };
            connection.close().await;
            if !memory.probe_again_after(&connection, &error) {
                return Err((error, connection.stderr_tail()));
            }
            tracing::debug!(toolset = shared.log_id, server = %self.entry.name, code = error.code(), "the reused discovery answer did not hold; probing");
        }
    }

    /// `serverLogLevel`, asked of a server that declares `logging` before its tools are listed. A server
    /// that refuses `logging/setLevel` keeps working: the refusal is logged, and its logs below the level
    /// are still not delivered (`server_log::diagnostic`). Bounded by
    /// [`crate::limits::MAX_SET_LOG_LEVEL_WAIT_MS`]: a server that never answers it is not waited for.
    pub(super) async fn ask_log_level(
        &self,
        connection: &Connection,
        level: crate::server_log::Level,
        stop: &AbortHandle,
    ) {
        let bound = Duration::from_millis(crate::limits::MAX_SET_LOG_LEVEL_WAIT_MS).min(self.shared.timeout);
        let opts = RequestOptions { timeout: bound, abort: Some(stop) };
        if let Err(error) = connection.ask_log_level(level, &opts).await {
            let error = self.secrets.redact(&error.to_string());
            tracing::warn!(toolset = self.shared.log_id, server = %self.entry.name, %error, "logging/setLevel failed (refused or not answered in time)");
        }
    }

    /// A server's `notifications/message`, as a `server-log` diagnostic, delivered at once: bounded per
    /// second per connection (`window`), the drops of a second reported once when it ends.
    fn server_log(
        &self,
        window: &Arc<parking_lot::Mutex<crate::server_log::RateWindow>>,
        params: &serde_json::value::RawValue,
    ) {
        use crate::server_log::Admission;
        // Below the level asked (or no level at all): neither delivered nor counted against the bound.
        if !crate::server_log::wanted(params, self.shared.server_log_level) {
            return;
        }
        let admitted = window.lock().admit(std::time::Instant::now());
        let name = &self.entry.name;
        match admitted {
            Admission::Deliver { report } => {
                if let Some(count) = report {
                    self.shared.events.diagnostic(&crate::server_log::dropped(name, count));
                }
                if let Some(diagnostic) =
                    crate::server_log::diagnostic(name, params, self.shared.server_log_level, &self.secrets)
                {
                    self.shared.events.diagnostic(&diagnostic);
                }
            }
            // The second's drops are reported when it ends, even if the server falls silent.
            Admission::Dropped { first: true } => {
                let ends_at = window.lock().ends_at();
                let (window, events, name) =
                    (Arc::downgrade(window), Arc::downgrade(&self.shared.events), name.clone());
                // On the supervisor's tracker, under its token: nothing reaches onDiagnostic after close().
                let cancel = self.cancel.clone();
                if tokio::runtime::Handle::try_current().is_err() {
                    return;
                }
                self.tasks.spawn(async move {
                    tokio::select! {
                        _ = cancel.cancelled() => return,
                        _ = tokio::time::sleep_until(ends_at.into()) => {}
                    }
                    let report = window.upgrade().and_then(|w| w.lock().roll(std::time::Instant::now()));
                    if let (Some(count), Some(events)) = (report, events.upgrade()) {
                        events.diagnostic(&crate::server_log::dropped(&name, count));
                    }
                });
            }
            Admission::Dropped { first: false } => {}
        }
    }

    /// Progress, delivered at once (not held with the startup diagnostics): a host shows what is pending.
    fn report_connecting(&self) {
        let entry = &self.entry;
        tracing::debug!(toolset = self.shared.log_id, server = %entry.name, transport = entry.kind_name(), "connecting");
        let message = format!("connecting to MCP server {:?} ({})", entry.name, entry.kind_name());
        self.shared.events.diagnostic(&Diagnostic::ServerConnecting {
            server: entry.name.clone(),
            transport: entry.kind_name(),
            message,
        });
    }

    fn report_connected(&self, connection: &Connection, listing: &Listing, elapsed: Duration) {
        let session = &connection.session;
        let elapsed_ms = elapsed.as_millis() as u64;
        let name = &self.entry.name;
        tracing::info!(
            toolset = self.shared.log_id,
            server = %name,
            elapsed_ms,
            protocol = session.protocol_version,
            tools = listing.tools.len(),
            "connected and listed"
        );
        let message =
            format!("connected to MCP server {name:?} in {elapsed_ms} ms (protocol {})", session.protocol_version);
        self.shared.events.diagnostic(&Diagnostic::ServerConnected {
            server: name.clone(),
            elapsed_ms,
            protocol_version: session.protocol_version,
            // The server's own words: redacted like anything else that leaves the engine.
            server_info: ServerInfo {
                name: self.secrets.redact(&session.server_name),
                version: self.secrets.redact(&session.server_version),
            },
            capabilities: session.capabilities.clone(),
            tool_count: listing.tools.len(),
            message,
        });
    }

    /// A first connection (or a rebuild's reconciliation) failed: the server's tools are unavailable.
    pub(super) fn report_degraded(&self, error: &McpError, stderr_tail: Option<String>) {
        let name = &self.entry.name;
        self.note_error(error);
        tracing::warn!(toolset = self.shared.log_id, server = %name, code = error.code(), error = %self.secrets.redact(&error.to_string()), "server degraded");
        self.shared.report(Diagnostic::ServerDegraded {
            server: name.clone(),
            message: self.secrets.redact(&format!("MCP server {name:?} is unavailable: {error}")),
            error_code: error.code(),
            stderr_tail: stderr_tail.map(|tail| self.secrets.redact(&tail)),
        });
    }

    /// Make `connection` the server's live one (its state is left to [`Supervisor::go_live`]). Fails, with
    /// the connection closed, if it was lost before this or the toolset is closing.
    async fn install(
        &self,
        connection: Arc<Connection>,
        listener: Arc<ServerListener>,
    ) -> std::result::Result<(), Failure> {
        let refused = {
            let mut current = self.connection.lock();
            if self.cancel.is_cancelled() {
                Some(McpError::Closed)
            } else if let Some(reason) = listener.lost.get() {
                // Checked under the lock the loss handler takes, so a loss is handled here or there, once.
                Some(reason.clone())
            } else {
                listener.installed.store(true, Ordering::SeqCst);
                if let Some(previous) = current.replace(Installed { connection: connection.clone(), listener }) {
                    self.tasks.spawn(async move { previous.connection.close().await });
                }
                self.watch_for_changes(&connection);
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

    /// The server's tools are published: calls may go to it now. False if it was lost (or closed) since.
    pub(super) fn go_live(&self) -> bool {
        let connection = self.connection.lock();
        let live = !self.cancel.is_cancelled() && connection.is_some();
        if live {
            // Under the connection lock, so a loss handled after this finds the server live.
            self.set_state(State::Live);
        }
        live
    }

    /// The installed connection ended without being asked to: fail its calls (the connection did), tell
    /// the host, and recover — the old connection (a stdio server's process group) is closed first.
    fn connection_lost(self: &Arc<Self>, listener: &ServerListener, reason: &McpError) {
        let mut current = self.connection.lock();
        // Under the lock close() takes after cancelling: either close() finds the connection and closes
        // it, or the task below is tracked before close() waits for the tasks.
        if self.cancel.is_cancelled() {
            return;
        }
        let is_current = current.as_ref().is_some_and(|i| std::ptr::eq(Arc::as_ptr(&i.listener), listener));
        if !listener.installed.load(Ordering::SeqCst) || !is_current {
            return; // not installed yet: `install` sees the loss and reports it
        }
        let lost = current.take().expect("checked above");
        let recovering = self.shared.reconnect.is_some();
        // Noted before the state moves: `servers()` (read from any thread) never shows a server
        // reconnecting or failed without the error that made it so.
        self.note_error(reason);
        // Under the lock too: a call never finds the server live without a connection.
        self.set_state(if recovering { State::Reconnecting } else { State::Failed });
        // Reported before the recovery can report anything (sending a diagnostic does not block).
        let name = &self.entry.name;
        tracing::warn!(toolset = self.shared.log_id, server = %name, code = reason.code(), "connection lost");
        let stderr_tail = lost.connection.stderr_tail().map(|tail| self.secrets.redact(&tail));
        self.keep_stderr_tail(stderr_tail.clone());
        self.shared.report(Diagnostic::ServerLost {
            server: name.clone(),
            message: self.secrets.redact(&format!("lost MCP server {name:?}: {reason}")),
            error_code: reason.code(),
            stderr_tail,
        });
        let supervisor = self.clone();
        let reason = reason.clone();
        // Tracked, so close() waits for the process group to be gone; the new one starts only after.
        self.tasks.spawn(async move {
            lost.connection.close().await;
            supervisor.recover_after_loss(reason).await;
        });
        drop(current);
    }

    /// Close this server's connection. Its tasks are cancelled by the toolset's token.
    pub(super) async fn close(self: Arc<Self>) {
        self.set_state(State::Closed);
        let installed = self.connection.lock().take();
        if let Some(installed) = installed {
            installed.connection.close().await;
        }
    }

    pub(super) fn store_id(&self) -> String {
        store::server_id(&self.entry.name, self.entry.kind_name(), &self.identity)
    }
}

/// What the era memory knows a server by: its identity and everything configured that reaches it or
/// changes who answers (the environment, headers, headers from environment variables, the proxy), but
/// not the `auth` bearer. Hashed before use.
fn era_key(entry: &ServerEntry, proxy: Option<&url::Url>) -> String {
    let mut key = entry.identity();
    match &entry.kind {
        ServerKind::Stdio { env, .. } => {
            env.iter().for_each(|(name, value)| key.push_str(&format!("\n{name}={value}")))
        }
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

/// A connection's link back to its supervisor; weak, so a dropped toolset is not kept alive by its servers.
pub(crate) struct ServerListener {
    supervisor: Weak<Supervisor>,
    /// Why the connection ended, once it has.
    lost: OnceLock<McpError>,
    /// Set by `install` under the supervisor's connection lock.
    installed: AtomicBool,
    /// The newest generation of this connection's HTTP session whose tools were vetted after it replaced
    /// an expired one.
    renewal_vetted: tokio::sync::Mutex<u64>,
    /// The per-second bound of this connection's logs (`notifications/message`).
    logs: Arc<parking_lot::Mutex<crate::server_log::RateWindow>>,
}

impl ConnectionEvents for ServerListener {
    fn tools_list_changed(&self) {
        if let Some(supervisor) = self.supervisor.upgrade() {
            supervisor.announced();
        }
    }

    /// Re-listed like an announcement, but not reported as one: a change found is reported by the refresh.
    fn tools_may_have_changed(&self) {
        if let Some(supervisor) = self.supervisor.upgrade() {
            supervisor.list_changed();
        }
    }

    /// Passed on only for a URI subscribed to here, and once until the owner took it.
    fn resource_updated(&self, uri: &str) {
        if let Some(supervisor) = self.supervisor.upgrade().filter(|s| s.subscriptions.updated(uri)) {
            supervisor.shared.events.resource_updated(&supervisor.entry.name, uri);
        }
    }

    /// Passed on only from the installed connection of a server that declared `listChanged` for `list`,
    /// and once until that list is listed again: a flood costs a flag load each.
    fn list_changed(&self, list: &'static str) {
        if let Some(supervisor) = self.supervisor.upgrade() {
            let declared = supervisor.connection().is_some_and(|c| match list {
                "prompts" => c.session.prompts_list_changed,
                _ => c.session.resources_list_changed,
            });
            if !declared || !supervisor.is_installed(self) || !supervisor.lists_pending.announce(list) {
                return;
            }
            let server = supervisor.entry.name.clone();
            let message = format!("{server} announced that its {list} changed");
            supervisor.shared.report(Diagnostic::ListChanged { server, list, message });
        }
    }

    fn session_renewed(&self, generation: u64) -> futures_util::future::BoxFuture<'_, crate::error::Result<()>> {
        Box::pin(async move {
            // A connection still opening is vetted by its own first listing.
            let supervisor = self.supervisor.upgrade().ok_or(McpError::Closed)?;
            if !self.installed.load(Ordering::SeqCst) {
                return Ok(());
            }
            // Only the installed connection is vetted through (and sends): one replaced or lost is not.
            if !supervisor.is_installed(self) {
                return Err(supervisor.unavailable());
            }
            supervisor.revet_after_renewal(&self.renewal_vetted, generation).await
        })
    }

    fn server_log(&self, params: &serde_json::value::RawValue) {
        if let Some(supervisor) = self.supervisor.upgrade() {
            supervisor.server_log(&self.logs, params);
        }
    }

    fn operation(&self, operation: crate::telemetry::operation::Operation) {
        if let Some(supervisor) = self.supervisor.upgrade() {
            if let Some(sink) = &supervisor.shared.operations {
                sink(&supervisor.entry.name, operation);
            }
        }
    }

    fn wants_operations(&self) -> bool {
        self.supervisor.upgrade().is_some_and(|supervisor| supervisor.shared.operations.is_some())
    }

    fn connection_lost(&self, reason: &McpError) {
        let _ = self.lost.set(reason.clone());
        if let Some(supervisor) = self.supervisor.upgrade() {
            supervisor.connection_lost(self, reason);
        }
    }
}
