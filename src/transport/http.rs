//! What the two HTTP transports share: the egress client, session headers, the task set every
//! request runs in, the bounded queue for notification and reply POSTs, bounded body and event reading.

use super::event_stream::{Event, EventStreamError, EventStreamParser};
use crate::egress::{self, Egress, EgressPolicy, Exchange};
use crate::error::{McpError, Result};
use crate::guard::hosts::HostGuard;
use crate::limits::{
    ERROR_BODY_READ_BYTES, ERROR_BODY_READ_TIMEOUT_MS, HTTP_CLOSE_GRACE_MS, HTTP_DEADLINE_SLACK_MS,
    MAX_CONCURRENT_SIDE_POSTS, MAX_QUEUED_SIDE_POSTS,
};
use futures_util::future::BoxFuture;
use parking_lot::Mutex;
use reqwest::header::{HeaderMap, HeaderValue, AUTHORIZATION, CONTENT_TYPE};
use reqwest::{Method, Response, StatusCode};
use std::future::Future;
use std::ops::ControlFlow;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{mpsc, Semaphore};
use tokio::task::AbortHandle;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

/// How to reach one HTTP server: its URL, the validated extra headers, the host guard, the proxy, and
/// the bearer credential (shared with the toolset, which rotates it when `auth` hands out a new token).
#[derive(Clone)]
pub struct HttpSpec {
    pub url: url::Url,
    pub headers: HeaderMap,
    pub guard: Option<Arc<HostGuard>>,
    /// The `proxy` option; `None` means direct connections (proxy variables in the environment are ignored).
    pub proxy: Option<url::Url>,
    pub credential: Credential,
    /// Who keeps the bearer fresh and answers refusals: the server's OAuth authorizer, when its entry
    /// has `oauth`.
    pub authorization: Option<Arc<dyn Authorization>>,
}

/// What an HTTP transport asks about authorization. The transport knows nothing of OAuth: it asks before
/// each request, sends the bearer in [`Credential`], and hands every answer's status and headers over.
/// The OAuth authorizer of an entry with `oauth` (`auth::Authorizer`) answers.
pub trait Authorization: Send + Sync {
    /// Before a request: the token it will carry is loaded and, if about to expire, refreshed.
    fn before_request(&self) -> BoxFuture<'_, Result<()>>;
    /// The answer to a request sent with token generation `sent` (see [`Credential::snapshot`]): `None`
    /// when it is no refusal a new token may cure; otherwise the work that puts a new token in place,
    /// which starts when it is awaited.
    fn on_response(&self, status: StatusCode, headers: &HeaderMap, sent: u64) -> Option<BoxFuture<'_, Result<()>>>;
}

/// A tool call the server refused for authorization, once a new token is in place: never sent again.
pub fn call_not_resent() -> McpError {
    McpError::Reauthorized(
        "the server refused the tool call for authorization; a new token is in place and the call was not sent again"
            .into(),
    )
}

/// The URL without its query (it may carry a key); header names without their values.
impl std::fmt::Debug for HttpSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HttpSpec")
            .field("url", &crate::egress::display_url(&self.url))
            .field("headers", &self.headers.keys().collect::<Vec<_>>())
            .field("proxy", &self.proxy.as_ref().map(crate::egress::display_url))
            .finish_non_exhaustive()
    }
}

/// What both HTTP transports hold: the egress client, where to go, where answers go, the bounds, the
/// tasks, and whether the transport was closed. Each transport's own state derefs to it.
pub struct HttpBase {
    pub egress: Egress,
    pub spec: HttpSpec,
    pub sink: Arc<dyn super::MessageSink>,
    pub options: super::TransportOptions,
    pub closed: std::sync::atomic::AtomicBool,
    pub tasks: TaskSet,
}

impl HttpBase {
    pub fn new(spec: &HttpSpec, sink: Arc<dyn super::MessageSink>, options: super::TransportOptions) -> Result<Self> {
        let egress = Egress::new(&EgressPolicy { guard: spec.guard.clone(), proxy: spec.proxy.clone() })?;
        Ok(HttpBase { egress, spec: spec.clone(), sink, options, closed: false.into(), tasks: TaskSet::default() })
    }

