//! One server's authorization state: the token in use, how it is refreshed, and the flows that obtain a
//! new one. The HTTP transports ask it through the trait they define (`transport::http::Authorization`):
//! before each request ([`Authorizer::before_request`]), and with every answer, whose 401 or
//! `insufficient_scope` 403 starts a new token ([`Authorizer::on_rejected`]).
//!
//! Flows run one at a time per server (a tokio mutex held across the flow, on purpose): concurrent
//! requests that were refused with the same token wait for the one flow and then use its token. A flow
//! is cancelled with the server (`close()`), and a refresh that may have reached the authorization
//! server but whose answer was lost is never replayed with the same rotating refresh token.
//!
//! Spending a refresh token is a claim one holder of the token store wins ([`claim`]): toolsets of this
//! process sharing the store take turns, a store shared across processes adds its lock (the encrypted
//! file) or a compare-and-set (a JavaScript store's `compareAndSet`), and whoever's turn comes reads
//! the store again first, so a refresher that lost uses the winner's tokens and never presents the
//! refresh token the winner spent.

use super::budget::LoginBudget;
use super::challenge::{split_scopes, Challenge};
use super::discovery::{discover, Discovered};
use super::dpop::{Dpop, DpopKey};
use super::keys;
use super::loopback::Loopback;
use super::registration;
use super::settings::{Grant, OAuthSettings};
use super::store::{claim, TokenStore};
use super::token::{request_token, AuthMethod, ClientCredentials, ClientSecret, TokenResponse};
use super::workload::WorkloadAssertion;
use crate::egress::{Egress, EgressPolicy};
use crate::error::{McpError, Result};
use crate::guard::redact::Secrets;
use crate::hooks::Callback;
use crate::limits::{
    MAX_AUTHORIZATIONS_IN_A_ROW, OAUTH_REQUEST_TIMEOUT_MS, TOKEN_CLAIM_POLL_MAX_MS, TOKEN_CLAIM_POLL_MIN_MS,
    TOKEN_REFRESH_MARGIN_MS,
};
use crate::transport::http::{Authorization, Credential, RequestProof};
use futures_util::future::BoxFuture;
use serde::{Deserialize, Serialize};
use std::future::Future;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use tokio_util::sync::CancellationToken;
use url::Url;

/// The host's side of authorization, shared by a toolset's servers.
pub struct AuthHost {
    pub store: Arc<dyn TokenStore>,
    /// `onAuthorizationUrl`: sends a person to a login URL (JSON `{url, server, grant, userCode?, expiresAt?}`).
    pub present: Option<Arc<dyn Callback<String, String>>>,
    /// `oauth.assertion` callbacks, asked with the server's name (grant `workload_identity`).
    pub workload_assertion: Option<Arc<dyn Callback<String, String>>>,
    pub login_timeout: Duration,
    /// `connectTimeoutMs`: the most a login's automated part (discovery, registration, the token
    /// requests) takes in all, the person's time aside; and the most any one such request takes.
    pub flow_timeout: Duration,
    /// Cancelled by the host's `signal`: every login in progress ends, and none starts again.
    pub logins: CancellationToken,
    /// Where token requests are told (`telemetry::operation`); `None`: nowhere.
    pub operations: Option<crate::telemetry::operation::OperationSink>,
}

/// Tokens as kept in the token store, under their issuer and resource.
#[derive(Clone, Serialize, Deserialize)]
struct Tokens {
    issuer: String,
    resource: String,
    client_id: String,
    token_endpoint: String,
    #[serde(default)]
    revocation_endpoint: Option<String>,
    access_token: String,
    #[serde(default)]
    refresh_token: Option<String>,
    #[serde(default)]
    expires_at_ms: Option<u64>,
    #[serde(default)]
    scope: Option<String>,
    /// Whether the authorization server rotates refresh tokens (unknown counts as yes).
    #[serde(default)]
    rotates: Option<bool>,
    /// Set on the stored copy (which then has no refresh token) while a holder spends the refresh token:
    /// since when (ms since the epoch). Another holder that finds it waits for that one's tokens.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    refreshing_since_ms: Option<u64>,
    /// DPoP (RFC 9449): the key these tokens were obtained with (base64url PKCS#8), which every request
    /// with them, and their refresh, must prove. Kept here so a restarted process proves the same key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    dpop_key: Option<String>,
    /// The access token is DPoP-bound (`token_type: DPoP`): sent as `Authorization: DPoP`, with a proof.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    dpop_bound: bool,
}

impl std::fmt::Debug for Tokens {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tokens")
            .field("issuer", &self.issuer)
            .field("scope", &self.scope)
            .field("dpop_bound", &self.dpop_bound)
            .finish_non_exhaustive()
    }
}

/// Which issuer and resource a server was last authorized with.
#[derive(Serialize, Deserialize)]
struct ServerPointer {
    issuer: String,
    resource: String,
}

#[derive(Default)]
struct FlowState {
    tokens: Option<Tokens>,
    /// The scope the last authorization asked for (step-up adds to it).
    requested_scope: Option<String>,
}

pub struct Authorizer {
    server: String,
    server_url: Url,
    settings: OAuthSettings,
    host: Arc<AuthHost>,
    egress: Egress,
    credential: Credential,
    secrets: Arc<Secrets>,
    cancel: CancellationToken,
    /// The most one authorization-server request gets, its whole answer included.
    deadline: Duration,
    flow: tokio::sync::Mutex<FlowState>,
    loaded: AtomicBool,
    /// When the token in use expires (ms since the epoch); 0 when unknown or nothing to refresh.
    refresh_due_ms: AtomicU64,
    /// Authorizations since a request last succeeded.
    in_a_row: AtomicU32,
    /// The DPoP key in use (from the stored tokens, or made for this server's first DPoP token) and the
    /// nonces its origins gave.
    /// With the issuer the key proves to: a key is never shown to two authorization servers.
    dpop: parking_lot::Mutex<Option<(String, Dpop)>>,
    /// Grant `workload_identity`: where the workload's assertion comes from.
    workload: Option<WorkloadAssertion>,
    /// This server's token requests, told to the host's `operations` (telemetry), when it has them.
    token_watch: Option<Arc<dyn Fn(crate::telemetry::operation::Operation) + Send + Sync>>,
}

/// The transports' questions, answered (see the module doc).
impl Authorization for Authorizer {
    fn before_request(&self) -> BoxFuture<'_, Result<()>> {
        Box::pin(Authorizer::before_request(self))
    }

    fn on_response(
        &self,
        status: reqwest::StatusCode,
        headers: &reqwest::header::HeaderMap,
        sent: u64,
    ) -> Option<BoxFuture<'_, Result<()>>> {
        // The scheme the token in use goes out with (a refusal of an older one is told apart by `sent`).
        let dpop = self.credential.current().map(|presented| presented.proof.is_some());
        let Some(challenge) = Challenge::of_refusal(status, headers, dpop) else {
            if status.is_success() {
                self.note_success();
            }
            return None;
        };
        if challenge.is_dpop_nonce() {
            return None; // a new proof cures it, not a new token (the transport retried once already)
        }
        Some(Box::pin(async move { self.on_rejected(status.as_u16(), &challenge, sent).await }))
    }
}

/// A DPoP-bound access token as the transport presents it: a fresh proof per request (`ath` binding it to
/// the token, the origin's last nonce), and every answer's `DPoP-Nonce` kept. Its proofs are redacted by
/// the key's proof start, registered with the server's redaction set when the key was put in use.
struct DpopBinding {
    dpop: Dpop,
    access_token: String,
}

impl RequestProof for DpopBinding {
    fn header(
        &self,
        method: &reqwest::Method,
        url: &Url,
    ) -> Option<(reqwest::header::HeaderName, reqwest::header::HeaderValue)> {
        let value = self.dpop.header(method.as_str(), url, Some(&self.access_token)).ok()?;
        Some((reqwest::header::HeaderName::from_static(super::dpop::DPOP_HEADER), value))
    }

