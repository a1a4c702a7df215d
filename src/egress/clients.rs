//! The HTTP clients of the process: one per distinct egress policy, shared by every toolset that has it.
//!
//! A multi-tenant backend holds one toolset per user session, each connected to the same few servers. A
//! client per toolset meant a TLS configuration per toolset (reqwest's default verifier reads and parses
//! the system's root certificates each time a client is built) and a connection pool per toolset, so
//! every session dialled its own sockets. Here:
//!
//! | what | how many |
//! |---|---|
//! | TLS configuration (rustls, ring, the platform's roots) | one per process, built on first use |
//! | `reqwest::Client` for requests (its pool: keep-alive per origin, HTTP/2 multiplexed where the server offers it, ALPN `h2` + `http/1.1`) | one per runtime × `proxy` × `allowedHosts` (by content), alive while a toolset holds it |
//! | `reqwest::Client` for streams (HTTP/1.1 only, ALPN `http/1.1`: one pooled connection per open stream) | the same, one per policy |
//!
//! Why two: an HTTP/2 connection carries at most the server's `SETTINGS_MAX_CONCURRENT_STREAMS` requests
//! at once (nginx and ALBs allow 128), and hyper does not open a second connection when they are taken: a
//! further request waits for a free stream. A session's event stream (the Streamable HTTP standalone GET,
//! the legacy SSE stream) stays open for the session's whole life, so sessions sharing one connection would
//! fill it and stall every other session's requests on that origin. Such streams go through the streams
//! client, where each holds a connection of its own (as each toolset's did before clients were shared); the
//! exchanges that end with their answer share the HTTP/2 connection.
//!
//! What may be shared and what may not:
//! - The client carries nothing of a session: no default headers, no cookie store (reqwest's is not
//!   enabled), no redirect following (`egress::Egress::send` follows hops itself, choosing each hop's
//!   headers). Configured headers, bearer tokens and session ids go on each request, never on the client.
//! - The `allowedHosts` DNS check lives in the client's resolver, and a pooled connection was dialled to an
//!   address that resolver vetted. A request must never ride a connection its own guard would not have
//!   dialled, so clients are shared only between equal guards (`HostGuard::identity`), and never between
//!   a guarded policy and an unguarded one. The name and redirect checks stay per request in `Egress`.
//! - A proxy is part of where a connection goes, so it is part of the key too.
//! - Pooled connections are tasks of the runtime that opened them: clients are kept per runtime (the
//!   engine has one; tests start many).

use crate::error::{McpError, Result};
use crate::guard::hosts::{GuardedResolver, HostGuard};
use crate::limits::{HTTP_CONNECT_TIMEOUT_MS, HTTP_POOL_IDLE_TIMEOUT_MS};
use crate::shared_state::WeakRegistry;
use std::sync::{Arc, OnceLock};
use std::time::Duration;
use url::Url;

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct ClientKey {
    kind: ClientKind,
    runtime: Option<tokio::runtime::Id>,
    proxy: Option<String>,
    guard: Option<Vec<String>>,
}

/// What a client carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ClientKind {
    /// Exchanges that end with their answer: HTTP/2 where the server offers it.
    Requests,
    /// Streams held open for as long as a session lives: HTTP/1.1 only, a connection each.
    Streams,
}

/// Live clients by policy; an entry whose last holder is gone is dropped on the next insertion.
static CLIENTS: WeakRegistry<ClientKey, reqwest::Client> = WeakRegistry::new();

/// The client for this policy: the one already in use when there is one, else a new one.
pub fn shared_client(
    kind: ClientKind,
    guard: Option<&Arc<HostGuard>>,
    proxy: Option<&Url>,
) -> Result<Arc<reqwest::Client>> {
    let Ok(runtime) = tokio::runtime::Handle::try_current().map(|h| h.id()) else {
        // Outside a runtime nothing can be pooled for later anyway.
        return Ok(Arc::new(build(kind, guard, proxy)?));
    };
    let key = ClientKey {
        kind,
        runtime: Some(runtime),
        proxy: proxy.map(|p| p.as_str().to_owned()),
        guard: guard.map(|g| g.identity()),
    };
    // Built outside the lock; two toolsets racing for a new policy may each build one, and the first
    // one filed is the one later toolsets get.
    CLIENTS.get_or_make(key, || build(kind, guard, proxy).map(Arc::new))
}

