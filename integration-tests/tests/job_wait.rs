//! `Job::wait_until_finished` (Node's `waitUntilFinished`) with our Worker and with a Node
//! Worker, and `Queue::get_metrics` against Node's `getMetrics`.

mod common;
mod worker_common;

use std::time::{Duration, Instant};

use common::*;
use ractor_bullmq::protocol::options::{Backoff, JobOptions};
use ractor_bullmq::telemetry::MetricsKind;
use ractor_bullmq::{
    JobFinished, Queue, QueueEventsHandle, QueueEventsOptions, WaitError, WorkerCallbacks,
    WorkerOptions,
};
use serde_json::{json, Value};
use worker_common::*;

async fn events_for(queue: &str) -> anyhow::Result<QueueEventsHandle> {
    Ok(QueueEventsHandle::start(
        QueueEventsOptions::new(queue, config()).block_timeout(Duration::from_millis(200)),
    )
    .await?)
}

fn opts(attempts: u32) -> JobOptions {
    let mut opts = JobOptions::new();
    opts.attempts = Some(attempts);
    opts.backoff = Some(Backoff::fixed(Duration::from_millis(30)));
    opts
}

const WAIT: Duration = Duration::from_secs(20);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn waits_for_completion_failure_and_retries_with_our_worker() -> anyhow::Result<()> {
    let name = unique_queue("wait-rust");
    let queue = open_queue(&name).await?;
    let events = events_for(&name).await?;
    let ok = queue
        .add("ok", json!({"returnValue": {"answer": 42}, "sleepMs": 100}))
        .send()
        .await?;
    // Fails twice, completes on the third attempt: the wait must not end on the failures.
    let flaky = queue
        .add_job("flaky", &json!({"failAttempts": 2}), opts(3))
        .await?;
    let broken = queue
        .add_job("broken", &json!({"fail": "always broken"}), opts(2))
        .await?;

    let waits = async {
        tokio::join!(
            ok.wait_until_finished(&events, WAIT),
            flaky.wait_until_finished(&events, WAIT),
            broken.wait_until_finished(&events, WAIT),
        )
    };
    let worker = async {
        // Start processing only once the waits are subscribed and checking.
        tokio::time::sleep(Duration::from_millis(50)).await;
        spawn_worker(
            &name,
            WorkerOptions::new().concurrency(3),
            WorkerCallbacks::new(),
        )
        .await
    };
    let ((ok_done, flaky_done, broken_done), worker) = tokio::join!(waits, worker);
    let worker = worker?;
    assert_eq!(ok_done?, JobFinished::Completed(json!({"answer": 42})));
    assert_eq!(
        flaky_done?,
        JobFinished::Completed(json!({"processedBy": "rust"}))
    );
    assert_eq!(
        broken_done?,
        JobFinished::Failed("always broken".to_string())
    );
    let flaky_job = queue.get_job(flaky.id()).await?.expect("flaky job");
    assert_eq!(flaky_job.attempts_made(), 3);

    // Already finished: answered from the job hash, at once.
    let started = Instant::now();
    let again = queue.wait_until_finished(ok.id(), &events, WAIT).await?;
    assert_eq!(again.into_result(), Ok(json!({"answer": 42})));
    let again = broken.wait_until_finished(&events, WAIT).await?;
    assert_eq!(again.into_result(), Err("always broken".to_string()));
    assert!(started.elapsed() < WAIT);

    worker.close().await?;
    events.close().await;
    queue.close().await?;
    cleanup(&name).await
}

