//! How remote tools appear to a model: provider-safe names and the tool objects handed to JavaScript.

pub mod disclosure;
pub mod naming;
pub mod prompt;
pub mod search;

use crate::protocol::mcp::Tool;
use serde::Serialize;
use serde_json::Value;

/// One remote tool as the agent sees it.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ProjectedTool {
    /// `${server}__${tool}`, rewritten only when a model provider would reject it.
    pub name: String,
    pub description: String,
    pub input_schema: Value,
    /// The configured server name.
    pub server: String,
    /// The tool's name on its server, exactly as published.
    pub remote_name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub output_schema: Option<Value>,
    /// Passed through for display. Never consulted for any decision: a server can lie in them.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub annotations: Option<Value>,
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
            input_schema: serde_json::json!({ "type": "object", "properties": {} }),
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
            input_schema: tool.input_schema.clone(),
            server: server.to_owned(),
            remote_name: tool.name.clone(),
            title: tool.title.clone(),
            output_schema: tool.output_schema.clone(),
            annotations: tool.annotations.clone(),
        }
    }
}
