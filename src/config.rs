//! The options and server entries as they arrive from JavaScript (JSON), checked field by field so
//! a mistake is reported with the entry and field it is in. This is the only validator: the
//! TypeScript layer forwards what the caller gave, with every value JSON cannot carry (a callback,
//! the store, the session, a BigInt) replaced by a marker `{"$mcpferry": "<kind>"}`, and this module
//! decides whether it is acceptable.
//!
//! The wire shape is `{"servers": <as given>, "options": <as given, marked>}`. Adding an option is a
//! local change: its key in `OPTION_KEYS`, a field in `ToolsetConfig`, a line in `parse`.

use crate::error::{McpError, Result};
use crate::guard::filter::{ServerToolFilter, ToolFilter};
use crate::guard::headers::validate_headers;
use crate::limits::{DEFAULT_CONNECT_TIMEOUT_MS, DEFAULT_MAX_RESULT_BYTES, DEFAULT_TIMEOUT_MS};
use reqwest::header::HeaderMap;
use serde_json::{Map, Value};
use std::collections::BTreeMap;
use std::path::PathBuf;
use url::Url;

/// Every option `mcpTools` accepts; any other key is refused (a typo must not silently disable a guard).
pub const OPTION_KEYS: &[&str] = &[
    "tools",
    "proxy",
    "timeoutMs",
    "maxResultBytes",
    "onDiagnostic",
    "session",
    "auth",
    "allowedHosts",
    "policy",
    "storage",
    "disclosure",
    "contextWindowTokens",
    "tokenStore",
    "onAuthorizationUrl",
    "authorizationTimeoutMs",
    "signal",
    "onElicitation",
    "elicitationModes",
    "connectTimeoutMs",
    "onDegraded",
    "warnings",
    "logs",
    "progress",
    "validateArguments",
    "validateResults",
    "exposeServerErrors",
    "reconnect",
    "serverLogLevel",
    "exposeSkills",
    "exposeResources",
    "apps",
    "telemetry",
];

/// The key of a marker standing for a value JSON cannot carry: `{"$mcpferry": "function"}` (also
/// `"store"`, `"value"` for the opaque session, `"bigint"`, `"symbol"`).
pub const MARKER_KEY: &str = "$mcpferry";

#[derive(Debug)]
pub struct ToolsetConfig {
    pub servers: Vec<ServerEntry>,
    /// Which of the application's callbacks are configured.
    pub callbacks: CallbackOptions,
    /// Whether `storage` is set (the store itself is handed over beside the JSON).
    pub storage: bool,
    /// A static `allowedHosts` list. `None`: no host restriction (unless a resolver hook is set).
    pub allowed_hosts: Option<Vec<String>>,
    pub timeout_ms: u64,
    /// How long a server has to start and finish its handshake (`connectTimeoutMs`; default
    /// [`DEFAULT_CONNECT_TIMEOUT_MS`], or `timeoutMs` when only that is given).
    pub connect_timeout_ms: u64,
    /// `logs: 'diagnostics'`: the engine's log events reach `onDiagnostic` as `log` diagnostics.
    pub logs_to_diagnostics: bool,
    pub max_result_bytes: usize,
    pub filter: ToolFilter,
    pub disclosure: DisclosureConfig,
    /// The `proxy` option: every HTTP server is reached through it. `None`: direct connections (proxy
    /// variables in the environment are ignored).
    pub proxy: Option<Url>,
    /// Whether `tokenStore` is set (the store itself is handed over beside the JSON).
    pub token_store: bool,
    /// How long a person has to finish a login.
    pub authorization_timeout_ms: u64,
    /// The elicitation modes declared when `onElicitation` is set (`elicitationModes`, default form).
    pub elicitation_modes: crate::session::elicitation::Modes,
    /// `validateArguments`, `validateResults`, `exposeServerErrors` (each default true).
    pub validation: crate::schema::tool::ValidationConfig,
    /// How a lost server is recovered (`reconnect`, on by default); `None` for `reconnect: false`.
    pub reconnect: Option<ReconnectConfig>,
    /// `serverLogLevel`: the level of logs asked of every server that declares `logging` (see
    /// `server_log`); `None`, the default: nothing is asked.
    pub server_log_level: Option<crate::server_log::Level>,
    /// `exposeSkills`: the servers' skills (SEP-2640) are listed at connect, named in the system prompt and
    /// loaded by the model through the local `mcp__skills` tool. Default false.
    pub expose_skills: bool,
    /// `exposeResources`: the servers' resources listed and read by the model through the local
    /// `mcp__resources` tool. Default false.
    pub expose_resources: bool,
    /// `apps`: the host renders MCP Apps, so the `io.modelcontextprotocol/ui` extension is declared and
    /// app-only tools are kept out of the model's tools. Default false.
    pub apps: bool,
    /// `telemetry.enabled` (default true): the requests the engine makes on its own are told to JavaScript,
    /// which records them (`telemetry::operation`).
    pub telemetry: bool,
}

/// `reconnect`: how a supervisor brings a lost server back (see `toolset::recovery`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReconnectConfig {
    /// The first backoff delay; each attempt after a failed one waits twice as long, up to `max_delay_ms`.
    pub initial_delay_ms: u64,
    pub max_delay_ms: u64,
    /// Failed attempts in a row before the server is `failed`.
    pub max_attempts: u64,
    /// How long a call waits for a reconnecting server; `None`: its own timeout.
    pub wait_ms: Option<u64>,
    /// `crash_loop_exits` ends (losses and failed attempts) within `crash_loop_window_ms` make it `failed`.
    pub crash_loop_exits: u64,
    pub crash_loop_window_ms: u64,
    /// How long a `failed` server rests before one new attempt.
    pub cool_down_ms: u64,
}

impl Default for ReconnectConfig {
    fn default() -> Self {
        use crate::limits::*;
        ReconnectConfig {
            initial_delay_ms: DEFAULT_RECONNECT_INITIAL_DELAY_MS,
            max_delay_ms: DEFAULT_RECONNECT_MAX_DELAY_MS,
            max_attempts: DEFAULT_RECONNECT_MAX_ATTEMPTS,
            wait_ms: None,
            crash_loop_exits: DEFAULT_CRASH_LOOP_EXITS,
            crash_loop_window_ms: DEFAULT_CRASH_LOOP_WINDOW_MS,
            cool_down_ms: DEFAULT_RECONNECT_COOL_DOWN_MS,
        }
    }
}

