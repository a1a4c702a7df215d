//! The route table: which projected name reaches which server's tool. It is an immutable snapshot,
//! built by [`project_server`] (a pure function of a listing, its vetting and the disclosure options)
//! outside any lock the call path takes, then published whole. A call reads the snapshot current at
//! the moment it is sent; a reader never waits for a writer to finish projecting.

use crate::config::DisclosureConfig;
use crate::diagnostics::Diagnostic;
use crate::guard::filter::ToolFilter;
use crate::limits::MAX_REJECTION_DIAGNOSTICS;
use crate::projection::disclosure::{self, Tier, ToolText};
use crate::projection::search::{SearchDocument, SearchIndex};
use crate::projection::{naming, ProjectedTool};
use crate::protocol::mcp::Tool;
use crate::protocol::param_headers::ParamHeaders;
use crate::schema::tool::ToolSchemas;
use crate::session::catalog::Listing;
use std::collections::{HashMap, HashSet};
use std::sync::{Arc, OnceLock};

/// Where one projected name goes.
#[derive(Clone)]
pub(crate) struct Route {
    pub server: usize,
    pub remote_name: Arc<str>,
    pub quarantined: bool,
    /// The tool as published, full schema included: what `mcp__describe_tool` answers from, and what a
    /// call that waited (policy, auth) is re-checked against before it is sent.
    pub definition: Arc<ProjectedTool>,
    /// The parameters every call mirrors into `Mcp-Param-*` headers (2026-07-28 era); `None` for the
    /// tools that have none, which then cost a call nothing.
    pub param_headers: Option<ParamHeaders>,
    /// `definition`'s schemas, compiled on the first call; handed on to the next table while the
    /// definition stays the same ([`RouteTable::keep_compiled`]).
    pub schemas: Arc<ToolSchemas>,
}

/// One server's part of the map as the agent sees it.
#[derive(Clone, Default)]
pub(crate) struct ServerView {
    /// As shown: the route's own definition where the tier shows it whole (one allocation for both).
    pub tools: Arc<Vec<Arc<ProjectedTool>>>,
    /// `None` until the server's tools are projected.
    pub tier: Option<Tier>,
    /// The shared texts the projection points into, kept alive for the next toolset listing the same
    /// catalogue (see `catalog::shared`). Held, never read.
    #[allow(dead_code)]
    pub catalogue: Option<Arc<crate::session::catalog::shared::SharedTexts>>,
}

/// One published state of the whole map.
#[derive(Default)]
pub(crate) struct RouteTable {
    pub routes: HashMap<String, Route>,
    /// By server index.
    pub servers: Vec<ServerView>,
    /// Built on the first search of this snapshot, never on the JavaScript thread.
    search: OnceLock<Arc<ToolSearch>>,
}

/// The search index and, by position, the projected names and descriptions it answers with.
pub(crate) struct ToolSearch {
    pub index: SearchIndex,
    pub names: Vec<String>,
    pub descriptions: Vec<String>,
}

impl RouteTable {
    pub fn empty(server_count: usize) -> Self {
        RouteTable {
            routes: HashMap::new(),
            servers: vec![ServerView::default(); server_count],
            search: OnceLock::new(),
        }
    }

    /// A new table with `server`'s routes taken out, for that server to be projected again into it.
    pub fn without_server(&self, server: usize) -> Self {
        let routes =
            self.routes.iter().filter(|(_, r)| r.server != server).map(|(k, r)| (k.clone(), r.clone())).collect();
        RouteTable { routes, servers: self.servers.clone(), search: OnceLock::new() }
    }

    /// Hands `server`'s compiled schemas over from `previous` to the routes of this table whose
    /// definition is unchanged; a changed definition keeps its fresh, empty `ToolSchemas`.
    pub fn keep_compiled(&mut self, previous: &RouteTable, server: usize) {
        for (name, route) in self.routes.iter_mut().filter(|(_, r)| r.server == server) {
            if let Some(old) =
                previous.routes.get(name).filter(|old| old.server == server && old.definition == route.definition)
            {
                route.schemas = old.schemas.clone();
            }
        }
    }

