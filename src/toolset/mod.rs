//! Many servers as one tool map: connect concurrently, isolate failures, route calls, and keep the
//! map current when a server announces `tools/list_changed`.
//!
//! | part            | file            | what it owns                                                        |
//! |-----------------|-----------------|---------------------------------------------------------------------|
//! | route table     | `routes.rs`     | the immutable snapshot of name → server tool, and pure projection   |
//! | supervisors     | `supervisor.rs` | one per server: connect, vet, reconcile, refresh, close; its tasks  |
//! | call router     | `calls.rs`      | admission, gates (policy, auth, readiness), the last check and send |
//! | local tools     | `local.rs`      | `mcp__describe_tool`, `mcp__search_tools`                           |
//!
//! Every task the toolset starts is tracked: call tasks by the toolset, a server's own work by its
//! supervisor. `close()` cancels them all, closes the connections and waits a bounded time.

mod calls;
mod client;
mod local;
mod routes;
mod supervisor;

pub use calls::{CallRequest, CallSink};
pub use client::{ClientSession, ListBounds, ListingAbort, RemoteListing};
pub use local::LOCAL_SERVER;

use crate::config::{DisclosureConfig, ToolsetConfig};
use crate::connection::AbortHandle;
use crate::diagnostics::Diagnostic;
use crate::error::{McpError, Result};
use crate::guard::filter::ToolFilter;
use crate::guard::hosts::HostGuard;
use crate::hooks::Hooks;
use crate::limits::MAX_CLOSE_WAIT_MS;
use crate::projection::disclosure::{Tier, MCP_DESCRIBE_TOOL, MCP_SEARCH_TOOLS};
use crate::projection::prompt::{self, PromptServer};
use crate::projection::{naming, ProjectedTool};
use crate::store::ConnectionStore;
use arc_swap::ArcSwap;
use parking_lot::{Mutex, RwLock};
use routes::{ProjectionOptions, RouteTable, ServerIdentity};
use serde::Serialize;
use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;
use supervisor::{SlotState, Supervisor};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

/// Where the toolset reports to its owner (the JavaScript layer).
pub trait ToolsetEvents: Send + Sync + 'static {
    fn diagnostic(&self, diagnostic: &Diagnostic);
    /// The tool map changed after it was handed out; apply `change` in place.
    fn tools_changed(&self, change: &ToolsChange);
    /// The question to the host numbered `ask_id` (see `elicitation::host_request`) was withdrawn
    /// before it was answered: its call was aborted, the server cancelled it, its connection ended,
    /// or it timed out.
    fn elicitation_withdrawn(&self, _ask_id: u64) {}
    /// `server` announced that its tools changed (`notifications/tools/list_changed`, or the modern
    /// era's subscription), before the engine re-lists it.
    fn tools_list_announced(&self, _server: &str) {}
}

#[derive(Debug, Clone, Serialize)]
pub struct ToolsChange {
    pub server: String,
    pub added: Vec<ProjectedTool>,
    pub changed: Vec<ProjectedTool>,
    pub removed: Vec<String>,
}

pub struct Toolset {
    inner: Arc<Inner>,
}

