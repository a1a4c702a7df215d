//! Workload identity federation (MCP SEP-1933; RFC 7523 §2.1, the JWT bearer grant): a workload with no
//! person and no client secret proves itself with a JWT its platform issued it (a Kubernetes projected
//! service-account token, a cloud instance identity), exchanged at the authorization server for an
//! access token bound to the MCP server (`resource`).
//!
//! | concern    | rule |
//! |------------|------|
//! | source     | `oauth.assertionFile` (a path, read again when the assertion in hand is within `WORKLOAD_ASSERTION_REFRESH_MARGIN_SECS` of its `exp`, or has none: platforms rotate the file well before expiry) or `oauth.assertion` (the host's callback, asked the same way) |
//! | checks     | the assertion is a compact JWT whose `exp`, read without verifying (the authorization server verifies), is not past: an expired or malformed one is refused before it is sent, with an error that names the source, never the assertion |
//! | audience   | without `oauth.authorizationServer`, the MCP server names the authorization server: the assertion goes only where its `aud` names that authorization server's issuer or token endpoint ([`audience_names`]), so a hostile MCP server naming its own cannot collect a platform token meant for another and replay it there. A platform whose `aud` is something else (an opaque value) needs `authorizationServer` set, which pins the one server instead |
//! | grant      | `grant_type=urn:ietf:params:oauth:grant-type:jwt-bearer`, `assertion`, `resource`, `scope` when one is chosen; the client's own authentication as configured (`none` by default) |
//! | renewal    | no refresh token: an access token near its expiry is replaced by the same grant before a request goes out |
//! | bounds     | an assertion file of at most `WORKLOAD_ASSERTION_MAX_BYTES`, opened non-blocking and read only if what was opened is a regular file (a FIFO put in its place does not hang the flow); the source (file or callback) answers within the login's per-step budget or the login fails |

use crate::auth::cross_app::JWT_BEARER_GRANT;
use crate::auth::discovery::AuthServerMetadata;
use crate::auth::token::{check_grant_supported, request_token, ClientCredentials, TokenError, TokenResponse};
use crate::error::{McpError, Result};
use crate::hooks::Callback;
use crate::limits::{WORKLOAD_ASSERTION_MAX_BYTES, WORKLOAD_ASSERTION_REFRESH_MARGIN_SECS};
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use parking_lot::Mutex;
use serde_json::Value;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Where the workload's assertion comes from (`oauth.assertionFile` or `oauth.assertion`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AssertionSource {
    File(PathBuf),
    /// The host's callback (asked with the server's name).
    Callback,
}

impl AssertionSource {
    /// How errors name it: never the assertion itself.
    fn describe(&self) -> String {
        match self {
            AssertionSource::File(path) => format!("oauth.assertionFile ({})", path.display()),
            AssertionSource::Callback => "the oauth.assertion callback".to_owned(),
        }
    }
}

/// One server's workload assertion: fetched from its source when none is in hand or the one in hand
/// is near its expiry.
pub struct WorkloadAssertion {
    server: String,
    source: AssertionSource,
    callback: Option<Arc<dyn Callback<String, String>>>,
    /// The assertion in hand and its `exp` (seconds since the epoch), if it has one.
    held: Mutex<Option<(String, Option<u64>)>>,
}

impl WorkloadAssertion {
    pub fn new(
        server: &str,
        source: AssertionSource,
        callback: Option<Arc<dyn Callback<String, String>>>,
    ) -> WorkloadAssertion {
        WorkloadAssertion { server: server.to_owned(), source, callback, held: Mutex::new(None) }
    }

    /// [`WorkloadAssertion::current`], given at most `within` (a login's budget for one step): a source
    /// that does not answer (a callback that never settles, a file on a hung mount) fails the login
    /// instead of holding the server's flow lock.
    pub async fn current_within(&self, within: Duration, remember: impl Fn(&str)) -> Result<String> {
        tokio::time::timeout(within, self.current(remember)).await.unwrap_or_else(|_| {
            Err(McpError::Auth(format!(
                "{} gave no assertion within {} ms",
                self.source.describe(),
                within.as_millis()
            )))
        })
    }

    /// An assertion good for at least the margin (or as good as the source has). Every assertion
    /// fetched is registered with `remember` (the redaction set) before anything else looks at it.
    pub async fn current(&self, remember: impl Fn(&str)) -> Result<String> {
        let now = now_secs();
        if let Some((assertion, exp)) = self.held.lock().as_ref() {
            if exp.is_some_and(|exp| exp > now + WORKLOAD_ASSERTION_REFRESH_MARGIN_SECS) {
                return Ok(assertion.clone());
            }
        }
        let assertion = self.fetch().await?;
        remember(&assertion);
        let exp = expiry(&assertion).map_err(|what| {
            McpError::Auth(format!("the workload identity assertion from {} {what}", self.source.describe()))
        })?;
        if exp.is_some_and(|exp| exp <= now) {
            return Err(McpError::Auth(format!(
                "the workload identity assertion from {} has expired (its exp is {} s in the past); not sending it",
                self.source.describe(),
                now - exp.unwrap_or(now)
            )));
        }
        *self.held.lock() = Some((assertion.clone(), exp));
        Ok(assertion)
    }

