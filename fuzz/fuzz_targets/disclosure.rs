//! Schema projection: any JSON a server sends as an input schema projects, at every tier, to valid
//! JSON without panicking; the deferred tier requires only its own properties, each once.
#![no_main]

#[path = "../../tests/properties_support/mod.rs"]
mod support;

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(schema) = serde_json::from_slice::<serde_json::Value>(data) {
        support::check_deferred(&schema);
    }
});
