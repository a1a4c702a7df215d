//! JSON-RPC in, JSON-RPC out, for both eras; no I/O. A transport classifies each request by its
//! envelope ([`claim_of`]), keeps whatever session state its era has, and asks [`answer`] (or
//! [`initialize`]) for the reply.
//!
//! Methods: `initialize` and `ping` (2025 era only), `server/discover` (2026-07-28), `tools/list` and
//! `tools/call` (both). Notifications are accepted and need no answer (`notifications/initialized`,
//! `notifications/cancelled`: a call already running finishes, since its side effect may be under way).

use super::calls::Refusal;
use super::McpServerCore;
use crate::error::McpError;
use crate::protocol::era::{self, Era, META_CLIENT_CAPABILITIES, META_PROTOCOL_VERSION, MODERN_PROTOCOL_VERSIONS};
use crate::protocol::jsonrpc::{push_json_string, INVALID_PARAMS, METHOD_NOT_FOUND};
use crate::protocol::mcp::{LATEST_PROTOCOL_VERSION, SUPPORTED_PROTOCOL_VERSIONS};
use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::{Map, Value};
use std::sync::Arc;

pub const PARSE_ERROR: i64 = -32700;
pub const INVALID_REQUEST: i64 = -32600;
pub const INTERNAL_ERROR: i64 = -32603;

/// What a request's `params._meta` says about its era.
#[derive(Debug, PartialEq)]
pub enum Claim {
    /// No protocol version in `_meta`: the 2025 era.
    None,
    /// A 2026-07-28 request at a version this server speaks.
    Modern(&'static str),
    /// A version this server does not speak (answered with `UnsupportedProtocolVersion`).
    Unsupported(String),
    /// An envelope that names a version but is malformed (answered with invalid params).
    Malformed(String),
}

#[derive(Deserialize)]
struct WithMeta {
    #[serde(default, rename = "_meta")]
    meta: Option<Map<String, Value>>,
}

pub fn claim_of(params: Option<&RawValue>) -> Claim {
    let Some(params) = params else { return Claim::None };
    let Ok(WithMeta { meta: Some(meta) }) = serde_json::from_str::<WithMeta>(params.get()) else { return Claim::None };
    let Some(version) = meta.get(META_PROTOCOL_VERSION) else { return Claim::None };
    let Some(version) = version.as_str() else {
        return Claim::Malformed(format!("{META_PROTOCOL_VERSION} must be a string"));
    };
    let Some(version) = MODERN_PROTOCOL_VERSIONS.iter().copied().find(|v| *v == version) else {
        return Claim::Unsupported(version.to_owned());
    };
    match meta.get(META_CLIENT_CAPABILITIES) {
        Some(Value::Object(_)) => Claim::Modern(version),
        Some(_) => Claim::Malformed(format!("{META_CLIENT_CAPABILITIES} must be an object")),
        None => Claim::Malformed(format!("{META_CLIENT_CAPABILITIES} is missing")),
    }
}

/// A JSON-RPC error to answer with.
#[derive(Debug)]
pub struct RpcError {
    pub code: i64,
    pub message: String,
    pub data: Option<Value>,
}

impl RpcError {
    pub fn new(code: i64, message: impl Into<String>) -> Self {
        RpcError { code, message: message.into(), data: None }
    }

