//! Read-only tools the host binds by name, one server at a time: the engine's half of `mcpferry/purra`
//! (the name is that of the purra-mcp contract it implements, kept as the subpath's name). The host
//! names each remote tool it exposes, under its own local name; nothing the server says grants anything,
//! and what it sends back is checked before the host sees it. The TypeScript half (lib/purra.ts) holds
//! the bindings and the host's callbacks; every judgement of what a server sent is made here:
//!
//! | function          | judges                                                                         |
//! |-------------------|--------------------------------------------------------------------------------|
//! | [`limits`]        | the host's limits: each a positive integer, none above its default (timeout: 300 s) |
//! | [`vet_tool`]      | one bound tool: description size, required tasks, both schemas in the profile    |
//! | [`shape_result`]  | one `CallToolResult`: `isError`, size, block count, text only, structured an object |
//! | [`identity_digest`] | the snapshot's `revisionDigest` (`purra.json-identity/v1`)                     |
//!
//! A refusal is one of purra's stable codes (`mcp_schema_unsupported`, …), never the server's text.

use crate::limits::{
    MAX_PURRA_IDENTITY_BYTES, MAX_PURRA_IDENTITY_DEPTH_LEVELS, MAX_PURRA_IDENTITY_NODES, MAX_PURRA_TIMEOUT_MS,
};
use crate::schema::profile;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

/// Limits when the host sets none, and the most it may set (the timeout may be raised to
/// [`MAX_PURRA_TIMEOUT_MS`]).
pub const DEFAULT_LIMITS: Limits = Limits {
    max_pages: 32,
    max_tools: 256,
    max_catalog_bytes: 1_048_576,
    max_schema_bytes: 65_536,
    max_description_bytes: 8_192,
    max_result_bytes: 65_536,
    max_content_blocks: 128,
    timeout_ms: 30_000,
};
/// The identity profile the digest follows, hashed in as its first line.
pub const JSON_IDENTITY_PROFILE: &str = "purra.json-identity/v1";

/// A stable refusal code of purra's list.
pub type Code = &'static str;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Limits {
    pub max_pages: u64,
    pub max_tools: u64,
    pub max_catalog_bytes: u64,
    pub max_schema_bytes: u64,
    pub max_description_bytes: u64,
    pub max_result_bytes: u64,
    pub max_content_blocks: u64,
    pub timeout_ms: u64,
}

/// The host's `limits` (JSON, any subset) over the defaults. Unknown keys, and values that are not
/// positive integers or exceed their cap, are `mcp_binding_invalid`.
pub fn limits(given: &str) -> Result<Limits, Code> {
    let invalid = "mcp_binding_invalid";
    let Ok(Value::Object(given)) = serde_json::from_str::<Value>(given) else { return Err(invalid) };
    let mut merged = serde_json::to_value(DEFAULT_LIMITS).expect("limits serialize");
    let defaults = merged.as_object_mut().expect("an object");
    for (key, value) in given {
        let cap = match defaults.get(&key).and_then(Value::as_u64) {
            Some(_) if key == "timeoutMs" => MAX_PURRA_TIMEOUT_MS,
            Some(default) => default,
            None => return Err(invalid),
        };
        match value.as_u64() {
            Some(n) if n >= 1 && n <= cap => defaults.insert(key, n.into()),
            _ => return Err(invalid),
        };
    }
    serde_json::from_value(merged).map_err(|_| invalid)
}

/// A bound tool as the snapshot keeps it.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct VettedTool {
    pub remote_name: String,
    pub description: String,
    pub input_schema: Value,
    pub output_schema: Value,
}

