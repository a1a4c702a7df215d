//! `mcpferry/purra`'s engine half (see `crate::purra`). Each function takes JSON text and answers a
//! verdict as JSON: `{"ok": true, …}` or `{"ok": false, "code": "<purra code>"}`. A refusal is a value,
//! not a thrown error: purra's codes are the contract's own, and lib/purra.ts decides whether one
//! fails discovery (thrown as `McpAdapterError`) or one call (the empty envelope with `errorCode`).

use super::errors::guard;
use crate::purra;
use napi_derive::napi;
use serde::Serialize;

fn verdict<T: Serialize>(outcome: Result<T, purra::Code>) -> String {
    match outcome {
        Ok(value) => serde_json::json!({ "ok": true, "value": value }).to_string(),
        Err(code) => serde_json::json!({ "ok": false, "code": code }).to_string(),
    }
}

fn limits_or_default(limits_json: &str) -> purra::Limits {
    purra::limits(limits_json).unwrap_or(purra::DEFAULT_LIMITS)
}

/// The host's `limits` JSON over the defaults: `value` is every limit.
#[napi]
#[allow(dead_code)] // called from JavaScript only
pub fn purra_limits(limits_json: String) -> napi::Result<String, String> {
    guard("purraLimits", || Ok(verdict(purra::limits(&limits_json))))
}

/// One bound tool definition (as listed) under `limitsJson` (already checked): `value` is
/// `{remoteName, description, inputSchema, outputSchema}`.
#[napi]
#[allow(dead_code)] // called from JavaScript only
pub fn purra_vet_tool(tool_json: String, limits_json: String) -> napi::Result<String, String> {
    guard("purraVetTool", || Ok(verdict(purra::vet_tool(&tool_json, &limits_or_default(&limits_json)))))
}

/// One `CallToolResult`: `value` is `{text, structured}`.
#[napi]
#[allow(dead_code)] // called from JavaScript only
pub fn purra_shape_result(result_json: String, limits_json: String) -> napi::Result<String, String> {
    guard("purraShapeResult", || Ok(verdict(purra::shape_result(&result_json, &limits_or_default(&limits_json)))))
}

/// The `purra.json-identity/v1` digest of `valueJson`; `null` when it is over the identity bounds.
#[napi]
#[allow(dead_code)] // called from JavaScript only
pub fn purra_identity_digest(value_json: String) -> napi::Result<Option<String>, String> {
    guard("purraIdentityDigest", || {
        Ok(serde_json::from_str(&value_json).ok().and_then(|value| purra::identity_digest(&value)))
    })
}