    fn on_answer(&self, url: &Url, status: reqwest::StatusCode, headers: &reqwest::header::HeaderMap) -> bool {
        let new_nonce = self.dpop.nonces.note(url, headers);
        new_nonce
            && status == reqwest::StatusCode::UNAUTHORIZED
            && Challenge::for_scheme(headers, Some(true)).is_dpop_nonce()
    }
}

/// Whether a token response's `token_type` makes a DPoP-bound token (true) or a Bearer one (false), or why
/// it is not to be used: a DPoP token to a request that proved no key, a type neither Bearer nor DPoP, or a
/// Bearer token where only a bound one will do (the resource requires it, or the token it replaces was bound).
fn token_kind(token_type: &str, proved: bool, dpop_required: bool) -> Result<bool> {
    let dpop_bound = token_type.eq_ignore_ascii_case("dpop");
    if dpop_bound && !proved {
        return Err(McpError::Auth(
            "the authorization server issued a DPoP token to a request without a DPoP proof".into(),
        ));
    }
    if !dpop_bound && !token_type.eq_ignore_ascii_case("bearer") {
        return Err(McpError::Auth(format!(
            "the authorization server issued a {token_type:?} token; only Bearer and DPoP are supported"
        )));
    }
    if !dpop_bound && dpop_required {
        return Err(McpError::Auth(
            "the authorization server issued a Bearer token where only a DPoP-bound token will do".into(),
        ));
    }
    Ok(dpop_bound)
}

/// When a token that lives `expires_in` seconds from now expires (ms since the epoch).
fn expires_at(expires_in: Option<u64>) -> Option<u64> {
    expires_in.map(|s| now_ms() + s.saturating_mul(1000))
}

fn now_ms() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_millis() as u64).unwrap_or(0)
}

