//! Many servers as one tool map: connect concurrently, isolate failures, route calls, and keep the
//! map current when a server announces `tools/list_changed`.

use crate::catalog::{self, Listing};
use crate::config::{ServerEntry, ServerKind, ToolsetConfig};
use crate::connection::{tool_outcome, AbortHandle, Completion, Connection, ConnectionEvents, Reply, RequestOptions, StartCall};
use crate::diagnostics::Diagnostic;
use crate::error::{McpError, Result};
use crate::guard::hosts::HostGuard;
use crate::guard::redact::Secrets;
use crate::guard::{containment, policy};
use crate::hooks::Hooks;
use crate::transport::http::Credential;
use crate::limits::MAX_CONNECT_TIMEOUT_MS;
use crate::config::DisclosureConfig;
use crate::projection::disclosure::{self, Tier, ToolText, MCP_DESCRIBE_TOOL, MCP_SEARCH_TOOLS};
use crate::projection::prompt::{self, PromptServer};
use crate::projection::search::{SearchDocument, SearchIndex};
use crate::projection::{naming, ProjectedTool};
use crate::protocol::mcp::Tool;
use crate::store::{self, ConnectionStore, StoredServer};
use crate::transport::stdio::StdioSpec;
use crate::transport::{http::HttpSpec, TransportOptions, TransportSpec};
use serde::Serialize;
use serde_json::value::RawValue;
use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, RwLock, Weak};
use std::time::Duration;
use tokio::sync::watch;

/// One tool call as the caller hands it over.
pub struct CallRequest {
    pub call_id: u32,
    /// Non-zero when the caller may abort it with [`Toolset::abort`].
    pub abort_id: u32,
    pub name: String,
    /// The arguments, checked as JSON once, here; `None` if they are not JSON (refused by `admit`).
    arguments: Option<Box<RawValue>>,
}

impl CallRequest {
    pub fn new(call_id: u32, abort_id: u32, name: String, arguments_json: String) -> Self {
        // Validates without copying: the text becomes the RawValue.
        let arguments = RawValue::from_string(arguments_json).ok();
        CallRequest { call_id, abort_id, name, arguments }
    }

    fn arguments(&self) -> &RawValue {
        self.arguments.as_deref().expect("admitted calls have JSON arguments")
    }
}

/// Receives every call's outcome: the raw result JSON, or the error.
pub trait CallSink: Send + Sync + 'static {
    fn complete(&self, call_id: u32, outcome: Result<Box<str>>);
}

enum Admitted {
    /// Answered without a server (`mcp__describe_tool`, `mcp__search_tools`).
    Local(Result<Box<str>>),
    Remote(Route),
}

/// The `server` of the tools mcpferry answers itself (`mcp__describe_tool`, `mcp__search_tools`).
pub const LOCAL_SERVER: &str = "mcpferry";
const DEFAULT_SEARCH_RESULTS: usize = 5;
const MAX_SEARCH_RESULTS: usize = 20;

/// Where the toolset reports to its owner (the JavaScript layer).
pub trait ToolsetEvents: Send + Sync + 'static {
    fn diagnostic(&self, diagnostic: &Diagnostic);
    /// The tool map changed after it was handed out; apply `change` in place.
    fn tools_changed(&self, change: &ToolsChange);
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

struct Inner {
    servers: Vec<ServerSlot>,
    hooks: Hooks,
    /// The static `allowedHosts` list, compiled once.
    allowed_hosts: Option<Arc<HostGuard>>,
    timeout: Duration,
    max_result_bytes: usize,
    filter: crate::guard::filter::ToolFilter,
    disclosure: DisclosureConfig,
    routes: RwLock<HashMap<String, Route>>,
    /// The search index over every projected tool, rebuilt when the map changes.
    search: RwLock<Option<Arc<ToolSearch>>>,
    /// Where catalogues and drift baselines persist. Without one there is no baseline.
    store: Option<Arc<dyn ConnectionStore>>,
    /// Background reconciliations still running (after a rebuild from storage).
    reconciling: watch::Sender<usize>,
    aborts: Mutex<HashMap<u32, Arc<AbortHandle>>>,
    events: Arc<dyn ToolsetEvents>,
    /// Diagnostics raised while connecting, returned with the tools so the caller sees them before
    /// `mcpTools` resolves. `None` once connected: later ones go straight to `events`.
    startup_diagnostics: Mutex<Option<Vec<Diagnostic>>>,
    /// Flips to true once the first projection is out, so a list_changed that races it is applied after.
    projected: watch::Sender<bool>,
    closing: AtomicBool,
    /// Flips with `closing`, for tasks that wait on something else meanwhile.
    closed_signal: watch::Sender<bool>,
    closed: tokio::sync::OnceCell<()>,
}

struct ServerSlot {
    entry: ServerEntry,
    label: String,
    connection: RwLock<Option<Arc<Connection>>>,
    /// This server's tools as currently projected, by remote name.
    tools: Mutex<Vec<ProjectedTool>>,
    /// One refresh at a time per server.
    refreshing: tokio::sync::Mutex<()>,
    /// The bearer sent to this server, rotated by `auth` on every call.
    credential: Credential,
    /// Values never to appear in anything this server's failures produce.
    secrets: Arc<Secrets>,
    state: watch::Sender<SlotState>,
    /// How this server's schemas are disclosed; `None` until its tools are projected.
    tier: Mutex<Option<Tier>>,
}

