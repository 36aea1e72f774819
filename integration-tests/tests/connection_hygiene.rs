//! However a Worker or a QueueEvents ends, its Redis connections close (issue 10, item 5).
//!
//! Under the Runtime's supervision tree a Worker's linked LockManager is crashed (killed, so
//! the Worker stops with an error and ractor skips its `post_stop`) and the Worker itself is
//! killed, several times each; `CLIENT LIST`, filtered by this test's queue (the names every
//! connection of ours carries: `{prefix}:{base64(queue)}` plus `:w:`/`:wc:`/`:qe`), shows that
//! each incarnation's connections close, and that none remains after `Runtime::shutdown`. The
//! same for a killed QueueEvents and a `Queue` handle dropped without `close()`.

mod common;

use std::time::Duration;

use common::*;
use fred::prelude::ClientLike;
use fred::types::{ClusterHash, CustomCommand};
use ractor::{ActorCell, ActorRef};
use ractor_bullmq::protocol::options::JobOptions;
use ractor_bullmq::runtime::{Runtime, RuntimeOptions, SupervisedWorker};
use ractor_bullmq::supervision::SupervisorOptions;
use ractor_bullmq::worker::{Job, JobContext, LockManagerMsg, Worker, WorkerArgs, WorkerMsg};
use ractor_bullmq::{ConnectionConfig, QueueEventsOptions, WorkerOptions};
use serde_json::{json, Value};

const LONG: Duration = Duration::from_secs(60);
const CRASHES: usize = 3;
const KILLS: usize = 3;

