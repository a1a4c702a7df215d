//! Streamable HTTP: every message is a POST; a response comes back as a JSON body or as an event stream
//! that may carry requests and notifications before the result. The session id from `initialize` rides
//! on every later request, and so does the negotiated protocol version.
//!
//! Two recoveries, both narrow. A response stream that ends before its result, after the server gave it
//! an event id, is resumed with a GET carrying `Last-Event-ID` after exactly the server's `retry` delay.
//! A 404 to a request that carried a session id means the session expired before the request was
//! processed: the transport re-initializes once and sends that request again. Nothing else is ever
//! resent: after a request has gone out, a transport failure fails the call (no replay of mutations).
//!
//! Bounds: every request goes through `egress` with a deadline; a re-initialize runs under one too.
//! Every task (requests, the GET stream, notification and reply POSTs) lives in the transport's
//! `TaskSet`, so `close()` cancels them all and finishes within `HTTP_CLOSE_BOUND_MS` whatever the
//! server does; notifications and replies are bounded by `http::SideQueue`.

use super::event_stream::{EventStreamParser, DEFAULT_EVENT_TYPE};
use super::http::{
    self, side_queue, HttpBase, HttpSpec, Presented, SideQueue, StreamEnd, ACCEPT_BOTH, APPLICATION_JSON, EVENT_STREAM,
    HEADER_LAST_EVENT_ID, HEADER_PROTOCOL_VERSION, HEADER_SESSION_ID,
};
use super::{MessageSink, ModernRequest, Outbound, Transport, TransportOptions};
use crate::egress::Exchange;
use crate::error::{McpError, Result};

use crate::limits::{
    DEFAULT_STREAM_RETRY_MS, HTTP_REACHABILITY_PROBES, HTTP_REACHABILITY_PROBE_TIMEOUT_MS,
    HTTP_SESSION_DELETE_TIMEOUT_MS, MAX_GET_STREAM_FAILURES, MAX_GET_STREAM_OPENING_WAIT_MS, MAX_SSE_RETRY_MS,
    MAX_STREAM_RESUMES,
};
use crate::protocol::jsonrpc::{self, Message, RawMessage, RequestId};
use crate::protocol::mcp::InitializeResult;
use futures_util::future::BoxFuture;
use parking_lot::Mutex;
use reqwest::header::{HeaderName, HeaderValue, ACCEPT, CONTENT_TYPE};
use reqwest::{Method, Response, StatusCode};
use std::collections::HashMap;
use std::ops::ControlFlow;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::task::AbortHandle;

/// How often a request waiting on a login has its idle timeout restarted.
const AUTHORIZATION_KEEPALIVE_MS: u64 = 1_000;

/// What a POST is and what it may still do.
#[derive(Clone, Default)]
struct Post {
    request_id: Option<RequestId>,
    is_initialize: bool,
    /// Sent again after a refusal for authorization (never a tool call).
    resendable: bool,
    may_reinitialize: bool,
    may_reauthorize: bool,
    /// A modern-era request: its headers, no session, no resumption.
    modern: Option<Arc<ModernRequest>>,
    /// Headers for this message only (`Mcp-Param-*`).
    extra_headers: Arc<[(HeaderName, HeaderValue)]>,
    /// Its stream may stay quiet for good (`subscriptions/listen`): no idle limit.
    long_lived: bool,
    /// A `tools/call`'s tool: sent on a renewed session only once the tools were vetted again.
    tool: Option<Arc<str>>,
    /// A `tools/call`'s check that its tool is still as it was approved (see `Outbound::admitted`).
    admitted: Option<Arc<dyn super::AdmittedCall>>,
    /// Already sent again once with a fresh DPoP nonce: a second `use_dpop_nonce` fails it.
    renonced: bool,
}

impl Post {
    fn request(id: RequestId, message: &mut Outbound) -> Post {
        Post {
            request_id: Some(id),
            is_initialize: message.is_initialize,
            resendable: message.resendable,
            may_reinitialize: true,
            may_reauthorize: true,
            modern: message.modern.take().map(Arc::new),
            extra_headers: std::mem::take(&mut message.extra_headers).into(),
            long_lived: message.long_lived,
            tool: message.tool.take().map(Arc::from),
            admitted: message.admitted.take(),
            renonced: false,
        }
    }