    async fn fetch(&self) -> Result<String> {
        let text = match &self.source {
            AssertionSource::File(path) => {
                let path = path.clone();
                let read = tokio::task::spawn_blocking(move || read_bounded(&path))
                    .await
                    .map_err(|_| McpError::Internal("reading the assertion file was interrupted".into()))?;
                read.map_err(|what| McpError::Auth(format!("{} {what}", self.source.describe())))?
            }
            AssertionSource::Callback => {
                let Some(callback) = &self.callback else {
                    return Err(McpError::config("oauth.assertion is a callback this toolset was not given"));
                };
                callback
                    .call(self.server.clone())
                    .await
                    .map_err(|_| McpError::Auth("the oauth.assertion callback failed".into()))?
            }
        };
        let trimmed = text.trim();
        if trimmed.is_empty() {
            return Err(McpError::Auth(format!("{} gave an empty assertion", self.source.describe())));
        }
        Ok(trimmed.to_owned())
    }
}

/// The file's text, at most `WORKLOAD_ASSERTION_MAX_BYTES`. Errors say what is wrong, not what was read.
fn read_bounded(path: &std::path::Path) -> std::result::Result<String, String> {
    use std::io::Read;
    let mut options = std::fs::OpenOptions::new();
    options.read(true);
    // Non-blocking open: a FIFO (or a device) put where the file was opens at once instead of waiting for
    // a writer while the server's flow lock is held; what was opened is then checked to be a regular file.
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::custom_flags(&mut options, libc::O_NONBLOCK);
    let file = options.open(path).map_err(|e| format!("cannot be read ({})", e.kind()))?;
    let is_file = file.metadata().map_err(|e| format!("cannot be read ({})", e.kind()))?.is_file();
    if !is_file {
        return Err("is not a regular file".to_owned());
    }
    let mut bytes = Vec::new();
    file.take(WORKLOAD_ASSERTION_MAX_BYTES as u64 + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| format!("cannot be read ({})", e.kind()))?;
    if bytes.len() > WORKLOAD_ASSERTION_MAX_BYTES {
        return Err(format!("is larger than {WORKLOAD_ASSERTION_MAX_BYTES} bytes"));
    }
    String::from_utf8(bytes).map_err(|_| "is not UTF-8 text".to_owned())
}

/// A compact JWT's `exp`, read without verifying the signature (the authorization server verifies).
/// `Err` says what is wrong with it, without quoting it.
pub fn expiry(assertion: &str) -> std::result::Result<Option<u64>, &'static str> {
    match claims(assertion)?.get("exp") {
        None | Some(Value::Null) => Ok(None),
        Some(exp) => {
            exp.as_f64().filter(|e| *e >= 0.0).map(|e| Some(e as u64)).ok_or("has an exp that is not a number")
        }
    }
}

/// A compact JWT's claims, read without verifying. `Err` says what is wrong, without quoting it.
fn claims(assertion: &str) -> std::result::Result<Value, &'static str> {
    let parts: Vec<&str> = assertion.split('.').collect();
    if parts.len() != 3 || parts.iter().any(|p| p.is_empty()) {
        return Err("is not a compact JWT (three base64url parts)");
    }
    let payload =
        URL_SAFE_NO_PAD.decode(parts[1].trim_end_matches('=')).map_err(|_| "has a payload that is not base64url")?;
    let claims: Value = serde_json::from_slice(&payload).map_err(|_| "has a payload that is not JSON")?;
    if !claims.is_object() {
        return Err("has a payload that is not a JSON object");
    }
    Ok(claims)
}

/// Whether the assertion's `aud` (read without verifying; a string or a list) names the authorization
/// server the MCP server pointed at: its issuer or its token endpoint (a trailing `/` aside). The MCP
/// server chooses that authorization server; a platform token meant for another one (its `aud`) is not
/// to be handed to it, where it could be replayed to the real one.
pub fn audience_names(assertion: &str, issuer: &str, token_endpoint: &str) -> bool {
    let Ok(claims) = claims(assertion) else { return false };
    let audiences: Vec<&str> = match claims.get("aud") {
        Some(Value::String(aud)) => vec![aud.as_str()],
        Some(Value::Array(list)) => list.iter().filter_map(Value::as_str).collect(),
        _ => Vec::new(),
    };
    let same = |a: &str, b: &str| a.trim_end_matches('/') == b.trim_end_matches('/');
    audiences.iter().any(|aud| same(aud, issuer) || same(aud, token_endpoint))
}

