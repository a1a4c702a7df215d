//! Many servers as one tool map: connect concurrently, isolate failures, route calls, keep the map
//! current when a server announces `tools/list_changed`, and bring back a server that is lost.
//!
//! | part            | file            | what it owns                                                        |
//! |-----------------|-----------------|---------------------------------------------------------------------|
//! | shared          | `shared.rs`     | the toolset's fixed settings, the route table's publication, events |
//! | route table     | `routes.rs`     | the immutable snapshot of name → server tool, and pure projection   |
//! | supervisors     | `supervisor.rs` | one object per server: its state, connect, install, loss, close     |
//! |                 | `spec.rs`       | what a supervisor checks and prepares before it contacts the server |
//! |                 | `refresh.rs`    | its catalogue: listing, vetting, list_changed, `-32020`, TTLs       |
//! |                 | `recovery.rs`   | bringing a lost server back: backoff, crash-loop bound, cool-down   |
//! | call router     | `calls.rs`      | admission, gates (policy, auth, readiness), the last check and send |
//! | session         | `session.rs`    | resources, prompts, completions through the same gates; subscriptions |
//! | skills          | `skills.rs`     | skills (SEP-2640): listed, loaded and read per server, verified |
//! | local tools     | `local.rs`      | `mcp__describe_tool`, `mcp__search_tools`                           |
//!
//! Every task the toolset starts is tracked: call tasks by the toolset, a server's own work by its
//! supervisor. `close()` cancels them all, closes the connections and waits a bounded time.

mod calls;
mod client;
mod local;
mod model_resources;
mod recovery;
mod refresh;
mod routes;
mod session;
mod shared;
mod skills;
mod spec;
mod supervisor;

pub use calls::{CallRequest, CallSink};
pub use client::{ClientSession, ListBounds, ListingAbort, RemoteListing};
pub use local::LOCAL_SERVER;
pub use session::FromServer;
pub use shared::Hooks;
pub use supervisor::{LastError, ServerStatus};

use crate::config::ToolsetConfig;
use crate::diagnostics::Diagnostic;
use crate::error::{McpError, Result};
use crate::guard::hosts::HostGuard;
use crate::limits::MAX_CLOSE_WAIT_MS;
use crate::projection::disclosure::{Tier, MCP_DESCRIBE_TOOL, MCP_SEARCH_TOOLS};
use crate::projection::prompt::{self, PromptServer};
use crate::projection::{naming, ProjectedTool};
use crate::session::connection::AbortHandle;
use crate::store::ConnectionStore;
use parking_lot::Mutex;
use routes::RouteTable;
use serde::Serialize;
use shared::ToolsetContext;
use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;
use supervisor::Supervisor;
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
    /// `server` sent `notifications/resources/updated` for `uri` (a resource subscribed to).
    fn resource_updated(&self, _server: &str, _uri: &str) {}
    /// A request the engine made on its own for `server`, or an OAuth token request, ended
    /// (`telemetry::operation`). Only while the toolset's telemetry is on.
    fn operation(&self, _server: &str, _operation: &crate::telemetry::operation::Operation) {}
}

#[derive(Debug, Clone, Serialize)]
pub struct ToolsChange {
    pub server: String,
    pub added: Vec<ProjectedTool>,
    pub changed: Vec<ProjectedTool>,
    pub removed: Vec<String>,
}

pub struct Toolset {
    inner: Arc<ToolsetState>,
}

