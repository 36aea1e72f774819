//! The same mixed scenario run twice, once by a Node BullMQ Worker and once by ours: every
//! job ends in the same state with the same returnvalue, failedReason, attemptsMade and
//! progress, and the events stream holds the same per-job event sequence (timestamps aside).

mod common;
mod scale_common;
mod worker_common;

use std::collections::BTreeMap;
use std::time::Duration;

use common::*;
use ractor_bullmq::{WorkerCallbacks, WorkerOptions};
use scale_common::{ids_of, mixed_jobs, node_outcomes};
use serde_json::json;
use worker_common::*;

const JOBS: usize = 120;

/// Per job id: the normalized event sequence.
fn per_job_events(events: &[StreamEvent]) -> BTreeMap<String, Vec<String>> {
    let mut map: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let normalized = normalize_events(events, &|id| id.to_string());
    for (event, line) in events.iter().zip(normalized) {
        if let Some((_, id)) = event.fields.iter().find(|(k, _)| k == "jobId") {
            map.entry(id.clone()).or_default().push(line);
        }
    }
    map
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rust_worker_matches_node_worker_job_by_job() -> anyhow::Result<()> {
    if !node_available() {
        return Ok(());
    }
    let jobs = mixed_jobs(JOBS);

    // Node.
    let node_queue = unique_queue("w-parity-node");
    let node_ids =
        ids_of(&run_node("add_jobs.js", &json!({"queue": node_queue, "jobs": jobs})).await?);
    let report = run_node(
        "run_worker.js",
        &json!({"queue": node_queue, "concurrency": 1, "idleMs": 2500, "timeoutMs": 120000}),
    )
    .await?;
    assert_eq!(report["stoppedBy"], "idle", "{report}");

    // Ours.
    let rust_queue = unique_queue("w-parity-rust");
    let rust_ids =
        ids_of(&run_node("add_jobs.js", &json!({"queue": rust_queue, "jobs": jobs})).await?);
    assert_eq!(node_ids, rust_ids);
    let worker = spawn_worker(
        &rust_queue,
        WorkerOptions::new().concurrency(1),
        WorkerCallbacks::new(),
    )
    .await?;
    wait_finished(&rust_queue, JOBS as i64, Duration::from_secs(60)).await?;
    worker.close().await?;

    let node_jobs = node_outcomes(&node_queue, &node_ids).await?;
    let rust_jobs = node_outcomes(&rust_queue, &rust_ids).await?;
    assert_eq!(node_jobs.len(), JOBS);
    for (i, (node, rust)) in node_jobs.iter().zip(&rust_jobs).enumerate() {
        assert_eq!(rust, node, "job {i} differs");
    }

    let node_events = per_job_events(&read_events(&node_queue).await?);
    let rust_events = per_job_events(&read_events(&rust_queue).await?);
    assert_eq!(node_events.len(), JOBS);
    for (id, node_seq) in &node_events {
        assert_eq!(rust_events.get(id), Some(node_seq), "events of job {id}");
    }
    cleanup(&node_queue).await?;
    cleanup(&rust_queue).await
}
