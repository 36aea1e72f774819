//! The memory benchmark: resident memory of an idle worker, and of one worker holding many
//! in-flight sleeping jobs. Each implementation runs in a fresh process (ours re-runs this
//! binary with `memory --inner`, Node a fresh `node`, the official port its own binary), so
//! allocations of earlier scenarios do not count.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{ensure, Context, Result};
use bullmq_redis::fred::prelude::Client;
use ractor_bullmq::worker::{Job, JobContext, Worker, WorkerArgs};
use ractor_bullmq::{ConnectionConfig, Queue, QueueOptions};
use serde_json::{json, Value};

use crate::redis_stats;
use crate::sides::{Other, Sides};
use crate::worker::{fill, queue_name, rss_mb, worker_options};
use crate::worker_report::WorkerMeasurement;

/// The inner run (in its own process): prints `{idleRssMb, inflightRssMb, running}`.
pub(crate) async fn inner(connection: &ConnectionConfig, queue: &str, inflight: u64) -> Result<()> {
    let idle_queue = format!("{queue}-idle");
    let noop = |_job: Job, _ctx: JobContext| async move { Ok(json!({"ok": true})) };
    let idle =
        Worker::spawn(WorkerArgs::connect(connection, &idle_queue, noop, worker_options(1)).await?)
            .await?;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let idle_rss = rss_mb();
    idle.close().await?;

    // Every job waits on this lock until all of them are running.
    let gate = Arc::new(tokio::sync::RwLock::new(()));
    let held = gate.clone().write_owned().await;
    let running = Arc::new(AtomicU64::new(0));
    let processor = {
        let (gate, running) = (gate.clone(), running.clone());
        move |_job: Job, _ctx: JobContext| {
            let (gate, running) = (gate.clone(), running.clone());
            async move {
                running.fetch_add(1, Ordering::Relaxed);
                drop(gate.read().await);
                Ok(json!({"ok": true}))
            }
        }
    };
    let concurrency = usize::try_from(inflight).unwrap_or(usize::MAX);
    let worker = Worker::spawn(
        WorkerArgs::connect(connection, queue, processor, worker_options(concurrency)).await?,
    )
    .await?;
    let deadline = Instant::now() + Duration::from_secs(120);
    while running.load(Ordering::Relaxed) < inflight && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let inflight_rss = rss_mb();
    let reached = running.load(Ordering::Relaxed);
    drop(held);
    worker.close().await?;
    println!(
        "{}",
        json!({"idleRssMb": idle_rss, "inflightRssMb": inflight_rss, "running": reached})
    );
    Ok(())
}

fn measurements(
    implementation: &'static str,
    inflight: u64,
    reply: &Value,
) -> Result<Vec<WorkerMeasurement>> {
    let running = reply["running"].as_u64().unwrap_or(0);
    ensure!(
        running == inflight,
        "{implementation} memory: only {running} of {inflight} jobs were running"
    );
    let mut idle = WorkerMeasurement::new(implementation, "memory_idle_worker", 0, (1, 1, 0), 0.0);
    idle.rss_mb = reply["idleRssMb"].as_f64();
    let name = format!("memory_{inflight}_inflight");
    let mut busy = WorkerMeasurement::new(
        implementation,
        name,
        inflight,
        (1, usize::try_from(inflight).unwrap_or(usize::MAX), 0),
        0.0,
    );
    busy.rss_mb = reply["inflightRssMb"].as_f64();
    Ok(vec![idle, busy])
}

/// jemalloc settings of the Rust sides' memory processes (ours and the official port's): hand
/// freed pages back at once, so RSS shows what the jobs hold rather than pages a burst (the
/// 10 000 jobs' fetch replies) freed and the allocator kept for reuse.
pub(crate) const JEMALLOC_RETURN_FREED_PAGES: (&str, &str) =
    ("_RJEM_MALLOC_CONF", "dirty_decay_ms:0,muzzy_decay_ms:0");

/// Runs the memory scenarios for us (a child process), Node and the official port.
pub(crate) async fn run(
    connection: &ConnectionConfig,
    admin: &Client,
    inflight: u64,
    sides: Sides,
    redis_url: &str,
) -> Result<Vec<WorkerMeasurement>> {
    let mut results = Vec::new();
    let mut implementations = vec![None];
    implementations.extend(sides.others().into_iter().map(Some));
    for other in implementations {
        let implementation = other.map_or("rust", Other::name);
        let name = queue_name("memory", implementation, "inflight");
        let queue = Queue::new(name.clone(), QueueOptions::new(connection.clone())).await?;
        fill(&queue, inflight).await?;
        let reply: Value = if let Some(other) = other {
            other
                .run(
                    "worker.js",
                    &json!({"mode": "memory", "queue": name, "inflight": inflight}),
                    redis_url,
                )
                .await?
        } else {
            let output = tokio::process::Command::new(std::env::current_exe()?)
                .args(["--redis-url", redis_url, "memory", "--inflight"])
                .arg(inflight.to_string())
                .args(["--inner-queue", &name])
                .env(JEMALLOC_RETURN_FREED_PAGES.0, JEMALLOC_RETURN_FREED_PAGES.1)
                .kill_on_drop(true)
                .output()
                .await
                .context("re-running the benchmark binary")?;
            ensure!(
                output.status.success(),
                "memory --inner failed: {}",
                String::from_utf8_lossy(&output.stderr)
            );
            let stdout = String::from_utf8_lossy(&output.stdout);
            let line = stdout.lines().last().unwrap_or_default();
            serde_json::from_str(line)
                .with_context(|| format!("memory --inner printed {stdout}"))?
        };
        for m in measurements(implementation, inflight, &reply)? {
            m.print_json_line();
            results.push(m);
        }
        queue.close().await?;
        redis_stats::delete_queue(admin, "bull", &name).await?;
        redis_stats::delete_queue(admin, "bull", &format!("{name}-idle")).await?;
    }
    Ok(results)
}
