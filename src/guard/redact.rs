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
    const MARKERS: &[&str] =
        &["KEY", "TOKEN", "SECRET", "PASSWORD", "PASSWD", "AUTH", "CREDENTIAL", "COOKIE", "PRIVATE", "SESSION"];
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
    /// Fixed starts of compact JWSs this engine signs (a DPoP key's header segment and its `.`), each
    /// with the most bytes such a JWS has: any JWS starting with one is blanked whole, however many were
    /// made (a fresh proof per request: no set of values could keep up with concurrent requests).
    jws_starts: Vec<(Finder<'static>, usize)>,
    longest_bytes: usize,
}

impl SecretSet {
    fn rebuild(&mut self) {
        let mut values: Vec<&[u8]> =
            self.fixed.iter().chain(self.rotating.values().flatten()).map(Vec::as_slice).collect();
        values.sort_unstable();
        values.dedup();
        let longest_jws = self.jws_starts.iter().map(|(_, most)| *most).max().unwrap_or(0);
        self.longest_bytes = values.iter().map(|v| v.len()).max().unwrap_or(0).max(longest_jws);
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
        for (start, most) in &self.jws_starts {
            let mut from = 0;
            while let Some(at) = start.find(&text[from..]) {
                let begin = from + at;
                let end = jws_end(text, begin + start.needle().len(), begin + most);
                found.push(begin..end);
                from = begin + 1;
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

/// Where a compact JWS whose signed header ends at `from` (just past its `.`) ends: over the payload,
/// one `.` and the signature (base64url characters), at most up to `limit`.
fn jws_end(text: &[u8], from: usize, limit: usize) -> usize {
    let limit = limit.min(text.len());
    let mut end = from.min(limit);
    let mut dots = 0;
    while end < limit {
        match text[end] {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' => {}
            b'.' if dots == 0 => dots += 1,
            _ => break,
        }
        end += 1;
    }
    end
}

/// Whether `value` is long enough to be treated as a secret.
/// A URL path segment that reads like a key rather than a word: at least 16 characters, with both
/// letters and digits.
fn looks_like_key(segment: &str) -> bool {
    segment.len() >= 16
        && segment.chars().any(|c| c.is_ascii_digit())
        && segment.chars().any(|c| c.is_ascii_alphabetic())
}

/// An argument that reads like a key rather than a word, a path, a URL or a package: a key's length and
/// mix (see [`looks_like_key`]) of letters, digits, `-` and `_` only (`sk-proj-4fQ…`, `ghp_…`).
fn looks_like_key_argument(arg: &str) -> bool {
    looks_like_key(arg) && arg.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
}

/// A token that reads like an encoded key (base64, a JWT, an AWS secret key): at least
/// [`MIN_TOKEN_CHARS`] of letters, digits and `+/=._-`, with upper case, lower case and digits all in it,
/// and not a path (`/…`, `./…`).
fn looks_like_encoded_key(token: &str) -> bool {
    token.len() >= MIN_TOKEN_CHARS
        && !token.starts_with(['/', '.', '~'])
        && token.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '/' | '=' | '.' | '_' | '-'))
        && token.chars().any(|c| c.is_ascii_digit())
        && token.chars().any(|c| c.is_ascii_uppercase())
        && token.chars().any(|c| c.is_ascii_lowercase())
}

/// Shortest token [`looks_like_encoded_key`] takes for one, in characters.
const MIN_TOKEN_CHARS: usize = 20;

/// Flags whose next argument is a value that may be a credential whatever the flag's name: docker's
/// `-e NAME=VALUE`, curl's and mcp-remote's `--header` / `-H`, a database client's `-p` / `--password`.
const VALUE_FLAGS: &[&str] = &["-e", "--env", "--header", "-H", "-p", "--password", "--pass", "-u", "--user"];

/// A stdio entry's arguments as shown to a person (`mcpferry status`), safe by construction rather than
/// by knowing the secrets: the command's words, flags and paths stay, and every place a credential
/// goes is replaced by [`REDACTED`]: the value of each `NAME=VALUE` (connection strings' `k=v;k=v`
/// pairs each), the argument after `-e` / `--env` / `--header` / `-H` / `-p` / `--password` and after a
/// flag whose name says it holds a credential ([`looks_secret`]), what follows `Authorization:`,
/// `Bearer` or `Basic`, a URL's userinfo and query (scheme, host and path stay), and any token that
/// reads like a key ([`looks_like_key_argument`], [`looks_like_encoded_key`]).
pub fn shown_arguments(args: &[String]) -> Vec<String> {
    let mut shown = Vec::with_capacity(args.len());
    let mut hide_next = false;
    for arg in args {
        if std::mem::take(&mut hide_next) && !arg.starts_with('-') {
            shown.push(shown_value(arg, true));
            continue;
        }
        if let Some(flag) = arg.strip_prefix('-') {
            match arg.split_once('=') {
                Some((name, value)) => {
                    let secret =
                        looks_secret(flag.split('=').next().unwrap_or_default()) || VALUE_FLAGS.contains(&name);
                    shown.push(format!(
                        "{name}={}",
                        if secret { REDACTED.to_owned() } else { shown_value(value, false) }
                    ));
                }
                None => {
                    hide_next = VALUE_FLAGS.contains(&arg.as_str()) || looks_secret(flag);
                    shown.push(shown_value(arg, false));
                }
            }
            continue;
        }
        // `Bearer` / `Basic` given as its own argument: the credential is the next one.
        hide_next = matches!(arg.to_ascii_lowercase().as_str(), "bearer" | "basic" | "authorization:");
        shown.push(shown_value(arg, false));
    }
    shown
}

/// One argument (or a flag's value) as [`shown_arguments`] shows it. `hidden`: it follows a flag that
/// takes a credential, so its value goes whole (a `NAME=` or `Header:` before it stays).
fn shown_value(arg: &str, hidden: bool) -> String {
    if hidden {
        if let Some((name, _)) = arg.split_once('=').filter(|(name, _)| is_name(name)) {
            return format!("{name}={REDACTED}");
        }
        if let Some((name, _)) = arg.split_once(':').filter(|(name, _)| is_name(name)) {
            return format!("{name}: {REDACTED}");
        }
        return REDACTED.to_owned();
    }
    if let Some(at) = scheme_credential(arg) {
        return format!("{}{REDACTED}", &arg[..at]);
    }
    if let Some(url) = shown_url(arg) {
        return url;
    }
    if looks_like_key_argument(arg) || looks_like_encoded_key(arg) {
        // Before `NAME=VALUE`: base64's padding is `=`.
        return REDACTED.to_owned();
    }
    if arg.contains('=') {
        // `NAME=VALUE`, or a connection string's `Server=db;User Id=sa;Password=…`: every value.
        return arg
            .split(';')
            .map(|pair| match pair.split_once('=') {
                Some((key, _)) => format!("{key}={REDACTED}"),
                None => pair.to_owned(),
            })
            .collect::<Vec<_>>()
            .join(";");
    }
    arg.split_inclusive([' ', ',', ':'])
        .map(|word| {
            let token = word.trim_end_matches([' ', ',', ':']);
            if looks_like_key_argument(token) || looks_like_encoded_key(token) {
                format!("{REDACTED}{}", &word[token.len()..])
            } else {
                word.to_owned()
            }
        })
        .collect()
}

/// A header or variable name: letters, digits, `-` and `_`.
fn is_name(text: &str) -> bool {
    !text.is_empty() && text.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
}

/// Where the credential starts in text carrying one after `Authorization:`, `Bearer ` or `Basic `.
fn scheme_credential(text: &str) -> Option<usize> {
    let lower = text.to_ascii_lowercase();
    ["authorization:", "bearer ", "basic ", "token "]
        .iter()
        .filter_map(|marker| lower.find(marker).map(|i| i + marker.len()))
        .min()
        .map(|at| at + (text[at..].len() - text[at..].trim_start().len()))
}

/// A URL argument with its userinfo and query replaced and its fragment dropped: `scheme://host/path`.
fn shown_url(text: &str) -> Option<String> {
    let (scheme, rest) = text.split_once("://")?;
    if scheme.is_empty() || !scheme.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.')) {
        return None;
    }
    let rest = rest.split('#').next().unwrap_or_default();
    let (rest, query) = match rest.split_once('?') {
        Some((rest, _)) => (rest, format!("?{REDACTED}")),
        None => (rest, String::new()),
    };
    let authority_end = rest.find('/').unwrap_or(rest.len());
    let (authority, path) = rest.split_at(authority_end);
    let authority = match authority.rsplit_once('@') {
        Some((_, host)) => format!("{REDACTED}@{host}"),
        None => authority.to_owned(),
    };
    let path: String = path
        .split_inclusive('/')
        .map(|segment| {
            let name = segment.trim_end_matches('/');
            if looks_like_key(name) || looks_like_encoded_key(name) {
                format!("{REDACTED}{}", &segment[name.len()..])
            } else {
                segment.to_owned()
            }
        })
        .collect();
    Some(format!("{scheme}://{authority}{path}{query}"))
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
                if looks_like_key_argument(arg) || looks_like_encoded_key(arg) {
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

    /// Blank every compact JWS that starts with `start` (a signing key's fixed header segment and its
    /// `.`), whole, up to `most_bytes` long: one entry however many such JWSs are made (a DPoP proof per
    /// request). Registered once per key; the set never grows with the requests.
    pub fn add_jws_start(&self, start: &str, most_bytes: usize) {
        if !long_enough(start.as_bytes()) {
            return;
        }
        let mut set = self.set.write();
        if set.jws_starts.iter().any(|(known, _)| known.needle() == start.as_bytes()) {
            return;
        }
        set.jws_starts.push((Finder::new(start.as_bytes()).into_owned(), most_bytes));
        set.rebuild();
    }

    pub fn is_empty(&self) -> bool {
        let set = self.set.read();
        set.finders.is_empty() && set.jws_starts.is_empty()
    }

    /// Bytes in the longest secret: how much context beyond a cut is needed to recognise one split by it.
    pub fn longest_bytes(&self) -> usize {
        self.set.read().longest_bytes
    }

    /// `text` with every secret replaced.
    pub fn redact(&self, text: &str) -> String {
        let set = self.set.read();
        if set.finders.is_empty() && set.jws_starts.is_empty() {
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

/// A resource or skill URI as error text may show it, quoted: without userinfo (`scheme://user:pass@host`
/// shows `scheme://host`), query or fragment (where a server's or a user's token would be), cut to 96
/// characters. URIs need not be URLs, so this reads the text, not a parsed URL.
pub fn shown_uri(uri: &str) -> String {
    let uri = uri.split(['?', '#']).next().unwrap_or_default();
    let without_userinfo = match uri.split_once("://") {
        Some((scheme, rest)) => {
            let (authority, path) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
            let host = authority.rsplit_once('@').map_or(authority, |(_, host)| host);
            format!("{scheme}://{host}{path}")
        }
        None => uri.to_owned(),
    };
    let cut: String = without_userinfo.chars().take(96).collect();
    let more = if cut.len() < without_userinfo.len() { "…" } else { "" };
    format!("{cut:?}{more}")
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
    let start =
        (cut.saturating_sub(marker.len() - 1)..cut).find(|&at| redacted[at..].starts_with(marker)).unwrap_or(cut);
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

/// Quote at most a few hundred bytes of untrusted text in an error message, secrets redacted. The
/// redaction sees the text past the cut, so a secret the cut would split is replaced whole.
pub fn quote_bytes(bytes: &[u8], secrets: &Secrets) -> String {
    let limit = crate::limits::MAX_QUOTED_BYTES;
    let context = &bytes[..bytes.len().min(limit + secrets.longest_bytes())];
    let redacted = secrets.redact_window(context, 0..limit);
    let shown = head_of(&redacted, limit);
    let mut quoted: String =
        String::from_utf8_lossy(shown).chars().map(|c| if c.is_control() { ' ' } else { c }).collect();
    if shown.len() < redacted.len() || bytes.len() > limit {
        quoted.push('…');
    }
    quoted
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uris_are_shown_without_userinfo_query_or_fragment() {
        assert_eq!(shown_uri("https://me:hunter2@docs.example/a/b?token=abc#x"), "\"https://docs.example/a/b\"");
        assert_eq!(shown_uri("skill://pdf-processing/SKILL.md"), "\"skill://pdf-processing/SKILL.md\"");
        assert_eq!(shown_uri("note:hello?key=1"), "\"note:hello\"");
        assert_eq!(shown_uri("db://u@h"), "\"db://h\"");
        let long = format!("x://h/{}", "é".repeat(200));
        assert!(shown_uri(&long).ends_with("\"…"));
    }

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
        secrets.add_url_credentials(
            &url::Url::parse("https://mcp.example/s/k3y9a8b7c6d5e4f3g2/mcp?api_key=qk-999888777").unwrap(),
        );
        secrets.add_argument_credentials(&[
            "--api-key".into(),
            "ak-123456789".into(),
            "--token=tk-987654321".into(),
            "--verbose".into(),
            "server.js".into(),
        ]);
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
        let env = std::collections::BTreeMap::from([
            ("API_TOKEN".to_owned(), "env-tk-5551234".to_owned()),
            ("HOME_DIR".to_owned(), "/home/someone2024x".to_owned()),
        ]);
        let args: Vec<String> = [
            "-y",
            "@modelcontextprotocol/server-filesystem",
            "/srv/data/2024-archive-v2",
            "sk-proj-4fQ9xL2mN7pR1sT8",
            "postgres://app:pw-2718281@db/app",
            "--mode",
            "read-only",
        ]
        .map(String::from)
        .to_vec();
        secrets.add_stdio_entry(&env, &args);
        let shown: Vec<String> = args.iter().map(|a| secrets.redact(a)).collect();
        assert_eq!(
            shown,
            [
                "-y",
                "@modelcontextprotocol/server-filesystem",
                "/srv/data/2024-archive-v2",
                "[redacted]",
                "postgres://app:[redacted]@db/app",
                "--mode",
                "read-only"
            ]
        );
        assert_eq!(
            secrets.redact("token env-tk-5551234 home /home/someone2024x"),
            "token [redacted] home /home/someone2024x"
        );
    }

    #[test]
    fn status_shows_no_credential_of_any_shape_and_keeps_the_words() {
        let shown = |args: &[&str]| shown_arguments(&args.iter().map(|a| a.to_string()).collect::<Vec<_>>());
        let cases: &[(&[&str], &[&str])] = &[
            (
                &[
                    "run",
                    "-i",
                    "--rm",
                    "-e",
                    "GITHUB_PERSONAL_ACCESS_TOKEN=ghp_abcDEF123456789012345678901234567890",
                    "ghcr.io/github/github-mcp-server",
                ],
                &[
                    "run",
                    "-i",
                    "--rm",
                    "-e",
                    "GITHUB_PERSONAL_ACCESS_TOKEN=[redacted]",
                    "ghcr.io/github/github-mcp-server",
                ],
            ),
            (
                &[
                    "-y",
                    "mcp-remote",
                    "https://mcp.example.com/sse",
                    "--header",
                    "Authorization: Bearer sk-live-4242424242abcdef",
                ],
                &["-y", "mcp-remote", "https://mcp.example.com/sse", "--header", "Authorization: [redacted]"],
            ),
            (&["--aws-secret", "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"], &["--aws-secret", "[redacted]"]),
            (&["wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY="], &["[redacted]"]),
            (
                &[
                    "--jwt-file",
                    "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
                ],
                &["--jwt-file", "[redacted]"],
            ),
            (
                &["eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U"],
                &["[redacted]"],
            ),
            (
                &["https://api.example.com/v1/mcp?api_key=sk_abc123&x=1#frag"],
                &["https://api.example.com/v1/mcp?[redacted]"],
            ),
            (
                &["--connection-string", "Server=db;User Id=sa;Password=Hunter2!"],
                &["--connection-string", "Server=[redacted];User Id=[redacted];Password=[redacted]"],
            ),
            (&["-p", "hunter2hunter2"], &["-p", "[redacted]"]),
            (&["mysql://root:pw@db:3306/app"], &["mysql://[redacted]@db:3306/app"]),
            (&["--api-key=abc", "--token", "t0k3n"], &["--api-key=[redacted]", "--token", "[redacted]"]),
            (&["Bearer", "abcdef"], &["Bearer", "[redacted]"]),
            (&["API_KEY=short", "DEBUG=1"], &["API_KEY=[redacted]", "DEBUG=[redacted]"]),
            (
                &[
                    "-y",
                    "@modelcontextprotocol/server-filesystem",
                    "/srv/data/2024-archive-v2",
                    "./Projects/Report2024Final",
                    "--mode",
                    "read-only",
                    "server.js",
                ],
                &[
                    "-y",
                    "@modelcontextprotocol/server-filesystem",
                    "/srv/data/2024-archive-v2",
                    "./Projects/Report2024Final",
                    "--mode",
                    "read-only",
                    "server.js",
                ],
            ),
        ];
        for (args, expected) in cases {
            assert_eq!(shown(args), *expected, "{args:?}");
        }
    }

    #[test]
    fn every_jws_with_a_registered_start_is_blanked_whole_however_many_were_made() {
        let secrets = Secrets::default();
        secrets.add_jws_start("eyJoZWFkZXIiOiJrZXkifQ.", 200);
        let proofs: Vec<String> =
            (0..50).map(|i| format!("eyJoZWFkZXIiOiJrZXkifQ.cGF5bG9hZC0{i}.c2lnLXt{i}_-x")).collect();
        let text = format!("refused: {} and {}; other: eyJvdGhlciJ9.eA.eQ", proofs[0], proofs[49]);
        let shown = secrets.redact(&text);
        assert_eq!(shown, "refused: [redacted] and [redacted]; other: eyJvdGhlciJ9.eA.eQ");
        // Cut mid-proof at a window's edge: the edge moves out to take the proof whole.
        let at = text.find(&proofs[0]).unwrap() + 30;
        let window = String::from_utf8(secrets.redact_window(text.as_bytes(), at..text.len())).unwrap();
        assert!(window.starts_with("[redacted]") && !window.contains("cGF5bG9hZC0"), "{window}");
        // Bounded: what lies past the most a proof can be is not swallowed.
        let long = format!("eyJoZWFkZXIiOiJrZXkifQ.{}", "a".repeat(400));
        assert!(secrets.redact(&long).ends_with(&"a".repeat(400 - 200 + 23)));
        assert!(secrets.longest_bytes() >= 200);
    }

    #[test]
    fn a_rotating_slot_holds_only_the_live_value() {
        let secrets = Secrets::default();
        secrets.add("fixed-header-value");
        for i in 0..1000 {
            secrets.set_rotating("bearer", format!("token-number-{i}").as_bytes());
        }
        assert_eq!(secrets.set.read().finders.len(), 3, "one fixed value, the current token and the one before");
        assert_eq!(
            secrets.redact("token-number-999 token-number-998 token-number-997"),
            "[redacted] [redacted] token-number-997"
        );
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
