//! JSON-RPC 2.0 messages. Incoming messages are parsed borrowing from the frame, so a result is
//! forwarded as the raw text the server sent, never re-serialized.

use serde::Deserialize;
use serde_json::value::RawValue;
use std::borrow::Cow;

pub const METHOD_NOT_FOUND: i64 = -32601;
pub const INVALID_PARAMS: i64 = -32602;

/// Our request ids are integers; they double as progress tokens.
pub type RequestId = u64;

#[derive(Debug, Deserialize)]
pub struct ErrorObject<'a> {
    pub code: i64,
    #[serde(default)]
    pub message: String,
    /// Kept as text and never walked: it may nest arbitrarily deep, and nothing here reads it.
    #[serde(borrow, default)]
    pub data: Option<&'a RawValue>,
}

/// Any JSON-RPC message, before it is classified.
#[derive(Debug, Deserialize)]
pub struct RawMessage<'a> {
    #[serde(borrow, default)]
    pub id: Option<&'a RawValue>,
    #[serde(borrow, default)]
    pub method: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    pub params: Option<&'a RawValue>,
    #[serde(borrow, default)]
    pub result: Option<&'a RawValue>,
    #[serde(borrow, default)]
    pub error: Option<ErrorObject<'a>>,
}

pub enum Message<'a> {
    Request { id: &'a RawValue, method: Cow<'a, str>, params: Option<&'a RawValue> },
    Notification { method: Cow<'a, str>, params: Option<&'a RawValue> },
    Response { id: Option<RequestId>, outcome: std::result::Result<&'a RawValue, ErrorObject<'a>> },
}

impl<'a> RawMessage<'a> {
    pub fn classify(self) -> Option<Message<'a>> {
        match (self.method, self.id) {
            (Some(method), Some(id)) => Some(Message::Request { id, method, params: self.params }),
            (Some(method), None) => Some(Message::Notification { method, params: self.params }),
            (None, id) => {
                let id = id.and_then(parse_request_id);
                let outcome = match (self.result, self.error) {
                    (_, Some(error)) => Err(error),
                    (Some(result), None) => Ok(result),
                    (None, None) => return None,
                };
                Some(Message::Response { id, outcome })
            }
        }
    }
}

/// Our ids go out as numbers; accept a server that echoes them back as strings.
pub fn parse_request_id(raw: &RawValue) -> Option<RequestId> {
    let text = raw.get();
    let digits = text.strip_prefix('"').and_then(|t| t.strip_suffix('"')).unwrap_or(text);
    digits.parse().ok()
}

/// Whether the id of a server's request may be echoed in our answer: a string or number of bounded size,
/// as JSON-RPC requires. Anything else (an object, a megabyte of text) is not answered at all.
pub fn is_echoable_id(id: &RawValue) -> bool {
    let text = id.get();
    text.len() <= crate::limits::MAX_ECHOED_REQUEST_ID_BYTES
        && text.bytes().next().is_some_and(|b| b == b'"' || b == b'-' || b.is_ascii_digit())
}

/// Serialize a request. `params` must already be valid JSON.
pub fn request(id: RequestId, method: &str, params: Option<&str>) -> String {
    let mut out = String::with_capacity(64 + method.len() + params.map_or(0, str::len));
    out.push_str("{\"jsonrpc\":\"2.0\",\"id\":");
    out.push_str(itoa(id).as_str());
    out.push_str(",\"method\":");
    push_json_string(&mut out, method);
    if let Some(params) = params {
        out.push_str(",\"params\":");
        out.push_str(params);
    }
    out.push('}');
    out
}

pub fn notification(method: &str, params: Option<&str>) -> String {
    let mut out = String::with_capacity(48 + method.len() + params.map_or(0, str::len));
    out.push_str("{\"jsonrpc\":\"2.0\",\"method\":");
    push_json_string(&mut out, method);
    if let Some(params) = params {
        out.push_str(",\"params\":");
        out.push_str(params);
    }
    out.push('}');
    out
}

