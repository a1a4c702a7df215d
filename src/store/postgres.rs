//! A store in one PostgreSQL database, shared by every worker of a fleet.
//!
//! The rows are the SQLite store's, column for column (JSON text in `tools` and `tool_fingerprints`,
//! `updated_at` in milliseconds): the public catalogue and the drift baseline, never a secret. What
//! makes first-writer-wins hold across machines is that every write is one statement the database
//! serialises on the row: the baseline claim is `UPDATE … WHERE tool_fingerprints IS NULL`, and only
//! when that changed nothing is the winner's baseline read back; `save`'s upsert keeps a recorded
//! baseline in SQL (`COALESCE`), so no interleaving of workers can replace one.
//!
//! Connections come from a deadpool pool over tokio-postgres; TLS is rustls with ring (no system TLS
//! library). The pool is built at once and connects on first use, as does the schema setup, so
//! constructing a store never blocks; a failed setup is retried by the next call. Every failure is
//! `mcp_storage_error`, and no message carries the password or the connection string.

use super::now_ms;
use super::sqlite::{decode, encode, RawRow};
use super::{store_error, unknown_row_error, ConnectionStore, Fingerprints, StoredServer};
use crate::error::{McpError, Result};
use crate::guard::redact::Secrets;

use crate::limits::{MAX_POSTGRES_POOL_SIZE, MAX_POSTGRES_TIMEOUT};
use deadpool_postgres::{Hook, HookError, Manager, ManagerConfig, Pool, PoolError, RecyclingMethod, Runtime};
use futures_util::future::BoxFuture;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::CertificateDer;
use std::fmt;
use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::OnceCell;
use tokio_postgres::config::{Host, SslMode};
use tokio_postgres_rustls::MakeRustlsConnect;

/// The schema of the connection-store tables this build writes. Bump it, and add a step to
/// [`MIGRATIONS`], whenever they change.
pub const SCHEMA_VERSION: i32 = 2;
/// This store's row in `mcpferry_schema`; other mcpferry tables (the firewall journal) version
/// themselves under their own component name in the same table.
pub const SCHEMA_COMPONENT: &str = "connection_store";
/// The advisory lock every mcpferry schema change takes, so workers starting together set the schema
/// up once ("mcpferry" in ASCII).
pub const SCHEMA_LOCK_KEY: i64 = 0x6d63_7066_6572_7279;

/// Connections one store keeps open at most. Small on purpose: a worker makes few store calls, and a
/// fleet's connections add up (workers × pool ≤ the server's max_connections); bench/pg-claims.md
/// measured more claims per second with pools of 1-4 than of 8-16 when 16 workers claim at once.
pub const DEFAULT_POOL_SIZE: usize = 4;
/// How long opening a connection (TCP, TLS, authentication) may take.
pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// How long one statement may run on the server before it cancels it (`statement_timeout`).
pub const DEFAULT_STATEMENT_TIMEOUT: Duration = Duration::from_secs(5);
/// How long a call waits for a free connection when all of the pool's are busy.
pub const DEFAULT_POOL_WAIT_TIMEOUT: Duration = Duration::from_secs(5);
/// Added to the statement timeout for a call's own deadline, so the server's cancel (which also ends
/// the statement there) normally comes first and the client one only covers a silent network.
const CALL_DEADLINE_SLACK: Duration = Duration::from_secs(1);
/// Claims retried when the recorded baseline vanished between the claim and its read-back (a
/// concurrent re-trust); each retry is a fresh attempt to record ours.
pub(super) const CLAIM_ATTEMPTS: usize = 3;

/// `mcpferry_schema` is shared by every mcpferry component; `IF NOT EXISTS` because another
/// component may have made it. The connection-store table itself is created plainly: a same-named
/// table left by something else is an error, not adopted.
pub(super) const CREATE_VERSION_TABLE: &str = "CREATE TABLE IF NOT EXISTS mcpferry_schema (
    component TEXT PRIMARY KEY,
    version INTEGER NOT NULL
)";

