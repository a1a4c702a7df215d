//! The two eras of MCP: session-based (2025-11-25 and older: `initialize`, then a session) and modern
//! (2026-07-28: no handshake; every request carries `_meta` with the protocol version, the client's
//! capabilities and its identity; `server/discover` tells what the server is).
//!
//! A server's era is found by asking a modern question first ([`classify`]): a `DiscoverResult` (or an
//! `UnsupportedProtocolVersion` error naming a modern version we speak) means modern; an authorization
//! refusal is no evidence either way, and so is no answer (a server may still be starting); anything else
//! means a session-based server, which then gets `initialize` (over stdio, also once the server has been
//! quiet for a while: see `session/connection.rs`). The answer is remembered per server ([`recall`]), so reconnections skip the probe: a
//! session-based server gets `initialize` at once, and a modern one's discovery answer is reused while
//! it is fresh, so a connection sends no `server/discover` at all (over HTTP; see `session/connection.rs`).

use super::mcp::{Implementation, ServerCapabilities};
use crate::error::McpError;
use crate::limits::MODERN_DISCOVERY_FRESH_MS;
use parking_lot::Mutex;
use serde::Deserialize;
use serde_json::value::RawValue;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The modern revisions this client speaks, newest first.
pub const MODERN_PROTOCOL_VERSIONS: &[&str] = &["2026-07-28"];
pub const MODERN_PROTOCOL_VERSION: &str = MODERN_PROTOCOL_VERSIONS[0];
/// `UnsupportedProtocolVersionError`: `data.supported` lists what the server speaks.
pub const UNSUPPORTED_PROTOCOL_VERSION: i64 = -32022;
/// A 2026-07-28 request whose headers disagree with its body (`MCP-Protocol-Version`, `Mcp-Name`, a
/// missing or mismatched `Mcp-Param-*`): refused before it is handled.
pub const HEADER_MISMATCH: i64 = -32020;

pub const META_PROTOCOL_VERSION: &str = "io.modelcontextprotocol/protocolVersion";
pub const META_CLIENT_CAPABILITIES: &str = "io.modelcontextprotocol/clientCapabilities";
pub const META_CLIENT_INFO: &str = "io.modelcontextprotocol/clientInfo";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Era {
    /// `initialize` and a session (2025-11-25 and older).
    Legacy,
    /// Stateless, at this version.
    Modern(&'static str),
}

/// The `_meta` members every modern request carries, as the members of a JSON object (no braces).
pub fn meta_members(version: &str, capabilities: &serde_json::Map<String, serde_json::Value>) -> String {
    let meta = serde_json::json!({
        META_PROTOCOL_VERSION: version,
        META_CLIENT_CAPABILITIES: capabilities,
        META_CLIENT_INFO: { "name": super::mcp::CLIENT_NAME, "version": super::mcp::CLIENT_VERSION },
    })
    .to_string();
    meta[1..meta.len() - 1].to_owned()
}

/// `params` (an object, or none) with the `_meta` members added to its `_meta`.
pub fn with_meta(params: Option<&str>, members: &str) -> String {
    let Some(params) = params else { return format!("{{\"_meta\":{{{members}}}}}") };
    let Ok(mut object) = serde_json::from_str::<serde_json::Map<String, serde_json::Value>>(params) else {
        return params.to_owned(); // not an object: nothing this client sends
    };
    let ours: serde_json::Map<String, serde_json::Value> =
        serde_json::from_str(&format!("{{{members}}}")).expect("meta members are an object's");
    match object.get_mut("_meta") {
        Some(serde_json::Value::Object(meta)) => meta.extend(ours),
        _ => {
            object.insert("_meta".into(), serde_json::Value::Object(ours));
        }
    }
    serde_json::Value::Object(object).to_string()
}

/// `server/discover`'s result: the fields this client uses.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DiscoverResult {
    #[serde(default)]
    pub supported_versions: Vec<String>,
    #[serde(default)]
    pub capabilities: ServerCapabilities,
    /// Third-party text. Kept for the record; never placed in anything shown to a model.
    #[serde(default)]
    pub instructions: Option<String>,
    /// Where early drafts put it; the revision moved it into `_meta`.
    #[serde(default)]
    pub server_info: Option<Implementation>,
    #[serde(default, rename = "_meta")]
    pub meta: Option<DiscoverMeta>,
}

#[derive(Debug, Default, Deserialize)]
pub struct DiscoverMeta {
    #[serde(default, rename = "io.modelcontextprotocol/serverInfo")]
    pub server_info: Option<Implementation>,
}

