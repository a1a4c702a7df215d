//! A server entry's `oauth` option, validated: which grant, which client, which scopes at most, where the
//! redirect lands. Secrets in it (client secret, private key, the identity assertion) are registered with
//! the server's redaction set by the supervisor and never shown by `Debug`.

pub use super::cross_app::IdentityAssertion;
use super::token::{AuthMethod, SigningAlgorithm};
pub use super::workload::AssertionSource;
use crate::error::{McpError, Result};
use serde_json::{Map, Value};
use url::Url;

/// How the client obtains tokens.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Grant {
    /// Authorization code with PKCE, through a person's browser and the loopback listener.
    AuthorizationCode,
    /// RFC 8628: a person enters a code on another device.
    DeviceCode,
    /// The client's own credentials, no person.
    ClientCredentials,
    /// Cross-app access: an identity assertion from the enterprise IdP, exchanged (RFC 8693) and presented
    /// (RFC 7523).
    JwtBearer,
    /// Workload identity federation (SEP-1933): the workload's own platform-issued JWT, presented (RFC 7523).
    WorkloadIdentity,
}

impl Grant {
    /// Whether obtaining a token needs a person at a URL.
    pub fn is_interactive(self) -> bool {
        matches!(self, Grant::AuthorizationCode | Grant::DeviceCode)
    }
}

#[derive(Clone)]
pub struct OAuthSettings {
    pub grant: Grant,
    pub client_id: Option<String>,
    pub client_secret: Option<String>,
    pub auth_method: Option<AuthMethod>,
    pub private_key: Option<(String, SigningAlgorithm)>,
    pub client_metadata_url: Option<Url>,
    pub client_name: String,
    /// The ceiling: no scope outside it is ever requested.
    pub scopes: Option<Vec<String>>,
    pub redirect_uri: Option<Url>,
    pub identity_assertion: Option<IdentityAssertion>,
    /// `oauth.authorizationServer`: the issuer configured credentials belong to.
    pub authorization_server: Option<String>,
    /// `oauth.assertionFile` or `oauth.assertion` (grant `workload_identity`).
    pub assertion: Option<AssertionSource>,
}

/// What is configured, never a value.
impl std::fmt::Debug for OAuthSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OAuthSettings")
            .field("grant", &self.grant)
            .field("client_id", &self.client_id.is_some())
            .field("client_secret", &self.client_secret.is_some())
            .field("private_key", &self.private_key.is_some())
            .field("scopes", &self.scopes)
            .finish_non_exhaustive()
    }
}

const KEYS: &[&str] = &[
    "grant",
    "clientId",
    "clientSecret",
    "tokenEndpointAuthMethod",
    "privateKey",
    "signingAlgorithm",
    "clientMetadataUrl",
    "clientName",
    "scopes",
    "redirectUri",
    "identityAssertion",
    "authorizationServer",
    "assertionFile",
    "assertion",
];

