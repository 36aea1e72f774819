//! The ManualWorker on the in-memory backend, no Redis running: the caller's token is the lock,
//! fetch-next in the finish call, retries and backoff decided as the Worker's, the typed refusals,
//! blocking and non-blocking fetches, and the stalled check (issue 13, item 4).

use std::time::Duration;

use bullmq_backend::JobEnd;
use bullmq_protocol::state::JobState;
use ractor_bullmq::worker::{ManualError, ManualJob, ManualWorker, UnrecoverableError};
use ractor_bullmq::WorkerOptions;
use serde_json::json;

mod memory_queue;
use memory_queue::Fixture;

impl Fixture {
    async fn worker(&self, options: WorkerOptions) -> ManualWorker {
        ManualWorker::open(&self.backend, self.keys.name(), options)
            .await
            .unwrap()
    }

    async fn state(&self, id: &str) -> JobState {
        self.queue.get_state(id).await.unwrap()
    }

    async fn event_names(&self) -> Vec<String> {
        self.events
            .read("0-0", Duration::from_millis(10), 100_000)
            .await
            .unwrap()
            .into_iter()
            .map(|e| e.fields[0].1.clone())
            .collect()
    }
}

fn options() -> WorkerOptions {
    WorkerOptions::new().drain_delay(Duration::from_millis(50))
}

