//! The connection's tests: a recording transport, the pending map, deadlines, panics, elicitations.

use super::*;
use crate::session::outcome::tool_outcome;
use futures_util::future::BoxFuture;
use std::sync::atomic::AtomicUsize;

/// A transport that records what the connection sends.
#[derive(Default)]
struct Recorder {
    sent: Mutex<Vec<String>>,
}

impl Transport for Recorder {
    fn send(&self, message: Outbound) -> Result<()> {
        self.sent.lock().push(message.json);
        Ok(())
    }
    fn close(&self) -> BoxFuture<'static, ()> {
        Box::pin(async {})
    }
}

#[derive(Default)]
struct Events {
    lost: Mutex<Option<McpError>>,
    /// Whether operations go anywhere, and those told.
    wants_operations: std::sync::atomic::AtomicBool,
    operations: Mutex<Vec<crate::telemetry::operation::Operation>>,
}

impl ConnectionEvents for Events {
    fn tools_list_changed(&self) {}
    fn connection_lost(&self, reason: &McpError) {
        *self.lost.lock() = Some(reason.clone());
    }
    fn operation(&self, operation: crate::telemetry::operation::Operation) {
        self.operations.lock().push(operation);
    }
    fn wants_operations(&self) -> bool {
        self.wants_operations.load(Ordering::SeqCst)
    }
}

struct Harness {
    shared: Arc<ConnectionCore>,
    transport: Arc<dyn Transport>,
    recorder: Arc<Recorder>,
    events: Arc<Events>,
}

type Outcome = Result<String>;

impl Harness {
    fn new() -> Harness {
        let events = Arc::new(Events::default());
        let shared = ConnectionCore::new(events.clone(), None, false);
        let recorder = Arc::new(Recorder::default());
        let transport: Arc<dyn Transport> = recorder.clone();
        let _ = shared.transport.set(Arc::downgrade(&transport));
        start_sweeper(&shared);
        shared.opened();
        Harness { shared, transport, recorder, events }
    }

    /// Start a request whose outcome arrives on the returned channel (through a callback, as tool
    /// calls do); the callback panics after delivering when `panics` is set.
    fn start(&self, timeout_ms: u64, panics: bool) -> (RequestId, tokio::sync::mpsc::UnboundedReceiver<Outcome>) {
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
        let done: Completion = Box::new(move |outcome| {
            let _ = tx.send(tool_outcome(outcome).map(|raw| raw.get().to_owned()));
            if panics {
                panic!("injected panic in a completion");
            }
        });
        let id = self.shared.next_id.load(Ordering::SeqCst);
        let message = self.shared.register(
            "tools/call",
            None,
            |_, _| None,
            Duration::from_millis(timeout_ms),
            None,
            Reply::Callback(done),
        );
        // None when it was answered at once (the connection had ended).
        if let Some(message) = message {
            self.shared.dispatch(&self.transport, vec![message]);
        }
        (id, rx)
    }

    fn receive(&self, frame: &str) -> bool {
        self.shared.on_message(frame.as_bytes())
    }
}

async fn outcome(rx: &mut tokio::sync::mpsc::UnboundedReceiver<Outcome>) -> Outcome {
    tokio::time::timeout(Duration::from_secs(5), rx.recv()).await.expect("the request settles").expect("an outcome")
}

fn code(outcome: &Outcome) -> &'static str {
    outcome.as_ref().map_or_else(McpError::code, |_| "ok")
}

