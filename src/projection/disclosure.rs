//! The disclosure budget: how much of each server's tool schemas a model is shown up front.
//!
//! One code path with a threshold, decided per server (not a mode flag):
//!
//! | tier       | when                                                        | input schema shown     |
//! |------------|-------------------------------------------------------------|------------------------|
//! | `Full`     | in `alwaysLoad`, or catalog + full schemas fit the budget   | the server's own       |
//! | `Deferred` | otherwise, if the deferred schemas alone fit the budget     | names, types, required |
//! | `Bare`     | otherwise                                                   | `{"type":"object"}`    |
//!
//! The catalog (every tool's name and description) is the floor: it is shown in every tier, because it is
//! what the model routes on. The budget bounds schema bulk on top of it, never the catalog itself, so a
//! catalog larger than the budget is reported (`floor_exceeds_budget`) rather than trimmed.
//!
//! A deferred schema sheds prose, not the argument contract: without parameter names a model guesses
//! malformed calls. `mcp__describe_tool` returns the full schema of any abbreviated tool.
//!
//! Token counts are `ceil(UTF-16 code units / 4)`, the same number JavaScript's `Math.ceil(s.length / 4)`
//! gives: an order-of-magnitude estimate, not a tokenizer.

use crate::protocol::json_text::{json_text, JsonText};
use serde::Serialize;
use serde_json::{Map, Value};
use std::collections::HashSet;
use std::sync::LazyLock;

/// Schema bulk allowed per server when the caller sets no budget: about 10% of a 200k window.
pub const DEFAULT_DISCLOSURE_BUDGET_TOKENS: usize = 20_000;
/// Context window assumed when the caller asks for an automatic budget without naming one.
pub const DEFAULT_CONTEXT_WINDOW_TOKENS: usize = 200_000;
/// Share of the context window an automatic budget spends on schemas, in percent.
pub const AUTO_BUDGET_PERCENT_OF_WINDOW: usize = 10;
/// Characters (UTF-16 code units) counted as one token by the estimate.
pub const CHARS_PER_TOKEN: usize = 4;
/// The tool that returns the full schema of an abbreviated tool.
pub const MCP_DESCRIBE_TOOL: &str = "mcp__describe_tool";
/// The tool that searches a catalog too big to read.
pub const MCP_SEARCH_TOOLS: &str = "mcp__search_tools";

/// JSON Schema's primitive type names; anything else in `type` is not a type a model can act on.
const JSON_SCHEMA_TYPES: [&str; 7] = ["string", "number", "integer", "boolean", "null", "array", "object"];

/// `Math.ceil(text.length / 4)` in JavaScript: `length` counts UTF-16 code units, so an emoji is 2.
pub fn estimate_tokens(text: &str) -> usize {
    // Counted over the UTF-8 bytes, which the compiler vectorizes (every schema and description is measured):
    // each character's first byte counts one unit, and a 4-byte character (0xF0..) is a surrogate pair, two.
    let bytes = text.as_bytes();
    let characters = bytes.iter().filter(|&&b| !(0x80..0xC0).contains(&b)).count();
    let astral = bytes.iter().filter(|&&b| b >= 0xF0).count();
    (characters + astral).div_ceil(CHARS_PER_TOKEN)
}

/// Tokens of a schema as it is sent: compact JSON.
pub fn schema_tokens(schema: &Value) -> usize {
    estimate_tokens(&schema.to_string())
}

/// How many tokens of schema bulk one server may spend.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Budget {
    Tokens(usize),
    /// A share of the model's context window (`AUTO_BUDGET_PERCENT_OF_WINDOW`).
    Auto {
        context_window_tokens: usize,
    },
}

impl Budget {
    pub fn tokens(&self) -> usize {
        match *self {
            Budget::Tokens(tokens) => tokens,
            // floor(window * percent / 100), split so that a huge window cannot overflow.
            Budget::Auto { context_window_tokens } => {
                context_window_tokens / 100 * AUTO_BUDGET_PERCENT_OF_WINDOW
                    + context_window_tokens % 100 * AUTO_BUDGET_PERCENT_OF_WINDOW / 100
            }
        }
    }
}

impl Default for Budget {
    fn default() -> Self {
        Budget::Tokens(DEFAULT_DISCLOSURE_BUDGET_TOKENS)
    }
}

/// How much of its input schemas a server's tools are projected with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Tier {
    Full,
    Deferred,
    Bare,
}

impl Tier {
    /// Abbreviated tiers need the describe tool before a call can be written against the real contract.
    pub fn is_abbreviated(self) -> bool {
        self != Tier::Full
    }
}

