//! How processor outcomes land in Redis: custom backoff, DelayedError, RateLimitError,
//! progress and logs, removeOnComplete, the worker rate limiter, manual fetching and force
//! close.

mod common;
mod worker_common;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::*;
use fred::prelude::{ClientLike, KeysInterface, ListInterface};
use ractor_bullmq::worker::{Job, JobContext};
use ractor_bullmq::{
    DelayedError, RateLimitError, Worker, WorkerArgs, WorkerCallbacks, WorkerOptions,
};
use serde_json::{json, Value};
use worker_common::*;

async fn read(queue: &str, ids: &[String]) -> anyhow::Result<Vec<Value>> {
    let read = run_node("read_jobs.js", &json!({"queue": queue, "ids": ids})).await?;
    Ok(read["jobs"].as_array().cloned().unwrap_or_default())
}

fn events_of(events: &[StreamEvent], id: &str) -> Vec<String> {
    events
        .iter()
        .filter(|e| e.fields.iter().any(|(k, v)| k == "jobId" && v == id))
        .map(|e| e.event.clone())
        .collect()
}

#[tokio::test]
async fn delayed_rate_limited_custom_backoff_progress_and_removal() -> anyhow::Result<()> {
    if !node_available() {
        return Ok(());
    }
    let queue = unique_queue("w-outcomes");
    let ids = add_with_node(
        &queue,
        json!([
            {"name": "custom-backoff", "data": {}, "opts": {"attempts": 3, "backoff": {"type": "linear", "delay": 10}}},
            {"name": "delay-me", "data": {}},
            {"name": "rate-limited", "data": {}},
            {"name": "progress", "data": {}},
            {"name": "removed", "data": {}, "opts": {"removeOnComplete": true}},
        ]),
    )
    .await?;
    let runs: Arc<Mutex<HashMap<String, u32>>> = Arc::default();
    let processor = {
        let runs = runs.clone();
        move |job: Job, ctx: JobContext| {
            let runs = runs.clone();
            async move {
                let run = {
                    let mut runs = runs.lock().unwrap();
                    let n = runs.entry(job.id().to_string()).or_default();
                    *n += 1;
                    *n
                };
                match (job.name(), run) {
                    ("custom-backoff", n) if n < 3 => anyhow::bail!("attempt {n} fails"),
                    ("delay-me", 1) => {
                        return Err(DelayedError::new(Duration::from_millis(200)).into())
                    }
                    ("rate-limited", 1) => {
                        return Err(RateLimitError::new(Duration::from_millis(300)).into())
                    }
                    ("progress", _) => {
                        ctx.update_progress(json!({"pct": 42})).await?;
                        ctx.log("hello").await?;
                    }
                    _ => {}
                }
                Ok(json!({"run": run}))
            }
        }
    };
    let progress: Arc<Mutex<Vec<Value>>> = Arc::default();
    let callbacks = WorkerCallbacks::new().on_progress({
        let progress = progress.clone();
        move |_, value| progress.lock().unwrap().push(value.clone())
    });
    let options = WorkerOptions::new()
        .concurrency(5)
        .backoff_strategy("linear", |attempts, _job, _err| {
            Some(Duration::from_millis(10 * u64::from(attempts)))
        });
    let args = WorkerArgs::connect(&config(), &queue, processor, options)
        .await?
        .callbacks(callbacks);
    let worker = Worker::spawn(args).await?;
    // "removed" leaves no trace in completed, so wait for the other four.
    wait_finished(&queue, 4, Duration::from_secs(20)).await?;
    eventually("removed job deleted", Duration::from_secs(10), || {
        let q = queue.clone();
        let id = ids[4].clone();
        async move {
            let client = raw_client().await.expect("redis");
            let exists: i64 = client
                .exists(format!("{PREFIX}:{q}:{id}"))
                .await
                .unwrap_or(1);
            exists == 0
        }
    })
    .await?;
    worker.close().await?;

    let jobs = read(&queue, &ids).await?;
    let events = read_events(&queue).await?;
    assert_eq!(
        (jobs[0]["state"].as_str(), jobs[0]["attemptsMade"].as_u64()),
        (Some("completed"), Some(3))
    );
    assert_eq!(
        events_of(&events, &ids[0]),
        [
            "added",
            "waiting",
            "active",
            "delayed",
            "waiting",
            "active",
            "delayed",
            "waiting",
            "active",
            "completed"
        ]
    );
    // DelayedError: no attempt counted.
    assert_eq!(
        (jobs[1]["state"].as_str(), jobs[1]["attemptsMade"].as_u64()),
        (Some("completed"), Some(1))
    );
    assert_eq!(
        events_of(&events, &ids[1]),
        [
            "added",
            "waiting",
            "active",
            "delayed",
            "waiting",
            "active",
            "completed"
        ]
    );
    // RateLimitError: back to wait, no attempt counted.
    assert_eq!(
        (jobs[2]["state"].as_str(), jobs[2]["attemptsMade"].as_u64()),
        (Some("completed"), Some(1))
    );
    assert_eq!(jobs[2]["returnvalue"], json!({"run": 2}));
    assert_eq!(
        events_of(&events, &ids[2]),
        [
            "added",
            "waiting",
            "active",
            "waiting",
            "active",
            "completed"
        ]
    );
    assert_eq!(jobs[3]["progress"], json!({"pct": 42}));
    assert_eq!(progress.lock().unwrap().clone(), vec![json!({"pct": 42})]);
    let client = raw_client().await?;
    let logs: Vec<String> = client
        .lrange(format!("{PREFIX}:{queue}:{}:logs", ids[3]), 0, -1)
        .await?;
    assert_eq!(logs, ["hello"]);
    assert!(events_of(&events, &ids[3]).contains(&"progress".to_string()));
    assert_eq!(jobs[4], Value::Null);
    client.quit().await?;
    cleanup(&queue).await
}

