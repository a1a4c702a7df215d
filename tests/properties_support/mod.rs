//! What the property tests (`tests/*.rs`) and the fuzz targets (`fuzz/`) share: drivers that run one
//! engine parser over a byte stream, whole or in pieces, and the invariants every output must keep.
//! The fuzz targets include this file by path, so both check exactly the same properties.
#![allow(dead_code)]

use mcpferry::error::McpError;
use mcpferry::limits::MAX_TOOL_NAME_CHARS;
use mcpferry::projection::{disclosure, naming};
use mcpferry::protocol::json_text::RootType;
use mcpferry::protocol::jsonrpc::{self, Message, RawMessage, RequestId};
use mcpferry::transport::event_stream::{Event, EventStreamError, EventStreamParser};
use mcpferry::transport::stdio::LineReader;
use mcpferry::transport::MessageSink;
use serde_json::Value;
use std::sync::Mutex;

/// Everything a transport reported, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Seen {
    Message(Vec<u8>),
    Failed(RequestId, &'static str),
    Closed(&'static str),
    /// `feed` returned this error; nothing after it is read.
    Fatal(&'static str),
}

/// A sink that accepts what the engine's own classifier accepts, and records everything.
#[derive(Default)]
pub struct RecordingSink {
    seen: Mutex<Vec<Seen>>,
}

impl RecordingSink {
    pub fn take(&self) -> Vec<Seen> {
        std::mem::take(&mut *self.seen.lock().unwrap())
    }
}

impl MessageSink for RecordingSink {
    fn on_message(&self, frame: &[u8]) -> bool {
        let valid = classify(frame).is_some();
        if valid {
            self.seen.lock().unwrap().push(Seen::Message(frame.to_vec()));
        }
        valid
    }
    fn on_request_failed(&self, id: RequestId, error: McpError) {
        self.seen.lock().unwrap().push(Seen::Failed(id, error.code()));
    }
    fn is_pending(&self, _id: RequestId) -> bool {
        true
    }
    fn on_closed(&self, reason: McpError) {
        self.seen.lock().unwrap().push(Seen::Closed(reason.code()));
    }
}

/// A frame as the engine classifies a single message: request, notification or response.
pub fn classify(frame: &[u8]) -> Option<Message<'_>> {
    serde_json::from_slice::<RawMessage>(frame).ok().and_then(RawMessage::classify)
}

/// Cut `data` into pieces whose lengths cycle through `sizes`; a 0 gives an empty piece.
pub fn pieces<'a>(data: &'a [u8], sizes: &[usize]) -> Vec<&'a [u8]> {
    if sizes.iter().all(|&size| size == 0) {
        return vec![data];
    }
    let mut out = Vec::new();
    let mut rest = data;
    for &size in sizes.iter().cycle() {
        if rest.is_empty() {
            break;
        }
        let (head, tail) = rest.split_at(size.min(rest.len()));
        out.push(head);
        rest = tail;
    }
    out
}

/// Feed `chunks` to a fresh LineReader, stopping at the first fatal error as the transport does.
pub fn read_lines(max_message_bytes: usize, chunks: &[&[u8]]) -> Vec<Seen> {
    let sink = RecordingSink::default();
    let mut reader = LineReader::new(max_message_bytes, std::sync::Arc::default());
    let mut seen = Vec::new();
    for chunk in chunks {
        let fed = reader.feed(chunk, &sink);
        seen.extend(sink.take());
        if let Err(error) = fed {
            seen.push(Seen::Fatal(error.code()));
            break;
        }
    }
    seen
}

/// What a stream of SSE bytes parses to: the events, the stream's state, and the first error.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParsedEvents {
    pub events: Vec<Event>,
    pub last_event_id: Option<String>,
    pub retry_ms: Option<u64>,
    pub error: Option<EventStreamError>,
}

/// Feed `chunks` to a fresh parser, stopping at the first error as the transports do.
pub fn parse_events(max_event_bytes: usize, chunks: &[&[u8]]) -> ParsedEvents {
    let mut parser = EventStreamParser::new(max_event_bytes);
    let mut events = Vec::new();
    let mut error = None;
    for chunk in chunks {
        if let Err(e) = parser.feed(chunk, &mut events) {
            error = Some(e);
            break;
        }
    }
    ParsedEvents { events, last_event_id: parser.last_event_id.clone(), retry_ms: parser.retry_ms, error }
}

/// Every event stays within the limit it was parsed under.
pub fn check_events(parsed: &ParsedEvents, max_event_bytes: usize) {
    for event in &parsed.events {
        assert!(
            event.data.len() <= max_event_bytes,
            "an event of {} bytes passed a {max_event_bytes}-byte limit",
            event.data.len()
        );
        assert!(!event.event.is_empty(), "an event without a type");
    }
}