    /// `UnsupportedProtocolVersion` for a request that claims the modern era: `supported` is what
    /// `server/discover` lists (the 2025 versions are negotiated by `initialize`, not named here).
    pub fn unsupported_version(requested: &str) -> Self {
        let supported = MODERN_PROTOCOL_VERSIONS;
        RpcError {
            code: era::UNSUPPORTED_PROTOCOL_VERSION,
            message: format!("Unsupported protocol version: {requested}"),
            data: Some(serde_json::json!({ "supported": supported, "requested": requested })),
        }
    }
}

/// The 2025-era handshake: the version this server will speak (the client's if it is one we know,
/// else our newest, as the spec has it) and the `initialize` result.
pub fn initialize(core: &McpServerCore, params: Option<&RawValue>) -> (&'static str, String) {
    #[derive(Deserialize)]
    #[serde(rename_all = "camelCase")]
    struct Requested {
        #[serde(default)]
        protocol_version: Option<String>,
    }
    let requested =
        params.and_then(|p| serde_json::from_str::<Requested>(p.get()).ok()).and_then(|r| r.protocol_version);
    let version = requested
        .and_then(|r| SUPPORTED_PROTOCOL_VERSIONS.iter().copied().find(|v| *v == r))
        .unwrap_or(LATEST_PROTOCOL_VERSION);
    let mut result = serde_json::json!({
        "protocolVersion": version,
        "capabilities": { "tools": { "listChanged": false } },
        "serverInfo": core.server_info(),
    });
    if let Some(instructions) = &core.instructions {
        result["instructions"] = instructions.clone().into();
    }
    (version, result.to_string())
}

/// The answer to a request other than the 2025 handshake, in `era`.
pub async fn answer(
    core: &Arc<McpServerCore>,
    method: &str,
    params: Option<&RawValue>,
    era: Era,
) -> Result<String, RpcError> {
    let modern = matches!(era, Era::Modern(_));
    let result = match method {
        // 2026-07-28 removed ping with the handshake: a modern ping is an unknown method.
        "ping" if !modern => "{}".to_owned(),
        "tools/list" if modern => format!("{{\"tools\":{},\"ttlMs\":0,\"cacheScope\":\"public\"}}", core.listing),
        "tools/list" => format!("{{\"tools\":{}}}", core.listing),
        "tools/call" => call(core, params).await?,
        "server/discover" if modern => discover(core),
        _ => return Err(RpcError::new(METHOD_NOT_FOUND, format!("Method not found: {method}"))),
    };
    Ok(if modern { complete(&result) } else { result })
}

fn discover(core: &McpServerCore) -> String {
    let mut result = serde_json::json!({
        "supportedVersions": MODERN_PROTOCOL_VERSIONS,
        "capabilities": { "tools": { "listChanged": false } },
        "_meta": { "io.modelcontextprotocol/serverInfo": core.server_info() },
    });
    if let Some(instructions) = &core.instructions {
        result["instructions"] = instructions.clone().into();
    }
    result.to_string()
}

/// A 2026-07-28 result says it is complete (`resultType`), as that revision requires of every result.
fn complete(result: &str) -> String {
    match result.strip_prefix('{') {
        Some("}") => "{\"resultType\":\"complete\"}".to_owned(),
        Some(rest) => format!("{{\"resultType\":\"complete\",{rest}"),
        None => result.to_owned(),
    }
}

async fn call(core: &Arc<McpServerCore>, params: Option<&RawValue>) -> Result<String, RpcError> {
    #[derive(Deserialize)]
    struct CallParams {
        name: String,
        #[serde(default)]
        arguments: Option<Value>,
        #[serde(default, rename = "_meta")]
        meta: Option<CallMeta>,
    }
    #[derive(Deserialize)]
    struct CallMeta {
        #[serde(default, rename = "idempotencyKey")]
        idempotency_key: Option<Value>,
        /// The caller's trace context (SEP-414); ignored when it is not well formed.
        #[serde(default)]
        traceparent: Option<Value>,
        #[serde(default)]
        tracestate: Option<Value>,
        #[serde(default)]
        baggage: Option<Value>,
    }
    let params = params.ok_or_else(|| RpcError::new(INVALID_PARAMS, "tools/call needs params"))?;
    let params: CallParams = serde_json::from_str(params.get())
        .map_err(|e| RpcError::new(INVALID_PARAMS, format!("Invalid tools/call params: {e}")))?;
    let trace = params.meta.as_ref().and_then(|m| {
        let text = |v: &Option<Value>| v.as_ref().and_then(Value::as_str).map(str::to_owned);
        crate::telemetry::incoming::read(text(&m.traceparent), text(&m.tracestate), text(&m.baggage))
    });
    let key = match params.meta.and_then(|m| m.idempotency_key) {
        None | Some(Value::Null) => None,
        Some(Value::String(key)) => Some(key),
        Some(_) => return Err(RpcError::new(INVALID_PARAMS, "_meta.idempotencyKey must be a string")),
    };
    let calling = core.call_seen(&params.name, params.arguments, key.as_deref());
    let called = crate::telemetry::incoming::scope(trace, calling).await;
    // Told to the request's `Served` (see `Served::answering`), if it is being watched.
    let _ = EXECUTED.try_with(|executed| executed.set(called.executed));
    called.outcome.map_err(|refusal| match refusal {
        Refusal::UnknownTool(name) => RpcError::new(INVALID_PARAMS, format!("Unknown tool: {name}")),
        Refusal::BadArguments(why) => RpcError::new(INVALID_PARAMS, why),
        Refusal::KeyReused => RpcError::new(INVALID_PARAMS, super::calls::KEY_REUSED_MESSAGE),
        Refusal::Busy => RpcError::new(super::calls::SERVER_BUSY, super::calls::BUSY_MESSAGE),
        Refusal::Failed(e) => RpcError::new(INTERNAL_ERROR, remote_message(&e)),
    })
}

/// What a remote client is told of an engine failure: storage and internal errors in general terms
/// (their text names files, databases and engine internals), the others as they are.
fn remote_message(error: &McpError) -> String {
    match error {
        McpError::Storage(message) if message.contains(super::calls::OUTCOME_UNKNOWN) => {
            "Internal error: the call was stopped and its outcome is unknown (the server lost its hold on it in its journal); it was not recorded".to_owned()
        }
        McpError::Storage(_) => "Internal error: the server's journal failed (mcp_storage_error)".to_owned(),
        McpError::Internal(_) => "Internal error (mcp_internal_error)".to_owned(),
        other => format!("the server could not complete the call ({}): {other}", other.code()),
    }
}

/// The answer to one request in whichever era its envelope claims; `initialize` without a claim is the
/// 2025 handshake (a transport that keeps sessions handles it itself first).
pub async fn reply_to(
    core: &Arc<McpServerCore>,
    method: &str,
    params: Option<&RawValue>,
    claim: Claim,
) -> Result<String, RpcError> {
    match claim {
        Claim::Modern(version) => answer(core, method, params, Era::Modern(version)).await,
        Claim::Unsupported(requested) => Err(RpcError::unsupported_version(&requested)),
        Claim::Malformed(why) => Err(RpcError::new(
            INVALID_PARAMS,
            format!("Invalid _meta envelope for protocol revision {}: {why}", MODERN_PROTOCOL_VERSIONS[0]),
        )),
        Claim::None if method == "initialize" => Ok(initialize(core, params).1),
        Claim::None => answer(core, method, params, Era::Legacy).await,
    }
}

/// The methods this server answers (above: [`answer`], [`initialize`]). A report names any other method
/// `_OTHER`: a remote client's made-up method never becomes a metric attribute or a span name.
pub const SERVED_METHODS: [&str; 5] = ["initialize", "ping", "tools/list", "tools/call", "server/discover"];

/// `method` as a report may name it: one of [`SERVED_METHODS`], else `_OTHER`.
fn reported_method(method: &str) -> &'static str {
    SERVED_METHODS.iter().copied().find(|served| *served == method).unwrap_or("_OTHER")
}