impl OAuthSettings {
    /// `oauth: true` or `oauth: { … }` of the entry at `at`.
    pub fn parse(at: &str, value: &Value) -> Result<OAuthSettings> {
        let at = format!("{at}.oauth");
        let empty = Map::new();
        let map = match value {
            Value::Bool(true) => &empty,
            Value::Object(map) => map,
            _ => return Err(McpError::config(format!("{at} must be true or an object"))),
        };
        if let Some(key) = map.keys().find(|k| !KEYS.contains(&k.as_str())) {
            return Err(McpError::config(format!("{at} has an unknown key {key:?}")));
        }
        let text = |key: &str| -> Result<Option<String>> {
            match map.get(key) {
                None | Some(Value::Null) => Ok(None),
                Some(Value::String(s)) if !s.is_empty() => Ok(Some(s.clone())),
                Some(_) => Err(McpError::config(format!("{at}.{key} must be a non-empty string"))),
            }
        };
        let grant = match text("grant")?.as_deref() {
            None | Some("authorization_code") => Grant::AuthorizationCode,
            Some("device_code") => Grant::DeviceCode,
            Some("client_credentials") => Grant::ClientCredentials,
            Some("jwt_bearer") => Grant::JwtBearer,
            Some("workload_identity") => Grant::WorkloadIdentity,
            Some(other) => {
                return Err(McpError::config(format!(
                    "{at}.grant {other:?} is unknown (authorization_code, device_code, client_credentials, jwt_bearer, workload_identity)"
                )))
            }
        };
        let auth_method = match text("tokenEndpointAuthMethod")?.as_deref() {
            None => None,
            Some(name) => Some(AuthMethod::from_name(name).ok_or_else(|| {
                McpError::config(format!(
                    "{at}.tokenEndpointAuthMethod {name:?} is unknown (client_secret_basic, client_secret_post, none, private_key_jwt)"
                ))
            })?),
        };
        let algorithm = match text("signingAlgorithm")?.as_deref() {
            None | Some("ES256") => SigningAlgorithm::Es256,
            Some("RS256") => SigningAlgorithm::Rs256,
            Some(other) => {
                return Err(McpError::config(format!("{at}.signingAlgorithm {other:?} is unknown (ES256, RS256)")))
            }
        };
        let private_key = text("privateKey")?.map(|pem| (pem, algorithm));
        let client_metadata_url = match text("clientMetadataUrl")? {
            None => None,
            Some(s) => {
                let url =
                    Url::parse(&s).ok().filter(|u| u.scheme() == "https" && u.path() != "/" && u.fragment().is_none());
                Some(url.ok_or_else(|| {
                    McpError::config(format!("{at}.clientMetadataUrl must be an https URL with a path"))
                }))
                .transpose()?
            }
        };
        let redirect_uri = match text("redirectUri")? {
            None => None,
            Some(s) => {
                let url = Url::parse(&s).ok().filter(|u| {
                    u.scheme() == "http"
                        && matches!(u.host_str(), Some("127.0.0.1" | "localhost"))
                        && u.port().is_some()
                        && u.query().is_none()
                        && u.fragment().is_none()
                });
                Some(url.ok_or_else(|| {
                    McpError::config(format!("{at}.redirectUri must be a loopback http URL with a port (http://127.0.0.1:<port>/<path>): the client listens on 127.0.0.1"))
                }))
                .transpose()?
            }
        };
        let scopes = match map.get("scopes") {
            None | Some(Value::Null) => None,
            Some(Value::Array(items)) => Some(
                items
                    .iter()
                    .map(|v| match v {
                        Value::String(s) if !s.is_empty() && !s.contains(' ') => Ok(s.clone()),
                        _ => Err(McpError::config(format!("{at}.scopes must be scope names without spaces"))),
                    })
                    .collect::<Result<Vec<_>>>()?,
            ),
            Some(_) => return Err(McpError::config(format!("{at}.scopes must be an array of strings"))),
        };
        let identity_assertion = match map.get("identityAssertion") {
            None | Some(Value::Null) => None,
            Some(Value::Object(a)) => {
                let field = |key: &str| match a.get(key) {
                    None | Some(Value::Null) => Ok(None),
                    Some(Value::String(s)) if !s.is_empty() => Ok(Some(s.clone())),
                    Some(_) => {
                        Err(McpError::config(format!("{at}.identityAssertion.{key} must be a non-empty string")))
                    }
                };
                let endpoint = field("tokenEndpoint")?.and_then(|s| Url::parse(&s).ok());
                let (Some(token_endpoint), Some(id_token)) = (endpoint, field("idToken")?) else {
                    return Err(McpError::config(format!(
                        "{at}.identityAssertion needs tokenEndpoint (a URL) and idToken"
                    )));
                };
                Some(IdentityAssertion {
                    token_endpoint,
                    id_token,
                    client_id: field("clientId")?,
                    client_secret: field("clientSecret")?,
                })
            }
            Some(_) => return Err(McpError::config(format!("{at}.identityAssertion must be an object"))),
        };
        let assertion = match (text("assertionFile")?, map.get("assertion")) {
            (Some(_), Some(v)) if !v.is_null() => {
                return Err(McpError::config(format!("{at}: give assertionFile or assertion, not both")))
            }
            (Some(path), _) => {
                let path = std::path::PathBuf::from(path);
                if !path.is_absolute() {
                    return Err(McpError::config(format!("{at}.assertionFile must be an absolute path")));
                }
                if !path.is_file() {
                    return Err(McpError::config(format!(
                        "{at}.assertionFile ({}) is not a file this process can see",
                        path.display()
                    )));
                }
                Some(AssertionSource::File(path))
            }
            (None, None | Some(Value::Null)) => None,
            (None, Some(v)) if is_function_marker(v) => Some(AssertionSource::Callback),
            (None, Some(_)) => {
                return Err(McpError::config(format!(
                    "{at}.assertion must be a function returning the assertion (a JWT); for a file, use assertionFile"
                )))
            }
        };
        let settings = OAuthSettings {
            grant,
            assertion,
            client_id: text("clientId")?,
            client_secret: text("clientSecret")?,
            auth_method,
            private_key,
            client_metadata_url,
            client_name: text("clientName")?.unwrap_or_else(|| "mcpferry".to_owned()),
            scopes,
            redirect_uri,
            identity_assertion,
            authorization_server: match text("authorizationServer")? {
                None => None,
                Some(s) => Some(
                    Url::parse(&s)
                        .map(|_| s)
                        .map_err(|_| McpError::config(format!("{at}.authorizationServer must be the issuer URL")))?,
                ),
            },
        };
        settings.check(&at)?;
        Ok(settings)
    }

