//! Secrets (bearer tokens, header values, env values given to a server) are replaced before any text
//! leaves the engine: error messages, diagnostics, stderr tails. A server that echoes a token back in an
//! error body must not get it into a log.
//!
//! Redaction always runs on the full text first; only then is the text cut to size. Cutting first would
//! leave the part of a secret on the near side of the cut unrecognised (`sk-secret-1…`). When only a
//! window of a larger text is shown ([`Secrets::redact_window`]), the window's edges move outward to
//! swallow a secret they would split, so no piece of one survives at a cut.

use memchr::memmem::Finder;
use parking_lot::RwLock;
use std::collections::HashMap;
use std::ops::Range;

pub const REDACTED: &str = "[redacted]";
/// Shorter values are not treated as secrets: redacting "1" or "on" would mangle every message.
pub const MIN_SECRET_CHARS: usize = 6;

/// Whether an environment variable's name says it holds a credential. Env values are only redacted
/// when it does: most are paths and flags that a diagnostic should show.
pub fn looks_secret(name: &str) -> bool {
    const MARKERS: &[&str] = &["KEY", "TOKEN", "SECRET", "PASSWORD", "PASSWD", "AUTH", "CREDENTIAL", "COOKIE", "PRIVATE", "SESSION"];
    let upper = name.to_ascii_uppercase();
    MARKERS.iter().any(|m| upper.contains(m))
}

/// Values a rotating slot keeps: the current one and the one it replaced.
const ROTATED_VALUES_KEPT: usize = 2;

/// The secret values of one server. Fixed values (configured headers, env) stay for its lifetime;
/// a rotating slot (a bearer token from `auth`) holds only its current value and the one before it
/// (an error raised with the old token may be redacted just after a rotation), so a token refreshed
/// every few minutes does not grow the set.
#[derive(Default)]
pub struct Secrets {
    set: RwLock<SecretSet>,
}

#[derive(Default)]
struct SecretSet {
    fixed: Vec<Vec<u8>>,
    /// Per slot: the previous value (if any) and the current one, in that order.
    rotating: HashMap<String, Vec<Vec<u8>>>,
    /// One searcher per distinct value, rebuilt whenever the values change (rare) so that redaction
    /// (every error) only searches.
    finders: Vec<Finder<'static>>,
    longest_bytes: usize,
}

impl SecretSet {
    fn rebuild(&mut self) {
        let mut values: Vec<&[u8]> = self.fixed.iter().chain(self.rotating.values().flatten()).map(Vec::as_slice).collect();
        values.sort_unstable();
        values.dedup();
        self.longest_bytes = values.iter().map(|v| v.len()).max().unwrap_or(0);
        self.finders = values.into_iter().map(|v| Finder::new(v).into_owned()).collect();
    }

    /// Every byte range of `text` inside an occurrence of some secret, merged and in order. Overlapping
    /// occurrences (of one secret or of two) are found too, so nothing of either is left showing.
    fn covered(&self, text: &[u8]) -> Vec<Range<usize>> {
        let mut found: Vec<Range<usize>> = Vec::new();
        for finder in &self.finders {
            let len = finder.needle().len();
            let mut from = 0;
            while let Some(at) = finder.find(&text[from..]) {
                found.push(from + at..from + at + len);
                from += at + 1;
            }
        }
        found.sort_unstable_by_key(|r| r.start);
        let mut merged: Vec<Range<usize>> = Vec::with_capacity(found.len());
        for range in found {
            match merged.last_mut() {
                Some(last) if range.start <= last.end => last.end = last.end.max(range.end),
                _ => merged.push(range),
            }
        }
        merged
    }
}

/// Whether `value` is long enough to be treated as a secret.
/// A URL path segment that reads like a key rather than a word: at least 16 characters, with both
/// letters and digits.
fn looks_like_key(segment: &str) -> bool {
    segment.len() >= 16 && segment.chars().any(|c| c.is_ascii_digit()) && segment.chars().any(|c| c.is_ascii_alphabetic())
}

