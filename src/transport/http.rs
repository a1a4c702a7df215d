//! What the two HTTP transports share: the client, session headers, bounded body and event reading.

use super::event_stream::{Event, EventStreamError, EventStreamParser};
use crate::error::{McpError, Result};
use reqwest::header::{HeaderMap, HeaderValue, CONTENT_TYPE};
use reqwest::Response;
use crate::guard::hosts::{self, GuardedResolver, HostGuard, HostRefused};
use std::ops::ControlFlow;
use std::sync::{Arc, Mutex, Once};
use std::time::Duration;

/// How to reach one HTTP server: its URL, the validated extra headers, the host guard, and the bearer
/// credential (shared with the toolset, which rotates it when `auth` hands out a new token).
#[derive(Debug, Clone)]
pub struct HttpSpec {
    pub url: url::Url,
    pub headers: HeaderMap,
    pub guard: Option<Arc<HostGuard>>,
    pub credential: Credential,
}

/// What both HTTP transports hold: the client, where to go, where answers go, the bounds, and whether
/// the transport was closed. Each transport's own state derefs to it.
pub struct HttpBase {
    pub client: reqwest::Client,
    pub spec: HttpSpec,
    pub sink: Arc<dyn super::MessageSink>,
    pub options: super::TransportOptions,
    pub closed: std::sync::atomic::AtomicBool,
}

impl HttpBase {
    pub fn new(spec: &HttpSpec, sink: Arc<dyn super::MessageSink>, options: super::TransportOptions) -> Result<Self> {
        Ok(HttpBase { client: client(spec.guard.clone())?, spec: spec.clone(), sink, options, closed: false.into() })
    }
}

/// The current `Authorization` value, if `auth` is configured.
#[derive(Debug, Clone, Default)]
pub struct Credential(Arc<Mutex<Option<HeaderValue>>>);

impl Credential {
    pub fn set_bearer(&self, token: &str) -> Result<()> {
        let mut value = HeaderValue::from_str(&format!("Bearer {token}"))
            .map_err(|_| McpError::Auth("auth returned a token that cannot be sent in a header".into()))?;
        value.set_sensitive(true);
        *self.0.lock().unwrap() = Some(value);
        Ok(())
    }

    pub fn current(&self) -> Option<HeaderValue> {
        self.0.lock().unwrap().clone()
    }

    /// The configured headers plus the bearer, for one request.
    pub fn apply(&self, request: reqwest::RequestBuilder, headers: &HeaderMap) -> reqwest::RequestBuilder {
        let request = request.headers(headers.clone());
        match self.current() {
            Some(bearer) => request.header(reqwest::header::AUTHORIZATION, bearer),
            None => request,
        }
    }
}

pub const HEADER_SESSION_ID: &str = "mcp-session-id";
pub const HEADER_PROTOCOL_VERSION: &str = "mcp-protocol-version";
pub const HEADER_LAST_EVENT_ID: &str = "last-event-id";
pub const ACCEPT_BOTH: &str = "application/json, text/event-stream";
pub const EVENT_STREAM: &str = "text/event-stream";

const CONNECT_TIMEOUT_SECS: u64 = 10;
const POOL_IDLE_TIMEOUT_SECS: u64 = 90;
const MAX_REDIRECTS: usize = 5;

static CRYPTO_PROVIDER: Once = Once::new();

/// A client with keep-alive pooling and HTTP/2 where the server offers it (ALPN). TLS is rustls with
/// ring, so the addon needs no system TLS library. With a guard, DNS answers and redirect hops pass it.
pub fn client(guard: Option<Arc<HostGuard>>) -> Result<reqwest::Client> {
    CRYPTO_PROVIDER.call_once(|| {
        // Fails only if a provider is installed already, which is just as good.
        let _ = rustls::crypto::ring::default_provider().install_default();
    });
    let mut builder = reqwest::Client::builder()
        .connect_timeout(Duration::from_secs(CONNECT_TIMEOUT_SECS))
        .pool_idle_timeout(Duration::from_secs(POOL_IDLE_TIMEOUT_SECS))
        .tcp_nodelay(true)
        .redirect(hosts::redirect_policy(guard.clone(), MAX_REDIRECTS));
    if let Some(guard) = guard {
        builder = builder.dns_resolver(Arc::new(GuardedResolver { guard }));
    }
    builder
        .build()
        .map_err(|e| McpError::Transport(format!("could not build the HTTP client: {e}")))
}

pub fn transport_error(e: reqwest::Error) -> McpError {
    // reqwest's Display can include the URL; it never includes header values.
    let mut message = format!("HTTP request failed: {e}");
    let mut source = std::error::Error::source(&e);
    while let Some(cause) = source {
        if let Some(refused) = cause.downcast_ref::<HostRefused>() {
            return McpError::HostNotAllowed(refused.0.clone());
        }
        message.push_str(&format!(": {cause}"));
        source = cause.source();
    }
    McpError::Transport(message)
}

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

/// Read a whole body, refusing it as soon as it passes `max_bytes` and giving up after `idle` of silence.
pub async fn read_body(response: &mut Response, max_bytes: usize, idle: Duration) -> Result<Vec<u8>> {
    if response.content_length().is_some_and(|n| n as usize > max_bytes) {
        return Err(McpError::ResultTooLarge { limit_bytes: max_bytes });
    }
    let mut body = Vec::new();
    while let Some(chunk) = next_chunk(response, Some(idle)).await? {
        if body.len() + chunk.len() > max_bytes {
            return Err(McpError::ResultTooLarge { limit_bytes: max_bytes });
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}

/// A short, safe excerpt of an error body for a message.
pub async fn error_excerpt(mut response: Response, secrets: &crate::guard::redact::Secrets) -> String {
    let status = response.status();
    let body = match tokio::time::timeout(Duration::from_secs(2), response.chunk()).await {
        Ok(Ok(Some(bytes))) => super::quote_bytes(&bytes, secrets),
        _ => String::new(),
    };
    if body.is_empty() {
        format!("HTTP {status}")
    } else {
        format!("HTTP {status}: {body}")
    }
}

async fn next_chunk(response: &mut Response, idle: Option<Duration>) -> Result<Option<bytes::Bytes>> {
    let chunk = match idle {
        Some(idle) => tokio::time::timeout(idle, response.chunk())
            .await
            .map_err(|_| McpError::Timeout { after_ms: idle.as_millis() as u64 })?,
        None => response.chunk().await,
    };
    chunk.map_err(transport_error)
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
        let chunk = match next_chunk(response, idle).await {
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
