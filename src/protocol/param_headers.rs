//! Tool parameters mirrored into HTTP headers (MCP 2026-07-28, `x-mcp-header`).
//!
//! A property schema in a tool's `inputSchema` may carry `"x-mcp-header": "Region"`; every `tools/call`
//! of that tool then sends `Mcp-Param-Region: <the argument's value>`, so a load balancer or gateway can
//! route on it without reading the body. An invalid annotation makes the whole tool invalid: the
//! catalog leaves it out and says why. The same value encoding serves the `Mcp-Name` header.
//!
//! Spec: `basic/transports/streamable-http.mdx#custom-headers-from-tool-parameters` and
//! `#value-encoding`, `server/tools.mdx#x-mcp-header`.

use crate::limits::MAX_QUOTED_BYTES;
use base64::engine::general_purpose::STANDARD;
use base64::Engine;
use reqwest::header::{HeaderName, HeaderValue};
use serde_json::value::RawValue;
use serde_json::{Map, Number, Value};
use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;

/// The schema extension property that designates a parameter.
pub const ANNOTATION: &str = "x-mcp-header";
/// The header a designated parameter travels in is this prefix followed by the annotation, verbatim.
pub const HEADER_PREFIX: &str = "Mcp-Param-";
/// The markers of a Base64-encoded header value (`=?base64?…?=`), exact and lowercase.
const SENTINEL_PREFIX: &str = "=?base64?";
const SENTINEL_SUFFIX: &str = "?=";
/// The largest integer an IEEE 754 double holds exactly (2^53 − 1): a float argument with no fraction
/// within it is written as an integer, as a JavaScript server would print it.
const MAX_SAFE_INTEGER: f64 = 9_007_199_254_740_991.0;
/// The JSON Schema types a designated parameter may have. `number` is excluded by the spec.
const PRIMITIVE_TYPES: [&str; 3] = ["string", "integer", "boolean"];
/// Keywords whose subschemas are not statically reachable: an annotation under one makes the tool
/// invalid. Everything in JSON Schema 2020-12 (and draft-07's spellings) that holds a subschema; a
/// `$ref` target is found under `$defs`/`definitions` (a network `$ref` is never fetched).
const UNREACHABLE_SINGLE: [&str; 12] = [
    "items",
    "additionalItems",
    "contains",
    "additionalProperties",
    "unevaluatedProperties",
    "unevaluatedItems",
    "propertyNames",
    "not",
    "if",
    "then",
    "else",
    "contentSchema",
];
/// Keywords that hold an array of subschemas.
const UNREACHABLE_ARRAYS: [&str; 4] = ["prefixItems", "allOf", "anyOf", "oneOf"];
/// Keywords that hold a map of name to subschema.
const UNREACHABLE_MAPS: [&str; 5] = ["patternProperties", "dependentSchemas", "dependencies", "$defs", "definitions"];

/// One designated parameter of a tool, checked when the tool was listed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParamHeader {
    /// The chain of `properties` keys from the schema root to the annotated property: where its value
    /// sits in the call's `arguments`.
    pub path: Box<[Box<str>]>,
    /// `Mcp-Param-{Name}`, built once.
    pub header: HeaderName,
}

/// A tool's designated parameters as its route keeps them: shared by every call, never copied.
pub type ParamHeaders = Arc<[ParamHeader]>;

/// A header value as the spec's value encoding has it: the text itself when every character is
/// visible ASCII or a space, with no space at either end, and it does not look like an encoded value;
/// otherwise `=?base64?{standard Base64 of the UTF-8}?=`. Tabs are encoded too: the conformance suite
/// (and some intermediaries) take any control character as unsafe. The empty string stays plain.
pub fn encode_header_value(value: &str) -> String {
    // The same test a server decodes by, so a literal that merely looks encoded is never misread.
    let looks_encoded = value.starts_with(SENTINEL_PREFIX) && value.ends_with(SENTINEL_SUFFIX);
    let plain = value.bytes().all(|b| (b' '..=b'~').contains(&b))
        && !value.starts_with(' ')
        && !value.ends_with(' ')
        && !looks_encoded;
    if plain {
        value.to_owned()
    } else {
        format!("{SENTINEL_PREFIX}{}{SENTINEL_SUFFIX}", STANDARD.encode(value))
    }
}

