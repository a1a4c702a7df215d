//! One server as a client (`connectMcpServer`): a toolset of one entry whose calls answer with the
//! server's own `CallToolResult` (an `isError` result is a result, not an error) and whose tools can
//! be listed as the server wrote them.
//!
//! Everything else is the toolset's: the transports, the guards (`allowedHosts`, `auth`, `policy`),
//! the bounds, the diagnostics, the refresh on `list_changed`, and the call router (a call goes to the
//! tool the current route table holds under its remote name, through the same gates as `mcpTools`).

use super::Toolset;
use crate::error::{McpError, Result};
use crate::limits::{MAX_JSON_DEPTH, MAX_LIST_PAGES, MAX_TOOLS_PER_SERVER};
use crate::protocol::mcp::{self, ListToolsPage};
use crate::protocol::nesting;
use crate::session::connection::{AbortHandle, RequestOptions};
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use sha2::Digest;
use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

/// The server a client toolset holds: its only one.
const SERVER: usize = 0;

/// Lower bounds a caller may set on one listing (purra's discovery limits); the engine's own
/// (`MAX_LIST_PAGES`, `MAX_TOOLS_PER_SERVER`, the message size) apply whatever is given.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ListBounds {
    pub max_pages: Option<usize>,
    pub max_tools: Option<usize>,
    /// Bytes of every page's result text together.
    pub max_bytes: Option<usize>,
    /// Longest cursor accepted, in bytes.
    pub max_cursor_bytes: Option<usize>,
    /// One deadline for the whole listing, every page included (`mcp_timeout` when it passes).
    pub timeout_ms: Option<u64>,
}

/// A listing with every tool exactly as the server wrote it.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RemoteListing {
    pub tools: Vec<Box<RawValue>>,
    pub pages: usize,
    pub bytes: usize,
    /// Set when the caller's bounds stopped the listing before its end: `pages`, `tools`, `bytes` or
    /// `cursor` (a repeated, empty or oversized cursor). Without bounds these are errors instead.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stopped: Option<&'static str>,
}

/// The session of the client's server, as the host may see it (redacted like the `server-connected`
/// diagnostic).
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ClientSession {
    pub protocol_version: &'static str,
    pub server_info: crate::diagnostics::ServerInfo,
    pub capabilities: Vec<String>,
}

impl Toolset {
    /// Make this toolset a single-server client: from now on calls answer with the server's
    /// `CallToolResult` as sent, `isError` included, and the server's announcements of tool changes are
    /// reported to the owner. Called before it connects.
    pub fn become_client(&self) {
        self.inner.client_mode.store(true, std::sync::atomic::Ordering::SeqCst);
    }

    /// Untrusted text about this server (a result's error text that reached JavaScript) quoted as the
    /// engine quotes it in errors: the server's own secrets (configured headers and env, tokens) and
    /// `extra` replaced, then cut to a few hundred bytes (`guard::redact::quote_bytes`).
    pub fn quote_server_text(&self, text: &str, extra: &crate::guard::redact::Secrets) -> String {
        let redacted = self.inner.servers[SERVER].secrets.redact(text);
        crate::guard::redact::quote_bytes(redacted.as_bytes(), extra)
    }

    /// The connected server's negotiated version and identity; `None` before it connected or after close.
    pub fn session(&self) -> Option<ClientSession> {
        let slot = &self.inner.servers[SERVER];
        let connection = slot.connection()?;
        let session = &connection.session;
        Some(ClientSession {
            protocol_version: session.protocol_version,
            server_info: crate::diagnostics::ServerInfo {
                name: slot.secrets.redact(&session.server_name),
                version: slot.secrets.redact(&session.server_version),
            },
            capabilities: session.capabilities.clone(),
        })
    }

