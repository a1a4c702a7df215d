//! What the engine asks on its own, told after the fact: the requests no caller made (a server's
//! handshake and listings, a re-listing after `list_changed` or a lapsed `ttlMs`, subscribe and
//! unsubscribe, completions, a recovery's reconnect) and every OAuth token request. JavaScript turns each
//! into a span once it ended (`lib/telemetry.ts`), parented on what caused it when there is such a span
//! (a first connect, a recovery), else a root span. Nothing is asked of JavaScript while the request runs,
//! and nothing of this is timed, built or sent unless the toolset's telemetry is on (`telemetry.enabled`,
//! the default, with a provider registered; `ConnectionEvents::wants_operations`).
//!
//! Nothing secret: a method name, a request id, a resource URI (JavaScript cuts its query and userinfo),
//! an endpoint's host and port, a grant type, an HTTP status, an error code. Never a token, a form
//! value, a URL path or query, an error's text.

use crate::error::{McpError, Result};
use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use url::Url;

/// Where a toolset's operations go: `(server name, operation)`.
pub type OperationSink = Arc<dyn Fn(&str, Operation) + Send + Sync>;

/// When an operation started (the wall clock, for a span's start) and how long it took (the monotonic one).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Timing {
    started: SystemTime,
    elapsed: Duration,
}

impl Timing {
    /// Its start, in ms since the epoch.
    pub fn started_ms(&self) -> f64 {
        self.started.duration_since(UNIX_EPOCH).map_or(0.0, |d| d.as_secs_f64() * 1000.0)
    }

    pub fn elapsed_us(&self) -> u64 {
        self.elapsed.as_micros() as u64
    }
}

/// A stopwatch started now.
#[derive(Debug, Clone, Copy)]
pub struct Started(SystemTime, std::time::Instant);

impl Started {
    pub fn now() -> Self {
        Started(SystemTime::now(), std::time::Instant::now())
    }