/// `reconnect: false | true | { initialDelayMs?, maxDelayMs?, maxAttempts?, waitMs?, crashLoop? }`.
fn parse_reconnect(root: &Map<String, Value>) -> Result<Option<ReconnectConfig>> {
    let given = match root.get("reconnect") {
        None | Some(Value::Null) | Some(Value::Bool(true)) => return Ok(Some(ReconnectConfig::default())),
        Some(Value::Bool(false)) => return Ok(None),
        Some(Value::Object(given)) => given,
        Some(_) => return Err(McpError::config("options.reconnect must be false or an object")),
    };
    const KEYS: &[&str] = &["initialDelayMs", "maxDelayMs", "maxAttempts", "waitMs", "crashLoop"];
    if let Some(key) = given.keys().find(|k| !KEYS.contains(&k.as_str())) {
        return Err(McpError::config(format!(
            "options.reconnect has an unknown key {key:?} (known: {})",
            KEYS.join(", ")
        )));
    }
    let at = "options.reconnect";
    let mut config = ReconnectConfig::default();
    if let Some(ms) = optional_positive_integer(given, "initialDelayMs", at)? {
        config.initial_delay_ms = ms;
    }
    if let Some(ms) = optional_positive_integer(given, "maxDelayMs", at)? {
        config.max_delay_ms = ms;
    }
    if config.max_delay_ms < config.initial_delay_ms {
        return Err(McpError::config("options.reconnect.maxDelayMs must not be less than initialDelayMs"));
    }
    if let Some(n) = optional_positive_integer(given, "maxAttempts", at)? {
        config.max_attempts = n;
    }
    config.wait_ms = optional_positive_integer(given, "waitMs", at)?;
    match given.get("crashLoop") {
        None | Some(Value::Null) => {}
        Some(Value::Object(crash)) => {
            const CRASH_KEYS: &[&str] = &["exits", "windowMs", "coolDownMs"];
            if let Some(key) = crash.keys().find(|k| !CRASH_KEYS.contains(&k.as_str())) {
                return Err(McpError::config(format!(
                    "options.reconnect.crashLoop has an unknown key {key:?} (known: {})",
                    CRASH_KEYS.join(", ")
                )));
            }
            let at = "options.reconnect.crashLoop";
            if let Some(n) = optional_positive_integer(crash, "exits", at)? {
                config.crash_loop_exits = n;
            }
            if let Some(ms) = optional_positive_integer(crash, "windowMs", at)? {
                config.crash_loop_window_ms = ms;
            }
            if let Some(ms) = optional_positive_integer(crash, "coolDownMs", at)? {
                config.cool_down_ms = ms;
            }
        }
        Some(_) => return Err(McpError::config("options.reconnect.crashLoop must be an object")),
    }
    Ok(Some(config))
}

/// Which callbacks the options configure. The callbacks themselves cross beside the JSON.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct CallbackOptions {
    pub on_diagnostic: bool,
    pub auth: bool,
    /// `allowedHosts` given as a resolver function rather than a list.
    pub allowed_hosts_resolver: bool,
    pub decide: bool,
    pub ask: bool,
    /// `onAuthorizationUrl`: the engine can send a person to a login page.
    pub authorization_url: bool,
    /// `onElicitation`.
    pub elicit: bool,
}

impl CallbackOptions {
    /// The callbacks handed over must be exactly the ones the options declare.
    pub fn check_given(&self, auth: bool, allowed_hosts: bool, decide: bool, ask: bool) -> Result<()> {
        if (self.auth, self.allowed_hosts_resolver, self.decide, self.ask) != (auth, allowed_hosts, decide, ask) {
            return Err(McpError::config("the callbacks handed to the engine do not match the options"));
        }
        Ok(())
    }

    /// The elicitation callback handed over must be there exactly when the options declare it.
    pub fn check_elicitation_given(&self, elicit: bool) -> Result<()> {
        if self.elicit != elicit {
            return Err(McpError::config("the onElicitation callback handed to the engine does not match the options"));
        }
        Ok(())
    }
}

/// Which of the host's callbacks and objects the binding handed the engine beside the configuration.
/// Each must be there exactly when the options declare it (by a marker in the configuration JSON):
/// a mismatch is a broken binding, refused before anything starts.
#[derive(Debug, Clone, Copy, Default)]
pub struct HandedOver {
    pub auth: bool,
    pub allowed_hosts: bool,
    pub decide: bool,
    pub ask: bool,
    pub authorization_url: bool,
    pub elicit: bool,
    pub storage: bool,
    pub token_store: bool,
}

impl ToolsetConfig {
    /// The callbacks handed over match the options (checked before any store is looked up).
    pub fn check_callbacks_handed_over(&self, given: &HandedOver) -> Result<()> {
        self.callbacks.check_given(given.auth, given.allowed_hosts, given.decide, given.ask)?;
        if self.callbacks.authorization_url != given.authorization_url {
            return Err(McpError::config("the callbacks handed to the engine do not match the options"));
        }
        self.callbacks.check_elicitation_given(given.elicit)
    }

    /// The stores handed over match the options (checked once they were looked up).
    pub fn check_stores_handed_over(&self, given: &HandedOver) -> Result<()> {
        if self.token_store != given.token_store {
            return Err(McpError::config("options.tokenStore was not handed to the engine as a token store"));
        }
        if self.storage != given.storage {
            return Err(McpError::config("options.storage was not handed to the engine as a store"));
        }
        Ok(())
    }
}

/// `disclosure: { budget, alwaysLoad }` and `contextWindowTokens`, resolved.
#[derive(Debug, Clone)]
pub struct DisclosureConfig {
    pub budget_tokens: usize,
    /// Server names whose tools always carry their full schemas.
    pub always_load: Vec<String>,
}

#[derive(Debug, Clone)]
pub struct ServerEntry {
    pub name: String,
    pub enabled: bool,
    pub kind: ServerKind,
    /// The entry's own `tools: { allow?, block? }`, on top of the toolset's filter.
    pub tools: ServerToolFilter,
    /// HTTP headers whose values are read from environment variables when the server is connected
    /// (`headersFromEnv`, `bearerTokenEnv`), so the values are never part of the configuration.
    pub headers_from_env: Vec<EnvHeader>,
    /// `propagateTraceContext` (default true): a call's trace context goes into its `params._meta`.
    /// False keeps a third-party server from learning the caller's trace ids.
    pub propagate_trace_context: bool,
}

/// One header taken from the environment at connect time: `prefix` + the variable's value.
#[derive(Debug, Clone)]
pub struct EnvHeader {
    pub name: reqwest::header::HeaderName,
    pub variable: String,
    /// `"Bearer "` for `bearerTokenEnv`, else empty.
    pub prefix: &'static str,
}

impl EnvHeader {
    /// The header's value, from the environment now. A missing or unusable variable names the
    /// variable, never a value.
    pub fn resolve(&self, server: &str) -> Result<reqwest::header::HeaderValue> {
        let value = std::env::var(&self.variable).map_err(|_| {
            McpError::config(format!(
                "server {server:?}: header {:?} comes from environment variable {}, which is not set",
                self.name.as_str(),
                self.variable
            ))
        })?;
        let mut header = reqwest::header::HeaderValue::from_str(&format!("{}{value}", self.prefix)).map_err(|_| {
            McpError::config(format!(
                "server {server:?}: environment variable {} has characters header {:?} cannot carry",
                self.variable,
                self.name.as_str()
            ))
        })?;
        header.set_sensitive(true);
        Ok(header)
    }
}

#[derive(Clone)]
pub enum ServerKind {
    Stdio {
        command: String,
        args: Vec<String>,
        env: BTreeMap<String, String>,
        cwd: Option<PathBuf>,
        root: Option<PathBuf>,
        /// Where the server's stderr goes (`stderr`).
        stderr: crate::transport::stdio::StderrMode,
    },
    StreamableHttp {
        url: Url,
        headers: HeaderMap,
        oauth: Option<crate::auth::OAuthSettings>,
    },
    /// The legacy HTTP+SSE transport.
    Sse {
        url: Url,
        headers: HeaderMap,
        oauth: Option<crate::auth::OAuthSettings>,
    },
}

