//! OpenTelemetry, the engine's share. The engine makes no spans and links no OpenTelemetry crate:
//! spans and metrics are made in JavaScript, through the application's own `@opentelemetry/api`
//! providers (`lib/telemetry.ts`), so they nest under the caller's context and go wherever the
//! application exports. What the engine does, and why here:
//!
//! | piece | what | why in the engine |
//! | --- | --- | --- |
//! | [`TraceContext`] | the W3C trace context a call was given, validated, written into the request's `params._meta` (`traceparent`, `tracestate`, `baggage`: SEP-414, the OpenTelemetry MCP conventions) | the engine builds every request; the context crosses once, with the call |
//! | [`CallReport`] | a measured call's time on the engine's clock, from taking the call to its outcome, and the JSON-RPC error code the server answered with | a span's duration is the wire time, not the time the promise took to be seen |
//! | [`incoming`] | the trace context a request to `createMcpServer` carries, validated | the host's server span is a child of the caller's |
//! | [`operation`] | the requests the engine makes on its own (handshakes, listings, subscriptions, completions) and OAuth token requests, told when they end | no caller is waiting on them: only the engine knows they happened |
//!
//! Nothing secret passes here: trace and span ids, vendor trace state the caller's own SDK made, request
//! ids, method names, hosts and ports, and error codes. No header value, token, URL path or query,
//! argument or result.

pub mod incoming;
pub mod operation;

use crate::error::{McpError, Result};
use crate::limits::{MAX_BAGGAGE_BYTES, MAX_TRACESTATE_BYTES};
use std::time::Duration;

/// `traceparent` (version `00`), `tracestate` and `baggage` of one call, checked on the way in.
#[derive(Debug, Clone, PartialEq)]
pub struct TraceContext {
    traceparent: String,
    tracestate: Option<String>,
    baggage: Option<String>,
}

impl TraceContext {
    pub fn new(traceparent: String, tracestate: Option<String>, baggage: Option<String>) -> Result<Self> {
        if !is_traceparent(&traceparent) {
            return Err(McpError::InvalidArguments(
                "ctx.traceparent must be a W3C traceparent (00-<32 hex>-<16 hex>-<2 hex>)".to_owned(),
            ));
        }
        let tracestate = tracestate.filter(|s| !s.is_empty());
        let baggage = baggage.filter(|s| !s.is_empty());
        check_header_text("tracestate", tracestate.as_deref(), MAX_TRACESTATE_BYTES)?;
        check_header_text("baggage", baggage.as_deref(), MAX_BAGGAGE_BYTES)?;
        Ok(TraceContext { traceparent, tracestate, baggage })
    }

    pub fn traceparent(&self) -> &str {
        &self.traceparent
    }

    /// From `{"traceparent", "tracestate"?, "baggage"?}` (JSON), as JavaScript hands it with a read or a
    /// prompt get (`lib/telemetry.ts`).
    pub fn from_json(json: &str) -> Result<Self> {
        #[derive(serde::Deserialize)]
        struct Given {
            traceparent: String,
            tracestate: Option<String>,
            baggage: Option<String>,
        }
        let given: Given = serde_json::from_str(json).map_err(|_| {
            McpError::InvalidArguments("the trace context must be {traceparent, tracestate?}".to_owned())
        })?;
        TraceContext::new(given.traceparent, given.tracestate, given.baggage)
    }

    /// As a request's `_meta` object (for params built as JSON values).
    pub fn meta_value(&self) -> serde_json::Value {
        let mut meta = serde_json::Map::new();
        meta.insert("traceparent".into(), self.traceparent.clone().into());
        for (key, value) in [("tracestate", &self.tracestate), ("baggage", &self.baggage)] {
            if let Some(value) = value {
                meta.insert(key.into(), value.clone().into());
            }
        }
        serde_json::Value::Object(meta)
    }

    /// As JSON object members for the host (`"traceparent":…,` and the others present).
    pub fn members(&self) -> String {
        let mut out = String::new();
        self.push_meta(&mut out);
        out
    }

    /// Appends `"traceparent":…` (and `tracestate`, `baggage` when present) as `_meta` members, each
    /// followed by a comma, ready to go before the members that follow.
    pub fn push_meta(&self, out: &mut String) {
        let members = [
            ("traceparent", Some(&self.traceparent)),
            ("tracestate", self.tracestate.as_ref()),
            ("baggage", self.baggage.as_ref()),
        ];
        for (key, value) in members {
            if let Some(value) = value {
                out.push('"');
                out.push_str(key);
                out.push_str("\":");
                crate::protocol::jsonrpc::push_json_string(out, value);
                out.push(',');
            }
        }
    }
}