    fn notification() -> Post {
        Post { resendable: true, may_reinitialize: true, may_reauthorize: true, ..Post::default() }
    }
}

/// The server's `retry` delay, capped: a hostile value must not park a stream for days.
fn retry_delay(parser: &EventStreamParser) -> Duration {
    Duration::from_millis(parser.retry_ms.unwrap_or(DEFAULT_STREAM_RETRY_MS).min(MAX_SSE_RETRY_MS))
}

pub struct StreamableHttpTransport {
    shared: Arc<StreamableHttpCore>,
}

/// What the transport handle and its tasks (posts, the GET stream, session renewal) share.
struct StreamableHttpCore {
    base: HttpBase,
    session: Mutex<Session>,
    /// The `initialize` message, kept to start a new session if the server expires this one.
    initialize: Mutex<Option<bytes::Bytes>>,
    reinitializing: tokio::sync::Mutex<()>,
    /// The task of each request in flight, to stop it when the connection stops waiting.
    by_request: Mutex<HashMap<RequestId, AbortHandle>>,
    /// Notifications and replies: bounded, see `http::SideQueue`.
    side_posts: SideQueue,
    /// Set while a reachability check runs (see `check_reachable`): one at a time.
    probing: std::sync::atomic::AtomicBool,
    /// Where the standalone GET stream is: tool calls wait while it is `Opening` (see `wait_for_listening`).
    listening: tokio::sync::watch::Sender<Listening>,
}

/// The standalone GET stream's first opening, as tool calls see it.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Listening {
    /// No stream asked for (before the handshake, or never in the 2026-07-28 era).
    NotAsked,
    /// Asked for at this instant, not answered yet.
    Opening(Instant),
    /// Answered: open, refused or failed. Later reopenings hold nothing up.
    Answered,
}

impl std::ops::Deref for StreamableHttpCore {
    type Target = HttpBase;
    fn deref(&self) -> &HttpBase {
        &self.base
    }
}

#[derive(Default, Clone)]
struct Session {
    id: Option<HeaderValue>,
    protocol_version: Option<&'static str>,
    /// Bumped on each re-initialization, so concurrent 404s re-initialize once between them.
    generation: u64,
}

/// What a GET for the session's event stream found.
enum GetStream {
    Open(Response),
    /// 405 or another refusal: the server offers no stream.
    NotOffered,
    /// 404 on our session id: the session (of this generation) has expired.
    SessionExpired(u64),
}

impl StreamableHttpTransport {
    pub fn open(spec: &HttpSpec, sink: Arc<dyn MessageSink>, options: TransportOptions) -> Result<Arc<Self>> {
        let (side_posts, side_queue) = side_queue();
        let shared = Arc::new(StreamableHttpCore {
            base: HttpBase::new(spec, sink, options)?,
            session: Mutex::new(Session::default()),
            initialize: Mutex::new(None),
            reinitializing: tokio::sync::Mutex::new(()),
            by_request: Mutex::new(HashMap::new()),
            side_posts,
            probing: false.into(),
            listening: tokio::sync::watch::Sender::new(Listening::NotAsked),
        });
        let poster = shared.clone();
        side_queue.serve(&shared.tasks, shared.deadline(), move |body| {
            let shared = poster.clone();
            async move {
                let _ = shared.post(&body, Post::notification()).await;
            }
        });
        Ok(Arc::new(StreamableHttpTransport { shared }))
    }
}

impl Transport for StreamableHttpTransport {
    fn send(&self, message: Outbound) -> Result<()> {
        let shared = &self.shared;
        if shared.closed.load(Ordering::SeqCst) {
            return Err(McpError::Closed);
        }
        let mut message = message;
        let body = bytes::Bytes::from(std::mem::take(&mut message.json));
        if message.is_initialize {
            *shared.initialize.lock() = Some(body.clone());
        }
        let Some(id) = message.request_id else {
            // A flood of these (one reply per server ping) is dropped past the queue's bound.
            shared.side_posts.push(body);
            return Ok(());
        };
        let post = Post::request(id, &mut message);
        // The task waits for its abort handle to be filed, so a fast response can't leave a stale entry.
        let (filed, wait_filed) = tokio::sync::oneshot::channel::<()>();
        let task = shared.tasks.spawn({
            let shared = shared.clone();
            async move {
                let _ = wait_filed.await;
                if post.tool.is_some() {
                    shared.wait_for_listening().await;
                }
                if shared.closed.load(Ordering::SeqCst) {
                    return;
                }
                let outcome = shared.post(&body, post).await;
                shared.by_request.lock().remove(&id);
                if let Err(error) = outcome {
                    let unreachable = matches!(error, McpError::Unreachable(_));
                    shared.sink.on_request_failed(id, error.clone());
                    // The server is not there: the session can't be used, and the owner reconnects.
                    if unreachable {
                        shared.lost(error);
                    }
                }
            }
        });
        shared.by_request.lock().insert(id, task);
        let _ = filed.send(());
        Ok(())
    }

