//! How remote tools appear to a model: provider-safe names and the tool objects handed to JavaScript.

pub mod disclosure;
pub mod naming;
pub mod prompt;
pub mod search;

use crate::protocol::mcp::Tool;
use serde::ser::SerializeMap;
use serde::{Serialize, Serializer};
use std::sync::Arc;

pub use crate::protocol::json_text::{json_text, JsonText};

/// A server's text (a description), shared like [`JsonText`].
#[derive(Clone, PartialEq, Eq, Default)]
pub struct Text(Arc<str>);

impl std::ops::Deref for Text {
    type Target = str;
    fn deref(&self) -> &str {
        &self.0
    }
}

impl Serialize for Text {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.0)
    }
}

impl std::fmt::Debug for Text {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Debug::fmt(&*self.0, f)
    }
}

impl From<&str> for Text {
    fn from(text: &str) -> Self {
        Text(text.into())
    }
}

impl From<String> for Text {
    fn from(text: String) -> Self {
        Text(text.into())
    }
}

/// What a projection shows of a tool as published, independent of the toolset that shows it: the
/// bulk of a projected tool, made once per distinct catalogue and shared read-only.
#[derive(Clone)]
pub struct ToolTexts {
    pub description: Text,
    pub input_schema: JsonText,
    pub output_schema: Option<JsonText>,
    pub annotations: Option<JsonText>,
    /// `disclosure::schema_tokens` of the input schema: its compact text is `input_schema` itself.
    pub schema_tokens: usize,
    /// Set on the texts of a shared catalogue: JavaScript keeps one frozen object per id for every
    /// toolset showing these texts (see [`ProjectedTool`]'s serialization).
    pub shared_id: Option<u64>,
    /// The schemas compiled for validation, shared the same way (a shared catalogue's texts only).
    pub schemas: Option<Arc<crate::schema::tool::ToolSchemas>>,
}

/// Ids of shared texts: from a counter, never reused in a process, so an id names one content for good
/// (a hash of the content would let a server aim for another's id; an address could be reused).
static NEXT_SHARED_ID: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);

impl std::fmt::Debug for ToolTexts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ToolTexts")
            .field("description", &self.description)
            .field("input_schema", &self.input_schema)
            .field("shared_id", &self.shared_id)
            .finish_non_exhaustive()
    }
}

impl ToolTexts {
    pub fn of(tool: &Tool) -> Self {
        ToolTexts {
            description: tool.description.as_deref().or(tool.title.as_deref()).unwrap_or_default().into(),
            schema_tokens: disclosure::estimate_tokens(tool.input_schema.get()),
            input_schema: tool.input_schema.clone(),
            output_schema: tool.output_schema.clone(),
            annotations: tool.annotations.clone(),
            shared_id: None,
            schemas: None,
        }
    }

    /// The texts of a tool in a catalogue shared between toolsets, with an id of their own.
    pub fn shared(tool: &Tool) -> Self {
        let shared_id = Some(NEXT_SHARED_ID.fetch_add(1, std::sync::atomic::Ordering::Relaxed));
        ToolTexts { shared_id, schemas: Some(Arc::default()), ..Self::of(tool) }
    }
}

/// One remote tool as the agent sees it.
#[derive(Debug, Clone)]
pub struct ProjectedTool {
    /// `${server}__${tool}`, rewritten only when a model provider would reject it.
    pub name: String,
    pub description: Text,
    pub input_schema: JsonText,
    /// The configured server name.
    pub server: String,
    /// The tool's name on its server, exactly as published.
    pub remote_name: String,
    pub title: Option<String>,
    pub output_schema: Option<JsonText>,
    /// Passed through for display. Never consulted for any decision: a server can lie in them.
    pub annotations: Option<JsonText>,
    /// Its MCP Apps metadata (`_meta.ui`): the `ui://` app the host may render, and who may call it.
    pub ui: Option<crate::protocol::apps::ToolUi>,
    /// The id of the shared texts that `description`, the schemas and `annotations` are, when they are
    /// exactly those (not a quarantine notice, not a schema cut down by a disclosure tier).
    pub texts_id: Option<u64>,
}

/// What JavaScript receives: the tool's fields, except that texts shared between toolsets travel as
/// `textsId` and `texts` (their JSON as a string), so JavaScript parses them only for an id it does not
/// hold yet and every toolset's tool points at the same frozen objects. A process with thousands of
/// sessions on the same servers then holds each description and schema once, not once per session.
impl Serialize for ProjectedTool {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(None)?;
        map.serialize_entry("name", &self.name)?;
        if self.texts_id.is_none() {
            map.serialize_entry("description", &self.description)?;
            map.serialize_entry("inputSchema", &self.input_schema)?;
        }
        map.serialize_entry("server", &self.server)?;
        map.serialize_entry("remoteName", &self.remote_name)?;
        if let Some(title) = &self.title {
            map.serialize_entry("title", title)?;
        }
        if let Some(ui) = &self.ui {
            map.serialize_entry("ui", ui)?;
        }
        match self.texts_id {
            Some(id) => {
                map.serialize_entry("textsId", &id)?;
                map.serialize_entry("texts", &self.texts_json())?;
            }
            None => {
                if let Some(output_schema) = &self.output_schema {
                    map.serialize_entry("outputSchema", output_schema)?;
                }
                if let Some(annotations) = &self.annotations {
                    map.serialize_entry("annotations", annotations)?;
                }
            }
        }
        map.end()
    }
}

