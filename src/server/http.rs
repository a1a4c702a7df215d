//! Serving Streamable HTTP on one path (hyper 1, HTTP/1.1): `POST` carries one JSON-RPC message and
//! is answered with one JSON body (no SSE stream: this server never sends requests or notifications
//! of its own), `GET` is 405 (no standalone stream), `DELETE` ends a 2025-era session.
//!
//! Security, as the MCP spec asks of a local server: it binds 127.0.0.1 unless told otherwise, and
//! refuses (403) a request whose `Origin` is not one it allows — by default only loopback origins, and
//! only while it listens on loopback — and, on loopback, a `Host` that is not a loopback name (DNS
//! rebinding: a page whose name resolves to 127.0.0.1 still sends its own name).
//!
//! Eras: a request with the 2026-07-28 envelope is answered on its own after its headers are checked
//! against its body (`MCP-Protocol-Version`, `Mcp-Method`, `Mcp-Name`: a mismatch is -32020, HTTP
//! 400). Anything else is the 2025 era: `initialize` opens a session (`Mcp-Session-Id`, bounded in
//! number); every later request must carry it (400 without, 404 for one this server does not hold).

use super::dispatch::{self, claim_of, Claim, RpcError, INVALID_REQUEST, PARSE_ERROR};
use super::McpServerCore;
use crate::error::{McpError, Result};
use crate::limits::{
    HTTP_HEADER_READ_TIMEOUT_MS, HTTP_SESSION_IDLE_MS, MAX_HTTP_CONNECTIONS, MAX_HTTP_SESSIONS,
    MAX_SERVER_MESSAGE_BYTES, SERVER_HTTP_BODY_READ_TIMEOUT_MS,
};
use crate::protocol::era::{Era, HEADER_MISMATCH, MODERN_PROTOCOL_VERSIONS};
use crate::protocol::jsonrpc::{is_echoable_id, Message, RawMessage, INVALID_PARAMS};
use crate::protocol::mcp::SUPPORTED_PROTOCOL_VERSIONS;
use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Incoming;
use hyper::header::{HeaderMap, HeaderValue, ALLOW, CONTENT_TYPE, HOST, ORIGIN};
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use parking_lot::Mutex;
use serde::Deserialize;
use serde_json::value::RawValue;
use std::collections::HashMap;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::net::TcpListener;
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

const SESSION_HEADER: &str = "mcp-session-id";
const VERSION_HEADER: &str = "mcp-protocol-version";
const METHOD_HEADER: &str = "mcp-method";
const NAME_HEADER: &str = "mcp-name";
/// How long to wait before accepting again after `accept` failed (out of file descriptors), in ms.
const ACCEPT_RETRY_MS: u64 = 50;

/// `listen({ http: { … } })`.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct HttpOptions {
    #[serde(default = "default_host")]
    pub host: String,
    #[serde(default)]
    pub port: u16,
    #[serde(default = "default_path")]
    pub path: String,
    /// Origins allowed besides loopback ones (`https://app.example.com`), compared exactly.
    #[serde(default)]
    pub allowed_origins: Vec<String>,
    /// `Host` values allowed besides loopback names, compared without the port.
    #[serde(default)]
    pub allowed_hosts: Vec<String>,
}

fn default_host() -> String {
    "127.0.0.1".to_owned()
}

fn default_path() -> String {
    "/mcp".to_owned()
}

impl HttpOptions {
    pub fn parse(json: &str) -> Result<Self> {
        let options: HttpOptions =
            serde_json::from_str(json).map_err(|e| McpError::config(format!("listen({{ http }}): {e}")))?;
        if !options.path.starts_with('/') {
            return Err(McpError::config("listen({ http }): path must start with '/'"));
        }
        Ok(options)
    }
}

struct Session {
    last_used: Instant,
}

struct State {
    core: Arc<McpServerCore>,
    path: String,
    loopback: bool,
    allowed_origins: Vec<String>,
    allowed_hosts: Vec<String>,
    sessions: Mutex<HashMap<String, Session>>,
}

/// A listening HTTP server.
pub struct HttpListener {
    pub address: SocketAddr,
    pub path: String,
    stop: CancellationToken,
    serving: tokio::task::JoinHandle<()>,
}

impl HttpListener {
    /// Stops accepting and drops every open connection; resolves once the socket is closed.
    pub async fn close(self) {
        self.stop.cancel();
        let _ = self.serving.await;
    }
}

