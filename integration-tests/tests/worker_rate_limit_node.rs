//! A processor's rate limit on a Worker without a `limiter` option, differential against Node
//! BullMQ 6.7.0: the processor sets the queue's limiter (Node `worker.rateLimit(ms)`, ours
//! `Queue::rate_limit`) and ends with a rate-limit error (Node `Worker.RateLimitError()`, ours
//! `RateLimitError::new(Duration::ZERO)`). Both Workers put the job back, fetch nothing until
//! the limiter's TTL has passed, then run it again before the next job; both leave the same
//! events per job and the same `marker` zset.

mod common;
mod worker_common;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::Result;
use common::{
    cleanup, eventually, node_available, now_ms, open_queue, raw_client, read_events, run_node,
    unique_queue, StreamEvent, PREFIX,
};
use fred::prelude::{ClientLike, SortedSetsInterface};
use ractor_bullmq::worker::{Job, JobContext};
use ractor_bullmq::{RateLimitError, Worker, WorkerArgs, WorkerOptions};
use serde_json::{json, Value};
use worker_common::{add_with_node, config, wait_finished};

/// The limiter's TTL the processor sets, ms.
const LIMIT_MS: u64 = 1500;

fn jobs() -> Value {
    json!([
        {"name": "limited", "data": {"rateLimitMs": LIMIT_MS}},
        {"name": "plain", "data": {}},
    ])
}

/// The events of each job, by the job's position among `ids`.
fn per_job(events: &[StreamEvent], ids: &[String]) -> BTreeMap<usize, Vec<String>> {
    let mut out = BTreeMap::new();
    for (i, id) in ids.iter().enumerate() {
        let of_job = events
            .iter()
            .filter(|e| e.fields.iter().any(|(k, v)| k == "jobId" && v == id))
            .map(|e| e.event.clone())
            .collect();
        out.insert(i, of_job);
    }
    out
}

async fn marker(queue: &str) -> Result<Vec<(String, f64)>> {
    let raw = raw_client().await?;
    let members: Vec<(String, f64)> = raw
        .zrange(
            format!("{PREFIX}:{queue}:marker"),
            0,
            -1,
            None,
            false,
            None,
            true,
        )
        .await?;
    raw.quit().await?;
    Ok(members)
}

/// Runs (job position, started at ms) in start order, from `ids` and Node's `processed`.
fn node_runs(output: &Value, ids: &[String]) -> Vec<(usize, u64)> {
    output["processed"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|p| {
            let id = p["id"].as_str().unwrap_or_default();
            let at = p["startedAt"].as_u64().unwrap_or_default();
            (ids.iter().position(|i| i == id).unwrap_or(usize::MAX), at)
        })
        .collect()
}

#[tokio::test]
async fn a_processor_rate_limit_without_a_limiter_waits_for_the_ttl_as_node() -> Result<()> {
    if !node_available() {
        return Ok(());
    }
    // Node's Worker.
    let node_queue = unique_queue("rl-node");
    let node_ids = add_with_node(&node_queue, jobs()).await?;
    let out = run_node(
        "run_worker.js",
        &json!({"queue": node_queue, "concurrency": 1, "idleMs": 3000, "timeoutMs": 60000}),
    )
    .await?;
    let node = node_runs(&out, &node_ids);

    // Ours, on the same jobs.
    let rust_queue = unique_queue("rl-rust");
    let rust_ids = add_with_node(&rust_queue, jobs()).await?;
    let queue = open_queue(&rust_queue).await?;
    let runs: Arc<Mutex<Vec<(String, u64)>>> = Arc::default();
    let processor = {
        let (queue, runs) = (queue.clone(), runs.clone());
        move |job: Job, _ctx: JobContext| {
            let (queue, runs) = (queue.clone(), runs.clone());
            async move {
                let first = {
                    let mut runs = runs.lock().unwrap();
                    runs.push((job.id().to_string(), now_ms()));
                    runs.iter().filter(|(id, _)| id == job.id()).count() == 1
                };
                if first {
                    if let Some(ms) = job.data_value().get("rateLimitMs").and_then(Value::as_u64) {
                        queue.rate_limit(Duration::from_millis(ms)).await?;
                        return Err(RateLimitError::new(Duration::ZERO).into());
                    }
                }
                Ok(json!({"processedBy": "rust"}))
            }
        }
    };
    let options = WorkerOptions::new().concurrency(1);
    let args = WorkerArgs::connect(&config(), &rust_queue, processor, options).await?;
    let worker = Worker::spawn(args).await?;
    wait_finished(&rust_queue, 2, Duration::from_secs(30)).await?;
    let node_marker = marker(&node_queue).await?;
    eventually("our marker as Node's", Duration::from_secs(15), || {
        let (q, expected) = (rust_queue.clone(), node_marker.clone());
        async move { marker(&q).await.map(|m| m == expected).unwrap_or(false) }
    })
    .await?;
    worker.close().await?;
    let rust: Vec<(usize, u64)> = runs
        .lock()
        .unwrap()
        .iter()
        .map(|(id, at)| (rust_ids.iter().position(|i| i == id).unwrap(), *at))
        .collect();

    // Same runs in the same order: the limited job, again after the TTL, then the next one.
    let order = |runs: &[(usize, u64)]| runs.iter().map(|(i, _)| *i).collect::<Vec<_>>();
    assert_eq!(order(&node), [0, 0, 1], "Node's runs: {node:?}");
    assert_eq!(order(&rust), order(&node), "our runs: {rust:?}");
    // Both waited for the limiter (a lower bound, with slack for clock rounding).
    for (who, runs) in [("Node", &node), ("ours", &rust)] {
        let gap = runs[1].1 - runs[0].1;
        assert!(gap >= LIMIT_MS - 100, "{who} ran again after {gap} ms");
    }
    // The same events per job and the same marker.
    assert_eq!(
        per_job(&read_events(&rust_queue).await?, &rust_ids),
        per_job(&read_events(&node_queue).await?, &node_ids)
    );
    assert_eq!(marker(&rust_queue).await?, node_marker);
    queue.close().await?;
    cleanup(&node_queue).await?;
    cleanup(&rust_queue).await
}