/// Shows what an entry is, never what it carries: env values, arguments, header values and the URL's
/// query may all be credentials.
impl std::fmt::Debug for ServerKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ServerKind::Stdio { command, args, env, .. } => f
                .debug_struct("Stdio")
                .field("command", command)
                .field("args", &args.len())
                .field("env", &env.keys().collect::<Vec<_>>())
                .finish_non_exhaustive(),
            ServerKind::StreamableHttp { url, headers, oauth } | ServerKind::Sse { url, headers, oauth } => f
                .debug_struct(if matches!(self, ServerKind::Sse { .. }) { "Sse" } else { "StreamableHttp" })
                .field("url", &crate::egress::display_url(url))
                .field("headers", &headers.keys().collect::<Vec<_>>())
                .field("oauth", oauth)
                .finish(),
        }
    }
}

impl ServerEntry {
    pub fn is_http(&self) -> bool {
        !matches!(self.kind, ServerKind::Stdio { .. })
    }

    /// The transport name as configured and stored: `stdio`, `streamable-http` or `sse`.
    pub fn kind_name(&self) -> &'static str {
        match self.kind {
            ServerKind::Stdio { .. } => "stdio",
            ServerKind::StreamableHttp { .. } => "streamable-http",
            ServerKind::Sse { .. } => "sse",
        }
    }

    /// The URL as stored and shown: origin and path, never the query (it may carry a token). The full
    /// URL is part of [`ServerEntry::identity`], which stores see only hashed.
    pub fn url(&self) -> Option<String> {
        match &self.kind {
            ServerKind::Stdio { .. } => None,
            ServerKind::StreamableHttp { url, .. } | ServerKind::Sse { url, .. } => {
                Some(crate::egress::display_url(url))
            }
        }
    }

    /// What makes this server this server: used to tell apart entries that share a name.
    pub fn identity(&self) -> String {
        match &self.kind {
            ServerKind::Stdio { command, args, cwd, .. } => {
                serde_json::json!(["stdio", command, args, cwd]).to_string()
            }
            ServerKind::StreamableHttp { url, .. } => serde_json::json!(["streamable-http", url.as_str()]).to_string(),
            ServerKind::Sse { url, .. } => serde_json::json!(["sse", url.as_str()]).to_string(),
        }
    }
}

pub fn parse(json: &str) -> Result<ToolsetConfig> {
    let wire: Value =
        serde_json::from_str(json).map_err(|e| McpError::config(format!("options are not valid JSON: {e}")))?;
    let wire = object(&wire, "the engine's configuration")?;
    // Absent is no options; `null` (or anything but an object) is a mistake worth naming.
    let root = match wire.get("options") {
        None => &Map::new(),
        Some(options) => object(options, "options")?,
    };
    if let Some(key) = root.keys().find(|k| !OPTION_KEYS.contains(&k.as_str())) {
        return Err(McpError::config(format!("unknown option {key:?}")));
    }
    let telemetry = check_telemetry(root)?;
    let callbacks = parse_callbacks(root)?;
    let storage = match root.get("storage") {
        None | Some(Value::Null) => false,
        Some(v) if marker(v) == Some("store") => true,
        Some(_) => {
            return Err(McpError::config(
                "options.storage must be a connection store (get, list, save, remove, claimBaseline)",
            ))
        }
    };
    // With `auth`, the engine owns the Authorization header.
    let servers = match wire.get("servers") {
        Some(Value::Array(items)) => {
            items.iter().enumerate().map(|(i, v)| parse_server(i, v, callbacks.auth)).collect::<Result<Vec<_>>>()?
        }
        _ => return Err(McpError::config("servers must be an array of server entries")),
    };
    let stderr_to_diagnostics = servers.iter().position(|s| {
        matches!(s.kind, ServerKind::Stdio { stderr: crate::transport::stdio::StderrMode::Diagnostics, .. })
    });
    if let (Some(index), false) = (stderr_to_diagnostics, callbacks.on_diagnostic) {
        let name = &servers[index].name;
        return Err(McpError::config(format!(
            "servers[{index}] ({name:?}).stderr: \"diagnostics\" needs options.onDiagnostic, which receives the lines"
        )));
    }
    let given_timeout_ms = optional_positive_integer(root, "timeoutMs", "options")?;
    let timeout_ms = given_timeout_ms.unwrap_or(DEFAULT_TIMEOUT_MS);
    // A caller who shortened every request meant the handshake too; otherwise the default leaves room
    // for a first `npx -y` run that downloads its package.
    let connect_timeout_ms = optional_positive_integer(root, "connectTimeoutMs", "options")?
        .or(given_timeout_ms)
        .unwrap_or(DEFAULT_CONNECT_TIMEOUT_MS);
    // Read by the TypeScript layer (it prints warnings and rejects); checked here like every option.
    match root.get("onDegraded") {
        None | Some(Value::Null) => {}
        Some(Value::String(s)) if s == "warn" || s == "throw" => {}
        Some(_) => return Err(McpError::config("options.onDegraded must be \"warn\" or \"throw\"")),
    }
    // `warnings` and `progress` are read by the TypeScript layer; checked here like every option.
    flag(root, "warnings", true)?;
    flag(root, "progress", false)?;
    let validation = crate::schema::tool::ValidationConfig {
        arguments: flag(root, "validateArguments", true)?,
        results: flag(root, "validateResults", true)?,
        expose_server_errors: flag(root, "exposeServerErrors", true)?,
    };
    let logs_to_diagnostics = match root.get("logs") {
        None | Some(Value::Null) => false,
        Some(Value::String(s)) if s == "diagnostics" => true,
        Some(_) => {
            return Err(McpError::config("options.logs must be \"diagnostics\" (engine logs as log diagnostics)"))
        }
    };
    if logs_to_diagnostics && !callbacks.on_diagnostic {
        return Err(McpError::config("options.logs: \"diagnostics\" needs options.onDiagnostic, which receives them"));
    }
    let max_result_bytes = optional_positive_integer(root, "maxResultBytes", "options")?
        .map(|n| n as usize)
        .unwrap_or(DEFAULT_MAX_RESULT_BYTES);
    let filter = match root.get("tools") {
        None | Some(Value::Null) => ToolFilter::All,
        Some(tools) => {
            let tools = object(tools, "options.tools")?;
            if let Some(key) = tools.keys().find(|k| *k != "allow" && *k != "block") {
                return Err(McpError::config(format!("options.tools has an unknown key {key:?} (use allow or block)")));
            }
            ToolFilter::new(
                optional_strings(tools, "allow", "options.tools")?,
                optional_strings(tools, "block", "options.tools")?,
            )?
        }
    };
    let allowed_hosts =
        if callbacks.allowed_hosts_resolver { None } else { optional_strings(root, "allowedHosts", "options")? };
    if let Some(hosts) = &allowed_hosts {
        crate::guard::hosts::HostGuard::new(hosts)?;
    }
    let disclosure = parse_disclosure(root)?;
    let proxy = match root.get("proxy") {
        None | Some(Value::Null) => None,
        Some(Value::String(text)) => Some(crate::egress::proxy_url(text)?),
        Some(_) => return Err(McpError::config("options.proxy must be a string (an http:// or https:// URL)")),
    };
    let token_store = match root.get("tokenStore") {
        None | Some(Value::Null) => false,
        Some(v) if marker(v) == Some("tokenStore") => true,
        Some(_) => return Err(McpError::config("options.tokenStore must be a token store (get, set, delete)")),
    };
    match root.get("signal") {
        None | Some(Value::Null) => {}
        Some(v) if marker(v) == Some("signal") => {}
        Some(_) => return Err(McpError::config("options.signal must be an AbortSignal")),
    }
    let authorization_timeout_ms = optional_positive_integer(root, "authorizationTimeoutMs", "options")?
        .unwrap_or(crate::limits::DEFAULT_AUTHORIZATION_TIMEOUT_MS);
    let elicitation_modes = parse_elicitation_modes(root, callbacks.elicit)?;
    let reconnect = parse_reconnect(root)?;
    let server_log_level = match root.get("serverLogLevel") {
        None | Some(Value::Null) => None,
        Some(Value::String(name)) if crate::server_log::Level::parse(name).is_some() => {
            crate::server_log::Level::parse(name)
        }
        Some(_) => {
            return Err(McpError::config(format!(
                "options.serverLogLevel must be one of {}",
                crate::server_log::LEVELS.map(|l| format!("{l:?}")).join(", ")
            )))
        }
    };
    if server_log_level.is_some() && !callbacks.on_diagnostic {
        return Err(McpError::config(
            "options.serverLogLevel needs options.onDiagnostic, which receives the server-log diagnostics",
        ));
    }
    let expose_skills = flag(root, "exposeSkills", false)?;
    let apps = flag(root, "apps", false)?;
    let expose_resources = flag(root, "exposeResources", false)?;
    Ok(ToolsetConfig {
        servers,
        callbacks,
        storage,
        allowed_hosts,
        timeout_ms,
        connect_timeout_ms,
        logs_to_diagnostics,
        max_result_bytes,
        filter,
        disclosure,
        proxy,
        token_store,
        authorization_timeout_ms,
        elicitation_modes,
        validation,
        reconnect,
        server_log_level,
        expose_skills,
        expose_resources,
        apps,
        telemetry,
    })
}