pub async fn listen(core: Arc<McpServerCore>, options: HttpOptions) -> Result<HttpListener> {
    let listener = TcpListener::bind((options.host.as_str(), options.port))
        .await
        .map_err(|e| McpError::Transport(format!("cannot listen on {}:{}: {e}", options.host, options.port)))?;
    let address =
        listener.local_addr().map_err(|e| McpError::Transport(format!("the listening socket has no address: {e}")))?;
    let state = Arc::new(State {
        core,
        path: options.path.clone(),
        loopback: address.ip().is_loopback(),
        allowed_origins: options.allowed_origins.iter().map(|o| o.trim_end_matches('/').to_ascii_lowercase()).collect(),
        allowed_hosts: options.allowed_hosts.iter().map(|h| h.to_ascii_lowercase()).collect(),
        sessions: Mutex::new(HashMap::new()),
    });
    let stop = CancellationToken::new();
    let serving = tokio::spawn(accept_loop(listener, state, stop.clone()));
    Ok(HttpListener { address, path: options.path, stop, serving })
}

async fn accept_loop(listener: TcpListener, state: Arc<State>, stop: CancellationToken) {
    let connections = Arc::new(Semaphore::new(MAX_HTTP_CONNECTIONS));
    let tasks = TaskTracker::new();
    loop {
        let stream = tokio::select! {
            _ = stop.cancelled() => break,
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => stream,
                Err(_) => {
                    tokio::time::sleep(Duration::from_millis(ACCEPT_RETRY_MS)).await;
                    continue;
                }
            },
        };
        let Ok(permit) = connections.clone().try_acquire_owned() else {
            // At the cap: say so at once rather than leave the client in the accept queue. A fresh
            // socket's send buffer is empty, so this small write does not block (if it cannot be made
            // whole, the connection is simply dropped).
            let _ = stream.try_write(AT_CAPACITY.as_bytes());
            drop(stream);
            continue;
        };
        let (state, stop) = (state.clone(), stop.clone());
        tasks.spawn(async move {
            let _permit = permit;
            let service = hyper::service::service_fn(move |request| {
                let state = state.clone();
                async move { Ok::<_, Infallible>(handle(&state, request).await) }
            });
            let connection = hyper::server::conn::http1::Builder::new()
                .timer(TokioTimer::new())
                .header_read_timeout(Duration::from_millis(HTTP_HEADER_READ_TIMEOUT_MS))
                .serve_connection(TokioIo::new(WriteDeadline::new(stream)), service);
            tokio::select! {
                _ = connection => {}
                _ = stop.cancelled() => {}
            }
        });
    }
    drop(listener);
    tasks.close();
}

/// The answer to a connection beyond `MAX_HTTP_CONNECTIONS`.
const AT_CAPACITY: &str = concat!(
    "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\nRetry-After: 1\r\nConnection: close\r\nContent-Length: 105\r\n\r\n",
    r#"{"jsonrpc":"2.0","id":null,"error":{"code":-32000,"message":"Service Unavailable: too many connections"}}"#
);

/// A connection whose writes may not stall longer than `SERVER_HTTP_WRITE_STALL_TIMEOUT_MS` (a client
/// that stops reading its response): past it the write fails and hyper drops the connection.
struct WriteDeadline<S> {
    inner: S,
    stalled: Option<std::pin::Pin<Box<tokio::time::Sleep>>>,
}

impl<S> WriteDeadline<S> {
    fn new(inner: S) -> Self {
        WriteDeadline { inner, stalled: None }
    }

    /// `Pending` from the socket arms the deadline; progress disarms it; the deadline passing is an error.
    fn watch<T>(
        &mut self,
        cx: &mut std::task::Context<'_>,
        polled: std::task::Poll<std::io::Result<T>>,
    ) -> std::task::Poll<std::io::Result<T>> {
        use std::task::Poll;
        if polled.is_ready() {
            self.stalled = None;
            return polled;
        }
        let deadline = self.stalled.get_or_insert_with(|| {
            Box::pin(tokio::time::sleep(Duration::from_millis(crate::limits::SERVER_HTTP_WRITE_STALL_TIMEOUT_MS)))
        });
        match std::future::Future::poll(deadline.as_mut(), cx) {
            Poll::Ready(()) => Poll::Ready(Err(std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                "the client stopped reading its response",
            ))),
            Poll::Pending => Poll::Pending,
        }
    }
}

