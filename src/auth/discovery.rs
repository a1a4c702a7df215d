//! Finding the authorization server of an MCP server (MCP authorization 2025-11-25, "Authorization
//! Server Discovery"), with the 2025-03-26 fallback.
//!
//! 1. Protected-resource metadata (RFC 9728): the challenge's `resource_metadata` URL, else the
//!    path-based well-known URL, else the root one. Its `resource` must be this server (same origin, a
//!    path prefix of its URL), or the whole flow is refused: a server must not obtain tokens minted for
//!    another resource.
//! 2. Authorization-server metadata (RFC 8414, then OpenID Connect Discovery), in the spec's order of
//!    path insertion and appending; the document's `issuer` must be the issuer it was fetched for.
//! 3. No protected-resource metadata at all (a 2025-03-26 server): the server's origin is the
//!    authorization server, its metadata at the root well-known path (its `issuer` must be on that
//!    origin), or else the default endpoints `/authorize`, `/token`, `/register`.
//!
//! Every fetch goes through `egress` (allowedHosts, proxy, redirects) and is bounded in size, and each
//! has one deadline for its whole answer within what is left of the login's budget (see `budget`).
//! Endpoints must be `https`, or `http` on a loopback host.

use super::budget::{request_in_time, LoginBudget};
use super::challenge::Challenge;
use super::token::check_endpoint;
use crate::egress::{display_url, Egress, Exchange};
use crate::error::{McpError, Result};
use crate::limits::MAX_OAUTH_METADATA_BYTES;
use reqwest::header::{HeaderValue, ACCEPT};
use reqwest::{Method, StatusCode};
use serde::Deserialize;
use url::Url;

/// RFC 9728 protected-resource metadata: the fields the client uses.
#[derive(Debug, Clone, Deserialize)]
pub struct ProtectedResource {
    #[serde(default)]
    pub resource: Option<String>,
    #[serde(default)]
    pub authorization_servers: Vec<String>,
    #[serde(default)]
    pub scopes_supported: Option<Vec<String>>,
    /// RFC 9449 §5.2: the resource accepts DPoP-bound access tokens only.
    #[serde(default)]
    pub dpop_bound_access_tokens_required: bool,
}

/// RFC 8414 / OpenID Connect metadata: the fields the client uses.
#[derive(Debug, Clone, Deserialize)]
pub struct AuthServerMetadata {
    pub issuer: String,
    #[serde(default)]
    pub authorization_endpoint: Option<Url>,
    pub token_endpoint: Url,
    #[serde(default)]
    pub registration_endpoint: Option<Url>,
    #[serde(default)]
    pub device_authorization_endpoint: Option<Url>,
    #[serde(default)]
    pub revocation_endpoint: Option<Url>,
    #[serde(default)]
    pub scopes_supported: Option<Vec<String>>,
    #[serde(default)]
    pub grant_types_supported: Option<Vec<String>>,
    #[serde(default)]
    pub token_endpoint_auth_methods_supported: Option<Vec<String>>,
    #[serde(default)]
    pub code_challenge_methods_supported: Option<Vec<String>>,
    #[serde(default)]
    pub client_id_metadata_document_supported: bool,
    #[serde(default)]
    pub authorization_response_iss_parameter_supported: bool,
    /// RFC 9449 §5.1: the JWS algorithms the server takes DPoP proofs in (absent: no DPoP).
    #[serde(default)]
    pub dpop_signing_alg_values_supported: Option<Vec<String>>,
}

impl AuthServerMetadata {
    pub fn supports_scope(&self, scope: &str) -> bool {
        self.scopes_supported.as_ref().is_some_and(|s| s.iter().any(|x| x == scope))
    }

    pub fn supports_auth_method(&self, method: &str) -> bool {
        match &self.token_endpoint_auth_methods_supported {
            Some(methods) => methods.iter().any(|m| m == method),
            // RFC 8414 §2: absent means client_secret_basic.
            None => method == "client_secret_basic",
        }
    }
}

/// Where the client gets its tokens for one server.
#[derive(Debug, Clone)]
pub struct Discovered {
    /// The RFC 8707 `resource` value sent in authorization and token requests.
    pub resource: String,
    /// The protected resource's `scopes_supported`.
    pub resource_scopes: Option<Vec<String>>,
    /// The protected resource's `dpop_bound_access_tokens_required`.
    pub dpop_required: bool,
    pub metadata: AuthServerMetadata,
    /// Found by the 2025-03-26 fallback (no protected-resource metadata).
    pub legacy: bool,
    /// Neither metadata document exists: the 2025-03-26 default endpoints are in use.
    pub default_endpoints: bool,
}

