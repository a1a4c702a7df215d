//! The strict object profile of explicit read-only bindings (purra's `purra.output-schema/v1`): the
//! JSON Schema subset a bound tool's input and output schemas must keep to. A schema outside it is
//! refused whole, never trimmed to fit: a stripped `default`, `$ref` or vendor keyword would make a
//! tool look supported while the server still acts on what was removed.
//!
//! The profile: an object at the root whose `type` is `"object"`; at every level only the keywords of
//! [`PROFILE_KEYWORDS`], each with a value of its kind (`additionalProperties` a boolean, not a
//! schema; `items` one schema; `anyOf`/`oneOf` non-empty schema arrays; `enum` non-empty; lengths and
//! counts non-negative safe integers; bounds finite numbers, the minimum not above the maximum). The
//! root alone may declare `$schema`, and only as [`MCP_SCHEMA_DIALECT`], the dialect MCP names; it is
//! kept in the schema (and counts against its byte limit). Depth and size are bounded.
//!
//! A pure function of the schema: no reference is followed, nothing is fetched.

use crate::limits::{MAX_PROFILE_SCHEMA_DEPTH_LEVELS, MAX_PROFILE_SCHEMA_NODES};
use serde_json::{Map, Value};

/// The only `$schema` a bound tool's schema may declare, and only at its root.
pub const MCP_SCHEMA_DIALECT: &str = "https://json-schema.org/draft/2020-12/schema";

/// Every keyword the profile knows. Anything else, metadata included (`default`, `examples`,
/// `$ref`, `$defs`, `format`, `x-…`), is outside it.
pub const PROFILE_KEYWORDS: [&str; 18] = [
    "additionalProperties",
    "anyOf",
    "const",
    "description",
    "enum",
    "items",
    "maxItems",
    "maxLength",
    "maximum",
    "minItems",
    "minLength",
    "minimum",
    "oneOf",
    "properties",
    "required",
    "title",
    "type",
    "uniqueItems",
];

/// The types `type` may name.
const TYPES: [&str; 7] = ["array", "boolean", "integer", "null", "number", "object", "string"];
/// The largest integer JSON carries exactly between runtimes (2^53 - 1).
const MAX_SAFE_INTEGER: f64 = 9_007_199_254_740_991.0;

/// Why a schema is outside the profile: where (a JSON Pointer into the schema) and what rule.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProfileViolation {
    pub at: String,
    pub reason: String,
}

impl std::fmt::Display for ProfileViolation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let at = if self.at.is_empty() { "the root" } else { &self.at };
        write!(f, "at {at}: {}", self.reason)
    }
}

/// Whether `schema` keeps to the profile, its JSON text at most `max_bytes` long.
pub fn check(schema: &Value, max_bytes: usize) -> Result<(), ProfileViolation> {
    let violation = |at: &str, reason: String| ProfileViolation { at: at.to_owned(), reason };
    let bytes = serde_json::to_string(schema).map_or(usize::MAX, |text| text.len());
    if bytes > max_bytes {
        return Err(violation("", format!("the schema is {bytes} bytes, over the limit of {max_bytes}")));
    }
    let Value::Object(root) = schema else { return Err(violation("", "the schema is not an object".into())) };
    if root.get("type") != Some(&Value::String("object".into())) {
        return Err(violation("", "the root must have \"type\": \"object\"".into()));
    }
    let mut budget = Budget { nodes: 0 };
    budget.count(schema, 0, "")?;
    match root.get("$schema") {
        None => budget.node("", root),
        Some(Value::String(dialect)) if dialect == MCP_SCHEMA_DIALECT => {
            // The declaration is kept in the schema; what is checked against the profile is the rest.
            let rest: Map<String, Value> =
                root.iter().filter(|(k, _)| *k != "$schema").map(|(k, v)| (k.clone(), v.clone())).collect();
            budget.node("", &rest)
        }
        Some(_) => Err(violation("/$schema", format!("the only dialect accepted is {MCP_SCHEMA_DIALECT}"))),
    }
}

struct Budget {
    nodes: usize,
}

