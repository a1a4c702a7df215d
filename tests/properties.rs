//! Property tests of the engine's parsers and pure projections (issue 10, "fuzzing ... plus
//! property-based tests"). Each property runs a few thousand generated cases; the fuzz targets in
//! `fuzz/` check the same invariants (from `properties_support/`) on coverage-guided inputs.

#[path = "properties_support/mod.rs"]
mod support;

use proptest::prelude::*;
use serde_json::{json, Value};
use support::*;

/// Cases per property: "a few thousand", kept cheap enough for a debug `cargo test`.
const CASES: u32 = 3000;
/// Inputs that are split at every single byte boundary cost one run per byte: fewer of them.
const EXHAUSTIVE_CASES: u32 = 300;

fn config(cases: u32) -> ProptestConfig {
    ProptestConfig { cases, failure_persistence: None, ..ProptestConfig::default() }
}

/// One line a stdio server might write: a response (sometimes over the limit), a notification,
/// garbage, blank or CRLF-terminated lines, a batch.
fn stdio_line() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        (0u64..20, 0usize..300).prop_map(|(id, len)| format!(
            r#"{{"jsonrpc":"2.0","id":{id},"result":{{"t":"{}"}}}}"#,
            "x".repeat(len)
        )
        .into_bytes()),
        (0usize..100).prop_map(|len| format!(
            r#"{{"jsonrpc":"2.0","method":"notifications/message","params":{{"d":"{}"}}}}"#,
            "n".repeat(len)
        )
        .into_bytes()),
        (0u64..20).prop_map(|id| format!(r#"{{"jsonrpc":"2.0","id":{id},"result":{{}}}}"#).into_bytes()).prop_map(
            |mut l| {
                l.push(b'\r');
                l
            }
        ),
        Just(b"[{\"jsonrpc\":\"2.0\",\"method\":\"a\"},{\"jsonrpc\":\"2.0\",\"id\":3,\"result\":1}]".to_vec()),
        Just(Vec::new()),
        Just(b"   ".to_vec()),
        prop::collection::vec(any::<u8>().prop_filter("no newline", |b| *b != b'\n'), 0..40),
    ]
}

/// A stdio byte stream: lines joined by newlines, maybe ending inside a line.
fn stdio_stream() -> impl Strategy<Value = Vec<u8>> {
    (prop::collection::vec(stdio_line(), 0..12), any::<bool>()).prop_map(|(lines, ends_in_newline)| {
        let mut stream = lines.join(&b'\n');
        if ends_in_newline {
            stream.push(b'\n');
        }
        stream
    })
}

/// One line of an event stream, with one of the three line endings.
fn sse_stream() -> impl Strategy<Value = Vec<u8>> {
    let field = prop_oneof![
        "[a-z{}\":0-9 ]{0,40}".prop_map(|v| format!("data: {v}")),
        "[a-z{}\":0-9 ]{0,40}".prop_map(|v| format!("data:{v}")),
        Just("data".to_owned()),
        "[a-z]{0,8}".prop_map(|v| format!("event: {v}")),
        "[a-z0-9-]{0,8}".prop_map(|v| format!("id: {v}")),
        "[0-9]{0,6}".prop_map(|v| format!("retry: {v}")),
        "[a-z ]{0,20}".prop_map(|v| format!(":{v}")),
        Just(String::new()),
        "[a-z:]{1,10}".prop_map(|v| v),
    ];
    let ending = prop_oneof![Just("\n"), Just("\r"), Just("\r\n")];
    prop::collection::vec((field, ending), 0..24).prop_map(|lines| {
        lines.into_iter().flat_map(|(field, ending)| format!("{field}{ending}").into_bytes()).collect()
    })
}

/// Any JSON value, nested up to a few levels.
fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        any::<f64>().prop_filter("JSON has no NaN or infinity", |f| f.is_finite()).prop_map(Value::from),
        "[a-z]{0,6}".prop_map(Value::from),
        "[ a\"\\\\\n\té😀]{0,8}".prop_map(Value::from),
        prop::sample::select(vec!["object", "string", "number", "integer", "boolean", "array", "null", "bogus"])
            .prop_map(Value::from),
    ];
    leaf.prop_recursive(4, 48, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Value::from),
            prop::collection::btree_map(
                prop::sample::select(vec!["type", "properties", "required", "items", "$ref", "a", "b"])
                    .prop_map(str::to_owned),
                inner,
                0..6
            )
            .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

/// Something shaped like an input schema, with the oddities servers really send.
fn schema() -> impl Strategy<Value = Value> {
    let names = prop::collection::vec("[a-c]{1,2}", 0..8);
    (names.clone(), names, prop::collection::vec(json_value(), 0..8), json_value()).prop_map(|(props, required, bodies, extra)| {
        let properties: serde_json::Map<String, Value> = props.into_iter().zip(bodies).collect();
        let mut required: Vec<Value> = required.into_iter().map(Value::from).collect();
        required.push(json!(42));
        json!({ "type": "object", "properties": properties, "required": required, "$defs": { "x": { "$ref": "#" } }, "extra": extra })
    })
}