/// Schema steps by the version they lead to: `MIGRATIONS[n]` takes version n to n + 1.
/// Ids compare byte by byte ("C"), as in the SQLite and memory stores, whatever the database's locale:
/// `list()` orders the same everywhere, and the primary key's index serves that order.
const MIGRATIONS: &[&str] = &[
    "CREATE TABLE mcp_servers (
    id TEXT COLLATE \"C\" PRIMARY KEY,
    name TEXT NOT NULL,
    type TEXT NOT NULL,
    url TEXT,
    tools TEXT NOT NULL,
    tool_fingerprints TEXT,
    updated_at BIGINT
)",
    // Caching hints of the catalogue (2026-07-28); rows from version 1 read as "no hint".
    "ALTER TABLE mcp_servers ADD COLUMN listed_at BIGINT, ADD COLUMN ttl_ms BIGINT, ADD COLUMN cache_scope TEXT",
];

const SELECT_COLUMNS: &str =
    "SELECT id, name, type, url, tools, tool_fingerprints, listed_at, ttl_ms, cache_scope FROM mcp_servers";

/// The baseline survives every upsert: COALESCE keeps a recorded one and only fills a missing one.
/// The conflict path locks the row and sees its latest version, so a concurrent claim is never undone.
/// The caching hints go with the catalogue they describe.
const UPSERT: &str = "INSERT INTO mcp_servers (id, name, type, url, tools, tool_fingerprints, updated_at, listed_at, ttl_ms, cache_scope)
    VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)
    ON CONFLICT (id) DO UPDATE SET
        name = excluded.name,
        type = excluded.type,
        url = excluded.url,
        tools = excluded.tools,
        tool_fingerprints = COALESCE(mcp_servers.tool_fingerprints, excluded.tool_fingerprints),
        updated_at = excluded.updated_at,
        listed_at = excluded.listed_at,
        ttl_ms = excluded.ttl_ms,
        cache_scope = excluded.cache_scope";

/// The claim itself: records ours only where none is. Concurrent claimers queue on the row lock; each
/// later one re-checks the condition against the committed winner and changes nothing.
const CLAIM: &str = "UPDATE mcp_servers SET tool_fingerprints = $2, updated_at = $3
    WHERE id = $1 AND tool_fingerprints IS NULL
    RETURNING tool_fingerprints";

/// Whether the connection is encrypted. Without one here, the connection string's `sslmode` decides
/// (`disable`, `prefer` — the default — or `require`). With rustls the server's certificate is always
/// verified when TLS is used, against [`PostgresOptions::ca_certificates_pem`] or the system's roots.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PostgresTls {
    Disable,
    Prefer,
    Require,
}

/// How to reach the database and how to bound each call. `PostgresOptions::new(url)` gives the
/// defaults above.
#[derive(Clone)]
pub struct PostgresOptions {
    /// `postgres://user:password@host:port/db?sslmode=require` or `host=… user=… password=…`.
    pub connection_string: String,
    pub pool_size: usize,
    pub connect_timeout: Duration,
    pub statement_timeout: Duration,
    pub pool_wait_timeout: Duration,
    /// Overrides the connection string's `sslmode`.
    pub tls: Option<PostgresTls>,
    /// PEM certificates to trust for the server's certificate, instead of the system's roots.
    pub ca_certificates_pem: Option<String>,
}

impl PostgresOptions {
    pub fn new(connection_string: impl Into<String>) -> Self {
        Self {
            connection_string: connection_string.into(),
            pool_size: DEFAULT_POOL_SIZE,
            connect_timeout: DEFAULT_CONNECT_TIMEOUT,
            statement_timeout: DEFAULT_STATEMENT_TIMEOUT,
            pool_wait_timeout: DEFAULT_POOL_WAIT_TIMEOUT,
            tls: None,
            ca_certificates_pem: None,
        }
    }
}

impl fmt::Debug for PostgresOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // The connection string holds the password: never printed.
        f.debug_struct("PostgresOptions")
            .field("pool_size", &self.pool_size)
            .field("connect_timeout", &self.connect_timeout)
            .field("statement_timeout", &self.statement_timeout)
            .field("pool_wait_timeout", &self.pool_wait_timeout)
            .field("tls", &self.tls)
            .finish_non_exhaustive()
    }
}

