//! Every outbound HTTP request the engine makes goes through [`Egress::send`]. One place decides:
//!
//! | concern    | rule |
//! |------------|------|
//! | proxy      | proxy variables in the environment (`HTTP_PROXY`, `HTTPS_PROXY`, `ALL_PROXY`, …) are ignored, as Node's own `fetch` ignores them; only the `proxy` option sends requests through a proxy, and that proxy's address must pass `allowedHosts` itself |
//! | hosts      | the first URL and every redirect hop pass `allowedHosts` (by name); without a proxy, every DNS answer dialled passes it too (`guard::hosts::GuardedResolver`) |
//! | redirects  | followed here, not by reqwest (which would carry custom headers along): at most `MAX_REDIRECTS`; never from https to http; a hop to another origin carries only the protocol headers — no configured header, no bearer, no session id, none of it on any later hop either |
//! | deadlines  | every request has one, until its response headers arrive, all hops included |
//! | error text | never a URL's query or userinfo: reqwest's errors are rendered without their URL, URLs as `scheme://host:port/path` at most, and error bodies have the URL's query values blanked |
//!
//! A client comes from an [`EgressPolicy`] (guard and proxy): toolsets with equal policies share one
//! client, its TLS configuration and its connection pool (see `clients`); nothing of a session is on it.
//! An exchange marked [`Exchange::held_open`] (a session's event stream) goes through the policy's
//! HTTP/1.1 streams client instead, so it never holds a stream slot of a shared HTTP/2 connection.

mod clients;

use crate::error::{McpError, Result};
use crate::guard::hosts::{HostGuard, HostRefused};
use crate::guard::redact::{MIN_SECRET_CHARS, REDACTED};
use crate::limits::MAX_REDIRECTS;
use clients::ClientKind;
use reqwest::header::{HeaderMap, HeaderName, HeaderValue, LOCATION};
use reqwest::{Method, Response, StatusCode};
use std::sync::{Arc, Once};
use std::time::Duration;
use url::Url;

/// What decides how requests reach the network.
#[derive(Debug, Clone, Default)]
pub struct EgressPolicy {
    /// `allowedHosts`, when set.
    pub guard: Option<Arc<HostGuard>>,
    /// The `proxy` option, validated by [`proxy_url`].
    pub proxy: Option<Url>,
}

/// The client and the rules it is used under.
pub struct Egress {
    client: Arc<reqwest::Client>,
    streams: Arc<reqwest::Client>,
    guard: Option<Arc<HostGuard>>,
}

/// Where a request may be redirected.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Redirects {
    /// Any hop `allowedHosts` allows (any hop, without it); a hop to another origin is stripped.
    Follow,
    /// Only hops on the first URL's origin (the legacy SSE endpoint, which must stay on its stream's origin).
    SameOrigin,
}

/// One request to send.
pub struct Exchange {
    method: Method,
    url: Url,
    /// What belongs to the URL's origin: configured headers, the bearer, the session id.
    origin_headers: HeaderMap,
    /// Framing headers (content type, accept, protocol version) that go with every hop.
    protocol_headers: HeaderMap,
    body: Option<bytes::Bytes>,
    deadline: Duration,
    redirects: Redirects,
    held_open: bool,
}

impl Exchange {
    pub fn new(method: Method, url: Url, deadline: Duration) -> Self {
        Exchange {
            method,
            url,
            origin_headers: HeaderMap::new(),
            protocol_headers: HeaderMap::new(),
            body: None,
            deadline,
            redirects: Redirects::Follow,
            held_open: false,
        }
    }

    /// Headers only the URL's own origin may see.
    pub fn origin_headers(mut self, headers: HeaderMap) -> Self {
        self.origin_headers.extend(headers);
        self
    }

    pub fn origin_header(mut self, name: impl Into<HeaderName>, value: HeaderValue) -> Self {
        self.origin_headers.insert(name.into(), value);
        self
    }

    /// A header that carries no credential and goes with every hop.
    pub fn protocol_header(mut self, name: impl Into<HeaderName>, value: HeaderValue) -> Self {
        self.protocol_headers.insert(name.into(), value);
        self
    }

    pub fn body(mut self, body: bytes::Bytes) -> Self {
        self.body = Some(body);
        self
    }

    /// Replace the deadline (until the response headers arrive, all hops included).
    pub fn deadline(mut self, deadline: Duration) -> Self {
        self.deadline = deadline;
        self
    }

    pub fn same_origin_only(mut self) -> Self {
        self.redirects = Redirects::SameOrigin;
        self
    }

    /// A response that may stay open for as long as the session lives (a standalone event stream): sent
    /// over a connection of its own (HTTP/1.1), never as a stream of the shared HTTP/2 connection.
    pub fn held_open(mut self) -> Self {
        self.held_open = true;
        self
    }
}

