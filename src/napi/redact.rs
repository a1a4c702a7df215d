//! `quoteUntrustedText`: the engine's quoting of untrusted text (`transport::quote_bytes`: secrets
//! replaced before the cut, at most `MAX_QUOTED_BYTES` shown, control characters blanked) for text
//! that reached JavaScript some other way, such as the error of an MCP client the application brought
//! (`defineMcpTool`'s diagnostics). `secrets` are values to replace, read like configured header
//! values (a scheme's credential and cookie values count on their own too).

use crate::guard::redact::Secrets;
use napi_derive::napi;

/// Untrusted text as the engine quotes it in errors: every `secrets` value replaced, at most a few
/// hundred bytes shown, control characters blanked.
#[napi]
#[allow(dead_code)] // called from JavaScript only
pub fn quote_untrusted_text(text: String, secrets: Vec<String>) -> napi::Result<String, String> {
    super::errors::guard("quoteUntrustedText", || {
        let known = Secrets::default();
        for secret in &secrets {
            known.add_header_value(secret.as_bytes());
            known.add_embedded_url_password(secret);
        }
        Ok(crate::transport::quote_bytes(text.as_bytes(), &known))
    })
}