/// A response to a server-initiated request; `id` is echoed exactly as the server sent it.
pub fn result_response(id: &RawValue, result: &str) -> String {
    format!("{{\"jsonrpc\":\"2.0\",\"id\":{},\"result\":{}}}", id.get(), result)
}

pub fn error_response(id: &RawValue, code: i64, message: &str) -> String {
    let mut out = format!("{{\"jsonrpc\":\"2.0\",\"id\":{},\"error\":{{\"code\":{code},\"message\":", id.get());
    push_json_string(&mut out, message);
    out.push_str("}}");
    out
}

pub fn push_json_string(out: &mut String, value: &str) {
    // serde_json's escaping is the reference; writing into a String cannot fail.
    out.push_str(&serde_json::to_string(value).expect("a str always serializes"));
}

fn itoa(n: u64) -> String {
    n.to_string()
}

/// Find the top-level `"id"` of a message from its first bytes only, so an oversized response can still
/// fail the one call it answers. Walks strings and nesting; stops at the end of the kept head.
pub fn sniff_response_id(head: &[u8]) -> Option<RequestId> {
    sniff_head(head).id
}

/// What the kept head or tail of a message too large to read shows of its top-level members.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Sniffed {
    /// Its numeric `"id"`, if seen whole.
    pub id: Option<RequestId>,
    /// It has a top-level `"method"`: a request or notification, which no call of ours waits on.
    pub names_method: bool,
}

/// [`sniff_response_id`], also telling whether a top-level `"method"` key was seen.
pub fn sniff_head(head: &[u8]) -> Sniffed {
    let mut sniffed = Sniffed::default();
    let mut depth = 0usize;
    let mut i = 0;
    let mut key_at_depth_one: Option<(usize, usize)> = None;
    while i < head.len() {
        match head[i] {
            b'"' => {
                let start = i + 1;
                i += 1;
                while i < head.len() && head[i] != b'"' {
                    i += if head[i] == b'\\' { 2 } else { 1 };
                }
                let end = i.min(head.len());
                if depth == 1 {
                    let mut j = i + 1;
                    while j < head.len() && head[j].is_ascii_whitespace() {
                        j += 1;
                    }
                    if j < head.len() && head[j] == b':' {
                        sniffed.names_method |= &head[start..end] == b"method";
                        key_at_depth_one = Some((start, end));
                        i = j;
                    }
                }
            }
            b'{' | b'[' => depth += 1,
            b'}' | b']' => depth = depth.saturating_sub(1),
            b':' if depth == 1 => {}
            c if depth == 1 && (c.is_ascii_digit() || c == b'-') => {
                if let Some((s, e)) = key_at_depth_one.take() {
                    if &head[s..e] == b"id" {
                        let digits: Vec<u8> = head[i..].iter().copied().take_while(u8::is_ascii_digit).collect();
                        // A number cut by the end of the head may be the prefix of another id: only
                        // one that visibly ends counts.
                        if i + digits.len() < head.len() {
                            sniffed.id = std::str::from_utf8(&digits).ok().and_then(|d| d.parse().ok());
                        }
                        return sniffed;
                    }
                }
            }
            _ => {}
        }
        i += 1;
    }
    sniffed
}

