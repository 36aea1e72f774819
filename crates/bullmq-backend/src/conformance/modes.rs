//! Option-driven placement beyond the basics: deduplication modes, retry placement, retention
//! by age, flow children.

use std::sync::Arc;
use std::time::Duration;

use bullmq_protocol::state::JobState;

use super::{fields, sleep_ms, Ctx};
use crate::{
    AddResult, Backend, FinishAction, FinishCode, NewJob, ParentFlags, ParentLink, Retention,
};

/// `replace` swaps a delayed owner for the new job; `reschedule` moves a delayed owner to
/// the duplicate's delay; `keepLastIfActive` keeps the last duplicate added while the owner
/// runs and adds it when the owner finishes.
pub async fn deduplication_modes(backend: Arc<dyn Backend>, queue: &str) {
    let c = Ctx::new(backend, queue).await;
    let replace = r#"{"delay":60000,"de":{"id":"r","replace":true}}"#;
    assert_eq!(c.add("a", replace).await, "1");
    assert_eq!(c.add("b", replace).await, "2", "replaces the delayed owner");
    assert_eq!(c.state("1").await, JobState::Unknown);
    assert_eq!(c.state("2").await, JobState::Delayed);
    let removed = c.events_named("removed").await;
    assert_eq!(
        removed,
        [fields(&[
            ("event", "removed"),
            ("jobId", "1"),
            ("prev", "delayed")
        ])]
    );
    assert_eq!(
        c.events_named("deduplicated").await,
        [fields(&[
            ("event", "deduplicated"),
            ("jobId", "2"),
            ("deduplicationId", "r"),
            ("deduplicatedJobId", "1"),
        ])]
    );

    assert_eq!(c.add("c", r#"{"delay":1000,"de":{"id":"s"}}"#).await, "3");
    let resched = r#"{"delay":90000,"de":{"id":"s","reschedule":true}}"#;
    assert_eq!(c.add("d", resched).await, "3");
    assert_eq!(c.queue.get_job("3").await.unwrap().unwrap().delay, 90_000);
    sleep_ms(1_500).await;
    let fetched = c.fetch(10).await;
    assert!(fetched.jobs.is_empty(), "rescheduled, not due: {fetched:?}");

    let keep_last = r#"{"de":{"id":"k","keepLastIfActive":true}}"#;
    let owner = c.add("e", keep_last).await;
    assert_eq!(owner, "5");
    let job = c.fetch_one().await;
    assert_eq!(job.id, owner);
    assert_eq!(c.add("f", keep_last).await, owner, "kept while active");
    assert_eq!(c.add("g", keep_last).await, owner, "replaces the kept one");
    assert_eq!(c.count(JobState::Waiting).await, 0);
    assert_eq!(c.complete(&job, Retention::KEEP_ALL).await, FinishCode::Ok);
    assert_eq!(
        c.state("7").await,
        JobState::Waiting,
        "the last duplicate was added"
    );
    assert_eq!(c.state("6").await, JobState::Unknown);
    assert_eq!(c.queue.get_job("7").await.unwrap().unwrap().name, "g");
    assert_eq!(c.add("h", keep_last).await, "7", "and owns the window");
    c.close().await;
}

/// With `extend`, every duplicate restarts the ttl.
pub async fn deduplication_extend(backend: Arc<dyn Backend>, queue: &str) {
    let c = Ctx::new(backend, queue).await;
    let opts = r#"{"de":{"id":"e","ttl":1500,"extend":true}}"#;
    assert_eq!(c.add("a", opts).await, "1");
    sleep_ms(1_000).await;
    assert_eq!(c.add("b", opts).await, "1");
    sleep_ms(1_000).await;
    // Past the first ttl, within the extended one.
    assert_eq!(c.add("c", opts).await, "1", "extended");
    sleep_ms(2_500).await;
    assert_eq!(c.add("d", opts).await, "4", "expired");
    c.close().await;
}

/// A retry goes back by the job's placement: to the back of wait (FIFO), to its front with
/// `lifo`, to `prioritized` when the job has a priority.
pub async fn retry_placement(backend: Arc<dyn Backend>, queue: &str) {
    let c = Ctx::new(backend, queue).await;
    let a = c.add("a", r#"{"attempts":5}"#).await;
    let b = c.add("b", "{}").await;
    let retry = |lifo| FinishAction::Retry {
        reason: "again".into(),
        stacktrace: None,
        lifo,
    };
    let job = c.fetch_one().await;
    assert_eq!(job.id, a);
    assert_eq!(c.finish(&job, retry(true)).await, FinishCode::Ok);
    let job = c.fetch_one().await;
    assert_eq!(job.id, a, "lifo: ahead of b");
    assert_eq!(c.finish(&job, retry(false)).await, FinishCode::Ok);
    let job = c.fetch_one().await;
    assert_eq!(job.id, b, "fifo: behind b");
    let job = c.fetch_one().await;
    assert_eq!(job.id, a);

    let p = c.add("p", r#"{"priority":4,"attempts":2}"#).await;
    let job = c.fetch_one().await;
    assert_eq!(job.id, p);
    assert_eq!(c.finish(&job, retry(false)).await, FinishCode::Ok);
    assert_eq!(c.state(&p).await, JobState::Prioritized);
    c.close().await;
}

/// Retention by age deletes finished jobs older than the age when the next one finishes.
pub async fn retention_by_age(backend: Arc<dyn Backend>, queue: &str) {
    let c = Ctx::new(backend, queue).await;
    let keep = Retention::age(Duration::from_secs(1), None, None);
    let first = c.add("a", "{}").await;
    let job = c.fetch_one().await;
    assert_eq!(c.complete(&job, keep).await, FinishCode::Ok);
    sleep_ms(2_200).await;
    let second = c.add("b", "{}").await;
    let job = c.fetch_one().await;
    assert_eq!(c.complete(&job, keep).await, FinishCode::Ok);
    assert_eq!(
        c.queue.get_job(&first).await.unwrap(),
        None,
        "older than 1 s"
    );
    assert_eq!(c.state(&second).await, JobState::Completed);
    assert_eq!(c.count(JobState::Completed).await, 1);
    c.close().await;
}

/// A child names its parent (which must exist); the parent cannot complete while the child
/// is pending, and can once the child completed; the parent's dependencies (from the queue
/// and from a worker) show the child pending, then processed.
pub async fn flow_children_block_parent_completion(backend: Arc<dyn Backend>, queue: &str) {
    let c = Ctx::new(backend, queue).await;
    let parent = c.add("parent", "{}").await;
    let parent_key = c.keys.job(&parent);
    let ts = crate::now_ms();
    let orphan = NewJob::new("orphan", "{}", "{}", ts).with_parent(c.parent_link("404"));
    assert_eq!(
        c.queue.add(&orphan).await.unwrap(),
        AddResult::ParentMissing {
            parent: c.job("404")
        }
    );
    let child = NewJob::new("child", "{}", "{}", ts).with_parent(c.parent_link(&parent));
    let child_id = c.add_job(child).await;
    let expected_id = if super::profile().missing_parent_takes_no_number {
        "2"
    } else {
        "3"
    };
    assert_eq!(
        child_id, expected_id,
        "a missing parent takes no number, or one (profile)"
    );
    let record = c.queue.get_job(&child_id).await.unwrap().unwrap();
    assert_eq!(record.parent_key.as_deref(), Some(parent_key.as_str()));
    assert_eq!(
        record.parent.as_ref().map(|p| p.id.as_str()),
        Some(parent.as_str())
    );

    let child_key = c.job(&child_id);
    let deps = c.queue.get_dependencies(&parent).await.unwrap();
    assert_eq!(
        deps.unprocessed,
        std::slice::from_ref(&child_key),
        "{deps:?}"
    );
    assert!(deps.processed.is_empty() && deps.ignored.is_empty() && deps.failed.is_empty());

    let parent_job = c.fetch_one().await;
    assert_eq!(parent_job.id, parent);
    assert_eq!(
        c.complete(&parent_job, Retention::KEEP_ALL).await,
        FinishCode::PendingChildren
    );
    let child_job = c.fetch_one().await;
    assert_eq!(
        c.complete(&child_job, Retention::KEEP_ALL).await,
        FinishCode::Ok
    );
    // The parent's view, from the queue and from its worker: the child is processed.
    let deps = c.worker.get_dependencies(&parent).await.unwrap();
    assert_eq!(
        deps.processed.keys().collect::<Vec<_>>(),
        [&child_key],
        "{deps:?}"
    );
    assert!(deps.unprocessed.is_empty(), "{deps:?}");
    let counts = c.queue.get_dependency_counts(&parent).await.unwrap();
    assert_eq!(
        (
            counts.processed,
            counts.unprocessed,
            counts.ignored,
            counts.failed
        ),
        (1, 0, 0, 0)
    );
    assert_eq!(
        c.worker.get_dependency_counts(&parent).await.unwrap(),
        counts
    );
    assert_eq!(
        c.complete(&parent_job, Retention::KEEP_ALL).await,
        FinishCode::Ok
    );
    assert_eq!(c.state(&parent).await, JobState::Completed);
    c.close().await;
}

/// A parent completed while a child of it failed for good under `failParentOnFailure`
/// (Node's `-9`): the completion is refused with [`FinishCode::FailedChildren`], nothing
/// written, the parent still active.
pub async fn flow_failed_child_refuses_parent_completion(backend: Arc<dyn Backend>, queue: &str) {
    let c = Ctx::new(backend, queue).await;
    let parent = c.add("parent", "{}").await;
    // Node keeps the policy in the child's `parent` field too.
    let flags = ParentFlags::default().with_fail_parent(true);
    let child = NewJob::new("child", "{}", r#"{"fpof":true}"#, crate::now_ms())
        .with_parent(ParentLink::new(c.job(&parent), flags));
    c.add_job(child).await;
    let parent_job = c.fetch_one().await;
    assert_eq!(parent_job.id, parent);
    let child_job = c.fetch_one().await;
    let fail = FinishAction::Fail {
        reason: "boom".into(),
        stacktrace: None,
        attempts: 1,
        keep: Retention::KEEP_ALL,
    };
    assert_eq!(c.finish(&child_job, fail).await, FinishCode::Ok);
    assert_eq!(
        c.complete(&parent_job, Retention::KEEP_ALL).await,
        FinishCode::FailedChildren
    );
    assert_eq!(c.state(&parent).await, JobState::Active, "nothing written");
    c.close().await;
}
