//! Server logs: `notifications/message` (level, logger, data) as `server-log` diagnostics, and the level
//! the client asks for (`serverLogLevel`).
//!
//! Asking: nothing unless `serverLogLevel` is set. Then a session-era server that declares the
//! `logging` capability gets `logging/setLevel` once after `initialize`; a 2026-07-28 server that
//! declares it gets `_meta["io.modelcontextprotocol/logLevel"]` on every request (that era has no
//! `setLevel`, and a server there must not log for a request without it). Logging is deprecated in
//! 2026-07-28 (SEP-2577), which is why it is off unless asked for.
//!
//! What arrives is untrusted and bounded before the host sees it:
//! - at most [`MAX_SERVER_LOGS_PER_SECOND`] per connection per second, the rest counted and reported as
//!   one `server-log-dropped` when the second ends (checked before anything is parsed, so a flood costs
//!   a counter);
//! - a level that is not one of the eight is not delivered; with `serverLogLevel` set, nor is one below it
//!   (a server may ignore what it was asked);
//! - `data` (any JSON): every string and key redacted with the server's secrets and made terminal-safe
//!   (line breaks and tabs kept inside data; none in the one-line `message`), then bounded to
//!   [`MAX_SERVER_LOG_DATA_BYTES`] as JSON, beyond which the head of its JSON text is delivered as a
//!   string (`truncated`), serialized from the decoded value. Data over [`MAX_SERVER_LOG_PARSED_BYTES`],
//!   nested deeper than `MAX_JSON_DEPTH` or that does not decode (`1e999`) is never shown: `data: null`,
//!   `truncated`, and the message says how many bytes were not shown (its raw text could spell a secret
//!   with JSON escapes).

use crate::diagnostics::Diagnostic;
use crate::guard::redact::Secrets;
use crate::guard::server_text::shown;
use crate::limits::{
    MAX_JSON_DEPTH, MAX_SERVER_LOGS_PER_SECOND, MAX_SERVER_LOG_DATA_BYTES, MAX_SERVER_LOG_PARSED_BYTES,
    MAX_SERVER_LOG_SUMMARY_BYTES,
};
use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::Value;
use std::time::{Duration, Instant};

/// The syslog severities of the spec, lowest first.
pub const LEVELS: [&str; 8] = ["debug", "info", "notice", "warning", "error", "critical", "alert", "emergency"];

/// The `_meta` key of the 2026-07-28 per-request log level.
pub const LOG_LEVEL_META_KEY: &str = "io.modelcontextprotocol/logLevel";

/// One of [`LEVELS`], by its rank.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Level(u8);

impl Level {
    pub fn parse(name: &str) -> Option<Level> {
        LEVELS.iter().position(|l| *l == name).map(|i| Level(i as u8))
    }

    pub fn name(self) -> &'static str {
        LEVELS[self.0 as usize]
    }

    /// `logging/setLevel` params.
    pub fn set_level_params(self) -> String {
        format!(r#"{{"level":"{}"}}"#, self.name())
    }

    /// The `_meta` member the modern era carries, as object member text.
    pub fn meta_member(self) -> String {
        format!(r#""{LOG_LEVEL_META_KEY}":"{}""#, self.name())
    }
}

#[derive(Deserialize)]
struct Wire<'a> {
    #[serde(borrow)]
    level: &'a RawValue,
    #[serde(default, borrow)]
    logger: Option<&'a RawValue>,
    #[serde(default, borrow)]
    data: Option<&'a RawValue>,
}

#[derive(Deserialize)]
struct LevelOnly<'a> {
    #[serde(borrow)]
    level: &'a str,
}

/// Whether a log is worth its place in the rate bound: its `level` (read borrowed, nothing else parsed)
/// is one of the eight and not below `floor`. [`diagnostic`] checks the rest.
pub fn wanted(params: &RawValue, floor: Option<Level>) -> bool {
    let level = serde_json::from_str::<LevelOnly>(params.get()).ok().and_then(|w| Level::parse(w.level));
    level.is_some_and(|level| floor.is_none_or(|floor| level >= floor))
}

