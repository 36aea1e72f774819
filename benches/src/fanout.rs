//! The QueueEvents fan-out benchmark: events/s delivered to 1 and to 100 channel subscribers.
//!
//! Two variants, each for every subscriber count:
//!
//! - `replay`: the queue's events stream is filled first with `events` realistic entries
//!   (alternating `active` / `completed`, pipelined `XADD`s) and a QueueEvents reading from `0`
//!   delivers them all; the rate is `events / seconds` until every subscriber had every event.
//! - `live`: our Worker drains a filled queue of no-op jobs at full speed while a QueueEvents
//!   follows the stream from `$`. The worker's production rate (entries appended to the stream
//!   over the drain, from `XINFO STREAM`'s `entries-added`) is set against the delivery rate,
//!   with the lag (events produced but not yet delivered to the slowest subscriber) when the
//!   last job completed and the time it then took to catch up.
//!
//! Subscribers drain their receivers in their own tasks, as an application would. The
//! subscriber buffer is raised so that a subscriber task briefly descheduled on a 2-core box is
//! not disconnected; a disconnected subscriber is reported (`disconnected`), not hidden.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{ensure, Context, Result};
use bullmq_redis::fred::prelude::{Client, ClientLike};
use bullmq_redis::fred::types::{ClusterHash, CustomCommand, Value};
use ractor_bullmq::worker::{Job, JobContext, Worker, WorkerArgs, WorkerCallbacks};
use ractor_bullmq::{ConnectionConfig, Queue, QueueEventsHandle, QueueEventsOptions, QueueOptions};
use serde::Serialize;
use serde_json::json;
use tokio::sync::Notify;

use crate::redis_stats;
use crate::worker::{fill, queue_name, worker_options};

/// Buffer of every benchmark subscriber (events).
const SUBSCRIBER_BUFFER: usize = 16_384;
/// `XADD`s per pipeline when filling the stream.
const PIPELINE: u64 = 1_000;
/// Longest a case may run before it is reported as failed.
const CASE_TIMEOUT: Duration = Duration::from_secs(300);

/// What one fan-out case measured; printed as one JSON line.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct FanoutMeasurement {
    /// `fanout_replay_1`, `fanout_live_100`, ...
    pub(crate) scenario: String,
    /// Channel subscribers.
    pub(crate) subscribers: usize,
    /// Events each subscriber had to receive.
    pub(crate) events: u64,
    /// Seconds until every subscriber had every event.
    pub(crate) seconds: f64,
    /// Events delivered per second, per subscriber (`events / seconds`).
    pub(crate) events_per_sec: f64,
    /// Event deliveries per second over all subscribers.
    pub(crate) deliveries_per_sec: f64,
    /// Live only: jobs the worker completed.
    pub(crate) jobs: Option<u64>,
    /// Live only: events the worker appended per second while draining.
    pub(crate) produced_per_sec: Option<f64>,
    /// Live only: events the slowest subscriber still missed when the last job completed.
    pub(crate) lag_at_end: Option<u64>,
    /// Live only: ms from the last completion until every subscriber had every event.
    pub(crate) catch_up_ms: Option<f64>,
    /// Subscribers whose subscription ended early (overflow disconnection).
    pub(crate) disconnected: usize,
}

impl FanoutMeasurement {
    fn print_json_line(&self) {
        crate::report::print_json_line(self);
    }
}

/// Runs every case: replay and live, to each subscriber count.
pub(crate) async fn run(
    connection: &ConnectionConfig,
    admin: &Client,
    events: u64,
    jobs: u64,
    subscriber_counts: &[usize],
) -> Result<Vec<FanoutMeasurement>> {
    let mut results = Vec::new();
    for &subscribers in subscriber_counts {
        let m = replay(connection, admin, events, subscribers).await?;
        m.print_json_line();
        results.push(m);
    }
    for &subscribers in subscriber_counts {
        let m = live(connection, admin, jobs, subscribers).await?;
        m.print_json_line();
        results.push(m);
    }
    Ok(results)
}

/// A markdown table of the cases.
pub(crate) fn markdown_table(results: &[FanoutMeasurement]) -> String {
    let mut out = String::from(
        "| scenario | subscribers | events | events/s per subscriber | deliveries/s | worker events/s | lag at end | catch-up ms | disconnected |\n\
         |---|---:|---:|---:|---:|---:|---:|---:|---:|\n",
    );
    let opt = |v: Option<f64>| v.map_or("–".to_string(), |v| format!("{v:.0}"));
    for m in results {
        out.push_str(&format!(
            "| {} | {} | {} | {:.0} | {:.0} | {} | {} | {} | {} |\n",
            m.scenario,
            m.subscribers,
            m.events,
            m.events_per_sec,
            m.deliveries_per_sec,
            opt(m.produced_per_sec),
            m.lag_at_end.map_or("–".to_string(), |v| v.to_string()),
            opt(m.catch_up_ms),
            m.disconnected,
        ));
    }
    out
}

