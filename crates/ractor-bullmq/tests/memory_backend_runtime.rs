//! The real supervision tree on the in-memory backend, no Redis running: a `Runtime` whose
//! Workers and QueueEvents open their stores on a `MemoryBackend`. A Worker killed while it
//! holds a job is restarted by its supervisor, and the new incarnation recovers the stalled
//! job; retries and every event reach a supervised QueueEvents (issue 11, item 2).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bullmq_backend::memory::MemoryBackend;
use bullmq_backend::Backend;
use ractor_bullmq::protocol::JobOptions;
use ractor_bullmq::worker::{Job, JobContext};
use ractor_bullmq::{
    JobFinished, Queue, QueueEventsOptions, QueueOptions, Runtime, RuntimeOptions, WorkerOptions,
};
use serde_json::{json, Value};

const LONG: Duration = Duration::from_secs(30);

async fn runtime(backend: &Arc<dyn Backend>) -> Runtime {
    Runtime::start(RuntimeOptions::default().backend(backend.clone()))
        .await
        .expect("runtime starts")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_worker_is_restarted_and_its_job_recovered() {
    let backend: Arc<dyn Backend> = Arc::new(MemoryBackend::new());
    let runtime = runtime(&backend).await;
    let queue = Queue::with_backend("killed", backend.as_ref(), QueueOptions::default())
        .await
        .unwrap();
    let events = runtime
        .start_queue_events(QueueEventsOptions::with_backend("killed", backend.clone()))
        .await
        .unwrap();

    // The first attempt hangs until its worker is killed; the recovered one completes.
    let calls = Arc::new(AtomicUsize::new(0));
    let seen = calls.clone();
    let processor = move |job: Job, _ctx: JobContext| {
        let call = seen.fetch_add(1, Ordering::SeqCst);
        async move {
            if call == 0 {
                tokio::time::sleep(Duration::from_secs(3600)).await;
            }
            Ok::<Value, anyhow::Error>(json!({ "stalled": job.stalled_counter() }))
        }
    };
    let options = WorkerOptions::new()
        .lock_duration(Duration::from_millis(500))
        .stalled_interval(Duration::from_millis(300))
        .drain_delay(Duration::from_millis(100));
    let worker = runtime
        .start_worker("killed", processor, options)
        .await
        .unwrap();
    let job = queue
        .add_job("work", json!({}), JobOptions::new())
        .await
        .unwrap();

    let deadline = tokio::time::Instant::now() + LONG;
    while calls.load(Ordering::SeqCst) == 0 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the job never started"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let first = worker.actor().await.expect("a running worker");
    first.kill();

    let finished = job.wait_until_finished(&events, LONG).await.unwrap();
    assert_eq!(finished, JobFinished::Completed(json!({ "stalled": 1 })));
    let second = worker.actor().await.expect("a restarted worker");
    assert_ne!(
        first.get_id(),
        second.get_id(),
        "the supervisor restarted it"
    );
    assert!(worker.restarts().await.unwrap().unwrap_or(0) >= 1);

    runtime.shutdown(LONG).await.unwrap();
    queue.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retries_and_events_under_supervision() {
    let backend: Arc<dyn Backend> = Arc::new(MemoryBackend::new());
    let runtime = runtime(&backend).await;
    let queue = Queue::with_backend("retried", backend.as_ref(), QueueOptions::default())
        .await
        .unwrap();
    let events = runtime
        .start_queue_events(
            QueueEventsOptions::with_backend("retried", backend.clone()).last_event_id("0"),
        )
        .await
        .unwrap();
    let mut stream = events.subscribe_stream();
    let processor = |job: Job, _ctx: JobContext| async move {
        if job.attempts_made() < 2 {
            anyhow::bail!("attempt {} fails", job.attempts_made() + 1);
        }
        Ok::<Value, anyhow::Error>(json!("done"))
    };
    runtime
        .start_worker(
            "retried",
            processor,
            WorkerOptions::new().drain_delay(Duration::from_millis(100)),
        )
        .await
        .unwrap();
    let job = queue
        .add_job("work", json!({}), JobOptions::new().attempts(3))
        .await
        .unwrap();
    let finished = job.wait_until_finished(&events, LONG).await.unwrap();
    assert_eq!(finished, JobFinished::Completed(json!("done")));

    // The job's events, in order, as a subscriber of the supervised QueueEvents saw them.
    let mut names = Vec::new();
    let deadline = tokio::time::Instant::now() + LONG;
    while !names.contains(&"completed".to_owned()) {
        let event = tokio::time::timeout_at(deadline, stream.recv())
            .await
            .expect("events keep coming")
            .expect("subscription open");
        if event.event.job_id() == Some(job.id()) {
            names.push(event.event.name().to_owned());
        }
    }
    let count = |name: &str| names.iter().filter(|n| *n == name).count();
    assert_eq!(count("active"), 3, "three attempts: {names:?}");
    assert_eq!(count("completed"), 1, "{names:?}");
    // A retried attempt is not a final failure: the stream has no `failed` for it (as Node's).
    assert_eq!(count("failed"), 0, "{names:?}");
    assert_eq!(
        names.last().map(String::as_str),
        Some("completed"),
        "{names:?}"
    );
    let stored = queue.get_job(job.id()).await.unwrap().expect("kept");
    assert_eq!(stored.attempts_made(), 3);

    runtime.shutdown(LONG).await.unwrap();
    queue.close().await.unwrap();
}
