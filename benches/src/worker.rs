//! The worker benchmark: how fast workers drain a filled queue of no-op (or sleeping) jobs,
//! ours next to Node BullMQ's and the official Rust port's, with a compatibility check inside
//! the run.
//!
//! For each implementation the queue is filled first (with our `add_bulk`, identical for all),
//! then `workers` workers with `concurrency` slots each are started in one process and the
//! clock runs until the last job is completed (the worker's `completed` callback / event, fired
//! once Redis confirmed the finish). Redis CPU is the server's `INFO cpu` delta over the drain.
//! After our run, Node BullMQ reads back a sample of the jobs our worker completed and the
//! scenario fails unless each one is `completed` with a return value.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, ensure, Context, Result};
use bullmq_redis::fred::prelude::Client;
use ractor_bullmq::protocol::options::JobOptions;
use ractor_bullmq::worker::{Job, JobContext, Worker, WorkerArgs, WorkerCallbacks, WorkerOptions};
use ractor_bullmq::{ConnectionConfig, Queue, QueueOptions};
use serde_json::{json, Value};
use tokio::sync::Notify;

use crate::sides::{Other, Sides};
use crate::worker_report::WorkerMeasurement;
use crate::{node, process_cpu, redis_stats};

/// One worker scenario.
#[derive(Debug, Clone, Copy)]
pub(crate) struct WorkerScenario {
    /// Jobs to process.
    pub(crate) jobs: u64,
    /// Slots per worker.
    pub(crate) concurrency: usize,
    /// Workers in the process.
    pub(crate) workers: usize,
    /// Processor time per job (0: returns at once).
    pub(crate) job_ms: u64,
}

impl WorkerScenario {
    /// The scenario's name in the JSON lines and the table.
    pub(crate) fn name(&self) -> String {
        let mut name = format!("worker_{}x{}", self.workers, self.concurrency);
        if self.job_ms > 0 {
            name.push_str(&format!("_{}ms", self.job_ms));
        }
        name
    }

    fn shape(&self) -> (usize, usize, u64) {
        (self.workers, self.concurrency, self.job_ms)
    }
}

/// The payload of every benchmark job (the Node side never adds, it drains what we filled).
pub(crate) fn payload(i: u64) -> Value {
    json!({"index": i, "email": format!("user{i}@example.com"), "template": "welcome"})
}

/// Fills `queue` with `jobs` jobs in `add_bulk` batches of 1000.
pub(crate) async fn fill(queue: &Queue, jobs: u64) -> Result<()> {
    let mut next = 0;
    while next < jobs {
        let end = (next + 1000).min(jobs);
        queue
            .add_bulk((next..end).map(|i| ("bench", payload(i), JobOptions::default())))
            .await?;
        next = end;
    }
    Ok(())
}

/// Resident set size of this process in MB (Linux `/proc/self/status`).
pub(crate) fn rss_mb() -> Option<f64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    let kb: f64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb / 1024.0)
}

/// The larger of two optional samples.
pub(crate) fn peak(a: Option<f64>, b: Option<f64>) -> Option<f64> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.max(b)),
        (a, b) => a.or(b),
    }
}

/// A unique queue name for one run of one scenario.
pub(crate) fn queue_name(kind: &str, implementation: &str, scenario: &str) -> String {
    format!(
        "bench-{kind}-{implementation}-{}-{scenario}-{:08x}",
        std::process::id(),
        rand_suffix()
    )
}

fn rand_suffix() -> u32 {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or_default();
    nanos ^ std::process::id().rotate_left(16)
}

/// Benchmark worker options: Node's defaults but for concurrency (and no stalled check, which
/// Node runs too but only once per 30 s).
pub(crate) fn worker_options(concurrency: usize) -> WorkerOptions {
    WorkerOptions::new().concurrency(concurrency)
}

/// Runs one scenario for us, then (when asked) for Node and the official port; returns the
/// measurements.
pub(crate) async fn run(
    connection: &ConnectionConfig,
    admin: &Client,
    scenario: WorkerScenario,
    sides: Sides,
    redis_url: &str,
) -> Result<Vec<WorkerMeasurement>> {
    let check = sides.node.then_some(redis_url);
    let mut results = vec![run_ours(connection, admin, scenario, check).await?];
    results[0].print_json_line();
    for other in sides.others() {
        let m = run_other(other, connection, admin, scenario, redis_url).await?;
        m.print_json_line();
        results.push(m);
    }
    Ok(results)
}