/// A `server-log` diagnostic for `params`, or `None` if it is malformed or below `floor`.
pub fn diagnostic(server: &str, params: &RawValue, floor: Option<Level>, secrets: &Secrets) -> Option<Diagnostic> {
    let wire: Wire = serde_json::from_str(params.get()).ok()?;
    let level = serde_json::from_str::<&str>(wire.level.get()).ok().and_then(Level::parse)?;
    if floor.is_some_and(|floor| level < floor) {
        return None;
    }
    let logger = match wire.logger {
        None => None,
        Some(raw) if raw.get() == "null" => None,
        Some(raw) => Some(
            shown(&serde_json::from_str::<String>(raw.get()).ok()?, MAX_SERVER_LOG_SUMMARY_BYTES, secrets, false).0,
        ),
    };
    let raw_data = wire.data.map_or("null", RawValue::get);
    let (data, truncated) = bounded_data(raw_data, secrets);
    let summary = match &data {
        // Never parsed: not a byte of its text is shown (escapes there would hide a secret from redaction).
        Value::Null if truncated => format!("(data not shown: {} bytes)", raw_data.len()),
        Value::String(text) => text.clone(),
        other => other.to_string(),
    };
    let (mut summary, cut) = shown(&summary, MAX_SERVER_LOG_SUMMARY_BYTES, secrets, false);
    if cut || truncated {
        summary.push('…');
    }
    let (server_shown, _) = shown(server, MAX_SERVER_LOG_SUMMARY_BYTES, secrets, false);
    let message = match &logger {
        Some(logger) => format!("{server_shown} [{}] {logger}: {summary}", level.name()),
        None => format!("{server_shown} [{}]: {summary}", level.name()),
    };
    Some(Diagnostic::ServerLog { server: server.to_owned(), level: level.name(), logger, data, truncated, message })
}

/// `data` as the host may see it: redacted, terminal-safe, bounded (see the module doc).
fn bounded_data(raw: &str, secrets: &Secrets) -> (Value, bool) {
    let parsable = raw.len() <= MAX_SERVER_LOG_PARSED_BYTES
        && !crate::protocol::nesting::exceeds_depth(raw.as_bytes(), MAX_JSON_DEPTH);
    let value = parsable.then(|| serde_json::from_str::<Value>(raw).ok()).flatten();
    // Too large, too deep or not decodable (`1e999`): its raw text may spell a secret with JSON escapes
    // (`\u0073k-…`, `\/`) that redaction of the undecoded text cannot see, so none of it is shown.
    let Some(mut value) = value else { return (Value::Null, true) };
    clean(&mut value, secrets);
    let text = value.to_string();
    // Serialized again, redacted again: a secret may form across what the walk saw apart (a key and its value).
    if text.len() <= MAX_SERVER_LOG_DATA_BYTES && secrets.redact(&text) == text {
        return (value, false);
    }
    as_text(&text, secrets)
}

/// The head of `text`, redacted and terminal-safe, as a string value; `truncated` if it was cut.
fn as_text(text: &str, secrets: &Secrets) -> (Value, bool) {
    let (mut head, cut) = shown(text, MAX_SERVER_LOG_DATA_BYTES, secrets, true);
    if cut {
        head.push('…');
    }
    (Value::String(head), cut)
}

/// Every string and key redacted and made terminal-safe (line breaks and tabs kept).
fn clean(value: &mut Value, secrets: &Secrets) {
    let text = |s: &str| shown(s, usize::MAX, secrets, true).0;
    match value {
        Value::String(s) => *s = text(s),
        Value::Array(items) => items.iter_mut().for_each(|v| clean(v, secrets)),
        Value::Object(map) => {
            let entries = std::mem::take(map);
            for (key, mut v) in entries {
                clean(&mut v, secrets);
                map.insert(text(&key), v);
            }
        }
        _ => {}
    }
}

const RATE_WINDOW: Duration = Duration::from_secs(1);

/// The per-second bound of one connection's logs.
#[derive(Debug)]
pub struct RateWindow {
    start: Instant,
    sent: usize,
    dropped: u64,
}

impl Default for RateWindow {
    fn default() -> Self {
        RateWindow { start: Instant::now(), sent: 0, dropped: 0 }
    }
}

/// What [`RateWindow::admit`] decided.
#[derive(Debug, PartialEq, Eq)]
pub enum Admission {
    /// Deliver it; `report` is a count of logs dropped in a second that just ended.
    Deliver { report: Option<u64> },
    /// Over the bound: counted. `first` when it is the first drop of its second (schedule the report).
    Dropped { first: bool },
}

