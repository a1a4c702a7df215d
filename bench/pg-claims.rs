//! N workers × M servers connecting and claiming baselines at once, against Postgres and against one
//! SQLite file on the same machine: claims per second and latency percentiles.
//!
//!   cargo bench --no-default-features --bench pg-claims
//!   PG_CLAIMS_WORKERS=32 PG_CLAIMS_SERVERS=100 PG_CLAIMS_ROUNDS=5 cargo bench --no-default-features --bench pg-claims
//!
//! Each worker is a store of its own (for Postgres its own pool, for SQLite its own connection to the
//! file), as separate worker processes would be. A worker "connects" to its M servers at once, as a
//! toolset does: for each server it saves the row and claims the baseline (the two store calls a
//! connection makes); one claim is that pair, timed from before the save to after the claim. Every
//! round starts on an empty database. Postgres is a throwaway cluster started by
//! scripts/pg-cluster.mjs with fsync on (--durable), so both stores commit durably.

use mcpferry::protocol::mcp::Tool;
use mcpferry::store::{fingerprints, ConnectionStore, PostgresOptions, PostgresStore, SqliteStore, StoredServer};
use serde_json::json;
use std::io::{BufRead, BufReader, Write};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::Barrier;

/// Workers, servers per worker and rounds when the environment says nothing.
const DEFAULT_WORKERS: usize = 16;
const DEFAULT_SERVERS: usize = 50;
const DEFAULT_ROUNDS: usize = 3;
/// Tools in each server's listing: a typical small server.
const TOOLS_PER_SERVER: usize = 10;