    fn closing_cancels(&self) -> bool {
        true
    }

    fn request_ended(&self, id: RequestId) {
        if let Some(task) = self.shared.by_request.lock().remove(&id) {
            task.abort();
        }
    }

    fn complete_handshake(
        &self,
        initialized: Outbound,
        protocol_version: &'static str,
    ) -> BoxFuture<'static, Result<()>> {
        let shared = self.shared.clone();
        Box::pin(async move {
            shared.session.lock().protocol_version = Some(protocol_version);
            let deadline = shared.deadline();
            let body = bytes::Bytes::from(initialized.json);
            tokio::time::timeout(deadline, shared.post(&body, Post::notification()))
                .await
                .unwrap_or(Err(McpError::Timeout { after_ms: deadline.as_millis() as u64 }))?;
            shared.listening.send_replace(Listening::Opening(Instant::now()));
            shared.tasks.spawn(shared.clone().listen());
            Ok(())
        })
    }

    fn close(&self) -> BoxFuture<'static, ()> {
        let shared = self.shared.clone();
        Box::pin(async move {
            if shared.closed.swap(true, Ordering::SeqCst) {
                return;
            }
            // Every request, notification, stream and re-initialize stops here, whatever the server does;
            // none of them holds anything close() waits for.
            shared.tasks.shutdown().await;
            shared.by_request.lock().clear();
            let session = shared.session.lock().clone();
            if session.id.is_some() {
                // Ending the session is a courtesy; a server that doesn't support it answers 405.
                let _ = shared
                    .send_proved(|presented| {
                        shared
                            .with_session_as(Method::DELETE, &session, presented)
                            .deadline(Duration::from_millis(HTTP_SESSION_DELETE_TIMEOUT_MS))
                    })
                    .await;
            }
        })
    }
}

/// The modern era's request headers: the version, the method and (for a call) the name it is about.
fn modern_headers(mut exchange: Exchange, modern: &ModernRequest) -> Exchange {
    exchange = exchange
        .protocol_header(HeaderName::from_static(HEADER_PROTOCOL_VERSION), HeaderValue::from_static(modern.version));
    if let Ok(method) = HeaderValue::from_str(&modern.method) {
        exchange = exchange.protocol_header(HeaderName::from_static(HEADER_MCP_METHOD), method);
    }
    if let Some(name) = modern
        .name
        .as_deref()
        .and_then(|n| HeaderValue::from_str(&crate::protocol::param_headers::encode_header_value(n)).ok())
    {
        exchange = exchange.origin_header(HeaderName::from_static(HEADER_MCP_NAME), name);
    }
    exchange
}

/// `Mcp-Method` and `Mcp-Name` (2026-07-28).
const HEADER_MCP_METHOD: &str = "mcp-method";
const HEADER_MCP_NAME: &str = "mcp-name";

impl Drop for StreamableHttpTransport {
    fn drop(&mut self) {
        // Dropped without close(): stop the background stream and every request task.
        self.shared.closed.store(true, Ordering::SeqCst);
        self.shared.tasks.cancel();
    }
}

impl StreamableHttpCore {
    /// The session can't be used any more (its server unreachable, a new session refused): end the
    /// connection, so every request waiting fails and the owner reconnects.
    fn lost(&self, reason: McpError) {
        if !self.closed.load(Ordering::SeqCst) {
            self.sink.on_closed(reason);
        }
    }

