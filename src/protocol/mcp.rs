//! MCP message shapes and protocol-version negotiation.

use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use serde_json::Value;

pub use super::json_text::JsonText;

/// The version this client asks for first.
pub const LATEST_PROTOCOL_VERSION: &str = "2025-11-25";
/// Every version this client can speak, newest first.
pub const SUPPORTED_PROTOCOL_VERSIONS: &[&str] = &["2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"];

pub const CLIENT_NAME: &str = "mcpferry";
pub const CLIENT_VERSION: &str = env!("CARGO_PKG_VERSION");

/// The `initialize` params. Capabilities are declared only for what the client implements: it
/// answers no roots or sampling requests, and elicitation only when the host handles it (`elicitation`
/// is the modes it declares, `None` without an `onElicitation`).
pub fn initialize_params(capabilities: &serde_json::Map<String, Value>) -> String {
    serde_json::json!({
        "protocolVersion": LATEST_PROTOCOL_VERSION,
        "capabilities": capabilities,
        "clientInfo": { "name": CLIENT_NAME, "version": CLIENT_VERSION },
    })
    .to_string()
}

/// The Skills extension's identifier (SEP-2640), under which a server declares it in
/// `capabilities.extensions`.
pub const SKILLS_EXTENSION: &str = "io.modelcontextprotocol/skills";

/// The capabilities this client declares, in either era: only what it implements, and MCP Apps only
/// when the host renders them.
/// `elicitation`: the `elicitation` capability (the modes declared, see `session::elicitation::Modes`).
pub fn client_capabilities(elicitation: Option<Value>, apps: bool) -> serde_json::Map<String, Value> {
    let mut capabilities = serde_json::Map::new();
    if let Some(modes) = elicitation {
        capabilities.insert("elicitation".into(), modes);
    }
    if apps {
        capabilities
            .insert("extensions".into(), serde_json::json!({ super::apps::APPS_EXTENSION: super::apps::capability() }));
    }
    capabilities
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct InitializeResult {
    pub protocol_version: String,
    #[serde(default)]
    pub capabilities: ServerCapabilities,
    #[serde(default)]
    pub server_info: Option<Implementation>,
    /// Third-party text. Kept for the record; never placed in anything shown to a model.
    #[serde(default)]
    pub instructions: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ServerCapabilities {
    #[serde(default)]
    pub tools: Option<ListChangedCapability>,
    /// Every other capability the server declared, kept for display (`server-connected`) only.
    #[serde(flatten)]
    pub others: serde_json::Map<String, Value>,
}

impl ServerCapabilities {
    /// The names of the declared capabilities, sorted.
    pub fn names(&self) -> Vec<String> {
        let mut names: Vec<String> =
            self.tools.iter().map(|_| "tools".to_owned()).chain(self.others.keys().cloned()).collect();
        names.sort();
        names
    }

    /// Whether it declared `listChanged: true` for `capability` (`resources`, `prompts`).
    pub fn list_changed(&self, capability: &str) -> bool {
        self.others.get(capability).and_then(|r| r.get("listChanged")).and_then(Value::as_bool).unwrap_or(false)
    }

    /// Whether it declared the Skills extension (SEP-2640): an object under
    /// `extensions["io.modelcontextprotocol/skills"]`.
    pub fn skills(&self) -> bool {
        self.others.get("extensions").and_then(|e| e.get(SKILLS_EXTENSION)).is_some_and(Value::is_object)
    }

    /// Whether it declared `resources: { subscribe: true }`.
    pub fn resources_subscribe(&self) -> bool {
        self.others.get("resources").and_then(|r| r.get("subscribe")).and_then(Value::as_bool).unwrap_or(false)
    }
}

/// Params that name a resource (`notifications/resources/updated`).
#[derive(Debug, Deserialize)]
pub struct UriParams {
    pub uri: String,
}

/// Whether a `notifications/subscriptions/acknowledged` says which notifications the server honored and
/// tool changes are not among them: the acknowledgement of a listen for resources, which leaves the
/// tools as they were.
pub fn acknowledges_no_tools(params: &str) -> bool {
    #[derive(Deserialize)]
    struct Ack {
        notifications: Option<serde_json::Map<String, Value>>,
    }
    serde_json::from_str::<Ack>(params).ok().and_then(|ack| ack.notifications).is_some_and(|honored| {
        !honored.contains_key("toolsListChanged") && honored.contains_key("resourceSubscriptions")
    })
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ListChangedCapability {
    #[serde(default)]
    pub list_changed: Option<bool>,
}

#[derive(Debug, Clone, Default, Deserialize, Serialize)]
pub struct Implementation {
    #[serde(default)]
    pub name: String,
    #[serde(default)]
    pub version: String,
}

/// Accept the server's answer only if it is a version this client speaks.
pub fn check_negotiated_version(version: &str) -> Result<&'static str, String> {
    SUPPORTED_PROTOCOL_VERSIONS.iter().copied().find(|v| *v == version).ok_or_else(|| {
        format!(
            "server answered with protocol version {version:?}, which this client does not support (supported: {})",
            SUPPORTED_PROTOCOL_VERSIONS.join(", ")
        )
    })
}

/// One tool as a server publishes it. Unknown fields are ignored; the ones kept are passed on.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Tool {
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// The server's text (see `json_text`): parsed into a tree only where one is read.
    #[serde(default = "empty_object_schema")]
    pub input_schema: JsonText,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_schema: Option<JsonText>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub annotations: Option<JsonText>,
    /// Its MCP Apps metadata (`_meta.ui`); the rest of `_meta` is not kept.
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none", with = "super::apps::tool_meta")]
    pub ui: Option<super::apps::ToolUi>,
}

impl Tool {
    /// Whether the model may be offered this tool: unless its server says only its app calls it.
    pub fn offered_to_model(&self) -> bool {
        self.ui.as_ref().is_none_or(super::apps::ToolUi::offered_to_model)
    }
}

fn empty_object_schema() -> JsonText {
    JsonText::from(serde_json::json!({ "type": "object" }))
}

/// Whether `schema` is what MCP requires of a tool's `inputSchema`: a JSON object whose root declares
/// `"type": "object"`. Model providers refuse a function whose parameters are anything else (no `type`,
/// another type, a list of types, an `enum` or `const` root), and one such tool fails every request of
/// the agent that is shown it.
pub fn is_object_schema(schema: &JsonText) -> bool {
    matches!(schema.root_type(), super::json_text::RootType::Declared(Value::String(kind)) if kind == "object")
}

/// One `tools/list` page with each tool left as its text, so one malformed tool can be refused on its
/// own (see `catalog`) instead of failing the whole page.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ListToolsPage<'a> {
    #[serde(borrow)]
    pub tools: Vec<&'a RawValue>,
    #[serde(default)]
    pub next_cursor: Option<String>,
    #[serde(default)]
    pub ttl_ms: Option<Value>,
    #[serde(default)]
    pub cache_scope: Option<Value>,
}