/// The top-level members at the end of a message, read backwards from its last bytes: a TypeScript-SDK
/// server writes `{"result":…,"jsonrpc":"2.0","id":7}`, its id after the result. Walks back over members
/// whose values are strings, numbers or literals, from the closing brace, and stops at the first other
/// value (the result itself) or where the kept bytes begin. Read from the true end of a well-formed
/// message the walk is exact: a member found is a top-level member, whatever text the result holds.
pub fn sniff_tail(tail: &[u8]) -> Sniffed {
    let mut sniffed = Sniffed::default();
    let mut i = trim_back(tail, tail.len());
    if i == 0 || tail[i - 1] != b'}' {
        return sniffed;
    }
    i -= 1;
    loop {
        i = trim_back(tail, i);
        let Some(value) = scalar_back(tail, i) else { return sniffed };
        i = trim_back(tail, value.start);
        if i == 0 || tail[i - 1] != b':' {
            return sniffed;
        }
        i = trim_back(tail, i - 1);
        let Some(key) = string_back(tail, i) else { return sniffed };
        match &tail[key.start + 1..key.end - 1] {
            b"id" if tail[value.clone()].iter().all(u8::is_ascii_digit) => {
                sniffed.id = std::str::from_utf8(&tail[value]).ok().and_then(|d| d.parse().ok());
            }
            b"method" => sniffed.names_method = true,
            _ => {}
        }
        i = trim_back(tail, key.start);
        if i == 0 || tail[i - 1] != b',' {
            return sniffed;
        }
        i -= 1;
    }
}

/// Where the text before `end` stops being whitespace.
fn trim_back(bytes: &[u8], mut end: usize) -> usize {
    while end > 0 && bytes[end - 1].is_ascii_whitespace() {
        end -= 1;
    }
    end
}

/// The string, number or literal that ends at `end`, read backwards.
fn scalar_back(bytes: &[u8], end: usize) -> Option<std::ops::Range<usize>> {
    if end > 0 && bytes[end - 1] == b'"' {
        return string_back(bytes, end);
    }
    let start = bytes[..end]
        .iter()
        .rposition(|b| !(b.is_ascii_alphanumeric() || matches!(b, b'-' | b'+' | b'.')))
        .map_or(0, |p| p + 1);
    // A token that reaches back to where the kept bytes begin may be cut: not known whole.
    (start < end && start > 0).then_some(start..end)
}