    /// Send a request built for the presentation in use (`build` is given it), other than a POST of a
    /// message (see `post`): the GET stream, its resumption, a renewed session's `initialize` and
    /// `initialized`, the session's DELETE. A DPoP-bound token's proof is shown every answer (its
    /// `DPoP-Nonce` kept for the next proof), and a `use_dpop_nonce` refusal, which the server answers
    /// before processing anything, is sent again once with a fresh proof carrying the new nonce.
    async fn send_proved(&self, build: impl Fn(Option<Presented>) -> Exchange) -> Result<Response> {
        let mut renonced = false;
        loop {
            let presented = self.spec.credential.current();
            let proof = presented.as_ref().and_then(|p| p.proof.clone());
            let response = self.egress.send(build(presented)).await?;
            let stale = proof.is_some_and(|p| p.on_answer(&self.spec.url, response.status(), response.headers()));
            if !stale || renonced {
                return Ok(response);
            }
            renonced = true;
        }
    }

    /// A request to the server's URL with the configured headers, the bearer and the session id (all
    /// for the server's origin only) and the negotiated protocol version.
    fn with_session_as(&self, method: Method, session: &Session, presented: Option<Presented>) -> Exchange {
        let mut exchange = self.exchange_as(method, self.spec.url.clone(), presented);
        if let Some(id) = &session.id {
            exchange = exchange.origin_header(HeaderName::from_static(HEADER_SESSION_ID), id.clone());
        }
        if let Some(version) = session.protocol_version {
            exchange = exchange
                .protocol_header(HeaderName::from_static(HEADER_PROTOCOL_VERSION), HeaderValue::from_static(version));
        }
        exchange
    }

    /// A JSON-RPC POST of `body`, as Streamable HTTP frames it.
    fn json_post(exchange: Exchange, body: &bytes::Bytes) -> Exchange {
        exchange
            .protocol_header(CONTENT_TYPE, HeaderValue::from_static(APPLICATION_JSON))
            .protocol_header(ACCEPT, HeaderValue::from_static(ACCEPT_BOTH))
            .body(body.clone())
    }

    /// Is the server there at all? Asked after an exchange broke: a stopped server is then found at once
    /// (the owner reconnects) rather than by the next call, when no event stream would have told.
    /// A `HEAD` has no effect on the server, and any answer, whatever its status, says it is there. It
    /// carries no session id (nor protocol version), so it reaches no session.
    fn check_reachable(self: &Arc<Self>) {
        if self.probing.swap(true, Ordering::SeqCst) {
            return;
        }
        let shared = self.clone();
        self.tasks.spawn(async move {
            let probe = Duration::from_millis(HTTP_REACHABILITY_PROBE_TIMEOUT_MS);
            for _ in 0..HTTP_REACHABILITY_PROBES {
                // Without the session id: a framework that routes HEAD to its GET handler would otherwise
                // open an event stream for the session.
                match shared.egress.send(shared.exchange(Method::HEAD, shared.spec.url.clone()).deadline(probe)).await {
                    Err(error @ McpError::Unreachable(_)) => {
                        shared.lost(error);
                        break;
                    }
                    // Another pooled connection the stopped server had closed, spent by this attempt.
                    Err(McpError::Transport(_)) => continue,
                    // It answered, or the check itself could not be made: no evidence of a loss.
                    _ => break,
                }
            }
            shared.probing.store(false, Ordering::SeqCst);
        });
    }

