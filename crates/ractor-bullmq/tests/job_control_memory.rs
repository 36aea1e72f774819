//! Bulk job control through the `Queue` on the in-memory backend, no Redis running: the
//! batch loops of `retry_jobs` / `promote_jobs` count every job moved, bad counts and
//! durations are refused before the store is asked, and lock refusals come back typed. The
//! Redis and Node-parity side is in `integration-tests/tests/job_control_bulk.rs`.

use std::time::Duration;

use bullmq_backend::memory::MemoryBackend;
use bullmq_backend::{
    Backend, FetchRequest, FinishAction, FinishCode, Retention, WorkerStoreOptions,
};
use bullmq_protocol::state::JobState;
use bullmq_protocol::QueueId;
use ractor_bullmq::{ObliterateOptions, Queue, QueueError, QueueOptions, RetryFrom};

const LOCK: Duration = Duration::from_secs(30);

async fn open(backend: &MemoryBackend, name: &str) -> Queue {
    Queue::with_backend(name, backend, QueueOptions::default())
        .await
        .expect("open queue")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retry_and_promote_loop_over_batches_and_count_every_job() {
    let backend = MemoryBackend::new();
    let queue = open(&backend, "bulk-memory").await;
    let worker = backend
        .worker_store(
            &QueueId::new("bull", "bulk-memory"),
            &WorkerStoreOptions::default(),
        )
        .await
        .expect("worker store");
    for n in 0..5 {
        queue
            .add(format!("job-{n}"), serde_json::json!({}))
            .await
            .unwrap();
    }
    let fetched = worker
        .fetch_batch(&FetchRequest::new(5, "w", LOCK))
        .await
        .unwrap();
    assert_eq!(fetched.jobs.len(), 5);
    let finishes: Vec<_> = fetched
        .jobs
        .iter()
        .map(|job| bullmq_backend::Finish {
            job_id: job.id.clone(),
            token: job.token.clone(),
            action: FinishAction::Fail {
                reason: "boom".into(),
                stacktrace: None,
                attempts: 1,
                keep: Retention::KEEP_ALL,
            },
            receipt: job.receipt,
        })
        .collect();
    let reply = worker.finish_batch(&finishes, None).await.unwrap();
    assert!(reply.codes.iter().all(|code| *code == FinishCode::Ok));

    let refused = queue
        .retry_jobs(
            ractor_bullmq::RetryJobsOptions::new()
                .state(RetryFrom::Failed)
                .count(0),
        )
        .await
        .expect_err("count 0");
    assert!(matches!(
        refused,
        QueueError::InvalidArgument {
            argument: "count",
            ..
        }
    ));
    assert_eq!(queue.get_job_counts().await.unwrap().failed, 5);
    // Batches of 2: 2 + 2 + 1, the short one ends the loop.
    assert_eq!(
        queue
            .retry_jobs(
                ractor_bullmq::RetryJobsOptions::new()
                    .state(RetryFrom::Failed)
                    .count(2)
            )
            .await
            .unwrap(),
        5
    );
    assert_eq!(queue.get_job_counts().await.unwrap().waiting, 5);

    for n in 0..3 {
        queue
            .add(format!("later-{n}"), serde_json::json!({}))
            .delay(Duration::from_secs(60))
            .await
            .unwrap();
    }
    assert!(matches!(
        queue
            .promote_jobs(ractor_bullmq::PromoteJobsOptions::new().count(0))
            .await,
        Err(QueueError::InvalidArgument { .. })
    ));
    // A batch exactly full asks once more and finds nothing, as Node's loop.
    assert_eq!(
        queue
            .promote_jobs(ractor_bullmq::PromoteJobsOptions::new().count(3))
            .await
            .unwrap(),
        3
    );
    assert_eq!(queue.get_job_counts().await.unwrap().delayed, 0);
    assert_eq!(queue.get_job_counts().await.unwrap().waiting, 8);

    assert!(matches!(
        queue
            .obliterate_with(ObliterateOptions::new().count(0))
            .await,
        Err(QueueError::InvalidArgument { .. })
    ));
    assert!(
        !queue.is_paused().await.unwrap(),
        "the refusal did not pause"
    );
    queue
        .obliterate_with(ObliterateOptions::new().count(3))
        .await
        .unwrap();
    assert_eq!(queue.get_job_counts().await.unwrap().waiting, 0);
    queue.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn extend_lock_refusals_are_typed() {
    let backend = MemoryBackend::new();
    let queue = open(&backend, "lock-memory").await;
    let worker = backend
        .worker_store(
            &QueueId::new("bull", "lock-memory"),
            &WorkerStoreOptions::default(),
        )
        .await
        .expect("worker store");
    let added = queue.add("a", serde_json::json!({})).await.unwrap();
    let fetched = worker
        .fetch_batch(&FetchRequest::new(1, "w", LOCK))
        .await
        .unwrap();
    let job = &fetched.jobs[0];
    assert_eq!(job.id, added.id());
    let long = Duration::from_secs(60);

    queue.extend_lock(&job.id, &job.token, long).await.unwrap();
    assert!(matches!(
        queue.extend_lock(&job.id, "other", long).await,
        Err(QueueError::LockHeldByOther { job_id }) if job_id == job.id
    ));
    assert!(matches!(
        queue.extend_lock("missing", &job.token, long).await,
        Err(QueueError::LockMissing { job_id }) if job_id == "missing"
    ));
    assert!(matches!(
        queue.extend_lock(&job.id, &job.token, Duration::ZERO).await,
        Err(QueueError::InvalidArgument {
            argument: "duration",
            ..
        })
    ));
    assert_eq!(
        queue.get_job_state(&job.id).await.unwrap(),
        JobState::Active
    );
    queue.close().await.unwrap();
}
