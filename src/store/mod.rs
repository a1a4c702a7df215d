//! Connection stores: the persisted seed of a toolset, so a process that wakes up can rebuild its tool
//! map without asking every server for its listing first.
//!
//! A row holds the public catalogue (what the model is shown anyway) and the drift baseline, nothing
//! else: no headers, no environment, no command line, no credential. The config is supplied again on
//! wake; the store only remembers which servers were connected and what they published.
//!
//! The two halves of a row age differently. `tools` is a cache, rewritten by every `save`. The
//! baseline (`tool_fingerprints`) is the trust anchor for drift detection: recorded once by the first
//! writer and never replaced by `save`. Only an explicit `clear_baseline` (see [`retrust`]) or
//! `remove` lets a new baseline in.

pub mod journal;
pub mod journal_postgres;
pub mod journal_sqlite;
pub mod memory;
pub mod postgres;
pub mod sqlite;

pub use memory::MemoryStore;
pub use postgres::{PostgresOptions, PostgresStore, PostgresTls};
pub use sqlite::{LazySqliteStore, SqliteStore};

use crate::error::{McpError, Result};
use crate::protocol::mcp::{CacheScope, Tool};
use futures_util::future::BoxFuture;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use sha2::{Digest, Sha256};
use std::collections::{BTreeMap, BTreeSet};

/// Tool name → fingerprint (see [`fingerprint`]).
pub type Fingerprints = BTreeMap<String, String>;

/// Hex digits of SHA-256 kept in a [`server_id`]: 48 bits, ample for the servers of one store.
pub const SERVER_ID_HASH_HEX_CHARS: usize = 12;

/// One persisted server. These fields are the whole of what any store writes; adding one is a
/// decision about what reaches durable storage, so keep secrets (headers, env, tokens) out of it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StoredServer {
    /// See [`server_id`].
    pub id: String,
    /// The server's configured name.
    pub name: String,
    /// `"stdio"`, `"streamable-http"` or `"sse"`.
    #[serde(rename = "type")]
    pub kind: String,
    /// The endpoint of an HTTP server; `None` for stdio.
    pub url: Option<String>,
    /// The catalogue as last listed: a cache, refreshed by every `save`.
    pub tools: Vec<Tool>,
    /// The drift baseline: recorded once, never replaced by `save`.
    pub tool_fingerprints: Option<Fingerprints>,
    /// When `tools` was listed, in ms since the Unix epoch. `None` in rows written before caching hints.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub listed_at: Option<i64>,
    /// How long after `listed_at` the server said `tools` stays fresh (2026-07-28 `ttlMs`, the earliest
    /// of its pages); `None`: no positive TTL, stale at once.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttl_ms: Option<u64>,
    /// Who may reuse `tools`: `private` means only the authorization context that listed it, so it is
    /// never projected by a rebuild (which may run for another user). `None`: no hint (older servers).
    #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "scope_from_json")]
    pub cache_scope: Option<CacheScope>,
}

/// `cacheScope` as a store written in JavaScript hands it back: read as the SQL stores read theirs.
fn scope_from_json<'de, D: serde::Deserializer<'de>>(
    deserializer: D,
) -> std::result::Result<Option<CacheScope>, D::Error> {
    let text: Option<String> = Option::deserialize(deserializer)?;
    Ok(scope_from_text(text.as_deref()))
}

impl StoredServer {
    /// The row's TTL as far as it can be trusted at `now_ms`. Anyone who can write the store (another
    /// process, a JavaScript store, a co-tenant of the database) wrote it, so it gets the cap a live
    /// listing gets, and a listing time in the future (beyond clock skew) counts as no TTL: a forged row
    /// must not keep a catalogue "fresh", unlisted, for years.
    pub fn trusted_ttl_ms(&self, now_ms: i64) -> Option<u64> {
        let listed_at = self.listed_at?;
        if listed_at > now_ms.saturating_add(crate::limits::MAX_STORE_CLOCK_SKEW_MS) {
            return None;
        }
        self.ttl_ms.map(|ttl| ttl.min(crate::limits::MAX_CATALOGUE_TTL_MS))
    }

