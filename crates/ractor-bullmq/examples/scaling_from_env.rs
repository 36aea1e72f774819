//! The container pattern: the number of Workers and their concurrency come from the
//! environment, and a WorkerManager runs them.
//!
//!     WORKER_COUNT=4 CONCURRENCY=20 QUEUE=emails REDIS_URL=redis://127.0.0.1:6379 \
//!         cargo run -p ractor-bullmq --example scaling_from_env
//!
//! Scale vertically with `WORKER_COUNT` × `CONCURRENCY` per process; horizontally by running
//! more containers against the same Redis (any mix of languages). Optional `AUTOSCALE_MAX`
//! turns on autoscaling between `WORKER_COUNT` and `AUTOSCALE_MAX` (one worker per
//! `CONCURRENCY` waiting jobs). Each job sleeps `JOB_MS` ms (default 10; 0 = no-op). With
//! `DEMO_JOBS=n` the example adds n jobs, exits once they are done and prints the throughput
//! (measured from the first add to the last completion); otherwise it runs until Ctrl-C or
//! SIGTERM.

use std::time::{Duration, Instant};

use ractor_bullmq::manager::{Autoscale, WorkerManagerOptions};
use ractor_bullmq::protocol::options::JobOptions;
use ractor_bullmq::runtime::{Runtime, RuntimeOptions};
use ractor_bullmq::worker::{Job, JobContext};
use ractor_bullmq::{ConnectionConfig, Queue, QueueOptions, WorkerOptions};
use serde_json::json;

fn env_usize(name: &str, default: usize) -> anyhow::Result<usize> {
    match std::env::var(name) {
        Ok(v) => v
            .parse()
            .map_err(|e| anyhow::anyhow!("{name}={v:?} is not a number: {e}")),
        Err(_) => Ok(default),
    }
}

/// A stand-in for IO-bound work (an HTTP call, a query) of `JOB_MS` milliseconds (default 10;
/// 0 = a no-op job, which measures the queue's own overhead).
fn processor(
    job_ms: u64,
) -> impl Fn(Job, JobContext) -> futures::future::BoxFuture<'static, anyhow::Result<serde_json::Value>>
       + Send
       + Sync
       + 'static {
    move |job: Job, _ctx: JobContext| {
        Box::pin(async move {
            if job_ms > 0 {
                tokio::time::sleep(Duration::from_millis(job_ms)).await;
            }
            Ok(json!({ "id": job.id() }))
        })
    }
}

async fn wait_for_shutdown_signal() -> anyhow::Result<()> {
    #[cfg(unix)]
    {
        let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
        tokio::select! {
            r = tokio::signal::ctrl_c() => r?,
            _ = term.recv() => {}
        }
        Ok(())
    }
    #[cfg(not(unix))]
    {
        tokio::signal::ctrl_c().await?;
        Ok(())
    }
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let workers = env_usize("WORKER_COUNT", 2)?;
    let concurrency = env_usize("CONCURRENCY", 10)?;
    let demo_jobs = env_usize("DEMO_JOBS", 0)?;
    let job_ms = env_usize("JOB_MS", 10)? as u64;
    let queue_name = std::env::var("QUEUE")
        .unwrap_or_else(|_| format!("scaling-example-{}", std::process::id()));
    let connection = ConnectionConfig::from_env()?;

    let runtime = Runtime::start(RuntimeOptions::default().connection(connection.clone())).await?;
    let mut options = WorkerManagerOptions::new().workers(workers);
    if let Ok(max) = std::env::var("AUTOSCALE_MAX") {
        let max: usize = max.parse()?;
        let per_worker = concurrency.max(1);
        options = options.autoscale(Autoscale::new(
            Duration::from_secs(2),
            workers,
            max.max(workers),
            move |input| (input.waiting as usize).div_ceil(per_worker),
        ));
    }
    let manager = runtime
        .worker_manager(
            &queue_name,
            processor(job_ms),
            WorkerOptions::new().concurrency(concurrency),
            options,
        )
        .await?;
    println!(
        "queue {queue_name}: {} workers x concurrency {concurrency}",
        manager.worker_count().await?
    );

    if demo_jobs > 0 {
        let queue = Queue::new(&queue_name, QueueOptions::new(connection)).await?;
        let started = Instant::now();
        let ids: Vec<usize> = (0..demo_jobs).collect();
        for chunk in ids.chunks(1000) {
            queue
                .add_bulk(
                    chunk
                        .iter()
                        .map(|i| ("job", json!({ "i": i }), JobOptions::default())),
                )
                .await?;
        }
        loop {
            let counts = queue.get_job_counts().await?;
            if counts.completed as usize >= demo_jobs {
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let elapsed = started.elapsed();
        println!(
            "{demo_jobs} jobs in {:.2} s: {:.0} jobs/s",
            elapsed.as_secs_f64(),
            demo_jobs as f64 / elapsed.as_secs_f64()
        );
        runtime.shutdown(Duration::from_secs(30)).await?;
        queue.obliterate(true).await?;
        queue.close().await?;
        return Ok(());
    }

    wait_for_shutdown_signal().await?;
    println!("stopping: workers finish their active jobs");
    runtime.shutdown(Duration::from_secs(30)).await?;
    Ok(())
}
