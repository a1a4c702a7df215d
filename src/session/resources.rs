//! Resources: `resources/list`, `resources/templates/list`, `resources/read`, and subscriptions —
//! `resources/subscribe`/`unsubscribe` in the session era (2025-11-25), `subscriptions/listen` with
//! `resourceSubscriptions` in 2026-07-28, whose `notifications/resources/updated` arrive through
//! [`crate::session::connection::ConnectionEvents::resource_updated`].
//!
//! A read's contents are text (kept as the server's string) or a blob, decoded from base64 once, here,
//! and handed on as bytes. The client never dereferences a URI itself (`http:`, `file:` or any other):
//! every read is a request to the server that listed it.

use super::{list_all, Listed};
use crate::error::{McpError, Result};
use crate::limits::MAX_JSON_DEPTH;
use crate::protocol::nesting;
use crate::session::connection::{Connection, RequestOptions};
use crate::telemetry::TraceContext;
use base64::Engine as _;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// JSON-RPC's code for a resource the server does not have, in 2025-11-25.
const RESOURCE_NOT_FOUND: i64 = -32002;
/// Invalid params: in 2026-07-28 a resource not found is this code with `data: { uri }`.
const INVALID_PARAMS: i64 = -32602;

/// What a listed resource and a listed template both say of themselves.
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Described {
    #[serde(flatten)]
    pub named: super::Named,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mime_type: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub annotations: Option<Value>,
    /// The server's `_meta`, passed on as sent: an MCP App's `ui` (its CSP, permissions) is for the host
    /// to enforce, not for this client to judge. One that is not an object is dropped.
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none", deserialize_with = "object_only")]
    pub meta: Option<Value>,
}

/// `_meta` is an object in every version of MCP: anything else is dropped, not refused.
fn object_only<'de, D: serde::Deserializer<'de>>(deserializer: D) -> std::result::Result<Option<Value>, D::Error> {
    Ok(Option::<Value>::deserialize(deserializer)?.filter(Value::is_object))
}

/// A listed resource (`Resource`).
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq)]
pub struct Resource {
    pub uri: String,
    #[serde(flatten)]
    pub described: Described,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub size: Option<u64>,
}

/// A listed resource template (`ResourceTemplate`, an RFC 6570 `uriTemplate`).
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ResourceTemplate {
    pub uri_template: String,
    #[serde(flatten)]
    pub described: Described,
}

pub async fn list(connection: &Connection, opts: &RequestOptions<'_>) -> Result<Listed<Resource>> {
    list_all(connection, "resources/list", "resources", opts).await
}

pub async fn list_templates(connection: &Connection, opts: &RequestOptions<'_>) -> Result<Listed<ResourceTemplate>> {
    list_all(connection, "resources/templates/list", "resourceTemplates", opts).await
}

/// One item of a read's `contents`.
#[derive(Debug, Clone, PartialEq)]
pub struct Contents {
    pub uri: String,
    pub mime_type: Option<String>,
    pub body: Body,
    /// The item's `_meta` exactly as the server wrote it (an MCP App's `ui.csp` and `ui.permissions`).
    pub meta: Option<Meta>,
}

/// A `_meta` object kept as the server's text.
#[derive(Debug, Clone, Serialize)]
#[serde(transparent)]
pub struct Meta(Box<serde_json::value::RawValue>);

impl PartialEq for Meta {
    fn eq(&self, other: &Self) -> bool {
        self.0.get() == other.0.get()
    }
}

impl Meta {
    /// A read item's `_meta`, kept only if it is an object (as a listing's is).
    fn object_only<'de, D: serde::Deserializer<'de>>(deserializer: D) -> std::result::Result<Option<Meta>, D::Error> {
        let raw = Option::<Box<serde_json::value::RawValue>>::deserialize(deserializer)?;
        Ok(raw.filter(|raw| raw.get().trim_start().starts_with('{')).map(Meta))
    }
}

#[derive(Debug, Clone, PartialEq)]
pub enum Body {
    Text(String),
    /// Decoded from the server's base64.
    Blob(Vec<u8>),
}

/// What `resources/read` answered.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ReadResult {
    pub contents: Vec<Contents>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct WireContents {
    uri: String,
    #[serde(default)]
    mime_type: Option<String>,
    #[serde(default)]
    text: Option<String>,
    #[serde(default)]
    blob: Option<String>,
    #[serde(rename = "_meta", default, deserialize_with = "Meta::object_only")]
    meta: Option<Meta>,
}

#[derive(Deserialize)]
struct WireRead {
    contents: Vec<WireContents>,
}