impl DiscoverResult {
    pub fn server_info(&self) -> Implementation {
        self.meta.as_ref().and_then(|m| m.server_info.clone()).or_else(|| self.server_info.clone()).unwrap_or_default()
    }
}

/// What one answer to a modern probe says about the server.
#[derive(Debug)]
pub enum Verdict {
    Modern(&'static str, DiscoverResult),
    /// Ask again at this version (the server named it among those it supports).
    Retry(&'static str),
    /// Session-based: the server answered, and not as a modern one.
    Legacy,
    /// Not an answer (a failed exchange, an HTTP error without a JSON-RPC body, a timeout): try
    /// `initialize` this time, but this is no evidence to remember.
    Unknown,
    /// No evidence either way, and nothing to continue with (an authorization refusal, a closed toolset…).
    Fatal(McpError),
}

/// Classify the answer to `server/discover` sent at `requested`. No answer (a timeout, a failed exchange)
/// is no evidence of an era on any transport: a server that has said nothing yet may be one still
/// starting (a first `uvx` or `docker run` download, a loaded machine).
pub fn classify(outcome: Result<Box<RawValue>, McpError>, requested: &str) -> Verdict {
    match outcome {
        Ok(raw) => {
            let Ok(result) = serde_json::from_str::<DiscoverResult>(raw.get()) else { return Verdict::Legacy };
            match pick(result.supported_versions.iter().map(String::as_str), requested) {
                Some(v) if v == requested => Verdict::Modern(v, result),
                Some(v) => Verdict::Retry(v),
                None => Verdict::Legacy,
            }
        }
        Err(McpError::Rpc { code: UNSUPPORTED_PROTOCOL_VERSION, data: Some(data), .. }) => match supported(&data) {
            Some(supported) => {
                pick(supported.iter().map(String::as_str), requested).map_or(Verdict::Legacy, Verdict::Retry)
            }
            None => Verdict::Legacy,
        },
        Err(
            e @ (McpError::Auth(_)
            | McpError::Reauthorized(_)
            | McpError::HostNotAllowed(_)
            | McpError::RedirectRefused(_)
            | McpError::Closed
            | McpError::Aborted
            | McpError::ConfigInvalid(_)),
        ) => Verdict::Fatal(e),
        Err(McpError::Rpc { .. } | McpError::Protocol(_)) => Verdict::Legacy,
        Err(_) => Verdict::Unknown,
    }
}

/// The modern version we speak that an `UnsupportedProtocolVersion` (-32022) refusal of `initialize` names
/// (`data.supported`), if any: the server is one of the modern era (say, a dual-era server whose
/// connection the probe already opened in it), and the connection continues in that era.
pub fn modern_version_named(error: &McpError) -> Option<&'static str> {
    let McpError::Rpc { code: UNSUPPORTED_PROTOCOL_VERSION, data: Some(data), .. } = error else { return None };
    let supported = supported(data)?;
    MODERN_PROTOCOL_VERSIONS.iter().copied().find(|v| supported.iter().any(|s| s == v))
}

/// `data.supported` of an `UnsupportedProtocolVersion` error.
fn supported(data: &str) -> Option<Vec<String>> {
    #[derive(Deserialize)]
    struct Supported {
        supported: Vec<String>,
    }
    serde_json::from_str::<Supported>(data).ok().map(|s| s.supported)
}

/// The version to use among those a server supports: the requested one if listed, else our newest.
fn pick<'a>(supported: impl Iterator<Item = &'a str> + Clone, requested: &str) -> Option<&'static str> {
    let ours = |v: &str| MODERN_PROTOCOL_VERSIONS.iter().copied().find(|ours| *ours == v);
    supported
        .clone()
        .find(|v| *v == requested)
        .and_then(ours)
        .or_else(|| MODERN_PROTOCOL_VERSIONS.iter().copied().find(|v| supported.clone().any(|s| s == *v)))
}

/// What a modern server's `server/discover` answer says about its protocol, kept for later connections to
/// the same server instead of asking again. Only structure: the version and which of the specification's
/// capabilities it declared. Nothing the server wrote (its name and version, instructions, capability
/// names of its own) is kept, since the memory is shared by every session of the process whatever its
/// credentials: a server may word those per caller, and one tenant must not be shown what it said to
/// another. A connection opened from it has no server name or instructions.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Discovered {
    pub version: &'static str,
    /// The specification's capability names the server declared, sorted (see [`STANDARD_CAPABILITIES`]).
    pub capabilities: Vec<&'static str>,
    pub tools_list_changed: bool,
    /// It declared `resources.subscribe`.
    pub resources_subscribe: bool,
    /// It declared `resources.listChanged`, `prompts.listChanged`.
    pub resources_list_changed: bool,
    pub prompts_list_changed: bool,
    /// It declared the Skills extension.
    pub skills: bool,
}