/// A boolean option, `default` when absent or null.
fn flag(root: &Map<String, Value>, name: &str, default: bool) -> Result<bool> {
    match root.get(name) {
        None | Some(Value::Null) => Ok(default),
        Some(Value::Bool(given)) => Ok(*given),
        Some(_) => Err(McpError::config(format!("options.{name} must be a boolean"))),
    }
}

/// `elicitationModes`: a non-empty array of `"form"` and `"url"`; only with `onElicitation`.
fn parse_elicitation_modes(root: &Map<String, Value>, elicit: bool) -> Result<crate::session::elicitation::Modes> {
    let Some(given) = root.get("elicitationModes").filter(|v| !v.is_null()) else {
        return Ok(crate::session::elicitation::Modes::default());
    };
    if !elicit {
        return Err(McpError::config(
            "options.elicitationModes needs options.onElicitation, which answers the elicitations",
        ));
    }
    let mut modes = crate::session::elicitation::Modes { form: false, url: false };
    let names = given.as_array().filter(|names| !names.is_empty());
    for name in names.into_iter().flatten() {
        match name.as_str() {
            Some("form") => modes.form = true,
            Some("url") => modes.url = true,
            _ => {
                return Err(McpError::config(
                    "options.elicitationModes must be a non-empty array of \"form\" and \"url\"",
                ))
            }
        }
    }
    if !modes.form && !modes.url {
        return Err(McpError::config("options.elicitationModes must be a non-empty array of \"form\" and \"url\""));
    }
    Ok(modes)
}

/// The kind a marker stands for, if `value` is one.
fn marker(value: &Value) -> Option<&str> {
    let map = value.as_object().filter(|m| m.len() == 1)?;
    map.get(MARKER_KEY)?.as_str()
}

fn is_function(value: Option<&Value>) -> Option<bool> {
    match value {
        None | Some(Value::Null) => Some(false),
        Some(v) if marker(v) == Some("function") => Some(true),
        Some(_) => None,
    }
}

fn parse_callbacks(root: &Map<String, Value>) -> Result<CallbackOptions> {
    let on_diagnostic = is_function(root.get("onDiagnostic"))
        .ok_or_else(|| McpError::config("options.onDiagnostic must be a function"))?;
    let auth = is_function(root.get("auth")).ok_or_else(|| {
        McpError::config("options.auth must be a function (server, { session }) => Promise<{ token }>")
    })?;
    let allowed_hosts_resolver = matches!(root.get("allowedHosts"), Some(v) if marker(v) == Some("function"));
    let elicit = is_function(root.get("onElicitation")).ok_or_else(|| {
        McpError::config(
            "options.onElicitation must be a function (request, { server, session }) => { action, content? }",
        )
    })?;
    let (decide, ask) = match root.get("policy") {
        None | Some(Value::Null) => (false, false),
        Some(Value::Object(policy)) if is_function(policy.get("decide")) == Some(true) => {
            let ask = is_function(policy.get("ask"))
                .ok_or_else(|| McpError::config("options.policy.ask must be a function"))?;
            (true, ask)
        }
        Some(_) => return Err(McpError::config("options.policy must be an object with a decide(request) function")),
    };
    // A credential or host list resolved at connect time belongs to one session; without one, every
    // user of this toolset would be served as whoever connected first.
    let session = root.get("session").is_some();
    if auth && !session {
        return Err(McpError::config("options.auth requires session: build one toolset per session"));
    }
    if allowed_hosts_resolver && !session {
        return Err(McpError::config("an options.allowedHosts resolver requires session"));
    }
    let authorization_url = is_function(root.get("onAuthorizationUrl"))
        .ok_or_else(|| McpError::config("options.onAuthorizationUrl must be a function (url, info) => void"))?;
    Ok(CallbackOptions { on_diagnostic, auth, allowed_hosts_resolver, decide, ask, authorization_url, elicit })
}

/// `telemetry: { enabled?, baggage? }`: read by the TypeScript layer (`lib/telemetry.ts`), which makes
/// the spans and metrics; checked here like every option. Whether it is on (`enabled`, default true).
fn check_telemetry(root: &Map<String, Value>) -> Result<bool> {
    let Some(telemetry) = root.get("telemetry").filter(|v| !v.is_null()) else { return Ok(true) };
    let telemetry = object(telemetry, "options.telemetry")?;
    allow_keys(telemetry, "options.telemetry", &["enabled", "baggage"])?;
    match telemetry.iter().find(|(_, v)| !matches!(v, Value::Null | Value::Bool(_))) {
        Some((key, _)) => Err(McpError::config(format!("options.telemetry.{key} must be a boolean"))),
        None => Ok(telemetry.get("enabled") != Some(&Value::Bool(false))),
    }
}

