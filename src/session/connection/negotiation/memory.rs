//! The process-wide memory of what each server was found to be (its era, and a modern server's fresh
//! discovery answer), so reconnections skip the probe: a session-based server gets `initialize` at once,
//! and a modern one's answer is reused while it is fresh, so a connection sends no `server/discover` at
//! all (over HTTP). Owned here, reached only through [`EraMemory`] (the supervisor's opening loop) and
//! the connection's [`SessionInfo::known`]; bounded by `MAX_REMEMBERED_SERVERS`.

use crate::error::McpError;
use crate::limits::{MAX_REMEMBERED_SERVERS, MODERN_DISCOVERY_FRESH_MS};
use crate::protocol::era::{Era, UNSUPPORTED_PROTOCOL_VERSION};
use crate::session::connection::{Connection, SessionInfo};
use parking_lot::Mutex;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// What a modern server's `server/discover` answer says about its protocol, kept for later connections to
/// the same server instead of asking again. Only structure: the version and which of the specification's
/// capabilities it declared. Nothing the server wrote (its name and version, instructions, capability
/// names of its own) is kept, since the memory is shared by every session of the process whatever its
/// credentials: a server may word those per caller, and one tenant must not be shown what it said to
/// another. A connection opened from it has no server name or instructions.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DiscoveryAnswer {
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

impl DiscoveryAnswer {
    pub fn of(version: &'static str, capabilities: &[String], tools_list_changed: bool) -> DiscoveryAnswer {
        let capabilities = STANDARD_CAPABILITIES
            .iter()
            .copied()
            .filter(|standard| capabilities.iter().any(|c| c == standard))
            .collect();
        DiscoveryAnswer {
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
    Discovered(Arc<DiscoveryAnswer>),
}

/// What each server was found to be, by identity, for this process: its era, and a modern server's
/// discovery answer while it is fresh (`MODERN_DISCOVERY_FRESH_MS`). Keyed by a hash of the identity (a
/// URL may carry a key in its query, headers are secrets), bounded.
static REMEMBERED: Mutex<Option<Memory>> = Mutex::new(None);

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

/// One opening's use of the memory (the supervisor's loop): what it starts from, what it found, and
/// whether a reused answer that did not hold sends it back to probe. Holds the claim on probing a stale
/// answer again, if it took it, until it is dropped.
pub struct EraMemory<'a> {
    identity: &'a str,
    known: Known,
    _reprobe_claim: Option<ReprobeClaim>,
}

impl<'a> EraMemory<'a> {
    /// What a connection to the server `identity` starts from. `reuse_discovery` false: a fresh discovery
    /// answer only tells the era (a stored catalogue will replace the listing, so no first request would
    /// check a reused answer; a single server's client shows the server's own name and instructions,
    /// which are not reused).
    pub fn recall(identity: &'a str, reuse_discovery: impl FnOnce() -> bool) -> EraMemory<'a> {
        let (mut known, claim) = recall(identity);
        if let Known::Discovered(discovered) = &known {
            if !reuse_discovery() {
                known = Known::Era(Era::Modern(discovered.version));
            }
        }
        EraMemory { identity, known, _reprobe_claim: claim }
    }

    pub fn known(&self) -> &Known {
        &self.known
    }

    /// A connection opened: what it found is remembered. A reused answer keeps the time it was fetched:
    /// only asking again refreshes it.
    pub fn opened(&self, session: &SessionInfo) {
        if !session.discovery_reused {
            remember(self.identity, session.known());
        }
    }

    /// A connection failed to open. A server that changed its era fails under the old assumption: it is
    /// probed afresh next time. Other failures (authorization, a server down, limits) say nothing of its
    /// era, and the memory is every session's: it is left as it is.
    pub fn open_failed(&self, error: &McpError) {
        if contradicts_memory(error, crate::transport::http::refused_request(error)) {
            forget(self.identity, &self.known);
        }
    }

    /// The first request on a connection opened from a reused discovery answer failed: if the failure
    /// says the server is not (or no longer) what was remembered, the next opening asks it, once (true).
    /// What it answers then replaces the memory; a failure leaves it to the sessions it still serves.
    pub fn probe_again_after(&mut self, connection: &Connection, error: &McpError) -> bool {
        let contradicted = connection.session.discovery_reused
            && !connection.was_answered()
            && contradicts_memory(error, crate::transport::http::refused_request(error));
        if contradicted {
            self.known = Known::Nothing;
        }
        contradicted
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::era::MODERN_PROTOCOL_VERSION;

    fn discovered(capability: &str) -> Known {
        Known::Discovered(Arc::new(DiscoveryAnswer::of(
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
        let kept = DiscoveryAnswer::of(MODERN_PROTOCOL_VERSION, &names, false);
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
