//! DPoP (RFC 9449; the MCP extension `io.modelcontextprotocol/auth/dpop`, SEP-1932): access tokens bound
//! to a key pair the client holds, proven afresh on every request.
//!
//! | concern      | rule |
//! |--------------|------|
//! | when         | the authorization server lists `ES256` in `dpop_signing_alg_values_supported` (or the resource's metadata says `dpop_bound_access_tokens_required`, which then needs it); otherwise the bearer path, unchanged |
//! | key          | one ES256 (P-256) key pair per server's tokens and authorization server (another issuer gets a new key: no two authorization servers see one key), made by ring; its PKCS#8 is kept in the token store entry beside the tokens, so a restarted process proves the same key; never in a log, error or diagnostic |
//! | proof        | a compact JWS, header `typ: dpop+jwt`, `alg: ES256`, `jwk` (public x, y only); claims `jti` (128 random bits), `htm`, `htu` (the URL without query and fragment), `iat`, `ath` (base64url SHA-256 of the access token) on resource requests, `nonce` when the server gave one |
//! | nonces       | the last `DPoP-Nonce` each origin sent is remembered (at most `DPOP_MAX_NONCE_ORIGINS` origins, each at most `DPOP_MAX_NONCE_BYTES` of printable ASCII, else not kept); a `use_dpop_nonce` refusal (400 at the token endpoint, 401 at the MCP server) is retried exactly once with the new nonce, never in a loop |
//! | presentation | `Authorization: DPoP <token>` and the `DPoP` header, on the server's origin only |
//! | redaction    | every proof of a key starts with the same header segment, registered once with the server's redaction set, which blanks any JWS starting with it (at most `DPOP_PROOF_MAX_BYTES`; a longer proof is not made): a proof echoed in an error body is blanked whatever number of requests were in flight |

use super::jwt::base64url;
use crate::error::{McpError, Result};
use crate::limits::{DPOP_MAX_NONCE_BYTES, DPOP_MAX_NONCE_ORIGINS, DPOP_PROOF_MAX_BYTES};
use parking_lot::Mutex;
use reqwest::header::{HeaderMap, HeaderValue};
use ring::rand::{SecureRandom, SystemRandom};
use ring::signature::{EcdsaKeyPair, KeyPair, ECDSA_P256_SHA256_FIXED_SIGNING};
use serde_json::{json, Value};
use sha2::{Digest, Sha256};
use std::collections::VecDeque;
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};
use url::Url;

/// The one algorithm proofs are signed with.
pub const DPOP_ALGORITHM: &str = "ES256";
/// The header a proof travels in, and the one a server sends a nonce in.
pub const DPOP_HEADER: &str = "dpop";
pub const DPOP_NONCE_HEADER: &str = "dpop-nonce";
/// The error a server refuses a proof without (or with a stale) nonce with.
pub const USE_DPOP_NONCE: &str = "use_dpop_nonce";
/// Random bytes in a proof's `jti`.
const JTI_BYTES: usize = 16;

/// A DPoP key pair. Debug shows its thumbprint only; the PKCS#8 leaves only to the token store.
pub struct DpopKey {
    pair: EcdsaKeyPair,
    pkcs8: Vec<u8>,
    jwk: Value,
    rng: SystemRandom,
}

impl std::fmt::Debug for DpopKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DpopKey").field("thumbprint", &self.thumbprint()).finish_non_exhaustive()
    }
}

