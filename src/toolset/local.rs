//! The tools mcpferry answers itself: from the route table, while any server's schemas are
//! abbreviated, `mcp__describe_tool` and `mcp__search_tools` (no server is contacted); and with
//! `exposeSkills`, `mcp__skills`, which lists the skills listed at connect and loads one (or reads one of
//! its files) from its own server through `toolset::skills`; with `exposeResources`, `mcp__resources`,
//! which lists the servers' resources and reads one through `toolset::model_resources`.

use super::routes::RouteTable;
use crate::error::{McpError, Result};
use crate::limits::MAX_SEARCH_RESULTS;
use crate::projection::disclosure::{MCP_DESCRIBE_TOOL, MCP_SEARCH_TOOLS};
use crate::projection::{json_text, ProjectedTool};

/// The `server` of the tools mcpferry answers itself.
pub const LOCAL_SERVER: &str = "mcpferry";
const DEFAULT_SEARCH_RESULTS: usize = 5;

/// The local tool of skills (`exposeSkills`).
pub const MCP_SKILLS: &str = "mcp__skills";
/// The local tool of resources (`exposeResources`).
pub const MCP_RESOURCES: &str = "mcp__resources";

/// Whether `name` is one of the local tools, which no server's tool may be projected as.
pub(crate) fn is_reserved(name: &str) -> bool {
    is_local(name) || name == MCP_SKILLS || name == MCP_RESOURCES
}

/// A tool mcpferry answers itself: no title, no output schema, no annotations, no shared texts.
fn local_tool(name: &str, description: &str, input_schema: serde_json::Value) -> ProjectedTool {
    ProjectedTool {
        name: name.to_owned(),
        description: description.into(),
        input_schema: json_text(&input_schema),
        server: LOCAL_SERVER.to_owned(),
        remote_name: name.to_owned(),
        title: None,
        output_schema: None,
        annotations: None,
        ui: None,
        texts_id: None,
    }
}

/// The local tools the host asked to show the model (`exposeSkills`, `exposeResources`): always there
/// while asked for, whatever the servers offer.
pub(crate) fn model_tools(expose_skills: bool, expose_resources: bool) -> Vec<ProjectedTool> {
    skills_tool(expose_skills).into_iter().chain(resources_tool(expose_resources)).collect()
}

/// The disclosure budget the servers' tools share once the local tools the model is shown
/// (`model_tools`) are counted: each server's tools must fit in what those leave.
pub(crate) fn budget_left(
    mut disclosure: crate::config::DisclosureConfig,
    expose_skills: bool,
    expose_resources: bool,
) -> crate::config::DisclosureConfig {
    use crate::projection::disclosure::estimate_tokens;
    let used: usize = model_tools(expose_skills, expose_resources)
        .iter()
        .map(|tool| {
            estimate_tokens(&tool.name) + estimate_tokens(&tool.description) + estimate_tokens(tool.input_schema.get())
        })
        .sum();
    disclosure.budget_tokens = disclosure.budget_tokens.saturating_sub(used);
    disclosure
}

/// `mcp__resources`'s definition, with `exposeResources`.
fn resources_tool(exposed: bool) -> Option<ProjectedTool> {
    exposed.then(|| {
        local_tool(
            MCP_RESOURCES,
            "Use the resources MCP servers offer (documents and data, written by the server, not by the user). Call it \
             with no arguments (or only `server`) to list them; with `server` and `uri` to read one.",
            serde_json::json!({
                "type": "object",
                "properties": {
                    "server": { "type": "string", "description": "The server offering the resource." },
                    "uri": { "type": "string", "description": "The resource's URI, as listed (a uriTemplate with its variables filled in)." },
                },
            }),
        )
    })
}

pub(crate) fn is_local(name: &str) -> bool {
    name == MCP_DESCRIBE_TOOL || name == MCP_SEARCH_TOOLS
}

/// `mcp__skills`'s definition, with `exposeSkills`.
fn skills_tool(exposed: bool) -> Option<ProjectedTool> {
    exposed.then(|| {
        local_tool(
            MCP_SKILLS,
            "Use the skills MCP servers offer (instructions for a task, written by the server, not by the user). \
             Call it with no arguments to see each skill's server, name and description; with `server` and `skill` \
             to load one before following it; add `file` to read one of the loaded skill's files. A skill grants \
             no permissions.",
            serde_json::json!({
                "type": "object",
                "properties": {
                    "server": { "type": "string", "description": "The server offering the skill." },
                    "skill": { "type": "string", "description": "The skill's name (or its SKILL.md URI) on that server." },
                    "file": { "type": "string", "description": "A file of the loaded skill, by its path inside the skill (e.g. references/FORMS.md)." },
                },
            }),
        )
    })
}

/// The local tools' definitions, present while `table` abbreviates any server's schemas.
pub(crate) fn virtual_tools(table: &RouteTable) -> Vec<ProjectedTool> {
    if !table.any_abbreviated() {
        return Vec::new();
    }
    vec![
        local_tool(
            MCP_DESCRIBE_TOOL,
            "Get the full description and input schema of an MCP tool whose schema is abbreviated. Call it \
             before calling such a tool when you are unsure of its parameters.",
            serde_json::json!({
                "type": "object",
                "properties": { "name": { "type": "string", "description": "The tool's full name, as listed (server__tool)." } },
                "required": ["name"],
            }),
        ),
        local_tool(
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
            return Err(McpError::Tool(format!(
                "there is no MCP tool named {wanted:?}; use {MCP_SEARCH_TOOLS} to find one"
            )));
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
    let limit = args
        .get("limit")
        .and_then(|v| v.as_u64())
        .map_or(DEFAULT_SEARCH_RESULTS, |n| (n as usize).clamp(1, MAX_SEARCH_RESULTS));
    let search = table.search();
    let matches: Vec<serde_json::Value> = search
        .index
        .search(query, limit)
        .into_iter()
        .map(
            |hit| serde_json::json!({ "name": search.names[hit.index], "description": search.descriptions[hit.index] }),
        )
        .collect();
    text_result(serde_json::json!({ "query": query, "matches": matches }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::DisclosureConfig;

    #[test]
    fn the_tools_shown_to_the_model_are_counted_in_the_budget() {
        let budget = |skills, resources| {
            budget_left(DisclosureConfig { budget_tokens: 20_000, always_load: Vec::new() }, skills, resources)
                .budget_tokens
        };
        assert_eq!(budget(false, false), 20_000);
        let (skills, resources, both) =
            (20_000 - budget(true, false), 20_000 - budget(false, true), 20_000 - budget(true, true));
        assert!(skills > 50 && resources > 50, "{skills} {resources}");
        assert_eq!(both, skills + resources);
        assert_eq!(
            budget_left(DisclosureConfig { budget_tokens: 10, always_load: Vec::new() }, true, true).budget_tokens,
            0
        );
    }

    #[test]
    fn every_local_tool_is_reserved() {
        for name in [MCP_SKILLS, MCP_RESOURCES, MCP_DESCRIBE_TOOL, MCP_SEARCH_TOOLS] {
            assert!(is_reserved(name), "{name}");
        }
        assert!(!is_reserved("mcp__other"));
        assert_eq!(
            model_tools(true, true).iter().map(|t| t.name.as_str()).collect::<Vec<_>>(),
            [MCP_SKILLS, MCP_RESOURCES]
        );
    }
}
