//! JSON-RPC decoding: any frame is classified without panicking, and the id sniffed from a frame's
//! head (used to fail the call an oversized response answered) never names a different call.
#![no_main]

#[path = "../../tests/properties_support/mod.rs"]
mod support;

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    support::check_jsonrpc(data);
});