impl<S: tokio::io::AsyncRead + Unpin> tokio::io::AsyncRead for WriteDeadline<S> {
    fn poll_read(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.get_mut().inner).poll_read(cx, buf)
    }
}

impl<S: tokio::io::AsyncWrite + Unpin> tokio::io::AsyncWrite for WriteDeadline<S> {
    fn poll_write(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &[u8],
    ) -> std::task::Poll<std::io::Result<usize>> {
        let this = self.get_mut();
        let polled = std::pin::Pin::new(&mut this.inner).poll_write(cx, buf);
        this.watch(cx, polled)
    }

    fn poll_flush(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        let this = self.get_mut();
        let polled = std::pin::Pin::new(&mut this.inner).poll_flush(cx);
        this.watch(cx, polled)
    }

    fn poll_shutdown(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        let this = self.get_mut();
        let polled = std::pin::Pin::new(&mut this.inner).poll_shutdown(cx);
        this.watch(cx, polled)
    }
}

type Reply = Response<Full<Bytes>>;

fn reply(status: StatusCode, body: String) -> Reply {
    let mut response = Response::new(Full::new(Bytes::from(body)));
    *response.status_mut() = status;
    response.headers_mut().insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    response
}

fn refuse(status: StatusCode, code: i64, message: &str) -> Reply {
    reply(status, dispatch::error_response(None, &RpcError::new(code, message)))
}

fn empty(status: StatusCode) -> Reply {
    let mut response = Response::new(Full::new(Bytes::new()));
    *response.status_mut() = status;
    response
}

/// -32000: the transport's own refusals (the SDKs use it for these too).
const TRANSPORT_ERROR: i64 = -32000;
const SESSION_NOT_FOUND: i64 = -32001;

async fn handle(state: &Arc<State>, request: Request<Incoming>) -> Reply {
    if !state.host_allowed(request.headers()) {
        return refuse(
            StatusCode::FORBIDDEN,
            TRANSPORT_ERROR,
            "Forbidden: the Host header is not one this server answers",
        );
    }
    if let Some(origin) = request.headers().get(ORIGIN) {
        if !state.origin_allowed(origin) {
            return refuse(StatusCode::FORBIDDEN, TRANSPORT_ERROR, "Forbidden: the Origin header is not allowed");
        }
    }
    if request.uri().path() != state.path {
        return refuse(StatusCode::NOT_FOUND, TRANSPORT_ERROR, "Not Found");
    }
    match *request.method() {
        Method::POST => post(state, request).await,
        Method::DELETE => delete(state, request.headers()),
        _ => {
            let mut response = refuse(
                StatusCode::METHOD_NOT_ALLOWED,
                TRANSPORT_ERROR,
                "Method not allowed: this server answers POST (and DELETE to end a session)",
            );
            response.headers_mut().insert(ALLOW, HeaderValue::from_static("POST, DELETE"));
            response
        }
    }
}

fn header<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers.get(name).and_then(|v| v.to_str().ok()).map(|v| v.trim_matches(|c| c == ' ' || c == '\t'))
}