/// Polls `probe` every 50 ms until it yields a value; fails after [`LONG`].
async fn poll<T, F, Fut>(what: &str, mut probe: F) -> anyhow::Result<T>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let deadline = tokio::time::Instant::now() + LONG;
    loop {
        if let Some(value) = probe().await {
            return Ok(value);
        }
        if tokio::time::Instant::now() >= deadline {
            anyhow::bail!("timed out after {LONG:?} waiting for: {what}");
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn wait_for_clients(queue: &str, what: &str, expected: usize) -> anyhow::Result<()> {
    let mut last = Vec::new();
    let deadline = tokio::time::Instant::now() + LONG;
    loop {
        if let Ok(names) = named_clients(queue).await {
            if names.len() == expected {
                return Ok(());
            }
            last = names;
        }
        if tokio::time::Instant::now() >= deadline {
            anyhow::bail!("timed out waiting for {what}; connections now: {last:?}");
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn processor(
) -> impl Fn(Job, JobContext) -> futures::future::BoxFuture<'static, anyhow::Result<Value>>
       + Send
       + Sync
       + 'static {
    |_job: Job, _ctx: JobContext| {
        Box::pin(async move {
            tokio::time::sleep(Duration::from_millis(20)).await;
            Ok(json!("ok"))
        })
    }
}

/// The current incarnation of `worker`, once one runs.
async fn incarnation(worker: &SupervisedWorker) -> anyhow::Result<ActorRef<WorkerMsg>> {
    poll("a running Worker incarnation", || worker.actor()).await
}

/// A different incarnation than `old` runs (the supervisor restarted the Worker).
async fn restarted(
    worker: &SupervisedWorker,
    old: &ActorRef<WorkerMsg>,
) -> anyhow::Result<ActorRef<WorkerMsg>> {
    let old = old.get_id();
    poll("the Worker restarted", || async move {
        worker.actor().await.filter(|actor| actor.get_id() != old)
    })
    .await
}

fn lock_manager_of(worker: &ActorRef<WorkerMsg>) -> Option<ActorCell> {
    worker
        .get_children()
        .into_iter()
        .find(|child| child.is_message_type_of::<LockManagerMsg>() == Some(true))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn crashed_and_killed_workers_close_their_connections() -> anyhow::Result<()> {
    let name = unique_queue("conn-hygiene");
    let queue = open_queue(&name).await?;
    let connection = ConnectionConfig::from_url(&redis_url())?;
    // Generous restart budget: the test crashes the Worker on purpose, 6 times.
    let workers = SupervisorOptions::default()
        .max_restarts(100)
        .period(Duration::from_secs(60));
    let runtime = Runtime::start(
        RuntimeOptions::default()
            .connection(connection.clone())
            .worker_supervisor(workers),
    )
    .await?;
    assert_eq!(named_clients(&name).await?, Vec::<String>::new(), "before");

    let options = WorkerOptions::new()
        .name("hygiene")
        .concurrency(4)
        .lock_duration(Duration::from_secs(2));
    let worker = runtime.start_worker(&name, processor(), options).await?;
    let events = runtime
        .start_queue_events(QueueEventsOptions::new(name.clone(), connection.clone()))
        .await?;
    // Jobs keep flowing so the crashes happen with work in flight.
    queue
        .add_bulk((0..200).map(|i| ("job", json!({ "i": i }), JobOptions::default())))
        .await?;
    // One Worker (command + blocking) and one QueueEvents.
    wait_for_clients(&name, "3 connections while running", 3).await?;

    let mut current = incarnation(&worker).await?;
    for round in 0..CRASHES {
        let lock_manager = poll("the Worker's LockManager", || {
            std::future::ready(lock_manager_of(&current))
        })
        .await?;
        lock_manager.kill();
        current = restarted(&worker, &current).await?;
        wait_for_clients(
            &name,
            &format!("3 connections after LockManager crash {}", round + 1),
            3,
        )
        .await?;
    }
    for round in 0..KILLS {
        current.kill();
        current = restarted(&worker, &current).await?;
        wait_for_clients(&name, &format!("3 connections after kill {}", round + 1), 3).await?;
    }
    assert_eq!(
        worker.restarts().await?,
        Some(u32::try_from(CRASHES + KILLS)?),
        "every crash and kill restarted the Worker"
    );
    // A killed QueueEvents is restarted with a fresh connection; the old one closes.
    for round in 0..KILLS {
        let old = events.actor().expect("a QueueEvents runs");
        old.kill();
        let old_id = old.get_id();
        poll("the QueueEvents restarted", || async {
            events.actor().filter(|actor| actor.get_id() != old_id)
        })
        .await?;
        wait_for_clients(
            &name,
            &format!("3 connections after QueueEvents kill {}", round + 1),
            3,
        )
        .await?;
    }
    // A Queue handle dropped without close() closes its connection too (unnamed, so found by
    // its client id).
    let dropped =
        ractor_bullmq::Queue::new(&name, ractor_bullmq::QueueOptions::new(connection)).await?;
    let id: i64 = dropped
        .redis_client()
        .expect("a Redis queue")
        .custom(
            CustomCommand::new_static("CLIENT", ClusterHash::Random, false),
            vec!["ID".to_owned()],
        )
        .await?;
    drop(dropped);
    poll("the dropped Queue's connection closed", || async {
        let client = raw_client().await.ok()?;
        let ids = client_list_field(&client, "id").await.ok();
        let _ = client.quit().await;
        ids.filter(|ids| !ids.contains(&id.to_string())).map(|_| ())
    })
    .await?;

    runtime.shutdown(Duration::from_secs(30)).await?;
    wait_for_clients(&name, "no connection of ours after Runtime::shutdown", 0).await?;
    // And none comes back (no reconnecting client left behind).
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(named_clients(&name).await?, Vec::<String>::new(), "after");

    queue.close().await?;
    cleanup(&name).await?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unsupervised_killed_worker_closes_its_connections() -> anyhow::Result<()> {
    let name = unique_queue("conn-kill");
    let connection = ConnectionConfig::from_url(&redis_url())?;
    let args = WorkerArgs::connect(&connection, &name, processor(), WorkerOptions::new()).await?;
    let (actor, _join) = ractor::Actor::spawn(None, Worker, args).await?;
    wait_for_clients(&name, "the Worker's 2 connections", 2).await?;
    actor.kill();
    wait_for_clients(&name, "no connection after the kill", 0).await?;
    cleanup(&name).await?;
    Ok(())
}
