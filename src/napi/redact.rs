//! `quoteUntrustedText` and `clientQuoteText`: the engine's quoting of untrusted text
//! (`guard::redact::quote_bytes`: secrets replaced before the cut, at most `MAX_QUOTED_BYTES` shown, control
//! characters blanked) for text that reached JavaScript some other way, such as the error of an MCP client the application brought
//! (`defineMcpTool`'s diagnostics); for a `connectMcpServer` client, with its server's secrets too.
//! `secrets` are values to replace, read like configured header values (a scheme's credential and cookie
//! values count on their own too). `redactStdioArguments`: a stdio entry's arguments with the engine's
//! redaction of that entry's credentials applied (what `mcpferry status` shows).

use super::toolset::NativeToolset;
use crate::guard::redact::Secrets;
use napi_derive::napi;

fn secrets_of(values: &[String]) -> Secrets {
    let known = Secrets::default();
    for value in values {
        known.add_header_value(value.as_bytes());
        known.add_embedded_url_password(value);
    }
    known
}

/// Untrusted text as the engine quotes it in errors: every `secrets` value replaced, at most a few
/// hundred bytes shown, control characters blanked.
#[napi]
#[allow(dead_code)] // called from JavaScript only
pub fn quote_untrusted_text(text: String, secrets: Vec<String>) -> napi::Result<String, String> {
    super::errors::guard("quoteUntrustedText", || {
        Ok(crate::guard::redact::quote_bytes(text.as_bytes(), &secrets_of(&secrets)))
    })
}

/// A stdio entry's arguments as `mcpferry status` shows them: every place a credential goes replaced
/// (`redact::shown_arguments`: `NAME=VALUE` values, credential flags' values, URL userinfo and query,
/// key-like tokens), then the entry's own secrets (`Secrets::add_stdio_entry`) wherever they still appear.
#[napi]
#[allow(dead_code)] // called from JavaScript only
pub fn redact_stdio_arguments(
    args: Vec<String>,
    env: std::collections::HashMap<String, String>,
) -> napi::Result<Vec<String>, String> {
    super::errors::guard("redactStdioArguments", || {
        let secrets = Secrets::default();
        secrets.add_stdio_entry(&env.into_iter().collect(), &args);
        // Safe by construction (every place a credential goes), then the entry's own secrets on top.
        Ok(crate::guard::redact::shown_arguments(&args).iter().map(|arg| secrets.redact(arg)).collect())
    })
}

/// Like `quoteUntrustedText`, for text about the server of a `connectMcpServer` client: that server's
/// own secrets (configured headers and env values, its tokens) are replaced too.
#[napi]
#[allow(dead_code)] // called from JavaScript only
pub fn client_quote_text(toolset: &NativeToolset, text: String, secrets: Vec<String>) -> napi::Result<String, String> {
    super::errors::guard("clientQuoteText", || Ok(toolset.inner.quote_server_text(&text, &secrets_of(&secrets))))
}