/// The toolset: what its supervisors share, the supervisors, and the calls in flight.
pub(crate) struct ToolsetState {
    shared: Arc<ToolsetContext>,
    /// One per configured server, in configuration order (a route's `server` is its index here).
    servers: Vec<Arc<Supervisor>>,
    aborts: Mutex<HashMap<u32, Arc<AbortHandle>>>,
    /// A client's listings in flight that a caller's signal may abort, by the id JavaScript gave them.
    listing_aborts: Mutex<HashMap<u32, Arc<AbortHandle>>>,
    /// Cancelled by `close()`; every supervisor's token is a child of it.
    cancel: CancellationToken,
    /// Call tasks (gated and local calls). A server's own tasks are its supervisor's.
    tasks: TaskTracker,
    closed: tokio::sync::OnceCell<()>,
    /// The compiled schemas (shared between toolsets) whose unusability this toolset has reported, each
    /// once per server: held weakly, which also keeps an address from naming a later definition.
    schemas_reported: Mutex<Vec<(std::sync::Weak<crate::schema::tool::ToolSchemas>, &'static str, usize)>>,
}

impl std::ops::Deref for ToolsetState {
    type Target = ToolsetContext;
    fn deref(&self) -> &ToolsetContext {
        &self.shared
    }
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
        crate::logging::init_from_env();
        let log_id = crate::logging::toolset_id();
        let operations = config.telemetry.then(|| {
            let events = events.clone();
            Arc::new(move |server: &str, operation: crate::telemetry::operation::Operation| {
                events.operation(server, &operation)
            }) as crate::telemetry::operation::OperationSink
        });
        let auth_host = Arc::new(crate::auth::AuthHost {
            // No plaintext default: without a store given, tokens live in this toolset's memory only.
            store: hooks
                .token_store
                .clone()
                .unwrap_or_else(|| Arc::new(crate::auth::store::MemoryTokenStore::default())),
            present: hooks.authorization_url.clone(),
            workload_assertion: hooks.workload_assertion.clone(),
            login_timeout: Duration::from_millis(config.authorization_timeout_ms),
            flow_timeout: Duration::from_millis(config.connect_timeout_ms),
            logins: CancellationToken::new(),
            operations: operations.clone(),
        });
        let server_count = config.servers.len();
        let shared = Arc::new(ToolsetContext {
            hooks,
            elicitation_modes: config.elicitation_modes,
            allowed_hosts,
            proxy: config.proxy,
            timeout: Duration::from_millis(config.timeout_ms),
            connect_timeout: Duration::from_millis(config.connect_timeout_ms),
            reconnect: config.reconnect,
            log_id,
            max_result_bytes: config.max_result_bytes,
            validation: config.validation,
            filter: config.filter,
            disclosure: local::budget_left(config.disclosure, config.expose_skills, config.expose_resources),
            routes: arc_swap::ArcSwap::from_pointee(RouteTable::empty(server_count)),
            publication: parking_lot::RwLock::new(()),
            projecting: Mutex::new(()),
            store,
            reconciling: watch::channel(0).0,
            events,
            startup_diagnostics: Mutex::new(Some(Vec::new())),
            projected: watch::channel(false).0,
            auth_host,
            operations,
            client_mode: std::sync::atomic::AtomicBool::new(false),
            server_log_level: config.server_log_level,
            expose_skills: config.expose_skills,
            expose_resources: config.expose_resources,
            apps: config.apps,
        });
        let servers = config
            .servers
            .into_iter()
            .zip(labels)
            .enumerate()
            .map(|(index, (entry, label))| {
                Arc::new(Supervisor::new(shared.clone(), index, entry, label, cancel.child_token()))
            })
            .collect();
        if config.logs_to_diagnostics {
            let sink: std::sync::Weak<dyn crate::logging::LogSink> = Arc::downgrade(&shared) as _;
            crate::logging::route(log_id, sink);
        }
        let inner = ToolsetState {
            shared,
            servers,
            aborts: Mutex::new(HashMap::new()),
            listing_aborts: Mutex::new(HashMap::new()),
            cancel,
            tasks: TaskTracker::new(),
            closed: tokio::sync::OnceCell::new(),
            schemas_reported: Mutex::default(),
        };
        Ok(Toolset { inner: Arc::new(inner) })
    }

    /// Connect every enabled server at once and project their tools. A server that fails is reported
    /// as degraded (and tried again later by its supervisor); the others' tools are returned all the same.
    pub async fn connect(&self) -> (Vec<ProjectedTool>, Vec<Diagnostic>) {
        let inner = &self.inner;
        inner.report_name_collisions();
        // close() waits for this whole connect, not just the attempts: nothing is published after it.
        let _owned_by_close = inner.tasks.token();
        let attempts: Vec<_> = inner
            .servers
            .iter()
            .filter(|s| s.entry.enabled)
            .map(|s| (s.clone(), s.tasks.spawn(s.clone().attach())))
            .collect();
        let mut table = RouteTable::empty(inner.servers.len());
        let mut attached = Vec::new();
        for (supervisor, attempt) in attempts {
            let outcome = attempt.await.unwrap_or_else(|e| {
                let error = panic_error("connecting to the server", e);
                inner.report(Diagnostic::InternalError {
                    server: supervisor.entry.name.clone(),
                    message: error.to_string(),
                });
                Err((error, None))
            });
            match outcome {
                Ok(server) => {
                    server.diagnostics.into_iter().for_each(|d| inner.report(d));
                    let diagnostics =
                        inner.project_into(&supervisor.identity_view(), server.listing, &server.vetting, &mut table);
                    diagnostics.into_iter().for_each(|d| inner.report(d));
                    attached.push((supervisor, server.cycle));
                }
                Err((error, stderr_tail)) => {
                    if !inner.cancel.is_cancelled() {
                        supervisor.report_degraded(&error, stderr_tail);
                    }
                    supervisor.after_failed_start(&error);
                }
            }
        }
        let table = inner.finish_startup(table);
        for (supervisor, _cycle) in attached {
            supervisor.go_live();
        }
        let mut tools: Vec<ProjectedTool> =
            table.servers.iter().flat_map(|s| s.tools.iter().map(|t| (**t).clone())).collect();
        tools.extend(local::virtual_tools(&table));
        tools.extend(local::model_tools(inner.expose_skills, inner.expose_resources));
        (tools, inner.take_startup_diagnostics())
    }