/// The search index and, by position, the projected names it answers with.
struct ToolSearch {
    index: SearchIndex,
    names: Vec<String>,
    descriptions: Vec<String>,
}

/// Whether calls to a server can go ahead, must wait for its (re)connection, or fail.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum SlotState {
    Connecting,
    Ready,
    Down,
}

#[derive(Clone)]
struct Route {
    server: usize,
    remote_name: Arc<str>,
    quarantined: bool,
    /// The tool as published, full schema included: what `mcp__describe_tool` answers from.
    definition: Arc<ProjectedTool>,
}

/// What the drift baseline says about one listing.
#[derive(Debug, Default)]
struct Vetting {
    quarantined: HashSet<String>,
    withheld: HashSet<String>,
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
        let identities: Vec<(&str, String)> =
            config.servers.iter().map(|s| (s.name.as_str(), s.identity())).collect();
        let labels = naming::server_labels(&identities);
        let servers: Vec<ServerSlot> = config
            .servers
            .into_iter()
            .zip(labels)
            .map(|(entry, label)| {
                let secrets = Arc::new(Secrets::default());
                match &entry.kind {
                    ServerKind::Stdio { env, .. } => env
                        .iter()
                        .filter(|(name, _)| crate::guard::redact::looks_secret(name))
                        .for_each(|(_, value)| secrets.add(value)),
                    ServerKind::StreamableHttp { headers, .. } | ServerKind::Sse { headers, .. } => {
                        headers.values().filter_map(|v| v.to_str().ok()).for_each(|v| secrets.add(v))
                    }
                }
                ServerSlot {
                    entry,
                    label,
                    connection: RwLock::new(None),
                    tools: Mutex::new(Vec::new()),
                    refreshing: tokio::sync::Mutex::new(()),
                    credential: Credential::default(),
                    secrets,
                    state: watch::channel(SlotState::Connecting).0,
                    tier: Mutex::new(None),
                }
            })
            .collect();
        Ok(Toolset {
            inner: Arc::new(Inner {
                servers,
                hooks,
                allowed_hosts,
                timeout: Duration::from_millis(config.timeout_ms),
                max_result_bytes: config.max_result_bytes,
                filter: config.filter,
                disclosure: config.disclosure,
                routes: RwLock::new(HashMap::new()),
                search: RwLock::new(None),
                store,
                reconciling: watch::channel(0).0,
                aborts: Mutex::new(HashMap::new()),
                events,
                startup_diagnostics: Mutex::new(Some(Vec::new())),
                projected: watch::channel(false).0,
                closing: AtomicBool::new(false),
                closed_signal: watch::channel(false).0,
                closed: tokio::sync::OnceCell::new(),
            }),
        })
    }

    /// Connect every enabled server at once and project their tools. A server that fails is reported
    /// as degraded; the others' tools are returned all the same.
    pub async fn connect(&self) -> (Vec<ProjectedTool>, Vec<Diagnostic>) {
        let inner = &self.inner;
        inner.report_name_collisions();
        let attempts: Vec<_> = (0..inner.servers.len())
            .filter(|&i| inner.servers[i].entry.enabled)
            .map(|i| {
                let inner = inner.clone();
                (i, tokio::spawn(async move { inner.connect_server(i).await }))
            })
            .collect();
        let mut tools = Vec::new();
        let mut taken = HashMap::new();
        for (index, attempt) in attempts {
            let slot = &inner.servers[index];
            let outcome = attempt.await.unwrap_or_else(|e| Err((McpError::Transport(e.to_string()), None)));
            let vetted = match outcome {
                Ok((connection, listing)) => match inner.vet(index, &listing.tools).await {
                    Ok(vetting) => Ok((connection, listing, vetting)),
                    Err(e) => {
                        connection.close().await;
                        Err((e, None))
                    }
                },
                Err(failure) => Err(failure),
            };
            match vetted {
                Ok((connection, listing, vetting)) if !inner.closing.load(Ordering::SeqCst) => {
                    let projected = inner.project(index, listing, &vetting, &mut taken);
                    *slot.tools.lock().unwrap() = projected.clone();
                    *slot.connection.write().unwrap() = Some(connection);
                    slot.state.send_replace(SlotState::Ready);
                    tools.extend(projected);
                }
                Ok((connection, ..)) => connection.close().await,
                Err((error, stderr_tail)) => {
                    slot.state.send_replace(SlotState::Down);
                    inner.report_degraded(index, &error, stderr_tail);
                }
            }
        }
        for slot in inner.servers.iter().filter(|s| !s.entry.enabled) {
            slot.state.send_replace(SlotState::Down);
        }
        let diagnostics = inner.finish_startup(taken);
        tools.extend(inner.virtual_tools());
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
        inner.report_name_collisions();
        let mut tools = Vec::new();
        let mut taken = HashMap::new();
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
                Some(row) if row.kind != slot.entry.kind_name() || row.url != slot.entry.url() => Some(McpError::Storage(format!(
                    "the stored row for server {:?} is a {} server at {}, not what is configured now; refused",
                    slot.entry.name,
                    row.kind,
                    row.url.as_deref().unwrap_or("(no url)")
                ))),
                Some(_) => None,
            };
            if let Some(error) = refusal {
                slot.state.send_replace(SlotState::Down);
                inner.report_degraded(index, &error, None);
                continue;
            }
            let row = row.expect("refused above when missing");
            let vetting = inner.vet_against(index, row.tool_fingerprints.as_ref(), &row.tools, false);
            let listing = Listing { tools: row.tools.clone(), rejected: Vec::new() };
            let projected = inner.project(index, listing, &vetting, &mut taken);
            *slot.tools.lock().unwrap() = projected.clone();
            tools.extend(projected);
            to_reconcile.push(index);
        }
        let diagnostics = inner.finish_startup(taken);
        tools.extend(inner.virtual_tools());
        inner.reconciling.send_modify(|n| *n += to_reconcile.len());
        for index in to_reconcile {
            tokio::spawn(inner.clone().reconcile(index));
        }
        Ok((tools, diagnostics))
    }

    /// The MCP part of a system prompt for this toolset. Never contains server instructions.
    pub fn system_prompt(&self) -> String {
        let inner = &self.inner;
        let servers: Vec<PromptServer> = inner
            .servers
            .iter()
            .filter(|slot| slot.entry.enabled)
            .map(|slot| {
                let tier = *slot.tier.lock().unwrap();
                PromptServer {
                    name: slot.label.clone(),
                    tool_count: slot.tools.lock().unwrap().len(),
                    tier: tier.unwrap_or(Tier::Full),
                    degraded: tier.is_none() || *slot.state.borrow() == SlotState::Down,
                }
            })
            .collect();
        let abbreviated = inner.any_abbreviated();
        prompt::compose_system_prompt(
            &servers,
            abbreviated.then_some(MCP_DESCRIBE_TOOL),
            abbreviated.then_some(MCP_SEARCH_TOOLS),
        )
    }

    /// Resolves once every background reconciliation started by [`Toolset::rebuild`] has finished.
    pub async fn reconciled(&self) {
        let _ = self.inner.reconciling.subscribe().wait_for(|pending| *pending == 0).await;
    }

    /// Start tool calls; each outcome goes to `sink` under its `call_id`. Calls to one server go out in
    /// one write. With no `policy`, no `auth` and a ready server, nothing here waits or spawns: the
    /// request is written from the calling thread and answered from the transport's reader.
    pub fn start_calls(&self, calls: Vec<CallRequest>, sink: &Arc<dyn CallSink>) {
        let inner = &self.inner;
        let mut by_server: HashMap<usize, Vec<(CallRequest, Route)>> = HashMap::new();
        for call in calls {
            match inner.admit(&call) {
                Ok(Admitted::Local(outcome)) => sink.complete(call.call_id, outcome),
                Ok(Admitted::Remote(route)) => {
                    let slot = &inner.servers[route.server];
                    let direct = inner.hooks.decide.is_none()
                        && !(slot.entry.is_http() && inner.hooks.auth.is_some())
                        && *slot.state.borrow() == SlotState::Ready;
                    if direct {
                        by_server.entry(route.server).or_default().push((call, route));
                    } else {
                        // Registered now, not in the task, so an abort that arrives before it runs is not lost.
                        let abort = (call.abort_id != 0).then(|| inner.register_abort(call.abort_id));
                        tokio::spawn(inner.clone().call_gated(call, route, abort, sink.clone()));
                    }
                }
                Err(error) => sink.complete(call.call_id, Err(error)),
            }
        }
        for (index, calls) in by_server {
            let Some(connection) = inner.servers[index].connection.read().unwrap().clone() else {
                for (call, _) in calls {
                    sink.complete(call.call_id, Err(McpError::Closed));
                }
                continue;
            };
            let aborts: Vec<Option<Arc<AbortHandle>>> =
                calls.iter().map(|(call, _)| (call.abort_id != 0).then(|| inner.register_abort(call.abort_id))).collect();
            let starts: Vec<StartCall> = calls
                .iter()
                .zip(&aborts)
                .map(|((call, route), abort)| StartCall {
                    remote_name: &route.remote_name,
                    arguments: call.arguments(),
                    abort: abort.as_deref(),
                    reply: Reply::Callback(inner.completion(index, call, sink)),
                })
                .collect();
            connection.start_calls(starts, inner.timeout);
        }
    }

    /// The caller's AbortSignal fired for the call registered under `abort_id`.
    /// Does nothing for a call that already completed or was never started (JavaScript aborts a call
    /// still waiting for its flush by itself), so the registry holds only calls in flight.
    pub fn abort(&self, abort_id: u32) {
        let handle = self.inner.aborts.lock().unwrap().get(&abort_id).cloned();
        if let Some(handle) = handle {
            handle.abort();
        }
    }

    /// Close every connection. Idempotent: later calls wait for the first to finish.
    pub async fn close(&self) {
        let inner = self.inner.clone();
        inner.closing.store(true, Ordering::SeqCst);
        inner.closed_signal.send_replace(true);
        for slot in &inner.servers {
            // Calls waiting for a server to connect give up now, with mcp_connection_closed.
            slot.state.send_replace(SlotState::Down);
        }
        self.inner
            .closed
            .get_or_init(|| async move {
                let connections: Vec<Arc<Connection>> =
                    inner.servers.iter().filter_map(|s| s.connection.write().unwrap().take()).collect();
                let closing: Vec<_> = connections.into_iter().map(|c| tokio::spawn(async move { c.close().await })).collect();
                for handle in closing {
                    let _ = handle.await;
                }
                inner.routes.write().unwrap().clear();
            })
            .await;
    }
}