/// The argument contract without its prose: parameter names, their scalar types, and `required`.
/// Array- and object-typed parameters keep only that they are one; their bodies are dropped.
pub fn deferred_schema(schema: &Value) -> Value {
    let mut deferred = Map::new();
    deferred.insert("type".to_owned(), Value::from("object"));
    let Some(properties) = schema.get("properties").and_then(Value::as_object) else {
        return Value::Object(deferred);
    };
    let slim: Map<String, Value> =
        properties.iter().map(|(name, property)| (name.clone(), deferred_property(property))).collect();
    deferred.insert("properties".to_owned(), Value::Object(slim));

    // Linear in the size of `required`: a server controls its length (100 000 names fit in 2 MiB).
    let mut kept: HashSet<&str> = HashSet::new();
    let mut required: Vec<Value> = Vec::new();
    for name in schema.get("required").and_then(Value::as_array).into_iter().flatten() {
        // A name that is not a property would promise an argument the schema no longer describes.
        let Some(name) = name.as_str().filter(|n| properties.contains_key(*n)) else { continue };
        if kept.insert(name) {
            required.push(Value::from(name));
        }
    }
    if !required.is_empty() {
        deferred.insert("required".to_owned(), Value::Array(required));
    }
    Value::Object(deferred)
}

fn deferred_property(property: &Value) -> Value {
    let is_known = |t: &Value| t.as_str().is_some_and(|t| JSON_SCHEMA_TYPES.contains(&t));
    let kept_type = match property.get("type") {
        Some(single) if is_known(single) => Some(single.clone()),
        Some(Value::Array(types)) => {
            let known: Vec<Value> = types.iter().filter(|t| is_known(t)).cloned().collect();
            (!known.is_empty()).then_some(Value::Array(known))
        }
        _ => None,
    };
    let mut slim = Map::new();
    if let Some(kept_type) = kept_type {
        slim.insert("type".to_owned(), kept_type);
    }
    Value::Object(slim)
}

/// The schema of a server so large that even parameter names blow the budget.
pub fn bare_schema() -> Value {
    let mut bare = Map::new();
    bare.insert("type".to_owned(), Value::from("object"));
    Value::Object(bare)
}

/// [`deferred_schema`] of a schema kept as text. Read without building the rest of the tree: only
/// what a deferred schema keeps (each property's `type`, `required`) is kept from the parse, so a big
/// catalogue's budget decision costs a scan per schema, not a tree (tested equal to the tree's).
pub fn deferred_schema_of(schema: &JsonText) -> Value {
    deferred_schema(&serde_json::from_str::<DeferredParts>(schema.get()).map_or(Value::Null, |parts| parts.0))
}

/// Of a schema, the skeleton [`deferred_schema`] reads: `{"properties": {name: {"type": …}}, "required": …}`
/// where the schema has them, each member's last occurrence kept as a tree parse keeps it; `Null` where
/// the schema (or its `properties`, or a property) is not an object, which the deferred schema treats alike.
struct DeferredParts(Value);

/// Which level of the schema a [`DeferredParts`] visitor reads.
#[derive(Clone, Copy)]
enum Level {
    Root,
    Properties,
    Property,
}

impl<'de> serde::Deserialize<'de> for DeferredParts {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(PartsVisitor(Level::Root))
    }
}

struct PartsVisitor(Level);

impl<'de> serde::de::DeserializeSeed<'de> for PartsVisitor {
    type Value = DeferredParts;
    fn deserialize<D: serde::Deserializer<'de>>(self, deserializer: D) -> Result<DeferredParts, D::Error> {
        deserializer.deserialize_any(self)
    }
}

/// Any value that is not an object: `Null`, its contents skipped.
macro_rules! not_an_object {
    ($($method:ident($($arg:ty)?)),*) => {
        $(fn $method<E: serde::de::Error>(self, $(_: $arg)?) -> Result<DeferredParts, E> {
            Ok(DeferredParts(Value::Null))
        })*
    };
}

