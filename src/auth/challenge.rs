//! The `WWW-Authenticate` challenge of a 401 or 403 (RFC 6750 §3, RFC 9728 §5.1): which scope the server
//! wants, where its protected-resource metadata is, and why it refused.
//!
//! Every value here is the server's text: it steers discovery (always through `egress`, so `allowedHosts`
//! applies) and scope selection (always under the configured ceiling), and is never quoted unbounded.

use reqwest::header::{HeaderMap, WWW_AUTHENTICATE};

/// The Bearer (or DPoP, RFC 9449 §7.1) challenge's parameters, if the response carried one.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Challenge {
    pub error: Option<String>,
    pub scope: Option<String>,
    pub resource_metadata: Option<String>,
    /// The challenge's scheme is `DPoP`.
    pub dpop: bool,
}

impl Challenge {
    /// The Bearer or DPoP challenge among the response's `WWW-Authenticate` headers (the first, if several).
    pub fn from_headers(headers: &HeaderMap) -> Challenge {
        Challenge::for_scheme(headers, None)
    }

    /// The challenge of the scheme the request was sent with (`dpop`: a DPoP-bound token, else Bearer) when
    /// the response carries one, else the first Bearer or DPoP challenge: `Bearer realm="x", DPoP
    /// error="use_dpop_nonce"` answers a DPoP request with its DPoP challenge, not the Bearer one before it.
    pub fn for_scheme(headers: &HeaderMap, dpop: Option<bool>) -> Challenge {
        let all: Vec<Challenge> = headers
            .get_all(WWW_AUTHENTICATE)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .flat_map(bearer_challenges)
            .collect();
        let preferred = dpop.and_then(|dpop| all.iter().position(|c| c.dpop == dpop)).unwrap_or(0);
        all.into_iter().nth(preferred).unwrap_or_default()
    }

    /// The scopes the challenge names, in order, without duplicates.
    pub fn scopes(&self) -> Vec<String> {
        split_scopes(self.scope.as_deref())
    }

    /// A DPoP refusal for a missing or stale nonce (RFC 9449 §9): no new token cures it, a new proof does.
    pub fn is_dpop_nonce(&self) -> bool {
        self.dpop && self.error.as_deref() == Some(super::dpop::USE_DPOP_NONCE)
    }

    pub fn is_insufficient_scope(&self) -> bool {
        self.error.as_deref() == Some("insufficient_scope")
    }

    /// The challenge of a refusal a new token may cure: any 401, a 403 for `insufficient_scope`; of the
    /// scheme sent when there is one (see [`Challenge::for_scheme`]).
    pub fn of_refusal(status: reqwest::StatusCode, headers: &HeaderMap, dpop: Option<bool>) -> Option<Challenge> {
        use reqwest::StatusCode;
        if status != StatusCode::UNAUTHORIZED && status != StatusCode::FORBIDDEN {
            return None;
        }
        Some(Challenge::for_scheme(headers, dpop))
            .filter(|c| status == StatusCode::UNAUTHORIZED || c.is_insufficient_scope())
    }
}

/// A space-separated scope string as a list, without empty entries or duplicates.
pub fn split_scopes(scope: Option<&str>) -> Vec<String> {
    let mut scopes: Vec<String> = Vec::new();
    for s in scope.unwrap_or("").split(' ').filter(|s| !s.is_empty()) {
        if !scopes.iter().any(|known| known == s) {
            scopes.push(s.to_owned());
        }
    }
    scopes
}

/// The parameters of each `Bearer` and `DPoP` challenge in one header value, in order; the value may
/// list several challenges (`Basic realm="a", Bearer scope="b", DPoP algs="ES256"`). A malformed
/// parameter ends the reading: the challenges before the one it is in are kept.
fn bearer_challenges(value: &str) -> Vec<Challenge> {
    let mut all = Vec::new();
    let mut found: Option<Challenge> = None;
    if read_challenges(value, &mut all, &mut found).is_some() {
        all.extend(found);
    }
    all
}

