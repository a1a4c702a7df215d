//! Cross-app access (MCP SEP-990, Enterprise-Managed Authorization; the IETF identity assertion
//! authorization grant): the person's ID token from the enterprise identity provider becomes an MCP
//! access token without a browser.
//!
//! 1. RFC 8693 token exchange at the IdP's token endpoint: the ID token (`subject_token`) for an
//!    Identity Assertion JWT Authorization Grant (ID-JAG) addressed to the authorization server
//!    (`audience` = its issuer) for the MCP server (`resource`).
//! 2. RFC 7523 JWT bearer grant at the authorization server: the ID-JAG as `assertion`, with the MCP
//!    client's own authentication.

use crate::auth::discovery::AuthServerMetadata;
use crate::auth::token::{
    check_grant_supported, remaining, request_token, AuthMethod, ClientCredentials, ClientSecret, TokenError,
    TokenResponse,
};
use crate::egress::{display_url, Egress};
use crate::error::McpError;
use crate::guard::redact::REDACTED;
use std::fmt;
use std::time::{Duration, Instant};
use url::Url;

pub const TOKEN_EXCHANGE_GRANT: &str = "urn:ietf:params:oauth:grant-type:token-exchange";
pub const JWT_BEARER_GRANT: &str = "urn:ietf:params:oauth:grant-type:jwt-bearer";
pub const ID_JAG_TOKEN_TYPE: &str = "urn:ietf:params:oauth:token-type:id-jag";
pub const ID_TOKEN_TYPE: &str = "urn:ietf:params:oauth:token-type:id_token";

/// The host's side of the exchange (`oauth.identityAssertion`). Debug redacts the ID token and secret.
#[derive(Clone)]
pub struct IdentityAssertion {
    /// The IdP's token endpoint.
    pub token_endpoint: Url,
    /// The person's OpenID Connect ID token.
    pub id_token: String,
    /// The MCP client's registration at the IdP, if it needs one.
    pub client_id: Option<String>,
    pub client_secret: Option<String>,
}

impl fmt::Debug for IdentityAssertion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("IdentityAssertion")
            .field("token_endpoint", &display_url(&self.token_endpoint))
            .field("id_token", &REDACTED)
            .field("client_id", &self.client_id)
            .field("client_secret", &self.client_secret.as_ref().map(|_| REDACTED))
            .finish()
    }
}

impl IdentityAssertion {
    /// How the client authenticates at the IdP: Basic with an id and secret, the id alone in the body
    /// without a secret, nothing without an id.
    fn idp_client(&self) -> ClientCredentials {
        match (&self.client_id, &self.client_secret) {
            (Some(id), Some(secret)) => ClientCredentials {
                client_id: id.clone(),
                secret: ClientSecret::Secret(secret.clone()),
                method: AuthMethod::ClientSecretBasic,
                dpop: None,
            },
            (id, _) => ClientCredentials {
                client_id: id.clone().unwrap_or_default(),
                secret: ClientSecret::None,
                method: AuthMethod::None,
                dpop: None,
            },
        }
    }
}

/// Exchange the ID token for an ID-JAG at the IdP, then the ID-JAG for an access token at the
/// authorization server. `deadline` bounds both requests together. A refusal by the IdP is
/// `Failed(mcp_auth_error)` naming the IdP; a refusal by the authorization server is `Rejected`.
pub async fn cross_app_access(
    egress: &Egress,
    metadata: &AuthServerMetadata,
    client: &ClientCredentials,
    assertion: &IdentityAssertion,
    resource: &str,
    scope: Option<String>,
    deadline: Duration,
) -> std::result::Result<TokenResponse, TokenError> {
    check_grant_supported(metadata.grant_types_supported.as_ref(), JWT_BEARER_GRANT)?;
    let until = Instant::now() + deadline;
    let id_jag = exchange_id_token(egress, metadata, assertion, resource, scope, remaining(until)).await?;
    let form = vec![("grant_type", JWT_BEARER_GRANT.to_owned()), ("assertion", id_jag)];
    request_token(egress, &metadata.token_endpoint, &metadata.issuer, client, form, remaining(until)).await
}

