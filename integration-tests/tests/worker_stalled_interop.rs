//! Stalled recovery across languages: a Node worker killed with SIGKILL mid-job is recovered
//! by our Worker, and a job our Worker abandons (force close) is recovered by a Node worker.

mod common;
mod worker_common;

use std::time::Duration;

use common::*;
use ractor_bullmq::worker::{Job, JobContext};
use ractor_bullmq::{Worker, WorkerArgs, WorkerOptions};
use serde_json::{json, Value};
use worker_common::*;

async fn read_one(queue: &str, id: &str) -> anyhow::Result<Value> {
    let read = run_node("read_jobs.js", &json!({"queue": queue, "ids": [id]})).await?;
    Ok(read["jobs"][0].clone())
}

#[tokio::test]
async fn our_worker_recovers_a_job_of_a_killed_node_worker() -> anyhow::Result<()> {
    if !node_available() {
        return Ok(());
    }
    let queue = unique_queue("w-stall-node");
    let added = run_node(
        "add_jobs.js",
        &json!({"queue": queue, "jobs": [{"name": "long", "data": {"sleepMs": 60000}}]}),
    )
    .await?;
    let id = added["ids"][0].as_str().unwrap_or_default().to_string();

    let mut node = tokio::process::Command::new("node")
        .arg("run_worker.js")
        .arg(json!({"queue": queue, "lockDuration": 1500, "stalledInterval": 500, "timeoutMs": 60000}).to_string())
        .current_dir(node_dir())
        .env("REDIS_URL", redis_url())
        .stdout(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()?;
    eventually("node worker holds the job", Duration::from_secs(20), || {
        active_and_locked(&queue, &id)
    })
    .await?;
    node.kill().await?; // SIGKILL

    let processor = |_job: Job, _ctx: JobContext| async move { Ok(json!("recovered by rust")) };
    let options = WorkerOptions::new().stalled_interval(Duration::from_millis(500));
    let worker =
        Worker::spawn(WorkerArgs::connect(&config(), &queue, processor, options).await?).await?;
    wait_finished(&queue, 1, Duration::from_secs(30)).await?;
    worker.close().await?;

    let job = read_one(&queue, &id).await?;
    assert_eq!(job["state"], "completed");
    assert_eq!(job["returnvalue"], "recovered by rust");
    assert_eq!(job["stalledCounter"], 1);
    assert_eq!(job["attemptsMade"], 1);
    assert_eq!(job["attemptsStarted"], 2);
    let events = read_events(&queue).await?;
    assert_eq!(events.iter().filter(|e| e.event == "stalled").count(), 1);
    cleanup(&queue).await
}

#[tokio::test]
async fn a_node_worker_recovers_a_job_our_worker_abandoned() -> anyhow::Result<()> {
    if !node_available() {
        return Ok(());
    }
    let queue = unique_queue("w-stall-rust");
    let added = run_node(
        "add_jobs.js",
        &json!({"queue": queue, "jobs": [{"name": "long", "data": {}}]}),
    )
    .await?;
    let id = added["ids"][0].as_str().unwrap_or_default().to_string();
    let processor = |_job: Job, _ctx: JobContext| async move {
        tokio::time::sleep(Duration::from_secs(60)).await;
        Ok(json!("never"))
    };
    let options = WorkerOptions::new()
        .lock_duration(Duration::from_millis(1500))
        .skip_stalled_check(true);
    let worker =
        Worker::spawn(WorkerArgs::connect(&config(), &queue, processor, options).await?).await?;
    eventually("our worker holds the job", Duration::from_secs(20), || {
        active_and_locked(&queue, &id)
    })
    .await?;
    let report = worker.close_force().await?;
    assert_eq!(report.left_for_stalled_recovery, vec![id.clone()]);

    let node = run_node(
        "run_worker.js",
        &json!({"queue": queue, "stalledInterval": 500, "stopAfter": 1, "timeoutMs": 30000}),
    )
    .await?;
    assert_eq!(node["stoppedBy"], "count", "{node}");
    let job = read_one(&queue, &id).await?;
    assert_eq!(job["state"], "completed");
    assert_eq!(job["returnvalue"], json!({"processedBy": "node"}));
    assert_eq!(job["stalledCounter"], 1);
    assert_eq!(job["attemptsMade"], 1);
    cleanup(&queue).await
}