/// The server capabilities the specification names: the only capability names kept across connections.
pub const STANDARD_CAPABILITIES: &[&str] = &[
    "completions",
    "experimental",
    "extensions",
    "logging",
    "prompts",
    "resources",
    "subscriptions",
    "tasks",
    "tools",
];

impl Discovered {
    pub fn of(version: &'static str, capabilities: &[String], tools_list_changed: bool) -> Discovered {
        let capabilities = STANDARD_CAPABILITIES
            .iter()
            .copied()
            .filter(|standard| capabilities.iter().any(|c| c == standard))
            .collect();
        Discovered {
            version,
            capabilities,
            tools_list_changed,
            resources_subscribe: false,
            resources_list_changed: false,
            prompts_list_changed: false,
            skills: false,
        }
    }
}

/// What is known of a server before a connection to it is opened.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Known {
    /// Nothing: probe with our newest modern version.
    Nothing,
    /// Its era: a session-based server gets `initialize` without a probe; a modern one is probed at
    /// this version (its answer is not kept, or no longer fresh).
    Era(Era),
    /// A modern server's discovery answer, fresh: a connection uses it and sends no `server/discover`.
    Discovered(Arc<Discovered>),
}

/// What each server was found to be, by identity, for this process: its era, and a modern server's
/// discovery answer while it is fresh (`MODERN_DISCOVERY_FRESH_MS`). Keyed by a hash of the identity (a
/// URL may carry a key in its query, headers are secrets), bounded.
static REMEMBERED: Mutex<Option<Memory>> = Mutex::new(None);
/// Servers remembered at most; past it the memory starts over (a probe each is all that costs).
const MAX_REMEMBERED_SERVERS: usize = 4_096;

/// The memory behind [`recall`] and [`remember`], with the clock passed in (so it is tested without one).
#[derive(Default)]
struct Memory {
    servers: HashMap<[u8; 32], Remembered>,
}

struct Remembered {
    known: Known,
    /// When the discovery answer was fetched.
    fetched: Instant,
    /// A connection is probing again because the answer went stale (since when): until it remembers
    /// what it found, or gives up, the others go on with the stale answer.
    reprobing: Option<Instant>,
}

impl Memory {
    fn recall(&mut self, key: &[u8; 32], now: Instant) -> (Known, Option<Instant>) {
        let Some(remembered) = self.servers.get_mut(key) else { return (Known::Nothing, None) };
        let Known::Discovered(discovered) = &remembered.known else { return (remembered.known.clone(), None) };
        let fresh_for = Duration::from_millis(MODERN_DISCOVERY_FRESH_MS);
        if now.saturating_duration_since(remembered.fetched) < fresh_for || remembered.reprobing.is_some() {
            return (remembered.known.clone(), None);
        }
        // Stale: this connection asks again (at the version it spoke); the others reuse it meanwhile.
        remembered.reprobing = Some(now);
        (Known::Era(Era::Modern(discovered.version)), Some(now))
    }

    fn remember(&mut self, key: [u8; 32], known: Known, now: Instant) {
        if known == Known::Nothing {
            self.servers.remove(&key);
            return;
        }
        if self.servers.len() >= MAX_REMEMBERED_SERVERS && !self.servers.contains_key(&key) {
            self.servers.clear();
        }
        self.servers.insert(key, Remembered { known, fetched: now, reprobing: None });
    }

    /// Forget what is remembered of a server if it is still `used`: not what another connection found since.
    fn forget(&mut self, key: &[u8; 32], used: &Known) {
        let still = match (self.servers.get(key).map(|r| &r.known), used) {
            (Some(Known::Discovered(held)), Known::Discovered(used)) => Arc::ptr_eq(held, used),
            (Some(held), used) => held == used,
            (None, _) => false,
        };
        if still {
            self.servers.remove(key);
        }
    }

    /// The connection that claimed the stale answer at `claimed` is done without remembering anything:
    /// the next one to find it stale probes.
    fn release(&mut self, key: &[u8; 32], claimed: Instant) {
        if let Some(remembered) = self.servers.get_mut(key) {
            if remembered.reprobing == Some(claimed) {
                remembered.reprobing = None;
            }
        }
    }
}