/// Run discovery for the server at `server_url`, starting from its challenge.
pub async fn discover(
    egress: &Egress,
    server_url: &Url,
    challenge: &Challenge,
    budget: LoginBudget,
) -> Result<Discovered> {
    let mut candidates = Vec::new();
    if let Some(advertised) = challenge.resource_metadata.as_deref().and_then(|u| Url::parse(u).ok()) {
        // The server's own words: a URL it names is fetched only over https (or on this machine).
        check_endpoint(&advertised, "protected-resource metadata URL")?;
        candidates.push(advertised);
    }
    candidates.extend(protected_resource_urls(server_url));
    candidates.dedup();
    for url in candidates {
        let Some(prm) = fetch_json::<ProtectedResource>(egress, &url, PROTECTED_RESOURCE, budget).await? else {
            continue;
        };
        let resource = checked_resource(&prm, server_url)?;
        let issuer = prm.authorization_servers.first().ok_or_else(|| {
            McpError::Auth(format!(
                "the protected-resource metadata at {} names no authorization server",
                display_url(&url)
            ))
        })?;
        let issuer_url = Url::parse(issuer).map_err(|_| {
            McpError::Auth(format!("the protected-resource metadata names an invalid authorization server {issuer:?}"))
        })?;
        check_endpoint(&issuer_url, "authorization server")?;
        let metadata = authorization_server_metadata(egress, &issuer_url, budget).await?.ok_or_else(|| {
            McpError::Auth(format!("the authorization server {} publishes no metadata", display_url(&issuer_url)))
        })?;
        if !same_issuer(&metadata.issuer, issuer) {
            return Err(McpError::Auth(format!(
                "the authorization server metadata names issuer {:?}, not {:?}: refusing it",
                metadata.issuer, issuer
            )));
        }
        check_endpoints(&metadata)?;
        return Ok(Discovered {
            resource,
            resource_scopes: prm.scopes_supported,
            dpop_required: prm.dpop_bound_access_tokens_required,
            metadata,
            legacy: false,
            default_endpoints: false,
        });
    }
    legacy(egress, server_url, budget).await
}

/// 2025-03-26: the server's origin is the authorization server.
async fn legacy(egress: &Egress, server_url: &Url, budget: LoginBudget) -> Result<Discovered> {
    let origin = origin_url(server_url);
    let resource = canonical_resource(server_url);
    let well_known = origin.join("/.well-known/oauth-authorization-server").expect("a fixed path joins");
    if let Some(metadata) = fetch_json::<AuthServerMetadata>(egress, &well_known, AUTHORIZATION_SERVER, budget).await? {
        // Fetched from the origin's root rather than built from an issuer: the issuer must be on that origin.
        let issuer_origin = Url::parse(&metadata.issuer).map(|u| u.origin()).ok();
        if issuer_origin != Some(server_url.origin()) {
            return Err(McpError::Auth(format!(
                "the authorization server metadata at {} names issuer {:?} on another origin: refusing it",
                display_url(&well_known),
                metadata.issuer
            )));
        }
        check_endpoints(&metadata)?;
        return Ok(Discovered {
            resource,
            resource_scopes: None,
            dpop_required: false,
            metadata,
            legacy: true,
            default_endpoints: false,
        });
    }
    let endpoint = |path: &str| origin.join(path).expect("a fixed path joins");
    let metadata = AuthServerMetadata {
        issuer: origin.as_str().trim_end_matches('/').to_owned(),
        authorization_endpoint: Some(endpoint("/authorize")),
        token_endpoint: endpoint("/token"),
        registration_endpoint: Some(endpoint("/register")),
        device_authorization_endpoint: None,
        revocation_endpoint: None,
        scopes_supported: None,
        grant_types_supported: None,
        token_endpoint_auth_methods_supported: None,
        code_challenge_methods_supported: None,
        client_id_metadata_document_supported: false,
        authorization_response_iss_parameter_supported: false,
        dpop_signing_alg_values_supported: None,
    };
    check_endpoints(&metadata)?;
    Ok(Discovered {
        resource,
        resource_scopes: None,
        dpop_required: false,
        metadata,
        legacy: true,
        default_endpoints: true,
    })
}

