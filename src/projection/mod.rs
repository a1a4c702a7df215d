//! How remote tools appear to a model: provider-safe names and the tool objects handed to JavaScript.

pub mod disclosure;
pub mod naming;
pub mod prompt;
pub mod search;

use crate::protocol::mcp::Tool;
use serde::{Serialize, Serializer};
use serde_json::value::RawValue;
use serde_json::Value;
use std::sync::Arc;

/// JSON kept as its text: a projected schema is held for the life of a toolset but only ever
/// forwarded, and text takes a fraction of the memory of a parsed `Value` tree. Shared: toolsets that
/// list the same catalogue from the same server hold one copy (see `catalog::shared`).
#[derive(Clone)]
pub struct JsonText(Arc<RawValue>);

impl std::ops::Deref for JsonText {
    type Target = RawValue;
    fn deref(&self) -> &RawValue {
        &self.0
    }
}

impl Serialize for JsonText {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.0.serialize(serializer)
    }
}

impl std::fmt::Debug for JsonText {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.0.get())
    }
}

pub fn json_text(value: &Value) -> JsonText {
    JsonText(Arc::from(serde_json::value::to_raw_value(value).expect("a Value always serializes")))
}

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
#[derive(Clone, Debug)]
pub struct ToolTexts {
    pub description: Text,
    pub input_schema: JsonText,
    pub output_schema: Option<JsonText>,
    pub annotations: Option<JsonText>,
    /// `disclosure::schema_tokens` of the input schema: its compact text is `input_schema` itself.
    pub schema_tokens: usize,
}

impl ToolTexts {
    pub fn of(tool: &Tool) -> Self {
        let input_schema = json_text(&tool.input_schema);
        ToolTexts {
            description: tool.description.as_deref().or(tool.title.as_deref()).unwrap_or_default().into(),
            schema_tokens: disclosure::estimate_tokens(input_schema.get()),
            input_schema,
            output_schema: tool.output_schema.as_ref().map(json_text),
            annotations: tool.annotations.as_ref().map(json_text),
        }
    }
}

/// One remote tool as the agent sees it.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ProjectedTool {
    /// `${server}__${tool}`, rewritten only when a model provider would reject it.
    pub name: String,
    pub description: Text,
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
        }
    }
}