fn setting(name: &str, default: usize) -> usize {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

fn listing(server: usize) -> Vec<Tool> {
    (0..TOOLS_PER_SERVER)
        .map(|n| Tool {
            name: format!("tool_{n}"),
            title: None,
            description: Some(format!("Tool {n} of server {server}: does one thing well.")),
            input_schema: json!({ "type": "object", "properties": { "q": { "type": "string" } }, "required": ["q"] })
                .into(),
            output_schema: None,
            annotations: None,
            ui: None,
        })
        .collect()
}

fn row(server: usize) -> StoredServer {
    StoredServer {
        id: format!("server{server}:0123456789ab"),
        name: format!("server{server}"),
        kind: "streamable-http".to_owned(),
        url: Some(format!("https://mcp{server}.example.com/mcp")),
        tools: listing(server),
        tool_fingerprints: None,
        listed_at: None,
        ttl_ms: None,
        cache_scope: None,
    }
}

struct Round {
    wall: Duration,
    latencies: Vec<Duration>,
}

/// One round: every worker's store already open (not timed), then all claim at once.
async fn round(stores: Vec<Arc<dyn ConnectionStore>>, servers: usize) -> Round {
    let start = Arc::new(Barrier::new(stores.len() + 1));
    let workers: Vec<_> = stores
        .into_iter()
        .map(|store| {
            let start = Arc::clone(&start);
            tokio::spawn(async move {
                start.wait().await;
                let claims: Vec<_> = (0..servers)
                    .map(|server| {
                        let store = Arc::clone(&store);
                        tokio::spawn(async move {
                            let began = Instant::now();
                            let row = row(server);
                            let seen = fingerprints(&row.tools);
                            store.save(row).await.expect("save");
                            store.claim_baseline(&format!("server{server}:0123456789ab"), seen).await.expect("claim");
                            began.elapsed()
                        })
                    })
                    .collect();
                let mut latencies = Vec::with_capacity(servers);
                for claim in claims {
                    latencies.push(claim.await.unwrap());
                }
                latencies
            })
        })
        .collect();
    start.wait().await;
    let began = Instant::now();
    let mut latencies = Vec::new();
    for worker in workers {
        latencies.extend(worker.await.unwrap());
    }
    Round { wall: began.elapsed(), latencies }
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let index = ((sorted.len() as f64 * p).ceil() as usize).clamp(1, sorted.len()) - 1;
    sorted[index]
}

fn summary(label: &str, rounds: &[Round], workers: usize, servers: usize) -> String {
    let mut rates: Vec<f64> = rounds.iter().map(|r| (workers * servers) as f64 / r.wall.as_secs_f64()).collect();
    rates.sort_by(f64::total_cmp);
    let mut all: Vec<Duration> = rounds.iter().flat_map(|r| r.latencies.iter().copied()).collect();
    all.sort();
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    format!(
        "| {label} | {workers} × {servers} | {:.0} | {:.1} | {:.1} | {:.1} |",
        rates[rates.len() / 2],
        ms(percentile(&all, 0.50)),
        ms(percentile(&all, 0.99)),
        ms(*all.last().unwrap()),
    )
}

/// A durable throwaway cluster; deleted when its stdin closes (when this process exits).
struct Cluster {
    url: String,
    _child: std::process::Child,
}

fn start_cluster() -> Cluster {
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("scripts").join("pg-cluster.mjs");
    let mut child = Command::new("node")
        .arg(script)
        .args(["serve", "--durable"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("node");
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
    let cluster: serde_json::Value = serde_json::from_str(&line).expect("the cluster started (see its error above)");
    Cluster { url: cluster["url"].as_str().unwrap().to_owned(), _child: child }
}

async fn fresh_database(url: &str, name: &str) -> String {
    let (client, connection) = tokio_postgres::connect(url, tokio_postgres::NoTls).await.unwrap();
    tokio::spawn(connection);
    client.batch_execute(&format!("CREATE DATABASE {name}")).await.unwrap();
    let mut fresh = url::Url::parse(url).unwrap();
    fresh.set_path(name);
    fresh.to_string()
}

fn main() {
    let workers = setting("PG_CLAIMS_WORKERS", DEFAULT_WORKERS);
    let servers = setting("PG_CLAIMS_SERVERS", DEFAULT_SERVERS);
    let rounds = setting("PG_CLAIMS_ROUNDS", DEFAULT_ROUNDS);
    let pool_size = setting("PG_CLAIMS_POOL", mcpferry::store::postgres::DEFAULT_POOL_SIZE);
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap();
    let cluster = start_cluster();
    let scratch = std::env::temp_dir().join(format!("mcpferry-pg-claims-{}", std::process::id()));
    std::fs::create_dir_all(&scratch).unwrap();

    let (postgres, sqlite) = runtime.block_on(async {
        let mut postgres = Vec::new();
        let mut sqlite = Vec::new();
        for n in 0..rounds {
            let url = fresh_database(&cluster.url, &format!("claims_{n}")).await;
            let mut stores: Vec<Arc<dyn ConnectionStore>> = Vec::new();
            for _ in 0..workers {
                let mut options = PostgresOptions::new(&url);
                options.pool_size = pool_size;
                options.statement_timeout = Duration::from_secs(30);
                options.pool_wait_timeout = Duration::from_secs(30);
                stores.push(Arc::new(PostgresStore::connect(options).await.expect("connect")));
            }
            postgres.push(round(stores, servers).await);

            let file = scratch.join(format!("claims-{n}.db"));
            let mut stores: Vec<Arc<dyn ConnectionStore>> = Vec::new();
            for _ in 0..workers {
                let file = file.clone();
                let store = tokio::task::spawn_blocking(move || SqliteStore::open(&file)).await.unwrap().expect("open");
                stores.push(Arc::new(store));
            }
            sqlite.push(round(stores, servers).await);
            eprint!(".");
            std::io::stderr().flush().unwrap();
        }
        (postgres, sqlite)
    });
    let _ = std::fs::remove_dir_all(&scratch);

    println!("\n{rounds} rounds; {TOOLS_PER_SERVER} tools per server; Postgres pool of {pool_size} per worker\n");
    println!("| store | workers × servers | claims/s (median round) | p50 ms | p99 ms | max ms |");
    println!("|---|---|---|---|---|---|");
    println!("{}", summary("Postgres 15 (durable)", &postgres, workers, servers));
    println!("{}", summary("SQLite (WAL, one file)", &sqlite, workers, servers));
    drop(cluster);
}
