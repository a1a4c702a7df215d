//! JSON kept as its text. A tool's schemas are held for the life of a toolset but mostly only forwarded:
//! parsed into a `Value` tree at listing, serialized back to text and dropped, they cost the bulk of a big
//! catalogue's connect. Kept as the server's text instead (checked as strictly as a tree parse would,
//! insignificant whitespace removed), a tree is parsed only where one is read: a disclosure tier cutting a
//! schema down, a drift fingerprint, a validator on a tool's first call.

use serde::de::{self, Deserializer, MapAccess, SeqAccess, Visitor};
use serde::{Deserialize, Serialize, Serializer};
use serde_json::value::RawValue;
use serde_json::Value;
use std::borrow::Cow;
use std::sync::Arc;

/// JSON as its compact text, shared: toolsets that list the same catalogue from the same server hold one
/// copy (see `catalog::shared`).
#[derive(Clone)]
pub struct JsonText(Arc<RawValue>);

impl std::ops::Deref for JsonText {
    type Target = RawValue;
    fn deref(&self) -> &RawValue {
        &self.0
    }
}

impl Serialize for JsonText {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.0.serialize(serializer)
    }
}

impl std::fmt::Debug for JsonText {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.0.get())
    }
}

/// The same JSON value: the same text, or texts whose trees are equal (keys in another order, a number
/// written another way), as a server's text and the same schema back from a store's JSON are. Trees are
/// parsed only when the texts differ.
impl PartialEq for JsonText {
    fn eq(&self, other: &Self) -> bool {
        self.get() == other.get() || self.tree() == other.tree()
    }
}

impl From<Value> for JsonText {
    fn from(value: Value) -> Self {
        json_text(&value)
    }
}

/// A server's JSON, as [`JsonText::checked`] keeps it.
impl<'de> Deserialize<'de> for JsonText {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let raw = Box::<RawValue>::deserialize(deserializer)?;
        JsonText::checked(raw).map_err(de::Error::custom)
    }
}

/// The compact text of a tree (its keys sorted, as `Value`'s map keeps them).
pub fn json_text(value: &Value) -> JsonText {
    JsonText(Arc::from(serde_json::value::to_raw_value(value).expect("a Value always serializes")))
}

impl JsonText {
    /// `raw` kept as text once it passes every check a tree parse makes (string escapes, lone surrogates,
    /// numbers in range): what the text holds is what a parse of it gives anywhere later, in the engine or
    /// in JavaScript. Whitespace between tokens is removed, so a pretty-printed schema costs the model no
    /// more than a compact one.
    pub fn checked(raw: Box<RawValue>) -> Result<JsonText, serde_json::Error> {
        serde_json::from_str::<Strict>(raw.get())?;
        let text: Box<RawValue> = match compact(raw.get()) {
            Cow::Borrowed(_) => raw,
            Cow::Owned(compacted) => RawValue::from_string(compacted)?,
        };
        Ok(JsonText(Arc::from(text)))
    }

    /// The text as a tree. Every `JsonText` is checked JSON (made by [`JsonText::checked`] or from a tree),
    /// so this parses; a failure would be the engine's bug, contained as one (never a `Null` that would
    /// make two unlike texts fingerprint alike).
    pub fn tree(&self) -> Value {
        serde_json::from_str(self.get()).expect("a JsonText is checked JSON")
    }

    /// What the root declares as its `"type"` (the last one, as a parse keeps it). Reads nothing else
    /// into memory.
    pub fn root_type(&self) -> RootType {
        if !self.get().starts_with('{') {
            return RootType::NotAnObject;
        }
        match serde_json::from_str::<TypeMember>(self.get()) {
            Ok(TypeMember(Some(kind))) => RootType::Declared(kind),
            Ok(TypeMember(None)) => RootType::Undeclared,
            Err(_) => RootType::NotAnObject,
        }
    }
}

/// What the root of a JSON text says of its `"type"`.
#[derive(Debug, PartialEq)]
pub enum RootType {
    NotAnObject,
    /// An object without a `"type"` member.
    Undeclared,
    Declared(Value),
}

/// A value read the way a tree parse reads it (every string decoded, every number converted), keeping
/// nothing: `IgnoredAny` alone skips string escapes and numbers unchecked.
struct Strict;

impl<'de> Deserialize<'de> for Strict {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(Strict)
    }
}

/// `Strict` reads itself: each value visited is dropped as soon as it is read.
impl<'de> Visitor<'de> for Strict {
    type Value = Strict;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("any JSON value")
    }
    fn visit_bool<E>(self, _: bool) -> Result<Strict, E> {
        Ok(Strict)
    }
    fn visit_i64<E>(self, _: i64) -> Result<Strict, E> {
        Ok(Strict)
    }
    fn visit_u64<E>(self, _: u64) -> Result<Strict, E> {
        Ok(Strict)
    }
    fn visit_f64<E>(self, _: f64) -> Result<Strict, E> {
        Ok(Strict)
    }
    fn visit_str<E>(self, _: &str) -> Result<Strict, E> {
        Ok(Strict)
    }
    fn visit_unit<E>(self) -> Result<Strict, E> {
        Ok(Strict)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Strict, A::Error> {
        while seq.next_element::<Strict>()?.is_some() {}
        Ok(Strict)
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Strict, A::Error> {
        while map.next_entry::<Strict, Strict>()?.is_some() {}
        Ok(Strict)
    }
}

/// The root object's `"type"`, every other member skipped.
struct TypeMember(Option<Value>);

impl<'de> Deserialize<'de> for TypeMember {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct RootVisitor;
        impl<'de> Visitor<'de> for RootVisitor {
            type Value = TypeMember;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a JSON object")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<TypeMember, A::Error> {
                let mut kind = None;
                while let Some(key) = map.next_key::<Cow<'de, str>>()? {
                    if key == "type" {
                        kind = Some(map.next_value::<Value>()?);
                    } else {
                        map.next_value::<de::IgnoredAny>()?;
                    }
                }
                Ok(TypeMember(kind))
            }
        }
        deserializer.deserialize_map(RootVisitor)
    }
}