impl DpopKey {
    /// A fresh P-256 key pair.
    pub fn generate() -> Result<DpopKey> {
        let rng = SystemRandom::new();
        let pkcs8 = EcdsaKeyPair::generate_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, &rng)
            .map_err(|_| McpError::Internal("no DPoP key could be made".into()))?;
        DpopKey::from_pkcs8(pkcs8.as_ref())
    }

    /// The key kept in the token store (base64url PKCS#8, see [`DpopKey::stored`]).
    pub fn from_stored(text: &str) -> Result<DpopKey> {
        let der = base64::Engine::decode(&base64::engine::general_purpose::URL_SAFE_NO_PAD, text)
            .map_err(|_| McpError::Auth("the stored DPoP key is not readable".into()))?;
        DpopKey::from_pkcs8(&der)
    }

    fn from_pkcs8(der: &[u8]) -> Result<DpopKey> {
        let rng = SystemRandom::new();
        let pair = EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, der, &rng)
            .map_err(|_| McpError::Auth("the stored DPoP key is not a P-256 key".into()))?;
        // An uncompressed point: 0x04 || x (32 bytes) || y (32 bytes).
        let point = pair.public_key().as_ref();
        let jwk = json!({
            "kty": "EC",
            "crv": "P-256",
            "x": base64url(&point[1..33]),
            "y": base64url(&point[33..65]),
        });
        Ok(DpopKey { pair, pkcs8: der.to_vec(), jwk, rng })
    }

    /// The PKCS#8 as the token store keeps it (a secret: registered with the server's redaction set).
    pub fn stored(&self) -> String {
        base64url(&self.pkcs8)
    }

    /// The public key as a JWK (`kty`, `crv`, `x`, `y`: no private part).
    pub fn public_jwk(&self) -> &Value {
        &self.jwk
    }

    /// The RFC 7638 JWK thumbprint (SHA-256, base64url): what a bound token's `cnf.jkt` names.
    pub fn thumbprint(&self) -> String {
        let canonical = format!(
            r#"{{"crv":"P-256","kty":"EC","x":"{}","y":"{}"}}"#,
            self.jwk["x"].as_str().unwrap_or_default(),
            self.jwk["y"].as_str().unwrap_or_default()
        );
        base64url(&Sha256::digest(canonical.as_bytes()))
    }

    /// A fresh proof for one request: `method` to `url` (its query and fragment left out), bound to
    /// `access_token` (the `ath` claim) on resource requests, carrying `nonce` when the server gave one.
    pub fn proof(&self, method: &str, url: &Url, access_token: Option<&str>, nonce: Option<&str>) -> Result<String> {
        let now = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0);
        let mut jti = [0u8; JTI_BYTES];
        self.rng.fill(&mut jti).map_err(|_| McpError::Internal("no randomness for a DPoP proof".into()))?;
        let mut claims = json!({ "jti": base64url(&jti), "htm": method, "htu": htu(url), "iat": now });
        if let Some(token) = access_token {
            claims["ath"] = Value::String(ath(token));
        }
        if let Some(nonce) = nonce {
            claims["nonce"] = Value::String(nonce.to_owned());
        }
        let input = format!("{}{}", self.proof_start(), base64url(claims.to_string().as_bytes()));
        let signature = self
            .pair
            .sign(&self.rng, input.as_bytes())
            .map_err(|_| McpError::Internal("signing a DPoP proof failed".into()))?;
        let proof = format!("{input}.{}", base64url(signature.as_ref()));
        if proof.len() > DPOP_PROOF_MAX_BYTES {
            // Longer than the redaction set blanks as one proof (a very long URL): not sent.
            return Err(McpError::Auth(format!("a DPoP proof for this URL would exceed {DPOP_PROOF_MAX_BYTES} bytes")));
        }
        Ok(proof)
    }

    /// How every proof of this key starts: its protected header (fixed per key), base64url, and the `.`.
    /// The redaction set blanks any JWS starting with it ([`crate::guard::redact::Secrets::add_jws_start`]).
    pub fn proof_start(&self) -> String {
        let header = json!({ "typ": "dpop+jwt", "alg": DPOP_ALGORITHM, "jwk": self.jwk });
        format!("{}.", base64url(header.to_string().as_bytes()))
    }
}

/// `htu`: the request URL without its query and fragment (RFC 9449 §4.2).
pub fn htu(url: &Url) -> String {
    let mut bare = url.clone();
    bare.set_query(None);
    bare.set_fragment(None);
    bare.to_string()
}

/// `ath`: base64url SHA-256 of the access token's ASCII (RFC 9449 §4.2).
pub fn ath(access_token: &str) -> String {
    base64url(&Sha256::digest(access_token.as_bytes()))
}

/// The last nonce each origin sent (RFC 9449 §8, §9), for the next proof to that origin. Bounded: the
/// oldest origin is forgotten past `DPOP_MAX_NONCE_ORIGINS`.
#[derive(Default)]
pub struct Nonces(Mutex<VecDeque<(String, String)>>);

impl Nonces {
    pub fn get(&self, url: &Url) -> Option<String> {
        let origin = url.origin().ascii_serialization();
        self.0.lock().iter().find(|(o, _)| *o == origin).map(|(_, n)| n.clone())
    }

