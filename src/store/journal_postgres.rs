//! The firewall journal in a Postgres database shared by a fleet: pins and per-run counters agree
//! across workers, as docs/fleet-journal.md designed. It uses the connection store's pool, limits and
//! error handling ([`PostgresStore`]), and versions its own tables under the component `journal` in
//! `mcpferry_schema`, set up under the same advisory lock. A claim is an `INSERT … ON CONFLICT DO
//! NOTHING RETURNING` and, when it lost, a read-back in a new statement (which sees the winner's
//! commit); a reservation is one conditional upsert, so concurrent workers never overshoot a ceiling.

use super::journal::McpJournal;
use super::postgres::{PostgresOptions, PostgresStore, CLAIM_ATTEMPTS, CREATE_VERSION_TABLE, SCHEMA_LOCK_KEY};
use super::{now_ms, store_error};
use crate::error::Result;
use futures_util::future::BoxFuture;
use tokio::sync::OnceCell;

/// The journal tables' schema this build writes (row `journal` of `mcpferry_schema`).
pub const JOURNAL_SCHEMA_VERSION: i32 = 1;
const JOURNAL_COMPONENT: &str = "journal";

/// docs/fleet-journal.md, version 1 (the call-results table comes with `createMcpServer({ journal })`).
const SCHEMA: &str = "CREATE TABLE mcp_journal (
    key TEXT COLLATE \"C\" PRIMARY KEY,
    value TEXT NOT NULL,
    created_at BIGINT NOT NULL
);
CREATE TABLE mcp_run_counters (
    run_id TEXT COLLATE \"C\" NOT NULL,
    counter TEXT COLLATE \"C\" NOT NULL,
    count BIGINT NOT NULL CHECK (count >= 0),
    updated_at BIGINT NOT NULL,
    PRIMARY KEY (run_id, counter)
);
CREATE INDEX mcp_run_counters_updated_at ON mcp_run_counters (updated_at);";

const CLAIM: &str =
    "INSERT INTO mcp_journal (key, value, created_at) VALUES ($1, $2, $3) ON CONFLICT (key) DO NOTHING RETURNING value";
const READ: &str = "SELECT value FROM mcp_journal WHERE key = $1";
const RESERVE: &str = "INSERT INTO mcp_run_counters (run_id, counter, count, updated_at) VALUES ($1, $2, 1, $4)
    ON CONFLICT (run_id, counter) DO UPDATE SET count = mcp_run_counters.count + 1, updated_at = excluded.updated_at
        WHERE mcp_run_counters.count < $3
    RETURNING count";
const RELEASE: &str =
    "UPDATE mcp_run_counters SET count = count - 1, updated_at = $3 WHERE run_id = $1 AND counter = $2 AND count > 0";
const COUNT: &str = "SELECT count FROM mcp_run_counters WHERE run_id = $1 AND counter = $2";

pub struct PostgresJournal {
    store: PostgresStore,
    schema: OnceCell<()>,
}

impl PostgresJournal {
    /// Returns at once: the pool connects, and the tables are set up, on first use.
    pub fn new(options: PostgresOptions) -> Result<Self> {
        Ok(PostgresJournal { store: PostgresStore::new(options)?, schema: OnceCell::new() })
    }

    pub fn target(&self) -> &str {
        self.store.target()
    }

    pub fn close(&self) {
        self.store.close();
    }

    async fn ensure_schema(&self) -> Result<()> {
        self.schema
            .get_or_try_init(|| async {
                let store = &self.store;
                let fail = |e: tokio_postgres::Error| store.sql_error("cannot set up the journal's tables", &e);
                let mut client = store.client().await?;
                let tx = client.transaction().await.map_err(fail)?;
                tx.execute("SELECT pg_advisory_xact_lock($1)", &[&SCHEMA_LOCK_KEY]).await.map_err(fail)?;
                tx.batch_execute(CREATE_VERSION_TABLE).await.map_err(fail)?;
                let found: Option<i32> = tx
                    .query_opt("SELECT version FROM mcpferry_schema WHERE component = $1", &[&JOURNAL_COMPONENT])
                    .await
                    .map_err(fail)?
                    .map(|row| row.try_get(0))
                    .transpose()
                    .map_err(fail)?;
                match found {
                    Some(version) if version > JOURNAL_SCHEMA_VERSION => {
                        return Err(store_error(format!(
                            "Postgres at {} has journal schema version {version}, newer than the {JOURNAL_SCHEMA_VERSION} this mcpferry understands; upgrade mcpferry to use it",
                            store.target()
                        )))
                    }
                    Some(_) => {}
                    None => {
                        tx.batch_execute(SCHEMA).await.map_err(fail)?;
                        tx.execute(
                            "INSERT INTO mcpferry_schema (component, version) VALUES ($1, $2)",
                            &[&JOURNAL_COMPONENT, &JOURNAL_SCHEMA_VERSION],
                        )
                        .await
                        .map_err(fail)?;
                    }
                }
                tx.commit().await.map_err(fail)
            })
            .await
            .map(|_| ())
    }