/// A list result's caching hints (2026-07-28 `CacheableResult`). The page structs keep them as JSON
/// values, so a server that writes one wrongly (a string TTL, an unknown scope) loses the hint, not the page.
#[derive(Debug, Clone, Copy, Default)]
pub struct PageCacheHints<'a> {
    pub ttl_ms: Option<&'a Value>,
    pub cache_scope: Option<&'a Value>,
}

/// Who may reuse a cached result: anyone (`public`), or only the same authorization context (`private`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CacheScope {
    Public,
    Private,
}

impl PageCacheHints<'_> {
    /// The time to live in milliseconds, if positive: 0, negative, absent or not a number means the
    /// result is stale as soon as it arrives.
    pub fn ttl_ms(&self) -> Option<u64> {
        let ttl = self.ttl_ms?.as_f64()?;
        (ttl.is_finite() && ttl >= 1.0).then_some(ttl as u64)
    }

    /// The declared scope; anything but the two known words counts as none declared.
    pub fn scope(&self) -> Option<CacheScope> {
        match self.cache_scope?.as_str()? {
            "public" => Some(CacheScope::Public),
            "private" => Some(CacheScope::Private),
            _ => None,
        }
    }
}

/// A catalogue's caching hints (2026-07-28 `ttlMs`/`cacheScope`, per page; older servers send none).
/// Each page has its own TTL, so the catalogue is fresh only while every page is: until the earliest
/// expiry. A page without a positive TTL makes the whole catalogue not cacheable.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CacheHints {
    /// When the first page arrived, in milliseconds since the Unix epoch (0 for a listing not read
    /// from a server).
    pub listed_at_ms: i64,
    /// How long after `listed_at_ms` the catalogue stays fresh (capped at `MAX_CATALOGUE_TTL_MS`);
    /// `None`: stale at once, as without hints.
    pub ttl_ms: Option<u64>,
    /// `Private` if any page said so, `Public` if every page said so, else `None` (see [`CacheHints::scope_for`]).
    pub scope: Option<CacheScope>,
}

