//! Runs the Node BullMQ side of a benchmark (`benches/node/*.js`) and reads its JSON result.

use std::path::PathBuf;

use anyhow::{bail, Context, Result};
use serde_json::Value;

/// `benches/node`.
fn node_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("node")
}

/// Whether Node and the oracle package (`integration-tests/node/node_modules/bullmq`) exist.
pub(crate) fn available() -> bool {
    let oracle = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../integration-tests/node/node_modules/bullmq/package.json");
    let node = std::process::Command::new("node")
        .arg("--version")
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false);
    node && oracle.exists()
}

/// `integration-tests/node`, the oracle's own scripts (Node's PostgreSQL migrator, read-backs).
fn oracle_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../integration-tests/node")
}

/// Runs `node {script} {arg}` (a `benches/node` script) and parses the JSON it prints.
pub(crate) async fn run(script: &str, arg: &Value, redis_url: &str) -> Result<Value> {
    run_in(node_dir(), script, arg, redis_url).await
}

/// Runs one of the oracle's scripts in `integration-tests/node` (`pg_migrate.js`,
/// `read_jobs.js`, …: they take the same single JSON argument) and parses its JSON.
pub(crate) async fn run_oracle(script: &str, arg: &Value) -> Result<Value> {
    run_in(oracle_dir(), script, arg, "redis://127.0.0.1:6379").await
}

async fn run_in(dir: PathBuf, script: &str, arg: &Value, redis_url: &str) -> Result<Value> {
    let output = tokio::process::Command::new("node")
        .arg(script)
        .arg(arg.to_string())
        .current_dir(dir)
        .env("REDIS_URL", redis_url)
        .kill_on_drop(true)
        .output()
        .await
        .with_context(|| format!("could not start node {script}"))?;
    if !output.status.success() {
        bail!(
            "node {script} failed ({}): {}",
            output.status,
            String::from_utf8_lossy(&output.stderr)
        );
    }
    serde_json::from_slice(&output.stdout).with_context(|| {
        format!(
            "node {script} did not print JSON: {}",
            String::from_utf8_lossy(&output.stdout)
        )
    })
}
