//! What every supervisor of a toolset shares: the toolset's fixed settings, the route table with its
//! publication, and the way to the owner (diagnostics, tool-map changes). A supervisor holds it by
//! `Arc`; nothing here knows any one server.

use super::local;
use super::routes::{self, ProjectionOptions, RouteTable, ServerIdentity};
use super::{ToolsChange, ToolsetEvents, LOCAL_SERVER};
use crate::config::{DisclosureConfig, ReconnectConfig};
use crate::diagnostics::Diagnostic;
use crate::guard::filter::ToolFilter;
use crate::guard::hosts::HostGuard;
use crate::projection::ProjectedTool;
use crate::store::ConnectionStore;
use arc_swap::ArcSwap;
use parking_lot::{Mutex, RwLock};
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;

/// The embedding application's callbacks and host objects a toolset was given. Each is optional and
/// costs nothing when absent.
#[derive(Default, Clone)]
pub struct Hooks {
    /// Server name → bearer token for that server.
    pub auth: Option<Arc<dyn crate::hooks::Callback<String, String>>>,
    /// Server name → the hosts that server may reach.
    pub allowed_hosts: Option<Arc<dyn crate::hooks::Callback<String, Vec<String>>>>,
    /// Policy request (JSON) → decision (JSON).
    pub decide: Option<Arc<dyn crate::hooks::Callback<String, String>>>,
    /// Policy request with the `ask` reason (JSON) → approved?
    pub ask: Option<Arc<dyn crate::hooks::Callback<String, bool>>>,
    /// `onAuthorizationUrl`: login prompt (JSON `{url, server, grant, userCode?, expiresAt?}`) → ignored.
    pub authorization_url: Option<Arc<dyn crate::hooks::Callback<String, String>>>,
    /// A server's `oauth.assertion` (grant `workload_identity`): server name → the workload's assertion (a JWT).
    pub workload_assertion: Option<Arc<dyn crate::hooks::Callback<String, String>>>,
    /// Where OAuth tokens and client registrations are kept (`tokenStore`); a memory store when absent.
    pub token_store: Option<Arc<dyn crate::auth::store::TokenStore>>,
    /// Elicitation request (JSON: `{"server", "request"}`, see `elicitation::host_request`) → the
    /// host's result (JSON: `{"action", "content"?}`). Without it, no elicitation capability is declared.
    pub elicit: Option<Arc<dyn crate::hooks::Callback<String, String>>>,
    /// Reads stdio servers' stdout on the host's event loop when set (see `transport::stdio::ExternalReader`).
    pub stdio_reader: Option<Arc<dyn crate::transport::stdio::ReaderHost>>,
}

/// What every supervisor of one toolset shares: the host's hooks and options, the route table, the
/// store, the events owner. Each supervisor holds it; the toolset holds the supervisors.
pub(crate) struct ToolsetContext {
    pub hooks: Hooks,
    /// The elicitation modes declared to every server when `hooks.elicit` is set (`elicitationModes`).
    pub elicitation_modes: crate::session::elicitation::Modes,
    /// The static `allowedHosts` list, compiled once.
    pub allowed_hosts: Option<Arc<HostGuard>>,
    /// The `proxy` option, for every HTTP server.
    pub proxy: Option<url::Url>,
    pub timeout: Duration,
    /// How long a server has to start and finish its handshake (`connectTimeoutMs`).
    pub connect_timeout: Duration,
    /// How a lost server is recovered (`reconnect`); `None`: it is not.
    pub reconnect: Option<ReconnectConfig>,
    /// This toolset's `toolset` field in log events (see `logging`).
    pub log_id: u64,
    pub max_result_bytes: usize,
    /// `validateArguments`, `validateResults`, `exposeServerErrors`.
    pub validation: crate::schema::tool::ValidationConfig,
    pub filter: ToolFilter,
    pub disclosure: DisclosureConfig,
    /// The current route table. Read without locking; replaced whole by [`ToolsetContext::publish`].
    pub routes: ArcSwap<RouteTable>,
    /// Held for writing only for the instant a table is swapped in; a call holds it for reading from
    /// its last check to the write of its bytes, so no table is published between the two.
    pub publication: RwLock<()>,
    /// One writer at a time projects a server into the next table. No call ever takes it.
    pub projecting: Mutex<()>,
    /// Where catalogues and drift baselines persist. Without one there is no baseline.
    pub store: Option<Arc<dyn ConnectionStore>>,
    /// Background reconciliations still running (after a rebuild from storage).
    pub reconciling: watch::Sender<usize>,
    pub events: Arc<dyn ToolsetEvents>,
    /// Diagnostics raised while connecting, returned with the tools so the caller sees them before
    /// `mcpTools` resolves. `None` once connected: later ones go straight to `events`.
    pub startup_diagnostics: Mutex<Option<Vec<Diagnostic>>>,
    /// Flips to true once the first projection is out, so a list_changed that races it is applied after.
    pub projected: watch::Sender<bool>,
    /// The host's side of OAuth: the token store and the way to a person.
    pub auth_host: Arc<crate::auth::AuthHost>,
    /// Where the requests the engine makes on its own are told (`telemetry::operation`); `None` with
    /// `telemetry: { enabled: false }`.
    pub operations: Option<crate::telemetry::operation::OperationSink>,
    /// A single-server client (`connectMcpServer`): calls answer with the server's result as sent, and
    /// the server's announcements of tool changes are reported (`ToolsetEvents::tools_list_announced`).
    pub client_mode: AtomicBool,
    /// `serverLogLevel`: asked of every server that declares `logging`; logs below it are not delivered.
    pub server_log_level: Option<crate::server_log::Level>,
    /// `exposeSkills`: skills listed at connect, named in the system prompt, loaded through `mcp__skills`.
    pub expose_skills: bool,
    /// `exposeResources`: the servers' resources listed and read through `mcp__resources`.
    pub expose_resources: bool,
    /// `apps`: the MCP Apps extension is declared to every server.
    pub apps: bool,
}