/// `00-{trace-id}-{parent-id}-{flags}`, lowercase hex, neither id all zeros (W3C Trace Context, level 1).
pub fn is_traceparent(text: &str) -> bool {
    let bytes = text.as_bytes();
    if bytes.len() != 55 || !text.starts_with("00-") || bytes[35] != b'-' || bytes[52] != b'-' || bytes[2] != b'-' {
        return false;
    }
    let hex = |range: std::ops::Range<usize>| bytes[range].iter().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'));
    let nonzero = |range: std::ops::Range<usize>| bytes[range].iter().any(|b| *b != b'0');
    hex(3..35) && hex(36..52) && hex(53..55) && nonzero(3..35) && nonzero(36..52)
}

/// Printable ASCII and within `max` bytes: what a W3C header value may hold, bounded as the W3C says.
fn check_header_text(field: &str, value: Option<&str>, max: usize) -> Result<()> {
    let Some(value) = value else { return Ok(()) };
    if value.len() > max {
        return Err(McpError::InvalidArguments(format!(
            "ctx.{field} is {} bytes, over the {max} a call may carry",
            value.len()
        )));
    }
    if !value.bytes().all(|b| (0x20..0x7f).contains(&b)) {
        return Err(McpError::InvalidArguments(format!("ctx.{field} must be printable ASCII")));
    }
    Ok(())
}

/// What the engine tells JavaScript about a measured call when it ends.
#[derive(Debug, Clone, PartialEq)]
pub struct CallReport {
    /// From the engine taking the call to its outcome, on the engine's monotonic clock.
    pub elapsed: Duration,
    /// The JSON-RPC error code the server answered with, if it answered with one.
    pub rpc_code: Option<i64>,
    /// The JSON-RPC id the call was (last) sent with; none if it never was.
    pub request_id: Option<u64>,
}

impl CallReport {
    /// `{"us":…,"rpcCode":…,"requestId":…}` (`rpcCode`, `requestId` left out when there is none).
    pub fn to_json(&self) -> String {
        let mut out = format!("{{\"us\":{}", self.elapsed.as_micros());
        if let Some(code) = self.rpc_code {
            out.push_str(&format!(",\"rpcCode\":{code}"));
        }
        if let Some(id) = self.request_id {
            out.push_str(&format!(",\"requestId\":{id}"));
        }
        out.push('}');
        out
    }
}

/// The JSON-RPC error code behind `error`, if the server answered with an error object.
pub fn rpc_code(error: &McpError) -> Option<i64> {
    match error {
        McpError::Rpc { code, .. } => Some(*code),
        McpError::Sent(inner) => rpc_code(inner),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const PARENT: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

    #[test]
    fn only_well_formed_traceparents_pass() {
        assert!(is_traceparent(PARENT));
        for bad in [
            "",
            "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
            "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-",
            "00_4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e473g-00f067aa0ba902b7-01",
        ] {
            assert!(!is_traceparent(bad), "{bad}");
        }
    }

    #[test]
    fn the_context_goes_into_meta_as_given_and_bounded() {
        let context = TraceContext::new(PARENT.into(), Some("rojo=00f067aa0ba902b7".into()), None).unwrap();
        let mut meta = String::new();
        context.push_meta(&mut meta);
        assert_eq!(meta, format!("\"traceparent\":\"{PARENT}\",\"tracestate\":\"rojo=00f067aa0ba902b7\","));
        let too_long = "k=v,".repeat(MAX_TRACESTATE_BYTES / 4 + 1);
        let error = TraceContext::new(PARENT.into(), Some(too_long), None).unwrap_err();
        assert!(error.to_string().contains("tracestate"), "{error}");
        let error = TraceContext::new(PARENT.into(), None, Some("a=b\nc".into())).unwrap_err();
        assert!(error.to_string().contains("printable"), "{error}");
        assert!(TraceContext::new("nope".into(), None, None).is_err());
    }

    #[test]
    fn a_report_names_only_what_it_knows() {
        let report = CallReport { elapsed: Duration::from_micros(1500), rpc_code: None, request_id: None };
        assert_eq!(report.to_json(), r#"{"us":1500}"#);
        let report = CallReport { rpc_code: Some(-32602), request_id: Some(12), ..report };
        assert_eq!(report.to_json(), r#"{"us":1500,"rpcCode":-32602,"requestId":12}"#);
        let rpc = McpError::Rpc { code: -32601, message: "no".into(), data: None };
        assert_eq!(rpc_code(&McpError::Sent(Box::new(rpc))), Some(-32601));
        assert_eq!(rpc_code(&McpError::Aborted), None);
    }
}
