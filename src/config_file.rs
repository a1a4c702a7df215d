//! Configuration files other MCP clients already use, read into `mcpTools` server entries
//! (`loadMcpConfig`):
//!
//! | shape | where it comes from | keys |
//! |---|---|---|
//! | JSON `{"mcpServers": {name: entry}}` | Claude Desktop, Claude Code (`.mcp.json`), Cursor | `command`, `args`, `env`, `cwd` / `url`, `headers`, `type`; `disabled` |
//! | JSON `{"servers": {name: entry}}` | VS Code (`.vscode/mcp.json`) | the same; `type` `stdio`, `http` or `sse` |
//! | TOML `[mcp_servers.name]` | Codex (`config.toml`), `mcpferry.toml` | the same, and `header_env`, `bearer_token_env_var`, `enabled`, `allow_tools`, `deny_tools` |
//!
//! `type` is inferred (`command` → stdio, `url` → Streamable HTTP); `http` means Streamable HTTP and
//! `sse` the legacy transport. In JSON, `${env:VAR}` and `${VAR}` in any string are replaced from the
//! environment when the file is loaded (a disabled entry is left as it is). Header values named by
//! `header_env` are NOT read here: the entry carries the variable names (`headersFromEnv`), and the
//! engine reads them when it connects, so the values never sit in the configuration object.
//!
//! Every entry is then checked by the same validator as `mcpTools` ([`crate::config::parse`]); every
//! error names the file, the entry and the field.

use crate::config::is_variable_name;
use crate::error::{McpError, Result};
use serde_json::{json, Map, Value};

/// Fields of Codex's format that have no meaning here; accepted so its files load, and ignored.
const IGNORED_TOML_KEYS: &[&str] = &["startup_timeout_sec", "startup_timeout_ms", "tool_timeout_sec"];

/// Parse `text` (from `source`, a path or a description, for messages) as `format`: `"json"` or `"toml"`.
/// Returns `{ "servers": [entry, ...], "disabled": [name, ...] }`: every entry (disabled ones with
/// `enabled: false`, so they show as disabled and nothing is started), in file order.
pub fn load(text: &str, source: &str, format: &str) -> Result<String> {
    let servers = match format {
        "json" => {
            let root: Value =
                serde_json::from_str(text).map_err(|e| McpError::config(format!("{source}: not valid JSON: {e}")))?;
            json_servers(&root, source)?
        }
        "toml" => {
            // The message and line only: the parser's snippet of the line could show a secret value.
            let table: toml::Table = toml::from_str(text).map_err(|e| {
                let line = e.span().map(|span| text[..span.start.min(text.len())].matches('\n').count() + 1);
                McpError::config(format!("{source}: not valid TOML{}: {}", line.map(|l| format!(" (line {l})")).unwrap_or_default(), e.message().trim()))
            })?;
            let root = serde_json::to_value(table).map_err(|e| McpError::config(format!("{source}: {e}")))?;
            toml_servers(&root, source)?
        }
        other => return Err(McpError::config(format!("{source}: unknown configuration format {other:?} (json or toml)"))),
    };
    // The same checks as mcpTools, so a bad entry is reported against this file now, not later.
    let wire = json!({ "servers": servers });
    crate::config::parse(&wire.to_string()).map_err(|e| match e {
        McpError::ConfigInvalid(message) => McpError::config(format!("{source}: {message}")),
        other => other,
    })?;
    let disabled: Vec<&Value> = servers.iter().filter(|s| s["enabled"] == Value::Bool(false)).map(|s| &s["name"]).collect();
    Ok(json!({ "servers": servers, "disabled": disabled }).to_string())
}

fn json_servers(root: &Value, source: &str) -> Result<Vec<Value>> {
    let root = root.as_object().ok_or_else(|| McpError::config(format!("{source}: the file must hold a JSON object")))?;
    let (key, servers) = match (root.get("mcpServers"), root.get("servers")) {
        (Some(servers), _) => ("mcpServers", servers),
        (None, Some(servers)) => ("servers", servers),
        (None, None) => return Err(McpError::config(format!("{source}: no \"mcpServers\" (or VS Code \"servers\") object"))),
    };
    let servers = servers.as_object().ok_or_else(|| McpError::config(format!("{source}: {key} must be an object of named servers")))?;
    servers
        .iter()
        .map(|(name, entry)| crate::config::check_server_name(name, &format!("{source}: {key}")).and_then(|()| json_entry(name, entry, &format!("{source}: {key}.{name}"))))
        .collect()
}

