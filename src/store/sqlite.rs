//! A store in one SQLite file, safe to share between processes.
//!
//! WAL lets readers and a writer proceed together; `busy_timeout` makes a second writer wait for the
//! lock instead of failing; every write runs in a `BEGIN IMMEDIATE` transaction, which takes the write
//! lock up front so a read-then-write can never be invalidated by another process's commit. SQLite
//! calls block, so each one runs on tokio's blocking pool.

use super::{now_ms, store_error, unknown_row_error, ConnectionStore, Fingerprints, StoredServer};
use crate::error::Result;
use futures_util::future::BoxFuture;
use rusqlite::{params, Connection, OptionalExtension, Row, TransactionBehavior};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The schema this build writes. Bump it, and add a migration step, whenever the table changes.
pub const SCHEMA_VERSION: i64 = 2;
/// How long a call waits for another connection's write lock before failing.
pub const BUSY_TIMEOUT: Duration = Duration::from_secs(5);
/// Pause between attempts to switch a new file to WAL while another connection holds it.
const WAL_RETRY_PAUSE: Duration = Duration::from_millis(10);

/// Schema steps by the version they lead to: `MIGRATIONS[n]` takes version n to n + 1.
const MIGRATIONS: &[&str] = &[
    "CREATE TABLE mcp_servers (
        id TEXT PRIMARY KEY,
        name TEXT NOT NULL,
        type TEXT NOT NULL,
        url TEXT,
        tools TEXT NOT NULL,
        tool_fingerprints TEXT,
        updated_at INTEGER
    )",
    // Caching hints of the catalogue (2026-07-28); rows from version 1 read as "no hint".
    "ALTER TABLE mcp_servers ADD COLUMN listed_at INTEGER;
     ALTER TABLE mcp_servers ADD COLUMN ttl_ms INTEGER;
     ALTER TABLE mcp_servers ADD COLUMN cache_scope TEXT;",
];

const SELECT_COLUMNS: &str =
    "SELECT id, name, type, url, tools, tool_fingerprints, listed_at, ttl_ms, cache_scope FROM mcp_servers";

/// The baseline survives every upsert: COALESCE keeps a recorded one and only fills a missing one.
/// The caching hints go with the catalogue they describe.
const UPSERT: &str = "INSERT INTO mcp_servers (id, name, type, url, tools, tool_fingerprints, updated_at, listed_at, ttl_ms, cache_scope)
    VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)
    ON CONFLICT(id) DO UPDATE SET
        name = excluded.name,
        type = excluded.type,
        url = excluded.url,
        tools = excluded.tools,
        tool_fingerprints = COALESCE(mcp_servers.tool_fingerprints, excluded.tool_fingerprints),
        updated_at = excluded.updated_at,
        listed_at = excluded.listed_at,
        ttl_ms = excluded.ttl_ms,
        cache_scope = excluded.cache_scope";

pub struct SqliteStore {
    // One connection per store; a second store (or process) on the same file has its own.
    connection: Arc<Mutex<Connection>>,
    path: PathBuf,
}

impl std::fmt::Debug for SqliteStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SqliteStore").field("path", &self.path).finish_non_exhaustive()
    }
}

