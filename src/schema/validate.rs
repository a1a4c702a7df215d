//! One compiled schema and the failures it reports (see the module doc for the policy).

use super::cost::{Cost, Unbounded};
use crate::limits::{
    MAX_PATTERN_BACKTRACK_STEPS, MAX_PATTERN_DFA_CACHE_BYTES, MAX_PATTERN_PROGRAM_BYTES,
    MAX_SCHEMA_APPLICATIONS_PER_NODE, MAX_SCHEMA_BYTES, MAX_SCHEMA_DEPTH_LEVELS, MAX_SCHEMA_REFERENCE_CHAIN_LINKS,
    MAX_VALIDATION_APPLICATIONS, MAX_VALIDATION_MESSAGE_BYTES, MAX_VALIDATION_NESTED_CHECKS, MAX_VALIDATION_PATH_BYTES,
    MAX_VALUE_DEPTH_LEVELS,
};
use crate::protocol::nesting;
use jsonschema::{PatternOptions, ValidationError, Validator};
use serde_json::Value;
use std::fmt;

/// A schema that passed the bounds and compiled. Cheap to share (`Arc` it); validating takes `&self`.
pub struct CompiledSchema {
    validator: Validator,
    cost: Cost,
}

/// Why a schema cannot be used. Messages name the schema's location, never its content at length.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SchemaError {
    TooLarge { bytes: usize },
    TooDeep,
    TooCostly(Unbounded),
    NotJson(String),
    NotASchema,
    Invalid { at: String, message: String },
}

impl fmt::Display for SchemaError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SchemaError::TooLarge { bytes } => {
                write!(f, "the schema is {bytes} bytes, over the limit of {MAX_SCHEMA_BYTES} bytes")
            }
            SchemaError::TooDeep => write!(f, "the schema is nested deeper than {MAX_SCHEMA_DEPTH_LEVELS} levels"),
            SchemaError::TooCostly(Unbounded::LoopsInPlace) => f.write_str("the schema's references loop without descending into the value"),
            SchemaError::TooCostly(Unbounded::OverBudget) => write!(
                f,
                "the schema's references could check one value node against more than {MAX_SCHEMA_APPLICATIONS_PER_NODE} subschemas"
            ),
            SchemaError::TooCostly(Unbounded::ChainTooLong { links }) => write!(
                f,
                "the schema applies subschemas in place {links} links deep (references, allOf, …), over the limit of {MAX_SCHEMA_REFERENCE_CHAIN_LINKS} links"
            ),
            SchemaError::TooCostly(Unbounded::Unresolved(reference)) => write!(
                f,
                "the reference {:?} names no subschema of this schema (nothing is fetched)",
                cut(reference, MAX_VALIDATION_PATH_BYTES)
            ),
            SchemaError::NotJson(reason) => write!(f, "the schema is not JSON: {reason}"),
            SchemaError::NotASchema => f.write_str("a schema must be a JSON object or a boolean"),
            SchemaError::Invalid { at, message } if at.is_empty() => write!(f, "the schema does not compile: {message}"),
            SchemaError::Invalid { at, message } => write!(f, "the schema does not compile: at {at}: {message}"),
        }
    }
}

impl std::error::Error for SchemaError {}

impl From<SchemaError> for crate::error::McpError {
    fn from(error: SchemaError) -> Self {
        crate::error::McpError::SchemaInvalid(error.to_string())
    }
}

/// Where a value fails its schema, and which rule it breaks. `path` is a JSON Pointer into the value
/// (`""` for the value itself); `message` names the rule and the schema's bound, never the value.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Violation {
    pub path: String,
    pub message: String,
}

/// Why a value was not accepted: it breaks a rule, or it was not validated at all because validating
/// it against this schema could take more stack or work than the bounds allow (the message says which,
/// in numbers; it never quotes the value).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    Violation(Violation),
    NotValidated(String),
}

