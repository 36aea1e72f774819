//! `Runtime::shutdown` with jobs in flight, against a real Redis: a graceful shutdown lets the
//! active jobs finish and closes every connection; a bounded one cancels what is still running
//! and leaves it to stalled recovery, which another worker then completes.

mod common;

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::*;
use ractor_bullmq::manager::WorkerManagerOptions;
use ractor_bullmq::protocol::options::JobOptions;
use ractor_bullmq::runtime::{Runtime, RuntimeOptions};
use ractor_bullmq::worker::{Job, JobContext};
use ractor_bullmq::{ConnectionConfig, Queue, QueueEventsOptions, WorkerOptions};
use serde_json::{json, Value};

const LONG: Duration = Duration::from_secs(120);

async fn add_jobs(queue: &Queue, n: usize) -> anyhow::Result<()> {
    queue
        .add_bulk((0..n).map(|i| ("job", json!({ "i": i }), JobOptions::default())))
        .await?;
    Ok(())
}

/// Sleeps `ms` while `slow` is set; counts jobs running now.
fn processor(
    ms: u64,
    slow: Arc<AtomicBool>,
    running: Arc<AtomicUsize>,
) -> impl Fn(Job, JobContext) -> futures::future::BoxFuture<'static, anyhow::Result<Value>>
       + Send
       + Sync
       + 'static {
    move |_job: Job, _ctx: JobContext| {
        let slow = slow.clone();
        let running = running.clone();
        Box::pin(async move {
            running.fetch_add(1, Ordering::SeqCst);
            if slow.load(Ordering::SeqCst) {
                tokio::time::sleep(Duration::from_millis(ms)).await;
            }
            running.fetch_sub(1, Ordering::SeqCst);
            Ok(json!("ok"))
        })
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn graceful_shutdown_finishes_active_jobs_and_closes_connections() -> anyhow::Result<()> {
    let name = unique_queue("rt-shutdown");
    let queue = open_queue(&name).await?;
    let connection = ConnectionConfig::from_url(&redis_url())?;
    let runtime = Runtime::start(RuntimeOptions::default().connection(connection.clone())).await?;
    let running = Arc::new(AtomicUsize::new(0));
    let slow = Arc::new(AtomicBool::new(true));
    runtime
        .start_worker(
            &name,
            processor(1_000, slow.clone(), running.clone()),
            WorkerOptions::new().concurrency(4),
        )
        .await?;
    runtime
        .worker_manager(
            &name,
            processor(1_000, slow.clone(), running.clone()),
            WorkerOptions::new().concurrency(2),
            WorkerManagerOptions::new().workers(2),
        )
        .await?;
    let events = runtime
        .start_queue_events(QueueEventsOptions::new(name.clone(), connection))
        .await?;
    let mut stream = events.subscribe_stream();

    add_jobs(&queue, 20).await?;
    eventually("8 jobs running (every slot busy)", LONG, || async {
        running.load(Ordering::SeqCst) == 8
    })
    .await?;
    assert!(!named_clients(&name).await?.is_empty());
    runtime.shutdown(Duration::from_secs(60)).await?;
    assert!(!runtime.is_running());

    let counts = queue.get_job_counts().await?;
    assert_eq!(counts.active, 0, "{counts:?}");
    assert_eq!(counts.failed, 0, "{counts:?}");
    assert!(
        counts.completed >= 8,
        "the running jobs finished: {counts:?}"
    );
    assert_eq!(counts.completed + counts.waiting, 20, "{counts:?}");
    eventually("every connection of ours to be closed", LONG, || async {
        named_clients(&name).await.is_ok_and(|c| c.is_empty())
    })
    .await?;
    // The QueueEvents subscription ended with the runtime.
    tokio::time::timeout(LONG, async { while stream.recv().await.is_some() {} })
        .await
        .map_err(|_| anyhow::anyhow!("the QueueEvents stream did not end"))?;

    queue.close().await?;
    cleanup(&name).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bounded_shutdown_cancels_long_jobs_which_stalled_recovery_completes() -> anyhow::Result<()>
{
    let name = unique_queue("rt-bounded");
    let queue = open_queue(&name).await?;
    let connection = ConnectionConfig::from_url(&redis_url())?;
    let runtime = Runtime::start(RuntimeOptions::default().connection(connection.clone())).await?;
    let running = Arc::new(AtomicUsize::new(0));
    let slow = Arc::new(AtomicBool::new(true));
    let options = WorkerOptions::new()
        .concurrency(3)
        .lock_duration(Duration::from_secs(2))
        .stalled_interval(Duration::from_millis(500));
    runtime
        .start_worker(
            &name,
            processor(600_000, slow.clone(), running.clone()),
            options.clone(),
        )
        .await?;
    add_jobs(&queue, 3).await?;
    eventually("3 jobs running", LONG, || async {
        running.load(Ordering::SeqCst) == 3
    })
    .await?;

    let started = Instant::now();
    runtime.shutdown(Duration::from_secs(3)).await?;
    // Bounded by the timeout (generous margin: this is a bound, not a speed check).
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(queue.get_job_counts().await?.completed, 0);

    // Another runtime's worker recovers the cancelled jobs once their locks expire.
    slow.store(false, Ordering::SeqCst);
    let second = Runtime::start(RuntimeOptions::default().connection(connection)).await?;
    second
        .start_worker(&name, processor(0, slow, running), options)
        .await?;
    eventually(
        "the 3 jobs to complete after stalled recovery",
        LONG,
        || async { queue.get_job_counts().await.is_ok_and(|c| c.completed == 3) },
    )
    .await?;
    second.shutdown(Duration::from_secs(30)).await?;
    queue.close().await?;
    cleanup(&name).await
}