/// The text a header value carries, undoing [`encode_header_value`] (a server reading `Mcp-Name`):
/// `None` for a sentinel whose Base64 or UTF-8 is malformed.
pub fn decode_header_value(value: &str) -> Option<String> {
    let value = value.trim_matches(|c| c == ' ' || c == '\t');
    match value.strip_prefix(SENTINEL_PREFIX).and_then(|v| v.strip_suffix(SENTINEL_SUFFIX)) {
        Some(encoded) => String::from_utf8(STANDARD.decode(encoded).ok()?).ok(),
        None => Some(value.to_owned()),
    }
}

/// Whether a JSON text may hold an annotation: the cheap test that spares the schema walk for listings
/// without any. A key written with `\u` escapes is still found (the walk runs whenever one is present).
pub fn may_annotate(json_text: &str) -> bool {
    memchr::memmem::find(json_text.as_bytes(), ANNOTATION.as_bytes()).is_some()
        || memchr::memmem::find(json_text.as_bytes(), b"\\u").is_some()
}

/// The designated parameters of a tool, from its `inputSchema` text; `Err` says why the tool is invalid.
pub fn param_headers(input_schema: &RawValue) -> Result<Vec<ParamHeader>, String> {
    let schema: Value = serde_json::from_str(input_schema.get())
        .map_err(|e| format!("the tool's inputSchema is not valid JSON: {e}"))?;
    param_headers_in(&schema)
}

/// [`param_headers`] of a schema already parsed.
pub fn param_headers_in(input_schema: &Value) -> Result<Vec<ParamHeader>, String> {
    let mut walk = Walk { found: Vec::new(), seen: HashMap::new(), steps: Vec::new() };
    walk.visit(input_schema, true)?;
    Ok(walk.found)
}

/// The headers of one call: `Mcp-Param-{Name}` for each designated parameter with a value in
/// `arguments`. A string is sent as it is, an integer in decimal, a boolean as `true`/`false`, all
/// through [`encode_header_value`]; an absent or `null` value (or one that is an object or array)
/// sends no header.
pub fn headers_for(arguments: &RawValue, params: &[ParamHeader]) -> Vec<(HeaderName, HeaderValue)> {
    let Some(top) = members(arguments) else { return Vec::new() };
    params
        .iter()
        .filter_map(|param| {
            let (first, rest) = param.path.split_first()?;
            let mut value = *top.get(&**first)?;
            for key in rest {
                value = *members(value)?.get(&**key)?;
            }
            let text = header_text(value)?;
            let value = HeaderValue::try_from(encode_header_value(&text)).expect("an encoded value is visible ASCII");
            Some((param.header.clone(), value))
        })
        .collect()
}

/// An object's members, each kept as raw text: only the path to a designated value is parsed further.
fn members(object: &RawValue) -> Option<HashMap<String, &RawValue>> {
    serde_json::from_str(object.get()).ok()
}

/// The text a designated value is mirrored as, before encoding; `None` when it sends no header.
fn header_text(value: &RawValue) -> Option<String> {
    let text = value.get().trim_start();
    match text.as_bytes().first()? {
        b'"' => serde_json::from_str::<String>(text).ok(),
        b't' => Some("true".to_owned()),
        b'f' => Some("false".to_owned()),
        b'-' | b'0'..=b'9' => serde_json::from_str::<Number>(text).ok().map(|n| number_text(&n)),
        _ => None,
    }
}

/// An integer in decimal (`42.0` as `42`, as the server's own parser reads it); any other number in
/// its shortest form, which a server compares numerically.
fn number_text(number: &Number) -> String {
    match number.as_f64() {
        Some(f) if number.is_f64() && f.fract() == 0.0 && f.abs() <= MAX_SAFE_INTEGER => format!("{}", f as i64),
        _ => number.to_string(),
    }
}

/// Where in the schema the walk is, for the reasons it gives.
#[derive(Clone, Copy)]
enum Step<'a> {
    Property(&'a str),
    Keyword(&'static str),
}

struct Walk<'a> {
    found: Vec<ParamHeader>,
    /// Lowercased annotation → where it was first seen, for the case-insensitive uniqueness rule.
    seen: HashMap<String, String>,
    steps: Vec<Step<'a>>,
}