    pub fn any_abbreviated(&self) -> bool {
        self.servers.iter().any(|s| s.tier.is_some_and(Tier::is_abbreviated))
    }

    pub fn search(&self) -> Arc<ToolSearch> {
        self.search
            .get_or_init(|| {
                let mut entries: Vec<(&String, &Route)> = self.routes.iter().filter(|(_, r)| !r.quarantined).collect();
                entries.sort_by(|a, b| a.0.cmp(b.0));
                let docs = entries
                    .iter()
                    .map(|(name, r)| {
                        let schema: serde_json::Value =
                            serde_json::from_str(r.definition.input_schema.get()).unwrap_or_default();
                        SearchDocument::from_tool(name, &r.definition.description, &schema)
                    })
                    .collect();
                Arc::new(ToolSearch {
                    index: SearchIndex::build(docs),
                    names: entries.iter().map(|(n, _)| (*n).clone()).collect(),
                    descriptions: entries.iter().map(|(_, r)| r.definition.description.to_string()).collect(),
                })
            })
            .clone()
    }
}

/// What the drift baseline says about one listing.
#[derive(Debug, Default)]
pub(crate) struct Vetting {
    pub quarantined: HashSet<String>,
    pub withheld: HashSet<String>,
}

/// Who a server is, for naming its tools.
pub(crate) struct ServerIdentity<'a> {
    pub index: usize,
    pub name: &'a str,
    pub label: &'a str,
    pub identity: &'a str,
    pub always_load: bool,
    /// The entry's own allow/block lists, applied before the toolset's filter.
    pub tools: &'a crate::guard::filter::ServerToolFilter,
}

impl ServerIdentity<'_> {
    pub fn admits(&self, tool: &str) -> bool {
        self.tools.admits(tool)
    }
}

/// The projection options shared by every server of a toolset.
pub(crate) struct ProjectionOptions<'a> {
    pub filter: &'a ToolFilter,
    pub disclosure: &'a DisclosureConfig,
}