impl Violation {
    /// `at /a/0: …`, or for the value as a whole `at {whole}: …`, where `whole` names it for the reader
    /// (`the arguments` of a tool call).
    pub fn placed(&self, whole: &str) -> String {
        let at = if self.path.is_empty() { whole } else { &self.path };
        format!("at {at}: {}", self.message)
    }
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.placed("the value itself"))
    }
}

impl CompiledSchema {
    /// Checks `schema` (JSON text) against the bounds, then compiles it. Nothing outside the text is
    /// read: a reference to another document is a compile error.
    pub fn compile(schema: &str) -> Result<Self, SchemaError> {
        if schema.len() > MAX_SCHEMA_BYTES {
            return Err(SchemaError::TooLarge { bytes: schema.len() });
        }
        if nesting::exceeds_depth(schema.as_bytes(), MAX_SCHEMA_DEPTH_LEVELS) {
            return Err(SchemaError::TooDeep);
        }
        let value: Value = serde_json::from_str(schema)
            .map_err(|e| SchemaError::NotJson(cut(&e.to_string(), MAX_VALIDATION_MESSAGE_BYTES)))?;
        Self::build(&value)
    }

    /// `compile` for a schema already parsed. The bounds are checked on its JSON text.
    pub fn compile_value(schema: &Value) -> Result<Self, SchemaError> {
        if depth_exceeds(schema, MAX_SCHEMA_DEPTH_LEVELS) {
            return Err(SchemaError::TooDeep);
        }
        let bytes = serialized_len(schema);
        if bytes > MAX_SCHEMA_BYTES {
            return Err(SchemaError::TooLarge { bytes });
        }
        Self::build(schema)
    }

    fn build(schema: &Value) -> Result<Self, SchemaError> {
        if !schema.is_object() && !schema.is_boolean() {
            return Err(SchemaError::NotASchema);
        }
        let cost = super::cost::check(schema).map_err(SchemaError::TooCostly)?;
        let patterns = PatternOptions::fancy_regex()
            .backtrack_limit(MAX_PATTERN_BACKTRACK_STEPS)
            .size_limit(MAX_PATTERN_PROGRAM_BYTES)
            .dfa_size_limit(MAX_PATTERN_DFA_CACHE_BYTES);
        let validator =
            jsonschema::options().offline().with_pattern_options(patterns).build(schema).map_err(|error| {
                SchemaError::Invalid { at: bounded_path(error.instance_path().as_str()), message: message_of(&error) }
            })?;
        Ok(CompiledSchema { validator, cost })
    }

    /// The first rule `value` breaks, if any. No coercion: the value is judged as it is. A value too
    /// costly to validate against this schema (see [`Self::check`]) fails at the value itself.
    pub fn validate(&self, value: &Value) -> Result<(), Violation> {
        self.check(value).map_err(Refusal::into_violation)
    }

    /// `validate` for JSON text (see [`Self::check_json`]).
    pub fn validate_json(&self, value: &str) -> Result<(), Violation> {
        self.check_json(value).map_err(Refusal::into_violation)
    }

    /// `validate`, telling a value that breaks a rule from one that was not validated: deeper than
    /// `MAX_VALUE_DEPTH_LEVELS`, or whose levels times the schema's in-place chain pass
    /// `MAX_VALIDATION_NESTED_CHECKS` (the validator's stack), or whose nodes times the checks each may
    /// meet pass `MAX_VALIDATION_APPLICATIONS` (its time). Measured by one walk of the value, without recursion.
    pub fn check(&self, value: &Value) -> Result<(), Refusal> {
        let Some(nodes_per_depth) = nodes_per_depth(value, MAX_VALUE_DEPTH_LEVELS) else {
            return Err(Refusal::NotValidated(too_deep()));
        };
        let levels = nodes_per_depth.len();
        let nested = self.cost.nested_checks(levels);
        if nested > MAX_VALIDATION_NESTED_CHECKS {
            return Err(Refusal::NotValidated(format!(
                "the value was not validated: it is {levels} levels deep and the schema applies subschemas {} links deep in place at each level, up to {nested} checks one inside the other, over the limit of {MAX_VALIDATION_NESTED_CHECKS}",
                self.cost.chain_links
            )));
        }
        let applications = self.cost.applications(&nodes_per_depth);
        if applications > MAX_VALIDATION_APPLICATIONS {
            let nodes = nodes_per_depth.iter().fold(0u64, |a, &n| a.saturating_add(n));
            return Err(Refusal::NotValidated(format!(
                "the value was not validated: its {nodes} nodes could take up to {applications} subschema checks against this schema, over the limit of {MAX_VALIDATION_APPLICATIONS}"
            )));
        }
        match self.validator.validate(value) {
            Ok(()) => Ok(()),
            Err(error) => Err(Refusal::Violation(Violation {
                path: bounded_path(error.instance_path().as_str()),
                message: message_of(&error),
            })),
        }
    }