tokio::task_local! {
    /// Whether the `tools/call` being answered ran `execute` ([`McpServerCore::call_seen`]).
    static EXECUTED: std::cell::Cell<bool>;
}

/// One request being answered, timed for the host's telemetry: a request the engine answers itself (every
/// one but a `tools/call` that ran `execute`, whose span the host makes as it runs; a replayed call, one
/// that joined a keyed call another request runs, or one refused first is the engine's) is told to the host
/// once answered ([`super::ToolHost::served`]) with the caller's trace context from its `_meta`, so the
/// host records a server span for it (`lib/telemetry.ts`).
pub struct Served<'a> {
    core: &'a McpServerCore,
    id: &'a RawValue,
    method: &'a str,
    params: Option<&'a RawValue>,
    started: crate::telemetry::operation::Started,
    /// The request ran `execute` (told by [`Self::answering`]).
    executed: std::sync::atomic::AtomicBool,
}

impl<'a> Served<'a> {
    pub fn start(core: &'a McpServerCore, id: &'a RawValue, method: &'a str, params: Option<&'a RawValue>) -> Self {
        let started = crate::telemetry::operation::Started::now();
        Served { core, id, method, params, started, executed: Default::default() }
    }

    /// Answers the request with `answer` ([`answer`], [`reply_to`]), learning whether it ran `execute`.
    pub async fn answering<F>(&self, answer: F) -> Result<String, RpcError>
    where
        F: std::future::Future<Output = Result<String, RpcError>>,
    {
        let (outcome, executed) = EXECUTED
            .scope(std::cell::Cell::new(false), async {
                let outcome = answer.await;
                (outcome, EXECUTED.with(std::cell::Cell::get))
            })
            .await;
        self.executed.store(executed, std::sync::atomic::Ordering::Relaxed);
        outcome
    }

