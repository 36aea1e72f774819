//! The official Rust BullMQ port's side of the `bullmq-bench` benchmarks (`bullmq-official`
//! 1.4.4, lib name `bullmq`).
//!
//! It mirrors `benches/node/{producer,worker}.js`: it takes the same JSON argument, runs one
//! scenario against `REDIS_URL` and prints the same JSON result on stdout. `bullmq-bench`
//! (`benches/src/official.rs`) builds and starts it; Redis CPU is measured by the caller around
//! the whole process, exactly as for Node.
//!
//! Modes (the `mode` field):
//! - `add` / `add-concurrent` / `addBulk`: `{queue, jobs, mode, concurrency?, batch?}` →
//!   `{mode, jobs, seconds, clientCpuMs, addP50Ms?, addP99Ms?}`; the clock starts once the queue
//!   is connected and stops when the last add has returned.
//! - `throughput`: `{queue, jobs, concurrency, workers, jobMs}` on a queue the caller filled →
//!   `{seconds, clientCpuS, rssMb}`; the clock stops at the last `Completed` worker event
//!   (sent once Redis confirmed the finish).
//! - `latency`: `{queue, rate, seconds, concurrency}` → `{jobs, seconds, clientCpuS, rssMb,
//!   activeMs: {p50, p99, p999}, completedMs: {...}}`.
//! - `memory`: `{queue, inflight}` on a queue holding `inflight` jobs → `{idleRssMb,
//!   inflightRssMb, running}`.

#[global_allocator]
static GLOBAL: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{bail, ensure, Context, Result};
use bullmq::options::RedisConnectionOptions;
use bullmq::worker::{CancellationToken, WorkerEvent};
use bullmq::{BulkJob, Job, Queue, QueueOptions, Worker, WorkerOptions};
use futures::{StreamExt, TryStreamExt};
use serde_json::{json, Value};

fn main() -> Result<()> {
    let arg = std::env::args()
        .nth(1)
        .context("usage: bullmq-bench-official '<json>'")?;
    let args: Value = serde_json::from_str(&arg).context("the argument is not JSON")?;
    // The official port is built for Tokio's default (multi-threaded) runtime.
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let result = runtime.block_on(run(&args))?;
    println!("{result}");
    // Background tasks of closed workers (blocking reads) must not keep the process alive.
    runtime.shutdown_timeout(Duration::from_millis(100));
    Ok(())
}

async fn run(args: &Value) -> Result<Value> {
    let mode = args["mode"].as_str().context("mode missing")?;
    match mode {
        "add" | "add-concurrent" | "addBulk" => producer(args, mode).await,
        "throughput" => throughput(args).await,
        "latency" => latency(args).await,
        "memory" => memory(args).await,
        other => bail!("unknown mode {other:?}"),
    }
}

fn connection() -> RedisConnectionOptions {
    let url = std::env::var("REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379".into());
    RedisConnectionOptions::new().url(url)
}

fn queue_name(args: &Value) -> Result<&str> {
    args["queue"].as_str().context("queue missing")
}

fn u64_arg(args: &Value, key: &str, default: u64) -> u64 {
    args[key].as_u64().unwrap_or(default)
}

async fn open_queue(name: &str) -> Result<Queue> {
    Queue::with_options(name, QueueOptions::new().connection(connection()))
        .await
        .with_context(|| format!("opening queue {name}"))
}

/// Node's defaults but for concurrency, as the other two sides use.
fn worker_options(concurrency: usize) -> WorkerOptions {
    WorkerOptions {
        connection: connection(),
        concurrency,
        ..WorkerOptions::default()
    }
}

/// The payload the other two sides add.
fn payload(i: u64) -> Value {
    json!({"index": i, "email": format!("user{i}@example.com"), "template": "welcome"})
}

/// User + system CPU seconds of this process (Linux `/proc/self/stat`, 100 ticks per second).
fn cpu_seconds() -> Option<f64> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    // The command name may contain spaces; utime and stime are the 12th and 13th fields after it.
    let fields: Vec<&str> = stat[stat.rfind(')')? + 2..].split(' ').collect();
    let utime: f64 = fields.get(11)?.parse().ok()?;
    let stime: f64 = fields.get(12)?.parse().ok()?;
    Some((utime + stime) / 100.0)
}