/// Project one server's listing into `table`, claiming names against the routes already in it.
/// Pure: what it would report is returned, not sent.
pub(crate) fn project_server(
    server: &ServerIdentity<'_>,
    listing: Listing,
    vetting: &Vetting,
    options: &ProjectionOptions<'_>,
    table: &mut RouteTable,
) -> Vec<Diagnostic> {
    let mut diagnostics = Vec::new();
    // A server that publishes thousands of bad tools gets a few diagnostics and a count, not thousands.
    for rejected in listing.rejected.iter().take(MAX_REJECTION_DIAGNOSTICS) {
        diagnostics.push(Diagnostic::ToolRejected {
            server: server.name.to_owned(),
            tool: rejected.tool.clone(),
            message: format!("tool {:?} of server {:?} was left out: {}", rejected.tool, server.name, rejected.reason),
        });
    }
    if let Some(more) = listing.rejected.len().checked_sub(MAX_REJECTION_DIAGNOSTICS).filter(|n| *n > 0) {
        diagnostics.push(Diagnostic::ToolRejected {
            server: server.name.to_owned(),
            tool: format!("({more} more)"),
            message: format!(
                "{more} more tools of server {:?} were left out for the same kinds of reasons",
                server.name
            ),
        });
    }
    let admitted: Vec<&Tool> = listing
        .tools
        .iter()
        .filter(|tool| options.filter.admits(&tool.name) && !vetting.withheld.contains(&tool.name))
        .collect();
    // One code path with a threshold: the server's tools all get the tier its catalog affords.
    let texts: Vec<ToolText> = admitted
        .iter()
        .map(|t| ToolText {
            name: &t.name,
            description: t.description.as_deref().unwrap_or(""),
            input_schema: &t.input_schema,
            schema_tokens: listing.texts.as_ref().and_then(|texts| texts.get(&t.name)).map(|texts| texts.schema_tokens),
        })
        .collect();
    let budget = options.disclosure.budget_tokens;
    let decision = disclosure::decide(&texts, budget, server.always_load);
    if decision.floor_exceeds_budget {
        diagnostics.push(Diagnostic::DisclosureBudgetExceeded {
            server: server.name.to_owned(),
            tool_count: admitted.len(),
            floor_tokens: decision.floor_tokens,
            budget_tokens: budget,
            message: format!(
                "server {:?} publishes {} tools whose names and descriptions alone take ~{} tokens, over the disclosure \
                 budget of {budget}; narrow it with the tools filter (tools: {{ allow: [...] }} or {{ block: [...] }})",
                server.name,
                admitted.len(),
                decision.floor_tokens,
            ),
        });
    }
    let shown: Vec<Arc<ProjectedTool>> = admitted
        .into_iter()
        .map(|tool| {
            let quarantined = vetting.quarantined.contains(&tool.name);
            let name = claim_name(server, &tool.name, &mut table.routes, &mut diagnostics);
            let shared = listing.texts.as_ref().filter(|_| !quarantined);
            let texts = shared.and_then(|catalogue| catalogue.get(&tool.name));
            let full = match (shared, texts) {
                _ if quarantined => Arc::new(ProjectedTool::quarantined(name.clone(), server.name, tool)),
                // Shown alike by other toolsets (same catalogue, same name, same server name): one for all.
                (Some(catalogue), Some(texts)) => catalogue.projected(texts, name.clone(), server.name, tool),
                _ => Arc::new(ProjectedTool::new(name.clone(), server.name, tool)),
            };
            let shown = if !quarantined && decision.tier != Tier::Full {
                let mut abbreviated = (*full).clone();
                abbreviated.input_schema = disclosure::schema_for(decision.tier, &tool.input_schema);
                abbreviated.texts_id = None; // no longer the shared texts
                Arc::new(abbreviated)
            } else {
                full.clone()
            };
            let route = Route {
                server: server.index,
                remote_name: tool.name.as_str().into(),
                quarantined,
                definition: full,
                param_headers: listing.param_headers.get(&tool.name).cloned(),
                // Compiled once for every toolset showing this catalogue.
                schemas: texts.and_then(|t| t.schemas.clone()).unwrap_or_default(),
            };
            table.routes.insert(name, route);
            shown
        })
        .collect();
    table.servers[server.index] =
        ServerView { tools: Arc::new(shown), tier: Some(decision.tier), catalogue: listing.texts.clone() };
    table.search = OnceLock::new();
    diagnostics
}

/// The projected name for one remote tool: `label__tool`, made provider-safe, and disambiguated by the
/// server's identity when another tool (or a local tool) already holds it; every candidate is checked.
fn claim_name(
    server: &ServerIdentity<'_>,
    remote_name: &str,
    taken: &mut HashMap<String, Route>,
    diagnostics: &mut Vec<Diagnostic>,
) -> String {
    let is_taken = |name: &str| {
        super::local::is_reserved(name)
            || taken.get(name).is_some_and(|r| r.server != server.index || &*r.remote_name != remote_name)
    };
    let name = naming::claim_unique(server.label, remote_name, server.identity, is_taken);
    if name != format!("{}{}{}", server.label, naming::SEPARATOR, remote_name) && server.label == server.name {
        diagnostics.push(Diagnostic::ToolNameRewritten {
            server: server.name.to_owned(),
            tool: remote_name.to_owned(),
            name: name.clone(),
            message: format!(
                "tool {remote_name:?} of server {:?} is projected as {name:?} (provider-safe name)",
                server.name
            ),
        });
    }
    name
}

