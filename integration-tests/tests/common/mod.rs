//! Shared helpers of the integration tests: Redis access, unique queue names, the Node oracle,
//! polling, event-stream normalisation; PostgreSQL fixtures in [`pg`].
//!
//! Each test file does `mod common;` and uses what it needs, so some helpers are unused in some
//! files.
#![allow(dead_code, unreachable_pub)]

pub mod pg;
pub mod pg_server;

use std::collections::hash_map::RandomState;
use std::future::Future;
use std::hash::{BuildHasher, Hasher};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use fred::prelude::{Client, ClientLike, KeysInterface, StreamsInterface};
use fred::types::{ClusterHash, CustomCommand, Value};
use serde_json::Value as Json;

/// The Redis every test talks to: `REDIS_URL`, default `redis://127.0.0.1:6379`.
pub fn redis_url() -> String {
    match std::env::var("REDIS_URL") {
        Ok(url) if !url.is_empty() => url,
        _ => "redis://127.0.0.1:6379".to_string(),
    }
}

/// The key prefix the tests use (Node's default).
pub const PREFIX: &str = "bull";

/// A queue name no other test (or earlier run) uses: `{prefix}-{random}-{counter}`.
pub fn unique_queue(prefix: &str) -> String {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let mut hasher = RandomState::new().build_hasher();
    hasher.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or_default(),
    );
    hasher.write_u32(std::process::id());
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    format!("{prefix}-{:08x}-{n}", hasher.finish() as u32)
}

/// Directory of the Node oracle scripts (`integration-tests/node`).
pub fn node_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("node")
}