    /// Project the tool map from the store without contacting any server, then reconnect and reconcile
    /// each server in the background (see [`Toolset::reconciled`]). `stdio_allowed: false` leaves stdio
    /// servers out. An empty store is an error: a cold start is `connect`, not a silent fallback.
    pub async fn rebuild(&self, stdio_allowed: bool) -> Result<(Vec<ProjectedTool>, Vec<Diagnostic>)> {
        let inner = &self.inner;
        let store =
            inner.store.clone().ok_or_else(|| McpError::config("rebuilding from storage needs the storage option"))?;
        let rows = store.list().await?;
        if rows.is_empty() {
            return Err(McpError::Storage(
                "the connection store is empty: nothing was persisted to rebuild from (use mcpTools for a cold start)"
                    .into(),
            ));
        }
        let _owned_by_close = inner.tasks.token();
        inner.report_name_collisions();
        let mut table = RouteTable::empty(inner.servers.len());
        let mut to_reconcile = Vec::new();
        for slot in inner.servers.iter().filter(|s| s.entry.enabled) {
            let id = slot.store_id();
            let row = rows.iter().find(|r| r.id == id).or_else(|| rows.iter().find(|r| r.name == slot.entry.name));
            let refusal = match row {
                _ if !stdio_allowed && !slot.entry.is_http() => {
                    Some(McpError::config("stdio servers are not rebuilt here ({ stdio: false })"))
                }
                None => Some(McpError::Storage(format!(
                    "server {:?} was not persisted; it is not rebuilt",
                    slot.entry.name
                ))),
                Some(row)
                    if row.kind != slot.entry.kind_name()
                        || row.url != slot.entry.url().map(|u| slot.secrets.redact(&u)) =>
                {
                    Some(McpError::Storage(format!(
                        "the stored row for server {:?} is a {} server at {}, not what is configured now; refused",
                        slot.entry.name,
                        row.kind,
                        row.url.as_deref().map_or("(no url)".into(), stored_url)
                    )))
                }
                Some(_) => None,
            };
            if let Some(error) = refusal {
                slot.report_degraded(&error, None);
                // Refused by configuration, not by the server: nothing to retry.
                slot.note_error(&error);
                slot.set_state(supervisor::State::Failed);
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
                to_reconcile.push(slot.clone());
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
            let (vetting, _) = slot.vet_against(row.tool_fingerprints.as_ref(), &row.tools);
            // Checked as a listing is (a row saved by an older version may hold a tool a listing now
            // leaves out); what that leaves out is reported by the reconciliation too.
            let stored = crate::session::catalog::from_stored(row.tools.clone(), false, Default::default());
            let listing = crate::session::catalog::Listing { tools: stored.tools, ..Default::default() };
            let diagnostics = inner.project_into(&slot.identity_view(), listing, &vetting, &mut table);
            diagnostics.into_iter().for_each(|d| inner.report(d));
            slot.set_state(supervisor::State::Stale);
            to_reconcile.push(slot.clone());
        }
        let table = inner.finish_startup(table);
        let mut tools: Vec<ProjectedTool> =
            table.servers.iter().flat_map(|s| s.tools.iter().map(|t| (**t).clone())).collect();
        tools.extend(local::virtual_tools(&table));
        tools.extend(local::model_tools(inner.expose_skills, inner.expose_resources));
        let diagnostics = inner.take_startup_diagnostics();
        for slot in to_reconcile {
            slot.start_reconcile();
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
            .filter(|slot| slot.entry.enabled)
            .map(|slot| {
                let view = &table.servers[slot.index];
                PromptServer {
                    name: slot.label.clone(),
                    tool_count: view.tools.len(),
                    tier: view.tier.unwrap_or(Tier::Full),
                    degraded: view.tier.is_none()
                        || matches!(slot.current_state(), supervisor::State::Failed | supervisor::State::Closed),
                }
            })
            .collect();
        let abbreviated = table.any_abbreviated();
        let mut text = prompt::compose_system_prompt(
            &servers,
            abbreviated.then_some(MCP_DESCRIBE_TOOL),
            abbreviated.then_some(MCP_SEARCH_TOOLS),
        );
        if inner.expose_skills {
            let skills: Vec<(String, usize)> = inner
                .servers
                .iter()
                .filter(|slot| slot.entry.enabled)
                .map(|slot| (slot.label.clone(), slot.skills.listed_count()))
                .collect();
            if let Some(paragraph) = prompt::compose_skills_paragraph(&skills, local::MCP_SKILLS) {
                append_paragraph(&mut text, &paragraph);
            }
        }
        if inner.expose_resources {
            // The servers connected now that declared resources; one not reached yet is not named.
            let offering: Vec<String> = inner
                .servers
                .iter()
                .filter(|slot| slot.entry.enabled)
                .filter(|slot| {
                    slot.live_connection().is_some_and(|c| crate::session::declares(&c.session, "resources"))
                })
                .map(|slot| slot.label.clone())
                .collect();
            if let Some(paragraph) = prompt::compose_resources_paragraph(&offering, local::MCP_RESOURCES) {
                append_paragraph(&mut text, &paragraph);
            }
        }
        text
    }

    /// Every configured server's state, in configuration order.
    pub fn servers(&self) -> Vec<ServerStatus> {
        self.inner.servers.iter().map(|s| s.status()).collect()
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
            slot.set_state(supervisor::State::Closed);
        }
        self.inner
            .closed
            .get_or_init(|| async move {
                let closing: Vec<_> = inner.servers.iter().map(|s| tokio::spawn(s.clone().close())).collect();
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

impl ToolsetState {
    fn report_name_collisions(&self) {
        let mut reported = HashSet::new();
        for slot in &self.servers {
            let labels: Vec<String> = self
                .servers
                .iter()
                .filter(|other| other.entry.name == slot.entry.name)
                .map(|other| other.label.clone())
                .collect();
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

impl Supervisor {
    /// After a rebuild: connect, list, vet and correct the map in place, in the background. The server
    /// stays `stale` (calls wait) until the corrected table is published.
    fn start_reconcile(self: &Arc<Self>) {
        self.shared.reconciling.send_modify(|n| *n += 1);
        let supervisor = self.clone();
        self.tasks.spawn(async move {
            // Counted down however the task ends: finished, cancelled by close(), or panicked.
            let _done = CountDownOnDrop(&supervisor.shared.reconciling);
            if let Err((error, stderr_tail)) = supervisor.clone().reconnect_once().await {
                if !supervisor.cancel.is_cancelled() {
                    supervisor.report_degraded(&error, stderr_tail);
                }
                supervisor.after_failed_start(&error);
            }
        });
    }
}

struct CountDownOnDrop<'a>(&'a watch::Sender<usize>);

impl Drop for CountDownOnDrop<'_> {
    fn drop(&mut self) {
        self.0.send_modify(|n| *n -= 1);
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

fn append_paragraph(text: &mut String, paragraph: &str) {
    if !text.is_empty() {
        text.push_str("\n\n");
    }
    text.push_str(paragraph);
}

/// `logoutMcpServer`: `config_json` is `{"servers": [entry], "options": {tokenStore, allowedHosts?, proxy?}}`.
/// The tokens kept in `store` for the entry are revoked (where the authorization server offers it) and
/// forgotten. Its client registration stays: it is the application's, not the person's.
/// `store` is asked for the host's token store once the configuration was read.
pub async fn logout_server(
    config_json: &str,
    store: impl FnOnce() -> Result<Option<Arc<dyn crate::auth::store::TokenStore>>>,
) -> Result<()> {
    let config = crate::config::parse(config_json)?;
    let [entry] =
        <[_; 1]>::try_from(config.servers).map_err(|_| McpError::config("logoutMcpServer takes one server entry"))?;
    let store = store()?
        .ok_or_else(|| McpError::config("logoutMcpServer needs the tokenStore the server's tokens are kept in"))?;
    let guard = config.allowed_hosts.as_deref().map(HostGuard::new).transpose()?.map(Arc::new);
    let policy = crate::egress::EgressPolicy { guard, proxy: config.proxy };
    let (crate::config::ServerKind::StreamableHttp { url, oauth: Some(settings), .. }
    | crate::config::ServerKind::Sse { url, oauth: Some(settings), .. }) = &entry.kind
    else {
        return Err(McpError::config(format!("server {:?} has no oauth configuration to log out of", entry.name)));
    };
    if let Some(guard) = &policy.guard {
        guard.check_url(url)?;
    }
    let host = Arc::new(crate::auth::AuthHost {
        store,
        present: None,
        workload_assertion: None,
        login_timeout: Duration::from_millis(crate::limits::DEFAULT_AUTHORIZATION_TIMEOUT_MS),
        flow_timeout: Duration::from_millis(crate::limits::DEFAULT_CONNECT_TIMEOUT_MS),
        logins: CancellationToken::new(),
        operations: None,
    });
    let authorizer = crate::auth::Authorizer::new(
        entry.name.clone(),
        url.clone(),
        settings.clone(),
        host,
        &policy,
        Default::default(),
        Default::default(),
        CancellationToken::new(),
    )?;
    authorizer.logout().await
}