static CRYPTO_PROVIDER: Once = Once::new();

impl Egress {
    /// The process's client for this policy (see `clients`): keep-alive pooling and HTTP/2 where the
    /// server offers it (ALPN). TLS is rustls with ring, so the addon needs no system TLS library.
    pub fn new(policy: &EgressPolicy) -> Result<Egress> {
        CRYPTO_PROVIDER.call_once(|| {
            // Fails only if a provider is installed already, which is just as good.
            let _ = rustls::crypto::ring::default_provider().install_default();
        });
        if let (Some(proxy), Some(guard)) = (&policy.proxy, &policy.guard) {
            guard
                .check_url(proxy)
                .map_err(|e| McpError::HostNotAllowed(format!("proxy {}: {e}", display_url(proxy))))?;
        }
        let client = clients::shared_client(ClientKind::Requests, policy.guard.as_ref(), policy.proxy.as_ref())?;
        let streams = clients::shared_client(ClientKind::Streams, policy.guard.as_ref(), policy.proxy.as_ref())?;
        Ok(Egress { client, streams, guard: policy.guard.clone() })
    }

    /// Refuse a URL outside `allowedHosts`.
    pub fn check_url(&self, url: &Url) -> Result<()> {
        match &self.guard {
            Some(guard) => guard.check_url(url),
            None => Ok(()),
        }
    }

    /// Send `exchange`, following redirects under the rules above, and return the final response once
    /// its headers are in. Fails with `Timeout` when they are not in by the exchange's deadline.
    pub async fn send(&self, exchange: Exchange) -> Result<Response> {
        let deadline = exchange.deadline;
        tokio::time::timeout(deadline, self.follow(exchange))
            .await
            .unwrap_or(Err(McpError::Timeout { after_ms: deadline.as_millis() as u64 }))
    }

    async fn follow(&self, exchange: Exchange) -> Result<Response> {
        let Exchange {
            mut method, url: first, origin_headers, protocol_headers, mut body, redirects, held_open, ..
        } = exchange;
        let client = if held_open { &self.streams } else { &self.client };
        let origin = first.origin();
        let mut url = first.clone();
        let mut credentials = true;
        self.check_url(&url)?;
        for hop in 0..=MAX_REDIRECTS {
            let mut request = client.request(method.clone(), url.clone()).headers(protocol_headers.clone());
            if credentials {
                request = request.headers(origin_headers.clone());
            }
            if let Some(body) = &body {
                request = request.body(body.clone());
            }
            let response = request.send().await.map_err(|e| match request_error(e, &url) {
                // The first request was delivered; only this hop's address was refused.
                McpError::HostNotAllowed(text) if hop > 0 => {
                    McpError::RedirectRefused(format!("redirect refused: {text}"))
                }
                other => other,
            })?;
            let Some(next) = redirect_target(&response, &url)? else {
                return Ok(response);
            };
            if url.scheme() == "https" && next.scheme() == "http" {
                return Err(McpError::Transport(format!(
                    "a redirect from https to http ({}) is refused; nothing was sent there",
                    display_url(&next)
                )));
            }
            if next.origin() != origin {
                if redirects == Redirects::SameOrigin {
                    return Err(McpError::RedirectRefused(format!(
                        "redirect to another origin ({}) refused: the endpoint must stay on the server's origin; nothing was sent there",
                        next.origin().ascii_serialization()
                    )));
                }
                credentials = false;
            }
            self.check_url(&next).map_err(|e| McpError::RedirectRefused(format!("redirect refused: {e}")))?;
            if redirect_drops_body(response.status(), &method) {
                method = Method::GET;
                body = None;
            }
            url = next;
        }
        Err(McpError::Transport(format!("more than {MAX_REDIRECTS} redirects from {}; giving up", display_url(&first))))
    }
}

/// Where a redirect response points, if it is one.
fn redirect_target(response: &Response, from: &Url) -> Result<Option<Url>> {
    let status = response.status();
    let redirect = matches!(
        status,
        StatusCode::MOVED_PERMANENTLY
            | StatusCode::FOUND
            | StatusCode::SEE_OTHER
            | StatusCode::TEMPORARY_REDIRECT
            | StatusCode::PERMANENT_REDIRECT
    );
    let Some(location) = response.headers().get(LOCATION).filter(|_| redirect) else {
        return Ok(None);
    };
    let next = location
        .to_str()
        .ok()
        .and_then(|l| from.join(l).ok())
        .filter(|u| matches!(u.scheme(), "http" | "https") && u.host().is_some())
        .ok_or_else(|| {
            McpError::Transport(format!(
                "the server sent a redirect (HTTP {status}) to an invalid or non-HTTP location"
            ))
        })?;
    Ok(Some(next))
}