    /// The deadline of one HTTP exchange: the call timeout plus slack, so the connection's own timeout
    /// (which also tells the server to cancel) normally fires first.
    pub fn deadline(&self) -> Duration {
        self.options.idle_timeout + Duration::from_millis(HTTP_DEADLINE_SLACK_MS)
    }

    /// A request to `url` carrying the configured headers and the bearer, which only the server's own
    /// origin ever gets.
    pub fn exchange(&self, method: Method, url: url::Url) -> Exchange {
        self.exchange_as(method, url, self.spec.credential.current())
    }

    /// `exchange` with a given presentation (one read with its generation, see [`Credential::snapshot`]):
    /// its `Authorization`, and a fresh proof for this method and URL when the token is bound to a key.
    pub fn exchange_as(&self, method: Method, url: url::Url, presented: Option<Presented>) -> Exchange {
        let mut origin = self.spec.headers.clone();
        if let Some(presented) = presented {
            origin.insert(AUTHORIZATION, presented.authorization);
            if let Some((name, value)) = presented.proof.as_ref().and_then(|p| p.header(&method, &url)) {
                origin.insert(name, value);
            }
        }
        Exchange::new(method, url, self.deadline()).origin_headers(origin)
    }

    /// A short, safe excerpt of an error response: status and the start of the body, with the server
    /// URL's query values blanked (a server may echo its request line). Blanked before it is cut, and
    /// from more than is quoted, so a value straddling the cut is blanked whole.
    pub async fn error_excerpt(&self, mut response: Response) -> String {
        let status = response.status();
        let mut head = Vec::new();
        let read_bytes = self.excerpt_read_bytes();
        let _ = tokio::time::timeout(Duration::from_millis(ERROR_BODY_READ_TIMEOUT_MS), async {
            while head.len() < read_bytes {
                match response.chunk().await {
                    Ok(Some(bytes)) => head.extend_from_slice(&bytes),
                    _ => break,
                }
            }
        })
        .await;
        head.truncate(read_bytes);
        self.excerpt_of(status, &head)
    }

    /// Enough beyond what is quoted that a secret straddling the cut is seen whole and redacted.
    fn excerpt_read_bytes(&self) -> usize {
        ERROR_BODY_READ_BYTES.max(crate::limits::MAX_QUOTED_BYTES + self.options.secrets.longest_bytes())
    }

    /// The excerpt of an error response whose body (or its start) was read already.
    pub fn excerpt_of(&self, status: reqwest::StatusCode, head: &[u8]) -> String {
        let head = &head[..head.len().min(self.excerpt_read_bytes())];
        let body = egress::scrub_url_secrets(&String::from_utf8_lossy(head), &self.spec.url);
        let body = crate::guard::redact::quote_bytes(body.as_bytes(), &self.options.secrets);
        if body.is_empty() {
            status_text(status)
        } else {
            format!("{}: {body}", status_text(status))
        }
    }
}

/// How an HTTP error status opens the text of the transport error it becomes.
fn status_text(status: reqwest::StatusCode) -> String {
    format!("HTTP {status}")
}

/// Whether a failure is the server refusing the request's shape (HTTP 400, 404, 405, 406 or 415): what a
/// server of another era answers. Not an authorization refusal, a rate limit or a server error.
pub fn refused_request(error: &McpError) -> bool {
    let McpError::Transport(text) = error else { return false };
    use reqwest::StatusCode as S;
    [S::BAD_REQUEST, S::NOT_FOUND, S::METHOD_NOT_ALLOWED, S::NOT_ACCEPTABLE, S::UNSUPPORTED_MEDIA_TYPE].into_iter().any(
        |status| {
            let opening = status_text(status);
            text.strip_prefix(&opening).is_some_and(|rest| rest.is_empty() || rest.starts_with(':'))
        },
    )
}

/// Every task a transport starts: cancelled together on close, then given a bounded time to finish.
#[derive(Clone, Default)]
pub struct TaskSet {
    cancel: CancellationToken,
    tracker: TaskTracker,
}

