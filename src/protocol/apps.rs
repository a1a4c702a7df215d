//! MCP Apps (the `io.modelcontextprotocol/ui` extension): a tool may name a `ui://` resource holding an
//! HTML app the host renders beside the conversation, and may say whether the model, the app, or both
//! may call it. This client only carries that to the host: it declares the extension when the host
//! says it renders apps, reads `ui://` resources like any other, and never renders or fetches anything.

use crate::limits::MAX_RESOURCE_URI_BYTES;
use serde::Serialize;
use serde_json::Value;

/// The extension's identifier in `capabilities.extensions`.
pub const APPS_EXTENSION: &str = "io.modelcontextprotocol/ui";

/// The MIME type of an app's HTML resource.
pub const APP_MIME_TYPE: &str = "text/html;profile=mcp-app";

/// What the client declares under `capabilities.extensions` when the host renders apps.
pub fn capability() -> Value {
    serde_json::json!({ "mimeTypes": [APP_MIME_TYPE] })
}

/// Who may call a tool.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Visibility {
    Model,
    App,
}

/// A tool's `_meta.ui`, as far as it is well formed. Anything else a server puts in `_meta` is dropped.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolUi {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub resource_uri: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub visibility: Option<Vec<Visibility>>,
}

impl ToolUi {
    /// The app metadata of a tool's `_meta`, or `None` when it names no well-formed app and no
    /// visibility. The legacy flat `_meta["ui/resourceUri"]` is read when `ui.resourceUri` is absent.
    pub fn of_meta(meta: &Value) -> Option<ToolUi> {
        let ui = meta.get("ui");
        let uri = ui
            .and_then(|ui| ui.get("resourceUri"))
            .or_else(|| meta.get("ui/resourceUri"))
            .and_then(Value::as_str)
            .filter(|uri| is_app_uri(uri))
            .map(str::to_owned);
        let visibility = ui.and_then(|ui| ui.get("visibility")).and_then(Value::as_array).map(|listed| {
            let mut kept: Vec<Visibility> = Vec::new();
            for entry in listed.iter().filter_map(Value::as_str) {
                let who = match entry {
                    "model" => Visibility::Model,
                    "app" => Visibility::App,
                    _ => continue,
                };
                if !kept.contains(&who) {
                    kept.push(who);
                }
            }
            kept
        });
        (uri.is_some() || visibility.is_some()).then_some(ToolUi { resource_uri: uri, visibility })
    }

    /// Whether the model may be offered the tool: unless the server says only its app calls it.
    pub fn offered_to_model(&self) -> bool {
        self.visibility.as_ref().is_none_or(|v| v.contains(&Visibility::Model))
    }
}

/// A `ui://` URI of bounded length with nothing that steers or hides text (control, bidirectional or
/// invisible characters): what a host may look up, and show, as an app.
fn is_app_uri(uri: &str) -> bool {
    use crate::guard::server_text::{is_format, steers};
    uri.starts_with("ui://")
        && uri.len() > "ui://".len()
        && uri.len() <= MAX_RESOURCE_URI_BYTES
        && !uri.chars().any(|c| steers(c) || is_format(c))
}

/// `#[serde(with)]` for a tool's `_meta`: read as [`ToolUi`], written back as `{"ui": …}` so a stored
/// tool reads the same when it is loaded again.
pub mod tool_meta {
    use super::ToolUi;
    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    pub fn deserialize<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Option<ToolUi>, D::Error> {
        let meta = Option::<serde_json::Value>::deserialize(deserializer)?;
        Ok(meta.as_ref().and_then(ToolUi::of_meta))
    }

    pub fn serialize<S: Serializer>(ui: &Option<ToolUi>, serializer: S) -> Result<S::Ok, S::Error> {
        #[derive(Serialize)]
        struct Meta<'a> {
            ui: &'a ToolUi,
        }
        match ui {
            Some(ui) => Meta { ui }.serialize(serializer),
            None => serializer.serialize_none(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_tool_names_its_app_by_a_ui_uri_only() {
        let ui = ToolUi::of_meta(&json!({ "ui": { "resourceUri": "ui://weather/view.html" } })).unwrap();
        assert_eq!(ui.resource_uri.as_deref(), Some("ui://weather/view.html"));
        assert!(ui.offered_to_model());
        assert_eq!(
            ToolUi::of_meta(&json!({ "ui/resourceUri": "ui://legacy" })).unwrap().resource_uri.as_deref(),
            Some("ui://legacy")
        );
        for refused in [
            json!("https://evil.example/app.html"),
            json!("ui://"),
            json!("ui://a\nb"),
            json!("ui://a\u{202e}b"),
            json!("ui://a\u{200b}b"),
            json!(7),
            json!("ui://".to_owned() + &"a".repeat(3000)),
        ] {
            assert_eq!(ToolUi::of_meta(&json!({ "ui": { "resourceUri": refused } })), None, "{refused}");
        }
        assert_eq!(ToolUi::of_meta(&json!({ "other": 1 })), None);
        assert_eq!(ToolUi::of_meta(&json!("not an object")), None);
    }

    #[test]
    fn visibility_keeps_known_callers_once() {
        let ui = ToolUi::of_meta(&json!({ "ui": { "visibility": ["app", "robot", "app", 3] } })).unwrap();
        assert_eq!(ui.visibility, Some(vec![Visibility::App]));
        assert!(!ui.offered_to_model());
        let both =
            ToolUi::of_meta(&json!({ "ui": { "resourceUri": "ui://x", "visibility": ["model", "app"] } })).unwrap();
        assert!(both.offered_to_model());
        // An empty list offers the tool to nobody; the model is not offered it.
        assert!(!ToolUi::of_meta(&json!({ "ui": { "visibility": [] } })).unwrap().offered_to_model());
    }

    #[test]
    fn the_stored_form_reads_back_the_same() {
        #[derive(serde::Serialize, serde::Deserialize)]
        struct Holder {
            #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none", with = "tool_meta")]
            ui: Option<ToolUi>,
        }
        let read: Holder =
            serde_json::from_str(r#"{"_meta":{"ui":{"resourceUri":"ui://a","visibility":["app"]},"secret":"x"}}"#)
                .unwrap();
        let written = serde_json::to_string(&read).unwrap();
        assert_eq!(written, r#"{"_meta":{"ui":{"resourceUri":"ui://a","visibility":["app"]}}}"#);
        assert_eq!(serde_json::from_str::<Holder>(&written).unwrap().ui, read.ui);
        assert_eq!(serde_json::to_string(&Holder { ui: None }).unwrap(), "{}");
    }
}
