//! One error type for the whole engine. Every variant has a stable `code` that crosses to JavaScript.

use std::fmt;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum McpError {
    /// The tool ran and reported failure (`isError: true`). The text is the server's own.
    Tool(String),
    /// A JSON-RPC error response, or a message that breaks the protocol.
    Protocol(String),
    /// No response (and no progress) within the idle timeout.
    Timeout { after_ms: u64 },
    /// The caller's AbortSignal fired.
    Aborted,
    /// The pipe or socket failed, or the server process exited.
    Transport(String),
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
}

impl McpError {
    pub fn code(&self) -> &'static str {
        match self {
            McpError::Tool(_) => "mcp_tool_error",
            McpError::Protocol(_) => "mcp_protocol_error",
            McpError::Timeout { .. } => "mcp_timeout",
            McpError::Aborted => "mcp_aborted",
            McpError::Transport(_) => "mcp_transport_error",
            McpError::ConfigInvalid(_) => "mcp_config_invalid",
            McpError::ResultTooLarge { .. } => "mcp_result_too_large",
            McpError::InvalidArguments(_) => "mcp_invalid_arguments",
            McpError::ToolUnavailable(_) => "mcp_tool_unavailable",
            McpError::Closed => "mcp_connection_closed",
        }
    }

    pub fn config(message: impl Into<String>) -> Self {
        McpError::ConfigInvalid(message.into())
    }
}

impl fmt::Display for McpError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            McpError::Tool(text) => write!(f, "MCP tool error: {text}"),
            McpError::Protocol(m) | McpError::Transport(m) | McpError::ConfigInvalid(m) => f.write_str(m),
            McpError::ToolUnavailable(m) | McpError::InvalidArguments(m) => f.write_str(m),
            McpError::Timeout { after_ms } => {
                write!(f, "MCP request timed out: no response or progress for {after_ms} ms")
            }
            McpError::Aborted => f.write_str("MCP request aborted by the caller"),
            McpError::ResultTooLarge { limit_bytes } => {
                write!(f, "MCP message exceeds the result limit of {limit_bytes} bytes")
            }
            McpError::Closed => f.write_str("MCP connection closed"),
        }
    }
}

impl std::error::Error for McpError {}

pub type Result<T> = std::result::Result<T, McpError>;