impl PostgresOptions {
    /// `createPostgresMcpConnectionStore`'s (or `createPostgresMcpJournal`'s, named by `factory`) options
    /// (camelCase JSON) as the engine's. Messages name the option and what it must be, never the value
    /// given: a misplaced connection string is not echoed.
    pub fn from_json(json: &str, factory: &str) -> Result<PostgresOptions> {
        let invalid = |what: String| McpError::config(format!("{factory}: {what}"));
        let value: serde_json::Value =
            serde_json::from_str(json).map_err(|_| invalid("takes a connection string or an options object".into()))?;
        let serde_json::Value::Object(fields) = value else {
            return Err(invalid("takes a connection string or an options object".into()));
        };
        let Some(serde_json::Value::String(connection_string)) = fields.get("connectionString") else {
            return Err(invalid("`connectionString` is required and must be a string".into()));
        };
        let mut options = PostgresOptions::new(connection_string.clone());
        let milliseconds = |name: &str, value: &serde_json::Value| -> Result<Duration> {
            match value.as_u64() {
                Some(ms) if ms >= 1 && u128::from(ms) <= MAX_POSTGRES_TIMEOUT.as_millis() => {
                    Ok(Duration::from_millis(ms))
                }
                _ => Err(invalid(format!(
                    "`{name}` must be a whole number of milliseconds from 1 to {}",
                    MAX_POSTGRES_TIMEOUT.as_millis()
                ))),
            }
        };
        for (name, value) in &fields {
            match name.as_str() {
                "connectionString" => {}
                "poolSize" => {
                    options.pool_size = value
                        .as_u64()
                        .filter(|size| *size >= 1 && *size <= MAX_POSTGRES_POOL_SIZE as u64)
                        .ok_or_else(|| {
                            invalid(format!("`poolSize` must be a whole number from 1 to {}", MAX_POSTGRES_POOL_SIZE))
                        })? as usize;
                }
                "connectTimeoutMs" => options.connect_timeout = milliseconds(name, value)?,
                "statementTimeoutMs" => options.statement_timeout = milliseconds(name, value)?,
                "poolWaitTimeoutMs" => options.pool_wait_timeout = milliseconds(name, value)?,
                "tls" => {
                    options.tls = Some(match value.as_str() {
                        Some("disable") => PostgresTls::Disable,
                        Some("prefer") => PostgresTls::Prefer,
                        Some("require") => PostgresTls::Require,
                        _ => return Err(invalid("`tls` must be \"disable\", \"prefer\" or \"require\"".into())),
                    });
                }
                "caCertificatesPem" => {
                    options.ca_certificates_pem = Some(
                        value
                            .as_str()
                            .ok_or_else(|| invalid("`caCertificatesPem` must be a string of PEM certificates".into()))?
                            .to_owned(),
                    );
                }
                other => return Err(invalid(format!("unknown option {}", option_name(other)))),
            }
        }
        Ok(options)
    }
}

/// An unknown option's name as quoted in an error: only when it looks like a name at all.
fn option_name(name: &str) -> String {
    const LONGEST_NAME_CHARS: usize = 40;
    let plain = !name.is_empty()
        && name.len() <= LONGEST_NAME_CHARS
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    if plain {
        format!("{name:?}")
    } else {
        "(a key that is not an option name)".to_owned()
    }
}

pub struct PostgresStore {
    pool: Pool,
    schema: OnceCell<()>,
    /// Where the store points, without credentials: `user@host:port/dbname`, for messages.
    target: String,
    /// The password and the whole connection string, replaced in every message that leaves the store.
    secrets: Arc<Secrets>,
    pool_size: usize,
    pool_wait_timeout: Duration,
    call_deadline: Duration,
}

impl fmt::Debug for PostgresStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PostgresStore").field("target", &self.target).finish_non_exhaustive()
    }
}

