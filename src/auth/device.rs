//! The device authorization grant (RFC 8628): for a host that cannot receive a redirect. The engine
//! asks for a device code, the host shows the person a URL and a short code (the `present` callback),
//! and the engine polls the token endpoint until the person approves, declines, or the code expires.
//!
//! Polling honours the server's `interval` (default 5 s, clamped to
//! `OAUTH_DEVICE_MIN_INTERVAL_SECS..=OAUTH_DEVICE_MAX_INTERVAL_SECS`), adds 5 s on each `slow_down`,
//! doubles it after a poll that timed out (RFC 8628 §3.5), and stops at the code's `expires_in`, at the
//! caller's deadline, or at once when the caller cancels.

use crate::auth::discovery::AuthServerMetadata;
use crate::auth::token::{
    check_endpoint, check_grant_supported, post_form, remaining, request_token, ClientCredentials, TokenError,
    TokenResponse,
};
use crate::egress::Egress;
use crate::error::{McpError, Result};
use crate::guard::redact::REDACTED;
use crate::limits::{
    MAX_USER_CODE_CHARS, OAUTH_DEVICE_DEFAULT_EXPIRES_SECS, OAUTH_DEVICE_DEFAULT_INTERVAL_SECS,
    OAUTH_DEVICE_MAX_EXPIRES_SECS, OAUTH_DEVICE_MAX_INTERVAL_SECS, OAUTH_DEVICE_MIN_INTERVAL_SECS,
    OAUTH_DEVICE_POLL_TIMEOUT_SECS, OAUTH_DEVICE_SLOW_DOWN_SECS,
};
use futures_util::future::BoxFuture;
use serde::Deserialize;
use std::fmt;
use std::future::Future;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};
use tokio_util::sync::CancellationToken;
use url::Url;

pub const DEVICE_CODE_GRANT: &str = "urn:ietf:params:oauth:grant-type:device_code";

/// What the host shows the person. Debug leaves out the user code (and the complete URL, which holds it).
#[derive(Clone)]
pub struct DevicePrompt {
    /// Where the person goes and types `user_code`.
    pub verification_uri: String,
    /// The same page with the code filled in, when the server offers one.
    pub verification_uri_complete: Option<String>,
    pub user_code: String,
    /// How long the code is good for, from when the prompt was made.
    pub expires_in: Duration,
    /// When the code expires, in milliseconds since the Unix epoch (`expiresAt` for the host).
    pub expires_at_ms: u64,
}

impl DevicePrompt {
    /// The URL to show: the complete one when there is one.
    pub fn url(&self) -> &str {
        self.verification_uri_complete.as_deref().unwrap_or(&self.verification_uri)
    }
}

impl fmt::Debug for DevicePrompt {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DevicePrompt")
            .field("verification_uri", &self.verification_uri)
            .field("verification_uri_complete", &self.verification_uri_complete.as_ref().map(|_| REDACTED))
            .field("user_code", &REDACTED)
            .field("expires_in", &self.expires_in)
            .finish()
    }
}

/// The device authorization response (RFC 8628 §3.2).
#[derive(Deserialize)]
struct DeviceAuthorization {
    device_code: String,
    user_code: String,
    // Some servers (Google's) still use the draft's name.
    #[serde(alias = "verification_url")]
    verification_uri: String,
    #[serde(default)]
    verification_uri_complete: Option<String>,
    #[serde(default)]
    expires_in: Option<serde_json::Value>,
    #[serde(default)]
    interval: Option<serde_json::Value>,
}

/// Seconds as a number or a numeric string.
fn seconds(value: &Option<serde_json::Value>) -> Option<u64> {
    match value.as_ref()? {
        serde_json::Value::Number(n) => n.as_u64(),
        serde_json::Value::String(s) => s.trim().parse().ok(),
        _ => None,
    }
}

