//! Header values of the modern era (2026-07-28), as `Mcp-Name` carries them: plain when every character
//! is visible ASCII (or an inner space or tab) with no surrounding whitespace, else `=?base64?…?=` of the
//! UTF-8 bytes, as the Streamable HTTP transport's "value encoding" specifies.

use base64::engine::general_purpose::STANDARD;
use base64::Engine;

pub fn encode_header_value(value: &str) -> String {
    let plain = value.chars().all(|c| c == ' ' || c.is_ascii_graphic())
        && !value.starts_with(' ')
        && !value.ends_with(' ')
        && !(value.starts_with("=?base64?") && value.ends_with("?="));
    if plain {
        value.to_owned()
    } else {
        format!("=?base64?{}?=", STANDARD.encode(value.as_bytes()))
    }
}
