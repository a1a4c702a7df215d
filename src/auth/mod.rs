//! OAuth 2.1 authorization for HTTP servers (MCP authorization, 2025-11-25), in the engine.
//!
//! | file                   | what                                                                        |
//! |------------------------|-----------------------------------------------------------------------------|
//! | `settings.rs`          | a server entry's `oauth` option, validated                                 |
//! | `authorizer.rs`        | one server's token: load, use, refresh, step-up, flows one at a time        |
//! | `budget.rs`            | a login's time: one deadline per request's whole answer, one for them all  |
//! | `challenge.rs`         | the `WWW-Authenticate` Bearer challenge                                     |
//! | `discovery.rs`         | protected-resource and authorization-server metadata, 2025-03-26 fallback   |
//! | `registration.rs`      | pre-registered client → client ID metadata document → stored → DCR          |
//! | `code_flow.rs`         | authorization code + PKCE S256 + `resource` + `iss`                          |
//! | `loopback.rs`          | the 127.0.0.1 redirect listener                                             |
//! | `pkce.rs`              | verifiers, challenges, `state`                                              |
//! | `token.rs`             | the token endpoint: client authentication, responses, revocation           |
//! | `jwt.rs`               | ES256 / RS256 assertions (`private_key_jwt`)                                |
//! | `client_credentials.rs`, `cross_app.rs`, `device.rs` | the other grants                              |
//! | `store.rs`             | token stores: memory, OS secret store, encrypted file                       |
//! | `keys.rs`              | token-store keys                                                            |
//!
//! What never happens: a token sent to a server other than the resource it was issued for, a credential
//! presented to another authorization server than its issuer, a request to an authorization server
//! outside `allowedHosts` or over plain http off this machine, a tool call sent twice because of an
//! authorization, a secret in an error, diagnostic or store row other than the token store's own.

pub mod authorizer;
pub mod budget;
pub mod challenge;
pub mod client_credentials;
pub mod code_flow;
pub mod cross_app;
pub mod device;
pub mod discovery;
pub mod jwt;
pub mod keys;
pub mod loopback;
pub mod pkce;
pub mod registration;
pub mod settings;
pub mod store;
pub mod token;

pub use authorizer::{AuthHost, Authorizer};
pub use settings::OAuthSettings;

use crate::config::{ServerEntry, ServerKind};

/// A tool call the server refused for authorization, once a new token is in place: never sent again.
pub fn call_not_resent() -> McpError {
    McpError::Reauthorized(
        "the server refused the tool call for authorization; a new token is in place and the call was not sent again"
            .into(),
    )
}
use crate::error::{McpError, Result};
use std::sync::Arc;

/// `logoutMcpServer`: revoke (where the authorization server offers it) and forget the tokens kept in
/// `store` for one server entry. Its client registration stays: it is the application's, not the person's.
pub async fn logout(
    entry: &ServerEntry,
    store: Arc<dyn store::TokenStore>,
    policy: &crate::egress::EgressPolicy,
) -> Result<()> {
    let (ServerKind::StreamableHttp { url, oauth: Some(settings), .. }
    | ServerKind::Sse { url, oauth: Some(settings), .. }) = &entry.kind
    else {
        return Err(McpError::config(format!("server {:?} has no oauth configuration to log out of", entry.name)));
    };
    if let Some(guard) = &policy.guard {
        guard.check_url(url)?;
    }
    let host = Arc::new(AuthHost {
        store,
        present: None,
        login_timeout: std::time::Duration::from_millis(crate::limits::DEFAULT_AUTHORIZATION_TIMEOUT_MS),
        flow_timeout: std::time::Duration::from_millis(crate::limits::DEFAULT_CONNECT_TIMEOUT_MS),
        logins: tokio_util::sync::CancellationToken::new(),
    });
    let authorizer = Authorizer::new(
        entry.name.clone(),
        url.clone(),
        settings.clone(),
        host,
        policy,
        Default::default(),
        Default::default(),
        tokio_util::sync::CancellationToken::new(),
    )?;
    authorizer.logout().await
}