/// 303, and 301/302 after a POST, turn the request into a GET without a body (as browsers and reqwest
/// do); 307 and 308 repeat it as it was.
fn redirect_drops_body(status: StatusCode, method: &Method) -> bool {
    match status {
        StatusCode::SEE_OTHER => *method != Method::HEAD,
        StatusCode::MOVED_PERMANENTLY | StatusCode::FOUND => *method == Method::POST,
        _ => false,
    }
}

/// A URL as error text may show it: `scheme://host:port/path`, never userinfo, query or fragment.
pub fn display_url(url: &Url) -> String {
    match url.origin() {
        origin @ url::Origin::Tuple(..) => format!("{}{}", origin.ascii_serialization(), url.path()),
        url::Origin::Opaque(_) => format!("{}:…", url.scheme()),
    }
}

/// `text` with the query of `url` blanked out, whole and value by value (raw and decoded): a server
/// that echoes its request line must not get `?token=…` into an error message.
pub fn scrub_url_secrets(text: &str, url: &Url) -> String {
    let Some(query) = url.query().filter(|q| !q.is_empty()) else {
        return text.to_owned();
    };
    let mut values: Vec<String> = vec![query.to_owned()];
    for pair in query.split('&') {
        if let Some((_, value)) = pair.split_once('=') {
            values.push(value.to_owned());
        }
    }
    values.extend(url.query_pairs().map(|(_, value)| value.into_owned()));
    values.retain(|v| v.chars().count() >= MIN_SECRET_CHARS);
    values.sort_by_key(|v| std::cmp::Reverse(v.len()));
    let mut out = text.to_owned();
    for value in &values {
        if out.contains(value.as_str()) {
            out = out.replace(value.as_str(), REDACTED);
        }
    }
    out
}

/// A reqwest failure as an `McpError`, without any URL in its text. A refusal by the host guard (in
/// DNS resolution) keeps its code.
pub fn request_error(error: reqwest::Error, url: &Url) -> McpError {
    let is_connect = error.is_connect();
    let error = error.without_url();
    let mut message = format!("HTTP request to {} failed: {error}", display_url(url));
    let mut source = std::error::Error::source(&error);
    while let Some(cause) = source {
        if let Some(refused) = cause.downcast_ref::<HostRefused>() {
            return McpError::HostNotAllowed(refused.0.clone());
        }
        message.push_str(&format!(": {cause}"));
        source = cause.source();
    }
    // Belt and braces: no cause we render is known to carry a URL, but none may carry its query.
    let message = scrub_url_secrets(&message, url);
    // No connection was made, so nothing was delivered: what a supervisor takes for a server that is down.
    if is_connect {
        McpError::Unreachable(message)
    } else {
        McpError::Transport(message)
    }
}

/// Validate the `proxy` option: an `http://` or `https://` URL with a host and at most a port — no
/// credentials (they would sit in a URL), no path, query or fragment.
pub fn proxy_url(text: &str) -> Result<Url> {
    let url = Url::parse(text).map_err(|e| McpError::config(format!("options.proxy is not a valid URL: {e}")))?;
    if !matches!(url.scheme(), "http" | "https") || url.host().is_none() {
        return Err(McpError::config("options.proxy must be an http:// or https:// URL with a host"));
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err(McpError::config("options.proxy must not carry credentials (user@host)"));
    }
    if url.path() != "/" || url.query().is_some() || url.fragment().is_some() {
        return Err(McpError::config("options.proxy must be scheme://host[:port] only (no path, query or fragment)"));
    }
    Ok(url)
}

/// Read a whole body within `deadline`, one bound for all of it (a body that drips a byte at a time
/// ends there as a silent one does), refusing it as soon as it passes `max_bytes`. Event streams, whose
/// bound is the silence between events, are read with `transport::http::read_events`.
pub async fn read_body(response: &mut Response, max_bytes: usize, deadline: Duration) -> Result<Vec<u8>> {
    if response.content_length().is_some_and(|n| n as usize > max_bytes) {
        return Err(McpError::ResultTooLarge { limit_bytes: max_bytes });
    }
    let reading = async {
        let mut body = Vec::new();
        while let Some(chunk) = next_chunk(response, None).await? {
            if body.len() + chunk.len() > max_bytes {
                return Err(McpError::ResultTooLarge { limit_bytes: max_bytes });
            }
            body.extend_from_slice(&chunk);
        }
        Ok(body)
    };
    tokio::time::timeout(deadline, reading)
        .await
        .unwrap_or(Err(McpError::Timeout { after_ms: deadline.as_millis() as u64 }))
}