fn now_secs() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0)
}

/// The JWT bearer grant with the workload's assertion, for `resource` (and `scope`, when chosen).
pub async fn workload_identity(
    egress: &crate::egress::Egress,
    metadata: &AuthServerMetadata,
    client: &ClientCredentials,
    assertion: String,
    resource: &str,
    scope: Option<String>,
    deadline: Duration,
) -> std::result::Result<TokenResponse, TokenError> {
    check_grant_supported(metadata.grant_types_supported.as_ref(), JWT_BEARER_GRANT)?;
    let mut form =
        vec![("grant_type", JWT_BEARER_GRANT.to_owned()), ("assertion", assertion), ("resource", resource.to_owned())];
    if let Some(scope) = scope.filter(|s| !s.is_empty()) {
        form.push(("scope", scope));
    }
    request_token(egress, &metadata.token_endpoint, &metadata.issuer, client, form, deadline).await
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::auth::client_credentials::tests::metadata;
    use crate::auth::token::test_http::{Reply, TestServer};
    use crate::auth::token::{AuthMethod, ClientSecret};
    use crate::egress::{Egress, EgressPolicy};
    use serde_json::json;

    fn jwt(claims: Value) -> String {
        format!(
            "{}.{}.c2lnbmF0dXJl",
            URL_SAFE_NO_PAD.encode(br#"{"alg":"ES256","typ":"JWT"}"#),
            URL_SAFE_NO_PAD.encode(claims.to_string())
        )
    }

    fn file_with(text: &str) -> tempfile_path::TempPath {
        tempfile_path::TempPath::with(text)
    }

    /// A throwaway file under the system temp dir, removed on drop.
    mod tempfile_path {
        pub struct TempPath(pub std::path::PathBuf);
        impl TempPath {
            pub fn with(text: &str) -> TempPath {
                let path = std::env::temp_dir().join(format!("mcpferry-wif-{}", crate::auth::pkce::state()));
                std::fs::write(&path, text).unwrap();
                TempPath(path)
            }
            pub fn write(&self, text: &str) {
                std::fs::write(&self.0, text).unwrap();
            }
        }
        impl Drop for TempPath {
            fn drop(&mut self) {
                let _ = std::fs::remove_file(&self.0);
            }
        }
    }

    #[test]
    fn the_expiry_is_read_without_verifying_and_a_malformed_assertion_is_named_not_quoted() {
        assert_eq!(expiry(&jwt(json!({"exp": 1_900_000_000u64}))), Ok(Some(1_900_000_000)));
        assert_eq!(expiry(&jwt(json!({"sub": "w"}))), Ok(None));
        for bad in ["not-a-jwt", "a.b", "a..c", "a.%%%.c", &jwt(json!({"exp": "soon"}))] {
            assert!(expiry(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn the_audience_must_name_the_authorization_server_or_its_token_endpoint() {
        let (issuer, endpoint) = ("https://as.example", "https://as.example/oauth/token");
        for aud in [json!("https://as.example"), json!("https://as.example/"), json!(["x", endpoint])] {
            assert!(audience_names(&jwt(json!({"aud": aud})), issuer, endpoint), "{aud}");
        }
        for aud in [json!("https://real-as.example"), json!(["https://real-as.example"]), json!(null), json!(7)] {
            assert!(!audience_names(&jwt(json!({"aud": aud})), issuer, endpoint), "{aud}");
        }
        assert!(!audience_names(&jwt(json!({"sub": "no aud"})), issuer, endpoint));
        assert!(!audience_names("not-a-jwt", issuer, endpoint));
    }

    #[tokio::test]
    async fn a_file_is_read_again_only_near_the_assertions_expiry() {
        let now = now_secs();
        let first = jwt(json!({"exp": now + 3600, "n": 1}));
        let file = file_with(&format!("{first}\n"));
        let source = WorkloadAssertion::new("s", AssertionSource::File(file.0.clone()), None);
        assert_eq!(source.current(|_| {}).await.unwrap(), first, "trimmed");
        let second = jwt(json!({"exp": now + WORKLOAD_ASSERTION_REFRESH_MARGIN_SECS / 2, "n": 2}));
        file.write(&second);
        assert_eq!(source.current(|_| {}).await.unwrap(), first, "still good for an hour: not read again");
        *source.held.lock() = None;
        assert_eq!(source.current(|_| {}).await.unwrap(), second);
        let third = jwt(json!({"exp": now + 7200, "n": 3}));
        file.write(&third);
        assert_eq!(source.current(|_| {}).await.unwrap(), third, "within the margin of its exp: read again");
    }

    #[tokio::test]
    async fn an_expired_or_malformed_assertion_is_refused_naming_the_source_not_the_secret() {
        let expired = jwt(json!({"exp": now_secs() - 10, "secret": "sekrit-claim"}));
        let file = file_with(&expired);
        let source = WorkloadAssertion::new("s", AssertionSource::File(file.0.clone()), None);
        let error = source.current(|_| {}).await.unwrap_err();
        assert_eq!(error.code(), "mcp_auth_error");
        let text = error.to_string();
        assert!(text.contains("has expired") && text.contains("oauth.assertionFile"), "{text}");
        assert!(!text.contains(&expired) && !text.contains("sekrit"), "{text}");
        file.write("garbage-sekrit-value");
        let text = source.current(|_| {}).await.unwrap_err().to_string();
        assert!(text.contains("not a compact JWT") && !text.contains("sekrit"), "{text}");
        let missing = WorkloadAssertion::new("s", AssertionSource::File("/nonexistent/mcpferry/token".into()), None);
        assert!(missing.current(|_| {}).await.unwrap_err().to_string().contains("cannot be read"));
    }

    #[cfg(unix)]
    #[tokio::test]
    async fn a_fifo_in_place_of_the_file_is_refused_at_once_not_waited_on() {
        let path = std::env::temp_dir().join(format!("mcpferry-wif-fifo-{}", crate::auth::pkce::state()));
        let c_path = std::ffi::CString::new(path.to_str().unwrap()).unwrap();
        assert_eq!(unsafe { libc::mkfifo(c_path.as_ptr(), 0o600) }, 0);
        let source = WorkloadAssertion::new("s", AssertionSource::File(path.clone()), None);
        let read = tokio::time::timeout(Duration::from_secs(5), source.current(|_| {})).await;
        let _ = std::fs::remove_file(&path);
        let error = read.expect("no writer needed: refused at once").unwrap_err().to_string();
        assert!(error.contains("is not a regular file"), "{error}");
    }

    struct Silent;
    impl Callback<String, String> for Silent {
        fn call(&self, _: String) -> futures_util::future::BoxFuture<'static, std::result::Result<String, String>> {
            Box::pin(std::future::pending())
        }
    }

    #[tokio::test]
    async fn a_source_that_never_answers_fails_within_the_budget() {
        let source = WorkloadAssertion::new("s", AssertionSource::Callback, Some(Arc::new(Silent)));
        let started = std::time::Instant::now();
        let error = source.current_within(Duration::from_millis(200), |_| {}).await.unwrap_err();
        assert!(started.elapsed() < Duration::from_secs(3));
        assert_eq!(error.code(), "mcp_auth_error");
        assert!(error.to_string().contains("gave no assertion within 200 ms"), "{error}");
    }

    #[tokio::test]
    async fn the_grant_sends_the_assertion_for_the_resource() {
        let server = TestServer::start(|_, _| {
            Reply::json(200, json!({"access_token":"wif-token","token_type":"Bearer","expires_in":60}))
        })
        .await;
        let client = ClientCredentials {
            client_id: "workload".into(),
            secret: ClientSecret::None,
            method: AuthMethod::None,
            dpop: None,
        };
        let egress = Egress::new(&EgressPolicy::default()).unwrap();
        let assertion = jwt(json!({"exp": now_secs() + 60}));
        let metadata = metadata(&server.base, &[JWT_BEARER_GRANT]);
        let response = workload_identity(
            &egress,
            &metadata,
            &client,
            assertion.clone(),
            "http://localhost:9/mcp",
            Some("read".into()),
            Duration::from_secs(5),
        )
        .await
        .unwrap();
        assert_eq!(response.access_token, "wif-token");
        let sent = &server.received()[0];
        assert_eq!(sent.field("grant_type").as_deref(), Some(JWT_BEARER_GRANT));
        assert_eq!(sent.field("assertion"), Some(assertion));
        assert_eq!(sent.field("resource").as_deref(), Some("http://localhost:9/mcp"));
        assert_eq!(sent.field("scope").as_deref(), Some("read"));
        assert_eq!(sent.field("client_id").as_deref(), Some("workload"));
        // An authorization server that lists its grants without this one is not asked.
        let refused = workload_identity(
            &egress,
            &crate::auth::client_credentials::tests::metadata(&server.base, &["client_credentials"]),
            &client,
            jwt(json!({})),
            "http://localhost:9/mcp",
            None,
            Duration::from_secs(5),
        )
        .await
        .unwrap_err();
        assert!(refused.to_string().contains("jwt-bearer"), "{refused}");
    }
}
