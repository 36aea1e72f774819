//! The same mixed scenario run twice, once by a Node BullMQ Worker and once by ours: every
//! job ends in the same state with the same returnvalue, failedReason, attemptsMade and
//! progress, and the events stream holds the same per-job event sequence (timestamps aside).

mod common;
mod worker_common;

use std::collections::BTreeMap;
use std::time::Duration;

use common::*;
use ractor_bullmq::{WorkerCallbacks, WorkerOptions};
use serde_json::{json, Value};
use worker_common::*;

const JOBS: usize = 120;

fn scenario() -> Vec<Value> {
    (0..JOBS)
        .map(|i| {
            let mut data = json!({"returnValue": {"i": i}});
            let mut opts = json!({});
            if i % 5 == 0 {
                opts["priority"] = json!(i % 3 + 1);
            }
            if i % 7 == 0 {
                opts["lifo"] = json!(true);
            }
            if i % 11 == 0 {
                opts["delay"] = json!(150);
            }
            if i % 4 == 0 {
                data["failAttempts"] = json!(1);
                opts["attempts"] = json!(2);
                opts["backoff"] = json!({"type": "fixed", "delay": 30});
            }
            if i % 13 == 0 {
                data["fail"] = json!("bad input");
                opts["attempts"] = json!(2);
                opts["backoff"] = json!({"type": "exponential", "delay": 20});
            }
            if i % 17 == 0 {
                data["unrecoverable"] = json!("cannot ever work");
                opts["attempts"] = json!(3);
            }
            if i % 6 == 0 {
                data["progress"] = json!([10, {"step": "half"}]);
            }
            json!({"name": format!("job-{i}"), "data": data, "opts": opts})
        })
        .collect()
}

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

fn outcome(job: &Value) -> Value {
    json!({
        "state": job["state"],
        "returnvalue": job["returnvalue"],
        "failedReason": job["failedReason"],
        "attemptsMade": job["attemptsMade"],
        "attemptsStarted": job["attemptsStarted"],
        "stalledCounter": job["stalledCounter"],
        "progress": job["progress"],
        "priority": job["priority"],
        "stacktraceLen": job["stacktrace"].as_array().map(Vec::len),
    })
}

async fn final_jobs(queue: &str, ids: &Value) -> anyhow::Result<Vec<Value>> {
    let ids = ids.as_array().cloned().unwrap_or_default();
    let mut out = Vec::with_capacity(ids.len());
    // Small chunks: the oracle's stdout is cut at 64 KiB (it exits right after writing).
    for chunk in ids.chunks(3) {
        let read = run_node("read_jobs.js", &json!({"queue": queue, "ids": chunk})).await?;
        out.extend(read["jobs"].as_array().into_iter().flatten().map(outcome));
    }
    Ok(out)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rust_worker_matches_node_worker_job_by_job() -> anyhow::Result<()> {
    if !node_available() {
        return Ok(());
    }
    let jobs = scenario();

    // Node.
    let node_queue = unique_queue("w-parity-node");
    let node_ids =
        run_node("add_jobs.js", &json!({"queue": node_queue, "jobs": jobs})).await?["ids"].clone();
    let report = run_node(
        "run_worker.js",
        &json!({"queue": node_queue, "concurrency": 1, "idleMs": 2500, "timeoutMs": 120000}),
    )
    .await?;
    assert_eq!(report["stoppedBy"], "idle", "{report}");

    // Ours.
    let rust_queue = unique_queue("w-parity-rust");
    let rust_ids =
        run_node("add_jobs.js", &json!({"queue": rust_queue, "jobs": jobs})).await?["ids"].clone();
    assert_eq!(node_ids, rust_ids);
    let worker = spawn_worker(
        &rust_queue,
        WorkerOptions::new().concurrency(1),
        WorkerCallbacks::new(),
    )
    .await?;
    wait_finished(&rust_queue, JOBS as i64, Duration::from_secs(60)).await?;
    worker.close().await?;

    let node_jobs = final_jobs(&node_queue, &node_ids).await?;
    let rust_jobs = final_jobs(&rust_queue, &rust_ids).await?;
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