impl PartialEq for ProjectedTool {
    fn eq(&self, other: &Self) -> bool {
        // The schemas as JSON values (see `JsonText`'s `eq`): a tool rebuilt from a store is the same tool.
        self.name == other.name
            && self.description == other.description
            && self.input_schema == other.input_schema
            && self.server == other.server
            && self.remote_name == other.remote_name
            && self.title == other.title
            && self.output_schema == other.output_schema
            && self.annotations == other.annotations
            && self.ui == other.ui
    }
}

impl ProjectedTool {
    /// `{"description", "inputSchema", "outputSchema"?, "annotations"?}` as JSON text.
    fn texts_json(&self) -> String {
        let description = serde_json::to_string(&*self.description).expect("a string serializes");
        let mut out = String::with_capacity(description.len() + self.input_schema.get().len() + 64);
        out.push_str("{\"description\":");
        out.push_str(&description);
        out.push_str(",\"inputSchema\":");
        out.push_str(self.input_schema.get());
        for (key, text) in [("outputSchema", &self.output_schema), ("annotations", &self.annotations)] {
            if let Some(text) = text {
                out.push_str(&format!(",\"{key}\":"));
                out.push_str(text.get());
            }
        }
        out.push('}');
        out
    }

    /// A drifted tool: its name stays so the model can explain the gap, but nothing the server now
    /// says about it is shown, and calls are refused.
    pub fn quarantined(name: String, server: &str, tool: &Tool) -> Self {
        ProjectedTool {
            name,
            description: Text::from(format!(
                "Unavailable: the definition of tool {:?} on server {server:?} changed since it was first trusted, so it \
                 cannot be called. Tell the user it must be re-trusted before use.",
                tool.name
            )),
            input_schema: json_text(&serde_json::json!({ "type": "object", "properties": {} })),
            server: server.to_owned(),
            remote_name: tool.name.clone(),
            title: None,
            output_schema: None,
            annotations: None,
            ui: None,
            texts_id: None,
        }
    }

    pub fn new(name: String, server: &str, tool: &Tool) -> Self {
        Self::with_texts(name, server, tool, &ToolTexts::of(tool))
    }

    /// `new` with the tool's texts made already (shared by every toolset listing the same catalogue).
    pub fn with_texts(name: String, server: &str, tool: &Tool, texts: &ToolTexts) -> Self {
        ProjectedTool {
            name,
            description: texts.description.clone(),
            input_schema: texts.input_schema.clone(),
            server: server.to_owned(),
            remote_name: tool.name.clone(),
            title: tool.title.clone(),
            output_schema: texts.output_schema.clone(),
            annotations: texts.annotations.clone(),
            ui: tool.ui.clone(),
            texts_id: texts.shared_id,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Value;

    fn tool() -> Tool {
        serde_json::from_value(serde_json::json!({
            "name": "echo",
            "description": "Echo \"it\" back.",
            "inputSchema": { "type": "object", "properties": { "text": { "type": "string" } } },
            "outputSchema": { "type": "object" },
            "annotations": { "readOnlyHint": true },
        }))
        .unwrap()
    }

    #[test]
    fn shared_texts_travel_once_as_text_with_an_id_never_reused() {
        let tool = tool();
        let (first, second) = (ToolTexts::shared(&tool), ToolTexts::shared(&tool));
        assert_ne!(first.shared_id, second.shared_id);
        let projected = ProjectedTool::with_texts("srv__echo".into(), "srv", &tool, &first);
        let wire: Value = serde_json::to_value(&projected).unwrap();
        assert_eq!(wire["textsId"], serde_json::json!(first.shared_id.unwrap()));
        assert!(wire.get("description").is_none() && wire.get("inputSchema").is_none());
        assert_eq!(
            (wire["name"].as_str(), wire["server"].as_str(), wire["remoteName"].as_str()),
            (Some("srv__echo"), Some("srv"), Some("echo"))
        );
        let texts: Value = serde_json::from_str(wire["texts"].as_str().unwrap()).unwrap();
        assert_eq!(
            texts,
            serde_json::json!({
                "description": "Echo \"it\" back.",
                "inputSchema": { "type": "object", "properties": { "text": { "type": "string" } } },
                "outputSchema": { "type": "object" },
                "annotations": { "readOnlyHint": true },
            })
        );
    }

    #[test]
    fn texts_of_one_toolset_only_travel_inline() {
        let tool = tool();
        let wire: Value = serde_json::to_value(ProjectedTool::new("srv__echo".into(), "srv", &tool)).unwrap();
        assert!(wire.get("textsId").is_none() && wire.get("texts").is_none());
        assert_eq!(wire["description"], "Echo \"it\" back.");
        assert_eq!(wire["inputSchema"]["properties"]["text"]["type"], "string");
        assert_eq!(wire["annotations"]["readOnlyHint"], true);
        let quarantined: Value =
            serde_json::to_value(ProjectedTool::quarantined("srv__echo".into(), "srv", &tool)).unwrap();
        assert!(quarantined.get("textsId").is_none());
        assert!(quarantined["description"].as_str().unwrap().starts_with("Unavailable"));
    }
}