    pub fn stop(self) -> Timing {
        Timing { started: self.0, elapsed: self.1.elapsed() }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub enum Operation {
    /// An MCP request the engine sent on its own.
    Request {
        method: String,
        /// `resources/subscribe` and `resources/unsubscribe`: the resource's URI.
        uri: Option<String>,
        /// The JSON-RPC id it was sent with (none if it never was).
        request_id: Option<u64>,
        timing: Timing,
        /// mcpferry's code when it failed, and the server's JSON-RPC code when it answered with one.
        error: Option<&'static str>,
        rpc_code: Option<i64>,
    },
    /// A POST to an authorization server's token endpoint (or its device-authorization or revocation
    /// endpoint: `grant` says which).
    Token {
        /// The form's `grant_type` (`authorization_code`, `refresh_token`, `client_credentials`,
        /// `urn:ietf:params:oauth:grant-type:device_code`, …), or `device_authorization`, `revocation`.
        grant: String,
        host: String,
        port: u16,
        status: Option<u16>,
        /// The OAuth error code the server answered with when it is a registered one
        /// ([`REGISTERED_OAUTH_ERRORS`]), else `_OTHER`.
        oauth_error: Option<String>,
        error: Option<&'static str>,
        timing: Timing,
    },
}

impl Operation {
    /// An engine request that ended with `outcome`.
    pub fn request<T>(
        method: &str,
        uri: Option<String>,
        request_id: Option<u64>,
        timing: Timing,
        outcome: &Result<T>,
    ) -> Self {
        let error = outcome.as_ref().err();
        Operation::Request {
            method: method.to_owned(),
            uri,
            request_id,
            timing,
            error: error.map(McpError::code),
            rpc_code: error.and_then(super::rpc_code),
        }
    }

    /// A token-endpoint request to `endpoint` that ended: `status` when an answer came, the server's OAuth
    /// error code when it refused, mcpferry's code when it failed.
    pub fn token(
        grant: &str,
        endpoint: &Url,
        status: Option<u16>,
        oauth_error: Option<&str>,
        error: Option<&'static str>,
        timing: Timing,
    ) -> Self {
        Operation::Token {
            grant: bounded_code(grant),
            host: endpoint.host_str().unwrap_or_default().trim_start_matches('[').trim_end_matches(']').to_owned(),
            port: endpoint.port_or_known_default().unwrap_or(0),
            status,
            oauth_error: oauth_error.map(registered_oauth_error),
            error,
            timing,
        }
    }

    /// As the JSON of an `operation` event for JavaScript.
    pub fn to_json(&self, server: &str) -> String {
        let mut out = serde_json::Map::new();
        out.insert("server".into(), server.into());
        let timing = match self {
            Operation::Request { method, uri, request_id, timing, error, rpc_code } => {
                out.insert("kind".into(), "request".into());
                out.insert("method".into(), method.as_str().into());
                if let Some(uri) = uri {
                    out.insert("uri".into(), uri.as_str().into());
                }
                if let Some(id) = request_id {
                    out.insert("requestId".into(), (*id).into());
                }
                if let Some(code) = error {
                    out.insert("errorCode".into(), (*code).into());
                }
                if let Some(code) = rpc_code {
                    out.insert("rpcCode".into(), (*code).into());
                }
                timing
            }
            Operation::Token { grant, host, port, status, oauth_error, error, timing } => {
                out.insert("kind".into(), "token".into());
                out.insert("grant".into(), grant.as_str().into());
                out.insert("host".into(), host.as_str().into());
                out.insert("port".into(), (*port).into());
                if let Some(status) = status {
                    out.insert("status".into(), (*status).into());
                }
                if let Some(code) = oauth_error {
                    out.insert("oauthError".into(), code.as_str().into());
                }
                if let Some(code) = error {
                    out.insert("errorCode".into(), (*code).into());
                }
                timing
            }
        };
        out.insert("startedMs".into(), timing.started_ms().into());
        out.insert("us".into(), timing.elapsed_us().into());
        serde_json::Value::Object(out).to_string()
    }
}

/// A grant type as the form named it, kept when it looks like one (`refresh_token`, a URN), else `_OTHER`.
fn bounded_code(code: &str) -> String {
    let looks_like_a_code = !code.is_empty()
        && code.len() <= 64
        && code.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.' | b':'));
    if looks_like_a_code {
        code.to_owned()
    } else {
        "_OTHER".to_owned()
    }
}

/// The OAuth error codes an authorization server may answer a token, device-authorization, revocation or
/// registration request with, as the RFCs register them. Any other code an authorization server sends
/// (a hostile one could echo a secret as its "code") is `_OTHER`.
pub const REGISTERED_OAUTH_ERRORS: [&str; 22] = [
    // RFC 6749 §5.2 (token endpoint) and §4.1.2.1 (authorization endpoint)
    "invalid_request",
    "invalid_client",
    "invalid_grant",
    "unauthorized_client",
    "unsupported_grant_type",
    "invalid_scope",
    "access_denied",
    "unsupported_response_type",
    "server_error",
    "temporarily_unavailable",
    // RFC 8628 §3.5 (device authorization grant)
    "authorization_pending",
    "slow_down",
    "expired_token",
    // RFC 9449 (DPoP)
    "invalid_dpop_proof",
    "use_dpop_nonce",
    // RFC 8693 §2.2.2 (token exchange)
    "invalid_target",
    // RFC 7009 §2.2.1 (revocation)
    "unsupported_token_type",
    // RFC 7591 §3.2.2 (dynamic client registration)
    "invalid_redirect_uri",
    "invalid_client_metadata",
    "invalid_software_statement",
    "unapproved_software_statement",
    // RFC 6750 §3.1 (a bearer token refused)
    "invalid_token",
];

/// `code` when it is one of [`REGISTERED_OAUTH_ERRORS`], else `_OTHER`.
fn registered_oauth_error(code: &str) -> String {
    REGISTERED_OAUTH_ERRORS.iter().find(|registered| **registered == code).map_or("_OTHER", |c| c).to_owned()
}

tokio::task_local! {
    /// Where the token requests of the authorization work this task does are told.
    static TOKEN_WATCH: Arc<dyn Fn(Operation) + Send + Sync>;
}

/// Runs `work` (a server's authorization work) with its token requests told to `watch`.
pub async fn watching_tokens<F: Future>(watch: Option<&Arc<dyn Fn(Operation) + Send + Sync>>, work: F) -> F::Output {
    match watch {
        Some(watch) => TOKEN_WATCH.scope(watch.clone(), work).await,
        None => work.await,
    }
}

/// A token request ended: told to the task's watch, if it has one.
pub fn token_requested(operation: impl FnOnce() -> Operation) {
    let _ = TOKEN_WATCH.try_with(|watch| watch(operation()));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_request_says_its_method_id_and_codes_and_nothing_else() {
        let timing = Started::now().stop();
        let failed: Result<()> = Err(McpError::Rpc { code: -32601, message: "secret text".into(), data: None });
        let json = Operation::request("tools/list", None, Some(7), timing, &failed).to_json("github");
        let value: serde_json::Value = serde_json::from_str(&json).unwrap();
        assert_eq!(value["server"], "github");
        assert_eq!(value["method"], "tools/list");
        assert_eq!(value["requestId"], 7);
        assert_eq!(value["rpcCode"], -32601);
        assert_eq!(value["errorCode"], "mcp_protocol_error");
        assert!(value["startedMs"].as_f64().unwrap() > 1.6e12);
        assert!(!json.contains("secret"));
    }

    #[tokio::test]
    async fn token_requests_reach_the_watch_of_their_task_only() {
        let seen = Arc::new(parking_lot::Mutex::new(Vec::new()));
        let sink = seen.clone();
        let watch: Arc<dyn Fn(Operation) + Send + Sync> = Arc::new(move |op| sink.lock().push(op.to_json("s")));
        let endpoint = Url::parse("https://as.example:8443/token?x=QUERY").unwrap();
        let endpoint = &endpoint;
        let told = move |oauth_error| {
            move || Operation::token("refresh_token", endpoint, Some(400), oauth_error, None, Started::now().stop())
        };
        watching_tokens(Some(&watch), async { token_requested(told(Some("invalid_grant"))) }).await;
        token_requested(told(None)); // no watch here
        watching_tokens(Some(&watch), async { token_requested(told(Some("a sentence, with spaces"))) }).await;
        // A code-shaped value that no RFC registers (a hostile server could echo a secret as one).
        watching_tokens(Some(&watch), async { token_requested(told(Some("sk_live_4eC39HqLyjWDarjtT1zdp7dc"))) }).await;
        let seen = seen.lock();
        assert_eq!(seen.len(), 3);
        let first: serde_json::Value = serde_json::from_str(&seen[0]).unwrap();
        assert_eq!((first["host"].as_str(), first["port"].as_u64()), (Some("as.example"), Some(8443)));
        assert_eq!(first["oauthError"], "invalid_grant");
        assert!(!seen[0].contains("QUERY") && !seen[0].contains("/token"));
        assert!(seen[1].contains("\"oauthError\":\"_OTHER\""), "{}", seen[1]);
        assert!(seen[2].contains("\"oauthError\":\"_OTHER\"") && !seen[2].contains("sk_live"), "{}", seen[2]);
    }

    #[test]
    fn every_registered_oauth_error_is_kept_and_nothing_else() {
        for code in REGISTERED_OAUTH_ERRORS {
            assert_eq!(registered_oauth_error(code), code);
        }
        for code in ["", "INVALID_GRANT", "invalid_grant ", "custom_error", "urn:example:error"] {
            assert_eq!(registered_oauth_error(code), "_OTHER", "{code}");
        }
    }
}