async fn post(state: &Arc<State>, request: Request<Incoming>) -> Reply {
    let json = header(request.headers(), CONTENT_TYPE.as_str())
        .and_then(|t| t.split(';').next())
        .is_some_and(|t| t.trim().eq_ignore_ascii_case("application/json"));
    if !json {
        return refuse(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            TRANSPORT_ERROR,
            "Unsupported Media Type: the body must be application/json",
        );
    }
    let (parts, body) = request.into_parts();
    let reading = tokio::time::timeout(
        Duration::from_millis(SERVER_HTTP_BODY_READ_TIMEOUT_MS),
        Limited::new(body, MAX_SERVER_MESSAGE_BYTES).collect(),
    );
    let Ok(read) = reading.await else {
        let mut response = refuse(
            StatusCode::REQUEST_TIMEOUT,
            TRANSPORT_ERROR,
            "Request Timeout: the request body did not arrive in time",
        );
        response.headers_mut().insert(hyper::header::CONNECTION, HeaderValue::from_static("close"));
        return response;
    };
    let body = match read {
        Ok(collected) => collected.to_bytes(),
        Err(e) if e.downcast_ref::<http_body_util::LengthLimitError>().is_some() => {
            return refuse(
                StatusCode::PAYLOAD_TOO_LARGE,
                INVALID_REQUEST,
                &format!("the request body is over the {MAX_SERVER_MESSAGE_BYTES} bytes this server reads"),
            )
        }
        Err(_) => return refuse(StatusCode::BAD_REQUEST, PARSE_ERROR, "the request body could not be read"),
    };
    if body.iter().find(|b| !b.is_ascii_whitespace()) == Some(&b'[') {
        return refuse(StatusCode::BAD_REQUEST, INVALID_REQUEST, "JSON-RPC batches are not supported");
    }
    let message = match serde_json::from_slice::<RawMessage>(&body) {
        Ok(message) => message,
        Err(e) => return refuse(StatusCode::BAD_REQUEST, PARSE_ERROR, &format!("Parse error: {e}")),
    };
    let headers = &parts.headers;
    match message.classify() {
        Some(Message::Request { id, method, params }) => {
            if !is_echoable_id(id) {
                return refuse(StatusCode::BAD_REQUEST, INVALID_REQUEST, "the request id must be a string or a number");
            }
            request_reply(state, headers, id, &method, params).await
        }
        Some(Message::Notification { params, .. }) => {
            let claimed = !matches!(claim_of(params), Claim::None);
            if !claimed {
                if let Some(id) = header(headers, SESSION_HEADER) {
                    if !state.sessions.lock().contains_key(id) {
                        return refuse(StatusCode::NOT_FOUND, SESSION_NOT_FOUND, "Session not found");
                    }
                }
            }
            empty(StatusCode::ACCEPTED)
        }
        Some(Message::Response { .. }) => empty(StatusCode::ACCEPTED),
        None => refuse(StatusCode::BAD_REQUEST, INVALID_REQUEST, "Bad Request: not a JSON-RPC message"),
    }
}

async fn request_reply(
    state: &Arc<State>,
    headers: &HeaderMap,
    id: &RawValue,
    method: &str,
    params: Option<&RawValue>,
) -> Reply {
    let served = dispatch::Served::start(&state.core, id, method, params);
    let answered = |outcome: std::result::Result<String, RpcError>| {
        let status = match &outcome {
            Err(e) if e.code == crate::protocol::era::UNSUPPORTED_PROTOCOL_VERSION || e.code == HEADER_MISMATCH => {
                StatusCode::BAD_REQUEST
            }
            _ => StatusCode::OK,
        };
        reply(status, served.response(&outcome))
    };
    let version_header = header(headers, VERSION_HEADER);
    match claim_of(params) {
        Claim::Modern(version) => {
            if let Err(mismatch) = check_modern_headers(headers, version, method, params) {
                return reply(StatusCode::BAD_REQUEST, served.response(&Err(mismatch)));
            }
            let outcome = served.answering(dispatch::answer(&state.core, method, params, Era::Modern(version))).await;
            // 2026-07-28: a method this server does not have is 404 on the wire too.
            let status = match &outcome {
                Err(e) if e.code == crate::protocol::jsonrpc::METHOD_NOT_FOUND => StatusCode::NOT_FOUND,
                _ => StatusCode::OK,
            };
            reply(status, served.response(&outcome))
        }
        Claim::Unsupported(requested) if version_header.is_some_and(|v| v != requested) => {
            // Headers are checked against the body before the version is judged.
            let error = RpcError::new(
                HEADER_MISMATCH,
                format!(
                    "the MCP-Protocol-Version header names {} but the body's envelope names {requested}",
                    version_header.unwrap_or_default()
                ),
            );
            reply(StatusCode::BAD_REQUEST, served.response(&Err(error)))
        }
        claim @ (Claim::Unsupported(_) | Claim::Malformed(_)) => {
            let mut response = answered(dispatch::reply_to(&state.core, method, params, claim).await);
            *response.status_mut() = StatusCode::BAD_REQUEST;
            response
        }
        Claim::None => {
            if let Some(version) = version_header.filter(|v| MODERN_PROTOCOL_VERSIONS.contains(v)) {
                let error = RpcError::new(
                    INVALID_PARAMS,
                    format!("the MCP-Protocol-Version header names {version}, but the request has no _meta envelope naming it"),
                );
                return reply(StatusCode::BAD_REQUEST, served.response(&Err(error)));
            }
            if method == "initialize" {
                let (_, result) = dispatch::initialize(&state.core, params);
                let Some(session) = state.open_session() else {
                    return refuse(
                        StatusCode::SERVICE_UNAVAILABLE,
                        TRANSPORT_ERROR,
                        "Service Unavailable: no session id could be made",
                    );
                };
                let mut response = reply(StatusCode::OK, served.response(&Ok(result)));
                response
                    .headers_mut()
                    .insert(SESSION_HEADER, HeaderValue::from_str(&session).expect("hex is a header value"));
                return response;
            }
            match header(headers, SESSION_HEADER) {
                None => {
                    return refuse(
                        StatusCode::BAD_REQUEST,
                        TRANSPORT_ERROR,
                        "Bad Request: Mcp-Session-Id header is required",
                    )
                }
                Some(session) => match state.sessions.lock().get_mut(session) {
                    Some(found) => found.last_used = Instant::now(),
                    None => return refuse(StatusCode::NOT_FOUND, SESSION_NOT_FOUND, "Session not found"),
                },
            }
            if let Some(version) = version_header.filter(|v| !SUPPORTED_PROTOCOL_VERSIONS.contains(v)) {
                return refuse(
                    StatusCode::BAD_REQUEST,
                    TRANSPORT_ERROR,
                    &format!("Bad Request: unsupported protocol version {version}"),
                );
            }
            answered(served.answering(dispatch::answer(&state.core, method, params, Era::Legacy)).await)
        }
    }
}