impl Authorizer {
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        server: String,
        server_url: Url,
        settings: OAuthSettings,
        host: Arc<AuthHost>,
        policy: &EgressPolicy,
        credential: Credential,
        secrets: Arc<Secrets>,
        cancel: CancellationToken,
    ) -> Result<Authorizer> {
        settings.secrets().into_iter().for_each(|s| secrets.add(s));
        let workload = settings
            .assertion
            .clone()
            .map(|source| WorkloadAssertion::new(&server, source, host.workload_assertion.clone()));
        let token_watch = host.operations.clone().map(|sink| {
            let server = server.clone();
            Arc::new(move |operation| sink(&server, operation))
                as Arc<dyn Fn(crate::telemetry::operation::Operation) + Send + Sync>
        });
        Ok(Authorizer {
            workload,
            server,
            server_url,
            settings,
            host,
            egress: Egress::new(policy)?,
            credential,
            secrets,
            cancel,
            deadline: Duration::from_millis(OAUTH_REQUEST_TIMEOUT_MS),
            flow: tokio::sync::Mutex::new(FlowState::default()),
            loaded: AtomicBool::new(false),
            refresh_due_ms: AtomicU64::new(0),
            in_a_row: AtomicU32::new(0),
            dpop: parking_lot::Mutex::new(None),
            token_watch,
        })
    }

    /// `work` with its token requests told to the host's telemetry (`telemetry::operation`).
    fn watched<'a, F: Future + 'a>(&'a self, work: F) -> impl Future<Output = F::Output> + 'a {
        crate::telemetry::operation::watching_tokens(self.token_watch.as_ref(), work)
    }

    /// The generation of the token in use: a refusal of an older one needs no new flow.
    pub fn generation(&self) -> u64 {
        self.credential.generation()
    }

    /// A request succeeded: the next refusal starts a new count of authorizations.
    pub fn note_success(&self) {
        if self.in_a_row.load(Ordering::Relaxed) != 0 {
            self.in_a_row.store(0, Ordering::Relaxed);
        }
    }

    fn refresh_due(&self) -> bool {
        let due = self.refresh_due_ms.load(Ordering::Acquire);
        due != 0 && now_ms() >= due
    }

    /// Before a request: the stored token loaded (once), and refreshed if it is about to expire. Costs
    /// two atomic loads when neither is needed.
    pub async fn before_request(&self) -> Result<()> {
        if self.loaded.load(Ordering::Acquire) && !self.refresh_due() {
            return Ok(());
        }
        self.watched(async {
            let mut state = self.lock().await?;
            if !self.loaded.load(Ordering::Acquire) {
                self.load(&mut state).await;
                self.loaded.store(true, Ordering::Release);
            }
            if self.refresh_due() {
                // A failed refresh leaves the request to go out with what there is; its 401 starts a flow.
                if self.settings.grant == Grant::WorkloadIdentity
                    && state.tokens.as_ref().is_some_and(|t| t.refresh_token.is_none())
                {
                    self.refresh_due_ms.store(0, Ordering::Release);
                    let renewed =
                        self.until_closed_or_aborted(self.authorize(&mut state, &Challenge::default(), false)).await?;
                    if let Err(error) = renewed {
                        tracing::warn!(server = %self.server, error = %error, "renewing the workload's token failed");
                    }
                } else {
                    let _ = self.refresh(&mut state).await;
                }
            }
            Ok(())
        })
        .await
    }

    /// A request sent with token generation `sent` was refused with `status` (401, or 403 with
    /// `insufficient_scope`). Returns once a new token is in place, or why there is none.
    pub async fn on_rejected(&self, status: u16, challenge: &Challenge, sent: u64) -> Result<()> {
        self.watched(self.on_rejected_unwatched(status, challenge, sent)).await
    }

    async fn on_rejected_unwatched(&self, status: u16, challenge: &Challenge, sent: u64) -> Result<()> {
        let mut state = self.lock().await?;
        if self.generation() != sent {
            return Ok(()); // another request's flow already replaced that token
        }
        if self.adopt_stored(&mut state).await {
            return Ok(()); // another holder of the token store has newer tokens: try those first
        }
        if self.in_a_row.fetch_add(1, Ordering::Relaxed) >= MAX_AUTHORIZATIONS_IN_A_ROW {
            return Err(McpError::Auth(format!(
                "server {:?} refused {MAX_AUTHORIZATIONS_IN_A_ROW} fresh authorizations in a row; giving up",
                self.server
            )));
        }
        let step_up = status == 403;
        if !step_up
            && state.tokens.as_ref().is_some_and(|t| t.refresh_token.is_some())
            && self.refresh(&mut state).await.is_ok()
        {
            return Ok(());
        }
        self.until_closed_or_aborted(self.authorize(&mut state, challenge, step_up)).await?
    }

    /// `work` (a login, or a workload's renewal), unless the server is closed or the host's `signal`
    /// ends logins first.
    async fn until_closed_or_aborted<T>(&self, work: impl Future<Output = T>) -> Result<T> {
        tokio::select! {
            done = work => Ok(done),
            _ = self.cancel.cancelled() => Err(McpError::Closed),
            _ = self.host.logins.cancelled() => Err(McpError::Aborted),
        }
    }

    /// Revoke the stored tokens where the authorization server offers revocation (RFC 7009), and forget
    /// them. Succeeds when there is nothing to forget.
    pub async fn logout(&self) -> Result<()> {
        self.watched(self.logout_unwatched()).await
    }

    async fn logout_unwatched(&self) -> Result<()> {
        let mut state = self.lock().await?;
        self.load(&mut state).await;
        // Forgotten here first, whatever revocation does: a logout that could not reach the authorization
        // server still leaves nothing behind.
        let tokens = state.tokens.take();
        self.refresh_due_ms.store(0, Ordering::Release);
        if let Some(tokens) = &tokens {
            self.host.store.delete(&keys::tokens(&tokens.issuer, &tokens.resource)).await?;
        }
        self.host.store.delete(&keys::server(self.server_url.as_str())).await?;
        let Some(tokens) = tokens else { return Ok(()) };
        let Some(endpoint) = tokens.revocation_endpoint.as_deref().and_then(|u| Url::parse(u).ok()) else {
            return Ok(());
        };
        let client = self.client_for_refresh(&tokens).await;
        let mut failed = None;
        for (token, hint) in
            [(tokens.refresh_token.as_deref(), "refresh_token"), (Some(tokens.access_token.as_str()), "access_token")]
        {
            let Some(token) = token else { continue };
            let form = vec![("token", token.to_owned()), ("token_type_hint", hint.to_owned())];
            let revoked = super::token::post_form(
                &self.egress,
                &endpoint,
                "revocation endpoint",
                &tokens.issuer,
                &client,
                form,
                self.budget().request(),
            )
            .await;
            if let Err(e) = revoked {
                failed.get_or_insert(McpError::from(e));
            }
        }
        match failed {
            None => Ok(()),
            Some(e) => Err(McpError::Auth(format!(
                "the tokens were forgotten here, but revoking them at the authorization server failed: {e}"
            ))),
        }
    }

    /// The time of a login (or one request outside a login) starting now.
    fn budget(&self) -> LoginBudget {
        LoginBudget::new(self.host.flow_timeout, self.deadline)
    }

    async fn lock(&self) -> Result<tokio::sync::MutexGuard<'_, FlowState>> {
        tokio::select! {
            state = self.flow.lock() => Ok(state),
            _ = self.cancel.cancelled() => Err(McpError::Closed),
        }
    }

    /// The stored token for this server, if any, put in use.
    async fn load(&self, state: &mut FlowState) {
        let store = &self.host.store;
        let Ok(Some(pointer)) = store.get(&keys::server(self.server_url.as_str())).await else { return };
        let Ok(pointer) = serde_json::from_str::<ServerPointer>(&pointer) else { return };
        let Ok(Some(tokens)) = store.get(&keys::tokens(&pointer.issuer, &pointer.resource)).await else { return };
        let Ok(tokens) = serde_json::from_str::<Tokens>(&tokens) else { return };
        if tokens.issuer == pointer.issuer && tokens.resource == pointer.resource {
            if let Err(unusable) = self.use_tokens(state, tokens.clone()) {
                tracing::warn!(server = %self.server, error = %unusable, "the stored tokens were dropped");
                self.forget(state, &tokens).await;
            }
        }
    }

    fn use_tokens(&self, state: &mut FlowState, tokens: Tokens) -> Result<()> {
        self.secrets.set_rotating("oauth-access", tokens.access_token.as_bytes());
        if let Some(refresh) = &tokens.refresh_token {
            self.secrets.set_rotating("oauth-refresh", refresh.as_bytes());
        }
        match (tokens.dpop_bound, self.dpop_of(&tokens)) {
            (true, Some(dpop)) => {
                let binding = DpopBinding { dpop, access_token: tokens.access_token.clone() };
                self.credential.set_bound(&tokens.access_token, Arc::new(binding))?
            }
            // A bound token without its key is useless (and as Bearer it would be refused, or worse, taken
            // without its binding): not used; the next refusal authorizes again.
            (true, None) => {
                self.credential.clear();
                state.tokens = None;
                self.refresh_due_ms.store(0, Ordering::Release);
                return Err(McpError::Auth(
                    "the stored DPoP-bound token's key cannot be read: not using the token, authorizing again".into(),
                ));
            }
            (false, _) => self.credential.set_bearer(&tokens.access_token)?,
        }
        // Refreshed a minute before expiry, or halfway through a shorter life.
        // A workload's token has no refresh token: the grant itself runs again, as near the expiry.
        let renewable = tokens.refresh_token.is_some() || self.settings.grant == Grant::WorkloadIdentity;
        let due = match (renewable, tokens.expires_at_ms) {
            (true, Some(at)) => at.saturating_sub(TOKEN_REFRESH_MARGIN_MS.min(at.saturating_sub(now_ms()) / 2)).max(1),
            _ => 0,
        };
        self.refresh_due_ms.store(due, Ordering::Release);
        state.tokens = Some(tokens);
        Ok(())
    }

    /// Keep and use new tokens.
    async fn install(&self, state: &mut FlowState, tokens: Tokens) -> Result<()> {
        self.use_tokens(state, tokens.clone())?;
        self.keep(&tokens).await
    }

    /// Write tokens (and which issuer and resource this server uses) to the token store.
    async fn keep(&self, tokens: &Tokens) -> Result<()> {
        let store = &self.host.store;
        let pointer = ServerPointer { issuer: tokens.issuer.clone(), resource: tokens.resource.clone() };
        store
            .set(
                &keys::tokens(&tokens.issuer, &tokens.resource),
                &serde_json::to_string(tokens).expect("tokens serialize"),
            )
            .await?;
        store
            .set(
                &keys::server(self.server_url.as_str()),
                &serde_json::to_string(&pointer).expect("a pointer serializes"),
            )
            .await
    }

    /// The tokens the store holds for ours' issuer and resource, if another holder of the store (another
    /// session's toolset, another process) replaced them since we read them: those are current, and ours
    /// (a refresh token it already spent, perhaps) are not to be used again. True when adopted.
    async fn adopt_stored(&self, state: &mut FlowState) -> bool {
        let Some(ours) = &state.tokens else { return false };
        let stored = self.host.store.get(&keys::tokens(&ours.issuer, &ours.resource)).await.ok().flatten();
        let Some(stored) = stored.and_then(|s| serde_json::from_str::<Tokens>(&s).ok()) else { return false };
        let replaced = stored.issuer == ours.issuer
            && stored.resource == ours.resource
            && (stored.access_token != ours.access_token || stored.refresh_token != ours.refresh_token);
        replaced && self.use_tokens(state, stored).is_ok()
    }

    fn tokens_from(
        &self,
        response: TokenResponse,
        discovered: &Discovered,
        client: &ClientCredentials,
        scope: Option<String>,
    ) -> Result<Tokens> {
        let dpop_bound = token_kind(&response.token_type, client.dpop.is_some(), discovered.dpop_required)?;
        Ok(Tokens {
            issuer: discovered.metadata.issuer.clone(),
            resource: discovered.resource.clone(),
            client_id: client.client_id.clone(),
            token_endpoint: discovered.metadata.token_endpoint.to_string(),
            revocation_endpoint: discovered.metadata.revocation_endpoint.as_ref().map(Url::to_string),
            access_token: response.access_token,
            refresh_token: response.refresh_token,
            expires_at_ms: expires_at(response.expires_in),
            scope: response.scope.or(scope),
            rotates: None,
            refreshing_since_ms: None,
            dpop_key: client.dpop.as_ref().map(|d| d.key.stored()),
            dpop_bound,
        })
    }

    /// The DPoP key stored with `tokens`, put in use (and registered as a secret); `None` for tokens
    /// obtained without DPoP, or a stored key that cannot be read.
    fn dpop_of(&self, tokens: &Tokens) -> Option<Dpop> {
        let stored = tokens.dpop_key.as_deref()?;
        let mut slot = self.dpop.lock();
        if let Some((_, dpop)) = slot.as_ref().filter(|(_, d)| d.key.stored() == stored) {
            return Some(dpop.clone());
        }
        let key = DpopKey::from_stored(stored).ok()?;
        self.secrets.add(stored);
        self.secrets.add_jws_start(&key.proof_start(), crate::limits::DPOP_PROOF_MAX_BYTES);
        // The nonces an origin gave are the server's, not the key's: kept across keys.
        let nonces = slot.as_ref().map(|(_, d)| d.nonces.clone()).unwrap_or_default();
        let dpop = Dpop { key: Arc::new(key), nonces };
        *slot = Some((tokens.issuer.clone(), dpop.clone()));
        Some(dpop)
    }

    /// Whether this authorization proves a key (RFC 9449), and which: the one in use, else a new one.
    /// DPoP where the authorization server takes ES256 proofs; a resource that requires DPoP-bound tokens
    /// from one that does not is refused.
    fn dpop_for(&self, discovered: &Discovered) -> Result<Option<Dpop>> {
        let offered = discovered
            .metadata
            .dpop_signing_alg_values_supported
            .as_ref()
            .is_some_and(|algs| algs.iter().any(|a| a == super::dpop::DPOP_ALGORITHM));
        if !offered {
            if discovered.dpop_required {
                return Err(McpError::Auth(format!(
                    "server {:?} accepts DPoP-bound tokens only, and its authorization server takes no ES256 DPoP proofs",
                    self.server
                )));
            }
            return Ok(None);
        }
        // The key in use, if it proves to this authorization server; another one gets a new key, so no
        // two authorization servers can tie their tokens (their `cnf.jkt`) to one client.
        let issuer = &discovered.metadata.issuer;
        let same = |known: &str| known.trim_end_matches('/') == issuer.trim_end_matches('/');
        let mut slot = self.dpop.lock();
        if let Some((_, dpop)) = slot.as_ref().filter(|(known, _)| same(known)) {
            return Ok(Some(dpop.clone()));
        }
        let key = DpopKey::generate()?;
        self.secrets.add(&key.stored());
        self.secrets.add_jws_start(&key.proof_start(), crate::limits::DPOP_PROOF_MAX_BYTES);
        // The nonces an origin gave are the server's, not the key's: kept across keys.
        let nonces = slot.as_ref().map(|(_, d)| d.nonces.clone()).unwrap_or_default();
        let dpop = Dpop { key: Arc::new(key), nonces };
        *slot = Some((issuer.clone(), dpop.clone()));
        Ok(Some(dpop))
    }

    /// Exchange the refresh token, holding the claim on it. A rejection forgets the tokens. A rotating
    /// refresh token is recorded as spent before it is sent, so however the exchange ends (an answer
    /// lost, the caller gone, the toolset closed) it is never sent twice; only a server known not to
    /// rotate gets it again.
    async fn refresh(&self, state: &mut FlowState) -> Result<()> {
        let Some(ours) = state.tokens.clone() else { return Err(McpError::Auth("no token to refresh".into())) };
        let key = keys::tokens(&ours.issuer, &ours.resource);
        let claim = self.until_closed(claim(self.host.store.as_ref(), &key, self.deadline)).await??;
        // Our turn: the store holds what the holders before us left (a winner's new tokens). Another
        // process spending them is waited for unless the store's lock already rules that out.
        let (text, stored) = self.stored(&key, &ours, !claim.across_processes()).await?;
        let Some(tokens) = stored else { return self.adopt(state, None) };
        if tokens.access_token != ours.access_token || tokens.refresh_token != ours.refresh_token {
            self.use_tokens(state, tokens.clone())?;
            if !self.refresh_due() {
                return Ok(()); // another holder of the store refreshed already
            }
        }
        let Some(refresh_token) = tokens.refresh_token.clone() else {
            return Err(McpError::Auth("no refresh token".into()));
        };
        let endpoint = Url::parse(&tokens.token_endpoint)
            .map_err(|_| McpError::Auth("the stored token endpoint is not a URL".into()))?;
        super::token::check_endpoint(&endpoint, "token endpoint")?;
        let client = self.client_for_refresh(&tokens).await.with_dpop(self.dpop_of(&tokens));
        let rotating = tokens.rotates != Some(false);
        let mut spent = tokens.clone();
        if rotating {
            spent.refresh_token = None;
            spent.refreshing_since_ms = Some(now_ms());
            let value = serde_json::to_string(&spent).expect("tokens serialize");
            // The claim across processes of a store without a lock: the write wins only over what we read.
            match self.host.store.compare_and_set(&key, text.as_deref(), &value).await? {
                Some(true) => {}
                Some(false) => {
                    let (_, theirs) = self.stored(&key, &tokens, true).await?;
                    return self.adopt(state, theirs);
                }
                None => self.keep(&spent).await?,
            }
            self.refresh_due_ms.store(0, Ordering::Release);
            state.tokens = Some(spent.clone());
        }
        let form = vec![
            ("grant_type", "refresh_token".to_owned()),
            ("refresh_token", refresh_token.clone()),
            ("resource", tokens.resource.clone()),
        ];
        let outcome = self
            .until_closed(request_token(&self.egress, &endpoint, &tokens.issuer, &client, form, self.deadline))
            .await?;
        match outcome {
            Ok(response) => {
                // The same checks as a first token: a refresh answered with a token of another kind (a
                // Bearer token replacing a bound one, a DPoP token without a proof, an unknown type) is
                // not used, and the tokens are forgotten so that a new authorization runs.
                let proved = client.dpop.is_some();
                let dpop_bound = match token_kind(&response.token_type, proved, tokens.dpop_bound) {
                    Ok(bound) => bound,
                    Err(refused) => {
                        tracing::warn!(server = %self.server, error = %refused, "the refreshed token was not used");
                        self.forget(state, &tokens).await;
                        return Err(refused);
                    }
                };
                let rotated = response.refresh_token.as_ref().is_some_and(|r| *r != refresh_token);
                tracing::info!(server = %self.server, rotated, "access token refreshed");
                let mut next = tokens.clone();
                next.expires_at_ms = expires_at(response.expires_in);
                next.scope = response.scope.clone().or(tokens.scope.clone());
                next.rotates = Some(rotated || tokens.rotates == Some(true));
                next.refresh_token = response.refresh_token.or(Some(refresh_token));
                next.access_token = response.access_token;
                next.refreshing_since_ms = None;
                next.dpop_bound = dpop_bound;
                self.install(state, next).await
            }
            Err(super::token::TokenError::Rejected { error, .. }) => {
                tracing::warn!(server = %self.server, error = %error, "the refresh token was refused");
                self.forget(state, &tokens).await;
                Err(McpError::Auth(format!("the authorization server refused the refresh token ({error})")))
            }
            Err(super::token::TokenError::Failed(e) | super::token::TokenError::TimedOut(e)) => {
                // Spent all the same; nobody is to wait for this refresh any longer.
                if rotating {
                    spent.refreshing_since_ms = None;
                    let _ = self.keep(&spent).await;
                    state.tokens = Some(spent);
                }
                Err(e)
            }
        }
    }

    /// `work`, unless the server is closed first.
    async fn until_closed<T>(&self, work: impl Future<Output = T>) -> Result<T> {
        tokio::select! {
            done = work => Ok(done),
            _ = self.cancel.cancelled() => Err(McpError::Closed),
        }
    }

    /// What the store holds under `key` (its text too, for a compare-and-set), as tokens if they are
    /// for ours' issuer and resource. With `wait`, while another holder is spending their refresh token
    /// (its mark not older than a refresh's deadline), looks again after a pause, for at most a
    /// refresh's deadline. (A mark left by a refresh cancelled midway costs at most that wait.)
    async fn stored(&self, key: &str, ours: &Tokens, wait: bool) -> Result<(Option<String>, Option<Tokens>)> {
        let deadline_ms = self.deadline.as_millis() as u64;
        let until = now_ms() + deadline_ms;
        let mut pause = Duration::from_millis(TOKEN_CLAIM_POLL_MIN_MS);
        loop {
            let text = self.host.store.get(key).await?;
            let tokens = text
                .as_deref()
                .and_then(|text| serde_json::from_str::<Tokens>(text).ok())
                .filter(|t| t.issuer == ours.issuer && t.resource == ours.resource);
            let in_flight = tokens
                .as_ref()
                .and_then(|t| t.refreshing_since_ms)
                .is_some_and(|since| now_ms() < since.saturating_add(deadline_ms));
            if !(wait && in_flight) || now_ms() + pause.as_millis() as u64 > until {
                return Ok((text, tokens));
            }
            self.until_closed(tokio::time::sleep(pause)).await?;
            pause = (pause * 2).min(Duration::from_millis(TOKEN_CLAIM_POLL_MAX_MS));
        }
    }

    /// Use the tokens another holder of the store left; none means it forgot them (a logout, a refused
    /// refresh), and ours, spent or refused there, are not to be used either.
    fn adopt(&self, state: &mut FlowState, stored: Option<Tokens>) -> Result<()> {
        match stored {
            Some(tokens) => self.use_tokens(state, tokens),
            None => {
                state.tokens = None;
                self.refresh_due_ms.store(0, Ordering::Release);
                Err(McpError::Auth("the tokens were removed from the token store by another holder of it".into()))
            }
        }
    }

    /// Forget refused tokens: ours, and the stored ones unless another holder of the store has replaced
    /// them meanwhile (those are someone else's good tokens).
    async fn forget(&self, state: &mut FlowState, tokens: &Tokens) {
        state.tokens = None;
        self.refresh_due_ms.store(0, Ordering::Release);
        let key = keys::tokens(&tokens.issuer, &tokens.resource);
        let stored =
            self.host.store.get(&key).await.ok().flatten().and_then(|s| serde_json::from_str::<Tokens>(&s).ok());
        if stored.is_some_and(|stored| stored.access_token == tokens.access_token) {
            let _ = self.host.store.delete(&key).await;
        }
    }

    /// The client a stored token was issued to, as well as it can be known without discovery.
    async fn client_for_refresh(&self, tokens: &Tokens) -> ClientCredentials {
        if self.settings.client_id.as_deref() == Some(tokens.client_id.as_str()) {
            let secret = match (&self.settings.client_secret, &self.settings.private_key) {
                (_, Some((pem, algorithm))) => ClientSecret::PrivateKey { pem: pem.clone(), algorithm: *algorithm },
                (Some(secret), None) => ClientSecret::Secret(secret.clone()),
                (None, None) => ClientSecret::None,
            };
            let method = self.settings.auth_method.unwrap_or(match secret {
                ClientSecret::PrivateKey { .. } => AuthMethod::PrivateKeyJwt,
                ClientSecret::Secret(_) => AuthMethod::ClientSecretBasic,
                ClientSecret::None => AuthMethod::None,
            });
            return ClientCredentials { client_id: tokens.client_id.clone(), secret, method, dpop: None };
        }
        registration::stored_client(self.host.store.as_ref(), &tokens.issuer, &tokens.client_id).await.unwrap_or(
            ClientCredentials {
                client_id: tokens.client_id.clone(),
                secret: ClientSecret::None,
                method: AuthMethod::None,
                dpop: None,
            },
        )
    }

    /// The scope to ask for: the challenge's, else the resource's `scopes_supported`, else none; on a
    /// step-up, added to what was asked before; never outside the configured ceiling; `offline_access`
    /// added for interactive grants when the authorization server lists it.
    fn scope_for(
        &self,
        state: &FlowState,
        challenge: &Challenge,
        discovered: &Discovered,
        step_up: bool,
    ) -> Result<Option<String>> {
        let mut scopes = challenge.scopes();
        if scopes.is_empty() {
            scopes = discovered.resource_scopes.clone().unwrap_or_default();
        }
        if step_up {
            let mut merged = split_scopes(state.requested_scope.as_deref());
            merged.extend(scopes);
            scopes = split_scopes(Some(&merged.join(" ")));
        }
        if let Some(ceiling) = &self.settings.scopes {
            let outside: Vec<&String> = scopes.iter().filter(|s| !ceiling.contains(s)).collect();
            if step_up && challenge.scopes().iter().any(|s| !ceiling.contains(s)) {
                return Err(McpError::Auth(format!(
                    "server {:?} asks for scopes outside oauth.scopes ({}): not requesting them",
                    self.server,
                    outside.iter().map(|s| s.as_str()).collect::<Vec<_>>().join(" ")
                )));
            }
            scopes.retain(|s| ceiling.contains(s));
        }
        let offline = "offline_access";
        if !scopes.is_empty()
            && self.settings.grant.is_interactive()
            && discovered.metadata.supports_scope(offline)
            && self.settings.scopes.as_ref().is_none_or(|c| c.iter().any(|s| s == offline))
            && !scopes.iter().any(|s| s == offline)
        {
            scopes.push(offline.to_owned());
        }
        Ok((!scopes.is_empty()).then(|| scopes.join(" ")))
    }

    /// Discover, pick the client, run the configured grant, and put its token in use; every request of it
    /// within the one budget, the person's time aside.
    async fn authorize(&self, state: &mut FlowState, challenge: &Challenge, step_up: bool) -> Result<()> {
        let budget = self.budget();
        let discovered = discover(&self.egress, &self.server_url, challenge, budget).await?;
        self.check_issuer_binding(&discovered.metadata.issuer).await?;
        let scope = self.scope_for(state, challenge, &discovered, step_up)?;
        let dpop = self.dpop_for(&discovered)?;
        let metadata = &discovered.metadata;
        let store = self.host.store.as_ref();
        // The client of every grant but the code flow's: no redirect URI; DPoP-bound where the server offers it.
        let client_without_redirect = async || -> Result<ClientCredentials> {
            let client =
                registration::client_for(&self.egress, metadata, &self.settings, store, None, budget.request()).await?;
            Ok(client.with_dpop(dpop.clone()))
        };
        let (client, response) = match self.settings.grant {
            Grant::AuthorizationCode => {
                let present = self.presenter(metadata)?;
                let loopback = Loopback::bind(self.settings.redirect_uri.as_ref()).await?;
                let client = registration::client_for(
                    &self.egress,
                    metadata,
                    &self.settings,
                    store,
                    Some(&loopback.redirect_uri),
                    budget.request(),
                )
                .await?
                .with_dpop(dpop.clone());
                self.remember(&client);
                let grant = super::code_flow::CodeGrant {
                    egress: &self.egress,
                    discovered: &discovered,
                    client: &client,
                    scope: scope.as_deref(),
                    login_timeout: self.host.login_timeout,
                    budget,
                };
                let server = self.server.clone();
                let response = grant
                    .run(loopback, move |url| {
                        let prompt =
                            serde_json::json!({ "url": url.as_str(), "server": server, "grant": "authorization_code" });
                        present(prompt.to_string())
                    })
                    .await?;
                (client, response)
            }
            Grant::DeviceCode => {
                let present = self.presenter(metadata)?;
                let client = client_without_redirect().await?;
                self.remember(&client);
                let server = self.server.clone();
                let response = super::device::device_flow(
                    &self.egress,
                    metadata,
                    &client,
                    scope.clone(),
                    &discovered.resource,
                    move |prompt: super::device::DevicePrompt| {
                        let prompt = serde_json::json!({
                            "url": prompt.url(),
                            "server": server,
                            "grant": "device_code",
                            "userCode": prompt.user_code,
                            "expiresAt": prompt.expires_at_ms,
                        });
                        present(prompt.to_string())
                    },
                    self.host.logins.child_token(),
                    // The whole flow has the person's time; each poll still has its own bound.
                    self.host.login_timeout,
                    budget.request(),
                )
                .await
                .map_err(McpError::from)?;
                (client, response)
            }
            Grant::ClientCredentials => {
                let client = client_without_redirect().await?;
                let response = super::client_credentials::client_credentials(
                    &self.egress,
                    metadata,
                    &client,
                    scope.clone(),
                    &discovered.resource,
                    budget.request(),
                )
                .await
                .map_err(McpError::from)?;
                (client, response)
            }
            Grant::JwtBearer => {
                let client = client_without_redirect().await?;
                let assertion = self.settings.identity_assertion.as_ref().expect("checked when parsed");
                let response = super::cross_app::cross_app_access(
                    &self.egress,
                    metadata,
                    &client,
                    assertion,
                    &discovered.resource,
                    scope.clone(),
                    budget.request(),
                )
                .await
                .map_err(McpError::from)?;
                (client, response)
            }
            Grant::WorkloadIdentity => {
                let client = client_without_redirect().await?;
                let workload = self.workload.as_ref().expect("checked when parsed");
                let secrets = self.secrets.clone();
                let assertion = workload
                    .current_within(budget.request(), |a| secrets.set_rotating("workload-assertion", a.as_bytes()))
                    .await?;
                if self.settings.authorization_server.is_none()
                    && !super::workload::audience_names(&assertion, &metadata.issuer, metadata.token_endpoint.as_str())
                {
                    return Err(McpError::Auth(format!(
                        "server {:?} names the authorization server {:?}, but the workload identity assertion's aud names \
                         neither it nor its token endpoint: not sending the assertion there. If your platform's audience \
                         is another value, set oauth.authorizationServer to the authorization server it is for",
                        self.server, metadata.issuer
                    )));
                }
                let response = super::workload::workload_identity(
                    &self.egress,
                    metadata,
                    &client,
                    assertion,
                    &discovered.resource,
                    scope.clone(),
                    budget.request(),
                )
                .await
                .map_err(McpError::from)?;
                (client, response)
            }
        };
        state.requested_scope = scope.clone();
        let tokens = self.tokens_from(response, &discovered, &client, scope)?;
        self.install(state, tokens).await
    }

    /// Configured credentials (a client secret, a private key, an identity assertion) belong to one
    /// authorization server: `oauth.authorizationServer`, or else the one this server was first authorized
    /// with. The MCP server naming another one (a move, or an attacker) must not make them travel there.
    async fn check_issuer_binding(&self, discovered: &str) -> Result<()> {
        if !self.settings.has_credentials() {
            return Ok(());
        }
        let expected = match &self.settings.authorization_server {
            Some(configured) => Some(configured.clone()),
            None => {
                let pointer = self.host.store.get(&keys::server(self.server_url.as_str())).await?;
                pointer.and_then(|p| serde_json::from_str::<ServerPointer>(&p).ok()).map(|p| p.issuer)
            }
        };
        match expected {
            Some(expected) if expected.trim_end_matches('/') != discovered.trim_end_matches('/') => Err(McpError::Auth(format!(
                "server {:?} now names the authorization server {discovered:?}, but its oauth credentials belong to {expected:?}: \
                 not sending them there. If the move is legitimate, set oauth.authorizationServer (or log out first)",
                self.server
            ))),
            _ => Ok(()),
        }
    }

    /// A registered client's secret joins the server's redaction set.
    fn remember(&self, client: &ClientCredentials) {
        if let ClientSecret::Secret(secret) = &client.secret {
            self.secrets.add(secret);
        }
    }

    /// The host's `onAuthorizationUrl`, or why this login can't happen now.
    fn presenter(
        &self,
        metadata: &super::discovery::AuthServerMetadata,
    ) -> Result<impl Fn(String) -> BoxFuture<'static, Result<()>>> {
        let Some(present) = self.host.present.clone() else {
            return Err(McpError::Auth(format!(
                "server {:?} needs a login at {} and this toolset cannot send a person there: no stored token is usable. \
                 Set options.onAuthorizationUrl (printAuthorizationUrl prints the login URL), or log in once with a tokenStore this toolset shares",
                self.server, metadata.issuer
            )));
        };
        Ok(move |prompt: String| -> BoxFuture<'static, Result<()>> {
            let call = present.call(prompt);
            Box::pin(async move {
                call.await.map(drop).map_err(|_| McpError::Auth("the onAuthorizationUrl callback failed".into()))
            })
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::auth::discovery::AuthServerMetadata;
    use crate::auth::store::MemoryTokenStore;
    use crate::auth::token::test_http::{Reply, TestServer};

    fn authorizer(settings_json: &str, store: Arc<MemoryTokenStore>) -> Authorizer {
        authorizer_at(settings_json, store, "http://127.0.0.1:9/mcp", Duration::from_secs(5))
    }

    fn authorizer_at(settings_json: &str, store: Arc<MemoryTokenStore>, url: &str, flow: Duration) -> Authorizer {
        let settings = OAuthSettings::parse("servers[0]", &serde_json::from_str(settings_json).unwrap()).unwrap();
        let host = Arc::new(AuthHost {
            store,
            present: None,
            workload_assertion: None,
            login_timeout: flow,
            flow_timeout: flow,
            logins: CancellationToken::new(),
            operations: None,
        });
        let mut authorizer = Authorizer::new(
            "s".into(),
            Url::parse(url).unwrap(),
            settings,
            host,
            &EgressPolicy::default(),
            Credential::default(),
            Arc::default(),
            CancellationToken::new(),
        )
        .unwrap();
        authorizer.deadline = Duration::from_millis(300);
        authorizer
    }

    fn discovered(as_scopes: Option<&[&str]>, resource_scopes: Option<&[&str]>) -> Discovered {
        let metadata: AuthServerMetadata = serde_json::from_value(serde_json::json!({
            "issuer": "http://127.0.0.1:8",
            "token_endpoint": "http://127.0.0.1:8/token",
            "scopes_supported": as_scopes,
        }))
        .unwrap();
        Discovered {
            resource: "http://127.0.0.1:9/mcp".into(),
            resource_scopes: resource_scopes.map(|s| s.iter().map(|s| s.to_string()).collect()),
            dpop_required: false,
            metadata,
            legacy: false,
            default_endpoints: false,
        }
    }

    fn challenge(scope: Option<&str>) -> Challenge {
        Challenge { scope: scope.map(str::to_owned), ..Challenge::default() }
    }

    #[test]
    fn scopes_come_from_the_challenge_then_the_resource_then_nowhere() {
        let a = authorizer("true", Arc::default());
        let state = FlowState::default();
        let d = discovered(None, Some(&["r1", "r2"]));
        assert_eq!(a.scope_for(&state, &challenge(Some("c1")), &d, false).unwrap().as_deref(), Some("c1"));
        assert_eq!(a.scope_for(&state, &challenge(None), &d, false).unwrap().as_deref(), Some("r1 r2"));
        assert_eq!(a.scope_for(&state, &challenge(None), &discovered(None, None), false).unwrap(), None);
        // offline_access only where the authorization server lists it, and never alone.
        let offline = discovered(Some(&["r1", "offline_access"]), Some(&["r1"]));
        assert_eq!(
            a.scope_for(&state, &challenge(None), &offline, false).unwrap().as_deref(),
            Some("r1 offline_access")
        );
        let none = discovered(Some(&["offline_access"]), None);
        assert_eq!(a.scope_for(&state, &challenge(None), &none, false).unwrap(), None);
    }

    #[test]
    fn a_step_up_adds_to_what_was_asked_within_the_ceiling() {
        let a = authorizer(r#"{"scopes":["read","write"]}"#, Arc::default());
        let state = FlowState { requested_scope: Some("read".into()), ..FlowState::default() };
        let d = discovered(None, None);
        assert_eq!(
            a.scope_for(&state, &challenge(Some("read write")), &d, true).unwrap().as_deref(),
            Some("read write")
        );
        // The ceiling filters a first request and refuses a step-up beyond it.
        assert_eq!(a.scope_for(&state, &challenge(Some("read admin")), &d, false).unwrap().as_deref(), Some("read"));
        let refused = a.scope_for(&state, &challenge(Some("admin")), &d, true).unwrap_err().to_string();
        assert!(refused.contains("outside oauth.scopes"), "{refused}");
    }

    fn tokens(endpoint: &Url, rotates: Option<bool>) -> Tokens {
        Tokens {
            issuer: "http://127.0.0.1:8".into(),
            resource: "http://127.0.0.1:9/mcp".into(),
            client_id: "c".into(),
            token_endpoint: endpoint.to_string(),
            revocation_endpoint: None,
            access_token: "access-1".into(),
            refresh_token: Some("refresh-1".into()),
            expires_at_ms: Some(1),
            scope: None,
            rotates,
            refreshing_since_ms: None,
            dpop_key: None,
            dpop_bound: false,
        }
    }

    #[tokio::test]
    async fn a_rotating_refresh_whose_answer_was_lost_is_never_sent_again() {
        let server = TestServer::start(|_, _| Reply::hang()).await;
        let store = Arc::new(MemoryTokenStore::new());
        let a = authorizer("true", store.clone());
        let mut state = FlowState::default();
        a.install(&mut state, tokens(&server.url("/token"), None)).await.unwrap();
        assert!(a.refresh(&mut state).await.is_err());
        assert!(a.refresh(&mut state).await.is_err());
        assert_eq!(server.received().len(), 1, "the refresh token went out once");
        let kept = store.get(&keys::tokens("http://127.0.0.1:8", "http://127.0.0.1:9/mcp")).await.unwrap().unwrap();
        assert!(!kept.contains("refresh-1"), "the spent refresh token is forgotten");
    }

    #[tokio::test]
    async fn a_refresh_is_replayed_only_where_tokens_are_known_not_to_rotate() {
        let server = TestServer::start(|_, _| Reply::hang()).await;
        let a = authorizer("true", Arc::default());
        let mut state = FlowState::default();
        a.install(&mut state, tokens(&server.url("/token"), Some(false))).await.unwrap();
        assert!(a.refresh(&mut state).await.is_err());
        assert!(a.refresh(&mut state).await.is_err());
        assert_eq!(server.received().len(), 2);
    }

    #[tokio::test]
    async fn a_refresh_rotates_and_the_new_token_is_in_use() {
        let server = TestServer::start(|request, _| {
            assert_eq!(request.field("grant_type").as_deref(), Some("refresh_token"));
            assert_eq!(request.field("resource").as_deref(), Some("http://127.0.0.1:9/mcp"));
            Reply::json(200, serde_json::json!({"access_token":"access-2","token_type":"Bearer","expires_in":3600,"refresh_token":"refresh-2"}))
        })
        .await;
        let store = Arc::new(MemoryTokenStore::new());
        let a = authorizer("true", store.clone());
        let mut state = FlowState::default();
        a.install(&mut state, tokens(&server.url("/token"), None)).await.unwrap();
        let before = a.generation();
        a.refresh(&mut state).await.unwrap();
        assert!(a.generation() > before);
        assert_eq!(a.credential.authorization().unwrap().to_str().unwrap(), "Bearer access-2");
        let kept = store.get(&keys::tokens("http://127.0.0.1:8", "http://127.0.0.1:9/mcp")).await.unwrap().unwrap();
        assert!(kept.contains("refresh-2") && !kept.contains("refresh-1"));
        assert!(!a.refresh_due(), "the new token is not due");
    }

    #[tokio::test]
    async fn a_refresh_answered_with_a_token_of_another_kind_is_not_used() {
        // (answer's token_type, whether the tokens refreshed were DPoP-bound (with their key)). A type
        // neither Bearer nor DPoP is refused when the answer is read (token.rs).
        for (token_type, bound) in [("DPoP", false), ("Bearer", true)] {
            let server = TestServer::start(move |_, _| {
                Reply::json(200, serde_json::json!({"access_token":"access-2","token_type":token_type,"expires_in":3600,"refresh_token":"refresh-2"}))
            })
            .await;
            let store = Arc::new(MemoryTokenStore::new());
            let a = authorizer("true", store.clone());
            let mut state = FlowState::default();
            let mut ours = tokens(&server.url("/token"), None);
            if bound {
                ours.dpop_key = Some(DpopKey::generate().unwrap().stored());
                ours.dpop_bound = true;
            }
            a.install(&mut state, ours).await.unwrap();
            let error = a.refresh(&mut state).await.unwrap_err().to_string();
            assert_eq!(server.received().len(), 1);
            assert!(state.tokens.is_none(), "{token_type}: forgotten, so that a new authorization runs");
            assert!(!error.contains("access-2"), "{error}");
            let kept = store.get(&keys::tokens("http://127.0.0.1:8", "http://127.0.0.1:9/mcp")).await.unwrap();
            assert!(kept.is_none_or(|k| !k.contains("access-2")), "{token_type}: not kept");
        }
        // A bound token's refresh answered with a DPoP token stays bound.
        let server = TestServer::start(|_, _| {
            Reply::json(200, serde_json::json!({"access_token":"access-2","token_type":"DPoP","expires_in":3600}))
        })
        .await;
        let a = authorizer("true", Arc::default());
        let mut state = FlowState::default();
        let mut ours = tokens(&server.url("/token"), Some(false));
        ours.dpop_key = Some(DpopKey::generate().unwrap().stored());
        ours.dpop_bound = true;
        a.install(&mut state, ours).await.unwrap();
        a.refresh(&mut state).await.unwrap();
        assert!(state.tokens.as_ref().unwrap().dpop_bound);
        assert_eq!(a.credential.authorization().unwrap().to_str().unwrap(), "DPoP access-2");
    }

    #[tokio::test]
    async fn a_bound_token_whose_key_cannot_be_read_is_dropped_not_presented_as_bearer() {
        let store = Arc::new(MemoryTokenStore::new());
        let a = authorizer("true", store.clone());
        let mut ours = tokens(&Url::parse("http://127.0.0.1:8/token").unwrap(), None);
        ours.dpop_key = Some("bm90LWEta2V5".into());
        ours.dpop_bound = true;
        a.keep(&ours).await.unwrap();
        let mut state = FlowState::default();
        a.load(&mut state).await;
        assert!(a.credential.authorization().is_none(), "not presented, as Bearer or otherwise");
        assert!(state.tokens.is_none() && !a.refresh_due());
        let kept = store.get(&keys::tokens("http://127.0.0.1:8", "http://127.0.0.1:9/mcp")).await.unwrap();
        assert!(kept.is_none(), "dropped from the store: the next refusal authorizes again");
        // Tokens in use replaced by such tokens (another holder's) are not presented either.
        let b = authorizer("true", Arc::default());
        let mut state = FlowState::default();
        b.use_tokens(&mut state, tokens(&Url::parse("http://127.0.0.1:8/token").unwrap(), None)).unwrap();
        assert!(b.use_tokens(&mut state, ours).is_err());
        assert!(b.credential.authorization().is_none());
    }

    #[tokio::test]
    async fn a_workloads_renewal_before_a_request_ends_when_the_host_ends_logins() {
        let server = TestServer::start(|_, _| Reply::hang()).await; // discovery never answers
        let mut a = authorizer_at(
            r#"{"grant":"workload_identity","assertion":{"$mcpferry":"function"}}"#,
            Arc::default(),
            server.url("/mcp").as_str(),
            Duration::from_secs(60),
        );
        a.deadline = Duration::from_secs(60);
        let mut due = tokens(&server.url("/token"), None);
        due.refresh_token = None; // a workload's token: renewed by the grant itself
        a.use_tokens(&mut a.lock().await.unwrap(), due).unwrap();
        a.loaded.store(true, Ordering::Release);
        assert!(a.refresh_due());
        let logins = a.host.logins.clone();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(200)).await;
            logins.cancel();
        });
        let ended = tokio::time::timeout(Duration::from_secs(10), a.before_request()).await;
        assert!(matches!(ended, Ok(Err(McpError::Aborted))), "{:?}", ended.map(|r| r.err()));
    }

    #[test]
    fn every_proof_sent_is_redacted_however_many_requests_are_in_flight() {
        let a = authorizer("true", Arc::default());
        let mut bound = tokens(&Url::parse("http://127.0.0.1:8/token").unwrap(), None);
        bound.dpop_key = Some(DpopKey::generate().unwrap().stored());
        bound.dpop_bound = true;
        a.use_tokens(&mut FlowState::default(), bound).unwrap();
        let presented = a.credential.current().unwrap();
        let proof = presented.proof.unwrap();
        let url = Url::parse("http://127.0.0.1:9/mcp").unwrap();
        // Five requests in flight: each proof made before any answer (an error body echoing it) is read.
        let sent: Vec<String> = (0..5)
            .map(|_| proof.header(&reqwest::Method::POST, &url).unwrap().1.to_str().unwrap().to_owned())
            .collect();
        for (i, one) in sent.iter().enumerate() {
            let shown = a.secrets.redact(&format!("HTTP 400: bad proof {one} (request {i})"));
            assert!(!shown.contains(one.split('.').nth(1).unwrap()), "proof {i} showed: {shown}");
            assert!(shown.contains("[redacted]"), "{shown}");
        }
    }

    #[test]
    fn a_new_authorization_server_gets_a_new_dpop_key() {
        let a = authorizer("true", Arc::default());
        let offering = |issuer: &str| {
            let mut d = discovered(None, None);
            d.metadata.issuer = issuer.into();
            d.metadata.dpop_signing_alg_values_supported = Some(vec!["ES256".into()]);
            d
        };
        let thumbprint = |d: &Discovered| a.dpop_for(d).unwrap().unwrap().key.thumbprint();
        let first = thumbprint(&offering("https://as-one.example"));
        assert_eq!(thumbprint(&offering("https://as-one.example/")), first, "the same server keeps its key");
        let second = thumbprint(&offering("https://as-two.example"));
        assert_ne!(second, first, "another authorization server never sees the first key");
        assert_eq!(thumbprint(&offering("https://as-two.example")), second);
        // A stored key is tied to its tokens' issuer likewise.
        let mut stored = tokens(&Url::parse("http://127.0.0.1:8/token").unwrap(), None);
        let key = DpopKey::generate().unwrap();
        stored.dpop_key = Some(key.stored());
        assert_eq!(a.dpop_of(&stored).unwrap().key.thumbprint(), key.thumbprint());
        assert_eq!(thumbprint(&offering("http://127.0.0.1:8")), key.thumbprint());
        assert_ne!(thumbprint(&offering("https://as-two.example")), key.thumbprint());
        // Tokens of the first server in use again bring back their own key.
        assert_eq!(a.dpop_of(&stored).unwrap().key.thumbprint(), key.thumbprint());
    }

    #[tokio::test]
    async fn a_rejected_refresh_forgets_the_tokens() {
        let server = TestServer::start(|_, _| Reply::json(400, serde_json::json!({"error":"invalid_grant"}))).await;
        let store = Arc::new(MemoryTokenStore::new());
        let a = authorizer("true", store.clone());
        let mut state = FlowState::default();
        a.install(&mut state, tokens(&server.url("/token"), None)).await.unwrap();
        let error = a.refresh(&mut state).await.unwrap_err();
        assert_eq!(error.code(), "mcp_auth_error");
        assert!(state.tokens.is_none());
        assert!(store.get(&keys::tokens("http://127.0.0.1:8", "http://127.0.0.1:9/mcp")).await.unwrap().is_none());
    }

    #[tokio::test]
    async fn configured_credentials_never_travel_to_another_authorization_server() {
        let pinned = authorizer(
            r#"{"clientId":"c","clientSecret":"sekrit-x","authorizationServer":"http://127.0.0.1:8"}"#,
            Arc::default(),
        );
        assert!(pinned.check_issuer_binding("http://127.0.0.1:8/").await.is_ok());
        let refused = pinned.check_issuer_binding("https://evil.example").await.unwrap_err().to_string();
        assert!(refused.contains("not sending them there") && !refused.contains("sekrit"), "{refused}");
        // Without the setting, the first authorization server this server used is the one.
        let store = Arc::new(MemoryTokenStore::new());
        let first_seen = authorizer(r#"{"clientId":"c","clientSecret":"s"}"#, store.clone());
        assert!(first_seen.check_issuer_binding("https://evil.example").await.is_ok(), "nothing seen yet");
        first_seen.keep(&tokens(&Url::parse("http://127.0.0.1:8/token").unwrap(), None)).await.unwrap();
        assert!(first_seen.check_issuer_binding("https://evil.example").await.is_err());
        // A workload's assertion is a credential too.
        let workload = authorizer(
            r#"{"grant":"workload_identity","assertion":{"$mcpferry":"function"},"authorizationServer":"http://127.0.0.1:8"}"#,
            Arc::default(),
        );
        assert!(workload.check_issuer_binding("https://evil.example").await.is_err());
        // A dynamically registered client has no credentials of its own to protect.
        assert!(authorizer("true", store).check_issuer_binding("https://evil.example").await.is_ok());
    }

    #[tokio::test]
    async fn a_refresh_another_holder_of_the_store_made_is_adopted_not_repeated() {
        let server = TestServer::start(|_, _| {
            Reply::json(200, serde_json::json!({"access_token":"access-2","token_type":"Bearer","expires_in":3600,"refresh_token":"refresh-2"}))
        })
        .await;
        let store = Arc::new(MemoryTokenStore::new());
        let (first, second) = (authorizer("true", store.clone()), authorizer("true", store));
        let (mut a, mut b) = (FlowState::default(), FlowState::default());
        first.install(&mut a, tokens(&server.url("/token"), None)).await.unwrap();
        second.load(&mut b).await;
        first.refresh(&mut a).await.unwrap();
        second.refresh(&mut b).await.unwrap();
        assert_eq!(server.received().len(), 1, "the spent refresh token was not presented again");
        assert_eq!(second.credential.authorization().unwrap().to_str().unwrap(), "Bearer access-2");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn holders_of_one_store_refreshing_at_once_present_the_refresh_token_once_and_all_use_the_winners() {
        let server = TestServer::start(|_, _| {
            Reply::json(200, serde_json::json!({"access_token":"access-2","token_type":"Bearer","expires_in":3600,"refresh_token":"refresh-2"}))
        })
        .await;
        let store = Arc::new(MemoryTokenStore::new());
        authorizer("true", store.clone())
            .install(&mut FlowState::default(), tokens(&server.url("/token"), None))
            .await
            .unwrap();
        // Each holds the stored tokens (already due) and refreshes them before its request, all at once.
        let holder = || {
            let mut holder = authorizer("true", store.clone());
            holder.deadline = Duration::from_secs(20); // a loaded machine: the winner's refresh must not time out
            Arc::new(holder)
        };
        let holders: Vec<Arc<Authorizer>> = (0..8).map(|_| holder()).collect();
        for holder in &holders {
            holder.load(&mut holder.lock().await.unwrap()).await; // all hold the same (due) tokens first
            holder.loaded.store(true, Ordering::Release);
        }
        let requests: Vec<_> =
            holders.iter().cloned().map(|a| tokio::spawn(async move { a.before_request().await })).collect();
        for request in requests {
            request.await.unwrap().unwrap();
        }
        assert_eq!(server.received().len(), 1, "refresh-1 was presented once");
        for holder in &holders {
            assert_eq!(holder.credential.authorization().unwrap().to_str().unwrap(), "Bearer access-2");
        }
    }

    #[tokio::test]
    async fn a_refresh_token_another_holder_forgot_is_not_spent() {
        let server = TestServer::start(|_, _| Reply::hang()).await;
        let store = Arc::new(MemoryTokenStore::new());
        let a = authorizer("true", store.clone());
        let mut state = FlowState::default();
        a.install(&mut state, tokens(&server.url("/token"), None)).await.unwrap();
        store.delete(&keys::tokens("http://127.0.0.1:8", "http://127.0.0.1:9/mcp")).await.unwrap(); // a logout elsewhere
        assert!(a.refresh(&mut state).await.is_err());
        assert!(server.received().is_empty() && state.tokens.is_none());
    }

    #[tokio::test]
    async fn without_a_way_to_a_person_the_login_is_refused_with_how_to_log_in() {
        let a = authorizer("true", Arc::default());
        let Err(error) = a.presenter(&discovered(None, None).metadata) else {
            panic!("a presenter without onAuthorizationUrl")
        };
        assert!(error.to_string().contains("onAuthorizationUrl"), "{error}");
    }
}
