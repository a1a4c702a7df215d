//! A copy of `AuthServerMetadata` as AUTH.md defines it, so the grants compile before the lead's
//! `discovery.rs` lands. The lead replaces this file with the real one.

use url::Url;

#[derive(Debug, Clone)]
pub struct AuthServerMetadata {
    pub issuer: String,
    pub authorization_endpoint: Option<Url>,
    pub token_endpoint: Url,
    pub registration_endpoint: Option<Url>,
    pub device_authorization_endpoint: Option<Url>,
    pub revocation_endpoint: Option<Url>,
    pub scopes_supported: Option<Vec<String>>,
    pub grant_types_supported: Option<Vec<String>>,
    pub token_endpoint_auth_methods_supported: Option<Vec<String>>,
    pub code_challenge_methods_supported: Option<Vec<String>>,
    pub client_id_metadata_document_supported: bool,
    pub authorization_response_iss_parameter_supported: bool,
}
