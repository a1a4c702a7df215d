//! Tool discovery: `tools/list` followed page by page under bounds, with a per-server sanity check of
//! what the server published.
//!
//! A page is parsed in two steps: its envelope first, with each tool kept as raw text, then each tool on
//! its own. A tool that is malformed (`name: null`), nested past `MAX_JSON_DEPTH`, or over a size bound
//! is left out with a reason, and the rest of the server still loads: one bad definition must not cost
//! the user every good tool of that server.
//!
//! In the 2026-07-28 era a tool's `x-mcp-header` annotations are checked too: a tool with an invalid one
//! is left out the same way, and a valid tool's designated parameters go with the listing to its route.

pub mod shared;

use crate::error::{McpError, Result};
use crate::limits::{
    MAX_CATALOGUE_TTL_MS, MAX_JSON_DEPTH, MAX_LIST_PAGES, MAX_QUOTED_BYTES, MAX_REMOTE_TOOL_NAME_BYTES,
    MAX_TOOLS_PER_SERVER, MAX_TOOL_DESCRIPTION_BYTES,
};
pub use crate::protocol::mcp::CacheHints;
use crate::protocol::mcp::{self, CacheScope, ListToolsPage, PageCacheHints, ParsedToolsPage, Tool, ToolNameProbe};
use crate::protocol::nesting;
use crate::protocol::param_headers::{self, ParamHeaders};
use crate::session::connection::{Connection, RequestOptions};
use serde_json::value::RawValue;
use sha2::Digest;
use std::collections::{HashMap, HashSet};

/// A tool the catalog left out, and why. Reported as a diagnostic; the rest of the server still loads.
#[derive(Debug, Clone, PartialEq)]
pub struct Rejected {
    /// The tool's name as published (clamped to `MAX_QUOTED_BYTES`), or `tool #<position>` when it has
    /// no usable name.
    pub tool: String,
    pub reason: String,
}

#[derive(Debug, Default)]
pub struct Listing {
    pub tools: Vec<Tool>,
    pub rejected: Vec<Rejected>,
    /// By tool name, the parameters each call of that tool mirrors into `Mcp-Param-*` headers. Only
    /// tools that have any, and only in the 2026-07-28 era: empty otherwise.
    pub param_headers: HashMap<String, ParamHeaders>,
    /// What the pages' caching hints allow for the catalogue as a whole.
    pub cache: CacheHints,
    /// The tools' texts, shared with every toolset that listed the same bytes from the same server
    /// (see `shared`); `None` for a listing not read from a server.
    pub texts: Option<std::sync::Arc<shared::SharedTexts>>,
}

/// List every tool of a server. A repeated cursor or too many pages is an error: a server that does that
/// is broken or hostile, and a partial catalog would mislead. Past `MAX_TOOLS_PER_SERVER` tools, listing
/// stops and the rest are reported as left out. `modern`: the server speaks the 2026-07-28 era, whose
/// `x-mcp-header` annotations are checked (and an invalid one costs its tool); before it they mean nothing.
/// `identity`: the server's (kind and command or URL), which the listing's shared texts are addressed by.
pub async fn list_tools(
    connection: &Connection,
    opts: &RequestOptions<'_>,
    modern: bool,
    identity: &str,
) -> Result<Listing> {
    let mut pages = Pages { modern, ..Pages::default() };
    let mut address = shared::ListingAddress::new(identity, modern);
    let mut cursor: Option<String> = None;
    loop {
        let params = mcp::list_tools_params(cursor.as_deref());
        let raw = connection.request("tools/list", params.as_deref(), opts).await?;
        address.page(raw.get());
        cursor = pages.accept_at(raw.get(), crate::store::now_ms())?;
        if cursor.is_none() {
            let mut listing = pages.finish();
            listing.texts = Some(shared::texts_for(address, &listing.tools));
            return Ok(listing);
        }
    }
}