impl<'de> serde::de::Visitor<'de> for PartsVisitor {
    type Value = DeferredParts;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a JSON value")
    }

    not_an_object!(visit_bool(bool), visit_i64(i64), visit_u64(u64), visit_f64(f64), visit_str(&str), visit_unit());

    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<DeferredParts, A::Error> {
        while seq.next_element::<serde::de::IgnoredAny>()?.is_some() {}
        Ok(DeferredParts(Value::Null))
    }

    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<DeferredParts, A::Error> {
        let mut kept = Map::new();
        while let Some(key) = map.next_key::<std::borrow::Cow<'de, str>>()? {
            let part = match (self.0, &*key) {
                (Level::Root, "properties") => map.next_value_seed(PartsVisitor(Level::Properties))?.0,
                (Level::Root, "required") | (Level::Property, "type") => map.next_value::<Value>()?,
                (Level::Properties, _) => map.next_value_seed(PartsVisitor(Level::Property))?.0,
                _ => {
                    map.next_value::<serde::de::IgnoredAny>()?;
                    continue;
                }
            };
            kept.insert(key.into_owned(), part);
        }
        Ok(DeferredParts(Value::Object(kept)))
    }
}

/// The input schema a tool is projected with in `tier`. A bare schema is one text for every tool.
pub fn schema_for(tier: Tier, schema: &JsonText) -> JsonText {
    static BARE: LazyLock<JsonText> = LazyLock::new(|| json_text(&bare_schema()));
    match tier {
        Tier::Full => schema.clone(),
        Tier::Deferred => json_text(&deferred_schema_of(schema)),
        Tier::Bare => BARE.clone(),
    }
}

/// What the budget decision reads of one tool.
#[derive(Debug, Clone, Copy)]
pub struct ToolText<'a> {
    pub name: &'a str,
    pub description: &'a str,
    /// Its compact text.
    pub input_schema: &'a JsonText,
    /// `schema_tokens(input_schema)`, when known already (a catalogue shared by content measures it once).
    pub schema_tokens: Option<usize>,
}

/// The decision for one server, with the measurements behind it (for diagnostics).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ServerDisclosure {
    pub tier: Tier,
    /// Tokens of the catalog (every name and description), shown in every tier.
    pub floor_tokens: usize,
    /// Tokens of the input schemas in the chosen tier.
    pub schema_tokens: usize,
    /// The catalog alone is over budget: nothing is left to shed, so the caller reports it.
    pub floor_exceeds_budget: bool,
}

/// Chooses a server's tier. See the module doc for the rule.
pub fn decide(tools: &[ToolText], budget_tokens: usize, always_load: bool) -> ServerDisclosure {
    let floor_tokens: usize =
        tools.iter().map(|tool| estimate_tokens(tool.name) + estimate_tokens(tool.description)).sum();
    let full_bulk: usize =
        tools.iter().map(|tool| tool.schema_tokens.unwrap_or_else(|| estimate_tokens(tool.input_schema.get()))).sum();

    let (tier, chosen_bulk) = if always_load || floor_tokens.saturating_add(full_bulk) <= budget_tokens {
        (Tier::Full, full_bulk)
    } else {
        // Each deferred schema is made from a parse of its text: stop as soon as the sum is over budget
        // (a catalogue of thousands goes bare after its first few hundred).
        let mut deferred_bulk = 0usize;
        for tool in tools {
            deferred_bulk += schema_tokens(&deferred_schema_of(tool.input_schema));
            if deferred_bulk > budget_tokens {
                break;
            }
        }
        if deferred_bulk <= budget_tokens {
            (Tier::Deferred, deferred_bulk)
        } else {
            (Tier::Bare, tools.len() * schema_tokens(&bare_schema()))
        }
    };
    ServerDisclosure {
        tier,
        floor_tokens,
        schema_tokens: chosen_bulk,
        floor_exceeds_budget: floor_tokens > budget_tokens,
    }
}

/// Generated catalogs shared by the projection tests: realistic tools across several domains.
#[cfg(test)]
pub(crate) mod test_catalog {
    use serde_json::{json, Value};

    pub(crate) struct GeneratedTool {
        pub name: String,
        pub description: String,
        pub input_schema: Value,
        /// `input_schema`'s text, as a tool keeps it.
        pub schema_text: crate::protocol::json_text::JsonText,
    }