#[tokio::test]
async fn the_callers_token_locks_the_job_and_fetch_next_reuses_it() {
    let f = Fixture::new("manual-token").await;
    let a = f.add("{}").await;
    let b = f.add("{}").await;
    let worker = f.worker(options().name("manual-1")).await;
    let job = worker.get_next_job("tok-1").await.unwrap().expect("a job");
    assert_eq!((job.id(), job.token()), (a.as_str(), "tok-1"));
    assert_eq!(job.job().processed_by(), Some("manual-1"));
    assert_eq!(f.state(&a).await, JobState::Active);
    worker
        .extend_lock(&job, Duration::from_secs(60))
        .await
        .unwrap();
    let next = worker
        .move_to_completed(&job, json!({"ok": 1}), true)
        .await
        .unwrap()
        .expect("next job fetched in the same call");
    assert_eq!((next.id(), next.token()), (b.as_str(), "tok-1"));
    assert_eq!(
        f.queue.job_end(&a).await.unwrap(),
        JobEnd::Completed(Some(r#"{"ok":1}"#.into()))
    );
    let none = worker
        .move_to_completed(&next, json!(null), true)
        .await
        .unwrap();
    assert!(none.is_none(), "queue empty");
    assert!(worker.try_get_next_job("tok-1").await.unwrap().is_none());
    assert!(
        worker.get_next_job("tok-1").await.unwrap().is_none(),
        "blocked drain_delay, nothing came"
    );
    let names = f.event_names().await;
    assert_eq!(
        names.iter().filter(|n| *n == "completed").count(),
        2,
        "{names:?}"
    );
    worker.close().await;
}

#[tokio::test]
async fn failures_retry_until_attempts_run_out() {
    let f = Fixture::new("manual-retry").await;
    let id = f.add(r#"{"attempts":2}"#).await;
    let worker = f.worker(options()).await;
    let job = worker.get_next_job("t").await.unwrap().expect("job");
    // A retry at once fetches nothing, as Node's retryJob.
    let next = worker
        .move_to_failed(&job, anyhow::anyhow!("first"), true)
        .await
        .unwrap();
    assert!(next.is_none());
    assert_eq!(f.state(&id).await, JobState::Waiting);
    let job = worker
        .get_next_job("t")
        .await
        .unwrap()
        .expect("retried job");
    assert_eq!(job.job().attempts_made(), 1);
    worker
        .move_to_failed(&job, anyhow::anyhow!("second"), false)
        .await
        .unwrap();
    assert_eq!(f.state(&id).await, JobState::Failed);
    let record = f.queue.get_job(&id).await.unwrap().unwrap();
    assert_eq!(record.failed_reason.as_deref(), Some("second"));
    assert_eq!(record.attempts_made, 2);
    let names = f.event_names().await;
    assert!(names.contains(&"retries-exhausted".into()), "{names:?}");
    worker.close().await;
}

#[tokio::test]
async fn backoff_delays_and_unrecoverable_fails_at_once() {
    let f = Fixture::new("manual-backoff").await;
    let delayed = f
        .add(r#"{"attempts":3,"backoff":{"type":"fixed","delay":60000}}"#)
        .await;
    let unrecoverable = f.add(r#"{"attempts":3}"#).await;
    let worker = f.worker(options()).await;
    let job = worker.get_next_job("t").await.unwrap().expect("job");
    assert_eq!(job.id(), delayed);
    let next = worker
        .move_to_failed(&job, anyhow::anyhow!("later"), true)
        .await
        .unwrap()
        .expect("a delayed retry fetches the next job");
    assert_eq!(f.state(&delayed).await, JobState::Delayed);
    assert_eq!(next.id(), unrecoverable);
    worker
        .move_to_failed(&next, UnrecoverableError::new("never"), false)
        .await
        .unwrap();
    assert_eq!(f.state(&unrecoverable).await, JobState::Failed);
    worker.close().await;
}

#[tokio::test]
async fn wrong_tokens_and_lost_locks_are_typed_refusals() {
    let f = Fixture::new("manual-refusals").await;
    let id = f.add("{}").await;
    let worker = f
        .worker(
            options()
                .lock_duration(Duration::from_millis(100))
                .stalled_interval(Duration::from_millis(100)),
        )
        .await;
    let job = worker.get_next_job("mine").await.unwrap().expect("job");
    let forged = ManualJob::new(job.job().clone(), "theirs");
    let error = worker
        .move_to_completed(&forged, json!(1), false)
        .await
        .unwrap_err();
    assert!(
        matches!(&error, ManualError::LockMismatch { job_id, command } if *job_id == id && *command == "moveToFinished"),
        "{error:?}"
    );
    assert_eq!(
        error.to_string(),
        format!("Lock mismatch for job {id}. Cmd moveToFinished from active")
    );
    assert!(matches!(
        worker.extend_lock(&forged, Duration::from_secs(1)).await,
        Err(ManualError::LockNotExtended { .. })
    ));
    assert_eq!(f.state(&id).await, JobState::Active, "unchanged");
    tokio::time::sleep(Duration::from_millis(400)).await;
    let error = worker
        .move_to_failed(&job, anyhow::anyhow!("late"), false)
        .await
        .unwrap_err();
    assert!(
        matches!(&error, ManualError::LockMissing { job_id, .. } if *job_id == id),
        "{error:?}"
    );
    assert!(matches!(
        worker.extend_lock(&job, Duration::from_secs(1)).await,
        Err(ManualError::LockNotExtended { .. })
    ));
    // The stalled check takes the lock-less job back (the first check marks it).
    let mut recovered = Vec::new();
    for _ in 0..20 {
        recovered.extend(worker.check_stalled().await.unwrap().recovered);
        if !recovered.is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(150)).await;
    }
    assert_eq!(recovered, vec![id.clone()]);
    assert_eq!(f.state(&id).await, JobState::Waiting);
    let missing = ManualJob::new(job.job().clone(), "mine");
    f.queue.remove_job(&id, false).await.unwrap();
    assert!(matches!(
        worker.move_to_completed(&missing, json!(1), false).await,
        Err(ManualError::JobMissing { .. })
    ));
    assert!(matches!(
        worker.get_next_job("").await,
        Err(ManualError::EmptyToken)
    ));
    worker.close().await;
    assert!(matches!(
        worker.try_get_next_job("mine").await,
        Err(ManualError::Closed)
    ));
}

#[test]
fn the_worker_can_be_shared_between_tasks() {
    fn shared<T: Send + Sync + 'static>() {}
    shared::<ManualWorker>();
    shared::<ManualJob>();
    shared::<ManualError>();
}
