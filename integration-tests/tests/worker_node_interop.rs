//! Jobs added by Node BullMQ, processed by our Worker, read back by Node.

mod common;
mod worker_common;

use std::time::Duration;

use common::*;
use ractor_bullmq::{WorkerCallbacks, WorkerOptions};
use serde_json::{json, Value};
use worker_common::*;

async fn read_back(queue: &str, ids: &Value) -> anyhow::Result<Vec<Value>> {
    let read = run_node("read_jobs.js", &json!({"queue": queue, "ids": ids})).await?;
    Ok(read["jobs"].as_array().cloned().unwrap_or_default())
}

#[tokio::test]
async fn node_jobs_complete_with_returnvalue() -> anyhow::Result<()> {
    if !node_available() {
        return Ok(());
    }
    let queue = unique_queue("w-complete");
    let jobs: Vec<Value> = (0..30)
        .map(|i| json!({"name": "job", "data": {"returnValue": {"n": i}}}))
        .collect();
    let added = run_node(
        "add_jobs.js",
        &json!({"queue": queue, "bulk": true, "jobs": jobs}),
    )
    .await?;
    let worker = spawn_worker(
        &queue,
        WorkerOptions::new().concurrency(5).name("rusty"),
        WorkerCallbacks::new(),
    )
    .await?;
    wait_finished(&queue, 30, Duration::from_secs(20)).await?;
    worker.close().await?;

    let read = read_back(&queue, &added["ids"]).await?;
    for (i, job) in read.iter().enumerate() {
        assert_eq!(job["state"], "completed", "job {i}: {job}");
        assert_eq!(job["returnvalue"], json!({"n": i}));
        assert_eq!(job["attemptsMade"], 1);
        assert_eq!(job["attemptsStarted"], 1);
        assert_eq!(job["processedBy"], "rusty");
        assert!(job["finishedOn"].as_u64().is_some());
        assert!(job["processedOn"].as_u64().is_some());
    }
    let events = read_events(&queue).await?;
    let completed = events.iter().filter(|e| e.event == "completed").count();
    let active = events.iter().filter(|e| e.event == "active").count();
    assert_eq!((completed, active), (30, 30));
    assert_eq!(events.iter().filter(|e| e.event == "drained").count(), 1);
    assert_eq!(count(&queue, "active").await?, 0);
    cleanup(&queue).await
}

