//! Redis unresponsive (issue 15, item 3): the server is frozen with `SIGSTOP`, so commands hang
//! instead of failing, which is what a failover, a partition or a hung server looks like.
//!
//! - `WorkerHandle::close_timeout`, `WorkerHandle::close_force`, `Runtime::shutdown`, `Queue::close` and the QueueEvents
//!   close return within their bounds (plus a little slack) and a Worker's report lists the
//!   jobs it left for stalled recovery;
//! - after `SIGCONT` a new Worker recovers those jobs through stalled recovery and completes
//!   them: nothing is lost;
//! - a supervised Worker frozen longer than its `progress_timeout` is stopped by its watchdog
//!   and restarted by its supervisor, and processes new jobs once the server answers again;
//! - a Worker whose connection is *known* lost (the server crashed) is not stopped by the
//!   watchdog: its client reconnects by itself, and the same Worker goes on afterwards;
//! - `CLIENT LIST` on the server shows no connection left behind afterwards.
//!
//! Each test runs its own `redis-server` (see `test_redis`) on a port of 6600-6649; the guard
//! resumes and kills it also when a test fails.

mod common;
mod test_redis;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::*;
use fred::prelude::ClientLike;
use ractor_bullmq::protocol::state::JobState;
use ractor_bullmq::runtime::{Runtime, RuntimeOptions};
use ractor_bullmq::supervision::{Backoff, RuntimeEvent, SupervisorOptions};
use ractor_bullmq::worker::{CloseReport, Job, JobContext, WorkerError};
use ractor_bullmq::{
    ConnectionConfig, Queue, QueueEventsHandle, QueueEventsOptions, QueueOptions, Worker,
    WorkerArgs, WorkerCallbacks, WorkerOptions,
};
use serde_json::{json, Value};
use test_redis::TestRedis;

/// Outer guard of every bounded call: far above the bounds under test, so a hang fails the
/// test instead of blocking it.
const GUARD: Duration = Duration::from_secs(30);
/// What a bounded close may overrun its bound by on a loaded 2-core machine.
const SLACK: Duration = Duration::from_millis(1500);
const LONG: Duration = Duration::from_secs(60);

async fn echo(_job: Job, _ctx: JobContext) -> anyhow::Result<Value> {
    Ok(json!("done"))
}

/// Runs until the Worker cancels it (its close).
async fn hold(_job: Job, ctx: JobContext) -> anyhow::Result<Value> {
    ctx.cancellation_token().cancelled().await;
    anyhow::bail!("cancelled by the close")
}

/// Options of a Worker whose jobs a later Worker recovers quickly: short locks, frequent
/// stalled checks.
fn short_locks(name: &str) -> WorkerOptions {
    WorkerOptions::new()
        .name(name)
        .lock_duration(Duration::from_secs(3))
        .stalled_interval(Duration::from_secs(1))
        .drain_delay(Duration::from_secs(1))
}

/// One test's own server, how to reach it, and a fresh queue name on it.
struct Setup {
    redis: TestRedis,
    url: String,
    config: ConnectionConfig,
    name: String,
}

impl Setup {
    /// A server on `port` and a queue named after `queue`, or `None` (with a message) when
    /// `redis-server` is not installed.
    async fn start(port: u16, queue: &str) -> anyhow::Result<Option<Self>> {
        if !TestRedis::available().await {
            eprintln!("SKIPPING: no redis-server binary");
            return Ok(None);
        }
        let redis = TestRedis::start_on(port).await?;
        let url = redis.url();
        let config = ConnectionConfig::from_url(&url)?;
        Ok(Some(Self {
            redis,
            url,
            config,
            name: unique_queue(queue),
        }))
    }

    /// Checks that the test left no connection on the server, then stops it.
    async fn finish(mut self) -> anyhow::Result<()> {
        no_client_left(&self.url).await?;
        self.redis.stop().await
    }
}