impl PostgresStore {
    /// Checks the options and builds the pool; nothing is connected yet (the first call connects and
    /// sets up the schema). Errors here are about the options: `mcp_config_invalid`.
    pub fn new(options: PostgresOptions) -> Result<Self> {
        let secrets = Arc::new(Secrets::default());
        secrets.add(&options.connection_string);
        // Parse errors of tokio-postgres name the offending option, not its value, but a malformed
        // string is still never echoed back.
        let mut config = tokio_postgres::Config::from_str(&options.connection_string).map_err(|error| {
            McpError::config(format!("the Postgres connection string is invalid: {}", describe(&error, &secrets)))
        })?;
        if let Some(password) = config.get_password() {
            secrets.add_bytes(password);
        }
        if options.pool_size == 0 {
            return Err(McpError::config("the Postgres pool size must be at least 1"));
        }
        for (what, value) in [
            ("connect timeout", options.connect_timeout),
            ("statement timeout", options.statement_timeout),
            ("pool wait timeout", options.pool_wait_timeout),
        ] {
            if value.is_zero() {
                return Err(McpError::config(format!("the Postgres {what} must be more than 0 ms")));
            }
        }

        config.connect_timeout(options.connect_timeout);
        if config.get_application_name().is_none() {
            config.application_name("mcpferry");
        }
        if let Some(tls) = options.tls {
            config.ssl_mode(match tls {
                PostgresTls::Disable => SslMode::Disable,
                PostgresTls::Prefer => SslMode::Prefer,
                PostgresTls::Require => SslMode::Require,
            });
        }
        let connector = tls_connector(config.get_ssl_mode(), options.ca_certificates_pem.as_deref())?;
        let target = describe_target(&config);

        // Every new connection, before its first use: the server cancels a statement that runs longer
        // (and frees its locks); and READ COMMITTED whatever the database's default, because each
        // statement must see the commits it waited for (a queued claim sees the winner's baseline, a
        // queued schema setup sees the tables) where REPEATABLE READ or SERIALIZABLE would fail them
        // with a serialization error instead. A SET rather than startup options, which poolers such
        // as PgBouncer refuse.
        let session_setup: Arc<str> = format!(
            "SET statement_timeout = {}; SET default_transaction_isolation = 'read committed'",
            options.statement_timeout.as_millis()
        )
        .into();
        let set_up_session = Hook::async_fn(move |client, _| {
            let setup = Arc::clone(&session_setup);
            Box::pin(async move { client.batch_execute(&setup).await.map_err(HookError::Backend) })
        });

        let manager = Manager::from_config(
            config,
            connector,
            // A connection the server closed (a restart) is noticed on checkout and replaced.
            ManagerConfig { recycling_method: RecyclingMethod::Fast },
        );
        let pool = Pool::builder(manager)
            .max_size(options.pool_size)
            .wait_timeout(Some(options.pool_wait_timeout))
            .create_timeout(Some(options.connect_timeout))
            .recycle_timeout(Some(options.connect_timeout))
            .runtime(Runtime::Tokio1)
            .post_create(set_up_session)
            .build()
            .map_err(|error| McpError::config(format!("cannot build the Postgres pool: {error}")))?;
        Ok(Self {
            pool,
            schema: OnceCell::new(),
            target,
            secrets,
            pool_size: options.pool_size,
            pool_wait_timeout: options.pool_wait_timeout,
            call_deadline: options.statement_timeout + CALL_DEADLINE_SLACK,
        })
    }

    /// [`PostgresStore::new`], then connects and sets up the schema, so a wrong address, password or
    /// schema is reported now rather than by the first call.
    pub async fn connect(options: PostgresOptions) -> Result<Self> {
        let store = Self::new(options)?;
        store.ensure_schema().await?;
        Ok(store)
    }

    /// Closes every pooled connection now rather than when the store is dropped; later calls fail
    /// with `mcp_storage_error`. Calls in flight finish on the connection they hold.
    pub fn close(&self) {
        self.pool.close();
    }