impl Budget {
    /// Counts `value` and everything in it against the node and depth bounds.
    fn count(&mut self, value: &Value, depth: usize, at: &str) -> Result<(), ProfileViolation> {
        self.nodes += 1;
        if self.nodes > MAX_PROFILE_SCHEMA_NODES {
            return Err(ProfileViolation {
                at: at.to_owned(),
                reason: format!("the schema has more than {MAX_PROFILE_SCHEMA_NODES} values"),
            });
        }
        if depth > MAX_PROFILE_SCHEMA_DEPTH_LEVELS {
            return Err(ProfileViolation {
                at: at.to_owned(),
                reason: format!("the schema is nested deeper than {MAX_PROFILE_SCHEMA_DEPTH_LEVELS} levels"),
            });
        }
        match value {
            Value::Array(items) => items.iter().try_for_each(|item| self.count(item, depth + 1, at)),
            Value::Object(map) => map.values().try_for_each(|item| {
                self.nodes += 1; // the key
                self.count(item, depth + 1, at)
            }),
            Value::Number(n)
                if n.as_f64().is_none_or(|f| !f.is_finite() || (f.fract() == 0.0 && f.abs() > MAX_SAFE_INTEGER)) =>
            {
                Err(ProfileViolation {
                    at: at.to_owned(),
                    reason: "a number outside the range JSON carries exactly".into(),
                })
            }
            _ => Ok(()),
        }
    }

    /// Checks one schema node's keywords (its size and depth were counted with the whole schema).
    fn node(&mut self, at: &str, keywords: &Map<String, Value>) -> Result<(), ProfileViolation> {
        let bad = |keyword: &str, reason: &str| {
            Err(ProfileViolation { at: format!("{at}/{}", escape(keyword)), reason: reason.to_owned() })
        };
        let mut unknown: Vec<&str> =
            keywords.keys().map(String::as_str).filter(|k| !PROFILE_KEYWORDS.contains(k)).collect();
        if !unknown.is_empty() {
            unknown.sort_unstable();
            let named: Vec<String> = unknown.iter().take(8).map(|k| format!("{k:?}")).collect();
            return Err(ProfileViolation {
                at: at.to_owned(),
                reason: format!("keywords outside the profile: {}", named.join(", ")),
            });
        }
        for (keyword, value) in keywords {
            let keyword = keyword.as_str();
            match keyword {
                "type" => {
                    let names: Vec<&Value> = match value {
                        Value::String(_) => vec![value],
                        Value::Array(items) if !items.is_empty() => items.iter().collect(),
                        _ => return bad(keyword, "must be a type name or a non-empty array of them"),
                    };
                    let mut seen = Vec::new();
                    for name in names {
                        match name.as_str() {
                            Some(n) if TYPES.contains(&n) && !seen.contains(&n) => seen.push(n),
                            _ => return bad(keyword, "names an unknown type, or one twice"),
                        }
                    }
                }
                "title" | "description" if !value.is_string() => return bad(keyword, "must be a string"),
                "additionalProperties" | "uniqueItems" if !value.is_boolean() => {
                    return bad(keyword, "must be a boolean")
                }
                "properties" => {
                    let Value::Object(properties) = value else { return bad(keyword, "must be an object of schemas") };
                    for (name, child) in properties {
                        self.child(child, &format!("{at}/properties/{}", escape(name)))?;
                    }
                }
                "items" => self.child(value, &format!("{at}/items"))?,
                "anyOf" | "oneOf" => {
                    let Value::Array(branches) = value else {
                        return bad(keyword, "must be a non-empty array of schemas");
                    };
                    if branches.is_empty() {
                        return bad(keyword, "must be a non-empty array of schemas");
                    }
                    for (index, branch) in branches.iter().enumerate() {
                        self.child(branch, &format!("{at}/{keyword}/{index}"))?;
                    }
                }
                "required" => {
                    let Value::Array(names) = value else { return bad(keyword, "must be an array of property names") };
                    let mut seen = Vec::new();
                    for name in names {
                        match name.as_str() {
                            Some(n) if !n.is_empty() && !seen.contains(&n) => seen.push(n),
                            _ => return bad(keyword, "must hold distinct, non-empty property names"),
                        }
                    }
                }
                "enum" if value.as_array().is_none_or(|values| values.is_empty()) => {
                    return bad(keyword, "must be a non-empty array")
                }
                "minLength" | "maxLength" | "minItems" | "maxItems" if !is_count(value) => {
                    return bad(keyword, "must be a non-negative integer")
                }
                "minimum" | "maximum" if !value.as_f64().is_some_and(f64::is_finite) => {
                    return bad(keyword, "must be a number")
                }
                _ => {}
            }
        }
        for (low, high) in [("minLength", "maxLength"), ("minItems", "maxItems"), ("minimum", "maximum")] {
            if let (Some(low_value), Some(high_value)) =
                (keywords.get(low).and_then(Value::as_f64), keywords.get(high).and_then(Value::as_f64))
            {
                if low_value > high_value {
                    return bad(low, &format!("is above {high}"));
                }
            }
        }
        Ok(())
    }

