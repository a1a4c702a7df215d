//! Configuration files other MCP clients already use, read into `mcpTools` server entries
//! (`loadMcpConfig`):
//!
//! | shape | where it comes from |
//! |---|---|
//! | JSON `{"mcpServers": {name: entry}}` | Claude Desktop, Claude Code (`.mcp.json`), Cursor |
//! | JSON `{"servers": {name: entry}}` | VS Code (`.vscode/mcp.json`) |
//! | TOML `[mcp_servers.name]` | Codex (`config.toml`), `mcpferry.toml` |
//!
//! One rule for every format: each key the tools that write these files document is known here
//! ([`JSON_KEYS`], [`TOML_KEYS`]). A key that has an equivalent is applied (`env_vars` passes those
//! variables through, `envFile` is read, `disabledTools` / `disabled_tools` filter tools); a known key
//! with no equivalent (timeouts per server, approval settings, sandboxing) is reported in a warning
//! naming it and saying what to use instead; a key no tool documents is reported with the nearest
//! known key ("did you mean"), as a warning, or as an error in strict mode. Warnings come back with
//! the servers; they never carry a value from the file.
//!
//! `type` is inferred (`command` → stdio, `url` → Streamable HTTP); `http` means Streamable HTTP and
//! `sse` the legacy transport. In JSON, `${env:VAR}`, `${VAR}` (and `${VAR:-default}`) in any string
//! are replaced from the environment when the file is loaded, as are the editors' `${workspaceFolder}`
//! (the file's folder, or the parent of a `.vscode` / `.cursor` folder), `${workspaceFolderBasename}`,
//! `${userHome}`, `${cwd}` and `${pathSeparator}`; anything else (`${input:…}`) is "not supported
//! here". A disabled entry is left as it is. Header values named by `header_env` are NOT read here:
//! the entry carries the variable names (`headersFromEnv`), and the engine reads them when it
//! connects, so the values never sit in the configuration object.
//!
//! Every entry is then checked by the same validator as `mcpTools` ([`crate::config::parse`]); every
//! error names the file, the entry and the field.

use crate::config::is_variable_name;
use crate::error::{McpError, Result};
use crate::limits::{MAX_DID_YOU_MEAN_KEYS, MAX_ENV_FILE_BYTES, MAX_ENV_FILE_BYTES_PER_LOAD, MAX_QUOTED_BYTES};
use serde_json::{json, Map, Value};
use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::rc::Rc;

/// How a file is loaded: where it is (for `${workspaceFolder}` and a relative `envFile`), what the
/// home and current directories are, and whether an unknown key is an error.
#[derive(Debug, serde::Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct LoadOptions {
    /// The file's absolute path; none for a configuration object.
    pub path: Option<PathBuf>,
    pub home: Option<String>,
    pub cwd: Option<String>,
    #[serde(default)]
    pub strict: bool,
    /// `false`: read nothing from the environment or the disk: `${…}` stays as written, no `envFile` is
    /// read and no `env_vars` value is passed through; each entry's `envFile` paths and `env_vars` names
    /// come back in `unresolved` instead, and the entries are not validated. What a caller deciding
    /// whether to trust a file loads first. Default `true`.
    #[serde(default = "resolve_by_default")]
    pub resolve: bool,
}

fn resolve_by_default() -> bool {
    true
}

impl Default for LoadOptions {
    fn default() -> Self {
        LoadOptions { path: None, home: None, cwd: None, strict: false, resolve: true }
    }
}

/// What a documented key of an entry does here.
#[derive(Clone, Copy, PartialEq)]
enum Meaning {
    /// Applied whatever the transport.
    Any,
    /// Applied to a stdio entry; on an HTTP entry it is reported as not applied.
    Stdio,
    /// Applied to an HTTP entry; on a stdio entry it is reported as not applied.
    Http,
    /// Documented by the tool that writes the file, with no equivalent here: why, and what to use.
    NotApplied(&'static str),
}
use Meaning::{Any, Http, NotApplied, Stdio};

const TIMEOUTS: &str = "mcpferry's timeouts are per toolset: set connectTimeoutMs (start and listing) and timeoutMs (each call) on mcpTools";
const APPROVAL: &str = "mcpferry asks no one before a call: give mcpTools a policy (decide, ask) to approve calls";
const OAUTH: &str = "OAuth settings are not read from the file: mcpferry logs in with OAuth when the server asks (an entry's oauth option configures it)";
const SANDBOX: &str = "mcpferry does not sandbox a server: it runs with an allowlisted environment (an entry's root option contains its command and cwd)";

/// Keys of a JSON entry: Claude Desktop, Claude Code and Cursor (`mcpServers`), VS Code (`servers`),
/// and the `disabled` / `disabledTools` / `autoApprove` / `timeout` of other clients writing that shape.
const JSON_KEYS: &[(&str, Meaning)] = &[
    ("type", Any),
    ("transport", Any),
    ("disabled", Any),
    ("enabled", Any),
    ("disabledTools", Any),
    ("propagateTraceContext", Any),
    ("command", Stdio),
    ("args", Stdio),
    ("env", Stdio),
    ("envFile", Stdio),
    ("cwd", Stdio),
    ("url", Http),
    ("headers", Http),
    ("dev", NotApplied("VS Code's development mode (watch and debug) belongs to the editor")),
    ("sandboxEnabled", NotApplied(SANDBOX)),
    ("sandbox", NotApplied(SANDBOX)),
    ("timeout", NotApplied(TIMEOUTS)),
    ("autoApprove", NotApplied(APPROVAL)),
    ("alwaysAllow", NotApplied(APPROVAL)),
    ("auth", NotApplied(OAUTH)),
    ("oauth", NotApplied(OAUTH)),
    ("headersHelper", NotApplied("a command that prints headers is not run: give the headers in headers")),
];

/// Keys of a TOML `[mcp_servers.<name>]` table: Codex's, and mcpferry's own spellings.
const TOML_KEYS: &[(&str, Meaning)] = &[
    ("type", Any),
    ("transport", Any),
    ("enabled", Any),
    ("allow_tools", Any),
    ("enabled_tools", Any),
    ("deny_tools", Any),
    ("disabled_tools", Any),
    ("propagate_trace_context", Any),
    // Approval settings: reported as not applied unless every one is "approve" (what happens here anyway).
    ("default_tools_approval_mode", Any),
    ("tools", Any),
    ("command", Stdio),
    ("args", Stdio),
    ("env", Stdio),
    ("env_vars", Stdio),
    ("cwd", Stdio),
    ("url", Http),
    ("headers", Http),
    ("http_headers", Http),
    ("header_env", Http),
    ("env_http_headers", Http),
    ("bearer_token_env_var", Http),
    ("startup_timeout_sec", NotApplied(TIMEOUTS)),
    ("startup_timeout_ms", NotApplied(TIMEOUTS)),
    ("tool_timeout_sec", NotApplied(TIMEOUTS)),
    (
        "required",
        NotApplied(
            "a server that cannot start is reported as degraded: pass onDegraded: 'throw' to mcpTools to fail instead",
        ),
    ),
    ("experimental_environment", NotApplied("servers start on this machine")),
    ("oauth", NotApplied(OAUTH)),
    ("scopes", NotApplied(OAUTH)),
    ("oauth_resource", NotApplied(OAUTH)),
];

/// Keys of a Codex per-tool table, `[mcp_servers.<name>.tools.<tool>]`.
const TOML_TOOL_KEYS: &[&str] = &["approval_mode"];

/// The one approval mode that is what happens here without a policy: the call goes ahead unasked.
const APPROVE: &str = "approve";

/// Parse `text` (from `source`, a path or a description, for messages) as `format`: `"json"` or `"toml"`.
/// Returns `{ "servers": [entry, ...], "disabled": [name, ...], "warnings": [message, ...] }`: every
/// entry (disabled ones with `enabled: false`, so they show as disabled and nothing is started), in file order.
pub fn load(text: &str, source: &str, format: &str, options: &LoadOptions) -> Result<String> {
    let mut report = Report {
        source,
        strict: options.strict,
        resolve: options.resolve,
        warnings: Vec::new(),
        unknown: Vec::new(),
        unresolved: Map::new(),
    };
    let servers = match format {
        "json" => {
            let root: Value =
                serde_json::from_str(text).map_err(|e| McpError::config(format!("{source}: not valid JSON: {e}")))?;
            json_servers(&root, &Vars::new(options), &mut report)?
        }
        "toml" => {
            // The message and line only: the parser's snippet of the line could show a secret value.
            let table: toml::Table = toml::from_str(text).map_err(|e| {
                let line = e.span().map(|span| text[..span.start.min(text.len())].matches('\n').count() + 1);
                McpError::config(format!(
                    "{source}: not valid TOML{}: {}",
                    line.map(|l| format!(" (line {l})")).unwrap_or_default(),
                    e.message().trim()
                ))
            })?;
            let root = serde_json::to_value(table).map_err(|e| McpError::config(format!("{source}: {e}")))?;
            toml_servers(&root, &mut report)?
        }
        other => {
            return Err(McpError::config(format!("{source}: unknown configuration format {other:?} (json or toml)")))
        }
    };
    if report.strict && !report.unknown.is_empty() {
        return Err(McpError::config(report.unknown.join("; ")));
    }
    if !options.resolve {
        // Unresolved values are not what the entries will hold: they are checked when loaded for use.
        let disabled: Vec<&Value> =
            servers.iter().filter(|s| s["enabled"] == Value::Bool(false)).map(|s| &s["name"]).collect();
        return Ok(
            json!({ "servers": servers, "disabled": disabled, "warnings": [], "unresolved": report.unresolved })
                .to_string(),
        );
    }
    // The same checks as mcpTools, so a bad entry is reported against this file now, not later.
    let wire = json!({ "servers": servers });
    crate::config::parse(&wire.to_string()).map_err(|e| match e {
        McpError::ConfigInvalid(message) => McpError::config(format!("{source}: {message}")),
        other => other,
    })?;
    let disabled: Vec<&Value> =
        servers.iter().filter(|s| s["enabled"] == Value::Bool(false)).map(|s| &s["name"]).collect();
    let mut warnings = report.unknown.iter().map(|u| format!("{u}, which is ignored")).collect::<Vec<_>>();
    warnings.extend(report.warnings);
    Ok(json!({ "servers": servers, "disabled": disabled, "warnings": warnings }).to_string())
}

/// What loading found worth telling: keys not applied (warnings) and keys no tool documents.
struct Report<'a> {
    source: &'a str,
    strict: bool,
    /// [`LoadOptions::resolve`].
    resolve: bool,
    /// Unresolved mode: per entry, `{ envFile: [path as written], envVars: [name] }`.
    unresolved: Map<String, Value>,
    warnings: Vec<String>,
    /// `<source>: <at> has an unknown key "k" (did you mean "key"?)`: warnings, or in strict mode the error.
    unknown: Vec<String>,
}