    /// The row's caching hints as a listing's, with the TTL trusted as far as it can be at `now_ms`;
    /// `None` for a row written before hints were stored.
    pub fn cache_hints(&self, now_ms: i64) -> Option<crate::protocol::mcp::CacheHints> {
        let listed_at_ms = self.listed_at?;
        Some(crate::protocol::mcp::CacheHints {
            listed_at_ms,
            ttl_ms: self.trusted_ttl_ms(now_ms),
            scope: self.cache_scope,
        })
    }

    /// The catalogue is still fresh at `now_ms` by its server's TTL.
    pub fn is_fresh_at(&self, now_ms: i64) -> bool {
        self.cache_hints(now_ms).is_some_and(|hints| hints.is_fresh_at(now_ms))
    }
}

/// A stored `cache_scope` column: what `CacheScope` serializes to.
pub(crate) fn scope_text(scope: Option<CacheScope>) -> Option<&'static str> {
    scope.map(|scope| match scope {
        CacheScope::Public => "public",
        CacheScope::Private => "private",
    })
}

/// A stored `cache_scope` column read back. A value this build doesn't know counts as `private`:
/// a catalogue of unknown reach is not shared.
pub(crate) fn scope_from_text(text: Option<&str>) -> Option<CacheScope> {
    text.map(|text| if text == "public" { CacheScope::Public } else { CacheScope::Private })
}

/// Where connected servers are remembered. Every method is atomic on its own; `claim_baseline` is
/// the one that must also be atomic across processes sharing the same storage.
pub trait ConnectionStore: Send + Sync {
    /// The row with this id, if any.
    fn get(&self, id: &str) -> BoxFuture<'_, Result<Option<StoredServer>>>;

    /// Every row, ordered by id.
    fn list(&self) -> BoxFuture<'_, Result<Vec<StoredServer>>>;

    /// Inserts the row or updates its catalogue fields (name, type, url, tools). An existing baseline
    /// is kept whatever `row.tool_fingerprints` says; with none recorded yet, the row's (if any) is.
    fn save(&self, row: StoredServer) -> BoxFuture<'_, Result<()>>;

    /// Forgets the row entirely, baseline included. Unknown ids are not an error.
    fn remove(&self, id: &str) -> BoxFuture<'_, Result<()>>;

    /// First writer wins: returns the recorded baseline unchanged if there is one, otherwise records
    /// `fingerprints` and returns them. The row must exist (save it first); an unknown id is an error
    /// rather than a baseline silently not recorded.
    fn claim_baseline(&self, id: &str, fingerprints: Fingerprints) -> BoxFuture<'_, Result<Fingerprints>>;

    /// Drops the baseline so the next claim records a fresh one. Unknown ids are not an error.
    fn clear_baseline(&self, id: &str) -> BoxFuture<'_, Result<()>>;
}

/// A stable row id: `"<name>:<12 hex digits of SHA-256(kind NUL identity)>"`.
///
/// `identity` is whatever makes the endpoint what it is (the URL of an HTTP server, the command and
/// arguments of a stdio one). Hashing it keeps the id short and keeps it out of sight in ids that
/// get logged; including `kind` means the same string reached over another transport is another row.
/// The name stays readable at the front so a store can be inspected by hand.
pub fn server_id(name: &str, kind: &str, identity: &str) -> String {
    let mut hashed = Vec::with_capacity(kind.len() + 1 + identity.len());
    hashed.extend_from_slice(kind.as_bytes());
    hashed.push(0);
    hashed.extend_from_slice(identity.as_bytes());
    let mut hex = sha256_hex(&hashed);
    hex.truncate(SERVER_ID_HASH_HEX_CHARS);
    format!("{name}:{hex}")
}

