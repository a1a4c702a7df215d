//! The two eras of MCP: session-based (2025-11-25 and older: `initialize`, then a session) and modern
//! (2026-07-28: no handshake; every request carries `_meta` with the protocol version, the client's
//! capabilities and its identity; `server/discover` tells what the server is).
//!
//! A server's era is found by asking a modern question first ([`classify`]): a `DiscoverResult` (or an
//! `UnsupportedProtocolVersion` error naming a modern version we speak) means modern; an authorization
//! refusal is no evidence either way, and so is no answer (a server may still be starting); anything else
//! means a session-based server, which then gets `initialize`. This file holds the wire side only (no
//! I/O, no state): the asking, the remembering of each server's answer and the retry when it no longer
//! holds are `session::connection::negotiation`'s.

use super::mcp::{Implementation, ServerCapabilities};
use crate::error::McpError;
use serde::Deserialize;
use serde_json::value::RawValue;

/// The modern revisions this client speaks, newest first.
pub const MODERN_PROTOCOL_VERSIONS: &[&str] = &["2026-07-28"];
pub const MODERN_PROTOCOL_VERSION: &str = MODERN_PROTOCOL_VERSIONS[0];
/// `UnsupportedProtocolVersionError`: `data.supported` lists what the server speaks.
pub const UNSUPPORTED_PROTOCOL_VERSION: i64 = -32022;
/// A 2026-07-28 request whose headers disagree with its body (`MCP-Protocol-Version`, `Mcp-Name`, a
/// missing or mismatched `Mcp-Param-*`): refused before it is handled.
pub const HEADER_MISMATCH: i64 = -32020;

pub const META_PROTOCOL_VERSION: &str = "io.modelcontextprotocol/protocolVersion";
pub const META_CLIENT_CAPABILITIES: &str = "io.modelcontextprotocol/clientCapabilities";
pub const META_CLIENT_INFO: &str = "io.modelcontextprotocol/clientInfo";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Era {
    /// `initialize` and a session (2025-11-25 and older).
    Legacy,
    /// Stateless, at this version.
    Modern(&'static str),
}

/// The `_meta` members every modern request carries, as the members of a JSON object (no braces).
pub fn meta_members(version: &str, capabilities: &serde_json::Map<String, serde_json::Value>) -> String {
    let meta = serde_json::json!({
        META_PROTOCOL_VERSION: version,
        META_CLIENT_CAPABILITIES: capabilities,
        META_CLIENT_INFO: { "name": super::mcp::CLIENT_NAME, "version": super::mcp::CLIENT_VERSION },
    })
    .to_string();
    meta[1..meta.len() - 1].to_owned()
}

/// `params` (an object, or none) with the `_meta` members added to its `_meta`.
pub fn with_meta(params: Option<&str>, members: &str) -> String {
    let Some(params) = params else { return format!("{{\"_meta\":{{{members}}}}}") };
    let Ok(mut object) = serde_json::from_str::<serde_json::Map<String, serde_json::Value>>(params) else {
        return params.to_owned(); // not an object: nothing this client sends
    };
    let ours: serde_json::Map<String, serde_json::Value> =
        serde_json::from_str(&format!("{{{members}}}")).expect("meta members are an object's");
    match object.get_mut("_meta") {
        Some(serde_json::Value::Object(meta)) => meta.extend(ours),
        _ => {
            object.insert("_meta".into(), serde_json::Value::Object(ours));
        }
    }
    serde_json::Value::Object(object).to_string()
}

/// `server/discover`'s result: the fields this client uses.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DiscoverResult {
    #[serde(default)]
    pub supported_versions: Vec<String>,
    #[serde(default)]
    pub capabilities: ServerCapabilities,
    /// Third-party text. Kept for the record; never placed in anything shown to a model.
    #[serde(default)]
    pub instructions: Option<String>,
    /// Where early drafts put it; the revision moved it into `_meta`.
    #[serde(default)]
    pub server_info: Option<Implementation>,
    #[serde(default, rename = "_meta")]
    pub meta: Option<DiscoverMeta>,
}

#[derive(Debug, Default, Deserialize)]
pub struct DiscoverMeta {
    #[serde(default, rename = "io.modelcontextprotocol/serverInfo")]
    pub server_info: Option<Implementation>,
}

