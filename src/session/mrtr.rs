//! Multi round-trip requests (MCP 2026-07-28, `basic/patterns/mrtr`): a server may answer `tools/call`,
//! `prompts/get` or `resources/read` with `{"resultType": "input_required", "inputRequests"?, "requestState"?}`
//! instead of the result. The client fulfils the input requests (elicitation through the host, exactly as
//! for a server's `elicitation/create`), then sends the original request again under a new id, with
//! `inputResponses` under the same keys and `requestState` echoed byte for byte; the server may ask again,
//! up to `MAX_INPUT_ROUNDS` times. This module is that exchange without I/O: reading such a result
//! ([`input_required`]), answering its requests ([`fulfil`]) and the retry's params ([`retry_params`]).
//! The connection sends and counts the rounds.
//!
//! The input requests are third-party text: they go to the host's callback and nowhere else, and the
//! errors built here name only what kind of input was asked for, never the server's words.

use crate::error::McpError;
use crate::limits::{MAX_INPUT_KEY_BYTES, MAX_INPUT_REQUESTS_PER_ROUND, MAX_INPUT_ROUNDS, MAX_REQUEST_STATE_BYTES};
use crate::protocol::jsonrpc::push_json_string;
use crate::session::elicitation::{self, Elicitor};
use serde::de::{Deserializer, MapAccess, Visitor};
use serde::Deserialize;
use serde_json::value::RawValue;
use std::borrow::Cow;
use std::fmt;
use std::marker::PhantomData;

/// A result that needs input before its request can complete.
#[derive(Debug)]
pub struct InputRequired {
    /// The server's input requests under its keys, in the server's order.
    pub requests: Vec<(String, InputRequest)>,
    /// The server's `requestState` exactly as it was sent (a JSON string, quotes and escapes included):
    /// echoed in the retry byte for byte, never decoded or re-encoded.
    pub request_state: Option<Box<RawValue>>,
}

/// One of the server's input requests, by method.
#[derive(Debug)]
pub enum InputRequest {
    /// `elicitation/create` with its params, read when it is fulfilled (that needs the host's modes).
    Elicitation(Option<Box<RawValue>>),
    /// `sampling/createMessage`: mcpferry declares no sampling capability.
    Sampling,
    /// `roots/list`: mcpferry declares no roots capability.
    Roots,
    /// A method this client does not know (not kept: it is the server's text).
    Unknown,
}

/// The members of a result that say whether it is complete.
#[derive(Deserialize)]
struct Envelope<'a> {
    #[serde(rename = "resultType", borrow, default)]
    result_type: Option<Cow<'a, str>>,
    #[serde(rename = "inputRequests", borrow, default)]
    input_requests: Option<&'a RawValue>,
    #[serde(rename = "requestState", borrow, default)]
    request_state: Option<&'a RawValue>,
}

/// One entry of `inputRequests`: `{method, params}`.
#[derive(Deserialize)]
struct Entry {
    method: String,
    #[serde(default)]
    params: Option<Box<RawValue>>,
}

/// Whether a request's result asks for input: `Ok(None)` when it is complete (`resultType` absent, as
/// from every server before 2026-07-28, or `"complete"`), `Ok(Some)` for `input_required`, and
/// `Err(McpError::Protocol)` for one that cannot be fulfilled as sent (malformed, over the limits, or a
/// result type this client does not know). A result that never mentions `"resultType"` costs one
/// substring search; one that spells the key with escapes is not looked into and counts as complete
/// (never retried: the safe reading).
pub fn input_required(result: &RawValue) -> Result<Option<InputRequired>, McpError> {
    if memchr::memmem::find(result.get().as_bytes(), br#""resultType""#).is_none() {
        return Ok(None);
    }
    let envelope: Envelope =
        serde_json::from_str(result.get()).map_err(|_| malformed("the result is not a well-formed object"))?;
    match envelope.result_type.as_deref() {
        None | Some("complete") => return Ok(None),
        Some("input_required") => {}
        Some(_) => {
            return Err(McpError::Protocol(
                "the server answered with a result type this client does not support".into(),
            ))
        }
    }
    let request_state = envelope.request_state.map(read_request_state).transpose()?;
    let requests = envelope.input_requests.map(read_input_requests).transpose()?.unwrap_or_default();
    if requests.is_empty() && request_state.is_none() {
        return Err(malformed("it carries neither inputRequests nor requestState"));
    }
    Ok(Some(InputRequired { requests, request_state }))
}

