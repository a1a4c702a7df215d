//! Every bound the engine enforces, named with its unit.

/// Idle timeout of one request when the caller sets none. Progress notifications reset it.
pub const DEFAULT_TIMEOUT_MS: u64 = 60_000;
/// Largest single message (a stdio line, later an HTTP body or SSE event) accepted from a server.
pub const DEFAULT_MAX_RESULT_BYTES: usize = 2 * 1024 * 1024;
/// Pages of `tools/list` followed before discovery gives up.
pub const MAX_LIST_PAGES: usize = 100;
/// Tool entries read from one server, kept or rejected; listing stops there and the rest are reported as
/// left out (one diagnostic).
pub const MAX_TOOLS_PER_SERVER: usize = 10_000;
/// Bytes of a stdio server's stderr kept for the diagnostic when it dies.
pub const STDERR_TAIL_BYTES: usize = 8 * 1024;
/// After stdin is closed, how long a stdio server gets to exit by itself.
pub const STDIO_EXIT_GRACE_MS: u64 = 300;
/// After SIGTERM to the process group, how long before SIGKILL.
pub const STDIO_TERM_GRACE_MS: u64 = 1_000;
/// How long the handshake may take (spawn, initialize, first tools/list page) when `timeoutMs` is larger.
pub const MAX_CONNECT_TIMEOUT_MS: u64 = 30_000;
/// Longest projected tool name model providers accept.
pub const MAX_TOOL_NAME_CHARS: usize = 64;
/// Bytes of an offending message quoted in an error.
pub const MAX_QUOTED_BYTES: usize = 200;
/// Deepest nesting of arrays and objects accepted in one tool result or one tool definition, in levels
/// (`{}` is one level). Below serde_json's recursion limit (128), so recursive code never sees deeper
/// JSON, and far below what an agent's `JSON.parse`/`JSON.stringify` handle.
pub const MAX_JSON_DEPTH: usize = 100;
/// Longest tool description accepted, in bytes. A longer one would flood the model's context; the tool
/// is left out with a diagnostic.
pub const MAX_TOOL_DESCRIPTION_BYTES: usize = 64 * 1024;
/// Longest tool name accepted from a server, in bytes (the spec recommends at most 128 characters).
pub const MAX_REMOTE_TOOL_NAME_BYTES: usize = 1024;
/// Longest id of a server-to-client request that is echoed in the answer, in bytes. A request whose id
/// is longer, or not a string or number, is dropped unanswered, so a reply never costs more than its
/// request bought.
pub const MAX_ECHOED_REQUEST_ID_BYTES: usize = 256;