    /// A fresh `tools/list`, page by page, each tool as the server wrote it. The engine's bounds raise
    /// `mcp_protocol_error` (as for `mcpTools`); the caller's lower `bounds` stop the listing and say why
    /// in [`RemoteListing::stopped`]; `bounds.timeout_ms` is one deadline for all of it (`mcp_timeout`).
    /// `abort` (from [`Toolset::listing_abort`]) stops it with `mcp_aborted`.
    /// Its errors carry none of the server's secrets (configured headers and env, tokens).
    pub async fn list_remote(&self, bounds: &ListBounds, abort: Option<ListingAbort>) -> Result<RemoteListing> {
        // The registration lives as long as the listing: `registered` is dropped at the end.
        let registered = abort;
        let abort = registered.as_ref().map(|a| a.handle.clone());
        let deadline = bounds.timeout_ms.map(|ms| (tokio::time::Instant::now() + Duration::from_millis(ms), ms));
        let listing = self.list_remote_unredacted(bounds, abort.as_deref(), deadline.map(|(at, _)| at));
        let aborted = async {
            match &abort {
                Some(abort) => abort.wait().await,
                None => std::future::pending().await,
            }
        };
        let expired = async {
            match deadline {
                Some((at, _)) => tokio::time::sleep_until(at).await,
                None => std::future::pending().await,
            }
        };
        // Covers the waits between requests too (the server still connecting, the next page).
        let listed = tokio::select! {
            biased;
            _ = aborted => Err(McpError::Aborted),
            _ = expired => Err(McpError::Timeout { after_ms: deadline.map_or(0, |(_, ms)| ms) }),
            listed = listing => listed,
        };
        drop(registered);
        listed.map_err(|e| e.redacted(&self.inner.servers[SERVER].secrets))
    }

    /// Register a listing about to start under `abort_id` (given by the caller, not 0), so that
    /// [`Toolset::abort_listing`] reaches it from now on, before it starts included. Unregistered when
    /// the returned value is dropped (with the listing).
    pub fn listing_abort(&self, abort_id: u32) -> ListingAbort {
        let handle = Arc::new(AbortHandle::default());
        self.inner.listing_aborts.lock().insert(abort_id, handle.clone());
        ListingAbort { inner: self.inner.clone(), abort_id, handle }
    }

    /// The caller's signal fired for the listing registered under `abort_id`; nothing for one that ended.
    pub fn abort_listing(&self, abort_id: u32) {
        let handle = self.inner.listing_aborts.lock().get(&abort_id).cloned();
        if let Some(handle) = handle {
            handle.abort();
        }
    }

    async fn list_remote_unredacted(
        &self,
        bounds: &ListBounds,
        abort: Option<&AbortHandle>,
        deadline: Option<tokio::time::Instant>,
    ) -> Result<RemoteListing> {
        let inner = &self.inner;
        if inner.cancel.is_cancelled() {
            return Err(McpError::Closed);
        }
        let slot = &inner.servers[SERVER];
        let live = super::calls::wait_live(slot, inner.timeout).await;
        let connection = match live {
            _ if inner.cancel.is_cancelled() => return Err(McpError::Closed),
            Ok(()) => slot.connection().ok_or_else(|| slot.unavailable())?,
            Err(error) => return Err(error),
        };
        let max_pages = bounds.max_pages.unwrap_or(MAX_LIST_PAGES).min(MAX_LIST_PAGES);
        let max_tools = bounds.max_tools.unwrap_or(MAX_TOOLS_PER_SERVER).min(MAX_TOOLS_PER_SERVER);
        let mut listing = RemoteListing { tools: Vec::new(), pages: 0, bytes: 0, stopped: None };
        let mut cursors: HashSet<[u8; 32]> = HashSet::new();
        let mut cursor: Option<String> = None;
        let stop = |listing: &mut RemoteListing, why: &'static str, error: String| -> Result<()> {
            if bounded(bounds) {
                listing.stopped = Some(why);
                Ok(())
            } else {
                Err(McpError::Protocol(error))
            }
        };
        loop {
            let params = mcp::list_tools_params(cursor.as_deref());
            // Each page's request has what is left of the deadline, so the connection's own timeout
            // (which tells the server to cancel) fires rather than the listing's.
            let timeout =
                deadline.map_or(inner.timeout, |at| at.saturating_duration_since(tokio::time::Instant::now()));
            let opts = RequestOptions { timeout, abort };
            let raw = tokio::select! {
                biased;
                _ = inner.cancel.cancelled() => return Err(McpError::Closed),
                raw = connection.request("tools/list", params.as_deref(), &opts) => raw?,
            };
            listing.pages += 1;
            listing.bytes += raw.get().len();
            if bounds.max_bytes.is_some_and(|max| listing.bytes > max) {
                listing.stopped = Some("bytes");
                return Ok(listing);
            }
            if nesting::exceeds_depth(raw.get().as_bytes(), MAX_JSON_DEPTH + 2) {
                return Err(McpError::Protocol(format!(
                    "tools/list returned tools nested deeper than {MAX_JSON_DEPTH} levels"
                )));
            }
            let page: ListToolsPage = serde_json::from_str(raw.get()).map_err(malformed_page)?;
            if listing.tools.len() + page.tools.len() > max_tools {
                stop(&mut listing, "tools", format!("the server published more than {max_tools} tools"))?;
                return Ok(listing);
            }
            listing.tools.extend(page.tools.iter().map(|tool| (*tool).to_owned()));
            let Some(next) = page.next_cursor else { return Ok(listing) };
            let oversized = bounds.max_cursor_bytes.is_some_and(|max| next.len() > max);
            if next.is_empty() || oversized || !cursors.insert(sha2::Sha256::digest(next.as_bytes()).into()) {
                let shown: String = next.chars().take(64).collect();
                stop(
                    &mut listing,
                    "cursor",
                    format!("tools/list repeated or sent an unusable cursor {shown:?}; refusing a pagination loop"),
                )?;
                return Ok(listing);
            }
            if listing.pages >= max_pages {
                stop(&mut listing, "pages", format!("tools/list did not finish within {max_pages} pages"))?;
                return Ok(listing);
            }
            cursor = Some(next);
        }
    }
}