/// An argument that reads like a key rather than a word, a path, a URL or a package: a key's length and
/// mix (see [`looks_like_key`]) of letters, digits, `-` and `_` only (`sk-proj-4fQ…`, `ghp_…`).
fn looks_like_key_argument(arg: &str) -> bool {
    looks_like_key(arg) && arg.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
}

fn long_enough(value: &[u8]) -> bool {
    match std::str::from_utf8(value) {
        Ok(text) => text.chars().count() >= MIN_SECRET_CHARS,
        Err(_) => value.len() >= MIN_SECRET_CHARS,
    }
}

/// A header value that is not UTF-8 is, by HTTP's old rule, Latin-1: a server that decodes it that way
/// and echoes it back sends these bytes instead of the raw ones.
fn latin1_as_utf8(value: &[u8]) -> Option<Vec<u8>> {
    std::str::from_utf8(value).is_err().then(|| value.iter().map(|&b| b as char).collect::<String>().into_bytes())
}

impl Secrets {
    /// Add a value that stays secret for the server's lifetime (configured env value, header value).
    pub fn add(&self, value: &str) {
        self.add_bytes(value.as_bytes());
    }

    /// A configured header value, whole and in the parts a server may echo alone: the credential after
    /// an auth scheme (`Bearer sk-…` → `sk-…`) and each cookie's value.
    pub fn add_header_value(&self, value: &[u8]) {
        self.add_bytes(value);
        let Ok(text) = std::str::from_utf8(value) else { return };
        if let Some((scheme, credential)) = text.trim().split_once(' ') {
            if scheme.chars().all(|c| c.is_ascii_alphabetic()) {
                self.add(credential.trim());
            }
        }
        for cookie in text.split(';') {
            if let Some((_, value)) = cookie.split_once('=') {
                self.add(value.trim());
            }
        }
    }

    /// What in a server URL may be a credential: every query value, and path segments that look like
    /// keys (long, letters and digits mixed) — hosted servers often put the key in the path.
    pub fn add_url_credentials(&self, url: &url::Url) {
        self.add_userinfo_password(url);
        for (_, value) in url.query_pairs() {
            self.add(&value);
        }
        for segment in url.path_segments().into_iter().flatten() {
            if looks_like_key(segment) {
                self.add(segment);
            }
        }
    }

    /// The password of a URL's userinfo (`scheme://user:password@host`), as written and decoded.
    fn add_userinfo_password(&self, url: &url::Url) {
        if let Some(password) = url.password() {
            self.add(password);
            if let Ok(decoded) = percent_encoding::percent_decode_str(password).decode_utf8() {
                self.add(&decoded);
            }
        }
    }

    /// A value that is a URL with a password in it (`DATABASE_URL=postgres://app:pw@db/app`, an
    /// argument `--db postgres://…`), whatever the variable or flag is called: a server that fails to
    /// connect to it tends to print it.
    pub fn add_embedded_url_password(&self, value: &str) {
        if value.contains("://") {
            if let Ok(url) = url::Url::parse(value.trim()) {
                self.add_userinfo_password(&url);
            }
        }
    }

    /// What a stdio server's configuration holds that may be a credential: the values of environment
    /// variables whose names say so ([`looks_secret`]), a URL's password in any value or argument, and
    /// the credentials among its arguments ([`Secrets::add_argument_credentials`]).
    pub fn add_stdio_entry(&self, env: &std::collections::BTreeMap<String, String>, args: &[String]) {
        env.iter().filter(|(name, _)| looks_secret(name)).for_each(|(_, value)| self.add(value));
        env.values().chain(args.iter()).for_each(|value| self.add_embedded_url_password(value));
        self.add_argument_credentials(args);
    }

    /// Command-line arguments a server could print back: the value of a credential-named flag, given
    /// as `--api-key=VALUE` or as `--api-key VALUE`, and an argument that is itself a key.
    pub fn add_argument_credentials(&self, args: &[String]) {
        for (i, arg) in args.iter().enumerate() {
            let Some(flag) = arg.strip_prefix('-') else {
                if looks_like_key_argument(arg) {
                    self.add(arg);
                }
                continue;
            };
            match flag.split_once('=') {
                Some((name, value)) if looks_secret(name) => self.add(value),
                None if looks_secret(flag) => {
                    if let Some(value) = args.get(i + 1).filter(|v| !v.starts_with('-')) {
                        self.add(value);
                    }
                }
                _ => {}
            }
        }
    }