fn response(id: RequestId, result: &str) -> String {
    format!(r#"{{"jsonrpc":"2.0","id":{id},"result":{result}}}"#)
}

struct Heard(Mutex<Vec<crate::progress::Progress>>);

impl crate::progress::ProgressListener for Heard {
    fn progress(&self, update: crate::progress::Progress) {
        self.0.lock().push(update);
    }
}

#[tokio::test]
async fn only_a_listening_request_hears_its_valid_progress_and_nothing_after_it_settles() {
    let harness = Harness::new();
    let heard = Arc::new(Heard(Mutex::new(Vec::new())));
    let (listening, mut rx) = harness.start(60_000, false);
    let (_, mut deaf) = harness.start(60_000, false);
    {
        let mut state = harness.shared.state.lock();
        state.pending.get_mut(&listening).unwrap().progress = Some(heard.clone());
    }
    let progress = |token: RequestId, body: &str| {
        format!(r#"{{"jsonrpc":"2.0","method":"notifications/progress","params":{{"progressToken":{token},{body}}}}}"#)
    };
    assert!(harness.receive(&progress(listening, r#""progress":1,"total":2"#)));
    assert!(harness.receive(&progress(listening, r#""progress":"x""#)));
    assert!(harness.receive(&progress(listening + 1, r#""progress":1"#)));
    assert!(harness.receive(&response(listening, r#"{"content":[]}"#)));
    assert_eq!(code(&outcome(&mut rx).await), "ok");
    assert!(harness.receive(&progress(listening, r#""progress":2,"total":2"#)));
    assert_eq!(*heard.0.lock(), [crate::progress::Progress { progress: 1.0, total: Some(2.0), message: None }]);
    assert!(harness.receive(&response(listening + 1, r#"{"content":[]}"#)));
    assert_eq!(code(&outcome(&mut deaf).await), "ok");
}

#[tokio::test]
async fn an_engine_request_is_an_operation_only_when_operations_go_somewhere() {
    let harness = Harness::new();
    for wanted in [false, true] {
        harness.events.wants_operations.store(wanted, Ordering::SeqCst);
        let id = harness.shared.next_id.load(Ordering::SeqCst);
        let opts = RequestOptions { timeout: Duration::from_secs(5), abort: None };
        let listing = request(&harness.shared, &harness.transport, "tools/list", None, |_| None, &opts, false);
        let answering = async {
            tokio::time::sleep(Duration::from_millis(20)).await;
            assert!(harness.receive(&response(id, r#"{"tools":[]}"#)));
        };
        let (listed, ()) = tokio::join!(listing, answering);
        assert!(listed.is_ok());
        let told: Vec<_> = harness.events.operations.lock().drain(..).collect();
        match told.as_slice() {
            [] => assert!(!wanted),
            [crate::telemetry::operation::Operation::Request { method, request_id, .. }] => {
                assert!(wanted);
                assert_eq!((method.as_str(), *request_id), ("tools/list", Some(id)));
            }
            other => panic!("{other:?}"),
        }
    }
}

#[tokio::test]
async fn a_progress_notification_restarts_the_idle_timeout_without_a_listener() {
    let harness = Harness::new();
    let (id, mut rx) = harness.start(300, false);
    for _ in 0..4 {
        tokio::time::sleep(Duration::from_millis(150)).await;
        assert!(harness.receive(&format!(
            r#"{{"jsonrpc":"2.0","method":"notifications/progress","params":{{"progressToken":{id},"progress":1}}}}"#
        )));
    }
    assert!(harness.receive(&response(id, r#"{"content":[]}"#)));
    assert_eq!(code(&outcome(&mut rx).await), "ok", "600 ms under a 300 ms idle timeout, kept alive by progress");
}

#[tokio::test]
async fn a_panicking_completion_does_not_take_other_completions_with_it() {
    let harness = Harness::new();
    let (a, mut a_rx) = harness.start(60_000, true);
    let (b, mut b_rx) = harness.start(60_000, false);
    let batch = format!("[{},{}]", response(a, r#"{"content":[]}"#), response(b, r#"{"content":[]}"#));
    assert!(harness.receive(&batch));
    assert_eq!(code(&outcome(&mut a_rx).await), "ok");
    assert_eq!(code(&outcome(&mut b_rx).await), "ok");
    // The connection is intact: a later request still completes.
    let (c, mut c_rx) = harness.start(60_000, false);
    assert!(harness.receive(&response(c, "{}")));
    assert_eq!(code(&outcome(&mut c_rx).await), "ok");
}

#[tokio::test]
async fn a_completion_panicking_on_timeout_leaves_the_other_timeouts_running() {
    let harness = Harness::new();
    let (_, mut first) = harness.start(20, true);
    let (_, mut second) = harness.start(200, false);
    assert_eq!(code(&outcome(&mut first).await), "mcp_timeout");
    assert_eq!(code(&outcome(&mut second).await), "mcp_timeout");
}

#[tokio::test]
async fn a_panicking_sweeper_ends_the_connection_so_every_request_settles() {
    let harness = Harness::new();
    let (_, mut pending) = harness.start(60_000, false);
    harness.shared.sweep_fault.store(true, Ordering::SeqCst);
    harness.shared.sweep_wake.notify_one();
    assert_eq!(code(&outcome(&mut pending).await), "mcp_internal_error");
    assert_eq!(harness.events.lost.lock().as_ref().map(McpError::code), Some("mcp_internal_error"));
    let (_, mut later) = harness.start(60_000, false);
    assert_eq!(code(&outcome(&mut later).await), "mcp_internal_error", "later requests fail at once");
}

#[tokio::test]
async fn deep_nesting_fails_only_the_call_it_answers() {
    let harness = Harness::new();
    let deep = "[".repeat(100_000) + &"]".repeat(100_000);
    let (a, mut a_rx) = harness.start(60_000, false);
    let (b, mut b_rx) = harness.start(60_000, false);
    let (c, mut c_rx) = harness.start(60_000, false);
    let deep_error =
        format!(r#"{{"jsonrpc":"2.0","id":{a},"error":{{"code":-32000,"message":"boom","data":{deep}}}}}"#);
    assert!(harness.receive(&deep_error));
    let error = outcome(&mut a_rx).await.unwrap_err();
    assert_eq!((error.code(), error.to_string().as_str()), ("mcp_protocol_error", "MCP error -32000: boom"));
    assert!(harness.receive(&response(b, &format!(r#"{{"structuredContent":{deep}}}"#))));
    assert_eq!(outcome(&mut b_rx).await, Err(McpError::ResultTooDeep { max_depth: MAX_JSON_DEPTH }));
    assert!(harness.receive(&response(c, r#"{"content":[{"type":"text","text":"fine"}]}"#)));
    assert_eq!(code(&outcome(&mut c_rx).await), "ok");
    assert!(harness.events.lost.lock().is_none());
}

#[tokio::test]
async fn results_up_to_the_depth_limit_pass_untouched() {
    let harness = Harness::new();
    // The result object is one level; the rest brings it to exactly MAX_JSON_DEPTH.
    let nested = "[".repeat(MAX_JSON_DEPTH - 1) + &"]".repeat(MAX_JSON_DEPTH - 1);
    let result = format!(r#"{{"structuredContent":{nested}}}"#);
    let (id, mut rx) = harness.start(60_000, false);
    assert!(harness.receive(&response(id, &result)));
    assert_eq!(outcome(&mut rx).await, Ok(result));
}

#[tokio::test]
async fn an_undecodable_response_with_a_readable_id_fails_only_its_call() {
    let harness = Harness::new();
    let (a, mut a_rx) = harness.start(60_000, false);
    let (b, mut b_rx) = harness.start(60_000, false);
    let (c, mut c_rx) = harness.start(60_000, false);
    let mut invalid_utf8 = format!(r#"{{"jsonrpc":"2.0","id":{a},"result":{{"text":"#).into_bytes();
    invalid_utf8.extend_from_slice(b"\"\xff\xfe\"}}");
    assert!(harness.shared.on_message(&invalid_utf8));
    assert_eq!(code(&outcome(&mut a_rx).await), "mcp_protocol_error");
    assert!(harness.receive(&format!(r#"{{"jsonrpc":"2.0","id":{b},"error":{{"code":"x","message":5}}}}"#)));
    assert_eq!(code(&outcome(&mut b_rx).await), "mcp_protocol_error");
    assert!(harness.receive(&format!(r#"{{"jsonrpc":"2.0","id":{c}}}"#)));
    let error = outcome(&mut c_rx).await.unwrap_err();
    assert!(error.to_string().contains("neither result nor error"), "{error}");
    // Garbage that answers no request of ours still ends the session.
    assert!(!harness.receive("this is not json"));
    assert!(!harness.receive(r#"{"jsonrpc":"2.0","id":999,"result":"#));
}

#[tokio::test]
async fn unknown_duplicate_and_late_responses_are_ignored() {
    let harness = Harness::new();
    let calls = Arc::new(AtomicUsize::new(0));
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let counted = calls.clone();
    let done: Completion = Box::new(move |outcome| {
        counted.fetch_add(1, Ordering::SeqCst);
        let _ = tx.send(outcome.map(|raw| raw.get().to_owned()));
    });
    let id = harness.shared.next_id.load(Ordering::SeqCst);
    let message =
        harness.shared.register("tools/call", None, |_, _| None, Duration::from_secs(60), None, Reply::Callback(done));
    harness.shared.dispatch(&harness.transport, vec![message.unwrap()]);
    assert!(harness.receive(&response(id + 1_000, r#""unknown""#)));
    assert!(harness.receive(&response(id, r#""first""#)));
    assert!(harness.receive(&response(id, r#""second""#)));
    assert_eq!(outcome(&mut rx).await, Ok(r#""first""#.to_owned()));
    assert_eq!(calls.load(Ordering::SeqCst), 1);

    // A response after the caller aborted is dropped too.
    let abort = AbortHandle::default();
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let done: Completion = Box::new(move |outcome| {
        let _ = tx.send(outcome.map(|raw| raw.get().to_owned()));
    });
    let id = harness.shared.next_id.load(Ordering::SeqCst);
    let message = harness.shared.register(
        "tools/call",
        None,
        |_, _| None,
        Duration::from_secs(60),
        Some(&abort),
        Reply::Callback(done),
    );
    harness.shared.dispatch(&harness.transport, vec![message.unwrap()]);
    abort.abort();
    assert_eq!(code(&outcome(&mut rx).await), "mcp_aborted");
    assert!(harness.recorder.sent.lock().last().unwrap().contains("notifications/cancelled"));
    assert!(harness.receive(&response(id, r#""late""#)));
    assert!(rx.try_recv().is_err());
    assert!(harness.events.lost.lock().is_none());
}

/// The host's side of elicitation, driven by the test: each request arrives with the sender of its answer.
type Asked = (String, oneshot::Sender<std::result::Result<String, String>>);

struct Host(tokio::sync::mpsc::UnboundedSender<Asked>);

impl crate::hooks::Callback<String, String> for Host {
    fn call(&self, request: String) -> BoxFuture<'static, std::result::Result<String, String>> {
        let (tx, rx) = oneshot::channel();
        let _ = self.0.send((request, tx));
        Box::pin(async move { rx.await.unwrap_or_else(|_| Err("dropped".into())) })
    }
}

fn elicitation_harness(
    modes: elicitation::Modes,
    timeout: Duration,
) -> (Harness, tokio::sync::mpsc::UnboundedReceiver<Asked>) {
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    let elicitor = Elicitor { server: "srv".into(), modes, callback: Arc::new(Host(tx)), timeout, withdrawn: None };
    let events = Arc::new(Events::default());
    let shared = ConnectionCore::new(events.clone(), Some(Arc::new(elicitor)), false);
    let recorder = Arc::new(Recorder::default());
    let transport: Arc<dyn Transport> = recorder.clone();
    let _ = shared.transport.set(Arc::downgrade(&transport));
    start_sweeper(&shared);
    shared.opened();
    (Harness { shared, transport, recorder, events }, rx)
}

const FORM: &str = r#"{"message":"Your name?","requestedSchema":{"type":"object","properties":{"name":{"type":"string","default":"Ada"},"n":{"type":"integer"}}}}"#;

fn elicit(id: &str, params: &str) -> String {
    format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"elicitation/create","params":{params}}}"#)
}

/// The answers sent so far, parsed.
fn sent(harness: &Harness) -> Vec<serde_json::Value> {
    harness.recorder.sent.lock().iter().map(|m| serde_json::from_str(m).unwrap()).collect()
}

async fn answered(harness: &Harness, count: usize) -> Vec<serde_json::Value> {
    for _ in 0..500 {
        if harness.recorder.sent.lock().len() >= count {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    sent(harness)
}

#[tokio::test]
async fn an_elicitation_is_answered_by_the_host_with_defaults_and_checked() {
    let (harness, mut host) = elicitation_harness(elicitation::Modes::default(), Duration::from_secs(60));
    assert!(harness.receive(&elicit(r#""e1""#, FORM)));
    let (request, reply) = host.recv().await.unwrap();
    let request: serde_json::Value = serde_json::from_str(&request).unwrap();
    assert_eq!(request["server"], "srv");
    assert_eq!(request["request"]["message"], "Your name?");
    reply.send(Ok(r#"{"action":"accept","content":{"n":3}}"#.into())).unwrap();
    let sent = answered(&harness, 1).await;
    assert_eq!(
        sent,
        vec![
            serde_json::json!({"jsonrpc":"2.0","id":"e1","result":{"action":"accept","content":{"name":"Ada","n":3}}})
        ]
    );

    // A wrong type is not sent as accept; a throwing host declines.
    assert!(harness.receive(&elicit("2", FORM)));
    host.recv().await.unwrap().1.send(Ok(r#"{"action":"accept","content":{"n":"3"}}"#.into())).unwrap();
    assert!(harness.receive(&elicit("3", FORM)));
    host.recv().await.unwrap().1.send(Err("host failure".into())).unwrap();
    let sent = answered(&harness, 3).await;
    assert_eq!(sent[1]["result"], serde_json::json!({"action":"decline"}));
    assert_eq!(sent[2]["result"], serde_json::json!({"action":"decline"}));
    assert!(!harness.recorder.sent.lock().concat().contains("host failure"));
}

#[tokio::test]
async fn elicitations_in_flight_are_bounded_and_the_excess_refused_at_once() {
    let (harness, mut host) = elicitation_harness(elicitation::Modes::default(), Duration::from_secs(60));
    let flood = MAX_ELICITATIONS_IN_FLIGHT + 3;
    for id in 0..flood {
        assert!(harness.receive(&elicit(&id.to_string(), FORM)));
    }
    let refused = sent(&harness);
    assert_eq!(refused.len(), 3, "the excess is answered at once");
    assert!(refused.iter().all(|r| r["error"]["code"] == elicitation::BUSY_ERROR_CODE));
    let mut open = Vec::new();
    while let Ok(asked) = host.try_recv() {
        open.push(asked);
    }
    assert_eq!(open.len(), MAX_ELICITATIONS_IN_FLIGHT, "the host sees only what is in flight");
    // A duplicate id is refused too; an answer frees a slot.
    assert!(harness.receive(&elicit("0", FORM)));
    assert_eq!(sent(&harness).len(), 4);
    open.pop().unwrap().1.send(Ok(r#"{"action":"cancel"}"#.into())).unwrap();
    answered(&harness, 5).await;
    assert!(harness.receive(&elicit(r#""next""#, FORM)));
    assert!(tokio::time::timeout(Duration::from_secs(5), host.recv()).await.unwrap().is_some());
}

#[tokio::test]
async fn undeclared_modes_and_bad_schemas_are_invalid_params_and_nothing_is_asked() {
    let (harness, mut host) = elicitation_harness(elicitation::Modes::default(), Duration::from_secs(60));
    let url = r#"{"mode":"url","message":"m","url":"https://example.com/","elicitationId":"x"}"#;
    assert!(harness.receive(&elicit("1", url)));
    assert!(harness.receive(&elicit(
        "2",
        r#"{"message":"m","requestedSchema":{"type":"object","properties":{"a":{"type":"object"}}}}"#
    )));
    let sent = sent(&harness);
    assert!(sent.iter().all(|r| r["error"]["code"] == INVALID_PARAMS), "{sent:?}");
    assert!(host.try_recv().is_err());
}

#[tokio::test]
async fn a_timed_out_elicitation_is_cancelled_and_a_server_cancelled_one_keeps_its_slot_until_the_host_settles() {
    let (harness, mut host) = elicitation_harness(elicitation::Modes::default(), Duration::from_millis(50));
    assert!(harness.receive(&elicit("7", FORM)));
    let _never_answered = host.recv().await.unwrap();
    let sent = answered(&harness, 1).await;
    assert_eq!(sent[0], serde_json::json!({"jsonrpc":"2.0","id":7,"result":{"action":"cancel"}}));

    let (harness, mut host) = elicitation_harness(elicitation::Modes::default(), Duration::from_secs(60));
    assert!(harness.receive(&elicit(r#""c""#, FORM)));
    let (_, reply) = host.recv().await.unwrap();
    assert!(harness.receive(r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"c"}}"#));
    tokio::time::sleep(Duration::from_millis(50)).await;
    // The prompt is still the host's: cancelling must not let a server open more than the bound.
    assert!(harness.shared.elicitation_open());
    let _ = reply.send(Ok(r#"{"action":"accept","content":{"name":"Late"}}"#.into()));
    for _ in 0..500 {
        if !harness.shared.elicitation_open() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(!harness.shared.elicitation_open(), "the slot is freed once the host settled");
    assert!(harness.recorder.sent.lock().is_empty(), "a cancelled request gets no answer");
}

#[tokio::test]
async fn an_open_elicitation_holds_the_servers_timeouts_and_the_end_stops_it() {
    let (harness, mut host) = elicitation_harness(elicitation::Modes::default(), Duration::from_secs(60));
    let (_, mut call) = harness.start(100, false);
    assert!(harness.receive(&elicit("9", FORM)));
    let (_, reply) = host.recv().await.unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(call.try_recv().is_err(), "the call waits on the person, not on the server");
    harness.shared.end(McpError::Closed);
    tokio::time::timeout(Duration::from_secs(5), harness.shared.elicitations_stopped())
        .await
        .expect("every elicitation task stops");
    assert!(reply.is_closed());
    assert_eq!(code(&outcome(&mut call).await), "mcp_connection_closed");
    let sent = harness.recorder.sent.lock().clone();
    assert!(sent.len() == 1 && sent[0].contains("tools/call"), "only the call went out, no answer: {sent:?}");
}

#[tokio::test]
async fn without_an_elicitor_elicitation_is_method_not_found() {
    let harness = Harness::new();
    assert!(harness.receive(&elicit("1", FORM)));
    assert_eq!(sent(&harness)[0]["error"]["code"], METHOD_NOT_FOUND);
}

#[tokio::test]
async fn server_requests_get_small_answers_or_none() {
    let harness = Harness::new();
    let huge = "m".repeat(1_000_000);
    assert!(harness.receive(&format!(r#"{{"jsonrpc":"2.0","id":1,"method":"{huge}"}}"#)));
    assert!(harness.receive(&format!(r#"{{"jsonrpc":"2.0","id":"{huge}","method":"ping"}}"#)));
    assert!(harness.receive(r#"{"jsonrpc":"2.0","id":{"nested":[1]},"method":"ping"}"#));
    assert!(harness.receive(r#"{"jsonrpc":"2.0","id":"p","method":"ping"}"#));
    let sent = harness.recorder.sent.lock().clone();
    assert_eq!(sent.len(), 2, "unechoable ids get no answer");
    assert!(sent[0].len() < 512 && sent[0].contains("-32601"), "{}", sent[0].len());
    assert_eq!(sent[1], r#"{"jsonrpc":"2.0","id":"p","result":{}}"#);
}
