//! The Job actions and the Queue upkeep of issue 22 on the in-memory backend, no Redis
//! running: a `Job` read from the queue acts on it, a flow child is detached and a parent's
//! pending children removed as on Redis, the job-owned deduplication key goes only while the
//! job owns it, the delayed count before a time, the scheduler check, orphaned jobs, the
//! job-counts gauge, and data that cannot be JSON refused before anything is written. The Redis
//! and Node-parity side is in `integration-tests/tests/job_actions.rs` and
//! `queue_node_methods.rs`.

use std::collections::HashMap;
use std::time::{Duration, UNIX_EPOCH};

use bullmq_backend::memory::MemoryBackend;
use bullmq_protocol::flow::FlowJob;
use bullmq_protocol::options::{Deduplication, JobOptions};
use bullmq_protocol::state::JobState;
use ractor_bullmq::scheduler::{Repeat, SchedulerTemplate};
use ractor_bullmq::telemetry::metric_names as m;
use ractor_bullmq::telemetry::testing::CapturedMetrics;
use ractor_bullmq::{
    FlowError, FlowProducer, FlowProducerOptions, Queue, QueueError, QueueOptions,
};
use serde_json::json;

async fn open(backend: &MemoryBackend, name: &str) -> Queue {
    Queue::with_backend(name, backend, QueueOptions::default())
        .await
        .expect("open queue")
}

#[tokio::test]
async fn a_job_read_from_the_queue_acts_on_it() {
    let backend = MemoryBackend::new();
    let queue = open(&backend, "acts").await;
    queue
        .add("later", json!({}))
        .job_id("d1")
        .delay(Duration::from_secs(60))
        .await
        .unwrap();
    let job = queue.get_job("d1").await.unwrap().expect("d1");
    assert_eq!(job.prefix(), Some("bull"));
    assert!(job.is_delayed().await.unwrap());
    job.promote().await.unwrap();
    assert_eq!(job.get_state().await.unwrap(), JobState::Waiting);
    job.update_data(json!({"n": 1})).await.unwrap();
    assert_eq!(job.log("hello").await.unwrap(), 1);
    let refused = job.retry().await.unwrap_err();
    assert!(
        matches!(refused, QueueError::JobNotInState { .. }),
        "{refused:?}"
    );
    let fresh = queue.get_job("d1").await.unwrap().expect("d1");
    assert_eq!(fresh.data_value(), &json!({"n": 1}));
    assert!(fresh.remove().await.unwrap());
    assert!(!job.remove().await.unwrap(), "already gone");
}

#[tokio::test]
async fn flow_children_are_detached_and_removed_as_on_redis() {
    let backend = MemoryBackend::new();
    let queue = open(&backend, "kids").await;
    let flows = FlowProducer::with_backend(&backend, FlowProducerOptions::default())
        .await
        .expect("producer");
    let leaf = |id: &str| FlowJob::new(id, "kids").opts(JobOptions::new().job_id(id));
    flows
        .add(
            leaf("p")
                .child(leaf("c1"))
                .child(leaf("c2").child(leaf("g1"))),
        )
        .await
        .unwrap();
    let c1 = queue.get_job("c1").await.unwrap().expect("c1");
    assert!(c1.remove_child_dependency().await.unwrap());
    assert!(
        !c1.remove_child_dependency().await.unwrap(),
        "not a child now"
    );
    let c1 = queue.get_job("c1").await.unwrap().expect("c1");
    assert_eq!(c1.parent_key(), None);
    assert_eq!(
        queue.get_job_state("p").await.unwrap(),
        JobState::WaitingChildren,
        "c2 is still pending"
    );
    let missing = queue.remove_child_dependency("nope").await.unwrap_err();
    assert!(
        matches!(missing, QueueError::JobNotFound { .. }),
        "{missing:?}"
    );

    let parent = queue.get_job("p").await.unwrap().expect("p");
    parent.remove_unprocessed_children().await.unwrap();
    for gone in ["c2", "g1"] {
        assert_eq!(queue.get_job_state(gone).await.unwrap(), JobState::Unknown);
    }
    assert_eq!(
        queue.get_job_state("p").await.unwrap(),
        JobState::Waiting,
        "no pending child left: the parent moves on"
    );
}