    /// The response to send, the request told to the host first.
    pub fn response(&self, outcome: &Result<String, RpcError>) -> String {
        // A call that ran `execute` is the host's own span.
        let executed = self.executed.load(std::sync::atomic::Ordering::Relaxed);
        if !executed && self.core.telemetry {
            self.core.host.served(self.report(outcome));
        }
        response(self.id, outcome)
    }

    /// `{"method", "tool"?, "requestId"?, "traceparent"?, "tracestate"?, "startedMs", "us", "rpcCode"?}`: the
    /// method only when this server answers it (else `_OTHER`), the tool only when it is one of ours (a
    /// client's made-up name never becomes an attribute).
    fn report(&self, outcome: &Result<String, RpcError>) -> String {
        #[derive(Deserialize, Default)]
        struct Meta {
            #[serde(default)]
            traceparent: Option<Value>,
            #[serde(default)]
            tracestate: Option<Value>,
        }
        #[derive(Deserialize, Default)]
        struct Params {
            #[serde(default)]
            name: Option<Value>,
            #[serde(default, rename = "_meta")]
            meta: Option<Meta>,
        }
        let params = self.params.and_then(|p| serde_json::from_str::<Params>(p.get()).ok()).unwrap_or_default();
        let text = |v: Option<Value>| match v {
            Some(Value::String(s)) => Some(s),
            _ => None,
        };
        let meta = params.meta.unwrap_or_default();
        let trace = crate::telemetry::incoming::read(text(meta.traceparent), text(meta.tracestate), None);
        let mut out = Map::new();
        out.insert("method".into(), reported_method(self.method).into());
        if self.method == "tools/call" {
            if let Some(tool) = text(params.name).filter(|name| self.core.tools.contains_key(name)) {
                out.insert("tool".into(), tool.into());
            }
        }
        if let Some(id) = reported_id(self.id) {
            out.insert("requestId".into(), id.into());
        }
        if let Some(trace) = trace {
            if let Value::Object(members) = trace.meta_value() {
                out.extend(members);
            }
        }
        let timing = self.started.stop();
        out.insert("startedMs".into(), timing.started_ms().into());
        out.insert("us".into(), timing.elapsed_us().into());
        match outcome {
            Err(error) => {
                out.insert("rpcCode".into(), error.code.into());
            }
            // A call answered without `execute` with an error result (arguments the schema refused).
            Ok(result) if self.method == "tools/call" && is_error_result(result) => {
                out.insert("isError".into(), true.into());
            }
            Ok(_) => {}
        }
        Value::Object(out).to_string()
    }
}