/// Worker callbacks that count the Worker's `NoProgress` errors (its watchdog firing).
fn count_no_progress() -> (Arc<AtomicUsize>, WorkerCallbacks) {
    let stuck = Arc::new(AtomicUsize::new(0));
    let callbacks = WorkerCallbacks::new().on_error({
        let stuck = stuck.clone();
        move |error| {
            if matches!(error, WorkerError::NoProgress { .. }) {
                stuck.fetch_add(1, Ordering::SeqCst);
            }
        }
    });
    (stuck, callbacks)
}

/// The close `report` lists exactly the jobs `ids` as left for stalled recovery.
fn assert_left_behind(report: &CloseReport, ids: &[String]) {
    let mut left = report.left_for_stalled_recovery.clone();
    left.sort();
    let mut ids = ids.to_vec();
    ids.sort();
    assert_eq!(left, ids, "every active job is reported as left behind");
}

/// Clients connected to the server at `url`, not counting the one asking.
async fn client_count(url: &str) -> anyhow::Result<usize> {
    let client = ConnectionConfig::from_url(url)?.connect(None).await?;
    let ids = client_list_field(&client, "id").await;
    client.quit().await?;
    Ok(ids?.len().saturating_sub(1))
}

/// Waits until nothing but the asking client is connected to `url`.
async fn no_client_left(url: &str) -> anyhow::Result<()> {
    let result = eventually("no client left on the server", LONG, || async {
        client_count(url).await.is_ok_and(|n| n == 0)
    })
    .await;
    if result.is_err() {
        let client = ConnectionConfig::from_url(url)?.connect(None).await?;
        let names = client_list_field(&client, "name").await?;
        let commands = client_list_field(&client, "cmd").await?;
        client.quit().await?;
        anyhow::bail!("connections left behind: names {names:?}, last commands {commands:?}");
    }
    Ok(())
}

/// `call` returns (`Ok` or `Err`) within `bound` plus [`SLACK`].
async fn within<T>(
    what: &str,
    bound: Duration,
    call: impl std::future::Future<Output = T>,
) -> anyhow::Result<T> {
    let started = Instant::now();
    let outcome = tokio::time::timeout(GUARD, call)
        .await
        .map_err(|_| anyhow::anyhow!("{what}: still running after {GUARD:?}"))?;
    let took = started.elapsed();
    anyhow::ensure!(
        took <= bound + SLACK,
        "{what}: took {took:?}, bound {bound:?}"
    );
    eprintln!("{what}: returned after {took:?} (bound {bound:?})");
    Ok(outcome)
}

/// Adds `n` jobs and waits until every one of them is active.
async fn add_active(queue: &Queue, n: usize) -> anyhow::Result<Vec<String>> {
    let mut ids = Vec::new();
    for i in 0..n {
        ids.push(queue.add("held", json!({ "i": i })).await?.id().to_string());
    }
    for id in &ids {
        eventually("the job is active", LONG, || async {
            matches!(queue.get_job_state(id).await, Ok(JobState::Active))
        })
        .await?;
    }
    Ok(ids)
}

