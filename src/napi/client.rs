//! `connectMcpServer`: a `NativeToolset` of one entry, used as a single-server client. These functions
//! convert and delegate to `toolset::client`.

use super::errors::{guard, settle};
use super::toolset::NativeToolset;
use crate::error::McpError;
use crate::toolset::ListBounds;
use napi::bindgen_prelude::*;
use napi_derive::napi;

/// Make `toolset` a client: its calls answer with the server's `CallToolResult` as sent, and the
/// server's announcements of tool changes come as `tools-announced` events. Called before it connects.
#[napi]
#[allow(dead_code)] // called from JavaScript only
pub fn client_mode(toolset: &NativeToolset) -> napi::Result<(), String> {
    guard("clientMode", || {
        toolset.inner.become_client();
        Ok(())
    })
}

/// `{"protocolVersion", "serverInfo": {name, version}, "capabilities": [...]}` of the connected server,
/// or null when it is not connected.
#[napi]
#[allow(dead_code)] // called from JavaScript only
pub fn client_session(toolset: &NativeToolset) -> napi::Result<Option<String>, String> {
    guard("clientSession", || {
        Ok(toolset.inner.session().map(|s| serde_json::to_string(&s).expect("a session serializes")))
    })
}

/// A fresh listing, every tool as the server wrote it: `{"tools": [...], "pages", "bytes", "stopped"?}`.
/// `boundsJson` holds the caller's lower bounds (`maxPages`, `maxTools`, `maxBytes`, `maxCursorBytes`,
/// `timeoutMs`: one deadline for the whole listing), or is empty. `abortId` (not 0) names the listing for
/// `clientAbortListing`.
#[napi(ts_return_type = "Promise<string>")]
#[allow(dead_code)] // called from JavaScript only
pub fn client_list_tools<'env>(
    env: &'env Env,
    toolset: &NativeToolset,
    bounds_json: String,
    abort_id: u32,
) -> napi::Result<PromiseRaw<'env, String>> {
    let inner = toolset.inner.clone();
    // Registered now, so a signal that fires before the listing starts still reaches it.
    let abort = (abort_id != 0).then(|| inner.listing_abort(abort_id));
    let listed = async move {
        let bounds: ListBounds = if bounds_json.is_empty() {
            ListBounds::default()
        } else {
            serde_json::from_str(&bounds_json).map_err(|e| McpError::config(format!("invalid listing bounds: {e}")))?
        };
        let listing = inner.list_remote(&bounds, abort).await?;
        Ok(serde_json::to_string(&listing).expect("a listing serializes"))
    };
    settle(env, "clientListTools", listed, |json| json)
}

/// The caller's signal fired for the listing started with `abortId`: it ends with `mcp_aborted`.
#[napi]
#[allow(dead_code)] // called from JavaScript only
pub fn client_abort_listing(toolset: &NativeToolset, abort_id: u32) -> napi::Result<(), String> {
    guard("clientAbortListing", || {
        super::runtime::within_runtime(|| toolset.inner.abort_listing(abort_id));
        Ok(())
    })
}