    /// Like [`Secrets::add`] for raw bytes, such as a header value with non-ASCII or non-UTF-8 bytes.
    /// A value that is not UTF-8 is also registered as it reads in Latin-1.
    pub fn add_bytes(&self, value: &[u8]) {
        if !long_enough(value) {
            return;
        }
        let mut set = self.set.write();
        let mut changed = false;
        for form in std::iter::once(value.to_vec()).chain(latin1_as_utf8(value)) {
            if !set.fixed.contains(&form) {
                set.fixed.push(form);
                changed = true;
            }
        }
        if changed {
            set.rebuild();
        }
    }

    /// Make `value` the current secret of `slot` (e.g. `"bearer"`). The slot keeps the value before it
    /// (an error raised with it may be redacted just after the rotation) and drops older ones, so the
    /// set stays as small as the live values however often the token rotates.
    /// A value too short to be a secret empties the slot.
    pub fn set_rotating(&self, slot: &str, value: &[u8]) {
        let mut set = self.set.write();
        let changed = if long_enough(value) {
            let values = set.rotating.entry(slot.to_owned()).or_default();
            if values.last().map(Vec::as_slice) == Some(value) {
                false
            } else {
                values.push(value.to_vec());
                if values.len() > ROTATED_VALUES_KEPT {
                    values.remove(0);
                }
                true
            }
        } else {
            set.rotating.remove(slot).is_some()
        };
        if changed {
            set.rebuild();
        }
    }

    pub fn is_empty(&self) -> bool {
        self.set.read().finders.is_empty()
    }

    /// Bytes in the longest secret: how much context beyond a cut is needed to recognise one split by it.
    pub fn longest_bytes(&self) -> usize {
        self.set.read().longest_bytes
    }

    /// `text` with every secret replaced.
    pub fn redact(&self, text: &str) -> String {
        let set = self.set.read();
        if set.finders.is_empty() {
            return text.to_owned();
        }
        let covered = set.covered(text.as_bytes());
        // Covered ranges start and end on secret boundaries; a secret given as text starts and ends on
        // character boundaries, but a raw-bytes secret may not, so convert leniently.
        String::from_utf8_lossy(&replace(text.as_bytes(), &covered, 0..text.len())).into_owned()
    }

    /// The part `window` of `bytes`, with every secret replaced. `bytes` is the context: a secret that
    /// straddles an edge of the window is recognised in it and replaced whole (the edge moves outward to
    /// take it). For a cut to be safe, `bytes` should reach [`Secrets::longest_bytes`] past each edge
    /// of the window that is not an edge of the original text.
    pub fn redact_window(&self, bytes: &[u8], window: Range<usize>) -> Vec<u8> {
        let set = self.set.read();
        let covered = set.covered(bytes);
        replace(bytes, &covered, window)
    }
}

/// The first `max` bytes of redacted text, or a little more so a [`REDACTED`] marker at the cut shows whole.
pub fn head_of(redacted: &[u8], max: usize) -> &[u8] {
    if redacted.len() <= max {
        return redacted;
    }
    let marker = REDACTED.as_bytes();
    let end = (max.saturating_sub(marker.len() - 1)..max)
        .find(|&at| redacted[at..].starts_with(marker) && at + marker.len() > max)
        .map_or(max, |at| at + marker.len());
    &redacted[..end]
}

/// The last `max` bytes of redacted text, or a little more so a [`REDACTED`] marker at the cut shows whole.
pub fn tail_of(redacted: &[u8], max: usize) -> &[u8] {
    let Some(cut) = redacted.len().checked_sub(max) else { return redacted };
    let marker = REDACTED.as_bytes();
    let start = (cut.saturating_sub(marker.len() - 1)..cut).find(|&at| redacted[at..].starts_with(marker)).unwrap_or(cut);
    &redacted[start..]
}