pub(crate) struct Inner {
    servers: Vec<Supervisor>,
    hooks: Hooks,
    /// The elicitation modes declared to every server when `hooks.elicit` is set (`elicitationModes`).
    elicitation_modes: crate::elicitation::Modes,
    /// The static `allowedHosts` list, compiled once.
    allowed_hosts: Option<Arc<HostGuard>>,
    /// The `proxy` option, for every HTTP server.
    proxy: Option<url::Url>,
    timeout: Duration,
    /// How long a server has to start and finish its handshake (`connectTimeoutMs`).
    connect_timeout: Duration,
    /// This toolset's `toolset` field in log events (see `logging`).
    log_id: u64,
    max_result_bytes: usize,
    /// `validateArguments`, `validateResults`, `exposeServerErrors`.
    validation: crate::schema::tool::ValidationConfig,
    filter: ToolFilter,
    disclosure: DisclosureConfig,
    /// The current route table. Read without locking; replaced whole by [`Inner::publish`].
    routes: ArcSwap<RouteTable>,
    /// Held for writing only for the instant a table is swapped in; a call holds it for reading from
    /// its last check to the write of its bytes, so no table is published between the two.
    publication: RwLock<()>,
    /// One writer at a time projects a server into the next table. No call ever takes it.
    projecting: Mutex<()>,
    /// Where catalogues and drift baselines persist. Without one there is no baseline.
    store: Option<Arc<dyn ConnectionStore>>,
    /// Background reconciliations still running (after a rebuild from storage).
    reconciling: watch::Sender<usize>,
    aborts: Mutex<HashMap<u32, Arc<AbortHandle>>>,
    /// A client's listings in flight that a caller's signal may abort, by the id JavaScript gave them.
    listing_aborts: Mutex<HashMap<u32, Arc<AbortHandle>>>,
    events: Arc<dyn ToolsetEvents>,
    /// Diagnostics raised while connecting, returned with the tools so the caller sees them before
    /// `mcpTools` resolves. `None` once connected: later ones go straight to `events`.
    startup_diagnostics: Mutex<Option<Vec<Diagnostic>>>,
    /// Flips to true once the first projection is out, so a list_changed that races it is applied after.
    projected: watch::Sender<bool>,
    /// The host's side of OAuth: the token store and the way to a person.
    auth_host: Arc<crate::auth::AuthHost>,
    /// Cancelled by `close()`; every supervisor's token is a child of it.
    cancel: CancellationToken,
    /// Call tasks (gated and local calls). A server's own tasks are its supervisor's.
    tasks: TaskTracker,
    closed: tokio::sync::OnceCell<()>,
    /// A single-server client (`connectMcpServer`): calls answer with the server's result as sent, and
    /// the server's announcements of tool changes are reported (`ToolsetEvents::tools_list_announced`).
    client_mode: std::sync::atomic::AtomicBool,
    /// The compiled schemas (shared between toolsets) whose unusability this toolset has reported, each
    /// once per server: held weakly, which also keeps an address from naming a later definition.
    schemas_reported: Mutex<Vec<(std::sync::Weak<crate::schema::tool::ToolSchemas>, &'static str, usize)>>,
}

impl Toolset {
    pub fn new(
        config: ToolsetConfig,
        hooks: Hooks,
        store: Option<Arc<dyn ConnectionStore>>,
        events: Arc<dyn ToolsetEvents>,
    ) -> Result<Toolset> {
        let allowed_hosts = match &config.allowed_hosts {
            Some(hosts) => Some(Arc::new(HostGuard::new(hosts)?)),
            None => None,
        };
        let identities: Vec<(&str, String)> = config.servers.iter().map(|s| (s.name.as_str(), s.identity())).collect();
        let labels = naming::server_labels(&identities);
        let cancel = CancellationToken::new();
        let servers: Vec<Supervisor> =
            config.servers.into_iter().zip(labels).map(|(entry, label)| Supervisor::new(entry, label, config.proxy.as_ref(), cancel.child_token())).collect();
        let server_count = servers.len();
        crate::logging::init_from_env();
        let log_id = crate::logging::toolset_id();
        let auth_host = Arc::new(crate::auth::AuthHost {
            // No plaintext default: without a store given, tokens live in this toolset's memory only.
            store: hooks.token_store.clone().unwrap_or_else(|| Arc::new(crate::auth::store::MemoryTokenStore::default())),
            present: hooks.authorization_url.clone(),
            login_timeout: Duration::from_millis(config.authorization_timeout_ms),
            flow_timeout: Duration::from_millis(config.connect_timeout_ms),
            logins: CancellationToken::new(),
        });
        let toolset = Toolset {
            inner: Arc::new(Inner {
                servers,
                hooks,
                elicitation_modes: config.elicitation_modes,
                allowed_hosts,
                proxy: config.proxy,
                timeout: Duration::from_millis(config.timeout_ms),
                connect_timeout: Duration::from_millis(config.connect_timeout_ms),
                log_id,
                max_result_bytes: config.max_result_bytes,
                validation: config.validation,
                filter: config.filter,
                disclosure: config.disclosure,
                routes: ArcSwap::from_pointee(RouteTable::empty(server_count)),
                publication: RwLock::new(()),
                projecting: Mutex::new(()),
                store,
                reconciling: watch::channel(0).0,
                aborts: Mutex::new(HashMap::new()),
                listing_aborts: Mutex::new(HashMap::new()),
                events,
                startup_diagnostics: Mutex::new(Some(Vec::new())),
                projected: watch::channel(false).0,
                auth_host,
                cancel,
                tasks: TaskTracker::new(),
                closed: tokio::sync::OnceCell::new(),
                client_mode: std::sync::atomic::AtomicBool::new(false),
                schemas_reported: Mutex::default(),
            }),
        };
        if config.logs_to_diagnostics {
            let sink: std::sync::Weak<dyn crate::logging::LogSink> = Arc::downgrade(&toolset.inner) as _;
            crate::logging::route(log_id, sink);
        }
        Ok(toolset)
    }

