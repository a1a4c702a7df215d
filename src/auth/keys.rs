//! Token-store keys. They name what a value is for without carrying it: issuers and resources are
//! hashed (a server URL's query may hold a key, and OS secret stores limit key length).

use sha2::{Digest, Sha256};

const PREFIX: &str = "mcpferry/oauth/v1";

fn hash(parts: &[&str]) -> String {
    let mut digest = Sha256::new();
    for part in parts {
        digest.update((part.len() as u64).to_be_bytes());
        digest.update(part.as_bytes());
    }
    digest.finalize()[..16].iter().map(|b| format!("{b:02x}")).collect()
}

/// The client registered at `issuer`.
pub fn client(issuer: &str) -> String {
    format!("{PREFIX}/client/{}", hash(&[issuer]))
}

/// The tokens `issuer` issued for `resource`: keyed by both, so they are never presented to another
/// authorization server's flow nor sent to another resource.
pub fn tokens(issuer: &str, resource: &str) -> String {
    format!("{PREFIX}/tokens/{}", hash(&[issuer, resource]))
}

/// Which issuer and resource the server at `server_url` was last authorized with (no secret).
pub fn server(server_url: &str) -> String {
    format!("{PREFIX}/server/{}", hash(&[server_url]))
}

#[cfg(test)]
mod tests {
    #[test]
    fn keys_are_distinct_and_carry_no_url() {
        let a = super::tokens("https://as", "https://r/mcp?key=secret");
        assert_ne!(a, super::tokens("https://as2", "https://r/mcp?key=secret"));
        assert_ne!(super::tokens("ab", "c"), super::tokens("a", "bc"));
        assert!(!a.contains("secret") && !a.contains("https"));
    }
}
