//! Validation of the `headers` of an HTTP server entry. Errors name the header, never its value:
//! header values are where credentials live.

use crate::error::{McpError, Result};
use crate::limits::{MAX_HEADER_BYTES_PER_SERVER, MAX_HEADER_VALUE_BYTES};
use reqwest::header::{HeaderMap, HeaderName, HeaderValue};
use serde_json::{Map, Value};

/// Headers the transport owns. Letting configuration set them would break the session or the framing.
pub const PROTOCOL_OWNED_HEADERS: &[&str] = &[
    "mcp-session-id",
    "mcp-protocol-version",
    "content-type",
    "accept",
    "content-length",
    "host",
    "last-event-id",
    "transfer-encoding",
    "connection",
    // The 2026-07-28 revision's request headers.
    "mcp-method",
    "mcp-name",
];

/// Headers of this prefix carry a call's annotated parameters (2026-07-28): the transport's, never configured.
pub const PROTOCOL_OWNED_PREFIX: &str = "mcp-param-";

pub fn validate_headers(at: &str, headers: &Map<String, Value>) -> Result<HeaderMap> {
    let mut map = HeaderMap::new();
    let mut total = 0;
    for (name, value) in headers {
        let header = HeaderName::from_bytes(name.as_bytes())
            .map_err(|_| McpError::config(format!("{at}.headers: {name:?} is not a valid header name")))?;
        if PROTOCOL_OWNED_HEADERS.contains(&header.as_str()) || header.as_str().starts_with(PROTOCOL_OWNED_PREFIX) {
            return Err(McpError::config(format!(
                "{at}.headers: {name:?} is set by the MCP transport and cannot be configured"
            )));
        }
        let Value::String(text) = value else {
            return Err(McpError::config(format!("{at}.headers: the value of {name:?} must be a string")));
        };
        if text.len() > MAX_HEADER_VALUE_BYTES {
            return Err(McpError::config(format!(
                "{at}.headers: the value of {name:?} is over {MAX_HEADER_VALUE_BYTES} bytes"
            )));
        }
        let mut value = HeaderValue::from_str(text).map_err(|_| {
            McpError::config(format!("{at}.headers: the value of {name:?} has characters a header cannot carry"))
        })?;
        // Configured values are credentials as often as not: kept out of HPACK's table and of Debug output.
        value.set_sensitive(true);
        total += name.len() + text.len();
        if total > MAX_HEADER_BYTES_PER_SERVER {
            return Err(McpError::config(format!("{at}.headers: over {MAX_HEADER_BYTES_PER_SERVER} bytes in all")));
        }
        map.append(header, value);
    }
    Ok(map)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(json: &str) -> Result<HeaderMap> {
        let value: Value = serde_json::from_str(json).unwrap();
        validate_headers("servers[0]", value.as_object().unwrap())
    }

    #[test]
    fn accepts_ordinary_headers() {
        let map = check(r#"{"X-Api-Key":"secret-value","User-Agent":"x"}"#).unwrap();
        assert_eq!(map.len(), 2);
    }

    #[test]
    fn refuses_bad_and_owned_headers_without_echoing_values() {
        for (json, expected) in [
            (r#"{"Bad Name":"secret-value"}"#, "not a valid header name"),
            (r#"{"Mcp-Session-Id":"secret-value"}"#, "set by the MCP transport"),
            (r#"{"content-type":"secret-value"}"#, "set by the MCP transport"),
            (r#"{"X-A":"secret-value\n"}"#, "cannot carry"),
            (r#"{"X-A":5}"#, "must be a string"),
        ] {
            let err = check(json).unwrap_err().to_string();
            assert!(err.contains(expected), "{err}");
            assert!(!err.contains("secret-value"), "{err}");
        }
        let big = format!(r#"{{"X-A":"{}"}}"#, "v".repeat(MAX_HEADER_VALUE_BYTES + 1));
        assert!(check(&big).unwrap_err().to_string().contains("over 16384 bytes"));
        let many: Vec<String> = (0..5).map(|i| format!(r#""X-{i}":"{}""#, "v".repeat(15_000))).collect();
        assert!(check(&format!("{{{}}}", many.join(","))).unwrap_err().to_string().contains("in all"));
    }
}
