//! OAuth 2.1 authorization for HTTP servers. (Module list only, from the grants branch: the lead's
//! mod.rs replaces this file.)

pub mod client_credentials;
pub mod cross_app;
pub mod device;
pub mod jwt;
/// A copy of the lead's `AuthServerMetadata` (AUTH.md) until `discovery.rs` lands.
pub mod metadata_stub;
pub mod token;
