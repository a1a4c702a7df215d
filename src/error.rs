//! One error type for the whole engine. Every variant has a stable `code` that crosses to JavaScript.
//!
//! Why no `thiserror` and no `#[source]` chain: an error here is a value, not a chain. It is cloned to
//! every request a lost connection fails, compared in tests, and its text is the one the JavaScript
//! error shows — written when it is made, with secrets and URL queries already left out. A source kept
//! alongside (a `reqwest::Error` names its URL, query included; an `io::Error` is not `Clone`) would be
//! a second text that can leak and cannot be cloned; the cause that matters is said in the message.

use std::fmt;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum McpError {
    /// The tool ran and reported failure (`isError: true`). The text is the server's own.
    Tool(String),
    /// A message that breaks the protocol.
    Protocol(String),
    /// A JSON-RPC error response: its code and message, and its `data` as JSON text.
    Rpc { code: i64, message: String, data: Option<String> },
    /// No response (and no progress) within the idle timeout.
    Timeout { after_ms: u64 },
    /// The caller's AbortSignal fired.
    Aborted,
    /// The pipe or socket failed, or the server process exited.
    Transport(String),
    /// The server could not be reached at all (the connection was refused, the name did not resolve):
    /// nothing was delivered (`mcp_transport_error`).
    Unreachable(String),
    /// This request reached the server (or may have) before it failed as the inner error says — its
    /// server lost, its response stream broken: it may have run, and it is never sent again. Its code is
    /// the inner one's; the JavaScript error carries `sent: true`.
    Sent(Box<McpError>),
    /// The server is not live (reconnecting past the call's wait, failed, disabled): nothing was sent.
    ServerUnavailable(String),
    /// The options or a server entry are invalid.
    ConfigInvalid(String),
    /// A message over the configured size limit.
    ResultTooLarge { limit_bytes: usize },
    /// The caller's arguments are not a JSON object.
    InvalidArguments(String),
    /// The tool is not (or no longer) published by its server.
    ToolUnavailable(String),
    /// The toolset or connection was closed by the caller.
    Closed,
    /// A URL (or a redirect, or a DNS answer) outside `allowedHosts`. No request was sent there.
    HostNotAllowed(String),
    /// A redirect hop refused (outside `allowedHosts`, or off the origin an exchange must stay on) after
    /// the first request was delivered: the server may have acted on it (`mcp_host_not_allowed` with
    /// `redirected: true`). Its text names the server's chosen target.
    RedirectRefused(String),
    /// `policy.decide` denied the call (or failed, which denies). The server received nothing.
    PolicyDenied(String),
    /// `policy.decide` asked for approval and no approver granted it.
    ApprovalRequired(String),
    /// The `auth` callback failed or returned no usable token, or an OAuth flow failed or was refused.
    Auth(String),
    /// A tool call was refused for authorization; a new token is now in place, and the call was not sent
    /// again (`mcp_auth_error` with `reauthorized: true`: the agent decides whether to call again).
    Reauthorized(String),
    /// A stdio entry's command or cwd resolves outside its `root`.
    ContainmentViolation(String),
    /// The tool's definition drifted from its trusted baseline; calls are refused until re-trusted.
    ToolQuarantined(String),
    /// The connection store failed, is empty where a rebuild needs rows, or holds a row that no
    /// longer matches the configured server.
    Storage(String),
    /// A message nested deeper than the engine accepts (a nesting bomb would break the agent's
    /// `JSON.stringify`, or a recursive parser).
    ResultTooDeep { max_depth: usize },
    /// A JSON Schema that cannot be used: over the size or depth bound, not a schema, or one that does
    /// not compile (an unknown dialect, a reference to another document, a bad `pattern`).
    SchemaInvalid(String),
    /// A tool result that breaks the tool's `outputSchema` (its `structuredContent` is missing or fails).
    ResultInvalid(String),
    /// A bug in the engine (a panic), caught and turned into this call's failure.
    Internal(String),
    /// The server has no resource at the URI read or subscribed to (`-32002` in 2025-11-25, `-32602`
    /// with `data.uri` in 2026-07-28).
    ResourceNotFound(String),
    /// The server did not declare the capability the operation needs (`resources`, `prompts`,
    /// `completions`, `resources.subscribe`): nothing was sent.
    NotSupported(String),
    /// A skill entry (SEP-2640) that cannot be loaded: malformed, over the per-skill limits, or
    /// `"dynamic"` (no digests to verify against, and mcpferry loads only verifiable skills).
    SkillInvalid(String),
    /// A skill file that is not what its entry describes: its size, its SHA-256 digest, SKILL.md's
    /// frontmatter, or a file the entry does not list. The content was not used.
    SkillVerificationFailed(String),
}