fn json_entry(name: &str, entry: &Value, at: &str) -> Result<Value> {
    let entry = entry.as_object().ok_or_else(|| McpError::config(format!("{at} must be an object")))?;
    let disabled = match (entry.get("disabled"), entry.get("enabled")) {
        (Some(Value::Bool(disabled)), _) => *disabled,
        (Some(_), _) => return Err(McpError::config(format!("{at}.disabled must be a boolean"))),
        (None, Some(Value::Bool(enabled))) => !enabled,
        (None, Some(_)) => return Err(McpError::config(format!("{at}.enabled must be a boolean"))),
        (None, None) => false,
    };
    // A disabled entry is shown, never started: its variables are not needed, so not required.
    let expand = |value: &Value, field: &str| if disabled { Ok(value.clone()) } else { expand_env(value, &format!("{at}.{field}")) };
    let mut out = Map::new();
    out.insert("name".into(), Value::String(name.to_owned()));
    let kind = transport(entry, at)?;
    out.insert("type".into(), Value::String(kind.into()));
    if kind == "stdio" {
        for field in ["command", "args", "env", "cwd"] {
            if let Some(value) = entry.get(field).filter(|v| !v.is_null()) {
                out.insert(field.into(), expand(value, field)?);
            }
        }
    } else {
        for field in ["url", "headers"] {
            if let Some(value) = entry.get(field).filter(|v| !v.is_null()) {
                out.insert(field.into(), expand(value, field)?);
            }
        }
    }
    if disabled {
        out.insert("enabled".into(), Value::Bool(false));
    }
    Ok(Value::Object(out))
}

/// The transport of an entry: its `type`, or inferred from `command` / `url`.
fn transport(entry: &Map<String, Value>, at: &str) -> Result<&'static str> {
    let has = |field: &str| entry.get(field).is_some_and(|v| !v.is_null());
    let inferred = match (has("command"), has("url")) {
        (true, true) => return Err(McpError::config(format!("{at} has both command and url: one server is either a process or a URL"))),
        (true, false) => "stdio",
        (false, true) => "streamable-http",
        (false, false) => return Err(McpError::config(format!("{at} needs a command (a stdio server) or a url (an HTTP server)"))),
    };
    let declared = match entry.get("type").or_else(|| entry.get("transport")) {
        None | Some(Value::Null) => return Ok(inferred),
        Some(Value::String(kind)) => match kind.as_str() {
            "stdio" => "stdio",
            "http" | "streamable-http" | "streamableHttp" | "streamable_http" => "streamable-http",
            "sse" => "sse",
            other => return Err(McpError::config(format!("{at}.type {other:?} is unknown (stdio, http or sse)"))),
        },
        Some(_) => return Err(McpError::config(format!("{at}.type must be a string"))),
    };
    if (declared == "stdio") != (inferred == "stdio") {
        let needs = if declared == "stdio" { "a command" } else { "a url" };
        return Err(McpError::config(format!("{at}.type is {declared:?}, which needs {needs}")));
    }
    Ok(declared)
}

/// Replace `${env:VAR}` and `${VAR}` in every string of `value` from the environment.
fn expand_env(value: &Value, at: &str) -> Result<Value> {
    Ok(match value {
        Value::String(text) => Value::String(expand_string(text, at)?),
        Value::Array(items) => Value::Array(items.iter().enumerate().map(|(i, v)| expand_env(v, &format!("{at}[{i}]"))).collect::<Result<_>>()?),
        Value::Object(map) => Value::Object(map.iter().map(|(k, v)| Ok((k.clone(), expand_env(v, &format!("{at}.{k}"))?))).collect::<Result<_>>()?),
        other => other.clone(),
    })
}

fn expand_string(text: &str, at: &str) -> Result<String> {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(start) = rest.find("${") {
        out.push_str(&rest[..start]);
        let after = &rest[start + 2..];
        let end = after.find('}').ok_or_else(|| McpError::config(format!("{at}: \"${{\" without a closing \"}}\"")))?;
        let reference = &after[..end];
        let variable = reference.strip_prefix("env:").unwrap_or(reference);
        if !is_variable_name(variable) {
            return Err(McpError::config(format!(
                "{at}: ${{{reference}}} is not an environment reference (${{env:NAME}} or ${{NAME}}; VS Code inputs are not supported)"
            )));
        }
        let value = std::env::var(variable).map_err(|_| McpError::config(format!("{at}: environment variable {variable} is not set")))?;
        out.push_str(&value);
        rest = &after[end + 1..];
    }
    out.push_str(rest);
    Ok(out)
}

fn toml_servers(root: &Value, source: &str) -> Result<Vec<Value>> {
    let servers = root
        .get("mcp_servers")
        .ok_or_else(|| McpError::config(format!("{source}: no [mcp_servers.<name>] tables")))?
        .as_object()
        .ok_or_else(|| McpError::config(format!("{source}: mcp_servers must be a table of named servers")))?;
    servers
        .iter()
        .map(|(name, entry)| {
            crate::config::check_server_name(name, &format!("{source}: mcp_servers")).and_then(|()| toml_entry(name, entry, &format!("{source}: [mcp_servers.{name}]")))
        })
        .collect()
}

