//! A Worker on a real Redis emits the telemetry catalogue: worker started / stopped, a stalled
//! check, job started / progress / completed / failed with the `bullmq.worker.process` span,
//! the queue running empty (`bullmq.worker.queue_empty`), a rate-limit hit, and the matching metrics.
//!
//! Runs on the default current-thread runtime, so every task (worker, job actors) reports to
//! the capture installed on the test's thread.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use ractor_bullmq::protocol::options::JobOptions;
use ractor_bullmq::telemetry::testing::{CapturedEvents, CapturedMetrics};
use ractor_bullmq::telemetry::{event_names as ev, metric_names as m, span_names};
use ractor_bullmq::worker::{Job, JobContext, Worker, WorkerArgs, WorkerCallbacks, WorkerOptions};
use ractor_bullmq::{ConnectionConfig, Queue, QueueOptions};
use serde_json::json;

fn unique(prefix: &str) -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or_default();
    format!("{prefix}-{}-{nanos:x}", std::process::id())
}

async fn eventually(what: &str, timeout: Duration, mut check: impl FnMut() -> bool) {
    let deadline = Instant::now() + timeout;
    while !check() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn worker_emits_the_catalogue_events() -> anyhow::Result<()> {
    let events = CapturedEvents::new();
    let metrics = CapturedMetrics::new();
    let _t = events.set_default();
    let _m = metrics.set_default();

    let config = ConnectionConfig::from_env()?;
    let name = unique("telemetry-worker");
    let queue = Queue::new(name.clone(), QueueOptions::new(config.clone())).await?;
    queue.add("good", json!({"n": 1})).await?;
    queue
        .add_job("bad", json!({"n": 2}), JobOptions::default())
        .await?;

    let finished = Arc::new(AtomicUsize::new(0));
    let callbacks = {
        let (done, failed) = (finished.clone(), finished.clone());
        WorkerCallbacks::new()
            .on_completed(move |_, _| {
                done.fetch_add(1, Ordering::SeqCst);
            })
            .on_failed(move |_| {
                failed.fetch_add(1, Ordering::SeqCst);
            })
    };
    let processor = |job: Job, ctx: JobContext| async move {
        if job.name() == "bad" {
            anyhow::bail!("bad job");
        }
        ctx.update_progress(json!({"step": 1})).await?;
        Ok(json!({"ok": true}))
    };
    let options = WorkerOptions::new().concurrency(2).name("tw-1");
    let args = WorkerArgs::connect(&config, &name, processor, options)
        .await?
        .callbacks(callbacks);
    let worker = Worker::spawn(args).await?;
    eventually("both jobs finished", Duration::from_secs(20), || {
        finished.load(Ordering::SeqCst) == 2
    })
    .await;
    eventually("the queue ran empty", Duration::from_secs(20), || {
        events.first(ev::WORKER_QUEUE_EMPTY).is_some()
    })
    .await;
    worker.close().await?;
    eventually("the worker stopped", Duration::from_secs(20), || {
        events.first(ev::WORKER_STOPPED).is_some()
    })
    .await;

    let started = events.first(ev::WORKER_STARTED).expect("worker started");
    assert_eq!(started.field("queue"), Some(name.as_str()));
    assert_eq!(started.field("worker"), Some("tw-1"));
    assert_eq!(started.field("concurrency"), Some("2"));
    assert!(events.first(ev::STALLED_CHECK).is_some(), "stalled check");

    let job_started = events.named(ev::JOB_STARTED);
    assert_eq!(job_started.len(), 2);
    assert!(job_started
        .iter()
        .all(|e| e.field("worker") == Some("tw-1") && e.field("attempt") == Some("1")));

    let progress = events.first(ev::JOB_PROGRESS).expect("progress");
    assert_eq!(progress.field("job.name"), Some("good"));
    assert_eq!(progress.field("progress"), Some(r#"{"step":1}"#));
    // Inside the job's process span (ractor adds its own `Actor` span around it).
    assert_eq!(progress.spans.last(), Some(&span_names::WORKER_PROCESS));

    let completed = events.first(ev::JOB_COMPLETED).expect("completed");
    assert_eq!(completed.field("job.name"), Some("good"));
    assert!(completed.field("duration_ms").is_some());
    let failed = events.first(ev::JOB_FAILED).expect("failed");
    assert_eq!(failed.field("job.name"), Some("bad"));
    assert_eq!(failed.field("error"), Some("bad job"));

    let spans = events.spans_named(span_names::WORKER_PROCESS);
    assert_eq!(spans.len(), 2);
    assert!(spans
        .iter()
        .all(|s| s.field("queue") == Some(name.as_str())));

    let queue_label = [("queue", name.as_str())];
    assert_eq!(
        metrics.counter(m::JOBS_COMPLETED, &[("queue", &name), ("job_name", "good")]),
        Some(1)
    );
    assert_eq!(
        metrics.counter(m::JOBS_FAILED, &[("queue", &name), ("job_name", "bad")]),
        Some(1)
    );
    assert_eq!(
        metrics.gauge(m::WORKER_ACTIVE_JOBS, &queue_label),
        Some(0.0)
    );
    assert_eq!(metrics.gauge(m::WORKERS, &queue_label), Some(0.0));

    queue.obliterate(true).await?;
    queue.close().await?;
    Ok(())
}

#[tokio::test]
async fn a_rate_limited_fetch_reports_a_rate_limit_hit() -> anyhow::Result<()> {
    let events = CapturedEvents::new();
    let metrics = CapturedMetrics::new();
    let _t = events.set_default();
    let _m = metrics.set_default();

    let config = ConnectionConfig::from_env()?;
    let name = unique("telemetry-limit");
    let queue = Queue::new(name.clone(), QueueOptions::new(config.clone())).await?;
    for i in 0..3 {
        queue.add("job", json!({"i": i})).await?;
    }
    let processor = |_job: Job, _ctx: JobContext| async move { Ok(json!(null)) };
    let options = WorkerOptions::new()
        .concurrency(3)
        .name("tw-limit")
        .limiter(1, Duration::from_secs(2));
    let worker =
        Worker::spawn(WorkerArgs::connect(&config, &name, processor, options).await?).await?;
    eventually("a rate-limit hit", Duration::from_secs(20), || {
        events.first(ev::RATE_LIMIT_HIT).is_some()
    })
    .await;
    worker.close().await?;
    let hit = events.first(ev::RATE_LIMIT_HIT).expect("rate limit hit");
    assert_eq!(hit.field("worker"), Some("tw-limit"));
    assert!(hit.field("delay_ms").is_some());
    assert!(metrics
        .counter(m::RATE_LIMIT_HITS, &[("queue", name.as_str())])
        .is_some_and(|n| n >= 1));
    queue.obliterate(true).await?;
    queue.close().await?;
    Ok(())
}
