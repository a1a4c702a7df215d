//! The token endpoint, in one place: every grant (authorization code, refresh, client credentials,
//! JWT bearer, token exchange, device code) POSTs its form through [`request_token`], which adds the
//! client's authentication and turns the answer into a [`TokenResponse`] or a [`TokenError`].
//!
//! | concern        | rule |
//! |----------------|------|
//! | client auth    | `client_secret_basic` (RFC 6749 §2.3.1: id and secret form-urlencoded, then base64 `id:secret`), `client_secret_post` (both in the body, no Basic header), `none` (`client_id` in the body only), `private_key_jwt` (RFC 7523 §2.2: a fresh signed assertion, `aud` = the AS issuer) |
//! | endpoint       | `https`, or `http` on a loopback host |
//! | redirects      | only on the endpoint's own origin (`Egress` offers no "never"): the form, which holds codes and secrets, never goes to another origin |
//! | bounds         | the whole exchange within the caller's deadline; at most `OAUTH_TOKEN_RESPONSE_MAX_BYTES` of body |
//! | error text     | never a token, secret, assertion or code: the server's `error`/`error_description` are quoted short with every value this request sent that could be secret blanked out |

use crate::auth::budget::{in_time, timed_out};
use crate::auth::jwt::SigningKey;
use crate::egress::read_body;
use crate::egress::{display_url, Egress, Exchange};
use crate::error::McpError;
use crate::guard::redact::quote_bytes;
use crate::guard::redact::{Secrets, REDACTED};
use crate::limits::OAUTH_TOKEN_RESPONSE_MAX_BYTES;
use base64::engine::general_purpose::STANDARD;
use base64::Engine;
use reqwest::header::{HeaderName, HeaderValue, ACCEPT, AUTHORIZATION, CONTENT_TYPE};
use reqwest::{Method, StatusCode};
use serde::{Deserialize, Deserializer, Serialize};
use serde_json::Value;
use std::fmt;
use std::time::Duration;
use url::Url;

/// RFC 7523 §2.2: the `client_assertion_type` of a JWT client assertion.
pub const JWT_CLIENT_ASSERTION_TYPE: &str = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer";

/// Form fields that carry client authentication: [`request_token`] sets them itself from the
/// [`ClientCredentials`], and drops any a caller put in the form, so a request never carries two methods.
const CLIENT_AUTH_FIELDS: &[&str] = &["client_id", "client_secret", "client_assertion", "client_assertion_type"];

/// Form fields whose values are not secret. Every other value sent (code, code_verifier, refresh_token,
/// device_code, assertion, subject_token, …) is blanked out of any error text.
const PUBLIC_FORM_FIELDS: &[&str] = &[
    "grant_type",
    "scope",
    "resource",
    "redirect_uri",
    "audience",
    "requested_token_type",
    "subject_token_type",
    "actor_token_type",
];

/// What the client proves itself with.
#[derive(Clone)]
pub enum ClientSecret {
    None,
    Secret(String),
    /// A PKCS#8 PEM private key for `private_key_jwt`.
    PrivateKey {
        pem: String,
        algorithm: SigningAlgorithm,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SigningAlgorithm {
    Es256,
    Rs256,
}

/// How the client authenticates at the token endpoint (`token_endpoint_auth_method`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AuthMethod {
    ClientSecretBasic,
    ClientSecretPost,
    None,
    PrivateKeyJwt,
}

impl AuthMethod {
    /// The registered name (RFC 7591 §2).
    pub fn as_str(self) -> &'static str {
        match self {
            AuthMethod::ClientSecretBasic => "client_secret_basic",
            AuthMethod::ClientSecretPost => "client_secret_post",
            AuthMethod::None => "none",
            AuthMethod::PrivateKeyJwt => "private_key_jwt",
        }
    }

    pub fn from_name(name: &str) -> Option<AuthMethod> {
        [AuthMethod::ClientSecretBasic, AuthMethod::ClientSecretPost, AuthMethod::None, AuthMethod::PrivateKeyJwt]
            .into_iter()
            .find(|m| m.as_str() == name)
    }
}

/// A client as the token endpoint knows it. Debug shows the id and method, never the secret or key.
#[derive(Clone)]
pub struct ClientCredentials {
    pub client_id: String,
    pub secret: ClientSecret,
    pub method: AuthMethod,
    /// DPoP (RFC 9449): every request to the authorization server carries a fresh proof of this key.
    pub dpop: Option<crate::auth::dpop::Dpop>,
}

impl ClientCredentials {
    /// The same client, proving `dpop`'s key on each request (or not, with `None`).
    pub fn with_dpop(mut self, dpop: Option<crate::auth::dpop::Dpop>) -> ClientCredentials {
        self.dpop = dpop;
        self
    }
}

impl fmt::Debug for ClientSecret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ClientSecret::None => f.write_str("None"),
            ClientSecret::Secret(_) => f.debug_tuple("Secret").field(&REDACTED).finish(),
            ClientSecret::PrivateKey { algorithm, .. } => {
                f.debug_struct("PrivateKey").field("pem", &REDACTED).field("algorithm", algorithm).finish()
            }
        }
    }
}