    /// POST one message and deliver whatever comes back.
    async fn post(self: &Arc<Self>, body: &bytes::Bytes, post: Post) -> Result<()> {
        let session = self.session.lock().clone();
        // A session that replaced an expired one may be a restarted server's: no call goes on it before
        // its tools were listed and vetted again, and the call's tool is still published and trusted there.
        if post.tool.is_some() && session.generation > 0 {
            if let Err(error) = self.sink.session_renewed(session.generation).await {
                // Tools that could not be vetted on it: no call may use this session; the owner reconnects.
                if error != McpError::Closed {
                    self.lost(McpError::Transport(format!("the tools of a new session could not be vetted: {error}")));
                }
                return Err(error);
            }
            if let Some(admitted) = &post.admitted {
                admitted.still_admitted()?;
            }
        }
        if let Some(authorization) = &self.spec.authorization {
            authorization.before_request().await?;
        }
        let (presented, sent_token) = self.spec.credential.snapshot();
        let proof = presented.as_ref().and_then(|p| p.proof.clone());
        let mut exchange = Self::json_post(self.with_session_as(Method::POST, &session, presented), body);
        if let Some(modern) = &post.modern {
            exchange = modern_headers(exchange, modern);
        }
        for (name, value) in post.extra_headers.iter() {
            exchange = exchange.origin_header(name.clone(), value.clone());
        }
        let mut response = match self.egress.send(exchange).await {
            Ok(response) => response,
            Err(error) => {
                // The exchange broke after its connection was made (reset, closed before an answer):
                // perhaps a pooled connection to a server that has since stopped.
                if matches!(error, McpError::Transport(_)) {
                    self.check_reachable();
                    // The request may have been delivered, and a call run, before the exchange broke.
                    if post.tool.is_some() {
                        return Err(error.after_send());
                    }
                }
                return Err(error);
            }
        };
        let status = response.status();
        // A DPoP-bound token: the answer's nonce is kept; a refusal for a stale nonce (the server did not
        // process the request) is sent again once with the new one, never more; a tool call too, whatever
        // `resendable` says (see `use_dpop_nonce` in transport/mod.rs for why).
        if proof.as_ref().is_some_and(|p| p.on_answer(&self.spec.url, status, response.headers())) {
            if post.renonced {
                return Err(McpError::Auth(
                    "the server refused a DPoP proof carrying the nonce it had just given (use_dpop_nonce again)"
                        .into(),
                ));
            }
            return Box::pin(self.post(body, Post { renonced: true, ..post })).await;
        }
        if let Some(authorization) = &self.spec.authorization {
            if let Some(authorizing) = authorization.on_response(status, response.headers(), sent_token) {
                return self.reauthorize(authorizing, body, post, status).await;
            }
        }
        if status == StatusCode::NOT_FOUND && session.id.is_some() && !post.is_initialize {
            if !post.may_reinitialize {
                return Err(McpError::Transport(
                    "the server expired the session again right after re-initializing".into(),
                ));
            }
            // The server never processed this request: start a new session and send it again, once (a
            // call only once the tools were vetted again on it: see the top of this function).
            if let Err(error) = self.reinitialize(session.generation).await {
                self.lost(McpError::Transport(format!(
                    "the server expired the session and a new one could not be started: {error}"
                )));
                return Err(error);
            }
            // A call's own renewal is vetted before it is sent (the top of this function); any other
            // request's is told to the owner in the background, so what the new session lacks (its
            // subscriptions, its log level) is asked of it now, not at the next call. Not awaited here:
            // the owner's vetting sends requests that could come back to this path.
            if post.tool.is_none() {
                let (shared, generation) = (self.clone(), self.session.lock().generation);
                self.tasks.spawn(async move {
                    if let Err(error) = shared.sink.session_renewed(generation).await {
                        if error != McpError::Closed {
                            shared.lost(McpError::Transport(format!(
                                "the tools of a new session could not be vetted: {error}"
                            )));
                        }
                    }
                });
            }
            return Box::pin(self.post(body, Post { may_reinitialize: false, ..post })).await;
        }
        // A session id belongs to the server's origin: one set by a redirect target is not taken.
        if post.is_initialize && response.url().origin() == self.spec.url.origin() {
            if let Some(id) = response.headers().get(HEADER_SESSION_ID) {
                self.session.lock().id = Some(http::owned_header(id));
            }
        }
        if !status.is_success() {
            // The modern era answers a refused request with its JSON-RPC error (an unsupported version,
            // an unknown method): delivered as that request's answer.
            if let (Some(_), Some(id), true) = (&post.modern, post.request_id, http::is_json(&response)) {
                let body =
                    crate::egress::read_body(&mut response, self.options.max_message_bytes, self.deadline()).await?;
                let answers_with_error = matches!(
                    serde_json::from_slice::<RawMessage>(&body).ok().and_then(RawMessage::classify),
                    Some(Message::Response { id: Some(answered), outcome: Err(_) }) if answered == id
                );
                if answers_with_error && self.sink.on_message(&body) {
                    return Ok(());
                }
                return Err(McpError::Transport(self.excerpt_of(status, &body)));
            }
            return Err(McpError::Transport(self.error_excerpt(response).await));
        }
        let request_id = post.request_id;
        // Accepted: a call failing from here on (its stream broken, its answer oversized) may have run.
        let is_call = post.tool.is_some();
        let sent = |error: McpError| if is_call { error.after_send() } else { error };
        if http::is_event_stream(&response) {
            return self
                .consume_stream(response, request_id, post.modern.is_none(), post.long_lived)
                .await
                .map_err(sent);
        }
        if status == StatusCode::ACCEPTED || !http::is_json(&response) {
            return match request_id {
                Some(_) => Err(McpError::Protocol(format!(
                    "the server answered a request with HTTP {status} and no JSON-RPC response"
                ))),
                None => Ok(()),
            };
        }
        let body = crate::egress::read_body(&mut response, self.options.max_message_bytes, self.deadline())
            .await
            .map_err(sent)?;
        if body.iter().all(u8::is_ascii_whitespace) && request_id.is_none() {
            return Ok(());
        }
        if self.sink.on_message(&body) || request_id.is_none() {
            Ok(())
        } else {
            Err(McpError::Protocol(super::describe_garbage(&body, &self.options.secrets)))
        }
    }

