//! What the CLI's test binaries share: the Redis they run against, unique prefixes, the Node
//! oracle (`integration-tests/node`) that fills queues, and raw key helpers.
//!
//! Each test binary uses a different part of it.
#![allow(dead_code)]

use std::io::Write as _;
use std::path::PathBuf;
use std::process::{Child, Command, Output, Stdio};

use bullmq_redis::fred::prelude::{Client, ClientLike, KeysInterface};
use bullmq_redis::fred::types::{ClusterHash, CustomCommand};
use bullmq_redis::ConnectionConfig;
use serde_json::{json, Value};

/// `REDIS_URL`, or the local default.
pub(crate) fn redis_url() -> String {
    std::env::var("REDIS_URL")
        .ok()
        .filter(|u| !u.is_empty())
        .unwrap_or_else(|| "redis://127.0.0.1:6379".into())
}

/// A prefix no other test (or earlier run) uses.
pub(crate) fn unique_prefix(tag: &str) -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    format!("cli-{tag}-{}-{nanos}", std::process::id())
}

/// Runs `bullmq ARGS…` against [`redis_url`], stdout and stderr captured.
pub(crate) fn bullmq(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_bullmq"))
        .args(args)
        .env("REDIS_URL", redis_url())
        .env_remove("RUST_LOG")
        .output()
        .expect("the bullmq binary runs")
}

/// Stdout or stderr as text.
pub(crate) fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// Milliseconds since the epoch.
pub(crate) fn now_ms() -> u64 {
    u64::try_from(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .expect("after the epoch")
            .as_millis(),
    )
    .expect("fits")
}

/// Where the oracle scripts live.
pub(crate) fn node_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../integration-tests/node")
}

/// Whether the Node oracle can run: `false` (with a loud note) when `node` is not installed; a
/// panic when it is but `npm ci` was not run, so a broken setup never passes silently.
pub(crate) fn node_available() -> bool {
    let found = Command::new("node")
        .arg("--version")
        .output()
        .is_ok_and(|out| out.status.success());
    if !found {
        eprintln!(
            "\n!!! SKIPPING: `node` is not on PATH; these tests need Node BullMQ to fill the \
             queues (install Node.js >= 18 and run `npm ci` in integration-tests/node) !!!\n"
        );
        return false;
    }
    assert!(
        node_dir().join("node_modules/bullmq/package.json").exists(),
        "`node` is installed but the oracle is not: run `npm ci` in {}",
        node_dir().display()
    );
    true
}

/// Starts `node SCRIPT` with `arg` on its stdin (for scripts that run while the test goes on).
pub(crate) fn spawn_node(script: &str, arg: &Value) -> Child {
    let mut child = Command::new("node")
        .arg(script)
        .current_dir(node_dir())
        .env("REDIS_URL", redis_url())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("could not start `node {script}`: {e}"));
    let mut stdin = child.stdin.take().expect("node's stdin");
    stdin
        .write_all(arg.to_string().as_bytes())
        .expect("the argument is sent to node");
    drop(stdin);
    child
}

/// The JSON document a finished Node script printed.
pub(crate) fn node_result(script: &str, child: Child) -> Value {
    let out = child.wait_with_output().expect("node finishes");
    assert!(
        out.status.success(),
        "`node {script}` failed ({}):\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("the oracle prints JSON")
}

/// Runs `node SCRIPT` with `arg` to the end; the JSON it printed.
pub(crate) fn node(script: &str, arg: &Value) -> Value {
    node_result(script, spawn_node(script, arg))
}

/// Adds `jobs` (`[{name, data, opts}]`) with Node; returns their ids.
pub(crate) fn node_add(prefix: &str, queue: &str, jobs: Value) -> Vec<String> {
    let out = node(
        "add_jobs.js",
        &json!({"queue": queue, "prefix": prefix, "jobs": jobs}),
    );
    out["ids"]
        .as_array()
        .expect("ids")
        .iter()
        .map(|id| id.as_str().expect("string id").to_owned())
        .collect()
}

/// A Node worker (concurrency 1, so in order; `extra` adds run_worker.js options) processes
/// `count` attempts and stops; its report.
pub(crate) fn node_work(prefix: &str, queue: &str, count: usize, extra: Value) -> Value {
    let mut arg =
        json!({"queue": queue, "prefix": prefix, "stopAfter": count, "timeoutMs": 60_000});
    if let (Value::Object(arg), Value::Object(extra)) = (&mut arg, extra) {
        arg.extend(extra);
    }
    let out = node("run_worker.js", &arg);
    assert_eq!(
        out["stoppedBy"], "count",
        "the Node worker ran out of time: {out}"
    );
    out
}

/// A raw client on [`redis_url`].
pub(crate) async fn connect() -> Client {
    ConnectionConfig::from_url(&redis_url())
        .expect("REDIS_URL parses")
        .connect(None)
        .await
        .expect("Redis answers")
}

/// Keys under `prefix`, sorted.
pub(crate) async fn keys_under(prefix: &str) -> Vec<String> {
    let client = connect().await;
    let mut keys: Vec<String> = client
        .custom(
            CustomCommand::new_static("KEYS", ClusterHash::Random, false),
            vec![format!("{prefix}:*")],
        )
        .await
        .expect("KEYS");
    client.quit().await.expect("QUIT");
    keys.sort();
    keys
}

/// Deletes every key under `prefix`.
pub(crate) async fn delete_under(prefix: &str) {
    let keys = keys_under(prefix).await;
    if !keys.is_empty() {
        let client = connect().await;
        let _: i64 = client.del(keys).await.expect("DEL");
        client.quit().await.expect("QUIT");
    }
}

/// The JSON a successful `--json` run printed.
pub(crate) fn json_of(output: &Output) -> Value {
    assert!(
        output.status.success(),
        "bullmq failed ({}): {}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice(&output.stdout).expect("--json prints JSON")
}