impl McpError {
    pub fn code(&self) -> &'static str {
        match self {
            McpError::Tool(_) => "mcp_tool_error",
            McpError::Protocol(_) | McpError::Rpc { .. } => "mcp_protocol_error",
            McpError::Timeout { .. } => "mcp_timeout",
            McpError::Aborted => "mcp_aborted",
            McpError::Transport(_) | McpError::Unreachable(_) => "mcp_transport_error",
            McpError::Sent(inner) => inner.code(),
            McpError::ServerUnavailable(_) => "mcp_server_unavailable",
            McpError::ConfigInvalid(_) => "mcp_config_invalid",
            McpError::ResultTooLarge { .. } => "mcp_result_too_large",
            McpError::InvalidArguments(_) => "mcp_invalid_arguments",
            McpError::ToolUnavailable(_) => "mcp_tool_unavailable",
            McpError::Closed => "mcp_connection_closed",
            McpError::HostNotAllowed(_) | McpError::RedirectRefused(_) => "mcp_host_not_allowed",
            McpError::PolicyDenied(_) => "mcp_policy_denied",
            McpError::ApprovalRequired(_) => "mcp_approval_required",
            McpError::Auth(_) | McpError::Reauthorized(_) => "mcp_auth_error",
            McpError::ContainmentViolation(_) => "mcp_containment_violation",
            McpError::ToolQuarantined(_) => "mcp_tool_quarantined",
            McpError::Storage(_) => "mcp_storage_error",
            McpError::ResultTooDeep { .. } => "mcp_result_too_deep",
            McpError::SchemaInvalid(_) => "mcp_schema_invalid",
            McpError::ResultInvalid(_) => "mcp_result_invalid",
            McpError::Internal(_) => "mcp_internal_error",
            McpError::ResourceNotFound(_) => "mcp_resource_not_found",
            McpError::NotSupported(_) => "mcp_not_supported",
            McpError::SkillInvalid(_) => "mcp_skill_invalid",
            McpError::SkillVerificationFailed(_) => "mcp_skill_verification_failed",
        }
    }

    pub fn config(message: impl Into<String>) -> Self {
        McpError::ConfigInvalid(message.into())
    }

    /// Every code `code()` can return, in declaration order: derived from one value of each variant,
    /// so the list crossing to JavaScript (which maps each code to an error class) cannot drift.
    pub fn codes() -> Vec<&'static str> {
        Self::one_of_each().iter().map(McpError::code).collect()
    }

    fn one_of_each() -> [McpError; 26] {
        // The match has no wildcard: adding a variant fails to compile until it is listed below too.
        let _listed_below = |e: &McpError| match e {
            McpError::Tool(_)
            | McpError::Protocol(_)
            // Shares Protocol's code, so it is not listed again.
            | McpError::Rpc { .. }
            | McpError::Timeout { .. }
            | McpError::Aborted
            | McpError::Transport(_)
            // Shares Transport's code, so it is not listed again.
            | McpError::Unreachable(_)
            // Has its inner error's code.
            | McpError::Sent(_)
            | McpError::ServerUnavailable(_)
            | McpError::ConfigInvalid(_)
            | McpError::ResultTooLarge { .. }
            | McpError::InvalidArguments(_)
            | McpError::ToolUnavailable(_)
            | McpError::Closed
            | McpError::HostNotAllowed(_)
            // Shares HostNotAllowed's code, so it is not listed again.
            | McpError::RedirectRefused(_)
            | McpError::PolicyDenied(_)
            | McpError::ApprovalRequired(_)
            | McpError::Auth(_)
            // Shares Auth's code, so it is not listed again.
            | McpError::Reauthorized(_)
            | McpError::ContainmentViolation(_)
            | McpError::ToolQuarantined(_)
            | McpError::Storage(_)
            | McpError::ResultTooDeep { .. }
            | McpError::SchemaInvalid(_)
            | McpError::ResultInvalid(_)
            | McpError::Internal(_)
            | McpError::ResourceNotFound(_)
            | McpError::NotSupported(_)
            | McpError::SkillInvalid(_)
            | McpError::SkillVerificationFailed(_) => (),
        };
        let text = String::new;
        [
            McpError::Tool(text()),
            McpError::Protocol(text()),
            McpError::Timeout { after_ms: 0 },
            McpError::Aborted,
            McpError::Transport(text()),
            McpError::ServerUnavailable(text()),
            McpError::ConfigInvalid(text()),
            McpError::ResultTooLarge { limit_bytes: 0 },
            McpError::InvalidArguments(text()),
            McpError::ToolUnavailable(text()),
            McpError::Closed,
            McpError::HostNotAllowed(text()),
            McpError::PolicyDenied(text()),
            McpError::ApprovalRequired(text()),
            McpError::Auth(text()),
            McpError::ContainmentViolation(text()),
            McpError::ToolQuarantined(text()),
            McpError::Storage(text()),
            McpError::ResultTooDeep { max_depth: 0 },
            McpError::SchemaInvalid(text()),
            McpError::ResultInvalid(text()),
            McpError::Internal(text()),
            McpError::ResourceNotFound(text()),
            McpError::NotSupported(text()),
            McpError::SkillInvalid(text()),
            McpError::SkillVerificationFailed(text()),
        ]
    }
}