    /// The server refused the request for authorization: get a new token (the request's idle timeout kept
    /// alive meanwhile: a person may be logging in), then send it again once, unless it is a tool call,
    /// which fails instead, saying a new token is in place.
    async fn reauthorize(
        self: &Arc<Self>,
        authorizing: BoxFuture<'_, Result<()>>,
        body: &bytes::Bytes,
        post: Post,
        status: StatusCode,
    ) -> Result<()> {
        if !post.may_reauthorize {
            return Err(McpError::Auth(format!("the server refused a freshly issued token (HTTP {status})")));
        }
        match post.request_id {
            Some(id) => {
                let sink = self.sink.clone();
                let mut ticks = tokio::time::interval(Duration::from_millis(AUTHORIZATION_KEEPALIVE_MS));
                tokio::pin!(authorizing);
                loop {
                    tokio::select! {
                        done = &mut authorizing => break done?,
                        _ = ticks.tick() => sink.keep_waiting(id),
                    }
                }
            }
            None => authorizing.await?,
        }
        if !post.resendable {
            return Err(http::call_not_resent());
        }
        Box::pin(self.post(body, Post { may_reauthorize: false, ..post })).await
    }

    /// Deliver a response stream's events; resume it if it ends before the answer to `request_id`.
    async fn consume_stream(
        &self,
        mut response: Response,
        request_id: Option<RequestId>,
        resumable: bool,
        long_lived: bool,
    ) -> Result<()> {
        let mut parser = EventStreamParser::new(self.options.max_message_bytes);
        let mut resumes = 0;
        loop {
            let sink = &self.sink;
            let deliver = |event: super::event_stream::Event| {
                if event.event != DEFAULT_EVENT_TYPE || sink.on_message(event.data.as_bytes()) {
                    ControlFlow::Continue(())
                } else {
                    ControlFlow::Break(Err(McpError::Protocol(super::describe_garbage(
                        event.data.as_bytes(),
                        &self.options.secrets,
                    ))))
                }
            };
            let limit = self.options.max_message_bytes;
            let idle = (!long_lived).then(|| self.deadline());
            match http::read_events(&mut response, &mut parser, idle, deliver, limit).await {
                // The server is waiting for a person's answer to its elicitation: keep reading.
                Err(McpError::Timeout { .. }) if self.sink.waited_on_host(self.deadline()) => continue,
                read => read?,
            };
            let Some(id) = request_id else { return Ok(()) };
            if !self.sink.is_pending(id) {
                return Ok(());
            }
            // The modern era has no resumption: a broken stream fails its request.
            let Some(last_event_id) = parser.last_event_id.clone().filter(|_| resumable) else {
                return Err(McpError::Transport("the server closed the response stream before answering".into()));
            };
            resumes += 1;
            if resumes > MAX_STREAM_RESUMES {
                return Err(McpError::Transport(format!(
                    "the response stream broke {MAX_STREAM_RESUMES} times; giving up"
                )));
            }
            tokio::time::sleep(retry_delay(&parser)).await;
            response = match self.open_get_stream(Some(&last_event_id)).await? {
                GetStream::Open(response) => response,
                _ => {
                    return Err(McpError::Transport(
                        "the server does not offer a GET stream to resume the response on".into(),
                    ))
                }
            };
            parser.reset_connection();
        }
    }