    /// Remember the `DPoP-Nonce` of an answer from `url`'s origin, if it carries one. True when it did.
    pub fn note(&self, url: &Url, headers: &HeaderMap) -> bool {
        let Some(nonce) = headers.get(DPOP_NONCE_HEADER).and_then(|v| v.to_str().ok()) else { return false };
        // A nonce is a short token; anything else is not kept (nor sent back).
        if nonce.is_empty() || nonce.len() > DPOP_MAX_NONCE_BYTES || !nonce.bytes().all(|b| b.is_ascii_graphic()) {
            return false;
        }
        let origin = url.origin().ascii_serialization();
        let mut nonces = self.0.lock();
        nonces.retain(|(o, _)| *o != origin);
        nonces.push_back((origin, nonce.to_owned()));
        while nonces.len() > DPOP_MAX_NONCE_ORIGINS {
            nonces.pop_front();
        }
        true
    }
}

/// A key and the nonces of the origins it proves to: what one server's requests need to send proofs.
#[derive(Debug, Clone)]
pub struct Dpop {
    pub key: Arc<DpopKey>,
    pub nonces: Arc<Nonces>,
}

impl std::fmt::Debug for Nonces {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Nonces").field("origins", &self.0.lock().len()).finish()
    }
}

impl Dpop {
    pub fn new(key: Arc<DpopKey>) -> Dpop {
        Dpop { key, nonces: Arc::default() }
    }

    /// The `DPoP` header value for one request, with the nonce last seen from its origin.
    pub fn header(&self, method: &str, url: &Url, access_token: Option<&str>) -> Result<HeaderValue> {
        let proof = self.key.proof(method, url, access_token, self.nonces.get(url).as_deref())?;
        let mut value =
            HeaderValue::from_str(&proof).map_err(|_| McpError::Internal("a DPoP proof is not a header".into()))?;
        value.set_sensitive(true);
        Ok(value)
    }
}

/// Whether a token endpoint's error body is `use_dpop_nonce`.
pub fn is_nonce_error_body(body: &[u8]) -> bool {
    serde_json::from_slice::<Value>(body)
        .ok()
        .and_then(|v| v.get("error").and_then(Value::as_str).map(|e| e == USE_DPOP_NONCE))
        .unwrap_or(false)
}

#[cfg(test)]
mod tests {
    use super::*;
    use base64::engine::general_purpose::URL_SAFE_NO_PAD;
    use base64::Engine;
    use ring::signature::{UnparsedPublicKey, ECDSA_P256_SHA256_FIXED};

    fn parts(jws: &str) -> (Value, Value) {
        let p: Vec<&str> = jws.split('.').collect();
        assert_eq!(p.len(), 3);
        let decode = |s: &str| serde_json::from_slice::<Value>(&URL_SAFE_NO_PAD.decode(s).unwrap()).unwrap();
        (decode(p[0]), decode(p[1]))
    }

    /// Verify with the public key rebuilt from the proof's own `jwk` header (as a server does).
    fn verify_with_header_jwk(jws: &str) {
        let (header, _) = parts(jws);
        let mut point = vec![4u8];
        point.extend(URL_SAFE_NO_PAD.decode(header["jwk"]["x"].as_str().unwrap()).unwrap());
        point.extend(URL_SAFE_NO_PAD.decode(header["jwk"]["y"].as_str().unwrap()).unwrap());
        let (input, signature) = jws.rsplit_once('.').unwrap();
        UnparsedPublicKey::new(&ECDSA_P256_SHA256_FIXED, &point)
            .verify(input.as_bytes(), &URL_SAFE_NO_PAD.decode(signature).unwrap())
            .expect("the proof verifies with its jwk");
    }

    #[test]
    fn a_proof_carries_the_claims_rfc_9449_names_and_verifies_with_its_jwk() {
        let key = DpopKey::generate().unwrap();
        let url = Url::parse("https://mcp.example.com:8443/mcp?session=abc#frag").unwrap();
        let proof = key.proof("POST", &url, Some("the-access-token"), Some("n-1")).unwrap();
        verify_with_header_jwk(&proof);
        let (header, claims) = parts(&proof);
        assert_eq!(header["typ"], "dpop+jwt");
        assert_eq!(header["alg"], "ES256");
        assert_eq!(header["jwk"]["kty"], "EC");
        assert_eq!(header["jwk"]["crv"], "P-256");
        assert!(header["jwk"].get("d").is_none(), "no private part in the header");
        assert_eq!(claims["htm"], "POST");
        assert_eq!(claims["htu"], "https://mcp.example.com:8443/mcp", "no query, no fragment");
        assert_eq!(claims["ath"], ath("the-access-token"));
        assert_eq!(claims["nonce"], "n-1");
        let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_secs();
        assert!(claims["iat"].as_u64().unwrap().abs_diff(now) <= 2);
        assert_eq!(URL_SAFE_NO_PAD.decode(claims["jti"].as_str().unwrap()).unwrap().len(), JTI_BYTES);
    }