/// Run the device flow: ask for a code, `present` it, poll until a token, a refusal, expiry, the
/// deadline (`mcp_timeout`) or cancellation (`mcp_aborted`). The person declining is `mcp_auth_error`
/// ("the person declined"); so is an expired code. `scope` is sent when given and not empty;
/// `resource` (RFC 8707) goes with both requests.
#[allow(clippy::too_many_arguments)] // the contract's signature (AUTH.md)
pub async fn device_flow(
    egress: &Egress,
    metadata: &AuthServerMetadata,
    client: &ClientCredentials,
    scope: Option<String>,
    resource: &str,
    present: impl Fn(DevicePrompt) -> BoxFuture<'static, Result<()>>,
    cancel: CancellationToken,
    deadline: Duration,
    request: Duration,
) -> std::result::Result<TokenResponse, TokenError> {
    let flow = DeviceFlow { egress, metadata, client, resource, cancel, request, second: Duration::from_secs(1) };
    flow.run(scope, present, deadline).await
}

struct DeviceFlow<'a> {
    egress: &'a Egress,
    metadata: &'a AuthServerMetadata,
    client: &'a ClientCredentials,
    resource: &'a str,
    cancel: CancellationToken,
    /// The device authorization request's own deadline (the login's automated part; polls are the
    /// person's time, each with its own bound).
    request: Duration,
    /// How long the server's "second" lasts: one real second, except in tests, which run the same
    /// arithmetic (intervals, `slow_down`, expiry, poll timeout) fast.
    second: Duration,
}

impl DeviceFlow<'_> {
    fn seconds(&self, count: u64) -> Duration {
        self.second * count as u32
    }

    async fn run(
        &self,
        scope: Option<String>,
        present: impl Fn(DevicePrompt) -> BoxFuture<'static, Result<()>>,
        deadline: Duration,
    ) -> std::result::Result<TokenResponse, TokenError> {
        let until = Instant::now() + deadline;
        check_grant_supported(self.metadata.grant_types_supported.as_ref(), DEVICE_CODE_GRANT)?;
        let endpoint = self.metadata.device_authorization_endpoint.as_ref().ok_or_else(|| {
            McpError::Auth(
                "the authorization server offers no device flow (its metadata has no device_authorization_endpoint)"
                    .to_owned(),
            )
        })?;
        let mut form = vec![("resource", self.resource.to_owned())];
        if let Some(scope) = scope.filter(|s| !s.is_empty()) {
            form.push(("scope", scope));
        }
        // A DPoP proof belongs to the token requests (RFC 9449 §5), not to this one.
        let client = self.client.clone().with_dpop(None);
        let request = post_form(
            self.egress,
            endpoint,
            "device authorization endpoint",
            &self.metadata.issuer,
            &client,
            form,
            remaining(until).min(self.request),
        );
        let body = self.cancellable(request).await?;
        let authorization = parse_device_authorization(&body)?;

        let expires_in = self.seconds(
            seconds(&authorization.expires_in)
                .unwrap_or(OAUTH_DEVICE_DEFAULT_EXPIRES_SECS)
                .min(OAUTH_DEVICE_MAX_EXPIRES_SECS),
        );
        let code_expires = Instant::now() + expires_in;
        let expires_at = SystemTime::now() + expires_in;
        let prompt = DevicePrompt {
            verification_uri: authorization.verification_uri.clone(),
            verification_uri_complete: authorization.verification_uri_complete.clone(),
            user_code: authorization.user_code.clone(),
            expires_in,
            expires_at_ms: expires_at.duration_since(UNIX_EPOCH).map(|d| d.as_millis() as u64).unwrap_or(0),
        };
        // The host presents the code while polling goes on: a host whose callback resolves only when the
        // person is done must not hold the polling up. A failure to present ends the flow.
        let presenting = present(prompt);
        let polling = self.poll(&authorization, code_expires, until, deadline);
        tokio::pin!(presenting, polling);
        let mut presented = false;
        loop {
            tokio::select! {
                shown = &mut presenting, if !presented => {
                    self.cancellable(async { shown.map_err(TokenError::from) }).await?;
                    presented = true;
                }
                token = &mut polling => return token,
            }
        }
    }

    /// Poll the token endpoint until the person approved, refused, or the code or deadline ran out.
    async fn poll(
        &self,
        authorization: &DeviceAuthorization,
        code_expires: Instant,
        until: Instant,
        deadline: Duration,
    ) -> std::result::Result<TokenResponse, TokenError> {
        let interval_secs = seconds(&authorization.interval)
            .unwrap_or(OAUTH_DEVICE_DEFAULT_INTERVAL_SECS)
            .clamp(OAUTH_DEVICE_MIN_INTERVAL_SECS, OAUTH_DEVICE_MAX_INTERVAL_SECS);
        let max_interval = self.seconds(OAUTH_DEVICE_MAX_INTERVAL_SECS);
        let mut interval = self.seconds(interval_secs);
        loop {
            let wake = Instant::now() + interval;
            if wake >= code_expires {
                return Err(expired());
            }
            if wake >= until {
                return Err(McpError::Timeout { after_ms: deadline.as_millis() as u64 }.into());
            }
            self.cancellable(async {
                tokio::time::sleep_until(wake.into()).await;
                Ok(())
            })
            .await?;
            let form = vec![
                ("grant_type", DEVICE_CODE_GRANT.to_owned()),
                ("device_code", authorization.device_code.clone()),
                ("resource", self.resource.to_owned()),
            ];
            let poll_deadline = remaining(until.min(code_expires)).min(self.seconds(OAUTH_DEVICE_POLL_TIMEOUT_SECS));
            let poll = request_token(
                self.egress,
                &self.metadata.token_endpoint,
                &self.metadata.issuer,
                self.client,
                form,
                poll_deadline,
            );
            match self.cancellable(poll).await {
                Ok(token) => return Ok(token),
                Err(refused @ TokenError::Rejected { .. }) => match refused.error_code() {
                    Some("authorization_pending") => {}
                    Some("slow_down") => {
                        interval = (interval + self.seconds(OAUTH_DEVICE_SLOW_DOWN_SECS)).min(max_interval)
                    }
                    Some("access_denied") => {
                        return Err(McpError::Auth(
                            "the person declined the authorization request (access_denied)".to_owned(),
                        )
                        .into())
                    }
                    Some("expired_token") => return Err(expired()),
                    _ => return Err(refused),
                },
                Err(TokenError::TimedOut(_)) => interval = (interval * 2).min(max_interval),
                Err(failed) => return Err(failed),
            }
        }
    }

    /// `work`, or `mcp_aborted` as soon as the caller cancels.
    async fn cancellable<T>(
        &self,
        work: impl Future<Output = std::result::Result<T, TokenError>>,
    ) -> std::result::Result<T, TokenError> {
        tokio::select! {
            biased;
            _ = self.cancel.cancelled() => Err(McpError::Aborted.into()),
            result = work => result,
        }
    }
}