impl SqliteStore {
    /// Opens (creating if needed) the store at `path`. A file written by a newer schema is refused
    /// rather than misread. This blocks (up to BUSY_TIMEOUT while another process holds the file):
    /// from async code, call it inside `spawn_blocking`.
    pub fn open(path: &Path) -> Result<Self> {
        let fail = |what: &str, error: rusqlite::Error| store_error(format!("{what} {}: {error}", path.display()));
        let mut connection = Connection::open(path).map_err(|e| fail("cannot open", e))?;
        connection.busy_timeout(BUSY_TIMEOUT).map_err(|e| fail("cannot configure", e))?;

        // Refuse a newer file before changing anything in it, journal mode included.
        let found = user_version(&connection).map_err(|e| fail("cannot read", e))?;
        refuse_newer_schema(found, path)?;

        let mode = enable_wal(&connection).map_err(|e| fail("cannot enable WAL on", e))?;
        if !mode.eq_ignore_ascii_case("wal") {
            return Err(store_error(format!("{} cannot use WAL (journal mode is {mode})", path.display())));
        }

        migrate(&mut connection, path)?;
        Ok(Self { connection: Arc::new(Mutex::new(connection)), path: path.to_owned() })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Runs `work` on the blocking pool with this store's connection.
    fn run<T, F>(&self, work: F) -> BoxFuture<'_, Result<T>>
    where
        T: Send + 'static,
        F: FnOnce(&mut Connection) -> Result<T> + Send + 'static,
    {
        let connection = Arc::clone(&self.connection);
        Box::pin(async move {
            tokio::task::spawn_blocking(move || {
                // A panic mid-call leaves no open transaction (it rolls back on drop), so a poisoned
                // lock still guards a usable connection.
                let mut connection = connection.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
                work(&mut connection)
            })
            .await
            .map_err(|e| store_error(format!("the SQLite task did not finish: {e}")))?
        })
    }
}

impl ConnectionStore for SqliteStore {
    fn get(&self, id: &str) -> BoxFuture<'_, Result<Option<StoredServer>>> {
        let id = id.to_owned();
        self.run(move |connection| {
            let raw = connection
                .query_row(&format!("{SELECT_COLUMNS} WHERE id = ?1"), [&id], RawRow::read)
                .optional()
                .map_err(sql_error)?;
            raw.map(RawRow::decode).transpose()
        })
    }

    fn list(&self) -> BoxFuture<'_, Result<Vec<StoredServer>>> {
        self.run(|connection| {
            let mut statement = connection.prepare(&format!("{SELECT_COLUMNS} ORDER BY id")).map_err(sql_error)?;
            let raws = statement
                .query_map([], RawRow::read)
                .map_err(sql_error)?
                .collect::<rusqlite::Result<Vec<_>>>()
                .map_err(sql_error)?;
            raws.into_iter().map(RawRow::decode).collect()
        })
    }

    fn save(&self, row: StoredServer) -> BoxFuture<'_, Result<()>> {
        self.run(move |connection| {
            let tools = encode(&row.tools, &row.id, "tools")?;
            let baseline =
                row.tool_fingerprints.as_ref().map(|fp| encode(fp, &row.id, "tool_fingerprints")).transpose()?;
            write(connection, |tx| {
                let ttl = row.ttl_ms.map(|ttl| i64::try_from(ttl).unwrap_or(i64::MAX));
                let scope = super::scope_text(row.cache_scope);
                tx.execute(
                    UPSERT,
                    params![row.id, row.name, row.kind, row.url, tools, baseline, now_ms(), row.listed_at, ttl, scope],
                )?;
                Ok(())
            })
        })
    }

    fn remove(&self, id: &str) -> BoxFuture<'_, Result<()>> {
        let id = id.to_owned();
        self.run(move |connection| {
            write(connection, |tx| {
                tx.execute("DELETE FROM mcp_servers WHERE id = ?1", [&id])?;
                Ok(())
            })
        })
    }

    fn claim_baseline(&self, id: &str, fingerprints: Fingerprints) -> BoxFuture<'_, Result<Fingerprints>> {
        let id = id.to_owned();
        self.run(move |connection| {
            let tx = connection.transaction_with_behavior(TransactionBehavior::Immediate).map_err(sql_error)?;
            let recorded: Option<Option<String>> = tx
                .query_row("SELECT tool_fingerprints FROM mcp_servers WHERE id = ?1", [&id], |row| row.get(0))
                .optional()
                .map_err(sql_error)?;
            match recorded {
                None => Err(unknown_row_error(&id)),
                // Someone claimed first: theirs stands. The transaction rolls back on drop, having written nothing.
                Some(Some(text)) => decode(&text, &id, "tool_fingerprints"),
                Some(None) => {
                    let text = encode(&fingerprints, &id, "tool_fingerprints")?;
                    tx.execute(
                        "UPDATE mcp_servers SET tool_fingerprints = ?1, updated_at = ?2 WHERE id = ?3",
                        params![text, now_ms(), id],
                    )
                    .map_err(sql_error)?;
                    tx.commit().map_err(sql_error)?;
                    Ok(fingerprints)
                }
            }
        })
    }

    fn clear_baseline(&self, id: &str) -> BoxFuture<'_, Result<()>> {
        let id = id.to_owned();
        self.run(move |connection| {
            write(connection, |tx| {
                tx.execute(
                    "UPDATE mcp_servers SET tool_fingerprints = NULL, updated_at = ?1 WHERE id = ?2",
                    params![now_ms(), id],
                )?;
                Ok(())
            })
        })
    }
}

