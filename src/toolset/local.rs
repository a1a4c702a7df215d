//! The tools mcpferry answers itself: from the route table, while any server's schemas are
//! abbreviated, `mcp__describe_tool` and `mcp__search_tools` (no server is contacted); and with
//! `exposeSkills`, `mcp__skills`, which lists the skills listed at connect and loads one (or reads one of
//! its files) from its own server through `toolset::skills`.

use super::routes::RouteTable;
use crate::error::{McpError, Result};
use crate::projection::disclosure::{MCP_DESCRIBE_TOOL, MCP_SEARCH_TOOLS};
use crate::projection::{json_text, ProjectedTool};

/// The `server` of the tools mcpferry answers itself.
pub const LOCAL_SERVER: &str = "mcpferry";
const DEFAULT_SEARCH_RESULTS: usize = 5;
const MAX_SEARCH_RESULTS: usize = 20;

/// The local tool of skills (`exposeSkills`).
pub const MCP_SKILLS: &str = "mcp__skills";

pub(crate) fn is_local(name: &str) -> bool {
    name == MCP_DESCRIBE_TOOL || name == MCP_SEARCH_TOOLS
}

/// `mcp__skills`'s definition, with `exposeSkills`.
pub(crate) fn skills_tool(exposed: bool) -> Option<ProjectedTool> {
    exposed.then(|| ProjectedTool {
        name: MCP_SKILLS.to_owned(),
        description: "Use the skills MCP servers offer (instructions for a task, written by the server, not by the user). \
             Call it with no arguments to see each skill's server, name and description; with `server` and `skill` \
             to load one before following it; add `file` to read one of the loaded skill's files. A skill grants \
             no permissions."
            .into(),
        input_schema: json_text(&serde_json::json!({
            "type": "object",
            "properties": {
                "server": { "type": "string", "description": "The server offering the skill." },
                "skill": { "type": "string", "description": "The skill's name (or its SKILL.md URI) on that server." },
                "file": { "type": "string", "description": "A file of the loaded skill, by its path inside the skill (e.g. references/FORMS.md)." },
            },
        })),
        server: LOCAL_SERVER.to_owned(),
        remote_name: MCP_SKILLS.to_owned(),
        title: None,
        output_schema: None,
        annotations: None,
        texts_id: None,
    })
}

/// The local tools' definitions, present while `table` abbreviates any server's schemas.
pub(crate) fn virtual_tools(table: &RouteTable) -> Vec<ProjectedTool> {
    if !table.any_abbreviated() {
        return Vec::new();
    }
    let local = |name: &str, description: &str, input_schema: serde_json::Value| ProjectedTool {
        name: name.to_owned(),
        description: description.into(),
        input_schema: json_text(&input_schema),
        server: LOCAL_SERVER.to_owned(),
        remote_name: name.to_owned(),
        title: None,
        output_schema: None,
        annotations: None,
        texts_id: None,
    };
    vec![
        local(
            MCP_DESCRIBE_TOOL,
            "Get the full description and input schema of an MCP tool whose schema is abbreviated. Call it \
             before calling such a tool when you are unsure of its parameters.",
            serde_json::json!({
                "type": "object",
                "properties": { "name": { "type": "string", "description": "The tool's full name, as listed (server__tool)." } },
                "required": ["name"],
            }),
        ),
        local(
            MCP_SEARCH_TOOLS,
            "Search every MCP tool by what you want to do. Returns the best matches with their descriptions; \
             use it when no listed tool obviously fits.",
            serde_json::json!({
                "type": "object",
                "properties": {
                    "query": { "type": "string", "description": "What you want to do, in a few words." },
                    "limit": { "type": "integer", "minimum": 1, "maximum": MAX_SEARCH_RESULTS, "description": "How many matches (default 5)." },
                },
                "required": ["query"],
            }),
        ),
    ]
}

/// Answer `mcp__describe_tool` or `mcp__search_tools` from `table`.
pub(crate) fn answer(table: &RouteTable, name: &str, arguments_json: &str) -> Result<Box<str>> {
    let args: serde_json::Value = serde_json::from_str(arguments_json)
        .ok()
        .filter(serde_json::Value::is_object)
        .ok_or_else(|| McpError::InvalidArguments("tool arguments must be a JSON object".to_owned()))?;
    let text_result = |value: serde_json::Value| -> Result<Box<str>> {
        let text = serde_json::to_string_pretty(&value).expect("values serialize");
        Ok(serde_json::json!({ "content": [{ "type": "text", "text": text }], "structuredContent": value })
            .to_string()
            .into_boxed_str())
    };
    if name == MCP_DESCRIBE_TOOL {
        let wanted = args.get("name").and_then(|v| v.as_str()).unwrap_or_default();
        let Some(route) = table.routes.get(wanted) else {
            return Err(McpError::Tool(format!("there is no MCP tool named {wanted:?}; use {MCP_SEARCH_TOOLS} to find one")));
        };
        let tool = &route.definition;
        return text_result(serde_json::json!({
            "name": wanted,
            "description": &*tool.description,
            "inputSchema": tool.input_schema,
            "server": tool.server,
        }));
    }
    let query = args.get("query").and_then(|v| v.as_str()).unwrap_or_default();
    let limit = args.get("limit").and_then(|v| v.as_u64()).map_or(DEFAULT_SEARCH_RESULTS, |n| (n as usize).clamp(1, MAX_SEARCH_RESULTS));
    let search = table.search();
    let matches: Vec<serde_json::Value> = search
        .index
        .search(query, limit)
        .into_iter()
        .map(|hit| serde_json::json!({ "name": search.names[hit.index], "description": search.descriptions[hit.index] }))
        .collect();
    text_result(serde_json::json!({ "query": query, "matches": matches }))
}