impl RateWindow {
    pub fn admit(&mut self, now: Instant) -> Admission {
        let report = self.roll(now);
        if self.sent >= MAX_SERVER_LOGS_PER_SECOND {
            self.dropped += 1;
            return Admission::Dropped { first: self.dropped == 1 };
        }
        self.sent += 1;
        Admission::Deliver { report }
    }

    /// When the current second ends.
    pub fn ends_at(&self) -> Instant {
        self.start + RATE_WINDOW
    }

    /// Start a new second if the current one is over; the count it dropped, if any.
    pub fn roll(&mut self, now: Instant) -> Option<u64> {
        if now.duration_since(self.start) < RATE_WINDOW {
            return None;
        }
        self.start = now;
        self.sent = 0;
        Some(std::mem::take(&mut self.dropped)).filter(|n| *n > 0)
    }
}

/// The `server-log-dropped` diagnostic.
pub fn dropped(server: &str, count: u64) -> Diagnostic {
    Diagnostic::ServerLogDropped {
        server: server.to_owned(),
        dropped: count,
        message: format!(
            "dropped {count} log messages of MCP server {server:?} (over {MAX_SERVER_LOGS_PER_SECOND} a second)"
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn raw(json: &str) -> Box<RawValue> {
        RawValue::from_string(json.to_owned()).unwrap()
    }

    fn log(
        json: &str,
        floor: Option<Level>,
        secrets: &Secrets,
    ) -> Option<(String, Option<String>, Value, bool, String)> {
        match diagnostic("srv", &raw(json), floor, secrets)? {
            Diagnostic::ServerLog { level, logger, data, truncated, message, .. } => {
                Some((level.to_owned(), logger, data, truncated, message))
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn levels_are_the_eight_of_the_spec_in_order() {
        assert!(Level::parse("debug") < Level::parse("info"));
        assert!(Level::parse("alert") < Level::parse("emergency"));
        assert_eq!(Level::parse("warn"), None);
        assert_eq!(Level::parse("error").unwrap().set_level_params(), r#"{"level":"error"}"#);
        assert_eq!(Level::parse("debug").unwrap().meta_member(), r#""io.modelcontextprotocol/logLevel":"debug""#);
    }

    #[test]
    fn a_log_is_redacted_terminal_safe_and_keeps_its_shape() {
        let secrets = Secrets::default();
        secrets.add("Bearer-abc123456789");
        let (level, logger, data, truncated, message) = log(
            r#"{"level":"error","logger":"db\u001b[2J","data":{"error":"auth Bearer-abc123456789 refused","Bearer-abc123456789":1,"n":[1,"\u001b]0;x\u0007"],"multi":"a\nb"}}"#,
            None,
            &secrets,
        )
        .unwrap();
        assert_eq!((level.as_str(), logger.as_deref(), truncated), ("error", Some("db [2J"), false));
        assert_eq!(
            data,
            serde_json::json!({ "error": "auth [redacted] refused", "[redacted]": 1, "n": [1, " ]0;x "], "multi": "a\nb" })
        );
        assert!(
            message.starts_with("srv [error] db [2J: {")
                && !message.contains('\n')
                && !message.contains("abc123456789"),
            "{message}"
        );
        // An escaped secret is one once parsed: the walk sees it as the host would.
        let (_, _, data, ..) = log(r#"{"level":"info","data":"\u0042earer-abc123456789"}"#, None, &secrets).unwrap();
        assert_eq!(data, serde_json::json!("[redacted]"));
    }

    #[test]
    fn malformed_and_filtered_logs_are_not_delivered() {
        let secrets = Secrets::default();
        for bad in [
            r#"{"level":"warn","data":1}"#,
            r#"{"data":1}"#,
            r#"{"level":3,"data":1}"#,
            r#"{"level":"info","logger":5,"data":1}"#,
        ] {
            assert!(log(bad, None, &secrets).is_none(), "{bad}");
        }
        let warning = Level::parse("warning");
        assert!(log(r#"{"level":"info","data":1}"#, warning, &secrets).is_none());
        assert!(log(r#"{"level":"warning","data":1}"#, warning, &secrets).is_some());
        let (_, logger, data, ..) = log(r#"{"level":"debug"}"#, None, &secrets).unwrap();
        assert_eq!((logger, data), (None, Value::Null));
    }

    #[test]
    fn large_data_is_shown_as_the_head_of_its_decoded_text() {
        let secrets = Secrets::default();
        secrets.add("tok_0123456789abcdef");
        let big = format!(
            r#"{{"level":"info","data":{{"blob":"{}tok_0123456789abcdef"}}}}"#,
            "x".repeat(MAX_SERVER_LOG_DATA_BYTES - 16)
        );
        let (_, _, data, truncated, message) = log(&big, None, &secrets).unwrap();
        let text = data.as_str().unwrap();
        assert!(
            truncated
                && text.ends_with('…')
                && text.len() <= MAX_SERVER_LOG_DATA_BYTES + 16
                && !text.contains("0123456789abcdef"),
            "{}",
            text.len()
        );
        assert!(message.len() < MAX_SERVER_LOG_SUMMARY_BYTES + 64 && message.ends_with('…'));
        // Escaped in the wire text, decoded before it is cut and redacted.
        let escaped = format!(
            r#"{{"level":"info","data":["{}","tok\/0123","\u0074ok_0123456789abcdef"]}}"#,
            "x".repeat(MAX_SERVER_LOG_DATA_BYTES)
        );
        let secrets_slash = Secrets::default();
        secrets_slash.add("tok/0123");
        let (_, _, data, truncated, _) = log(&escaped, None, &secrets_slash).unwrap();
        assert!(
            truncated && !data.as_str().unwrap().contains("tok/0123") && !data.as_str().unwrap().contains(r"tok\/0123")
        );
    }

    #[test]
    fn data_that_is_never_parsed_is_never_shown() {
        let secrets = Secrets::default();
        secrets.add("sk-live-0123456789abcdef");
        secrets.add("https://example.test/secret-path");
        let cases = [
            // Accepted as a raw value, rejected by serde_json; the secret beside it is `\u`-escaped.
            r#"{"level":"info","data":[1e999,"\u0073k-live-0123456789abcdef"]}"#.to_owned(),
            r#"{"level":"info","data":[1e999,"https:\/\/example.test\/secret-path"]}"#.to_owned(),
            format!(
                r#"{{"level":"info","data":["{}","\u0073k-live-0123456789abcdef"]}}"#,
                "y".repeat(MAX_SERVER_LOG_PARSED_BYTES)
            ),
            format!(
                r#"{{"level":"info","data":{}"\u0073k-live-0123456789abcdef"{}}}"#,
                "[".repeat(MAX_JSON_DEPTH + 10),
                "]".repeat(MAX_JSON_DEPTH + 10)
            ),
        ];
        for case in &cases {
            let (_, _, data, truncated, message) = log(case, None, &secrets).unwrap();
            let data_len = case.len() - r#"{"level":"info","data":}"#.len();
            assert_eq!((data, truncated), (Value::Null, true), "{}", &case[..80.min(case.len())]);
            assert!(message.contains(&format!("(data not shown: {data_len} bytes)")), "{message}");
            assert!(
                !message.contains("0073") && !message.contains("secret-path") && !message.contains("yyy"),
                "{message}"
            );
        }
    }

    #[test]
    fn only_wanted_levels_reach_the_rate_bound() {
        let warning = Level::parse("warning");
        assert!(wanted(&raw(r#"{"level":"error","data":1}"#), warning));
        assert!(wanted(&raw(r#"{"data":[1e999],"level":"warning"}"#), warning));
        assert!(!wanted(&raw(r#"{"level":"info","data":1}"#), warning));
        assert!(!wanted(&raw(r#"{"level":"warn"}"#), None));
        assert!(wanted(&raw(r#"{"level":"debug"}"#), None));
    }

    #[test]
    fn a_flood_is_bounded_per_second_and_its_drops_counted_once() {
        let start = Instant::now();
        let mut window = RateWindow { start, sent: 0, dropped: 0 };
        for _ in 0..MAX_SERVER_LOGS_PER_SECOND {
            assert_eq!(window.admit(start), Admission::Deliver { report: None });
        }
        assert_eq!(window.admit(start), Admission::Dropped { first: true });
        assert_eq!(window.admit(start), Admission::Dropped { first: false });
        let later = start + RATE_WINDOW;
        assert_eq!(window.admit(later), Admission::Deliver { report: Some(2) });
        assert_eq!(window.roll(later + RATE_WINDOW), None, "reported once");
    }
}
