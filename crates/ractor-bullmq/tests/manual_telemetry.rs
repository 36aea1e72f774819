//! The ManualWorker's telemetry on the in-memory backend: its finishes and refusals reported
//! as the Worker's (`bullmq.job.completed` / `.retried` / `.finish_refused`, `worker` = its
//! name). A binary of its own: tracing's per-callsite interest cache is shared by every thread,
//! so a capture installed on one test's thread can miss events while other tests run.

use std::time::Duration;

use bullmq_backend::memory::MemoryBackend;
use bullmq_backend::{AddResult, Backend, NewJob};
use bullmq_protocol::QueueId;
use ractor_bullmq::telemetry::testing::CapturedEvents;
use ractor_bullmq::worker::ManualWorker;
use ractor_bullmq::WorkerOptions;
use serde_json::json;

#[tokio::test]
async fn finishes_and_refusals_are_reported_as_the_workers() {
    let backend = MemoryBackend::new();
    let queue_id = QueueId::new("bull", "manual-telemetry");
    let queue = backend.queue_store(&queue_id).await.unwrap();
    for opts in ["{}", r#"{"attempts":2}"#] {
        let job = NewJob::new("job", "{}", opts, bullmq_backend::now_ms());
        assert!(matches!(queue.add(&job).await.unwrap(), AddResult::Id(_)));
    }
    let options = WorkerOptions::new()
        .name("by-hand")
        .drain_delay(Duration::from_millis(50));
    let worker = ManualWorker::open(&backend, queue_id.name(), options)
        .await
        .unwrap();
    let capture = CapturedEvents::new();
    let _guard = capture.set_default();
    let job = worker.get_next_job("t").await.unwrap().expect("job");
    let next = worker
        .move_to_completed(&job, json!(1), true)
        .await
        .unwrap()
        .expect("next");
    worker
        .move_to_failed(&next, anyhow::anyhow!("again"), false)
        .await
        .unwrap();
    let _ = worker.move_to_completed(&next, json!(1), false).await;
    let completed = capture.first("bullmq.job.completed").expect("completed");
    assert_eq!(completed.field("worker"), Some("by-hand"));
    assert_eq!(completed.field("job.id"), Some(job.id()));
    let retried = capture.first("bullmq.job.retried").expect("retried");
    assert_eq!(retried.field("error"), Some("again"));
    let refused = capture.first("bullmq.job.finish_refused").expect("refused");
    assert_eq!(refused.field("job.id"), Some(next.id()));
    worker.close().await;
}