impl<'a> Walk<'a> {
    /// Check the annotation of `node` if it has one, then everything below it. `reachable`: only
    /// `properties` chains have led here.
    fn visit(&mut self, node: &'a Value, reachable: bool) -> Result<(), String> {
        let Value::Object(schema) = node else { return Ok(()) };
        if let Some(annotation) = schema.get(ANNOTATION) {
            self.admit(schema, annotation, reachable)?;
        }
        if let Some(Value::Object(properties)) = schema.get("properties") {
            for (key, child) in properties {
                self.descend(Step::Property(key), child, reachable)?;
            }
        }
        for keyword in UNREACHABLE_SINGLE {
            if let Some(child) = schema.get(keyword) {
                self.descend(Step::Keyword(keyword), child, false)?;
            }
        }
        for keyword in UNREACHABLE_ARRAYS {
            if let Some(Value::Array(children)) = schema.get(keyword) {
                for child in children {
                    self.descend(Step::Keyword(keyword), child, false)?;
                }
            }
        }
        for keyword in UNREACHABLE_MAPS {
            if let Some(Value::Object(children)) = schema.get(keyword) {
                for child in children.values() {
                    self.descend(Step::Keyword(keyword), child, false)?;
                }
            }
        }
        Ok(())
    }

    fn descend(&mut self, step: Step<'a>, child: &'a Value, reachable: bool) -> Result<(), String> {
        self.steps.push(step);
        let outcome = self.visit(child, reachable);
        self.steps.pop();
        outcome
    }

    /// Check one annotation against every rule; keep it when it passes.
    fn admit(&mut self, schema: &Map<String, Value>, annotation: &Value, reachable: bool) -> Result<(), String> {
        let place = self.place();
        let Value::String(name) = annotation else {
            return Err(format!("the x-mcp-header annotation on {place} is not a string"));
        };
        if !reachable || self.steps.is_empty() {
            return Err(format!(
                "the x-mcp-header annotation {} on {place} is not statically reachable: only a chain of `properties` \
                 may lead to a mirrored parameter (not items, anyOf/oneOf/allOf/not, if/then/else, $ref or $defs)",
                Quoted(name)
            ));
        }
        if name.is_empty() {
            return Err(format!("the x-mcp-header annotation on {place} is empty"));
        }
        if !name.bytes().all(is_tchar) {
            return Err(format!(
                "the x-mcp-header annotation {} on {place} is not an HTTP header name token (letters, digits and \
                 !#$%&'*+-.^_`|~ only: no spaces, colons, control or non-ASCII characters)",
                Quoted(name)
            ));
        }
        let kind = schema.get("type");
        if !kind.and_then(Value::as_str).is_some_and(|t| PRIMITIVE_TYPES.contains(&t)) {
            let kind = match kind {
                None => "no type".to_owned(),
                Some(Value::String(t)) => format!("type {}", Quoted(t)),
                Some(other) => format!("type {}", Quoted(&other.to_string())),
            };
            return Err(format!(
                "the x-mcp-header annotation {} is on {place}, which has {kind}; only string, integer and boolean \
                 parameters may be mirrored into a header (not number)",
                Quoted(name),
            ));
        }
        if let Some(first) = self.seen.insert(name.to_ascii_lowercase(), place.clone()) {
            return Err(format!(
                "the x-mcp-header annotation {} on {place} repeats the one on {first}: header names must be unique \
                 regardless of case",
                Quoted(name)
            ));
        }
        let header = HeaderName::try_from(format!("{HEADER_PREFIX}{name}")).map_err(|_| {
            format!("the x-mcp-header annotation {} on {place} does not make a usable header name", Quoted(name))
        })?;
        let path = self
            .steps
            .iter()
            .map(|step| match step {
                Step::Property(key) => Box::from(*key),
                Step::Keyword(_) => unreachable!("reachable paths hold properties only"),
            })
            .collect();
        self.found.push(ParamHeader { path, header });
        Ok(())
    }

    /// Where the walk is, as a reason names it: `property "a"."b"`, with keywords in angle brackets.
    fn place(&self) -> String {
        if self.steps.is_empty() {
            return "the schema root".to_owned();
        }
        let steps: Vec<String> = self
            .steps
            .iter()
            .map(|step| match step {
                Step::Property(key) => Quoted(key).to_string(),
                Step::Keyword(keyword) => format!("<{keyword}>"),
            })
            .collect();
        format!("property {}", steps.join("."))
    }
}

