//! The stdio line framer: any byte stream, read whole or cut into pieces, gives the same messages,
//! refusals and fatal error, and no message over the limit gets through.
//!
//! Limits start above the 4 KiB head an oversized line keeps, as every real limit does (the default is
//! 2 MiB), so run bench/fuzz.sh with a max_len well over 4 KiB for this target. Smaller limits are
//! covered by tests/properties.rs, which shows how they differ today.
#![no_main]

#[path = "../../tests/properties_support/mod.rs"]
mod support;

use libfuzzer_sys::fuzz_target;
use support::{pieces, read_lines, Seen};

/// Above the head an oversized line keeps (`OVERSIZED_HEAD_BYTES` in transport/stdio/mod.rs).
const SMALLEST_LIMIT_BYTES: usize = 4097;

fuzz_target!(|data: &[u8]| {
    // Two control bytes: the message limit, and the piece sizes; the rest is the stream.
    let [limit, cut, stream @ ..] = data else { return };
    let max = SMALLEST_LIMIT_BYTES + usize::from(*limit) * 16;
    let sizes = [usize::from(cut & 0x0f) * 97, usize::from(cut >> 4) * 509 + 1];
    let whole = read_lines(max, &[stream]);
    for seen in &whole {
        if let Seen::Message(frame) = seen {
            assert!(frame.len() <= max);
        }
    }
    assert_eq!(read_lines(max, &pieces(stream, &sizes)), whole);
});