    /// One call: the tables first (once), then `work` with a pooled connection, within the call's deadline.
    fn run<'a, T, F, Fut>(&'a self, what: &'static str, work: F) -> BoxFuture<'a, Result<T>>
    where
        T: Send + 'a,
        F: FnOnce(deadpool_postgres::Object) -> Fut + Send + 'a,
        Fut: std::future::Future<Output = std::result::Result<T, tokio_postgres::Error>> + Send + 'a,
    {
        Box::pin(async move {
            let store = &self.store;
            let call = async {
                self.ensure_schema().await?;
                let client = store.client().await?;
                work(client).await.map_err(|e| store.sql_error(what, &e))
            };
            let deadline = store.call_deadline();
            tokio::time::timeout(deadline, call).await.unwrap_or_else(|_| {
                Err(store_error(format!(
                    "Postgres at {}: no answer within {} ms",
                    store.target(),
                    deadline.as_millis()
                )))
            })
        })
    }
}

/// A stored count as the journal's (never negative: the table checks it).
fn count_of(value: i64) -> u64 {
    u64::try_from(value).unwrap_or(0)
}

impl McpJournal for PostgresJournal {
    fn claim(&self, key: &str, value: &str) -> BoxFuture<'_, Result<String>> {
        let (key, value) = (key.to_owned(), value.to_owned());
        Box::pin(async move {
            for _ in 0..CLAIM_ATTEMPTS {
                let (key, value) = (key.clone(), value.clone());
                let won = self
                    .run("cannot claim", move |client| async move {
                        if let Some(row) = client.query_opt(CLAIM, &[&key, &value, &now_ms()]).await? {
                            return Ok(Some(row.try_get::<_, String>(0)?));
                        }
                        // Someone else's claim stands: a new statement sees its commit.
                        client.query_opt(READ, &[&key]).await?.map(|row| row.try_get(0)).transpose()
                    })
                    .await?;
                // None: the pin was deleted between the two statements (an operator re-pinning): claim again.
                if let Some(winner) = won {
                    return Ok(winner);
                }
            }
            Err(store_error(format!(
                "the journal key {key:?} was deleted {CLAIM_ATTEMPTS} times while being claimed; try again"
            )))
        })
    }

    fn get(&self, key: &str) -> BoxFuture<'_, Result<Option<String>>> {
        let key = key.to_owned();
        self.run("cannot read", move |client| async move {
            client.query_opt(READ, &[&key]).await?.map(|row| row.try_get(0)).transpose()
        })
    }

    fn reserve(&self, run_id: &str, counter: &str, limit: u64) -> BoxFuture<'_, Result<Option<u64>>> {
        let (run_id, counter) = (run_id.to_owned(), counter.to_owned());
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        self.run("cannot reserve a call", move |client| async move {
            let row = client.query_opt(RESERVE, &[&run_id, &counter, &limit, &now_ms()]).await?;
            Ok(row.map(|row| row.try_get::<_, i64>(0)).transpose()?.map(count_of))
        })
    }

    fn release(&self, run_id: &str, counter: &str) -> BoxFuture<'_, Result<()>> {
        let (run_id, counter) = (run_id.to_owned(), counter.to_owned());
        self.run("cannot release a call", move |client| async move {
            client.execute(RELEASE, &[&run_id, &counter, &now_ms()]).await.map(drop)
        })
    }

    fn count(&self, run_id: &str, counter: &str) -> BoxFuture<'_, Result<u64>> {
        let (run_id, counter) = (run_id.to_owned(), counter.to_owned());
        self.run("cannot count", move |client| async move {
            let row = client.query_opt(COUNT, &[&run_id, &counter]).await?;
            Ok(row.map(|row| row.try_get::<_, i64>(0)).transpose()?.map_or(0, count_of))
        })
    }
}