    /// Connect every enabled server at once and project their tools. A server that fails is reported
    /// as degraded; the others' tools are returned all the same.
    pub async fn connect(&self) -> (Vec<ProjectedTool>, Vec<Diagnostic>) {
        let inner = &self.inner;
        inner.report_name_collisions();
        // close() waits for this whole connect, not just the attempts: nothing is published after it.
        let _owned_by_close = inner.tasks.token();
        let attempts: Vec<_> = (0..inner.servers.len())
            .filter(|&i| inner.servers[i].entry.enabled)
            .map(|i| (i, inner.servers[i].tasks.spawn(inner.clone().attach(i))))
            .collect();
        let mut table = RouteTable::empty(inner.servers.len());
        let mut attached = Vec::new();
        for (index, attempt) in attempts {
            let outcome = attempt.await.unwrap_or_else(|e| {
                let error = panic_error("connecting to the server", e);
                let server = inner.servers[index].entry.name.clone();
                inner.report(Diagnostic::InternalError { server, message: error.to_string() });
                Err((error, None))
            });
            match outcome {
                Ok(server) => {
                    server.diagnostics.into_iter().for_each(|d| inner.report(d));
                    let diagnostics = inner.project_into(index, server.listing, &server.vetting, &mut table);
                    diagnostics.into_iter().for_each(|d| inner.report(d));
                    attached.push((index, server.cycle));
                }
                Err((error, stderr_tail)) => {
                    inner.servers[index].state.send_replace(SlotState::Down);
                    if !inner.cancel.is_cancelled() {
                        inner.report_degraded(index, &error, stderr_tail);
                    }
                }
            }
        }
        for slot in inner.servers.iter().filter(|s| !s.entry.enabled) {
            slot.state.send_replace(SlotState::Down);
        }
        let table = inner.finish_startup(table);
        for (index, _cycle) in attached {
            inner.mark_ready(index);
        }
        let mut tools: Vec<ProjectedTool> = table.servers.iter().flat_map(|s| s.tools.iter().map(|t| (**t).clone())).collect();
        tools.extend(local::virtual_tools(&table));
        let diagnostics = inner.startup_diagnostics.lock().take().unwrap_or_default();
        (tools, diagnostics)
    }