impl Inner {
    /// The checks every call passes before anything is sent: open, known, not quarantined, arguments an object.
    fn admit(&self, call: &CallRequest) -> Result<Admitted> {
        if self.closing.load(Ordering::SeqCst) {
            return Err(McpError::Closed);
        }
        let name = call.name.as_str();
        if (name == MCP_DESCRIBE_TOOL || name == MCP_SEARCH_TOOLS) && self.any_abbreviated() {
            // Answered from the cached catalog: no server is contacted.
            let arguments = call.arguments.as_deref().map_or("", RawValue::get);
            return Ok(Admitted::Local(self.local_tool(name, arguments)));
        }
        let route = self.routes.read().unwrap().get(name).cloned().ok_or_else(|| {
            McpError::ToolUnavailable(format!(
                "tool {name:?} is not available: its server does not (or no longer) publish it. Do not call it again; \
                 choose another tool."
            ))
        })?;
        if route.quarantined {
            return Err(McpError::ToolQuarantined(format!(
                "tool {name:?} is quarantined: its definition changed since it was first trusted. Do not call it; \
                 tell the user the server must be re-trusted."
            )));
        }
        let is_object = call.arguments.as_deref().is_some_and(|raw| raw.get().starts_with('{'));
        if !is_object {
            return Err(McpError::InvalidArguments("tool arguments must be a JSON object".to_owned()));
        }
        Ok(Admitted::Remote(route))
    }