impl TaskSet {
    /// Run `task` until it ends or the set is cancelled.
    pub fn spawn(&self, task: impl Future<Output = ()> + Send + 'static) -> AbortHandle {
        let cancel = self.cancel.clone();
        self.tracker
            .spawn(async move {
                cancel.run_until_cancelled(task).await;
            })
            .abort_handle()
    }

    /// Stop every task at its next await point (a dropped transport).
    pub fn cancel(&self) {
        self.cancel.cancel();
    }

    /// Cancel every task and wait at most `HTTP_CLOSE_GRACE_MS` for them to end.
    pub async fn shutdown(&self) {
        self.cancel.cancel();
        self.tracker.close();
        let _ = tokio::time::timeout(Duration::from_millis(HTTP_CLOSE_GRACE_MS), self.tracker.wait()).await;
    }

    /// Tasks still running.
    pub fn len(&self) -> usize {
        self.tracker.len()
    }

    pub fn is_empty(&self) -> bool {
        self.tracker.is_empty()
    }
}

/// Notifications and replies to server requests: nobody waits for their outcome, so a server that
/// floods requests must not make them grow without bound. They queue (at most
/// `MAX_QUEUED_SIDE_POSTS`, the excess is dropped) for at most `MAX_CONCURRENT_SIDE_POSTS` tasks,
/// each POST under the transport's deadline.
pub struct SideQueue(mpsc::Sender<bytes::Bytes>);

pub struct SideQueueReceiver(mpsc::Receiver<bytes::Bytes>);

pub fn side_queue() -> (SideQueue, SideQueueReceiver) {
    let (sender, receiver) = mpsc::channel(MAX_QUEUED_SIDE_POSTS);
    (SideQueue(sender), SideQueueReceiver(receiver))
}

impl SideQueue {
    /// Queue one message; false if the queue is full and it was dropped.
    pub fn push(&self, body: bytes::Bytes) -> bool {
        self.0.try_send(body).is_ok()
    }
}

impl SideQueueReceiver {
    /// Serve the queue from `tasks`, posting each message with `post` under `deadline`.
    pub fn serve<F, Fut>(self, tasks: &TaskSet, deadline: Duration, post: F)
    where
        F: Fn(bytes::Bytes) -> Fut + Send + 'static,
        Fut: Future<Output = ()> + Send + 'static,
    {
        let SideQueueReceiver(mut queue) = self;
        let workers = tasks.clone();
        tasks.spawn(async move {
            let slots = Arc::new(Semaphore::new(MAX_CONCURRENT_SIDE_POSTS));
            while let Some(body) = queue.recv().await {
                let Ok(slot) = slots.clone().acquire_owned().await else { return };
                let posting = post(body);
                workers.spawn(async move {
                    let _ = tokio::time::timeout(deadline, posting).await;
                    drop(slot);
                });
            }
        });
    }
}

/// What a request presents to the server: the `Authorization` value and, for a sender-constrained token
/// (DPoP, RFC 9449), what makes each request's proof. The transport knows nothing of DPoP: it asks the
/// proof for a header per request and shows it every answer.
#[derive(Clone)]
pub struct Presented {
    pub authorization: HeaderValue,
    pub proof: Option<Arc<dyn RequestProof>>,
}

impl std::fmt::Debug for Presented {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Presented").field("proof", &self.proof.is_some()).finish_non_exhaustive()
    }
}

/// A per-request proof of possession (the OAuth authorizer's DPoP binding answers).
pub trait RequestProof: Send + Sync {
    /// The proof header (name and value) for one request of `method` to `url`, or `None` if none can be made.
    fn header(&self, method: &Method, url: &url::Url) -> Option<(reqwest::header::HeaderName, HeaderValue)>;
    /// An answer to a request to `url`: whatever it tells (a new nonce) is kept for the next proof. True
    /// when it refused the request for a stale or missing nonce and named a new one: worth exactly one
    /// more attempt.
    fn on_answer(&self, url: &url::Url, status: StatusCode, headers: &HeaderMap) -> bool;
}

/// The current presentation, if `auth` or `oauth` is configured, and its generation (bumped on every
/// change, so a refusal of an older token is told apart from a refusal of the current one).
#[derive(Debug, Clone, Default)]
pub struct Credential(Arc<Mutex<(Option<Presented>, u64)>>);