/// Read `uri`. A resource the server does not have is `mcp_resource_not_found`; a result over
/// `maxResultBytes` is refused by the transport (`mcp_result_too_large`) and the connection goes on.
/// `trace`: the caller's trace context, sent in `params._meta`.
pub async fn read(
    connection: &Connection,
    uri: &str,
    trace: Option<&TraceContext>,
    opts: &RequestOptions<'_>,
) -> Result<ReadResult> {
    read_answered(uri, connection.request_named("resources/read", uri, &read_params(uri, trace), opts).await)
}

/// [`read`] begun now: `done` hears the outcome from the thread that reads the server's answer.
pub fn start_read(
    connection: &Connection,
    uri: &str,
    trace: Option<&TraceContext>,
    opts: &RequestOptions<'_>,
    done: impl FnOnce(Result<ReadResult>) + Send + 'static,
) {
    let at = uri.to_owned();
    let reply = crate::session::connection::Reply::Callback(Box::new(move |answer| done(read_answered(&at, answer))));
    connection.start_named("resources/read", uri, read_params(uri, trace), opts, reply);
}

fn read_params(uri: &str, trace: Option<&TraceContext>) -> String {
    match trace {
        Some(trace) => serde_json::json!({ "uri": uri, "_meta": trace.meta_value() }).to_string(),
        None => serde_json::json!({ "uri": uri }).to_string(),
    }
}

fn read_answered(uri: &str, answer: Result<Box<serde_json::value::RawValue>>) -> Result<ReadResult> {
    parse_read(answer.map_err(|e| not_found(uri, e))?.get())
}

/// A `ReadResourceResult`, its blobs decoded.
pub fn parse_read(text: &str) -> Result<ReadResult> {
    if nesting::exceeds_depth(text.as_bytes(), MAX_JSON_DEPTH) {
        return Err(McpError::ResultTooDeep { max_depth: MAX_JSON_DEPTH });
    }
    let wire: WireRead = serde_json::from_str(text)
        .map_err(|_| McpError::Protocol("resources/read returned a malformed result".into()))?;
    let mut contents = Vec::with_capacity(wire.contents.len());
    for item in wire.contents {
        let body = match (item.text, item.blob) {
            (Some(text), None) => Body::Text(text),
            (None, Some(blob)) => Body::Blob(
                decode_blob(&blob)
                    .ok_or_else(|| McpError::Protocol("resources/read returned a blob that is not base64".into()))?,
            ),
            _ => {
                return Err(McpError::Protocol(
                    "resources/read returned contents with neither (or both) text and blob".into(),
                ))
            }
        };
        contents.push(Contents { uri: item.uri, mime_type: item.mime_type, body, meta: item.meta });
    }
    Ok(ReadResult { contents })
}

/// Standard base64, padded or not (servers differ), whitespace refused.
fn decode_blob(blob: &str) -> Option<Vec<u8>> {
    let engine = base64::engine::GeneralPurpose::new(
        &base64::alphabet::STANDARD,
        base64::engine::GeneralPurposeConfig::new()
            .with_decode_padding_mode(base64::engine::DecodePaddingMode::Indifferent),
    );
    engine.decode(blob).ok()
}

/// `resources/subscribe` (session era): the server sends `notifications/resources/updated` for `uri`.
pub async fn subscribe(connection: &Connection, uri: &str, opts: &RequestOptions<'_>) -> Result<()> {
    let params = serde_json::json!({ "uri": uri }).to_string();
    connection.request("resources/subscribe", Some(&params), opts).await.map(drop).map_err(|e| not_found(uri, e))
}

/// `resources/unsubscribe` (session era).
pub async fn unsubscribe(connection: &Connection, uri: &str, opts: &RequestOptions<'_>) -> Result<()> {
    let params = serde_json::json!({ "uri": uri }).to_string();
    connection.request("resources/unsubscribe", Some(&params), opts).await.map(drop)
}

/// The `subscriptions/listen` filter of a 2026-07-28 subscription to `uri`'s updates.
pub fn listen_filter(uri: &str) -> String {
    serde_json::json!({ "notifications": { "resourceSubscriptions": [uri] } }).to_string()
}

/// A server's error for `uri` as `mcp_resource_not_found` when it says the resource does not exist:
/// `-32002` (2025-11-25), or `-32602` whose `data` names the URI (2026-07-28), or — the official
/// TypeScript SDK 1.x, on every era — `-32602` without data whose message names the URI and says
/// "not found". Anything else as it was.
pub fn not_found(uri: &str, error: McpError) -> McpError {
    match &error {
        McpError::Rpc { code: RESOURCE_NOT_FOUND, .. } => McpError::ResourceNotFound(quoted(uri)),
        McpError::Rpc { code: INVALID_PARAMS, data: Some(data), .. } if names_uri(data, uri) => {
            McpError::ResourceNotFound(quoted(uri))
        }
        McpError::Rpc { code: INVALID_PARAMS, data: None, message }
            if message.contains(uri) && message.to_ascii_lowercase().contains("not found") =>
        {
            McpError::ResourceNotFound(quoted(uri))
        }
        _ => error,
    }
}

