//! Full-scale sharing (issue 6): a Node BullMQ Worker and ours consume one queue of 20 000
//! jobs side by side; every job completes exactly once.

mod common;
mod worker_common;

use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::*;
use ractor_bullmq::{WorkerCallbacks, WorkerOptions};
use serde_json::{json, Value};
use worker_common::*;

const JOBS: usize = 20_000;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn twenty_thousand_jobs_complete_exactly_once_across_node_and_rust() -> anyhow::Result<()> {
    if !node_available() {
        return Ok(());
    }
    let queue = unique_queue("w-scale-mixed");
    let jobs: Vec<Value> = (0..JOBS)
        .map(|i| json!({"name": "mixed", "data": {"i": i}}))
        .collect();
    let added = run_node(
        "add_jobs.js",
        &json!({"queue": queue, "bulk": true, "jobs": jobs}),
    )
    .await?;
    let all_ids: HashSet<String> = added["ids"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|v| v.as_str().map(str::to_owned))
        .collect();
    assert_eq!(all_ids.len(), JOBS);

    let ours = Arc::new(Mutex::new(Vec::<String>::new()));
    let callbacks = WorkerCallbacks::new().on_completed({
        let ours = ours.clone();
        move |job, _| ours.lock().unwrap().push(job.id().to_owned())
    });
    let node = tokio::spawn({
        let queue = queue.clone();
        async move {
            run_node(
                "run_worker.js",
                &json!({"queue": queue, "concurrency": 50, "idleMs": 3000,
                        "timeoutMs": 110_000, "name": "node"}),
            )
            .await
        }
    });
    let worker = spawn_worker(
        &queue,
        WorkerOptions::new().concurrency(50).name("rust"),
        callbacks,
    )
    .await?;
    wait_finished(&queue, JOBS as i64, Duration::from_secs(110)).await?;
    worker.close().await?;
    let report = node.await??;

    assert_eq!(count(&queue, "completed").await?, JOBS as i64);
    assert_eq!(count(&queue, "failed").await?, 0);
    let by_node: Vec<String> = report["completed"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|c| c["id"].as_str().map(str::to_owned))
        .collect();
    let by_rust = ours.lock().unwrap().clone();
    eprintln!("Node completed {}, ours {}", by_node.len(), by_rust.len());
    assert_eq!(
        report["processed"].as_array().map_or(0, Vec::len),
        by_node.len(),
        "the Node worker never ran a job it did not complete"
    );
    let node_set: HashSet<&String> = by_node.iter().collect();
    let rust_set: HashSet<&String> = by_rust.iter().collect();
    assert_eq!(node_set.len(), by_node.len(), "Node completed a job twice");
    assert_eq!(rust_set.len(), by_rust.len(), "we completed a job twice");
    assert!(
        node_set.is_disjoint(&rust_set),
        "a job completed on both sides"
    );
    assert_eq!(by_node.len() + by_rust.len(), JOBS);
    assert!(
        !node_set.is_empty() && !rust_set.is_empty(),
        "both workers took part"
    );
    let union: HashSet<String> = by_node.iter().chain(&by_rust).cloned().collect();
    assert_eq!(union, all_ids);
    cleanup(&queue).await
}
