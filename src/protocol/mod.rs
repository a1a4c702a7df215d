//! Wire types: JSON-RPC 2.0 framing and the MCP messages this client uses. No I/O here.

pub mod apps;
pub mod call_context;
pub mod era;
pub mod json_text;
pub mod jsonrpc;
pub mod mcp;
pub mod nesting;
pub mod param_headers;