fn cpu_since(before: Option<f64>) -> Option<f64> {
    cpu_seconds()
        .zip(before)
        .map(|(after, before)| after - before)
}

/// Resident set size in MB (Linux `/proc/self/status`).
fn rss_mb() -> Option<f64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    let kb: f64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb / 1024.0)
}

fn peak(a: Option<f64>, b: Option<f64>) -> Option<f64> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.max(b)),
        (a, b) => a.or(b),
    }
}

/// The q-quantile (nearest rank) of `samples`, sorted in place.
fn quantile(samples: &mut [f64], q: f64) -> Option<f64> {
    if samples.is_empty() {
        return None;
    }
    samples.sort_by(f64::total_cmp);
    samples
        .get(((samples.len() - 1) as f64 * q).round() as usize)
        .copied()
}

fn percentiles(samples: &mut [f64]) -> Value {
    json!({
        "p50": quantile(samples, 0.5),
        "p99": quantile(samples, 0.99),
        "p999": quantile(samples, 0.999),
    })
}

async fn producer(args: &Value, mode: &str) -> Result<Value> {
    let jobs = u64_arg(args, "jobs", 10_000);
    let queue = open_queue(queue_name(args)?).await?;
    let cpu_before = cpu_seconds();
    let started = Instant::now();
    let mut latencies: Vec<f64> = Vec::new();
    match mode {
        "add" => {
            latencies.reserve(jobs as usize);
            for i in 0..jobs {
                let t = Instant::now();
                queue.add("bench", payload(i)).await?;
                latencies.push(t.elapsed().as_secs_f64() * 1e3);
            }
        }
        "add-concurrent" => {
            let in_flight = u64_arg(args, "concurrency", 100) as usize;
            let queue = &queue;
            latencies = futures::stream::iter(0..jobs)
                .map(|i| async move {
                    let t = Instant::now();
                    queue.add("bench", payload(i)).await?;
                    Ok::<_, bullmq::Error>(t.elapsed().as_secs_f64() * 1e3)
                })
                .buffer_unordered(in_flight)
                .try_collect()
                .await?;
        }
        _ => {
            let batch = u64_arg(args, "batch", 1000).max(1);
            let mut start = 0;
            while start < jobs {
                let end = (start + batch).min(jobs);
                queue
                    .add_bulk(
                        (start..end)
                            .map(|i| BulkJob::new("bench", payload(i)))
                            .collect(),
                    )
                    .await?;
                start = end;
            }
        }
    }
    let seconds = started.elapsed().as_secs_f64();
    let cpu = cpu_since(cpu_before);
    queue.close().await;
    let mut result = json!({
        "mode": mode,
        "jobs": jobs,
        "seconds": seconds,
        "clientCpuMs": cpu.map(|s| s * 1000.0),
    });
    if !latencies.is_empty() {
        result["addP50Ms"] = json!(quantile(&mut latencies, 0.5));
        result["addP99Ms"] = json!(quantile(&mut latencies, 0.99));
    }
    Ok(result)
}

/// Forwards the worker's events to `on_event` until the worker closes.
fn follow_events(worker: &Arc<Worker>, on_event: impl Fn(WorkerEvent) + Send + 'static) {
    let worker = Arc::clone(worker);
    tokio::spawn(async move {
        while let Some(event) = worker.next_event().await {
            if matches!(event, WorkerEvent::Closed) {
                break;
            }
            on_event(event);
        }
    });
}