    /// GET the session's event stream.
    async fn open_get_stream(&self, last_event_id: Option<&str>) -> Result<GetStream> {
        let session = self.session.lock().clone();
        let response = self
            .send_proved(|presented| {
                // Held open for the session's life (the standalone stream) or a long call's (a resumed one).
                let mut exchange = self
                    .with_session_as(Method::GET, &session, presented)
                    .protocol_header(ACCEPT, HeaderValue::from_static(EVENT_STREAM))
                    .held_open();
                if let Some(value) = last_event_id.and_then(http::header_value) {
                    exchange = exchange.origin_header(HeaderName::from_static(HEADER_LAST_EVENT_ID), value);
                }
                exchange
            })
            .await?;
        Ok(if response.status().is_success() && http::is_event_stream(&response) {
            GetStream::Open(response)
        } else if response.status() == StatusCode::NOT_FOUND && session.id.is_some() {
            GetStream::SessionExpired(session.generation)
        } else {
            GetStream::NotOffered
        })
    }

    /// A tool call waits (bounded) until the standalone stream's first opening was answered: a tool
    /// that asks the client something sends the question there, and a server drops it while the stream
    /// is not open yet (the conformance suite's elicitation server does; a call racing the GET on a
    /// loaded machine then waited out its timeout).
    /// The bound runs from the stream's asking, not from each call: a server that holds the stream's
    /// headers back delays the session's first calls by at most that much, never a later one.
    async fn wait_for_listening(&self) {
        let Listening::Opening(since) = *self.listening.borrow() else { return };
        let left = Duration::from_millis(MAX_GET_STREAM_OPENING_WAIT_MS).saturating_sub(since.elapsed());
        if left.is_zero() {
            return;
        }
        let mut listening = self.listening.subscribe();
        let answered = listening.wait_for(|state| !matches!(state, Listening::Opening(_)));
        let _ = tokio::time::timeout(left, answered).await;
    }

