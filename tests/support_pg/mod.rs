//! Real PostgreSQL for the store tests: the throwaway clusters of scripts/pg-cluster.mjs.
//!
//! `npm test` starts one and passes its URL in MCPFERRY_TEST_PG_URL; a plain `cargo test` starts its
//! own (once per test binary). Either way nothing is skipped: a cluster that can't start fails the
//! test with the script's reason. A served cluster is stopped and deleted by the script when this
//! process ends, however it ends (its stdin closes).

#![allow(dead_code)] // each test file uses part of it

use std::io::{BufRead, BufReader, Read, Write};
use std::path::PathBuf;
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;

pub const URL_VARIABLE: &str = "MCPFERRY_TEST_PG_URL";

/// A cluster run by `pg-cluster.mjs serve`: stopped and started on request, deleted when dropped or
/// when this process exits.
pub struct ServedCluster {
    pub url: String,
    pub dir: String,
    /// With `--tls`: the PEM file of the CA that signed the server's certificate.
    pub ca_file: Option<String>,
    child: Child,
    stdin: Option<ChildStdin>,
    stdout: BufReader<ChildStdout>,
}

impl ServedCluster {
    pub fn start() -> ServedCluster {
        Self::start_with(&[])
    }

    /// With `pg-cluster.mjs serve` options (`--tls`, `--durable`).
    pub fn start_with(options: &[&str]) -> ServedCluster {
        let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("scripts").join("pg-cluster.mjs");
        let mut child = Command::new("node")
            .arg(&script)
            .arg("serve")
            .args(options)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| {
                panic!("Postgres for the tests could not start: cannot run node {}: {e}", script.display())
            });
        let stdin = child.stdin.take();
        let mut stdout = BufReader::new(child.stdout.take().unwrap());
        let mut first = String::new();
        stdout.read_line(&mut first).unwrap();
        let Ok(cluster) = serde_json::from_str::<serde_json::Value>(&first) else {
            let mut reason = String::new();
            child.stderr.take().unwrap().read_to_string(&mut reason).unwrap();
            let _ = child.wait();
            panic!("Postgres for the tests could not start: {}", reason.trim());
        };
        ServedCluster {
            url: cluster["url"].as_str().unwrap().to_owned(),
            dir: cluster["dir"].as_str().unwrap().to_owned(),
            ca_file: cluster["caFile"].as_str().map(str::to_owned),
            child,
            stdin,
            stdout,
        }
    }

    /// Stops the server (fast shutdown: sessions are ended), keeping its data.
    pub fn stop(&mut self) {
        self.command("stop", "stopped");
    }

    /// Starts it again on the same port.
    pub fn restart(&mut self) {
        self.command("start", "started");
    }

    fn command(&mut self, command: &str, expected: &str) {
        let stdin = self.stdin.as_mut().unwrap();
        writeln!(stdin, "{command}").unwrap();
        stdin.flush().unwrap();
        let mut answer = String::new();
        self.stdout.read_line(&mut answer).unwrap();
        assert_eq!(answer.trim(), expected, "pg-cluster.mjs {command}");
    }
}

impl Drop for ServedCluster {
    fn drop(&mut self) {
        // End of stdin: the script stops the server and deletes the folder.
        drop(self.stdin.take());
        let _ = self.child.wait();
    }
}

/// The cluster every test of this binary shares (each test in databases of its own).
pub fn shared_url() -> String {
    if let Ok(url) = std::env::var(URL_VARIABLE) {
        return url;
    }
    static OWN: OnceLock<ServedCluster> = OnceLock::new();
    OWN.get_or_init(ServedCluster::start).url.clone()
}

/// A new, empty database on the cluster at `url`, and the URL that reaches it.
pub async fn fresh_database(url: &str) -> String {
    fresh_database_with(url, "").await
}

/// The same, with `CREATE DATABASE` options (a locale, say).
pub async fn fresh_database_with(url: &str, options: &str) -> String {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let name = format!("t_{}_{}", std::process::id(), NEXT.fetch_add(1, Ordering::Relaxed));
    let admin = admin_client(url).await;
    admin.batch_execute(&format!("CREATE DATABASE {name} {options}")).await.unwrap();
    let mut fresh = url::Url::parse(url).unwrap();
    fresh.set_path(&name);
    fresh.to_string()
}

/// A plain connection (no pool, no store) for a test to look at or lock the tables behind a store.
pub async fn admin_client(url: &str) -> tokio_postgres::Client {
    let (client, connection) = tokio_postgres::connect(url, tokio_postgres::NoTls).await.unwrap();
    tokio::spawn(connection);
    client
}

/// `url` with its password replaced.
pub fn with_password(url: &str, password: &str) -> String {
    let mut changed = url::Url::parse(url).unwrap();
    changed.set_password(Some(password)).unwrap();
    changed.to_string()
}

pub fn password_of(url: &str) -> String {
    url::Url::parse(url).unwrap().password().unwrap().to_owned()
}