    /// `check` for JSON text. Text that is not JSON fails at the value itself; text nested past
    /// serde_json's limit is not validated. A lone surrogate escape (`"\ud800"`, which `JSON.stringify`
    /// writes for a string holding half a pair) is judged as U+FFFD: it is valid JSON that serde_json
    /// will not read as a string.
    pub fn check_json(&self, value: &str) -> Result<(), Refusal> {
        let parsed = serde_json::from_str::<Value>(value)
            .or_else(|e| without_lone_surrogates(value).map_or(Err(e), |text| serde_json::from_str::<Value>(&text)));
        match parsed {
            Ok(value) => self.check(&value),
            Err(e) if e.to_string().starts_with("recursion limit exceeded") => Err(Refusal::NotValidated(too_deep())),
            Err(e) => Err(Refusal::Violation(Violation {
                path: String::new(),
                message: cut(&format!("not JSON: {e}"), MAX_VALIDATION_MESSAGE_BYTES),
            })),
        }
    }
}

impl Refusal {
    /// A value not validated fails at the value itself, with the reason as its message.
    fn into_violation(self) -> Violation {
        match self {
            Refusal::Violation(violation) => violation,
            Refusal::NotValidated(message) => Violation { path: String::new(), message },
        }
    }
}

fn too_deep() -> String {
    format!("the value nests deeper than the {MAX_VALUE_DEPTH_LEVELS} levels that can be validated")
}

/// How many nodes `value` has at each depth (its root at 0), walked without recursion; `None` when
/// arrays and objects nest past `max_levels` levels.
fn nodes_per_depth(value: &Value, max_levels: usize) -> Option<Vec<u64>> {
    let mut counts: Vec<u64> = Vec::new();
    let mut stack = vec![(value, 0usize)];
    while let Some((node, depth)) = stack.pop() {
        // Levels of arrays and objects, as serde_json's recursion limit counts them.
        if depth >= max_levels && (node.is_array() || node.is_object()) {
            return None;
        }
        if counts.len() <= depth {
            counts.resize(depth + 1, 0);
        }
        counts[depth] += 1;
        match node {
            Value::Array(items) => stack.extend(items.iter().map(|child| (child, depth + 1))),
            Value::Object(map) => stack.extend(map.values().map(|child| (child, depth + 1))),
            _ => {}
        }
    }
    Some(counts)
}

/// `json` with every `\uXXXX` escape of a lone surrogate replaced by `\ufffd`; `None` when it has none.
fn without_lone_surrogates(json: &str) -> Option<String> {
    let unit = |at: usize| -> Option<u16> {
        let escape = json.get(at..at + 6)?;
        escape.starts_with("\\u").then(|| u16::from_str_radix(&escape[2..], 16).ok()).flatten()
    };
    let (bytes, mut out, mut copied, mut at, mut replaced) = (json.as_bytes(), String::new(), 0, 0, false);
    while let Some(found) = memchr::memchr(b'\\', &bytes[at..]) {
        let start = at + found;
        match unit(start) {
            Some(0xD800..=0xDBFF) if matches!(unit(start + 6), Some(0xDC00..=0xDFFF)) => at = start + 12,
            Some(0xD800..=0xDFFF) => {
                out.push_str(&json[copied..start]);
                out.push_str("\\ufffd");
                at = start + 6;
                copied = at;
                replaced = true;
            }
            // Any other escape, `\\` included, is two characters or more: step over its first two.
            _ => at = start + 2,
        }
        if at >= bytes.len() {
            break;
        }
    }
    replaced.then(|| {
        out.push_str(&json[copied..]);
        out
    })
}