/// A [`SqliteStore`] that is opened on first use, on the blocking pool, so whoever creates it (the JS
/// thread, through `createSqliteMcpConnectionStore`) never waits on the file: opening can take up to
/// [`BUSY_TIMEOUT`] while another process holds it. A failure to open is returned (as
/// `mcp_storage_error`) by the operation that needed the store, and the next operation tries again.
/// Operations that arrive while an open is under way wait for it rather than start their own.
pub struct LazySqliteStore {
    path: PathBuf,
    opened: tokio::sync::OnceCell<SqliteStore>,
}

impl SqliteStore {
    pub fn open_lazily(path: &Path) -> LazySqliteStore {
        LazySqliteStore { path: path.to_owned(), opened: tokio::sync::OnceCell::new() }
    }
}

async fn open_on_blocking_pool(path: PathBuf) -> Result<SqliteStore> {
    tokio::task::spawn_blocking(move || SqliteStore::open(&path))
        .await
        .map_err(|e| store_error(format!("opening the SQLite file did not finish: {e}")))?
}

impl LazySqliteStore {
    async fn store(&self) -> Result<&SqliteStore> {
        self.opened.get_or_try_init(|| open_on_blocking_pool(self.path.clone())).await
    }
}

impl std::fmt::Debug for LazySqliteStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LazySqliteStore").field("path", &self.path).field("opened", &self.opened.initialized()).finish()
    }
}

impl ConnectionStore for LazySqliteStore {
    fn get(&self, id: &str) -> BoxFuture<'_, Result<Option<StoredServer>>> {
        let id = id.to_owned();
        Box::pin(async move { self.store().await?.get(&id).await })
    }

    fn list(&self) -> BoxFuture<'_, Result<Vec<StoredServer>>> {
        Box::pin(async move { self.store().await?.list().await })
    }

    fn save(&self, row: StoredServer) -> BoxFuture<'_, Result<()>> {
        Box::pin(async move { self.store().await?.save(row).await })
    }

    fn remove(&self, id: &str) -> BoxFuture<'_, Result<()>> {
        let id = id.to_owned();
        Box::pin(async move { self.store().await?.remove(&id).await })
    }

    fn claim_baseline(&self, id: &str, fingerprints: Fingerprints) -> BoxFuture<'_, Result<Fingerprints>> {
        let id = id.to_owned();
        Box::pin(async move { self.store().await?.claim_baseline(&id, fingerprints).await })
    }

    fn clear_baseline(&self, id: &str) -> BoxFuture<'_, Result<()>> {
        let id = id.to_owned();
        Box::pin(async move { self.store().await?.clear_baseline(&id).await })
    }
}