impl ToolsetContext {
    pub fn is_client(&self) -> bool {
        self.client_mode.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Project one server's listing into `table`, its entry's own allow/block lists applied first.
    pub fn project_into(
        &self,
        server: &ServerIdentity<'_>,
        mut listing: crate::session::catalog::Listing,
        vetting: &routes::Vetting,
        table: &mut RouteTable,
    ) -> Vec<Diagnostic> {
        // An app-only tool (MCP Apps `visibility: ["app"]`) is not the model's to call; a single-server
        // client keeps it, so the host's app can call it through `callTool`.
        let client = self.is_client();
        listing.tools.retain(|tool| server.admits(&tool.name) && (client || tool.offered_to_model()));
        let options = ProjectionOptions { filter: &self.filter, disclosure: &self.disclosure };
        routes::project_server(server, listing, vetting, &options, table)
    }

    /// Make `table` the current one.
    pub fn publish(&self, table: RouteTable) -> Arc<RouteTable> {
        let table = Arc::new(table);
        let _no_call_between_check_and_send = self.publication.write();
        self.routes.store(table.clone());
        table
    }

    /// Publish the first table: from here on events go live.
    pub fn finish_startup(&self, table: RouteTable) -> Arc<RouteTable> {
        let table = {
            let _writer = self.projecting.lock();
            self.publish(table)
        };
        self.projected.send_replace(true);
        table
    }

    /// Replace one server's part of the map with a fresh listing and tell the owner what moved. The
    /// owner hears of changes in the order the tables were published (events are sent, without
    /// blocking, while the next writer waits). The vetting's own diagnostics (quarantined, withheld,
    /// removed) go out once the table is published, so they are in force when heard, and before the
    /// `tools-changed` that sums the change up: an owner acting on that one already knows which tools
    /// were held back.
    pub fn apply(
        &self,
        server: &ServerIdentity<'_>,
        listing: crate::session::catalog::Listing,
        vetting: &routes::Vetting,
        vetting_diagnostics: Vec<Diagnostic>,
    ) {
        let index = server.index;
        let _writer = self.projecting.lock();
        let current = self.routes.load_full();
        let mut next = current.without_server(index);
        let diagnostics = self.project_into(server, listing, vetting, &mut next);
        next.keep_compiled(&current, index);
        let change = routes::diff(server.name, &current.servers[index].tools, &next.servers[index].tools);
        let (virtual_before, virtual_after) = (local::virtual_tools(&current), local::virtual_tools(&next));
        self.publish(next);
        diagnostics.into_iter().chain(vetting_diagnostics).for_each(|d| self.report(d));
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

    /// To the owner: held with the startup diagnostics until the first table is out, then at once.
    pub fn report(&self, diagnostic: Diagnostic) {
        let mut startup = self.startup_diagnostics.lock();
        match startup.as_mut() {
            // Bounded: what a server can make the engine hold before anyone reads it is not unbounded.
            Some(buffer) if buffer.len() >= crate::limits::MAX_STARTUP_DIAGNOSTICS => {}
            Some(buffer) => buffer.push(diagnostic),
            None => {
                drop(startup);
                self.events.diagnostic(&diagnostic);
            }
        }
    }

    /// The diagnostics held while connecting; from now on they go out as they come.
    pub fn take_startup_diagnostics(&self) -> Vec<Diagnostic> {
        self.startup_diagnostics.lock().take().unwrap_or_default()
    }
}

/// `logs: 'diagnostics'`: log events go out as they happen, like progress (never held for startup).
impl crate::logging::LogSink for ToolsetContext {
    fn log(&self, diagnostic: Diagnostic) {
        self.events.diagnostic(&diagnostic);
    }
}