impl Report<'_> {
    /// In unresolved mode, note that entry `name` would read `what` (`envFile`, `envVars`): `item`.
    fn would_read(&mut self, name: &str, what: &str, item: Value) {
        let entry = self.unresolved.entry(name.to_owned()).or_insert_with(|| json!({ "envFile": [], "envVars": [] }));
        if let Some(Value::Array(items)) = entry.get_mut(what) {
            items.push(item);
        }
    }

    fn warn(&mut self, message: String) {
        self.warnings.push(format!("{}: {message}", self.source));
    }

    fn unknown(&mut self, at: &str, unknown: &[Unknown]) {
        let source = self.source;
        self.unknown.extend(unknown.iter().map(|u| format!("{source}: {at} has {u}")));
    }

    /// Warn about the known keys of `entry` that are not applied to an entry of this transport.
    fn not_applied(&mut self, at: &str, entry: &Map<String, Value>, known: &[(&str, Meaning)], stdio: bool) {
        let mut by_reason: Vec<(&str, Vec<&str>)> = Vec::new();
        for (key, meaning) in known.iter().filter(|(key, _)| entry.get(*key).is_some_and(|v| !v.is_null())) {
            let reason = match meaning {
                NotApplied(reason) => *reason,
                Stdio if !stdio => "it is for stdio servers, and this is an HTTP server",
                Http if stdio => "it is for HTTP servers, and this is a stdio server",
                _ => continue,
            };
            match by_reason.iter_mut().find(|(r, _)| *r == reason) {
                Some((_, keys)) => keys.push(key),
                None => by_reason.push((reason, vec![key])),
            }
        }
        for (reason, keys) in by_reason {
            let verb = if keys.len() == 1 { "is" } else { "are" };
            self.warn(format!("{at}: {} {verb} not applied ({reason})", keys.join(", ")));
        }
    }
}

/// A key of an entry that no tool documents, with the known key it is nearest to.
struct Unknown {
    key: String,
    nearest: Option<&'static str>,
}

impl std::fmt::Display for Unknown {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "an unknown key {}", shown(&self.key))?;
        match self.nearest {
            Some(near) => write!(f, " (did you mean {near:?}?)"),
            None => Ok(()),
        }
    }
}

fn unknown_keys<'k>(entry: &Map<String, Value>, known: impl Iterator<Item = &'k &'static str> + Clone) -> Vec<Unknown> {
    entry
        .keys()
        .filter(|key| !known.clone().any(|k| k == key))
        .enumerate()
        // A "did you mean" for the first few only: a file with thousands of unknown keys is not a typo.
        .map(|(i, key)| Unknown {
            key: key.clone(),
            nearest: if i < MAX_DID_YOU_MEAN_KEYS { nearest(key, known.clone().copied()) } else { None },
        })
        .collect()
}

/// `error` (a missing command or url, say) with the unknown keys that may be the cause named in it.
fn with_unknown(error: McpError, unknown: &[Unknown]) -> McpError {
    match error {
        McpError::ConfigInvalid(message) if !unknown.is_empty() => {
            let keys: Vec<String> = unknown.iter().map(Unknown::to_string).collect();
            McpError::config(format!("{message}; it has {}", keys.join(" and ")))
        }
        other => other,
    }
}

/// A key from the file as shown in a message: quoted and escaped, at most [`MAX_QUOTED_BYTES`] long.
fn shown(key: &str) -> String {
    let mut end = key.len().min(MAX_QUOTED_BYTES);
    while !key.is_char_boundary(end) {
        end -= 1;
    }
    format!("{:?}{}", &key[..end], if end < key.len() { "…" } else { "" })
}

/// The known key nearest `key` by edit distance (ignoring case, a swap of two letters counting one),
/// when it is near enough to be a typo of it: one edit per three letters, at least one.
fn nearest(key: &str, known: impl Iterator<Item = &'static str>) -> Option<&'static str> {
    let key: Vec<char> = key.to_lowercase().chars().take(MAX_QUOTED_BYTES).collect();
    let allowed = |candidate: &str| (candidate.chars().count() / 3).max(1);
    known
        // Lengths further apart than the edits allowed can't be near: skipped without measuring.
        .filter(|candidate| key.len().abs_diff(candidate.chars().count()) <= allowed(candidate))
        .map(|candidate| (distance(&key, &candidate.to_lowercase().chars().collect::<Vec<_>>()), candidate))
        .filter(|(d, candidate)| *d <= allowed(candidate))
        .min_by_key(|(d, _)| *d)
        .map(|(_, candidate)| candidate)
}

/// Optimal string alignment distance: insertions, deletions, substitutions and adjacent swaps.
fn distance(a: &[char], b: &[char]) -> usize {
    let mut before: Vec<usize> = Vec::new();
    let mut previous: Vec<usize> = (0..=b.len()).collect();
    for i in 1..=a.len() {
        let mut current = vec![i; b.len() + 1];
        for j in 1..=b.len() {
            let cost = usize::from(a[i - 1] != b[j - 1]);
            current[j] = (previous[j] + 1).min(current[j - 1] + 1).min(previous[j - 1] + cost);
            if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                current[j] = current[j].min(before[j - 2] + 1);
            }
        }
        before = std::mem::replace(&mut previous, current);
    }
    previous[b.len()]
}