/// The cursor of the page after the `pages`-th of a listing by `method`, checked: a repeated cursor
/// (`cursors` holds the SHA-256 of every one seen: a server's cursors can be megabytes each) or a listing
/// past `MAX_LIST_PAGES` pages is an error, since a server that does that is broken or hostile. Every
/// paginated listing goes through it (tools here; resources, templates and prompts in `session`).
pub(crate) fn next_cursor(method: &str, cursors: &mut HashSet<[u8; 32]>, pages: usize, next: String) -> Result<String> {
    let seen: [u8; 32] = sha2::Sha256::digest(next.as_bytes()).into();
    if !cursors.insert(seen) {
        let shown: String = next.chars().take(64).collect();
        return Err(McpError::Protocol(format!("{method} repeated the cursor {shown:?}; refusing a pagination loop")));
    }
    if pages >= MAX_LIST_PAGES {
        return Err(McpError::Protocol(format!("{method} did not finish within {MAX_LIST_PAGES} pages")));
    }
    Ok(next)
}

/// A catalogue kept from an earlier listing (a store row), checked as a listing of a server of this
/// era would be: its `x-mcp-header` annotations give the calls' headers again, and a tool whose
/// annotation is invalid is left out as it would have been.
pub fn from_stored(tools: Vec<Tool>, modern: bool, cache: CacheHints) -> Listing {
    let mut pages = Pages { modern, annotated_page: modern, ..Pages::default() };
    for tool in tools {
        pages.entries += 1;
        pages.check(tool);
    }
    Listing { cache, ..pages.listing }
}

/// The bookkeeping of a paginated listing, apart from the I/O so it can be tested alone.
#[derive(Default)]
struct Pages {
    count: usize,
    /// SHA-256 of every cursor seen: a server's cursors can be megabytes each.
    cursors: HashSet<[u8; 32]>,
    /// Tool entries seen, kept or not: the position of the next one.
    entries: usize,
    /// Hashes of the names kept so far (keyed per listing). Not the names themselves: thousands of
    /// small strings living across the pages' parsing left the heap fragmented (W5 held ~8 MiB more).
    names: HashSet<u64>,
    name_hasher: std::collections::hash_map::RandomState,
    listing: Listing,
    /// The 2026-07-28 era: `x-mcp-header` annotations count.
    modern: bool,
    /// This page may hold annotations: its tools' schemas are walked. Most pages have none.
    annotated_page: bool,
    /// The earliest expiry of the pages so far (ms since the epoch); `None` once a page had no TTL.
    fresh_until_ms: Option<i64>,
    /// Some page declared `private`, some page declared no scope.
    any_private: bool,
    any_undeclared: bool,
}

impl Pages {
    /// Take one page (the `tools/list` result text); the cursor of the next page, if any is to be read.
    ///
    /// A page whose tools all parse and stay within the depth bound (checked once over the whole page)
    /// is read in one pass, as most pages are; any other page is read tool by tool, so one malformed
    /// tool is refused alone.
    #[cfg(test)]
    fn accept(&mut self, page: &str) -> Result<Option<String>> {
        self.accept_at(page, crate::store::now_ms())
    }

    /// [`Pages::accept`] of a page received at `received_ms` (ms since the epoch).
    fn accept_at(&mut self, page: &str, received_ms: i64) -> Result<Option<String>> {
        self.count += 1;
        self.annotated_page = self.modern && param_headers::may_annotate(page);
        // The page object and its `tools` array hold each tool two levels down.
        let one_pass = (!nesting::exceeds_depth(page.as_bytes(), MAX_JSON_DEPTH + 2))
            .then(|| serde_json::from_str::<ParsedToolsPage>(page).ok())
            .flatten()
            .filter(|parsed| self.entries + parsed.tools.len() <= MAX_TOOLS_PER_SERVER);
        let next_cursor = match one_pass {
            Some(parsed) => {
                self.note_hints(
                    PageCacheHints { ttl_ms: parsed.ttl_ms.as_ref(), cache_scope: parsed.cache_scope.as_ref() },
                    received_ms,
                );
                for tool in parsed.tools {
                    self.entries += 1;
                    self.check(tool);
                }
                parsed.next_cursor
            }
            None => {
                let page: ListToolsPage = serde_json::from_str(page)
                    .map_err(|e| McpError::Protocol(format!("tools/list returned a malformed result: {e}")))?;
                self.note_hints(
                    PageCacheHints { ttl_ms: page.ttl_ms.as_ref(), cache_scope: page.cache_scope.as_ref() },
                    received_ms,
                );
                for raw in page.tools {
                    if self.entries == MAX_TOOLS_PER_SERVER {
                        // One entry for the lot: reporting each would let the server flood the diagnostics.
                        self.listing.rejected.push(Rejected {
                            tool: label(raw, self.entries),
                            reason: format!(
                                "the server published more than {MAX_TOOLS_PER_SERVER} tools; this one and every later one \
                                 are left out"
                            ),
                        });
                        return Ok(None);
                    }
                    self.admit(raw);
                }
                page.next_cursor
            }
        };
        let Some(next) = next_cursor else { return Ok(None) };
        self::next_cursor("tools/list", &mut self.cursors, self.count, next).map(Some)
    }