fn read_request_state(state: &RawValue) -> Result<Box<RawValue>, McpError> {
    if !state.get().starts_with('"') {
        return Err(malformed("its requestState is not a string"));
    }
    if state.get().len() > MAX_REQUEST_STATE_BYTES {
        return Err(malformed(&format!("its requestState is over {MAX_REQUEST_STATE_BYTES} bytes")));
    }
    Ok(state.to_owned())
}

fn read_input_requests(requests: &RawValue) -> Result<Vec<(String, InputRequest)>, McpError> {
    let Ok(Members(entries)) = serde_json::from_str::<Members<String, Entry>>(requests.get()) else {
        return Err(malformed("its inputRequests is not an object of {method, params} entries"));
    };
    if entries.len() > MAX_INPUT_REQUESTS_PER_ROUND {
        return Err(malformed(&format!("it asks for more than {MAX_INPUT_REQUESTS_PER_ROUND} inputs at once")));
    }
    if entries.iter().any(|(key, _)| key.len() > MAX_INPUT_KEY_BYTES) {
        return Err(malformed(&format!("an inputRequests key is over {MAX_INPUT_KEY_BYTES} bytes")));
    }
    if entries.iter().enumerate().any(|(i, (key, _))| entries[..i].iter().any(|(earlier, _)| earlier == key)) {
        return Err(malformed("an inputRequests key appears twice"));
    }
    let requests = entries.into_iter().map(|(key, entry)| {
        let request = match entry.method.as_str() {
            "elicitation/create" => InputRequest::Elicitation(entry.params),
            "sampling/createMessage" => InputRequest::Sampling,
            "roots/list" => InputRequest::Roots,
            _ => InputRequest::Unknown,
        };
        (key, request)
    });
    Ok(requests.collect())
}

/// The request's outcome when the server answers `input_required` to its `MAX_INPUT_ROUNDS`th retry.
pub fn too_many_rounds() -> McpError {
    McpError::Protocol(format!("the server still asked for input after {MAX_INPUT_ROUNDS} rounds of answers"))
}

fn malformed(why: &str) -> McpError {
    McpError::Protocol(format!("the server's input_required result is invalid: {why}"))
}

/// Answer every input request, in order, and return the `inputResponses` object (JSON) under the same
/// keys. Elicitations go to the host through `elicitor` as a server's `elicitation/create` does
/// (`elicitation::ask`: the schema's defaults fill what the host left out, an answer that breaks the
/// schema or a callback that throws is sent as `decline`, one past the elicitor's timeout as `cancel`),
/// one at a time: a person answers one form after another. Every request is read before the host is
/// asked, so one this client cannot answer (sampling, roots, an unknown method, an elicitation without
/// an `onElicitation` or breaking the spec's rules) fails with `McpError::Protocol` naming what the
/// server asked for, before anyone has filled in a form.
pub async fn fulfil(requests: &[(String, InputRequest)], elicitor: Option<&Elicitor>) -> Result<String, McpError> {
    let mut elicitations = Vec::with_capacity(requests.len());
    for (key, request) in requests {
        let params = match request {
            InputRequest::Elicitation(params) => params.as_deref(),
            InputRequest::Sampling => {
                return Err(unanswerable("sampling (sampling/createMessage)", "mcpferry does not support sampling"))
            }
            InputRequest::Roots => return Err(unanswerable("roots (roots/list)", "mcpferry does not support roots")),
            InputRequest::Unknown => {
                return Err(unanswerable("an unknown kind of input", "mcpferry cannot provide it"))
            }
        };
        let Some(elicitor) = elicitor else {
            return Err(unanswerable("elicitation (elicitation/create)", "no onElicitation is set to answer it"));
        };
        let elicitation = elicitation::parse_input_request(params, elicitor.modes)
            .map_err(|why| McpError::Protocol(format!("the server's elicitation input request is invalid: {why}")))?;
        elicitations.push((key, elicitor, elicitation));
    }
    let mut responses = String::from("{");
    for (key, elicitor, elicitation) in &elicitations {
        if responses.len() > 1 {
            responses.push(',');
        }
        push_json_string(&mut responses, key);
        responses.push(':');
        responses.push_str(&elicitation::ask(elicitor, elicitation).await);
    }
    responses.push('}');
    Ok(responses)
}