impl DiscoverResult {
    pub fn server_info(&self) -> Implementation {
        self.meta.as_ref().and_then(|m| m.server_info.clone()).or_else(|| self.server_info.clone()).unwrap_or_default()
    }
}

/// What one answer to a modern probe says about the server.
#[derive(Debug)]
pub enum Verdict {
    Modern(&'static str, DiscoverResult),
    /// Ask again at this version (the server named it among those it supports).
    Retry(&'static str),
    /// Session-based: the server answered, and not as a modern one.
    Legacy,
    /// Not an answer (a failed exchange, an HTTP error without a JSON-RPC body, a timeout): try
    /// `initialize` this time, but this is no evidence to remember.
    Unknown,
    /// No evidence either way, and nothing to continue with (an authorization refusal, a closed toolset…).
    Fatal(McpError),
}

/// Classify the answer to `server/discover` sent at `requested`. No answer (a timeout, a failed exchange)
/// is no evidence of an era on any transport: a server that has said nothing yet may be one still
/// starting (a first `uvx` or `docker run` download, a loaded machine).
pub fn classify(outcome: Result<Box<RawValue>, McpError>, requested: &str) -> Verdict {
    match outcome {
        Ok(raw) => {
            let Ok(result) = serde_json::from_str::<DiscoverResult>(raw.get()) else { return Verdict::Legacy };
            match pick(result.supported_versions.iter().map(String::as_str), requested) {
                Some(v) if v == requested => Verdict::Modern(v, result),
                Some(v) => Verdict::Retry(v),
                None => Verdict::Legacy,
            }
        }
        Err(McpError::Rpc { code: UNSUPPORTED_PROTOCOL_VERSION, data: Some(data), .. }) => match supported(&data) {
            Some(supported) => {
                pick(supported.iter().map(String::as_str), requested).map_or(Verdict::Legacy, Verdict::Retry)
            }
            None => Verdict::Legacy,
        },
        Err(
            e @ (McpError::Auth(_)
            | McpError::Reauthorized(_)
            | McpError::HostNotAllowed(_)
            | McpError::RedirectRefused(_)
            | McpError::Closed
            | McpError::Aborted
            | McpError::ConfigInvalid(_)),
        ) => Verdict::Fatal(e),
        Err(McpError::Rpc { .. } | McpError::Protocol(_)) => Verdict::Legacy,
        Err(_) => Verdict::Unknown,
    }
}

/// The modern version we speak that an `UnsupportedProtocolVersion` (-32022) refusal of `initialize` names
/// (`data.supported`), if any: the server is one of the modern era (say, a dual-era server whose
/// connection the probe already opened in it), and the connection continues in that era.
pub fn modern_version_named(error: &McpError) -> Option<&'static str> {
    let McpError::Rpc { code: UNSUPPORTED_PROTOCOL_VERSION, data: Some(data), .. } = error else { return None };
    let supported = supported(data)?;
    MODERN_PROTOCOL_VERSIONS.iter().copied().find(|v| supported.iter().any(|s| s == v))
}

/// `data.supported` of an `UnsupportedProtocolVersion` error.
fn supported(data: &str) -> Option<Vec<String>> {
    #[derive(Deserialize)]
    struct Supported {
        supported: Vec<String>,
    }
    serde_json::from_str::<Supported>(data).ok().map(|s| s.supported)
}

/// The version to use among those a server supports: the requested one if listed, else our newest.
fn pick<'a>(supported: impl Iterator<Item = &'a str> + Clone, requested: &str) -> Option<&'static str> {
    let ours = |v: &str| MODERN_PROTOCOL_VERSIONS.iter().copied().find(|ours| *ours == v);
    supported
        .clone()
        .find(|v| *v == requested)
        .and_then(ours)
        .or_else(|| MODERN_PROTOCOL_VERSIONS.iter().copied().find(|v| supported.clone().any(|s| s == *v)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn raw(text: &str) -> Box<RawValue> {
        RawValue::from_string(text.to_owned()).unwrap()
    }

    #[test]
    fn meta_is_added_to_any_params() {
        let members = meta_members("2026-07-28", &serde_json::Map::new());
        let bare: serde_json::Value = serde_json::from_str(&with_meta(None, &members)).unwrap();
        assert_eq!(bare["_meta"][META_PROTOCOL_VERSION], "2026-07-28");
        assert_eq!(bare["_meta"][META_CLIENT_CAPABILITIES], serde_json::json!({}));
        assert_eq!(bare["_meta"][META_CLIENT_INFO]["name"], "mcpferry");
        let merged: serde_json::Value =
            serde_json::from_str(&with_meta(Some(r#"{"cursor":"c","_meta":{"progressToken":3}}"#), &members)).unwrap();
        assert_eq!(merged["cursor"], "c");
        assert_eq!(merged["_meta"]["progressToken"], 3);
        assert_eq!(merged["_meta"][META_PROTOCOL_VERSION], "2026-07-28");
    }

    #[test]
    fn only_a_modern_answer_is_modern_and_auth_is_no_evidence() {
        let discover = r#"{"supportedVersions":["2026-07-28","2025-11-25"],"capabilities":{"tools":{"listChanged":true}},"_meta":{"io.modelcontextprotocol/serverInfo":{"name":"s","version":"1"}}}"#;
        match classify(Ok(raw(discover)), "2026-07-28") {
            Verdict::Modern(v, result) => {
                assert_eq!(v, "2026-07-28");
                assert_eq!(result.server_info().name, "s");
            }
            other => panic!("{other:?}"),
        }
        assert!(matches!(classify(Ok(raw(r#"{"supportedVersions":["2025-11-25"]}"#)), "2026-07-28"), Verdict::Legacy));
        assert!(matches!(classify(Ok(raw("{}")), "2026-07-28"), Verdict::Legacy));
        let unsupported = |data: &str| McpError::Rpc {
            code: UNSUPPORTED_PROTOCOL_VERSION,
            message: "no".into(),
            data: Some(data.into()),
        };
        assert!(matches!(
            classify(Err(unsupported(r#"{"supported":["2026-07-28"]}"#)), "2026-07-28"),
            Verdict::Retry("2026-07-28")
        ));
        assert!(matches!(classify(Err(unsupported(r#"{"supported":["2025-11-25"]}"#)), "2026-07-28"), Verdict::Legacy));
        assert!(matches!(
            classify(Err(McpError::Rpc { code: -32601, message: "?".into(), data: None }), "2026-07-28"),
            Verdict::Legacy
        ));
        assert!(matches!(classify(Err(McpError::Transport("HTTP 503".into())), "2026-07-28"), Verdict::Unknown));
        // Silence is no evidence, over stdio as over HTTP: the server may still be starting.
        assert!(matches!(classify(Err(McpError::Timeout { after_ms: 1 }), "2026-07-28"), Verdict::Unknown));
        assert!(matches!(classify(Err(McpError::Auth("login".into())), "2026-07-28"), Verdict::Fatal(_)));
    }

    #[test]
    fn a_refused_initialize_names_a_modern_version_only_in_an_unsupported_version_error_we_can_read() {
        let unsupported = |data: Option<&str>| McpError::Rpc {
            code: UNSUPPORTED_PROTOCOL_VERSION,
            message: "no".into(),
            data: data.map(Into::into),
        };
        // The Python SDK 2.x's refusal of initialize on a connection its probe opened in the modern era.
        assert_eq!(
            modern_version_named(&unsupported(Some(r#"{"supported":["2026-07-28"],"requested":"2025-11-25"}"#))),
            Some("2026-07-28")
        );
        assert_eq!(
            modern_version_named(&unsupported(Some(r#"{"supported":["2099-01-01","2026-07-28"]}"#))),
            Some("2026-07-28")
        );
        assert_eq!(modern_version_named(&unsupported(Some(r#"{"supported":["2025-11-25"]}"#))), None);
        assert_eq!(modern_version_named(&unsupported(Some("[]"))), None);
        assert_eq!(modern_version_named(&unsupported(None)), None);
        let other = McpError::Rpc {
            code: -32601,
            message: "2026-07-28".into(),
            data: Some(r#"{"supported":["2026-07-28"]}"#.into()),
        };
        assert_eq!(modern_version_named(&other), None);
    }
}