/// [`bearer_challenges`]' reading: completed challenges go to `all`; `found` is the one being read.
fn read_challenges(value: &str, all: &mut Vec<Challenge>, found: &mut Option<Challenge>) -> Option<()> {
    let mut tokens = Tokens { rest: value };
    let mut in_bearer = false;
    loop {
        tokens.skip(|c| c == ',' || c == ' ' || c == '\t');
        let Some(name) = tokens.token() else { return Some(()) };
        tokens.skip(|c| c == ' ' || c == '\t');
        if tokens.rest.starts_with('=') && is_token68_tail(tokens.rest) {
            // A token68 credential (`Basic dXNlcjpwYXNz==`): part of its scheme, no parameter.
            tokens.rest = tokens.rest.trim_start_matches('=');
            continue;
        }
        if !tokens.rest.starts_with('=') {
            // A new scheme starts.
            all.extend(found.take());
            let dpop = name.eq_ignore_ascii_case("dpop");
            in_bearer = name.eq_ignore_ascii_case("bearer") || dpop;
            if in_bearer {
                *found = Some(Challenge { dpop, ..Challenge::default() });
            }
            continue;
        }
        tokens.rest = &tokens.rest[1..];
        tokens.skip(|c| c == ' ' || c == '\t');
        let value = tokens.value()?;
        if let Some(challenge) = found.as_mut().filter(|_| in_bearer) {
            let slot = match name.to_ascii_lowercase().as_str() {
                "error" => &mut challenge.error,
                "scope" => &mut challenge.scope,
                "resource_metadata" => &mut challenge.resource_metadata,
                _ => continue,
            };
            slot.get_or_insert(value);
        }
        if tokens.rest.is_empty() {
            return Some(());
        }
    }
}

/// `=` that ends a token68 (`Basic dXNlcjpwYXNz==`) rather than starting a parameter value.
fn is_token68_tail(rest: &str) -> bool {
    rest.trim_start_matches('=').trim_start().is_empty() || rest.trim_start_matches('=').starts_with(',')
}

struct Tokens<'a> {
    rest: &'a str,
}

impl<'a> Tokens<'a> {
    fn skip(&mut self, class: impl Fn(char) -> bool) {
        self.rest = self.rest.trim_start_matches(class);
    }