/// The hex SHA-256 of the canonical JSON of `{description, inputSchema, title}` (absent → `null`).
///
/// Those are the fields that change what a model would do with the tool; annotations and output
/// schemas are left out. Canonical means object keys sorted (by UTF-8 bytes) at every depth and no
/// whitespace, so the same tool fingerprints the same whatever order its server wrote the keys in.
///
/// An MCP Apps tool only its app may call adds `"modelVisible": false`: offering it to the model later
/// is a change to be re-trusted, while every other tool's fingerprint stays what it always was.
pub fn fingerprint(tool: &Tool) -> String {
    let mut fingerprinted = Map::new();
    fingerprinted.insert("description".to_owned(), tool.description.clone().map_or(Value::Null, Value::String));
    fingerprinted.insert("inputSchema".to_owned(), tool.input_schema.tree());
    fingerprinted.insert("title".to_owned(), tool.title.clone().map_or(Value::Null, Value::String));
    if !tool.offered_to_model() {
        fingerprinted.insert("modelVisible".to_owned(), Value::Bool(false));
    }
    sha256_hex(canonical_json(&Value::Object(fingerprinted)).as_bytes())
}

/// The fingerprint of every tool, by name. Discovery already refuses duplicate names; should one slip
/// through, the last listed wins, as it would in the tool map.
pub fn fingerprints(tools: &[Tool]) -> Fingerprints {
    tools.iter().map(|tool| (tool.name.clone(), fingerprint(tool))).collect()
}

/// How a listing differs from its baseline. Each list is sorted by tool name.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DriftReport {
    /// In both, with a different fingerprint: to be quarantined.
    pub changed: Vec<String>,
    /// Listed now but not in the baseline: to be withheld.
    pub added: Vec<String>,
    /// In the baseline but no longer listed: only reported.
    pub removed: Vec<String>,
}

impl DriftReport {
    pub fn is_empty(&self) -> bool {
        self.changed.is_empty() && self.added.is_empty() && self.removed.is_empty()
    }
}

/// Compares the current listing with a recorded baseline, tool by tool.
pub fn compare(baseline: &Fingerprints, current: &[Tool]) -> DriftReport {
    let current = fingerprints(current);
    let mut report = DriftReport::default();
    // Both maps iterate in name order, so the lists come out sorted.
    for (name, now) in &current {
        match baseline.get(name) {
            Some(then) if then != now => report.changed.push(name.clone()),
            Some(_) => {}
            None => report.added.push(name.clone()),
        }
    }
    report.removed = baseline.keys().filter(|name| !current.contains_key(*name)).cloned().collect();
    report
}

/// Re-trusts a server after a legitimate change: clears the baseline of every row named
/// `server_name` (one name can have several rows, e.g. after its URL moved), so the next connection
/// records the listing it sees as the new baseline. Returns how many rows matched; 0 means the store
/// knows no server by that name.
pub async fn retrust(store: &dyn ConnectionStore, server_name: &str) -> Result<usize> {
    let matching: BTreeSet<String> =
        store.list().await?.into_iter().filter(|row| row.name == server_name).map(|row| row.id).collect();
    for id in &matching {
        store.clear_baseline(id).await?;
    }
    Ok(matching.len())
}

/// Every storage failure: `mcp_storage_error`, with the `store: ` prefix that says where it came from.
pub(crate) fn store_error(message: impl std::fmt::Display) -> McpError {
    McpError::Storage(format!("store: {message}"))
}

pub(crate) fn unknown_row_error(id: &str) -> McpError {
    store_error(format!("no server with id {id:?} is stored; save the row before claiming its baseline"))
}

/// Milliseconds since the Unix epoch, as rows record time. A clock before 1970 reads 0.
pub fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

fn sha256_hex(bytes: &[u8]) -> String {
    Sha256::digest(bytes).iter().map(|b| format!("{b:02x}")).collect()
}

/// Compact JSON with object keys sorted at every depth. The map is rebuilt in sorted order rather
/// than relying on `serde_json::Map` being a BTreeMap, which a `preserve_order` feature turned on
/// anywhere in the build would silently change.
fn canonical_json(value: &Value) -> String {
    fn sorted(value: &Value) -> Value {
        match value {
            Value::Object(map) => {
                let mut entries: Vec<(&String, &Value)> = map.iter().collect();
                entries.sort_by(|a, b| a.0.cmp(b.0));
                Value::Object(entries.into_iter().map(|(k, v)| (k.clone(), sorted(v))).collect())
            }
            Value::Array(items) => Value::Array(items.iter().map(sorted).collect()),
            other => other.clone(),
        }
    }
    sorted(value).to_string()
}

