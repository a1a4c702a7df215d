//! What a caller says about one tool call besides its arguments: the durable run and the model's
//! tool call it belongs to, or an explicit idempotency key. The key travels to the server in
//! `params._meta.idempotencyKey`, so a server with a journal runs the side effect once. The caller's
//! trace context (`lib/telemetry.ts`) travels in the same `_meta` (see `crate::telemetry`).

use crate::error::{McpError, Result};
use crate::limits::MAX_IDEMPOTENCY_KEY_BYTES;
use crate::telemetry::TraceContext;
use serde::Deserialize;
use serde_json::Value;

/// The parsed context of one call. Every field optional: a call with none carries no key.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct CallContext {
    pub run_id: Option<String>,
    pub tool_call_id: Option<String>,
    /// Explicit, or `${runId}:${toolCallId}` when both are given.
    pub idempotency_key: Option<String>,
    /// The caller's span, to be the parent of the server's (`traceparent`, `tracestate`, `baggage`).
    pub trace: Option<TraceContext>,
    /// The caller records this call (a span or a metric): the engine reports its time with the outcome.
    pub measured: bool,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Given {
    run_id: Option<Value>,
    tool_call_id: Option<Value>,
    idempotency_key: Option<Value>,
    traceparent: Option<Value>,
    tracestate: Option<Value>,
    baggage: Option<Value>,
    #[serde(default)]
    measured: bool,
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
        let trace = match string_field(given.traceparent, "traceparent")? {
            Some(traceparent) => Some(TraceContext::new(
                traceparent,
                string_field(given.tracestate, "tracestate")?,
                string_field(given.baggage, "baggage")?,
            )?),
            None => None,
        };
        Ok(CallContext { run_id, tool_call_id, idempotency_key, trace, measured: given.measured })
    }

    /// What this call adds to its request's `params._meta`, as members each followed by a comma:
    /// the idempotency key, and the trace context unless its server is not to learn it. `None`: nothing.
    pub fn meta_members(&self, propagate_trace: bool) -> Option<Box<str>> {
        let trace = self.trace.as_ref().filter(|_| propagate_trace);
        if self.idempotency_key.is_none() && trace.is_none() {
            return None;
        }
        let mut out = String::new();
        if let Some(key) = &self.idempotency_key {
            out.push_str("\"idempotencyKey\":");
            crate::protocol::jsonrpc::push_json_string(&mut out, key);
            out.push(',');
        }
        if let Some(trace) = trace {
            trace.push_meta(&mut out);
        }
        Some(out.into())
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
    fn the_trace_context_goes_to_meta_unless_its_server_opted_out() {
        let parent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
        let context =
            CallContext::parse(&format!(r#"{{"idempotencyKey":"k","traceparent":"{parent}","measured":true}}"#))
                .unwrap();
        assert!(context.measured);
        assert_eq!(
            context.meta_members(true).as_deref(),
            Some(format!(r#""idempotencyKey":"k","traceparent":"{parent}","#).as_str())
        );
        assert_eq!(context.meta_members(false).as_deref(), Some(r#""idempotencyKey":"k","#));
        assert_eq!(CallContext::parse(r#"{"measured":true}"#).unwrap().meta_members(true), None);
        let error = CallContext::parse(r#"{"traceparent":"00-nope"}"#).unwrap_err();
        assert_eq!(error.code(), "mcp_invalid_arguments");
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
