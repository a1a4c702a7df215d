//! The authorization code grant with PKCE (OAuth 2.1 §4.1, RFC 7636), RFC 8707 `resource` in both
//! requests, and RFC 9207 `iss` checked on the way back.

use super::budget::LoginBudget;
use super::discovery::Discovered;
use super::loopback::Loopback;
use super::pkce::{self, Pkce};
use super::token::{request_token, ClientCredentials, TokenResponse};
use crate::error::{McpError, Result};
use futures_util::future::BoxFuture;
use std::time::Duration;

/// Everything one run of the grant needs.
pub struct CodeGrant<'a> {
    pub egress: &'a crate::egress::Egress,
    pub discovered: &'a Discovered,
    pub client: &'a ClientCredentials,
    pub scope: Option<&'a str>,
    /// How long the person has.
    pub login_timeout: Duration,
    /// The login's automated part: what is left of it goes to the code exchange, the person's time aside.
    pub budget: LoginBudget,
}

impl CodeGrant<'_> {
    /// Send the person to the authorization URL (through `present`), take the redirect on `loopback`,
    /// and exchange the code.
    pub async fn run(
        &self,
        loopback: Loopback,
        present: impl FnOnce(url::Url) -> BoxFuture<'static, Result<()>>,
    ) -> Result<TokenResponse> {
        let metadata = &self.discovered.metadata;
        let s256 = metadata.code_challenge_methods_supported.as_ref().is_some_and(|m| m.iter().any(|m| m == "S256"));
        // Without any metadata (2025-03-26 default endpoints) there is nothing to read support from, and
        // that revision required PKCE of every server.
        if !s256 && !self.discovered.default_endpoints {
            return Err(McpError::Auth(format!(
                "the authorization server {} does not support PKCE with S256: refusing to authorize without it",
                metadata.issuer
            )));
        }
        let Some(endpoint) = &metadata.authorization_endpoint else {
            return Err(McpError::Auth(format!(
                "the authorization server {} has no authorization endpoint",
                metadata.issuer
            )));
        };
        let pkce = Pkce::new();
        let state = pkce::state();
        let redirect_uri = loopback.redirect_uri.to_string();
        let mut url = endpoint.clone();
        {
            let mut query = url.query_pairs_mut();
            query
                .append_pair("response_type", "code")
                .append_pair("client_id", &self.client.client_id)
                .append_pair("redirect_uri", &redirect_uri)
                .append_pair("code_challenge", &pkce.challenge)
                .append_pair("code_challenge_method", "S256")
                .append_pair("state", &state)
                .append_pair("resource", &self.discovered.resource);
            if let Some(scope) = self.scope {
                query.append_pair("scope", scope);
            }
        }
        // The listener serves while the host presents the URL: a host that drives the login itself (a
        // headless test, a CLI that follows the redirect) resolves only once the redirect was answered.
        let person = std::time::Instant::now();
        let waiting = loopback.wait(&state);
        let presenting = present(url);
        let login = async {
            tokio::pin!(waiting);
            tokio::select! {
                presented = presenting => {
                    presented?;
                    (&mut waiting).await
                }
                redirect = &mut waiting => redirect,
            }
        };
        let redirect = tokio::time::timeout(self.login_timeout, login).await.map_err(|_| {
            McpError::Auth(format!("no login was completed within {} ms", self.login_timeout.as_millis()))
        })??;
        let budget = self.budget.after_person(person.elapsed());
        let param = |name: &str| redirect.params.get(name).map(String::as_str);
        if let Some(error) = param("error") {
            return Err(McpError::Auth(format!(
                "the authorization server refused the login: {}",
                crate::guard::redact::quote_bytes(error.as_bytes(), &Default::default())
            )));
        }
        // RFC 9207: required when advertised; compared whenever present (a mix-up defence).
        match param("iss") {
            Some(iss) if iss != metadata.issuer => {
                return Err(McpError::Auth(format!(
                    "the login response names issuer {:?}, not {:?}: refusing it",
                    crate::guard::redact::quote_bytes(iss.as_bytes(), &Default::default()),
                    metadata.issuer
                )))
            }
            None if metadata.authorization_response_iss_parameter_supported => {
                return Err(McpError::Auth(
                    "the login response lacks the iss parameter its authorization server promises: refusing it".into(),
                ))
            }
            _ => {}
        }
        let Some(code) = param("code").filter(|c| !c.is_empty()) else {
            return Err(McpError::Auth("the login response carries no authorization code".into()));
        };
        let form = vec![
            ("grant_type", "authorization_code".to_owned()),
            ("code", code.to_owned()),
            ("redirect_uri", redirect_uri),
            ("code_verifier", pkce.verifier.clone()),
            ("resource", self.discovered.resource.clone()),
        ];
        request_token(self.egress, &metadata.token_endpoint, &metadata.issuer, self.client, form, budget.request())
            .await
            .map_err(McpError::from)
    }
}
