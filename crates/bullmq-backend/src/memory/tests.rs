//! Behaviour of the memory backend the conformance suite does not reach through the traits
//! alone (deduplication modes, flows, the injected clock).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bullmq_protocol::state::JobState;
use bullmq_protocol::QueueId;

use super::MemoryBackend;
use crate::{
    AddResult, Backend, FetchRequest, Finish, FinishAction, FinishCode, NewJob, ParentLink,
    QueueStore, Receipt, Retention, WorkerStore, WorkerStoreOptions,
};

const T0: u64 = 1_700_000_000_000;

struct Fixture {
    clock: Arc<AtomicU64>,
    backend: MemoryBackend,
    queue: Arc<dyn QueueStore>,
    worker: Arc<dyn WorkerStore>,
}

impl Fixture {
    async fn new() -> Self {
        let clock = Arc::new(AtomicU64::new(T0));
        let read = clock.clone();
        let backend = MemoryBackend::with_clock(Arc::new(move || read.load(Ordering::SeqCst)));
        let keys = QueueId::new("bull", "q");
        let queue = backend.queue_store(&keys).await.unwrap();
        let worker = backend
            .worker_store(&keys, &WorkerStoreOptions::default())
            .await
            .unwrap();
        Self {
            clock,
            backend,
            queue,
            worker,
        }
    }

    fn advance(&self, ms: u64) {
        self.clock.fetch_add(ms, Ordering::SeqCst);
    }

    async fn add(&self, opts: &str) -> String {
        match self
            .queue
            .add(&NewJob::new(
                "j",
                "{}",
                opts,
                self.clock.load(Ordering::SeqCst),
            ))
            .await
            .unwrap()
        {
            AddResult::Id(id) => id,
            other => panic!("{other:?}"),
        }
    }

    async fn fetch(&self) -> crate::FetchedJob {
        let request = FetchRequest::new(1, "w", Duration::from_secs(30));
        let mut fetched = self.worker.fetch_batch(&request).await.unwrap();
        assert_eq!(fetched.jobs.len(), 1, "{fetched:?}");
        fetched.jobs.remove(0)
    }

    async fn complete(&self, job: &crate::FetchedJob) -> FinishCode {
        let finish = Finish {
            job_id: job.id.clone(),
            token: job.token.clone(),
            action: FinishAction::Complete {
                returnvalue: "7".into(),
                keep: Retention::KEEP_ALL,
            },
            receipt: Receipt::NONE,
        };
        self.worker
            .finish_batch(&[finish], None)
            .await
            .unwrap()
            .codes[0]
    }
}