/// The next chunk of a body, waiting at most `idle` for it when given; errors without the URL.
pub(crate) async fn next_chunk(response: &mut Response, idle: Option<Duration>) -> Result<Option<bytes::Bytes>> {
    let chunk = match idle {
        Some(idle) => tokio::time::timeout(idle, response.chunk())
            .await
            .map_err(|_| McpError::Timeout { after_ms: idle.as_millis() as u64 })?,
        None => response.chunk().await,
    };
    chunk.map_err(|e| request_error(e, response.url()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_are_shown_without_query_or_userinfo() {
        let url = Url::parse("http://user:pw@example.com:8080/mcp/x?token=sk-abcdef#frag").unwrap();
        assert_eq!(display_url(&url), "http://example.com:8080/mcp/x");
        assert_eq!(display_url(&Url::parse("https://example.com/").unwrap()), "https://example.com/");
    }

    #[test]
    fn query_values_are_scrubbed_raw_and_decoded() {
        let url = Url::parse("http://h/mcp?token=sk-query%2Bsecret&api_key=abcdefgh&x=1").unwrap();
        let text = "GET /mcp?token=sk-query%2Bsecret&api_key=abcdefgh&x=1 and sk-query+secret and abcdefgh, x=1";
        let scrubbed = scrub_url_secrets(text, &url);
        assert!(!scrubbed.contains("sk-query") && !scrubbed.contains("abcdefgh"), "{scrubbed}");
        assert!(scrubbed.ends_with("x=1"), "short values stay: {scrubbed}");
        assert_eq!(scrub_url_secrets("plain", &Url::parse("http://h/").unwrap()), "plain");
    }

    #[test]
    fn proxy_option_validation() {
        assert_eq!(proxy_url("http://127.0.0.1:3128").unwrap().as_str(), "http://127.0.0.1:3128/");
        assert!(proxy_url("https://proxy.corp/").is_ok());
        for bad in ["socks5://h:1080", "http://u:p@h:1", "http://h:1/path", "http://h:1/?a=b", "nope"] {
            assert_eq!(proxy_url(bad).unwrap_err().code(), "mcp_config_invalid", "{bad}");
        }
    }

    #[test]
    fn a_proxy_outside_allowed_hosts_is_refused_when_the_client_is_built() {
        let guard = Arc::new(HostGuard::new(&["internal-metadata.test".to_owned()]).unwrap());
        let policy = EgressPolicy { guard: Some(guard), proxy: Some(proxy_url("http://127.0.0.1:3128").unwrap()) };
        let refused = Egress::new(&policy).err().expect("refused");
        assert_eq!(refused.code(), "mcp_host_not_allowed");
        assert!(refused.to_string().contains("proxy http://127.0.0.1:3128/"), "{refused}");
    }

    #[test]
    fn redirected_methods() {
        assert!(redirect_drops_body(StatusCode::SEE_OTHER, &Method::POST));
        assert!(redirect_drops_body(StatusCode::FOUND, &Method::POST));
        assert!(!redirect_drops_body(StatusCode::TEMPORARY_REDIRECT, &Method::POST));
        assert!(!redirect_drops_body(StatusCode::PERMANENT_REDIRECT, &Method::POST));
        assert!(!redirect_drops_body(StatusCode::MOVED_PERMANENTLY, &Method::GET));
    }

    /// A server that sends its headers at once, then `body` one byte every `gap`.
    async fn dripping_server(body: &'static [u8], gap: Duration) -> url::Url {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = url::Url::parse(&format!("http://{}/", listener.local_addr().unwrap())).unwrap();
        tokio::spawn(async move {
            while let Ok((mut socket, _)) = listener.accept().await {
                tokio::spawn(async move {
                    let _ = socket.read(&mut [0u8; 4096]).await;
                    let head = format!(
                        "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n",
                        body.len()
                    );
                    let _ = socket.write_all(head.as_bytes()).await;
                    for byte in body {
                        tokio::time::sleep(gap).await;
                        if socket.write_all(std::slice::from_ref(byte)).await.is_err() {
                            return;
                        }
                    }
                });
            }
        });
        url
    }

    #[tokio::test]
    async fn a_body_that_drips_ends_at_its_deadline_however_short_each_pause() {
        let egress = Egress::new(&EgressPolicy::default()).unwrap();
        let get = |url: url::Url| egress.send(Exchange::new(Method::GET, url, Duration::from_secs(5)));
        // 200 bytes 25 ms apart: five seconds in all, no pause anywhere near the deadline.
        let mut response = get(dripping_server(&[b' '; 200], Duration::from_millis(25)).await).await.unwrap();
        assert_eq!(
            read_body(&mut response, 1024, Duration::from_millis(300)).await,
            Err(McpError::Timeout { after_ms: 300 })
        );
        // A body that arrives whole within the deadline is read whole, however it is cut up.
        let mut response = get(dripping_server(b"{\"a\":1}", Duration::from_millis(5)).await).await.unwrap();
        assert_eq!(read_body(&mut response, 1024, Duration::from_secs(10)).await.unwrap(), b"{\"a\":1}");
    }
}
