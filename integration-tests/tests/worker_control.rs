//! Worker control on Redis (issue 14, item 3): `cancel_job`, per-job timeouts and run-time
//! concurrency, with processors that honour and that ignore the cancellation token.
//!
//! The differential test adds the same jobs (same ids) to two queues with Node's Queue; Node's
//! Worker processes one copy, calling `worker.cancelJob(id, reason)` on the jobs to cancel
//! from their processor, which honours its abort signal (`node/cancel_job.js`); ours processes
//! the other, cancelling the same jobs with `WorkerHandle::cancel_job` and one by its timeout
//! (its reason is the text of our timeout's `failedReason`, passed to Node's `cancelJob`). Both
//! copies end in the same raw Redis state (`tests/raw_state`) with the same per-job events.
//! Memory-backend tests of the same features, without Node, are in
//! `crates/ractor-bullmq/tests/worker_control_memory.rs`.

mod common;
mod raw_state;
mod worker_common;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use anyhow::Result;
use common::*;
use ractor_bullmq::worker::{Job, JobContext, WorkerHandle};
use ractor_bullmq::{Worker, WorkerArgs, WorkerCallbacks, WorkerOptions};
use raw_state::{assert_same_state, snapshot};
use serde_json::{json, Value};
use tokio::sync::Semaphore;
use worker_common::*;

const LONG: Duration = Duration::from_secs(60);

/// The timeout of jobs named `slow` in our run.
const SLOW_TIMEOUT: Duration = Duration::from_millis(300);

/// The jobs of the differential test: cancelled on the first of two attempts (then completes),
/// cancelled on its only attempt, not cancelled, and timed out (ours) / cancelled with the
/// same reason (Node's).
fn jobs() -> Value {
    json!([
        {"name": "job", "data": {"cancel": "stop, then retry"}, "opts": {"jobId": "retry", "attempts": 2}},
        {"name": "job", "data": {"cancel": "stop for good"}, "opts": {"jobId": "final"}},
        {"name": "job", "data": {}, "opts": {"jobId": "plain"}},
        {"name": "slow", "data": {"cancel": "job timed out after 300 ms"}, "opts": {"jobId": "timeout"}},
    ])
}

/// Spawns our worker (not running yet) on `queue` with `processor`.
async fn spawn(
    queue: &str,
    processor: impl ractor_bullmq::worker::Processor,
    options: WorkerOptions,
) -> Result<WorkerHandle> {
    let args = WorkerArgs::connect(&config(), queue, processor, options.autorun(false))
        .await?
        .callbacks(WorkerCallbacks::new());
    Ok(Worker::spawn(args).await?)
}