/// Step 1: the RFC 8693 token exchange at the IdP. Returns the ID-JAG.
async fn exchange_id_token(
    egress: &Egress,
    metadata: &AuthServerMetadata,
    assertion: &IdentityAssertion,
    resource: &str,
    scope: Option<String>,
    deadline: Duration,
) -> std::result::Result<String, TokenError> {
    let mut form = vec![
        ("grant_type", TOKEN_EXCHANGE_GRANT.to_owned()),
        ("requested_token_type", ID_JAG_TOKEN_TYPE.to_owned()),
        ("audience", metadata.issuer.clone()),
        ("resource", resource.to_owned()),
        ("subject_token", assertion.id_token.clone()),
        ("subject_token_type", ID_TOKEN_TYPE.to_owned()),
    ];
    if let Some(scope) = scope.filter(|s| !s.is_empty()) {
        form.push(("scope", scope));
    }
    let idp = display_url(&assertion.token_endpoint);
    let issued =
        request_token(egress, &assertion.token_endpoint, idp.as_str(), &assertion.idp_client(), form, deadline)
            .await
            .map_err(|e| match e {
            TokenError::Rejected { .. } => TokenError::Failed(McpError::Auth(format!(
                "the identity provider ({idp}) refused the token exchange: {e}"
            ))),
            failed => failed,
        })?;
    if issued.issued_token_type.as_deref() != Some(ID_JAG_TOKEN_TYPE) {
        return Err(TokenError::Failed(McpError::Auth(format!(
            "the identity provider ({idp}) answered the token exchange without an ID-JAG (issued_token_type is not {ID_JAG_TOKEN_TYPE})"
        ))));
    }
    Ok(issued.access_token)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::auth::client_credentials::tests::metadata;
    use crate::auth::token::test_http::{Recorded, Reply, TestServer};
    use crate::egress::EgressPolicy;
    use base64::Engine;
    use serde_json::json;

    const DEADLINE: Duration = Duration::from_secs(5);
    const RESOURCE: &str = "http://localhost:9/mcp";
    const ID_TOKEN: &str = "eyJ-id-token.payload-of-the-person.sig";
    const ID_JAG: &str = "eyJ-id-jag.payload-for-the-as.sig";

    fn egress() -> Egress {
        Egress::new(&EgressPolicy::default()).unwrap()
    }

    fn mcp_client() -> ClientCredentials {
        ClientCredentials {
            client_id: "conformance-test-xaa-client".into(),
            secret: ClientSecret::Secret("conformance-test-xaa-secret".into()),
            method: AuthMethod::ClientSecretBasic,
            dpop: None,
        }
    }

    fn issued_jag() -> Reply {
        Reply::json(200, json!({"access_token": ID_JAG, "issued_token_type": ID_JAG_TOKEN_TYPE, "token_type": "N_A"}))
    }

    fn basic_of(request: &Recorded) -> Option<String> {
        let basic = request.header("authorization")?.strip_prefix("Basic ")?;
        Some(String::from_utf8(base64::engine::general_purpose::STANDARD.decode(basic).unwrap()).unwrap())
    }

    #[tokio::test]
    async fn the_id_token_becomes_an_id_jag_and_the_id_jag_an_access_token() {
        let idp = TestServer::start(|_, _| issued_jag()).await;
        let auth_server =
            TestServer::start(|_, _| Reply::json(200, json!({"access_token": "xaa-token", "token_type": "Bearer"})))
                .await;
        let meta = metadata(&auth_server.base, &[JWT_BEARER_GRANT]);
        let assertion = IdentityAssertion {
            token_endpoint: idp.url("/token"),
            id_token: ID_TOKEN.into(),
            client_id: Some("conformance-test-idp-client".into()),
            client_secret: None,
        };
        let token =
            cross_app_access(&egress(), &meta, &mcp_client(), &assertion, RESOURCE, Some("mcp:tools".into()), DEADLINE)
                .await
                .unwrap();
        assert_eq!(token.access_token, "xaa-token");

        let exchange = &idp.received()[0];
        assert_eq!(exchange.path, "/token");
        assert_eq!(exchange.field("grant_type").as_deref(), Some(TOKEN_EXCHANGE_GRANT));
        assert_eq!(exchange.field("requested_token_type").as_deref(), Some(ID_JAG_TOKEN_TYPE));
        assert_eq!(exchange.field("audience").as_deref(), Some(meta.issuer.as_str()));
        assert_eq!(exchange.field("resource").as_deref(), Some(RESOURCE));
        assert_eq!(exchange.field("subject_token").as_deref(), Some(ID_TOKEN));
        assert_eq!(exchange.field("subject_token_type").as_deref(), Some(ID_TOKEN_TYPE));
        assert_eq!(exchange.field("scope").as_deref(), Some("mcp:tools"));
        assert_eq!(exchange.field("client_id").as_deref(), Some("conformance-test-idp-client"));
        assert_eq!(exchange.header("authorization"), None, "no IdP secret, no Basic header");

        let grant = &auth_server.received()[0];
        assert_eq!(grant.field_names(), ["assertion", "grant_type"]);
        assert_eq!(grant.field("grant_type").as_deref(), Some(JWT_BEARER_GRANT));
        assert_eq!(grant.field("assertion").as_deref(), Some(ID_JAG));
        assert_eq!(basic_of(grant).as_deref(), Some("conformance-test-xaa-client:conformance-test-xaa-secret"));
    }

    #[tokio::test]
    async fn an_idp_client_with_a_secret_authenticates_with_basic() {
        let idp = TestServer::start(|_, _| issued_jag()).await;
        let auth_server =
            TestServer::start(|_, _| Reply::json(200, json!({"access_token": "xaa-token", "token_type": "Bearer"})))
                .await;
        let assertion = IdentityAssertion {
            token_endpoint: idp.url("/token"),
            id_token: ID_TOKEN.into(),
            client_id: Some("idp-client".into()),
            client_secret: Some("idp-secret".into()),
        };
        let meta = metadata(&auth_server.base, &[JWT_BEARER_GRANT]);
        cross_app_access(&egress(), &meta, &mcp_client(), &assertion, RESOURCE, None, DEADLINE).await.unwrap();
        let exchange = &idp.received()[0];
        assert_eq!(basic_of(exchange).as_deref(), Some("idp-client:idp-secret"));
        assert_eq!(exchange.field("client_id"), None);
        assert_eq!(exchange.field("scope"), None);
    }

    #[tokio::test]
    async fn refusals_name_who_refused_and_never_show_the_tokens() {
        let echo = |request: &Recorded, _| {
            Reply::json(400, json!({"error": "invalid_grant", "error_description": request.body.clone()}))
        };
        let idp = TestServer::start(echo).await;
        let auth_server = TestServer::start(echo).await;
        let meta = metadata(&auth_server.base, &[JWT_BEARER_GRANT]);
        let assertion = IdentityAssertion {
            token_endpoint: idp.url("/token"),
            id_token: ID_TOKEN.into(),
            client_id: None,
            client_secret: None,
        };
        let error =
            cross_app_access(&egress(), &meta, &mcp_client(), &assertion, RESOURCE, None, DEADLINE).await.unwrap_err();
        let text = error.to_string();
        assert!(
            matches!(&error, TokenError::Failed(McpError::Auth(_))) && text.contains("identity provider"),
            "{text}"
        );
        assert!(!text.contains("payload-of-the-person"), "{text}");
        assert!(auth_server.received().is_empty());
        assert_eq!(idp.received()[0].field("client_id"), None, "no IdP client, no client_id");

        let good_idp = TestServer::start(|_, _| issued_jag()).await;
        let assertion = IdentityAssertion { token_endpoint: good_idp.url("/token"), ..assertion };
        let error =
            cross_app_access(&egress(), &meta, &mcp_client(), &assertion, RESOURCE, None, DEADLINE).await.unwrap_err();
        assert_eq!(error.error_code(), Some("invalid_grant"), "the AS's refusal stays a rejection");
        assert!(!error.to_string().contains("payload-for-the-as"), "{error}");
        let shown = format!("{assertion:?}");
        assert!(!shown.contains("payload-of-the-person"), "{shown}");
    }

    #[tokio::test]
    async fn an_exchange_answer_that_is_not_an_id_jag_is_refused() {
        let idp =
            TestServer::start(|_, _| Reply::json(200, json!({"access_token": "plain-access", "token_type": "Bearer"})))
                .await;
        let auth_server =
            TestServer::start(|_, _| Reply::json(200, json!({"access_token": "x", "token_type": "Bearer"}))).await;
        let meta = metadata(&auth_server.base, &[JWT_BEARER_GRANT]);
        let assertion = IdentityAssertion {
            token_endpoint: idp.url("/token"),
            id_token: ID_TOKEN.into(),
            client_id: None,
            client_secret: None,
        };
        let error =
            cross_app_access(&egress(), &meta, &mcp_client(), &assertion, RESOURCE, None, DEADLINE).await.unwrap_err();
        assert!(error.to_string().contains("without an ID-JAG"), "{error}");
        assert!(auth_server.received().is_empty());
    }
}