/// What moved between two projections of one server, for the owner to apply in place.
pub(crate) fn diff(server: &str, before: &[Arc<ProjectedTool>], after: &[Arc<ProjectedTool>]) -> super::ToolsChange {
    let old: HashMap<&str, &ProjectedTool> = before.iter().map(|t| (t.name.as_str(), &**t)).collect();
    let new_names: HashSet<&str> = after.iter().map(|t| t.name.as_str()).collect();
    let mut change = super::ToolsChange { server: server.to_owned(), added: vec![], changed: vec![], removed: vec![] };
    for tool in after {
        match old.get(tool.name.as_str()) {
            None => change.added.push((**tool).clone()),
            Some(previous) if *previous != &**tool => change.changed.push((**tool).clone()),
            Some(_) => {}
        }
    }
    change.removed = before.iter().filter(|t| !new_names.contains(t.name.as_str())).map(|t| t.name.clone()).collect();
    change
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::param_headers::param_headers_in;
    use crate::session::catalog::Rejected;
    use serde_json::json;

    fn tool(name: &str, schema: serde_json::Value) -> Tool {
        serde_json::from_value(json!({ "name": name, "inputSchema": schema })).unwrap()
    }

    fn project(listing: Listing) -> (RouteTable, Vec<Diagnostic>) {
        project_vetted(listing, &Vetting::default())
    }

    fn project_vetted(listing: Listing, vetting: &Vetting) -> (RouteTable, Vec<Diagnostic>) {
        let tools = Default::default();
        let server =
            ServerIdentity { index: 0, name: "srv", label: "srv", identity: "id", always_load: false, tools: &tools };
        let filter = ToolFilter::default();
        let disclosure = DisclosureConfig { budget_tokens: 1_000_000, always_load: Vec::new() };
        let mut table = RouteTable::empty(1);
        let diagnostics = project_server(
            &server,
            listing,
            vetting,
            &ProjectionOptions { filter: &filter, disclosure: &disclosure },
            &mut table,
        );
        (table, diagnostics)
    }

    /// Two toolsets listing the same catalogue from the same server: one copy of each schema between
    /// them, and one toolset's drift decision (a quarantine) is its own.
    #[test]
    fn toolsets_share_a_catalogues_texts_but_not_their_decisions() {
        let page = json!({ "tools": [
            { "name": "lookup", "description": "Look a word up.", "inputSchema": { "type": "object", "properties": { "word": { "type": "string" } } } },
            { "name": "define", "description": "Define a word.", "inputSchema": { "type": "object" } },
        ] })
        .to_string();
        let listing = || {
            let mut address = crate::session::catalog::shared::ListingAddress::new("routes-test-server", false);
            address.page(&page);
            let tools: Vec<Tool> =
                serde_json::from_value(serde_json::from_str::<serde_json::Value>(&page).unwrap()["tools"].clone())
                    .unwrap();
            let texts = crate::session::catalog::shared::texts_for(address, &tools);
            Listing { tools, texts: Some(texts), ..Listing::default() }
        };
        let (first, _) = project(listing());
        let drifted = Vetting { quarantined: ["define".to_owned()].into(), withheld: HashSet::new() };
        let (second, diagnostics) = project_vetted(listing(), &drifted);
        assert!(diagnostics.is_empty(), "{diagnostics:?}");
        let schema = |table: &RouteTable, name: &str| table.routes[name].definition.input_schema.get().as_ptr();
        assert_eq!(schema(&first, "srv__lookup"), schema(&second, "srv__lookup"), "one schema text for both");
        assert!(first.servers[0].tools.iter().zip(second.servers[0].tools.iter()).any(|(a, b)| a
            .input_schema
            .get()
            .as_ptr()
            == b.input_schema.get().as_ptr()));
        assert!(
            second.routes["srv__define"].quarantined && !first.routes["srv__define"].quarantined,
            "the quarantine is the second's alone"
        );
        assert_eq!(&*first.routes["srv__define"].definition.description, "Define a word.");
        assert!(second.routes["srv__define"].definition.description.starts_with("Unavailable"));
        // The projections are shared too, where shown alike.
        assert!(
            Arc::ptr_eq(&first.routes["srv__lookup"].definition, &second.routes["srv__lookup"].definition),
            "one projection for both"
        );
        // The compiled schemas are shared like the texts, except a quarantined tool's (never called).
        assert!(
            Arc::ptr_eq(&first.routes["srv__lookup"].schemas, &second.routes["srv__lookup"].schemas),
            "compiled once for both"
        );
        assert!(!Arc::ptr_eq(&first.routes["srv__define"].schemas, &second.routes["srv__define"].schemas));
        // A listing with no shared texts (a rebuild from storage) compiles its own.
        let (third, _) = project(Listing { texts: None, ..listing() });
        assert!(!Arc::ptr_eq(&first.routes["srv__lookup"].schemas, &third.routes["srv__lookup"].schemas));
    }

    fn annotated() -> serde_json::Value {
        json!({ "type": "object", "properties": { "region": { "type": "string", "x-mcp-header": "Region" } } })
    }

    #[test]
    fn a_route_carries_its_tools_designated_parameters() {
        let headers: ParamHeaders = param_headers_in(&annotated()).unwrap().into();
        let listing = Listing {
            tools: vec![tool("regional", annotated()), tool("plain", json!({ "type": "object" }))],
            rejected: vec![Rejected {
                tool: "invalid_space_in_name".into(),
                reason: "the x-mcp-header annotation \"My Region\" …".into(),
            }],
            param_headers: [("regional".to_owned(), headers.clone())].into(),
            cache: Default::default(),
            texts: None,
        };
        let (table, diagnostics) = project(listing);
        assert_eq!(table.routes["srv__regional"].param_headers.as_deref(), Some(&*headers));
        assert!(table.routes["srv__plain"].param_headers.is_none());
        // The tool left out for its annotation is told as every rejected tool is.
        let [Diagnostic::ToolRejected { tool, message, .. }] = diagnostics.as_slice() else {
            panic!("{diagnostics:?}")
        };
        assert_eq!(tool, "invalid_space_in_name");
        assert!(
            message.contains("\"invalid_space_in_name\" of server \"srv\" was left out: the x-mcp-header annotation"),
            "{message}"
        );
    }

    /// Before the 2026-07-28 era a listing has no designated parameters: the projection is what it was.
    #[test]
    fn legacy_listings_project_as_before() {
        let listing = Listing { tools: vec![tool("regional", annotated())], ..Listing::default() };
        let (table, diagnostics) = project(listing);
        assert!(diagnostics.is_empty());
        let route = &table.routes["srv__regional"];
        assert!(route.param_headers.is_none());
        assert_eq!(route.definition.input_schema.get(), annotated().to_string(), "the schema is shown as published");
    }

    #[test]
    fn compiled_schemas_outlive_a_relisting_only_while_the_definition_is_the_same() {
        let listing = |schema: serde_json::Value| Listing {
            tools: vec![tool("kept", json!({ "type": "object" })), tool("changed", schema)],
            ..Listing::default()
        };
        let (before, _) = project(listing(json!({ "type": "object", "properties": { "n": { "type": "integer" } } })));
        let (mut same, _) = project(listing(json!({ "type": "object", "properties": { "n": { "type": "integer" } } })));
        let (mut changed, _) =
            project(listing(json!({ "type": "object", "properties": { "n": { "type": "string" } } })));
        same.keep_compiled(&before, 0);
        changed.keep_compiled(&before, 0);
        let schemas = |table: &RouteTable, name: &str| table.routes[name].schemas.clone();
        assert!(Arc::ptr_eq(&schemas(&same, "srv__changed"), &schemas(&before, "srv__changed")));
        assert!(Arc::ptr_eq(&schemas(&changed, "srv__kept"), &schemas(&before, "srv__kept")));
        assert!(
            !Arc::ptr_eq(&schemas(&changed, "srv__changed"), &schemas(&before, "srv__changed")),
            "a new definition compiles afresh"
        );
        // Another server's routes are not this server's to take.
        let (mut other, _) = project(listing(json!({ "type": "object" })));
        other.keep_compiled(&before, 1);
        assert!(!Arc::ptr_eq(&schemas(&other, "srv__kept"), &schemas(&before, "srv__kept")));
    }
}