/// The root's key that looks like a typo of one of `wanted`, for "no mcpServers" messages.
fn root_typo(root: &Map<String, Value>, wanted: &[&'static str]) -> String {
    root.keys()
        .take(MAX_DID_YOU_MEAN_KEYS)
        .find_map(|key| {
            nearest(key, wanted.iter().copied())
                .map(|near| format!(" (the file has {}: did you mean {near:?}?)", shown(key)))
        })
        .unwrap_or_default()
}

fn json_servers(root: &Value, vars: &Vars, report: &mut Report) -> Result<Vec<Value>> {
    let source = report.source;
    let root =
        root.as_object().ok_or_else(|| McpError::config(format!("{source}: the file must hold a JSON object")))?;
    let (key, servers) = match (root.get("mcpServers"), root.get("servers")) {
        (Some(servers), _) => ("mcpServers", servers),
        (None, Some(servers)) => ("servers", servers),
        (None, None) => {
            let typo = root_typo(root, &["mcpServers", "servers"]);
            return Err(McpError::config(format!("{source}: no \"mcpServers\" (or VS Code \"servers\") object{typo}")));
        }
    };
    let servers = servers
        .as_object()
        .ok_or_else(|| McpError::config(format!("{source}: {key} must be an object of named servers")))?;
    servers
        .iter()
        .map(|(name, entry)| {
            crate::config::check_server_name(name, &format!("{source}: {key}"))
                .and_then(|()| json_entry(name, entry, &format!("{key}.{name}"), vars, report))
        })
        .collect()
}

fn json_entry(name: &str, entry: &Value, at: &str, vars: &Vars, report: &mut Report) -> Result<Value> {
    let source = report.source;
    let error = |message: String| McpError::config(format!("{source}: {message}"));
    let entry = entry.as_object().ok_or_else(|| error(format!("{at} must be an object")))?;
    let unknown = unknown_keys(entry, JSON_KEYS.iter().map(|(k, _)| k));
    let disabled = match (entry.get("disabled"), entry.get("enabled")) {
        (Some(Value::Bool(disabled)), _) => *disabled,
        (Some(_), _) => return Err(error(format!("{at}.disabled must be a boolean"))),
        (None, Some(Value::Bool(enabled))) => !enabled,
        (None, Some(_)) => return Err(error(format!("{at}.enabled must be a boolean"))),
        (None, None) => false,
    };
    let kind = transport(entry, &format!("{source}: {at}")).map_err(|e| with_unknown(e, &unknown))?;
    report.unknown(at, &unknown);
    report.not_applied(at, entry, JSON_KEYS, kind == "stdio");
    // A disabled entry is shown, never started: its variables are not needed, so not required.
    let resolve = report.resolve;
    let expand = |value: &Value, field: &str| {
        if disabled || !resolve {
            Ok(value.clone())
        } else {
            vars.expand(value, &format!("{source}: {at}.{field}"))
        }
    };
    let mut out = Map::new();
    out.insert("name".into(), Value::String(name.to_owned()));
    out.insert("type".into(), Value::String(kind.into()));
    let given = |field: &str| entry.get(field).filter(|v| !v.is_null());
    let fields: &[&str] = if kind == "stdio" { &["command", "args", "cwd"] } else { &["url", "headers"] };
    for field in fields {
        if let Some(value) = given(field) {
            out.insert((*field).into(), expand(value, field)?);
        }
    }
    if kind == "stdio" {
        // The file's variables first; `env` wins over them, as in VS Code. Not read for a disabled entry.
        let mut env = Map::new();
        if let Some(written) = given("envFile").filter(|_| !disabled) {
            let at = format!("{source}: {at}.envFile");
            if !resolve {
                report.would_read(name, "envFile", written.clone());
            } else {
                let Value::String(file) = expand(written, "envFile")? else {
                    return Err(McpError::config(format!("{at} must be a string (a path)")));
                };
                // Messages show the path as written: what `${…}` expanded to may be a secret.
                let written = written.as_str().unwrap_or_default();
                env.extend(
                    vars.read_env_file(&file, written, &at)?.iter().map(|(k, v)| (k.clone(), Value::String(v.clone()))),
                );
            }
        }
        match given("env") {
            Some(Value::Object(given)) => {
                for (k, v) in given {
                    env.insert(k.clone(), expand(v, &format!("env.{k}"))?);
                }
            }
            // Not an object: passed on for the validator to name.
            Some(other) => {
                out.insert("env".into(), expand(other, "env")?);
            }
            None => {}
        }
        if !out.contains_key("env") && (!env.is_empty() || given("env").is_some()) {
            out.insert("env".into(), Value::Object(env));
        }
    }
    if let Some(block) = given("disabledTools") {
        out.insert("tools".into(), json!({ "block": tool_patterns(block, &format!("{source}: {at}.disabledTools"))? }));
    }
    if let Some(propagate) = given("propagateTraceContext") {
        out.insert(
            "propagateTraceContext".into(),
            trace_flag(propagate, &format!("{source}: {at}.propagateTraceContext"))?,
        );
    }
    if disabled {
        out.insert("enabled".into(), Value::Bool(false));
    }
    Ok(Value::Object(out))
}

/// `propagateTraceContext` (`propagate_trace_context` in TOML): whether the server is sent the caller's
/// trace context in `params._meta` (see docs/observability.md). A boolean.
fn trace_flag(value: &Value, at: &str) -> Result<Value> {
    match value {
        Value::Bool(_) => Ok(value.clone()),
        _ => Err(McpError::config(format!("{at} must be a boolean"))),
    }
}

/// A list of tool name patterns, checked.
fn tool_patterns(value: &Value, at: &str) -> Result<Value> {
    if !value.as_array().is_some_and(|items| items.iter().all(Value::is_string)) {
        return Err(McpError::config(format!("{at} must be an array of tool name patterns (* and ?)")));
    }
    Ok(value.clone())
}

/// The transport of an entry: its `type`, or inferred from `command` / `url`.
fn transport(entry: &Map<String, Value>, at: &str) -> Result<&'static str> {
    let has = |field: &str| entry.get(field).is_some_and(|v| !v.is_null());
    let inferred = match (has("command"), has("url")) {
        (true, true) => {
            return Err(McpError::config(format!(
                "{at} has both command and url: one server is either a process or a URL"
            )))
        }
        (true, false) => "stdio",
        (false, true) => "streamable-http",
        (false, false) => {
            return Err(McpError::config(format!("{at} needs a command (a stdio server) or a url (an HTTP server)")))
        }
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

/// What `${…}` in a JSON file resolves to besides the environment: the editors' predefined variables.
/// Each `envFile` read during a load, by resolved path, with its variables in file order.
type EnvFilesRead = RefCell<HashMap<PathBuf, Rc<Vec<(String, String)>>>>;

struct Vars {
    /// The folder of the file, against which a relative `envFile` is read.
    folder: Option<PathBuf>,
    /// Each `envFile` read during this load, by resolved path: read once however many entries name it.
    env_files: EnvFilesRead,
    /// The `envFile` bytes applied so far, a file counted for every entry that uses it
    /// ([`MAX_ENV_FILE_BYTES_PER_LOAD`]).
    env_file_bytes: Cell<u64>,
    /// `${workspaceFolder}`: the folder, or its parent when the folder is an editor's `.vscode` / `.cursor`.
    workspace: Option<PathBuf>,
    home: Option<String>,
    cwd: Option<String>,
}

/// Folders inside a workspace where editors keep their `mcp.json`: the workspace is their parent.
const EDITOR_FOLDERS: &[&str] = &[".vscode", ".cursor"];

impl Vars {
    fn new(options: &LoadOptions) -> Self {
        let folder = options.path.as_deref().and_then(Path::parent).map(Path::to_path_buf);
        let workspace = folder.as_deref().map(|folder| match (folder.file_name(), folder.parent()) {
            (Some(name), Some(parent)) if EDITOR_FOLDERS.iter().any(|f| name == *f) => parent.to_path_buf(),
            _ => folder.to_path_buf(),
        });
        Vars {
            folder,
            env_files: RefCell::default(),
            env_file_bytes: Cell::new(0),
            workspace,
            home: options.home.clone(),
            cwd: options.cwd.clone(),
        }
    }

    /// Replace every `${…}` in every string of `value`.
    fn expand(&self, value: &Value, at: &str) -> Result<Value> {
        Ok(match value {
            Value::String(text) => Value::String(self.expand_string(text, at)?),
            Value::Array(items) => Value::Array(
                items.iter().enumerate().map(|(i, v)| self.expand(v, &format!("{at}[{i}]"))).collect::<Result<_>>()?,
            ),
            Value::Object(map) => Value::Object(
                map.iter()
                    .map(|(k, v)| Ok((k.clone(), self.expand(v, &format!("{at}.{k}"))?)))
                    .collect::<Result<_>>()?,
            ),
            other => other.clone(),
        })
    }

    fn expand_string(&self, text: &str, at: &str) -> Result<String> {
        let mut out = String::with_capacity(text.len());
        let mut rest = text;
        while let Some(start) = rest.find("${") {
            out.push_str(&rest[..start]);
            let after = &rest[start + 2..];
            let end =
                after.find('}').ok_or_else(|| McpError::config(format!("{at}: \"${{\" without a closing \"}}\"")))?;
            out.push_str(&self.resolve(&after[..end], at)?);
            rest = &after[end + 1..];
        }
        out.push_str(rest);
        Ok(out)
    }

    /// The value of `${reference}`: a predefined variable, else an environment variable.
    fn resolve(&self, reference: &str, at: &str) -> Result<String> {
        let not_here = |why: &str| {
            McpError::config(format!("{at}: not supported here: ${{{}}} ({why})", reference.escape_debug()))
        };
        let no_file = "a configuration object has no folder: load it from a file";
        let path = |path: &Option<PathBuf>| path.as_deref().map(|p| p.to_string_lossy().into_owned());
        let known = match reference {
            "workspaceFolder" => Some(path(&self.workspace).ok_or_else(|| not_here(no_file))?),
            "workspaceFolderBasename" => Some(
                self.workspace
                    .as_deref()
                    .and_then(Path::file_name)
                    .map(|n| n.to_string_lossy().into_owned())
                    .ok_or_else(|| not_here(no_file))?,
            ),
            "userHome" => Some(self.home.clone().ok_or_else(|| not_here("the home directory is not known"))?),
            "cwd" => Some(self.cwd.clone().ok_or_else(|| not_here("the current directory is not known"))?),
            "pathSeparator" | "/" => Some(std::path::MAIN_SEPARATOR.to_string()),
            _ => None,
        };
        if let Some(value) = known {
            return Ok(value);
        }
        // `${env:NAME}`, `${NAME}`, and Claude Code's `${NAME:-default}`.
        let variable = reference.strip_prefix("env:").unwrap_or(reference);
        let (variable, default) = match variable.split_once(":-") {
            Some((variable, default)) => (variable, Some(default)),
            None => (variable, None),
        };
        if is_variable_name(variable) {
            return match (std::env::var(variable), default) {
                (Ok(value), _) => Ok(value),
                (Err(_), Some(default)) => Ok(default.to_owned()),
                (Err(_), None) => Err(McpError::config(format!("{at}: environment variable {variable} is not set"))),
            };
        }
        Err(not_here(if reference.starts_with("input:") {
            "VS Code asks for an input when it starts the server: put the value in an environment variable and write ${env:NAME}"
        } else {
            "mcpferry resolves ${env:NAME}, ${NAME}, ${workspaceFolder}, ${workspaceFolderBasename}, ${userHome}, ${cwd} and ${pathSeparator}"
        }))
    }

    /// The variables of a dotenv file (`envFile`), `given` relative to the configuration file's folder;
    /// `written` is the path as the file writes it (before `${…}`), the only form messages show.
    fn read_env_file(&self, given: &str, written: &str, at: &str) -> Result<Rc<Vec<(String, String)>>> {
        let path = Path::new(given);
        let at = format!("{at}: {}", shown(written));
        let path = match (path.is_absolute(), &self.folder) {
            (true, _) => path.to_path_buf(),
            (false, Some(folder)) => folder.join(path),
            (false, None) => {
                return Err(McpError::config(format!(
                    "{at} is relative, and a configuration object has no folder: give an absolute path"
                )))
            }
        };
        let cached = self.env_files.borrow().get(&path).cloned();
        let (variables, bytes) = match cached {
            Some(variables) => {
                let bytes = variables.iter().map(|(k, v)| (k.len() + v.len()) as u64).sum();
                (variables, bytes)
            }
            None => {
                let (variables, bytes) = read_dotenv_file(&path, &at)?;
                let variables = Rc::new(variables);
                self.env_files.borrow_mut().insert(path, variables.clone());
                (variables, bytes)
            }
        };
        let total = self.env_file_bytes.get() + bytes;
        if total > MAX_ENV_FILE_BYTES_PER_LOAD {
            return Err(McpError::config(format!(
                "{at}: the entries' envFile variables come to more than {MAX_ENV_FILE_BYTES_PER_LOAD} bytes in all (each entry's file counted for it)"
            )));
        }
        self.env_file_bytes.set(total);
        Ok(variables)
    }
}

/// Read and parse the dotenv file at `path`; with the bytes it holds.
fn read_dotenv_file(path: &Path, at: &str) -> Result<(Vec<(String, String)>, u64)> {
    let unreadable = |e: std::io::Error| {
        let reason = match e.kind() {
            std::io::ErrorKind::NotFound => "no such file".to_owned(),
            std::io::ErrorKind::PermissionDenied => "permission denied".to_owned(),
            _ => e.to_string(),
        };
        McpError::config(format!("{at} cannot be read ({reason})"))
    };
    let too_large = || McpError::config(format!("{at} is larger than {MAX_ENV_FILE_BYTES} bytes"));
    // Opened non-blocking (a FIFO with no writer can't hold the open), then checked on the open file,
    // so the file checked is the file read: a link swapped to a FIFO or a device after a path check
    // can't make the read block or never end.
    let mut open = std::fs::OpenOptions::new();
    open.read(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::custom_flags(&mut open, libc::O_NONBLOCK);
    let file = open.open(path).map_err(unreadable)?;
    let metadata = file.metadata().map_err(unreadable)?;
    if !metadata.is_file() {
        return Err(McpError::config(format!("{at} is not a regular file")));
    }
    if metadata.len() > MAX_ENV_FILE_BYTES {
        return Err(too_large());
    }
    let mut bytes = Vec::new();
    file.take(MAX_ENV_FILE_BYTES + 1).read_to_end(&mut bytes).map_err(unreadable)?;
    if bytes.len() as u64 > MAX_ENV_FILE_BYTES {
        return Err(too_large());
    }
    let text = String::from_utf8(bytes).map_err(|_| McpError::config(format!("{at} is not UTF-8 text")))?;
    let variables = parse_dotenv(text.strip_prefix('\u{feff}').unwrap_or(&text), at)?;
    // What the entry receives, which is what each further use of the file is counted as.
    let size = variables.iter().map(|(k, v)| (k.len() + v.len()) as u64).sum();
    Ok((variables, size))
}

/// `NAME=value` lines (dotenv): `#` comments, an optional `export `, values bare (up to ` #`), in single
/// quotes (as written) or in double quotes (`\n`, `\t`, `\"`, `\\` escapes; may span lines). Errors
/// name the line, and the variable only once its name is known to be one: never text of the line that
/// may not be a name (any readable file could be named as an envFile), never a value.
fn parse_dotenv(text: &str, at: &str) -> Result<Vec<(String, String)>> {
    let lines: Vec<&str> = text.lines().collect();
    let mut variables = Vec::new();
    let mut next = 0;
    while next < lines.len() {
        let number = next + 1;
        let bad = |why: String| McpError::config(format!("{at}: line {number}: {why}"));
        let line = lines[next].trim();
        next += 1;
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let line = line.strip_prefix("export ").map(str::trim_start).unwrap_or(line);
        let (name, value) = line.split_once('=').ok_or_else(|| bad("it is not NAME=value".into()))?;
        let name = name.trim();
        if !is_variable_name(name) {
            return Err(bad("the name is not a variable name".into()));
        }
        let value = value.trim_start();
        let value = match value.chars().next() {
            Some(quote @ ('"' | '\'')) => {
                let mut body = value[1..].to_owned();
                // Each line appended is scanned once: where the scan got to, and whether it ended on an escape.
                let mut scanned = 0;
                let mut escaped = false;
                loop {
                    if let Some(end) = closing_quote(&body[scanned..], quote, &mut escaped).map(|i| scanned + i) {
                        let after = body[end + 1..].trim();
                        if !after.is_empty() && !after.starts_with('#') {
                            return Err(bad(format!("it has text after the quoted value of {name}")));
                        }
                        body.truncate(end);
                        break if quote == '"' { unescape(&body) } else { body };
                    }
                    let Some(more) = lines.get(next) else {
                        return Err(bad(format!("it opens a quoted value of {name} that is never closed")));
                    };
                    scanned = body.len();
                    body.push('\n');
                    body.push_str(more);
                    next += 1;
                }
            }
            Some('#') | None => String::new(),
            Some(_) => value.split(" #").next().unwrap_or_default().trim_end().to_owned(),
        };
        variables.push((name.to_owned(), value));
    }
    Ok(variables)
}

/// Where the closing `quote` of a value is in `body`; in double quotes a backslash escapes the next
/// character. `escaped` carries a trailing backslash's state from one call to the next.
fn closing_quote(body: &str, quote: char, escaped: &mut bool) -> Option<usize> {
    for (i, c) in body.char_indices() {
        match c {
            _ if *escaped => *escaped = false,
            '\\' if quote == '"' => *escaped = true,
            c if c == quote => return Some(i),
            _ => {}
        }
    }
    None
}

fn unescape(body: &str) -> String {
    let mut out = String::with_capacity(body.len());
    let mut chars = body.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('n') => out.push('\n'),
            Some('r') => out.push('\r'),
            Some('t') => out.push('\t'),
            Some(c @ ('"' | '\\')) => out.push(c),
            Some(c) => {
                out.push('\\');
                out.push(c);
            }
            None => out.push('\\'),
        }
    }
    out
}

fn toml_servers(root: &Value, report: &mut Report) -> Result<Vec<Value>> {
    let source = report.source;
    let root = root.as_object().expect("a TOML document is a table");
    let servers = root
        .get("mcp_servers")
        .ok_or_else(|| {
            McpError::config(format!("{source}: no [mcp_servers.<name>] tables{}", root_typo(root, &["mcp_servers"])))
        })?
        .as_object()
        .ok_or_else(|| McpError::config(format!("{source}: mcp_servers must be a table of named servers")))?;
    servers
        .iter()
        .map(|(name, entry)| {
            crate::config::check_server_name(name, &format!("{source}: mcp_servers"))
                .and_then(|()| toml_entry(name, entry, &format!("[mcp_servers.{name}]"), report))
        })
        .collect()
}

fn toml_entry(name: &str, entry: &Value, at: &str, report: &mut Report) -> Result<Value> {
    let source = report.source;
    let error = |message: String| McpError::config(format!("{source}: {message}"));
    let entry = entry.as_object().ok_or_else(|| error(format!("{at} must be a table")))?;
    let unknown = unknown_keys(entry, TOML_KEYS.iter().map(|(k, _)| k));
    let kind = transport(entry, &format!("{source}: {at}")).map_err(|e| with_unknown(e, &unknown))?;
    let stdio = kind == "stdio";
    report.unknown(at, &unknown);
    report.not_applied(at, entry, TOML_KEYS, stdio);
    let field = |names: &[&str]| -> Result<Option<(String, Value)>> {
        let given: Vec<&&str> = names.iter().filter(|n| entry.contains_key(**n)).collect();
        match given.as_slice() {
            [] => Ok(None),
            [one] => Ok(Some(((**one).to_owned(), entry[**one].clone()))),
            _ => Err(error(format!("{at}: {} and {} mean the same; give one", given[0], given[1]))),
        }
    };
    let enabled = match entry.get("enabled") {
        None | Some(Value::Bool(true)) => true,
        Some(Value::Bool(false)) => false,
        Some(_) => return Err(error(format!("{at}.enabled must be a boolean"))),
    };
    let mut out = Map::new();
    out.insert("name".into(), Value::String(name.to_owned()));
    out.insert("type".into(), Value::String(kind.into()));
    let fields: &[(&[&str], &str)] = if stdio {
        &[(&["command"], "command"), (&["args"], "args"), (&["env"], "env"), (&["cwd"], "cwd")]
    } else {
        &[
            (&["url"], "url"),
            (&["headers", "http_headers"], "headers"),
            (&["header_env", "env_http_headers"], "headersFromEnv"),
            (&["bearer_token_env_var"], "bearerTokenEnv"),
        ]
    };
    for (names, target) in fields {
        if let Some((_, value)) = field(names)? {
            out.insert((*target).into(), value);
        }
    }
    if let (true, true, Some(names)) = (stdio, enabled, entry.get("env_vars")) {
        pass_through(&mut out, name, names, &format!("{at}.env_vars"), report)?;
    }
    let mut tools = Map::new();
    for (names, target) in
        [(&["allow_tools", "enabled_tools"][..], "allow"), (&["deny_tools", "disabled_tools"], "block")]
    {
        if let Some((given, value)) = field(names)? {
            tools.insert(target.into(), tool_patterns(&value, &format!("{source}: {at}.{given}"))?);
        }
    }
    if !tools.is_empty() {
        out.insert("tools".into(), Value::Object(tools));
    }
    if let Some(propagate) = entry.get("propagate_trace_context") {
        let at = format!("{source}: {at}.propagate_trace_context");
        out.insert("propagateTraceContext".into(), trace_flag(propagate, &at)?);
    }
    approval_modes(entry, at, report)?;
    if !enabled {
        out.insert("enabled".into(), Value::Bool(false));
    }
    Ok(Value::Object(out))
}

/// Codex's `env_vars = ["TZ", { name = "X", source = "local" }]`: those variables of this process's
/// environment are added to the entry's `env` (an `env` value given for the same name wins); one that
/// is not set is left out. `source = "remote"` (Codex's remote executor) is not applied.
fn pass_through(
    out: &mut Map<String, Value>,
    server: &str,
    names: &Value,
    at: &str,
    report: &mut Report,
) -> Result<()> {
    let source = report.source;
    let items = names
        .as_array()
        .ok_or_else(|| McpError::config(format!("{source}: {at} must be an array of environment variable names")))?;
    let mut passed = Map::new();
    for (i, item) in items.iter().enumerate() {
        let (name, origin) = match item {
            Value::String(name) => (name.as_str(), None),
            Value::Object(item) => (
                item.get("name").and_then(Value::as_str).unwrap_or_default(),
                match item.get("source") {
                    None => None,
                    Some(Value::String(origin)) => Some(origin.as_str()),
                    Some(_) => {
                        return Err(McpError::config(format!(
                            "{source}: {at}[{i}].source must be \"local\" or \"remote\""
                        )))
                    }
                },
            ),
            _ => {
                return Err(McpError::config(format!(
                    "{source}: {at}[{i}] must be a variable name or {{ name, source }}"
                )))
            }
        };
        if !is_variable_name(name) {
            return Err(McpError::config(format!("{source}: {at}[{i}] must be an environment variable name")));
        }
        match origin {
            None | Some("local") if !report.resolve => {
                report.would_read(server, "envVars", Value::String(name.to_owned()))
            }
            None | Some("local") => {
                if let Ok(value) = std::env::var(name) {
                    passed.insert(name.to_owned(), Value::String(value));
                }
            }
            Some("remote") => report.warn(format!(
                "{at}[{i}] ({name}, source = \"remote\") is not applied (servers start on this machine)"
            )),
            Some(_) => {
                return Err(McpError::config(format!("{source}: {at}[{i}].source must be \"local\" or \"remote\"")))
            }
        }
    }
    match out.get_mut("env") {
        Some(Value::Object(env)) => {
            for (name, value) in passed {
                env.entry(name).or_insert(value);
            }
        }
        // Not a table: left for the validator to name.
        Some(_) => {}
        None if passed.is_empty() => {}
        None => {
            out.insert("env".into(), Value::Object(passed));
        }
    }
    Ok(())
}

/// Codex's approval settings (`default_tools_approval_mode`, `[mcp_servers.x.tools.<tool>]
/// approval_mode`): checked, and reported as not applied unless they say "approve", which is what
/// happens here without a policy.
fn approval_modes(entry: &Map<String, Value>, at: &str, report: &mut Report) -> Result<()> {
    let source = report.source;
    let mode = |value: &Value, field: &str| -> Result<Option<String>> {
        match value {
            Value::String(mode) if mode == APPROVE => Ok(None),
            Value::String(mode) if ["auto", "prompt"].contains(&mode.as_str()) => {
                Ok(Some(format!("{field} = {mode:?}")))
            }
            _ => Err(McpError::config(format!("{source}: {at}.{field} must be \"auto\", \"prompt\" or \"approve\""))),
        }
    };
    let mut not_applied = Vec::new();
    if let Some(value) = entry.get("default_tools_approval_mode") {
        not_applied.extend(mode(value, "default_tools_approval_mode")?);
    }
    if let Some(tools) = entry.get("tools") {
        let tools = tools.as_object().ok_or_else(|| {
            McpError::config(format!(
                "{source}: {at}.tools must be a table of tools ([mcp_servers.<name>.tools.<tool>])"
            ))
        })?;
        for (tool, settings) in tools {
            let tool_at = format!("{at}.tools.{}", shown(tool));
            let settings =
                settings.as_object().ok_or_else(|| McpError::config(format!("{source}: {tool_at} must be a table")))?;
            report.unknown(&tool_at, &unknown_keys(settings, TOML_TOOL_KEYS.iter()));
            if let Some(value) = settings.get("approval_mode") {
                not_applied.extend(mode(value, &format!("tools.{}.approval_mode", shown(tool)))?);
            }
        }
    }
    if !not_applied.is_empty() {
        let verb = if not_applied.len() == 1 { "is" } else { "are" };
        report.warn(format!("{at}: {} {verb} not applied ({APPROVAL})", not_applied.join(", ")));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn loaded(text: &str, format: &str) -> Value {
        loaded_with(text, format, &LoadOptions::default())
    }

    fn loaded_with(text: &str, format: &str, options: &LoadOptions) -> Value {
        serde_json::from_str(&load(text, "cfg", format, options).unwrap()).unwrap()
    }

    fn warnings(out: &Value) -> Vec<String> {
        out["warnings"].as_array().unwrap().iter().map(|w| w.as_str().unwrap().to_owned()).collect()
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
    fn propagate_trace_context_is_read_from_both_formats_and_must_be_a_boolean() {
        let json = loaded(
            r#"{"mcpServers":{"quiet":{"url":"https://h.test/mcp","propagateTraceContext":false},"fs":{"command":"x"}}}"#,
            "json",
        );
        let servers = json["servers"].as_array().unwrap();
        let by = |n: &str| servers.iter().find(|s| s["name"] == n).unwrap().clone();
        assert_eq!(by("quiet")["propagateTraceContext"], false);
        assert!(by("fs").get("propagateTraceContext").is_none());
        assert!(warnings(&json).is_empty(), "{:?}", warnings(&json));
        let toml = loaded("[mcp_servers.quiet]\ncommand = \"x\"\npropagate_trace_context = false", "toml");
        assert_eq!(toml["servers"][0]["propagateTraceContext"], false);
        assert!(warnings(&toml).is_empty(), "{:?}", warnings(&toml));
        for (text, format, named) in [
            (r#"{"mcpServers":{"a":{"command":"x","propagateTraceContext":"no"}}}"#, "json", "propagateTraceContext"),
            ("[mcp_servers.a]\ncommand = \"x\"\npropagate_trace_context = 0", "toml", "propagate_trace_context"),
        ] {
            let error = load(text, "cfg", format, &LoadOptions::default()).unwrap_err();
            assert!(error.to_string().contains(&format!("{named} must be a boolean")), "{error}");
        }
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
        let out = loaded(
            r#"{"mcpServers":{"a":{"command":"fs","args":["${env:MCPFERRY_TEST_CFG_DIR}/x","${MCPFERRY_TEST_CFG_DIR}"]},"b":{"command":"${env:UNSET_MCPFERRY_VAR}","disabled":true}}}"#,
            "json",
        );
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
            (r#"{"mcpServers":{"a":{"command":"x","env":{"K":"${input:key}"}}}}"#, "json", "mcpServers.a.env.K: not supported here: ${input:key} (VS Code asks"),
            (r#"{"mcpServers":{"a":{"command":"x","args":["${workspaceFolder}"]}}}"#, "json", "mcpServers.a.args[0]: not supported here: ${workspaceFolder} (a configuration object has no folder"),
            (r#"{"mcpServers":{"a":{"command":"x","args":["${command:pick}"]}}}"#, "json", "not supported here: ${command:pick} (mcpferry resolves ${env:NAME}"),
            (r#"{"mcpServers":{"a":{"comand":"x"}}}"#, "json", "cfg: mcpServers.a needs a command (a stdio server) or a url (an HTTP server); it has an unknown key \"comand\" (did you mean \"command\"?)"),
            (r#"{"mcpServer":{"a":{"command":"x"}}}"#, "json", "no \"mcpServers\" (or VS Code \"servers\") object (the file has \"mcpServer\": did you mean \"mcpServers\"?)"),
            (r#"{"mcpServers":{"a":{"command":"x","envFile":".env"}}}"#, "json", "mcpServers.a.envFile: \".env\" is relative, and a configuration object has no folder"),
            (r#"{"mcpServers":{"a":{"command":"x","disabledTools":"y"}}}"#, "json", "mcpServers.a.disabledTools must be an array"),
            (r#"{"mcpServers":{"a":{"command":"x","args":"-y"}}}"#, "json", "cfg: servers[0] (\"a\").args must be an array of strings"),
            (r#"{"mcpServers":{"a":{"url":"ftp://h/"}}}"#, "json", "(\"a\").url must be an http"),
            ("[mcp_servers.a\n", "toml", "cfg: not valid TOML (line 1)"),
            ("x = 1", "toml", "no [mcp_servers.<name>]"),
            ("[mcp_server.a]\ncommand = \"x\"", "toml", "no [mcp_servers.<name>] tables (the file has \"mcp_server\": did you mean \"mcp_servers\"?)"),
            ("[mcp_servers.a]\ncommand = \"x\"\nenv_vars = \"TZ\"", "toml", "[mcp_servers.a].env_vars must be an array"),
            ("[mcp_servers.a]\ncommand = \"x\"\nenv_vars = [\"not a name\"]", "toml", "[mcp_servers.a].env_vars[0] must be an environment variable name"),
            ("[mcp_servers.a]\ncommand = \"x\"\n[mcp_servers.a.tools.t]\napproval_mode = \"sometimes\"", "toml", "[mcp_servers.a].tools.\"t\".approval_mode must be \"auto\", \"prompt\" or \"approve\""),
            ("[mcp_servers.a]\ncommand = \"x\"\nenabled = \"no\"", "toml", "[mcp_servers.a].enabled must be a boolean"),
            ("[mcp_servers.a]\ncommand = \"x\"\nallow_tools = \"read_*\"", "toml", "[mcp_servers.a].allow_tools must be an array"),
            ("[mcp_servers.a]\nurl = \"http://h/\"\nheaders = {}\nhttp_headers = {}", "toml", "headers and http_headers mean the same"),
            ("[mcp_servers.a]\nurl = \"http://h/\"\nheader_env = { \"X-K\" = \"not a var\" }", "toml", "headersFromEnv[\"X-K\"] must be an environment variable name"),
        ];
        for (text, format, expected) in cases {
            let error = load(text, "cfg", format, &LoadOptions::default()).unwrap_err();
            assert_eq!(error.code(), "mcp_config_invalid");
            assert!(error.to_string().contains(expected), "{text}: {error}");
        }
    }

    #[test]
    fn a_codex_config_toml_as_codex_writes_it_loads_with_env_vars_passed_through() {
        std::env::set_var("MCPFERRY_TEST_CFG_TZ", "Pacific/Chatham");
        std::env::set_var("MCPFERRY_TEST_CFG_LOCAL", "local-value");
        std::env::set_var("MCPFERRY_TEST_CFG_SHADOWED", "from-the-environment");
        let out = loaded(
            r#"
            model = "gpt-5-codex"
            approval_policy = "on-request"
            [projects."/home/me/app"]
            trust_level = "trusted"

            [mcp_servers.time]
            command = "uvx"
            args = ["mcp-server-time"]
            env = { MCPFERRY_TEST_CFG_SHADOWED = "from-the-file" }
            env_vars = ["MCPFERRY_TEST_CFG_TZ", { name = "MCPFERRY_TEST_CFG_LOCAL", source = "local" }, "MCPFERRY_TEST_CFG_SHADOWED", "MCPFERRY_TEST_CFG_NEVER_SET", { name = "REMOTE_ONLY", source = "remote" }]
            startup_timeout_sec = 20
            tool_timeout_sec = 120
            required = true
            default_tools_approval_mode = "approve"
            enabled_tools = ["get_current_time", "convert_time"]

            [mcp_servers.time.tools.get_current_time]
            approval_mode = "approve"

            [mcp_servers.time.tools.convert_time]
            approval_mode = "prompt"
            "#,
            "toml",
        );
        let time = &out["servers"][0];
        assert_eq!(
            time["env"],
            json!({"MCPFERRY_TEST_CFG_SHADOWED": "from-the-file", "MCPFERRY_TEST_CFG_TZ": "Pacific/Chatham", "MCPFERRY_TEST_CFG_LOCAL": "local-value"})
        );
        assert_eq!(time["tools"], json!({"allow": ["get_current_time", "convert_time"]}));
        let warnings = warnings(&out);
        let has = |text: &str| warnings.iter().any(|w| w.contains(text));
        assert!(has("cfg: [mcp_servers.time]: startup_timeout_sec, tool_timeout_sec are not applied (mcpferry's timeouts are per toolset"), "{warnings:?}");
        assert!(has("[mcp_servers.time]: required is not applied"), "{warnings:?}");
        assert!(
            has("[mcp_servers.time].env_vars[4] (REMOTE_ONLY, source = \"remote\") is not applied"),
            "{warnings:?}"
        );
        // "approve" is what happens without a policy; "prompt" is not.
        assert!(has("[mcp_servers.time]: tools.\"convert_time\".approval_mode = \"prompt\" is not applied (mcpferry asks no one before a call: give mcpTools a policy"), "{warnings:?}");
        assert!(!has("get_current_time") && !has("default_tools_approval_mode"), "{warnings:?}");
        assert_eq!(warnings.len(), 4, "{warnings:?}");
        // A disabled entry reads nothing from the environment.
        let off =
            loaded("[mcp_servers.a]\ncommand = \"x\"\nenv_vars = [\"MCPFERRY_TEST_CFG_TZ\"]\nenabled = false", "toml");
        assert_eq!(off["servers"][0].get("env"), None);
    }

    #[test]
    fn an_env_file_and_the_editors_variables_resolve_against_the_files_folder() {
        let dir = tempfile::tempdir().unwrap();
        let workspace = dir.path().join("my-app");
        std::fs::create_dir_all(workspace.join(".vscode")).unwrap();
        std::fs::write(
            workspace.join(".env"),
            "# a comment\n\nexport API_URL=https://api.test/v1 # trailing comment\nQUOTED=\"two\\nlines \\\"q\\\"\"\nSINGLE='as $written\\n'\nMULTI=\"first\nsecond\"\nEMPTY=\nSHADOWED=from-file\n",
        )
        .unwrap();
        std::fs::write(workspace.join(".vscode").join("local.env"), "LOCAL=1\n").unwrap();
        let options = LoadOptions {
            path: Some(workspace.join(".vscode").join("mcp.json")),
            home: Some("/home/me".into()),
            cwd: Some("/work".into()),
            ..LoadOptions::default()
        };
        let out = loaded_with(
            r#"{"servers":{"app":{"type":"stdio","command":"node","args":["${workspaceFolder}${pathSeparator}server.js","${workspaceFolderBasename}","${userHome}/x","${cwd}"],
                "envFile":"${workspaceFolder}/.env","env":{"SHADOWED":"from-env","ROOT":"${workspaceFolder}"}},
                "local":{"command":"node","envFile":"local.env"}},"inputs":[]}"#,
            "json",
            &options,
        );
        let root = workspace.to_string_lossy().into_owned();
        let sep = std::path::MAIN_SEPARATOR;
        let app = &out["servers"][0];
        assert_eq!(app["args"], json!([format!("{root}{sep}server.js"), "my-app", "/home/me/x", "/work"]));
        assert_eq!(
            app["env"],
            json!({"API_URL": "https://api.test/v1", "QUOTED": "two\nlines \"q\"", "SINGLE": "as $written\\n", "MULTI": "first\nsecond", "EMPTY": "", "SHADOWED": "from-env", "ROOT": root})
        );
        assert_eq!(app.get("envFile"), None);
        // Relative to the file's own folder (.vscode), not the workspace.
        assert_eq!(out["servers"][1]["env"], json!({"LOCAL": "1"}));
        assert_eq!(warnings(&out), Vec::<String>::new());
        // A file at a project root: the workspace is its folder.
        let at_root = LoadOptions { path: Some(workspace.join(".mcp.json")), ..LoadOptions::default() };
        let out =
            loaded_with(r#"{"mcpServers":{"a":{"command":"x","args":["${workspaceFolder}"]}}}"#, "json", &at_root);
        assert_eq!(out["servers"][0]["args"], json!([root]));
        // Claude Code's default, and a disabled entry's envFile is not read.
        let out = loaded_with(
            r#"{"mcpServers":{"a":{"command":"x","args":["${MCPFERRY_SURELY_UNSET:-fallback}"]},"b":{"command":"x","envFile":"missing.env","disabled":true}}}"#,
            "json",
            &at_root,
        );
        assert_eq!(out["servers"][0]["args"], json!(["fallback"]));
        assert_eq!(out["servers"][1].get("env"), None);

        let error = |text: &str| load(text, "cfg", "json", &at_root).unwrap_err().to_string();
        let missing = error(r#"{"mcpServers":{"a":{"command":"x","envFile":"missing.env"}}}"#);
        assert!(
            missing.contains("cfg: mcpServers.a.envFile: \"missing.env\" cannot be read (no such file)"),
            "{missing}"
        );
        assert!(error(r#"{"mcpServers":{"a":{"command":"x","envFile":".vscode"}}}"#).contains("is not a regular file"));
        // A FIFO with no writer, and a link to a device: refused on the open file, never waited on or read without end.
        #[cfg(unix)]
        {
            let fifo = workspace.join("fifo.env");
            let c_path = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
            assert_eq!(unsafe { libc::mkfifo(c_path.as_ptr(), 0o600) }, 0);
            std::os::unix::fs::symlink("/dev/zero", workspace.join("zero.env")).unwrap();
            for file in ["fifo.env", "zero.env"] {
                let message = error(&format!(r#"{{"mcpServers":{{"a":{{"command":"x","envFile":"{file}"}}}}}}"#));
                assert!(message.contains("is not a regular file"), "{file}: {message}");
            }
        }
        std::fs::write(workspace.join("big.env"), "A=".to_owned() + &"x".repeat(MAX_ENV_FILE_BYTES as usize)).unwrap();
        assert!(error(r#"{"mcpServers":{"a":{"command":"x","envFile":"big.env"}}}"#)
            .contains(&format!("is larger than {MAX_ENV_FILE_BYTES} bytes")));
        for (text, expected) in [
            ("A=1\nnot a line\n", "line 2: it is not NAME=value"),
            ("1A=secret\n", "line 1: the name is not a variable name"),
            ("A=\"secret\n", "line 1: it opens a quoted value of A that is never closed"),
            ("A=\"x\" y\n", "line 1: it has text after"),
        ] {
            std::fs::write(workspace.join("bad.env"), text).unwrap();
            let message = error(r#"{"mcpServers":{"a":{"command":"x","envFile":"bad.env"}}}"#);
            assert!(message.contains(expected) && !message.contains("secret"), "{text:?}: {message}");
        }
    }

    #[test]
    fn every_format_names_unknown_keys_with_the_nearest_known_one_and_strict_refuses_them() {
        let json = r#"{"mcpServers":{"a":{"command":"x","evnFile":".env","Args":[],"colour":"red","dev":{"watch":"src/**"},"url2":1},
                       "web":{"url":"https://h.test/","env":{"A":"b"},"headers":{"X":"y"}}}}"#;
        let out = loaded(json, "json");
        assert_eq!(
            warnings(&out),
            [
                "cfg: mcpServers.a has an unknown key \"Args\" (did you mean \"args\"?), which is ignored",
                "cfg: mcpServers.a has an unknown key \"colour\", which is ignored",
                "cfg: mcpServers.a has an unknown key \"evnFile\" (did you mean \"envFile\"?), which is ignored",
                "cfg: mcpServers.a has an unknown key \"url2\" (did you mean \"url\"?), which is ignored",
                "cfg: mcpServers.a: dev is not applied (VS Code's development mode (watch and debug) belongs to the editor)",
                "cfg: mcpServers.web: env is not applied (it is for stdio servers, and this is an HTTP server)",
            ]
        );
        assert_eq!(
            out["servers"][1],
            json!({"name": "web", "type": "streamable-http", "url": "https://h.test/", "headers": {"X": "y"}})
        );
        let toml = "[mcp_servers.a]\ncommand = \"x\"\ncomand = \"y\"\nheader_env = { \"X-K\" = \"V\" }\n[mcp_servers.a.tools.t]\naproval_mode = \"prompt\"";
        assert_eq!(
            warnings(&loaded(toml, "toml")),
            [
                "cfg: [mcp_servers.a] has an unknown key \"comand\" (did you mean \"command\"?), which is ignored",
                "cfg: [mcp_servers.a].tools.\"t\" has an unknown key \"aproval_mode\" (did you mean \"approval_mode\"?), which is ignored",
                "cfg: [mcp_servers.a]: header_env is not applied (it is for HTTP servers, and this is a stdio server)",
            ]
        );
        let strict = LoadOptions { strict: true, ..LoadOptions::default() };
        let error = load(toml, "cfg", "toml", &strict).unwrap_err();
        assert_eq!(error.code(), "mcp_config_invalid");
        assert_eq!(
            error.to_string(),
            "cfg: [mcp_servers.a] has an unknown key \"comand\" (did you mean \"command\"?); cfg: [mcp_servers.a].tools.\"t\" has an unknown key \"aproval_mode\" (did you mean \"approval_mode\"?)"
        );
        assert!(load(json, "cfg", "json", &strict)
            .unwrap_err()
            .to_string()
            .contains("mcpServers.a has an unknown key \"Args\" (did you mean \"args\"?)"));
        // Strict refuses only what no tool documents: known keys not applied still load, with their warnings.
        let known = loaded_with("[mcp_servers.a]\ncommand = \"x\"\nstartup_timeout_ms = 5000", "toml", &strict);
        assert_eq!(warnings(&known).len(), 1);
        // A key from the file is shown escaped: no control character reaches a terminal.
        let out = loaded(r#"{"mcpServers":{"a":{"command":"x","\u001b]52;c;aGk=\u0007":1}}}"#, "json");
        assert_eq!(
            warnings(&out),
            ["cfg: mcpServers.a has an unknown key \"\\u{1b}]52;c;aGk=\\u{7}\", which is ignored"]
        );
    }

    #[test]
    fn nearest_counts_edits_and_swaps_and_ignores_far_keys() {
        let keys = || JSON_KEYS.iter().map(|(k, _)| *k);
        assert_eq!(nearest("comand", keys()), Some("command"));
        assert_eq!(nearest("commnad", keys()), Some("command"));
        assert_eq!(nearest("ENVFILE", keys()), Some("envFile"));
        assert_eq!(nearest("evn", keys()), Some("env"));
        assert_eq!(nearest("colour", keys()), None);
        assert_eq!(distance(&['a', 'b'], &['b', 'a']), 1);
        assert_eq!(distance(&[], &['a', 'b']), 2);
    }

    #[test]
    fn env_file_messages_show_the_path_as_written_and_no_line_of_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let at = LoadOptions { path: Some(dir.path().join("mcp.json")), ..LoadOptions::default() };
        std::env::set_var("MCPFERRY_TEST_FAKE_SECRET_TOKEN", "tok-5ecret-value-77");
        let message = load(
            r#"{"mcpServers":{"a":{"command":"x","envFile":"${MCPFERRY_TEST_FAKE_SECRET_TOKEN}"}}}"#,
            "cfg",
            "json",
            &at,
        )
        .unwrap_err()
        .to_string();
        assert!(
            message.contains("\"${MCPFERRY_TEST_FAKE_SECRET_TOKEN}\" cannot be read") && !message.contains("5ecret"),
            "{message}"
        );
        std::fs::write(dir.path().join("key.pem"), "AbC+dEf/SecretBase64xyz more\nB=2\n").unwrap();
        let message = load(r#"{"mcpServers":{"a":{"command":"x","envFile":"key.pem"}}}"#, "cfg", "json", &at)
            .unwrap_err()
            .to_string();
        assert!(message.ends_with("line 1: it is not NAME=value") && !message.contains("AbC"), "{message}");
        std::fs::write(dir.path().join("key.pem"), "AbC+dEf/SecretBase64xyz==\n").unwrap();
        let message = load(r#"{"mcpServers":{"a":{"command":"x","envFile":"key.pem"}}}"#, "cfg", "json", &at)
            .unwrap_err()
            .to_string();
        assert!(message.ends_with("line 1: the name is not a variable name") && !message.contains("AbC"), "{message}");
    }

    #[test]
    fn one_env_file_named_by_many_entries_is_read_once_and_bounded_in_all() {
        let dir = tempfile::tempdir().unwrap();
        let at = LoadOptions { path: Some(dir.path().join("mcp.json")), ..LoadOptions::default() };
        std::fs::write(dir.path().join("big.env"), format!("A={}\n", "x".repeat(200 * 1024))).unwrap();
        let entries = |n: usize| {
            (0..n).map(|i| format!(r#""s{i}":{{"command":"x","envFile":"big.env"}}"#)).collect::<Vec<_>>().join(",")
        };
        let out = loaded_with(&format!(r#"{{"mcpServers":{{{}}}}}"#, entries(4)), "json", &at);
        assert_eq!(out["servers"][3]["env"]["A"].as_str().map(str::len), Some(200 * 1024));
        let message =
            load(&format!(r#"{{"mcpServers":{{{}}}}}"#, entries(1000)), "cfg", "json", &at).unwrap_err().to_string();
        assert!(message.contains(&format!("more than {MAX_ENV_FILE_BYTES_PER_LOAD} bytes in all")), "{message}");
    }

    #[test]
    fn a_multi_line_quoted_value_keeps_its_escapes_across_lines() {
        let parsed = parse_dotenv("A=\"one\\\\\ntwo \\\" still\nthree\" # done\nB='x\ny'\n", "f").unwrap();
        assert_eq!(
            parsed,
            vec![("A".to_owned(), "one\\\ntwo \" still\nthree".to_owned()), ("B".to_owned(), "x\ny".to_owned())]
        );
        let long = format!("A=\"{}", "line\n".repeat(20_000));
        assert!(parse_dotenv(&long, "f")
            .unwrap_err()
            .to_string()
            .contains("line 1: it opens a quoted value of A that is never closed"));
    }

    #[test]
    fn an_unresolved_load_reads_nothing_and_reports_what_it_would_read() {
        let dir = tempfile::tempdir().unwrap();
        let at = LoadOptions { path: Some(dir.path().join("mcp.json")), resolve: false, ..LoadOptions::default() };
        std::env::set_var("MCPFERRY_TEST_UNRESOLVED", "value-from-env");
        let out = loaded_with(
            r#"{"mcpServers":{"a":{"command":"x","args":["${MCPFERRY_TEST_UNRESOLVED}","${userHome}"],"envFile":"${MCPFERRY_TEST_UNRESOLVED}/missing.env"},"h":{"url":"https://h.example/${cwd}"}}}"#,
            "json",
            &at,
        );
        assert_eq!(out["servers"][0]["args"], json!(["${MCPFERRY_TEST_UNRESOLVED}", "${userHome}"]));
        assert_eq!(out["servers"][1]["url"], "https://h.example/${cwd}");
        assert_eq!(
            out["unresolved"],
            json!({ "a": { "envFile": ["${MCPFERRY_TEST_UNRESOLVED}/missing.env"], "envVars": [] } })
        );
        std::env::set_var("MCPFERRY_TEST_PASSED", "passed-value");
        let out = loaded_with("[mcp_servers.t]\ncommand = \"x\"\nenv_vars = [\"MCPFERRY_TEST_PASSED\"]\n", "toml", &at);
        assert_eq!(out["servers"][0].get("env"), None);
        assert_eq!(out["unresolved"], json!({ "t": { "envFile": [], "envVars": ["MCPFERRY_TEST_PASSED"] } }));
    }

    #[test]
    fn only_the_first_unknown_keys_get_a_did_you_mean() {
        let keys: Vec<String> = (0..MAX_DID_YOU_MEAN_KEYS + 5).map(|i| format!("disabledTools{i:02}")).collect();
        let entry: Map<String, Value> =
            keys.iter().map(|k| (k.clone(), Value::Null)).chain([("command".to_owned(), json!("x"))]).collect();
        let unknown = unknown_keys(&entry, JSON_KEYS.iter().map(|(k, _)| k));
        assert_eq!(unknown.iter().filter(|u| u.nearest.is_some()).count(), MAX_DID_YOU_MEAN_KEYS);
        assert!(unknown[unknown.len() - 1].nearest.is_none());
    }
}