    /// Project the tool map from the store without contacting any server, then reconnect and reconcile
    /// each server in the background (see [`Toolset::reconciled`]). `stdio_allowed: false` leaves stdio
    /// servers out. An empty store is an error: a cold start is `connect`, not a silent fallback.
    pub async fn rebuild(&self, stdio_allowed: bool) -> Result<(Vec<ProjectedTool>, Vec<Diagnostic>)> {
        let inner = &self.inner;
        let store = inner.store.clone().ok_or_else(|| McpError::config("rebuilding from storage needs the storage option"))?;
        let rows = store.list().await?;
        if rows.is_empty() {
            return Err(McpError::Storage(
                "the connection store is empty: nothing was persisted to rebuild from (use mcpTools for a cold start)".into(),
            ));
        }
        let _owned_by_close = inner.tasks.token();
        inner.report_name_collisions();
        let mut table = RouteTable::empty(inner.servers.len());
        let mut to_reconcile = Vec::new();
        for (index, slot) in inner.servers.iter().enumerate() {
            if !slot.entry.enabled {
                slot.state.send_replace(SlotState::Down);
                continue;
            }
            let id = inner.store_id(index);
            let row = rows.iter().find(|r| r.id == id).or_else(|| rows.iter().find(|r| r.name == slot.entry.name));
            let refusal = match row {
                _ if !stdio_allowed && !slot.entry.is_http() => {
                    Some(McpError::config("stdio servers are not rebuilt here ({ stdio: false })"))
                }
                None => Some(McpError::Storage(format!("server {:?} was not persisted; it is not rebuilt", slot.entry.name))),
                Some(row) if row.kind != slot.entry.kind_name() || row.url != slot.entry.url().map(|u| slot.secrets.redact(&u)) => Some(McpError::Storage(format!(
                    "the stored row for server {:?} is a {} server at {}, not what is configured now; refused",
                    slot.entry.name,
                    row.kind,
                    row.url.as_deref().map_or("(no url)".into(), stored_url)
                ))),
                Some(_) => None,
            };
            if let Some(error) = refusal {
                slot.state.send_replace(SlotState::Down);
                inner.report_degraded(index, &error, None);
                continue;
            }
            let row = row.expect("refused above when missing");
            if row.cache_scope == Some(crate::protocol::mcp::CacheScope::Private) {
                // Listed for one authorization context; this rebuild may serve another (a shared store,
                // another user's token). A cache miss: the server is connected and listed afresh.
                let server = slot.entry.name.clone();
                inner.report(Diagnostic::CatalogueNotReused {
                    message: format!(
                        "the stored tools of server {server:?} are private to the authorization context that listed them; \
                         they are not reused, the server is listed afresh"
                    ),
                    server,
                });
                to_reconcile.push(index);
                continue;
            }
            // A public row still fresh by its ttlMs is reused by the reconciliation below without a
            // listing; any other (lapsed: stale) is projected all the same and revalidated there.
            if row.cache_scope == Some(crate::protocol::mcp::CacheScope::Public) {
                let now = crate::store::now_ms();
                if let Some(cache) = row.cache_hints(now).filter(|cache| cache.is_fresh_at(now)) {
                    *slot.reusable.lock() = Some((row.tools.clone(), cache));
                }
            }
            // Reported when the server is reconciled, not from the stored copy.
            let (vetting, _) = inner.vet_against(index, row.tool_fingerprints.as_ref(), &row.tools);
            // Checked as a listing is (a row saved by an older version may hold a tool a listing now
            // leaves out); what that leaves out is reported by the reconciliation too.
            let stored = crate::catalog::from_stored(row.tools.clone(), false, Default::default());
            let listing = crate::catalog::Listing { tools: stored.tools, ..Default::default() };
            let diagnostics = inner.project_into(index, listing, &vetting, &mut table);
            diagnostics.into_iter().for_each(|d| inner.report(d));
            to_reconcile.push(index);
        }
        let table = inner.finish_startup(table);
        let mut tools: Vec<ProjectedTool> = table.servers.iter().flat_map(|s| s.tools.iter().map(|t| (**t).clone())).collect();
        tools.extend(local::virtual_tools(&table));
        let diagnostics = inner.startup_diagnostics.lock().take().unwrap_or_default();
        for index in to_reconcile {
            inner.start_reconcile(index);
        }
        Ok((tools, diagnostics))
    }

    /// The MCP part of a system prompt for this toolset. Never contains server instructions.
    pub fn system_prompt(&self) -> String {
        let inner = &self.inner;
        let table = inner.routes.load();
        let servers: Vec<PromptServer> = inner
            .servers
            .iter()
            .enumerate()
            .filter(|(_, slot)| slot.entry.enabled)
            .map(|(index, slot)| {
                let view = &table.servers[index];
                PromptServer {
                    name: slot.label.clone(),
                    tool_count: view.tools.len(),
                    tier: view.tier.unwrap_or(Tier::Full),
                    degraded: view.tier.is_none() || *slot.state.borrow() == SlotState::Down,
                }
            })
            .collect();
        let abbreviated = table.any_abbreviated();
        prompt::compose_system_prompt(&servers, abbreviated.then_some(MCP_DESCRIBE_TOOL), abbreviated.then_some(MCP_SEARCH_TOOLS))
    }

