//! `createMcpServer`: the engine serving the host's own tools, the other direction from the rest of
//! the crate. The host (JavaScript) owns only each tool's `execute`; the engine owns the wire, both
//! eras, the limits, the sessions and exactly-once.
//!
//! | file          | holds                                                                              |
//! |---------------|------------------------------------------------------------------------------------|
//! | `mod.rs`      | the published tools, the [`ToolHost`] that runs them, [`McpServerCore`], the limits |
//! | `calls.rs`    | one tool call: arguments checked, `execute`, its result shaped, exactly-once with a journal |
//! | `dispatch.rs` | JSON-RPC in, JSON-RPC out: which era a message speaks and what each method answers  |
//! | `stdio.rs`    | serving newline-delimited JSON-RPC on this process's stdin/stdout                   |
//! | `http.rs`     | serving Streamable HTTP (hyper 1): Origin/Host checks, sessions (2025), headers (2026) |
//!
//! Eras, as the client speaks them (`protocol::era`): a request whose `params._meta` carries
//! `io.modelcontextprotocol/protocolVersion` is a 2026-07-28 request, answered on its own (no session);
//! anything else is the 2025-11-25-and-older era, which starts with `initialize` (and, over HTTP, an
//! `Mcp-Session-Id`). One listener serves both, whichever a client speaks.

pub mod calls;
pub mod dispatch;
pub mod http;
pub mod stdio;

use crate::error::{McpError, Result};
use crate::limits::{MAX_SERVER_TOOLS, MAX_SERVER_TOOL_NAME_CHARS};
use crate::protocol::mcp::Tool;
use crate::store::journal::McpJournal;
use futures_util::future::BoxFuture;
use serde::Deserialize;
use serde_json::Value;
use std::collections::HashMap;
use std::sync::Arc;

/// What `execute` made of one call.
#[derive(Debug, Clone, PartialEq)]
pub enum Execution {
    /// The value it returned, as JSON (a `CallToolResult` if it has a `content` array).
    Value(String),
    /// It threw: the message only.
    Failed(String),
    /// The host's own schema (Standard Schema) refused the arguments before `execute` ran.
    Invalid(String),
    /// `execute` did not settle within the call timeout (the host aborted its signal).
    TimedOut,
}

/// The host side of the server: runs a tool's `execute`. `request` is
/// `{"arguments": …, "idempotencyKey": …}` as JSON.
pub trait ToolHost: Send + Sync + 'static {
    fn execute(&self, tool: &str, request: String) -> BoxFuture<'static, Result<Execution>>;
    /// A request the engine answered without `execute` (`initialize`, `tools/list`, `ping`, a refused
    /// `tools/call`, …) was answered: its report for the host's telemetry (`dispatch::Served`), as JSON.
    /// Called only for a server whose host records telemetry ([`ServerSpec::telemetry`]).
    fn served(&self, _report: String) {}
}

/// Reports on their way to the host and not yet taken there, at most `MAX_SERVED_REPORTS_PENDING`: a
/// report [`ReportBacklog::admit`] refuses is dropped rather than queued.
#[derive(Default)]
pub struct ReportBacklog(Arc<std::sync::atomic::AtomicUsize>);

/// A report's place in the backlog, given back when it is dropped (the host took the report, or it could
/// not be sent).
pub struct ReportPlace(Arc<std::sync::atomic::AtomicUsize>);

impl ReportBacklog {
    pub fn admit(&self) -> Option<ReportPlace> {
        use std::sync::atomic::Ordering;
        let admitted = self
            .0
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |pending| {
                (pending < crate::limits::MAX_SERVED_REPORTS_PENDING).then_some(pending + 1)
            })
            .is_ok();
        admitted.then(|| ReportPlace(self.0.clone()))
    }
}

impl Drop for ReportPlace {
    fn drop(&mut self) {
        self.0.fetch_sub(1, std::sync::atomic::Ordering::AcqRel);
    }
}

