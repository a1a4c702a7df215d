//! Every rule that decides what the engine may touch lives in this folder, so one review covers it.

pub mod containment;
pub mod filter;
pub mod firewall;
pub mod headers;
pub mod hosts;
pub mod policy;
pub mod redact;
pub mod server_text;