fn parse_server(index: usize, value: &Value, auth: bool) -> Result<ServerEntry> {
    let at = format!("servers[{index}]");
    let entry = object(value, &at)?;
    let name = match entry.get("name") {
        Some(Value::String(s)) if !s.is_empty() => s.clone(),
        _ => return Err(McpError::config(format!("{at}.name must be a non-empty string"))),
    };
    check_server_name(&name, &format!("{at}.name"))?;
    let at = format!("{at} ({name:?})");
    let enabled = match entry.get("enabled") {
        None | Some(Value::Null) => true,
        Some(Value::Bool(b)) => *b,
        Some(_) => return Err(McpError::config(format!("{at}.enabled must be a boolean"))),
    };
    let kind = match entry.get("type").and_then(Value::as_str) {
        Some("stdio") => {
            if entry.contains_key("oauth") {
                return Err(McpError::config(format!(
                    "{at}.oauth: OAuth is for HTTP servers; a stdio server gets its credentials from env"
                )));
            }
            allow_keys(
                entry,
                &at,
                &[
                    "name",
                    "type",
                    "enabled",
                    "command",
                    "args",
                    "env",
                    "cwd",
                    "root",
                    "tools",
                    "stderr",
                    "propagateTraceContext",
                ],
            )?;
            let command = match entry.get("command") {
                Some(Value::String(s)) if !s.is_empty() => s.clone(),
                _ => return Err(McpError::config(format!("{at}.command must be a non-empty string"))),
            };
            let args = optional_strings(entry, "args", &at)?.unwrap_or_default();
            let env = match entry.get("env") {
                None | Some(Value::Null) => BTreeMap::new(),
                Some(env) => object(env, &format!("{at}.env"))?
                    .iter()
                    .map(|(k, v)| match v {
                        Value::String(s)
                            if !k.is_empty() && !k.contains('=') && !k.contains('\0') && !s.contains('\0') =>
                        {
                            Ok((k.clone(), s.clone()))
                        }
                        _ => Err(McpError::config(format!(
                            "{at}.env[{k:?}] must be a string variable with a valid name"
                        ))),
                    })
                    .collect::<Result<_>>()?,
            };
            let cwd = match entry.get("cwd") {
                None | Some(Value::Null) => None,
                Some(Value::String(s)) if !s.is_empty() => Some(PathBuf::from(s)),
                Some(_) => return Err(McpError::config(format!("{at}.cwd must be a non-empty string"))),
            };
            let root = match entry.get("root") {
                None | Some(Value::Null) => None,
                Some(Value::String(s)) if !s.is_empty() => Some(PathBuf::from(s)),
                Some(_) => return Err(McpError::config(format!("{at}.root must be a non-empty string"))),
            };
            use crate::transport::stdio::StderrMode;
            let stderr = match entry.get("stderr") {
                None | Some(Value::Null) => StderrMode::default(),
                Some(value) => value.as_str().and_then(StderrMode::parse).ok_or_else(|| {
                    McpError::config(format!("{at}.stderr must be one of \"{}\"", StderrMode::NAMES.join("\", \"")))
                })?,
            };
            ServerKind::Stdio { command, args, env, cwd, root, stderr }
        }
        Some(kind @ ("streamable-http" | "sse")) => {
            allow_keys(
                entry,
                &at,
                &[
                    "name",
                    "type",
                    "enabled",
                    "url",
                    "headers",
                    "oauth",
                    "tools",
                    "headersFromEnv",
                    "bearerTokenEnv",
                    "propagateTraceContext",
                ],
            )?;
            let url = match entry.get("url") {
                Some(Value::String(s)) => parse_url(s, &at)?,
                _ => return Err(McpError::config(format!("{at}.url must be a string"))),
            };
            let headers = match entry.get("headers") {
                None | Some(Value::Null) => HeaderMap::new(),
                Some(headers) => validate_headers(&at, object(headers, &format!("{at}.headers"))?)?,
            };
            if auth && headers.contains_key(reqwest::header::AUTHORIZATION) {
                return Err(McpError::config(format!(
                    "{at}.headers: \"Authorization\" is set by the auth option and cannot also be configured"
                )));
            }
            let oauth = match entry.get("oauth") {
                None | Some(Value::Null) => None,
                Some(value) => Some(crate::auth::OAuthSettings::parse(&at, value)?),
            };
            if oauth.is_some() && auth {
                return Err(McpError::config(format!(
                    "{at}.oauth: this toolset's auth option already supplies every server's token; use one or the other"
                )));
            }
            if oauth.is_some() && headers.contains_key(reqwest::header::AUTHORIZATION) {
                return Err(McpError::config(format!(
                    "{at}: a static \"Authorization\" header cannot be combined with oauth"
                )));
            }
            if kind == "sse" {
                ServerKind::Sse { url, headers, oauth }
            } else {
                ServerKind::StreamableHttp { url, headers, oauth }
            }
        }
        Some(other) => {
            return Err(McpError::config(format!("{at}.type {other:?} is unknown (stdio, streamable-http or sse)")))
        }
        None => return Err(McpError::config(format!("{at}.type must be \"stdio\", \"streamable-http\" or \"sse\""))),
    };
    let tools = match entry.get("tools") {
        None | Some(Value::Null) => ServerToolFilter::default(),
        Some(tools) => {
            let tools_at = format!("{at}.tools");
            let tools = object(tools, &tools_at)?;
            allow_keys(tools, &tools_at, &["allow", "block"])?;
            ServerToolFilter::new(
                optional_strings(tools, "allow", &tools_at)?.unwrap_or_default(),
                optional_strings(tools, "block", &tools_at)?.unwrap_or_default(),
            )
        }
    };
    let headers_from_env = parse_env_headers(entry, &at, &kind, auth)?;
    let propagate_trace_context = match entry.get("propagateTraceContext") {
        None | Some(Value::Null) => true,
        Some(Value::Bool(b)) => *b,
        Some(_) => return Err(McpError::config(format!("{at}.propagateTraceContext must be a boolean"))),
    };
    Ok(ServerEntry { name, enabled, kind, tools, headers_from_env, propagate_trace_context })
}

/// `headersFromEnv: { header: VARIABLE }` and `bearerTokenEnv: VARIABLE` of an HTTP entry: checked
/// like static headers (by name), read from the environment only when the server is connected.
fn parse_env_headers(entry: &Map<String, Value>, at: &str, kind: &ServerKind, auth: bool) -> Result<Vec<EnvHeader>> {
    let mut names = Map::new();
    if let Some(given) = entry.get("headersFromEnv").filter(|v| !v.is_null()) {
        for (header, variable) in object(given, &format!("{at}.headersFromEnv"))? {
            match variable {
                Value::String(v) if is_variable_name(v) => names.insert(header.clone(), Value::String(v.clone())),
                _ => {
                    return Err(McpError::config(format!(
                        "{at}.headersFromEnv[{header:?}] must be an environment variable name"
                    )))
                }
            };
        }
    }
    let bearer = match entry.get("bearerTokenEnv") {
        None | Some(Value::Null) => None,
        Some(Value::String(v)) if is_variable_name(v) => Some(v.clone()),
        Some(_) => return Err(McpError::config(format!("{at}.bearerTokenEnv must be an environment variable name"))),
    };
    // The names pass the static headers' checks (variable names stand in for the values).
    let mut checked = validate_headers(at, &names).map_err(|e| match e {
        McpError::ConfigInvalid(message) => {
            McpError::config(message.replacen(&format!("{at}.headers:"), &format!("{at}.headersFromEnv:"), 1))
        }
        other => other,
    })?;
    let (ServerKind::StreamableHttp { headers, oauth, .. } | ServerKind::Sse { headers, oauth, .. }) = kind else {
        return Ok(Vec::new());
    };
    if let Some(variable) = bearer {
        checked.insert(
            reqwest::header::AUTHORIZATION,
            reqwest::header::HeaderValue::from_str(&variable).expect("a variable name is a valid value"),
        );
    }
    let mut resolved = Vec::new();
    for (name, variable) in checked.iter() {
        let authorization = name == reqwest::header::AUTHORIZATION;
        if headers.contains_key(name) {
            return Err(McpError::config(format!(
                "{at}: header {:?} is configured both as a value and from the environment",
                name.as_str()
            )));
        }
        if authorization && (auth || oauth.is_some()) {
            return Err(McpError::config(format!(
                "{at}: \"Authorization\" from the environment cannot be combined with the auth option or oauth"
            )));
        }
        let variable = variable.to_str().expect("checked as a variable name").to_owned();
        let prefix = if authorization && entry.get("bearerTokenEnv").and_then(Value::as_str) == Some(variable.as_str())
        {
            "Bearer "
        } else {
            ""
        };
        resolved.push(EnvHeader { name: name.clone(), variable, prefix });
    }
    Ok(resolved)
}