impl Credential {
    pub fn set_bearer(&self, token: &str) -> Result<()> {
        self.set("Bearer", token, None)
    }

    /// A DPoP-bound token: `Authorization: DPoP <token>`, and `proof` makes each request's `DPoP` header.
    pub fn set_bound(&self, token: &str, proof: Arc<dyn RequestProof>) -> Result<()> {
        self.set("DPoP", token, Some(proof))
    }

    /// No token: requests go without `Authorization` (and their refusal starts a new authorization).
    pub fn clear(&self) {
        let mut slot = self.0.lock();
        if slot.0.is_some() {
            *slot = (None, slot.1 + 1);
        }
    }

    fn set(&self, scheme: &str, token: &str, proof: Option<Arc<dyn RequestProof>>) -> Result<()> {
        let mut value = HeaderValue::from_str(&format!("{scheme} {token}"))
            .map_err(|_| McpError::Auth("the token cannot be sent in a header".into()))?;
        value.set_sensitive(true);
        let mut slot = self.0.lock();
        *slot = (Some(Presented { authorization: value, proof }), slot.1 + 1);
        Ok(())
    }

    pub fn current(&self) -> Option<Presented> {
        self.0.lock().0.clone()
    }

    /// The `Authorization` value in use.
    pub fn authorization(&self) -> Option<HeaderValue> {
        self.0.lock().0.as_ref().map(|p| p.authorization.clone())
    }

    pub fn generation(&self) -> u64 {
        self.0.lock().1
    }

    /// The value and its generation, read together: a refusal is charged to the token actually sent.
    pub fn snapshot(&self) -> (Option<Presented>, u64) {
        self.0.lock().clone()
    }
}

pub const HEADER_SESSION_ID: &str = "mcp-session-id";
pub const HEADER_PROTOCOL_VERSION: &str = "mcp-protocol-version";
pub const HEADER_LAST_EVENT_ID: &str = "last-event-id";
pub const ACCEPT_BOTH: &str = "application/json, text/event-stream";
pub const EVENT_STREAM: &str = "text/event-stream";
pub const APPLICATION_JSON: &str = "application/json";

pub fn is_event_stream(response: &Response) -> bool {
    content_type(response).is_some_and(|t| t.starts_with(EVENT_STREAM))
}

pub fn is_json(response: &Response) -> bool {
    content_type(response).is_some_and(|t| t.starts_with("application/json"))
}

fn content_type(response: &Response) -> Option<String> {
    response.headers().get(CONTENT_TYPE).and_then(|v| v.to_str().ok()).map(|v| v.trim().to_ascii_lowercase())
}

pub fn header_value(text: &str) -> Option<HeaderValue> {
    HeaderValue::from_str(text).ok()
}

/// A copy of a response header's value, to keep for the session's life. A value parsed by hyper is a
/// view into the connection's read buffer: holding it (a session id) held that whole buffer, ~16 KiB
/// per server connection, for as long as the session lived.
pub fn owned_header(value: &HeaderValue) -> HeaderValue {
    let mut owned = HeaderValue::from_bytes(value.as_bytes()).unwrap_or_else(|_| value.clone());
    owned.set_sensitive(value.is_sensitive());
    owned
}

/// How an event stream ended, when it did not fail.
#[derive(Debug, PartialEq, Eq)]
pub enum StreamEnd {
    /// The server closed it.
    Closed,
    /// The callback asked to stop.
    Stopped,
}

