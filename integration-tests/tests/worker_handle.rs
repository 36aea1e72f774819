//! WorkerHandle behaviour that user code leans on: `wait` is cancel safe, and a hash-tagged
//! prefix (`{bull}`, the Redis Cluster layout) works end to end.

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
    let counts_queue = producer.clone();
    eventually(
        "20 tagged jobs completed",
        Duration::from_secs(30),
        move || {
            let queue = counts_queue.clone();
            async move {
                queue
                    .get_job_counts()
                    .await
                    .map(|c| c.completed == 20)
                    .unwrap_or(false)
            }
        },
    )
    .await?;
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