/// Refuses a server name with a character that steers a terminal or reorders text rather than being
/// shown: C0 and C1 controls and DEL (ESC starts an OSC 52 clipboard write), line and paragraph
/// separators, bidirectional marks, embeddings, overrides and isolates. Names are printed to people (the
/// CLI, diagnostics) and put in prompts. The error says which character and where, never the name itself.
pub(crate) fn check_server_name(name: &str, at: &str) -> Result<()> {
    use crate::guard::server_text::{is_format, steers};
    match name.chars().enumerate().find(|&(_, c)| steers(c) || is_format(c)) {
        None => Ok(()),
        Some((i, c)) => Err(McpError::config(format!(
            "{at}: a server name has a control character (U+{:04X}, character {}); names are shown to people and must be printable",
            c as u32,
            i + 1
        ))),
    }
}

/// An environment variable name as shells accept it: letters, digits and `_`, not starting with a digit.
pub(crate) fn is_variable_name(name: &str) -> bool {
    !name.is_empty()
        && !name.starts_with(|c: char| c.is_ascii_digit())
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
}

fn parse_disclosure(root: &Map<String, Value>) -> Result<DisclosureConfig> {
    use crate::projection::disclosure::{Budget, DEFAULT_CONTEXT_WINDOW_TOKENS, DEFAULT_DISCLOSURE_BUDGET_TOKENS};
    let window = optional_positive_integer(root, "contextWindowTokens", "options")?
        .map(|n| n as usize)
        .unwrap_or(DEFAULT_CONTEXT_WINDOW_TOKENS);
    let Some(disclosure) = root.get("disclosure").filter(|v| !v.is_null()) else {
        return Ok(DisclosureConfig { budget_tokens: DEFAULT_DISCLOSURE_BUDGET_TOKENS, always_load: Vec::new() });
    };
    let disclosure = object(disclosure, "options.disclosure")?;
    if let Some(key) = disclosure.keys().find(|k| *k != "budget" && *k != "alwaysLoad") {
        return Err(McpError::config(format!("options.disclosure has an unknown key {key:?} (budget, alwaysLoad)")));
    }
    let budget = match disclosure.get("budget") {
        None | Some(Value::Null) => Budget::Tokens(DEFAULT_DISCLOSURE_BUDGET_TOKENS),
        Some(Value::String(s)) if s == "auto" => Budget::Auto { context_window_tokens: window },
        Some(v) => match v.as_u64() {
            Some(n) => Budget::Tokens(n as usize),
            None => {
                return Err(McpError::config("options.disclosure.budget must be a non-negative integer or \"auto\""))
            }
        },
    };
    let always_load = optional_strings(disclosure, "alwaysLoad", "options.disclosure")?.unwrap_or_default();
    Ok(DisclosureConfig { budget_tokens: budget.tokens(), always_load })
}

fn parse_url(text: &str, at: &str) -> Result<Url> {
    let url = Url::parse(text).map_err(|e| McpError::config(format!("{at}.url is not a valid URL: {e}")))?;
    if !matches!(url.scheme(), "http" | "https") || url.host().is_none() {
        return Err(McpError::config(format!("{at}.url must be an http:// or https:// URL with a host")));
    }
    if !url.username().is_empty() || url.password().is_some() {
        // Credentials in a URL end up in logs, and `user@host` hides the real host from a reader.
        return Err(McpError::config(format!("{at}.url must not carry credentials (user@host); use headers or auth")));
    }
    Ok(url)
}

fn object<'a>(value: &'a Value, at: &str) -> Result<&'a Map<String, Value>> {
    value.as_object().ok_or_else(|| McpError::config(format!("{at} must be an object")))
}

fn allow_keys(entry: &Map<String, Value>, at: &str, allowed: &[&str]) -> Result<()> {
    match entry.keys().find(|k| !allowed.contains(&k.as_str())) {
        Some(key) => Err(McpError::config(format!("{at} has an unknown field {key:?}"))),
        None => Ok(()),
    }
}

fn optional_strings(map: &Map<String, Value>, key: &str, at: &str) -> Result<Option<Vec<String>>> {
    match map.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Array(items)) => items
            .iter()
            .map(|v| v.as_str().map(str::to_owned))
            .collect::<Option<Vec<_>>>()
            .map(Some)
            .ok_or_else(|| McpError::config(format!("{at}.{key} must be an array of strings"))),
        Some(_) => Err(McpError::config(format!("{at}.{key} must be an array of strings"))),
    }
}