/// Read events until the stream ends, `on_event` breaks, or `idle` passes without a byte. An event over
/// the limit fails with `ResultTooLarge` at once; a broken connection counts as the server closing it.
pub async fn read_events(
    response: &mut Response,
    parser: &mut EventStreamParser,
    idle: Option<Duration>,
    mut on_event: impl FnMut(Event) -> ControlFlow<Result<()>>,
    limit_bytes: usize,
) -> Result<StreamEnd> {
    let mut events = Vec::new();
    loop {
        let chunk = match egress::next_chunk(response, idle).await {
            Ok(Some(chunk)) => chunk,
            Ok(None) | Err(McpError::Transport(_)) => return Ok(StreamEnd::Closed),
            Err(e) => return Err(e),
        };
        parser.feed(&chunk, &mut events).map_err(|e| match e {
            EventStreamError::TooLarge => McpError::ResultTooLarge { limit_bytes },
            EventStreamError::InvalidUtf8 => McpError::Protocol("the server's event stream is not UTF-8".to_owned()),
        })?;
        for event in events.drain(..) {
            if let ControlFlow::Break(outcome) = on_event(event) {
                return outcome.map(|()| StreamEnd::Stopped);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    #[tokio::test]
    async fn side_posts_are_bounded_and_cancelled_with_their_transport() {
        let tasks = TaskSet::default();
        let (queue, receiver) = side_queue();
        let started = Arc::new(AtomicUsize::new(0));
        let counter = started.clone();
        // Posts that never finish, as to a server that never answers.
        receiver.serve(&tasks, Duration::from_secs(3600), move |_| {
            counter.fetch_add(1, Ordering::SeqCst);
            std::future::pending::<()>()
        });
        let accepted = (0..10_000).filter(|_| queue.push(bytes::Bytes::from_static(b"{}"))).count();
        assert!(accepted <= MAX_QUEUED_SIDE_POSTS + MAX_CONCURRENT_SIDE_POSTS + 1, "{accepted} accepted");
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert_eq!(started.load(Ordering::SeqCst), MAX_CONCURRENT_SIDE_POSTS);
        assert!(tasks.len() <= MAX_CONCURRENT_SIDE_POSTS + 1, "{} tasks", tasks.len());
        let closing = std::time::Instant::now();
        tasks.shutdown().await;
        assert!(closing.elapsed() < Duration::from_millis(HTTP_CLOSE_GRACE_MS), "took {:?}", closing.elapsed());
        assert!(tasks.is_empty());
    }

    #[test]
    fn refusals_of_a_requests_shape_are_told_by_the_status_their_error_opens_with() {
        use reqwest::StatusCode as S;
        for status in
            [S::BAD_REQUEST, S::NOT_FOUND, S::METHOD_NOT_ALLOWED, S::NOT_ACCEPTABLE, S::UNSUPPORTED_MEDIA_TYPE]
        {
            assert!(refused_request(&McpError::Transport(status_text(status))));
            assert!(refused_request(&McpError::Transport(format!(
                "{}: {{\"error\":\"no session\"}}",
                status_text(status)
            ))));
        }
        for status in
            [S::UNAUTHORIZED, S::FORBIDDEN, S::TOO_MANY_REQUESTS, S::INTERNAL_SERVER_ERROR, S::SERVICE_UNAVAILABLE]
        {
            assert!(!refused_request(&McpError::Transport(status_text(status))));
        }
        // The status must be the whole number: 4000 is not 400.
        assert!(!refused_request(&McpError::Transport("HTTP 4000".into())));
        assert!(!refused_request(&McpError::Protocol(status_text(S::BAD_REQUEST))));
        assert!(!refused_request(&McpError::Transport("connection refused".into())));
    }

    #[test]
    fn a_kept_header_value_does_not_share_the_buffer_it_was_parsed_from() {
        let buffer = bytes::Bytes::from(format!("session-1234{}", " ".repeat(16 * 1024)));
        let parsed = HeaderValue::from_maybe_shared(buffer.slice(0..12)).unwrap();
        assert_eq!(parsed.as_bytes().as_ptr(), buffer.as_ptr(), "hyper's values are views into the read buffer");
        let kept = owned_header(&parsed);
        assert_eq!(kept, parsed);
        assert_ne!(kept.as_bytes().as_ptr(), buffer.as_ptr(), "the kept one is a copy");
    }

    #[tokio::test]
    async fn a_side_post_that_hangs_is_ended_by_its_deadline() {
        let tasks = TaskSet::default();
        let (queue, receiver) = side_queue();
        receiver.serve(&tasks, Duration::from_millis(20), |_| std::future::pending::<()>());
        queue.push(bytes::Bytes::from_static(b"{}"));
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert_eq!(tasks.len(), 1, "only the queue's server is left");
    }
}