fn key(identity: &str) -> [u8; 32] {
    use sha2::Digest;
    sha2::Sha256::digest(identity.as_bytes()).into()
}

/// What a connection to this server starts from, and the claim on probing again that it holds if it
/// found a stale discovery answer (released when dropped: keep it until the outcome is remembered).
pub fn recall(identity: &str) -> (Known, Option<ReprobeClaim>) {
    let key = key(identity);
    let (known, claimed) = REMEMBERED.lock().get_or_insert_with(Memory::default).recall(&key, Instant::now());
    (known, claimed.map(|claimed| ReprobeClaim { key, claimed }))
}

/// Remember what a connection found (`Known::Nothing` forgets the server).
pub fn remember(identity: &str, known: Known) {
    REMEMBERED.lock().get_or_insert_with(Memory::default).remember(key(identity), known, Instant::now());
}

/// A connection's claim on probing a server whose discovery answer went stale.
#[derive(Debug)]
pub struct ReprobeClaim {
    key: [u8; 32],
    claimed: Instant,
}

impl Drop for ReprobeClaim {
    fn drop(&mut self) {
        if let Some(memory) = REMEMBERED.lock().as_mut() {
            memory.release(&self.key, self.claimed);
        }
    }
}

/// Whether a failure under a remembered era or discovery answer says the server is not (or no longer)
/// what was remembered: an answer a server of the other era gives to a request it does not take
/// (`-32022`, an unknown method, an invalid request or parameters, the SDKs' `-32000` for a request
/// without a session), a breach of the protocol, or an HTTP refusal of the request's shape (the caller
/// tells: `refused_request`, HTTP 400/404/405/406/415). Not a refusal of authorization (whatever its
/// body), a rate limit, a server error or a server down, an abort, a closed toolset, a host outside
/// `allowedHosts`, a timeout or a limit: those say nothing of the era, and one session's failure must
/// not cost every other session the memory.
pub fn contradicts_memory(error: &McpError, refused_request: bool) -> bool {
    match error {
        McpError::Rpc { code, .. } => matches!(*code, UNSUPPORTED_PROTOCOL_VERSION | -32601 | -32600 | -32602 | -32000),
        McpError::Protocol(_) => true,
        McpError::Transport(_) => refused_request,
        _ => false,
    }
}