impl fmt::Debug for ClientCredentials {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ClientCredentials")
            .field("client_id", &self.client_id)
            .field("secret", &self.secret)
            .field("method", &self.method)
            .field("dpop", &self.dpop.is_some())
            .finish()
    }
}

/// A successful token response (RFC 6749 §5.1, RFC 8693 §2.2.1). `token_type` is `"Bearer"` (whatever
/// case the server used) unless `issued_token_type` says this is a token exchange result, where
/// `"N_A"` is allowed. Debug redacts both tokens.
#[derive(Clone, Serialize, Deserialize)]
pub struct TokenResponse {
    pub access_token: String,
    #[serde(default)]
    pub token_type: String,
    #[serde(default, deserialize_with = "lenient_seconds")]
    pub expires_in: Option<u64>,
    #[serde(default)]
    pub refresh_token: Option<String>,
    #[serde(default)]
    pub scope: Option<String>,
    #[serde(default)]
    pub issued_token_type: Option<String>,
}

impl fmt::Debug for TokenResponse {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TokenResponse")
            .field("access_token", &REDACTED)
            .field("token_type", &self.token_type)
            .field("expires_in", &self.expires_in)
            .field("refresh_token", &self.refresh_token.as_ref().map(|_| REDACTED))
            .field("scope", &self.scope)
            .field("issued_token_type", &self.issued_token_type)
            .finish()
    }
}

/// `expires_in` as a number, or a numeric string (some servers send `"3600"`); anything else is
/// taken as absent rather than failing a response that carries a usable token.
fn lenient_seconds<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Option<u64>, D::Error> {
    Ok(match Value::deserialize(deserializer)? {
        Value::Number(n) => n.as_u64().or_else(|| n.as_f64().filter(|f| *f >= 0.0).map(|f| f as u64)),
        Value::String(s) => s.trim().parse().ok(),
        _ => None,
    })
}

/// Why a token request produced no token.
#[derive(Debug, Clone)]
pub enum TokenError {
    /// The server answered with an RFC 6749 §5.2 error (`invalid_grant`, `authorization_pending`, …).
    /// Both texts are the server's, quoted short, with every secret value of the request blanked out.
    Rejected { error: String, description: Option<String> },
    /// No usable answer: the request failed, or the answer was not a token response.
    Failed(McpError),
    /// No complete answer (headers and whole body) within the request's deadline: `mcp_auth_error`
    /// naming the endpoint. A device-flow poll backs off on it (RFC 8628 §3.5); any other request fails.
    TimedOut(McpError),
}

impl TokenError {
    /// The RFC 6749 error code, when the server sent one.
    pub fn error_code(&self) -> Option<&str> {
        match self {
            TokenError::Rejected { error, .. } => Some(error),
            TokenError::Failed(_) | TokenError::TimedOut(_) => None,
        }
    }
}

impl fmt::Display for TokenError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TokenError::Rejected { error, description: Some(description) } => {
                write!(f, "the authorization server refused the token request: {error} ({description})")
            }
            TokenError::Rejected { error, description: None } => {
                write!(f, "the authorization server refused the token request: {error}")
            }
            TokenError::Failed(e) | TokenError::TimedOut(e) => e.fmt(f),
        }
    }
}

impl std::error::Error for TokenError {}

impl From<McpError> for TokenError {
    fn from(e: McpError) -> Self {
        TokenError::Failed(e)
    }
}

/// A refusal is `mcp_auth_error` with the text above; a failure keeps its own code.
impl From<TokenError> for McpError {
    fn from(e: TokenError) -> Self {
        match e {
            TokenError::Failed(e) | TokenError::TimedOut(e) => e,
            rejected => McpError::Auth(rejected.to_string()),
        }
    }
}

/// Refuse an authorization-server endpoint that is neither `https` nor `http` on a loopback host
/// (`localhost`, `127.0.0.0/8`, `::1`): credentials must not cross the network in the clear.
pub fn check_endpoint(url: &Url, what: &str) -> crate::error::Result<()> {
    let loopback = match url.host() {
        Some(url::Host::Domain(name)) => name.eq_ignore_ascii_case("localhost"),
        Some(url::Host::Ipv4(ip)) => ip.is_loopback(),
        Some(url::Host::Ipv6(ip)) => ip.is_loopback(),
        None => false,
    };
    match url.scheme() {
        "https" if url.host().is_some() => Ok(()),
        "http" if loopback => Ok(()),
        _ => Err(McpError::Auth(format!(
            "the authorization server's {what} {} is refused: it must be https (or http on a loopback host)",
            display_url(url)
        ))),
    }
}

/// Refuse a grant the authorization server's metadata lists grants without. Metadata that lists none
/// is not taken at its word (RFC 8414's default would exclude every grant here): the server decides.
pub fn check_grant_supported(supported: Option<&Vec<String>>, grant: &str) -> crate::error::Result<()> {
    match supported {
        Some(grants) if !grants.iter().any(|g| g == grant) => Err(McpError::Auth(format!(
            "the authorization server does not support the grant {grant} (its grant_types_supported omits it)"
        ))),
        _ => Ok(()),
    }
}

/// What is left of a deadline that ends at `until`.
pub fn remaining(until: std::time::Instant) -> Duration {
    until.saturating_duration_since(std::time::Instant::now())
}