proptest! {
    #![proptest_config(config(CASES))]

    #[test]
    fn line_reader_reads_any_split_the_same_as_the_whole(
        stream in stdio_stream(),
        max in 16usize..400,
        sizes in prop::collection::vec(0usize..64, 1..6),
    ) {
        let whole = read_lines(max, &[&stream]);
        let split = read_lines(max, &pieces(&stream, &sizes));
        prop_assert_eq!(&split, &whole);
        for seen in &whole {
            if let Seen::Message(frame) = seen {
                prop_assert!(frame.len() <= max, "a {}-byte message passed a {}-byte limit", frame.len(), max);
            }
        }
    }

    #[test]
    fn event_stream_parses_any_chunking_the_same_as_the_whole(
        stream in sse_stream(),
        max in 8usize..300,
        sizes in prop::collection::vec(1usize..32, 1..6),
    ) {
        let whole = parse_events(max, &[&stream]);
        check_events(&whole, max);
        prop_assert_eq!(parse_events(max, &pieces(&stream, &sizes)), whole);
    }

    #[test]
    fn event_stream_ignores_empty_chunks(
        stream in sse_stream(),
        sizes in prop::collection::vec(0usize..16, 1..6),
    ) {
        // A body stream may yield an empty chunk (an empty HTTP/2 DATA frame); it carries no bytes.
        let whole = parse_events(1 << 16, &[&stream]);
        prop_assert_eq!(parse_events(1 << 16, &pieces(&stream, &sizes)), whole);
    }

    #[test]
    fn jsonrpc_decoding_and_id_sniffing_agree(frame in prop_oneof![
        stdio_line(),
        (json_value(), json_value()).prop_map(|(id, result)| serde_json::to_vec(&json!({ "jsonrpc": "2.0", "id": id, "result": result })).unwrap()),
        (0u64..u64::MAX, json_value()).prop_map(|(id, data)| serde_json::to_vec(&json!({ "error": { "code": 1, "data": data }, "id": id })).unwrap()),
    ]) {
        check_jsonrpc(&frame);
    }

    #[test]
    fn projected_names_are_provider_safe_and_unique(
        label in "[a-zA-Z0-9_-]{1,40}",
        tools in prop::collection::hash_set(prop_oneof![
            ".{0,80}",
            "[a-z._ /-]{1,12}",
            "[a-z_]{60,70}",
        ], 1..24),
    ) {
        check_names(&label, &tools.into_iter().collect::<Vec<_>>());
    }

    #[test]
    fn deferred_projection_of_any_schema_is_valid_json(schema in prop_oneof![schema(), json_value()]) {
        check_deferred(&schema);
    }

    #[test]
    fn the_token_estimate_counts_utf16_units(text in any::<String>()) {
        let units: usize = text.chars().map(char::len_utf16).sum();
        prop_assert_eq!(mcpferry::projection::disclosure::estimate_tokens(&text), units.div_ceil(4));
    }

    #[test]
    fn a_schema_kept_as_text_is_the_value_a_parse_gives(
        value in prop_oneof![schema(), json_value()],
        pretty in any::<bool>(),
        cut in any::<prop::sample::Index>(),
    ) {
        let text = if pretty { serde_json::to_string_pretty(&value).unwrap() } else { value.to_string() };
        // Its keys sorted, the value's compact text is the one kept.
        prop_assert_eq!(check_json_text(&text).map(|kept| kept.get().to_owned()), Some(value.to_string()));
        // Keys written with escapes, and members repeated (the last counts): read the same by every reader.
        check_json_text(&text.replace("\"type\"", "\"t\\u0079pe\"").replace("\"properties\"", "\"pr\\u006fperties\""));
        check_json_text(&text.replace('{', "{\"type\":\"bogus\",\"properties\":[],\"required\":7,"));
        check_json_text(&text.replace(':', ": ").replace('[', "[\n\t"));
        // Any prefix is malformed or another value: either way both readers agree.
        let mut at = cut.index(text.len() + 1);
        while !text.is_char_boundary(at) {
            at -= 1;
        }
        check_json_text(&text[..at]);
    }
}

proptest! {
    #![proptest_config(config(EXHAUSTIVE_CASES))]

    #[test]
    fn line_reader_reads_every_two_way_split_the_same_as_the_whole(stream in stdio_stream(), max in 16usize..400) {
        let whole = read_lines(max, &[&stream]);
        for at in 0..=stream.len() {
            prop_assert_eq!(&read_lines(max, &[&stream[..at], &stream[at..]]), &whole, "split at {}", at);
        }
    }

    #[test]
    fn event_stream_parses_every_two_way_split_the_same_as_the_whole(stream in sse_stream(), max in 8usize..300) {
        let whole = parse_events(max, &[&stream]);
        for at in 1..stream.len() {
            prop_assert_eq!(&parse_events(max, &[&stream[..at], &stream[at..]]), &whole, "split at {}", at);
        }
    }
}

/// Required names in the schema below: enough that a quadratic `required` check takes many seconds.
const HUGE_REQUIRED_NAMES: usize = 20_000;

#[test]
fn a_huge_required_list_projects_in_linear_time() {
    // Issue 10, defect 6: the deferred tier of a schema with very many required properties must be cheap.
    let names: Vec<String> = (0..HUGE_REQUIRED_NAMES).map(|i| format!("p{i}")).collect();
    let properties: serde_json::Map<String, Value> =
        names.iter().map(|n| (n.clone(), json!({ "type": "string" }))).collect();
    let schema = json!({ "type": "object", "properties": properties, "required": names });
    let started = std::time::Instant::now();
    let deferred = mcpferry::projection::disclosure::deferred_schema(&schema);
    let took = started.elapsed();
    assert_eq!(deferred["required"].as_array().map(Vec::len), Some(HUGE_REQUIRED_NAMES));
    assert!(
        took < std::time::Duration::from_secs(1),
        "deferred projection of {HUGE_REQUIRED_NAMES} required names took {took:?}"
    );
}