/// Counters of the subscriber tasks.
struct Consumers {
    received: Vec<Arc<AtomicU64>>,
    ended: Vec<Arc<AtomicBool>>,
}

impl Consumers {
    /// Subscribes `n` channels and drains each in its own task.
    fn spawn(events: &QueueEventsHandle, n: usize) -> Self {
        let mut received = Vec::with_capacity(n);
        let mut ended = Vec::with_capacity(n);
        for _ in 0..n {
            let mut rx = events.subscribe_stream();
            let (count, done) = (
                Arc::new(AtomicU64::new(0)),
                Arc::new(AtomicBool::new(false)),
            );
            received.push(count.clone());
            ended.push(done.clone());
            tokio::spawn(async move {
                let mut bytes = 0usize;
                while let Some(event) = rx.recv().await {
                    // Look at the event, as a consumer would.
                    bytes = bytes.wrapping_add(event.id.len());
                    count.fetch_add(1, Ordering::Relaxed);
                }
                std::hint::black_box(bytes);
                done.store(true, Ordering::Release);
            });
        }
        Self { received, ended }
    }

    /// Events received by the slowest subscriber still subscribed (`u64::MAX` if none is).
    fn min_received(&self) -> u64 {
        self.received
            .iter()
            .zip(&self.ended)
            .filter(|(_, ended)| !ended.load(Ordering::Acquire))
            .map(|(count, _)| count.load(Ordering::Relaxed))
            .min()
            .unwrap_or(u64::MAX)
    }

    fn disconnected(&self) -> usize {
        self.ended
            .iter()
            .filter(|ended| ended.load(Ordering::Acquire))
            .count()
    }

