//! What a `tools/call` result means, in one place. [`tool_outcome`] is the MCP tools' view (`isError`
//! becomes a failure with the server's own text); [`raw_outcome`] is the view of a caller that reads the
//! whole result itself (a bound client's `callTool`): the same refusals except `isError`.

use crate::error::{McpError, Result};
use crate::limits::MAX_JSON_DEPTH;
use crate::protocol::{mcp, nesting};
use serde_json::value::RawValue;

/// The outcome of a `tools/call`: `isError: true` becomes `McpError::Tool` with the server's own text,
/// and a result nested deeper than `MAX_JSON_DEPTH` becomes `McpError::ResultTooDeep` (it would break
/// the agent's `JSON.parse`/`JSON.stringify`, or anything else that walks it recursively).
pub fn tool_outcome(outcome: Result<Box<RawValue>>) -> Result<Box<RawValue>> {
    let result = raw_outcome(outcome)?;
    // Most results carry no `isError` key at all; the already-validated text need not be parsed again.
    if memchr::memmem::find(result.get().as_bytes(), b"\"isError\"").is_none() {
        return Ok(result);
    }
    let view: mcp::CallResultView = serde_json::from_str(result.get())
        .map_err(|e| McpError::Protocol(format!("tools/call returned a malformed result: {e}")))?;
    if view.is_error == Some(true) {
        return Err(McpError::Tool(mcp::tool_error_text(&view)));
    }
    Ok(result)
}

/// A client call's outcome: the result as the server sent it, `isError` included. Still refused: a
/// result that is not an object, or is nested past `MAX_JSON_DEPTH` (it would break the host's
/// `JSON.parse`), as for `mcpTools`.
pub fn raw_outcome(outcome: Result<Box<RawValue>>) -> Result<Box<RawValue>> {
    let result = outcome?;
    if nesting::exceeds_depth(result.get().as_bytes(), MAX_JSON_DEPTH) {
        return Err(McpError::ResultTooDeep { max_depth: MAX_JSON_DEPTH });
    }
    if !result.get().starts_with('{') {
        return Err(McpError::Protocol("tools/call returned a result that is not an object".into()));
    }
    Ok(result)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn raw_outcomes_keep_is_error_results_and_refuse_what_mcp_tools_refuses() {
        let result = |text: &str| Ok(RawValue::from_string(text.to_owned()).unwrap());
        let failed = raw_outcome(result(r#"{"content":[{"type":"text","text":"no"}],"isError":true}"#)).unwrap();
        assert!(failed.get().contains(r#""isError":true"#));
        assert_eq!(raw_outcome(result("[1]")).unwrap_err().code(), "mcp_protocol_error");
        let deep = "[".repeat(MAX_JSON_DEPTH + 1) + &"]".repeat(MAX_JSON_DEPTH + 1);
        assert_eq!(raw_outcome(result(&format!(r#"{{"a":{deep}}}"#))).unwrap_err().code(), "mcp_result_too_deep");
    }
}
