//! The JavaScript boundary: the only napi-aware code. Each file converts and delegates; every
//! decision is made in the engine.
//!
//! | file          | holds                                                                          |
//! |---------------|--------------------------------------------------------------------------------|
//! | `errors.rs`   | `McpError` → JS error with `err.code`; panic containment for every entry point  |
//! | `runtime.rs`  | the engine's tokio runtime (one worker, a blocking pool sized for blocking work) |
//! | `hooks.rs`    | the application's callbacks and the event channel, as threadsafe functions      |
//! | `wire.rs`     | the call-batch and completion-batch formats that cross on the hot path          |
//! | `toolset.rs`  | `NativeToolset`: a toolset and the stdio readers JavaScript runs for it         |
//! | `store.rs`    | `NativeStore` (memory, SQLite) and stores implemented in JavaScript             |
//! | `token_store.rs` | `NativeTokenStore` (memory, OS keyring, encrypted file) and JS token stores  |
//! | `redact.rs`   | `quoteUntrustedText`: the engine's redaction for text JavaScript holds       |
//! | `server.rs`   | `NativeServer`: `createMcpServer`'s core, its listeners, the host's `execute`      |
//! | `session.rs`  | resources, prompts, completions, skills of a `NativeToolset`; blobs as bytes    |
//! | `registry.rs` | engine objects JavaScript holds (stores, token stores), by id, held weakly      |
//! | `schema.rs`   | `JsonSchemaValidator`: a JSON Schema compiled once, validating JSON text         |
//! | `client.rs`   | `connectMcpServer`: a `NativeToolset` of one entry used as a single-server client |
//! | `firewall.rs` | `NativeJournal` (memory, SQLite, Postgres, JavaScript) and the firewall's decisions |
//! | `purra.rs`    | `mcpferry/purra`'s engine half: verdicts on bound tools and results, as JSON     |
//!
//! JSON crosses as strings, never as napi objects (a string crosses in under a microsecond, an object
//! graph in tens). Every failure crosses as a JS `Error` whose `code` is the `McpError` code.

mod client;
mod errors;
mod firewall;
mod hooks;
mod purra;
mod redact;
mod registry;
mod runtime;
mod schema;
mod server;
mod session;
mod store;
mod token_store;
mod toolset;
mod wire;

use napi_derive::napi;

/// The engine's own version, to check that the loaded binary matches the package.
#[napi]
#[allow(dead_code)] // called from JavaScript only
pub fn engine_version() -> String {
    env!("CARGO_PKG_VERSION").to_owned()
}

/// What the TypeScript layer must agree on with the engine, defined once here: every error code
/// (each maps to an error class), the public constants, and the defaults the options fall back to.
#[napi]
#[allow(dead_code)] // called from JavaScript only
pub fn engine_constants() -> String {
    use crate::limits::{
        DEFAULT_MAX_RESULT_BYTES, DEFAULT_SERVER_CALL_TIMEOUT_MS, DEFAULT_TIMEOUT_MS, MAX_CONFIG_FILE_BYTES,
    };
    use crate::projection::disclosure as d;
    serde_json::json!({
        "errorCodes": crate::error::McpError::codes(),
        "defaultDisclosureBudgetTokens": d::DEFAULT_DISCLOSURE_BUDGET_TOKENS,
        "defaultContextWindowTokens": d::DEFAULT_CONTEXT_WINDOW_TOKENS,
        "charsPerToken": d::CHARS_PER_TOKEN,
        "describeTool": d::MCP_DESCRIBE_TOOL,
        "searchTools": d::MCP_SEARCH_TOOLS,
        "toolNameSeparator": crate::projection::naming::SEPARATOR,
        "defaultTimeoutMs": DEFAULT_TIMEOUT_MS,
        "defaultMaxResultBytes": DEFAULT_MAX_RESULT_BYTES,
        "configMarkerKey": crate::config::MARKER_KEY,
        "maxConfigFileBytes": MAX_CONFIG_FILE_BYTES,
        "defaultServerCallTimeoutMs": DEFAULT_SERVER_CALL_TIMEOUT_MS,
        "serverAbortCall": server::ABORT_CALL,
        "localServer": crate::toolset::LOCAL_SERVER,
        "serverServedReport": server::SERVED_REPORT,
    })
    .to_string()
}

/// `loadMcpConfig`: a configuration file's text (`format` json or toml; `source` names it in errors;
/// `options` the JSON of `config_file::LoadOptions`: the file's path, the home and current directories,
/// strict) as `{"servers": [...], "disabled": [...], "warnings": [...]}` (see `config_file`).
#[napi]
#[allow(dead_code)] // called from JavaScript only
pub fn load_mcp_config(text: String, source: String, format: String, options: String) -> napi::Result<String, String> {
    errors::guard("loadMcpConfig", || {
        let options: crate::config_file::LoadOptions = serde_json::from_str(&options)
            .map_err(|e| crate::error::McpError::config(format!("loadMcpConfig options: {e}")))?;
        crate::config_file::load(&text, &source, &format, &options)
    })
}