/// POST a form to a token endpoint with the client's authentication; `audience` is the AS issuer (the
/// `aud` of a private_key_jwt assertion). `deadline` bounds the whole exchange, body included.
pub async fn request_token(
    egress: &Egress,
    endpoint: &Url,
    audience: &str,
    client: &ClientCredentials,
    form: Vec<(&'static str, String)>,
    deadline: Duration,
) -> std::result::Result<TokenResponse, TokenError> {
    let body = post_form(egress, endpoint, "token endpoint", audience, client, form, deadline).await?;
    parse_token_response(&body)
}

/// POST `form` to an authorization-server endpoint with the client's authentication, and return the
/// body of a 2xx answer. Any other answer is a [`TokenError`]: `Rejected` when it carries an RFC 6749
/// §5.2 error, `Failed` otherwise. Shared by the token and device authorization endpoints.
pub async fn post_form(
    egress: &Egress,
    endpoint: &Url,
    what: &str,
    audience: &str,
    client: &ClientCredentials,
    form: Vec<(&'static str, String)>,
    deadline: Duration,
) -> std::result::Result<Vec<u8>, TokenError> {
    check_endpoint(endpoint, what)?;
    let grant = match what {
        "device authorization endpoint" => "device_authorization",
        "revocation endpoint" => "revocation",
        _ => form.iter().find(|(name, _)| *name == "grant_type").map_or("_OTHER", |(_, value)| value.as_str()),
    }
    .to_owned();
    let started = crate::telemetry::operation::Started::now();
    let mut status = None;
    let outcome = post_form_unwatched(egress, endpoint, what, audience, client, form, deadline, &mut status).await;
    crate::telemetry::operation::token_requested(|| {
        let (oauth_error, error) = match &outcome {
            Ok(_) => (None, None),
            Err(TokenError::Rejected { error, .. }) => (Some(error.as_str()), Some("mcp_auth_error")),
            Err(TokenError::Failed(e) | TokenError::TimedOut(e)) => (None, Some(e.code())),
        };
        crate::telemetry::operation::Operation::token(&grant, endpoint, status, oauth_error, error, started.stop())
    });
    outcome
}

/// [`post_form`] itself; `status` is set to the answer's HTTP status when an answer came.
#[allow(clippy::too_many_arguments)]
async fn post_form_unwatched(
    egress: &Egress,
    endpoint: &Url,
    what: &str,
    audience: &str,
    client: &ClientCredentials,
    form: Vec<(&'static str, String)>,
    deadline: Duration,
    status_seen: &mut Option<u16>,
) -> std::result::Result<Vec<u8>, TokenError> {
    let secrets = Secrets::default();
    let form: Vec<(&'static str, String)> =
        form.into_iter().filter(|(name, _)| !CLIENT_AUTH_FIELDS.contains(name)).collect();
    for (name, value) in &form {
        if !PUBLIC_FORM_FIELDS.contains(name) {
            add_secret(&secrets, value);
        }
    }
    // With DPoP, an answer refusing the proof for its nonce (`use_dpop_nonce`, with a new `DPoP-Nonce`)
    // gets exactly one more attempt, with a fresh proof (and a fresh client assertion).
    let attempts = if client.dpop.is_some() { 2 } else { 1 };
    let exchanging = async {
        let mut answer = None;
        for attempt in 1..=attempts {
            let mut form = form.clone();
            let basic = authenticate(client, audience, &mut form, &secrets)?;
            let encoded = url::form_urlencoded::Serializer::new(String::new())
                .extend_pairs(form.iter().map(|(n, v)| (*n, v.as_str())))
                .finish();
            let mut exchange = Exchange::new(Method::POST, endpoint.clone(), deadline)
                .same_origin_only()
                .protocol_header(CONTENT_TYPE, HeaderValue::from_static("application/x-www-form-urlencoded"))
                .protocol_header(ACCEPT, HeaderValue::from_static("application/json"))
                .body(bytes::Bytes::from(encoded));
            if let Some(basic) = basic {
                exchange = exchange.origin_header(AUTHORIZATION, basic);
            }
            if let Some(dpop) = &client.dpop {
                let proof = dpop.header("POST", endpoint, None)?;
                secrets.add(proof.to_str().unwrap_or_default());
                exchange = exchange.origin_header(HeaderName::from_static(crate::auth::dpop::DPOP_HEADER), proof);
            }
            let mut response = egress.send(exchange).await?;
            let status = response.status();
            let new_nonce = client.dpop.as_ref().is_some_and(|d| d.nonces.note(endpoint, response.headers()));
            let body = read_body(&mut response, OAUTH_TOKEN_RESPONSE_MAX_BYTES, deadline).await?;
            let retry = attempt < attempts
                && new_nonce
                && status == StatusCode::BAD_REQUEST
                && crate::auth::dpop::is_nonce_error_body(&body);
            answer = Some((status, body));
            if !retry {
                break;
            }
        }
        Ok::<_, McpError>(answer.expect("one attempt at least"))
    };
    let Some(answered) = in_time(deadline, exchanging).await else {
        return Err(TokenError::TimedOut(timed_out(&format!("the request to the {what}"), endpoint, deadline)));
    };
    let (status, body) = answered.map_err(|e| e.redacted(&secrets))?;
    *status_seen = Some(status.as_u16());
    if status.is_success() && !is_error_object(&body) {
        return Ok(body);
    }
    Err(refusal(status, &body, endpoint, what, &secrets))
}

/// An RFC 6749 §5.2 error object without a token. Some servers (GitHub's device flow) send these
/// with HTTP 200: they are refusals all the same.
fn is_error_object(body: &[u8]) -> bool {
    serde_json::from_slice::<Value>(body)
        .is_ok_and(|v| v.get("error").is_some_and(Value::is_string) && v.get("access_token").is_none())
}

/// A value sent that must not come back in error text, raw and as it travels form-encoded.
fn add_secret(secrets: &Secrets, value: &str) {
    secrets.add(value);
    secrets.add(&url::form_urlencoded::byte_serialize(value.as_bytes()).collect::<String>());
}

/// Put the client's authentication into the form, or return the Basic header value.
fn authenticate(
    client: &ClientCredentials,
    audience: &str,
    form: &mut Vec<(&'static str, String)>,
    secrets: &Secrets,
) -> crate::error::Result<Option<HeaderValue>> {
    let needs = |what: &str| {
        McpError::config(format!("oauth: token endpoint auth method {} needs {what}", client.method.as_str()))
    };
    match (client.method, &client.secret) {
        (AuthMethod::ClientSecretBasic, ClientSecret::Secret(secret)) => {
            add_secret(secrets, secret);
            let encode = |s: &str| url::form_urlencoded::byte_serialize(s.as_bytes()).collect::<String>();
            let credentials = STANDARD.encode(format!("{}:{}", encode(&client.client_id), encode(secret)));
            secrets.add(&credentials);
            let mut value = HeaderValue::from_str(&format!("Basic {credentials}"))
                .map_err(|_| McpError::Internal("a Basic credential is not a header value".to_owned()))?;
            value.set_sensitive(true);
            Ok(Some(value))
        }
        (AuthMethod::ClientSecretPost, ClientSecret::Secret(secret)) => {
            add_secret(secrets, secret);
            form.push(("client_id", client.client_id.clone()));
            form.push(("client_secret", secret.clone()));
            Ok(None)
        }
        (AuthMethod::None, _) => {
            // An empty id is a request without any client (an identity provider that needs none).
            if !client.client_id.is_empty() {
                form.push(("client_id", client.client_id.clone()));
            }
            Ok(None)
        }
        (AuthMethod::PrivateKeyJwt, ClientSecret::PrivateKey { pem, algorithm }) => {
            let assertion = SigningKey::from_pem(pem, *algorithm)?.client_assertion(&client.client_id, audience)?;
            add_secret(secrets, &assertion);
            form.push(("client_id", client.client_id.clone()));
            form.push(("client_assertion_type", JWT_CLIENT_ASSERTION_TYPE.to_owned()));
            form.push(("client_assertion", assertion));
            Ok(None)
        }
        (AuthMethod::ClientSecretBasic | AuthMethod::ClientSecretPost, _) => {
            Err(needs("a client secret (oauth.clientSecret)"))
        }
        (AuthMethod::PrivateKeyJwt, _) => Err(needs("a private key (oauth.privateKey)")),
    }
}

/// The error for a non-2xx answer.
fn refusal(status: StatusCode, body: &[u8], endpoint: &Url, what: &str, secrets: &Secrets) -> TokenError {
    let parsed: Option<Value> = serde_json::from_slice(body).ok();
    if let Some(error) = parsed.as_ref().and_then(|v| v.get("error")).and_then(Value::as_str) {
        let description = parsed.as_ref().and_then(|v| v.get("error_description")).and_then(Value::as_str);
        return TokenError::Rejected {
            error: quote_bytes(error.as_bytes(), secrets),
            description: description.map(|d| quote_bytes(d.as_bytes(), secrets)),
        };
    }
    let message = format!(
        "the authorization server's {what} {} answered HTTP {status}: {}",
        display_url(endpoint),
        quote_bytes(body, secrets)
    );
    TokenError::Failed(if status.is_server_error() { McpError::Transport(message) } else { McpError::Auth(message) })
}

/// A 2xx body as a token response. The texts name what is wrong, never a value from the body.
pub fn parse_token_response(body: &[u8]) -> std::result::Result<TokenResponse, TokenError> {
    let invalid = |what: &str| {
        TokenError::Failed(McpError::Auth(format!(
            "the token endpoint's answer is not a usable token response: {what}"
        )))
    };
    let value: Value = serde_json::from_slice(body).map_err(|_| invalid("it is not JSON"))?;
    if !value.is_object() {
        return Err(invalid("it is not a JSON object"));
    }
    if value.get("access_token").and_then(Value::as_str).is_none_or(str::is_empty) {
        return Err(invalid("it has no access_token"));
    }
    let mut response: TokenResponse =
        serde_json::from_value(value).map_err(|_| invalid("a field has the wrong type"))?;
    if response.token_type.eq_ignore_ascii_case("bearer") {
        response.token_type = "Bearer".to_owned();
    } else if response.token_type.eq_ignore_ascii_case("dpop") {
        // Usable only where it was asked for with a proof: the authorizer checks.
        response.token_type = "DPoP".to_owned();
    } else if response.issued_token_type.is_none() {
        let shown = if response.token_type.is_empty() {
            "none".to_owned()
        } else {
            quote_bytes(response.token_type.as_bytes(), &Secrets::default())
        };
        return Err(invalid(&format!("its token_type is {shown}, and only Bearer and DPoP tokens can be used")));
    }
    Ok(response)
}

#[cfg(test)]
pub(crate) mod test_http {
    //! A tiny HTTP/1.1 server on a loopback port for the grants' tests: it records every request and
    //! answers each as the test's responder says (one request per connection).

    use parking_lot::Mutex;
    use serde_json::Value;
    use std::sync::Arc;
    use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
    use tokio::net::TcpListener;
    use url::Url;

    #[derive(Debug, Clone)]
    pub(crate) struct Recorded {
        pub method: String,
        pub path: String,
        pub headers: Vec<(String, String)>,
        pub body: String,
        /// When the request was complete.
        pub at: std::time::Instant,
    }

    impl Recorded {
        pub fn header(&self, name: &str) -> Option<&str> {
            self.headers.iter().find(|(n, _)| n.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str())
        }

        pub fn form(&self) -> Vec<(String, String)> {
            url::form_urlencoded::parse(self.body.as_bytes()).into_owned().collect()
        }

        pub fn field(&self, name: &str) -> Option<String> {
            self.form().into_iter().find(|(n, _)| n == name).map(|(_, v)| v)
        }

        /// The names of the form's fields, sorted.
        pub fn field_names(&self) -> Vec<String> {
            let mut names: Vec<String> = self.form().into_iter().map(|(n, _)| n).collect();
            names.sort();
            names
        }
    }

    pub(crate) struct Reply {
        pub status: u16,
        pub headers: Vec<(String, String)>,
        pub body: Vec<u8>,
        /// Never answer (the connection stays open).
        pub hang: bool,
    }

    impl Reply {
        pub fn json(status: u16, body: Value) -> Reply {
            Reply {
                status,
                headers: vec![("content-type".into(), "application/json".into())],
                body: body.to_string().into_bytes(),
                hang: false,
            }
        }

        pub fn hang() -> Reply {
            Reply { status: 200, headers: Vec::new(), body: Vec::new(), hang: true }
        }
    }

    type Responder = dyn Fn(&Recorded, usize) -> Reply + Send + Sync;

    pub(crate) struct TestServer {
        pub base: Url,
        received: Arc<Mutex<Vec<Recorded>>>,
    }

    impl TestServer {
        /// Start a server; `respond(request, index)` answers the `index`th request (0-based).
        pub async fn start(respond: impl Fn(&Recorded, usize) -> Reply + Send + Sync + 'static) -> TestServer {
            let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
            let base = Url::parse(&format!("http://{}/", listener.local_addr().unwrap())).unwrap();
            let received = Arc::new(Mutex::new(Vec::new()));
            let respond: Arc<Responder> = Arc::new(respond);
            let log = received.clone();
            tokio::spawn(async move {
                while let Ok((socket, _)) = listener.accept().await {
                    let (log, respond) = (log.clone(), respond.clone());
                    tokio::spawn(async move {
                        let mut reader = BufReader::new(socket);
                        let Some(request) = read_request(&mut reader).await else { return };
                        let reply = {
                            let mut log = log.lock();
                            log.push(request.clone());
                            respond(&request, log.len() - 1)
                        };
                        if reply.hang {
                            std::future::pending::<()>().await;
                        }
                        let mut head = format!(
                            "HTTP/1.1 {} X\r\ncontent-length: {}\r\nconnection: close\r\n",
                            reply.status,
                            reply.body.len()
                        );
                        for (name, value) in &reply.headers {
                            head.push_str(&format!("{name}: {value}\r\n"));
                        }
                        head.push_str("\r\n");
                        let socket = reader.get_mut();
                        let _ = socket.write_all(head.as_bytes()).await;
                        let _ = socket.write_all(&reply.body).await;
                        let _ = socket.shutdown().await;
                    });
                }
            });
            TestServer { base, received }
        }

        pub fn url(&self, path: &str) -> Url {
            self.base.join(path).unwrap()
        }

        pub fn received(&self) -> Vec<Recorded> {
            self.received.lock().clone()
        }
    }

    async fn read_request(reader: &mut BufReader<tokio::net::TcpStream>) -> Option<Recorded> {
        let mut line = String::new();
        reader.read_line(&mut line).await.ok()?;
        let mut parts = line.split_whitespace();
        let (method, path) = (parts.next()?.to_owned(), parts.next()?.to_owned());
        let mut headers = Vec::new();
        loop {
            let mut header = String::new();
            if reader.read_line(&mut header).await.ok()? == 0 {
                return None;
            }
            if header == "\r\n" {
                break;
            }
            let (name, value) = header.split_once(':')?;
            headers.push((name.trim().to_ascii_lowercase(), value.trim().to_owned()));
        }
        let length: usize =
            headers.iter().find(|(n, _)| n == "content-length").and_then(|(_, v)| v.parse().ok()).unwrap_or(0);
        let mut body = vec![0; length];
        reader.read_exact(&mut body).await.ok()?;
        Some(Recorded {
            method,
            path,
            headers,
            body: String::from_utf8_lossy(&body).into_owned(),
            at: std::time::Instant::now(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::test_http::{Recorded, Reply, TestServer};
    use super::*;
    use crate::auth::jwt::tests::{fresh_p256_pem, verify, TEST_RSA_PKCS8_PEM};
    use crate::egress::EgressPolicy;
    use serde_json::json;

    const SECRET: &str = "s3cr3t:with/odd chars+";
    const DEADLINE: Duration = Duration::from_secs(5);

    fn egress() -> Egress {
        Egress::new(&EgressPolicy::default()).unwrap()
    }

    fn client(method: AuthMethod, secret: ClientSecret) -> ClientCredentials {
        ClientCredentials { client_id: "client:1".to_owned(), secret, method, dpop: None }
    }

    fn ok_token() -> Reply {
        Reply::json(
            200,
            json!({"access_token": "at-123456789", "token_type": "bearer", "expires_in": 3600, "refresh_token": "rt-123456789", "scope": "a b"}),
        )
    }

    async fn one_request(client: &ClientCredentials) -> (std::result::Result<TokenResponse, TokenError>, Recorded) {
        let server = TestServer::start(|_, _| ok_token()).await;
        let form = vec![("grant_type", "authorization_code".to_owned()), ("code", "code-abcdef".to_owned())];
        let result =
            request_token(&egress(), &server.url("/token"), "http://issuer.test", client, form, DEADLINE).await;
        let received = server.received();
        assert_eq!(received.len(), 1);
        (result, received[0].clone())
    }

    #[tokio::test]
    async fn client_secret_basic_sends_form_encoded_credentials_in_the_header_only() {
        let (result, request) =
            one_request(&client(AuthMethod::ClientSecretBasic, ClientSecret::Secret(SECRET.to_owned()))).await;
        let token = result.unwrap();
        assert_eq!((token.token_type.as_str(), token.expires_in), ("Bearer", Some(3600)));
        assert_eq!((request.method.as_str(), request.path.as_str()), ("POST", "/token"));
        assert_eq!(request.header("content-type"), Some("application/x-www-form-urlencoded"));
        let basic = request.header("authorization").unwrap().strip_prefix("Basic ").unwrap();
        let decoded = String::from_utf8(STANDARD.decode(basic).unwrap()).unwrap();
        assert_eq!(decoded, "client%3A1:s3cr3t%3Awith%2Fodd+chars%2B", "RFC 6749 §2.3.1: each part form-urlencoded");
        assert_eq!(request.field_names(), ["code", "grant_type"], "no client_id or secret in the body");
    }

    #[tokio::test]
    async fn client_secret_post_sends_both_in_the_body_and_no_header() {
        let (result, request) =
            one_request(&client(AuthMethod::ClientSecretPost, ClientSecret::Secret(SECRET.to_owned()))).await;
        result.unwrap();
        assert_eq!(request.header("authorization"), None);
        assert_eq!(request.field("client_id").as_deref(), Some("client:1"));
        assert_eq!(request.field("client_secret").as_deref(), Some(SECRET));
    }

    #[tokio::test]
    async fn none_sends_the_client_id_only() {
        let (result, request) = one_request(&client(AuthMethod::None, ClientSecret::Secret(SECRET.to_owned()))).await;
        result.unwrap();
        assert_eq!(request.header("authorization"), None);
        assert_eq!(request.field_names(), ["client_id", "code", "grant_type"]);
        assert!(!request.body.contains("s3cr3t"));
    }

    #[tokio::test]
    async fn private_key_jwt_sends_an_assertion_the_server_can_verify() {
        for (pem, algorithm) in
            [(fresh_p256_pem(), SigningAlgorithm::Es256), (TEST_RSA_PKCS8_PEM.to_owned(), SigningAlgorithm::Rs256)]
        {
            let public_key = SigningKey::from_pem(&pem, algorithm).unwrap().public_key();
            let (result, request) =
                one_request(&client(AuthMethod::PrivateKeyJwt, ClientSecret::PrivateKey { pem, algorithm })).await;
            result.unwrap();
            assert_eq!(request.header("authorization"), None);
            assert_eq!(request.field("client_assertion_type").as_deref(), Some(JWT_CLIENT_ASSERTION_TYPE));
            let (header, claims) = verify(&request.field("client_assertion").unwrap(), algorithm, &public_key);
            assert_eq!(header["alg"], algorithm.jws_name());
            assert_eq!((claims["iss"].as_str(), claims["sub"].as_str()), (Some("client:1"), Some("client:1")));
            assert_eq!(claims["aud"], "http://issuer.test", "aud is the AS issuer");
        }
    }

    #[tokio::test]
    async fn caller_supplied_client_fields_never_add_a_second_method() {
        let server = TestServer::start(|_, _| ok_token()).await;
        let form = vec![
            ("grant_type", "refresh_token".to_owned()),
            ("client_id", "other".to_owned()),
            ("client_secret", "leak".to_owned()),
        ];
        let basic = client(AuthMethod::ClientSecretBasic, ClientSecret::Secret(SECRET.to_owned()));
        request_token(&egress(), &server.url("/t"), "i", &basic, form, DEADLINE).await.unwrap();
        assert_eq!(server.received()[0].field_names(), ["grant_type"]);
    }

    #[tokio::test]
    async fn rfc6749_errors_are_rejections_with_secrets_blanked() {
        let server = TestServer::start(|request, _| {
            // A careless server that echoes what it got.
            Reply::json(400, json!({"error": "invalid_grant", "error_description": format!("bad {}", request.body)}))
        })
        .await;
        let form = vec![
            ("grant_type", "authorization_code".to_owned()),
            ("code", "code-abcdef".to_owned()),
            ("code_verifier", "verifier-xyz123".to_owned()),
        ];
        let post = client(AuthMethod::ClientSecretPost, ClientSecret::Secret(SECRET.to_owned()));
        let error = request_token(&egress(), &server.url("/token"), "i", &post, form, DEADLINE).await.unwrap_err();
        assert_eq!(error.error_code(), Some("invalid_grant"));
        let text = format!("{error} {error:?} {}", McpError::from(error.clone()));
        for secret in ["code-abcdef", "verifier-xyz123", "s3cr3t", "s3cr3t%3Awith"] {
            assert!(!text.contains(secret), "{secret} in {text}");
        }
        assert!(text.contains("invalid_grant") && text.contains("grant_type=authorization_code"), "{text}");
    }

    #[tokio::test]
    async fn a_basic_credential_and_an_assertion_never_reach_error_text() {
        let pem = fresh_p256_pem();
        let server = TestServer::start(|request, _| {
            let echoed = format!("{} {}", request.header("authorization").unwrap_or(""), request.body);
            Reply::json(401, json!({"error": "invalid_client", "error_description": echoed}))
        })
        .await;
        let jwt =
            client(AuthMethod::PrivateKeyJwt, ClientSecret::PrivateKey { pem, algorithm: SigningAlgorithm::Es256 });
        let error = request_token(
            &egress(),
            &server.url("/token"),
            "i",
            &jwt,
            vec![("grant_type", "client_credentials".into())],
            DEADLINE,
        )
        .await
        .unwrap_err();
        let assertion = server.received()[0].field("client_assertion").unwrap();
        assert!(!error.to_string().contains(&assertion[..30]), "{error}");
        let basic = client(AuthMethod::ClientSecretBasic, ClientSecret::Secret(SECRET.to_owned()));
        let error = request_token(
            &egress(),
            &server.url("/token"),
            "i",
            &basic,
            vec![("grant_type", "client_credentials".into())],
            DEADLINE,
        )
        .await
        .unwrap_err();
        let header = server.received()[1].header("authorization").unwrap().to_owned();
        assert!(!error.to_string().contains(header.trim_start_matches("Basic ")), "{error}");
    }

    #[tokio::test]
    async fn answers_without_a_usable_token_fail() {
        let cases = [
            (json!({"token_type": "Bearer"}), "no access_token"),
            (json!({"access_token": "", "token_type": "Bearer"}), "no access_token"),
            (json!({"access_token": "at-xyz123456", "token_type": "mac"}), "token_type is mac"),
            (json!({"access_token": "at-xyz123456"}), "token_type is none"),
            (json!({"access_token": "at-xyz123456", "token_type": "Bearer", "scope": 7}), "wrong type"),
        ];
        for (body, expected) in cases {
            let server = TestServer::start(move |_, _| Reply::json(200, body.clone())).await;
            let none = client(AuthMethod::None, ClientSecret::None);
            let error =
                request_token(&egress(), &server.url("/token"), "i", &none, vec![], DEADLINE).await.unwrap_err();
            let TokenError::Failed(error) = error else { panic!("{error}") };
            assert_eq!(error.code(), "mcp_auth_error");
            assert!(error.to_string().contains(expected) && !error.to_string().contains("at-xyz"), "{error}");
        }
    }

    #[test]
    fn token_exchange_answers_may_be_n_a_and_expires_in_may_be_a_string() {
        let exchanged = parse_token_response(br#"{"access_token":"jag","token_type":"N_A","issued_token_type":"urn:ietf:params:oauth:token-type:id-jag"}"#).unwrap();
        assert_eq!(exchanged.token_type, "N_A");
        let token = parse_token_response(br#"{"access_token":"t","token_type":"BEARER","expires_in":"120"}"#).unwrap();
        assert_eq!((token.token_type.as_str(), token.expires_in), ("Bearer", Some(120)));
    }

    #[tokio::test]
    async fn an_error_object_sent_with_http_200_is_a_refusal() {
        let server = TestServer::start(|_, _| {
            Reply::json(200, json!({"error": "authorization_pending", "error_description": "wait"}))
        })
        .await;
        let none = client(AuthMethod::None, ClientSecret::None);
        let error = request_token(&egress(), &server.url("/token"), "i", &none, vec![], DEADLINE).await.unwrap_err();
        assert_eq!(error.error_code(), Some("authorization_pending"), "{error}");
    }

    #[tokio::test]
    async fn non_json_errors_and_server_errors_keep_their_status() {
        let server = TestServer::start(|_, index| Reply {
            status: if index == 0 { 403 } else { 503 },
            headers: vec![],
            body: b"nope".to_vec(),
            hang: false,
        })
        .await;
        let none = client(AuthMethod::None, ClientSecret::None);
        let forbidden =
            request_token(&egress(), &server.url("/token"), "i", &none, vec![], DEADLINE).await.unwrap_err();
        let unavailable =
            request_token(&egress(), &server.url("/token"), "i", &none, vec![], DEADLINE).await.unwrap_err();
        let (TokenError::Failed(forbidden), TokenError::Failed(unavailable)) = (forbidden, unavailable) else {
            panic!()
        };
        assert_eq!((forbidden.code(), unavailable.code()), ("mcp_auth_error", "mcp_transport_error"));
        assert!(forbidden.to_string().contains("403") && forbidden.to_string().contains("nope"), "{forbidden}");
    }

    #[tokio::test]
    async fn bodies_are_bounded_and_exchanges_have_a_deadline() {
        let huge =
            Reply { status: 200, headers: vec![], body: vec![b' '; OAUTH_TOKEN_RESPONSE_MAX_BYTES + 1], hang: false };
        let server =
            TestServer::start(move |_, _| Reply { body: huge.body.clone(), ..Reply::json(200, json!({})) }).await;
        let none = client(AuthMethod::None, ClientSecret::None);
        let error = request_token(&egress(), &server.url("/token"), "i", &none, vec![], DEADLINE).await.unwrap_err();
        assert!(matches!(error, TokenError::Failed(McpError::ResultTooLarge { .. })), "{error}");

        let silent = TestServer::start(|_, _| Reply::hang()).await;
        let started = std::time::Instant::now();
        let error = request_token(&egress(), &silent.url("/token"), "i", &none, vec![], Duration::from_millis(300))
            .await
            .unwrap_err();
        assert!(matches!(&error, TokenError::TimedOut(McpError::Auth(_))), "{error}");
        assert!(
            error.to_string().starts_with("the request to the token endpoint timed out: http://127.0.0.1:"),
            "{error}"
        );
        assert!(started.elapsed() < Duration::from_secs(2));
    }

    #[tokio::test]
    async fn a_redirect_to_another_origin_is_not_followed() {
        let elsewhere = TestServer::start(|_, _| ok_token()).await;
        let target = elsewhere.url("/token").to_string();
        let server = TestServer::start(move |_, _| Reply {
            status: 307,
            headers: vec![("location".into(), target.clone())],
            body: vec![],
            hang: false,
        })
        .await;
        let post = client(AuthMethod::ClientSecretPost, ClientSecret::Secret(SECRET.to_owned()));
        let error = request_token(&egress(), &server.url("/token"), "i", &post, vec![], DEADLINE).await.unwrap_err();
        assert!(matches!(error, TokenError::Failed(McpError::RedirectRefused(_))), "{error}");
        assert!(elsewhere.received().is_empty(), "the secret-bearing form went nowhere else");
    }

    #[tokio::test]
    async fn endpoints_must_be_https_or_loopback_and_methods_need_their_secret() {
        for (url, ok) in [
            ("https://as.example/token", true),
            ("http://localhost:1/token", true),
            ("http://127.0.0.2:1/token", true),
            ("http://[::1]:1/token", true),
            ("http://as.example/token", false),
            ("ftp://as.example/token", false),
        ] {
            assert_eq!(check_endpoint(&Url::parse(url).unwrap(), "token endpoint").is_ok(), ok, "{url}");
        }
        let none = client(AuthMethod::None, ClientSecret::None);
        let error =
            request_token(&egress(), &Url::parse("http://as.example/token").unwrap(), "i", &none, vec![], DEADLINE)
                .await
                .unwrap_err();
        assert_eq!(McpError::from(error).code(), "mcp_auth_error");
        let basic = client(AuthMethod::ClientSecretBasic, ClientSecret::None);
        let error =
            request_token(&egress(), &Url::parse("http://127.0.0.1:1/token").unwrap(), "i", &basic, vec![], DEADLINE)
                .await
                .unwrap_err();
        assert_eq!(McpError::from(error).code(), "mcp_config_invalid");
    }

    #[test]
    fn debug_output_redacts_every_secret() {
        let key = ClientSecret::PrivateKey {
            pem: "-----BEGIN PRIVATE KEY-----abc".to_owned(),
            algorithm: SigningAlgorithm::Es256,
        };
        let shown = format!(
            "{:?} {:?}",
            client(AuthMethod::ClientSecretBasic, ClientSecret::Secret(SECRET.to_owned())),
            client(AuthMethod::PrivateKeyJwt, key)
        );
        assert!(!shown.contains("s3cr3t") && !shown.contains("BEGIN"), "{shown}");
        assert!(shown.contains("client:1") && shown.contains("Es256"), "{shown}");
        let token = parse_token_response(
            br#"{"access_token":"at-visible","token_type":"Bearer","refresh_token":"rt-visible","scope":"s"}"#,
        )
        .unwrap();
        let shown = format!("{token:?}");
        assert!(!shown.contains("visible") && shown.contains("Bearer"), "{shown}");
        assert_eq!(AuthMethod::from_name("private_key_jwt"), Some(AuthMethod::PrivateKeyJwt));
        assert_eq!(AuthMethod::from_name("tls_client_auth"), None);
    }
}
