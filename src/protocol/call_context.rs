//! What a caller says about one tool call besides its arguments: the durable run and the model's
//! tool call it belongs to, or an explicit idempotency key. The key travels to the server in
//! `params._meta.idempotencyKey`, so a server with a journal runs the side effect once.

use crate::error::{McpError, Result};
use crate::limits::MAX_IDEMPOTENCY_KEY_BYTES;
use serde::Deserialize;
use serde_json::Value;

/// The parsed context of one call. Every field optional: a call with none carries no key.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct CallContext {
    pub run_id: Option<String>,
    pub tool_call_id: Option<String>,
    /// Explicit, or `${runId}:${toolCallId}` when both are given.
    pub idempotency_key: Option<String>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Given {
    run_id: Option<Value>,
    tool_call_id: Option<Value>,
    idempotency_key: Option<Value>,
}

impl CallContext {
    /// From the caller's `{ runId?, toolCallId?, idempotencyKey? }` (JSON; `null` counts as absent).
    /// A `toolCallId` alone forms no key: the AI SDK hands one to every call, durable or not.
    pub fn parse(json: &str) -> Result<CallContext> {
        let given: Given = serde_json::from_str(json)
            .map_err(|_| McpError::InvalidArguments("the call context must be an object".to_owned()))?;
        let run_id = string_field(given.run_id, "runId")?;
        let tool_call_id = string_field(given.tool_call_id, "toolCallId")?;
        let explicit = string_field(given.idempotency_key, "idempotencyKey")?;
        let idempotency_key = match (explicit, &run_id, &tool_call_id) {
            (Some(key), ..) => Some(key),
            (None, Some(run), Some(call)) => Some(format!("{run}:{call}")),
            (None, Some(_), None) => {
                return Err(McpError::InvalidArguments(
                    "ctx.runId needs ctx.toolCallId: the idempotency key is `${runId}:${toolCallId}`".to_owned(),
                ))
            }
            (None, None, _) => None,
        };
        if let Some(key) = &idempotency_key {
            check_key(key)?;
        }
        Ok(CallContext { run_id, tool_call_id, idempotency_key })
    }
}

fn string_field(value: Option<Value>, field: &str) -> Result<Option<String>> {
    match value {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(text)) => Ok(Some(text)),
        Some(_) => Err(McpError::InvalidArguments(format!("ctx.{field} must be a string"))),
    }
}

fn check_key(key: &str) -> Result<()> {
    if key.is_empty() {
        return Err(McpError::InvalidArguments("the idempotency key is empty".to_owned()));
    }
    if key.len() > MAX_IDEMPOTENCY_KEY_BYTES {
        return Err(McpError::InvalidArguments(format!(
            "the idempotency key is {} bytes, over the {MAX_IDEMPOTENCY_KEY_BYTES} a call may carry",
            key.len()
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(json: &str) -> Result<Option<String>> {
        CallContext::parse(json).map(|c| c.idempotency_key)
    }

    #[test]
    fn the_key_is_explicit_or_run_and_tool_call() {
        assert_eq!(key(r#"{"runId":"issue-42","toolCallId":"call-7"}"#).unwrap().as_deref(), Some("issue-42:call-7"));
        assert_eq!(
            key(r#"{"runId":"r","toolCallId":"c","idempotencyKey":"order-123"}"#).unwrap().as_deref(),
            Some("order-123")
        );
        assert_eq!(key(r#"{"toolCallId":"c"}"#).unwrap(), None, "the AI SDK's toolCallId alone forms no key");
        assert_eq!(key(r#"{"runId":null,"toolCallId":"c"}"#).unwrap(), None);
        assert_eq!(key("{}").unwrap(), None);
    }

    #[test]
    fn a_bad_key_is_refused_naming_what_is_wrong() {
        let too_long = format!(r#"{{"idempotencyKey":"{}"}}"#, "k".repeat(MAX_IDEMPOTENCY_KEY_BYTES + 1));
        for (bad, says) in [
            (r#"{"idempotencyKey":7}"#, "idempotencyKey must be a string"),
            (r#"{"runId":["r"],"toolCallId":"c"}"#, "runId must be a string"),
            (r#"{"runId":"r"}"#, "needs ctx.toolCallId"),
            (r#"{"idempotencyKey":""}"#, "empty"),
            (too_long.as_str(), "over the"),
            ("[]", "must be an object"),
        ] {
            let error = key(bad).unwrap_err();
            assert_eq!(error.code(), "mcp_invalid_arguments");
            assert!(error.to_string().contains(says), "{bad}: {error}");
        }
        let longest = format!(r#"{{"idempotencyKey":"{}"}}"#, "k".repeat(MAX_IDEMPOTENCY_KEY_BYTES));
        assert!(key(&longest).unwrap().is_some());
    }
}