#[tokio::test]
async fn injected_clock_drives_lock_expiry_and_delays() {
    let f = Fixture::new().await;
    let id = f.add(r#"{"delay":1000}"#).await;
    f.advance(999);
    let request = FetchRequest::new(1, "w", Duration::from_millis(100));
    assert!(f
        .worker
        .fetch_batch(&request)
        .await
        .unwrap()
        .jobs
        .is_empty());
    f.advance(1);
    let job = f.worker.fetch_batch(&request).await.unwrap().jobs.remove(0);
    assert_eq!(job.id, id);
    f.advance(100);
    assert_eq!(f.complete(&job).await, FinishCode::MissingLock);
}

#[tokio::test]
async fn keep_last_if_active_requeues_the_last_duplicate() {
    let f = Fixture::new().await;
    let opts = r#"{"de":{"id":"k","keepLastIfActive":true}}"#;
    assert_eq!(f.add(opts).await, "1");
    let job = f.fetch().await;
    assert_eq!(f.add(opts).await, "1", "kept for after the active owner");
    assert_eq!(f.add(opts).await, "1", "replaces the kept one");
    assert_eq!(f.queue.get_counts(&[JobState::Waiting]).await.unwrap(), [0]);
    assert_eq!(f.complete(&job).await, FinishCode::Ok);
    // The last duplicate (id 3) became a job and owns the window.
    assert_eq!(f.queue.get_state("3").await.unwrap(), JobState::Waiting);
    assert_eq!(f.queue.get_state("2").await.unwrap(), JobState::Unknown);
    assert_eq!(f.add(opts).await, "3");
}

#[tokio::test]
async fn replace_swaps_a_delayed_owner() {
    let f = Fixture::new().await;
    let opts = r#"{"delay":5000,"de":{"id":"r","replace":true}}"#;
    assert_eq!(f.add(opts).await, "1");
    assert_eq!(f.add(opts).await, "2", "the delayed owner is replaced");
    assert_eq!(f.queue.get_state("1").await.unwrap(), JobState::Unknown);
    assert_eq!(f.queue.get_state("2").await.unwrap(), JobState::Delayed);
}

#[tokio::test]
async fn extend_restarts_the_ttl_on_each_duplicate() {
    let f = Fixture::new().await;
    let opts = r#"{"de":{"id":"e","ttl":1000,"extend":true}}"#;
    assert_eq!(f.add(opts).await, "1");
    f.advance(800);
    assert_eq!(f.add(opts).await, "1");
    f.advance(800);
    assert_eq!(f.add(opts).await, "1", "extended by the previous duplicate");
    f.advance(1001);
    assert_eq!(f.add(opts).await, "4", "expired");
}

#[tokio::test]
async fn reschedule_moves_a_delayed_owner() {
    let f = Fixture::new().await;
    assert_eq!(f.add(r#"{"delay":1000,"de":{"id":"s"}}"#).await, "1");
    assert_eq!(
        f.add(r#"{"delay":60000,"de":{"id":"s","reschedule":true}}"#)
            .await,
        "1"
    );
    assert_eq!(f.queue.get_job("1").await.unwrap().unwrap().delay, 60_000);
    f.advance(2_000);
    let request = FetchRequest::new(1, "w", Duration::from_secs(30));
    assert!(f
        .worker
        .fetch_batch(&request)
        .await
        .unwrap()
        .jobs
        .is_empty());
}

#[tokio::test]
async fn children_register_with_their_parent_and_block_its_completion() {
    let f = Fixture::new().await;
    let parent = f.add("{}").await;
    let job = |id: &str| crate::JobRef::new(QueueId::new("bull", "q"), id);
    let link = ParentLink::new(job("1"), crate::ParentFlags::default());
    let missing = NewJob::new("c", "{}", "{}", T0)
        .with_parent(ParentLink::new(job("404"), crate::ParentFlags::default()));
    assert_eq!(
        f.queue.add(&missing).await.unwrap(),
        AddResult::ParentMissing { parent: job("404") }
    );
    // A missing parent takes no number.
    let child = NewJob::new("c", "{}", "{}", T0).with_parent(link);
    assert_eq!(
        f.queue.add(&child).await.unwrap(),
        AddResult::Id("2".into())
    );
    let parent_job = f.fetch().await;
    assert_eq!(parent_job.id, parent);
    assert_eq!(f.complete(&parent_job).await, FinishCode::PendingChildren);
    let child_job = f.fetch().await;
    assert_eq!(
        child_job.job.as_ref().unwrap().parent_key.as_deref(),
        Some("bull:q:1")
    );
    assert_eq!(f.complete(&child_job).await, FinishCode::Ok);
    assert_eq!(f.complete(&parent_job).await, FinishCode::Ok);
    assert_eq!(f.backend.queue_names(), ["bull:q"]);
}

#[tokio::test]
async fn global_concurrency_from_meta_caps_active_jobs() {
    let f = Fixture::new().await;
    f.backend
        .world
        .with_queue("bull:q:", |q, _| {
            q.meta.insert("concurrency".into(), "1".into());
            Ok(())
        })
        .unwrap();
    f.add("{}").await;
    f.add("{}").await;
    let request = FetchRequest::new(5, "w", Duration::from_secs(30));
    let first = f.worker.fetch_batch(&request).await.unwrap();
    assert_eq!(first.jobs.len(), 1);
    let second = f.worker.fetch_batch(&request).await.unwrap();
    assert!(second.jobs.is_empty() && second.gated, "{second:?}");
}

#[tokio::test]
async fn clones_share_queues_and_prefixes_separate_them() {
    let f = Fixture::new().await;
    let clone = f.backend.clone();
    let same = clone.queue_store(&QueueId::new("bull", "q")).await.unwrap();
    let other = clone
        .queue_store(&QueueId::new("other", "q"))
        .await
        .unwrap();
    f.add("{}").await;
    assert_eq!(same.get_counts(&[JobState::Waiting]).await.unwrap(), [1]);
    assert_eq!(other.get_counts(&[JobState::Waiting]).await.unwrap(), [0]);
    assert_eq!(f.backend.queue_names(), ["bull:q", "other:q"]);
}

#[tokio::test]
async fn closed_stores_refuse_calls() {
    let f = Fixture::new().await;
    f.queue.close().await.unwrap();
    assert!(matches!(
        f.queue.get_counts(&[JobState::Waiting]).await,
        Err(crate::BackendError::Closed)
    ));
    f.worker.close().await;
    let request = FetchRequest::new(1, "w", Duration::from_secs(1));
    assert!(matches!(
        f.worker.fetch_batch(&request).await,
        Err(crate::BackendError::Closed)
    ));
    assert!(matches!(
        f.worker.wait_for_job(Duration::from_secs(5)).await,
        Err(crate::BackendError::Closed)
    ));
}

#[tokio::test]
async fn wait_for_job_wakes_when_a_delayed_job_is_due() {
    let backend = MemoryBackend::new();
    let keys = QueueId::new("bull", "d");
    let queue = backend.queue_store(&keys).await.unwrap();
    let worker = backend
        .worker_store(&keys, &WorkerStoreOptions::default())
        .await
        .unwrap();
    let job = NewJob::new("j", "{}", r#"{"delay":200}"#, crate::now_ms());
    queue.add(&job).await.unwrap();
    let started = std::time::Instant::now();
    assert!(worker.wait_for_job(Duration::from_secs(10)).await.unwrap());
    assert!(
        started.elapsed() < Duration::from_secs(9),
        "woken by the due time"
    );
    let request = FetchRequest::new(1, "w", Duration::from_secs(30));
    assert_eq!(worker.fetch_batch(&request).await.unwrap().jobs.len(), 1);
}