async fn throughput(args: &Value) -> Result<Value> {
    let name = queue_name(args)?;
    let jobs = u64_arg(args, "jobs", 10_000);
    let workers = u64_arg(args, "workers", 1) as usize;
    let concurrency = u64_arg(args, "concurrency", 1) as usize;
    let job_ms = u64_arg(args, "jobMs", 0);
    let done = Arc::new(AtomicU64::new(0));
    let all_done = Arc::new(tokio::sync::Notify::new());
    let processor = move |_job: Job, _token: CancellationToken| async move {
        if job_ms > 0 {
            tokio::time::sleep(Duration::from_millis(job_ms)).await;
        }
        Ok(json!({"ok": true}))
    };
    let cpu_before = cpu_seconds();
    let started = Instant::now();
    let mut handles = Vec::with_capacity(workers);
    for _ in 0..workers {
        let worker =
            Arc::new(Worker::with_options(name, processor, worker_options(concurrency)).await?);
        let (done, all_done) = (done.clone(), all_done.clone());
        follow_events(&worker, move |event| {
            if let WorkerEvent::Completed { .. } = event {
                if done.fetch_add(1, Ordering::Relaxed) + 1 == jobs {
                    all_done.notify_one();
                }
            }
        });
        handles.push(worker);
    }
    let mut peak_rss = rss_mb();
    let deadline = Instant::now() + Duration::from_secs(300);
    loop {
        tokio::select! {
            () = all_done.notified() => break,
            () = tokio::time::sleep(Duration::from_millis(50)) => {
                peak_rss = peak(peak_rss, rss_mb());
                if done.load(Ordering::Relaxed) >= jobs { break; }
                ensure!(Instant::now() < deadline, "timed out at {} of {jobs} jobs",
                    done.load(Ordering::Relaxed));
            }
        }
    }
    let seconds = started.elapsed().as_secs_f64();
    let client_cpu_s = cpu_since(cpu_before);
    peak_rss = peak(peak_rss, rss_mb());
    close_all(&handles).await?;
    Ok(json!({"seconds": seconds, "clientCpuS": client_cpu_s, "rssMb": peak_rss}))
}

/// Closes idle workers together. Every job is finished by now; what `close` waits for is the
/// driver's blocking marker read (up to `drain_delay`, 5 s), which it aborts after the timeout,
/// so a short one keeps idle seconds out of the caller's Redis CPU window.
async fn close_all(workers: &[Arc<Worker>]) -> Result<()> {
    futures::future::try_join_all(workers.iter().map(|w| w.close(1_000))).await?;
    Ok(())
}

/// When each latency job was added (ns since `base`) and the measured latencies.
struct Clocks {
    base: Instant,
    added_ns: Vec<AtomicU64>,
    active_ms: Mutex<Vec<f64>>,
    completed_ms: Mutex<Vec<f64>>,
}

impl Clocks {
    fn now_ns(&self) -> u64 {
        u64::try_from(self.base.elapsed().as_nanos()).unwrap_or(u64::MAX)
    }

    fn since_added(&self, index: u64) -> Option<f64> {
        let added = self
            .added_ns
            .get(usize::try_from(index).ok()?)?
            .load(Ordering::Acquire);
        Some(self.now_ns().saturating_sub(added) as f64 / 1e6)
    }
}

fn lock(samples: &Mutex<Vec<f64>>) -> std::sync::MutexGuard<'_, Vec<f64>> {
    samples
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