/// `bytes[window]` with each covered range replaced by [`REDACTED`], the window widened to whole ranges.
fn replace(bytes: &[u8], covered: &[Range<usize>], window: Range<usize>) -> Vec<u8> {
    let mut start = window.start.min(bytes.len());
    let mut end = window.end.clamp(start, bytes.len());
    for range in covered {
        if range.start < start && start < range.end {
            start = range.start;
        }
        if range.start < end && end < range.end {
            end = range.end;
        }
    }
    let mut out = Vec::with_capacity(end - start);
    let mut at = start;
    for range in covered.iter().filter(|r| r.start < end && r.end > start) {
        out.extend_from_slice(&bytes[at..range.start.max(at)]);
        out.extend_from_slice(REDACTED.as_bytes());
        at = range.end;
    }
    out.extend_from_slice(&bytes[at.min(end)..end]);
    out
}

impl std::fmt::Debug for Secrets {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the values themselves: a Debug print must not be the leak.
        f.debug_struct("Secrets").field("count", &self.set.read().finders.len()).finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SECRET: &str = "sk-secret-123";

    /// Every piece of `secret` of at least `min` characters.
    fn fragments(secret: &str, min: usize) -> Vec<&str> {
        let mut out = Vec::new();
        for start in 0..secret.len() {
            for end in start + min..=secret.len() {
                out.push(&secret[start..end]);
            }
        }
        out
    }

    #[test]
    fn replaces_every_known_secret_and_ignores_short_values() {
        let secrets = Secrets::default();
        secrets.add("tok-123456");
        secrets.add("tok-123456-extended");
        secrets.add("on");
        let text = "bad token tok-123456-extended, and tok-123456 again; switch on";
        assert_eq!(secrets.redact(text), "bad token [redacted], and [redacted] again; switch on");
    }

    #[test]
    fn overlapping_secrets_leave_nothing_of_either() {
        let secrets = Secrets::default();
        secrets.add("abcdef12");
        secrets.add("ef123456");
        secrets.add("aaaaaa");
        assert_eq!(secrets.redact("<abcdef123456>"), "<[redacted]>");
        assert_eq!(secrets.redact("<aaaaaaa>"), "<[redacted]>", "two overlapping occurrences of one secret");
    }

    #[test]
    fn a_window_swallows_a_secret_its_edges_would_split() {
        let secrets = Secrets::default();
        secrets.add(SECRET);
        let text = format!("{}{SECRET}{}", "x".repeat(189), "y".repeat(50));
        for cut in 185..210 {
            let head = String::from_utf8(secrets.redact_window(text.as_bytes(), 0..cut)).unwrap();
            let tail = String::from_utf8(secrets.redact_window(text.as_bytes(), cut..text.len())).unwrap();
            for piece in fragments(SECRET, 4) {
                assert!(!head.contains(piece) && !tail.contains(piece), "cut at {cut}: {head:?} / {tail:?}");
            }
        }
        let head = String::from_utf8(secrets.redact_window(text.as_bytes(), 0..195)).unwrap();
        assert!(head.ends_with("x[redacted]"), "{head}");
        let tail = String::from_utf8(secrets.redact_window(text.as_bytes(), 191..text.len())).unwrap();
        assert!(tail.starts_with("[redacted]y"), "{tail}");
    }

    #[test]
    fn cuts_never_split_a_marker() {
        let text = b"0123[redacted]4567";
        assert_eq!(head_of(text, 6), b"0123[redacted]");
        assert_eq!(head_of(text, 4), b"0123");
        assert_eq!(head_of(text, 100), text);
        assert_eq!(tail_of(text, 6), b"[redacted]4567");
        assert_eq!(tail_of(text, 4), b"4567");
        assert_eq!(tail_of(text, 100), text);
    }