/// A Worker with short stalled checks recovers `ids` and completes them; then it is closed.
async fn recovered(config: &ConnectionConfig, name: &str, ids: &[String]) -> anyhow::Result<()> {
    let args =
        WorkerArgs::connect(config, name, echo, short_locks("recover").concurrency(4)).await?;
    let worker = Worker::spawn(args).await?;
    let queue = Queue::new(name, QueueOptions::new(config.clone())).await?;
    for id in ids {
        eventually("the left job completed after recovery", LONG, || async {
            matches!(queue.get_job_state(id).await, Ok(JobState::Completed))
        })
        .await?;
    }
    worker.close().await?;
    queue.close().await?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn close_timeout_returns_in_time_with_redis_frozen_and_nothing_is_lost() -> anyhow::Result<()>
{
    let Some(mut setup) = Setup::start(6601, "frozen-close").await? else {
        return Ok(());
    };
    let (config, name) = (setup.config.clone(), setup.name.clone());
    let queue = Queue::new(&name, QueueOptions::new(config.clone())).await?;
    let errors = Arc::new(AtomicUsize::new(0));
    let callbacks = WorkerCallbacks::new().on_error({
        let errors = errors.clone();
        move |_| {
            errors.fetch_add(1, Ordering::SeqCst);
        }
    });
    let args = WorkerArgs::connect(&config, &name, hold, short_locks("held").concurrency(2))
        .await?
        .callbacks(callbacks);
    let worker = Worker::spawn(args).await?;
    let ids = add_active(&queue, 2).await?;

    setup.redis.pause()?;
    let bound = Duration::from_secs(3);
    let report = within(
        "close_timeout with Redis frozen",
        bound,
        worker.close_timeout(bound),
    )
    .await??;
    assert_left_behind(&report, &ids);
    assert!(
        !worker.is_running().await,
        "the Worker actor stopped with its close"
    );

    setup.redis.resume()?;
    recovered(&config, &name, &ids).await?;
    queue.close().await?;
    setup.finish().await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn close_force_returns_in_time_with_redis_frozen() -> anyhow::Result<()> {
    let Some(mut setup) = Setup::start(6604, "frozen-force").await? else {
        return Ok(());
    };
    let (config, name) = (setup.config.clone(), setup.name.clone());
    let queue = Queue::new(&name, QueueOptions::new(config.clone())).await?;
    let args =
        WorkerArgs::connect(&config, &name, hold, short_locks("forced").concurrency(3)).await?;
    let worker = Worker::spawn(args).await?;
    let ids = add_active(&queue, 3).await?;

    setup.redis.pause()?;
    // Documented bound: 3 s for store calls in flight, 1 s for the connections.
    let report = within(
        "close_force with Redis frozen",
        Duration::from_secs(4),
        worker.close_force(),
    )
    .await??;
    assert_left_behind(&report, &ids);

    setup.redis.resume()?;
    recovered(&config, &name, &ids).await?;
    queue.close().await?;
    setup.finish().await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn runtime_shutdown_queue_and_queue_events_close_return_in_time_with_redis_frozen(
) -> anyhow::Result<()> {
    let Some(mut setup) = Setup::start(6602, "frozen-shutdown").await? else {
        return Ok(());
    };
    let (config, name) = (setup.config.clone(), setup.name.clone());
    let runtime = Runtime::start(RuntimeOptions::default().connection(config.clone())).await?;
    runtime
        .start_worker(&name, hold, short_locks("rt").concurrency(2))
        .await?;
    runtime
        .start_queue_events(QueueEventsOptions::new(name.clone(), config.clone()))
        .await?;
    let events =
        QueueEventsHandle::start(QueueEventsOptions::new(name.clone(), config.clone())).await?;
    let queue = Queue::new(&name, QueueOptions::new(config.clone())).await?;
    let ids = add_active(&queue, 2).await?;

    setup.redis.pause()?;
    let bound = Duration::from_secs(5);
    let shutdown = within(
        "Runtime::shutdown with Redis frozen",
        bound,
        runtime.shutdown(bound),
    )
    .await?;
    assert!(shutdown.is_ok(), "no Worker had to be killed: {shutdown:?}");
    // Each bounded by its own short close wait (1-2 s).
    within(
        "QueueEvents close with Redis frozen",
        Duration::from_secs(2),
        events.close(),
    )
    .await?;
    within(
        "Queue::close with Redis frozen",
        Duration::from_secs(2),
        queue.close(),
    )
    .await??;

    setup.redis.resume()?;
    recovered(&config, &name, &ids).await?;
    setup.finish().await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stuck_supervised_worker_is_restarted_and_works_after_redis_answers_again(
) -> anyhow::Result<()> {
    let Some(mut setup) = Setup::start(6603, "frozen-watchdog").await? else {
        return Ok(());
    };
    let (config, name) = (setup.config.clone(), setup.name.clone());
    let supervisor = SupervisorOptions::default()
        .max_restarts(100)
        .period(Duration::from_secs(60))
        .backoff(Backoff::Exponential {
            initial: Duration::from_millis(200),
            max: Duration::from_secs(2),
        });
    let runtime = Runtime::start(
        RuntimeOptions::default()
            .connection(config.clone())
            .worker_supervisor(supervisor),
    )
    .await?;
    let mut runtime_events = runtime.subscribe();
    let options = WorkerOptions::new()
        .name("wd")
        .drain_delay(Duration::from_secs(1))
        .progress_timeout(Some(Duration::from_secs(3)));
    let (stuck, callbacks) = count_no_progress();
    let spec = runtime
        .worker_spec(name.clone(), echo, options)
        .callbacks(callbacks);
    let worker = runtime.start_worker_spec("watched", spec).await?;
    let queue = Queue::new(&name, QueueOptions::new(config.clone())).await?;
    let before = queue.add("before", json!({})).await?.id().to_string();
    eventually("the first job completed", LONG, || async {
        matches!(queue.get_job_state(&before).await, Ok(JobState::Completed))
    })
    .await?;

    // Frozen for longer than the watchdog's bound (3 s, ticking every 750 ms): the Worker
    // stops with `NoProgress`; the supervisor's restarts fail to connect while the server is
    // frozen (`ChildStartFailed`), and one succeeds after it answers again (`ChildRestarted`).
    setup.redis.pause()?;
    eventually(
        "the watchdog stopped the Worker",
        Duration::from_secs(20),
        || async { stuck.load(Ordering::SeqCst) > 0 },
    )
    .await?;
    assert!(
        !worker.is_running().await,
        "no Worker runs while Redis is frozen"
    );
    tokio::time::sleep(Duration::from_secs(3)).await;
    setup.redis.resume()?;
    tokio::time::timeout(LONG, async {
        loop {
            match runtime_events.recv().await {
                Ok(RuntimeEvent::ChildRestarted { child, .. }) if child == "watched" => {
                    return Ok(())
                }
                Ok(_) | Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => {}
                Err(error) => return Err(error),
            }
        }
    })
    .await
    .map_err(|_| anyhow::anyhow!("the stuck Worker was not restarted"))??;

    let after = queue.add("after", json!({})).await?.id().to_string();
    eventually("the job added after the freeze completed", LONG, || async {
        matches!(queue.get_job_state(&after).await, Ok(JobState::Completed))
    })
    .await?;
    let restarts = worker.restarts().await?.unwrap_or(0);
    assert!(restarts >= 1, "restart count {restarts}");
    assert!(worker.is_running().await, "the restarted Worker runs");

    runtime.shutdown(Duration::from_secs(10)).await?;
    queue.close().await?;
    setup.finish().await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_whose_connection_is_known_lost_rides_out_an_outage_longer_than_the_watchdog(
) -> anyhow::Result<()> {
    let Some(mut setup) = Setup::start(6605, "killed-watchdog").await? else {
        return Ok(());
    };
    let (config, name) = (setup.config.clone(), setup.name.clone());
    let (stuck, callbacks) = count_no_progress();
    let options = WorkerOptions::new()
        .name("ride")
        .drain_delay(Duration::from_secs(1))
        .progress_timeout(Some(Duration::from_secs(2)));
    let args = WorkerArgs::connect(&config, &name, echo, options)
        .await?
        .callbacks(callbacks);
    let worker = Worker::spawn(args).await?;

    // A crash, not a freeze: the client sees its connections drop and reconnects by itself,
    // so the watchdog (bound 2 s) waits for it instead of stopping the Worker.
    setup.redis.stop().await?;
    tokio::time::sleep(Duration::from_secs(6)).await;
    setup.redis.spawn().await?;

    let queue = Queue::new(&name, QueueOptions::new(config.clone())).await?;
    let after = queue.add("after", json!({})).await?.id().to_string();
    eventually(
        "the job added after the restart completed",
        LONG,
        || async { matches!(queue.get_job_state(&after).await, Ok(JobState::Completed)) },
    )
    .await?;
    assert_eq!(stuck.load(Ordering::SeqCst), 0, "the watchdog did not fire");
    assert!(worker.is_running().await, "the same Worker runs");
    worker.close().await?;
    queue.close().await?;
    setup.finish().await
}