/// Checks a tool's arguments before `execute` (the engine's JSON Schema validator when it compiles the
/// tool's input schema): the reason they are refused, or `Ok`.
pub type ArgumentCheck = Box<dyn Fn(&Value) -> std::result::Result<(), String> + Send + Sync>;

/// One tool as the host declares it (`createMcpServer({ tools })`, the TS layer having turned each
/// entry into JSON Schema): the published definition, as a client sees it in `tools/list`.
#[derive(Debug, Clone)]
pub struct ToolSpec {
    pub tool: Tool,
    /// The host checks the arguments itself (a Standard Schema), so the engine does not check them again.
    pub host_validates: bool,
}

/// Read from one JSON object twice, the tool and the flag: a tool keeps its schemas as text, which
/// `#[serde(flatten)]`'s buffering cannot hold.
impl<'de> Deserialize<'de> for ToolSpec {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> std::result::Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(rename_all = "camelCase")]
        struct Flags {
            #[serde(default)]
            host_validates: bool,
        }
        let raw = Box::<serde_json::value::RawValue>::deserialize(deserializer)?;
        let tool: Tool = serde_json::from_str(raw.get()).map_err(serde::de::Error::custom)?;
        let Flags { host_validates } = serde_json::from_str(raw.get()).map_err(serde::de::Error::custom)?;
        Ok(ToolSpec { tool, host_validates })
    }
}

/// `createMcpServer`'s options as the engine reads them.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ServerSpec {
    #[serde(default = "default_name")]
    pub name: String,
    #[serde(default = "default_version")]
    pub version: String,
    /// Third-party-facing text for clients; sent in `initialize` and `server/discover`.
    #[serde(default)]
    pub instructions: Option<String>,
    pub tools: Vec<ToolSpec>,
    /// How long one `execute` may run, in ms (`limits::DEFAULT_SERVER_CALL_TIMEOUT_MS` when absent).
    #[serde(default)]
    pub call_timeout_ms: Option<u64>,
    /// The host records telemetry (a tracer or meter provider was registered when the server was made):
    /// only then is a request the engine answers itself reported ([`ToolHost::served`]).
    #[serde(default)]
    pub telemetry: bool,
}

fn default_name() -> String {
    "mcpferry-server".to_owned()
}

fn default_version() -> String {
    env!("CARGO_PKG_VERSION").to_owned()
}

pub(crate) struct PublishedTool {
    pub spec: Tool,
    pub check: Option<ArgumentCheck>,
}

/// A server: its tools, the host that runs them, the journal that makes keyed calls happen once.
/// Shared by every listener and by in-process `callTool`.
pub struct McpServerCore {
    pub(crate) name: String,
    pub(crate) version: String,
    pub(crate) instructions: Option<String>,
    pub(crate) tools: HashMap<String, PublishedTool>,
    /// `tools/list`'s `tools` array, serialized once.
    pub(crate) listing: String,
    pub(crate) host: Arc<dyn ToolHost>,
    pub(crate) calls: calls::Calls,
    /// How long one `execute` may run, in ms.
    pub(crate) call_timeout_ms: u64,
    /// Whether the host records telemetry: without it, nothing is reported to it ([`ToolHost::served`]).
    pub(crate) telemetry: bool,
}