/// Our processor of the differential test, the same program as `node/cancel_job.js`'s: a job
/// with `data.cancel` on its first attempt has its worker cancel it (jobs named `slow` are
/// left to their timeout) and returns the cancellation's message once its token fires.
fn cancelling(handle: Arc<OnceLock<WorkerHandle>>) -> impl ractor_bullmq::worker::Processor {
    move |job: Job, ctx: JobContext| {
        let handle = handle.clone();
        async move {
            let reason = job.data_value()["cancel"].as_str().map(str::to_string);
            let Some(reason) = reason.filter(|_| job.attempts_made() == 0) else {
                return Ok(json!({"ok": true}));
            };
            if job.name() != "slow" {
                let worker = handle.get().expect("set before the worker runs");
                assert!(worker.cancel_job(job.id(), Some(&reason)).await?);
            }
            ctx.cancellation_token().cancelled().await;
            Err::<Value, _>(anyhow::anyhow!(ctx.cancel_message().unwrap_or_default()))
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancelled_and_timed_out_jobs_end_as_nodes_cancel_job_leaves_them() -> Result<()> {
    if !node_available() {
        return Ok(());
    }
    let node = unique_queue("wctl-node");
    let ours = unique_queue("wctl-rust");
    add_with_node(&node, jobs()).await?;
    add_with_node(&ours, jobs()).await?;

    let out = run_node("cancel_job.js", &json!({"queue": node, "jobs": 5})).await?;
    assert_eq!(out["stoppedBy"], "count", "{out}");
    assert_eq!(
        out["cancelled"],
        json!([
            {"id": "retry", "found": true},
            {"id": "final", "found": true},
            {"id": "timeout", "found": true},
        ]),
        "{out}"
    );

    let handle = Arc::new(OnceLock::new());
    let worker = spawn(
        &ours,
        cancelling(handle.clone()),
        WorkerOptions::new().job_timeout_for("slow", SLOW_TIMEOUT),
    )
    .await?;
    handle.set(worker.clone()).ok();
    worker.run()?;
    wait_finished(&ours, 4, LONG).await?;
    worker.close().await?;
    for id in ["retry", "final", "plain", "timeout"] {
        assert!(!active_and_locked(&ours, id).await, "{id} left active");
    }

    let names = [(node.as_str(), "<queue>"), (ours.as_str(), "<queue>")];
    let (node_state, our_state) = (
        snapshot(&node, &names).await?,
        snapshot(&ours, &names).await?,
    );
    assert_same_state(&our_state, &node_state, "cancelled jobs");
    let failed = |state: &BTreeMap<String, Value>, id: &str| {
        state[id]["hash"]["failedReason"]
            .as_str()
            .map(str::to_string)
    };
    assert_eq!(
        failed(&our_state, "final").as_deref(),
        Some("stop for good")
    );
    assert_eq!(
        failed(&our_state, "timeout").as_deref(),
        Some("job timed out after 300 ms")
    );
    assert_eq!(
        raw_state::per_job_events(&ours, &names).await?,
        raw_state::per_job_events(&node, &names).await?,
        "per-job events"
    );
    cleanup(&node).await?;
    cleanup(&ours).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_processor_ignoring_its_token_is_dropped_after_the_grace_and_the_attempt_fails(
) -> Result<()> {
    let queue = unique_queue("wctl-ignore");
    let ids = add_with_node(
        &queue,
        json!([
            {"name": "job", "data": {}, "opts": {"jobId": "cancelled", "attempts": 2}},
            {"name": "slow", "data": {}, "opts": {"jobId": "timed"}},
        ]),
    )
    .await?;
    assert_eq!(ids, ["cancelled", "timed"]);
    let started = Arc::new(Mutex::new(Vec::<String>::new()));
    let seen = started.clone();
    let processor = move |job: Job, _ctx: JobContext| {
        let seen = seen.clone();
        async move {
            seen.lock().unwrap().push(job.id().to_string());
            if job.attempts_made() == 0 {
                // Ignores the token.
                tokio::time::sleep(Duration::from_secs(600)).await;
            }
            Ok::<Value, anyhow::Error>(json!("late"))
        }
    };
    let worker = spawn(
        &queue,
        processor,
        WorkerOptions::new()
            .concurrency(2)
            .job_timeout_for("slow", SLOW_TIMEOUT)
            .cancel_grace(Duration::from_millis(200)),
    )
    .await?;
    worker.run()?;
    let s = started.clone();
    eventually("both jobs started", LONG, move || {
        let n = s.lock().unwrap().len();
        async move { n >= 2 }
    })
    .await?;
    assert!(
        worker
            .cancel_job("cancelled", Some("no longer needed"))
            .await?
    );
    wait_finished(&queue, 2, LONG).await?;
    worker.close().await?;

    let names = [(queue.as_str(), "<queue>")];
    let state = snapshot(&queue, &names).await?;
    let hash = |id: &str| state[id]["hash"].clone();
    // Retried once (its second attempt completes), the other failed for good.
    assert_eq!(hash("cancelled")["failedReason"], "no longer needed");
    assert_eq!(hash("cancelled")["atm"], "2");
    assert_eq!(hash("cancelled")["returnvalue"], "\"late\"");
    assert_eq!(hash("timed")["failedReason"], "job timed out after 300 ms");
    assert_eq!(hash("timed")["atm"], "1");
    assert_eq!(state["completed"], json!({"zset": ["cancelled"]}));
    assert_eq!(state["failed"], json!({"zset": ["timed"]}));
    assert!(!state.contains_key("active"), "{state:?}");
    for id in ["cancelled", "timed"] {
        assert!(!state.contains_key(&format!("{id}:lock")), "{id} locked");
    }
    cleanup(&queue).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrency_changed_at_run_time_changes_how_many_jobs_run_at_once() -> Result<()> {
    let queue = unique_queue("wctl-conc");
    let jobs: Vec<Value> = (0..6).map(|_| json!({"name": "job", "data": {}})).collect();
    add_with_node(&queue, Value::Array(jobs)).await?;
    let running = Arc::new(AtomicUsize::new(0));
    let at_start = Arc::new(Mutex::new(Vec::<usize>::new()));
    let gate = Arc::new(Semaphore::new(0));
    let (r, a, g) = (running.clone(), at_start.clone(), gate.clone());
    let processor = move |_job: Job, _ctx: JobContext| {
        let (running, at_start, gate) = (r.clone(), a.clone(), g.clone());
        async move {
            let now = running.fetch_add(1, Ordering::SeqCst) + 1;
            at_start.lock().unwrap().push(now);
            gate.acquire().await?.forget();
            running.fetch_sub(1, Ordering::SeqCst);
            Ok::<Value, anyhow::Error>(json!(null))
        }
    };
    let worker = spawn(&queue, processor, WorkerOptions::new().concurrency(1)).await?;
    worker.run()?;
    let started = |n: usize| {
        let a = at_start.clone();
        move || {
            let len = a.lock().unwrap().len();
            async move { len >= n }
        }
    };
    eventually("one job running", LONG, started(1)).await?;
    worker.set_concurrency(3)?;
    eventually("three jobs running", LONG, started(3)).await?;
    assert_eq!(worker.active_count().await?, 3);
    assert_eq!(*at_start.lock().unwrap(), vec![1, 2, 3]);

    worker.set_concurrency(1)?;
    gate.add_permits(3);
    wait_finished(&queue, 3, LONG).await?;
    for n in 4..=6 {
        eventually("the next job running", LONG, started(n)).await?;
        assert_eq!(worker.active_count().await?, 1);
        gate.add_permits(1);
    }
    wait_finished(&queue, 6, LONG).await?;
    assert_eq!(&at_start.lock().unwrap()[3..], &[1, 1, 1]);
    worker.close().await?;
    cleanup(&queue).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lifecycle_callbacks_fire_once_each_in_order() -> Result<()> {
    let queue = unique_queue("wctl-life");
    let log = Arc::new(Mutex::new(Vec::<&'static str>::new()));
    let cb = |name: &'static str| {
        let log = log.clone();
        move || log.lock().unwrap().push(name)
    };
    let callbacks = WorkerCallbacks::new()
        .on_ready(cb("ready"))
        .on_paused(cb("paused"))
        .on_resumed(cb("resumed"))
        .on_closing(cb("closing"))
        .on_closed(cb("closed"));
    let worker = spawn_worker(&queue, WorkerOptions::new(), callbacks).await?;
    worker.pause()?;
    worker.pause()?;
    assert!(!worker.is_running().await);
    worker.resume()?;
    assert!(worker.is_running().await);
    worker.close().await?;
    assert_eq!(
        *log.lock().unwrap(),
        vec!["ready", "paused", "resumed", "closing", "closed"]
    );
    cleanup(&queue).await
}
