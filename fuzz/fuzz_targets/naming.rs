//! Naming: whatever a server calls its tools, every projected name is provider-safe, at most 64
//! characters, and distinct tools never share one.
#![no_main]

#[path = "../../tests/properties_support/mod.rs"]
mod support;

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    // Lines of lossy UTF-8: the first is the server label, the rest its tool names.
    let text = String::from_utf8_lossy(data);
    let mut lines = text.split('\n');
    let label = lines.next().unwrap_or_default();
    let label = if mcpferry::projection::naming::is_provider_safe(label) { label } else { "srv" };
    let mut tools: Vec<String> = lines.map(str::to_owned).collect();
    tools.sort();
    tools.dedup();
    support::check_names(label, &tools);
    let labels = mcpferry::projection::naming::server_labels(&[(label, text.to_string()), (label, String::new())]);
    assert_ne!(labels[0], labels[1]);
});