/// RFC 9110 `tchar`.
fn is_tchar(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)
}

/// Server-chosen text in a reason: quoted with escapes, cut to a length fit for a diagnostic.
struct Quoted<'a>(&'a str);

impl fmt::Display for Quoted<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut end = self.0.len().min(MAX_QUOTED_BYTES);
        while !self.0.is_char_boundary(end) {
            end -= 1;
        }
        let cut = if end < self.0.len() { "…" } else { "" };
        write!(f, "{:?}{cut}", &self.0[..end])
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn raw(value: Value) -> Box<RawValue> {
        serde_json::value::to_raw_value(&value).unwrap()
    }

    fn schema_with(property: Value) -> Value {
        json!({ "type": "object", "properties": { "p": property } })
    }

    fn reason(schema: Value) -> String {
        param_headers_in(&schema).expect_err("the annotation is invalid")
    }

    /// Headers as (name, value) text, in order.
    fn sent(arguments: Value, schema: &Value) -> Vec<(String, String)> {
        let params = param_headers_in(schema).unwrap();
        headers_for(&raw(arguments), &params)
            .into_iter()
            .map(|(name, value)| (name.as_str().to_owned(), value.to_str().unwrap().to_owned()))
            .collect()
    }

    fn decoded(encoded: &str) -> String {
        let inner =
            encoded.strip_prefix(SENTINEL_PREFIX).and_then(|v| v.strip_suffix(SENTINEL_SUFFIX)).expect("encoded");
        String::from_utf8(STANDARD.decode(inner).unwrap()).unwrap()
    }

    #[test]
    fn encodes_the_spec_examples() {
        assert_eq!(encode_header_value("us-west1"), "us-west1");
        assert_eq!(encode_header_value("Hello, 世界"), "=?base64?SGVsbG8sIOS4lueVjA==?=");
        assert_eq!(encode_header_value(" padded "), "=?base64?IHBhZGRlZCA=?=");
        assert_eq!(encode_header_value("line1\nline2"), "=?base64?bGluZTEKbGluZTI=?=");
        assert_eq!(encode_header_value("=?base64?literal?="), "=?base64?PT9iYXNlNjQ/bGl0ZXJhbD89?=");
    }

    /// The values of the conformance scenario `http-custom-headers`, and the edges of the rule.
    #[test]
    fn plain_only_when_safe_and_unambiguous() {
        for plain in ["", "us west 1", "test-method", "SELECT * FROM users", "a", "~!@#$%^&*()", "42"] {
            assert_eq!(encode_header_value(plain), plain, "{plain:?}");
        }
        for unsafe_value in [
            " us-west1",
            "us-west1 ",
            "line1\r\nline2",
            "\tindented",
            "tab\tinside",
            "del\u{7f}",
            "é",
            " ",
            "=?base64?=",
            "=?base64?x?=",
        ] {
            let encoded = encode_header_value(unsafe_value);
            assert_eq!(decoded(&encoded), unsafe_value, "{unsafe_value:?} → {encoded}");
        }
        // Only the exact lowercase markers are the sentinel.
        assert_eq!(encode_header_value("=?BASE64?x?="), "=?BASE64?x?=");
        assert_eq!(encode_header_value("=?base64?x"), "=?base64?x");
    }

    /// The tool `test_custom_headers` of the conformance scenario, as it is listed.
    fn custom_headers_schema() -> Value {
        let s = |name: &str| json!({ "type": "string", "x-mcp-header": name });
        json!({
            "type": "object",
            "properties": {
                "region": s("Region"),
                "priority": { "type": "integer", "x-mcp-header": "Priority" },
                "verbose": { "type": "boolean", "x-mcp-header": "Verbose" },
                "debug": { "type": "boolean", "x-mcp-header": "Debug" },
                "empty_val": s("EmptyVal"),
                "method_val": s("Method"),
                "float_val": { "type": "number" },
                "non_ascii_val": s("NonAscii"),
                "whitespace_val": s("Whitespace"),
                "leading_space_val": s("LeadingSpace"),
                "trailing_space_val": s("TrailingSpace"),
                "internal_space_val": s("InternalSpace"),
                "control_char_val": s("ControlChar"),
                "crlf_val": s("CrLf"),
                "tab_val": s("Tab"),
                "query": { "type": "string" }
            },
            "required": ["region", "query"]
        })
    }

    #[test]
    #[allow(clippy::approx_constant)] // the scenario's own float argument
    fn mirrors_the_conformance_calls() {
        let schema = custom_headers_schema();
        let headers = sent(
            json!({
                "region": "us-west1", "priority": 42, "verbose": false, "debug": true, "empty_val": "",
                "method_val": "test-method", "float_val": 3.14159, "non_ascii_val": "Hello, 世界",
                "whitespace_val": " padded ", "leading_space_val": " us-west1", "trailing_space_val": "us-west1 ",
                "internal_space_val": "us west 1", "control_char_val": "line1\nline2", "crlf_val": "line1\r\nline2",
                "tab_val": "\tindented", "query": "SELECT * FROM users"
            }),
            &schema,
        );
        let header = |name: &str| headers.iter().find(|(n, _)| n == name).map(|(_, v)| v.as_str());
        assert_eq!(headers.len(), 14, "{headers:?}");
        assert_eq!(header("mcp-param-region"), Some("us-west1"));
        assert_eq!(header("mcp-param-priority"), Some("42"));
        assert_eq!(header("mcp-param-verbose"), Some("false"));
        assert_eq!(header("mcp-param-debug"), Some("true"));
        assert_eq!(header("mcp-param-emptyval"), Some(""));
        assert_eq!(header("mcp-param-method"), Some("test-method"));
        assert_eq!(header("mcp-param-internalspace"), Some("us west 1"));
        assert_eq!(header("mcp-param-nonascii"), Some("=?base64?SGVsbG8sIOS4lueVjA==?="));
        for (name, value) in [
            ("mcp-param-whitespace", " padded "),
            ("mcp-param-leadingspace", " us-west1"),
            ("mcp-param-trailingspace", "us-west1 "),
            ("mcp-param-controlchar", "line1\nline2"),
            ("mcp-param-crlf", "line1\r\nline2"),
            ("mcp-param-tab", "\tindented"),
        ] {
            assert_eq!(decoded(header(name).unwrap()), value, "{name}");
        }
        // Never mirrored: parameters without an annotation, and no standard header is touched.
        assert_eq!(header("mcp-param-floatval"), None);
        assert_eq!(header("mcp-param-query"), None);
        assert_eq!(header("mcp-method"), None);

        let null_call =
            sent(json!({ "region": "us-east1", "priority": 1, "verbose": null, "query": "SELECT 1" }), &schema);
        assert_eq!(
            null_call,
            [("mcp-param-priority".to_owned(), "1".to_owned()), ("mcp-param-region".to_owned(), "us-east1".to_owned())]
        );
    }

    #[test]
    fn values_by_kind() {
        let schema = json!({ "type": "object", "properties": {
            "s": { "type": "string", "x-mcp-header": "S" },
            "i": { "type": "integer", "x-mcp-header": "I" },
            "b": { "type": "boolean", "x-mcp-header": "B" },
        } });
        let one = |arguments: Value| sent(arguments, &schema).into_iter().map(|(_, v)| v).collect::<Vec<_>>();
        assert_eq!(one(json!({ "i": -7 })), ["-7"]);
        assert_eq!(one(json!({ "i": 42.0 })), ["42"], "an integral float is the integer a server reads");
        assert_eq!(one(json!({ "i": 18446744073709551615u64 })), ["18446744073709551615"]);
        assert_eq!(one(json!({ "i": 2.5 })), ["2.5"]);
        assert_eq!(one(json!({ "b": true })), ["true"]);
        assert_eq!(one(json!({ "s": "x\"y\\z" })), ["x\"y\\z"], "JSON escapes are undone");
        assert!(one(json!({ "s": null, "i": null, "b": null })).is_empty());
        assert!(one(json!({})).is_empty());
        assert!(one(json!({ "s": { "nested": 1 }, "i": [1] })).is_empty(), "no header for an object or array");
        // Arguments that are not an object send nothing (they are refused before a call goes out).
        let params = param_headers_in(&schema).unwrap();
        assert!(headers_for(&raw(json!([1])), &params).is_empty());
        // A key written with escapes is the same key.
        let escaped = RawValue::from_string(r#"{"\u0073": "v"}"#.to_owned()).unwrap();
        assert_eq!(headers_for(&escaped, &params).len(), 1);
    }

    #[test]
    fn nested_properties_are_read_at_their_exact_path() {
        let schema = json!({ "type": "object", "properties": {
            "target": { "type": "object", "properties": {
                "location": { "type": "object", "properties": {
                    "region": { "type": "string", "x-mcp-header": "Region" }
                } }
            } }
        } });
        let params = param_headers_in(&schema).unwrap();
        assert_eq!(params.len(), 1);
        assert_eq!(&*params[0].path, [Box::from("target"), Box::from("location"), Box::from("region")]);
        assert_eq!(params[0].header.as_str(), "mcp-param-region");
        let region = |arguments: Value| sent(arguments, &schema);
        assert_eq!(
            region(json!({ "target": { "location": { "region": "eu" } } })),
            [("mcp-param-region".to_owned(), "eu".to_owned())]
        );
        assert!(region(json!({ "region": "eu" })).is_empty(), "not at the annotated path");
        assert!(region(json!({ "target": { "location": null } })).is_empty());
        assert!(region(json!({ "target": "eu" })).is_empty());
    }

    #[test]
    fn schemas_without_annotations_have_no_headers() {
        assert!(param_headers_in(&json!({ "type": "object" })).unwrap().is_empty());
        assert!(param_headers_in(&json!({ "type": "object", "properties": { "a": { "type": "string" } } }))
            .unwrap()
            .is_empty());
        // A property named like the annotation is a property, not an annotation; a default is data.
        let named = json!({ "type": "object", "properties": {
            "x-mcp-header": { "type": "string" },
            "d": { "type": "object", "default": { "x-mcp-header": "Nope" } }
        } });
        assert!(param_headers_in(&named).unwrap().is_empty());
        assert_eq!(param_headers(&raw(custom_headers_schema())).unwrap().len(), 14);
    }

    /// Every invalid tool of the conformance scenario `http-invalid-tool-headers`, and `valid_tool`.
    #[test]
    fn rejects_each_invalid_annotation_of_the_conformance_scenario() {
        let valid = schema_with(json!({ "type": "string", "x-mcp-header": "Region" }));
        assert_eq!(param_headers_in(&valid).unwrap().len(), 1);

        let cases = [
            ("empty", schema_with(json!({ "type": "string", "x-mcp-header": "" })), "is empty"),
            ("object", schema_with(json!({ "type": "object", "x-mcp-header": "Obj" })), "type \"object\""),
            (
                "array",
                schema_with(json!({ "type": "array", "items": { "type": "string" }, "x-mcp-header": "Arr" })),
                "type \"array\"",
            ),
            ("null", schema_with(json!({ "type": "null", "x-mcp-header": "Nul" })), "type \"null\""),
            ("number", schema_with(json!({ "type": "number", "x-mcp-header": "Score" })), "type \"number\""),
            (
                "space",
                schema_with(json!({ "type": "string", "x-mcp-header": "My Region" })),
                "not an HTTP header name token",
            ),
            (
                "colon",
                schema_with(json!({ "type": "string", "x-mcp-header": "Region:Primary" })),
                "not an HTTP header name token",
            ),
            (
                "non-ascii",
                schema_with(json!({ "type": "string", "x-mcp-header": "Région" })),
                "not an HTTP header name token",
            ),
            (
                "control",
                schema_with(json!({ "type": "string", "x-mcp-header": "Region\t1" })),
                "not an HTTP header name token",
            ),
            (
                "newline",
                schema_with(json!({ "type": "string", "x-mcp-header": "Region\r\nX-Evil: 1" })),
                "not an HTTP header name token",
            ),
        ];
        for (case, schema, expected) in cases {
            let reason = reason(schema);
            assert!(reason.contains(expected), "{case}: {reason}");
            assert!(reason.contains("property \"p\""), "{case} names the property: {reason}");
        }
        assert!(
            reason(schema_with(json!({ "type": "string", "x-mcp-header": "Region\t1" }))).contains(r#""Region\t1""#),
            "escaped"
        );
    }

    #[test]
    fn rejects_duplicates_whatever_their_case() {
        for (a, b) in [("Region", "Region"), ("MyField", "myfield")] {
            let schema = json!({ "type": "object", "properties": {
                "first": { "type": "string", "x-mcp-header": a },
                "second": { "type": "string", "x-mcp-header": b }
            } });
            let reason = reason(schema);
            assert!(reason.contains("unique regardless of case") && reason.contains("\"first\""), "{reason}");
        }
        // Across nesting levels too.
        let nested = json!({ "type": "object", "properties": {
            "a": { "type": "string", "x-mcp-header": "Key" },
            "o": { "type": "object", "properties": { "b": { "type": "integer", "x-mcp-header": "KEY" } } }
        } });
        assert!(reason(nested).contains("unique"));
    }

    #[test]
    fn rejects_annotations_that_are_not_statically_reachable() {
        let annotated = json!({ "type": "string", "x-mcp-header": "Hidden" });
        let cases = [
            json!({ "type": "object", "x-mcp-header": "Root" }),
            schema_with(json!({ "type": "array", "items": annotated })),
            schema_with(json!({ "type": "array", "items": { "type": "object", "properties": { "h": annotated } } })),
            schema_with(json!({ "type": "array", "prefixItems": [annotated] })),
            schema_with(json!({ "anyOf": [{ "type": "object", "properties": { "h": annotated } }] })),
            json!({ "type": "object", "oneOf": [annotated] }),
            json!({ "type": "object", "allOf": [{ "properties": { "h": annotated } }] }),
            json!({ "type": "object", "not": { "properties": { "h": annotated } } }),
            json!({ "type": "object", "if": { "properties": { "h": annotated } }, "then": {}, "else": {} }),
            json!({ "type": "object", "then": { "properties": { "h": annotated } } }),
            json!({ "type": "object", "else": { "properties": { "h": annotated } } }),
            json!({ "type": "object", "additionalProperties": annotated }),
            json!({ "type": "object", "patternProperties": { "^h": annotated } }),
            json!({ "type": "object", "dependentSchemas": { "a": { "properties": { "h": annotated } } } }),
            json!({ "type": "object", "$defs": { "h": annotated }, "properties": { "h": { "$ref": "#/$defs/h" } } }),
            json!({ "type": "object", "definitions": { "h": annotated } }),
        ];
        for schema in cases {
            let reason = reason(schema.clone());
            assert!(reason.contains("not statically reachable"), "{schema}: {reason}");
        }
        let reason = reason(schema_with(json!({ "type": "array", "items": annotated })));
        assert!(reason.contains(r#"property "p".<items>"#), "{reason}");
    }

    #[test]
    fn rejects_untyped_and_malformed_annotations() {
        assert!(reason(schema_with(json!({ "x-mcp-header": "NoType" }))).contains("no type"));
        assert!(reason(schema_with(json!({ "type": ["string", "null"], "x-mcp-header": "Union" })))
            .contains("type \"[\\\"string\\\",\\\"null\\\"]\""));
        assert!(reason(schema_with(json!({ "type": "string", "x-mcp-header": 7 }))).contains("not a string"));
        let long = "N".repeat(10 * MAX_QUOTED_BYTES) + " ";
        let reason = reason(schema_with(json!({ "type": "string", "x-mcp-header": long })));
        assert!(reason.len() < 4 * MAX_QUOTED_BYTES && reason.contains('…'), "clamped: {reason}");
        assert!(param_headers(&RawValue::from_string("{\"type\":\"object\"}".into()).unwrap()).unwrap().is_empty());
    }

    #[test]
    fn the_cheap_test_finds_every_annotation_the_walk_would() {
        assert!(!may_annotate(r#"{"tools":[{"name":"a","inputSchema":{"type":"object"}}]}"#));
        assert!(may_annotate(r#"{"x-mcp-header":"A"}"#));
        assert!(may_annotate(r#"{"x-mcp-\u0068eader":"A"}"#));
        let escaped: Value =
            serde_json::from_str(r#"{"type":"object","properties":{"p":{"type":"string","x-mcp-\u0068eader":"A"}}}"#)
                .unwrap();
        assert_eq!(param_headers_in(&escaped).unwrap().len(), 1);
    }
}