    /// Where one call's outcome goes: the `isError` check, redaction, the abort registry, the sink.
    fn completion(self: &Arc<Self>, index: usize, call: &CallRequest, sink: &Arc<dyn CallSink>) -> Completion {
        let (inner, sink, call_id, abort_id) = (self.clone(), sink.clone(), call.call_id, call.abort_id);
        Box::new(move |outcome| {
            if abort_id != 0 {
                inner.aborts.lock().unwrap().remove(&abort_id);
            }
            let outcome = tool_outcome(outcome).map(Box::<str>::from).map_err(|e| e.redacted(&inner.servers[index].secrets));
            sink.complete(call_id, outcome);
        })
    }

    /// A call that must wait first: for `policy.decide`, for `auth`, or for its server to be ready.
    async fn call_gated(self: Arc<Self>, call: CallRequest, route: Route, abort: Option<Arc<AbortHandle>>, sink: Arc<dyn CallSink>) {
        let index = route.server;
        let slot = &self.servers[index];
        let gate = async {
            if self.hooks.decide.is_some() {
                let request = policy::request_json(&call.name, &slot.entry.name, &route.remote_name, call.arguments());
                policy::authorize(&self.hooks, &call.name, request).await?;
            }
            let connection = self.ready_connection(index, &call.name).await?;
            if slot.entry.is_http() && self.hooks.auth.is_some() {
                // Re-resolved on every call, so a rotated token takes effect without reconnecting.
                self.authenticate(index).await?;
            }
            Ok(connection)
        };
        let gated = tokio::select! {
            gated = gate => gated,
            _ = async { match &abort { Some(a) => a.wait().await, None => std::future::pending().await } } => Err(McpError::Aborted),
        };
        let done = self.completion(index, &call, &sink);
        match gated {
            Ok(connection) => {
                let start = StartCall { remote_name: &route.remote_name, arguments: call.arguments(), abort: abort.as_deref(), reply: Reply::Callback(done) };
                connection.start_calls([start], self.timeout);
            }
            Err(error) => done(Err(error)),
        }
    }

    /// Hand the startup diagnostics over and publish the routes: from here on events go live.
    fn finish_startup(&self, routes: HashMap<String, Route>) -> Vec<Diagnostic> {
        *self.routes.write().unwrap() = routes;
        self.rebuild_search();
        let diagnostics = self.startup_diagnostics.lock().unwrap().take().unwrap_or_default();
        self.projected.send_replace(true);
        diagnostics
    }

    fn any_abbreviated(&self) -> bool {
        self.servers.iter().any(|slot| slot.tier.lock().unwrap().is_some_and(Tier::is_abbreviated))
    }

    /// `mcp__describe_tool` and `mcp__search_tools`, present while any server's schemas are abbreviated.
    fn virtual_tools(&self) -> Vec<ProjectedTool> {
        if !self.any_abbreviated() {
            return Vec::new();
        }
        let local = |name: &str, description: &str, input_schema: serde_json::Value| ProjectedTool {
            name: name.to_owned(),
            description: description.to_owned(),
            input_schema: crate::projection::json_text(&input_schema),
            server: LOCAL_SERVER.to_owned(),
            remote_name: name.to_owned(),
            title: None,
            output_schema: None,
            annotations: None,
        };
        vec![
            local(
                MCP_DESCRIBE_TOOL,
                "Get the full description and input schema of an MCP tool whose schema is abbreviated. Call it \
                 before calling such a tool when you are unsure of its parameters.",
                serde_json::json!({
                    "type": "object",
                    "properties": { "name": { "type": "string", "description": "The tool's full name, as listed (server__tool)." } },
                    "required": ["name"],
                }),
            ),
            local(
                MCP_SEARCH_TOOLS,
                "Search every MCP tool by what you want to do. Returns the best matches with their descriptions; \
                 use it when no listed tool obviously fits.",
                serde_json::json!({
                    "type": "object",
                    "properties": {
                        "query": { "type": "string", "description": "What you want to do, in a few words." },
                        "limit": { "type": "integer", "minimum": 1, "maximum": MAX_SEARCH_RESULTS, "description": "How many matches (default 5)." },
                    },
                    "required": ["query"],
                }),
            ),
        ]
    }