    fn child(&mut self, value: &Value, at: &str) -> Result<(), ProfileViolation> {
        match value {
            Value::Object(map) => self.node(at, map),
            _ => Err(ProfileViolation { at: at.to_owned(), reason: "a schema here must be an object".into() }),
        }
    }
}

fn is_count(value: &Value) -> bool {
    value.as_u64().is_some_and(|n| n as f64 <= MAX_SAFE_INTEGER)
}

/// A key as a JSON Pointer segment (RFC 6901).
fn escape(key: &str) -> String {
    key.replace('~', "~0").replace('/', "~1")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const KIB: usize = 64 * 1024;

    fn refused(schema: Value) -> ProfileViolation {
        check(&schema, KIB).expect_err(&schema.to_string())
    }

    #[test]
    fn accepts_the_profile_and_the_mcp_dialect_at_the_root() {
        let schema = json!({
            "$schema": MCP_SCHEMA_DIALECT,
            "type": "object",
            "title": "searchArguments",
            "properties": {
                "q": { "type": "string", "minLength": 1, "maxLength": 200, "description": "what to find" },
                "limit": { "type": ["integer", "null"], "minimum": 1, "maximum": 50 },
                "tags": { "type": "array", "items": { "type": "string", "enum": ["a", "b"] }, "uniqueItems": true, "maxItems": 4 },
                "mode": { "anyOf": [{ "const": "fast" }, { "const": "exact" }] },
            },
            "required": ["q"],
            "additionalProperties": false,
        });
        assert_eq!(check(&schema, KIB), Ok(()));
        assert_eq!(check(&json!({ "type": "object" }), KIB), Ok(()));
    }

    #[test]
    fn refuses_metadata_references_unknown_keywords_and_other_dialects() {
        for (schema, at) in [
            (json!({ "type": "object", "properties": { "n": { "type": "integer", "default": 5 } } }), "/properties/n"),
            (json!({ "type": "object", "x-fastmcp-wrap-result": true }), ""),
            (json!({ "type": "object", "properties": { "a": { "$ref": "#/$defs/a" } }, "$defs": { "a": {} } }), ""),
            (json!({ "type": "object", "properties": { "a": { "$ref": "#/x" } } }), "/properties/a"),
            (
                json!({ "type": "object", "properties": { "s": { "type": "string", "format": "email" } } }),
                "/properties/s",
            ),
            (
                json!({ "type": "object", "properties": { "a": { "$schema": MCP_SCHEMA_DIALECT, "type": "string" } } }),
                "/properties/a",
            ),
            (json!({ "$schema": "http://json-schema.org/draft-07/schema#", "type": "object" }), "/$schema"),
            (json!({ "$schema": "https://json-schema.org/draft/2020-12/schema#", "type": "object" }), "/$schema"),
        ] {
            assert_eq!(refused(schema).at, at);
        }
        assert!(refused(json!({ "type": "object", "default": {} })).reason.contains("\"default\""));
    }

    #[test]
    fn refuses_malformed_keyword_values_and_roots_that_are_not_objects() {
        for schema in [
            json!({ "type": "array" }),
            json!({ "type": ["object"] }),
            json!({ "properties": {} }),
            json!([]),
            json!({ "type": "object", "additionalProperties": { "type": "string" } }),
            json!({ "type": "object", "properties": { "a": true } }),
            json!({ "type": "object", "required": ["a", "a"] }),
            json!({ "type": "object", "properties": { "a": { "type": "strin" } } }),
            json!({ "type": "object", "properties": { "a": { "enum": [] } } }),
            json!({ "type": "object", "properties": { "a": { "anyOf": [] } } }),
            json!({ "type": "object", "properties": { "a": { "minLength": -1 } } }),
            json!({ "type": "object", "properties": { "a": { "minimum": 5, "maximum": 1 } } }),
            json!({ "type": "object", "properties": { "a": { "const": 9_007_199_254_740_993u64 } } }),
        ] {
            refused(schema);
        }
    }

    #[test]
    fn bounds_bytes_depth_and_nodes() {
        let wide = json!({ "type": "object", "description": "d".repeat(100) });
        assert!(check(&wide, 50).unwrap_err().reason.contains("bytes"));
        let mut deep = json!({ "type": "string" });
        for _ in 0..40 {
            deep = json!({ "type": "array", "items": deep });
        }
        assert!(refused(json!({ "type": "object", "properties": { "d": deep } })).reason.contains("deeper"));
        let many: serde_json::Map<String, Value> =
            (0..1500).map(|i| (format!("p{i}"), json!({ "type": "string" }))).collect();
        assert!(check(&json!({ "type": "object", "properties": many }), usize::MAX)
            .unwrap_err()
            .reason
            .contains("values"));
    }
}