async fn latency(args: &Value) -> Result<Value> {
    let name = queue_name(args)?;
    let rate = u64_arg(args, "rate", 1000).max(1);
    let total = rate * u64_arg(args, "seconds", 10);
    let concurrency = u64_arg(args, "concurrency", 100) as usize;
    let clocks = Arc::new(Clocks {
        base: Instant::now(),
        added_ns: (0..total).map(|_| AtomicU64::new(0)).collect(),
        active_ms: Mutex::new(Vec::with_capacity(total as usize)),
        completed_ms: Mutex::new(Vec::with_capacity(total as usize)),
    });
    let queue = open_queue(name).await?;
    let processor = {
        let clocks = clocks.clone();
        move |job: Job, _token: CancellationToken| {
            let index = job.data().get("index").and_then(Value::as_u64);
            if let Some(ms) = index.and_then(|i| clocks.since_added(i)) {
                lock(&clocks.active_ms).push(ms);
            }
            async move { Ok(json!({"ok": true})) }
        }
    };
    let worker =
        Arc::new(Worker::with_options(name, processor, worker_options(concurrency)).await?);
    {
        let clocks = clocks.clone();
        follow_events(&worker, move |event| {
            if let WorkerEvent::Completed { job_id, .. } = event {
                let index = job_id.strip_prefix("lat-").and_then(|i| i.parse().ok());
                if let Some(ms) = index.and_then(|i| clocks.since_added(i)) {
                    lock(&clocks.completed_ms).push(ms);
                }
            }
        });
    }
    // Let the worker reach its blocking wait before the first add.
    tokio::time::sleep(Duration::from_millis(200)).await;

    let cpu_before = cpu_seconds();
    let started = Instant::now();
    let interval = Duration::from_nanos(1_000_000_000 / rate);
    for i in 0..total {
        // Paced against the start, so one late tick does not lower the rate.
        let due = started + interval * u32::try_from(i).unwrap_or(u32::MAX);
        tokio::time::sleep_until(due.into()).await;
        clocks.added_ns[i as usize].store(clocks.now_ns(), Ordering::Release);
        let queue = queue.clone();
        // The id is known before the add returns, so the worker never sees an unknown job.
        tokio::spawn(async move {
            let added = queue
                .add("bench", json!({"index": i}))
                .job_id(format!("lat-{i}"))
                .await;
            if let Err(error) = added {
                eprintln!("latency: add failed: {error}");
            }
        });
    }
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut peak_rss = rss_mb();
    while (lock(&clocks.completed_ms).len() as u64) < total {
        ensure!(
            Instant::now() < deadline,
            "latency: not every job completed"
        );
        peak_rss = peak(peak_rss, rss_mb());
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let seconds = started.elapsed().as_secs_f64();
    let client_cpu_s = cpu_since(cpu_before);
    close_all(&[worker]).await?;
    queue.close().await;
    let mut active = std::mem::take(&mut *lock(&clocks.active_ms));
    let mut completed = std::mem::take(&mut *lock(&clocks.completed_ms));
    Ok(json!({
        "jobs": total,
        "seconds": seconds,
        "clientCpuS": client_cpu_s,
        "rssMb": peak_rss,
        "activeMs": percentiles(&mut active),
        "completedMs": percentiles(&mut completed),
    }))
}

async fn memory(args: &Value) -> Result<Value> {
    let name = queue_name(args)?;
    let inflight = u64_arg(args, "inflight", 10_000);
    let noop = |_job: Job, _token: CancellationToken| async move { Ok(json!({"ok": true})) };
    let idle = Worker::with_options(&format!("{name}-idle"), noop, worker_options(1)).await?;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let idle_rss = rss_mb();
    idle.close(5_000).await?;

    // Every job waits on this lock until all of them are running.
    let gate = Arc::new(tokio::sync::RwLock::new(()));
    let held = gate.clone().write_owned().await;
    let running = Arc::new(AtomicU64::new(0));
    let processor = {
        let (gate, running) = (gate.clone(), running.clone());
        move |_job: Job, _token: CancellationToken| {
            let (gate, running) = (gate.clone(), running.clone());
            async move {
                running.fetch_add(1, Ordering::Relaxed);
                drop(gate.read().await);
                Ok(json!({"ok": true}))
            }
        }
    };
    let concurrency = usize::try_from(inflight).unwrap_or(usize::MAX);
    let worker =
        Arc::new(Worker::with_options(name, processor, worker_options(concurrency)).await?);
    // The worker's event channel is unbounded: drain it so it does not count as job memory.
    follow_events(&worker, |_| {});
    let deadline = Instant::now() + Duration::from_secs(120);
    while running.load(Ordering::Relaxed) < inflight && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let inflight_rss = rss_mb();
    let reached = running.load(Ordering::Relaxed);
    drop(held);
    worker.close(10_000).await?;
    Ok(json!({"idleRssMb": idle_rss, "inflightRssMb": inflight_rss, "running": reached}))
}