fn build(kind: ClientKind, guard: Option<&Arc<HostGuard>>, proxy: Option<&Url>) -> Result<reqwest::Client> {
    let mut tls = tls_config()?;
    let mut builder = reqwest::Client::builder();
    match kind {
        ClientKind::Requests => tls.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()],
        ClientKind::Streams => {
            // A preconfigured TLS configuration keeps its ALPN list as it is: offering `h2` there would
            // let the server pick a protocol this client does not speak.
            tls.alpn_protocols = vec![b"http/1.1".to_vec()];
            builder = builder.http1_only();
        }
    }
    let mut builder = builder
        .tls_backend_preconfigured(tls)
        // The environment never decides where requests go; only the `proxy` option does.
        .no_proxy()
        .connect_timeout(Duration::from_millis(HTTP_CONNECT_TIMEOUT_MS))
        .pool_idle_timeout(Duration::from_millis(HTTP_POOL_IDLE_TIMEOUT_MS))
        .tcp_nodelay(true)
        // Redirects are followed in `Egress::send`, where each hop's headers are chosen.
        .redirect(reqwest::redirect::Policy::none());
    if let Some(proxy) = proxy {
        let proxy = reqwest::Proxy::all(proxy.as_str())
            .map_err(|_| McpError::config(format!("proxy {} cannot be used", super::display_url(proxy))))?;
        builder = builder.proxy(proxy);
    }
    if let Some(guard) = guard {
        // With a proxy this resolves (and checks) the proxy's own name; the proxy resolves the target's.
        builder = builder.dns_resolver(Arc::new(GuardedResolver { guard: guard.clone() }));
    }
    builder.build().map_err(|e| McpError::Transport(format!("could not build the HTTP client: {}", e.without_url())))
}

/// The process's TLS configuration: what reqwest builds by default (rustls with ring, TLS 1.2 and 1.3,
/// the platform's roots through `rustls-platform-verifier`, SNI), built once; `build` sets each client's
/// ALPN list. Cloning it shares the verifier and its root store.
fn tls_config() -> Result<rustls::ClientConfig> {
    static TLS: OnceLock<std::result::Result<rustls::ClientConfig, String>> = OnceLock::new();
    TLS.get_or_init(|| {
        let provider = rustls::crypto::CryptoProvider::get_default()
            .cloned()
            .unwrap_or_else(|| Arc::new(rustls::crypto::ring::default_provider()));
        let verifier = rustls_platform_verifier::Verifier::new(provider.clone()).map_err(|e| e.to_string())?;
        let config = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| e.to_string())?
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(verifier))
            .with_no_client_auth();
        Ok(config)
    })
    .clone()
    .map_err(|e| McpError::Transport(format!("could not set up TLS: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn guard(entries: &[&str]) -> Arc<HostGuard> {
        Arc::new(HostGuard::new(&entries.iter().map(|e| e.to_string()).collect::<Vec<_>>()).unwrap())
    }

    #[tokio::test]
    async fn equal_policies_share_a_client_and_different_ones_do_not() {
        let a = shared_client(ClientKind::Requests, None, None).unwrap();
        let b = shared_client(ClientKind::Requests, None, None).unwrap();
        assert!(Arc::ptr_eq(&a, &b), "two unguarded toolsets share one client");
        let g1 = shared_client(ClientKind::Requests, Some(&guard(&["a.test", "*.b.test"])), None).unwrap();
        let g2 = shared_client(ClientKind::Requests, Some(&guard(&["*.B.test", "A.test."])), None).unwrap();
        assert!(Arc::ptr_eq(&g1, &g2), "equal lists (after normalizing) share");
        assert!(!Arc::ptr_eq(&a, &g1), "a guarded policy never rides an unguarded client");
        let g3 = shared_client(ClientKind::Requests, Some(&guard(&["a.test"])), None).unwrap();
        assert!(!Arc::ptr_eq(&g1, &g3), "a narrower list gets its own client");
        let proxy = Url::parse("http://127.0.0.1:3128").unwrap();
        let p = shared_client(ClientKind::Requests, None, Some(&proxy)).unwrap();
        assert!(!Arc::ptr_eq(&a, &p), "a proxy is part of the key");
        let s = shared_client(ClientKind::Streams, None, None).unwrap();
        assert!(!Arc::ptr_eq(&a, &s), "streams never ride the requests client's HTTP/2 connections");
        assert!(
            Arc::ptr_eq(&s, &shared_client(ClientKind::Streams, None, None).unwrap()),
            "streams clients are shared too"
        );
    }

    #[tokio::test]
    async fn a_client_lives_while_a_toolset_holds_it() {
        let g = guard(&["only-this-test.test"]);
        let first = shared_client(ClientKind::Requests, Some(&g), None).unwrap();
        let weak = Arc::downgrade(&first);
        drop(first);
        assert!(weak.upgrade().is_none(), "the registry holds no client alive");
        let again = shared_client(ClientKind::Requests, Some(&g), None).unwrap();
        assert_eq!(Arc::strong_count(&again), 1);
    }
}
