//! `policy.decide`: every tool call is put to the application before the server hears of it. A deny,
//! a failing decide, or an answer that is not a decision all mean the server receives nothing. Tool
//! annotations are not part of the request: a server can lie in them.

use crate::error::{McpError, Result};
use crate::hooks::Callback;
use crate::protocol::call_context::CallContext;
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;

#[derive(Debug, Deserialize, Serialize, PartialEq)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum Decision {
    Allow,
    Deny {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reason: Option<String>,
    },
    Ask {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reason: Option<String>,
    },
}

/// The request handed to `policy.decide` for a tool call (the JavaScript layer adds `session`);
/// `runId`, `toolCallId` and `idempotencyKey` only when the call carried them.
pub fn request_json(
    tool_name: &str,
    server: &str,
    remote_name: &str,
    args: &RawValue,
    context: &CallContext,
) -> String {
    let mut out = format!(
        "{{\"kind\":\"tool\",\"toolName\":{},\"server\":{},\"remoteName\":{},\"args\":{}",
        serde_json::to_string(tool_name).unwrap_or_default(),
        serde_json::to_string(server).unwrap_or_default(),
        serde_json::to_string(remote_name).unwrap_or_default(),
        args.get()
    );
    for (member, value) in [
        ("runId", &context.run_id),
        ("toolCallId", &context.tool_call_id),
        ("idempotencyKey", &context.idempotency_key),
    ] {
        if let Some(value) = value {
            out.push_str(&format!(",\"{member}\":{}", serde_json::to_string(value).unwrap_or_default()));
        }
    }
    out.push('}');
    out
}

/// The request handed to `policy.decide` for a request that is not a tool call: `kind` is `resource`
/// (`operation` `read` or `subscribe`, with `uri`), `prompt` (`get`, with `name` and `args`) or
/// `completion` (`complete`, with `ref`, `argument` and, when given, `context`). It has no `toolName`, so a policy that allows
/// by tool name refuses it. `details` holds the members after `server` (JSON object members).
pub fn session_request_json(kind: &str, operation: &str, server: &str, details: &str) -> String {
    format!(
        "{{\"kind\":{},\"operation\":{},\"server\":{},{details}}}",
        serde_json::to_string(kind).unwrap_or_default(),
        serde_json::to_string(operation).unwrap_or_default(),
        serde_json::to_string(server).unwrap_or_default()
    )
}

/// Ok when the call may go ahead, as the host's `policy.decide` (and `policy.ask`, for an `ask`) says.
/// Fails closed.
pub async fn authorize(
    decide: Option<&dyn Callback<String, String>>,
    ask: Option<&dyn Callback<String, bool>>,
    tool_name: &str,
    request: String,
) -> Result<()> {
    let Some(decide) = decide else { return Ok(()) };
    let decision = match decide.call(request.clone()).await {
        Ok(answer) => serde_json::from_str::<Decision>(&answer).map_err(|_| {
            McpError::PolicyDenied(format!(
                "policy.decide returned no valid decision for {tool_name}; the call is denied"
            ))
        })?,
        Err(_) => {
            return Err(McpError::PolicyDenied(format!("policy.decide failed for {tool_name}; the call is denied")))
        }
    };
    match decision {
        Decision::Allow => Ok(()),
        Decision::Deny { reason } => {
            Err(McpError::PolicyDenied(with_reason(format!("policy denied {tool_name}"), reason)))
        }
        Decision::Ask { reason } => {
            let refused =
                || McpError::ApprovalRequired(with_reason(format!("{tool_name} needs approval"), reason.clone()));
            let Some(ask) = ask else { return Err(refused()) };
            let question = match &reason {
                Some(r) => {
                    format!("{{\"request\":{request},\"reason\":{}}}", serde_json::to_string(r).unwrap_or_default())
                }
                None => format!("{{\"request\":{request},\"reason\":null}}"),
            };
            match ask.call(question).await {
                Ok(true) => Ok(()),
                _ => Err(refused()),
            }
        }
    }
}

fn with_reason(message: String, reason: Option<String>) -> String {
    match reason {
        Some(reason) if !reason.is_empty() => format!("{message}: {reason}"),
        _ => message,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures_util::future::BoxFuture;
    use std::sync::Arc;

    struct Fixed<R: Clone + Send + 'static>(std::result::Result<R, String>);
    impl<R: Clone + Send + Sync + 'static> Callback<String, R> for Fixed<R> {
        fn call(&self, _: String) -> BoxFuture<'static, std::result::Result<R, String>> {
            let answer = self.0.clone();
            Box::pin(async move { answer })
        }
    }

    /// The host's two policy callbacks.
    #[derive(Default)]
    struct Hooks {
        decide: Option<Arc<dyn Callback<String, String>>>,
        ask: Option<Arc<dyn Callback<String, bool>>>,
    }

    fn hooks(decide: std::result::Result<&str, &str>, ask: Option<bool>) -> Hooks {
        Hooks {
            decide: Some(Arc::new(Fixed(decide.map(str::to_owned).map_err(str::to_owned)))),
            ask: ask.map(|a| Arc::new(Fixed(Ok(a))) as Arc<dyn Callback<String, bool>>),
        }
    }

    async fn run(h: &Hooks) -> Result<()> {
        authorize(h.decide.as_deref(), h.ask.as_deref(), "s__t", "{}".to_owned()).await
    }

    #[test]
    fn requests_say_their_kind_and_only_tool_calls_name_a_tool() {
        let tool =
            request_json("s__t", "s", "t", &RawValue::from_string("{}".into()).unwrap(), &CallContext::default());
        let tool: serde_json::Value = serde_json::from_str(&tool).unwrap();
        assert_eq!((tool["kind"].as_str(), tool["toolName"].as_str()), (Some("tool"), Some("s__t")));
        let read: serde_json::Value =
            serde_json::from_str(&session_request_json("resource", "read", "s", r#""uri":"a://b""#)).unwrap();
        assert_eq!(read, serde_json::json!({ "kind": "resource", "operation": "read", "server": "s", "uri": "a://b" }));
        assert!(read.get("toolName").is_none());
    }

    #[tokio::test]
    async fn decisions_map_to_outcomes_and_fail_closed() {
        assert!(run(&Hooks::default()).await.is_ok());
        assert!(run(&hooks(Ok(r#"{"kind":"allow"}"#), None)).await.is_ok());
        let denied = run(&hooks(Ok(r#"{"kind":"deny","reason":"no deletes"}"#), None)).await.unwrap_err();
        assert_eq!(
            (denied.code(), denied.to_string().as_str()),
            ("mcp_policy_denied", "policy denied s__t: no deletes")
        );
        assert_eq!(run(&hooks(Ok(r#"{"kind":"ask"}"#), None)).await.unwrap_err().code(), "mcp_approval_required");
        assert!(run(&hooks(Ok(r#"{"kind":"ask"}"#), Some(true))).await.is_ok());
        assert_eq!(
            run(&hooks(Ok(r#"{"kind":"ask"}"#), Some(false))).await.unwrap_err().code(),
            "mcp_approval_required"
        );
        assert_eq!(run(&hooks(Err("boom"), None)).await.unwrap_err().code(), "mcp_policy_denied");
        assert_eq!(run(&hooks(Ok(r#"{"kind":"maybe"}"#), None)).await.unwrap_err().code(), "mcp_policy_denied");
        assert_eq!(run(&hooks(Ok("null"), None)).await.unwrap_err().code(), "mcp_policy_denied");
    }
}
