//! The firewall journal on Postgres against a real server: a fleet of workers (each with its own
//! journal, so its own pool) racing for one pin agrees on one winner; racing for the last slots of a
//! per-run ceiling, exactly the limit get one; the tables are versioned under their own component.

mod support_pg;

use mcpferry::store::journal::McpJournal;
use mcpferry::store::journal_postgres::{PostgresJournal, JOURNAL_SCHEMA_VERSION};
use mcpferry::store::PostgresOptions;
use std::sync::Arc;
use support_pg::{admin_client, fresh_database, shared_url};
use tokio::sync::Barrier;

/// Workers of a fleet, each a task with a journal of its own.
const WORKERS: usize = 16;
/// The ceiling the racing workers reserve against.
const LIMIT: u64 = 5;

fn journal(url: &str) -> Arc<PostgresJournal> {
    Arc::new(PostgresJournal::new(PostgresOptions::new(url)).unwrap())
}

/// Runs `work` on WORKERS tasks at once (a barrier just before the racing step); their outputs in order.
async fn racing<T: Send + 'static, Fut: std::future::Future<Output = T> + Send + 'static>(
    url: &str,
    work: impl Fn(usize, Arc<PostgresJournal>) -> Fut,
) -> Vec<T> {
    let start = Arc::new(Barrier::new(WORKERS));
    let tasks: Vec<_> = (0..WORKERS)
        .map(|n| {
            let journal = journal(url);
            let start = Arc::clone(&start);
            let step = work(n, journal.clone());
            tokio::spawn(async move {
                journal.get("warm-up").await.unwrap(); // connected and set up before the race
                start.wait().await;
                step.await
            })
        })
        .collect();
    let mut outputs = Vec::new();
    for task in tasks {
        outputs.push(task.await.unwrap());
    }
    outputs
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_fleet_agrees_on_one_pin_and_never_overshoots_a_ceiling() {
    let url = fresh_database(&shared_url()).await;
    let winners = racing(&url, |n, journal| async move {
        journal.claim("__mcp_pin__:github:echo", &format!("hash-{n}")).await.unwrap()
    })
    .await;
    assert!(winners.iter().all(|w| w == &winners[0]), "{winners:?}");
    assert_eq!(journal(&url).get("__mcp_pin__:github:echo").await.unwrap().as_deref(), Some(winners[0].as_str()));

    let slots =
        racing(&url, |_, journal| async move { journal.reserve("issue-42", "github:echo", LIMIT).await.unwrap() })
            .await;
    let mut taken: Vec<u64> = slots.iter().flatten().copied().collect();
    taken.sort_unstable();
    assert_eq!(taken, (1..=LIMIT).collect::<Vec<_>>(), "exactly the limit, each count once");
    let one = journal(&url);
    assert_eq!(one.count("issue-42", "github:echo").await.unwrap(), LIMIT);
    one.release("issue-42", "github:echo").await.unwrap();
    assert_eq!(
        one.reserve("issue-42", "github:echo", LIMIT).await.unwrap(),
        Some(LIMIT),
        "a released slot is free again"
    );
    assert_eq!(one.reserve("issue-43", "github:echo", LIMIT).await.unwrap(), Some(1), "per run");
    for _ in 0..=LIMIT {
        one.release("issue-43", "github:echo").await.unwrap();
    }
    assert_eq!(one.count("issue-43", "github:echo").await.unwrap(), 0, "never below zero");
    assert_eq!(one.count("nobody", "github:echo").await.unwrap(), 0);

    let admin = admin_client(&url).await;
    let version: i32 =
        admin.query_one("SELECT version FROM mcpferry_schema WHERE component = 'journal'", &[]).await.unwrap().get(0);
    assert_eq!(version, JOURNAL_SCHEMA_VERSION);
    let servers_table: Option<String> =
        admin.query_one("SELECT to_regclass('mcp_servers')::text", &[]).await.unwrap().get(0);
    assert_eq!(servers_table, None, "the journal sets up only its own tables");
}

#[tokio::test]
async fn a_newer_journal_schema_is_refused() {
    let url = fresh_database(&shared_url()).await;
    journal(&url).get("k").await.unwrap();
    admin_client(&url)
        .await
        .execute("UPDATE mcpferry_schema SET version = 99 WHERE component = 'journal'", &[])
        .await
        .unwrap();
    let error = journal(&url).get("k").await.unwrap_err();
    assert_eq!(error.code(), "mcp_storage_error");
    assert!(error.to_string().contains("newer"), "{error}");
}