/// One bound tool (its definition as listed): `mcp_catalog_limit_exceeded` for a description over
/// `maxDescriptionBytes`, `mcp_tool_unsupported` for a tool that requires tasks, `mcp_schema_unsupported`
/// for an input or output schema outside the profile (or over `maxSchemaBytes`), `mcp_protocol_error`
/// for a definition that is not one.
pub fn vet_tool(tool: &str, limits: &Limits) -> Result<VettedTool, Code> {
    let Ok(Value::Object(mut tool)) = serde_json::from_str::<Value>(tool) else { return Err("mcp_protocol_error") };
    let Some(Value::String(name)) = tool.remove("name") else { return Err("mcp_protocol_error") };
    let description = match tool.remove("description") {
        None | Some(Value::Null) => String::new(),
        Some(Value::String(text)) => text,
        Some(_) => return Err("mcp_protocol_error"),
    };
    if description.len() as u64 > limits.max_description_bytes {
        return Err("mcp_catalog_limit_exceeded");
    }
    if tool.get("execution").and_then(|e| e.get("taskSupport")).and_then(Value::as_str) == Some("required") {
        return Err("mcp_tool_unsupported");
    }
    let max_schema = usize::try_from(limits.max_schema_bytes).unwrap_or(usize::MAX);
    let in_profile = |schema: &Value| profile::check(schema, max_schema).map_err(|_| "mcp_schema_unsupported");
    let input_schema = tool.remove("inputSchema").ok_or("mcp_schema_unsupported")?;
    in_profile(&input_schema)?;
    let output_schema = match tool.remove("outputSchema") {
        None | Some(Value::Null) => Value::Null,
        Some(schema) => {
            in_profile(&schema)?;
            schema
        }
    };
    Ok(VettedTool { remote_name: name, description, input_schema, output_schema })
}

/// What a successful call gives the model.
#[derive(Debug, Serialize, PartialEq)]
pub struct Envelope {
    pub text: Vec<String>,
    pub structured: Option<Map<String, Value>>,
}

/// One `CallToolResult` (JSON) as the envelope, or why it fails closed: `mcp_tool_error` (`isError`),
/// `mcp_result_too_large` (over `maxResultBytes` or `maxContentBlocks`), `mcp_result_unsupported` (a
/// block that is not text: media, resources, links), `mcp_result_invalid` (no content array, or
/// `structuredContent` that is not an object). The output schema is checked by the caller.
pub fn shape_result(result: &str, limits: &Limits) -> Result<Envelope, Code> {
    let Ok(Value::Object(mut result)) = serde_json::from_str::<Value>(result) else { return Err("mcp_result_invalid") };
    if result.get("isError").and_then(Value::as_bool) == Some(true) {
        return Err("mcp_tool_error");
    }
    let Some(Value::Array(content)) = result.remove("content") else { return Err("mcp_result_invalid") };
    if content.len() as u64 > limits.max_content_blocks || result_bytes(&content, &result) > limits.max_result_bytes {
        return Err("mcp_result_too_large");
    }
    let mut text = Vec::with_capacity(content.len());
    for block in content {
        match block {
            Value::Object(mut block) if block.get("type").and_then(Value::as_str) == Some("text") => {
                match block.remove("text") {
                    Some(Value::String(t)) => text.push(t),
                    _ => return Err("mcp_result_invalid"),
                }
            }
            _ => return Err("mcp_result_unsupported"),
        }
    }
    let structured = match result.remove("structuredContent") {
        None | Some(Value::Null) => None,
        Some(Value::Object(object)) => Some(object),
        Some(_) => return Err("mcp_result_invalid"),
    };
    Ok(Envelope { text, structured })
}

fn result_bytes(content: &[Value], rest: &Map<String, Value>) -> u64 {
    let text = |value: &Value| serde_json::to_string(value).map_or(u64::MAX, |t| t.len() as u64);
    content
        .iter()
        .map(text)
        .fold(0, u64::saturating_add)
        .saturating_add(rest.values().map(text).fold(0, u64::saturating_add))
}