    /// The map changed: the search index is rebuilt on the next search, not now (it costs tens of
    /// milliseconds on a 2 000-tool catalog, and most toolsets are never searched).
    fn rebuild_search(&self) {
        *self.search.write().unwrap() = None;
    }

    fn search_index(&self) -> Arc<ToolSearch> {
        if let Some(search) = self.search.read().unwrap().clone() {
            return search;
        }
        let routes = self.routes.read().unwrap();
        let mut entries: Vec<(&String, &Route)> = routes.iter().filter(|(_, r)| !r.quarantined).collect();
        entries.sort_by(|a, b| a.0.cmp(b.0));
        let docs = entries
            .iter()
            .map(|(name, r)| {
                let schema: serde_json::Value = serde_json::from_str(r.definition.input_schema.get()).unwrap_or_default();
                SearchDocument::from_tool(name, &r.definition.description, &schema)
            })
            .collect();
        let search = Arc::new(ToolSearch {
            index: SearchIndex::build(docs),
            names: entries.iter().map(|(n, _)| (*n).clone()).collect(),
            descriptions: entries.iter().map(|(_, r)| r.definition.description.clone()).collect(),
        });
        drop(routes);
        *self.search.write().unwrap() = Some(search.clone());
        search
    }

    /// Answer `mcp__describe_tool` or `mcp__search_tools` from the cached catalog.
    fn local_tool(&self, name: &str, arguments_json: &str) -> Result<Box<str>> {
        let args: serde_json::Value = serde_json::from_str(arguments_json)
            .map_err(|_| McpError::InvalidArguments("tool arguments must be a JSON object".to_owned()))?;
        let text_result = |value: serde_json::Value| -> Result<Box<str>> {
            let text = serde_json::to_string_pretty(&value).expect("values serialize");
            Ok(serde_json::json!({ "content": [{ "type": "text", "text": text }], "structuredContent": value })
                .to_string()
                .into_boxed_str())
        };
        if name == MCP_DESCRIBE_TOOL {
            let wanted = args.get("name").and_then(|v| v.as_str()).unwrap_or_default();
            let routes = self.routes.read().unwrap();
            let Some(route) = routes.get(wanted) else {
                return Err(McpError::Tool(format!(
                    "there is no MCP tool named {wanted:?}; use {MCP_SEARCH_TOOLS} to find one"
                )));
            };
            let tool = &route.definition;
            return text_result(serde_json::json!({
                "name": wanted,
                "description": tool.description,
                "inputSchema": tool.input_schema,
                "server": tool.server,
            }));
        }
        let query = args.get("query").and_then(|v| v.as_str()).unwrap_or_default();
        let limit = args.get("limit").and_then(|v| v.as_u64()).map_or(DEFAULT_SEARCH_RESULTS, |n| (n as usize).clamp(1, MAX_SEARCH_RESULTS));
        let search = self.search_index();
        let matches: Vec<serde_json::Value> = search
            .index
            .search(query, limit)
            .into_iter()
            .map(|hit| serde_json::json!({ "name": search.names[hit.index], "description": search.descriptions[hit.index] }))
            .collect();
        text_result(serde_json::json!({ "query": query, "matches": matches }))
    }

    fn store_id(&self, index: usize) -> String {
        let entry = &self.servers[index].entry;
        store::server_id(&entry.name, entry.kind_name(), &entry.identity())
    }

    /// Persist this listing and check it against the drift baseline (recorded now if there is none).
    async fn vet(&self, index: usize, tools: &[Tool]) -> Result<Vetting> {
        let Some(store) = &self.store else { return Ok(Vetting::default()) };
        let entry = &self.servers[index].entry;
        let id = self.store_id(index);
        let row = StoredServer {
            id: id.clone(),
            name: entry.name.clone(),
            kind: entry.kind_name().to_owned(),
            url: entry.url(),
            tools: tools.to_vec(),
            tool_fingerprints: None,
        };
        store.save(row).await?;
        let baseline = store.claim_baseline(&id, store::fingerprints(tools)).await?;
        Ok(self.vet_against(index, Some(&baseline), tools, true))
    }