    /// Fold one page's caching hints into the catalogue's.
    fn note_hints(&mut self, hints: PageCacheHints<'_>, received_ms: i64) {
        if self.count == 1 {
            self.listing.cache.listed_at_ms = received_ms;
            self.fresh_until_ms = Some(i64::MAX);
        }
        let expiry = hints.ttl_ms().map(|ttl| received_ms.saturating_add(ttl.min(MAX_CATALOGUE_TTL_MS) as i64));
        self.fresh_until_ms = match (self.fresh_until_ms, expiry) {
            (Some(so_far), Some(this)) => Some(so_far.min(this)),
            _ => None,
        };
        match hints.scope() {
            Some(CacheScope::Private) => self.any_private = true,
            Some(CacheScope::Public) => {}
            None => self.any_undeclared = true,
        }
    }

    /// Parse and check one tool definition; keep it or record why not.
    fn admit(&mut self, raw: &RawValue) {
        let position = self.entries;
        self.entries += 1;
        match parse_tool(raw) {
            Ok(tool) => self.check(tool),
            Err(reason) => self.listing.rejected.push(Rejected { tool: label(raw, position), reason }),
        }
    }

    /// Check one parsed tool; keep it or record why not.
    fn check(&mut self, tool: Tool) {
        match self.vet(&tool) {
            Ok(headers) => {
                if let Some(headers) = headers {
                    self.listing.param_headers.insert(tool.name.clone(), headers);
                }
                self.listing.tools.push(tool);
            }
            Err(reason) => self.listing.rejected.push(Rejected { tool: clamp(&tool.name), reason }),
        }
    }

    /// Why a parsed tool is left out, or the parameters its calls mirror into headers, if any.
    fn vet(&mut self, tool: &Tool) -> std::result::Result<Option<ParamHeaders>, String> {
        if tool.name.is_empty() {
            return Err("the tool has an empty name".to_owned());
        }
        if tool.name.len() > MAX_REMOTE_TOOL_NAME_BYTES {
            return Err(format!("the tool's name is longer than {MAX_REMOTE_TOOL_NAME_BYTES} bytes"));
        }
        if tool.description.as_ref().is_some_and(|d| d.len() > MAX_TOOL_DESCRIPTION_BYTES) {
            return Err(format!("the tool's description is longer than {MAX_TOOL_DESCRIPTION_BYTES} bytes"));
        }
        if !mcp::is_object_schema(&tool.input_schema) {
            return Err(not_an_object_schema(&tool.input_schema));
        }
        // Before the name is claimed: an invalid definition does not keep a valid one of that name out.
        let headers = if self.annotated_page && param_headers::may_annotate(tool.input_schema.get()) {
            param_headers::param_headers(&tool.input_schema)?
        } else {
            Vec::new()
        };
        if !self.names.insert(std::hash::BuildHasher::hash_one(&self.name_hasher, &tool.name)) {
            return Err("the server listed this tool name more than once; the first is kept".to_owned());
        }
        Ok((!headers.is_empty()).then(|| headers.into()))
    }

    fn finish(mut self) -> Listing {
        let cache = &mut self.listing.cache;
        cache.ttl_ms = self
            .fresh_until_ms
            .map(|until| until.saturating_sub(cache.listed_at_ms).max(0) as u64)
            .filter(|&ttl| ttl > 0);
        cache.scope = if self.any_private {
            Some(CacheScope::Private)
        } else if self.any_undeclared || self.count == 0 {
            None
        } else {
            Some(CacheScope::Public)
        };
        self.listing
    }
}

