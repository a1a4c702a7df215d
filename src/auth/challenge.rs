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
        headers
            .get_all(WWW_AUTHENTICATE)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .find_map(bearer_challenge)
            .unwrap_or_default()
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

    /// The challenge of a refusal a new token may cure: any 401, a 403 for `insufficient_scope`.
    pub fn of_refusal(status: reqwest::StatusCode, headers: &HeaderMap) -> Option<Challenge> {
        use reqwest::StatusCode;
        if status != StatusCode::UNAUTHORIZED && status != StatusCode::FORBIDDEN {
            return None;
        }
        Some(Challenge::from_headers(headers))
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

/// The parameters of the `Bearer` (or `DPoP`) challenge in one header value, which may list several
/// challenges (`Basic realm="a", Bearer scope="b"`).
fn bearer_challenge(value: &str) -> Option<Challenge> {
    let mut tokens = Tokens { rest: value };
    let mut in_bearer = false;
    let mut found: Option<Challenge> = None;
    loop {
        tokens.skip(|c| c == ',' || c == ' ' || c == '\t');
        let Some(name) = tokens.token() else { return found.filter(|_| in_bearer) };
        tokens.skip(|c| c == ' ' || c == '\t');
        if tokens.rest.starts_with('=') && is_token68_tail(tokens.rest) {
            // A token68 credential (`Basic dXNlcjpwYXNz==`): part of its scheme, no parameter.
            tokens.rest = tokens.rest.trim_start_matches('=');
            continue;
        }
        if !tokens.rest.starts_with('=') {
            // A new scheme starts.
            if in_bearer {
                return found;
            }
            let dpop = name.eq_ignore_ascii_case("dpop");
            in_bearer = name.eq_ignore_ascii_case("bearer") || dpop;
            if in_bearer {
                found = Some(Challenge { dpop, ..Challenge::default() });
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
            return found.filter(|_| in_bearer);
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
    fn scopes_are_deduplicated_in_order() {
        assert_eq!(split_scopes(Some("  b a  b ")), ["b", "a"]);
    }
}