/// Behaviour every [`ConnectionStore`] must have, run against each implementation by its own tests.
/// Public (hidden) so tests/ can run it against the stores that need a database server.
#[doc(hidden)]
pub mod contract {
    use super::*;
    use serde_json::json;

    pub fn tool(name: &str, description: &str) -> Tool {
        Tool {
            name: name.to_owned(),
            title: None,
            description: Some(description.to_owned()),
            input_schema: json!({ "type": "object", "properties": { "q": { "type": "string" } } }).into(),
            output_schema: None,
            annotations: None,
            ui: None,
        }
    }

    pub fn row(id: &str, name: &str, tools: Vec<Tool>, baseline: Option<Fingerprints>) -> StoredServer {
        StoredServer {
            id: id.to_owned(),
            name: name.to_owned(),
            kind: "streamable-http".to_owned(),
            url: Some("https://mcp.example.com/mcp".to_owned()),
            tools,
            tool_fingerprints: baseline,
            listed_at: None,
            ttl_ms: None,
            cache_scope: None,
        }
    }

    fn baseline(pairs: &[(&str, &str)]) -> Fingerprints {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    pub async fn round_trip(store: &dyn ConnectionStore) {
        assert_eq!(store.get("docs:1").await.unwrap(), None);
        assert!(store.list().await.unwrap().is_empty());

        let stdio = StoredServer {
            id: "files:2".to_owned(),
            name: "files".to_owned(),
            kind: "stdio".to_owned(),
            url: None,
            tools: vec![],
            tool_fingerprints: None,
            listed_at: Some(1_764_000_000_000),
            ttl_ms: Some(60_000),
            cache_scope: Some(CacheScope::Private),
        };
        let mut with_everything = tool("search", "Searches");
        with_everything.title = Some("Search".to_owned());
        with_everything.output_schema = Some(json!({ "type": "object" }).into());
        with_everything.annotations = Some(json!({ "readOnlyHint": true }).into());
        let mut http =
            row("docs:1", "docs", vec![with_everything, tool("fetch", "Fetches")], Some(baseline(&[("search", "aa")])));
        http.listed_at = Some(1_764_000_000_123);
        http.ttl_ms = Some(300_000);
        http.cache_scope = Some(CacheScope::Public);

        store.save(http.clone()).await.unwrap();
        store.save(stdio.clone()).await.unwrap();
        assert_eq!(store.get("docs:1").await.unwrap(), Some(http.clone()));
        assert_eq!(store.get("files:2").await.unwrap(), Some(stdio.clone()));
        assert_eq!(store.list().await.unwrap(), vec![http, stdio]);
    }

    pub async fn save_refreshes_catalogue(store: &dyn ConnectionStore) {
        let mut hinted = row("docs:1", "docs", vec![tool("a", "old")], None);
        (hinted.listed_at, hinted.ttl_ms, hinted.cache_scope) = (Some(5), Some(10), Some(CacheScope::Public));
        store.save(hinted.clone()).await.unwrap();
        assert_eq!(store.get("docs:1").await.unwrap(), Some(hinted));
        // The hints belong to the catalogue they came with: a listing without them clears them.
        let mut moved = row("docs:1", "docs-renamed", vec![tool("a", "new"), tool("b", "added")], None);
        moved.url = Some("https://elsewhere.example.com/mcp".to_owned());
        store.save(moved.clone()).await.unwrap();
        assert_eq!(store.get("docs:1").await.unwrap(), Some(moved));
        assert_eq!(store.list().await.unwrap().len(), 1);
    }

    pub async fn save_cannot_replace_a_baseline(store: &dyn ConnectionStore) {
        let recorded = baseline(&[("a", "111")]);
        store.save(row("docs:1", "docs", vec![tool("a", "x")], Some(recorded.clone()))).await.unwrap();

        // Neither a different baseline nor none at all replaces the recorded one...
        store.save(row("docs:1", "docs", vec![tool("a", "y")], Some(baseline(&[("a", "999")])))).await.unwrap();
        let after = store.get("docs:1").await.unwrap().unwrap();
        assert_eq!(after.tool_fingerprints, Some(recorded.clone()));
        // ...while the catalogue is refreshed.
        assert_eq!(after.tools, vec![tool("a", "y")]);

        store.save(row("docs:1", "docs", vec![], None)).await.unwrap();
        assert_eq!(store.get("docs:1").await.unwrap().unwrap().tool_fingerprints, Some(recorded));
    }

    pub async fn save_records_a_first_baseline(store: &dyn ConnectionStore) {
        store.save(row("docs:1", "docs", vec![], None)).await.unwrap();
        let first = baseline(&[("a", "111")]);
        store.save(row("docs:1", "docs", vec![], Some(first.clone()))).await.unwrap();
        assert_eq!(store.get("docs:1").await.unwrap().unwrap().tool_fingerprints, Some(first));
    }

    pub async fn an_empty_baseline_is_a_baseline(store: &dyn ConnectionStore) {
        // A server that published no tools has still been seen: what it adds later is drift.
        store.save(row("docs:1", "docs", vec![], None)).await.unwrap();
        assert_eq!(store.claim_baseline("docs:1", Fingerprints::new()).await.unwrap(), Fingerprints::new());
        let later = baseline(&[("a", "111")]);
        assert_eq!(store.claim_baseline("docs:1", later).await.unwrap(), Fingerprints::new());
    }

    pub async fn claim_baseline_first_writer_wins(store: &dyn ConnectionStore) {
        store.save(row("docs:1", "docs", vec![], None)).await.unwrap();
        let first = baseline(&[("a", "111")]);
        let second = baseline(&[("a", "222"), ("b", "333")]);
        assert_eq!(store.claim_baseline("docs:1", first.clone()).await.unwrap(), first);
        assert_eq!(store.claim_baseline("docs:1", second).await.unwrap(), first);
        assert_eq!(store.get("docs:1").await.unwrap().unwrap().tool_fingerprints, Some(first));
    }

    pub async fn claim_baseline_needs_a_row(store: &dyn ConnectionStore) {
        let error = store.claim_baseline("ghost:1", baseline(&[("a", "1")])).await.unwrap_err();
        assert!(error.to_string().starts_with("store: "), "{error}");
        assert!(error.to_string().contains("ghost:1"), "{error}");
        assert_eq!(store.get("ghost:1").await.unwrap(), None);
    }

    pub async fn clear_baseline_lets_a_new_one_in(store: &dyn ConnectionStore) {
        let tools = vec![tool("a", "x")];
        store.save(row("docs:1", "docs", tools.clone(), Some(baseline(&[("a", "111")])))).await.unwrap();
        store.clear_baseline("docs:1").await.unwrap();
        let cleared = store.get("docs:1").await.unwrap().unwrap();
        assert_eq!(cleared.tool_fingerprints, None);
        assert_eq!(cleared.tools, tools, "clearing the baseline leaves the catalogue alone");

        let fresh = baseline(&[("a", "222")]);
        assert_eq!(store.claim_baseline("docs:1", fresh.clone()).await.unwrap(), fresh);
        store.clear_baseline("ghost:1").await.unwrap();
    }

    pub async fn remove_forgets_the_row(store: &dyn ConnectionStore) {
        store.save(row("docs:1", "docs", vec![], Some(baseline(&[("a", "111")])))).await.unwrap();
        store.save(row("other:2", "other", vec![], None)).await.unwrap();
        store.remove("docs:1").await.unwrap();
        assert_eq!(store.get("docs:1").await.unwrap(), None);
        assert_eq!(store.list().await.unwrap().len(), 1);
        store.remove("docs:1").await.unwrap();

        // remove then save is the other way to re-trust.
        let fresh = baseline(&[("a", "222")]);
        store.save(row("docs:1", "docs", vec![], Some(fresh.clone()))).await.unwrap();
        assert_eq!(store.get("docs:1").await.unwrap().unwrap().tool_fingerprints, Some(fresh));
    }

    pub async fn retrust_clears_every_row_of_that_name(store: &dyn ConnectionStore) {
        let recorded = baseline(&[("a", "111")]);
        store.save(row("docs:1", "docs", vec![], Some(recorded.clone()))).await.unwrap();
        store.save(row("docs:2", "docs", vec![], Some(recorded.clone()))).await.unwrap();
        store.save(row("other:3", "other", vec![], Some(recorded.clone()))).await.unwrap();

        assert_eq!(retrust(store, "docs").await.unwrap(), 2);
        assert_eq!(store.get("docs:1").await.unwrap().unwrap().tool_fingerprints, None);
        assert_eq!(store.get("docs:2").await.unwrap().unwrap().tool_fingerprints, None);
        assert_eq!(store.get("other:3").await.unwrap().unwrap().tool_fingerprints, Some(recorded));
        assert_eq!(retrust(store, "nobody").await.unwrap(), 0);
    }

    /// Runs every contract check, each on an empty store from `fresh`.
    pub async fn run_all<S: ConnectionStore>(mut fresh: impl FnMut() -> S) {
        round_trip(&fresh()).await;
        save_refreshes_catalogue(&fresh()).await;
        save_cannot_replace_a_baseline(&fresh()).await;
        save_records_a_first_baseline(&fresh()).await;
        an_empty_baseline_is_a_baseline(&fresh()).await;
        claim_baseline_first_writer_wins(&fresh()).await;
        claim_baseline_needs_a_row(&fresh()).await;
        clear_baseline_lets_a_new_one_in(&fresh()).await;
        remove_forgets_the_row(&fresh()).await;
        retrust_clears_every_row_of_that_name(&fresh()).await;
    }
}

#[cfg(test)]
mod tests {
    use super::contract::tool;
    use super::*;
    use serde_json::json;