impl CacheHints {
    /// When the catalogue stops being fresh, in ms since the epoch; `None` if it never was.
    pub fn fresh_until_ms(&self) -> Option<i64> {
        self.ttl_ms.map(|ttl| self.listed_at_ms.saturating_add(i64::try_from(ttl).unwrap_or(i64::MAX)))
    }

    pub fn is_fresh_at(&self, now_ms: i64) -> bool {
        self.fresh_until_ms().is_some_and(|until| now_ms < until)
    }

    /// The scope to act on. A declared one stands. A 2026-07-28 server must declare it, so a missing
    /// one is a server's omission: reusing a listing that may hold per-user tools across users is the
    /// harmful mistake, so it counts as private when the server is reached with credentials (auth,
    /// headers, OAuth: the listing may depend on who asks) and public otherwise (everyone reaching it
    /// sees the same). Before 2026-07-28 there are no hints at all: `None`, which stores and rebuilds
    /// treat as they always did.
    pub fn scope_for(&self, modern: bool, authorized: bool) -> Option<CacheScope> {
        match self.scope {
            Some(scope) => Some(scope),
            None if modern => Some(if authorized { CacheScope::Private } else { CacheScope::Public }),
            None => None,
        }
    }
}

/// One `tools/list` page parsed in one pass: the fast path for a page whose every tool is well formed.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ParsedToolsPage {
    pub tools: Vec<Tool>,
    #[serde(default)]
    pub next_cursor: Option<String>,
    #[serde(default)]
    pub ttl_ms: Option<Value>,
    #[serde(default)]
    pub cache_scope: Option<Value>,
}

/// The `name` of a tool definition that did not parse, to say which one was refused.
#[derive(Debug, Deserialize)]
pub struct ToolNameProbe<'a> {
    #[serde(borrow, default)]
    pub name: Option<&'a RawValue>,
}

/// What the engine needs to see of a `tools/call` result; everything else is forwarded untouched.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CallResultView<'a> {
    #[serde(default)]
    pub is_error: Option<bool>,
    #[serde(borrow, default)]
    pub content: Option<Vec<ContentView<'a>>>,
}

#[derive(Debug, Deserialize)]
pub struct ContentView<'a> {
    #[serde(borrow, default)]
    pub text: Option<std::borrow::Cow<'a, str>>,
}

/// The text a failed tool result carries, for the `MCP tool error:` message.
pub fn tool_error_text(view: &CallResultView<'_>) -> String {
    let texts: Vec<&str> = view.content.iter().flatten().filter_map(|c| c.text.as_deref()).collect();
    if texts.is_empty() {
        "the tool reported an error without a message".to_owned()
    } else {
        texts.join("\n")
    }
}

/// `tools/call` params, built without re-serializing the caller's arguments. `meta` is the era's own
/// `_meta` members (2026-07-28), `caller_meta` the call's own (its idempotency key, its trace context:
/// `CallContext::meta_members`, each member followed by a comma).
pub fn call_tool_params(
    remote_name: &str,
    arguments: &RawValue,
    progress_token: u64,
    meta: Option<&str>,
    caller_meta: Option<&str>,
) -> String {
    let extra = meta.map_or(0, str::len) + caller_meta.map_or(0, str::len);
    let mut out = String::with_capacity(64 + remote_name.len() + arguments.get().len() + extra);
    out.push_str("{\"name\":");
    super::jsonrpc::push_json_string(&mut out, remote_name);
    out.push_str(",\"arguments\":");
    out.push_str(arguments.get());
    out.push_str(",\"_meta\":{");
    if let Some(meta) = meta {
        out.push_str(meta);
        out.push(',');
    }
    if let Some(members) = caller_meta {
        out.push_str(members);
    }
    out.push_str("\"progressToken\":");
    out.push_str(&progress_token.to_string());
    out.push_str("}}");
    out
}