    /// `user@host:port/dbname`: where this store points, without credentials.
    pub fn target(&self) -> &str {
        &self.target
    }

    /// Creates or migrates the tables once per store; a failure is returned to this call and the next
    /// call tries again.
    async fn ensure_schema(&self) -> Result<()> {
        self.schema
            .get_or_try_init(|| async {
                let mut client = self.client().await?;
                let tx = client.transaction().await.map_err(|e| self.sql_error("cannot set up the schema", &e))?;
                migrate(&tx).await.map_err(|e| match e {
                    Migration::Sql(e) => self.sql_error("cannot set up the schema", &e),
                    Migration::Newer(found) => store_error(format!(
                        "Postgres at {} has connection-store schema version {found}, newer than the {SCHEMA_VERSION} this mcpferry understands; upgrade mcpferry to use it",
                        self.target
                    )),
                })?;
                tx.commit().await.map_err(|e| self.sql_error("cannot set up the schema", &e))
            })
            .await
            .map(|_| ())
    }

    /// A connection from the pool, or a storage error that says why there is none.
    pub(super) async fn client(&self) -> Result<deadpool_postgres::Object> {
        self.pool.get().await.map_err(|error| match error {
            PoolError::Timeout(deadpool_postgres::TimeoutType::Wait) => store_error(format!(
                "Postgres at {}: all {} connections of the pool stayed busy for {} ms",
                self.target,
                self.pool_size,
                self.pool_wait_timeout.as_millis()
            )),
            PoolError::Timeout(_) => {
                store_error(format!("Postgres at {}: timed out connecting to the database", self.target))
            }
            PoolError::Backend(e) => self.sql_error("cannot connect", &e),
            PoolError::PostCreateHook(HookError::Backend(e)) => self.sql_error("cannot set up the session", &e),
            PoolError::Closed => store_error(format!("Postgres at {}: the store was closed", self.target)),
            other => store_error(format!("Postgres at {}: {}", self.target, self.secrets.redact(&other.to_string()))),
        })
    }

    /// Runs one call: the schema first (once), then `work` with a pooled connection, all within the
    /// call's deadline.
    fn run<'a, T, F, Fut>(&'a self, work: F) -> BoxFuture<'a, Result<T>>
    where
        T: Send + 'a,
        F: FnOnce(&'a Self, deadpool_postgres::Object) -> Fut + Send + 'a,
        Fut: std::future::Future<Output = Result<T>> + Send + 'a,
    {
        Box::pin(async move {
            let call = async {
                self.ensure_schema().await?;
                let client = self.client().await?;
                work(self, client).await
            };
            let deadline = self.call_deadline();
            tokio::time::timeout(deadline, call).await.unwrap_or_else(|_| {
                Err(store_error(format!("Postgres at {}: no answer within {} ms", self.target, deadline.as_millis())))
            })
        })
    }

    /// The bound of one whole call: connecting and waiting for the pool have their own bounds; this
    /// one catches the rest.
    pub(super) fn call_deadline(&self) -> Duration {
        self.call_deadline + self.pool_wait_timeout + self.pool.timeouts().create.unwrap_or(DEFAULT_CONNECT_TIMEOUT)
    }

    pub(super) fn sql_error(&self, what: &str, error: &tokio_postgres::Error) -> McpError {
        store_error(format!("Postgres at {}: {what}: {}", self.target, describe(error, &self.secrets)))
    }
}