/// RFC 9728 §3.1: the path-based well-known URL first (when the server URL has a path), then the root.
pub fn protected_resource_urls(server_url: &Url) -> Vec<Url> {
    let origin = origin_url(server_url);
    let path = server_url.path().trim_end_matches('/');
    let mut urls = Vec::new();
    if !path.is_empty() {
        urls.push(origin.join(&format!("/.well-known/oauth-protected-resource{path}")).expect("a path joins"));
    }
    urls.push(origin.join("/.well-known/oauth-protected-resource").expect("a fixed path joins"));
    urls
}

/// MCP 2025-11-25: for an issuer with a path, OAuth path insertion, OpenID Connect path insertion, then
/// OpenID Connect path appending; for one without, the two root documents.
pub fn authorization_server_urls(issuer: &Url) -> Vec<Url> {
    let origin = origin_url(issuer);
    let path = issuer.path().trim_end_matches('/');
    let join = |p: String| origin.join(&p).expect("a path joins");
    if path.is_empty() {
        vec![join("/.well-known/oauth-authorization-server".into()), join("/.well-known/openid-configuration".into())]
    } else {
        vec![
            join(format!("/.well-known/oauth-authorization-server{path}")),
            join(format!("/.well-known/openid-configuration{path}")),
            join(format!("{path}/.well-known/openid-configuration")),
        ]
    }
}

async fn authorization_server_metadata(
    egress: &Egress,
    issuer: &Url,
    budget: LoginBudget,
) -> Result<Option<AuthServerMetadata>> {
    for url in authorization_server_urls(issuer) {
        if let Some(metadata) = fetch_json::<AuthServerMetadata>(egress, &url, AUTHORIZATION_SERVER, budget).await? {
            return Ok(Some(metadata));
        }
    }
    Ok(None)
}

/// The protected resource's `resource`, if it is this server; an error otherwise.
fn checked_resource(prm: &ProtectedResource, server_url: &Url) -> Result<String> {
    let Some(resource) = prm.resource.as_deref() else {
        return Err(McpError::Auth("the protected-resource metadata has no \"resource\": refusing it".into()));
    };
    let matches = Url::parse(resource).ok().is_some_and(|r| {
        let prefix = r.path().trim_end_matches('/');
        let path = server_url.path();
        r.origin() == server_url.origin()
            && r.fragment().is_none()
            && (prefix.is_empty()
                || path == prefix
                || path.trim_end_matches('/') == prefix
                || path.starts_with(&format!("{prefix}/")))
    });
    if !matches {
        return Err(McpError::Auth(format!(
            "the protected-resource metadata is for {:?}, not for this server ({}): refusing to authorize",
            crate::guard::redact::quote_bytes(resource.as_bytes(), &Default::default()),
            display_url(server_url)
        )));
    }
    Ok(resource.to_owned())
}

/// The server URL as an RFC 8707 resource: no fragment, no query (a query may carry a key).
pub fn canonical_resource(server_url: &Url) -> String {
    let mut url = server_url.clone();
    url.set_fragment(None);
    url.set_query(None);
    url.to_string()
}

fn origin_url(url: &Url) -> Url {
    Url::parse(&url.origin().ascii_serialization()).expect("an http(s) origin is a URL")
}

/// RFC 8414 §3.3 compares issuers as strings; a lone trailing slash is the only difference tolerated
/// (`https://as` and `https://as/` are the same URL to every parser).
fn same_issuer(published: &str, expected: &str) -> bool {
    published.trim_end_matches('/') == expected.trim_end_matches('/')
}

fn check_endpoints(metadata: &AuthServerMetadata) -> Result<()> {
    let issuer = Url::parse(&metadata.issuer)
        .map_err(|_| McpError::Auth(format!("the authorization server's issuer {:?} is not a URL", metadata.issuer)))?;
    check_endpoint(&issuer, "issuer")?;
    check_endpoint(&metadata.token_endpoint, "token endpoint")?;
    for (url, what) in [
        (&metadata.authorization_endpoint, "authorization endpoint"),
        (&metadata.registration_endpoint, "registration endpoint"),
        (&metadata.device_authorization_endpoint, "device authorization endpoint"),
        (&metadata.revocation_endpoint, "revocation endpoint"),
    ] {
        if let Some(url) = url {
            check_endpoint(url, what)?;
        }
    }
    Ok(())
}

/// The steps of discovery, as a timeout names them.
const PROTECTED_RESOURCE: &str = "fetching the protected-resource metadata";
const AUTHORIZATION_SERVER: &str = "fetching the authorization-server metadata";

