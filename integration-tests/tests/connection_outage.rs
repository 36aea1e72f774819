//! Connection errors while running and at start (issue 10, item 6):
//!
//! - a 6 s Redis outage reaches the Worker's `on_error` exactly once (not per retry, and not
//!   zero times: the client queues commands while reconnecting, so no call fails), and the
//!   QueueEvents `on_connection` callback sees one `Lost` and one `Restored`; both go on
//!   working after the restart;
//! - `QueueEventsHandle::start` and `Runtime::start_queue_events` against an unreachable port
//!   or a plain server behind `rediss://` fail at start with the connect error, in bounded
//!   time (each call guarded by 20 s, and required to return well before).
//!
//! The outage runs on a throw-away `redis-server` (see `test_redis`).

mod common;
mod test_redis;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bullmq_redis::fred::prelude::{Client, ClientLike, EventInterface, KeysInterface};
use common::*;
use ractor_bullmq::events::ConnectionEvent;
use ractor_bullmq::runtime::{Runtime, RuntimeOptions};
use ractor_bullmq::supervision::SupervisionError;
use ractor_bullmq::worker::{Job, JobContext};
use ractor_bullmq::{
    ConnectionConfig, Queue, QueueEventsArgs, QueueEventsError, QueueEventsHandle,
    QueueEventsOptions, QueueOptions, Worker, WorkerArgs, WorkerCallbacks, WorkerOptions,
};
use serde_json::{json, Value};
use test_redis::TestRedis;

const GUARD: Duration = Duration::from_secs(20);
const LONG: Duration = Duration::from_secs(60);

