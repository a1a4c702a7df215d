//! The client credentials grant (RFC 6749 §4.4; MCP SEP-1046): a machine client, no person. The
//! client authenticates with a secret (`client_secret_basic`/`_post`) or a signed assertion
//! (`private_key_jwt`); the token is bound to the MCP server by RFC 8707 `resource`.

use crate::auth::discovery::AuthServerMetadata;
use crate::auth::token::{
    check_grant_supported, request_token, AuthMethod, ClientCredentials, TokenError, TokenResponse,
};
use crate::egress::Egress;
use crate::error::McpError;
use std::time::Duration;

pub const CLIENT_CREDENTIALS_GRANT: &str = "client_credentials";

/// Get a token for `resource` with the client's own credentials. `scope` is sent when given and not
/// empty. A public client (`none`) cannot use this grant: that is a configuration error, and nothing is sent.
pub async fn client_credentials(
    egress: &Egress,
    metadata: &AuthServerMetadata,
    client: &ClientCredentials,
    scope: Option<String>,
    resource: &str,
    deadline: Duration,
) -> std::result::Result<TokenResponse, TokenError> {
    if client.method == AuthMethod::None {
        return Err(McpError::config(
            "oauth: the client_credentials grant needs a confidential client (oauth.clientSecret or oauth.privateKey)",
        )
        .into());
    }
    check_grant_supported(metadata.grant_types_supported.as_ref(), CLIENT_CREDENTIALS_GRANT)?;
    let mut form = vec![("grant_type", CLIENT_CREDENTIALS_GRANT.to_owned()), ("resource", resource.to_owned())];
    if let Some(scope) = scope.filter(|s| !s.is_empty()) {
        form.push(("scope", scope));
    }
    request_token(egress, &metadata.token_endpoint, &metadata.issuer, client, form, deadline).await
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::auth::jwt::tests::{fresh_p256_pem, verify};
    use crate::auth::jwt::SigningKey;
    use crate::auth::token::test_http::{Reply, TestServer};
    use crate::auth::token::{ClientSecret, SigningAlgorithm, JWT_CLIENT_ASSERTION_TYPE};
    use crate::egress::EgressPolicy;
    use base64::Engine;
    use serde_json::json;
    use url::Url;

    const DEADLINE: Duration = Duration::from_secs(5);
    const RESOURCE: &str = "http://127.0.0.1:9/mcp";

    /// Metadata of an AS at `base` (issuer without a trailing slash, as the conformance AS has it).
    pub(crate) fn metadata(base: &Url, grants: &[&str]) -> AuthServerMetadata {
        AuthServerMetadata {
            issuer: base.as_str().trim_end_matches('/').to_owned(),
            authorization_endpoint: None,
            token_endpoint: base.join("/token").unwrap(),
            registration_endpoint: None,
            device_authorization_endpoint: Some(base.join("/device").unwrap()),
            revocation_endpoint: None,
            scopes_supported: None,
            grant_types_supported: Some(grants.iter().map(|g| g.to_string()).collect()),
            token_endpoint_auth_methods_supported: None,
            code_challenge_methods_supported: None,
            client_id_metadata_document_supported: false,
            authorization_response_iss_parameter_supported: false,
            dpop_signing_alg_values_supported: None,
        }
    }

    fn egress() -> Egress {
        Egress::new(&EgressPolicy::default()).unwrap()
    }

    fn cc_token() -> Reply {
        Reply::json(200, json!({"access_token": "cc-token-1", "token_type": "Bearer", "expires_in": 3600}))
    }

    #[tokio::test]
    async fn basic_client_sends_the_grant_resource_scope_and_basic_header() {
        let server = TestServer::start(|_, _| cc_token()).await;
        let client = ClientCredentials {
            client_id: "conformance-test-client".into(),
            secret: ClientSecret::Secret("conformance-test-secret".into()),
            method: AuthMethod::ClientSecretBasic,
            dpop: None,
        };
        let meta = metadata(&server.base, &[CLIENT_CREDENTIALS_GRANT]);
        let token =
            client_credentials(&egress(), &meta, &client, Some("mcp:read".into()), RESOURCE, DEADLINE).await.unwrap();
        assert_eq!(token.access_token, "cc-token-1");
        let request = &server.received()[0];
        assert_eq!(request.path, "/token");
        let basic = request.header("authorization").unwrap().strip_prefix("Basic ").unwrap();
        let decoded = base64::engine::general_purpose::STANDARD.decode(basic).unwrap();
        assert_eq!(decoded, b"conformance-test-client:conformance-test-secret");
        assert_eq!(request.field_names(), ["grant_type", "resource", "scope"]);
        assert_eq!(request.field("grant_type").as_deref(), Some("client_credentials"));
        assert_eq!(request.field("resource").as_deref(), Some(RESOURCE));
        assert_eq!(request.field("scope").as_deref(), Some("mcp:read"));
    }

    #[tokio::test]
    async fn private_key_jwt_client_sends_an_assertion_for_the_issuer() {
        let server = TestServer::start(|_, _| cc_token()).await;
        let pem = fresh_p256_pem();
        let public_key = SigningKey::from_pem(&pem, SigningAlgorithm::Es256).unwrap().public_key();
        let client = ClientCredentials {
            client_id: "conformance-test-client".into(),
            secret: ClientSecret::PrivateKey { pem, algorithm: SigningAlgorithm::Es256 },
            method: AuthMethod::PrivateKeyJwt,
            dpop: None,
        };
        let meta = metadata(&server.base, &[CLIENT_CREDENTIALS_GRANT]);
        client_credentials(&egress(), &meta, &client, None, RESOURCE, DEADLINE).await.unwrap();
        let request = &server.received()[0];
        assert_eq!(request.header("authorization"), None);
        assert_eq!(request.field("grant_type").as_deref(), Some("client_credentials"));
        assert_eq!(request.field("client_assertion_type").as_deref(), Some(JWT_CLIENT_ASSERTION_TYPE));
        assert_eq!(request.field("scope"), None, "no scope asked, none sent");
        let (_, claims) = verify(&request.field("client_assertion").unwrap(), SigningAlgorithm::Es256, &public_key);
        assert_eq!(claims["aud"].as_str(), Some(meta.issuer.as_str()));
        assert_eq!(claims["iss"], "conformance-test-client");
        assert_eq!(claims["sub"], "conformance-test-client");
    }

    #[tokio::test]
    async fn public_clients_and_unsupported_servers_send_nothing() {
        let server = TestServer::start(|_, _| cc_token()).await;
        let public = ClientCredentials {
            client_id: "c".into(),
            secret: ClientSecret::None,
            method: AuthMethod::None,
            dpop: None,
        };
        let meta = metadata(&server.base, &[CLIENT_CREDENTIALS_GRANT]);
        let error = client_credentials(&egress(), &meta, &public, None, RESOURCE, DEADLINE).await.unwrap_err();
        assert_eq!(McpError::from(error).code(), "mcp_config_invalid");
        let confidential = ClientCredentials {
            client_id: "c".into(),
            secret: ClientSecret::Secret("secret-1".into()),
            method: AuthMethod::ClientSecretPost,
            dpop: None,
        };
        let code_only = metadata(&server.base, &["authorization_code"]);
        let error =
            client_credentials(&egress(), &code_only, &confidential, None, RESOURCE, DEADLINE).await.unwrap_err();
        assert!(error.to_string().contains("client_credentials"), "{error}");
        assert!(server.received().is_empty());
    }
}
