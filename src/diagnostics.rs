//! Everything the engine reports to `onDiagnostic`. Each has a stable `code` and a readable `message`.

use serde::Serialize;

#[derive(Debug, Clone, Serialize)]
#[serde(tag = "code", rename_all = "kebab-case", rename_all_fields = "camelCase")]
pub enum Diagnostic {
    /// A server could not be started (its first connection, or a rebuild's reconciliation failed). Its
    /// tools are unavailable; the others work. A server lost later raises `server-lost` instead.
    ServerDegraded { server: String, message: String, error_code: &'static str, stderr_tail: Option<String> },
    /// Several servers share a name; each got a hashed suffix and none was dropped.
    ServerNameCollision { server: String, labels: Vec<String>, message: String },
    /// A published tool that was left out (bad name, duplicate, invalid schema).
    ToolRejected { server: String, tool: String, message: String },
    /// A remote name was rewritten to be provider-safe.
    ToolNameRewritten { server: String, tool: String, name: String, message: String },
    /// A tool's `inputSchema` or `outputSchema` cannot be used for validation (over a bound, an unknown
    /// dialect, a reference to another document): that check is skipped for this definition, the tool works.
    ToolSchemaInvalid { server: String, tool: String, message: String },
    /// `exposeServerErrors: false` kept a server's error text from a call's caller; here it is, redacted and
    /// cut to `MAX_WITHHELD_TEXT_BYTES`, for the host's logs. `tool` is the projected name.
    ServerErrorWithheld { server: String, tool: String, error_code: &'static str, message: String },
    /// A tool's definition differs from its trusted baseline: kept by name, described by us, uncallable.
    ToolQuarantined { server: String, tool: String, message: String },
    /// A tool absent from the trusted baseline: not projected at all.
    ToolWithheld { server: String, tool: String, message: String },
    /// A baseline tool the server no longer publishes.
    ToolRemoved { server: String, tool: String, message: String },
    /// Even the catalog floor (every name and description) of a server is over the disclosure budget.
    DisclosureBudgetExceeded {
        server: String,
        tool_count: usize,
        floor_tokens: usize,
        budget_tokens: usize,
        message: String,
    },
    /// A bug in mcpferry (a panic) was contained: the operation it hit failed with
    /// `mcp_internal_error`, the process and the other calls go on. `server` is the affected server,
    /// or `mcpferry` when the toolset as a whole was hit.
    InternalError { server: String, message: String },
    /// Re-listing a catalogue whose `ttlMs` lapsed failed; its last listing stays in use (the spec
    /// allows serving stale results) and is tried again later, backing off.
    CatalogueStale { server: String, message: String, error_code: &'static str },
    /// A stored catalogue was not projected by a rebuild (a `private` one may belong to another
    /// authorization context): the server's tools arrive once it is connected and listed.
    CatalogueNotReused { server: String, message: String },
    /// A server is being started or reached (each connection attempt, reconnections too). Delivered as
    /// it happens, not held until `mcpTools` resolves, so a host can show which servers are pending.
    ServerConnecting { server: String, transport: &'static str, message: String },
    /// A server finished its handshake and first listing, `elapsed_ms` after its `server-connecting`.
    /// Delivered as it happens.
    ServerConnected {
        server: String,
        elapsed_ms: u64,
        protocol_version: &'static str,
        server_info: ServerInfo,
        /// The capabilities the server declared (`tools`, `resources`, `prompts`, `logging`, …), by name.
        capabilities: Vec<String>,
        /// Tools the server published (before filtering and vetting).
        tool_count: usize,
        message: String,
    },
    /// A line a stdio server wrote to stderr (its entry's `stderr: 'diagnostics'`), delivered as it
    /// happens: redacted, control characters blanked, cut to `MAX_STDERR_LINE_BYTES` (`truncated`).
    ServerStderr { server: String, line: String, truncated: bool, message: String },
    /// A second's stderr lines past `MAX_STDERR_LINES_PER_SECOND` were not delivered: how many.
    ServerStderrDropped { server: String, dropped: u64, message: String },
    /// A server's `notifications/message`, delivered as it happens: `level` one of the spec's eight,
    /// `logger` and every string in `data` redacted and made terminal-safe, `data` bounded (over the bound
    /// it is the head of its JSON text, and `truncated`). See `server_log`.
    ServerLog {
        server: String,
        level: &'static str,
        logger: Option<String>,
        data: serde_json::Value,
        truncated: bool,
        message: String,
    },
    /// A second's server logs past `MAX_SERVER_LOGS_PER_SECOND` were not delivered: how many.
    ServerLogDropped { server: String, dropped: u64, message: String },
    /// An engine log event (`logs: 'diagnostics'`), redacted like everything else.
    Log { server: String, level: &'static str, target: String, message: String },
    /// A live server's connection ended without being asked to (its process exited or was killed, its
    /// output broke the protocol, its HTTP session could not be re-established). Calls in flight failed
    /// with `sent: true`; its supervisor recovers it unless `reconnect: false`. Delivered as it happens.
    ServerLost { server: String, message: String, error_code: &'static str, stderr_tail: Option<String> },
    /// The supervisor waits `delay_ms` before attempt number `attempt` (from 1) to bring a server back.
    ServerReconnecting { server: String, attempt: u64, delay_ms: u64, message: String },
    /// A lost server is live again, `elapsed_ms` after it was lost; its tools were re-listed and vetted.
    ServerReconnected { server: String, attempt: u64, elapsed_ms: u64, protocol_version: &'static str, message: String },
    /// The supervisor gave up on a server for now (a crash loop, too many failed attempts, a failure no
    /// attempt can cure, or `reconnect: false`). Its calls fail at once with `mcp_server_unavailable`.
    /// `retry_in_ms`: when one new attempt is made (sooner on a call to one of its tools), if ever.
    /// `stderr_tail`: a stdio server's last stderr, across its restarts (its last attempt's, else its loss's).
    ServerFailed {
        server: String,
        message: String,
        error_code: &'static str,
        restarts: u64,
        retry_in_ms: Option<u64>,
        stderr_tail: Option<String>,
    },
    /// The server announced that its resources or prompts changed (`list`: `resources` or `prompts`;
    /// `notifications/resources/list_changed`, `notifications/prompts/list_changed`): list them again
    /// to see the change. Delivered as it happens; only if the server declared `listChanged` for it, and
    /// once until that list is listed again.
    ListChanged { server: String, list: &'static str, message: String },
    /// Entries of a resources, templates or prompts listing that were left out (malformed, or past
    /// `MAX_TOOLS_PER_SERVER`); the rest were listed.
    ListingEntriesSkipped { server: String, list: &'static str, skipped: usize, message: String },
    /// A listing of every server (resources, templates, prompts, skills) left this server out: its own
    /// listing failed (`errorCode`); the other servers' entries were listed.
    ListingFailed { server: String, list: &'static str, error_code: &'static str, message: String },
    /// `notifications/tools/list_changed` was applied to the tool map.
    ToolsChanged { server: String, added: Vec<String>, removed: Vec<String>, changed: Vec<String>, message: String },
}

/// What a server said about itself in `initialize` (or `server/discover`).
#[derive(Debug, Clone, Serialize)]
pub struct ServerInfo {
    pub name: String,
    pub version: String,
}
