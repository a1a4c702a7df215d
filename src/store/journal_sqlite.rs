//! The firewall journal in one SQLite file, shared by processes (and by a connection store in the same
//! file: its own tables and schema row). The tables are those designed for Postgres in
//! docs/fleet-journal.md, so a fleet can move to Postgres with the same shape. WAL and `busy_timeout`
//! as in the connection store; a claim is one `INSERT … ON CONFLICT DO NOTHING` (the primary key decides
//! between racing writers) and a read-back; a reservation is one conditional upsert. SQLite calls
//! block, so each runs on tokio's blocking pool; the file is opened on first use.

use super::journal::{CallSlot, McpJournal, RecordedCall};
use super::sqlite::{enable_wal, sql_error, BUSY_TIMEOUT};
use super::{now_ms, store_error};
use crate::error::Result;
use futures_util::future::BoxFuture;
use rusqlite::{params, Connection, OptionalExtension, TransactionBehavior};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

/// The journal schema this build writes (row `journal` of `mcpferry_schema`): 2 added `mcp_call_results`,
/// 3 its `arguments_sha256` (a key used again with other arguments is refused).
pub const JOURNAL_SCHEMA_VERSION: i64 = 3;
/// The journal's schema version as recorded in the file.
const JOURNAL_VERSION_QUERY: &str = "SELECT version FROM mcpferry_schema WHERE component = 'journal'";

const SCHEMA: &str = "CREATE TABLE mcp_journal (
        key TEXT PRIMARY KEY,
        value TEXT NOT NULL,
        created_at INTEGER NOT NULL
    );
    CREATE TABLE mcp_run_counters (
        run_id TEXT NOT NULL,
        counter TEXT NOT NULL,
        count INTEGER NOT NULL CHECK (count >= 0),
        updated_at INTEGER NOT NULL,
        PRIMARY KEY (run_id, counter)
    );
    CREATE INDEX mcp_run_counters_updated_at ON mcp_run_counters (updated_at);";

/// `createMcpServer`'s calls (schema 2), as docs/fleet-journal.md designs them: one row per idempotency key
/// and tool, `running` under an owner's lease (another process waits, or takes over once the lease lapses)
/// until it is `done` with its result.
const CALL_RESULTS_SCHEMA: &str = "CREATE TABLE IF NOT EXISTS mcp_call_results (
        idempotency_key TEXT NOT NULL,
        tool TEXT NOT NULL,
        state TEXT NOT NULL CHECK (state IN ('running', 'done')),
        owner TEXT NOT NULL,
        result TEXT,
        lease_until INTEGER NOT NULL,
        created_at INTEGER NOT NULL,
        arguments_sha256 TEXT,
        PRIMARY KEY (idempotency_key, tool)
    );
    CREATE INDEX IF NOT EXISTS mcp_call_results_created_at ON mcp_call_results (created_at);";

/// Take the call for `?3` until `?4`, unless it is done or another owner's lease (past `?5`, now) is live.
const TAKE_CALL: &str = "INSERT INTO mcp_call_results (idempotency_key, tool, state, owner, result, lease_until, created_at, arguments_sha256)
        VALUES (?1, ?2, 'running', ?3, NULL, ?4, ?5, ?6)
    ON CONFLICT (idempotency_key, tool) DO UPDATE SET owner = excluded.owner, lease_until = excluded.lease_until,
        arguments_sha256 = excluded.arguments_sha256
        WHERE mcp_call_results.state = 'running' AND mcp_call_results.lease_until < ?5
    RETURNING owner";
const DONE_RESULT: &str =
    "SELECT result, arguments_sha256 FROM mcp_call_results WHERE idempotency_key = ?1 AND tool = ?2 AND state = 'done'";

