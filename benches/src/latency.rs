//! The latency benchmark: a producer adds jobs at a steady rate while one worker runs them;
//! add → active (processor started) and add → completed (finish confirmed by Redis) are
//! measured with the client's monotonic clock, ours next to Node's and the official port's.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{ensure, Context, Result};
use bullmq_redis::fred::prelude::Client;
use ractor_bullmq::protocol::options::JobOptions;
use ractor_bullmq::worker::{Job, JobContext, Worker, WorkerArgs, WorkerCallbacks};
use ractor_bullmq::{ConnectionConfig, Queue, QueueOptions};
use serde_json::json;

use crate::report::quantile;
use crate::sides::Sides;
use crate::worker::{queue_name, rss_mb, worker_options};
use crate::worker_report::WorkerMeasurement;
use crate::{process_cpu, redis_stats};

/// The latency scenario.
#[derive(Debug, Clone, Copy)]
pub(crate) struct LatencyScenario {
    /// Jobs added per second.
    pub(crate) rate: u64,
    /// How long the producer runs.
    pub(crate) seconds: u64,
    /// Worker concurrency.
    pub(crate) concurrency: usize,
}

impl LatencyScenario {
    fn name(&self) -> String {
        format!("latency_{}_per_s", self.rate)
    }
}

/// Shared clocks of one run: when each job was added, and the measured latencies (also used by
/// the PostgreSQL group).
pub(crate) struct Clocks {
    base: Instant,
    added_ns: Vec<AtomicU64>,
    active_ms: Mutex<Vec<f64>>,
    completed_ms: Mutex<Vec<f64>>,
}

impl Clocks {
    /// Clocks for jobs `0..total` (their payload's `index`).
    pub(crate) fn new(total: u64) -> Arc<Self> {
        Arc::new(Self {
            base: Instant::now(),
            added_ns: (0..total).map(|_| AtomicU64::new(0)).collect(),
            active_ms: Mutex::new(Vec::with_capacity(total as usize)),
            completed_ms: Mutex::new(Vec::with_capacity(total as usize)),
        })
    }

    fn since_added(&self, job: &Job) -> Option<f64> {
        let index = job.data_value().get("index")?.as_u64()?;
        let added = self
            .added_ns
            .get(usize::try_from(index).ok()?)?
            .load(Ordering::Acquire);
        let now = u64::try_from(self.base.elapsed().as_nanos()).unwrap_or(u64::MAX);
        Some(now.saturating_sub(added) as f64 / 1e6)
    }

    /// A no-op processor that records add → active.
    pub(crate) fn processor(self: &Arc<Self>) -> impl ractor_bullmq::worker::Processor {
        let clocks = self.clone();
        move |job: Job, _ctx: JobContext| {
            if let Some(ms) = clocks.since_added(&job) {
                lock(&clocks.active_ms).push(ms);
            }
            std::future::ready(Ok::<_, anyhow::Error>(json!({"ok": true})))
        }
    }

    /// Callbacks that record add → completed.
    pub(crate) fn callbacks(self: &Arc<Self>) -> WorkerCallbacks {
        let clocks = self.clone();
        WorkerCallbacks::new().on_completed(move |job, _| {
            if let Some(ms) = clocks.since_added(job) {
                lock(&clocks.completed_ms).push(ms);
            }
        })
    }