    /// Resolves once every background reconciliation started by [`Toolset::rebuild`] has finished.
    pub async fn reconciled(&self) {
        let _ = self.inner.reconciling.subscribe().wait_for(|pending| *pending == 0).await;
    }

    /// The caller's AbortSignal fired for the call registered under `abort_id`.
    /// Does nothing for a call that already completed or was never started (JavaScript aborts a call
    /// still waiting for its flush by itself), so the registry holds only calls in flight.
    pub fn abort(&self, abort_id: u32) {
        let handle = self.inner.aborts.lock().get(&abort_id).cloned();
        if let Some(handle) = handle {
            handle.abort();
        }
    }

    /// The host's `signal` fired: every login in progress ends with `mcp_aborted`, and none starts again.
    pub fn abort_logins(&self) {
        self.inner.auth_host.logins.cancel();
    }

    /// Close every connection and end every task. Idempotent: later calls wait for the first to finish.
    /// Resolves within [`MAX_CLOSE_WAIT_MS`] (plus the stdio kill sequence) whatever the servers do:
    /// calls still waiting (for policy, auth, a connection) fail with `mcp_connection_closed`.
    pub async fn close(&self) {
        let inner = self.inner.clone();
        crate::logging::unroute(inner.log_id);
        inner.cancel.cancel();
        for slot in &inner.servers {
            // Calls waiting for a server to connect give up now, with mcp_connection_closed.
            slot.state.send_replace(SlotState::Down);
        }
        self.inner
            .closed
            .get_or_init(|| async move {
                let closing: Vec<_> = (0..inner.servers.len()).map(|i| tokio::spawn(inner.clone().close_server(i))).collect();
                let everything = async {
                    for handle in closing {
                        let _ = handle.await;
                    }
                    inner.tasks.close();
                    inner.tasks.wait().await;
                    for slot in &inner.servers {
                        slot.tasks.close();
                        slot.tasks.wait().await;
                    }
                };
                if tokio::time::timeout(Duration::from_millis(MAX_CLOSE_WAIT_MS), everything).await.is_err() {
                    inner.report(Diagnostic::InternalError {
                        server: LOCAL_SERVER.to_owned(),
                        message: format!("close() gave up waiting for the engine's tasks after {MAX_CLOSE_WAIT_MS} ms"),
                    });
                }
                inner.publish(RouteTable::empty(inner.servers.len()));
                // A closed toolset lets go of its OAuth authorizers, and with them of the shared HTTP client
                // they hold: the pool's connections (to any server) must not outlive the last open toolset.
                for slot in &inner.servers {
                    slot.authorizer.lock().take();
                }
            })
            .await;
    }
}

impl Inner {
    fn identity(&self, index: usize) -> ServerIdentity<'_> {
        let slot = &self.servers[index];
        ServerIdentity {
            index,
            name: &slot.entry.name,
            label: &slot.label,
            identity: &slot.identity,
            always_load: self.disclosure.always_load.contains(&slot.entry.name),
        }
    }

    fn project_into(&self, index: usize, mut listing: crate::catalog::Listing, vetting: &routes::Vetting, table: &mut RouteTable) -> Vec<Diagnostic> {
        // The entry's own allow/block lists; the toolset's filter is applied with the projection.
        listing.tools.retain(|tool| self.servers[index].entry.tools.admits(&tool.name));
        let options = ProjectionOptions { filter: &self.filter, disclosure: &self.disclosure };
        routes::project_server(&self.identity(index), listing, vetting, &options, table)
    }

    /// Make `table` the current one.
    fn publish(&self, table: RouteTable) -> Arc<RouteTable> {
        let table = Arc::new(table);
        let _no_call_between_check_and_send = self.publication.write();
        self.routes.store(table.clone());
        table
    }

    /// Publish the first table: from here on events go live.
    fn finish_startup(&self, table: RouteTable) -> Arc<RouteTable> {
        let table = {
            let _writer = self.projecting.lock();
            self.publish(table)
        };
        self.projected.send_replace(true);
        table
    }

