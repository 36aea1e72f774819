//! A job scheduler's iteration whose worker died mid-run, recovered by a worker of the other
//! implementation: the stalled iteration runs again (at least once, as any stalled job), its
//! restart creates no second next iteration, and the series goes on with every later iteration
//! created once.

mod common;
mod scheduler_common;
mod worker_common;

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::Result;
use common::*;
use ractor_bullmq::scheduler::{Repeat, SchedulerTemplate};
use ractor_bullmq::worker::{Job, JobContext};
use ractor_bullmq::{Worker, WorkerArgs, WorkerOptions};
use serde_json::{json, Value};
use worker_common::*;

const EVERY: u64 = 1500;

/// Created once each, on the `every` grid.
fn assert_one_series(created: &[String]) {
    let unique: BTreeSet<&String> = created.iter().collect();
    assert_eq!(
        unique.len(),
        created.len(),
        "an iteration created twice: {created:?}"
    );
    let millis: Vec<u64> = created
        .iter()
        .map(|id| {
            id.rsplit(':')
                .next()
                .and_then(|m| m.parse().ok())
                .unwrap_or(0)
        })
        .collect();
    for pair in millis.windows(2) {
        assert!(
            pair[1] > pair[0] && (pair[1] - pair[0]) % EVERY == 0,
            "off the grid: {created:?}"
        );
    }
}

async fn upsert(queue: &str, data: Value) -> Result<String> {
    let q = open_queue(queue).await?;
    let first = q
        .upsert_job_scheduler(
            "s",
            Repeat::every(Duration::from_millis(EVERY)),
            SchedulerTemplate::new("tick").data(data),
        )
        .await?
        .expect("a first iteration");
    q.close().await?;
    Ok(first.id().to_owned())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn our_worker_recovers_an_iteration_of_a_killed_node_worker() -> Result<()> {
    if !node_available() {
        return Ok(());
    }
    let queue = unique_queue("sched-stall-node");
    // The Node worker sleeps on every iteration; ours ignores the data and completes at once.
    let first = upsert(&queue, json!({"sleepMs": 60_000})).await?;
    let mut node = tokio::process::Command::new("node")
        .arg("run_worker.js")
        .arg(
            json!({"queue": queue, "lockDuration": 1500, "stalledInterval": 500,
                "timeoutMs": 60000})
            .to_string(),
        )
        .current_dir(node_dir())
        .env("REDIS_URL", redis_url())
        .stdout(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()?;
    eventually(
        "node worker holds the first iteration",
        Duration::from_secs(20),
        || active_and_locked(&queue, &first),
    )
    .await?;
    node.kill().await?; // SIGKILL: the iteration is left active, its next one already created.

    let runs: Arc<Mutex<Vec<String>>> = Arc::default();
    let seen = runs.clone();
    let processor = move |job: Job, _ctx: JobContext| {
        seen.lock().unwrap().push(job.id().to_owned());
        async move { Ok(json!("rust")) }
    };
    let options = WorkerOptions::new().stalled_interval(Duration::from_millis(500));
    let worker =
        Worker::spawn(WorkerArgs::connect(&config(), &queue, processor, options).await?).await?;
    let enough = || {
        let runs = runs.lock().unwrap();
        runs.len() >= 4 && runs.contains(&first)
    };
    eventually(
        "the recovered iteration and three more",
        Duration::from_secs(45),
        || {
            let done = enough();
            async move { done }
        },
    )
    .await?;
    worker.close().await?;

    let runs = runs.lock().unwrap().clone();
    // Recovered once (the next iteration, due meanwhile, may run before it).
    assert_eq!(
        runs.iter().filter(|id| **id == first).count(),
        1,
        "{runs:?}"
    );
    let created = scheduler_common::added(&queue).await?;
    assert_one_series(&created);
    let stalled = read_events(&queue).await?;
    assert_eq!(stalled.iter().filter(|e| e.event == "stalled").count(), 1);
    cleanup(&queue).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_worker_recovers_an_iteration_our_worker_abandoned() -> Result<()> {
    if !node_available() {
        return Ok(());
    }
    let queue = unique_queue("sched-stall-rust");
    let first = upsert(&queue, json!({})).await?;
    let processor = |_job: Job, _ctx: JobContext| async move {
        tokio::time::sleep(Duration::from_secs(60)).await;
        Ok(json!("never"))
    };
    let options = WorkerOptions::new()
        .lock_duration(Duration::from_millis(1500))
        .skip_stalled_check(true);
    let worker =
        Worker::spawn(WorkerArgs::connect(&config(), &queue, processor, options).await?).await?;
    eventually(
        "our worker holds the first iteration",
        Duration::from_secs(20),
        || active_and_locked(&queue, &first),
    )
    .await?;
    let report = worker.close_force().await?;
    assert!(
        report.left_for_stalled_recovery.contains(&first),
        "{report:?}"
    );

    let node = run_node(
        "run_worker.js",
        &json!({"queue": queue, "stalledInterval": 500, "stopAfter": 4, "timeoutMs": 45000}),
    )
    .await?;
    assert_eq!(node["stoppedBy"], "count", "{node}");
    let processed: Vec<String> = node["processed"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|p| p["id"].as_str().map(str::to_owned))
        .collect();
    assert_eq!(
        processed.iter().filter(|id| **id == first).count(),
        1,
        "{processed:?}"
    );
    assert_one_series(&scheduler_common::added(&queue).await?);
    cleanup(&queue).await
}
