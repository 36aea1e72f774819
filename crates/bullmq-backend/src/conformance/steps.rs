//! Step jobs: a running job moving itself to `waiting-children` or back to `wait`
//! (`WorkerStore::move_to_waiting_children`, `WorkerStore::move_to_wait`).

use std::sync::Arc;
use std::time::Duration;

use bullmq_protocol::state::JobState;

use super::{fields, Ctx};
use crate::{
    Backend, ChildRef, FinishAction, FinishCode, MoveToWaitOutcome, NewJob, ParentFlags,
    ParentLink, Retention, WaitingChildrenOutcome,
};

/// Adds a child of `parent` (a job of the case's queue), failing its parent when it fails
/// when `fpof`; returns its id.
async fn add_child(c: &Ctx, parent: &str, name: &str, fpof: bool) -> String {
    let flags = ParentFlags::default().with_fail_parent(fpof);
    let opts = if fpof { r#"{"fpof":true}"# } else { "{}" };
    let child = NewJob::new(name, "{}", opts, crate::now_ms())
        .with_parent(ParentLink::new(c.job(parent), flags));
    c.add_job(child).await
}

/// A parent with no child stays active (nothing to wait for); with a pending child it moves to
/// `waiting-children` (lock released, `waiting-children` event) and comes back to `wait` when the
/// child completes; a refusal (wrong token, lost lock, missing job, not active, a given child
/// that is not pending) changes nothing.
pub async fn step_job_waits_for_its_children(backend: Arc<dyn Backend>, queue: &str) {
    let c = Ctx::new(backend, queue).await;
    let parent = c.add("parent", "{}").await;
    let job = c.fetch_one().await;
    assert_eq!(job.id, parent);
    let moved = |token: &str, child: Option<ChildRef>| {
        let (worker, id, token) = (c.worker.clone(), parent.clone(), token.to_owned());
        async move {
            worker
                .move_to_waiting_children(&id, &token, child.as_ref())
                .await
                .expect("move_to_waiting_children")
        }
    };
    assert_eq!(
        moved(&job.token, None).await,
        WaitingChildrenOutcome::NoPendingChildren,
        "no child yet"
    );
    assert_eq!(c.state(&parent).await, JobState::Active);

    let child = add_child(&c, &parent, "child", false).await;
    let other: ChildRef = c.job("404");
    assert_eq!(
        moved(&job.token, Some(other)).await,
        WaitingChildrenOutcome::NoPendingChildren,
        "that child is not pending"
    );
    assert_eq!(
        moved("someone-else", None).await,
        WaitingChildrenOutcome::Refused(FinishCode::LockNotOwned)
    );
    let missing = c
        .worker
        .move_to_waiting_children("404", &job.token, None)
        .await
        .unwrap();
    assert_eq!(
        missing,
        WaitingChildrenOutcome::Refused(FinishCode::MissingJob)
    );
    assert_eq!(
        c.state(&parent).await,
        JobState::Active,
        "refusals change nothing"
    );
    assert!(c.events_named("waiting-children").await.is_empty());

    let mine: ChildRef = c.job(&child);
    assert_eq!(
        moved(&job.token, Some(mine)).await,
        WaitingChildrenOutcome::Moved
    );
    assert_eq!(c.state(&parent).await, JobState::WaitingChildren);
    let expected = if super::profile().waiting_children_step_emits_event {
        vec![fields(&[
            ("event", "waiting-children"),
            ("jobId", &parent),
            ("prev", "active"),
        ])]
    } else {
        Vec::new()
    };
    assert_eq!(c.events_named("waiting-children").await, expected);
    // The lock went with the move: the token renews nothing and moves nothing any more.
    let lost = c
        .worker
        .extend_locks(
            &[(parent.clone(), job.token.clone())],
            Duration::from_secs(30),
        )
        .await
        .unwrap();
    assert_eq!(
        lost,
        std::slice::from_ref(&parent),
        "the moved job's lock is gone"
    );
    assert_eq!(
        moved(&job.token, None).await,
        WaitingChildrenOutcome::Refused(FinishCode::MissingLock)
    );

    let child_job = c.fetch_one().await;
    assert_eq!(child_job.id, child);
    assert_eq!(
        c.complete(&child_job, Retention::KEEP_ALL).await,
        FinishCode::Ok
    );
    assert_eq!(
        c.state(&parent).await,
        JobState::Waiting,
        "released by its child"
    );
    let again = c.fetch_one().await;
    assert_eq!(again.id, parent);
    assert_eq!(
        c.worker
            .move_to_waiting_children(&parent, &again.token, None)
            .await
            .unwrap(),
        WaitingChildrenOutcome::NoPendingChildren,
        "all children done"
    );
    let record = c.queue.get_job(&parent).await.unwrap().unwrap();
    assert_eq!(record.attempts_made, 0, "waiting counts no attempt");
    assert_eq!(
        c.complete(&again, Retention::KEEP_ALL).await,
        FinishCode::Ok
    );
    c.close().await;
}

/// A parent whose child failed for good (with `failParentOnFailure`) cannot wait any more (Node's -9), before any lock
/// check; nothing changes.
pub async fn step_job_with_a_failed_child_cannot_wait(backend: Arc<dyn Backend>, queue: &str) {
    let c = Ctx::new(backend, queue).await;
    let parent = c.add("parent", "{}").await;
    let job = c.fetch_one().await;
    let _child = add_child(&c, &parent, "child", true).await;
    let _other = add_child(&c, &parent, "other", false).await;
    let child_job = c.fetch_one().await;
    let fail = FinishAction::Fail {
        reason: "boom".into(),
        stacktrace: None,
        attempts: 1,
        keep: Retention::KEEP_ALL,
    };
    assert_eq!(c.finish(&child_job, fail).await, FinishCode::Ok);
    for token in [job.token.as_str(), "wrong"] {
        assert_eq!(
            c.worker
                .move_to_waiting_children(&parent, token, None)
                .await
                .unwrap(),
            WaitingChildrenOutcome::Refused(FinishCode::FailedChildren)
        );
    }
    assert_eq!(c.state(&parent).await, JobState::Active);
    c.close().await;
}

/// `move_to_wait` puts the job at the head of `wait` (or ahead of its priority) with a `waiting`
/// event, counts no attempt and releases the lock; a wrong token or a lost lock is refused and
/// changes nothing.
pub async fn step_job_moves_back_to_wait(backend: Arc<dyn Backend>, queue: &str) {
    let c = Ctx::new(backend, queue).await;
    let first = c.add("first", "{}").await;
    let second = c.add("second", "{}").await;
    let job = c.fetch_one().await;
    assert_eq!(job.id, first);
    assert_eq!(
        c.worker.move_to_wait(&first, "wrong").await.unwrap(),
        MoveToWaitOutcome::Refused(FinishCode::LockNotOwned)
    );
    assert_eq!(
        c.worker.move_to_wait("404", &job.token).await.unwrap(),
        MoveToWaitOutcome::Refused(FinishCode::MissingJob)
    );
    assert_eq!(c.state(&first).await, JobState::Active);
    assert_eq!(
        c.worker.move_to_wait(&first, &job.token).await.unwrap(),
        MoveToWaitOutcome::Moved {
            rate_limited_for: Duration::ZERO
        }
    );
    assert_eq!(c.state(&first).await, JobState::Waiting);
    let waiting: Vec<_> = c
        .events_named("waiting")
        .await
        .into_iter()
        .filter(|e| e.get("prev").map(String::as_str) == Some("active"))
        .collect();
    assert_eq!(
        waiting,
        [fields(&[
            ("event", "waiting"),
            ("jobId", &first),
            ("prev", "active")
        ])]
    );
    assert_eq!(
        c.worker.move_to_wait(&first, &job.token).await.unwrap(),
        MoveToWaitOutcome::Refused(super::profile().left_active()),
        "the lock went with the move"
    );
    let mut again = c.fetch_one().await;
    if !super::profile().move_to_wait_goes_first {
        // Back at the end of wait: `second` comes first; it goes back too, behind `first`.
        assert_eq!(again.id, second, "back at the end of wait, after {second}");
        assert!(matches!(
            c.worker.move_to_wait(&second, &again.token).await.unwrap(),
            MoveToWaitOutcome::Moved { .. }
        ));
        again = c.fetch_one().await;
    }
    assert_eq!(again.id, first, "back in wait");
    let record = again.job.clone().expect("readable");
    assert_eq!(record.attempts_made, 0, "no attempt counted");
    assert_eq!(record.attempts_started, 2);

    let urgent = c.add("urgent", r#"{"priority":3}"#).await;
    let later = c.add("later", r#"{"priority":3}"#).await;
    let fetched = c.fetch(2).await;
    let ids: Vec<_> = fetched.jobs.iter().map(|j| j.id.clone()).collect();
    assert_eq!(
        ids,
        [second.clone(), urgent.clone()],
        "wait before prioritized"
    );
    let urgent_job = &fetched.jobs[1];
    assert!(matches!(
        c.worker
            .move_to_wait(&urgent, &urgent_job.token)
            .await
            .unwrap(),
        MoveToWaitOutcome::Moved { .. }
    ));
    assert_eq!(c.state(&urgent).await, JobState::Prioritized);
    let next = c.fetch_one().await;
    assert_eq!(next.id, urgent, "ahead of {later}, of the same priority");
    c.close().await;
}