impl McpServerCore {
    /// From `createMcpServer`'s options (JSON). `compile` turns an input schema into an argument check
    /// (`None`: not checked by the engine).
    pub fn new(
        spec_json: &str,
        host: Arc<dyn ToolHost>,
        journal: Option<Arc<dyn McpJournal>>,
        compile: &dyn Fn(&Value) -> Option<ArgumentCheck>,
    ) -> Result<Arc<Self>> {
        let spec: ServerSpec =
            serde_json::from_str(spec_json).map_err(|e| McpError::config(format!("createMcpServer: {e}")))?;
        if spec.tools.len() > MAX_SERVER_TOOLS {
            return Err(McpError::config(format!(
                "createMcpServer: {} tools, over the {MAX_SERVER_TOOLS} one server may publish",
                spec.tools.len()
            )));
        }
        let call_timeout_ms = spec.call_timeout_ms.unwrap_or(crate::limits::DEFAULT_SERVER_CALL_TIMEOUT_MS);
        if !(1..=crate::limits::MAX_SERVER_CALL_TIMEOUT_MS).contains(&call_timeout_ms) {
            return Err(McpError::config(format!(
                "createMcpServer: callTimeoutMs must be 1 to {} ms",
                crate::limits::MAX_SERVER_CALL_TIMEOUT_MS
            )));
        }
        let mut tools = HashMap::with_capacity(spec.tools.len());
        let mut listed = Vec::with_capacity(spec.tools.len());
        for ToolSpec { tool, host_validates } in spec.tools {
            check_tool_name(&tool.name)?;
            if !crate::protocol::mcp::is_object_schema(&tool.input_schema) {
                return Err(McpError::config(format!(
                    "createMcpServer: the input schema of {:?} must be an object schema (\"type\": \"object\")",
                    tool.name
                )));
            }
            if tool
                .output_schema
                .as_ref()
                .is_some_and(|s| s.root_type() == crate::protocol::json_text::RootType::NotAnObject)
            {
                return Err(McpError::config(format!(
                    "createMcpServer: the output schema of {:?} must be a JSON Schema object",
                    tool.name
                )));
            }
            let check = if host_validates { None } else { compile(&tool.input_schema.tree()) };
            listed.push(
                serde_json::to_value(&tool)
                    .map_err(|e| McpError::Internal(format!("a tool definition did not serialize: {e}")))?,
            );
            let name = tool.name.clone();
            if tools.insert(name.clone(), PublishedTool { spec: tool, check }).is_some() {
                return Err(McpError::config(format!("createMcpServer: two tools are named {name:?}")));
            }
        }
        Ok(Arc::new(McpServerCore {
            name: spec.name,
            version: spec.version,
            instructions: spec.instructions,
            tools,
            listing: Value::Array(listed).to_string(),
            host,
            calls: calls::Calls::new(journal),
            call_timeout_ms,
            telemetry: spec.telemetry,
        }))
    }

    pub(crate) fn server_info(&self) -> Value {
        serde_json::json!({ "name": self.name, "version": self.version })
    }
}

/// MCP 2025-11-25's tool names: 1 to 128 characters of `A-Z a-z 0-9 _ - .`.
fn check_tool_name(name: &str) -> Result<()> {
    let valid = !name.is_empty()
        && name.chars().count() <= MAX_SERVER_TOOL_NAME_CHARS
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.'));
    if valid {
        Ok(())
    } else {
        Err(McpError::config(format!(
            "createMcpServer: the tool name {name:?} is not 1 to {MAX_SERVER_TOOL_NAME_CHARS} characters of letters, digits, '_', '-' and '.'"
        )))
    }
}

#[cfg(test)]
pub(crate) mod testing {
    //! A host whose tools are Rust closures, for the unit tests of this module.
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// `echo` answers its arguments; `slow` waits `ms` then counts an execution; `boom` throws. Keeps
    /// every served report.
    pub struct Host {
        pub executions: AtomicUsize,
        pub served: parking_lot::Mutex<Vec<String>>,
    }

    impl ToolHost for Arc<Host> {
        fn execute(&self, tool: &str, request: String) -> BoxFuture<'static, Result<Execution>> {
            let host = self.clone();
            let tool = tool.to_owned();
            Box::pin(async move {
                let request: Value = serde_json::from_str(&request).unwrap();
                match tool.as_str() {
                    "slow" => {
                        let ms = request["arguments"]["ms"].as_u64().unwrap_or(0);
                        tokio::time::sleep(std::time::Duration::from_millis(ms)).await;
                        let n = host.executions.fetch_add(1, Ordering::SeqCst) + 1;
                        Ok(Execution::Value(serde_json::json!({ "executions": n }).to_string()))
                    }
                    "boom" => Ok(Execution::Failed("the card was declined".into())),
                    // review: `{"panic": true}` makes echo's execute panic (a host that failed in Rust).
                    _ if request["arguments"]["panic"] == Value::Bool(true) => panic!("a host that panicked"),
                    _ => Ok(Execution::Value(request["arguments"].to_string())),
                }
            })
        }