#[tokio::test]
async fn a_job_releases_its_deduplication_key_only_while_it_owns_it() {
    let backend = MemoryBackend::new();
    let queue = open(&backend, "dedup").await;
    let job = queue
        .add("a", json!({}))
        .deduplication(Deduplication::new("d"))
        .await
        .unwrap();
    assert!(job.remove_deduplication_key().await.unwrap());
    assert!(
        !job.remove_deduplication_key().await.unwrap(),
        "gone already"
    );
    let owner = queue
        .add("b", json!({}))
        .deduplication(Deduplication::new("d"))
        .await
        .unwrap();
    assert_ne!(owner.id(), job.id());
    assert!(
        !queue.remove_job_deduplication_key(job.id()).await.unwrap(),
        "another job owns d now"
    );
    assert_eq!(
        queue
            .get_deduplication_job_id("d")
            .await
            .unwrap()
            .as_deref(),
        Some(owner.id())
    );
    assert!(!queue.remove_job_deduplication_key("missing").await.unwrap());
}

#[tokio::test]
async fn delayed_counts_schedulers_orphans_and_the_counts_gauge() {
    // A current-thread test: the recorder set here sees the gauge the queue call records.
    let metrics = CapturedMetrics::new();
    let _m = metrics.set_default();
    let backend = MemoryBackend::new();
    let queue = open(&backend, "upkeep").await;
    let job = queue
        .add("x", json!({}))
        .delay(Duration::from_secs(10))
        .await
        .unwrap();
    let due = job.timestamp() + 10_000;
    assert_eq!(queue.get_delayed_count().await.unwrap(), 1);
    let at = |ms| UNIX_EPOCH + Duration::from_millis(ms);
    assert_eq!(queue.get_delayed_count_at(at(due)).await.unwrap(), 0);
    assert_eq!(queue.get_delayed_count_at(at(due + 1)).await.unwrap(), 1);
    assert_eq!(
        queue.get_version().await.unwrap().as_deref(),
        Some("bullmq:6.7.0")
    );
    assert!(!queue.remove_deprecated_priority_key().await.unwrap());

    queue
        .upsert_job_scheduler(
            "tick",
            Repeat::every(Duration::from_secs(60)),
            SchedulerTemplate::new("tick"),
        )
        .await
        .unwrap();
    assert!(queue.is_job_scheduler("tick").await.unwrap());
    assert!(!queue.is_job_scheduler("nope").await.unwrap());

    assert_eq!(queue.remove_orphaned_jobs(1000, 0).await.unwrap(), 0);
    assert!(matches!(
        queue.remove_orphaned_jobs(0, 0).await,
        Err(QueueError::InvalidArgument { .. })
    ));
    let counts = queue
        .record_job_counts_metric(&[JobState::Delayed, JobState::Waiting])
        .await
        .unwrap();
    assert_eq!(
        counts,
        vec![(JobState::Delayed, 1), (JobState::Waiting, 1)],
        "the delayed job, and the scheduler's first run (due at once)"
    );
    for (state, count) in [("delayed", 1.0), ("waiting", 1.0)] {
        assert_eq!(
            metrics.gauge(m::QUEUE_JOBS, &[("queue", "upkeep"), ("state", state)]),
            Some(count),
            "{state}"
        );
    }
}

#[tokio::test]
async fn data_that_cannot_be_json_is_refused_before_anything_is_written() {
    let backend = MemoryBackend::new();
    let queue = open(&backend, "baddata").await;
    // JSON object keys must be text.
    let bad: HashMap<(u8, u8), u8> = [((1, 2), 3)].into_iter().collect();
    let refused = queue
        .upsert_job_scheduler(
            "s",
            Repeat::every(Duration::from_secs(60)),
            SchedulerTemplate::new("s").data(&bad),
        )
        .await
        .unwrap_err();
    assert!(matches!(refused, QueueError::Json(_)), "{refused:?}");
    assert_eq!(queue.get_job_schedulers_count().await.unwrap(), 0);

    let flows = FlowProducer::with_backend(&backend, FlowProducerOptions::default())
        .await
        .expect("producer");
    let refused = flows
        .add(FlowJob::new("root", "baddata").child(FlowJob::new("kid", "baddata").data(&bad)))
        .await
        .unwrap_err();
    assert!(
        matches!(refused, FlowError::InvalidNode { .. }),
        "{refused:?}"
    );
    assert_eq!(queue.get_job_counts().await.unwrap().pending(), 0);
    let refused = queue.update_data("nope", &bad).await.unwrap_err();
    assert!(matches!(refused, QueueError::Json(_)), "{refused:?}");
}