/// The crate's message with the value masked (it names the rule, and the schema's bound where it has
/// one), cut to `MAX_VALIDATION_MESSAGE_BYTES`. Schema-side text (an `enum`'s options, a `pattern`) can
/// be long too, hence the cut.
fn message_of(error: &ValidationError<'_>) -> String {
    cut(&error.masked_with("the value").to_string(), MAX_VALIDATION_MESSAGE_BYTES)
}

fn bounded_path(path: &str) -> String {
    cut(path, MAX_VALIDATION_PATH_BYTES)
}

/// `text` cut to at most `max_bytes` on a character boundary, marked with `…` when cut.
fn cut(text: &str, max_bytes: usize) -> String {
    if text.len() <= max_bytes {
        return text.to_owned();
    }
    let mut end = max_bytes.saturating_sub('…'.len_utf8());
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &text[..end])
}

/// Whether `value` nests arrays and objects deeper than `max_levels`, walked without recursion.
fn depth_exceeds(value: &Value, max_levels: usize) -> bool {
    let mut stack = vec![(value, 1usize)];
    while let Some((node, depth)) = stack.pop() {
        let children: Box<dyn Iterator<Item = &Value>> = match node {
            Value::Array(items) => Box::new(items.iter()),
            Value::Object(map) => Box::new(map.values()),
            _ => continue,
        };
        if depth > max_levels {
            return true;
        }
        stack.extend(children.map(|child| (child, depth + 1)));
    }
    false
}