fn optional_positive_integer(map: &Map<String, Value>, key: &str, at: &str) -> Result<Option<u64>> {
    match map.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(v) => match v.as_u64() {
            Some(n) if n > 0 => Ok(Some(n)),
            _ => Err(McpError::config(format!("{at}.{key} must be a positive integer"))),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Tests write options beside `servers`, as a caller would; this nests them as the wire does.
    fn parse(flat: &str) -> Result<ToolsetConfig> {
        let mut options: Map<String, Value> = serde_json::from_str(flat).unwrap();
        let servers = options.remove("servers").unwrap_or(Value::Null);
        super::parse(&serde_json::json!({ "servers": servers, "options": options }).to_string())
    }

    #[test]
    fn parses_a_stdio_entry_with_defaults() {
        let cfg =
            parse(r#"{"servers":[{"name":"a","type":"stdio","command":"node","args":["s.js"],"env":{"K":"v"}}]}"#)
                .unwrap();
        assert_eq!(cfg.timeout_ms, DEFAULT_TIMEOUT_MS);
        assert_eq!(cfg.connect_timeout_ms, DEFAULT_CONNECT_TIMEOUT_MS);
        assert_eq!(parse(r#"{"servers":[],"timeoutMs":300}"#).unwrap().connect_timeout_ms, 300);
        assert_eq!(
            parse(r#"{"servers":[],"timeoutMs":300,"connectTimeoutMs":5000}"#).unwrap().connect_timeout_ms,
            5000
        );
        assert_eq!(cfg.max_result_bytes, DEFAULT_MAX_RESULT_BYTES);
        assert!(cfg.servers[0].enabled);
        assert_eq!(cfg.disclosure.budget_tokens, 20_000);
        let auto = parse(r#"{"servers":[],"contextWindowTokens":1000000,"disclosure":{"budget":"auto"}}"#).unwrap();
        assert_eq!(auto.disclosure.budget_tokens, 100_000);
        let ServerKind::Stdio { args, env, .. } = &cfg.servers[0].kind else { panic!("not stdio") };
        assert_eq!(args, &["s.js"]);
        assert_eq!(env["K"], "v");
    }

    #[test]
    fn names_the_entry_and_field_that_is_wrong() {
        let cases = [
            (r#"{"servers":{}}"#, "servers must be an array"),
            (
                r#"{"servers":[{"name":"a","type":"stdio","command":"x","stderr":"file"}]}"#,
                r#".stderr must be one of "pipe", "diagnostics", "inherit", "ignore""#,
            ),
            (
                r#"{"servers":[{"name":"a","type":"stdio","command":"x","stderr":"diagnostics"}]}"#,
                ".stderr: \"diagnostics\" needs options.onDiagnostic",
            ),
            (
                r#"{"servers":[{"name":"a","type":"sse","url":"http://h/","stderr":"pipe"}]}"#,
                "has an unknown field \"stderr\"",
            ),
            (r#"{"servers":[{"type":"stdio","command":"x"}]}"#, "servers[0].name"),
            (r#"{"servers":[{"name":"a","type":"ftp"}]}"#, "\"ftp\" is unknown"),
            (
                r#"{"servers":[{"name":"a\u001b]52;c;aGk=\u0007","type":"stdio","command":"x"}]}"#,
                "servers[0].name: a server name has a control character (U+001B, character 2)",
            ),
            (r#"{"servers":[{"name":"a\u009b2J","type":"stdio","command":"x"}]}"#, "(U+009B, character 2)"),
            (r#"{"servers":[{"name":"ab\u202ec","type":"stdio","command":"x"}]}"#, "(U+202E, character 3)"),
            (r#"{"servers":[{"name":"a\u007f","type":"stdio","command":"x"}]}"#, "(U+007F, character 2)"),
            // Invisible format characters (Cf): zero-width, word joiner, BOM, tag characters.
            (r#"{"servers":[{"name":"git\u200bhub","type":"stdio","command":"x"}]}"#, "(U+200B, character 4)"),
            (r#"{"servers":[{"name":"a\u2062","type":"stdio","command":"x"}]}"#, "(U+2062, character 2)"),
            (r#"{"servers":[{"name":"\ufeffa","type":"stdio","command":"x"}]}"#, "(U+FEFF, character 1)"),
            (r#"{"servers":[{"name":"a\udb40\udc41","type":"stdio","command":"x"}]}"#, "(U+E0041, character 2)"),
            (r#"{"servers":[{"name":"a","type":"stdio"}]}"#, "command must be"),
            (
                r#"{"servers":[{"name":"a","type":"stdio","command":"x","args":[1]}]}"#,
                "args must be an array of strings",
            ),
            (r#"{"servers":[{"name":"a","type":"stdio","command":"x","env":{"A":1}}]}"#, "env[\"A\"]"),
            (r#"{"servers":[{"name":"a","type":"stdio","command":"x","extra":1}]}"#, "unknown field \"extra\""),
            (r#"{"servers":[],"timeoutMs":-5}"#, "timeoutMs must be a positive integer"),
            (r#"{"servers":[],"connectTimeoutMs":0}"#, "connectTimeoutMs must be a positive integer"),
            (
                r#"{"servers":[{"name":"h","type":"streamable-http","url":"http://x/","headers":{"X-K":"v"},"headersFromEnv":{"X-K":"V"}}]}"#,
                "both as a value and from the environment",
            ),
            (
                r#"{"servers":[{"name":"h","type":"streamable-http","url":"http://x/","bearerTokenEnv":"V","oauth":true}]}"#,
                "cannot be combined with the auth option or oauth",
            ),
            (
                r#"{"servers":[{"name":"h","type":"streamable-http","url":"http://x/","bearerTokenEnv":"not a name"}]}"#,
                "bearerTokenEnv must be an environment variable name",
            ),
            (
                r#"{"servers":[{"name":"s","type":"stdio","command":"x","tools":{"allow":"a"}}]}"#,
                "tools.allow must be an array of strings",
            ),
            (
                r#"{"servers":[{"name":"s","type":"stdio","command":"x","tools":{"deny":["a"]}}]}"#,
                "tools has an unknown field \"deny\"",
            ),
            (r#"{"servers":[],"onDegraded":"explode"}"#, "onDegraded must be"),
            (r#"{"servers":[],"warnings":"off"}"#, "warnings must be a boolean"),
            (r#"{"servers":[],"logs":"stderr"}"#, "logs must be"),
            (r#"{"servers":[],"logs":"diagnostics"}"#, "needs options.onDiagnostic"),
            (
                r#"{"servers":[],"serverLogLevel":"warn","onDiagnostic":{"$mcpferry":"function"}}"#,
                "serverLogLevel must be one of \"debug\"",
            ),
            (
                r#"{"servers":[],"serverLogLevel":3,"onDiagnostic":{"$mcpferry":"function"}}"#,
                "serverLogLevel must be one of",
            ),
            (r#"{"servers":[],"serverLogLevel":"debug"}"#, "serverLogLevel needs options.onDiagnostic"),
            (r#"{"servers":[],"exposeSkills":"yes"}"#, "options.exposeSkills must be a boolean"),
            (r#"{"servers":[],"apps":1}"#, "options.apps must be a boolean"),
            (r#"{"servers":[],"exposeResources":"tools"}"#, "options.exposeResources must be a boolean"),
            (r#"{"servers":[],"tools":{"allow":["a"],"block":["b"]}}"#, "not both"),
            (r#"{"servers":[],"tools":{"deny":["a"]}}"#, "unknown key"),
            (r#"{"servers":[{"name":"h","type":"sse","url":"ftp://x/"}]}"#, "http:// or https://"),
            (r#"{"servers":[{"name":"h","type":"streamable-http","url":"not a url"}]}"#, "not a valid URL"),
            (r#"{"servers":[{"name":"h","type":"streamable-http","url":"http://x/","command":"y"}]}"#, "unknown field"),
            (
                r#"{"servers":[{"name":"h","type":"sse","url":"http://good.example@evil.test/"}]}"#,
                "must not carry credentials",
            ),
            (
                r#"{"auth":{"$mcpferry":"function"},"session":{"$mcpferry":"value"},"servers":[{"name":"h","type":"sse","url":"http://x/","headers":{"authorization":"Bearer t0ken-value"}}]}"#,
                "set by the auth option",
            ),
            (
                r#"{"auth":{"$mcpferry":"function"},"session":{"$mcpferry":"value"},"servers":[{"name":"h","type":"streamable-http","url":"http://x/","oauth":true}]}"#,
                "use one or the other",
            ),
            (
                r#"{"servers":[{"name":"h","type":"streamable-http","url":"http://x/","headers":{"Authorization":"Bearer t0ken-value"},"oauth":true}]}"#,
                "cannot be combined with oauth",
            ),
            (r#"{"servers":[{"name":"s","type":"stdio","command":"x","oauth":true}]}"#, "OAuth is for HTTP servers"),
            (
                r#"{"servers":[{"name":"h","type":"sse","url":"http://x/","oauth":{"grant":"implicit"}}]}"#,
                "grant \"implicit\" is unknown",
            ),
            (
                r#"{"servers":[{"name":"h","type":"streamable-http","url":"http://x/","headers":{"Mcp-Method":"tools/list"}}]}"#,
                "set by the MCP transport",
            ),
            (
                r#"{"servers":[{"name":"h","type":"streamable-http","url":"http://x/","headers":{"Mcp-Param-Region":"eu"}}]}"#,
                "set by the MCP transport",
            ),
            (r#"{"servers":[],"tokenStore":{"get":1}}"#, "options.tokenStore must be a token store"),
            (r#"{"servers":[],"onAuthorizationUrl":"open"}"#, "onAuthorizationUrl must be a function"),
            (r#"{"servers":[],"authorizationTimeoutMs":0}"#, "authorizationTimeoutMs must be a positive integer"),
            (r#"{"servers":[],"allowedHosts":["bad host"]}"#, "allowedHosts"),
            (r#"{"servers":[],"disclosure":{"budget":"lots"}}"#, "budget must be"),
            (r#"{"servers":[],"disclosure":{"always":["a"]}}"#, "unknown key"),
            (r#"{"servers":[],"proxy":42}"#, "options.proxy must be a string"),
            (r#"{"servers":[],"proxy":"socks5://127.0.0.1:1080"}"#, "options.proxy must be an http"),
            (r#"{"servers":[],"timeout":5}"#, "unknown option \"timeout\""),
            (r#"{"servers":[],"timeoutMs":{"$mcpferry":"bigint"}}"#, "timeoutMs must be a positive integer"),
            (r#"{"servers":[],"onDiagnostic":"log"}"#, "onDiagnostic must be a function"),
            (r#"{"servers":[],"auth":{"$mcpferry":"function"}}"#, "auth requires session"),
            (r#"{"servers":[],"auth":{"token":"t"},"session":1}"#, "auth must be a function"),
            (r#"{"servers":[],"allowedHosts":{"$mcpferry":"function"}}"#, "resolver requires session"),
            (r#"{"servers":[],"allowedHosts":"a.test"}"#, "allowedHosts must be an array"),
            (r#"{"servers":[],"policy":{"ask":{"$mcpferry":"function"}}}"#, "policy must be an object with a decide"),
            (
                r#"{"servers":[],"policy":{"decide":{"$mcpferry":"function"},"ask":true}}"#,
                "policy.ask must be a function",
            ),
            (r#"{"servers":[],"storage":{"get":1}}"#, "storage must be a connection store"),
            (r#"{"servers":[{"name":{"$mcpferry":"function"},"type":"stdio","command":"x"}]}"#, "servers[0].name"),
            (r#"{"servers":[null]}"#, "servers[0] must be an object"),
        ];
        for options in ["[]", "null", "42"] {
            let json = format!(r#"{{"servers":[],"options":{options}}}"#);
            assert!(super::parse(&json).unwrap_err().to_string().contains("options must be an object"), "{options}");
        }
        for (json, expected) in cases {
            let err = parse(json).unwrap_err();
            assert_eq!(err.code(), "mcp_config_invalid");
            assert!(err.to_string().contains(expected), "{json}: {err}");
        }
    }
}

#[cfg(test)]
mod callback_tests {
    use super::*;

    #[test]
    fn callbacks_store_and_session_are_read_from_their_markers() {
        let f = r#"{"$mcpferry":"function"}"#;
        let json = format!(
            r#"{{"servers":[],"options":{{"onDiagnostic":{f},"auth":{f},"allowedHosts":{f},"session":{{"$mcpferry":"value"}},"policy":{{"decide":{f},"ask":{f}}},"storage":{{"$mcpferry":"store"}}}}}}"#
        );
        let config = parse(&json).unwrap();
        let all = CallbackOptions {
            on_diagnostic: true,
            auth: true,
            allowed_hosts_resolver: true,
            decide: true,
            ask: true,
            elicit: false,
            authorization_url: false,
        };
        assert_eq!(config.callbacks, all);
        assert!(config.storage);
        assert_eq!(config.allowed_hosts, None);
        assert!(config.callbacks.check_given(true, true, true, true).is_ok());
        assert!(config.callbacks.check_given(true, false, true, true).is_err());
        let bare = parse(r#"{"servers":[]}"#).unwrap();
        assert_eq!(bare.callbacks, CallbackOptions::default());
        assert!(!bare.storage);
    }

    #[test]
    fn elicitation_options_declare_the_callback_and_its_modes() {
        use crate::session::elicitation::Modes;
        let f = r#"{"$mcpferry":"function"}"#;
        let modes = |extra: &str| parse(&format!(r#"{{"servers":[],"options":{{"onElicitation":{f}{extra}}}}}"#));
        let config = modes("").unwrap();
        assert!(config.callbacks.elicit);
        assert_eq!(config.elicitation_modes, Modes { form: true, url: false });
        assert!(config.callbacks.check_elicitation_given(true).is_ok());
        assert!(config.callbacks.check_elicitation_given(false).is_err());
        assert_eq!(
            modes(r#","elicitationModes":["form","url"]"#).unwrap().elicitation_modes,
            Modes { form: true, url: true }
        );
        assert_eq!(
            modes(r#","elicitationModes":["url"]"#).unwrap().elicitation_modes,
            Modes { form: false, url: true }
        );
        for bad in [
            r#","elicitationModes":[]"#,
            r#","elicitationModes":["sms"]"#,
            r#","elicitationModes":"url""#,
            r#","elicitationModes":[1]"#,
        ] {
            let error = modes(bad).unwrap_err().to_string();
            assert!(error.contains("non-empty array"), "{bad}: {error}");
        }
        let without = parse(r#"{"servers":[],"options":{"elicitationModes":["form"]}}"#).unwrap_err().to_string();
        assert!(without.contains("needs options.onElicitation"), "{without}");
        let not_a_function = parse(r#"{"servers":[],"options":{"onElicitation":true}}"#).unwrap_err().to_string();
        assert!(not_a_function.contains("onElicitation must be a function"), "{not_a_function}");
        assert!(!parse(r#"{"servers":[]}"#).unwrap().callbacks.elicit);
    }

    #[test]
    fn validation_options_default_on_and_take_booleans() {
        use crate::schema::tool::ValidationConfig;
        assert_eq!(
            parse(r#"{"servers":[]}"#).unwrap().validation,
            ValidationConfig { arguments: true, results: true, expose_server_errors: true }
        );
        let off = parse(r#"{"servers":[],"options":{"validateArguments":false,"validateResults":false,"exposeServerErrors":false}}"#).unwrap();
        assert_eq!(off.validation, ValidationConfig { arguments: false, results: false, expose_server_errors: false });
        for key in ["validateArguments", "validateResults", "exposeServerErrors"] {
            let error = parse(&format!(r#"{{"servers":[],"options":{{"{key}":"no"}}}}"#)).unwrap_err().to_string();
            assert!(error.contains(&format!("options.{key} must be a boolean")), "{error}");
        }
    }
}