async fn echo(_job: Job, _ctx: JobContext) -> anyhow::Result<Value> {
    Ok(json!("done"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redis_outage_is_reported_once_and_both_recover() -> anyhow::Result<()> {
    if !TestRedis::available().await {
        eprintln!("SKIPPING: no redis-server binary");
        return Ok(());
    }
    let mut redis = TestRedis::start().await?;
    let config = ConnectionConfig::from_url(&redis.url())?;
    let name = unique_queue("outage");

    let errors = Arc::new(Mutex::new(Vec::<String>::new()));
    let callbacks = WorkerCallbacks::new().on_error({
        let errors = errors.clone();
        move |error| errors.lock().unwrap().push(error.to_string())
    });
    let completed = Arc::new(Mutex::new(0usize));
    let callbacks = callbacks.on_completed({
        let completed = completed.clone();
        move |_, _| *completed.lock().unwrap() += 1
    });
    let args = WorkerArgs::connect(&config, &name, echo, WorkerOptions::new())
        .await?
        .callbacks(callbacks);
    let worker = Worker::spawn(args).await?;

    let changes = Arc::new(Mutex::new(Vec::<ConnectionEvent>::new()));
    let events_args = QueueEventsArgs::new(QueueEventsOptions::new(name.clone(), config.clone()))?
        .on_connection({
            let changes = changes.clone();
            move |change| changes.lock().unwrap().push(change.clone())
        });
    let events = QueueEventsHandle::spawn(events_args).await?;
    let mut stream = events.subscribe_stream();

    let queue = Queue::new(&name, QueueOptions::new(config.clone())).await?;
    queue.add("before", json!({})).await?;
    eventually("the first job completed", LONG, || async {
        *completed.lock().unwrap() == 1
    })
    .await?;
    queue.close().await?;

    // The outage: 6 s without a server.
    redis.stop().await?;
    tokio::time::sleep(Duration::from_secs(6)).await;
    redis.spawn().await?;

    // Both recover: a job added after the restart completes, and its events arrive.
    let queue = Queue::new(&name, QueueOptions::new(config.clone())).await?;
    let added = queue.add("after", json!({})).await?;
    eventually(
        "the job added after the restart completed",
        LONG,
        || async { *completed.lock().unwrap() == 2 },
    )
    .await?;
    let deadline = Instant::now() + LONG;
    loop {
        let event = tokio::time::timeout(LONG, stream.recv())
            .await?
            .ok_or_else(|| anyhow::anyhow!("the QueueEvents stream ended"))?;
        if event.event.name() == "completed" && event.event.job_id() == Some(added.id()) {
            break;
        }
        anyhow::ensure!(
            Instant::now() < deadline,
            "no completed event after the restart"
        );
    }
    eventually(
        "QueueEvents reported the end of the outage",
        LONG,
        || async { changes.lock().unwrap().len() >= 2 },
    )
    .await?;
    // Give late retries time to (wrongly) report again.
    tokio::time::sleep(Duration::from_secs(2)).await;

    let errors = errors.lock().unwrap().clone();
    assert_eq!(errors.len(), 1, "one on_error for one outage: {errors:?}");
    assert!(errors[0].contains("connection"), "{errors:?}");
    let changes = changes.lock().unwrap().clone();
    assert_eq!(changes.len(), 2, "{changes:?}");
    assert!(
        matches!(changes[0], ConnectionEvent::Lost { .. }),
        "{changes:?}"
    );
    assert!(
        matches!(changes[1], ConnectionEvent::Restored { downtime } if downtime >= Duration::from_secs(3)),
        "{changes:?}"
    );

    events.close().await;
    worker.close().await?;
    queue.close().await?;
    redis.stop().await?;
    Ok(())
}

/// A loopback port nobody listens on.
fn free_port() -> anyhow::Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port())
}

/// `call` must fail, and well before the guard.
async fn fails_fast<T, E: std::fmt::Debug>(
    what: &str,
    call: impl std::future::Future<Output = Result<T, E>>,
) -> anyhow::Result<E> {
    let started = Instant::now();
    let outcome = tokio::time::timeout(GUARD, call)
        .await
        .map_err(|_| anyhow::anyhow!("{what}: still running after {GUARD:?}"))?;
    let Err(error) = outcome else {
        anyhow::bail!("{what}: succeeded");
    };
    let took = started.elapsed();
    anyhow::ensure!(took < GUARD / 2, "{what}: took {took:?}");
    Ok(error)
}

#[tokio::test]
async fn queue_events_start_fails_fast_against_an_unreachable_server() -> anyhow::Result<()> {
    let unreachable = ConnectionConfig::from_url(&format!("redis://127.0.0.1:{}", free_port()?))?;
    let plain = ConnectionConfig::from_url(&redis_url())?;
    let mut tls_to_plain = ConnectionConfig::from_url(&format!("rediss://{}", plain.target()))?;
    tls_to_plain.connect_timeout = Duration::from_secs(3);

    for (what, config) in [
        ("unreachable port", unreachable.clone()),
        ("rediss to plain", tls_to_plain),
    ] {
        let error = fails_fast(
            what,
            QueueEventsHandle::start(QueueEventsOptions::new("never", config)),
        )
        .await?;
        assert!(
            matches!(
                error,
                QueueEventsError::Redis(bullmq_redis::RedisError::Connect { .. })
            ),
            "{what}: {error:?}"
        );
    }

    // The same through the Runtime: a start error, as a Worker's start gives.
    let runtime = Runtime::start(RuntimeOptions::default().connection(plain)).await?;
    let error = fails_fast(
        "Runtime::start_queue_events",
        runtime.start_queue_events(QueueEventsOptions::new("never", unreachable)),
    )
    .await?;
    assert!(
        matches!(error, SupervisionError::StartFailed { .. }),
        "{error:?}"
    );
    runtime.shutdown(Duration::from_secs(10)).await?;
    Ok(())
}

/// [`queue_client_names`] on the server at `url`.
async fn clients_of(url: &str, queue: &str) -> anyhow::Result<Vec<String>> {
    use fred::prelude::ClientLike;
    let client = ConnectionConfig::from_url(url)?.connect(None).await?;
    let names = queue_client_names(&client, queue).await;
    client.quit().await?;
    names
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_closed_during_an_outage_leaves_no_connection_behind() -> anyhow::Result<()> {
    if !TestRedis::available().await {
        eprintln!("SKIPPING: no redis-server binary");
        return Ok(());
    }
    let mut redis = TestRedis::start().await?;
    let url = redis.url();
    let config = ConnectionConfig::from_url(&url)?;
    let name = unique_queue("outage-close");
    let args = WorkerArgs::connect(&config, &name, echo, WorkerOptions::new().name("w")).await?;
    let worker = Worker::spawn(args).await?;
    eventually("the Worker's 2 connections", LONG, || async {
        clients_of(&url, &name).await.is_ok_and(|c| c.len() == 2)
    })
    .await?;

    redis.stop().await?;
    // Closing with Redis gone returns in bounded time.
    let started = Instant::now();
    tokio::time::timeout(GUARD, worker.close_force())
        .await
        .map_err(|_| anyhow::anyhow!("close hung during the outage"))??;
    assert!(
        started.elapsed() < GUARD / 2,
        "close took {:?}",
        started.elapsed()
    );

    // When Redis comes back, the closed Worker's clients do not come back with it.
    redis.spawn().await?;
    tokio::time::sleep(Duration::from_secs(5)).await;
    let left = clients_of(&url, &name).await?;
    assert!(
        left.is_empty(),
        "connections back after the restart: {left:?}"
    );
    redis.stop().await?;
    Ok(())
}

/// Counts the reconnections of `client`.
fn count_reconnects(client: &Client) -> Arc<AtomicUsize> {
    let count = Arc::new(AtomicUsize::new(0));
    let seen = count.clone();
    client.on_reconnect(move |_server| {
        seen.fetch_add(1, Ordering::SeqCst);
        async { Ok(()) }
    });
    count
}

/// A server that hangs without closing the connection (SIGSTOP) for longer than
/// `unresponsive_timeout`: the client takes the connection for dead, reconnects, and the
/// command that was waiting is answered on the new connection once the server runs again. The
/// same hang with the check off is waited out on the same connection (no reconnect), which is
/// why the check exists: a failover that leaves a half-open socket would otherwise hold every
/// command forever.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hung_connection_is_reconnected_after_the_unresponsive_timeout() -> anyhow::Result<()> {
    if !TestRedis::available().await {
        eprintln!("redis-server not found: skipped");
        return Ok(());
    }
    let mut redis = TestRedis::start().await?;
    let base = ConnectionConfig::from_url(&redis.url())?;
    let checked = base
        .clone()
        .unresponsive_timeout(Some(Duration::from_secs(1)))
        .connect(None)
        .await?;
    let unchecked = base.unresponsive_timeout(None).connect(None).await?;
    let checked_reconnects = count_reconnects(&checked);
    let unchecked_reconnects = count_reconnects(&unchecked);

    redis.pause()?;
    let pending = |client: &Client, key: &'static str| {
        let client = client.clone();
        tokio::spawn(async move { client.incr::<i64, _>(key).await })
    };
    let checked_incr = pending(&checked, "hung:checked");
    let unchecked_incr = pending(&unchecked, "hung:unchecked");
    // Well past the 1 s bound (checked every 250 ms), while the server is stopped.
    tokio::time::sleep(Duration::from_secs(4)).await;
    redis.resume()?;

    let checked_value = tokio::time::timeout(GUARD, checked_incr).await???;
    let unchecked_value = tokio::time::timeout(GUARD, unchecked_incr).await???;
    // At least once: the first INCR may have reached the stopped server's socket buffer
    // before the client gave up on it, and the retry adds one more.
    assert!(checked_value >= 1, "{checked_value}");
    assert_eq!(unchecked_value, 1);
    assert!(
        checked_reconnects.load(Ordering::SeqCst) >= 1,
        "the hung connection was not replaced"
    );
    assert_eq!(unchecked_reconnects.load(Ordering::SeqCst), 0);
    checked.quit().await?;
    unchecked.quit().await?;
    redis.stop().await?;
    Ok(())
}
