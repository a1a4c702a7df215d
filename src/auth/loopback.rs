//! The loopback redirect listener of an interactive login (RFC 8252 §7.3): a socket on 127.0.0.1 that
//! takes the one redirect carrying this flow's `state`, answers the browser with a short page, and closes.
//!
//! It binds before the authorization URL is shown, serves nothing but `GET <path>`, ignores (and answers
//! 400 to) requests without the expected `state` up to a bound, and reads each request head under a
//! size and time limit, so a local process poking at the port can neither stall nor flood it.

use crate::error::{McpError, Result};
use crate::limits::{
    LOOPBACK_READ_TIMEOUT_MS, MAX_LOOPBACK_CONNECTIONS, MAX_LOOPBACK_REQUEST_BYTES, MAX_LOOPBACK_STRAY_REQUESTS,
};
use std::collections::HashMap;
use std::net::{Ipv4Addr, SocketAddr};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use url::Url;

/// The default redirect path on the loopback listener.
const CALLBACK_PATH: &str = "/callback";

pub struct Loopback {
    listener: TcpListener,
    path: String,
    /// The `redirect_uri` of this flow.
    pub redirect_uri: Url,
}

/// What the authorization server sent back through the browser.
pub struct Redirect {
    pub params: HashMap<String, String>,
}

impl Loopback {
    /// Listen on the configured loopback redirect URI's port, or on a free port of 127.0.0.1.
    pub async fn bind(configured: Option<&Url>) -> Result<Loopback> {
        let (port, path, redirect_host) = match configured {
            Some(url) => {
                (url.port().unwrap_or(80), url.path().to_owned(), url.host_str().unwrap_or("127.0.0.1").to_owned())
            }
            None => (0, CALLBACK_PATH.to_owned(), "127.0.0.1".to_owned()),
        };
        let listener = TcpListener::bind(SocketAddr::from((Ipv4Addr::LOCALHOST, port)))
            .await
            .map_err(|e| McpError::Auth(format!("could not listen for the login redirect on 127.0.0.1:{port}: {e}")))?;
        let port = listener.local_addr()?.port();
        let redirect_uri = Url::parse(&format!("http://{redirect_host}:{port}{path}"))
            .map_err(|_| McpError::config("oauth.redirectUri is not a valid loopback URL"))?;
        Ok(Loopback { listener, path, redirect_uri })
    }

    /// Wait for the redirect that carries `state`. Connections are served side by side (a browser's idle
    /// speculative connection must not hold up the real one), at most `MAX_LOOPBACK_CONNECTIONS` at once;
    /// every one still open ends with this future.
    pub async fn wait(self, state: &str) -> Result<Redirect> {
        let page = std::sync::Arc::new(Page { path: self.path.clone(), state: state.to_owned() });
        let mut serving = tokio::task::JoinSet::new();
        let mut strays = 0;
        loop {
            tokio::select! {
                accepted = self.listener.accept(), if serving.len() < MAX_LOOPBACK_CONNECTIONS => {
                    let (stream, _) = accepted?;
                    serving.spawn(page.clone().serve(stream));
                }
                Some(served) = serving.join_next() => match served.ok().flatten() {
                    Some(redirect) => return Ok(redirect),
                    None => {
                        strays += 1;
                        if strays >= MAX_LOOPBACK_STRAY_REQUESTS {
                            return Err(McpError::Auth("the login redirect listener got too many unrelated requests; giving up".into()));
                        }
                    }
                },
            }
        }
    }
}

/// What the listener answers to.
struct Page {
    path: String,
    state: String,
}