/// A 2026-07-28 request's headers must say what its body says.
fn check_modern_headers(
    headers: &HeaderMap,
    version: &str,
    method: &str,
    params: Option<&RawValue>,
) -> std::result::Result<(), RpcError> {
    let mismatch = |message: String| Err(RpcError::new(HEADER_MISMATCH, message));
    match header(headers, VERSION_HEADER) {
        Some(v) if v == version => {}
        Some(v) => {
            return mismatch(format!(
                "the MCP-Protocol-Version header names {v} but the body's envelope names {version}"
            ))
        }
        None => {
            return mismatch(format!(
                "the body's envelope names {version} but the MCP-Protocol-Version header is absent"
            ))
        }
    }
    match header(headers, METHOD_HEADER) {
        Some(m) if m == method => {}
        Some(m) => return mismatch(format!("the Mcp-Method header names {m} but the body names {method}")),
        None => return mismatch(format!("the body names {method} but the Mcp-Method header is absent")),
    }
    if method == "tools/call" {
        #[derive(Deserialize)]
        struct Named {
            #[serde(default)]
            name: Option<String>,
        }
        let name = params.and_then(|p| serde_json::from_str::<Named>(p.get()).ok()).and_then(|n| n.name);
        let header_name = header(headers, NAME_HEADER).map(crate::protocol::param_headers::decode_header_value);
        match (name, header_name) {
            (Some(name), Some(Some(given))) if given == name => {}
            (Some(name), Some(Some(given))) => {
                return mismatch(format!("the Mcp-Name header names {given:?} but the body calls {name:?}"))
            }
            (_, Some(None)) => return mismatch("the Mcp-Name header carries malformed Base64".to_owned()),
            (Some(name), None) => {
                return mismatch(format!("the body calls {name:?} but the Mcp-Name header is absent"))
            }
            (None, _) => {}
        }
    }
    Ok(())
}

fn delete(state: &State, headers: &HeaderMap) -> Reply {
    match header(headers, SESSION_HEADER) {
        None => refuse(StatusCode::BAD_REQUEST, TRANSPORT_ERROR, "Bad Request: Mcp-Session-Id header is required"),
        Some(id) => match state.sessions.lock().remove(id) {
            Some(_) => empty(StatusCode::OK),
            None => refuse(StatusCode::NOT_FOUND, SESSION_NOT_FOUND, "Session not found"),
        },
    }
}

fn is_loopback_name(host: &str) -> bool {
    host.eq_ignore_ascii_case("localhost") || host == "127.0.0.1" || host == "[::1]" || host == "::1"
}

/// `host[:port]` (or `[v6]:port`) without the port.
fn without_port(authority: &str) -> &str {
    if authority.starts_with('[') {
        return authority.split_inclusive(']').next().unwrap_or(authority);
    }
    authority.rsplit_once(':').map_or(authority, |(host, _)| host)
}

impl State {
    fn host_allowed(&self, headers: &HeaderMap) -> bool {
        if !self.loopback && self.allowed_hosts.is_empty() {
            return true;
        }
        let Some(host) = header(headers, HOST.as_str()) else { return false };
        let host = without_port(host).to_ascii_lowercase();
        (self.loopback && is_loopback_name(&host)) || self.allowed_hosts.contains(&host)
    }