    /// Adds `rate` jobs a second for `seconds` (`lat-<i>`, payload `{index: i}`), each add
    /// spawned at its due time (paced against the start, so one late tick does not lower the
    /// rate), then waits up to `timeout` until every job completed; returns the seconds from
    /// the first add to the last completion and the peak RSS seen.
    pub(crate) async fn pace_adds_and_wait(
        &self,
        queue: &Queue,
        rate: u64,
        total: u64,
        timeout: Duration,
    ) -> Result<(f64, Option<f64>)> {
        let started = Instant::now();
        let interval = Duration::from_nanos(1_000_000_000 / rate.max(1));
        for i in 0..total {
            let due = started + interval * u32::try_from(i).unwrap_or(u32::MAX);
            tokio::time::sleep_until(due.into()).await;
            let now = u64::try_from(self.base.elapsed().as_nanos()).unwrap_or(u64::MAX);
            self.added_ns[i as usize].store(now, Ordering::Release);
            let queue = queue.clone();
            tokio::spawn(async move {
                let opts = JobOptions::default().job_id(format!("lat-{i}"));
                if let Err(error) = queue.add_job("bench", json!({"index": i}), opts).await {
                    eprintln!("latency: add failed: {error}");
                }
            });
        }
        let deadline = Instant::now() + timeout;
        let mut peak_rss = rss_mb();
        while (lock(&self.completed_ms).len() as u64) < total {
            ensure!(
                Instant::now() < deadline,
                "latency: {} of {total} jobs completed",
                lock(&self.completed_ms).len()
            );
            peak_rss = crate::worker::peak(peak_rss, rss_mb());
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        Ok((started.elapsed().as_secs_f64(), peak_rss))
    }

    /// p50 / p99 / p99.9 of add → active and of add → completed, in ms.
    pub(crate) fn percentiles(&self) -> ([Option<f64>; 3], [Option<f64>; 3]) {
        let mut active = std::mem::take(&mut *lock(&self.active_ms));
        let mut completed = std::mem::take(&mut *lock(&self.completed_ms));
        let three = |samples: &mut Vec<f64>| [0.5, 0.99, 0.999].map(|q| quantile(samples, q));
        (three(&mut active), three(&mut completed))
    }
}

fn lock(samples: &Mutex<Vec<f64>>) -> std::sync::MutexGuard<'_, Vec<f64>> {
    samples
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Runs the scenario for us and (when asked) for Node and the official port.
pub(crate) async fn run(
    connection: &ConnectionConfig,
    admin: &Client,
    scenario: LatencyScenario,
    sides: Sides,
    redis_url: &str,
) -> Result<Vec<WorkerMeasurement>> {
    let ours = run_ours(connection, admin, scenario, sides.node.then_some(redis_url)).await?;
    ours.print_json_line();
    let mut results = vec![ours];
    for other in sides.others() {
        let name = queue_name("latency", other.name(), &scenario.name());
        let cpu_before = redis_stats::server_cpu_seconds(admin).await?;
        let reply = other
            .run(
                "worker.js",
                &json!({"mode": "latency", "queue": name, "rate": scenario.rate,
                        "seconds": scenario.seconds, "concurrency": scenario.concurrency}),
                redis_url,
            )
            .await?;
        let redis_cpu = redis_stats::server_cpu_seconds(admin).await? - cpu_before;
        let jobs = reply["jobs"]
            .as_u64()
            .with_context(|| format!("{}: jobs", other.name()))?;
        let seconds = reply["seconds"]
            .as_f64()
            .with_context(|| format!("{}: seconds", other.name()))?;
        let mut m = WorkerMeasurement::new(
            other.name(),
            scenario.name(),
            jobs,
            (1, scenario.concurrency, 0),
            seconds,
        )
        .redis_cpu(redis_cpu);
        m.client_cpu_s = reply["clientCpuS"].as_f64();
        m.rss_mb = reply["rssMb"].as_f64();
        m.active_p50_ms = reply["activeMs"]["p50"].as_f64();
        m.active_p99_ms = reply["activeMs"]["p99"].as_f64();
        m.active_p999_ms = reply["activeMs"]["p999"].as_f64();
        m.completed_p50_ms = reply["completedMs"]["p50"].as_f64();
        m.completed_p99_ms = reply["completedMs"]["p99"].as_f64();
        m.completed_p999_ms = reply["completedMs"]["p999"].as_f64();
        m.print_json_line();
        results.push(m);
        redis_stats::delete_queue(admin, "bull", &name).await?;
    }
    Ok(results)
}

async fn run_ours(
    connection: &ConnectionConfig,
    admin: &Client,
    scenario: LatencyScenario,
    check_with_node: Option<&str>,
) -> Result<WorkerMeasurement> {
    let name = queue_name("latency", "rust", &scenario.name());
    let total = scenario.rate * scenario.seconds;
    let clocks = Clocks::new(total);
    let queue = Queue::new(name.clone(), QueueOptions::new(connection.clone())).await?;
    let args = WorkerArgs::connect(
        connection,
        &name,
        clocks.processor(),
        worker_options(scenario.concurrency),
    )
    .await?
    .callbacks(clocks.callbacks());
    let worker = Worker::spawn(args).await?;
    // Let the worker reach its blocking wait before the first add.
    tokio::time::sleep(Duration::from_millis(200)).await;

    let cpu_before = redis_stats::server_cpu_seconds(admin).await?;
    let client_before = process_cpu::cpu_seconds();
    let (seconds, peak_rss) = clocks
        .pace_adds_and_wait(&queue, scenario.rate, total, Duration::from_secs(60))
        .await?;
    let client_cpu_s = process_cpu::cpu_seconds()
        .zip(client_before)
        .map(|(after, before)| after - before);
    let redis_cpu = redis_stats::server_cpu_seconds(admin).await? - cpu_before;
    worker.close().await?;
    let mut m = WorkerMeasurement::new(
        "rust",
        scenario.name(),
        total,
        (1, scenario.concurrency, 0),
        seconds,
    )
    .redis_cpu(redis_cpu);
    m.client_cpu_s = client_cpu_s;
    m.rss_mb = peak_rss;
    let (active, completed) = clocks.percentiles();
    [m.active_p50_ms, m.active_p99_ms, m.active_p999_ms] = active;
    [m.completed_p50_ms, m.completed_p99_ms, m.completed_p999_ms] = completed;
    if let Some(url) = check_with_node {
        m.compat_checked = Some(crate::worker::check_completed_by_node(&queue, &name, url).await?);
    }
    queue.close().await?;
    redis_stats::delete_queue(admin, "bull", &name).await?;
    Ok(m)
}
