//! Our Worker and a Node BullMQ Worker consuming one queue side by side: every job completes
//! exactly once.

mod common;
mod worker_common;

use std::collections::HashMap;
use std::time::Duration;

use common::*;
use ractor_bullmq::{WorkerCallbacks, WorkerOptions};
use serde_json::json;
use worker_common::*;

const JOBS: usize = 3000;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rust_and_node_workers_complete_each_job_exactly_once() -> anyhow::Result<()> {
    if !node_available() {
        return Ok(());
    }
    let queue = unique_queue("w-mixed");
    let jobs: Vec<_> = (0..JOBS)
        .map(|i| json!({"name": "mixed", "data": {"i": i}}))
        .collect();
    run_node(
        "add_jobs.js",
        &json!({"queue": queue, "bulk": true, "jobs": jobs}),
    )
    .await?;

    let node = tokio::spawn(run_node_owned(
        json!({"queue": queue, "concurrency": 10, "idleMs": 3000, "timeoutMs": 120000, "name": "node"}),
    ));
    let worker = spawn_worker(
        &queue,
        WorkerOptions::new().concurrency(20).name("rust"),
        WorkerCallbacks::new(),
    )
    .await?;
    wait_finished(&queue, JOBS as i64, Duration::from_secs(120)).await?;
    worker.close().await?;
    let node_report = node.await??;

    assert_eq!(count(&queue, "completed").await?, JOBS as i64);
    assert_eq!(count(&queue, "failed").await?, 0);
    let events = read_events(&queue).await?;
    let mut completions: HashMap<String, usize> = HashMap::new();
    for e in events.iter().filter(|e| e.event == "completed") {
        if let Some((_, id)) = e.fields.iter().find(|(k, _)| k == "jobId") {
            *completions.entry(id.clone()).or_default() += 1;
        }
    }
    assert_eq!(completions.len(), JOBS);
    assert!(completions.values().all(|n| *n == 1));
    let by_node = node_report["completed"].as_array().map_or(0, Vec::len);
    let by_rust = events
        .iter()
        .filter(|e| e.event == "completed")
        .filter(|e| {
            e.fields
                .iter()
                .any(|(k, v)| k == "returnvalue" && v.contains("rust"))
        })
        .count();
    assert_eq!(by_node + by_rust, JOBS, "node {by_node} + rust {by_rust}");
    assert_eq!(
        node_report["processed"].as_array().map_or(0, Vec::len),
        by_node,
        "Node never processed a job twice"
    );
    cleanup(&queue).await
}

async fn run_node_owned(arg: serde_json::Value) -> anyhow::Result<serde_json::Value> {
    run_node("run_worker.js", &arg).await
}