        fn served(&self, report: String) {
            self.served.lock().push(report);
        }
    }

    /// The unit server, its host recording telemetry.
    pub fn server(journal: Option<Arc<dyn McpJournal>>) -> (Arc<McpServerCore>, Arc<Host>) {
        server_with(journal, true)
    }

    pub fn server_with(journal: Option<Arc<dyn McpJournal>>, telemetry: bool) -> (Arc<McpServerCore>, Arc<Host>) {
        let host = Arc::new(Host { executions: AtomicUsize::new(0), served: Default::default() });
        let spec = serde_json::json!({
            "name": "unit", "version": "1", "telemetry": telemetry,
            "tools": [
                { "name": "echo", "description": "Echo", "inputSchema": { "type": "object" } },
                { "name": "slow", "inputSchema": { "type": "object", "properties": { "ms": { "type": "integer" } } } },
                { "name": "boom" },
                { "name": "strict", "inputSchema": { "type": "object", "required": ["x"] } },
            ]
        });
        let compile = |schema: &Value| -> Option<ArgumentCheck> {
            let required: Vec<String> =
                schema.get("required")?.as_array()?.iter().filter_map(|v| v.as_str().map(str::to_owned)).collect();
            Some(Box::new(move |args: &Value| match required.iter().find(|r| args.get(r.as_str()).is_none()) {
                Some(missing) => Err(format!("missing {missing}")),
                None => Ok(()),
            }))
        };
        (McpServerCore::new(&spec.to_string(), Arc::new(host.clone()), journal, &compile).unwrap(), host)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refused(spec: Value) -> String {
        let host: Arc<dyn ToolHost> = Arc::new(testing::server(None).1);
        let error = McpServerCore::new(&spec.to_string(), host, None, &|_| None).err().expect("refused");
        assert_eq!(error.code(), "mcp_config_invalid");
        error.to_string()
    }

    #[test]
    fn bad_tool_declarations_are_refused_by_name() {
        assert!(refused(serde_json::json!({ "tools": [{ "name": "has space" }] })).contains("has space"));
        assert!(refused(serde_json::json!({ "tools": [{ "name": "" }] })).contains("tool name"));
        assert!(refused(serde_json::json!({ "tools": [{ "name": "a" }, { "name": "a" }] })).contains("two tools"));
        assert!(refused(serde_json::json!({ "tools": [{ "name": "a", "inputSchema": { "type": "string" } }] }))
            .contains("object schema"));
    }

    #[test]
    fn the_report_backlog_is_bounded_and_a_taken_report_frees_its_place() {
        let backlog = ReportBacklog::default();
        let places: Vec<_> =
            std::iter::from_fn(|| backlog.admit()).take(crate::limits::MAX_SERVED_REPORTS_PENDING + 1).collect();
        assert_eq!(places.len(), crate::limits::MAX_SERVED_REPORTS_PENDING);
        assert!(backlog.admit().is_none());
        drop(places.into_iter().next());
        assert!(backlog.admit().is_some());
    }

    #[test]
    fn the_listing_is_built_once_with_a_default_schema() {
        let (core, _) = testing::server(None);
        let listing: Value = serde_json::from_str(&core.listing).unwrap();
        assert_eq!(listing.as_array().unwrap().len(), 4);
        assert_eq!(listing[2], serde_json::json!({ "name": "boom", "inputSchema": { "type": "object" } }));
    }
}