    #[test]
    fn a_token_request_proof_has_no_ath_and_no_nonce_unless_given() {
        let key = DpopKey::generate().unwrap();
        let (_, claims) =
            parts(&key.proof("POST", &Url::parse("http://127.0.0.1:1/token").unwrap(), None, None).unwrap());
        assert!(claims.get("ath").is_none() && claims.get("nonce").is_none());
    }

    #[test]
    fn every_proof_is_fresh() {
        let key = DpopKey::generate().unwrap();
        let url = Url::parse("http://127.0.0.1:1/mcp").unwrap();
        let a = parts(&key.proof("POST", &url, Some("t"), None).unwrap()).1;
        let b = parts(&key.proof("POST", &url, Some("t"), None).unwrap()).1;
        assert_ne!(a["jti"], b["jti"]);
    }

    #[test]
    fn ath_is_the_base64url_sha256_of_the_token() {
        // RFC 9449 §7.1's example token and ath.
        assert_eq!(ath("Kz~8mXK1EalYznwH-LC-1fBAo.4Ljp~zsPE_NeO.gxU"), "fUHyO2r2Z3DZ53EsNrWBb0xWXoaNy59IiKCAqksmQEo");
    }

    #[test]
    fn the_stored_key_proves_as_the_same_key() {
        let key = DpopKey::generate().unwrap();
        let again = DpopKey::from_stored(&key.stored()).unwrap();
        assert_eq!(key.thumbprint(), again.thumbprint());
        assert_eq!(key.public_jwk(), again.public_jwk());
        verify_with_header_jwk(&again.proof("GET", &Url::parse("http://127.0.0.1:1/").unwrap(), None, None).unwrap());
        let error = DpopKey::from_stored("bm90LWEta2V5").unwrap_err().to_string();
        assert!(!error.contains("bm90LWEta2V5"), "{error}");
        assert!(!format!("{key:?}").contains(&key.stored()));
    }

    #[test]
    fn the_thumbprint_is_rfc_7638s() {
        // RFC 7638 §3.1's method over an EC key: members in lexicographic order, no spaces.
        let key = DpopKey::generate().unwrap();
        let jwk = key.public_jwk();
        let canonical = format!("{{\"crv\":\"P-256\",\"kty\":\"EC\",\"x\":{},\"y\":{}}}", jwk["x"], jwk["y"]);
        assert_eq!(key.thumbprint(), base64url(&Sha256::digest(canonical.as_bytes())));
    }

    #[test]
    fn nonces_are_kept_per_origin_and_bounded() {
        let nonces = Nonces::default();
        let a = Url::parse("http://a.test/token").unwrap();
        let a_other_path = Url::parse("http://a.test/mcp").unwrap();
        let b = Url::parse("http://b.test:81/mcp").unwrap();
        let mut headers = HeaderMap::new();
        headers.insert(DPOP_NONCE_HEADER, HeaderValue::from_static("n-a"));
        assert!(nonces.note(&a, &headers));
        assert_eq!(nonces.get(&a_other_path).as_deref(), Some("n-a"));
        assert_eq!(nonces.get(&b), None);
        headers.insert(DPOP_NONCE_HEADER, HeaderValue::from_static("bad nonce with spaces"));
        assert!(!nonces.note(&b, &headers));
        for i in 0..DPOP_MAX_NONCE_ORIGINS + 5 {
            let mut h = HeaderMap::new();
            h.insert(DPOP_NONCE_HEADER, HeaderValue::from_str(&format!("n{i}")).unwrap());
            nonces.note(&Url::parse(&format!("http://h{i}.test/")).unwrap(), &h);
        }
        assert_eq!(nonces.0.lock().len(), DPOP_MAX_NONCE_ORIGINS);
        assert_eq!(nonces.get(&a), None, "the oldest origin was forgotten");
    }

    #[test]
    fn a_use_dpop_nonce_body_is_recognised() {
        assert!(is_nonce_error_body(br#"{"error":"use_dpop_nonce","error_description":"x"}"#));
        assert!(!is_nonce_error_body(br#"{"error":"invalid_grant"}"#));
        assert!(!is_nonce_error_body(b"not json"));
    }
}