/// Matches the variants that carry their own text, binding it to `$text` (by reference or mutable
/// reference, as `$error` is). One list of them, for `Display` and for redaction.
macro_rules! with_text {
    ($error:expr, $text:ident => $carries:expr, _ => $fixed:expr) => {
        match $error {
            McpError::Tool($text)
            | McpError::Protocol($text)
            | McpError::Rpc { message: $text, .. }
            | McpError::Transport($text)
            | McpError::Unreachable($text)
            | McpError::ServerUnavailable($text)
            | McpError::ConfigInvalid($text)
            | McpError::InvalidArguments($text)
            | McpError::ToolUnavailable($text)
            | McpError::HostNotAllowed($text)
            | McpError::RedirectRefused($text)
            | McpError::PolicyDenied($text)
            | McpError::ApprovalRequired($text)
            | McpError::Auth($text)
            | McpError::Reauthorized($text)
            | McpError::ContainmentViolation($text)
            | McpError::ToolQuarantined($text)
            | McpError::Storage($text)
            | McpError::SchemaInvalid($text)
            | McpError::ResultInvalid($text)
            | McpError::Internal($text)
            | McpError::ResourceNotFound($text)
            | McpError::NotSupported($text)
            | McpError::SkillInvalid($text)
            | McpError::SkillVerificationFailed($text) => $carries,
            _ => $fixed,
        }
    };
}

impl McpError {
    /// Properties the JavaScript error carries beside `code` and `message`, as a JSON object.
    pub fn js_properties(&self) -> Option<&'static str> {
        match self {
            McpError::Reauthorized(_) => Some(r#"{"reauthorized":true}"#),
            McpError::RedirectRefused(_) => Some(r#"{"redirected":true}"#),
            McpError::Sent(_) => Some(r#"{"sent":true}"#),
            _ => None,
        }
    }

    /// This error, for a request that reached the server (or may have): see [`McpError::Sent`]. A
    /// closed connection stays closed: the caller asked for that.
    pub fn after_send(self) -> Self {
        match self {
            McpError::Sent(_) | McpError::Closed | McpError::Aborted => self,
            other => McpError::Sent(Box::new(other)),
        }
    }

    /// The same error with every secret in its message replaced (see `guard::redact`).
    pub fn redacted(mut self, secrets: &crate::guard::redact::Secrets) -> Self {
        if let McpError::Sent(inner) = self {
            return McpError::Sent(Box::new(inner.redacted(secrets)));
        }
        if !secrets.is_empty() {
            with_text!(&mut self, text => *text = secrets.redact(text), _ => {});
        }
        self
    }
}

impl fmt::Display for McpError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            McpError::Tool(text) => write!(f, "MCP tool error: {text}"),
            McpError::Rpc { code, message, .. } => write!(f, "MCP error {code}: {message}"),
            McpError::Timeout { after_ms } => {
                write!(f, "MCP request timed out: no response or progress for {after_ms} ms")
            }
            McpError::Aborted => f.write_str("MCP request aborted by the caller"),
            McpError::ResultTooLarge { limit_bytes } => {
                write!(f, "MCP message exceeds the result limit of {limit_bytes} bytes")
            }
            McpError::Closed => f.write_str("MCP connection closed"),
            McpError::Sent(inner) => inner.fmt(f),
            McpError::ResultTooDeep { max_depth } => {
                write!(f, "MCP message is nested deeper than the limit of {max_depth} levels")
            }
            other => with_text!(other, text => f.write_str(text), _ => Ok(())),
        }
    }
}

impl std::error::Error for McpError {}

pub type Result<T> = std::result::Result<T, McpError>;

#[cfg(test)]
mod tests {
    use super::McpError;

    #[test]
    fn codes_are_unique_stable_and_prefixed() {
        let codes = McpError::codes();
        let unique: std::collections::BTreeSet<_> = codes.iter().collect();
        assert_eq!(unique.len(), codes.len(), "{codes:?}");
        assert!(codes.iter().all(|c| c.starts_with("mcp_")));
        assert!(codes.contains(&"mcp_result_too_deep") && codes.contains(&"mcp_internal_error"));
    }
}
