//! The `events` stream is part of the wire format: QueueEvents listeners and dashboards in any
//! language read it. Each scenario here runs once through Node BullMQ 6.7.0 (on queue A) and
//! once through our `Queue` (on queue B); the two streams must hold the same events with the
//! same fields in the same order. Stream ids and absolute times are the only things ignored.
//! Both queues start empty, so generated job ids line up and are compared as they are.
//! The last scenario does the same for a worker: a Node `Worker` on queue A, our `Worker` on
//! queue B, the same jobs and processor behaviour.

mod common;

use common::*;
use ractor_bullmq::protocol::options::JobOptions;
use std::time::Duration;

use ractor_bullmq::protocol::state::JobState;
use ractor_bullmq::worker::{Job, JobContext, Worker, WorkerArgs, WorkerOptions};
use ractor_bullmq::{ConnectionConfig, Queue};
use serde_json::{json, Value as Json};

/// One operation of a scenario, runnable through Node and through our Queue.
#[derive(Debug, Clone)]
enum Step {
    /// `queue.add(name, data, opts)`.
    Add(&'static str, Json, Json),
    /// `queue.addBulk([...])` of `(name, data, opts)`.
    AddBulk(Vec<(&'static str, Json, Json)>),
    Pause,
    Resume,
    Remove(&'static str),
    Progress(&'static str, Json),
    Log(&'static str, &'static str),
    UpdateData(&'static str, Json),
    /// `queue.clean(grace 0, limit, state)`.
    Clean(JobState, u64),
    Drain {
        delayed: bool,
    },
}

async fn run_through_node(queue: &str, steps: &[Step]) -> anyhow::Result<()> {
    for step in steps {
        let arg = match step {
            Step::Add(name, data, opts) => {
                run_node(
                    "add_jobs.js",
                    &json!({"queue": queue, "jobs": [{"name": name, "data": data, "opts": opts}]}),
                )
                .await?;
                continue;
            }
            Step::AddBulk(jobs) => {
                let jobs: Vec<Json> = jobs
                    .iter()
                    .map(|(name, data, opts)| json!({"name": name, "data": data, "opts": opts}))
                    .collect();
                run_node(
                    "add_jobs.js",
                    &json!({"queue": queue, "jobs": jobs, "bulk": true}),
                )
                .await?;
                continue;
            }
            Step::Pause => json!({"op": "pause"}),
            Step::Resume => json!({"op": "resume"}),
            Step::Remove(id) => json!({"op": "remove", "id": id}),
            Step::Progress(id, progress) => {
                json!({"op": "updateProgress", "id": id, "progress": progress})
            }
            Step::Log(id, row) => json!({"op": "log", "id": id, "row": row}),
            Step::UpdateData(id, data) => json!({"op": "updateData", "id": id, "data": data}),
            Step::Clean(state, limit) => {
                json!({"op": "clean", "grace": 0, "limit": limit, "type": node_clean_type(*state)})
            }
            Step::Drain { delayed } => json!({"op": "drain", "delayed": delayed}),
        };
        let mut arg = arg;
        arg["queue"] = json!(queue);
        run_node("admin.js", &arg).await?;
    }
    Ok(())
}

/// Node's `clean` type names (`wait` rather than `waiting`).
fn node_clean_type(state: JobState) -> &'static str {
    match state {
        JobState::Waiting => "wait",
        other => other.as_str(),
    }
}

fn options(opts: &Json) -> JobOptions {
    serde_json::from_value(opts.clone()).expect("test options are valid BullMQ options")
}

async fn run_through_rust(queue: &Queue, steps: &[Step]) -> anyhow::Result<()> {
    for step in steps {
        match step {
            Step::Add(name, data, opts) => {
                queue.add(*name, data).opts(options(opts)).await?;
            }
            Step::AddBulk(jobs) => {
                let jobs = jobs
                    .iter()
                    .map(|(name, data, opts)| (*name, data, options(opts)));
                queue.add_bulk(jobs).await?;
            }
            Step::Pause => queue.pause().await?,
            Step::Resume => queue.resume().await?,
            Step::Remove(id) => {
                queue.remove(id).await?;
            }
            Step::Progress(id, progress) => queue.update_progress(id, progress).await?,
            Step::Log(id, row) => {
                queue.add_job_log(id, row, None).await?;
            }
            Step::UpdateData(id, data) => queue.update_data(id, data).await?,
            Step::Clean(state, limit) => {
                queue
                    .clean(
                        ractor_bullmq::CleanOptions::new(std::time::Duration::ZERO)
                            .limit(*limit)
                            .state(*state),
                    )
                    .await?;
            }
            Step::Drain { delayed } => {
                queue.drain(*delayed).await?;
            }
        }
    }
    Ok(())
}

/// Runs `steps` through both, compares the normalised streams, cleans up.
async fn same_events(scenario: &str, steps: Vec<Step>) -> anyhow::Result<()> {
    let node_queue = unique_queue(&format!("ev-node-{scenario}"));
    let rust_queue = unique_queue(&format!("ev-rust-{scenario}"));
    run_through_node(&node_queue, &steps).await?;
    let queue = open_queue(&rust_queue).await?;
    run_through_rust(&queue, &steps).await?;

    let identity = |id: &str| id.to_string();
    let theirs = normalize_events(&read_events(&node_queue).await?, &identity);
    let ours = normalize_events(&read_events(&rust_queue).await?, &identity);
    assert!(
        !theirs.is_empty(),
        "scenario {scenario} produced no Node events"
    );
    assert_eq!(
        ours, theirs,
        "scenario {scenario}: events differ\n ours: {ours:#?}\nNode's: {theirs:#?}"
    );
    cleanup(&node_queue).await?;
    cleanup(&rust_queue).await?;
    Ok(())
}

#[tokio::test]
async fn adds_emit_the_same_events() -> anyhow::Result<()> {
    if !node_available() {
        return Ok(());
    }
    same_events(
        "adds",
        vec![
            Step::Add("standard", json!({"a": 1}), json!({})),
            Step::Add("delayed", json!({}), json!({"delay": 30_000})),
            Step::Add("prioritized", json!({}), json!({"priority": 4})),
            Step::Add("lifo", json!({}), json!({"lifo": true})),
            Step::Add("custom", json!({}), json!({"jobId": "my-job"})),
            // A taken custom id: `duplicated`, and the first job stays as it was.
            Step::Add(
                "custom-again",
                json!({"other": true}),
                json!({"jobId": "my-job"}),
            ),
            Step::Add(
                "retries",
                json!({}),
                json!({"attempts": 3, "backoff": {"type": "fixed", "delay": 5}}),
            ),
        ],
    )
    .await
}

#[tokio::test]
async fn bulk_adds_emit_the_same_events() -> anyhow::Result<()> {
    if !node_available() {
        return Ok(());
    }
    same_events(
        "bulk",
        vec![Step::AddBulk(vec![
            ("one", json!({}), json!({})),
            ("two", json!({}), json!({"delay": 10_000})),
            ("three", json!({}), json!({"priority": 2})),
            ("four", json!({}), json!({"jobId": "bulk-id"})),
            ("five", json!({}), json!({"lifo": true})),
        ])],
    )
    .await
}

#[tokio::test]
async fn pause_and_resume_emit_the_same_events() -> anyhow::Result<()> {
    if !node_available() {
        return Ok(());
    }
    same_events(
        "pause",
        vec![
            Step::Add("before", json!({}), json!({})),
            Step::Pause,
            Step::Add("while-paused", json!({}), json!({})),
            Step::Add("while-paused-prio", json!({}), json!({"priority": 1})),
            Step::Resume,
            Step::Add("after", json!({}), json!({})),
        ],
    )
    .await
}

#[tokio::test]
async fn removals_emit_the_same_events() -> anyhow::Result<()> {
    if !node_available() {
        return Ok(());
    }
    same_events(
        "remove",
        vec![
            Step::Add("waiting", json!({}), json!({})),
            Step::Add("delayed", json!({}), json!({"delay": 60_000})),
            Step::Add("prioritized", json!({}), json!({"priority": 3})),
            Step::Remove("1"),
            Step::Remove("2"),
            Step::Remove("3"),
            Step::Remove("does-not-exist"),
        ],
    )
    .await
}

#[tokio::test]
async fn cleans_and_drains_emit_the_same_events() -> anyhow::Result<()> {
    if !node_available() {
        return Ok(());
    }
    same_events(
        "clean",
        vec![
            Step::Add("w1", json!({}), json!({})),
            Step::Add("w2", json!({}), json!({})),
            Step::Add("w3", json!({}), json!({})),
            Step::Add("d1", json!({}), json!({"delay": 60_000})),
            Step::Add("d2", json!({}), json!({"delay": 60_000})),
            Step::Add("p1", json!({}), json!({"priority": 2})),
            Step::Clean(JobState::Waiting, 2),
            Step::Clean(JobState::Delayed, 0),
            Step::Clean(JobState::Prioritized, 0),
            Step::Add("w4", json!({}), json!({})),
            Step::Add("d3", json!({}), json!({"delay": 60_000})),
            Step::Drain { delayed: false },
            Step::Drain { delayed: true },
        ],
    )
    .await
}

#[tokio::test]
async fn progress_logs_and_data_updates_emit_the_same_events() -> anyhow::Result<()> {
    if !node_available() {
        return Ok(());
    }
    same_events(
        "progress",
        vec![
            Step::Add("job", json!({"v": 1}), json!({})),
            Step::Progress("1", json!(42)),
            Step::Progress("1", json!({"step": "upload", "pct": 0.5})),
            Step::Log("1", "a log line"),
            Step::UpdateData("1", json!({"v": 2})),
        ],
    )
    .await
}

/// Our processor with the behaviour `run_worker.js` gives Node's: job data chooses progress,
/// failures and the return value.
async fn scripted_processor(job: Job, ctx: JobContext) -> anyhow::Result<Json> {
    let data = job.data_value().clone();
    if let Some(progress) = data.get("progress") {
        ctx.update_progress(progress.clone()).await?;
    }
    if let Some(reason) = data.get("fail").and_then(Json::as_str) {
        anyhow::bail!("{reason}");
    }
    if let Some(n) = data.get("failAttempts").and_then(Json::as_u64) {
        if u64::from(job.attempts_made()) < n {
            anyhow::bail!("failing attempt {} on purpose", job.attempts_made() + 1);
        }
    }
    Ok(data
        .get("returnValue")
        .cloned()
        .unwrap_or_else(|| json!({"processedBy": "node"})))
}

#[tokio::test]
async fn a_worker_emits_the_same_events_as_a_node_worker() -> anyhow::Result<()> {
    if !node_available() {
        return Ok(());
    }
    let jobs = json!([
        {"name": "ok", "data": {"returnValue": {"v": 1}}},
        {"name": "fails", "data": {"fail": "boom"}},
        {"name": "progress", "data": {"progress": 50}},
        {"name": "prio", "data": {}, "opts": {"priority": 2}},
        {"name": "retry", "data": {"failAttempts": 1}, "opts": {"attempts": 2}},
    ]);
    let node_queue = unique_queue("ev-node-worker");
    let rust_queue = unique_queue("ev-rust-worker");
    run_node("add_jobs.js", &json!({"queue": node_queue, "jobs": jobs})).await?;
    run_node("add_jobs.js", &json!({"queue": rust_queue, "jobs": jobs})).await?;

    // Five jobs, six attempts (the retried one fails once), concurrency 1 on both sides.
    let out = run_node(
        "run_worker.js",
        &json!({"queue": node_queue, "stopAfter": 6, "timeoutMs": 30_000}),
    )
    .await?;
    assert_eq!(out["stoppedBy"], "count", "{out}");

    let config = ConnectionConfig::from_url(&redis_url())?;
    let args = WorkerArgs::connect(
        &config,
        &rust_queue,
        scripted_processor,
        WorkerOptions::new(),
    )
    .await?;
    let worker = Worker::spawn(args).await?;
    // Both workers end with `drained` once the queue is empty.
    eventually(
        "our worker drains the queue",
        Duration::from_secs(30),
        || {
            let queue = rust_queue.clone();
            async move {
                read_events(&queue)
                    .await
                    .map(|events| events.iter().any(|e| e.event == "drained"))
                    .unwrap_or(false)
            }
        },
    )
    .await?;
    worker.close().await?;

    let identity = |id: &str| id.to_string();
    let theirs = normalize_events(&read_events(&node_queue).await?, &identity);
    let ours = normalize_events(&read_events(&rust_queue).await?, &identity);
    assert_eq!(
        ours, theirs,
        "worker events differ\n ours: {ours:#?}\nNode's: {theirs:#?}"
    );
    cleanup(&node_queue).await?;
    cleanup(&rust_queue).await?;
    Ok(())
}