fn unanswerable(what: &str, why: &str) -> McpError {
    McpError::Protocol(format!("the server asked for {what} to complete this request, and {why}"))
}

/// The params of the retry: `original_params` with `inputResponses` (the JSON object from [`fulfil`])
/// and, iff `request_state` is given, `requestState` exactly as the server sent it. Any earlier
/// `inputResponses`/`requestState` are replaced (a retry carries only its own round's); every other
/// member keeps its place and its value byte for byte. Params that are not a JSON object (a request
/// sent without params) count as `{}`.
pub fn retry_params(original_params: &str, input_responses: &str, request_state: Option<&RawValue>) -> String {
    let members = serde_json::from_str::<Members<String, &RawValue>>(original_params).map(|m| m.0).unwrap_or_default();
    let state_len = request_state.map_or(0, |state| state.get().len());
    let mut params = String::with_capacity(original_params.len() + input_responses.len() + state_len + 40);
    params.push('{');
    for (key, value) in members.iter().filter(|(key, _)| key != "inputResponses" && key != "requestState") {
        push_json_string(&mut params, key);
        params.push(':');
        params.push_str(value.get());
        params.push(',');
    }
    params.push_str(r#""inputResponses":"#);
    params.push_str(input_responses);
    if let Some(state) = request_state {
        params.push_str(r#","requestState":"#);
        params.push_str(state.get());
    }
    params.push('}');
    params
}

/// A JSON object's members in order, duplicates kept (serde's maps keep only the last of a key).
struct Members<K, V>(Vec<(K, V)>);

impl<'de, K: Deserialize<'de>, V: Deserialize<'de>> Deserialize<'de> for Members<K, V> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct MembersVisitor<K, V>(PhantomData<(K, V)>);

        impl<'de, K: Deserialize<'de>, V: Deserialize<'de>> Visitor<'de> for MembersVisitor<K, V> {
            type Value = Members<K, V>;

            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a JSON object")
            }

            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
                let mut members = Vec::new();
                while let Some(member) = map.next_entry()? {
                    members.push(member);
                }
                Ok(Members(members))
            }
        }

        deserializer.deserialize_map(MembersVisitor(PhantomData))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hooks::Callback;
    use crate::session::elicitation::Modes;
    use futures_util::future::BoxFuture;
    use parking_lot::Mutex;
    use serde_json::{json, Value};
    use std::sync::Arc;
    use std::time::Duration;

    fn raw(json: &str) -> Box<RawValue> {
        RawValue::from_string(json.to_owned()).unwrap()
    }

    fn parsed(result: &str) -> Result<Option<InputRequired>, McpError> {
        input_required(&raw(result))
    }

    fn protocol_error(result: &str) -> String {
        match parsed(result) {
            Err(McpError::Protocol(why)) => why,
            other => panic!("{result}: expected a protocol error, got {other:?}"),
        }
    }

    /// The `sep-2322-client-request-state` scenario's first answer to `test_mrtr_echo_state`.
    const ECHO_STATE: &str = r#"{"resultType":"input_required","inputRequests":{"confirm":{"method":"elicitation/create","params":{"message":"Please confirm","requestedSchema":{"type":"object","properties":{"confirmed":{"type":"boolean"}}}}}},"requestState":"{\"nonce\":\"caf\u00e9\/x \ud83d\ude00\",\"originalId\":7}"}"#;

    #[test]
    fn results_without_input_required_are_complete() {
        for result in [
            r#"{"content":[{"type":"text","text":"hi"}]}"#,
            // Legacy servers and the scenario's `test_mrtr_no_result_type`: no resultType means complete.
            r#"{"content":[],"structuredContent":{"resultType":"input_required","inputRequests":{}}}"#,
            r#"{"resultType":"complete","content":[]}"#,
            r#"{"content":[],"resultType":null}"#,
            // The key only inside a string is not the key.
            r#"{"content":[{"type":"text","text":"\"resultType\": \"input_required\""}]}"#,
        ] {
            assert!(parsed(result).unwrap().is_none(), "{result}");
        }
    }

    #[test]
    fn input_required_with_requests_and_state_keeps_the_state_byte_exact() {
        let required = parsed(ECHO_STATE).unwrap().unwrap();
        let state = required.request_state.unwrap();
        assert_eq!(state.get(), r#""{\"nonce\":\"caf\u00e9\/x \ud83d\ude00\",\"originalId\":7}""#);
        let [(key, InputRequest::Elicitation(Some(params)))] = &required.requests[..] else {
            panic!("{:?}", required.requests)
        };
        assert_eq!(key, "confirm");
        assert!(params.get().starts_with(r#"{"message":"Please confirm""#));
    }

    #[test]
    fn input_required_without_state_or_without_requests() {
        let no_state = r#"{"resultType":"input_required","inputRequests":{"b":{"method":"elicitation/create","params":{}},"a":{"method":"roots/list"},"c":{"method":"sampling/createMessage","params":{}},"d":{"method":"x/y"}}}"#;
        let required = parsed(no_state).unwrap().unwrap();
        assert!(required.request_state.is_none());
        let kinds: Vec<_> = required.requests.iter().map(|(key, request)| format!("{key}:{request:?}")).collect();
        // The server's order, not sorted.
        assert_eq!(kinds, [r#"b:Elicitation(Some(RawValue({})))"#, "a:Roots", "c:Sampling", "d:Unknown"]);
        let state_only = parsed(r#"{"resultType":"input_required","requestState":"s1"}"#).unwrap().unwrap();
        assert!(state_only.requests.is_empty());
        assert_eq!(state_only.request_state.unwrap().get(), r#""s1""#);
        let empty_requests =
            parsed(r#"{"resultType":"input_required","inputRequests":{},"requestState":"s"}"#).unwrap().unwrap();
        assert!(empty_requests.requests.is_empty());
    }

    #[test]
    fn malformed_input_required_results_are_protocol_errors_that_quote_nothing() {
        let secret = "SECRET-FROM-SERVER";
        for result in [
            format!(r#"["resultType","{secret}"]"#),
            format!(r#"{{"resultType":"{secret}"}}"#),
            r#"{"resultType":7}"#.to_owned(),
            r#"{"resultType":"input_required"}"#.to_owned(),
            r#"{"resultType":"input_required","inputRequests":{}}"#.to_owned(),
            format!(r#"{{"resultType":"input_required","requestState":{{"{secret}":1}}}}"#),
            r#"{"resultType":"input_required","requestState":42}"#.to_owned(),
            format!(r#"{{"resultType":"input_required","inputRequests":["{secret}"]}}"#),
            format!(r#"{{"resultType":"input_required","inputRequests":{{"k":{{"params":{{"m":"{secret}"}}}}}}}}"#),
            r#"{"resultType":"input_required","inputRequests":{"k":{"method":5}}}"#.to_owned(),
            r#"{"resultType":"input_required","inputRequests":{"k":{"method":"roots/list"},"k":{"method":"roots/list"}}}"#.to_owned(),
            r#"{"resultType":"input_required","resultType":"complete","requestState":"s"}"#.to_owned(),
        ] {
            let why = protocol_error(&result);
            assert!(!why.contains(secret), "{why}");
        }
    }

    #[test]
    fn oversized_input_required_results_are_refused() {
        let entry = r#"{"method":"elicitation/create","params":{}}"#;
        let at_most: Vec<String> = (0..MAX_INPUT_REQUESTS_PER_ROUND).map(|i| format!(r#""k{i}":{entry}"#)).collect();
        let result = format!(r#"{{"resultType":"input_required","inputRequests":{{{}}}}}"#, at_most.join(","));
        assert_eq!(parsed(&result).unwrap().unwrap().requests.len(), MAX_INPUT_REQUESTS_PER_ROUND);
        let one_more =
            format!(r#"{{"resultType":"input_required","inputRequests":{{{},"last":{entry}}}}}"#, at_most.join(","));
        assert!(protocol_error(&one_more).contains("inputs at once"));

        let key = "k".repeat(MAX_INPUT_KEY_BYTES);
        assert!(parsed(&format!(r#"{{"resultType":"input_required","inputRequests":{{"{key}":{entry}}}}}"#)).is_ok());
        let long_key = format!(r#"{{"resultType":"input_required","inputRequests":{{"{key}k":{entry}}}}}"#);
        assert!(protocol_error(&long_key).contains("key"));

        // The limit counts the state's JSON text, quotes included.
        let state = "s".repeat(MAX_REQUEST_STATE_BYTES - 2);
        assert!(parsed(&format!(r#"{{"resultType":"input_required","requestState":"{state}"}}"#)).is_ok());
        let huge_state = format!(r#"{{"resultType":"input_required","requestState":"{state}s"}}"#);
        assert!(protocol_error(&huge_state).contains("requestState"));
    }

    #[test]
    fn the_retry_echoes_the_state_byte_exact_and_adds_the_responses() {
        let required = parsed(ECHO_STATE).unwrap().unwrap();
        let original = r#"{"name":"test_mrtr_echo_state","arguments":{},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}"#;
        let responses = r#"{"confirm":{"action":"accept","content":{"confirmed":true}}}"#;
        let retry = retry_params(original, responses, required.request_state.as_deref());
        assert_eq!(
            retry,
            concat!(
                r#"{"name":"test_mrtr_echo_state","arguments":{},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"},"#,
                r#""inputResponses":{"confirm":{"action":"accept","content":{"confirmed":true}}},"#,
                r#""requestState":"{\"nonce\":\"caf\u00e9\/x \ud83d\ude00\",\"originalId\":7}"}"#
            )
        );
        let retry: Value = serde_json::from_str(&retry).unwrap();
        // Echoed as the server wrote it: re-encoding would turn the escapes into `é/x 😀`.
        assert_eq!(retry["requestState"], r#"{"nonce":"café/x 😀","originalId":7}"#);
    }

    #[test]
    fn the_retry_replaces_earlier_responses_and_keeps_everything_else_untouched() {
        // A second round: the first retry's members go, the rest stays in place, values byte for byte.
        let previous = r#"{"name":"t","inputResponses":{"old":{"action":"decline"}}, "arguments": {"n": 1.50, "s":"\u00e9"},"requestState":"old-state","_meta":{"progressToken":3}}"#;
        let retry = retry_params(previous, r#"{"new":{"action":"cancel"}}"#, Some(&raw(r#""new-state""#)));
        assert_eq!(
            retry,
            r#"{"name":"t","arguments":{"n": 1.50, "s":"\u00e9"},"_meta":{"progressToken":3},"inputResponses":{"new":{"action":"cancel"}},"requestState":"new-state"}"#
        );
        // No state this round: none is sent, even if an earlier round had one.
        let retry = retry_params(previous, "{}", None);
        assert_eq!(
            retry,
            r#"{"name":"t","arguments":{"n": 1.50, "s":"\u00e9"},"_meta":{"progressToken":3},"inputResponses":{}}"#
        );
        // A request sent without params.
        assert_eq!(retry_params("", "{}", None), r#"{"inputResponses":{}}"#);
    }

    /// The host's `onElicitation`: records each request and answers with `answer` (`None`: never answers).
    struct Host {
        asked: Mutex<Vec<Value>>,
        answer: Option<std::result::Result<Value, String>>,
    }

    impl Callback<String, String> for Host {
        fn call(&self, request: String) -> BoxFuture<'static, std::result::Result<String, String>> {
            self.asked.lock().push(serde_json::from_str(&request).unwrap());
            match self.answer.clone() {
                Some(answer) => Box::pin(async move { answer.map(|a| a.to_string()) }),
                None => Box::pin(std::future::pending()),
            }
        }
    }

    fn host(answer: Option<std::result::Result<Value, String>>) -> (Arc<Host>, Elicitor) {
        let host = Arc::new(Host { asked: Mutex::new(Vec::new()), answer });
        let elicitor = Elicitor {
            server: "srv".into(),
            modes: Modes::default(),
            callback: host.clone(),
            timeout: Duration::from_secs(60),
            withdrawn: None,
        };
        (host, elicitor)
    }

    fn requests(result: &str) -> Vec<(String, InputRequest)> {
        parsed(result).unwrap().unwrap().requests
    }

    const TWO_FORMS: &str = r#"{"resultType":"input_required","inputRequests":{"who":{"method":"elicitation/create","params":{"message":"Name?","requestedSchema":{"type":"object","properties":{"name":{"type":"string","default":"Ada"},"age":{"type":"integer"}}}}},"ok":{"method":"elicitation/create","params":{"mode":"form","message":"Sure?","requestedSchema":{"type":"object","properties":{"confirmed":{"type":"boolean","default":true}}}}}}}"#;

    async fn responses(requests: &[(String, InputRequest)], elicitor: &Elicitor) -> Value {
        serde_json::from_str(&fulfil(requests, Some(elicitor)).await.unwrap()).unwrap()
    }

    #[tokio::test]
    async fn an_accepted_elicitation_gets_the_schemas_defaults_under_its_key() {
        let (host, elicitor) = host(Some(Ok(json!({ "action": "accept", "content": { "age": 36 } }))));
        let answered = responses(&requests(TWO_FORMS), &elicitor).await;
        assert_eq!(
            answered,
            json!({
                "who": { "action": "accept", "content": { "name": "Ada", "age": 36 } },
                // `age` is not a field of this form: the answer breaks its schema, so it is declined.
                "ok": { "action": "decline" }
            })
        );
        // One at a time, in the server's order, as an `elicitation/create` is shown (no mode: form).
        let asked = host.asked.lock();
        assert_eq!(asked.len(), 2);
        assert_eq!(asked[0]["server"], "srv");
        assert_eq!(asked[0]["request"]["mode"], "form");
        assert_eq!(asked[0]["request"]["message"], "Name?");
        assert_eq!(asked[1]["request"]["message"], "Sure?");
    }

    #[tokio::test]
    async fn the_conformance_confirmation_is_accepted() {
        let (_, elicitor) = host(Some(Ok(json!({ "action": "accept", "content": { "confirmed": true } }))));
        let answered = responses(&requests(ECHO_STATE), &elicitor).await;
        assert_eq!(answered, json!({ "confirm": { "action": "accept", "content": { "confirmed": true } } }));
    }

    #[tokio::test]
    async fn a_declining_a_throwing_or_a_silent_host() {
        let (_, elicitor) = host(Some(Ok(json!({ "action": "decline", "content": { "name": "x" } }))));
        assert_eq!(
            responses(&requests(TWO_FORMS), &elicitor).await,
            json!({ "who": { "action": "decline" }, "ok": { "action": "decline" } })
        );
        // The host's error stays with the host: the server is told decline.
        let (host, elicitor) = host(Some(Err("SECRET host failure".into())));
        let answered = fulfil(&requests(TWO_FORMS), Some(&elicitor)).await.unwrap();
        assert_eq!(answered, r#"{"who":{"action":"decline"},"ok":{"action":"decline"}}"#);
        assert_eq!(host.asked.lock().len(), 2);
        let (_, mut elicitor) = self::host(None);
        elicitor.timeout = Duration::from_millis(20);
        assert_eq!(responses(&requests(ECHO_STATE), &elicitor).await, json!({ "confirm": { "action": "cancel" } }));
    }

    #[tokio::test]
    async fn sampling_roots_and_unknown_inputs_are_typed_errors_before_anyone_is_asked() {
        for (method, named) in [
            ("sampling/createMessage", "sampling/createMessage"),
            ("roots/list", "roots/list"),
            ("SECRET/x", "unknown kind"),
        ] {
            let result = format!(
                r#"{{"resultType":"input_required","inputRequests":{{"confirm":{{"method":"elicitation/create","params":{{"message":"m","requestedSchema":{{"type":"object","properties":{{}}}}}}}},"other":{{"method":"{method}","params":{{}}}}}}}}"#
            );
            let (host, elicitor) = host(Some(Ok(json!({ "action": "accept" }))));
            let error = fulfil(&requests(&result), Some(&elicitor)).await.unwrap_err();
            assert_eq!(error.code(), "mcp_protocol_error");
            let McpError::Protocol(why) = error else { unreachable!() };
            assert!(why.contains(named) && !why.contains("SECRET"), "{why}");
            assert!(host.asked.lock().is_empty(), "the host was asked before the request failed");
        }
    }

    #[tokio::test]
    async fn elicitation_without_a_host_or_against_the_rules_is_a_typed_error() {
        let error = fulfil(&requests(ECHO_STATE), None).await.unwrap_err();
        assert!(
            matches!(&error, McpError::Protocol(why) if why.contains("elicitation/create") && why.contains("onElicitation")),
            "{error}"
        );
        let (host, elicitor) = host(Some(Ok(json!({ "action": "accept" }))));
        for params in [
            r#"{"message":"m","requestedSchema":{"type":"object","properties":{"SECRET":{"type":"object"}}}}"#,
            r#"{"message":"m"}"#,
            "null",
            // URL mode was not declared.
            r#"{"mode":"url","message":"m","url":"https://example.com/"}"#,
        ] {
            let result = format!(
                r#"{{"resultType":"input_required","inputRequests":{{"k":{{"method":"elicitation/create","params":{params}}}}}}}"#
            );
            let error = fulfil(&requests(&result), Some(&elicitor)).await.unwrap_err();
            assert!(
                matches!(&error, McpError::Protocol(why) if why.contains("invalid") && !why.contains("SECRET")),
                "{error}"
            );
        }
        assert!(host.asked.lock().is_empty());
    }

    #[tokio::test]
    async fn a_url_input_request_needs_no_elicitation_id() {
        let (host, mut elicitor) = host(Some(Ok(json!({ "action": "accept", "content": { "x": 1 } }))));
        elicitor.modes = Modes { form: true, url: true };
        let result = r#"{"resultType":"input_required","inputRequests":{"login":{"method":"elicitation/create","params":{"mode":"url","message":"Connect","url":"https://example.com/connect"}}}}"#;
        assert_eq!(responses(&requests(result), &elicitor).await, json!({ "login": { "action": "accept" } }));
        let mut asked = host.asked.lock()[0].clone();
        assert!(asked.as_object_mut().unwrap().remove("askId").unwrap().is_u64());
        assert_eq!(
            asked,
            json!({ "server": "srv", "request": { "mode": "url", "message": "Connect", "url": "https://example.com/connect" } })
        );
    }

    /// The host hears of a question withdrawn unanswered (its wait dropped, or timed out), and only then.
    #[tokio::test]
    async fn the_host_is_told_of_a_withdrawn_question_only() {
        let told = Arc::new(Mutex::new(Vec::new()));
        let withdrawn = |told: &Arc<Mutex<Vec<u64>>>| -> Arc<dyn Fn(u64) + Send + Sync> {
            let told = told.clone();
            Arc::new(move |id| told.lock().push(id))
        };
        let request = r#"{"resultType":"input_required","inputRequests":{"ok":{"method":"elicitation/create","params":{"message":"m","requestedSchema":{"type":"object","properties":{}}}}}}"#;
        let ask_id = |host: &Host| host.asked.lock()[0]["askId"].as_u64().unwrap();

        let (answering, mut elicitor) = host(Some(Ok(json!({ "action": "decline" }))));
        elicitor.withdrawn = Some(withdrawn(&told));
        responses(&requests(request), &elicitor).await;
        assert!(told.lock().is_empty(), "answered: nothing withdrawn");

        let (silent, mut elicitor) = host(None);
        elicitor.withdrawn = Some(withdrawn(&told));
        let dropped = tokio::time::timeout(Duration::from_millis(50), responses(&requests(request), &elicitor)).await;
        assert!(dropped.is_err());
        assert_eq!(*told.lock(), [ask_id(&silent)], "dropped unanswered: withdrawn");

        let (late, mut elicitor) = host(None);
        (elicitor.withdrawn, elicitor.timeout) = (Some(withdrawn(&told)), Duration::from_millis(20));
        assert_eq!(responses(&requests(request), &elicitor).await, json!({ "ok": { "action": "cancel" } }));
        assert_eq!(told.lock()[1], ask_id(&late), "timed out: withdrawn");
        assert_ne!(ask_id(&late), ask_id(&answering), "each question has its own id");
    }

    #[test]
    fn too_many_rounds_is_a_protocol_error_with_the_cap() {
        let error = too_many_rounds();
        assert_eq!(error.code(), "mcp_protocol_error");
        assert!(error.to_string().contains(&MAX_INPUT_ROUNDS.to_string()), "{error}");
    }

    #[test]
    fn fulfilling_can_run_on_another_task() {
        fn send<T: Send>(_: &T) {}
        let (_, elicitor) = host(None);
        let requests = requests(ECHO_STATE);
        send(&fulfil(&requests, Some(&elicitor)));
    }
}