fn toml_entry(name: &str, entry: &Value, at: &str) -> Result<Value> {
    let entry = entry.as_object().ok_or_else(|| McpError::config(format!("{at} must be a table")))?;
    const KEYS: &[&str] = &[
        "type", "transport", "command", "args", "env", "cwd", "url", "headers", "http_headers", "header_env", "env_http_headers",
        "bearer_token_env_var", "enabled", "allow_tools", "enabled_tools", "deny_tools", "disabled_tools",
    ];
    if let Some(key) = entry.keys().find(|k| !KEYS.contains(&k.as_str()) && !IGNORED_TOML_KEYS.contains(&k.as_str())) {
        return Err(McpError::config(format!("{at} has an unknown key {key:?}")));
    }
    let field = |names: &[&str]| -> Result<Option<(String, Value)>> {
        let given: Vec<&&str> = names.iter().filter(|n| entry.contains_key(**n)).collect();
        match given.as_slice() {
            [] => Ok(None),
            [one] => Ok(Some(((**one).to_owned(), entry[**one].clone()))),
            _ => Err(McpError::config(format!("{at}: {} and {} mean the same; give one", given[0], given[1]))),
        }
    };
    let mut out = Map::new();
    out.insert("name".into(), Value::String(name.to_owned()));
    let kind = transport(entry, at)?;
    out.insert("type".into(), Value::String(kind.into()));
    for (names, target) in [
        (&["command"][..], "command"),
        (&["args"], "args"),
        (&["env"], "env"),
        (&["cwd"], "cwd"),
        (&["url"], "url"),
        (&["headers", "http_headers"], "headers"),
        (&["header_env", "env_http_headers"], "headersFromEnv"),
        (&["bearer_token_env_var"], "bearerTokenEnv"),
    ] {
        if let Some((_, value)) = field(names)? {
            out.insert(target.into(), value);
        }
    }
    let mut tools = Map::new();
    for (names, target) in [(&["allow_tools", "enabled_tools"][..], "allow"), (&["deny_tools", "disabled_tools"], "block")] {
        if let Some((given, value)) = field(names)? {
            if !value.as_array().is_some_and(|items| items.iter().all(Value::is_string)) {
                return Err(McpError::config(format!("{at}.{given} must be an array of tool name patterns (* and ?)")));
            }
            tools.insert(target.into(), value);
        }
    }
    if !tools.is_empty() {
        out.insert("tools".into(), Value::Object(tools));
    }
    match entry.get("enabled") {
        None | Some(Value::Bool(true)) => {}
        Some(Value::Bool(false)) => {
            out.insert("enabled".into(), Value::Bool(false));
        }
        Some(_) => return Err(McpError::config(format!("{at}.enabled must be a boolean"))),
    }
    Ok(Value::Object(out))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn loaded(text: &str, format: &str) -> Value {
        serde_json::from_str(&load(text, "cfg", format).unwrap()).unwrap()
    }

    #[test]
    fn reads_the_mcp_servers_shape_inferring_types() {
        let out = loaded(
            r#"{"mcpServers":{"fs":{"command":"npx","args":["-y","x"],"env":{"A":"b"}},"web":{"url":"https://h.test/mcp","headers":{"X-K":"v"}},
               "old":{"type":"sse","url":"https://h.test/sse"},"h":{"type":"http","url":"https://h.test/"},"off":{"command":"x","disabled":true}},"other":1}"#,
            "json",
        );
        let servers = out["servers"].as_array().unwrap();
        let by = |n: &str| servers.iter().find(|s| s["name"] == n).unwrap().clone();
        assert_eq!(by("fs")["type"], "stdio");
        assert_eq!(by("fs")["args"], json!(["-y", "x"]));
        assert_eq!(by("web")["type"], "streamable-http");
        assert_eq!(by("old")["type"], "sse");
        assert_eq!(by("h")["type"], "streamable-http");
        assert_eq!(by("off")["enabled"], false);
        assert_eq!(out["disabled"], json!(["off"]));
        let vscode = loaded(r#"{"servers":{"a":{"type":"stdio","command":"node"}},"inputs":[]}"#, "json");
        assert_eq!(vscode["servers"][0]["type"], "stdio");
    }

    #[test]
    fn reads_codex_style_toml_with_env_headers_and_tool_lists() {
        let out = loaded(
            r#"
            [mcp_servers.docs]
            url = "https://docs.test/mcp"
            header_env = { "X-Api-Key" = "DOCS_KEY" }
            bearer_token_env_var = "DOCS_TOKEN"
            allow_tools = ["read_*"]
            deny_tools = ["read_secret?"]
            [mcp_servers.local]
            command = "node"
            args = ["s.js"]
            enabled = false
            startup_timeout_sec = 20
            "#,
            "toml",
        );
        let docs = &out["servers"][0];
        assert_eq!(docs["headersFromEnv"], json!({"X-Api-Key": "DOCS_KEY"}));
        assert_eq!(docs["bearerTokenEnv"], "DOCS_TOKEN");
        assert_eq!(docs["tools"], json!({"allow": ["read_*"], "block": ["read_secret?"]}));
        assert_eq!(out["disabled"], json!(["local"]));
    }

    #[test]
    fn expands_environment_references_in_enabled_entries_only() {
        std::env::set_var("MCPFERRY_TEST_CFG_DIR", "/srv/data");
        let out = loaded(r#"{"mcpServers":{"a":{"command":"fs","args":["${env:MCPFERRY_TEST_CFG_DIR}/x","${MCPFERRY_TEST_CFG_DIR}"]},"b":{"command":"${env:UNSET_MCPFERRY_VAR}","disabled":true}}}"#, "json");
        assert_eq!(out["servers"][0]["args"], json!(["/srv/data/x", "/srv/data"]));
        assert_eq!(out["servers"][1]["command"], "${env:UNSET_MCPFERRY_VAR}");
    }

    #[test]
    fn a_bad_file_names_the_file_the_entry_and_the_field() {
        let cases = [
            ("{", "json", "cfg: not valid JSON"),
            ("[]", "json", "cfg: the file must hold a JSON object"),
            (r#"{"other":{}}"#, "json", "no \"mcpServers\""),
            (r#"{"mcpServers":[]}"#, "json", "mcpServers must be an object"),
            (r#"{"mcpServers":{"a":{}}}"#, "json", "cfg: mcpServers.a needs a command"),
            (r#"{"mcpServers":{"a":{"command":"x","url":"http://h/"}}}"#, "json", "mcpServers.a has both command and url"),
            (r#"{"mcpServers":{"a":{"type":"ws","url":"http://h/"}}}"#, "json", "mcpServers.a.type \"ws\" is unknown"),
            (r#"{"mcpServers":{"a":{"type":"stdio","url":"http://h/"}}}"#, "json", "which needs a command"),
            (r#"{"mcpServers":{"a":{"command":"x","disabled":"yes"}}}"#, "json", "mcpServers.a.disabled must be a boolean"),
            (r#"{"mcpServers":{"a":{"command":"x","args":["${env:MCPFERRY_SURELY_UNSET}"]}}}"#, "json", "mcpServers.a.args[0]: environment variable MCPFERRY_SURELY_UNSET is not set"),
            (r#"{"mcpServers":{"a":{"command":"x","env":{"K":"${input:key}"}}}}"#, "json", "mcpServers.a.env.K: ${input:key} is not an environment reference"),
            (r#"{"mcpServers":{"a":{"command":"x","args":"-y"}}}"#, "json", "cfg: servers[0] (\"a\").args must be an array of strings"),
            (r#"{"mcpServers":{"a":{"url":"ftp://h/"}}}"#, "json", "(\"a\").url must be an http"),
            ("[mcp_servers.a\n", "toml", "cfg: not valid TOML (line 1)"),
            ("x = 1", "toml", "no [mcp_servers.<name>]"),
            ("[mcp_servers.a]\ncommand = \"x\"\ncolour = 1", "toml", "[mcp_servers.a] has an unknown key \"colour\""),
            ("[mcp_servers.a]\ncommand = \"x\"\nenabled = \"no\"", "toml", "[mcp_servers.a].enabled must be a boolean"),
            ("[mcp_servers.a]\ncommand = \"x\"\nallow_tools = \"read_*\"", "toml", "[mcp_servers.a].allow_tools must be an array"),
            ("[mcp_servers.a]\nurl = \"http://h/\"\nheaders = {}\nhttp_headers = {}", "toml", "headers and http_headers mean the same"),
            ("[mcp_servers.a]\nurl = \"http://h/\"\nheader_env = { \"X-K\" = \"not a var\" }", "toml", "headersFromEnv[\"X-K\"] must be an environment variable name"),
            ("[mcp_servers.a]\ncommand = \"x\"\nheader_env = { \"X-K\" = \"V\" }", "toml", "unknown field \"headersFromEnv\""),
        ];
        for (text, format, expected) in cases {
            let error = load(text, "cfg", format).unwrap_err();
            assert_eq!(error.code(), "mcp_config_invalid");
            assert!(error.to_string().contains(expected), "{text}: {error}");
        }
    }
}