/// A listing's registration for [`Toolset::abort_listing`], removed when dropped.
pub struct ListingAbort {
    inner: Arc<super::ToolsetState>,
    abort_id: u32,
    pub(super) handle: Arc<AbortHandle>,
}

impl Drop for ListingAbort {
    fn drop(&mut self) {
        let mut aborts = self.inner.listing_aborts.lock();
        // A later listing may have taken the id over; only this one's entry goes.
        if aborts.get(&self.abort_id).is_some_and(|h| Arc::ptr_eq(h, &self.handle)) {
            aborts.remove(&self.abort_id);
        }
    }
}

/// A page that is not a `ListToolsResult`, said without serde's message: that quotes the server's
/// strings whole (`invalid type: string "…"`), of any length and with whatever they hold.
fn malformed_page(error: serde_json::Error) -> McpError {
    let kind = match error.classify() {
        serde_json::error::Category::Data => "a value of the wrong type or shape",
        serde_json::error::Category::Syntax | serde_json::error::Category::Eof => "invalid JSON",
        serde_json::error::Category::Io => "unreadable text",
    };
    McpError::Protocol(format!(
        "tools/list returned a malformed result: {kind} at line {} column {}",
        error.line(),
        error.column()
    ))
}

/// Whether the caller's bounds, not the engine's, govern this kind of stop: any bound given makes every
/// stop a verdict for the caller to judge (purra turns it into its own code).
fn bounded(bounds: &ListBounds) -> bool {
    bounds.max_pages.is_some()
        || bounds.max_tools.is_some()
        || bounds.max_bytes.is_some()
        || bounds.max_cursor_bytes.is_some()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_malformed_page_is_described_without_quoting_the_server() {
        let page = r#"{"tools":"leaked sk-live-0123456789abcdef"}"#;
        let error = malformed_page(serde_json::from_str::<ListToolsPage>(page).unwrap_err());
        assert_eq!(error.code(), "mcp_protocol_error");
        let message = error.to_string();
        assert!(!message.contains("leaked") && message.contains("wrong type"), "{message}");
    }

    #[test]
    fn bounds_refuse_unknown_keys() {
        assert!(serde_json::from_str::<ListBounds>(r#"{"maxPages":3}"#).is_ok());
        assert!(serde_json::from_str::<ListBounds>(r#"{"maxPagez":3}"#).is_err());
    }
}