    /// Replace one server's part of the map with a fresh listing and tell the owner what moved. The
    /// owner hears of changes in the order the tables were published (events are sent, without
    /// blocking, while the next writer waits).
    fn apply(&self, index: usize, listing: crate::catalog::Listing, vetting: &routes::Vetting) {
        let server = self.servers[index].entry.name.clone();
        let _writer = self.projecting.lock();
        let current = self.routes.load_full();
        let mut next = current.without_server(index);
        let diagnostics = self.project_into(index, listing, vetting, &mut next);
        next.keep_compiled(&current, index);
        let change = routes::diff(&server, &current.servers[index].tools, &next.servers[index].tools);
        let (virtual_before, virtual_after) = (local::virtual_tools(&current), local::virtual_tools(&next));
        self.publish(next);
        diagnostics.into_iter().for_each(|d| self.report(d));
        if virtual_before.len() != virtual_after.len() {
            self.events.tools_changed(&ToolsChange {
                server: LOCAL_SERVER.to_owned(),
                removed: virtual_before.iter().map(|t| t.name.clone()).collect(),
                added: virtual_after,
                changed: Vec::new(),
            });
        }
        if change.added.is_empty() && change.changed.is_empty() && change.removed.is_empty() {
            return;
        }
        self.events.tools_changed(&change);
        let names = |tools: &[ProjectedTool]| tools.iter().map(|t| t.name.clone()).collect::<Vec<_>>();
        self.events.diagnostic(&Diagnostic::ToolsChanged {
            server: change.server.clone(),
            message: format!(
                "server {:?} changed its tools: {} added, {} changed, {} removed",
                change.server,
                change.added.len(),
                change.changed.len(),
                change.removed.len()
            ),
            added: names(&change.added),
            changed: names(&change.changed),
            removed: change.removed.clone(),
        });
    }

    fn report(&self, diagnostic: Diagnostic) {
        let mut startup = self.startup_diagnostics.lock();
        match startup.as_mut() {
            Some(buffer) => buffer.push(diagnostic),
            None => {
                drop(startup);
                self.events.diagnostic(&diagnostic);
            }
        }
    }

    fn report_degraded(&self, index: usize, error: &McpError, stderr_tail: Option<String>) {
        let slot = &self.servers[index];
        let name = &slot.entry.name;
        tracing::warn!(toolset = self.log_id, server = %name, code = error.code(), error = %slot.secrets.redact(&error.to_string()), "server degraded");
        self.report(Diagnostic::ServerDegraded {
            server: name.clone(),
            message: slot.secrets.redact(&format!("MCP server {name:?} is unavailable: {error}")),
            error_code: error.code(),
            stderr_tail: stderr_tail.map(|tail| slot.secrets.redact(&tail)),
        });
    }

    fn report_name_collisions(&self) {
        let mut reported = HashSet::new();
        for slot in &self.servers {
            let labels: Vec<String> =
                self.servers.iter().filter(|other| other.entry.name == slot.entry.name).map(|other| other.label.clone()).collect();
            if labels.len() > 1 && reported.insert(slot.entry.name.clone()) {
                self.report(Diagnostic::ServerNameCollision {
                    server: slot.entry.name.clone(),
                    message: format!(
                        "{} servers are named {:?}; each keeps its tools under a suffixed name: {}",
                        labels.len(),
                        slot.entry.name,
                        labels.join(", ")
                    ),
                    labels,
                });
            }
        }
    }
}

/// The caching hints a row was stored with, if it has any.
/// A stored URL as it may appear in a message (a row written by an older version may hold a query).
fn stored_url(url: &str) -> String {
    url::Url::parse(url).map_or_else(|_| "(an unparseable url)".into(), |url| crate::egress::display_url(&url))
}

/// A task that panicked, as the error of the work it was doing.
fn panic_error(doing: &str, error: tokio::task::JoinError) -> McpError {
    let what = if error.is_panic() { "the engine panicked" } else { "the engine task was cancelled" };
    McpError::Internal(format!("{what} while {doing}; this is a bug in mcpferry"))
}

/// `logs: 'diagnostics'`: log events go out as they happen, like progress (never held for startup).
impl crate::logging::LogSink for Inner {
    fn log(&self, diagnostic: Diagnostic) {
        self.events.diagnostic(&diagnostic);
    }
}
