//! How remote tools appear to a model: provider-safe names and the tool objects handed to JavaScript.

pub mod disclosure;
pub mod naming;
pub mod prompt;
pub mod search;

use crate::protocol::mcp::Tool;
use serde::Serialize;
use serde_json::value::RawValue;
use serde_json::Value;

/// JSON kept as its text: a projected schema is held for the life of a toolset but only ever
/// forwarded, and text takes a fraction of the memory of a parsed `Value` tree.
pub type JsonText = Box<RawValue>;

pub fn json_text(value: &Value) -> JsonText {
    serde_json::value::to_raw_value(value).expect("a Value always serializes")
}

/// One remote tool as the agent sees it.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ProjectedTool {
    /// `${server}__${tool}`, rewritten only when a model provider would reject it.
    pub name: String,
    pub description: String,
    pub input_schema: JsonText,
    /// The configured server name.
    pub server: String,
    /// The tool's name on its server, exactly as published.
    pub remote_name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub output_schema: Option<JsonText>,
    /// Passed through for display. Never consulted for any decision: a server can lie in them.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub annotations: Option<JsonText>,
}

impl PartialEq for ProjectedTool {
    fn eq(&self, other: &Self) -> bool {
        let text = |j: &Option<JsonText>| j.as_ref().map(|j| j.get().to_owned());
        self.name == other.name
            && self.description == other.description
            && self.input_schema.get() == other.input_schema.get()
            && self.server == other.server
            && self.remote_name == other.remote_name
            && self.title == other.title
            && text(&self.output_schema) == text(&other.output_schema)
            && text(&self.annotations) == text(&other.annotations)
    }
}

impl ProjectedTool {
    /// A drifted tool: its name stays so the model can explain the gap, but nothing the server now
    /// says about it is shown, and calls are refused.
    pub fn quarantined(name: String, server: &str, tool: &Tool) -> Self {
        ProjectedTool {
            name,
            description: format!(
                "Unavailable: the definition of tool {:?} on server {server:?} changed since it was first trusted, so it \
                 cannot be called. Tell the user it must be re-trusted before use.",
                tool.name
            ),
            input_schema: json_text(&serde_json::json!({ "type": "object", "properties": {} })),
            server: server.to_owned(),
            remote_name: tool.name.clone(),
            title: None,
            output_schema: None,
            annotations: None,
        }
    }

    pub fn new(name: String, server: &str, tool: &Tool) -> Self {
        ProjectedTool {
            name,
            description: tool.description.clone().or_else(|| tool.title.clone()).unwrap_or_default(),
            input_schema: json_text(&tool.input_schema),
            server: server.to_owned(),
            remote_name: tool.name.clone(),
            title: tool.title.clone(),
            output_schema: tool.output_schema.as_ref().map(json_text),
            annotations: tool.annotations.as_ref().map(json_text),
        }
    }
}