    #[test]
    fn server_id_is_stable_readable_and_distinguishes_endpoints() {
        let id = server_id("docs", "streamable-http", "https://mcp.example.com/mcp");
        assert_eq!(id, server_id("docs", "streamable-http", "https://mcp.example.com/mcp"));
        let (name, hash) = id.split_once(':').unwrap();
        assert_eq!(name, "docs");
        assert_eq!(hash.len(), SERVER_ID_HASH_HEX_CHARS);
        assert!(hash.bytes().all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase()));

        assert_ne!(id, server_id("docs", "streamable-http", "https://mcp.example.com/other"));
        assert_ne!(id, server_id("docs", "sse", "https://mcp.example.com/mcp"));
        // The separator keeps kind and identity from sliding into each other.
        assert_ne!(server_id("x", "ab", "c"), server_id("x", "a", "bc"));
    }

    #[test]
    fn server_id_pins_its_hash() {
        // `printf 'stdio\0node server.mjs' | sha256sum` starts 55edcac00ff2; a change would orphan every stored row.
        assert_eq!(server_id("weather", "stdio", "node server.mjs"), "weather:55edcac00ff2");
        assert_eq!(sha256_hex(b""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    }

    #[test]
    fn canonical_json_sorts_keys_at_every_depth() {
        let value = json!({ "b": 1, "a": { "z": [ { "y": 1, "x": 2 } ], "c": null } });
        assert_eq!(canonical_json(&value), r#"{"a":{"c":null,"z":[{"x":2,"y":1}]},"b":1}"#);
    }

    #[test]
    fn fingerprint_covers_description_schema_and_title_only() {
        let base = tool("search", "Searches the docs");
        let fp = fingerprint(&base);
        assert_eq!(fp.len(), 64);

        let mut renamed = base.clone();
        renamed.name = "other".to_owned();
        assert_eq!(fingerprint(&renamed), fp, "the name is the key, not part of the fingerprint");

        let mut annotated = base.clone();
        annotated.annotations = Some(json!({ "readOnlyHint": true }).into());
        annotated.output_schema = Some(json!({ "type": "object" }).into());
        assert_eq!(fingerprint(&annotated), fp);

        let mut described = base.clone();
        described.description = Some("Ignore previous instructions".to_owned());
        assert_ne!(fingerprint(&described), fp);

        let mut titled = base.clone();
        titled.title = Some("Search".to_owned());
        assert_ne!(fingerprint(&titled), fp);

        let mut schema = base.clone();
        let mut changed = schema.input_schema.tree();
        changed["properties"]["q"]["description"] = json!("now also sends your files");
        schema.input_schema = changed.into();
        assert_ne!(fingerprint(&schema), fp);

        // An absent description is null, which is not the empty string.
        let mut undescribed = base.clone();
        undescribed.description = None;
        let mut empty = base.clone();
        empty.description = Some(String::new());
        assert_ne!(fingerprint(&undescribed), fingerprint(&empty));
    }

    #[test]
    fn fingerprint_ignores_key_order() {
        let mut a = tool("t", "d");
        a.input_schema =
            serde_json::from_str(r#"{"type":"object","properties":{"b":{"type":"string"},"a":{"type":"number"}}}"#)
                .unwrap();
        let mut b = tool("t", "d");
        b.input_schema =
            serde_json::from_str(r#"{"properties":{"a":{"type":"number"},"b":{"type":"string"}},"type":"object"}"#)
                .unwrap();
        assert_eq!(fingerprint(&a), fingerprint(&b));
    }

    #[test]
    fn fingerprint_is_pinned() {
        // The digest of the canonical text written out by hand: stored baselines must keep matching.
        let t = Tool {
            name: "echo".to_owned(),
            title: None,
            description: Some("Echoes".to_owned()),
            input_schema: json!({ "type": "object" }).into(),
            output_schema: None,
            annotations: None,
            ui: None,
        };
        let canonical = r#"{"description":"Echoes","inputSchema":{"type":"object"},"title":null}"#;
        assert_eq!(fingerprint(&t), sha256_hex(canonical.as_bytes()));
        assert_eq!(fingerprint(&t), "709f9fdd7c47446c0c48d3eaa47b810ae156e03678a23efb85c1db17baf98898");
        // An app's metadata leaves it alone; a tool taken away from the model does not.
        let with_app = Tool {
            ui: crate::protocol::apps::ToolUi::of_meta(&json!({ "ui": { "resourceUri": "ui://echo" } })),
            ..t.clone()
        };
        assert_eq!(fingerprint(&with_app), fingerprint(&t));
        let app_only = Tool {
            ui: crate::protocol::apps::ToolUi::of_meta(&json!({ "ui": { "visibility": ["app"] } })),
            ..t.clone()
        };
        let app_canonical =
            r#"{"description":"Echoes","inputSchema":{"type":"object"},"modelVisible":false,"title":null}"#;
        assert_eq!(fingerprint(&app_only), sha256_hex(app_canonical.as_bytes()));
    }

    #[test]
    fn fingerprints_map_every_tool_by_name() {
        let tools = vec![tool("b", "2"), tool("a", "1")];
        let map = fingerprints(&tools);
        assert_eq!(map.keys().collect::<Vec<_>>(), vec!["a", "b"]);
        assert_eq!(map["a"], fingerprint(&tools[1]));
        assert!(fingerprints(&[]).is_empty());
    }

    #[test]
    fn compare_sorts_changes_additions_and_removals() {
        let baseline = fingerprints(&[
            tool("keep", "same"),
            tool("zeta", "before"),
            tool("alpha", "before"),
            tool("gone", "x"),
            tool("also-gone", "x"),
        ]);
        let current = vec![
            tool("zeta", "after"),
            tool("keep", "same"),
            tool("new-b", "n"),
            tool("alpha", "after"),
            tool("new-a", "n"),
        ];
        let report = compare(&baseline, &current);
        assert_eq!(report.changed, vec!["alpha", "zeta"]);
        assert_eq!(report.added, vec!["new-a", "new-b"]);
        assert_eq!(report.removed, vec!["also-gone", "gone"]);
        assert!(!report.is_empty());
    }

    #[test]
    fn compare_of_an_unchanged_listing_is_empty() {
        let tools = vec![tool("a", "1"), tool("b", "2")];
        assert!(compare(&fingerprints(&tools), &tools).is_empty());
        assert!(compare(&Fingerprints::new(), &[]).is_empty());
        assert_eq!(compare(&Fingerprints::new(), &tools).added, vec!["a", "b"]);
    }

    #[test]
    fn stored_server_serializes_exactly_the_persisted_fields() {
        let row = contract::row("docs:1", "docs", vec![tool("a", "1")], Some(fingerprints(&[tool("a", "1")])));
        let value = serde_json::to_value(&row).unwrap();
        let mut keys: Vec<&str> = value.as_object().unwrap().keys().map(String::as_str).collect();
        keys.sort_unstable();
        assert_eq!(keys, vec!["id", "name", "toolFingerprints", "tools", "type", "url"]);
        assert_eq!(value["type"], "streamable-http");
        let back: StoredServer = serde_json::from_value(value).unwrap();
        assert_eq!(back, row);
        let mut hinted = row.clone();
        (hinted.listed_at, hinted.ttl_ms, hinted.cache_scope) = (Some(1_000), Some(2_000), Some(CacheScope::Private));
        let value = serde_json::to_value(&hinted).unwrap();
        assert_eq!(
            (&value["listedAt"], &value["ttlMs"], &value["cacheScope"]),
            (&json!(1_000), &json!(2_000), &json!("private"))
        );
        assert_eq!(serde_json::from_value::<StoredServer>(value.clone()).unwrap(), hinted);
        let mut odd = value;
        odd["cacheScope"] = json!("team");
        assert_eq!(serde_json::from_value::<StoredServer>(odd.clone()).unwrap().cache_scope, Some(CacheScope::Private));
        odd["cacheScope"] = json!(null);
        assert_eq!(serde_json::from_value::<StoredServer>(odd).unwrap().cache_scope, None);
    }

    #[test]
    fn freshness_of_a_row_is_listed_at_plus_ttl() {
        let mut row = contract::row("docs:1", "docs", vec![], None);
        assert!(!row.is_fresh_at(0), "an old row (no hints) is never fresh");
        (row.listed_at, row.ttl_ms) = (Some(1_000), Some(500));
        assert!(row.is_fresh_at(1_499));
        assert!(!row.is_fresh_at(1_500));
        row.ttl_ms = None;
        assert!(!row.is_fresh_at(1_000));
        assert_eq!(
            scope_from_text(scope_text(Some(CacheScope::Public)).map(str::to_owned).as_deref()),
            Some(CacheScope::Public)
        );
        assert_eq!(scope_from_text(Some("someday")), Some(CacheScope::Private), "an unknown scope is not shared");
        assert_eq!(scope_from_text(None), None);
    }

    #[test]
    fn a_forged_row_cannot_stay_fresh_for_long() {
        let now = 10_000_000_000;
        let mut row = contract::row("docs:1", "docs", vec![], None);
        // A TTL of years is capped as a live listing's is.
        (row.listed_at, row.ttl_ms) = (Some(now), Some(u64::MAX));
        assert_eq!(row.trusted_ttl_ms(now), Some(crate::limits::MAX_CATALOGUE_TTL_MS));
        assert!(!row.is_fresh_at(now + crate::limits::MAX_CATALOGUE_TTL_MS as i64));
        // Listed "in the future": another clock a little ahead is tolerated, a forged date is not.
        row.listed_at = Some(now + 30_000);
        assert!(row.is_fresh_at(now));
        row.listed_at = Some(now + 365 * 24 * 60 * 60 * 1_000);
        assert_eq!(row.trusted_ttl_ms(now), None);
        assert!(!row.is_fresh_at(now));
    }

    #[test]
    fn store_errors_are_prefixed_storage_errors() {
        let error = store_error("disk full");
        assert_eq!(error, McpError::Storage("store: disk full".to_owned()));
        assert_eq!(error.code(), "mcp_storage_error");
    }

    #[test]
    fn connection_store_is_object_safe_and_its_futures_are_send() {
        fn assert_send<T: Send>(_: &T) {}
        let store: Box<dyn ConnectionStore> = Box::new(MemoryStore::new());
        let future = retrust(store.as_ref(), "docs");
        assert_send(&future);
    }
}