fn expired() -> TokenError {
    McpError::Auth("the device code expired before the person approved it; the sign-in has to start again".to_owned())
        .into()
}

/// The device authorization response, with URLs the host may show: `https` (or `http` on loopback).
/// The texts name what is wrong, never a value from the body.
fn parse_device_authorization(body: &[u8]) -> std::result::Result<DeviceAuthorization, TokenError> {
    let invalid = |what: &str| {
        TokenError::Failed(McpError::Auth(format!("the device authorization answer is not usable: {what}")))
    };
    let authorization: DeviceAuthorization = serde_json::from_slice(body)
        .map_err(|_| invalid("it is not JSON with device_code, user_code and verification_uri"))?;
    if authorization.device_code.is_empty() || authorization.user_code.is_empty() {
        return Err(invalid("device_code or user_code is empty"));
    }
    // The user code is shown to a person (a terminal, a dialog): printable ASCII only, bounded.
    if authorization.user_code.len() > MAX_USER_CODE_CHARS
        || !authorization.user_code.bytes().all(|b| (0x21..=0x7e).contains(&b) || b == b' ')
    {
        return Err(invalid("user_code is not a short printable code"));
    }
    let mut authorization = authorization;
    // Shown as the parser serializes them: a control character or escape sequence in the server's text
    // never reaches the person's terminal.
    for url in
        std::iter::once(&mut authorization.verification_uri).chain(authorization.verification_uri_complete.as_mut())
    {
        let parsed = Url::parse(url).map_err(|_| invalid("a verification URI is not a URL"))?;
        check_endpoint(&parsed, "verification URI")?;
        *url = parsed.to_string();
    }
    Ok(authorization)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::auth::client_credentials::tests::metadata;
    use crate::auth::token::test_http::{Recorded, Reply, TestServer};
    use crate::auth::token::{AuthMethod, ClientSecret};
    use crate::egress::EgressPolicy;
    use parking_lot::Mutex;
    use serde_json::json;
    use std::sync::Arc;

    /// A server "second" in these tests.
    const TICK: Duration = Duration::from_millis(10);
    const RESOURCE: &str = "http://127.0.0.1:9/mcp";
    const DEVICE_CODE: &str = "device-code-0123456789";

    struct Run {
        result: std::result::Result<TokenResponse, TokenError>,
        received: Vec<Recorded>,
        prompts: Vec<DevicePrompt>,
    }

    fn public_client() -> ClientCredentials {
        ClientCredentials {
            client_id: "device-client".into(),
            secret: ClientSecret::None,
            method: AuthMethod::None,
            dpop: None,
        }
    }

    /// The device authorization answer, then `poll(n)` for the nth poll (1-based).
    fn server_script(
        authorization: serde_json::Value,
        poll: impl Fn(usize) -> Reply + Send + Sync + 'static,
    ) -> impl Fn(&Recorded, usize) -> Reply + Send + Sync + 'static {
        move |request, index| {
            if request.path == "/device" {
                Reply::json(200, authorization.clone())
            } else {
                poll(index)
            }
        }
    }

    fn authorization(interval: u64, expires_in: u64) -> serde_json::Value {
        json!({
            "device_code": DEVICE_CODE, "user_code": "WDJB-MJHT",
            "verification_uri": "https://as.example/device", "verification_uri_complete": "https://as.example/device?user_code=WDJB-MJHT",
            "expires_in": expires_in, "interval": interval,
        })
    }

    fn rejected(error: &str) -> Reply {
        Reply::json(400, json!({"error": error}))
    }

    async fn run(server: &TestServer, cancel: CancellationToken, deadline: Duration) -> Run {
        let egress = Egress::new(&EgressPolicy::default()).unwrap();
        let meta = metadata(&server.base, &[DEVICE_CODE_GRANT]);
        let client = public_client();
        let prompts = Arc::new(Mutex::new(Vec::new()));
        let seen = prompts.clone();
        let present = move |prompt: DevicePrompt| -> BoxFuture<'static, Result<()>> {
            seen.lock().push(prompt);
            Box::pin(async { Ok(()) })
        };
        let flow = DeviceFlow {
            egress: &egress,
            metadata: &meta,
            client: &client,
            resource: RESOURCE,
            cancel,
            request: deadline,
            second: TICK,
        };
        let result = flow.run(Some("mcp:tools".into()), present, deadline).await;
        let prompts = prompts.lock().clone();
        Run { result, received: server.received(), prompts }
    }

    #[tokio::test]
    async fn pending_then_slow_down_then_a_token() {
        let server = TestServer::start(server_script(authorization(2, 600), |poll| match poll {
            1 => rejected("authorization_pending"),
            2 => rejected("slow_down"),
            _ => Reply::json(200, json!({"access_token": "device-token", "token_type": "Bearer"})),
        }))
        .await;
        let run = run(&server, CancellationToken::new(), Duration::from_secs(10)).await;
        assert_eq!(run.result.unwrap().access_token, "device-token");

        let [authorize, first, second, third] = &run.received[..] else { panic!("{:?}", run.received) };
        assert_eq!(authorize.path, "/device");
        assert_eq!(authorize.field_names(), ["client_id", "resource", "scope"]);
        assert_eq!(authorize.field("client_id").as_deref(), Some("device-client"));
        assert_eq!(authorize.field("resource").as_deref(), Some(RESOURCE));
        for poll in [first, second, third] {
            assert_eq!(poll.path, "/token");
            assert_eq!(poll.field("grant_type").as_deref(), Some(DEVICE_CODE_GRANT));
            assert_eq!(poll.field("device_code").as_deref(), Some(DEVICE_CODE));
            assert_eq!(poll.field("resource").as_deref(), Some(RESOURCE));
        }
        assert!(first.at - authorize.at >= TICK * 2, "the first poll waits one interval");
        assert!(second.at - first.at >= TICK * 2, "pending keeps the interval");
        assert!(third.at - second.at >= TICK * (2 + OAUTH_DEVICE_SLOW_DOWN_SECS as u32), "slow_down adds 5 s");

        let [prompt] = &run.prompts[..] else { panic!("one prompt") };
        assert_eq!(
            (prompt.user_code.as_str(), prompt.url()),
            ("WDJB-MJHT", "https://as.example/device?user_code=WDJB-MJHT")
        );
        assert_eq!(prompt.expires_in, TICK * 600);
        let now_ms = SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_millis() as u64;
        assert!(prompt.expires_at_ms > now_ms && prompt.expires_at_ms <= now_ms + 6_000);
        let shown = format!("{prompt:?}");
        assert!(!shown.contains("WDJB"), "{shown}");
    }

    #[tokio::test]
    async fn the_person_declining_is_an_auth_error() {
        let server = TestServer::start(server_script(authorization(1, 600), |_| rejected("access_denied"))).await;
        let run = run(&server, CancellationToken::new(), Duration::from_secs(10)).await;
        let error = McpError::from(run.result.unwrap_err());
        assert_eq!(error.code(), "mcp_auth_error");
        assert!(error.to_string().contains("the person declined"), "{error}");
        assert_eq!(run.received.len(), 2, "no poll after the refusal");
    }

    #[tokio::test]
    async fn an_expired_code_ends_the_flow_whether_the_server_or_the_clock_says_so() {
        let server = TestServer::start(server_script(authorization(1, 600), |_| rejected("expired_token"))).await;
        let error =
            McpError::from(run(&server, CancellationToken::new(), Duration::from_secs(10)).await.result.unwrap_err());
        assert!(error.code() == "mcp_auth_error" && error.to_string().contains("expired"), "{error}");

        let server = TestServer::start(server_script(authorization(2, 7), |_| rejected("authorization_pending"))).await;
        let started = Instant::now();
        let run = run(&server, CancellationToken::new(), Duration::from_secs(10)).await;
        let error = McpError::from(run.result.unwrap_err());
        assert!(error.code() == "mcp_auth_error" && error.to_string().contains("expired"), "{error}");
        // Polls at 2, 4 and 6 ticks (fewer on a slow machine); a fourth would be at 8, past expires_in (7).
        assert!((1 + 1..=1 + 3).contains(&run.received.len()), "{}", run.received.len());
        assert!(started.elapsed() < Duration::from_secs(2));
    }

    #[tokio::test]
    async fn cancellation_stops_polling_at_once() {
        let server =
            TestServer::start(server_script(authorization(1, 600), |_| rejected("authorization_pending"))).await;
        let cancel = CancellationToken::new();
        let canceller = cancel.clone();
        // Timed from the cancellation itself, not from the start: on a loaded machine the device
        // authorization request before the first poll can take a while, which is not what is measured.
        let cancelled_at = Arc::new(Mutex::new(None::<Instant>));
        let stamp = cancelled_at.clone();
        tokio::spawn(async move {
            tokio::time::sleep(TICK * 5).await;
            *stamp.lock() = Some(Instant::now());
            canceller.cancel();
        });
        let run = run(&server, cancel, Duration::from_secs(10)).await;
        assert!(matches!(run.result, Err(TokenError::Failed(McpError::Aborted))), "{:?}", run.result);
        let since_cancel = cancelled_at.lock().expect("cancelled").elapsed();
        assert!(since_cancel < Duration::from_secs(1), "ended {since_cancel:?} after the cancellation");
        let polls = run.received.len();
        tokio::time::sleep(TICK * 5).await;
        assert_eq!(server.received().len(), polls, "nothing sent after cancellation");
    }

    #[tokio::test]
    async fn the_callers_deadline_bounds_the_wait() {
        let server =
            TestServer::start(server_script(authorization(1, 600), |_| rejected("authorization_pending"))).await;
        let started = Instant::now();
        let run = run(&server, CancellationToken::new(), TICK * 8).await;
        assert!(matches!(run.result, Err(TokenError::Failed(McpError::Timeout { .. }))), "{:?}", run.result);
        assert!(started.elapsed() < Duration::from_secs(2));
    }

    #[tokio::test]
    async fn a_poll_that_times_out_doubles_the_interval_and_polling_goes_on() {
        // An interval long beside the poll timeout's, so twice it is told from once by 10 ticks either
        // side: the first poll's arrival may lag its start (a new connection on a loaded machine).
        const INTERVAL: u32 = 20;
        let server = TestServer::start(server_script(authorization(INTERVAL.into(), 600), |poll| match poll {
            1 => Reply::hang(),
            _ => Reply::json(200, json!({"access_token": "late-token", "token_type": "Bearer"})),
        }))
        .await;
        let run = run(&server, CancellationToken::new(), Duration::from_secs(10)).await;
        assert_eq!(run.result.unwrap().access_token, "late-token");
        let [_, first, second] = &run.received[..] else { panic!("{:?}", run.received) };
        let timeout = OAUTH_DEVICE_POLL_TIMEOUT_SECS as u32;
        let between = second.at - first.at;
        // Once the interval: timeout + 20 ticks; twice: timeout + 40. The midpoint tells them apart.
        assert!(between >= TICK * (timeout + INTERVAL * 3 / 2), "timeout, then twice the interval: {between:?}");
    }

    #[tokio::test]
    async fn other_refusals_end_the_flow_without_the_device_code_in_the_text() {
        let server = TestServer::start(move |request: &Recorded, _| {
            if request.path == "/device" {
                Reply::json(200, authorization(1, 600))
            } else {
                Reply::json(400, json!({"error": "invalid_grant", "error_description": request.body.clone()}))
            }
        })
        .await;
        let error = run(&server, CancellationToken::new(), Duration::from_secs(10)).await.result.unwrap_err();
        assert_eq!(error.error_code(), Some("invalid_grant"));
        assert!(!error.to_string().contains(DEVICE_CODE), "{error}");
    }

    #[tokio::test]
    async fn unusable_authorizations_are_refused_before_the_person_sees_anything() {
        let answers = [
            (
                json!({"device_code": DEVICE_CODE, "user_code": "U", "verification_uri": "http://phish.example/device"}),
                "verification URI",
            ),
            (
                json!({"device_code": DEVICE_CODE, "user_code": "U", "verification_uri": "javascript:alert(1)"}),
                "verification URI",
            ),
            (json!({"user_code": "U", "verification_uri": "https://as.example/device"}), "not JSON with device_code"),
        ];
        for (answer, expected) in answers {
            let server = TestServer::start(move |_, _| Reply::json(200, answer.clone())).await;
            let run = run(&server, CancellationToken::new(), Duration::from_secs(10)).await;
            let error = run.result.unwrap_err();
            assert!(error.to_string().contains(expected) && !error.to_string().contains(DEVICE_CODE), "{error}");
            assert!(run.prompts.is_empty() && run.received.len() == 1);
        }
        let server = TestServer::start(|_, _| rejected("unauthorized_client")).await;
        let run = run(&server, CancellationToken::new(), Duration::from_secs(10)).await;
        assert_eq!(run.result.unwrap_err().error_code(), Some("unauthorized_client"));
    }

    #[tokio::test]
    async fn a_server_without_the_device_flow_gets_no_request() {
        let server = TestServer::start(|_, _| rejected("never")).await;
        let egress = Egress::new(&EgressPolicy::default()).unwrap();
        let mut meta = metadata(&server.base, &[DEVICE_CODE_GRANT]);
        meta.device_authorization_endpoint = None;
        let present = |_| -> BoxFuture<'static, Result<()>> { Box::pin(async { Ok(()) }) };
        let error = device_flow(
            &egress,
            &meta,
            &public_client(),
            None,
            RESOURCE,
            present,
            CancellationToken::new(),
            Duration::from_secs(1),
            Duration::from_secs(1),
        )
        .await
        .unwrap_err();
        assert!(error.to_string().contains("no device flow"), "{error}");
        assert!(server.received().is_empty());
    }
}