    fn vet_against(&self, index: usize, baseline: Option<&store::Fingerprints>, tools: &[Tool], report: bool) -> Vetting {
        let Some(baseline) = baseline else { return Vetting::default() };
        let drift = store::compare(baseline, tools);
        let server = &self.servers[index].entry.name;
        if report {
            for tool in &drift.changed {
                self.report(Diagnostic::ToolQuarantined {
                    server: server.clone(),
                    tool: tool.clone(),
                    message: format!("tool {tool:?} of server {server:?} changed since it was trusted; it is quarantined"),
                });
            }
            for tool in &drift.added {
                self.report(Diagnostic::ToolWithheld {
                    server: server.clone(),
                    tool: tool.clone(),
                    message: format!("tool {tool:?} of server {server:?} is not in its trusted baseline; it is withheld"),
                });
            }
            for tool in &drift.removed {
                self.report(Diagnostic::ToolRemoved {
                    server: server.clone(),
                    tool: tool.clone(),
                    message: format!("tool {tool:?} of server {server:?} is no longer published"),
                });
            }
        }
        Vetting { quarantined: drift.changed.into_iter().collect(), withheld: drift.added.into_iter().collect() }
    }

    /// The live connection for a call, waiting while the server is still being (re)connected.
    async fn ready_connection(&self, index: usize, name: &str) -> Result<Arc<Connection>> {
        let slot = &self.servers[index];
        let mut state = slot.state.subscribe();
        let settled = tokio::time::timeout(self.timeout, state.wait_for(|s| *s != SlotState::Connecting)).await;
        if self.closing.load(Ordering::SeqCst) {
            return Err(McpError::Closed);
        }
        let ready = matches!(settled, Ok(Ok(s)) if *s == SlotState::Ready);
        if !ready {
            return Err(McpError::Transport(format!("server {:?} is unavailable", slot.entry.name)));
        }
        // Reconciliation may have withdrawn the tool while this call waited.
        if !self.routes.read().unwrap().contains_key(name) {
            return Err(McpError::ToolUnavailable(format!(
                "tool {name:?} is not available: its server no longer publishes it. Do not call it again; choose another tool."
            )));
        }
        slot.connection.read().unwrap().clone().ok_or(McpError::Closed)
    }

    /// After a rebuild: connect, list, vet and correct the map in place.
    async fn reconcile(self: Arc<Self>, index: usize) {
        let slot = &self.servers[index];
        // A list_changed during this waits for it (see `refresh`), so it is applied after, not lost.
        let _one_at_a_time = slot.refreshing.lock().await;
        // close() during the handshake drops it: the half-open transport's Drop reaps the process.
        let mut closing = self.closed_signal.subscribe();
        let connected = tokio::select! {
            connected = self.clone().connect_server(index) => connected,
            _ = closing.wait_for(|closed| *closed) => Err((McpError::Closed, None)),
        };
        match connected {
            Ok((connection, listing)) if !self.closing.load(Ordering::SeqCst) => match self.vet(index, &listing.tools).await {
                Ok(vetting) => {
                    let stored = {
                        // Checked again under the slot's lock: close() may have run during the store I/O.
                        let mut current = slot.connection.write().unwrap();
                        let open = !self.closing.load(Ordering::SeqCst);
                        if open {
                            *current = Some(connection.clone());
                        }
                        open
                    };
                    if !stored {
                        connection.close().await;
                    } else {
                        self.apply(index, listing, &vetting);
                        slot.state.send_replace(SlotState::Ready);
                    }
                }
                Err(e) => {
                    connection.close().await;
                    slot.state.send_replace(SlotState::Down);
                    self.report_degraded(index, &e, None);
                }
            },
            Ok((connection, _)) => connection.close().await,
            Err((error, stderr_tail)) => {
                slot.state.send_replace(SlotState::Down);
                if !self.closing.load(Ordering::SeqCst) {
                    self.report_degraded(index, &error, stderr_tail);
                }
            }
        }
        self.reconciling.send_modify(|n| *n -= 1);
    }

    fn report(&self, diagnostic: Diagnostic) {
        let mut startup = self.startup_diagnostics.lock().unwrap();
        match startup.as_mut() {
            Some(buffer) => buffer.push(diagnostic),
            None => {
                drop(startup);
                self.events.diagnostic(&diagnostic);
            }
        }
    }

    /// Registered synchronously when the call starts; removed by its completion.
    fn register_abort(&self, abort_id: u32) -> Arc<AbortHandle> {
        let handle = Arc::new(AbortHandle::default());
        self.aborts.lock().unwrap().insert(abort_id, handle.clone());
        handle
    }