/// Decode a frame the way the connection does, and check the id sniffed from its head agrees.
pub fn check_jsonrpc(frame: &[u8]) {
    let sniffed = jsonrpc::sniff_response_id(frame);
    if let Some(Message::Response { id: Some(id), .. }) = classify(frame) {
        // An oversized copy of this response would fail the call the sniffer names: it must be this one.
        assert!(sniffed.is_none() || sniffed == Some(id), "sniffed {sniffed:?}, parsed {id}");
    }
    if let Ok(items) = serde_json::from_slice::<Vec<&serde_json::value::RawValue>>(frame) {
        for item in items {
            let _ = classify(item.get().as_bytes());
        }
    }
}

/// A projected name is what every model provider accepts.
pub fn check_provider_safe(name: &str) {
    assert!(naming::is_provider_safe(name), "{name:?} is not provider-safe");
    assert!(name.len() <= MAX_TOOL_NAME_CHARS, "{name:?} is {} bytes", name.len());
}

/// Project every tool of one server and check the names are safe and pairwise distinct.
pub fn check_names(label: &str, tools: &[String]) {
    let mut seen = std::collections::HashMap::new();
    for tool in tools {
        let name = naming::project_tool_name(label, tool);
        check_provider_safe(&name);
        if let Some(previous) = seen.insert(name.clone(), tool.clone()) {
            assert_eq!(&previous, tool, "{previous:?} and {tool:?} both project to {name:?}");
        }
    }
}

/// The deferred tier of any schema is valid JSON: an object schema whose `required` names only its
/// properties, each once.
pub fn check_deferred(schema: &Value) {
    let deferred = disclosure::deferred_schema(schema);
    let text = serde_json::to_string(&deferred).expect("a deferred schema serializes");
    let reparsed: Value = serde_json::from_str(&text).expect("a deferred schema is valid JSON");
    assert_eq!(reparsed["type"], "object");
    let properties = reparsed.get("properties").and_then(Value::as_object);
    if let Some(required) = reparsed.get("required") {
        let required = required.as_array().expect("required is an array");
        let mut names = std::collections::HashSet::new();
        for name in required {
            let name = name.as_str().expect("required names are strings");
            assert!(names.insert(name), "{name:?} required twice");
            assert!(properties.is_some_and(|p| p.contains_key(name)), "{name:?} required but not a property");
        }
    }
    let text = mcpferry::projection::JsonText::from(schema.clone());
    assert_eq!(disclosure::schema_for(disclosure::Tier::Full, &text).get(), text.get(), "shown as kept");
    assert_eq!(disclosure::schema_for(disclosure::Tier::Deferred, &text).tree(), deferred);
    assert_eq!(disclosure::schema_for(disclosure::Tier::Bare, &text).get(), r#"{"type":"object"}"#);
    let tool = disclosure::ToolText { name: "t", description: "", input_schema: &text, schema_tokens: None };
    for budget in [0, 10, 1_000_000] {
        // Only the bare tier may exceed the budget: there is nothing left to shed.
        let decision = disclosure::decide(&[tool], budget, false);
        assert!(
            decision.tier == disclosure::Tier::Bare || decision.schema_tokens <= budget,
            "{decision:?} over {budget}"
        );
    }
}

/// A server's JSON text kept as a tool keeps its schemas: accepted exactly when a tree parse accepts it,
/// as the same value, never longer. The kept text, if any.
pub fn check_json_text(text: &str) -> Option<mcpferry::projection::JsonText> {
    let tree = serde_json::from_str::<Value>(text);
    let kept = serde_json::from_str::<Box<serde_json::value::RawValue>>(text)
        .and_then(mcpferry::projection::JsonText::checked);
    match (tree, kept) {
        (Ok(tree), Ok(kept)) => {
            assert_eq!(kept.tree(), tree, "{text:?} kept as {kept:?}");
            assert!(kept.get().len() <= text.len(), "{text:?} kept as {kept:?}");
            // What is read from the text without its tree agrees with the tree.
            let deferred = disclosure::deferred_schema(&tree);
            assert_eq!(disclosure::deferred_schema_of(&kept), deferred, "{text:?}");
            let root = match &tree {
                Value::Object(members) => match members.get("type") {
                    Some(kind) => RootType::Declared(kind.clone()),
                    None => RootType::Undeclared,
                },
                _ => RootType::NotAnObject,
            };
            assert_eq!(kept.root_type(), root, "{text:?}");
            Some(kept)
        }
        (Err(_), Err(_)) => None,
        (tree, kept) => panic!("{text:?}: a tree parse gave {tree:?}, the kept text {kept:?}"),
    }
}
