//! Progress to the host: what a server's `notifications/progress` for a tool call becomes before it
//! reaches the caller's `onProgress`.
//!
//! Every `tools/call` carries `_meta.progressToken` (its request id, both eras), so a server may report
//! progress for any call; the notification always restarts the call's idle timeout
//! (`session::connection::ConnectionCore::keep_waiting`). Only a call whose caller gave `onProgress` has a
//! [`ProgressListener`]: for the others nothing more is parsed or sent than before.
//!
//! The server's values are untrusted: `progress` must be a finite number, `total` (optional) a finite
//! number, `message` (optional) a string, shown redacted with the server's secrets, cut to
//! [`MAX_PROGRESS_MESSAGE_BYTES`] and made terminal-safe ([`crate::guard::server_text::shown`]). A
//! notification that breaks these rules still restarts the timeout but is not delivered.
//!
//! Delivery is bounded by coalescing, not by a queue: until JavaScript collects them, only the latest
//! update of each call is kept (see `napi::wire::Completions`), so a server flooding progress replaces
//! one pending entry per call instead of growing anything. Updates after the call settled are dropped
//! (its listener goes with its pending entry).

use crate::guard::redact::Secrets;
use crate::limits::MAX_PROGRESS_MESSAGE_BYTES;
use serde::Deserialize;
use serde_json::value::RawValue;

/// One progress update, validated; `message` is still the server's text as sent (see [`Progress::to_json`]).
#[derive(Debug, Clone, PartialEq)]
pub struct Progress {
    pub progress: f64,
    pub total: Option<f64>,
    pub message: Option<String>,
}

/// Receives the progress of one request (a tool call whose caller listens), from the transport's reader.
pub trait ProgressListener: Send + Sync {
    fn progress(&self, update: Progress);
}

#[derive(Deserialize)]
struct Wire<'a> {
    progress: &'a RawValue,
    #[serde(default, borrow)]
    total: Option<&'a RawValue>,
    #[serde(default, borrow)]
    message: Option<&'a RawValue>,
}

/// A finite number, or `None` (a string, `null`, an object, or a number out of `f64` range).
fn finite(raw: &RawValue) -> Option<f64> {
    let text = raw.get();
    if !text.starts_with(|c: char| c == '-' || c.is_ascii_digit()) {
        return None;
    }
    serde_json::from_str::<f64>(text).ok().filter(|n| n.is_finite())
}

/// `notifications/progress` params as the host may see them, or `None` if they break the rules above.
pub fn parse(params: &RawValue) -> Option<Progress> {
    let wire: Wire = serde_json::from_str(params.get()).ok()?;
    let progress = finite(wire.progress)?;
    let total = match wire.total {
        None => None,
        Some(raw) if raw.get() == "null" => None,
        Some(raw) => Some(finite(raw)?),
    };
    let message = match wire.message {
        None => None,
        Some(raw) if raw.get() == "null" => None,
        Some(raw) => Some(serde_json::from_str::<String>(raw.get()).ok()?),
    };
    Some(Progress { progress, total, message })
}

impl Progress {
    /// `{"progress":…,"total"?:…,"message"?:…}` for the host, the message redacted with `secrets`,
    /// bounded and terminal-safe.
    pub fn to_json(&self, secrets: &Secrets) -> String {
        let mut out = serde_json::Map::new();
        out.insert("progress".into(), number(self.progress));
        if let Some(total) = self.total {
            out.insert("total".into(), number(total));
        }
        if let Some(message) = &self.message {
            let (mut shown, cut) =
                crate::guard::server_text::shown(message, MAX_PROGRESS_MESSAGE_BYTES, secrets, false);
            if cut {
                shown.push('…');
            }
            out.insert("message".into(), serde_json::Value::String(shown));
        }
        serde_json::Value::Object(out).to_string()
    }
}

/// Integers as integers (`3`, not `3.0`), as the server most likely sent them.
fn number(n: f64) -> serde_json::Value {
    if n.fract() == 0.0 && n.abs() < 9_007_199_254_740_992.0 {
        serde_json::Value::from(n as i64)
    } else {
        serde_json::Number::from_f64(n).map_or(serde_json::Value::Null, serde_json::Value::Number)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn raw(json: &str) -> Box<RawValue> {
        RawValue::from_string(json.to_owned()).unwrap()
    }

    #[test]
    fn valid_progress_is_parsed_and_the_rest_refused() {
        let full = parse(&raw(r#"{"progressToken":3,"progress":1.5,"total":10,"message":"half"}"#)).unwrap();
        assert_eq!(full, Progress { progress: 1.5, total: Some(10.0), message: Some("half".into()) });
        let bare = parse(&raw(r#"{"progressToken":"t","progress":2,"total":null}"#)).unwrap();
        assert_eq!(bare, Progress { progress: 2.0, total: None, message: None });
        for bad in [
            r#"{"progressToken":1}"#,
            r#"{"progressToken":1,"progress":"50"}"#,
            r#"{"progressToken":1,"progress":null}"#,
            r#"{"progressToken":1,"progress":1e999}"#,
            r#"{"progressToken":1,"progress":1,"total":"10"}"#,
            r#"{"progressToken":1,"progress":1,"total":-1e400}"#,
            r#"{"progressToken":1,"progress":1,"message":{"text":"x"}}"#,
            r#"{"progressToken":1,"progress":[1]}"#,
        ] {
            assert_eq!(parse(&raw(bad)), None, "{bad}");
        }
    }

    #[test]
    fn the_message_reaches_the_host_redacted_bounded_and_terminal_safe() {
        let secrets = Secrets::default();
        secrets.add("ghp_secret_token_value");
        let update = Progress {
            progress: 3.0,
            total: Some(4.25),
            message: Some("using ghp_secret_token_value\u{1b}]8;;x\u{7}\nnow".into()),
        };
        let json: serde_json::Value = serde_json::from_str(&update.to_json(&secrets)).unwrap();
        assert_eq!(json, serde_json::json!({ "progress": 3, "total": 4.25, "message": "using [redacted] ]8;;x  now" }));
        let long = Progress { progress: 1.0, total: None, message: Some("é".repeat(MAX_PROGRESS_MESSAGE_BYTES)) };
        let json: serde_json::Value = serde_json::from_str(&long.to_json(&secrets)).unwrap();
        let message = json["message"].as_str().unwrap();
        assert!(
            message.len() <= MAX_PROGRESS_MESSAGE_BYTES + '…'.len_utf8() && message.ends_with('…'),
            "{}",
            message.len()
        );
        assert_eq!(json.get("total"), None);
    }
}
