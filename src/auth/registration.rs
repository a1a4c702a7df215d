//! Which client this engine is at an authorization server, in the spec's order: a pre-registered client
//! (`oauth.clientId`), then a Client ID Metadata Document (`oauth.clientMetadataUrl`, when the server
//! advertises support), then a registration kept from earlier for this issuer, then Dynamic Client
//! Registration (RFC 7591). A registration is kept in the token store under its issuer only: a client
//! registered at one authorization server is never presented to another.

use super::budget::request_in_time;
use super::discovery::AuthServerMetadata;
use super::settings::{Grant, OAuthSettings};
use super::store::TokenStore;
use super::token::{AuthMethod, ClientCredentials, ClientSecret};
use crate::egress::{display_url, Egress, Exchange};
use crate::error::{McpError, Result};
use crate::limits::MAX_OAUTH_METADATA_BYTES;
use reqwest::header::{HeaderValue, ACCEPT, CONTENT_TYPE};
use reqwest::Method;
use serde::{Deserialize, Serialize};
use std::time::Duration;
use url::Url;

/// A dynamic registration as kept in the token store.
#[derive(Serialize, Deserialize)]
struct StoredClient {
    issuer: String,
    client_id: String,
    #[serde(default)]
    client_secret: Option<String>,
    method: String,
}

/// The client for `metadata`'s issuer, registering one if needed.
pub async fn client_for(
    egress: &Egress,
    metadata: &AuthServerMetadata,
    settings: &OAuthSettings,
    store: &dyn TokenStore,
    redirect_uri: Option<&Url>,
    deadline: Duration,
) -> Result<ClientCredentials> {
    if let Some(client_id) = &settings.client_id {
        return Ok(pre_registered(client_id, settings, metadata));
    }
    if let Some(url) = settings.client_metadata_url.as_ref().filter(|_| metadata.client_id_metadata_document_supported)
    {
        return Ok(ClientCredentials {
            client_id: url.to_string(),
            secret: ClientSecret::None,
            method: AuthMethod::None,
            dpop: None,
        });
    }
    let key = super::keys::client(&metadata.issuer);
    if let Some(stored) = store.get(&key).await?.and_then(|s| serde_json::from_str::<StoredClient>(&s).ok()) {
        if let Some(client) = stored_client(store, &metadata.issuer, &stored.client_id).await {
            return Ok(client);
        }
    }
    let Some(endpoint) = &metadata.registration_endpoint else {
        return Err(McpError::Auth(format!(
            "the authorization server {} offers no client registration and no client ID metadata documents: set oauth.clientId",
            metadata.issuer
        )));
    };
    let client = register(egress, endpoint, metadata, settings, redirect_uri, deadline).await?;
    let stored = StoredClient {
        issuer: metadata.issuer.clone(),
        client_id: client.client_id.clone(),
        client_secret: match &client.secret {
            ClientSecret::Secret(s) => Some(s.clone()),
            _ => None,
        },
        method: client.method.as_str().to_owned(),
    };
    store.set(&key, &serde_json::to_string(&stored).expect("a registration serializes")).await?;
    Ok(client)
}

/// A client registered earlier at `issuer` under `client_id`, if the store still has it.
pub async fn stored_client(store: &dyn TokenStore, issuer: &str, client_id: &str) -> Option<ClientCredentials> {
    let stored: StoredClient = serde_json::from_str(&store.get(&super::keys::client(issuer)).await.ok()??).ok()?;
    if stored.issuer != issuer || stored.client_id != client_id {
        return None;
    }
    let method = AuthMethod::from_name(&stored.method)?;
    let secret = stored.client_secret.map(ClientSecret::Secret).unwrap_or(ClientSecret::None);
    Some(ClientCredentials { client_id: stored.client_id, secret, method, dpop: None })
}