fn names_uri(data: &str, uri: &str) -> bool {
    serde_json::from_str::<Value>(data)
        .ok()
        .and_then(|d| d.get("uri").and_then(Value::as_str).map(|u| u == uri))
        .unwrap_or(false)
}

/// The URI for an error message: without userinfo, query or fragment, cut short.
fn quoted(uri: &str) -> String {
    format!("the server has no resource {}", crate::guard::redact::shown_uri(uri))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_and_blob_contents_are_read_and_blobs_decoded_once() {
        let read = parse_read(r#"{"contents":[{"uri":"a://t","mimeType":"text/plain","text":"hi"},{"uri":"a://b","blob":"AAEC/w=="},{"uri":"a://n","blob":"AAEC/w"}]}"#).unwrap();
        assert_eq!(
            read.contents[0],
            Contents {
                uri: "a://t".into(),
                mime_type: Some("text/plain".into()),
                body: Body::Text("hi".into()),
                meta: None
            }
        );
        assert_eq!(read.contents[1].body, Body::Blob(vec![0, 1, 2, 255]));
        assert_eq!(read.contents[2].body, Body::Blob(vec![0, 1, 2, 255]));
    }

    #[test]
    fn an_apps_meta_is_kept_as_written() {
        let meta = r#"{ "ui": {"csp": {"connectDomains": ["https://api.example"]}, "prefersBorder": true}, "z": 1 }"#;
        let read = parse_read(&format!(
            r#"{{"contents":[{{"uri":"ui://v","mimeType":"text/html;profile=mcp-app","text":"<p>","_meta":{meta}}}]}}"#
        ))
        .unwrap();
        assert_eq!(serde_json::to_string(read.contents[0].meta.as_ref().unwrap()).unwrap(), meta);
        assert_eq!(
            parse_read(r#"{"contents":[{"uri":"a","text":"x","_meta":[1]}]}"#).unwrap().contents[0].meta,
            None,
            "not an object: dropped"
        );
        let listed: Resource = serde_json::from_str(r#"{"uri":"a","name":"n","_meta":"x"}"#).unwrap();
        assert_eq!(listed.described.meta, None);
    }

    #[test]
    fn malformed_reads_are_protocol_errors() {
        for bad in [
            r#"{"contents":[{"uri":"a"}]}"#,
            r#"{"contents":[{"uri":"a","text":"x","blob":"AA=="}]}"#,
            r#"{"contents":[{"uri":"a","blob":"!!"}]}"#,
            "{}",
        ] {
            assert_eq!(parse_read(bad).unwrap_err().code(), "mcp_protocol_error", "{bad}");
        }
    }

    #[test]
    fn not_found_in_either_era() {
        let rpc =
            |code, data: Option<&str>| McpError::Rpc { code, message: "nope".into(), data: data.map(str::to_owned) };
        assert_eq!(not_found("x://a", rpc(-32002, None)).code(), "mcp_resource_not_found");
        assert_eq!(not_found("x://a", rpc(-32602, Some(r#"{"uri":"x://a"}"#))).code(), "mcp_resource_not_found");
        assert_eq!(not_found("x://a", rpc(-32602, None)).code(), "mcp_protocol_error");
        let sdk1 = McpError::Rpc { code: -32602, message: "Resource x://a not found".into(), data: None };
        assert_eq!(not_found("x://a", sdk1).code(), "mcp_resource_not_found");
        let other = McpError::Rpc { code: -32602, message: "Resource x://b not found".into(), data: None };
        assert_eq!(not_found("x://a", other).code(), "mcp_protocol_error");
        assert_eq!(not_found("x://a", rpc(-32602, Some(r#"{"uri":"x://b"}"#))).code(), "mcp_protocol_error");
        assert_eq!(not_found("x://a", McpError::Timeout { after_ms: 1 }).code(), "mcp_timeout");
    }

    #[test]
    fn listings_parse_optional_members() {
        let r: Resource = serde_json::from_str(r#"{"uri":"u","name":"n","size":3,"extra":1}"#).unwrap();
        assert_eq!((r.size, r.described.mime_type.as_deref()), (Some(3), None));
        assert_eq!(serde_json::to_string(&r).unwrap(), r#"{"uri":"u","name":"n","size":3}"#);
        assert!(serde_json::from_str::<ResourceTemplate>(r#"{"uriTemplate":"a://{x}","name":"t"}"#).is_ok());
        assert_eq!(listen_filter("a://x"), r#"{"notifications":{"resourceSubscriptions":["a://x"]}}"#);
    }
}