/// One tool definition, its depth checked before serde's recursive parser sees it.
fn parse_tool(raw: &RawValue) -> std::result::Result<Tool, String> {
    if nesting::exceeds_depth(raw.get().as_bytes(), MAX_JSON_DEPTH) {
        return Err(format!("the tool definition is nested deeper than {MAX_JSON_DEPTH} levels"));
    }
    serde_json::from_str(raw.get()).map_err(|e| format!("the tool definition is malformed: {e}"))
}

/// Why an `inputSchema` is not an object schema, in a few words (the server's text clamped).
fn not_an_object_schema(schema: &mcp::JsonText) -> String {
    use crate::protocol::json_text::RootType;
    let found = match schema.root_type() {
        RootType::NotAnObject => "it is not a JSON object".to_owned(),
        RootType::Undeclared => "its root has no \"type\"".to_owned(),
        RootType::Declared(other) => format!("its root has \"type\": {}", clamp(&other.to_string())),
    };
    format!("the tool's inputSchema is not an object schema (\"type\": \"object\"), which model providers require of parameters: {found}")
}

/// What to call a refused tool: its name when it has a string one, else its position in the listing.
fn label(raw: &RawValue, position: usize) -> String {
    let name = serde_json::from_str::<ToolNameProbe>(raw.get())
        .ok()
        .and_then(|probe| probe.name)
        .and_then(|name| serde_json::from_str::<String>(name.get()).ok());
    match name {
        Some(name) if !name.is_empty() => clamp(&name),
        _ => format!("tool #{position}"),
    }
}