    #[test]
    fn credentials_inside_headers_urls_and_arguments_are_secrets() {
        let secrets = Secrets::default();
        secrets.add_header_value(b"Bearer sk-live-abcdef123");
        secrets.add_header_value(b"session=abc123def456; theme=dark-mode-x");
        secrets.add_url_credentials(&url::Url::parse("https://mcp.example/s/k3y9a8b7c6d5e4f3g2/mcp?api_key=qk-999888777").unwrap());
        secrets.add_argument_credentials(&["--api-key".into(), "ak-123456789".into(), "--token=tk-987654321".into(), "--verbose".into(), "server.js".into()]);
        let text = "invalid key sk-live-abcdef123, cookie abc123def456, path k3y9a8b7c6d5e4f3g2, query qk-999888777, args ak-123456789 tk-987654321 server.js";
        assert_eq!(
            secrets.redact(text),
            "invalid key [redacted], cookie [redacted], path [redacted], query [redacted], args [redacted] [redacted] server.js"
        );
        assert_eq!(secrets.redact("/s/mcp/tools"), "/s/mcp/tools", "ordinary path segments are not secrets");
    }

    #[test]
    fn a_stdio_entry_s_arguments_that_are_keys_are_secrets_and_its_words_and_paths_are_not() {
        let secrets = Secrets::default();
        let env = std::collections::BTreeMap::from([("API_TOKEN".to_owned(), "env-tk-5551234".to_owned()), ("HOME_DIR".to_owned(), "/home/someone2024x".to_owned())]);
        let args: Vec<String> = ["-y", "@modelcontextprotocol/server-filesystem", "/srv/data/2024-archive-v2", "sk-proj-4fQ9xL2mN7pR1sT8", "postgres://app:pw-2718281@db/app", "--mode", "read-only"]
            .map(String::from)
            .to_vec();
        secrets.add_stdio_entry(&env, &args);
        let shown: Vec<String> = args.iter().map(|a| secrets.redact(a)).collect();
        assert_eq!(shown, ["-y", "@modelcontextprotocol/server-filesystem", "/srv/data/2024-archive-v2", "[redacted]", "postgres://app:[redacted]@db/app", "--mode", "read-only"]);
        assert_eq!(secrets.redact("token env-tk-5551234 home /home/someone2024x"), "token [redacted] home /home/someone2024x");
    }

    #[test]
    fn a_rotating_slot_holds_only_the_live_value() {
        let secrets = Secrets::default();
        secrets.add("fixed-header-value");
        for i in 0..1000 {
            secrets.set_rotating("bearer", format!("token-number-{i}").as_bytes());
        }
        assert_eq!(secrets.set.read().finders.len(), 3, "one fixed value, the current token and the one before");
        assert_eq!(secrets.redact("token-number-999 token-number-998 token-number-997"), "[redacted] [redacted] token-number-997");
        assert_eq!(secrets.redact("fixed-header-value"), REDACTED);
        secrets.set_rotating("bearer", b"");
        assert_eq!(secrets.set.read().finders.len(), 1, "an empty token empties the slot");
    }

    #[test]
    fn raw_header_bytes_are_secrets_in_either_reading() {
        let secrets = Secrets::default();
        secrets.add_bytes("clé-secrète-1".as_bytes());
        // Latin-1 bytes (not UTF-8): recognised raw, and as the text a server decoding Latin-1 would echo.
        secrets.add_bytes(b"pass\xe9word-9");
        assert_eq!(secrets.redact("got clé-secrète-1"), "got [redacted]");
        assert_eq!(secrets.redact("got passéword-9"), "got [redacted]");
        assert_eq!(secrets.redact_window(b"raw pass\xe9word-9!", 0..16), b"raw [redacted]!");
    }

    #[test]
    fn debug_never_shows_a_value() {
        let secrets = Secrets::default();
        secrets.add("debug-secret-value");
        assert!(!format!("{secrets:?}").contains("debug-secret"));
    }

    #[test]
    fn secret_looking_names() {
        assert!(looks_secret("GITHUB_TOKEN") && looks_secret("api_key") && looks_secret("DB_PASSWORD"));
        let secrets = Secrets::default();
        secrets.add_embedded_url_password("postgres://app:s3cr%40t-pw@db:5432/app");
        secrets.add_embedded_url_password("not a url: x://");
        let redacted = secrets.redact("connect postgres://app:s3cr%40t-pw@db failed; password s3cr@t-pw rejected");
        assert!(!redacted.contains("s3cr"), "{redacted}");
        assert!(!looks_secret("PATH") && !looks_secret("LOG_LEVEL") && !looks_secret("FIXTURE_VERSION"));
    }
}