/// Forget a server if what is remembered of it is still `used` (not what another connection found since).
pub fn forget(identity: &str, used: &Known) {
    REMEMBERED.lock().get_or_insert_with(Memory::default).forget(&key(identity), used);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn raw(text: &str) -> Box<RawValue> {
        RawValue::from_string(text.to_owned()).unwrap()
    }

    #[test]
    fn meta_is_added_to_any_params() {
        let members = meta_members("2026-07-28", &serde_json::Map::new());
        let bare: serde_json::Value = serde_json::from_str(&with_meta(None, &members)).unwrap();
        assert_eq!(bare["_meta"][META_PROTOCOL_VERSION], "2026-07-28");
        assert_eq!(bare["_meta"][META_CLIENT_CAPABILITIES], serde_json::json!({}));
        assert_eq!(bare["_meta"][META_CLIENT_INFO]["name"], "mcpferry");
        let merged: serde_json::Value =
            serde_json::from_str(&with_meta(Some(r#"{"cursor":"c","_meta":{"progressToken":3}}"#), &members)).unwrap();
        assert_eq!(merged["cursor"], "c");
        assert_eq!(merged["_meta"]["progressToken"], 3);
        assert_eq!(merged["_meta"][META_PROTOCOL_VERSION], "2026-07-28");
    }

    #[test]
    fn only_a_modern_answer_is_modern_and_auth_is_no_evidence() {
        let discover = r#"{"supportedVersions":["2026-07-28","2025-11-25"],"capabilities":{"tools":{"listChanged":true}},"_meta":{"io.modelcontextprotocol/serverInfo":{"name":"s","version":"1"}}}"#;
        match classify(Ok(raw(discover)), "2026-07-28") {
            Verdict::Modern(v, result) => {
                assert_eq!(v, "2026-07-28");
                assert_eq!(result.server_info().name, "s");
            }
            other => panic!("{other:?}"),
        }
        assert!(matches!(classify(Ok(raw(r#"{"supportedVersions":["2025-11-25"]}"#)), "2026-07-28"), Verdict::Legacy));
        assert!(matches!(classify(Ok(raw("{}")), "2026-07-28"), Verdict::Legacy));
        let unsupported = |data: &str| McpError::Rpc {
            code: UNSUPPORTED_PROTOCOL_VERSION,
            message: "no".into(),
            data: Some(data.into()),
        };
        assert!(matches!(
            classify(Err(unsupported(r#"{"supported":["2026-07-28"]}"#)), "2026-07-28"),
            Verdict::Retry("2026-07-28")
        ));
        assert!(matches!(classify(Err(unsupported(r#"{"supported":["2025-11-25"]}"#)), "2026-07-28"), Verdict::Legacy));
        assert!(matches!(
            classify(Err(McpError::Rpc { code: -32601, message: "?".into(), data: None }), "2026-07-28"),
            Verdict::Legacy
        ));
        assert!(matches!(classify(Err(McpError::Transport("HTTP 503".into())), "2026-07-28"), Verdict::Unknown));
        // Silence is no evidence, over stdio as over HTTP: the server may still be starting.
        assert!(matches!(classify(Err(McpError::Timeout { after_ms: 1 }), "2026-07-28"), Verdict::Unknown));
        assert!(matches!(classify(Err(McpError::Auth("login".into())), "2026-07-28"), Verdict::Fatal(_)));
    }

    #[test]
    fn a_refused_initialize_names_a_modern_version_only_in_an_unsupported_version_error_we_can_read() {
        let unsupported = |data: Option<&str>| McpError::Rpc {
            code: UNSUPPORTED_PROTOCOL_VERSION,
            message: "no".into(),
            data: data.map(Into::into),
        };
        // The Python SDK 2.x's refusal of initialize on a connection its probe opened in the modern era.
        assert_eq!(
            modern_version_named(&unsupported(Some(r#"{"supported":["2026-07-28"],"requested":"2025-11-25"}"#))),
            Some("2026-07-28")
        );
        assert_eq!(
            modern_version_named(&unsupported(Some(r#"{"supported":["2099-01-01","2026-07-28"]}"#))),
            Some("2026-07-28")
        );
        assert_eq!(modern_version_named(&unsupported(Some(r#"{"supported":["2025-11-25"]}"#))), None);
        assert_eq!(modern_version_named(&unsupported(Some("[]"))), None);
        assert_eq!(modern_version_named(&unsupported(None)), None);
        let other = McpError::Rpc {
            code: -32601,
            message: "2026-07-28".into(),
            data: Some(r#"{"supported":["2026-07-28"]}"#.into()),
        };
        assert_eq!(modern_version_named(&other), None);
    }

    fn discovered(capability: &str) -> Known {
        Known::Discovered(Arc::new(Discovered::of(
            MODERN_PROTOCOL_VERSION,
            &["tools".to_owned(), capability.to_owned()],
            true,
        )))
    }

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn a_discovery_answer_is_reused_while_fresh_then_one_connection_asks_again() {
        let (mut memory, start, server) = (Memory::default(), Instant::now(), key("https://a.example/mcp"));
        assert_eq!(memory.recall(&server, start), (Known::Nothing, None));
        memory.remember(server, discovered("a"), start);
        let fresh_for = ms(MODERN_DISCOVERY_FRESH_MS);
        assert_eq!(memory.recall(&server, start + fresh_for - ms(1)), (discovered("a"), None));

        // Stale: the first connection to see it probes (at the version it spoke) and holds the claim…
        let stale = start + fresh_for;
        let (known, claim) = memory.recall(&server, stale);
        assert_eq!(known, Known::Era(Era::Modern(MODERN_PROTOCOL_VERSION)));
        let claim = claim.expect("the first to find it stale claims the probe");
        // …while the others go on with the stale answer.
        assert_eq!(memory.recall(&server, stale + ms(5)), (discovered("a"), None));
        // The prober gave up without remembering anything: the next one probes.
        memory.release(&server, claim);
        let (known, claim) = memory.recall(&server, stale + ms(10));
        assert_eq!(known, Known::Era(Era::Modern(MODERN_PROTOCOL_VERSION)));
        // Its answer refreshes the memory, fresh from then on.
        memory.remember(server, discovered("a2"), stale + ms(20));
        memory.release(&server, claim.unwrap());
        assert_eq!(memory.recall(&server, stale + ms(20) + fresh_for - ms(1)), (discovered("a2"), None));
    }

    #[test]
    fn forgetting_and_eras() {
        let (mut memory, now) = (Memory::default(), Instant::now());
        let (modern, legacy) = (key("modern"), key("legacy"));
        memory.remember(modern, discovered("logging"), now);
        memory.remember(modern, Known::Nothing, now);
        assert_eq!(memory.recall(&modern, now), (Known::Nothing, None));
        // A session-based server's era does not expire: it is what skips the probe.
        memory.remember(legacy, Known::Era(Era::Legacy), now);
        assert_eq!(memory.recall(&legacy, now + ms(365 * 24 * 3600 * 1000)), (Known::Era(Era::Legacy), None));
    }

    #[test]
    fn a_connection_forgets_only_what_it_used_not_what_another_found_since() {
        let (mut memory, now, server) = (Memory::default(), Instant::now(), key("s"));
        let used = discovered("logging");
        memory.remember(server, used.clone(), now);
        let newer = discovered("prompts");
        memory.remember(server, newer.clone(), now + ms(1));
        memory.forget(&server, &used);
        assert_eq!(memory.recall(&server, now + ms(2)).0, newer, "an answer found since is kept");
        memory.forget(&server, &newer);
        assert_eq!(memory.recall(&server, now + ms(2)).0, Known::Nothing);
        memory.remember(server, Known::Era(Era::Legacy), now);
        memory.forget(&server, &Known::Era(Era::Modern(MODERN_PROTOCOL_VERSION)));
        assert_eq!(memory.recall(&server, now).0, Known::Era(Era::Legacy));
        memory.forget(&server, &Known::Era(Era::Legacy));
        assert_eq!(memory.recall(&server, now).0, Known::Nothing);
    }

    #[test]
    fn only_the_specifications_capability_names_are_kept_nothing_the_server_wrote() {
        let names: Vec<String> = ["tools", "sk-alice-0123456789abcdef", "logging", "x".repeat(100_000).as_str()]
            .iter()
            .map(|s| s.to_string())
            .collect();
        let kept = Discovered::of(MODERN_PROTOCOL_VERSION, &names, false);
        assert_eq!(kept.capabilities, vec!["logging", "tools"]);
    }

    #[test]
    fn the_memory_is_bounded() {
        let (mut memory, now) = (Memory::default(), Instant::now());
        for n in 0..MAX_REMEMBERED_SERVERS {
            memory.remember(key(&n.to_string()), discovered("s"), now);
        }
        assert_eq!(memory.servers.len(), MAX_REMEMBERED_SERVERS);
        // Full: remembering a server already there replaces its entry…
        memory.remember(key("0"), discovered("again"), now);
        assert_eq!(memory.servers.len(), MAX_REMEMBERED_SERVERS);
        assert_eq!(memory.recall(&key("0"), now), (discovered("again"), None));
        // …and one more starts over.
        memory.remember(key("one more"), discovered("s"), now);
        assert_eq!(memory.servers.len(), 1);
        assert_eq!(memory.recall(&key("1"), now), (Known::Nothing, None));
    }

    #[test]
    fn only_what_a_probe_would_take_for_another_server_contradicts_a_reused_answer() {
        let unsupported = McpError::Rpc {
            code: UNSUPPORTED_PROTOCOL_VERSION,
            message: "no".into(),
            data: Some(r#"{"supported":["2025-11-25"]}"#.into()),
        };
        assert!(contradicts_memory(&unsupported, false));
        assert!(contradicts_memory(
            &McpError::Rpc { code: -32000, message: "Mcp-Session-Id header is required".into(), data: None },
            false
        ));
        assert!(contradicts_memory(&McpError::Protocol("no JSON-RPC response".into()), false));
        assert!(contradicts_memory(&McpError::Transport("HTTP 400 Bad Request".into()), true));
        // A refusal of authorization with a JSON-RPC body, a server down, a rate limit: no evidence.
        assert!(!contradicts_memory(
            &McpError::Rpc { code: -32001, message: "Unauthorized".into(), data: None },
            false
        ));
        assert!(!contradicts_memory(&McpError::Transport("connection refused".into()), false));
        assert!(!contradicts_memory(&McpError::Transport("HTTP 429 Too Many Requests".into()), false));
        for outcome in [
            McpError::Auth("login".into()),
            McpError::Reauthorized("new token".into()),
            McpError::Aborted,
            McpError::Closed,
            McpError::HostNotAllowed("x".into()),
            McpError::RedirectRefused("x".into()),
            McpError::Timeout { after_ms: 1 },
            McpError::ResultTooLarge { limit_bytes: 1 },
        ] {
            assert!(!contradicts_memory(&outcome, false), "{outcome:?}");
        }
    }
}