/// Whether a `CallToolResult` (JSON) says `"isError": true`.
fn is_error_result(result: &str) -> bool {
    #[derive(Deserialize)]
    struct Result {
        #[serde(default, rename = "isError")]
        is_error: bool,
    }
    serde_json::from_str::<Result>(result).is_ok_and(|r| r.is_error)
}

/// A request id as a report may give it (a string's text, a number as written): only up to
/// `MAX_REPORTED_REQUEST_ID_CHARS` of printable ASCII, else none (a client chooses it).
fn reported_id(id: &RawValue) -> Option<String> {
    let id = match serde_json::from_str::<Value>(id.get()) {
        Ok(Value::String(id)) => id,
        _ => id.get().to_owned(),
    };
    let printable = id.bytes().all(|b| (0x20..=0x7e).contains(&b));
    (printable && id.len() <= crate::limits::MAX_REPORTED_REQUEST_ID_CHARS).then_some(id)
}

/// The response to request `id` (raw JSON, echoed as sent).
pub fn response(id: &RawValue, outcome: &Result<String, RpcError>) -> String {
    match outcome {
        Ok(result) => format!("{{\"jsonrpc\":\"2.0\",\"id\":{},\"result\":{result}}}", id.get()),
        Err(error) => error_response(Some(id), error),
    }
}

/// An error response; no `id` (a message that could not be read) answers with `null`.
pub fn error_response(id: Option<&RawValue>, error: &RpcError) -> String {
    let mut out = format!(
        "{{\"jsonrpc\":\"2.0\",\"id\":{},\"error\":{{\"code\":{},\"message\":",
        id.map_or("null", RawValue::get),
        error.code
    );
    push_json_string(&mut out, &error.message);
    if let Some(data) = &error.data {
        out.push_str(",\"data\":");
        out.push_str(&data.to_string());
    }
    out.push_str("}}");
    out
}

#[cfg(test)]
mod tests {
    use super::super::testing;
    use super::*;

    fn raw(text: &str) -> Box<RawValue> {
        RawValue::from_string(text.to_owned()).unwrap()
    }

