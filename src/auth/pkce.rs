//! PKCE (RFC 7636, S256 only) and the unguessable values of a flow (`state`), from the operating system's
//! random source through ring, the crypto provider the engine already uses for TLS.

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use ring::rand::{SecureRandom, SystemRandom};
use sha2::{Digest, Sha256};

/// Random bytes behind a verifier or a state value: 32 bytes give a 43-character verifier, inside
/// RFC 7636's 43..=128.
const RANDOM_VALUE_BYTES: usize = 32;

/// `n` random bytes as base64url without padding.
pub fn random_value(n: usize) -> String {
    let mut bytes = vec![0u8; n];
    SystemRandom::new().fill(&mut bytes).expect("the operating system's random source failed");
    URL_SAFE_NO_PAD.encode(bytes)
}

/// An unguessable `state` for one authorization request.
pub fn state() -> String {
    random_value(RANDOM_VALUE_BYTES)
}

/// A verifier and its S256 challenge. The verifier never leaves the engine except in the token request.
pub struct Pkce {
    pub verifier: String,
    pub challenge: String,
}

impl Default for Pkce {
    fn default() -> Pkce {
        Pkce::new()
    }
}

impl Pkce {
    pub fn new() -> Pkce {
        let verifier = random_value(RANDOM_VALUE_BYTES);
        let challenge = URL_SAFE_NO_PAD.encode(Sha256::digest(verifier.as_bytes()));
        Pkce { verifier, challenge }
    }
}

impl std::fmt::Debug for Pkce {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pkce").field("challenge", &self.challenge).finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_challenge_is_the_s256_of_the_verifier() {
        // RFC 7636 appendix B.
        let challenge = URL_SAFE_NO_PAD.encode(Sha256::digest(b"dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk"));
        assert_eq!(challenge, "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM");
        let pkce = Pkce::new();
        assert_eq!(pkce.verifier.len(), 43);
        assert_eq!(pkce.challenge, URL_SAFE_NO_PAD.encode(Sha256::digest(pkce.verifier.as_bytes())));
        assert_ne!(Pkce::new().verifier, pkce.verifier);
        assert!(!format!("{pkce:?}").contains(&pkce.verifier));
    }
}