    const DOMAINS: [(&str, &str); 12] = [
        ("calendar", "on the team calendar"),
        ("billing", "in the billing account"),
        ("github", "in a GitHub repository"),
        ("crm", "in the sales CRM"),
        ("files", "in the shared drive"),
        ("weather", "for the weather service"),
        ("shipping", "with the shipping carrier"),
        ("hr", "in the HR system"),
        ("support", "in the help desk"),
        ("cloud", "in the cloud project"),
        ("inventory", "in the warehouse inventory"),
        ("marketing", "in the marketing workspace"),
    ];
    const ENTITIES: [&str; 8] = ["event", "invoice", "issue", "contact", "folder", "station", "shipment", "employee"];
    const ACTIONS: [(&str, &str); 8] = [
        ("list", "List every {e} {d}, newest first, with paging."),
        ("get", "Fetch one {e} {d} by its identifier, including its history."),
        ("create", "Create a new {e} {d}. Returns the stored record with its id."),
        ("update", "Change fields of an existing {e} {d}; omitted fields stay as they are."),
        ("delete", "Permanently delete a {e} {d}. This cannot be undone."),
        ("search", "Search {e} records {d} by keyword and date range."),
        ("archive", "Archive a {e} {d} so it is hidden but kept for audits."),
        ("export", "Export {e} records {d} as CSV or JSON for a period."),
    ];

    /// Two to six parameters depending on the action, as real servers have: descriptions, enums,
    /// formats, defaults and a nested object where they make sense.
    fn schema(entity: &str, action: &str) -> Value {
        let id = format!("{entity}_id");
        let id_property = json!({ "type": "string", "description": format!("Identifier of the {entity}, as returned by list."), "minLength": 1 });
        let status = json!({ "type": "string", "description": "Only records in this state.", "enum": ["open", "pending", "closed", "archived"] });
        let limit = json!({ "type": "integer", "description": "Most records to return.", "minimum": 1, "maximum": 100, "default": 25 });
        let period = json!({
            "type": "object",
            "description": "Inclusive period to cover.",
            "properties": { "from": { "type": "string", "format": "date" }, "to": { "type": "string", "format": "date" } },
            "required": ["from"]
        });
        match action {
            "list" => json!({
                "type": "object",
                "properties": {
                    "status": status,
                    "limit": limit,
                    "cursor": { "type": "string", "description": "Opaque cursor from the previous page." },
                    "updated_after": { "type": ["string", "null"], "format": "date-time", "description": "Only records changed after this instant (ISO 8601)." }
                }
            }),
            "create" | "update" => json!({
                "type": "object",
                "properties": {
                    id.clone(): id_property,
                    "title": { "type": "string", "description": format!("Short human title of the {entity}."), "maxLength": 200 },
                    "status": status,
                    "owner": {
                        "type": "object",
                        "description": format!("Who the {entity} belongs to."),
                        "properties": { "email": { "type": "string", "format": "email" }, "team": { "type": "string" } },
                        "required": ["email"]
                    },
                    "tags": { "type": "array", "items": { "type": "string" }, "description": "Labels to set." },
                    "notify": { "type": "boolean", "description": "Email the owner about the change.", "default": false }
                },
                "required": if action == "create" { json!(["title", "owner"]) } else { json!([id]) }
            }),
            "search" | "export" => json!({
                "type": "object",
                "properties": {
                    "query": { "type": "string", "description": "Words to match in titles and notes." },
                    "period": period,
                    "format": { "type": "string", "enum": ["csv", "json"], "default": "json", "description": "Output format." }
                },
                "required": if action == "search" { json!(["query"]) } else { json!(["period"]) }
            }),
            _ => json!({
                "type": "object",
                "properties": {
                    id.clone(): id_property,
                    "reason": { "type": "string", "description": format!("Why you {action} it; kept in the audit log.") }
                },
                "required": [id]
            }),
        }
    }

    /// `count` distinct tools; the same count always gives the same catalog.
    pub(crate) fn generated_catalog(count: usize) -> Vec<GeneratedTool> {
        let capacity = DOMAINS.len() * ENTITIES.len() * ACTIONS.len();
        (0..count)
            .map(|i| {
                let (domain, where_) = DOMAINS[i % DOMAINS.len()];
                let entity = ENTITIES[(i / DOMAINS.len()) % ENTITIES.len()];
                let (action, template) = ACTIONS[(i / (DOMAINS.len() * ENTITIES.len())) % ACTIONS.len()];
                let round = i / capacity;
                let mut name = format!("{domain}_{action}_{entity}");
                if round > 0 {
                    name.push_str(&format!("_{round}"));
                }
                let description = template.replace("{e}", entity).replace("{d}", where_);
                let input_schema = schema(entity, action);
                GeneratedTool { name, description, schema_text: input_schema.clone().into(), input_schema }
            })
            .collect()
    }