    /// An RFC 7230 token.
    fn token(&mut self) -> Option<&'a str> {
        let end = self
            .rest
            .find(|c: char| !(c.is_ascii_alphanumeric() || "!#$%&'*+-.^_`|~/".contains(c)))
            .unwrap_or(self.rest.len());
        if end == 0 {
            return None;
        }
        let (token, rest) = self.rest.split_at(end);
        self.rest = rest;
        Some(token)
    }

    /// A token or a quoted string (with `\` escapes).
    fn value(&mut self) -> Option<String> {
        let Some(quoted) = self.rest.strip_prefix('"') else {
            return self.token().map(str::to_owned);
        };
        let mut value = String::new();
        let mut chars = quoted.char_indices();
        while let Some((i, c)) = chars.next() {
            match c {
                '"' => {
                    self.rest = &quoted[i + 1..];
                    return Some(value);
                }
                '\\' => value.push(chars.next()?.1),
                c => value.push(c),
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use reqwest::header::HeaderValue;

    fn parse(value: &str) -> Challenge {
        let mut headers = HeaderMap::new();
        headers.insert(WWW_AUTHENTICATE, HeaderValue::from_str(value).unwrap());
        Challenge::from_headers(&headers)
    }

    #[test]
    fn bearer_parameters_are_read_quoted_or_not() {
        let c = parse(
            r#"Bearer error="invalid_token", error_description="Missing Authorization header", resource_metadata="http://localhost:1/.well-known/oauth-protected-resource/mcp", scope="mcp:basic mcp:write""#,
        );
        assert_eq!(c.error.as_deref(), Some("invalid_token"));
        assert_eq!(c.resource_metadata.as_deref(), Some("http://localhost:1/.well-known/oauth-protected-resource/mcp"));
        assert_eq!(c.scopes(), ["mcp:basic", "mcp:write"]);
        let c = parse(r#"Bearer scope=read, error=insufficient_scope"#);
        assert!(c.is_insufficient_scope());
        assert_eq!(c.scopes(), ["read"]);
        assert_eq!(parse("Bearer").scopes(), Vec::<String>::new());
        assert_eq!(parse(r#"bearer realm="x \"y\"", scope="a""#).scope.as_deref(), Some("a"));
    }

    #[test]
    fn only_the_bearer_challenge_counts_among_several() {
        let c = parse(r#"Basic realm="r", scope="not-this", Bearer scope="this", DPoP algs="ES256""#);
        assert_eq!(c.scope.as_deref(), Some("this"));
        let c = parse(r#"Basic dXNlcjpwYXNz==, Bearer resource_metadata="https://a/m""#);
        assert_eq!(c.resource_metadata.as_deref(), Some("https://a/m"));
        assert_eq!(parse(r#"Basic realm="only""#), Challenge::default());
        assert_eq!(parse(r#"Bearer scope="unterminated"#), Challenge::default());
    }

    #[test]
    fn a_dpop_challenge_is_read_and_its_nonce_refusal_told_apart() {
        let c = parse(r#"DPoP resource_metadata="http://localhost:1/.well-known/oauth-protected-resource/mcp""#);
        assert!(c.dpop && !c.is_dpop_nonce());
        assert_eq!(c.resource_metadata.as_deref(), Some("http://localhost:1/.well-known/oauth-protected-resource/mcp"));
        let c =
            parse(r#"DPoP error="use_dpop_nonce", error_description="Resource server requires nonce in DPoP proof""#);
        assert!(c.is_dpop_nonce());
        assert!(!parse(r#"Bearer error="use_dpop_nonce""#).is_dpop_nonce(), "only a DPoP challenge asks for a nonce");
    }

    #[test]
    fn the_challenge_of_the_scheme_sent_is_preferred() {
        let mut headers = HeaderMap::new();
        headers.insert(
            WWW_AUTHENTICATE,
            HeaderValue::from_static(r#"Bearer realm="mcp", scope="a", DPoP error="use_dpop_nonce", algs="ES256""#),
        );
        assert!(Challenge::for_scheme(&headers, Some(true)).is_dpop_nonce(), "a DPoP request: the DPoP challenge");
        assert_eq!(Challenge::for_scheme(&headers, Some(false)).scope.as_deref(), Some("a"));
        assert_eq!(Challenge::for_scheme(&headers, None).scope.as_deref(), Some("a"), "none sent: the first");
        // Across header lines too, and a scheme not offered falls back to the first.
        let mut lines = HeaderMap::new();
        lines.append(WWW_AUTHENTICATE, HeaderValue::from_static(r#"Bearer scope="b""#));
        lines.append(WWW_AUTHENTICATE, HeaderValue::from_static(r#"DPoP error="use_dpop_nonce""#));
        assert!(Challenge::for_scheme(&lines, Some(true)).is_dpop_nonce());
        lines.remove(WWW_AUTHENTICATE);
        lines.append(WWW_AUTHENTICATE, HeaderValue::from_static(r#"Bearer scope="b""#));
        assert_eq!(Challenge::for_scheme(&lines, Some(true)).scope.as_deref(), Some("b"));
        let refusal = Challenge::of_refusal(reqwest::StatusCode::UNAUTHORIZED, &headers, Some(true)).unwrap();
        assert!(refusal.is_dpop_nonce());
    }

    #[test]
    fn scopes_are_deduplicated_in_order() {
        assert_eq!(split_scopes(Some("  b a  b ")), ["b", "a"]);
    }
}