/// SHA-256 (lowercase hex) of `value` in the `purra.json-identity/v1` encoding: the profile name and a
/// newline, then each value tagged by kind — `n`, `t`/`f`, `d` + the IEEE 754 double as 16 hex digits
/// (big-endian, `-0` as `0`), `s<bytes>:` + UTF-8 in hex, `a<count>:` + items, `o<count>:` + key and
/// value pairs in the byte order of the keys. `None` when the value is over the identity bounds.
pub fn identity_digest(value: &Value) -> Option<String> {
    let mut out = String::with_capacity(256);
    out.push_str(JSON_IDENTITY_PROFILE);
    out.push('\n');
    let mut budget = (MAX_PURRA_IDENTITY_NODES, MAX_PURRA_IDENTITY_BYTES);
    encode(value, 0, &mut budget, &mut out)?;
    Some(hex(&Sha256::digest(out.as_bytes())))
}

fn encode(value: &Value, depth: usize, budget: &mut (usize, usize), out: &mut String) -> Option<()> {
    if depth > MAX_PURRA_IDENTITY_DEPTH_LEVELS {
        return None;
    }
    budget.0 = budget.0.checked_sub(1)?;
    match value {
        Value::Null => out.push('n'),
        Value::Bool(b) => out.push(if *b { 't' } else { 'f' }),
        Value::Number(n) => {
            let f = n.as_f64().filter(|f| f.is_finite())?;
            let f = if f == 0.0 { 0.0 } else { f };
            out.push('d');
            out.push_str(&hex(&f.to_be_bytes()));
        }
        Value::String(s) => encode_str(s, budget, out)?,
        Value::Array(items) => {
            out.push_str(&format!("a{}:", items.len()));
            for item in items {
                encode(item, depth + 1, budget, out)?;
            }
        }
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort_by(|a, b| a.as_bytes().cmp(b.as_bytes()));
            out.push_str(&format!("o{}:", keys.len()));
            for key in keys {
                budget.0 = budget.0.checked_sub(1)?;
                encode_str(key, budget, out)?;
                encode(&map[key.as_str()], depth + 1, budget, out)?;
            }
        }
    }
    Some(())
}

