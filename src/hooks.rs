//! The embedding application's callbacks (`auth`, an `allowedHosts` resolver, `policy.decide`,
//! `policy.ask`, `onElicitation`). The engine only sees this trait; the napi module implements it over
//! JavaScript functions. Each is optional and costs nothing when absent.

use crate::transport::BoxFuture;
use std::sync::Arc;

/// An asynchronous callback. `Err` carries the callback's own failure text, which is never shown
/// verbatim where it could carry a secret.
pub trait Callback<A, R>: Send + Sync {
    fn call(&self, arg: A) -> BoxFuture<'static, Result<R, String>>;
}

#[derive(Default, Clone)]
pub struct Hooks {
    /// Server name → bearer token for that server.
    pub auth: Option<Arc<dyn Callback<String, String>>>,
    /// Server name → the hosts that server may reach.
    pub allowed_hosts: Option<Arc<dyn Callback<String, Vec<String>>>>,
    /// Policy request (JSON) → decision (JSON).
    pub decide: Option<Arc<dyn Callback<String, String>>>,
    /// Policy request with the `ask` reason (JSON) → approved?
    pub ask: Option<Arc<dyn Callback<String, bool>>>,
    /// `onAuthorizationUrl`: login prompt (JSON `{url, server, grant, userCode?, expiresAt?}`) → ignored.
    pub authorization_url: Option<Arc<dyn Callback<String, String>>>,
    /// Where OAuth tokens and client registrations are kept (`tokenStore`); a memory store when absent.
    pub token_store: Option<Arc<dyn crate::auth::store::TokenStore>>,
    /// Elicitation request (JSON: `{"server", "request"}`, see `elicitation::host_request`) → the
    /// host's result (JSON: `{"action", "content"?}`). Without it, no elicitation capability is declared.
    pub elicit: Option<Arc<dyn Callback<String, String>>>,
    /// Reads stdio servers' stdout on the host's event loop when set (see `transport::stdio::ExternalReader`).
    pub stdio_reader: Option<Arc<dyn crate::transport::stdio::ReaderHost>>,
}
