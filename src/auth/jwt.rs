//! Compact JWS signing (RFC 7515) for client assertions (RFC 7523 §2.2, `private_key_jwt`).
//!
//! ring does the cryptography: it is already linked through rustls, so the engine keeps one crypto
//! stack (the `jsonwebtoken` crate would bring RustCrypto or aws-lc beside it). ES256 signatures are
//! ECDSA P-256 SHA-256 in the fixed-size `r || s` form JWS requires; RS256 is RSASSA-PKCS1-v1_5 SHA-256.
//! Keys are PKCS#8 PEM (`-----BEGIN PRIVATE KEY-----`), parsed by rustls-pki-types.

use crate::auth::token::SigningAlgorithm;
use crate::error::{McpError, Result};
use crate::limits::OAUTH_CLIENT_ASSERTION_LIFETIME_SECS;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use ring::rand::{SecureRandom, SystemRandom};
use ring::signature::{EcdsaKeyPair, RsaKeyPair, ECDSA_P256_SHA256_FIXED_SIGNING, RSA_PKCS1_SHA256};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{PrivateKeyDer, PrivatePkcs8KeyDer};
use serde_json::{json, Value};
use std::time::{SystemTime, UNIX_EPOCH};

/// Random bytes in a `jti` (128 bits: unique without coordination).
const JTI_BYTES: usize = 16;

/// A private key ready to sign. Its Debug shows the algorithm only.
pub struct SigningKey {
    pair: KeyPair,
    rng: SystemRandom,
}

enum KeyPair {
    Es256(EcdsaKeyPair),
    Rs256(RsaKeyPair),
}

impl std::fmt::Debug for SigningKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SigningKey").field("algorithm", &self.algorithm()).finish_non_exhaustive()
    }
}

impl SigningKey {
    /// Parse a PKCS#8 PEM key for `algorithm`. Every failure is `mcp_config_invalid` with a message that
    /// says what is wrong and never quotes the key.
    pub fn from_pem(pem: &str, algorithm: SigningAlgorithm) -> Result<SigningKey> {
        let der = pkcs8_der(pem)?;
        let rng = SystemRandom::new();
        let pair = match algorithm {
            SigningAlgorithm::Es256 => {
                EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, der.secret_pkcs8_der(), &rng)
                    .map(KeyPair::Es256)
                    .map_err(|_| McpError::config("oauth.privateKey is not a PKCS#8 EC P-256 key, which ES256 needs"))?
            }
            SigningAlgorithm::Rs256 => {
                RsaKeyPair::from_pkcs8(der.secret_pkcs8_der()).map(KeyPair::Rs256).map_err(|_| {
                    McpError::config("oauth.privateKey is not a PKCS#8 RSA key (2048 to 8192 bits), which RS256 needs")
                })?
            }
        };
        Ok(SigningKey { pair, rng })
    }

    pub fn algorithm(&self) -> SigningAlgorithm {
        match self.pair {
            KeyPair::Es256(_) => SigningAlgorithm::Es256,
            KeyPair::Rs256(_) => SigningAlgorithm::Rs256,
        }
    }

    /// The public key, as ring's verifiers take it (an uncompressed EC point, or an RSAPublicKey DER).
    pub fn public_key(&self) -> Vec<u8> {
        use ring::signature::KeyPair as _;
        match &self.pair {
            KeyPair::Es256(pair) => pair.public_key().as_ref().to_vec(),
            KeyPair::Rs256(pair) => pair.public_key().as_ref().to_vec(),
        }
    }

    /// A compact JWS of `claims`: `base64url(header).base64url(claims).base64url(signature)`.
    pub fn sign(&self, claims: &Value) -> Result<String> {
        let header = json!({ "alg": self.algorithm().jws_name(), "typ": "JWT" });
        let signing_input =
            format!("{}.{}", base64url(header.to_string().as_bytes()), base64url(claims.to_string().as_bytes()));
        let failed = |_| McpError::Internal("signing the client assertion failed".to_owned());
        let signature = match &self.pair {
            KeyPair::Es256(pair) => pair.sign(&self.rng, signing_input.as_bytes()).map_err(failed)?.as_ref().to_vec(),
            KeyPair::Rs256(pair) => {
                let mut signature = vec![0; pair.public().modulus_len()];
                pair.sign(&RSA_PKCS1_SHA256, &self.rng, signing_input.as_bytes(), &mut signature).map_err(failed)?;
                signature
            }
        };
        Ok(format!("{signing_input}.{}", base64url(&signature)))
    }

    /// An RFC 7523 §2.2 client assertion: `iss` = `sub` = the client id, `aud` = the authorization
    /// server's issuer, valid for `OAUTH_CLIENT_ASSERTION_LIFETIME_SECS`, with a fresh random `jti` so
    /// the server can refuse a replay.
    pub fn client_assertion(&self, client_id: &str, audience: &str) -> Result<String> {
        let now = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0);
        let mut jti = [0u8; JTI_BYTES];
        self.rng
            .fill(&mut jti)
            .map_err(|_| McpError::Internal("no randomness for a client assertion id".to_owned()))?;
        self.sign(&json!({
            "iss": client_id,
            "sub": client_id,
            "aud": audience,
            "iat": now,
            "exp": now + OAUTH_CLIENT_ASSERTION_LIFETIME_SECS,
            "jti": base64url(&jti),
        }))
    }
}