    /// The standalone GET stream for server-initiated messages. Optional on the server's side: a 405
    /// (or any refusal) just means there is none.
    async fn listen(self: Arc<Self>) {
        // However this ends, calls no longer wait for the first opening.
        struct Answered<'a>(&'a tokio::sync::watch::Sender<Listening>);
        impl Drop for Answered<'_> {
            fn drop(&mut self) {
                self.0.send_replace(Listening::Answered);
            }
        }
        let mut answered = Some(Answered(&self.listening));
        // It may carry answers to several requests: an oversized one fails its call, not the stream.
        let mut parser = EventStreamParser::skipping_oversized(self.options.max_message_bytes);
        let mut failures = 0;
        // The session this loop renewed itself and has not yet seen a stream on.
        let mut renewed_here: Option<u64> = None;
        // A stream was open on this connection: its server was there.
        let mut was_open = false;
        while !self.closed.load(Ordering::SeqCst) && failures < MAX_GET_STREAM_FAILURES {
            let last_event_id = parser.last_event_id.clone();
            let opened = self.open_get_stream(last_event_id.as_deref()).await;
            answered.take();
            let mut response = match opened {
                Ok(GetStream::Open(response)) => {
                    renewed_here = None;
                    was_open = true;
                    response
                }
                Ok(GetStream::NotOffered) => return,
                // A 404 again on the session just renewed for it: the server has no GET route (a 404 is
                // how a POST-only server says so), not an expired session. Renewing again would loop.
                Ok(GetStream::SessionExpired(generation)) if renewed_here == Some(generation) => return,
                Ok(GetStream::SessionExpired(generation)) => {
                    // The session ended under the stream: renew it (once for everyone) and listen on the new one.
                    if let Err(error) = self.reinitialize(generation).await {
                        self.lost(McpError::Transport(format!(
                            "the server expired the session and a new one could not be started: {error}"
                        )));
                        return;
                    }
                    let renewed = self.session.lock().generation;
                    renewed_here = Some(renewed);
                    // A restarted server may publish other tools: vetted again, as after any recovery.
                    if let Err(error) = self.sink.session_renewed(renewed).await {
                        if error != McpError::Closed {
                            self.lost(McpError::Transport(format!(
                                "the tools of a new session could not be vetted: {error}"
                            )));
                        }
                        return;
                    }
                    failures += 1;
                    parser = EventStreamParser::skipping_oversized(self.options.max_message_bytes);
                    tokio::time::sleep(Duration::from_millis(DEFAULT_STREAM_RETRY_MS)).await;
                    continue;
                }
                // The stream's server is gone (nothing listens where it was): the owner reconnects.
                Err(error @ McpError::Unreachable(_)) if was_open => return self.lost(error),
                Err(_) => {
                    failures += 1;
                    tokio::time::sleep(Duration::from_millis(DEFAULT_STREAM_RETRY_MS)).await;
                    continue;
                }
            };
            let opened = Instant::now();
            parser.reset_connection();
            let sink = &self.sink;
            let limit = self.options.max_message_bytes;
            let end = http::read_events(
                &mut response,
                &mut parser,
                None,
                |event| {
                    if let Some(skipped) = &event.oversized {
                        super::oversized::refuse_event(&**sink, skipped, limit);
                    } else if event.event == DEFAULT_EVENT_TYPE {
                        sink.on_message(event.data.as_bytes());
                    }
                    ControlFlow::Continue(())
                },
                limit,
            )
            .await;
            // A stream that lived a while was healthy; one that keeps dying at once is not.
            failures = if end == Ok(StreamEnd::Closed) && opened.elapsed() > Duration::from_secs(5) {
                0
            } else {
                failures + 1
            };
            tokio::time::sleep(retry_delay(&parser)).await;
        }
    }

    /// Start a new session after the server expired ours. Runs once for all requests that saw the 404,
    /// and all of it (waiting for another renewal included) within one deadline: a server that never
    /// answers the new `initialize` holds nothing for longer.
    async fn reinitialize(&self, expired_generation: u64) -> Result<()> {
        let deadline = self.deadline();
        tokio::time::timeout(deadline, async {
            let _one_at_a_time = self.reinitializing.lock().await;
            self.renew_session(expired_generation).await
        })
        .await
        .unwrap_or(Err(McpError::Timeout { after_ms: deadline.as_millis() as u64 }))
    }

    async fn renew_session(&self, expired_generation: u64) -> Result<()> {
        let negotiated = {
            let session = self.session.lock();
            if session.generation != expired_generation {
                return Ok(()); // another request already did it
            }
            session.protocol_version
        };
        let initialize = self.initialize.lock().clone().ok_or(McpError::Closed)?;
        let mut response = self
            .send_proved(|presented| {
                Self::json_post(self.exchange_as(Method::POST, self.spec.url.clone(), presented), &initialize)
            })
            .await?;
        if !response.status().is_success() {
            return Err(McpError::Transport(format!(
                "re-initializing the expired session failed: {}",
                self.error_excerpt(response).await
            )));
        }
        let new_id = response
            .headers()
            .get(HEADER_SESSION_ID)
            .map(http::owned_header)
            .filter(|_| response.url().origin() == self.spec.url.origin());
        let result = self.read_single_response(&mut response).await?;
        let init: InitializeResult = serde_json::from_str(&result)
            .map_err(|e| McpError::Protocol(format!("re-initialize returned a malformed result: {e}")))?;
        if Some(init.protocol_version.as_str()) != negotiated {
            return Err(McpError::Protocol(format!(
                "the server changed the protocol version to {:?} when the session was renewed",
                init.protocol_version
            )));
        }
        let session = {
            let mut session = self.session.lock();
            session.id = new_id;
            session.generation += 1;
            session.clone()
        };
        let initialized = bytes::Bytes::from(jsonrpc::notification("notifications/initialized", None));
        self.send_proved(|presented| {
            Self::json_post(self.with_session_as(Method::POST, &session, presented), &initialized)
        })
        .await?;
        Ok(())
    }

    /// The `result` of the one response in a JSON body or an event stream.
    async fn read_single_response(&self, response: &mut Response) -> Result<String> {
        let limit = self.options.max_message_bytes;
        let bodies = if http::is_event_stream(response) {
            let mut parser = EventStreamParser::new(limit);
            let mut found = None;
            http::read_events(
                response,
                &mut parser,
                Some(self.deadline()),
                |event| {
                    found = Some(event.data);
                    ControlFlow::Break(Ok(()))
                },
                limit,
            )
            .await?;
            found.map(String::into_bytes).unwrap_or_default()
        } else {
            crate::egress::read_body(response, limit, self.deadline()).await?
        };
        match serde_json::from_slice::<RawMessage>(&bodies).ok().and_then(RawMessage::classify) {
            Some(Message::Response { outcome: Ok(result), .. }) => Ok(result.get().to_owned()),
            Some(Message::Response { outcome: Err(e), .. }) => {
                Err(McpError::Protocol(format!("re-initialize failed: MCP error {}: {}", e.code, e.message)))
            }
            _ => Err(McpError::Protocol("re-initialize got no JSON-RPC response".into())),
        }
    }
}
