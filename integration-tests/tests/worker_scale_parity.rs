//! Full-scale parity (issue 6): Node adds 5 000 mixed jobs twice, to queue A processed by a
//! Node BullMQ Worker and to queue B processed by ours; Node reads every job back and each
//! ends the same: state, returnvalue, failedReason, attemptsMade, attemptsStarted, progress,
//! priority, stacktrace length, and whether processedOn / finishedOn are set.

mod common;
mod scale_common;
mod worker_common;

use std::time::{Duration, Instant};

use common::*;
use ractor_bullmq::{WorkerCallbacks, WorkerOptions};
use scale_common::*;
use serde_json::json;
use worker_common::*;

const JOBS: usize = 5_000;
const CONCURRENCY: usize = 20;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn five_thousand_mixed_jobs_end_as_with_a_node_worker() -> anyhow::Result<()> {
    if !node_available() {
        return Ok(());
    }
    let jobs = mixed_jobs(JOBS);

    let started = Instant::now();
    let node_queue = unique_queue("w-scale-node");
    let node_ids = ids_of(
        &run_node(
            "add_jobs.js",
            &json!({"queue": node_queue, "bulk": true, "jobs": jobs}),
        )
        .await?,
    );
    let report = run_node(
        "run_worker.js",
        &json!({"queue": node_queue, "concurrency": CONCURRENCY, "idleMs": 3000,
                "timeoutMs": 110_000}),
    )
    .await?;
    assert_eq!(report["stoppedBy"], "idle", "Node worker did not finish");
    eprintln!("Node run: {:?}", started.elapsed());

    let started = Instant::now();
    let rust_queue = unique_queue("w-scale-rust");
    let rust_ids = ids_of(
        &run_node(
            "add_jobs.js",
            &json!({"queue": rust_queue, "bulk": true, "jobs": jobs}),
        )
        .await?,
    );
    assert_eq!(
        node_ids, rust_ids,
        "both queues start empty: same generated ids"
    );
    let worker = spawn_worker(
        &rust_queue,
        WorkerOptions::new().concurrency(CONCURRENCY),
        WorkerCallbacks::new(),
    )
    .await?;
    wait_finished(&rust_queue, JOBS as i64, Duration::from_secs(110)).await?;
    worker.close().await?;
    eprintln!("our run: {:?}", started.elapsed());

    let node_jobs = node_outcomes(&node_queue, &node_ids).await?;
    let rust_jobs = node_outcomes(&rust_queue, &rust_ids).await?;
    assert_eq!(node_jobs.len(), JOBS);
    assert_eq!(rust_jobs.len(), JOBS);
    let mut differing = Vec::new();
    for (node, rust) in node_jobs.iter().zip(&rust_jobs) {
        if node != rust {
            differing.push(format!("Node: {node}\nours: {rust}"));
        }
    }
    assert!(
        differing.is_empty(),
        "{} of {JOBS} jobs differ; first ones:\n{}",
        differing.len(),
        differing[..differing.len().min(5)].join("\n")
    );
    // The scenario really mixes outcomes.
    let failed = node_jobs.iter().filter(|j| j["state"] == "failed").count();
    let retried = node_jobs
        .iter()
        .filter(|j| j["state"] == "completed" && j["attemptsMade"].as_u64() > Some(1))
        .count();
    assert!(
        failed > 500 && retried > 1000,
        "failed {failed}, retried {retried}"
    );

    cleanup(&node_queue).await?;
    cleanup(&rust_queue).await
}
