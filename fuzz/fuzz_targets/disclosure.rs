//! Schema projection: any JSON a server sends as an input schema projects, at every tier, to valid
//! JSON without panicking; the deferred tier requires only its own properties, each once. And any text is
//! kept as a tool keeps its schemas exactly when a tree parse accepts it, as the same value.
#![no_main]

#[path = "../../tests/properties_support/mod.rs"]
mod support;

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data) {
        support::check_json_text(text);
    }
    if let Ok(schema) = serde_json::from_slice::<serde_json::Value>(data) {
        support::check_deferred(&schema);
    }
});
