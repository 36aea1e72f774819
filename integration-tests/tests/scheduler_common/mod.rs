//! Helpers of the job scheduler tests: our Worker recording each start, the reports of the
//! Node and Python workers in the same shape, and checks that a series of iterations stays on
//! its schedule.
#![allow(dead_code, unreachable_pub)]

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::Result;
use ractor_bullmq::worker::{Job, JobContext};
use ractor_bullmq::{Worker, WorkerArgs, WorkerCallbacks, WorkerHandle, WorkerOptions};
use serde_json::Value as Json;

use super::common::{eventually, now_ms, read_events};
use super::worker_common::{config, count, scripted};

/// One processor start: job id, when, attempts made before it.
#[derive(Debug, Clone)]
pub struct Started {
    /// Job id.
    pub id: String,
    /// When the processor started, ms.
    pub at: u64,
    /// Attempts made before this one.
    pub attempts_made: u64,
}

pub type Log = Arc<Mutex<Vec<Started>>>;

/// Our Worker with the data-driven processor, recording each start.
pub async fn recording_worker(queue: &str, name: &str) -> Result<(WorkerHandle, Log)> {
    spawn_recording(
        queue,
        name,
        WorkerCallbacks::new().on_error(|e| eprintln!("worker error: {e}")),
    )
    .await
}

/// [`recording_worker`] that also collects the worker's errors.
pub async fn recording_worker_with_errors(
    queue: &str,
    errors: Arc<Mutex<Vec<String>>>,
) -> Result<(WorkerHandle, Log)> {
    let callbacks =
        WorkerCallbacks::new().on_error(move |e| errors.lock().unwrap().push(e.to_string()));
    spawn_recording(queue, "rust", callbacks).await
}

async fn spawn_recording(
    queue: &str,
    name: &str,
    callbacks: WorkerCallbacks,
) -> Result<(WorkerHandle, Log)> {
    let log: Log = Arc::default();
    let seen = log.clone();
    let processor = move |job: Job, ctx: JobContext| {
        seen.lock().unwrap().push(Started {
            id: job.id().to_owned(),
            at: now_ms(),
            attempts_made: u64::from(job.attempts_made()),
        });
        scripted(job, ctx)
    };
    let args = WorkerArgs::connect(&config(), queue, processor, WorkerOptions::new().name(name))
        .await?
        .callbacks(callbacks);
    Ok((Worker::spawn(args).await?, log))
}

pub fn started_of(log: &Log) -> Vec<Started> {
    log.lock().unwrap().clone()
}

/// A Node or Python Worker's starts (`run_worker.js`, `scheduler.py` output).
pub fn started_of_node(report: &Json) -> Vec<Started> {
    report["processed"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|p| Started {
            id: p["id"].as_str().unwrap_or_default().to_owned(),
            at: p["startedAt"].as_u64().unwrap_or(0),
            attempts_made: p["attemptsMade"].as_u64().unwrap_or(0),
        })
        .collect()
}

/// The millis of iteration `job_id` of scheduler `id`.
pub fn millis_of(id: &str, job_id: &str) -> u64 {
    job_id
        .strip_prefix(&format!("repeat:{id}:"))
        .and_then(|m| m.parse().ok())
        .unwrap_or_else(|| panic!("{job_id} is not an iteration of {id}"))
}

/// Checks a series of first starts: distinct iterations of `id`, on one `every` grid (each a
/// whole number of intervals after the previous), none started before its time.
pub fn assert_on_schedule(id: &str, every: u64, starts: &[Started]) -> Vec<u64> {
    let firsts: Vec<&Started> = starts.iter().filter(|s| s.attempts_made == 0).collect();
    let mut millis: Vec<u64> = firsts.iter().map(|s| millis_of(id, &s.id)).collect();
    millis.sort_unstable();
    let distinct: BTreeSet<u64> = millis.iter().copied().collect();
    assert_eq!(
        distinct.len(),
        millis.len(),
        "an iteration ran twice: {millis:?}"
    );
    for pair in millis.windows(2) {
        let gap = pair[1] - pair[0];
        assert!(
            gap > 0 && gap % every == 0,
            "off the {every} ms grid: {millis:?}"
        );
    }
    for s in &firsts {
        let due = millis_of(id, &s.id);
        // Same host clock on both sides; 5 ms for reading it at different moments.
        assert!(
            s.at + 5 >= due,
            "{} started at {} before its time",
            s.id,
            s.at
        );
    }
    millis
}

/// Ids of the iterations `added` to `queue`'s events, in order.
pub async fn added(queue: &str) -> Result<Vec<String>> {
    Ok(read_events(queue)
        .await?
        .into_iter()
        .filter(|e| e.event == "added")
        .filter_map(|e| {
            e.fields
                .into_iter()
                .find(|(k, _)| k == "jobId")
                .map(|(_, v)| v)
        })
        .collect())
}

pub async fn wait_for(what: &str, secs: u64, mut f: impl FnMut() -> bool) -> Result<()> {
    eventually(what, Duration::from_secs(secs), || {
        let ok = f();
        async move { ok }
    })
    .await
}

/// Waits until `queue` has no job waiting, active or due soon other than delayed ones.
pub async fn settled(queue: &str) -> Result<()> {
    let q = queue.to_owned();
    eventually("queue settled", Duration::from_secs(30), move || {
        let q = q.clone();
        async move {
            let mut busy = 0;
            for key in ["wait", "active", "prioritized"] {
                busy += count(&q, key).await.unwrap_or(1);
            }
            busy == 0
        }
    })
    .await
}