    pub(crate) fn texts(tools: &[GeneratedTool]) -> Vec<super::ToolText<'_>> {
        tools
            .iter()
            .map(|t| super::ToolText {
                name: &t.name,
                description: &t.description,
                input_schema: &t.schema_text,
                schema_tokens: None,
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::test_catalog::{generated_catalog, texts};
    use super::*;
    use serde_json::json;
    use std::collections::{BTreeSet, HashSet};

    #[test]
    fn token_estimate_matches_javascript_length() {
        // Expected values are Math.ceil(s.length / 4) as Node computes them.
        assert_eq!(estimate_tokens(""), 0);
        assert_eq!(estimate_tokens("abc"), 1);
        assert_eq!(estimate_tokens("abcd"), 1);
        assert_eq!(estimate_tokens("abcde"), 2);
        assert_eq!(estimate_tokens(&"x".repeat(4_000)), 1_000);
        // 'é' is one UTF-16 unit though two UTF-8 bytes: "résumé".length === 6.
        assert_eq!(estimate_tokens("résumé"), 2);
        assert_eq!(estimate_tokens("ééééééééé"), 3);
        // An emoji outside the BMP is a surrogate pair: "🚀".length === 2, "🚀🚀🚀".length === 6.
        assert_eq!(estimate_tokens("🚀"), 1);
        assert_eq!(estimate_tokens("🚀🚀🚀"), 2);
        assert_eq!(estimate_tokens("ab🚀"), 1);
        assert_eq!(estimate_tokens("abc🚀"), 2);
        // CJK in the BMP is one unit per character: "東京都".length === 3.
        assert_eq!(estimate_tokens("東京都"), 1);
        assert_eq!(estimate_tokens("👩‍👩‍👧"), 2, "ZWJ family: length 8");
    }

    #[test]
    fn budget_tokens() {
        assert_eq!(Budget::default().tokens(), DEFAULT_DISCLOSURE_BUDGET_TOKENS);
        assert_eq!(Budget::Tokens(1_234).tokens(), 1_234);
        let auto = Budget::Auto { context_window_tokens: DEFAULT_CONTEXT_WINDOW_TOKENS };
        assert_eq!(auto.tokens(), DEFAULT_DISCLOSURE_BUDGET_TOKENS);
        assert_eq!(Budget::Auto { context_window_tokens: 128_000 }.tokens(), 12_800);
        assert_eq!(Budget::Auto { context_window_tokens: 1_005 }.tokens(), 100, "floored");
        assert_eq!(Budget::Auto { context_window_tokens: 9 }.tokens(), 0);
        assert_eq!(Budget::Auto { context_window_tokens: usize::MAX }.tokens(), usize::MAX / 10, "no overflow");
    }

    #[test]
    fn tier_serializes_lowercase() {
        assert_eq!(
            serde_json::to_value([Tier::Full, Tier::Deferred, Tier::Bare]).unwrap(),
            json!(["full", "deferred", "bare"])
        );
        assert!(!Tier::Full.is_abbreviated());
        assert!(Tier::Deferred.is_abbreviated() && Tier::Bare.is_abbreviated());
    }

    #[test]
    fn deferred_schema_keeps_the_contract_and_drops_the_prose() {
        let full = json!({
            "type": "object",
            "description": "Create a calendar event.",
            "$defs": { "attendee": { "type": "object" } },
            "properties": {
                "title": { "type": "string", "description": "Title", "minLength": 1, "default": "Meeting" },
                "start": { "type": "string", "format": "date-time" },
                "duration_minutes": { "type": "integer", "minimum": 5 },
                "price": { "type": "number", "exclusiveMinimum": 0 },
                "visibility": { "type": "string", "enum": ["public", "private"] },
                "all_day": { "type": "boolean" },
                "note": { "type": ["string", "null"], "description": "Optional" },
                "attendees": { "type": "array", "items": { "$ref": "#/$defs/attendee" }, "minItems": 1 },
                "location": { "type": "object", "properties": { "room": { "type": "string" } }, "required": ["room"] },
                "recurrence": { "anyOf": [{ "type": "string" }, { "type": "object" }], "description": "RRULE or object" },
                "nothing": { "type": "null" },
                "weird": { "type": "date" },
                "mixed": { "type": ["string", 7, "timestamp"] }
            },
            "required": ["title", "start", "title", "ghost"],
            "additionalProperties": false,
            "anyOf": [{ "required": ["title"] }]
        });
        let deferred = deferred_schema(&full);
        assert_eq!(
            deferred,
            json!({
                "type": "object",
                "properties": {
                    "title": { "type": "string" },
                    "start": { "type": "string" },
                    "duration_minutes": { "type": "integer" },
                    "price": { "type": "number" },
                    "visibility": { "type": "string" },
                    "all_day": { "type": "boolean" },
                    "note": { "type": ["string", "null"] },
                    "attendees": { "type": "array" },
                    "location": { "type": "object" },
                    "recurrence": {},
                    "nothing": { "type": "null" },
                    "weird": {},
                    "mixed": { "type": ["string"] }
                },
                "required": ["title", "start"]
            })
        );
        assert!(schema_tokens(&deferred) < schema_tokens(&full));
        assert_eq!(deferred_schema(&deferred), deferred, "idempotent");
    }

    #[test]
    fn deferred_schema_tolerates_odd_shapes() {
        let object = json!({ "type": "object" });
        assert_eq!(deferred_schema(&json!({})), object);
        assert_eq!(deferred_schema(&json!({ "type": "object" })), object);
        assert_eq!(deferred_schema(&json!(null)), object);
        assert_eq!(deferred_schema(&json!("string")), object);
        assert_eq!(deferred_schema(&json!([1, 2])), object);
        assert_eq!(deferred_schema(&json!({ "properties": [1, 2], "required": ["a"] })), object);
        assert_eq!(deferred_schema(&json!({ "properties": "x" })), object);
        assert_eq!(
            deferred_schema(&json!({ "properties": {}, "required": ["a"] })),
            json!({ "type": "object", "properties": {} }),
            "no parameters stays explicit; a dangling required goes"
        );
        assert_eq!(
            deferred_schema(
                &json!({ "properties": { "a": true, "b": false, "c": 3, "d": { "type": 5 } }, "required": "a" })
            ),
            json!({ "type": "object", "properties": { "a": {}, "b": {}, "c": {}, "d": {} } })
        );
        assert_eq!(
            deferred_schema(&json!({ "properties": { "a": { "type": "string" } }, "required": [1, null, "a"] })),
            json!({ "type": "object", "properties": { "a": { "type": "string" } }, "required": ["a"] })
        );
    }

    /// A 2 MiB schema of 100 000 required properties, as a hostile server can publish: deferring it is
    /// linear (the quadratic `required` check took minutes here).
    #[test]
    fn deferring_a_huge_schema_is_linear() {
        let count = 100_000;
        let properties: Map<String, Value> = (0..count).map(|i| (format!("p{i}"), json!({}))).collect();
        let required: Vec<Value> = (0..count).map(|i| Value::from(format!("p{i}"))).collect();
        let schema = json!({ "type": "object", "properties": properties, "required": required });
        assert!(schema.to_string().len() > 2_000_000);
        let started = std::time::Instant::now();
        let deferred = deferred_schema(&schema);
        let elapsed = started.elapsed();
        assert_eq!(deferred["required"].as_array().unwrap().len(), count);
        assert_eq!(deferred["required"][count - 1], format!("p{}", count - 1));
        // Linear work is well under a second even in a debug build; the quadratic check was minutes.
        assert!(elapsed < std::time::Duration::from_secs(3), "{elapsed:?}");
    }

    #[test]
    fn schema_for_each_tier() {
        let full: JsonText =
            serde_json::from_str(r#"{"type":"object","properties":{"q":{"type":"string","description":"query"}}}"#)
                .unwrap();
        assert_eq!(schema_for(Tier::Full, &full).get(), full.get(), "the server's own text");
        assert_eq!(
            schema_for(Tier::Deferred, &full).get(),
            r#"{"properties":{"q":{"type":"string"}},"type":"object"}"#
        );
        assert_eq!(schema_for(Tier::Bare, &full).get(), r#"{"type":"object"}"#);
        assert!(
            std::ptr::eq(schema_for(Tier::Bare, &full).get(), schema_for(Tier::Bare, &JsonText::from(json!({}))).get()),
            "every bare schema is one text"
        );
        assert_eq!(bare_schema().to_string(), r#"{"type":"object"}"#);
    }

    #[test]
    fn no_tools_is_full_and_costs_nothing() {
        let decision = decide(&[], 0, false);
        assert_eq!(
            decision,
            ServerDisclosure { tier: Tier::Full, floor_tokens: 0, schema_tokens: 0, floor_exceeds_budget: false }
        );
    }

    #[test]
    fn measurements_are_sums_of_estimates() {
        let catalog = generated_catalog(10);
        let tools = texts(&catalog);
        let floor: usize = catalog.iter().map(|t| estimate_tokens(&t.name) + estimate_tokens(&t.description)).sum();
        let full: usize =
            catalog.iter().map(|t| estimate_tokens(&serde_json::to_string(&t.input_schema).unwrap())).sum();
        let decision = decide(&tools, DEFAULT_DISCLOSURE_BUDGET_TOKENS, false);
        assert_eq!(decision.floor_tokens, floor);
        assert_eq!(decision.schema_tokens, full);
        assert_eq!(decision.tier, Tier::Full);
    }

    #[test]
    fn tiers_switch_exactly_at_the_threshold() {
        for count in [10, 500, 2000] {
            let catalog = generated_catalog(count);
            let tools = texts(&catalog);
            let floor: usize = tools.iter().map(|t| estimate_tokens(t.name) + estimate_tokens(t.description)).sum();
            let full: usize = catalog.iter().map(|t| schema_tokens(&t.input_schema)).sum();
            let deferred: usize = catalog.iter().map(|t| schema_tokens(&deferred_schema(&t.input_schema))).sum();
            let bare = count * schema_tokens(&bare_schema());
            assert!(bare < deferred && deferred < full, "{count}: each tier is smaller");
            assert!(deferred < floor + full, "{count}: the test needs a gap between the two thresholds");

            let at = |budget| decide(&tools, budget, false);
            assert_eq!(at(floor + full).tier, Tier::Full, "{count}: definitions fit exactly");
            assert_eq!(at(floor + full).schema_tokens, full);
            assert_eq!(at(floor + full - 1).tier, Tier::Deferred, "{count}: one token short");
            assert_eq!(at(floor + full - 1).schema_tokens, deferred);
            assert_eq!(at(deferred).tier, Tier::Deferred, "{count}: deferred schemas fit exactly");
            assert_eq!(at(deferred - 1).tier, Tier::Bare, "{count}: one token short of deferred");
            assert_eq!(at(deferred - 1).schema_tokens, bare);
            assert_eq!(at(0).tier, Tier::Bare);

            assert!(!at(floor).floor_exceeds_budget);
            assert!(at(floor - 1).floor_exceeds_budget);
            for budget in [0, 1, deferred - 1, floor + full - 1] {
                assert_eq!(decide(&tools, budget, true).tier, Tier::Full, "{count}: alwaysLoad wins at {budget}");
                assert_eq!(decide(&tools, budget, true).schema_tokens, full);
            }
        }
    }

    #[test]
    fn default_budget_on_small_medium_and_huge_servers() {
        let small = generated_catalog(10);
        let decision = decide(&texts(&small), DEFAULT_DISCLOSURE_BUDGET_TOKENS, false);
        assert_eq!(decision.tier, Tier::Full);
        assert!(decision.floor_tokens + decision.schema_tokens <= DEFAULT_DISCLOSURE_BUDGET_TOKENS);
        assert!(!decision.floor_exceeds_budget);

        // These schemas cost about 41 tokens a tool deferred and 120 in full, so at the default budget a
        // server of a few hundred tools is deferred, and near 500 even parameter names no longer fit.
        let medium = generated_catalog(250);
        let decision = decide(&texts(&medium), DEFAULT_DISCLOSURE_BUDGET_TOKENS, false);
        assert_eq!(decision.tier, Tier::Deferred, "{decision:?}");
        assert!(decision.schema_tokens <= DEFAULT_DISCLOSURE_BUDGET_TOKENS);

        let large = generated_catalog(500);
        let decision = decide(&texts(&large), DEFAULT_DISCLOSURE_BUDGET_TOKENS, false);
        assert_eq!(decision.tier, Tier::Bare, "{decision:?}");
        assert!(!decision.floor_exceeds_budget, "{decision:?}");
        assert_eq!(decide(&texts(&large), 2 * DEFAULT_DISCLOSURE_BUDGET_TOKENS, false).tier, Tier::Deferred);

        // 2000 tools: schemas go bare and still fit; the catalog itself is over budget and is reported,
        // never trimmed.
        let huge = generated_catalog(2000);
        let decision = decide(&texts(&huge), DEFAULT_DISCLOSURE_BUDGET_TOKENS, false);
        assert_eq!(decision.tier, Tier::Bare, "{decision:?}");
        assert!(decision.schema_tokens <= DEFAULT_DISCLOSURE_BUDGET_TOKENS, "{decision:?}");
        assert!(decision.floor_exceeds_budget, "{decision:?}");

        // An automatic budget on a small window pushes servers down a tier.
        let tight = Budget::Auto { context_window_tokens: 8_000 }.tokens();
        assert_eq!(decide(&texts(&small), tight, false).tier, Tier::Deferred);
        assert_eq!(decide(&texts(&medium), tight, false).tier, Tier::Bare);
    }

    #[test]
    fn chosen_bulk_stays_within_budget_whenever_a_tier_can_hold_it() {
        let catalog = generated_catalog(500);
        let tools = texts(&catalog);
        let bare_bulk = tools.len() * schema_tokens(&bare_schema());
        let mut seen = BTreeSet::new();
        let full_definitions = decide(&tools, usize::MAX, false);
        let sweep_end = full_definitions.floor_tokens + full_definitions.schema_tokens + 1_000;
        // About 40 budgets: each decision serializes every schema, which is slow in a debug build.
        for budget in (0..=sweep_end).step_by(sweep_end / 40) {
            let decision = decide(&tools, budget, false);
            seen.insert(format!("{:?}", decision.tier));
            if decision.tier != Tier::Bare || bare_bulk <= budget {
                assert!(decision.schema_tokens <= budget, "{budget}: {decision:?}");
            }
        }
        assert_eq!(seen.len(), 3, "the sweep crosses every tier: {seen:?}");
    }

    #[test]
    fn every_parameter_name_survives_deferral() {
        for count in [10, 500, 2000] {
            for tool in generated_catalog(count) {
                let deferred = schema_for(Tier::Deferred, &tool.schema_text).tree();
                let names = |schema: &Value| -> HashSet<String> {
                    schema["properties"].as_object().unwrap().keys().cloned().collect()
                };
                assert_eq!(names(&deferred), names(&tool.input_schema), "{}", tool.name);
                assert!(names(&deferred).len() >= 2, "{}", tool.name);
                assert_eq!(deferred.get("required"), tool.input_schema.get("required"), "{}", tool.name);
                for (name, property) in deferred["properties"].as_object().unwrap() {
                    assert_eq!(property.get("type"), tool.input_schema["properties"][name].get("type"), "{name}");
                    assert!(property.get("description").is_none() && property.get("enum").is_none());
                }
            }
        }
    }

    #[test]
    fn a_schemas_deferred_form_read_from_its_text_is_the_trees() {
        let cases = [
            r#"{"type":"object","properties":{"a":{"type":"string","description":"x","enum":["p"]},"b":{"type":["integer","bogus"]},"c":true,"d":{"items":{"type":"x"}}},"required":["a","zz","a",3]}"#,
            r#"{"properties":{"a":{"type":"string"},"a":{"type":"number"}},"properties":{"b":{}},"required":"b"}"#,
            r#"{"properties":[{"type":"string"}],"required":["0"]}"#,
            r#"{"properties":{"a":{"type":"string","type":"boolean"}}}"#,
            r#"["not", "an", {"object": 1}]"#,
            r#""text""#,
            r#"{}"#,
            r#"{"pr\u006fperties":{"a":{"t\u0079pe":"string"},"\u00e9":{"type":"null"}},"requ\u0069red":["a","\u00e9"]}"#,
            r#"{"properties":{"a":{"type":"string"}},"properties":{"b":{"type":"number"}},"required":["a","b"]}"#,
            r#"{ "properties" : { "a" : { "type" : [ "integer" , "x" ] , "description" : "d" } } , "required" : [ "a" ] }"#,
        ];
        for text in cases {
            let kept: JsonText = serde_json::from_str(text).unwrap();
            let tree: Value = serde_json::from_str(text).unwrap();
            assert_eq!(deferred_schema_of(&kept), deferred_schema(&tree), "{text}");
        }
        for tool in generated_catalog(96) {
            assert_eq!(deferred_schema_of(&tool.schema_text), deferred_schema(&tool.input_schema), "{}", tool.name);
        }
    }

    #[test]
    fn the_estimate_counts_utf16_units_as_javascript_does() {
        for text in
            ["", "abcd", "abcde", "é", "検索", "😀", "😀😀", "aé検😀\u{10FFFF}\u{7F}\u{80}\u{7FF}\u{800}\u{FFFF}"]
        {
            let units: usize = text.chars().map(char::len_utf16).sum();
            assert_eq!(estimate_tokens(text), units.div_ceil(CHARS_PER_TOKEN), "{text:?}");
            assert_eq!(estimate_tokens(&text.repeat(7)), (units * 7).div_ceil(CHARS_PER_TOKEN), "{text:?}");
        }
    }

    #[test]
    fn generated_names_are_distinct() {
        let catalog = generated_catalog(2000);
        let names: HashSet<&str> = catalog.iter().map(|t| t.name.as_str()).collect();
        assert_eq!(names.len(), 2000);
    }
}