#[tokio::test]
async fn worker_limiter_spreads_jobs_over_windows() -> anyhow::Result<()> {
    if !node_available() {
        return Ok(());
    }
    let queue = unique_queue("w-limiter");
    let ids = add_with_node(
        &queue,
        json!((0..5)
            .map(|i| json!({"name": "l", "data": {"i": i}}))
            .collect::<Vec<_>>()),
    )
    .await?;
    let worker = spawn_worker(
        &queue,
        WorkerOptions::new()
            .concurrency(5)
            .limiter(2, Duration::from_millis(1000)),
        WorkerCallbacks::new(),
    )
    .await?;
    wait_finished(&queue, 5, Duration::from_secs(20)).await?;
    worker.close().await?;
    let jobs = read(&queue, &ids).await?;
    let mut started: Vec<u64> = jobs
        .iter()
        .filter_map(|j| j["processedOn"].as_u64())
        .collect();
    started.sort_unstable();
    assert_eq!(started.len(), 5);
    // 2 jobs per second: the fifth starts in the third window.
    assert!(started[4] - started[0] >= 1900, "{started:?}");
    cleanup(&queue).await
}

#[tokio::test]
async fn manual_fetch_and_force_close_leave_jobs_for_stalled_recovery() -> anyhow::Result<()> {
    if !node_available() {
        return Ok(());
    }
    let queue = unique_queue("w-manual");
    let ids = add_with_node(
        &queue,
        json!([{"name": "slow", "data": {"sleepMs": 30000}}, {"name": "next", "data": {}}]),
    )
    .await?;
    let worker = spawn_worker(
        &queue,
        WorkerOptions::new().concurrency(2).autorun(false),
        WorkerCallbacks::new(),
    )
    .await?;
    assert!(!worker.is_running().await);
    assert_eq!(count(&queue, "wait").await?, 2);
    let first = worker.get_next_job().await?;
    assert_eq!(first.as_deref(), Some(ids[0].as_str()));
    eventually("one job active", Duration::from_secs(5), || {
        let w = worker.clone();
        async move { w.active_count().await.unwrap_or(0) == 1 }
    })
    .await?;
    assert_eq!(
        count(&queue, "wait").await?,
        1,
        "autorun=false fetched only on request"
    );

    let report = worker.close_force().await?;
    assert_eq!(report.left_for_stalled_recovery, vec![ids[0].clone()]);
    assert!(!worker.is_running().await);
    // The job is still active and locked: a stalled check recovers it after the lock expires.
    assert_eq!(count(&queue, "active").await?, 1);
    let client = raw_client().await?;
    let lock: i64 = client
        .exists(format!("{PREFIX}:{queue}:{}:lock", ids[0]))
        .await?;
    assert_eq!(lock, 1);
    client.quit().await?;
    cleanup(&queue).await
}