/// A server-chosen name cut to a length fit for a diagnostic.
fn clamp(name: &str) -> String {
    if name.len() <= MAX_QUOTED_BYTES {
        return name.to_owned();
    }
    let mut end = MAX_QUOTED_BYTES;
    while !name.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &name[..end])
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn page(names: &[&str], next: Option<&str>) -> String {
        let tools: Vec<_> = names.iter().map(|n| json!({ "name": n, "inputSchema": { "type": "object" } })).collect();
        json!({ "tools": tools, "nextCursor": next }).to_string()
    }

    fn names(listing: &Listing) -> Vec<&str> {
        listing.tools.iter().map(|t| t.name.as_str()).collect()
    }

    #[test]
    fn follows_cursors_and_refuses_a_repeat() {
        let mut pages = Pages::default();
        assert_eq!(pages.accept(&page(&["a"], Some("c1"))).unwrap().as_deref(), Some("c1"));
        assert_eq!(pages.accept(&page(&["b"], Some("c2"))).unwrap().as_deref(), Some("c2"));
        let err = pages.accept(&page(&["c"], Some("c1"))).unwrap_err();
        assert!(err.to_string().contains("repeated the cursor"), "{err}");
    }

    #[test]
    fn stops_at_the_page_cap() {
        let mut pages = Pages::default();
        let mut result = Ok(None);
        for i in 0..=MAX_LIST_PAGES {
            result = pages.accept(&page(&[], Some(&format!("c{i}"))));
            if result.is_err() {
                break;
            }
        }
        assert_eq!(pages.count, MAX_LIST_PAGES);
        assert_eq!(result.unwrap_err().code(), "mcp_protocol_error");
    }

    #[test]
    fn rejects_duplicates_empty_names_and_bad_schemas() {
        let mut pages = Pages::default();
        let text = json!({ "tools": [
            { "name": "a", "inputSchema": { "type": "object" } },
            { "name": "a", "inputSchema": { "type": "object" } },
            { "name": "", "inputSchema": { "type": "object" } },
            { "name": "s", "inputSchema": "nope" },
        ] });
        pages.accept(&text.to_string()).unwrap();
        let listing = pages.finish();
        assert_eq!(names(&listing), ["a"]);
        assert_eq!(listing.rejected.len(), 3);
    }

    #[test]
    fn leaves_out_tools_whose_input_schema_is_not_an_object_schema() {
        let text = json!({ "tools": [
            { "name": "object", "inputSchema": { "type": "object", "properties": { "q": { "type": "string" } } } },
            { "name": "no_schema" },
            { "name": "string", "inputSchema": { "type": "string" } },
            { "name": "untyped", "inputSchema": { "properties": { "q": { "type": "string" } } } },
            { "name": "empty", "inputSchema": {} },
            { "name": "nullable", "inputSchema": { "type": ["object", "null"] } },
            { "name": "types", "inputSchema": { "type": ["string", "number"] } },
            { "name": "enum", "inputSchema": { "enum": [{ "a": 1 }] } },
            { "name": "const", "inputSchema": { "const": "x" } },
            { "name": "any_of", "inputSchema": { "anyOf": [{ "type": "object" }] } },
            { "name": "array", "inputSchema": [{ "type": "object" }] },
            { "name": "true", "inputSchema": true },
        ] });
        // Read in one pass, tool by tool (a malformed sibling), and from a store: the same rule.
        let malformed_sibling = text.to_string().replacen("[", "[42,", 1);
        let mut one_pass = Pages::default();
        one_pass.accept(&text.to_string()).unwrap();
        let mut by_tool = Pages::default();
        by_tool.accept(&malformed_sibling).unwrap();
        let stored = from_stored(serde_json::from_value(text["tools"].clone()).unwrap(), false, CacheHints::default());
        for listing in [one_pass.finish(), by_tool.finish(), stored] {
            assert_eq!(names(&listing), ["object", "no_schema"]);
            let rejected: Vec<&Rejected> = listing.rejected.iter().filter(|r| r.tool != "tool #0").collect();
            let names: Vec<&str> = rejected.iter().map(|r| r.tool.as_str()).collect();
            assert_eq!(
                names,
                ["string", "untyped", "empty", "nullable", "types", "enum", "const", "any_of", "array", "true"]
            );
            assert!(rejected.iter().all(|r| r.reason.contains("not an object schema")), "{rejected:?}");
            assert!(rejected[0].reason.ends_with(r#"its root has "type": "string""#), "{}", rejected[0].reason);
            assert!(rejected[1].reason.ends_with(r#"its root has no "type""#), "{}", rejected[1].reason);
            assert!(rejected[8].reason.ends_with("it is not a JSON object"), "{}", rejected[8].reason);
        }
    }

    /// Schemas are kept as the server wrote them, less whitespace; one a tree parse would refuse (a lone
    /// surrogate, a number past f64) costs its tool alone, as a malformed definition.
    #[test]
    fn schemas_are_kept_as_text_and_a_schema_a_parse_refuses_costs_only_its_tool() {
        let page = concat!(
            r#"{"tools":[{"name":"spaced","inputSchema":{ "type" : "object", "properties": {"z": {"description": "a  b"}, "a": {}} }},"#,
            r#"{"name":"surrogate","inputSchema":{"type":"object","description":"\ud800"}},"#,
            r#"{"name":"huge","inputSchema":{"type":"object","maximum":1e400}},"#,
            r#"{"name":"last","inputSchema":{"type":"object"},"outputSchema":{ "type":"object" },"annotations":{"readOnlyHint" : true}}]}"#
        );
        let mut pages = Pages::default();
        pages.accept(page).unwrap();
        let listing = pages.finish();
        assert_eq!(names(&listing), ["spaced", "last"]);
        assert_eq!(
            listing.tools[0].input_schema.get(),
            r#"{"type":"object","properties":{"z":{"description":"a  b"},"a":{}}}"#,
            "the server's key order and strings, no whitespace between tokens"
        );
        assert_eq!(listing.tools[1].output_schema.as_ref().unwrap().get(), r#"{"type":"object"}"#);
        assert_eq!(listing.tools[1].annotations.as_ref().unwrap().get(), r#"{"readOnlyHint":true}"#);
        let rejected: Vec<(&str, bool)> =
            listing.rejected.iter().map(|r| (r.tool.as_str(), r.reason.contains("malformed"))).collect();
        assert_eq!(rejected, [("surrogate", true), ("huge", true)], "{:?}", listing.rejected);
    }

    /// Before per-tool parsing, each of these made the whole page (and so the whole server) fail.
    #[test]
    fn one_malformed_tool_costs_only_itself() {
        let deep_schema = "{\"a\":".repeat(2_000) + "1" + &"}".repeat(2_000);
        let text = format!(
            r#"{{"tools":[
                {{"name":"good_1","inputSchema":{{"type":"object"}}}},
                {{"name":null,"inputSchema":{{"type":"object"}}}},
                {{"name":"deep","inputSchema":{deep_schema}}},
                {{"name":"typed_wrong","description":7}},
                42,
                {{"inputSchema":{{}}}},
                {{"name":"good_2"}}
            ]}}"#
        );
        let mut pages = Pages::default();
        assert_eq!(pages.accept(&text).unwrap(), None);
        let listing = pages.finish();
        assert_eq!(names(&listing), ["good_1", "good_2"]);
        let rejected: Vec<(&str, &str)> =
            listing.rejected.iter().map(|r| (r.tool.as_str(), r.reason.as_str())).collect();
        assert_eq!(rejected.len(), 5, "{rejected:?}");
        assert_eq!(rejected[0].0, "tool #1");
        assert!(rejected[0].1.contains("malformed") && rejected[0].1.contains("null"), "{}", rejected[0].1);
        assert_eq!(rejected[1], ("deep", "the tool definition is nested deeper than 100 levels"));
        assert_eq!(rejected[2].0, "typed_wrong");
        assert_eq!(rejected[3].0, "tool #4");
        assert_eq!(rejected[4].0, "tool #5");
    }

    #[test]
    fn keeps_the_first_tools_past_the_cap_and_reports_the_rest_once() {
        let mut pages = Pages::default();
        let first: Vec<String> = (0..MAX_TOOLS_PER_SERVER - 1).map(|i| format!("t{i}")).collect();
        let first: Vec<&str> = first.iter().map(String::as_str).collect();
        assert_eq!(pages.accept(&page(&first, Some("next"))).unwrap().as_deref(), Some("next"));
        // The page that crosses the cap ends the listing even though it names another page.
        assert_eq!(pages.accept(&page(&["last", "over_1", "over_2"], Some("more"))).unwrap(), None);
        let listing = pages.finish();
        assert_eq!(listing.tools.len(), MAX_TOOLS_PER_SERVER);
        assert_eq!(listing.tools.last().unwrap().name, "last");
        assert_eq!(listing.rejected.len(), 1);
        assert_eq!(listing.rejected[0].tool, "over_1");
        assert!(listing.rejected[0].reason.contains("more than 10000 tools"), "{}", listing.rejected[0].reason);
    }

    #[test]
    fn bounds_names_and_descriptions() {
        let long_name = "n".repeat(MAX_REMOTE_TOOL_NAME_BYTES + 1);
        let text = json!({ "tools": [
            { "name": long_name },
            { "name": "wordy", "description": "d".repeat(MAX_TOOL_DESCRIPTION_BYTES + 1) },
            { "name": "fine", "description": "d".repeat(MAX_TOOL_DESCRIPTION_BYTES) },
        ] });
        let mut pages = Pages::default();
        pages.accept(&text.to_string()).unwrap();
        let listing = pages.finish();
        assert_eq!(names(&listing), ["fine"]);
        assert_eq!(listing.rejected[0].tool.len(), MAX_QUOTED_BYTES + '…'.len_utf8());
        assert!(listing.rejected[0].reason.contains("name is longer"));
        assert_eq!(listing.rejected[1].tool, "wordy");
        assert!(listing.rejected[1].reason.contains("description is longer"));
    }

    /// `valid_tool` and some invalid tools of the conformance scenario http-invalid-tool-headers.
    fn annotated_page() -> String {
        let tool = |name: &str, property: serde_json::Value| json!({ "name": name, "inputSchema": { "type": "object", "properties": { "region": property } } });
        json!({ "tools": [
            tool("valid_tool", json!({ "type": "string", "x-mcp-header": "Region" })),
            tool("invalid_space_in_name", json!({ "type": "string", "x-mcp-header": "My Region" })),
            tool("invalid_number_header", json!({ "type": "number", "x-mcp-header": "Score" })),
            { "name": "plain", "inputSchema": { "type": "object" } },
        ] })
        .to_string()
    }

    #[test]
    fn modern_era_leaves_out_tools_with_invalid_annotations_and_keeps_the_headers_of_the_rest() {
        // The one-pass read and the tool-by-tool read (a malformed sibling) give the same outcome.
        let malformed_sibling = annotated_page().replacen("[", "[42,", 1);
        for text in [annotated_page(), malformed_sibling] {
            let mut pages = Pages { modern: true, ..Pages::default() };
            pages.accept(&text).unwrap();
            let listing = pages.finish();
            assert_eq!(names(&listing), ["valid_tool", "plain"]);
            let rejected: Vec<&Rejected> = listing.rejected.iter().filter(|r| r.tool != "tool #0").collect();
            assert_eq!(rejected.len(), 2, "{rejected:?}");
            assert_eq!(rejected[0].tool, "invalid_space_in_name");
            assert!(
                rejected[0].reason.contains("\"My Region\"") && rejected[0].reason.contains("token"),
                "{}",
                rejected[0].reason
            );
            assert_eq!(rejected[1].tool, "invalid_number_header");
            assert!(rejected[1].reason.contains("\"number\""), "{}", rejected[1].reason);
            assert_eq!(listing.param_headers.len(), 1, "only tools with designated parameters have an entry");
            let headers = &listing.param_headers["valid_tool"];
            assert_eq!(headers[0].header.as_str(), "mcp-param-region");
        }
    }

    #[test]
    fn an_invalid_definition_does_not_keep_out_a_valid_one_of_the_same_name() {
        let text = json!({ "tools": [
            { "name": "t", "inputSchema": { "type": "object", "x-mcp-header": "Root" } },
            { "name": "t", "inputSchema": { "type": "object" } },
        ] });
        let mut pages = Pages { modern: true, ..Pages::default() };
        pages.accept(&text.to_string()).unwrap();
        let listing = pages.finish();
        assert_eq!(names(&listing), ["t"]);
        assert!(listing.rejected[0].reason.contains("not statically reachable"), "{}", listing.rejected[0].reason);
    }

    #[test]
    fn legacy_era_ignores_annotations() {
        let mut pages = Pages::default();
        pages.accept(&annotated_page()).unwrap();
        let listing = pages.finish();
        assert_eq!(names(&listing), ["valid_tool", "invalid_space_in_name", "invalid_number_header", "plain"]);
        assert!(listing.rejected.is_empty());
        assert!(listing.param_headers.is_empty());
    }

    #[test]
    fn a_modern_page_without_annotations_is_not_walked() {
        let mut pages = Pages { modern: true, ..Pages::default() };
        pages.accept(&page(&["a", "b"], None)).unwrap();
        assert!(!pages.annotated_page);
        assert_eq!(names(&pages.finish()), ["a", "b"]);
    }

    fn hinted(names: &[&str], next: Option<&str>, ttl: serde_json::Value, scope: serde_json::Value) -> String {
        let mut page: serde_json::Value = serde_json::from_str(&page(names, next)).unwrap();
        page["ttlMs"] = ttl;
        page["cacheScope"] = scope;
        page.to_string()
    }

    #[test]
    fn the_catalogue_is_fresh_until_its_earliest_page_expires() {
        let mut pages = Pages::default();
        pages.accept_at(&hinted(&["a"], Some("c1"), json!(60_000), json!("public")), 1_000).unwrap();
        // The malformed sibling sends this page down the tool-by-tool path: its hints count the same.
        let second = hinted(&["b"], None, json!(5_000), json!("public")).replacen("[", "[42,", 1);
        pages.accept_at(&second, 2_000).unwrap();
        let cache = pages.finish().cache;
        assert_eq!(cache, CacheHints { listed_at_ms: 1_000, ttl_ms: Some(6_000), scope: Some(CacheScope::Public) });
        assert_eq!(cache.fresh_until_ms(), Some(7_000));
        assert!(cache.is_fresh_at(6_999));
        assert!(!cache.is_fresh_at(7_000));
    }

    #[test]
    fn a_page_without_a_positive_ttl_makes_the_catalogue_not_cacheable() {
        for ttl in [json!(0), json!(-5), json!(null), json!("60000"), json!(0.5)] {
            let mut pages = Pages::default();
            pages.accept_at(&hinted(&["a"], Some("c1"), json!(60_000), json!("public")), 1_000).unwrap();
            pages.accept_at(&hinted(&["b"], None, ttl.clone(), json!("public")), 1_000).unwrap();
            let listing = pages.finish();
            assert_eq!(listing.cache.ttl_ms, None, "{ttl}");
            assert!(!listing.cache.is_fresh_at(1_000));
            assert_eq!(names(&listing), ["a", "b"], "a bad hint costs the hint, not the page");
        }
        let mut pages = Pages::default();
        pages.accept_at(&page(&["a"], None), 1_000).unwrap();
        assert_eq!(
            pages.finish().cache,
            CacheHints { listed_at_ms: 1_000, ttl_ms: None, scope: None },
            "no hints at all"
        );
    }

    #[test]
    fn a_huge_ttl_is_capped() {
        let mut pages = Pages::default();
        pages.accept_at(&hinted(&["a"], None, json!(1e300), json!("public")), 1_000).unwrap();
        assert_eq!(pages.finish().cache.ttl_ms, Some(MAX_CATALOGUE_TTL_MS));
    }

    #[test]
    fn one_private_page_makes_the_catalogue_private_and_an_undeclared_one_leaves_it_to_the_server_entry() {
        let scope_of = |scopes: &[serde_json::Value]| {
            let mut pages = Pages::default();
            for (i, scope) in scopes.iter().enumerate() {
                let next = (i + 1 < scopes.len()).then(|| format!("c{i}"));
                pages
                    .accept_at(
                        &hinted(&["t"], next.as_deref(), json!(1_000), scope.clone())
                            .replace("\"t\"", &format!("\"t{i}\"")),
                        0,
                    )
                    .unwrap();
            }
            pages.finish().cache.scope
        };
        assert_eq!(scope_of(&[json!("public"), json!("public")]), Some(CacheScope::Public));
        assert_eq!(scope_of(&[json!("public"), json!("private")]), Some(CacheScope::Private));
        assert_eq!(scope_of(&[json!(null), json!("private")]), Some(CacheScope::Private));
        assert_eq!(scope_of(&[json!("public"), json!(null)]), None);
        assert_eq!(scope_of(&[json!("shared")]), None, "an unknown word declares nothing");

        let undeclared = CacheHints { scope: None, ..CacheHints::default() };
        assert_eq!(undeclared.scope_for(true, true), Some(CacheScope::Private), "modern, with credentials");
        assert_eq!(undeclared.scope_for(true, false), Some(CacheScope::Public), "modern, anyone's listing");
        assert_eq!(undeclared.scope_for(false, true), None, "before 2026-07-28 there are no hints");
        let declared = CacheHints { scope: Some(CacheScope::Public), ..CacheHints::default() };
        assert_eq!(declared.scope_for(true, true), Some(CacheScope::Public), "a declared scope stands");
    }

    #[test]
    fn a_stored_catalogue_is_checked_as_a_listing_of_its_era() {
        let parsed: ParsedToolsPage = serde_json::from_str(&annotated_page()).unwrap();
        let cache = CacheHints { listed_at_ms: 5, ttl_ms: Some(10), scope: Some(CacheScope::Public) };
        let modern = from_stored(parsed.tools.clone(), true, cache);
        assert_eq!(names(&modern), ["valid_tool", "plain"]);
        assert_eq!(modern.param_headers["valid_tool"][0].header.as_str(), "mcp-param-region");
        assert_eq!(modern.cache, cache);
        let legacy = from_stored(parsed.tools, false, cache);
        assert_eq!(names(&legacy).len(), 4);
        assert!(legacy.param_headers.is_empty());
    }

    #[test]
    fn a_malformed_envelope_still_fails_the_page() {
        let mut pages = Pages::default();
        for text in [r#"{"tools":{}}"#, r#"{"nextCursor":"x"}"#, "[]", r#"{"tools":[],"nextCursor":5}"#] {
            assert_eq!(pages.accept(text).unwrap_err().code(), "mcp_protocol_error", "{text}");
        }
    }
}