/// One slot more while under the limit (`?3`); no row back at the ceiling.
const RESERVE: &str = "INSERT INTO mcp_run_counters (run_id, counter, count, updated_at) VALUES (?1, ?2, 1, ?4)
    ON CONFLICT (run_id, counter) DO UPDATE SET count = mcp_run_counters.count + 1, updated_at = excluded.updated_at
        WHERE mcp_run_counters.count < ?3
    RETURNING count";

pub struct SqliteJournal {
    path: PathBuf,
    opened: tokio::sync::OnceCell<Arc<Mutex<Connection>>>,
}

impl SqliteJournal {
    /// Returns at once; the file is opened (created, switched to WAL, its tables set up) on first use,
    /// and a failure to open is that operation's `mcp_storage_error` (the next one tries again).
    pub fn open_lazily(path: &Path) -> Self {
        SqliteJournal { path: path.to_owned(), opened: tokio::sync::OnceCell::new() }
    }

    fn run<T, F>(&self, work: F) -> BoxFuture<'_, Result<T>>
    where
        T: Send + 'static,
        F: FnOnce(&mut Connection) -> rusqlite::Result<T> + Send + 'static,
    {
        Box::pin(async move {
            let connection = self
                .opened
                .get_or_try_init(|| {
                    let path = self.path.clone();
                    async move {
                        tokio::task::spawn_blocking(move || open(&path).map(|c| Arc::new(Mutex::new(c))))
                            .await
                            .map_err(|e| store_error(format!("opening the SQLite journal did not finish: {e}")))?
                    }
                })
                .await?
                .clone();
            tokio::task::spawn_blocking(move || {
                // A panic mid-call leaves no open transaction (rolled back on drop): the connection stays usable.
                let mut connection = connection.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
                work(&mut connection).map_err(sql_error)
            })
            .await
            .map_err(|e| store_error(format!("the SQLite journal task did not finish: {e}")))?
        })
    }
}

fn open(path: &Path) -> Result<Connection> {
    let fail = |what: &str, error: rusqlite::Error| store_error(format!("journal: {what} {}: {error}", path.display()));
    let mut connection = Connection::open(path).map_err(|e| fail("cannot open", e))?;
    connection.busy_timeout(BUSY_TIMEOUT).map_err(|e| fail("cannot configure", e))?;
    let mode = enable_wal(&connection).map_err(|e| fail("cannot enable WAL on", e))?;
    if !mode.eq_ignore_ascii_case("wal") {
        return Err(store_error(format!("journal: {} cannot use WAL (journal mode is {mode})", path.display())));
    }
    // Under the write lock, so two processes opening a new file create the tables once.
    let tx =
        connection.transaction_with_behavior(TransactionBehavior::Immediate).map_err(|e| fail("cannot set up", e))?;
    tx.execute_batch(
        "CREATE TABLE IF NOT EXISTS mcpferry_schema (component TEXT PRIMARY KEY, version INTEGER NOT NULL)",
    )
    .map_err(|e| fail("cannot set up", e))?;
    let found: Option<i64> =
        tx.query_row(JOURNAL_VERSION_QUERY, [], |row| row.get(0)).optional().map_err(|e| fail("cannot read", e))?;
    match found {
        Some(version) if version > JOURNAL_SCHEMA_VERSION => {
            return Err(store_error(format!(
                "journal: {} has journal schema version {version}, newer than the {JOURNAL_SCHEMA_VERSION} this mcpferry understands; upgrade mcpferry to use it",
                path.display()
            )))
        }
        Some(JOURNAL_SCHEMA_VERSION) => {}
        Some(version) => {
            if version == 2 {
                // Schema 2's call results gain the fingerprint column (rows recorded before it have none).
                tx.execute_batch("ALTER TABLE mcp_call_results ADD COLUMN arguments_sha256 TEXT").map_err(|e| fail("cannot upgrade the tables of", e))?;
            }
            // A schema-1 file (pins and counters only) gains the call-results table.
            tx.execute_batch(CALL_RESULTS_SCHEMA).map_err(|e| fail("cannot upgrade the tables of", e))?;
            tx.execute("UPDATE mcpferry_schema SET version = ?1 WHERE component = 'journal'", [JOURNAL_SCHEMA_VERSION])
                .map_err(|e| fail("cannot upgrade", e))?;
        }
        None => {
            tx.execute_batch(SCHEMA).map_err(|e| fail("cannot set up the tables of", e))?;
            tx.execute_batch(CALL_RESULTS_SCHEMA).map_err(|e| fail("cannot set up the tables of", e))?;
            tx.execute("INSERT INTO mcpferry_schema (component, version) VALUES ('journal', ?1)", [JOURNAL_SCHEMA_VERSION])
                .map_err(|e| fail("cannot set up", e))?;
        }
    }
    tx.commit().map_err(|e| fail("cannot set up", e))?;
    Ok(connection)
}