    /// Polls until every live subscriber has `target` events.
    async fn wait_for(&self, target: u64, deadline: Instant) -> Result<()> {
        while self.min_received() < target {
            ensure!(
                Instant::now() < deadline,
                "fan-out timed out: slowest subscriber at {} of {target}",
                self.min_received()
            );
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
        Ok(())
    }
}

/// Appends `events` entries to `key`: `active` and `completed` of `events / 2` jobs, with the
/// fields our worker writes.
async fn fill_stream(admin: &Client, key: &str, events: u64) -> Result<()> {
    let xadd = || CustomCommand::new_static("XADD", ClusterHash::FirstKey, false);
    let mut next = 0;
    while next < events {
        let end = (next + PIPELINE).min(events);
        let pipeline = admin.pipeline();
        for i in next..end {
            let job_id = (i / 2 + 1).to_string();
            let args: Vec<String> = if i % 2 == 0 {
                [
                    key, "*", "event", "active", "jobId", &job_id, "prev", "waiting",
                ]
                .map(str::to_owned)
                .to_vec()
            } else {
                [
                    key,
                    "*",
                    "event",
                    "completed",
                    "jobId",
                    &job_id,
                    "returnvalue",
                    r#"{"ok":true}"#,
                    "prev",
                    "active",
                ]
                .map(str::to_owned)
                .to_vec()
            };
            let () = pipeline.custom(xadd(), args).await?;
        }
        let _: Value = pipeline.all().await.context("XADD pipeline")?;
        next = end;
    }
    Ok(())
}

/// Every entry ever appended to the stream `key` (`XINFO STREAM`'s `entries-added`).
async fn entries_added(admin: &Client, key: &str) -> Result<u64> {
    let info: HashMap<String, Value> = admin
        .custom(
            CustomCommand::new_static("XINFO", ClusterHash::FirstKey, false),
            vec!["STREAM".to_owned(), key.to_owned()],
        )
        .await
        .context("XINFO STREAM")?;
    info.get("entries-added")
        .and_then(Value::as_u64)
        .context("XINFO STREAM has no entries-added (Redis 7 needed)")
}

async fn replay(
    connection: &ConnectionConfig,
    admin: &Client,
    events: u64,
    subscribers: usize,
) -> Result<FanoutMeasurement> {
    let name = queue_name("fanout", "rust", &format!("replay{subscribers}"));
    let options = QueueEventsOptions::new(name.clone(), connection.clone())
        .last_event_id("0")
        .autorun(false)
        .subscriber_buffer(SUBSCRIBER_BUFFER);
    fill_stream(admin, &options.events_key(), events).await?;
    let handle = QueueEventsHandle::start(options).await?;
    let consumers = Consumers::spawn(&handle, subscribers);
    let started = Instant::now();
    handle.run().await?;
    consumers
        .wait_for(events, started + CASE_TIMEOUT)
        .await
        .with_context(|| format!("replay to {subscribers}"))?;
    let seconds = started.elapsed().as_secs_f64();
    let disconnected = consumers.disconnected();
    handle.close().await;
    redis_stats::delete_queue(admin, "bull", &name).await?;
    Ok(FanoutMeasurement {
        scenario: format!("fanout_replay_{subscribers}"),
        subscribers,
        events,
        seconds,
        events_per_sec: events as f64 / seconds,
        deliveries_per_sec: (events * (subscribers - disconnected) as u64) as f64 / seconds,
        jobs: None,
        produced_per_sec: None,
        lag_at_end: None,
        catch_up_ms: None,
        disconnected,
    })
}

async fn live(
    connection: &ConnectionConfig,
    admin: &Client,
    jobs: u64,
    subscribers: usize,
) -> Result<FanoutMeasurement> {
    let name = queue_name("fanout", "rust", &format!("live{subscribers}"));
    let queue = Queue::new(name.clone(), QueueOptions::new(connection.clone())).await?;
    fill(&queue, jobs).await?;
    let options = QueueEventsOptions::new(name.clone(), connection.clone())
        .subscriber_buffer(SUBSCRIBER_BUFFER);
    let key = options.events_key();
    let handle = QueueEventsHandle::start(options).await?;
    let consumers = Consumers::spawn(&handle, subscribers);
    // Reading "from now on" is pinned to a concrete id before the worker starts.
    let deadline = Instant::now() + CASE_TIMEOUT;
    while handle.last_event_id() == "$" {
        ensure!(
            Instant::now() < deadline,
            "QueueEvents never started reading"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let added_before = entries_added(admin, &key).await?;

    let done = Arc::new(AtomicU64::new(0));
    let all_done = Arc::new(Notify::new());
    let callbacks = {
        let (done, all_done) = (done.clone(), all_done.clone());
        WorkerCallbacks::new().on_completed(move |_job, _value| {
            if done.fetch_add(1, Ordering::Relaxed) + 1 == jobs {
                all_done.notify_one();
            }
        })
    };
    let processor = |_job: Job, _ctx: JobContext| async move { Ok(json!({"ok": true})) };
    let started = Instant::now();
    let args = WorkerArgs::connect(connection, &name, processor, worker_options(100))
        .await?
        .callbacks(callbacks);
    let worker = Worker::spawn(args).await?;
    loop {
        tokio::select! {
            () = all_done.notified() => break,
            () = tokio::time::sleep(Duration::from_millis(20)) => {
                if done.load(Ordering::Relaxed) >= jobs { break; }
                ensure!(Instant::now() < deadline, "live {subscribers}: worker timed out at {} of {jobs} jobs",
                    done.load(Ordering::Relaxed));
            }
        }
    }
    let worker_seconds = started.elapsed().as_secs_f64();
    let delivered_at_end = consumers.min_received();
    worker.close().await?;
    // The worker may append a last `drained` after the count: measure once it has stopped.
    let produced = entries_added(admin, &key).await? - added_before;
    let finished = Instant::now();
    consumers
        .wait_for(produced, deadline)
        .await
        .with_context(|| format!("live to {subscribers}"))?;
    let catch_up_ms = finished.elapsed().as_secs_f64() * 1e3;
    let seconds = started.elapsed().as_secs_f64();
    let disconnected = consumers.disconnected();
    handle.close().await;
    queue.close().await?;
    redis_stats::delete_queue(admin, "bull", &name).await?;
    Ok(FanoutMeasurement {
        scenario: format!("fanout_live_{subscribers}"),
        subscribers,
        events: produced,
        seconds,
        events_per_sec: produced as f64 / seconds,
        deliveries_per_sec: (produced * (subscribers - disconnected) as u64) as f64 / seconds,
        jobs: Some(jobs),
        produced_per_sec: Some(produced as f64 / worker_seconds),
        lag_at_end: Some(produced.saturating_sub(delivered_at_end.min(produced))),
        catch_up_ms: Some(catch_up_ms),
        disconnected,
    })
}