#[tokio::test]
async fn failures_retries_and_unrecoverable_match_node_semantics() -> anyhow::Result<()> {
    if !node_available() {
        return Ok(());
    }
    let _ = tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_test_writer()
        .try_init();
    let queue = unique_queue("w-fail");
    let jobs = json!([
        {"name": "fails", "data": {"fail": "boom"}},
        {"name": "retries-then-ok", "data": {"failAttempts": 2},
         "opts": {"attempts": 3, "backoff": {"type": "fixed", "delay": 50}}},
        {"name": "exhausts", "data": {"fail": true},
         "opts": {"attempts": 2, "backoff": {"type": "exponential", "delay": 20}}},
        {"name": "unrecoverable", "data": {"unrecoverable": "no way"}, "opts": {"attempts": 5}},
        {"name": "immediate-retry", "data": {"failAttempts": 1}, "opts": {"attempts": 2}},
        {"name": "panics", "data": {"panic": "kaboom"}},
    ]);
    let added = run_node("add_jobs.js", &json!({"queue": queue, "jobs": jobs})).await?;
    let worker = spawn_worker(
        &queue,
        WorkerOptions::new().concurrency(3),
        WorkerCallbacks::new(),
    )
    .await?;
    wait_finished(&queue, 6, Duration::from_secs(20)).await?;
    // The worker keeps running after a panic: it still processes a new job.
    let more = run_node(
        "add_jobs.js",
        &json!({"queue": queue, "jobs": [{"name": "after", "data": {}}]}),
    )
    .await?;
    wait_finished(&queue, 7, Duration::from_secs(20)).await?;
    worker.close().await?;

    let read = read_back(&queue, &added["ids"]).await?;
    let by_name = |name: &str| {
        read.iter()
            .find(|j| j["name"] == name)
            .cloned()
            .unwrap_or_default()
    };
    let j = by_name("fails");
    assert_eq!(
        (
            j["state"].as_str(),
            j["failedReason"].as_str(),
            j["attemptsMade"].as_u64()
        ),
        (Some("failed"), Some("boom"), Some(1))
    );
    assert_eq!(j["stacktrace"].as_array().map(Vec::len), Some(1));
    let j = by_name("retries-then-ok");
    assert_eq!(
        (j["state"].as_str(), j["attemptsMade"].as_u64()),
        (Some("completed"), Some(3))
    );
    assert_eq!(j["failedReason"], "failing attempt 2 on purpose");
    let j = by_name("exhausts");
    assert_eq!(
        (j["state"].as_str(), j["attemptsMade"].as_u64()),
        (Some("failed"), Some(2))
    );
    assert_eq!(j["failedReason"], "failed on purpose");
    let j = by_name("unrecoverable");
    assert_eq!(
        (j["state"].as_str(), j["attemptsMade"].as_u64()),
        (Some("failed"), Some(1))
    );
    assert_eq!(j["failedReason"], "no way");
    let j = by_name("immediate-retry");
    assert_eq!(
        (j["state"].as_str(), j["attemptsMade"].as_u64()),
        (Some("completed"), Some(2))
    );
    let j = by_name("panics");
    assert_eq!(
        (j["state"].as_str(), j["failedReason"].as_str()),
        (Some("failed"), Some("kaboom"))
    );
    let after = read_back(&queue, &more["ids"]).await?;
    assert_eq!(after[0]["state"], "completed");

    // Stream: retries-exhausted for final failures only, delayed for backoff retries, waiting
    // for the immediate retry.
    let events = read_events(&queue).await?;
    let id_of = |name: &str| by_name(name)["id"].as_str().unwrap_or_default().to_string();
    let of = |id: &str| -> Vec<String> {
        events
            .iter()
            .filter(|e| e.fields.iter().any(|(k, v)| k == "jobId" && v == id))
            .map(|e| e.event.clone())
            .collect()
    };
    assert_eq!(
        of(&id_of("fails")),
        ["added", "waiting", "active", "failed", "retries-exhausted"]
    );
    assert_eq!(
        of(&id_of("unrecoverable")),
        ["added", "waiting", "active", "failed"]
    );
    assert_eq!(
        of(&id_of("exhausts")),
        [
            "added",
            "waiting",
            "active",
            "delayed",
            "waiting",
            "active",
            "failed",
            "retries-exhausted"
        ]
    );
    assert_eq!(
        of(&id_of("immediate-retry")),
        [
            "added",
            "waiting",
            "active",
            "waiting",
            "active",
            "completed"
        ]
    );
    cleanup(&queue).await
}

#[tokio::test]
async fn global_pause_metrics_and_drained_callback() -> anyhow::Result<()> {
    if !node_available() {
        return Ok(());
    }
    let queue = unique_queue("w-pause");
    run_node("admin.js", &json!({"queue": queue, "op": "pause"})).await?;
    let jobs: Vec<Value> = (0..5)
        .map(|i| json!({"name": "p", "data": {"i": i}}))
        .collect();
    run_node("add_jobs.js", &json!({"queue": queue, "jobs": jobs})).await?;

    let drained = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let callbacks = WorkerCallbacks::new().on_drained({
        let drained = drained.clone();
        move || {
            drained.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        }
    });
    let worker = spawn_worker(
        &queue,
        WorkerOptions::new()
            .concurrency(2)
            .metrics_max_data_points(60)
            .drain_delay(Duration::from_millis(200)),
        callbacks,
    )
    .await?;
    // Paused queue: the worker fetches nothing (it reports the queue as drained for itself).
    eventually(
        "worker saw the paused queue",
        Duration::from_secs(10),
        || {
            let drained = drained.clone();
            async move { drained.load(std::sync::atomic::Ordering::SeqCst) > 0 }
        },
    )
    .await?;
    assert_eq!(count(&queue, "wait").await?, 5);
    assert_eq!(count(&queue, "completed").await?, 0);

    run_node("admin.js", &json!({"queue": queue, "op": "resume"})).await?;
    wait_finished(&queue, 5, Duration::from_secs(20)).await?;
    worker.close().await?;

    let script = format!(
        "const {{ Queue }} = require('bullmq'); const {{ connectionOptions }} = require('./lib');\
         const q = new Queue({queue:?}, {{ connection: connectionOptions() }});\
         q.getMetrics('completed').then(m => {{ console.log(JSON.stringify(m)); return q.close(); }})\
          .then(() => process.exit(0));"
    );
    let metrics = node_eval(&script).await?;
    assert_eq!(metrics["meta"]["count"], 5, "{metrics}");
    cleanup(&queue).await
}