/// A `DONE_RESULT` row.
fn recorded_call(row: &rusqlite::Row<'_>) -> rusqlite::Result<RecordedCall> {
    Ok(RecordedCall { result: row.get(0)?, fingerprint: row.get(1)? })
}

/// A stored count as the journal's (a negative one, never written by mcpferry, reads as zero).
fn count_of(value: i64) -> u64 {
    u64::try_from(value).unwrap_or(0)
}

impl McpJournal for SqliteJournal {
    fn claim(&self, key: &str, value: &str) -> BoxFuture<'_, Result<String>> {
        let (key, value) = (key.to_owned(), value.to_owned());
        self.run(move |connection| {
            connection.execute(
                "INSERT INTO mcp_journal (key, value, created_at) VALUES (?1, ?2, ?3) ON CONFLICT (key) DO NOTHING",
                params![key, value, now_ms()],
            )?;
            connection.query_row("SELECT value FROM mcp_journal WHERE key = ?1", [&key], |row| row.get(0))
        })
    }

    fn get(&self, key: &str) -> BoxFuture<'_, Result<Option<String>>> {
        let key = key.to_owned();
        self.run(move |connection| {
            connection.query_row("SELECT value FROM mcp_journal WHERE key = ?1", [&key], |row| row.get(0)).optional()
        })
    }

    fn reserve(&self, run_id: &str, counter: &str, limit: u64) -> BoxFuture<'_, Result<Option<u64>>> {
        let (run_id, counter) = (run_id.to_owned(), counter.to_owned());
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        self.run(move |connection| {
            let count: Option<i64> = connection
                .query_row(RESERVE, params![run_id, counter, limit, now_ms()], |row| row.get(0))
                .optional()?;
            Ok(count.map(count_of))
        })
    }

    fn release(&self, run_id: &str, counter: &str) -> BoxFuture<'_, Result<()>> {
        let (run_id, counter) = (run_id.to_owned(), counter.to_owned());
        self.run(move |connection| {
            connection.execute(
                "UPDATE mcp_run_counters SET count = count - 1, updated_at = ?3 WHERE run_id = ?1 AND counter = ?2 AND count > 0",
                params![run_id, counter, now_ms()],
            )?;
            Ok(())
        })
    }

    fn count(&self, run_id: &str, counter: &str) -> BoxFuture<'_, Result<u64>> {
        let (run_id, counter) = (run_id.to_owned(), counter.to_owned());
        self.run(move |connection| {
            let count: Option<i64> = connection
                .query_row(
                    "SELECT count FROM mcp_run_counters WHERE run_id = ?1 AND counter = ?2",
                    [&run_id, &counter],
                    |row| row.get(0),
                )
                .optional()?;
            Ok(count.map_or(0, count_of))
        })
    }

    fn call_result(&self, key: &str, tool: &str) -> BoxFuture<'_, Result<Option<RecordedCall>>> {
        let (key, tool) = (key.to_owned(), tool.to_owned());
        self.run(move |connection| connection.query_row(DONE_RESULT, [&key, &tool], recorded_call).optional())
    }

    fn take_call(
        &self,
        key: &str,
        tool: &str,
        fingerprint: &str,
        owner: &str,
        lease_ms: u64,
    ) -> BoxFuture<'_, Result<CallSlot>> {
        let (key, tool, owner, fingerprint) =
            (key.to_owned(), tool.to_owned(), owner.to_owned(), fingerprint.to_owned());
        let lease_ms = i64::try_from(lease_ms).unwrap_or(i64::MAX);
        self.run(move |connection| {
            let now = now_ms();
            let tx = connection.transaction_with_behavior(TransactionBehavior::Immediate)?;
            let taken: Option<String> =
                tx.query_row(TAKE_CALL, params![key, tool, owner, now.saturating_add(lease_ms), now, fingerprint], |row| row.get(0)).optional()?;
            let slot = if taken.as_deref() == Some(owner.as_str()) {
                CallSlot::Taken
            } else {
                let found: (String, Option<String>, Option<String>) = tx.query_row(
                    "SELECT state, result, arguments_sha256 FROM mcp_call_results WHERE idempotency_key = ?1 AND tool = ?2",
                    [&key, &tool],
                    |row| Ok((row.get(0)?, row.get(1)?, row.get(2)?)),
                )?;
                match found {
                    (state, Some(result), fingerprint) if state == "done" => CallSlot::Done(RecordedCall { result, fingerprint }),
                    _ => CallSlot::Running,
                }
            };
            tx.commit()?;
            Ok(slot)
        })
    }

    fn renew_call(&self, key: &str, tool: &str, owner: &str, lease_ms: u64) -> BoxFuture<'_, Result<bool>> {
        let (key, tool, owner) = (key.to_owned(), tool.to_owned(), owner.to_owned());
        let lease_ms = i64::try_from(lease_ms).unwrap_or(i64::MAX);
        self.run(move |connection| {
            let renewed = connection.execute(
                "UPDATE mcp_call_results SET lease_until = ?4 WHERE idempotency_key = ?1 AND tool = ?2 AND owner = ?3 AND state = 'running'",
                params![key, tool, owner, now_ms().saturating_add(lease_ms)],
            )?;
            Ok(renewed > 0)
        })
    }

    fn finish_call(
        &self,
        key: &str,
        tool: &str,
        fingerprint: &str,
        owner: &str,
        result: Option<&str>,
    ) -> BoxFuture<'_, Result<Option<RecordedCall>>> {
        let (key, tool, owner, result) = (key.to_owned(), tool.to_owned(), owner.to_owned(), result.map(str::to_owned));
        let fingerprint = fingerprint.to_owned();
        self.run(move |connection| {
            let Some(result) = result else {
                connection.execute(
                    "DELETE FROM mcp_call_results WHERE idempotency_key = ?1 AND tool = ?2 AND owner = ?3 AND state = 'running'",
                    [&key, &tool, &owner],
                )?;
                return Ok(None);
            };
            connection.execute(
                "UPDATE mcp_call_results SET state = 'done', result = ?4 WHERE idempotency_key = ?1 AND tool = ?2 AND owner = ?3 AND state = 'running'",
                params![key, tool, owner, result],
            )?;
            // Ours, or (had the lease lapsed and another owner finished first) theirs; ours if none is recorded.
            let recorded = connection.query_row(DONE_RESULT, [&key, &tool], recorded_call).optional()?;
            Ok(Some(recorded.unwrap_or_else(|| RecordedCall::new(&result, &fingerprint))))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::journal::contract;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_sqlite_journal_keeps_the_contract_and_two_handles_share_the_first_claim() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("journal.db");
        contract::claims_are_first_writer_wins(&SqliteJournal::open_lazily(&path)).await;
        contract::counters_stop_at_the_limit_and_give_back(&SqliteJournal::open_lazily(&path)).await;
        contract::calls_are_taken_once_and_recorded(&SqliteJournal::open_lazily(&path)).await;
        // Two handles (as two processes would) racing for one key: one value wins for both.
        let (a, b) = (Arc::new(SqliteJournal::open_lazily(&path)), Arc::new(SqliteJournal::open_lazily(&path)));
        let racing = |journal: Arc<SqliteJournal>, value: &'static str| {
            tokio::spawn(async move { journal.claim("race", value).await.unwrap() })
        };
        let (first, second) = tokio::join!(racing(a.clone(), "a"), racing(b.clone(), "b"));
        assert_eq!(first.unwrap(), second.unwrap());
        let mode: String =
            Connection::open(&path).unwrap().query_row("PRAGMA journal_mode", [], |row| row.get(0)).unwrap();
        assert_eq!(mode, "wal");
    }

    fn schema_version(path: &std::path::Path) -> i64 {
        Connection::open(path).unwrap().query_row(JOURNAL_VERSION_QUERY, [], |r| r.get(0)).unwrap()
    }

    /// After a migration: a new call is taken and recorded, and the file says it is at the current schema.
    async fn records_new_calls_at_the_current_schema(
        journal: &SqliteJournal,
        path: &std::path::Path,
        key: &str,
        fingerprint: &str,
    ) {
        assert_eq!(journal.take_call(key, "t", fingerprint, "o", 1_000).await.unwrap(), CallSlot::Taken);
        assert_eq!(
            journal.finish_call(key, "t", fingerprint, "o", Some("{}")).await.unwrap(),
            Some(RecordedCall::new("{}", fingerprint))
        );
        assert_eq!(schema_version(path), JOURNAL_SCHEMA_VERSION);
    }

    #[tokio::test]
    async fn a_schema_one_journal_gains_the_call_results_table() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("journal.db");
        SqliteJournal::open_lazily(&path).claim("__mcp_pin__:s:t", "pinned").await.unwrap();
        let old = Connection::open(&path).unwrap();
        old.execute_batch(
            "DROP TABLE mcp_call_results; UPDATE mcpferry_schema SET version = 1 WHERE component = 'journal'",
        )
        .unwrap();
        drop(old);
        let journal = SqliteJournal::open_lazily(&path);
        assert_eq!(journal.get("__mcp_pin__:s:t").await.unwrap().as_deref(), Some("pinned"), "kept");
        records_new_calls_at_the_current_schema(&journal, &path, "k", "f").await;
    }

    #[tokio::test]
    async fn a_schema_two_journal_gains_the_fingerprint_column_and_keeps_its_results() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("journal.db");
        let journal = SqliteJournal::open_lazily(&path);
        journal.take_call("old", "t", "f", "o", 1_000).await.unwrap();
        journal.finish_call("old", "t", "f", "o", Some("{\"old\":1}")).await.unwrap();
        drop(journal);
        Connection::open(&path)
            .unwrap()
            .execute_batch("ALTER TABLE mcp_call_results DROP COLUMN arguments_sha256; UPDATE mcpferry_schema SET version = 2 WHERE component = 'journal'")
            .unwrap();
        let journal = SqliteJournal::open_lazily(&path);
        let kept = RecordedCall { result: "{\"old\":1}".into(), fingerprint: None };
        assert_eq!(
            journal.call_result("old", "t").await.unwrap(),
            Some(kept),
            "kept, with no fingerprint (any arguments match)"
        );
        records_new_calls_at_the_current_schema(&journal, &path, "new", "g").await;
    }

    #[tokio::test]
    async fn a_newer_journal_schema_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("journal.db");
        SqliteJournal::open_lazily(&path).get("k").await.unwrap();
        Connection::open(&path)
            .unwrap()
            .execute("UPDATE mcpferry_schema SET version = 99 WHERE component = 'journal'", [])
            .unwrap();
        let error = SqliteJournal::open_lazily(&path).get("k").await.unwrap_err();
        assert_eq!(error.code(), "mcp_storage_error");
        assert!(error.to_string().contains("newer"), "{error}");
    }
}
