//! WorkerHandle behaviour that user code leans on: `wait` is cancel safe, and a hash-tagged
//! prefix (`{bull}`, the Redis Cluster layout) works end to end, and 10 000 slots fill at once.

mod common;
mod worker_common;

use std::time::Duration;

use common::*;
use fred::prelude::KeysInterface;
use ractor::ActorStatus;
use ractor_bullmq::{Queue, QueueOptions, Worker, WorkerArgs, WorkerCallbacks, WorkerOptions};
use serde_json::json;
use worker_common::*;

#[tokio::test]
async fn wait_dropped_by_select_still_lets_close_wait_for_the_actor() -> anyhow::Result<()> {
    let queue = unique_queue("w-handle-wait");
    let worker = spawn_worker(&queue, WorkerOptions::new(), WorkerCallbacks::default()).await?;

    // A `wait` that loses a select must not consume the join handle.
    tokio::select! {
        () = worker.wait() => anyhow::bail!("the worker stopped by itself"),
        () = tokio::time::sleep(Duration::from_millis(50)) => {}
    }
    worker.close().await?;
    assert_eq!(worker.actor().get_status(), ActorStatus::Stopped);
    // Waiting again after the actor stopped returns at once.
    tokio::time::timeout(Duration::from_secs(5), worker.wait()).await?;
    cleanup(&queue).await
}

#[tokio::test]
async fn hash_tagged_prefix_adds_and_processes_jobs() -> anyhow::Result<()> {
    let queue = unique_queue("w-hash-tag");
    let prefix = "{bull}";
    let producer = Queue::new(&queue, QueueOptions::new(config()).prefix(prefix)).await?;
    for i in 0..20 {
        producer.add("tagged", json!({ "i": i })).await?;
    }
    let args = WorkerArgs::connect(
        &config(),
        &queue,
        |_job, _ctx| async { Ok(json!("done")) },
        WorkerOptions::new().prefix(prefix).concurrency(5),
    )
    .await?;
    let worker = Worker::spawn(args).await?;
    wait_completed(&producer, 20).await?;
    worker.close().await?;

    // Every key of the queue lives under the hash tag (one cluster slot); none under `bull:`.
    let client = raw_client().await?;
    let tagged: i64 = client
        .exists(vec![
            format!("{{bull}}:{queue}:meta"),
            format!("{{bull}}:{queue}:completed"),
        ])
        .await?;
    assert_eq!(tagged, 2);
    assert_eq!(count_keys(&queue).await?, 0);
    producer.obliterate(true).await?;
    Ok(())
}

/// A Worker with 10 000 free slots takes 10 000 waiting jobs in one fetch — more ids than Lua
/// can unpack into one command — and holds them all in flight at once, then completes them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ten_thousand_slots_fetch_and_hold_ten_thousand_jobs() -> anyhow::Result<()> {
    const JOBS: usize = 10_000;
    let queue = unique_queue("w-10k-slots");
    let producer = Queue::new(&queue, QueueOptions::new(config())).await?;
    for chunk in (0..JOBS).collect::<Vec<_>>().chunks(1000) {
        producer
            .add_bulk(chunk.iter().map(|i| {
                (
                    "gated",
                    json!({ "i": i }),
                    ractor_bullmq::protocol::options::JobOptions::default(),
                )
            }))
            .await?;
    }
    let gate = std::sync::Arc::new(tokio::sync::Semaphore::new(0));
    let processor = {
        let gate = gate.clone();
        move |_job: ractor_bullmq::Job, _ctx: ractor_bullmq::worker::JobContext| {
            let gate = gate.clone();
            async move {
                gate.acquire().await?.forget();
                Ok(json!("released"))
            }
        }
    };
    let args = WorkerArgs::connect(
        &config(),
        &queue,
        processor,
        WorkerOptions::new().concurrency(JOBS),
    )
    .await?;
    let worker = Worker::spawn(args).await?;
    let active_worker = worker.clone();
    eventually(
        "10 000 jobs in flight",
        Duration::from_secs(60),
        move || {
            let worker = active_worker.clone();
            async move { worker.active_count().await.unwrap_or(0) == JOBS }
        },
    )
    .await?;
    assert_eq!(producer.get_job_counts().await?.active, JOBS as u64);

    gate.add_permits(JOBS);
    wait_completed(&producer, JOBS).await?;
    worker.close().await?;
    producer.obliterate(true).await?;
    Ok(())
}

/// Jobs running three times their lock duration keep their locks (the LockManager renews them
/// in batches) and complete once, with frequent stalled checks never taking them back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn locks_of_long_jobs_are_renewed_until_they_finish() -> anyhow::Result<()> {
    let queue = unique_queue("w-renew");
    let producer = Queue::new(&queue, QueueOptions::new(config())).await?;
    for i in 0..5 {
        producer.add("long", json!({ "i": i })).await?;
    }
    let stalled = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let callbacks = WorkerCallbacks::new().on_stalled({
        let stalled = stalled.clone();
        move |_id: &str| {
            stalled.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        }
    });
    let args = WorkerArgs::connect(
        &config(),
        &queue,
        |_job, _ctx| async {
            tokio::time::sleep(Duration::from_millis(3_000)).await;
            Ok(json!("long done"))
        },
        WorkerOptions::new()
            .concurrency(5)
            .lock_duration(Duration::from_millis(1_000))
            .stalled_interval(Duration::from_millis(300)),
    )
    .await?
    .callbacks(callbacks);
    let worker = Worker::spawn(args).await?;
    wait_completed(&producer, 5).await?;
    worker.close().await?;
    assert_eq!(stalled.load(std::sync::atomic::Ordering::SeqCst), 0);
    for i in 1..=5 {
        let job = producer.get_job(&i.to_string()).await?.expect("job exists");
        assert_eq!(job.attempts_made(), 1, "job {i}");
        assert_eq!(job.stalled_counter(), 0, "job {i}");
    }
    producer.obliterate(true).await?;
    Ok(())
}

/// Waits (generously) until `n` jobs of `producer`'s queue are completed.
async fn wait_completed(producer: &Queue, n: usize) -> anyhow::Result<()> {
    let queue = producer.clone();
    eventually(
        &format!("{n} jobs completed"),
        Duration::from_secs(60),
        move || {
            let queue = queue.clone();
            async move {
                queue
                    .get_job_counts()
                    .await
                    .is_ok_and(|c| c.completed == n as u64)
            }
        },
    )
    .await
}
