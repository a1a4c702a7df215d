//! mcpferry: an MCP client engine. The napi glue lives in `napi/` and only converts and delegates.

pub mod auth;
pub mod catalog;
pub mod config;
pub mod config_file;
pub mod connection;
pub mod diagnostics;
pub mod egress;
pub mod elicitation;
pub mod error;
pub mod guard;
pub mod hooks;
pub mod limits;
pub mod logging;
pub mod mrtr;
pub mod progress;
pub mod projection;
pub mod protocol;
pub mod purra;
pub mod schema;
pub mod server;
pub mod server_log;
pub mod session;
pub mod store;
pub mod telemetry;
pub mod toolset;
pub mod transport;

#[cfg(feature = "node")]
mod napi;