    #[test]
    fn the_envelope_decides_the_era() {
        assert_eq!(claim_of(None), Claim::None);
        assert_eq!(claim_of(Some(&raw(r#"{"name":"x","_meta":{"progressToken":1}}"#))), Claim::None);
        let modern = r#"{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}"#;
        assert_eq!(claim_of(Some(&raw(modern))), Claim::Modern("2026-07-28"));
        assert_eq!(
            claim_of(Some(&raw(r#"{"_meta":{"io.modelcontextprotocol/protocolVersion":"2099-01-01"}}"#))),
            Claim::Unsupported("2099-01-01".into())
        );
        assert!(matches!(
            claim_of(Some(&raw(r#"{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}"#))),
            Claim::Malformed(_)
        ));
        assert!(matches!(
            claim_of(Some(&raw(r#"{"_meta":{"io.modelcontextprotocol/protocolVersion":7}}"#))),
            Claim::Malformed(_)
        ));
    }

    #[tokio::test]
    async fn both_eras_list_and_call_and_only_the_modern_one_discovers() {
        let (core, _) = testing::server(None);
        let (version, init) = initialize(&core, Some(&raw(r#"{"protocolVersion":"2025-06-18"}"#)));
        assert_eq!(version, "2025-06-18");
        assert!(init.contains("\"tools\""));
        assert_eq!(initialize(&core, Some(&raw(r#"{"protocolVersion":"1999-01-01"}"#))).0, LATEST_PROTOCOL_VERSION);
        let legacy: Value =
            serde_json::from_str(&answer(&core, "tools/list", None, Era::Legacy).await.unwrap()).unwrap();
        assert!(legacy.get("resultType").is_none());
        let modern: Value =
            serde_json::from_str(&answer(&core, "tools/list", None, Era::Modern("2026-07-28")).await.unwrap()).unwrap();
        assert_eq!(
            (modern["resultType"].as_str(), modern["tools"].as_array().map(Vec::len)),
            (Some("complete"), Some(4))
        );
        assert_eq!(answer(&core, "server/discover", None, Era::Legacy).await.unwrap_err().code, METHOD_NOT_FOUND);
        assert_eq!(answer(&core, "ping", None, Era::Modern("2026-07-28")).await.unwrap_err().code, METHOD_NOT_FOUND);
        let discovered: Value =
            serde_json::from_str(&answer(&core, "server/discover", None, Era::Modern("2026-07-28")).await.unwrap())
                .unwrap();
        assert_eq!(discovered["supportedVersions"][0], "2026-07-28");
        assert_eq!(discovered["_meta"]["io.modelcontextprotocol/serverInfo"]["name"], "unit");
        assert_eq!(complete("{}"), r#"{"resultType":"complete"}"#);
        let called = answer(&core, "tools/call", Some(&raw(r#"{"name":"echo","arguments":{"a":1}}"#)), Era::Legacy)
            .await
            .unwrap();
        assert!(called.contains("\"structuredContent\":{\"a\":1}"), "{called}");
        let unknown = answer(&core, "tools/call", Some(&raw(r#"{"name":"nope"}"#)), Era::Legacy).await.unwrap_err();
        assert_eq!(unknown.code, INVALID_PARAMS);
        let bad_key =
            answer(&core, "tools/call", Some(&raw(r#"{"name":"echo","_meta":{"idempotencyKey":5}}"#)), Era::Legacy)
                .await
                .unwrap_err();
        assert_eq!(bad_key.code, INVALID_PARAMS);
    }

    #[test]
    fn storage_and_internal_failures_reach_a_remote_client_in_general_terms() {
        let storage =
            remote_message(&McpError::Storage("journal: cannot open /home/app/secret/journal.db: locked".into()));
        let internal =
            remote_message(&McpError::Internal("the execute of \"x\" replied with malformed data: at line 1".into()));
        assert!(!storage.contains("/home") && storage.contains("mcp_storage_error"), "{storage}");
        assert!(!internal.contains("malformed") && internal.contains("mcp_internal_error"), "{internal}");
        assert!(remote_message(&McpError::Timeout { after_ms: 5 }).contains("mcp_timeout"));
    }

    /// What the host was told of one request answered in `era` (its report as JSON).
    async fn served_report(core: &Arc<McpServerCore>, host: &testing::Host, id: &str, method: &str) -> Value {
        let (id, era) = (raw(id), Era::Modern("2026-07-28"));
        let served = Served::start(core, &id, method, None);
        let outcome = match method {
            "initialize" => Ok(initialize(core, None).1),
            _ => answer(core, method, None, era).await,
        };
        served.response(&outcome);
        serde_json::from_str(host.served.lock().last().expect("a report")).unwrap()
    }

    #[tokio::test]
    async fn a_report_names_only_a_method_this_server_answers() {
        let (core, host) = testing::server(None);
        // Every method it names is one the server answers in some era.
        for method in SERVED_METHODS {
            let answered = match method {
                "initialize" => true,
                _ => [Era::Legacy, Era::Modern("2026-07-28")].into_iter().any(|era| {
                    futures_util::FutureExt::now_or_never(answer(&core, method, None, era))
                        .is_some_and(|outcome| !matches!(outcome, Err(e) if e.code == METHOD_NOT_FOUND))
                }),
            };
            assert!(answered, "{method}");
        }
        for method in ["tools/list", "server/discover"] {
            assert_eq!(served_report(&core, &host, "1", method).await["method"], method);
        }
        for i in 0..20 {
            let report = served_report(&core, &host, "1", &format!("made/up-{i}")).await;
            assert_eq!(
                (report["method"].as_str(), report["rpcCode"].as_i64()),
                (Some("_OTHER"), Some(METHOD_NOT_FOUND))
            );
        }
    }

    #[tokio::test]
    async fn a_report_gives_a_request_id_only_when_it_is_short_printable_ascii() {
        let (core, host) = testing::server(None);
        let longest = format!("\"{}\"", "a".repeat(crate::limits::MAX_REPORTED_REQUEST_ID_CHARS));
        for (id, reported) in
            [("7", Some("7")), ("\"req-9\"", Some("req-9")), (longest.as_str(), Some(&longest[1..longest.len() - 1]))]
        {
            assert_eq!(served_report(&core, &host, id, "tools/list").await["requestId"].as_str(), reported, "{id}");
        }
        let too_long = format!("\"{}\"", "a".repeat(crate::limits::MAX_REPORTED_REQUEST_ID_CHARS + 1));
        let long_number = "1".repeat(crate::limits::MAX_REPORTED_REQUEST_ID_CHARS + 1);
        for id in [too_long.as_str(), long_number.as_str(), r#""line\nbreak""#, r#""caf\u00e9""#, r#""tab\tid""#] {
            let report = served_report(&core, &host, id, "tools/list").await;
            assert!(report.get("requestId").is_none(), "{id}: {report}");
        }
    }

    #[tokio::test]
    async fn a_replayed_call_is_reported_and_one_that_ran_execute_is_not() {
        let (core, host) = testing::server(Some(Arc::new(crate::store::journal::MemoryJournal::new())));
        let params = raw(r#"{"name":"echo","arguments":{"a":1},"_meta":{"idempotencyKey":"k-1"}}"#);
        let id = raw("1");
        for _ in 0..2 {
            let served = Served::start(&core, &id, "tools/call", Some(&params));
            let outcome = served.answering(answer(&core, "tools/call", Some(&params), Era::Legacy)).await;
            assert!(outcome.is_ok());
            served.response(&outcome);
        }
        let reports = host.served.lock().clone();
        assert_eq!(reports.len(), 1, "the replay only: {reports:?}");
        let report: Value = serde_json::from_str(&reports[0]).unwrap();
        assert_eq!((report["method"].as_str(), report["tool"].as_str()), (Some("tools/call"), Some("echo")));
        assert!(report.get("rpcCode").is_none() && report.get("isError").is_none());
        // Arguments the schema refuses: an error result, answered without `execute`.
        let params = raw(r#"{"name":"strict","arguments":{}}"#);
        let served = Served::start(&core, &id, "tools/call", Some(&params));
        served.response(&served.answering(answer(&core, "tools/call", Some(&params), Era::Legacy)).await);
        let report: Value = serde_json::from_str(host.served.lock().last().unwrap()).unwrap();
        assert_eq!((report["tool"].as_str(), report["isError"].as_bool()), (Some("strict"), Some(true)));
    }

    #[tokio::test]
    async fn a_host_that_records_no_telemetry_is_told_of_nothing() {
        let (core, host) = testing::server_with(None, false);
        let id = raw("1");
        for method in ["tools/list", "made/up"] {
            let served = Served::start(&core, &id, method, None);
            served.response(&answer(&core, method, None, Era::Legacy).await);
        }
        let unknown = raw(r#"{"name":"nope"}"#);
        let served = Served::start(&core, &id, "tools/call", Some(&unknown));
        served.response(&answer(&core, "tools/call", Some(&unknown), Era::Legacy).await);
        assert!(host.served.lock().is_empty());
        let (core, host) = testing::server_with(None, true);
        Served::start(&core, &id, "tools/list", None).response(&answer(&core, "tools/list", None, Era::Legacy).await);
        assert_eq!(host.served.lock().len(), 1);
    }

    #[test]
    fn responses_echo_the_id_and_carry_error_data() {
        let id = raw("\"a-1\"");
        assert_eq!(response(&id, &Ok("{}".into())), r#"{"jsonrpc":"2.0","id":"a-1","result":{}}"#);
        let error: Value =
            serde_json::from_str(&error_response(None, &RpcError::unsupported_version("2099-01-01"))).unwrap();
        assert_eq!(error["id"], Value::Null);
        assert_eq!(error["error"]["data"]["requested"], "2099-01-01");
    }
}