impl ConnectionStore for PostgresStore {
    fn get(&self, id: &str) -> BoxFuture<'_, Result<Option<StoredServer>>> {
        let id = id.to_owned();
        self.run(move |store, client| async move {
            let row = client
                .query_opt(&format!("{SELECT_COLUMNS} WHERE id = $1"), &[&id])
                .await
                .map_err(|e| store.sql_error("cannot read", &e))?;
            row.map(|row| read_row(&row).map_err(|e| store.sql_error("cannot read", &e))?.decode()).transpose()
        })
    }

    fn list(&self) -> BoxFuture<'_, Result<Vec<StoredServer>>> {
        self.run(|store, client| async move {
            let rows = client
                .query(&format!("{SELECT_COLUMNS} ORDER BY id"), &[])
                .await
                .map_err(|e| store.sql_error("cannot list", &e))?;
            rows.iter().map(|row| read_row(row).map_err(|e| store.sql_error("cannot list", &e))?.decode()).collect()
        })
    }

    fn save(&self, row: StoredServer) -> BoxFuture<'_, Result<()>> {
        self.run(move |store, client| async move {
            let tools = encode(&row.tools, &row.id, "tools")?;
            let baseline =
                row.tool_fingerprints.as_ref().map(|fp| encode(fp, &row.id, "tool_fingerprints")).transpose()?;
            client
                .execute(
                    UPSERT,
                    &[
                        &row.id,
                        &row.name,
                        &row.kind,
                        &row.url,
                        &tools,
                        &baseline,
                        &now_ms(),
                        &row.listed_at,
                        &row.ttl_ms.map(|ttl| i64::try_from(ttl).unwrap_or(i64::MAX)),
                        &super::scope_text(row.cache_scope),
                    ],
                )
                .await
                .map_err(|e| store.sql_error("cannot save", &e))?;
            Ok(())
        })
    }

    fn remove(&self, id: &str) -> BoxFuture<'_, Result<()>> {
        let id = id.to_owned();
        self.run(move |store, client| async move {
            client
                .execute("DELETE FROM mcp_servers WHERE id = $1", &[&id])
                .await
                .map_err(|e| store.sql_error("cannot remove", &e))?;
            Ok(())
        })
    }

    fn claim_baseline(&self, id: &str, fingerprints: Fingerprints) -> BoxFuture<'_, Result<Fingerprints>> {
        let id = id.to_owned();
        self.run(move |store, client| async move {
            let ours = encode(&fingerprints, &id, "tool_fingerprints")?;
            let fail = |e: tokio_postgres::Error| store.sql_error("cannot claim the baseline", &e);
            for _ in 0..CLAIM_ATTEMPTS {
                if client.query_opt(CLAIM, &[&id, &ours, &now_ms()]).await.map_err(fail)?.is_some() {
                    return Ok(fingerprints);
                }
                // Ours was not recorded: either there is no row or someone else's baseline stands. A
                // new statement, so it sees the winner's commit that the claim waited for.
                let recorded = client
                    .query_opt("SELECT tool_fingerprints FROM mcp_servers WHERE id = $1", &[&id])
                    .await
                    .map_err(fail)?;
                match recorded {
                    None => return Err(unknown_row_error(&id)),
                    Some(row) => match row.try_get::<_, Option<String>>(0).map_err(fail)? {
                        Some(text) => return decode(&text, &id, "tool_fingerprints"),
                        // Cleared (re-trusted) in between: claim again.
                        None => continue,
                    },
                }
            }
            Err(store_error(format!(
                "the baseline of server {id:?} was cleared {CLAIM_ATTEMPTS} times while being claimed; try again"
            )))
        })
    }

    fn clear_baseline(&self, id: &str) -> BoxFuture<'_, Result<()>> {
        let id = id.to_owned();
        // One statement: its own transaction, all or nothing.
        self.run(move |store, client| async move {
            client
                .execute(
                    "UPDATE mcp_servers SET tool_fingerprints = NULL, updated_at = $1 WHERE id = $2",
                    &[&now_ms(), &id],
                )
                .await
                .map_err(|e| store.sql_error("cannot clear the baseline", &e))?;
            Ok(())
        })
    }
}

enum Migration {
    Sql(tokio_postgres::Error),
    Newer(i32),
}

impl From<tokio_postgres::Error> for Migration {
    fn from(error: tokio_postgres::Error) -> Self {
        Migration::Sql(error)
    }
}