/// GET a JSON document, its whole answer under one deadline from `budget`. `None` when the server has
/// none there (any non-success status, a failed connection); an error for what must stop discovery: a
/// guard refusal, a document that is there but malformed, or no complete answer in time (`step` named).
pub async fn fetch_json<T: serde::de::DeserializeOwned>(
    egress: &Egress,
    url: &Url,
    step: &str,
    budget: LoginBudget,
) -> Result<Option<T>> {
    let deadline = budget.request();
    let exchange = Exchange::new(Method::GET, url.clone(), deadline)
        .protocol_header(ACCEPT, HeaderValue::from_static("application/json"));
    request_in_time(step, url, deadline, async {
        let mut response = match egress.send(exchange).await {
            Ok(response) => response,
            Err(e @ (McpError::HostNotAllowed(_) | McpError::RedirectRefused(_) | McpError::Timeout { .. })) => {
                return Err(e)
            }
            Err(_) => return Ok(None),
        };
        if !response.status().is_success() || response.status() == StatusCode::NO_CONTENT {
            return Ok(None);
        }
        let body = crate::egress::read_body(&mut response, MAX_OAUTH_METADATA_BYTES, deadline).await?;
        serde_json::from_slice(&body)
            .map(Some)
            .map_err(|e| McpError::Auth(format!("the metadata at {} is malformed: {e}", display_url(url))))
    })
    .await
}

#[cfg(test)]
mod tests {
    use super::*;

    fn urls(list: Vec<Url>) -> Vec<String> {
        list.into_iter().map(String::from).collect()
    }

    #[test]
    fn well_known_urls_follow_the_spec_order() {
        let server = Url::parse("http://localhost:1/mcp/?k=v").unwrap();
        assert_eq!(
            urls(protected_resource_urls(&server)),
            [
                "http://localhost:1/.well-known/oauth-protected-resource/mcp",
                "http://localhost:1/.well-known/oauth-protected-resource"
            ]
        );
        assert_eq!(
            urls(protected_resource_urls(&Url::parse("https://a/").unwrap())),
            ["https://a/.well-known/oauth-protected-resource"]
        );
        assert_eq!(
            urls(authorization_server_urls(&Url::parse("http://localhost:2/tenant1").unwrap())),
            [
                "http://localhost:2/.well-known/oauth-authorization-server/tenant1",
                "http://localhost:2/.well-known/openid-configuration/tenant1",
                "http://localhost:2/tenant1/.well-known/openid-configuration"
            ]
        );
        assert_eq!(
            urls(authorization_server_urls(&Url::parse("http://localhost:2").unwrap())),
            [
                "http://localhost:2/.well-known/oauth-authorization-server",
                "http://localhost:2/.well-known/openid-configuration"
            ]
        );
    }

    #[test]
    fn the_resource_must_be_this_server() {
        let server = Url::parse("http://localhost:1/mcp").unwrap();
        let prm = |r: &str| ProtectedResource {
            resource: Some(r.into()),
            authorization_servers: vec![],
            scopes_supported: None,
            dpop_bound_access_tokens_required: false,
        };
        assert!(checked_resource(&prm("http://localhost:1/mcp"), &server).is_ok());
        assert!(checked_resource(&prm("http://localhost:1"), &server).is_ok());
        assert!(checked_resource(&prm("http://localhost:1/"), &server).is_ok());
        assert!(checked_resource(&prm("https://evil.example.com/mcp"), &server).is_err());
        assert!(checked_resource(&prm("http://localhost:1/mcp-other"), &server).is_err());
        assert!(checked_resource(&prm("http://localhost:2/mcp"), &server).is_err());
        assert!(checked_resource(&prm("http://localhost:1/mcp/deeper"), &server).is_err());
        let none = ProtectedResource {
            resource: None,
            authorization_servers: vec![],
            scopes_supported: None,
            dpop_bound_access_tokens_required: false,
        };
        assert!(checked_resource(&none, &server).is_err());
    }

    #[test]
    fn endpoints_must_be_https_unless_on_this_machine() {
        for ok in ["https://as.example/token", "http://localhost:9/t", "http://127.0.0.1/t", "http://[::1]:3/t"] {
            assert!(check_endpoint(&Url::parse(ok).unwrap(), "x").is_ok(), "{ok}");
        }
        for bad in ["http://as.example/token", "http://10.0.0.1/t", "ftp://localhost/t"] {
            assert!(check_endpoint(&Url::parse(bad).unwrap(), "x").is_err(), "{bad}");
        }
        assert_eq!(canonical_resource(&Url::parse("https://a/mcp?key=s#f").unwrap()), "https://a/mcp");
        assert!(same_issuer("https://a/", "https://a") && !same_issuer("https://a/x", "https://a"));
    }
}