#[tokio::test]
async fn times_out_and_reports_missing_jobs_and_wrong_queues() -> anyhow::Result<()> {
    let name = unique_queue("wait-timeout");
    let queue = open_queue(&name).await?;
    let events = events_for(&name).await?;
    let job = queue.add("never", json!({})).send().await?;

    let timeout = Duration::from_millis(300);
    let started = Instant::now();
    let outcome = job.wait_until_finished(&events, timeout).await;
    assert!(
        matches!(&outcome, Err(WaitError::Timeout { job_id, timeout: t }) if job_id == job.id() && *t == timeout),
        "{outcome:?}"
    );
    assert!(started.elapsed() >= timeout);

    let outcome = queue
        .wait_until_finished("no-such-job", &events, timeout)
        .await;
    assert!(
        matches!(&outcome, Err(WaitError::JobNotFound { job_id }) if job_id == "no-such-job"),
        "{outcome:?}"
    );

    let other_name = unique_queue("wait-other");
    let other = open_queue(&other_name).await?;
    let outcome = other.wait_until_finished(job.id(), &events, timeout).await;
    assert!(
        matches!(outcome, Err(WaitError::WrongQueue { .. })),
        "{outcome:?}"
    );

    // A closed QueueEvents ends the wait instead of letting it run into the timeout.
    events.close().await;
    let outcome = job.wait_until_finished(&events, WAIT).await;
    assert!(
        matches!(outcome, Err(WaitError::EventsClosed { .. })),
        "{outcome:?}"
    );

    other.close().await?;
    queue.close().await?;
    cleanup(&other_name).await?;
    cleanup(&name).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn waits_for_jobs_processed_by_a_node_worker() -> anyhow::Result<()> {
    if !node_available() {
        return Ok(());
    }
    let name = unique_queue("wait-node");
    let queue = open_queue(&name).await?;
    let events = events_for(&name).await?;
    let ok = queue
        .add("ok", json!({"returnValue": "done by node"}))
        .send()
        .await?;
    let flaky = queue
        .add_job("flaky", &json!({"failAttempts": 1}), opts(2))
        .await?;
    let broken = queue
        .add_job("broken", &json!({"unrecoverable": "no way"}), opts(5))
        .await?;

    let node = tokio::spawn({
        let name = name.clone();
        async move {
            run_node(
                "run_worker.js",
                &json!({"queue": name, "concurrency": 3, "stopAfter": 4, "timeoutMs": 30000}),
            )
            .await
        }
    });
    let (ok_done, flaky_done, broken_done) = tokio::join!(
        ok.wait_until_finished(&events, WAIT),
        flaky.wait_until_finished(&events, WAIT),
        broken.wait_until_finished(&events, WAIT),
    );
    let report = node.await??;
    assert_eq!(report["stoppedBy"], "count", "{report}");
    assert_eq!(ok_done?, JobFinished::Completed(json!("done by node")));
    assert_eq!(
        flaky_done?,
        JobFinished::Completed(json!({"processedBy": "node"}))
    );
    assert_eq!(broken_done?, JobFinished::Failed("no way".to_string()));

    events.close().await;
    queue.close().await?;
    cleanup(&name).await
}

async fn node_metrics(queue: &str, kind: &str, start: i64, end: i64) -> anyhow::Result<Value> {
    let out = run_node(
        "metrics.js",
        &json!({"queue": queue, "type": kind, "start": start, "end": end}),
    )
    .await?;
    Ok(out["metrics"].clone())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn get_metrics_matches_node() -> anyhow::Result<()> {
    if !node_available() {
        return Ok(());
    }
    let name = unique_queue("wait-metrics");
    let queue: Queue = open_queue(&name).await?;
    // No metrics yet: zeros and no data, as Node.
    let empty = queue.get_metrics(MetricsKind::Completed, 0, -1).await?;
    assert_eq!(
        serde_json::to_value(&empty)?,
        node_metrics(&name, "completed", 0, -1).await?
    );

    let jobs: Vec<Value> = (0..12)
        .map(|i| {
            let data = if i % 4 == 0 {
                json!({"fail": "metric failure"})
            } else {
                json!({"i": i})
            };
            json!({"name": "m", "data": data})
        })
        .collect();
    run_node(
        "add_jobs.js",
        &json!({"queue": name, "bulk": true, "jobs": jobs}),
    )
    .await?;
    let worker = spawn_worker(
        &name,
        WorkerOptions::new()
            .concurrency(4)
            .metrics_max_data_points(60),
        WorkerCallbacks::new(),
    )
    .await?;
    wait_finished(&name, 12, Duration::from_secs(20)).await?;
    worker.close().await?;

    for (kind, node_kind) in [
        (MetricsKind::Completed, "completed"),
        (MetricsKind::Failed, "failed"),
    ] {
        for (start, end) in [(0, -1), (0, 0), (1, 5), (-2, -1)] {
            let ours = serde_json::to_value(queue.get_metrics(kind, start, end).await?)?;
            let node = node_metrics(&name, node_kind, start, end).await?;
            assert_eq!(ours, node, "{node_kind} {start}..{end}");
        }
    }
    let completed = queue.get_metrics(MetricsKind::Completed, 0, -1).await?;
    assert_eq!(completed.meta.count, 9);
    let failed = queue.get_metrics(MetricsKind::Failed, 0, -1).await?;
    assert_eq!(failed.meta.count, 3);

    queue.close().await?;
    cleanup(&name).await
}

/// Waits started before, during and after processing, with many jobs finishing at once: every
/// wait ends with its own job's result and none misses its event (the race a wait that checked
/// the state before subscribing would lose).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn waits_started_at_any_moment_never_miss_the_finish() -> anyhow::Result<()> {
    const JOBS: usize = 300;
    let name = unique_queue("wait-race");
    let queue = open_queue(&name).await?;
    let events = events_for(&name).await?;
    let jobs: Vec<_> = (0..JOBS)
        .map(|i| {
            let data = if i % 10 == 0 {
                json!({"fail": format!("no {i}")})
            } else {
                json!({"returnValue": i, "sleepMs": i % 7})
            };
            (format!("r{i}"), data, JobOptions::new())
        })
        .collect();
    let added = queue.add_bulk(jobs).await?;
    let worker = spawn_worker(
        &name,
        WorkerOptions::new().concurrency(50),
        WorkerCallbacks::new(),
    )
    .await?;
    // Start the waits spread over the processing: early ones wait for events, late ones find
    // the job finished, the ones in between race the worker.
    let mut waits = tokio::task::JoinSet::new();
    for (i, job) in added.into_iter().enumerate() {
        let events = events.clone();
        waits.spawn(async move {
            tokio::time::sleep(Duration::from_millis((i % 50) as u64 * 5)).await;
            (i, job.wait_until_finished(&events, WAIT).await)
        });
    }
    let mut seen = 0;
    while let Some(joined) = waits.join_next().await {
        let (i, outcome) = joined?;
        let expected = if i % 10 == 0 {
            JobFinished::Failed(format!("no {i}"))
        } else {
            JobFinished::Completed(json!(i))
        };
        assert_eq!(outcome?, expected, "job {i}");
        seen += 1;
    }
    assert_eq!(seen, JOBS);
    worker.close().await?;
    events.close().await;
    queue.close().await?;
    cleanup(&name).await
}
