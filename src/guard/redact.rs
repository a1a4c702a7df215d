//! Secrets (bearer tokens, header values, env values given to a server) are replaced before any text
//! leaves the engine: error messages, diagnostics, stderr tails. A server that echoes a token back in an
//! error body must not get it into a log.

use std::sync::RwLock;

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

#[derive(Default, Debug)]
pub struct Secrets {
    values: RwLock<Vec<String>>,
}

impl Secrets {
    pub fn add(&self, value: &str) {
        if value.chars().count() < MIN_SECRET_CHARS {
            return;
        }
        let mut values = self.values.write().unwrap();
        if !values.iter().any(|v| v == value) {
            values.push(value.to_owned());
            // Longest first, so a secret that contains another is replaced whole.
            values.sort_by_key(|v| std::cmp::Reverse(v.len()));
        }
    }

    pub fn is_empty(&self) -> bool {
        self.values.read().unwrap().is_empty()
    }

    pub fn redact(&self, text: &str) -> String {
        let values = self.values.read().unwrap();
        let mut out = text.to_owned();
        for value in values.iter() {
            if out.contains(value.as_str()) {
                out = out.replace(value.as_str(), REDACTED);
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
    fn secret_looking_names() {
        assert!(looks_secret("GITHUB_TOKEN") && looks_secret("api_key") && looks_secret("DB_PASSWORD"));
        assert!(!looks_secret("PATH") && !looks_secret("LOG_LEVEL") && !looks_secret("FIXTURE_VERSION"));
    }
}