impl Page {
    /// Answer one connection; the redirect if it is the one this flow waits for.
    async fn serve(self: std::sync::Arc<Self>, mut stream: TcpStream) -> Option<Redirect> {
        let state = self.state.as_str();
        let head = tokio::time::timeout(Duration::from_millis(LOOPBACK_READ_TIMEOUT_MS), read_head(&mut stream))
            .await
            .ok()
            .flatten();
        let params = head.as_deref().and_then(|head| self.parse(head));
        let ours = params.as_ref().is_some_and(|p| p.get("state").map(String::as_str) == Some(state));
        let (status, page) = match (&params, ours) {
            (Some(p), true) if p.contains_key("error") => {
                ("200 OK", "The login was not completed. You can close this window.")
            }
            (_, true) => ("200 OK", "Logged in. You can close this window and return to the application."),
            _ => ("400 Bad Request", "This is not the login this application is waiting for."),
        };
        let body = format!("<!doctype html><meta charset=utf-8><title>mcpferry</title><p>{page}</p>\n");
        let response = format!(
            "HTTP/1.1 {status}\r\ncontent-type: text/html; charset=utf-8\r\ncontent-length: {}\r\ncache-control: no-store\r\nconnection: close\r\n\r\n{body}",
            body.len()
        );
        let _ = tokio::time::timeout(
            Duration::from_millis(LOOPBACK_READ_TIMEOUT_MS),
            stream.write_all(response.as_bytes()),
        )
        .await;
        let _ = stream.shutdown().await;
        if ours {
            params.map(|params| Redirect { params })
        } else {
            None
        }
    }

    /// The query of `GET <path>?…`, if that is the request.
    fn parse(&self, head: &str) -> Option<HashMap<String, String>> {
        let mut parts = head.lines().next()?.split(' ');
        let (method, target) = (parts.next()?, parts.next()?);
        if method != "GET" {
            return None;
        }
        let url = Url::parse(&format!("http://127.0.0.1{target}")).ok()?;
        if url.path() != self.path {
            return None;
        }
        Some(url.query_pairs().into_owned().collect())
    }
}

/// The request head (up to the blank line), bounded.
async fn read_head(stream: &mut TcpStream) -> Option<String> {
    let mut head = Vec::new();
    let mut buf = [0u8; 2048];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") {
        let n = stream.read(&mut buf).await.ok()?;
        if n == 0 || head.len() + n > MAX_LOOPBACK_REQUEST_BYTES {
            return None;
        }
        head.extend_from_slice(&buf[..n]);
    }
    String::from_utf8(head).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn get(url: &str) -> String {
        let url = Url::parse(url).unwrap();
        let mut stream = TcpStream::connect((url.host_str().unwrap(), url.port().unwrap())).await.unwrap();
        let target = match url.query() {
            Some(q) => format!("{}?{q}", url.path()),
            None => url.path().to_owned(),
        };
        stream.write_all(format!("GET {target} HTTP/1.1\r\nhost: x\r\n\r\n").as_bytes()).await.unwrap();
        let mut out = String::new();
        stream.read_to_string(&mut out).await.unwrap();
        out
    }

    #[tokio::test]
    async fn takes_only_the_redirect_with_its_state() {
        let loopback = Loopback::bind(None).await.unwrap();
        let base = loopback.redirect_uri.clone();
        assert_eq!(base.host_str(), Some("127.0.0.1"));
        assert_eq!(base.path(), "/callback");
        let waiting = tokio::spawn(loopback.wait("s1"));
        assert!(get(&format!("{base}?code=c&state=wrong")).await.starts_with("HTTP/1.1 400"));
        let other_path = base.join("/elsewhere?state=s1&code=c").unwrap();
        assert!(get(other_path.as_str()).await.starts_with("HTTP/1.1 400"));
        assert!(get(&format!("{base}?code=the-code&state=s1&iss=https%3A%2F%2Fas")).await.starts_with("HTTP/1.1 200"));
        let redirect = waiting.await.unwrap().unwrap();
        assert_eq!(redirect.params["code"], "the-code");
        assert_eq!(redirect.params["iss"], "https://as");
    }

    #[tokio::test]
    async fn a_flood_of_strays_ends_the_wait() {
        let loopback = Loopback::bind(None).await.unwrap();
        let base = loopback.redirect_uri.clone();
        let waiting = tokio::spawn(loopback.wait("s"));
        for _ in 0..MAX_LOOPBACK_STRAY_REQUESTS {
            get(&format!("{base}?state=no")).await;
        }
        assert!(matches!(waiting.await.unwrap(), Err(McpError::Auth(_))));
    }
}
