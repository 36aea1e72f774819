//! Measures the memory footprint of the supervision tree: per idle Worker (with its
//! LockManager and two Redis connections) and per in-flight job, run as a task (the default)
//! and as a job actor.
//!
//!     cargo run --release -p ractor-bullmq --example measure_footprint
//!
//! Linux only (reads `/proc/self/statm`). Starts `IDLE_WORKERS` (default 200) idle Workers on
//! an empty queue under a Runtime and reports the RSS growth per Worker; then one Worker with
//! concurrency `JOBS` (default 10 000) runs that many jobs sleeping 60 s and reports the RSS
//! growth per in-flight job once all are active, for each `JobRunner`. Uses `REDIS_URL`;
//! removes its queues.

use std::time::{Duration, Instant};

use ractor_bullmq::protocol::options::JobOptions;
use ractor_bullmq::runtime::{Runtime, RuntimeOptions};
use ractor_bullmq::worker::{Job, JobContext, JobRunner};
use ractor_bullmq::{ConnectionConfig, Queue, QueueOptions, WorkerOptions};
use serde_json::json;

/// Resident set size in bytes.
fn rss() -> anyhow::Result<u64> {
    let statm = std::fs::read_to_string("/proc/self/statm")?;
    let pages: u64 = statm
        .split_whitespace()
        .nth(1)
        .ok_or_else(|| anyhow::anyhow!("unexpected /proc/self/statm"))?
        .parse()?;
    Ok(pages * 4096)
}

fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

async fn settle() {
    tokio::time::sleep(Duration::from_secs(2)).await;
}

/// An actor that does nothing but wait: the per-actor floor of ractor itself.
struct BareActor;

impl ractor::Actor for BareActor {
    type Msg = ();
    type State = ();
    type Arguments = ();

    async fn pre_start(
        &self,
        _myself: ractor::ActorRef<()>,
        _args: (),
    ) -> Result<(), ractor::ActorProcessingErr> {
        Ok(())
    }

    async fn handle(
        &self,
        _myself: ractor::ActorRef<()>,
        _message: (),
        _state: &mut (),
    ) -> Result<(), ractor::ActorProcessingErr> {
        tokio::time::sleep(Duration::from_secs(3600)).await;
        Ok(())
    }
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let idle_workers = env_usize("IDLE_WORKERS", 200);
    let jobs = env_usize("JOBS", 10_000);
    let connection = ConnectionConfig::from_env()?;
    let runtime = Runtime::start(RuntimeOptions::default().connection(connection.clone())).await?;
    let pid = std::process::id();

    // Baseline: what one bare ractor actor costs, so the job-actor figure below can be read
    // against the floor that one-actor-per-job sets.
    settle().await;
    let before = rss()?;
    let mut bare = Vec::with_capacity(jobs);
    for _ in 0..jobs {
        let (actor, _) = ractor::Actor::spawn(None, BareActor, ()).await?;
        actor.cast(())?;
        bare.push(actor);
    }
    settle().await;
    let after = rss()?;
    println!(
        "{jobs} bare ractor actors (baseline): {:.2} KiB per actor",
        (after.saturating_sub(before)) as f64 / 1024.0 / jobs as f64
    );
    for actor in bare {
        actor.kill();
    }
    settle().await;

    // Idle Workers.
    let idle_queue = format!("footprint-idle-{pid}");
    settle().await;
    let before = rss()?;
    for _ in 0..idle_workers {
        runtime
            .start_worker(
                &idle_queue,
                |_job: Job, _ctx: JobContext| async move { Ok(json!(null)) },
                WorkerOptions::new(),
            )
            .await?;
    }
    settle().await;
    let after = rss()?;
    println!(
        "{idle_workers} idle workers: RSS +{:.1} MiB, {:.1} KiB per worker (incl. LockManager and 2 connections)",
        (after - before) as f64 / 1_048_576.0,
        (after.saturating_sub(before)) as f64 / 1024.0 / idle_workers as f64
    );

    // In-flight sleeping jobs, once per way of running them.
    let mut busy_queues = Vec::new();
    for runner in [JobRunner::Task, JobRunner::Actor] {
        let busy_queue = format!("footprint-busy-{runner:?}-{pid}");
        busy_queues.push(busy_queue.clone());
        let queue = Queue::new(&busy_queue, QueueOptions::new(connection.clone())).await?;
        let ids: Vec<usize> = (0..jobs).collect();
        for chunk in ids.chunks(1000) {
            queue
                .add_bulk(
                    chunk
                        .iter()
                        .map(|i| ("sleep", json!({ "i": i }), JobOptions::default())),
                )
                .await?;
        }
        settle().await;
        let before = rss()?;
        runtime
            .start_worker(
                &busy_queue,
                |_job: Job, _ctx: JobContext| async move {
                    tokio::time::sleep(Duration::from_secs(60)).await;
                    Ok(json!(null))
                },
                WorkerOptions::new().concurrency(jobs).job_runner(runner),
            )
            .await?;
        let started = Instant::now();
        loop {
            let counts = queue.get_job_counts().await?;
            if counts.active as usize >= jobs || started.elapsed() > Duration::from_secs(50) {
                println!("active jobs: {}", counts.active);
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        settle().await;
        let after = rss()?;
        println!(
            "{jobs} in-flight sleeping jobs, JobRunner::{runner:?}: RSS {:.1} MiB total, +{:.1} MiB, {:.2} KiB per job",
            after as f64 / 1_048_576.0,
            (after - before) as f64 / 1_048_576.0,
            (after.saturating_sub(before)) as f64 / 1024.0 / jobs as f64
        );
        queue.close().await?;
    }

    // Cancel the sleepers (bounded shutdown) and clean up.
    runtime.shutdown(Duration::from_secs(5)).await.ok();
    for name in busy_queues.iter().chain([&idle_queue]) {
        let queue = Queue::new(name, QueueOptions::new(connection.clone())).await?;
        queue.obliterate(true).await?;
        queue.close().await?;
    }
    Ok(())
}