/// A row's columns before their JSON is parsed, so a bad value becomes an error naming the row.
/// The Postgres store reads its rows into this too: the same columns, decoded the same way.
pub(super) struct RawRow {
    pub(super) id: String,
    pub(super) name: String,
    pub(super) kind: String,
    pub(super) url: Option<String>,
    pub(super) tools: String,
    pub(super) tool_fingerprints: Option<String>,
    pub(super) listed_at: Option<i64>,
    pub(super) ttl_ms: Option<i64>,
    pub(super) cache_scope: Option<String>,
}

impl RawRow {
    fn read(row: &Row<'_>) -> rusqlite::Result<Self> {
        Ok(Self {
            id: row.get(0)?,
            name: row.get(1)?,
            kind: row.get(2)?,
            url: row.get(3)?,
            tools: row.get(4)?,
            tool_fingerprints: row.get(5)?,
            listed_at: row.get(6)?,
            ttl_ms: row.get(7)?,
            cache_scope: row.get(8)?,
        })
    }

    pub(super) fn decode(self) -> Result<StoredServer> {
        let tools = decode(&self.tools, &self.id, "tools")?;
        let tool_fingerprints =
            self.tool_fingerprints.as_deref().map(|text| decode(text, &self.id, "tool_fingerprints")).transpose()?;
        Ok(StoredServer {
            id: self.id,
            name: self.name,
            kind: self.kind,
            url: self.url,
            tools,
            tool_fingerprints,
            listed_at: self.listed_at,
            // A negative TTL (never written by mcpferry) means no positive TTL: stale.
            ttl_ms: self.ttl_ms.and_then(|ttl| u64::try_from(ttl).ok()),
            cache_scope: super::scope_from_text(self.cache_scope.as_deref()),
        })
    }
}

fn user_version(connection: &Connection) -> rusqlite::Result<i64> {
    connection.pragma_query_value(None, "user_version", |row| row.get(0))
}

fn refuse_newer_schema(found: i64, path: &Path) -> Result<()> {
    if found > SCHEMA_VERSION {
        return Err(store_error(format!(
            "{} has schema version {found}, newer than the {SCHEMA_VERSION} this mcpferry understands; upgrade mcpferry to use it",
            path.display()
        )));
    }
    Ok(())
}

/// Switches the file to WAL (a no-op once it is) and returns the journal mode now in force. The
/// switch reports "database is locked" at once, without consulting the busy handler, while another
/// connection is opening the same new file, so it is retried here for as long as BUSY_TIMEOUT.
pub(super) fn enable_wal(connection: &Connection) -> rusqlite::Result<String> {
    let deadline = Instant::now() + BUSY_TIMEOUT;
    loop {
        match connection.pragma_update_and_check(None, "journal_mode", "WAL", |row| row.get(0)) {
            Err(error) if is_busy(&error) && Instant::now() < deadline => std::thread::sleep(WAL_RETRY_PAUSE),
            outcome => return outcome,
        }
    }
}

fn is_busy(error: &rusqlite::Error) -> bool {
    matches!(error.sqlite_error_code(), Some(rusqlite::ErrorCode::DatabaseBusy | rusqlite::ErrorCode::DatabaseLocked))
}

/// Brings the file to SCHEMA_VERSION. The version is re-read under the write lock, so two processes
/// opening a new file at once create the table exactly once.
fn migrate(connection: &mut Connection, path: &Path) -> Result<()> {
    let fail = |error: rusqlite::Error| store_error(format!("cannot set up the schema of {}: {error}", path.display()));
    let tx = connection.transaction_with_behavior(TransactionBehavior::Immediate).map_err(fail)?;
    let found = user_version(&tx).map_err(fail)?;
    refuse_newer_schema(found, path)?;
    if found < SCHEMA_VERSION {
        // Plain CREATE TABLE: a same-named table left by something else is an error, not adopted.
        for step in &MIGRATIONS[usize::try_from(found).unwrap_or(0)..] {
            tx.execute_batch(step).map_err(fail)?;
        }
        tx.pragma_update(None, "user_version", SCHEMA_VERSION).map_err(fail)?;
    }
    tx.commit().map_err(fail)
}