/// Whether the Node oracle can run. When `node` is missing this prints a loud message, so a test
/// that returns early because of it is visible in the output; when `node` exists but the oracle
/// package is not installed it panics, because that is a broken checkout, not a missing tool.
pub fn node_available() -> bool {
    let found = std::process::Command::new("node")
        .arg("--version")
        .output()
        .map(|out| out.status.success())
        .unwrap_or(false);
    if !found {
        eprintln!(
            "\n!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!\n\
             !!! SKIPPING Node interop test: `node` is not on PATH.                      !!!\n\
             !!! Install Node.js >= 18 and run `npm ci` in integration-tests/node.      !!!\n\
             !!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!\n"
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

/// Runs `integration-tests/node/{script}` with `arg` as its JSON argument (sent on stdin, so
/// its size is not limited by the OS's argument length) and returns the JSON document it
/// prints. The error carries the script's stderr.
pub async fn run_node(script: &str, arg: &Json) -> Result<Json> {
    use tokio::io::AsyncWriteExt;

    let mut child = tokio::process::Command::new("node")
        .arg(script)
        .current_dir(node_dir())
        .env("REDIS_URL", redis_url())
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .with_context(|| format!("could not start `node {script}`"))?;
    let mut stdin = child.stdin.take().context("node's stdin")?;
    let input = arg.to_string();
    // Write concurrently with reading the output, so neither pipe can fill up and block.
    let writer = async move {
        stdin.write_all(input.as_bytes()).await?;
        stdin.shutdown().await
    };
    let (written, output) = tokio::join!(writer, child.wait_with_output());
    let output = output.with_context(|| format!("`node {script}` did not finish"))?;
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    if !output.status.success() {
        bail!(
            "`node {script} {arg}` failed ({}):\n{stderr}",
            output.status
        );
    }
    written.with_context(|| format!("could not send the argument to `node {script}`"))?;
    serde_json::from_str(stdout.trim()).with_context(|| {
        format!("`node {script}` printed something that is not JSON:\n{stdout}\nstderr:\n{stderr}")
    })
}

/// Runs `node -e script` in `integration-tests/node` and returns the JSON it prints.
pub async fn node_eval(script: &str) -> Result<Json> {
    let output = tokio::process::Command::new("node")
        .arg("-e")
        .arg(script)
        .current_dir(node_dir())
        .env("REDIS_URL", redis_url())
        .kill_on_drop(true)
        .output()
        .await
        .context("could not start `node -e`")?;
    if !output.status.success() {
        bail!(
            "`node -e` failed ({}): {}",
            output.status,
            String::from_utf8_lossy(&output.stderr)
        );
    }
    serde_json::from_slice(&output.stdout).context("`node -e` did not print JSON")
}

/// Polls `condition` every 25 ms until it returns true; fails after `timeout`.
pub async fn eventually<F, Fut>(what: &str, timeout: Duration, mut condition: F) -> Result<()>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    let deadline = Instant::now() + timeout;
    loop {
        if condition().await {
            return Ok(());
        }
        if Instant::now() >= deadline {
            bail!("timed out after {timeout:?} waiting for: {what}");
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
}

/// A plain fred client on [`redis_url`] for raw assertions.
pub async fn raw_client() -> Result<Client> {
    let config = fred::prelude::Config::from_url(&redis_url())?;
    let client = fred::prelude::Builder::from_config(config).build()?;
    client.init().await?;
    Ok(client)
}

/// `KEYS pattern` (tests only: the keyspace of a test queue is small).
async fn keys_matching(client: &Client, pattern: &str) -> Result<Vec<String>> {
    let keys: Vec<String> = client
        .custom(
            CustomCommand::new_static("KEYS", ClusterHash::Random, false),
            vec![pattern.to_string()],
        )
        .await?;
    Ok(keys)
}

/// Escapes the glob metacharacters of a queue name for `KEYS`.
fn glob_escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if matches!(c, '*' | '?' | '[' | ']' | '\\') {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// Every key of `queue` under [`PREFIX`], sorted.
pub async fn queue_keys(queue: &str) -> Result<Vec<String>> {
    let client = raw_client().await?;
    let mut keys = keys_matching(&client, &format!("{PREFIX}:{}:*", glob_escape(queue))).await?;
    client.quit().await?;
    keys.sort();
    Ok(keys)
}

/// How many keys exist under `{PREFIX}:{queue}:`.
pub async fn count_keys(queue: &str) -> Result<usize> {
    Ok(queue_keys(queue).await?.len())
}

/// Deletes every key of `queue` (call at the end of a test; also fine on an absent queue).
pub async fn cleanup(queue: &str) -> Result<()> {
    let client = raw_client().await?;
    let keys = keys_matching(&client, &format!("{PREFIX}:{}:*", glob_escape(queue))).await?;
    for chunk in keys.chunks(500) {
        let _: i64 = client.del(chunk.to_vec()).await?;
    }
    client.quit().await?;
    Ok(())
}

/// One entry of a queue's `events` stream, without its stream id: the event name and the other
/// fields in stream order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StreamEvent {
    /// The stream entry id (`ms-seq`); not compared by [`normalize_events`].
    pub id: String,
    /// The `event` field.
    pub event: String,
    /// The remaining fields, in order.
    pub fields: Vec<(String, String)>,
}

/// The whole `events` stream of `queue`, in order.
pub async fn read_events(queue: &str) -> Result<Vec<StreamEvent>> {
    let client = raw_client().await?;
    let raw: Value = client
        .xrange(format!("{PREFIX}:{queue}:events"), "-", "+", None)
        .await?;
    client.quit().await?;
    parse_xrange(raw)
}

fn value_string(value: Value) -> Result<String> {
    value
        .as_string()
        .ok_or_else(|| anyhow!("expected a string in the events stream, got {value:?}"))
}

fn parse_xrange(raw: Value) -> Result<Vec<StreamEvent>> {
    let entries = match raw {
        Value::Array(entries) => entries,
        Value::Null => return Ok(Vec::new()),
        other => bail!("unexpected XRANGE reply {other:?}"),
    };
    let mut events = Vec::with_capacity(entries.len());
    for entry in entries {
        let Value::Array(mut pair) = entry else {
            bail!("unexpected XRANGE entry");
        };
        if pair.len() != 2 {
            bail!("XRANGE entry with {} parts", pair.len());
        }
        let flat = pair.pop().unwrap_or(Value::Null);
        let id = value_string(pair.pop().unwrap_or(Value::Null))?;
        let Value::Array(flat) = flat else {
            bail!("XRANGE entry fields are not an array");
        };
        let mut event = String::new();
        let mut fields = Vec::with_capacity(flat.len() / 2);
        let mut iter = flat.into_iter();
        while let (Some(k), Some(v)) = (iter.next(), iter.next()) {
            let (k, v) = (value_string(k)?, value_string(v)?);
            if k == "event" && event.is_empty() {
                event = v;
            } else {
                fields.push((k, v));
            }
        }
        events.push(StreamEvent { id, event, fields });
    }
    Ok(events)
}

/// The events of a stream read by `collect_events.js` (range mode), in the same shape as
/// [`read_events`].
pub fn events_from_node(output: &Json) -> Result<Vec<StreamEvent>> {
    let entries = output["events"]
        .as_array()
        .ok_or_else(|| anyhow!("no events array in {output}"))?;
    let mut events = Vec::with_capacity(entries.len());
    for entry in entries {
        let id = entry["id"].as_str().unwrap_or_default().to_string();
        let mut event = String::new();
        let mut fields = Vec::new();
        for pair in entry["fields"].as_array().into_iter().flatten() {
            let k = pair[0].as_str().unwrap_or_default().to_string();
            let v = pair[1].as_str().unwrap_or_default().to_string();
            if k == "event" && event.is_empty() {
                event = v;
            } else {
                fields.push((k, v));
            }
        }
        events.push(StreamEvent { id, event, fields });
    }
    Ok(events)
}

/// Makes two runs of the same scenario comparable: drops stream ids, and replaces values that
/// differ between runs by nature (job ids mapped through `id_map` when given, timestamps) with
/// placeholders. Field names and order are kept.
pub fn normalize_events(events: &[StreamEvent], id_map: &dyn Fn(&str) -> String) -> Vec<String> {
    events
        .iter()
        .map(|e| {
            let fields: Vec<String> = e
                .fields
                .iter()
                .map(|(k, v)| {
                    let v = match k.as_str() {
                        "jobId" => id_map(v),
                        // Absolute times and delays computed from "now" differ between runs.
                        "timestamp" | "delay" | "processedOn" | "finishedOn" => "<time>".into(),
                        _ => v.clone(),
                    };
                    format!("{k}={v}")
                })
                .collect();
            format!("{} {}", e.event, fields.join(" "))
        })
        .collect()
}

/// Parses a JSON string stored in a job hash (data, opts), failing loudly on bad JSON.
pub fn parse_json_field(raw: &Json, field: &str) -> Json {
    let text = raw[field]
        .as_str()
        .unwrap_or_else(|| panic!("field {field} missing in {raw}"));
    serde_json::from_str(text).unwrap_or_else(|e| panic!("field {field} is not JSON ({e}): {text}"))
}

/// Current time in ms since the epoch.
pub fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or_default()
}

/// Opens our `Queue` named `name` on [`redis_url`] with the default prefix.
pub async fn open_queue(name: &str) -> Result<ractor_bullmq::Queue> {
    let connection = ractor_bullmq::ConnectionConfig::from_url(&redis_url())?;
    let queue =
        ractor_bullmq::Queue::new(name, ractor_bullmq::QueueOptions::new(connection)).await?;
    Ok(queue)
}

/// One field (`name`, `id`, …) of every connection in `CLIENT LIST` of `client`'s server, for
/// tests that count connections.
pub async fn client_list_field(client: &Client, field: &str) -> Result<Vec<String>> {
    let list: String = client
        .custom(
            CustomCommand::new_static("CLIENT", ClusterHash::Random, false),
            vec!["LIST".to_owned()],
        )
        .await?;
    let prefix = format!("{field}=");
    Ok(list
        .lines()
        .filter_map(|line| {
            line.split(' ')
                .find_map(|f| f.strip_prefix(prefix.as_str()))
        })
        .map(str::to_owned)
        .collect())
}

/// Names of `queue`'s connections on `client`'s server: ours and Node's are all named
/// `{prefix}:{base64(queue)}` or start with it followed by `:`.
pub async fn queue_client_names(client: &Client, queue: &str) -> Result<Vec<String>> {
    let base =
        ractor_bullmq::protocol::keys::QueueKeys::new(PREFIX, queue).worker_client_name(None);
    let scoped = format!("{base}:");
    Ok(client_list_field(client, "name")
        .await?
        .into_iter()
        .filter(|name| *name == base || name.starts_with(&scoped))
        .collect())
}

/// [`queue_client_names`] on the test Redis.
pub async fn named_clients(queue: &str) -> Result<Vec<String>> {
    let client = raw_client().await?;
    let names = queue_client_names(&client, queue).await;
    client.quit().await?;
    names
}

/// `name` (`master_repl_offset:`, `offset=`) of one `INFO replication` line, as a number.
fn info_number(line: &str, name: &str) -> Option<u64> {
    line.split(',')
        .find_map(|part| part.trim().strip_prefix(name))
        .and_then(|v| v.trim().parse::<u64>().ok())
}

/// How far a primary has written its replication stream: `master_repl_offset` of its
/// `INFO replication` reply.
pub fn primary_repl_offset(info: &str) -> Option<u64> {
    info.lines()
        .find_map(|line| info_number(line, "master_repl_offset:"))
}

/// Whether a primary's `INFO replication` reply lists replicas and each has acknowledged the
/// stream up to `offset` (its `slaveN:…,offset=`).
pub fn replicas_reached(info: &str, offset: u64) -> bool {
    let replicas: Vec<u64> = info
        .lines()
        .filter(|line| line.starts_with("slave") && line.contains("offset="))
        .filter_map(|line| {
            info_number(
                line.split_once(':').map_or(line, |(_, rest)| rest),
                "offset=",
            )
        })
        .collect();
    !replicas.is_empty() && replicas.iter().all(|&r| r >= offset)
}