    fn origin_allowed(&self, origin: &HeaderValue) -> bool {
        let Ok(origin) = origin.to_str() else { return false };
        let normalized = origin.trim_end_matches('/').to_ascii_lowercase();
        if self.allowed_origins.contains(&normalized) {
            return true;
        }
        let Ok(url) = url::Url::parse(origin) else { return false };
        self.loopback && matches!(url.scheme(), "http" | "https") && url.host_str().is_some_and(is_loopback_name)
    }

    /// A new session's id. At `MAX_HTTP_SESSIONS`, sessions idle for `HTTP_SESSION_IDLE_MS` are dropped,
    /// and if none is, the least recently used one (its client's next request is 404, and a client then
    /// starts a new session): a flood of `initialize` cannot lock new clients out. `None`: no randomness.
    fn open_session(&self) -> Option<String> {
        let mut sessions = self.sessions.lock();
        if sessions.len() >= MAX_HTTP_SESSIONS {
            let idle = Duration::from_millis(HTTP_SESSION_IDLE_MS);
            sessions.retain(|_, s| s.last_used.elapsed() < idle);
            if sessions.len() >= MAX_HTTP_SESSIONS {
                let oldest = sessions.iter().min_by_key(|(_, s)| s.last_used).map(|(id, _)| id.clone());
                if let Some(oldest) = oldest {
                    sessions.remove(&oldest);
                }
            }
        }
        let mut bytes = [0u8; 16];
        ring::rand::SecureRandom::fill(&ring::rand::SystemRandom::new(), &mut bytes).ok()?;
        let id: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
        sessions.insert(id.clone(), Session { last_used: Instant::now() });
        Some(id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Slowloris on the body: headers sent in time, then a body that never comes. No body read timeout,
    /// so 256 such connections hold every connection permit and the listener stops accepting for good.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn clients_that_never_send_their_body_cannot_hold_the_listener() {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let (core, _) = super::super::testing::server(None);
        let listener = listen(core, HttpOptions::parse("{}").unwrap()).await.unwrap();
        let address = listener.address;
        let head = |length: usize| {
            format!("POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{}\r\nContent-Type: application/json\r\nContent-Length: {length}\r\nConnection: close\r\n\r\n", address.port())
        };
        let mut held = Vec::new();
        for _ in 0..MAX_HTTP_CONNECTIONS {
            let mut stream = tokio::net::TcpStream::connect(address).await.unwrap();
            stream.write_all(head(1_000).as_bytes()).await.unwrap();
            held.push(stream);
        }
        // Well past the header read timeout.
        tokio::time::sleep(Duration::from_millis(HTTP_HEADER_READ_TIMEOUT_MS + 2_000)).await;
        let body = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#;
        let answered = tokio::time::timeout(Duration::from_secs(5), async {
            let mut stream = tokio::net::TcpStream::connect(address).await.unwrap();
            stream.write_all(format!("{}{body}", head(body.len())).as_bytes()).await.unwrap();
            let mut response = Vec::new();
            let _ = stream.read_to_end(&mut response).await;
            String::from_utf8_lossy(&response).into_owned()
        })
        .await;
        assert!(
            answered.as_deref().is_ok_and(|r| r.starts_with("HTTP/1.1 200")),
            "a well-behaved client got no answer: {answered:?}"
        );
        drop(held);
        listener.close().await;
    }

    /// At the session cap, a new `initialize` takes the place of the least recently used session.
    #[test]
    fn a_new_session_at_the_cap_evicts_the_least_recently_used() {
        let (core, _) = super::super::testing::server(None);
        let state = State {
            core,
            path: "/mcp".into(),
            loopback: true,
            allowed_origins: Vec::new(),
            allowed_hosts: Vec::new(),
            sessions: Mutex::new(HashMap::new()),
        };
        let first = state.open_session().unwrap();
        let second = state.open_session().unwrap();
        for _ in 2..MAX_HTTP_SESSIONS {
            state.open_session().unwrap();
        }
        let past = Instant::now() - Duration::from_secs(60);
        state.sessions.lock().get_mut(&second).unwrap().last_used = past;
        state.sessions.lock().get_mut(&first).unwrap().last_used = past + Duration::from_secs(1);
        let newest = state.open_session().expect("a place is made");
        let sessions = state.sessions.lock();
        assert_eq!(sessions.len(), MAX_HTTP_SESSIONS);
        assert!(
            sessions.contains_key(&newest) && sessions.contains_key(&first) && !sessions.contains_key(&second),
            "the least recently used one went"
        );
    }

    /// A connection beyond the cap is told so (503) at once, not left waiting in the accept queue.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_connection_beyond_the_cap_is_answered_503() {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let (core, _) = super::super::testing::server(None);
        let listener = listen(core, HttpOptions::parse("{}").unwrap()).await.unwrap();
        let mut held = Vec::new();
        for _ in 0..MAX_HTTP_CONNECTIONS {
            let mut stream = tokio::net::TcpStream::connect(listener.address).await.unwrap();
            stream.write_all(b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 10\r\n\r\n").await.unwrap();
            held.push(stream);
        }
        // Time for the accept loop to take all of them (held connections are answered only once their
        // bodies time out, long after this).
        tokio::time::sleep(Duration::from_millis(300)).await;
        let mut response = String::new();
        let mut stream = tokio::net::TcpStream::connect(listener.address).await.unwrap();
        // Bounded only so that a regression fails instead of hanging.
        let _ = tokio::time::timeout(
            Duration::from_millis(SERVER_HTTP_BODY_READ_TIMEOUT_MS / 2),
            stream.read_to_string(&mut response),
        )
        .await;
        assert!(response.starts_with("HTTP/1.1 503"), "{response:?}");
        assert!(response.contains("too many connections"), "{response:?}");
        drop(held);
        listener.close().await;
    }

    /// hyper drops a request's handler when its client hangs up mid-call (hyper 1.12
    /// `mid_message_detect_eof`); the execution itself runs to its end in its slot, as a JavaScript
    /// `execute` would, so a hang-up neither cuts a side effect in half nor frees a slot early.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_hang_up_does_not_cut_an_unkeyed_execution_short() {
        use std::sync::atomic::Ordering;
        use tokio::io::AsyncWriteExt;
        let (core, host) = super::super::testing::server(None);
        let listener = listen(core, HttpOptions::parse("{}").unwrap()).await.unwrap();
        let body = r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"slow","arguments":{"ms":1500},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}"#;
        let request = format!(
            "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nMCP-Protocol-Version: 2026-07-28\r\nMcp-Method: tools/call\r\nMcp-Name: slow\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        );
        let mut stream = tokio::net::TcpStream::connect(listener.address).await.unwrap();
        stream.write_all(request.as_bytes()).await.unwrap();
        tokio::time::sleep(Duration::from_millis(200)).await;
        drop(stream);
        tokio::time::sleep(Duration::from_millis(2_000)).await;
        assert_eq!(host.executions.load(Ordering::SeqCst), 1, "the execution was cut short when its client left");
        listener.close().await;
    }