impl SigningAlgorithm {
    /// The JWS `alg` name.
    pub fn jws_name(self) -> &'static str {
        match self {
            SigningAlgorithm::Es256 => "ES256",
            SigningAlgorithm::Rs256 => "RS256",
        }
    }
}

/// base64url without padding (RFC 7515 §2).
pub fn base64url(bytes: &[u8]) -> String {
    URL_SAFE_NO_PAD.encode(bytes)
}

/// The PKCS#8 DER inside `pem`. A key in another container (SEC1 `EC PRIVATE KEY`, PKCS#1
/// `RSA PRIVATE KEY`) is named, so the person knows to convert it.
fn pkcs8_der(pem: &str) -> Result<PrivatePkcs8KeyDer<'static>> {
    match PrivateKeyDer::from_pem_slice(pem.as_bytes()) {
        Ok(PrivateKeyDer::Pkcs8(der)) => Ok(der),
        Ok(PrivateKeyDer::Sec1(_)) => Err(McpError::config(
            "oauth.privateKey is a SEC1 EC key (BEGIN EC PRIVATE KEY); convert it to PKCS#8 (openssl pkcs8 -topk8 -nocrypt)",
        )),
        Ok(PrivateKeyDer::Pkcs1(_)) => Err(McpError::config(
            "oauth.privateKey is a PKCS#1 RSA key (BEGIN RSA PRIVATE KEY); convert it to PKCS#8 (openssl pkcs8 -topk8 -nocrypt)",
        )),
        // The parser's own errors quote lines of the input: none of that text is passed on.
        _ => Err(McpError::config("oauth.privateKey is not a PEM private key (expected -----BEGIN PRIVATE KEY-----, PKCS#8)")),
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use ring::signature::{UnparsedPublicKey, ECDSA_P256_SHA256_FIXED, RSA_PKCS1_2048_8192_SHA256};

    /// A 2048-bit RSA key made for these tests only (`openssl genpkey -algorithm RSA`); ring cannot
    /// generate RSA keys. (The keys in testdata/ protect nothing.)
    pub(crate) const TEST_RSA_PKCS8_PEM: &str = include_str!("testdata/rsa-2048-pkcs8.pem");

    /// A fresh P-256 key as PKCS#8 PEM.
    pub(crate) fn fresh_p256_pem() -> String {
        let pkcs8 = EcdsaKeyPair::generate_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, &SystemRandom::new()).unwrap();
        let body = base64::engine::general_purpose::STANDARD.encode(pkcs8.as_ref());
        let lines: Vec<&str> = body.as_bytes().chunks(64).map(|c| std::str::from_utf8(c).unwrap()).collect();
        format!("-----BEGIN PRIVATE KEY-----\n{}\n-----END PRIVATE KEY-----\n", lines.join("\n"))
    }

    /// Check a compact JWS against `public_key` with ring's verifier, and return its header and claims.
    pub(crate) fn verify(jws: &str, algorithm: SigningAlgorithm, public_key: &[u8]) -> (Value, Value) {
        let parts: Vec<&str> = jws.split('.').collect();
        assert_eq!(parts.len(), 3, "compact JWS has three parts");
        let decode = |part: &str| URL_SAFE_NO_PAD.decode(part).expect("base64url without padding");
        let verifier: &dyn ring::signature::VerificationAlgorithm = match algorithm {
            SigningAlgorithm::Es256 => &ECDSA_P256_SHA256_FIXED,
            SigningAlgorithm::Rs256 => &RSA_PKCS1_2048_8192_SHA256,
        };
        let signing_input = format!("{}.{}", parts[0], parts[1]);
        UnparsedPublicKey::new(verifier, public_key)
            .verify(signing_input.as_bytes(), &decode(parts[2]))
            .expect("signature verifies");
        let header: Value = serde_json::from_slice(&decode(parts[0])).unwrap();
        let claims: Value = serde_json::from_slice(&decode(parts[1])).unwrap();
        (header, claims)
    }

    fn check_assertion(key: &SigningKey, algorithm: SigningAlgorithm) {
        let jws = key.client_assertion("client-1", "https://as.example").unwrap();
        let (header, claims) = verify(&jws, algorithm, &key.public_key());
        assert_eq!(header["alg"], algorithm.jws_name());
        assert_eq!(claims["iss"], "client-1");
        assert_eq!(claims["sub"], "client-1");
        assert_eq!(claims["aud"], "https://as.example");
        let iat = claims["iat"].as_u64().unwrap();
        assert_eq!(claims["exp"].as_u64().unwrap(), iat + OAUTH_CLIENT_ASSERTION_LIFETIME_SECS);
        let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_secs();
        assert!(iat <= now && now - iat < 5, "iat is now");
        let again =
            verify(&key.client_assertion("client-1", "https://as.example").unwrap(), algorithm, &key.public_key()).1;
        assert_ne!(claims["jti"], again["jti"], "every assertion has its own jti");
        assert_eq!(URL_SAFE_NO_PAD.decode(claims["jti"].as_str().unwrap()).unwrap().len(), JTI_BYTES);
    }

    #[test]
    fn es256_assertions_verify_with_the_public_key() {
        let key = SigningKey::from_pem(&fresh_p256_pem(), SigningAlgorithm::Es256).unwrap();
        check_assertion(&key, SigningAlgorithm::Es256);
        let jws = key.sign(&json!({"a": 1})).unwrap();
        let signature = URL_SAFE_NO_PAD.decode(jws.rsplit('.').next().unwrap()).unwrap();
        assert_eq!(signature.len(), 64, "ES256 signatures are fixed-size r||s, not DER");
    }

    #[test]
    fn p256_keys_as_node_webcrypto_and_openssl_write_them_sign() {
        // WebCrypto's PKCS#8 export is what the conformance suite's key (jose exportPKCS8) looks like.
        for pem in [include_str!("testdata/p256-webcrypto-pkcs8.pem"), include_str!("testdata/p256-openssl-pkcs8.pem")]
        {
            let key = SigningKey::from_pem(pem, SigningAlgorithm::Es256).unwrap();
            check_assertion(&key, SigningAlgorithm::Es256);
        }
    }

    #[test]
    fn rs256_assertions_verify_with_the_public_key() {
        let key = SigningKey::from_pem(TEST_RSA_PKCS8_PEM, SigningAlgorithm::Rs256).unwrap();
        check_assertion(&key, SigningAlgorithm::Rs256);
    }

    #[test]
    fn a_signature_over_other_claims_does_not_verify() {
        let key = SigningKey::from_pem(&fresh_p256_pem(), SigningAlgorithm::Es256).unwrap();
        let jws = key.sign(&json!({"sub": "a"})).unwrap();
        let parts: Vec<&str> = jws.split('.').collect();
        let forged = format!("{}.{}.{}", parts[0], base64url(br#"{"sub":"b"}"#), parts[2]);
        let input = format!("{}.{}", parts[0], base64url(br#"{"sub":"b"}"#));
        let signature = URL_SAFE_NO_PAD.decode(parts[2]).unwrap();
        assert!(
            ring::signature::UnparsedPublicKey::new(&ECDSA_P256_SHA256_FIXED, key.public_key())
                .verify(input.as_bytes(), &signature)
                .is_err(),
            "{forged}"
        );
    }

    #[test]
    fn bad_keys_are_config_errors_that_do_not_echo_the_key() {
        let ec = fresh_p256_pem();
        let body_line = ec.lines().nth(1).unwrap().to_owned();
        let broken = ec.replace(&body_line, &format!("{}!!", &body_line[..40]));
        let cases = [
            (broken.as_str(), SigningAlgorithm::Es256),
            ("sk-not-a-pem-at-all", SigningAlgorithm::Es256),
            (ec.as_str(), SigningAlgorithm::Rs256),
            (TEST_RSA_PKCS8_PEM, SigningAlgorithm::Es256),
            (
                "-----BEGIN EC PRIVATE KEY-----\nMHcCAQEEIAbcdefghij\n-----END EC PRIVATE KEY-----\n",
                SigningAlgorithm::Es256,
            ),
        ];
        for (pem, algorithm) in cases {
            let error = SigningKey::from_pem(pem, algorithm).unwrap_err();
            assert_eq!(error.code(), "mcp_config_invalid", "{error}");
            let text = format!("{error} {error:?}");
            assert!(
                !text.contains(&body_line[..20]) && !text.contains("sk-not-a") && !text.contains("abcdefghij"),
                "{text}"
            );
        }
    }
}
