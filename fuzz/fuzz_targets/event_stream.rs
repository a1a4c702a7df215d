//! The SSE parser: any byte stream, parsed whole or cut into pieces, gives the same events, stream
//! state and error, and no event over the limit gets through.
#![no_main]

#[path = "../../tests/properties_support/mod.rs"]
mod support;

use libfuzzer_sys::fuzz_target;
use support::{check_events, parse_events, pieces};

fuzz_target!(|data: &[u8]| {
    let [limit, cut, stream @ ..] = data else { return };
    let max = usize::from(*limit) * 8 + 1;
    let sizes = [usize::from(cut & 0x0f) + 1, usize::from(cut >> 4) + 1];
    let whole = parse_events(max, &[stream]);
    check_events(&whole, max);
    assert_eq!(parse_events(max, &pieces(stream, &sizes)), whole);
});
