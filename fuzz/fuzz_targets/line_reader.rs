//! The stdio line framer: any byte stream, read whole or cut into pieces, gives the same messages,
//! refusals and fatal error, and no message over the limit gets through.
#![no_main]

#[path = "../../tests/support/mod.rs"]
mod support;

use libfuzzer_sys::fuzz_target;
use support::{pieces, read_lines, Seen};

fuzz_target!(|data: &[u8]| {
    // Two control bytes: the message limit, and the piece sizes; the rest is the stream.
    let [limit, cut, stream @ ..] = data else { return };
    let max = usize::from(*limit) * 4 + 1;
    let sizes = [usize::from(cut & 0x0f), usize::from(cut >> 4) + 1];
    let whole = read_lines(max, &[stream]);
    for seen in &whole {
        if let Seen::Message(frame) = seen {
            assert!(frame.len() <= max);
        }
    }
    assert_eq!(read_lines(max, &pieces(stream, &sizes)), whole);
});
