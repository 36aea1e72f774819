//! The same scenario run once with Node's Worker and once with ours, each on a fresh schema
//! made by Node's migrator, leaves identical tables: every row of `job`, `event`, `meta`,
//! `job_log`, … equal after normalising only what depends on the clock or on who ran it:
//! every `*_ms` column, the `delay` field of `delayed` events (an absolute due time), the lock
//! token, meta `stalled-check` and `stalled_marked` (when the stalled checker last ran and
//! whether that found the job active), and the text of stack traces
//! (a JavaScript stack and a Rust error chain never read alike; their number is kept). Worker
//! names are the same (`w`) on both sides, and so are the processors' results.

mod common;
mod worker_common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Result};
use bullmq_postgres::{PgConfig, PostgresBackend};
use common::pg::*;
use ractor_bullmq::{Worker, WorkerArgs, WorkerOptions};
use serde_json::{json, Value as Json};

fn scenario() -> Json {
    json!([
        {"name": "plain", "data": {"n": 1}},
        {"name": "progress", "data": {"progress": [10, {"step": 2}], "log": ["one", "two"]}},
        {"name": "retried", "data": {"failAttempts": 1}, "opts": {"attempts": 2}},
        {"name": "backoff", "data": {"failAttempts": 1},
         "opts": {"attempts": 3, "backoff": {"type": "fixed", "delay": 1500}}},
        {"name": "failing", "data": {"fail": "no luck"}, "opts": {"attempts": 1}},
        {"name": "unrecoverable", "data": {"unrecoverable": "stop"}, "opts": {"attempts": 5}},
        {"name": "prioritized", "data": {"n": 2}, "opts": {"priority": 3}},
        {"name": "custom", "data": {"returnValue": [1, "two"]}, "opts": {"jobId": "custom-1"}},
        {"name": "removed", "data": {}, "opts": {"removeOnComplete": true}},
        {"name": "kept-1", "data": {"fail": true}, "opts": {"removeOnFail": 1}},
    ])
}

/// Attempts that end (complete or fail) in the scenario, as Node's Worker counts them.
const ATTEMPTS: usize = 12;
/// (The backoff outlasts the other jobs, so the retry comes last on both sides whatever the
/// speed of either worker.)
///
/// Jobs that end: the protocol emits `failed` for a final failure only, so the event log has
/// one `completed` or `failed` per job.
const JOBS: usize = 10;

fn normalise(value: &mut Json, queue: &str) {
    match value {
        Json::Object(map) => {
            for (key, v) in map.iter_mut() {
                let clocked = key.ends_with("_ms")
                    || key == "lock_token"
                    // whether the stalled checker's last mark found the job active
                    || key == "stalled_marked"
                    // a `delayed` event's due time (a relative delay is far below this)
                    || (key == "delay" && v.as_u64().is_some_and(|d| d > 1_000_000_000_000));
                if clocked && !v.is_null() {
                    *v = json!("<normalised>");
                } else if key == "stacktrace" {
                    // A JavaScript stack and a Rust error chain never read alike: keep how
                    // many traces there are, not their text.
                    if let Json::Array(traces) = v {
                        traces.iter_mut().for_each(|t| *t = json!("<trace>"));
                    }
                } else {
                    normalise(v, queue);
                }
            }
        }
        Json::Array(items) => items.iter_mut().for_each(|v| normalise(v, queue)),
        Json::String(s) if s == queue => *s = "<queue>".into(),
        Json::String(s) if s.starts_with(&format!("{queue}:")) => {
            *s = s.replacen(queue, "<queue>", 1);
        }
        _ => {}
    }
}

async fn dump(schema: &str, queue: &str) -> Result<Json> {
    let mut tables = dump_tables(schema, Some(&[queue])).await?["tables"].take();
    if let Some(meta) = tables["meta"].as_array_mut() {
        meta.retain(|row| row["field"] != "stalled-check");
    }
    normalise(&mut tables, queue);
    Ok(tables)
}

async fn until_finished(schema: &str, queue: &str, jobs: usize) -> Result<()> {
    let sql = format!(
        "SELECT count(*) FROM \"{schema}\".event WHERE queue = '{queue}' \
           AND event IN ('completed', 'failed')"
    );
    let start = Instant::now();
    loop {
        if psql(&sql)?.parse::<usize>().unwrap_or(0) >= jobs {
            return Ok(());
        }
        if start.elapsed() > Duration::from_secs(60) {
            bail!("{queue}: fewer than {jobs} jobs ended");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nodes_worker_and_ours_leave_identical_tables() -> Result<()> {
    if !pg_and_node_available() {
        return Ok(());
    }
    let mut schemas = FreshSchema::many_migrated_by_node(2).await?;
    let (ours_schema, node_schema) = (schemas.remove(0), schemas.remove(0));
    let queue = common::unique_queue("pg-dumps");

    // Node's side.
    run_node_pg(
        "add_jobs.js",
        &node_schema.name,
        &json!({"queue": queue, "jobs": scenario()}),
    )
    .await?;
    run_node_pg(
        "run_worker.js",
        &node_schema.name,
        &json!({"queue": queue, "concurrency": 1, "name": "w", "stopAfter": ATTEMPTS,
                "timeoutMs": 60_000}),
    )
    .await?;
    until_finished(&node_schema.name, &queue, JOBS).await?;

    // Ours: the same producer, our Worker.
    run_node_pg(
        "add_jobs.js",
        &ours_schema.name,
        &json!({"queue": queue, "jobs": scenario()}),
    )
    .await?;
    let config = PgConfig::from_url(&pg_url())?.with_schema(&ours_schema.name)?;
    let backend = Arc::new(PostgresBackend::open(config).await?);
    let args = WorkerArgs::open(
        backend.as_ref(),
        &queue,
        worker_common::scripted_as("node"),
        WorkerOptions::new().concurrency(1).name("w"),
    )
    .await?;
    let worker = Worker::spawn(args).await?;
    until_finished(&ours_schema.name, &queue, JOBS).await?;
    worker.close().await?;

    let (theirs, ours) = (
        dump(&node_schema.name, &queue).await?,
        dump(&ours_schema.name, &queue).await?,
    );
    for table in theirs.as_object().expect("tables").keys() {
        assert_eq!(
            serde_json::to_string_pretty(&ours[table])?,
            serde_json::to_string_pretty(&theirs[table])?,
            "table {table}: ours (left) and Node's (right)"
        );
    }
    Ok(())
}