    #[test]
    fn hosts_lose_their_ports() {
        assert_eq!(without_port("localhost:8080"), "localhost");
        assert_eq!(without_port("[::1]:80"), "[::1]");
        assert_eq!(without_port("example.com"), "example.com");
    }

    #[test]
    fn modern_headers_must_match_the_body() {
        let params = RawValue::from_string(r#"{"name":"echo"}"#.to_owned()).unwrap();
        let mut headers = HeaderMap::new();
        assert_eq!(
            check_modern_headers(&headers, "2026-07-28", "tools/call", Some(&params)).unwrap_err().code,
            HEADER_MISMATCH
        );
        headers.insert(VERSION_HEADER, HeaderValue::from_static("2026-07-28"));
        headers.insert(METHOD_HEADER, HeaderValue::from_static("tools/call"));
        assert!(check_modern_headers(&headers, "2026-07-28", "tools/call", Some(&params))
            .unwrap_err()
            .message
            .contains("Mcp-Name"));
        headers.insert(NAME_HEADER, HeaderValue::from_static("=?base64?ZWNobw==?="));
        check_modern_headers(&headers, "2026-07-28", "tools/call", Some(&params)).unwrap();
        headers.insert(NAME_HEADER, HeaderValue::from_static("other"));
        assert!(check_modern_headers(&headers, "2026-07-28", "tools/call", Some(&params)).is_err());
        headers.insert(METHOD_HEADER, HeaderValue::from_static("tools/list"));
        assert!(check_modern_headers(&headers, "2026-07-28", "tools/call", Some(&params))
            .unwrap_err()
            .message
            .contains("Mcp-Method"));
    }
}