/// The JSON string (quotes included) that ends at `end`: its opening quote is the first one before it
/// not escaped by an odd run of backslashes.
fn string_back(bytes: &[u8], end: usize) -> Option<std::ops::Range<usize>> {
    if end == 0 || bytes[end - 1] != b'"' {
        return None;
    }
    let mut j = end - 1;
    while j > 0 {
        j -= 1;
        if bytes[j] == b'"' {
            let backslashes = bytes[..j].iter().rev().take_while(|b| **b == b'\\').count();
            if backslashes % 2 == 0 {
                // An opening quote at the very start of the kept bytes may belong to a cut string.
                return (j > 0).then_some(j..end);
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sniffs_the_top_level_id_only() {
        assert_eq!(sniff_response_id(br#"{"jsonrpc":"2.0","id":42,"result":{"content":[{"#), Some(42));
        assert_eq!(sniff_response_id(br#"{"result":{"id":7,"x":"\"id\":9"},"id": 12,"#), Some(12));
        assert_eq!(sniff_response_id(br#"{"result":{"id":7,"text":"aaaa"#), None);
        assert_eq!(sniff_response_id(br#"{"jsonrpc":"2.0","id":"5","#), None);
    }

    #[test]
    fn sniffs_the_top_level_members_at_the_end() {
        let ts_sdk = br#"xxxxxx"}]},"jsonrpc":"2.0","id":42}"#;
        assert_eq!(sniff_tail(ts_sdk), Sniffed { id: Some(42), names_method: false });
        assert_eq!(sniff_tail(b"aa\"}]},\"id\" : 7 , \"jsonrpc\":\"2.0\" }\r\n").id, Some(7));
        // A result whose text looks like the members: read from the true end, it is the text.
        assert_eq!(sniff_tail(br#"x","id":9}"}]}}"#).id, None);
        assert_eq!(sniff_tail(br#"a\",\"id\":9}"}]},"id":3}"#).id, Some(3));
        assert_eq!(sniff_tail(br#"x"},"id":5,"s":"q\"z"}"#).id, Some(5), "an escaped quote inside a string");
        assert_eq!(
            sniff_tail(br#"x"},"id":5,"s":"q\\"}"#).id,
            Some(5),
            "an escaped backslash before the closing quote"
        );
        assert!(sniff_tail(br#"]},"method":"notifications/message","jsonrpc":"2.0"}"#).names_method);
        // Cut where the kept bytes begin: not trusted.
        assert_eq!(sniff_tail(br#"12}"#).id, None);
        assert_eq!(sniff_tail(br#""id":12}"#).id, None);
        assert_eq!(sniff_tail(br#","id":"12"}"#).id, None, "a string id is never ours");
        assert_eq!(sniff_tail(br#"],"id":-1}"#).id, None);
        assert_eq!(sniff_tail(b"no brace").id, None);
        assert!(sniff_head(br#"{"method":"notifications/message","params":{"data":"xx"#).names_method);
    }

    fn parse(text: &str) -> Message<'_> {
        serde_json::from_str::<RawMessage>(text).unwrap().classify().unwrap()
    }

    #[test]
    fn classifies_the_four_shapes() {
        assert!(matches!(parse(r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#), Message::Request { .. }));
        assert!(matches!(
            parse(r#"{"jsonrpc":"2.0","method":"notifications/progress","params":{}}"#),
            Message::Notification { .. }
        ));
        match parse(r#"{"jsonrpc":"2.0","id":7,"result":{"a":[1, 2]}}"#) {
            Message::Response { id: Some(7), outcome: Ok(raw) } => assert_eq!(raw.get(), r#"{"a":[1, 2]}"#),
            _ => panic!("not a result"),
        }
        match parse(r#"{"jsonrpc":"2.0","id":"8","error":{"code":-32601,"message":"nope"}}"#) {
            Message::Response { id: Some(8), outcome: Err(e) } => assert_eq!(e.code, -32601),
            _ => panic!("not an error"),
        }
        match parse(r#"{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"parse"}}"#) {
            Message::Response { id: None, outcome: Err(_) } => {}
            _ => panic!("null id error"),
        }
    }

    #[test]
    fn error_data_is_never_walked() {
        let deep = "[".repeat(5_000) + &"]".repeat(5_000);
        let text = format!(r#"{{"jsonrpc":"2.0","id":4,"error":{{"code":-1,"message":"deep","data":{deep}}}}}"#);
        match parse(&text) {
            Message::Response { id: Some(4), outcome: Err(e) } => {
                assert_eq!((e.code, e.message.as_str()), (-1, "deep"));
                assert_eq!(e.data.map(|d| d.get().len()), Some(deep.len()));
            }
            _ => panic!("not an error"),
        }
    }

    #[test]
    fn only_small_scalar_ids_are_echoed() {
        let id = |text: &str| -> bool { is_echoable_id(serde_json::from_str::<&RawValue>(text).unwrap()) };
        assert!(id("7") && id("-1") && id(r#""abc""#));
        assert!(!id("null") && !id("{}") && !id("[1]") && !id("true"));
        assert!(!id(&format!("\"{}\"", "x".repeat(crate::limits::MAX_ECHOED_REQUEST_ID_BYTES))));
    }

    #[test]
    fn serializes_requests_that_parse_back() {
        let text = request(3, "tools/call", Some(r#"{"name":"a\"b"}"#));
        let v: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(v["id"], 3);
        assert_eq!(v["params"]["name"], "a\"b");
        let n = notification("notifications/cancelled", Some(r#"{"requestId":3}"#));
        let v: serde_json::Value = serde_json::from_str(&n).unwrap();
        assert!(v.get("id").is_none());
        let raw: &RawValue = serde_json::from_str("\"abc\"").unwrap();
        let e = error_response(raw, METHOD_NOT_FOUND, "no \"such\" method");
        let v: serde_json::Value = serde_json::from_str(&e).unwrap();
        assert_eq!(v["id"], "abc");
        assert_eq!(v["error"]["code"], -32601);
    }
}
