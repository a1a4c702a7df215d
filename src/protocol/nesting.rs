//! How deeply JSON text nests, measured by scanning its bytes: no parsing, no recursion, no allocation.
//!
//! A nesting bomb (`[[[[…` a million deep) is valid JSON that breaks whatever walks it recursively:
//! serde_json's typed parsers stop at 128 levels, a `Drop` of a deep `Value` can overflow the stack, and
//! an agent's `JSON.stringify` throws. Checking the depth first lets the engine refuse exactly the one
//! value (a tool result, a tool definition) instead of failing a whole message or crashing.

/// Whether `json` nests arrays and objects more than `max_depth` levels deep (`{}` is one level).
///
/// Counts `[` and `{` outside strings; string contents are skipped with `memchr`, so text-heavy results
/// (the common case) cost about as much as a `memchr` over them. Malformed text is not diagnosed here:
/// brackets are counted as they come, and an unterminated string ends the scan.
pub fn exceeds_depth(json: &[u8], max_depth: usize) -> bool {
    let mut depth = 0usize;
    let mut at = 0;
    while let Some(&byte) = json.get(at) {
        match byte {
            b'"' => match end_of_string(json, at + 1) {
                Some(closing_quote) => at = closing_quote,
                None => return false,
            },
            b'[' | b'{' => {
                depth += 1;
                if depth > max_depth {
                    return true;
                }
            }
            b']' | b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
        at += 1;
    }
    false
}

/// The index of the quote that closes a string whose contents start at `from`.
pub(crate) fn end_of_string(json: &[u8], mut from: usize) -> Option<usize> {
    loop {
        let found = from + memchr::memchr2(b'"', b'\\', json.get(from..)?)?;
        if json[found] == b'"' {
            return Some(found);
        }
        // An escape: the next byte is escaped, whatever it is (`\"`, `\\`, `\u…`).
        from = found + 2;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn depth_is(json: &str, depth: usize) {
        assert!(!exceeds_depth(json.as_bytes(), depth), "{json} is not deeper than {depth}");
        if depth > 0 {
            assert!(exceeds_depth(json.as_bytes(), depth - 1), "{json} is deeper than {}", depth - 1);
        }
    }

    #[test]
    fn counts_arrays_and_objects_outside_strings() {
        depth_is("5", 0);
        depth_is(r#""[[[{{{""#, 0);
        depth_is("{}", 1);
        depth_is("[1,[2],{}]", 2);
        depth_is(r#"{"a":{"b":[{"c":"]]]}}}"}]}}"#, 4);
        depth_is(r#"{"a":"\"[[[","b":["\\",[["x\\\"]"]]]}"#, 4);
        depth_is(r#"[{"k\u005b":"\u005d"}]"#, 2);
        // Siblings do not add up: depth is the deepest point, not a count of brackets.
        depth_is(&"[[]]".repeat(1000), 2);
    }

    #[test]
    fn a_nesting_bomb_is_caught_without_recursion() {
        let bomb = "[".repeat(1_000_000) + &"]".repeat(1_000_000);
        assert!(exceeds_depth(bomb.as_bytes(), 100));
        let object_bomb = r#"{"a":"#.repeat(200_000);
        assert!(exceeds_depth(object_bomb.as_bytes(), 100), "unterminated still counts");
        let inside_a_string = format!("\"{}\"", "[".repeat(1_000_000));
        assert!(!exceeds_depth(inside_a_string.as_bytes(), 1));
    }

    #[test]
    fn malformed_text_ends_the_scan_safely() {
        assert!(!exceeds_depth(br#"{"a":"unterminated"#, 5));
        assert!(!exceeds_depth(br#"["\"#, 5));
        assert!(!exceeds_depth(b"]]]]}}}", 0));
        assert!(!exceeds_depth(b"", 0));
        assert!(!exceeds_depth(&[b'[', 0xff, 0xfe, b']'], 1));
    }
}