/// Bytes of `value`'s compact JSON text, counted without building it.
fn serialized_len(value: &Value) -> usize {
    struct Count(usize);
    impl std::io::Write for Count {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            self.0 += bytes.len();
            Ok(bytes.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut count = Count(0);
    serde_json::to_writer(&mut count, value).expect("a Value always serializes");
    count.0
}

#[cfg(test)]
mod tests {
    use super::{CompiledSchema, Refusal, SchemaError};
    use crate::limits::{
        MAX_SCHEMA_BYTES, MAX_SCHEMA_DEPTH_LEVELS, MAX_SCHEMA_REFERENCE_CHAIN_LINKS, MAX_VALIDATION_APPLICATIONS,
        MAX_VALIDATION_MESSAGE_BYTES, MAX_VALIDATION_NESTED_CHECKS, MAX_VALIDATION_PATH_BYTES,
    };
    use crate::schema::cost::Unbounded;
    use serde_json::json;

    fn schema(text: &str) -> CompiledSchema {
        CompiledSchema::compile(text).unwrap_or_else(|e| panic!("{text}: {e}"))
    }

    #[test]
    fn a_valid_value_passes_and_an_invalid_one_names_its_path() {
        let s = schema(
            r#"{"type":"object","properties":{"a":{"type":"array","items":{"type":"integer"}}},"required":["a"]}"#,
        );
        assert_eq!(s.validate(&json!({"a": [1, 2]})), Ok(()));
        let v = s.validate(&json!({"a": [1, "x"]})).unwrap_err();
        assert_eq!(v.path, "/a/1");
        assert!(v.message.contains("integer"), "{v:?}");
        let v = s.validate(&json!({})).unwrap_err();
        assert_eq!((v.path.as_str(), v.message.contains("\"a\"")), ("", true), "{v:?}");
    }

    #[test]
    fn nothing_is_coerced() {
        let s = schema(
            r#"{"type":"object","properties":{"n":{"type":"integer"},"b":{"type":"boolean"},"s":{"type":"string"}}}"#,
        );
        assert!(s.validate(&json!({"n": 5, "b": true, "s": "5"})).is_ok());
        for bad in [json!({"n": "5"}), json!({"b": "true"}), json!({"s": 5}), json!({"n": 5.5}), json!({"n": null})] {
            assert!(s.validate(&bad).is_err(), "{bad}");
        }
        // 5.0 is an integer in JSON Schema (a number whose fractional part is zero), not a coercion.
        assert!(s.validate(&json!({"n": 5.0})).is_ok());
    }

    #[test]
    fn the_dialect_is_2020_12_unless_the_schema_names_another_it_knows() {
        // prefixItems is 2020-12 only: under draft 7 it would be an unknown keyword and ignored.
        let s = schema(r#"{"prefixItems":[{"type":"string"}]}"#);
        assert!(s.validate(&json!([1])).is_err());
        let s = schema(r#"{"$schema":"http://json-schema.org/draft-07/schema#","items":[{"type":"string"}]}"#);
        assert!(s.validate(&json!([1])).is_err());
        let e = CompiledSchema::compile(r#"{"$schema":"https://example.invalid/my-dialect"}"#).err().unwrap();
        assert!(matches!(e, SchemaError::Invalid { .. }), "{e}");
    }

    #[test]
    fn references_inside_the_schema_resolve_and_outside_ones_fail_to_compile() {
        let s = schema(r##"{"$defs":{"n":{"type":"integer"}},"properties":{"x":{"$ref":"#/$defs/n"}}}"##);
        assert!(s.validate(&json!({"x": 1})).is_ok());
        assert_eq!(s.validate(&json!({"x": "1"})).unwrap_err().path, "/x");
        for external in [
            r#"{"$ref":"http://127.0.0.1:9/schema.json"}"#,
            r#"{"properties":{"x":{"$ref":"https://example.invalid/s#/a"}}}"#,
            r#"{"$ref":"file:///etc/passwd"}"#,
            r#"{"$id":"http://127.0.0.1:9/root.json","$ref":"other.json"}"#,
        ] {
            let e = CompiledSchema::compile(external).err().unwrap_or_else(|| panic!("{external} compiled"));
            // The cost bound refuses a reference it cannot resolve before the validator sees it.
            assert!(
                matches!(e, SchemaError::Invalid { .. } | SchemaError::TooCostly(Unbounded::Unresolved(_))),
                "{external}: {e}"
            );
        }
    }

    #[test]
    fn recursion_through_the_value_works_and_unbounded_references_are_refused() {
        let tree = schema(r##"{"type":"object","properties":{"children":{"type":"array","items":{"$ref":"#"}}}}"##);
        assert!(tree.validate(&json!({"children": [{"children": [{}]}]})).is_ok());
        assert_eq!(
            tree.validate(&json!({"children": [{"children": [1]}]})).unwrap_err().path,
            "/children/0/children/0"
        );
        for looping in [
            r##"{"$ref":"#"}"##,
            r##"{"allOf":[{"$ref":"#"}]}"##,
            r##"{"$defs":{"a":{"$ref":"#/$defs/b"},"b":{"$ref":"#/$defs/a"}},"$ref":"#/$defs/a"}"##,
        ] {
            assert_eq!(
                CompiledSchema::compile(looping).err(),
                Some(SchemaError::TooCostly(Unbounded::LoopsInPlace)),
                "{looping}"
            );
        }
        // 2^40 checks of one value if it compiled: refused before compiling, at once.
        let mut defs = serde_json::Map::new();
        for i in 0..40 {
            defs.insert(
                format!("a{i}"),
                json!({"anyOf": [{"$ref": format!("#/$defs/a{}", i + 1)}, {"$ref": format!("#/$defs/a{}", i + 1)}]}),
            );
        }
        defs.insert("a40".to_owned(), json!({"type": "integer"}));
        let bomb = json!({"$defs": defs, "$ref": "#/$defs/a0"});
        assert_eq!(CompiledSchema::compile_value(&bomb).err(), Some(SchemaError::TooCostly(Unbounded::OverBudget)));
        let per_level = r##"{"type":"array","items":{"anyOf":[{"$ref":"#"},{"$ref":"#"}]}}"##;
        assert_eq!(CompiledSchema::compile(per_level).err(), Some(SchemaError::TooCostly(Unbounded::OverBudget)));
    }

    /// Draft 7 names a subschema with a plain-name `$id` (`"$id": "#a1"`): the cost bound must resolve
    /// `"$ref": "#a1"` as the validator does, or the 2^40 bomb it exists for compiles (and validating one
    /// 1-character string would not finish).
    #[test]
    fn a_draft7_id_anchor_bomb_is_refused_by_the_cost_bound() {
        for key in ["$id", "id"] {
            let mut defs = serde_json::Map::new();
            for i in 0..40 {
                let next = format!("#a{}", i + 1);
                defs.insert(
                    format!("a{i}"),
                    json!({ key: format!("#a{i}"), "anyOf": [{ "$ref": next }, { "$ref": next }] }),
                );
            }
            defs.insert("a40".to_owned(), json!({ key: "#a40", "type": "integer" }));
            let dialect = if key == "id" {
                "http://json-schema.org/draft-04/schema#"
            } else {
                "http://json-schema.org/draft-07/schema#"
            };
            let bomb = json!({ "$schema": dialect, "definitions": defs, "type": "object", "properties": { "q": { "$ref": "#a0" } } });
            match CompiledSchema::compile_value(&bomb) {
                Err(SchemaError::TooCostly(Unbounded::OverBudget)) => {}
                Err(other) => panic!("{key}: refused, but not by the cost bound: {other}"),
                Ok(compiled) => {
                    // Compiled: one string at /q walks up to 2^40 branches. Run it on a thread we can leave.
                    let (tx, rx) = std::sync::mpsc::channel();
                    std::thread::spawn(move || {
                        let _ = tx.send(compiled.validate(&json!({ "q": "x" })).is_err());
                    });
                    let outcome = rx.recv_timeout(std::time::Duration::from_secs(5));
                    panic!("{key}: the bomb compiled (cost bound passed); validating one 1-character string: {outcome:?} within 5 s");
                }
            }
        }
        // A small draft-7 schema named the same way still compiles and validates.
        let named = schema(
            r##"{"$schema":"http://json-schema.org/draft-07/schema#","definitions":{"n":{"$id":"#n","type":"integer"}},"properties":{"q":{"$ref":"#n"}}}"##,
        );
        assert_eq!(named.validate(&json!({"q": "x"})).unwrap_err().path, "/q");
    }

    /// A reference the cost bound cannot resolve refuses the schema, whether or not the validator could:
    /// what the bound cannot see it cannot bound.
    #[test]
    fn a_reference_the_cost_bound_cannot_resolve_refuses_the_schema() {
        for schema in [
            r##"{"$ref":"#nowhere"}"##,
            r##"{"properties":{"a":{"$ref":"#/$defs/missing"}}}"##,
            r##"{"$dynamicRef":"#meta"}"##,
        ] {
            let error = CompiledSchema::compile(schema).err().unwrap_or_else(|| panic!("{schema} compiled"));
            assert!(matches!(error, SchemaError::TooCostly(Unbounded::Unresolved(_))), "{schema}: {error}");
            assert!(error.to_string().contains("names no subschema of this schema"), "{error}");
        }
    }

    fn reference_chain(links: usize, last: serde_json::Value) -> serde_json::Value {
        let mut defs = serde_json::Map::new();
        for i in 0..links {
            defs.insert(format!("a{i}"), json!({ "$ref": format!("#/$defs/a{}", i + 1) }));
        }
        defs.insert(format!("a{links}"), last);
        json!({ "$defs": defs, "type": "object", "properties": { "q": { "$ref": "#/$defs/a0" } } })
    }

    /// The validator recurses once per in-place link, at every level of the value. Run on a 2 MiB
    /// thread, as on the engine's runtime workers: a stack overflow is not a panic, it aborts the
    /// process (Node with it). A 9 500-link chain is refused before compiling.
    #[test]
    fn a_long_reference_chain_does_not_overflow_the_stack() {
        let chain = reference_chain(9_500, json!({ "type": "integer" }));
        assert!(chain.to_string().len() < MAX_SCHEMA_BYTES);
        let worker = std::thread::Builder::new()
            .stack_size(2 * 1024 * 1024)
            .spawn(move || CompiledSchema::compile_value(&chain).err());
        let refused = worker.unwrap().join().expect("no panic");
        assert!(
            matches!(refused, Some(SchemaError::TooCostly(Unbounded::ChainTooLong { links: 9_501 }))),
            "{refused:?}"
        );
    }

    /// A chain within the limit, repeated at every level of a deep value (a tree reached through 120
    /// links per level, a value 100 levels deep): the value is not validated, on a 2 MiB thread, and
    /// fails; a shallow one is validated.
    #[test]
    fn a_reference_chain_times_a_deep_value_is_not_validated() {
        let links = MAX_SCHEMA_REFERENCE_CHAIN_LINKS - 8;
        let tree = reference_chain(links, json!({ "type": "object", "properties": { "c": { "$ref": "#/$defs/a0" } } }));
        let mut deep = json!({});
        for _ in 0..100 {
            deep = json!({ "c": deep });
        }
        let worker = std::thread::Builder::new().stack_size(2 * 1024 * 1024).spawn(move || {
            let compiled = CompiledSchema::compile_value(&tree).map_err(|e| e.to_string())?;
            Ok::<_, String>((
                compiled.check(&json!({ "q": deep })),
                compiled.check(&json!({ "q": { "c": { "c": {} } } })),
            ))
        });
        let (deep, shallow) = worker.unwrap().join().expect("no panic").expect("compiles");
        let Err(Refusal::NotValidated(why)) = deep else { panic!("{deep:?}") };
        assert!(why.contains(&format!("over the limit of {MAX_VALIDATION_NESTED_CHECKS}")), "{why}");
        assert_eq!(shallow, Ok(()));
    }

    /// Total work: a value whose nodes times the checks each may meet passes `MAX_VALIDATION_APPLICATIONS`
    /// is not validated (10 000 alternatives per item, under the per-node bound, over 2 000 items).
    #[test]
    fn a_value_too_costly_in_all_is_not_validated() {
        let alternatives: Vec<serde_json::Value> = (1..=5_000).map(|i| json!({ "const": i })).collect();
        let s = CompiledSchema::compile_value(&json!({ "type": "array", "items": { "anyOf": alternatives } })).unwrap();
        let few = serde_json::Value::Array(vec![json!(5_000); 10]);
        assert_eq!(s.check(&few), Ok(()));
        let many = serde_json::Value::Array(vec![json!(5_000); 2_001]);
        let Err(Refusal::NotValidated(why)) = s.check(&many) else { panic!("validated") };
        assert!(
            why.contains("2002 nodes") && why.contains(&format!("over the limit of {MAX_VALIDATION_APPLICATIONS}")),
            "{why}"
        );
        // validate() reports it at the value itself, as JsonSchemaValidator and the server's checks see it.
        assert_eq!(s.validate(&many).unwrap_err().path, "");
    }

    #[test]
    fn schemas_over_the_bounds_are_refused_before_compiling() {
        // 64 levels of {"items": …} around a final {} is 65 levels.
        let too_deep =
            format!("{}{{}}{}", r#"{"items":"#.repeat(MAX_SCHEMA_DEPTH_LEVELS), "}".repeat(MAX_SCHEMA_DEPTH_LEVELS));
        assert_eq!(CompiledSchema::compile(&too_deep).err(), Some(SchemaError::TooDeep));
        let at_limit = format!(
            "{}{{}}{}",
            r#"{"items":"#.repeat(MAX_SCHEMA_DEPTH_LEVELS - 1),
            "}".repeat(MAX_SCHEMA_DEPTH_LEVELS - 1)
        );
        assert!(CompiledSchema::compile(&at_limit).is_ok());
        let parsed: serde_json::Value = serde_json::from_str(&too_deep).unwrap();
        assert_eq!(CompiledSchema::compile_value(&parsed).err(), Some(SchemaError::TooDeep));

        let big = format!(r#"{{"description":"{}"}}"#, "x".repeat(MAX_SCHEMA_BYTES));
        assert!(matches!(CompiledSchema::compile(&big), Err(SchemaError::TooLarge { .. })));
        let parsed: serde_json::Value = serde_json::from_str(&big).unwrap();
        assert!(matches!(CompiledSchema::compile_value(&parsed), Err(SchemaError::TooLarge { .. })));

        assert_eq!(CompiledSchema::compile("[]").err(), Some(SchemaError::NotASchema));
        assert!(matches!(CompiledSchema::compile("{"), Err(SchemaError::NotJson(_))));
        assert!(CompiledSchema::compile("true").is_ok());
    }

    #[test]
    fn a_catastrophic_pattern_is_cut_off_not_run_for_minutes() {
        // A backreference forces the backtracking engine; (a+)+ then backtracks exponentially.
        let s = schema(r#"{"type":"string","pattern":"^(a+)+\\1b$"}"#);
        let value = json!("a".repeat(40));
        assert!(s.validate(&value).is_err());
        // A pattern without backtracking features runs on the linear-time engine.
        let s = schema(r#"{"type":"string","pattern":"^(a+)+b$"}"#);
        assert!(s.validate(&value).is_err());
        assert!(CompiledSchema::compile(r#"{"pattern":"(unclosed"}"#).is_err());
    }

    #[test]
    fn failures_never_quote_the_value_and_stay_short() {
        let secret = "sk-live-".to_owned() + &"s".repeat(10_000);
        let s = schema(
            r#"{"type":"object","properties":{"k":{"type":"integer"},"e":{"enum":[1,2]},"p":{"pattern":"^x"}},"additionalProperties":false}"#,
        );
        for value in [json!({"k": secret}), json!({"e": secret}), json!({"p": secret})] {
            let v = s.validate(&value).unwrap_err();
            assert!(!v.message.contains("sk-live"), "{v:?}");
            assert!(v.message.len() <= MAX_VALIDATION_MESSAGE_BYTES, "{v:?}");
        }
        // Unexpected property names are named (the model needs them to fix its call), within the bound.
        let v = s.validate(&json!({ (secret.clone()): 1 })).unwrap_err();
        assert!(v.message.len() <= MAX_VALIDATION_MESSAGE_BYTES && v.message.ends_with('…'), "{v:?}");
        let nested = schema(r#"{"additionalProperties":{"type":"integer"}}"#);
        let v = nested.validate(&json!({ (secret.clone()): "x" })).unwrap_err();
        assert!(v.path.len() <= MAX_VALIDATION_PATH_BYTES && v.path.ends_with('…'), "{v:?}");
        let v = s.validate_json("{not json").unwrap_err();
        assert!(v.path.is_empty() && v.message.starts_with("not JSON"), "{v:?}");
        let deep = format!("{}{}", "[".repeat(200), "]".repeat(200));
        let v = s.validate_json(&deep).unwrap_err();
        assert!(v.message.contains("nests deeper than the 128 levels"), "{v:?}");
    }

    #[test]
    fn lone_surrogates_are_judged_as_replacement_characters() {
        let s = schema(r#"{"properties":{"t":{"type":"string","maxLength":3}}}"#);
        assert_eq!(s.validate_json(r#"{"t":"a\ud800b"}"#), Ok(()));
        assert_eq!(
            super::without_lone_surrogates(r#"["\udc00\\ud800"]"#).as_deref(),
            Some(r#"["\ufffd\\ud800"]"#),
            "an escaped backslash is not an escape"
        );
        assert_eq!(s.validate_json(r#"{"t":"\ud83d\ude80"}"#), Ok(()), "a pair is a pair");
        assert!(s.validate_json(r#"{"t":"\ud800\ud800\ud800\ud800"}"#).is_err(), "four characters");
        assert_eq!(super::without_lone_surrogates(r#"["\ud83d\ude80", "\\ud800"]"#), None);
        assert_eq!(super::without_lone_surrogates(r#"["x\uD800"]"#).as_deref(), Some(r#"["x\ufffd"]"#));
    }
}
