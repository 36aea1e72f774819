//! `drained` is written exactly when Node 6.7.0's worker writes it: after a finish that found
//! nothing left to run, and not when the last finish happens while the rate limiter is
//! saturated (Node's finish looks for the next job, meets the limit and returns before its
//! `drained` check).

mod common;
mod worker_common;

use std::time::Duration;

use anyhow::Result;
use common::*;
use ractor_bullmq::{WorkerCallbacks, WorkerOptions};
use serde_json::json;
use worker_common::*;

async fn event_names(queue: &str) -> Result<Vec<String>> {
    Ok(read_events(queue)
        .await?
        .into_iter()
        .map(|e| e.event)
        .collect())
}

#[tokio::test]
async fn no_drained_when_the_last_finish_meets_a_saturated_limiter() -> Result<()> {
    if !node_available() {
        return Ok(());
    }
    let jobs = json!([{"name": "a", "data": {}}, {"name": "b", "data": {}}]);

    let node_queue = unique_queue("w-drained-node");
    add_with_node(&node_queue, jobs.clone()).await?;
    run_node(
        "run_worker.js",
        &json!({"queue": node_queue, "stopAfter": 2, "idleMs": 8000,
                "limiter": {"max": 1, "duration": 1500}}),
    )
    .await?;
    let node_events = event_names(&node_queue).await?;

    let queue = unique_queue("w-drained");
    add_with_node(&queue, jobs).await?;
    let worker = spawn_worker(
        &queue,
        WorkerOptions::new().limiter(1, Duration::from_millis(1500)),
        WorkerCallbacks::new(),
    )
    .await?;
    wait_finished(&queue, 2, Duration::from_secs(20)).await?;
    // Past the limit window, so a late `drained` would have been written by now.
    tokio::time::sleep(Duration::from_millis(2000)).await;
    worker.close().await?;
    let events = event_names(&queue).await?;

    let drained = |names: &[String]| names.iter().filter(|n| *n == "drained").count();
    assert_eq!(
        drained(&events),
        drained(&node_events),
        "ours {events:?}\nNode {node_events:?}"
    );
    let finished = |names: &[String]| {
        names
            .iter()
            .filter(|n| *n == "completed" || *n == "active")
            .count()
    };
    assert_eq!(finished(&events), finished(&node_events));
    cleanup(&node_queue).await?;
    cleanup(&queue).await
}