/// Runs `body` in a `BEGIN IMMEDIATE` transaction and commits it.
fn write(
    connection: &mut Connection,
    body: impl FnOnce(&rusqlite::Transaction<'_>) -> rusqlite::Result<()>,
) -> Result<()> {
    let tx = connection.transaction_with_behavior(TransactionBehavior::Immediate).map_err(sql_error)?;
    body(&tx).map_err(sql_error)?;
    tx.commit().map_err(sql_error)
}

pub(super) fn sql_error(error: rusqlite::Error) -> crate::error::McpError {
    store_error(format!("SQLite: {error}"))
}

pub(super) fn encode<T: serde::Serialize>(value: &T, id: &str, column: &str) -> Result<String> {
    serde_json::to_string(value).map_err(|e| store_error(format!("cannot encode {column} of server {id:?}: {e}")))
}

pub(super) fn decode<T: serde::de::DeserializeOwned>(text: &str, id: &str, column: &str) -> Result<T> {
    serde_json::from_str(text).map_err(|e| {
        store_error(format!("the stored {column} of server {id:?} is not valid JSON of the expected shape: {e}"))
    })
}

#[cfg(test)]
mod tests {
    use super::super::{contract, retrust, Fingerprints};
    use super::*;
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::sync::Barrier;

    /// A fresh directory under the system temp dir, removed on drop.
    struct TempDir(PathBuf);

    impl TempDir {
        fn new() -> Self {
            static NEXT: AtomicU64 = AtomicU64::new(0);
            let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos();
            let dir = std::env::temp_dir().join(format!(
                "mcpferry-store-{}-{nanos}-{}",
                std::process::id(),
                NEXT.fetch_add(1, Ordering::Relaxed)
            ));
            std::fs::create_dir_all(&dir).unwrap();
            Self(dir)
        }

        fn db(&self) -> PathBuf {
            self.0.join("servers.db")
        }
    }

    impl Drop for TempDir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    fn raw(path: &Path) -> Connection {
        let connection = Connection::open(path).unwrap();
        connection.busy_timeout(BUSY_TIMEOUT).unwrap();
        connection
    }

    #[tokio::test]
    async fn meets_the_store_contract() {
        let dirs: Vec<TempDir> = (0..16).map(|_| TempDir::new()).collect();
        let mut next = dirs.iter();
        contract::run_all(|| SqliteStore::open(&next.next().unwrap().db()).unwrap()).await;
    }

    #[tokio::test]
    async fn a_lazy_store_meets_the_contract_and_reports_open_failures_on_use() {
        let dirs: Vec<TempDir> = (0..16).map(|_| TempDir::new()).collect();
        let mut next = dirs.iter();
        contract::run_all(|| SqliteStore::open_lazily(&next.next().unwrap().db())).await;

        let dir = TempDir::new();
        std::fs::write(dir.db(), vec![b'x'; 4096]).unwrap();
        let store = SqliteStore::open_lazily(&dir.db());
        let error = store.list().await.unwrap_err();
        assert_eq!(error.code(), "mcp_storage_error", "{error}");
        // The next operation tries again, and succeeds once the file is usable.
        std::fs::remove_file(dir.db()).unwrap();
        assert!(store.list().await.unwrap().is_empty());
    }

    #[tokio::test]
    async fn rows_survive_reopening() {
        let dir = TempDir::new();
        let row = contract::row(
            "docs:1",
            "docs",
            vec![contract::tool("a", "x")],
            Some([("a".to_owned(), "1".to_owned())].into()),
        );
        {
            let store = SqliteStore::open(&dir.db()).unwrap();
            store.save(row.clone()).await.unwrap();
        }
        let reopened = SqliteStore::open(&dir.db()).unwrap();
        assert_eq!(reopened.list().await.unwrap(), vec![row]);
        assert_eq!(reopened.path(), dir.db());
    }

    #[test]
    fn open_sets_schema_version_and_wal() {
        let dir = TempDir::new();
        let store = SqliteStore::open(&dir.db()).unwrap();
        let connection = raw(&dir.db());
        assert_eq!(user_version(&connection).unwrap(), SCHEMA_VERSION);
        let mode: String = connection.pragma_query_value(None, "journal_mode", |row| row.get(0)).unwrap();
        assert_eq!(mode, "wal");
        let columns: Vec<String> = connection
            .prepare("SELECT name FROM pragma_table_info('mcp_servers') ORDER BY cid")
            .unwrap()
            .query_map([], |row| row.get(0))
            .unwrap()
            .collect::<rusqlite::Result<_>>()
            .unwrap();
        assert_eq!(
            columns,
            [
                "id",
                "name",
                "type",
                "url",
                "tools",
                "tool_fingerprints",
                "updated_at",
                "listed_at",
                "ttl_ms",
                "cache_scope"
            ]
        );
        drop(store);
        // Reopening a current file changes nothing.
        SqliteStore::open(&dir.db()).unwrap();
        assert_eq!(user_version(&connection).unwrap(), SCHEMA_VERSION);
    }

    #[tokio::test]
    async fn a_version_1_file_is_migrated_and_its_rows_read_as_without_hints() {
        let dir = TempDir::new();
        let connection = raw(&dir.db());
        connection.execute_batch(MIGRATIONS[0]).unwrap();
        connection.pragma_update(None, "user_version", 1).unwrap();
        connection
            .execute(
                "INSERT INTO mcp_servers (id, name, type, tools, tool_fingerprints) VALUES ('old:1', 'old', 'stdio', '[]', '{\"a\":\"f\"}')",
                [],
            )
            .unwrap();
        let store = SqliteStore::open(&dir.db()).unwrap();
        assert_eq!(user_version(&connection).unwrap(), SCHEMA_VERSION);
        let row = store.get("old:1").await.unwrap().unwrap();
        assert_eq!((row.listed_at, row.ttl_ms, row.cache_scope), (None, None, None));
        assert_eq!(row.tool_fingerprints.as_ref().unwrap()["a"], "f", "the baseline survives the migration");
        let mut hinted = row.clone();
        (hinted.listed_at, hinted.ttl_ms) = (Some(7), Some(9));
        hinted.cache_scope = Some(crate::protocol::mcp::CacheScope::Private);
        store.save(hinted.clone()).await.unwrap();
        assert_eq!(store.get("old:1").await.unwrap(), Some(hinted));
    }

    #[test]
    fn a_newer_schema_is_refused_untouched() {
        let dir = TempDir::new();
        let connection = raw(&dir.db());
        connection.pragma_update(None, "user_version", SCHEMA_VERSION + 1).unwrap();
        let error = SqliteStore::open(&dir.db()).unwrap_err().to_string();
        assert!(error.starts_with("store: "), "{error}");
        assert!(error.contains(&format!("schema version {}", SCHEMA_VERSION + 1)), "{error}");
        assert!(error.contains("upgrade mcpferry"), "{error}");
        let mode: String = connection.pragma_query_value(None, "journal_mode", |row| row.get(0)).unwrap();
        assert_ne!(mode, "wal", "a refused file is left as it was");
    }

    #[test]
    fn a_foreign_table_of_the_same_name_is_not_adopted() {
        let dir = TempDir::new();
        raw(&dir.db()).execute_batch("CREATE TABLE mcp_servers (something TEXT)").unwrap();
        let error = SqliteStore::open(&dir.db()).unwrap_err().to_string();
        assert!(error.starts_with("store: cannot set up the schema"), "{error}");
    }

    #[test]
    fn a_file_that_is_not_a_database_is_a_clear_error() {
        let dir = TempDir::new();
        std::fs::write(dir.db(), vec![b'x'; 4096]).unwrap();
        let error = SqliteStore::open(&dir.db()).unwrap_err().to_string();
        assert!(error.starts_with("store: "), "{error}");
        assert!(error.contains("servers.db"), "{error}");
    }

    #[tokio::test]
    async fn corrupt_json_is_an_error_naming_the_row() {
        let dir = TempDir::new();
        let store = SqliteStore::open(&dir.db()).unwrap();
        store.save(contract::row("good:1", "good", vec![], None)).await.unwrap();
        let connection = raw(&dir.db());
        connection
            .execute(
                "INSERT INTO mcp_servers (id, name, type, tools) VALUES ('bad:1', 'bad', 'stdio', '{not json')",
                [],
            )
            .unwrap();
        connection
            .execute("INSERT INTO mcp_servers (id, name, type, tools, tool_fingerprints) VALUES ('bad:2', 'bad', 'stdio', '[]', '[1,2]')", [])
            .unwrap();

        let error = store.get("bad:1").await.unwrap_err().to_string();
        assert!(error.starts_with("store: the stored tools of server \"bad:1\""), "{error}");
        let error = store.get("bad:2").await.unwrap_err().to_string();
        assert!(error.contains("tool_fingerprints of server \"bad:2\""), "{error}");
        let error = store.claim_baseline("bad:2", Fingerprints::new()).await.unwrap_err().to_string();
        assert!(error.contains("\"bad:2\""), "{error}");
        assert!(store.list().await.is_err(), "a listing with a corrupt row is not silently shortened");
        assert!(store.get("good:1").await.unwrap().is_some());

        // A column of the wrong SQL type is an error too, not a panic.
        connection.execute("UPDATE mcp_servers SET tools = 42 WHERE id = 'bad:1'", []).unwrap();
        assert!(store.get("bad:1").await.unwrap_err().to_string().starts_with("store: "));
    }

    #[tokio::test]
    async fn save_keeps_the_baseline_in_sql() {
        // The guarantee holds for any writer of the file that uses the same upsert, not only this struct.
        let dir = TempDir::new();
        let store = SqliteStore::open(&dir.db()).unwrap();
        store
            .save(contract::row("docs:1", "docs", vec![], Some([("a".to_owned(), "1".to_owned())].into())))
            .await
            .unwrap();
        raw(&dir.db())
            .execute(
                UPSERT,
                params!["docs:1", "docs", "stdio", Option::<String>::None, "[]", r#"{"a":"2"}"#, 0, 1, 2, "public"],
            )
            .unwrap();
        let stored: String = raw(&dir.db())
            .query_row("SELECT tool_fingerprints FROM mcp_servers WHERE id = 'docs:1'", [], |row| row.get(0))
            .unwrap();
        assert_eq!(stored, r#"{"a":"1"}"#);
    }

    #[tokio::test]
    async fn two_stores_on_one_file_see_each_other() {
        let dir = TempDir::new();
        let first = SqliteStore::open(&dir.db()).unwrap();
        let second = SqliteStore::open(&dir.db()).unwrap();
        let row = contract::row("docs:1", "docs", vec![contract::tool("a", "x")], None);
        first.save(row.clone()).await.unwrap();
        assert_eq!(second.get("docs:1").await.unwrap(), Some(row));

        let claimed: Fingerprints = [("a".to_owned(), "from-second".to_owned())].into();
        assert_eq!(second.claim_baseline("docs:1", claimed.clone()).await.unwrap(), claimed);
        let late: Fingerprints = [("a".to_owned(), "from-first".to_owned())].into();
        assert_eq!(first.claim_baseline("docs:1", late).await.unwrap(), claimed);

        assert_eq!(retrust(&first, "docs").await.unwrap(), 1);
        assert_eq!(second.get("docs:1").await.unwrap().unwrap().tool_fingerprints, None);
        second.remove("docs:1").await.unwrap();
        assert!(first.list().await.unwrap().is_empty());
    }

    /// Stands in for several processes: each thread opens its own store (its own connection) on a
    /// new file at the same moment, saves the same row, and races to claim a baseline of its own.
    #[test]
    fn claims_across_connections_have_one_winner() {
        const CLAIMANTS: usize = 8;
        let dir = TempDir::new();
        let path = dir.db();
        let start = Arc::new(Barrier::new(CLAIMANTS));
        let claimants: Vec<_> = (0..CLAIMANTS)
            .map(|n| {
                let path = path.clone();
                let start = Arc::clone(&start);
                std::thread::spawn(move || {
                    let runtime = tokio::runtime::Builder::new_current_thread().build().unwrap();
                    runtime.block_on(async move {
                        start.wait();
                        let store = SqliteStore::open(&path).unwrap();
                        store.save(contract::row("docs:1", "docs", vec![], None)).await.unwrap();
                        let mine: Fingerprints = [("a".to_owned(), format!("claimant-{n}"))].into();
                        (mine.clone(), store.claim_baseline("docs:1", mine).await.unwrap())
                    })
                })
            })
            .collect();
        let outcomes: Vec<(Fingerprints, Fingerprints)> = claimants.into_iter().map(|t| t.join().unwrap()).collect();

        let winner = &outcomes[0].1;
        assert!(outcomes.iter().all(|(_, got)| got == winner), "every claimant sees one baseline");
        let winners = outcomes.iter().filter(|(mine, got)| mine == got).count();
        assert_eq!(winners, 1, "exactly one claimant recorded its own");
        let stored: String =
            raw(&path).query_row("SELECT tool_fingerprints FROM mcp_servers", [], |row| row.get(0)).unwrap();
        assert_eq!(&serde_json::from_str::<Fingerprints>(&stored).unwrap(), winner);
    }

    /// The row type is the whole of what reaches the file. Destructuring it without `..` makes adding
    /// a field a compile error here, so whoever adds one has to come and look at this test.
    #[tokio::test]
    async fn nothing_but_the_row_fields_reaches_the_file() {
        const SECRET_HEADER: &str = "X-Api-Key: sk-live-4d1c9f-never-persisted";
        const SECRET_ENV: &str = "GITHUB_TOKEN=ghp_never-persisted";

        let row = contract::row("docs:1", "docs", vec![contract::tool("lookup", "Looks up a word")], None);
        let StoredServer {
            id: _,
            name: _,
            kind: _,
            url: _,
            tools: _,
            tool_fingerprints: _,
            listed_at: _,
            ttl_ms: _,
            cache_scope: _,
        } = &row;

        let dir = TempDir::new();
        let store = SqliteStore::open(&dir.db()).unwrap();
        // A caller holding a config with secrets can only hand the store a StoredServer, which has no
        // place for them; they exist in this test only to be searched for.
        let config_secrets = [SECRET_HEADER, SECRET_ENV];
        store.save(row).await.unwrap();
        store.claim_baseline("docs:1", [("lookup".to_owned(), "f1".to_owned())].into()).await.unwrap();

        let mut bytes = Vec::new();
        for suffix in ["", "-wal", "-journal"] {
            let file = PathBuf::from(format!("{}{suffix}", dir.db().display()));
            if let Ok(content) = std::fs::read(&file) {
                bytes.extend(content);
            }
        }
        let contains = |needle: &str| bytes.windows(needle.len()).any(|w| w == needle.as_bytes());
        // Positive control: the search does find what was stored.
        assert!(contains("Looks up a word"));
        assert!(contains("https://mcp.example.com/mcp"));
        for secret in config_secrets {
            assert!(!contains(secret), "{secret:?} reached the database file");
            assert!(!contains(secret.split_once(['=', ':']).unwrap().1.trim()));
        }
    }
}
