//! mcpferry: an MCP client engine. The napi glue lives in `napi/` and only converts and delegates.

pub mod auth;
pub mod config;
pub mod config_file;
pub mod diagnostics;
pub mod egress;
pub mod error;
pub mod guard;
pub mod hooks;
pub mod limits;
pub mod logging;
pub mod progress;
pub mod projection;
pub mod protocol;
pub mod purra;
pub mod schema;
pub mod server;
pub mod server_log;
pub mod session;
pub mod shared_state;
pub mod store;
pub mod telemetry;
pub mod toolset;
pub mod transport;

#[cfg(feature = "node")]
mod napi;