fn encode_str(s: &str, budget: &mut (usize, usize), out: &mut String) -> Option<()> {
    budget.1 = budget.1.checked_sub(s.len())?;
    out.push_str(&format!("s{}:", s.len()));
    out.push_str(&hex(s.as_bytes()));
    Some(())
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn limits_default_lower_and_refuse_raising_or_unknown_keys() {
        assert_eq!(limits("{}"), Ok(DEFAULT_LIMITS));
        let lowered = limits(r#"{"maxTools":3,"timeoutMs":120000}"#).unwrap();
        assert_eq!((lowered.max_tools, lowered.timeout_ms, lowered.max_pages), (3, 120_000, 32));
        for bad in [
            r#"{"maxTools":257}"#,
            r#"{"timeoutMs":300001}"#,
            r#"{"maxPages":0}"#,
            r#"{"maxPages":1.5}"#,
            r#"{"maxPagez":1}"#,
            "[]",
            r#"{"maxPages":"2"}"#,
        ] {
            assert_eq!(limits(bad), Err("mcp_binding_invalid"), "{bad}");
        }
    }

    #[test]
    fn vets_descriptions_tasks_and_schemas() {
        let tool = |extra: Value| {
            let mut base = json!({ "name": "search", "description": "Search.", "inputSchema": { "type": "object" } });
            base.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
            vet_tool(&base.to_string(), &DEFAULT_LIMITS)
        };
        let ok = tool(json!({ "annotations": { "readOnlyHint": true } })).unwrap();
        assert_eq!((ok.remote_name.as_str(), ok.output_schema.clone()), ("search", Value::Null));
        assert_eq!(tool(json!({ "description": "d".repeat(8193) })).unwrap_err(), "mcp_catalog_limit_exceeded");
        assert_eq!(tool(json!({ "execution": { "taskSupport": "required" } })).unwrap_err(), "mcp_tool_unsupported");
        assert!(tool(json!({ "execution": { "taskSupport": "optional" } })).is_ok());
        assert_eq!(
            tool(json!({ "inputSchema": { "type": "object", "properties": { "n": { "default": 1 } } } })).unwrap_err(),
            "mcp_schema_unsupported"
        );
        assert_eq!(
            tool(json!({ "outputSchema": { "type": "object", "x-fastmcp-wrap-result": true } })).unwrap_err(),
            "mcp_schema_unsupported"
        );
        let small = Limits { max_schema_bytes: 10, ..DEFAULT_LIMITS };
        assert_eq!(
            vet_tool(r#"{"name":"a","inputSchema":{"type":"object","title":"long enough"}}"#, &small).unwrap_err(),
            "mcp_schema_unsupported"
        );
    }

    #[test]
    fn shapes_text_results_and_fails_closed_on_everything_else() {
        let shape = |result: Value| shape_result(&result.to_string(), &DEFAULT_LIMITS);
        assert_eq!(
            shape(
                json!({ "content": [{ "type": "text", "text": "a" }, { "type": "text", "text": "b" }], "structuredContent": { "n": 1 } })
            ),
            Ok(Envelope {
                text: vec!["a".into(), "b".into()],
                structured: Some(json!({ "n": 1 }).as_object().unwrap().clone())
            })
        );
        assert_eq!(shape(json!({ "content": [] })), Ok(Envelope { text: vec![], structured: None }));
        assert_eq!(
            shape(json!({ "content": [{ "type": "text", "text": "no" }], "isError": true })),
            Err("mcp_tool_error")
        );
        for block in [
            json!({ "type": "image", "data": "AA==", "mimeType": "image/png" }),
            json!({ "type": "audio", "data": "AA==", "mimeType": "audio/wav" }),
            json!({ "type": "resource", "resource": { "uri": "file:///x", "text": "x" } }),
            json!({ "type": "resource_link", "uri": "file:///x", "name": "x" }),
        ] {
            assert_eq!(shape(json!({ "content": [block] })), Err("mcp_result_unsupported"));
        }
        assert_eq!(shape(json!({ "content": [], "structuredContent": [1] })), Err("mcp_result_invalid"));
        assert_eq!(shape(json!({ "task": { "taskId": "t" } })), Err("mcp_result_invalid"));
        let blocks: Vec<Value> = (0..129).map(|_| json!({ "type": "text", "text": "" })).collect();
        assert_eq!(shape(json!({ "content": blocks })), Err("mcp_result_too_large"));
        assert_eq!(
            shape(json!({ "content": [{ "type": "text", "text": "x".repeat(65_536) }] })),
            Err("mcp_result_too_large")
        );
    }

    #[test]
    fn identity_digest_follows_the_v1_encoding() {
        // Worked by hand: "purra.json-identity/v1\n" + o2: s1:61 d3ff0000000000000 s1:62 a2:n t
        let value = json!({ "b": [null, true], "a": 1 });
        let text = "purra.json-identity/v1\no2:s1:61d3ff0000000000000s1:62a2:nt";
        assert_eq!(identity_digest(&value).unwrap(), hex(&Sha256::digest(text.as_bytes())));
        // Key order and -0 do not matter; 1 and 1.0 are one number.
        assert_eq!(identity_digest(&json!({ "a": 1.0, "b": [null, true] })), identity_digest(&value));
        assert_eq!(identity_digest(&json!(-0.0)), identity_digest(&json!(0)));
        assert_ne!(identity_digest(&json!("1")), identity_digest(&json!(1)));
        let mut deep = json!(1);
        for _ in 0..=MAX_PURRA_IDENTITY_DEPTH_LEVELS {
            deep = json!([deep]);
        }
        assert_eq!(identity_digest(&deep), None);
    }
}