/// `json` without whitespace between tokens; borrowed when it has none (a compact server's, most).
fn compact(json: &str) -> Cow<'_, str> {
    let bytes = json.as_bytes();
    let is_space = |b: u8| matches!(b, b' ' | b'\t' | b'\n' | b'\r');
    let mut out: Option<Vec<u8>> = None;
    let mut copied_to = 0;
    let mut at = 0;
    while at < bytes.len() {
        match bytes[at] {
            b'"' => at = super::nesting::end_of_string(bytes, at + 1).unwrap_or(bytes.len()) + 1,
            b if is_space(b) => {
                let kept = out.get_or_insert_with(|| Vec::with_capacity(bytes.len()));
                kept.extend_from_slice(&bytes[copied_to..at]);
                while at < bytes.len() && is_space(bytes[at]) {
                    at += 1;
                }
                copied_to = at;
            }
            _ => at += 1,
        }
    }
    match out {
        None => Cow::Borrowed(json),
        Some(mut kept) => {
            kept.extend_from_slice(&bytes[copied_to..]);
            // Only ASCII whitespace between tokens was removed: the rest is the input's UTF-8, unsplit.
            Cow::Owned(String::from_utf8(kept).expect("cut only at ASCII bytes"))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn checked(text: &str) -> Result<JsonText, serde_json::Error> {
        JsonText::checked(serde_json::from_str::<Box<RawValue>>(text)?)
    }

    #[test]
    fn keeps_the_servers_text_without_whitespace_between_tokens() {
        let text = checked("{ \"type\" : \"object\",\n\t\"properties\": {\"q\": {\"description\": \"a b\\\" c \"}} }")
            .unwrap();
        assert_eq!(text.get(), r#"{"type":"object","properties":{"q":{"description":"a b\" c "}}}"#);
        let compact = r#"{"b":1,"a":[true,null,"x y"]}"#;
        assert_eq!(checked(compact).unwrap().get(), compact, "key order and text kept");
        assert_eq!(checked("  [ 1 , 2 ]  ").unwrap().get(), "[1,2]");
        assert_eq!(checked(r#"{"é ü":"ß  ∑"}"#).unwrap().get(), r#"{"é ü":"ß  ∑"}"#);
    }

    #[test]
    fn refuses_what_a_tree_parse_refuses() {
        for bad in [r#"{"a":"\ud800"}"#, r#"{"\udc00":1}"#, r#"[1e400]"#, r#"{"a":-1e999}"#] {
            assert!(serde_json::from_str::<Value>(bad).is_err(), "{bad}");
            assert!(checked(bad).is_err(), "{bad} passed");
        }
        // A tree parse takes these, so the text is kept.
        for good in [r#"{"a":"\ud83d\ude00"}"#, r#"[18446744073709551616, -9223372036854775809, 1.5e300]"#] {
            assert!(checked(good).is_ok(), "{good}");
        }
        assert!(serde_json::from_str::<JsonText>(r#"{"a":}"#).is_err());
    }

    #[test]
    fn reads_the_roots_type_as_a_parse_would() {
        let root = |text: &str| checked(text).unwrap().root_type();
        assert_eq!(root(r#"{"type":"object"}"#), RootType::Declared(json!("object")));
        assert_eq!(root(r#"{"properties":{"type":"x"}}"#), RootType::Undeclared, "a nested type is not the root's");
        assert_eq!(
            root(r#"{"type":"string","type":"object"}"#),
            RootType::Declared(json!("object")),
            "the last, as a parse keeps"
        );
        assert_eq!(
            root(r#"{"t\u0079pe":["object"]}"#),
            RootType::Declared(json!(["object"])),
            "an escaped key is that key"
        );
        assert_eq!(root(r#"["object"]"#), RootType::NotAnObject);
        assert_eq!(root(r#""object""#), RootType::NotAnObject);
    }

    #[test]
    fn a_tree_and_its_text_agree() {
        let value = json!({ "type": "object", "properties": { "z": {}, "a": { "enum": [1, 2.5, "x"] } } });
        let text = JsonText::from(value.clone());
        assert_eq!(text.tree(), value);
        assert_eq!(serde_json::from_value::<JsonText>(value.clone()).unwrap(), text, "from a tree, its sorted text");
        assert_eq!(serde_json::to_string(&text).unwrap(), text.get());
        let reordered: JsonText =
            serde_json::from_str(r#"{"properties":{"a":{"enum":[1,2.5,"x"]},"z":{}},"type":"object"}"#).unwrap();
        assert_eq!(reordered, text, "the same value, keys in another order");
        assert_ne!(reordered, JsonText::from(json!({ "type": "object" })));
    }
}