pub fn list_tools_params(cursor: Option<&str>) -> Option<String> {
    cursor.map(|c| serde_json::json!({ "cursor": c }).to_string())
}

/// `notifications/cancelled` from the server, for a request it sent us.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CancelledParams<'a> {
    #[serde(borrow)]
    pub request_id: &'a RawValue,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ProgressParams<'a> {
    #[serde(borrow)]
    pub progress_token: &'a RawValue,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn negotiation_accepts_only_known_versions() {
        for v in SUPPORTED_PROTOCOL_VERSIONS {
            assert_eq!(check_negotiated_version(v).unwrap(), *v);
        }
        let err = check_negotiated_version("2099-01-01").unwrap_err();
        assert!(err.contains("2099-01-01") && err.contains("2025-11-25"), "{err}");
    }

    #[test]
    fn elicitation_is_declared_only_with_a_host_handler() {
        use crate::session::elicitation::Modes;
        let capabilities = |modes: Option<Modes>, apps| {
            serde_json::from_str::<Value>(&initialize_params(&client_capabilities(modes.map(Modes::capability), apps)))
                .unwrap()["capabilities"]
                .clone()
        };
        assert_eq!(capabilities(None, false), serde_json::json!({}));
        assert_eq!(capabilities(Some(Modes::default()), false), serde_json::json!({ "elicitation": { "form": {} } }));
        assert_eq!(
            capabilities(Some(Modes { form: true, url: true }), false),
            serde_json::json!({ "elicitation": { "form": {}, "url": {} } })
        );
        assert_eq!(
            capabilities(None, true),
            serde_json::json!({ "extensions": { "io.modelcontextprotocol/ui": { "mimeTypes": ["text/html;profile=mcp-app"] } } })
        );
    }

    #[test]
    fn tool_error_text_joins_text_blocks() {
        let view: CallResultView = serde_json::from_str(
            r#"{"isError":true,"content":[{"type":"text","text":"bad date"},{"type":"image","data":"x"},{"type":"text","text":"try again"}]}"#,
        )
        .unwrap();
        assert_eq!(view.is_error, Some(true));
        assert_eq!(tool_error_text(&view), "bad date\ntry again");
    }

    #[test]
    fn call_params_embed_arguments_verbatim() {
        let args: &RawValue = serde_json::from_str(r#"{"x": [1,2]}"#).unwrap();
        let p = call_tool_params("a.b", args, 9, None, None);
        let v: Value = serde_json::from_str(&p).unwrap();
        assert_eq!(v["arguments"]["x"][1], 2);
        assert_eq!(v["_meta"]["progressToken"], 9);
        assert!(v["_meta"].get("idempotencyKey").is_none(), "no key, no member");
        let keyed: Value = serde_json::from_str(&call_tool_params(
            "a",
            args,
            9,
            Some("\"era\":1"),
            Some(r#""idempotencyKey":"run:\"7\"","#),
        ))
        .unwrap();
        assert_eq!(keyed["_meta"], serde_json::json!({ "era": 1, "idempotencyKey": "run:\"7\"", "progressToken": 9 }));
    }
}

#[cfg(test)]
mod session_capability_tests {
    use super::*;

    #[test]
    fn resource_subscriptions_and_resource_only_acknowledgements() {
        let caps: ServerCapabilities = serde_json::from_str(r#"{"resources":{"subscribe":true},"tools":{}}"#).unwrap();
        assert!(caps.resources_subscribe());
        let caps: ServerCapabilities = serde_json::from_str(r#"{"resources":{}}"#).unwrap();
        assert!(!caps.resources_subscribe());
        assert!(acknowledges_no_tools(r#"{"notifications":{"resourceSubscriptions":["a://b"]}}"#));
        assert!(!acknowledges_no_tools(r#"{"notifications":{"toolsListChanged":true}}"#));
        assert!(!acknowledges_no_tools(r#"{"notifications":{}}"#));
        assert!(!acknowledges_no_tools("{}"));
    }
}