/// Brings the tables to SCHEMA_VERSION inside `tx`. The advisory lock (released at commit or
/// rollback) makes workers starting together take turns, so each step runs exactly once; the
/// version is read under the lock.
async fn migrate(tx: &deadpool_postgres::Transaction<'_>) -> std::result::Result<(), Migration> {
    tx.execute("SELECT pg_advisory_xact_lock($1)", &[&SCHEMA_LOCK_KEY]).await?;
    tx.batch_execute(CREATE_VERSION_TABLE).await?;
    let found: i32 = tx
        .query_opt("SELECT version FROM mcpferry_schema WHERE component = $1", &[&SCHEMA_COMPONENT])
        .await?
        .map(|row| row.try_get(0))
        .transpose()?
        .unwrap_or(0);
    if found > SCHEMA_VERSION {
        return Err(Migration::Newer(found));
    }
    for step in &MIGRATIONS[usize::try_from(found).unwrap_or(0)..] {
        tx.batch_execute(step).await?;
    }
    if found < SCHEMA_VERSION {
        tx.execute(
            "INSERT INTO mcpferry_schema (component, version) VALUES ($1, $2)
                ON CONFLICT (component) DO UPDATE SET version = excluded.version",
            &[&SCHEMA_COMPONENT, &SCHEMA_VERSION],
        )
        .await?;
    }
    Ok(())
}

/// The rustls connector: ring, and the caller's roots or the system's. Roots are loaded only when
/// TLS may be used.
fn tls_connector(mode: SslMode, ca_pem: Option<&str>) -> Result<MakeRustlsConnect> {
    let mut roots = rustls::RootCertStore::empty();
    match ca_pem {
        Some(pem) => {
            let certificates: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(pem.as_bytes())
                .collect::<std::result::Result<_, _>>()
                .map_err(|e| McpError::config(format!("the Postgres CA certificates are not valid PEM: {e}")))?;
            if certificates.is_empty() {
                return Err(McpError::config("the Postgres CA certificates hold no certificate"));
            }
            for certificate in certificates {
                roots
                    .add(certificate)
                    .map_err(|e| McpError::config(format!("a Postgres CA certificate cannot be used: {e}")))?;
            }
        }
        None if mode != SslMode::Disable => {
            // Unreadable system certificates are skipped; with none at all a TLS connection fails
            // with a verification error naming the server, which says more than failing here.
            roots.add_parsable_certificates(rustls_native_certs::load_native_certs().certs);
        }
        None => {}
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| McpError::config(format!("cannot set up TLS for Postgres: {e}")))?
        .with_root_certificates(roots)
        .with_no_client_auth();
    Ok(MakeRustlsConnect::new(config))
}

fn describe_target(config: &tokio_postgres::Config) -> String {
    let host = match config.get_hosts().first() {
        Some(Host::Tcp(name)) => name.clone(),
        #[cfg(unix)]
        Some(Host::Unix(path)) => path.display().to_string(),
        None => "localhost".to_owned(),
    };
    let port = config.get_ports().first().copied().unwrap_or(5432);
    let user = config.get_user().unwrap_or("?");
    let db = config.get_dbname().unwrap_or(user);
    format!("{user}@{host}:{port}/{db}")
}

/// An error and its causes, one after the other (tokio-postgres keeps the useful part, the server's
/// message or the OS error, in the cause), with every secret replaced.
fn describe(error: &(dyn std::error::Error + 'static), secrets: &Secrets) -> String {
    let mut text = error.to_string();
    let mut cause = error.source();
    while let Some(inner) = cause {
        let next = inner.to_string();
        if !text.ends_with(&next) {
            text.push_str(": ");
            text.push_str(&next);
        }
        cause = inner.source();
    }
    secrets.redact(&text)
}

fn read_row(row: &tokio_postgres::Row) -> std::result::Result<RawRow, tokio_postgres::Error> {
    Ok(RawRow {
        id: row.try_get(0)?,
        name: row.try_get(1)?,
        kind: row.try_get(2)?,
        url: row.try_get(3)?,
        tools: row.try_get(4)?,
        tool_fingerprints: row.try_get(5)?,
        listed_at: row.try_get(6)?,
        ttl_ms: row.try_get(7)?,
        cache_scope: row.try_get(8)?,
    })
}