    fn check(&self, at: &str) -> Result<()> {
        if (self.client_secret.is_some() || self.private_key.is_some()) && self.client_id.is_none() {
            return Err(McpError::config(format!("{at}: a clientSecret or privateKey needs its clientId")));
        }
        if self.client_secret.is_some() && self.private_key.is_some() {
            return Err(McpError::config(format!("{at}: give clientSecret or privateKey, not both")));
        }
        match self.grant {
            Grant::ClientCredentials if self.client_secret.is_none() && self.private_key.is_none() => {
                Err(McpError::config(format!(
                    "{at}: grant client_credentials needs clientId with clientSecret or privateKey"
                )))
            }
            Grant::JwtBearer if self.identity_assertion.is_none() || self.client_id.is_none() => {
                Err(McpError::config(format!("{at}: grant jwt_bearer needs identityAssertion and clientId")))
            }
            Grant::WorkloadIdentity if self.assertion.is_none() => Err(McpError::config(format!(
                "{at}: grant workload_identity needs assertionFile (a path) or assertion (a function)"
            ))),
            _ if self.assertion.is_some() && self.grant != Grant::WorkloadIdentity => Err(McpError::config(format!(
                "{at}.assertionFile and .assertion are used only with grant workload_identity"
            ))),
            _ if self.identity_assertion.is_some() && self.grant != Grant::JwtBearer => {
                Err(McpError::config(format!("{at}.identityAssertion is used only with grant jwt_bearer")))
            }
            _ => Ok(()),
        }
    }

    /// Whether credentials of our own are configured, which belong to one authorization server.
    pub fn has_credentials(&self) -> bool {
        self.client_secret.is_some()
            || self.private_key.is_some()
            || self.identity_assertion.is_some()
            || self.assertion.is_some()
    }

    /// Every secret this configuration holds, for the server's redaction set.
    pub fn secrets(&self) -> Vec<&str> {
        let mut secrets: Vec<&str> = Vec::new();
        secrets.extend(self.client_secret.as_deref());
        if let Some((pem, _)) = &self.private_key {
            secrets.push(pem);
        }
        if let Some(a) = &self.identity_assertion {
            secrets.push(&a.id_token);
            secrets.extend(a.client_secret.as_deref());
        }
        secrets
    }
}

/// Whether `value` is the marker lib puts where a JavaScript function was (`{"$mcpferry": "function"}`, see
/// `config::MARKER_KEY`; read here so the settings need nothing of the option validator).
fn is_function_marker(value: &Value) -> bool {
    value.as_object().filter(|m| m.len() == 1).and_then(|m| m.get("$mcpferry")).and_then(Value::as_str)
        == Some("function")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(json: &str) -> Result<OAuthSettings> {
        OAuthSettings::parse("servers[0]", &serde_json::from_str(json).unwrap())
    }

    #[test]
    fn true_is_the_default_interactive_login() {
        let s = parse("true").unwrap();
        assert_eq!(s.grant, Grant::AuthorizationCode);
        assert_eq!(s.client_name, "mcpferry");
        assert!(s.client_id.is_none() && s.scopes.is_none());
    }

    #[test]
    fn mistakes_are_named() {
        for (json, says) in [
            (r#"{"grnat":"x"}"#, "unknown key"),
            (r#"{"grant":"password"}"#, "grant \"password\" is unknown"),
            (r#"{"clientSecret":"s"}"#, "needs its clientId"),
            (r#"{"grant":"client_credentials","clientId":"c"}"#, "needs clientId with clientSecret"),
            (r#"{"grant":"jwt_bearer","clientId":"c"}"#, "needs identityAssertion"),
            (r#"{"grant":"workload_identity"}"#, "needs assertionFile"),
            (r#"{"grant":"workload_identity","assertionFile":"relative/token"}"#, "absolute path"),
            (r#"{"grant":"workload_identity","assertionFile":"/nonexistent/mcpferry/token"}"#, "not a file"),
            (r#"{"grant":"workload_identity","assertion":"eyJ.a.b"}"#, "must be a function"),
            (r#"{"assertion":{"$mcpferry":"function"}}"#, "only with grant workload_identity"),
            (r#"{"redirectUri":"https://example.com/cb"}"#, "loopback"),
            (r#"{"clientMetadataUrl":"http://example.com/m.json"}"#, "https URL"),
            (r#"{"scopes":["a b"]}"#, "without spaces"),
            (r#"{"tokenEndpointAuthMethod":"tls"}"#, "unknown"),
            ("false", "true or an object"),
        ] {
            let error = parse(json).err().unwrap_or_else(|| panic!("{json} accepted")).to_string();
            assert!(error.contains(says), "{json}: {error}");
        }
    }

    #[test]
    fn debug_shows_no_secret() {
        let s = parse(r#"{"clientId":"c","clientSecret":"sekrit-value"}"#).unwrap();
        assert!(!format!("{s:?}").contains("sekrit"));
        assert_eq!(s.secrets(), ["sekrit-value"]);
    }
}