    /// Everything checked before a server is contacted: containment for stdio; for HTTP the host
    /// guard (no request at all to a host outside it) and the connect-time credential.
    async fn transport_spec(&self, index: usize) -> Result<TransportSpec> {
        let slot = &self.servers[index];
        match &slot.entry.kind {
            ServerKind::Stdio { command, args, env, cwd, root } => {
                let env = containment::child_environment(|name| std::env::var(name).ok(), env);
                let (program, cwd) = match root {
                    Some(root) => {
                        let contained = containment::contain(root, command, cwd.as_deref())?;
                        let program = match contained.program {
                            Some(program) => program,
                            None => containment::resolve_program(command, &env, Some(&contained.cwd))?,
                        };
                        (program, Some(contained.cwd))
                    }
                    None => (containment::resolve_program(command, &env, cwd.as_deref())?, cwd.clone()),
                };
                let reader_host = self.hooks.stdio_reader.clone();
                Ok(TransportSpec::Stdio(StdioSpec { program, args: args.clone(), env, cwd, reader_host }))
            }
            ServerKind::StreamableHttp { url, headers } | ServerKind::Sse { url, headers } => {
                let guard = self.host_guard(index).await?;
                if let Some(guard) = &guard {
                    guard.check_url(url)?;
                }
                if self.hooks.auth.is_some() {
                    self.authenticate(index).await?;
                }
                let spec = HttpSpec { url: url.clone(), headers: headers.clone(), guard, credential: slot.credential.clone() };
                Ok(match slot.entry.kind {
                    ServerKind::Sse { .. } => TransportSpec::Sse(spec),
                    _ => TransportSpec::StreamableHttp(spec),
                })
            }
        }
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

    /// Ask `auth` for this server's token and make it the credential. The token joins the secrets.
    async fn authenticate(&self, index: usize) -> Result<()> {
        let Some(auth) = &self.hooks.auth else { return Ok(()) };
        let slot = &self.servers[index];
        let name = &slot.entry.name;
        let token = auth
            .call(name.clone())
            .await
            .map_err(|_| McpError::Auth(format!("the auth callback failed for server {name:?}")))?;
        if token.is_empty() {
            return Err(McpError::Auth(format!("the auth callback returned no token for server {name:?}")));
        }
        slot.secrets.add(&token);
        slot.credential.set_bearer(&token)
    }

    async fn connect_server(
        self: Arc<Self>,
        index: usize,
    ) -> std::result::Result<(Arc<Connection>, Listing), (McpError, Option<String>)> {
        let spec = self.transport_spec(index).await.map_err(|e| (e, None))?;
        let listener = Arc::new(ServerListener { toolset: Arc::downgrade(&self), index });
        let handshake_timeout = self.timeout.min(Duration::from_millis(MAX_CONNECT_TIMEOUT_MS));
        let handshake = RequestOptions { timeout: handshake_timeout, abort: None };
        let options = TransportOptions { max_message_bytes: self.max_result_bytes, idle_timeout: self.timeout, secrets: self.servers[index].secrets.clone() };
        let connection = Connection::open(&spec, listener, options, &handshake).await?;
        let opts = RequestOptions { timeout: self.timeout, abort: None };
        match catalog::list_tools(&connection, &opts).await {
            Ok(listing) => Ok((Arc::new(connection), listing)),
            Err(e) => {
                connection.close().await;
                Err((e, connection.stderr_tail()))
            }
        }
    }

    /// Project one server's listing, claiming names in `taken` (projected name → route).
    fn project(&self, index: usize, listing: Listing, vetting: &Vetting, taken: &mut HashMap<String, Route>) -> Vec<ProjectedTool> {
        let slot = &self.servers[index];
        for rejected in &listing.rejected {
            self.report(Diagnostic::ToolRejected {
                server: slot.entry.name.clone(),
                tool: rejected.tool.clone(),
                message: format!("tool {:?} of server {:?} was left out: {}", rejected.tool, slot.entry.name, rejected.reason),
            });
        }
        let admitted: Vec<&Tool> = listing
            .tools
            .iter()
            .filter(|tool| self.filter.admits(&tool.name) && !vetting.withheld.contains(&tool.name))
            .collect();
        // One code path with a threshold: the server's tools all get the tier its catalog affords.
        let texts: Vec<ToolText> = admitted
            .iter()
            .map(|t| ToolText { name: &t.name, description: t.description.as_deref().unwrap_or(""), input_schema: &t.input_schema })
            .collect();
        let always_load = self.disclosure.always_load.contains(&slot.entry.name);
        let decision = disclosure::decide(&texts, self.disclosure.budget_tokens, always_load);
        if decision.floor_exceeds_budget {
            self.report(Diagnostic::DisclosureBudgetExceeded {
                server: slot.entry.name.clone(),
                tool_count: admitted.len(),
                floor_tokens: decision.floor_tokens,
                budget_tokens: self.disclosure.budget_tokens,
                message: format!(
                    "server {:?} publishes {} tools whose names and descriptions alone take ~{} tokens, over the disclosure \
                     budget of {}; narrow it with the tools filter (tools: {{ allow: [...] }} or {{ block: [...] }})",
                    slot.entry.name,
                    admitted.len(),
                    decision.floor_tokens,
                    self.disclosure.budget_tokens
                ),
            });
        }
        *slot.tier.lock().unwrap() = Some(decision.tier);
        admitted
            .into_iter()
            .map(|tool| {
                let quarantined = vetting.quarantined.contains(&tool.name);
                let name = self.claim_name(index, &tool.name, quarantined, taken);
                let full = Arc::new(if quarantined {
                    ProjectedTool::quarantined(name.clone(), &slot.entry.name, tool)
                } else {
                    ProjectedTool::new(name.clone(), &slot.entry.name, tool)
                });
                taken.get_mut(&name).expect("claimed above").definition = full.clone();
                let mut shown = (*full).clone();
                if !quarantined {
                    shown.input_schema = crate::projection::json_text(&disclosure::schema_for(decision.tier, &tool.input_schema));
                }
                shown
            })
            .collect()
    }

    fn claim_name(&self, index: usize, remote_name: &str, quarantined: bool, taken: &mut HashMap<String, Route>) -> String {
        let slot = &self.servers[index];
        let mut name = naming::project_tool_name(&slot.label, remote_name);
        let owned_by_other = |taken: &HashMap<String, Route>, name: &str| {
            taken.get(name).is_some_and(|r| r.server != index || &*r.remote_name != remote_name)
        };
        if owned_by_other(taken, &name) || name == MCP_DESCRIBE_TOOL || name == MCP_SEARCH_TOOLS {
            // `a` + `b__c` and `a__b` + `c` meet on one name; the later one is disambiguated by its identity.
            let original = format!("{}{}{}", slot.label, naming::SEPARATOR, remote_name);
            name = naming::rewrite(&original, &format!("{}\u{0}{}", slot.entry.identity(), remote_name));
        }
        if name != format!("{}{}{}", slot.label, naming::SEPARATOR, remote_name) && slot.label == slot.entry.name {
            self.report(Diagnostic::ToolNameRewritten {
                server: slot.entry.name.clone(),
                tool: remote_name.to_owned(),
                name: name.clone(),
                message: format!("tool {remote_name:?} of server {:?} is projected as {name:?} (provider-safe name)", slot.entry.name),
            });
        }
        let placeholder = Arc::new(ProjectedTool {
            name: name.clone(),
            description: String::new(),
            input_schema: crate::projection::json_text(&serde_json::Value::Null),
            server: String::new(),
            remote_name: remote_name.to_owned(),
            title: None,
            output_schema: None,
            annotations: None,
        });
        taken.insert(name.clone(), Route { server: index, remote_name: remote_name.into(), quarantined, definition: placeholder });
        name
    }

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

    fn report_degraded(&self, index: usize, error: &McpError, stderr_tail: Option<String>) {
        let slot = &self.servers[index];
        let name = &slot.entry.name;
        self.report(Diagnostic::ServerDegraded {
            server: name.clone(),
            message: slot.secrets.redact(&format!("MCP server {name:?} is unavailable: {error}")),
            error_code: error.code(),
            stderr_tail: stderr_tail.map(|tail| slot.secrets.redact(&tail)),
        });
    }

    /// Re-list one server after `tools/list_changed`, vet it against the baseline, update the map in place.
    async fn refresh(self: Arc<Self>, index: usize) {
        let _ = self.projected.subscribe().wait_for(|done| *done).await;
        let slot = &self.servers[index];
        let settled = slot.state.subscribe().wait_for(|s| *s != SlotState::Connecting).await.map(|s| *s);
        if !matches!(settled, Ok(SlotState::Ready)) {
            return;
        }
        let _one_at_a_time = slot.refreshing.lock().await;
        let Some(connection) = slot.connection.read().unwrap().clone() else { return };
        let opts = RequestOptions { timeout: self.timeout, abort: None };
        let vetted = match catalog::list_tools(&connection, &opts).await {
            Ok(listing) => self.vet(index, &listing.tools).await.map(|vetting| (listing, vetting)),
            Err(e) => Err(McpError::Protocol(format!("re-listing tools failed: {e}"))),
        };
        if self.closing.load(Ordering::SeqCst) {
            return;
        }
        match vetted {
            Ok((listing, vetting)) => self.apply(index, listing, &vetting),
            Err(e) => self.report_degraded(index, &e, None),
        }
    }

    /// Replace one server's part of the map with a fresh listing and tell the owner what moved.
    fn apply(&self, index: usize, listing: Listing, vetting: &Vetting) {
        let slot = &self.servers[index];
        let virtual_before = self.virtual_tools();
        let change = {
            let mut routes = self.routes.write().unwrap();
            routes.retain(|_, route| route.server != index);
            let fresh = self.project(index, listing, vetting, &mut routes);
            let mut current = slot.tools.lock().unwrap();
            let change = diff(&slot.entry.name, &current, &fresh);
            *current = fresh;
            change
        };
        self.rebuild_search();
        let virtual_after = self.virtual_tools();
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
}

fn diff(server: &str, before: &[ProjectedTool], after: &[ProjectedTool]) -> ToolsChange {
    let old: HashMap<&str, &ProjectedTool> = before.iter().map(|t| (t.name.as_str(), t)).collect();
    let new_names: HashSet<&str> = after.iter().map(|t| t.name.as_str()).collect();
    let mut change = ToolsChange { server: server.to_owned(), added: vec![], changed: vec![], removed: vec![] };
    for tool in after {
        match old.get(tool.name.as_str()) {
            None => change.added.push(tool.clone()),
            Some(previous) if *previous != tool => change.changed.push(tool.clone()),
            Some(_) => {}
        }
    }
    change.removed = before.iter().filter(|t| !new_names.contains(t.name.as_str())).map(|t| t.name.clone()).collect();
    change
}

/// A connection's link back to its toolset; weak, so a dropped toolset is not kept alive by its servers.
struct ServerListener {
    toolset: Weak<Inner>,
    index: usize,
}

impl ConnectionEvents for ServerListener {
    fn tools_list_changed(&self) {
        if let Some(toolset) = self.toolset.upgrade() {
            tokio::spawn(toolset.refresh(self.index));
        }
    }

    fn connection_lost(&self, reason: &McpError) {
        let Some(toolset) = self.toolset.upgrade() else { return };
        if toolset.closing.load(Ordering::SeqCst) {
            return;
        }
        // Before the connection is handed out, `connect` reports the failure itself.
        let slot = &toolset.servers[self.index];
        let Some(connection) = slot.connection.read().unwrap().clone() else { return };
        slot.state.send_replace(SlotState::Down);
        toolset.report_degraded(self.index, reason, connection.stderr_tail());
    }
}