async fn run_ours(
    connection: &ConnectionConfig,
    admin: &Client,
    scenario: WorkerScenario,
    check_with_node: Option<&str>,
) -> Result<WorkerMeasurement> {
    let name = queue_name("worker", "rust", &scenario.name());
    let queue = Queue::new(name.clone(), QueueOptions::new(connection.clone())).await?;
    fill(&queue, scenario.jobs).await?;

    let done = Arc::new(AtomicU64::new(0));
    let all_done = Arc::new(Notify::new());
    let job_ms = scenario.job_ms;
    let processor = move |_job: Job, _ctx: JobContext| async move {
        if job_ms > 0 {
            tokio::time::sleep(Duration::from_millis(job_ms)).await;
        }
        Ok(json!({"ok": true}))
    };
    let cpu_before = redis_stats::server_cpu_seconds(admin).await?;
    let client_before = process_cpu::cpu_seconds();
    let started = Instant::now();
    let mut handles = Vec::with_capacity(scenario.workers);
    for _ in 0..scenario.workers {
        let (done, all_done, total) = (done.clone(), all_done.clone(), scenario.jobs);
        let callbacks = WorkerCallbacks::new().on_completed(move |_job, _value| {
            if done.fetch_add(1, Ordering::Relaxed) + 1 == total {
                all_done.notify_one();
            }
        });
        let args = WorkerArgs::connect(
            connection,
            &name,
            processor,
            worker_options(scenario.concurrency),
        )
        .await?
        .callbacks(callbacks);
        handles.push(Worker::spawn(args).await?);
    }
    let mut peak_rss = rss_mb();
    let deadline = Instant::now() + Duration::from_secs(300);
    loop {
        tokio::select! {
            () = all_done.notified() => break,
            () = tokio::time::sleep(Duration::from_millis(50)) => {
                peak_rss = crate::worker::peak(peak_rss, rss_mb());
                if done.load(Ordering::Relaxed) >= scenario.jobs { break; }
                ensure!(Instant::now() < deadline, "{}: timed out at {} of {} jobs",
                    scenario.name(), done.load(Ordering::Relaxed), scenario.jobs);
            }
        }
    }
    let seconds = started.elapsed().as_secs_f64();
    let client_cpu_s = process_cpu::cpu_seconds()
        .zip(client_before)
        .map(|(after, before)| after - before);
    let redis_cpu = redis_stats::server_cpu_seconds(admin).await? - cpu_before;
    peak_rss = crate::worker::peak(peak_rss, rss_mb());
    for handle in &handles {
        handle.close().await?;
    }
    let mut m = WorkerMeasurement::new(
        "rust",
        scenario.name(),
        scenario.jobs,
        scenario.shape(),
        seconds,
    )
    .redis_cpu(redis_cpu);
    m.client_cpu_s = client_cpu_s;
    m.rss_mb = peak_rss;
    if let Some(url) = check_with_node {
        m.compat_checked = Some(check_completed_by_node(&queue, &name, url).await?);
    }
    queue.close().await?;
    redis_stats::delete_queue(admin, "bull", &name).await?;
    Ok(m)
}

/// Node BullMQ reads back up to 100 completed jobs (spread over the run) and must find each
/// completed with a return value; returns "ok/checked".
pub(crate) async fn check_completed_by_node(
    queue: &Queue,
    name: &str,
    redis_url: &str,
) -> Result<String> {
    let counts = queue.get_job_counts().await?;
    let completed = counts.completed;
    ensure!(completed > 0, "{name}: no completed jobs to check");
    let step = (completed / 100).max(1);
    let ids = queue
        .get_job_ids(
            &[ractor_bullmq::protocol::JobState::Completed],
            0,
            i64::try_from(completed).unwrap_or(i64::MAX) - 1,
            true,
        )
        .await
        .context("listing completed jobs")?;
    let sample: Vec<&String> = ids.iter().step_by(step as usize).take(100).collect();
    let reply = node::run(
        "readback.js",
        &json!({"queue": name, "ids": sample}),
        redis_url,
    )
    .await?;
    let checked = reply["checked"].as_u64().unwrap_or(0);
    let ok = reply["ok"].as_u64().unwrap_or(0);
    if checked == 0 || ok != checked {
        bail!(
            "{name}: Node BullMQ found {ok} of {checked} jobs completed with a return value: {}",
            reply["bad"]
        );
    }
    Ok(format!("{ok}/{checked} ✓"))
}

/// Node's `worker.js` or the official binary in `throughput` mode on a queue we filled; Redis
/// CPU is measured around the whole subprocess.
async fn run_other(
    other: Other,
    connection: &ConnectionConfig,
    admin: &Client,
    scenario: WorkerScenario,
    redis_url: &str,
) -> Result<WorkerMeasurement> {
    let name = queue_name("worker", other.name(), &scenario.name());
    let queue = Queue::new(name.clone(), QueueOptions::new(connection.clone())).await?;
    fill(&queue, scenario.jobs).await?;
    let cpu_before = redis_stats::server_cpu_seconds(admin).await?;
    let reply = other
        .run(
            "worker.js",
            &json!({"mode": "throughput", "queue": name, "jobs": scenario.jobs,
                    "concurrency": scenario.concurrency, "workers": scenario.workers,
                    "jobMs": scenario.job_ms}),
            redis_url,
        )
        .await?;
    let redis_cpu = redis_stats::server_cpu_seconds(admin).await? - cpu_before;
    let seconds = reply["seconds"]
        .as_f64()
        .with_context(|| format!("{}: seconds", other.name()))?;
    let mut m = WorkerMeasurement::new(
        other.name(),
        scenario.name(),
        scenario.jobs,
        scenario.shape(),
        seconds,
    )
    .redis_cpu(redis_cpu);
    m.client_cpu_s = reply["clientCpuS"].as_f64();
    m.rss_mb = reply["rssMb"].as_f64();
    queue.close().await?;
    redis_stats::delete_queue(admin, "bull", &name).await?;
    Ok(m)
}