/// The configured client; its method is the configured one, else the best the server supports.
fn pre_registered(client_id: &str, settings: &OAuthSettings, metadata: &AuthServerMetadata) -> ClientCredentials {
    let (secret, default_method) = match (&settings.client_secret, &settings.private_key) {
        (_, Some((pem, algorithm))) => {
            (ClientSecret::PrivateKey { pem: pem.clone(), algorithm: *algorithm }, AuthMethod::PrivateKeyJwt)
        }
        (Some(secret), None) => {
            let method = if !metadata.supports_auth_method("client_secret_basic")
                && metadata.supports_auth_method("client_secret_post")
            {
                AuthMethod::ClientSecretPost
            } else {
                AuthMethod::ClientSecretBasic
            };
            (ClientSecret::Secret(secret.clone()), method)
        }
        (None, None) => (ClientSecret::None, AuthMethod::None),
    };
    let method = settings.auth_method.unwrap_or(default_method);
    ClientCredentials { client_id: client_id.to_owned(), secret, method, dpop: None }
}

#[derive(Deserialize)]
struct RegistrationResponse {
    client_id: String,
    #[serde(default)]
    client_secret: Option<String>,
    #[serde(default)]
    token_endpoint_auth_method: Option<String>,
}

/// RFC 7591: register as a native application for this grant, asking for the method the server prefers
/// among those a client without a secret to start with can use. `deadline` bounds the whole answer.
async fn register(
    egress: &Egress,
    endpoint: &Url,
    metadata: &AuthServerMetadata,
    settings: &OAuthSettings,
    redirect_uri: Option<&Url>,
    deadline: Duration,
) -> Result<ClientCredentials> {
    let requested = ["none", "client_secret_basic", "client_secret_post"]
        .into_iter()
        .find(|m| metadata.supports_auth_method(m))
        .unwrap_or("client_secret_basic");
    let grant_types = match settings.grant {
        Grant::DeviceCode => vec!["urn:ietf:params:oauth:grant-type:device_code", "refresh_token"],
        _ => vec!["authorization_code", "refresh_token"],
    };
    let mut body = serde_json::json!({
        "client_name": settings.client_name,
        "grant_types": grant_types,
        "response_types": if settings.grant == Grant::AuthorizationCode { vec!["code"] } else { vec![] },
        "token_endpoint_auth_method": requested,
        "application_type": "native",
    });
    if let Some(redirect) = redirect_uri {
        body["redirect_uris"] = serde_json::json!([redirect.as_str()]);
    }
    let exchange = Exchange::new(Method::POST, endpoint.clone(), deadline)
        .protocol_header(CONTENT_TYPE, HeaderValue::from_static("application/json"))
        .protocol_header(ACCEPT, HeaderValue::from_static("application/json"))
        .body(bytes::Bytes::from(body.to_string()));
    let (status, read) = request_in_time("dynamic client registration", endpoint, deadline, async {
        let mut response = egress.send(exchange).await?;
        let status = response.status();
        Ok((status, crate::egress::read_body(&mut response, MAX_OAUTH_METADATA_BYTES, deadline).await?))
    })
    .await?;
    if !status.is_success() {
        let error = serde_json::from_slice::<serde_json::Value>(&read).ok().and_then(|v| {
            v.get("error")
                .and_then(|e| e.as_str())
                .map(|e| crate::guard::redact::quote_bytes(e.as_bytes(), &Default::default()))
        });
        return Err(McpError::Auth(format!(
            "dynamic client registration at {} failed: HTTP {status}{}",
            display_url(endpoint),
            error.map(|e| format!(" ({e})")).unwrap_or_default()
        )));
    }
    let registered: RegistrationResponse = serde_json::from_slice(&read).map_err(|e| {
        McpError::Auth(format!("the registration response of {} is malformed: {e}", display_url(endpoint)))
    })?;
    let secret = registered.client_secret.filter(|s| !s.is_empty());
    let method = registered
        .token_endpoint_auth_method
        .as_deref()
        .and_then(AuthMethod::from_name)
        .or_else(|| AuthMethod::from_name(requested))
        .expect("the requested method has a name");
    let (secret, method) = match (secret, method) {
        (Some(secret), method) => (
            ClientSecret::Secret(secret),
            if method == AuthMethod::None { AuthMethod::ClientSecretBasic } else { method },
        ),
        (None, _) => (ClientSecret::None, AuthMethod::None),
    };
    Ok(ClientCredentials { client_id: registered.client_id, secret, method, dpop: None })
}
