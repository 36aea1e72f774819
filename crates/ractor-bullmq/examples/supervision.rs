//! The batteries-included supervision tree: a Runtime with a Worker and a QueueEvents reader,
//! supervision events printed as they happen, and a graceful shutdown on Ctrl-C.
//!
//!     REDIS_URL=redis://127.0.0.1:6379 cargo run -p ractor-bullmq --example supervision
//!
//! Adds 10 jobs (job 3's processor panics: the job fails, the Worker keeps going), prints the
//! queue's events, and runs until Ctrl-C — or for `DEMO_SECONDS` seconds when that is set —
//! then shuts down: the Worker stops fetching, finishes its active jobs (bounded by 30 s),
//! and every actor and connection of the tree stops.

use std::time::Duration;

use ractor_bullmq::runtime::{Runtime, RuntimeOptions};
use ractor_bullmq::supervision::{RuntimeEvent, SupervisorOptions};
use ractor_bullmq::worker::{Job, JobContext};
use ractor_bullmq::{ConnectionConfig, Queue, QueueEventsOptions, QueueOptions, WorkerOptions};
use serde_json::json;

async fn processor(job: Job, _ctx: JobContext) -> anyhow::Result<serde_json::Value> {
    let i = job.data_value()["i"].as_u64().unwrap_or_default();
    tokio::time::sleep(Duration::from_millis(200)).await;
    if i == 3 {
        // A panic fails this job only; the Worker is not restarted.
        panic!("job {i} panicked on purpose");
    }
    Ok(json!({ "square": i * i }))
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    // One line per panic instead of a backtrace: job 3's panic is expected.
    std::panic::set_hook(Box::new(|info| eprintln!("[panic] {info}")));
    let connection = ConnectionConfig::from_env()?;
    let queue_name = format!("supervision-example-{}", std::process::id());

    // Restart configuration per branch: Workers may crash 5 times a minute, with backoff.
    let options = RuntimeOptions::default()
        .connection(connection.clone())
        .worker_supervisor(
            SupervisorOptions::default()
                .max_restarts(5)
                .period(Duration::from_secs(60))
                .backoff(ractor_bullmq::supervision::Backoff::Exponential {
                    initial: Duration::from_millis(200),
                    max: Duration::from_secs(5),
                }),
        )
        .worker_shutdown(Duration::from_secs(30));
    let runtime = Runtime::start(options).await?;

    // Every restart, give-up and kill in the tree.
    let mut tree_events = runtime.subscribe();
    tokio::spawn(async move {
        while let Ok(event) = tree_events.recv().await {
            match event {
                RuntimeEvent::SupervisorGaveUp {
                    supervisor,
                    child,
                    reason,
                    ..
                } => {
                    eprintln!("ERROR: {supervisor} gave up on {child}: {reason}");
                }
                other => println!("[tree] {other:?}"),
            }
        }
    });

    let worker = runtime
        .start_worker(&queue_name, processor, WorkerOptions::new().concurrency(4))
        .await?;
    let events = runtime
        .start_queue_events(QueueEventsOptions::new(
            queue_name.clone(),
            connection.clone(),
        ))
        .await?;
    let mut stream = events.subscribe_stream();
    tokio::spawn(async move {
        while let Some(e) = stream.recv().await {
            println!("[queue] {} job {:?}", e.event.name(), e.event.job_id());
        }
    });

    let queue = Queue::new(&queue_name, QueueOptions::new(connection)).await?;
    for i in 0..10 {
        queue.add("square", json!({ "i": i })).await?;
    }
    println!("worker {} running; Ctrl-C to stop", worker.id());

    match std::env::var("DEMO_SECONDS")
        .ok()
        .and_then(|s| s.parse().ok())
    {
        Some(seconds) => tokio::time::sleep(Duration::from_secs(seconds)).await,
        None => tokio::signal::ctrl_c().await?,
    }
    println!("shutting down gracefully");
    runtime.shutdown(Duration::from_secs(30)).await?;
    let counts = queue.get_job_counts().await?;
    println!(
        "completed {}, failed {}, waiting {}",
        counts.completed, counts.failed, counts.waiting
    );
    queue.obliterate(true).await?;
    queue.close().await?;
    Ok(())
}
