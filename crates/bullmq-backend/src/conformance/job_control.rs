//! Job control: retry a finished job, promote a delayed one (one by one and in batches), renew
//! a lock; refusals write nothing.

use std::sync::Arc;

use bullmq_protocol::state::JobState;

use super::{fields, Ctx};
use crate::{
    Backend, ControlOutcome, FinishAction, FinishCode, LockOutcome, Retention, RetryFrom,
    RetryReset,
};

/// A completed job retried from `completed` goes back to `wait` with its outcome cleared,
/// emitting `waiting` (prev `completed`); a failed one with a priority goes to `prioritized`,
/// with its attempt counters reset as asked. Retrying from the wrong set, an active job or a
/// missing one is refused and changes nothing.
pub async fn retry_moves_a_finished_job_back(backend: Arc<dyn Backend>, queue: &str) {
    let c = Ctx::new(backend, queue).await;
    let done = c.add("done", "{}").await;
    let job = c.fetch_one().await;
    assert_eq!(c.complete(&job, Retention::KEEP_ALL).await, FinishCode::Ok);

    let none = RetryReset::none();
    assert_eq!(
        c.queue
            .retry_job(&done, RetryFrom::Failed, none)
            .await
            .unwrap(),
        ControlOutcome::NotInState,
        "a completed job is not retried from failed"
    );
    assert_eq!(c.state(&done).await, JobState::Completed);
    assert_eq!(
        c.queue
            .retry_job(&done, RetryFrom::Completed, none)
            .await
            .unwrap(),
        ControlOutcome::Moved
    );
    assert_eq!(c.state(&done).await, JobState::Waiting);
    let record = c.queue.get_job(&done).await.unwrap().expect("job kept");
    assert_eq!(record.finished_on, None);
    assert_eq!(record.processed_on, None);
    assert_eq!(record.returnvalue, None);
    assert_eq!(record.attempts_made, 1, "attempts kept without reset");
    assert_eq!(
        c.events_named("waiting").await.last().cloned(),
        Some(fields(&[
            ("event", "waiting"),
            ("jobId", &done),
            ("prev", "completed")
        ]))
    );

    // Take the retried job out of the way, then fail a prioritized one.
    let again = c.fetch_one().await;
    assert_eq!(again.id, done);
    let failed = c.add("failed", r#"{"priority":3}"#).await;
    let job = c.fetch_one().await;
    assert_eq!(job.id, failed);
    let fail = FinishAction::Fail {
        reason: "boom".into(),
        stacktrace: None,
        attempts: 1,
        keep: Retention::KEEP_ALL,
    };
    assert_eq!(c.finish(&job, fail).await, FinishCode::Ok);
    let reset = RetryReset::none()
        .attempts_made(true)
        .attempts_started(true);
    assert_eq!(
        c.queue
            .retry_job(&failed, RetryFrom::Failed, reset)
            .await
            .unwrap(),
        ControlOutcome::Moved
    );
    assert_eq!(c.state(&failed).await, JobState::Prioritized);
    let record = c.queue.get_job(&failed).await.unwrap().expect("job kept");
    assert_eq!(record.failed_reason, None);
    assert_eq!((record.attempts_made, record.attempts_started), (0, 0));

    assert_eq!(
        c.queue
            .retry_job(&done, RetryFrom::Completed, none)
            .await
            .unwrap(),
        ControlOutcome::NotInState,
        "an active job is not retried"
    );
    assert_eq!(c.state(&done).await, JobState::Active);
    assert_eq!(
        c.queue
            .retry_job("missing", RetryFrom::Failed, none)
            .await
            .unwrap(),
        ControlOutcome::NotFound
    );
    c.close().await;
}

/// A delayed job promoted goes to `wait` (or `prioritized` with a priority) with `delay` 0,
/// emitting `waiting` (prev `delayed`); a job that is not delayed is refused.
pub async fn promote_moves_a_delayed_job_now(backend: Arc<dyn Backend>, queue: &str) {
    let c = Ctx::new(backend, queue).await;
    let plain = c.add("plain", r#"{"delay":60000}"#).await;
    let urgent = c.add("urgent", r#"{"delay":60000,"priority":2}"#).await;
    assert_eq!(
        c.queue.promote_job(&plain).await.unwrap(),
        ControlOutcome::Moved
    );
    assert_eq!(c.state(&plain).await, JobState::Waiting);
    assert_eq!(c.queue.get_job(&plain).await.unwrap().unwrap().delay, 0);
    assert_eq!(
        c.events_named("waiting").await.last().cloned(),
        Some(fields(&[
            ("event", "waiting"),
            ("jobId", &plain),
            ("prev", "delayed")
        ]))
    );
    assert_eq!(
        c.queue.promote_job(&urgent).await.unwrap(),
        ControlOutcome::Moved
    );
    assert_eq!(c.state(&urgent).await, JobState::Prioritized);

    assert_eq!(
        c.queue.promote_job(&plain).await.unwrap(),
        ControlOutcome::NotInState,
        "a waiting job is not promoted"
    );
    assert_eq!(c.state(&plain).await, JobState::Waiting);
    let missing = if super::profile().promote_missing_is_not_in_state {
        ControlOutcome::NotInState
    } else {
        ControlOutcome::NotFound
    };
    assert_eq!(c.queue.promote_job("missing").await.unwrap(), missing);
    c.close().await;
}

/// A waiting job given a priority moves to `prioritized`, and back to `wait` with priority 0;
/// a delayed job keeps its place with the new field; a missing job is reported.
pub async fn change_priority_requeues_a_waiting_job(backend: Arc<dyn Backend>, queue: &str) {
    let c = Ctx::new(backend, queue).await;
    let id = c.add("a", "{}").await;
    let delayed = c.add("d", r#"{"delay":60000}"#).await;
    assert_eq!(
        c.queue.change_priority(&id, 5, false).await.unwrap(),
        ControlOutcome::Moved
    );
    assert_eq!(c.state(&id).await, JobState::Prioritized);
    assert_eq!(c.queue.get_job(&id).await.unwrap().unwrap().priority, 5);
    assert_eq!(
        c.queue.change_priority(&id, 0, true).await.unwrap(),
        ControlOutcome::Moved
    );
    assert_eq!(c.state(&id).await, JobState::Waiting);
    assert_eq!(
        c.queue.change_priority(&delayed, 4, false).await.unwrap(),
        ControlOutcome::Moved
    );
    assert_eq!(c.state(&delayed).await, JobState::Delayed);
    assert_eq!(
        c.queue.get_job(&delayed).await.unwrap().unwrap().priority,
        4
    );
    assert_eq!(
        c.queue.change_priority("missing", 1, false).await.unwrap(),
        ControlOutcome::NotFound
    );
    c.close().await;
}

/// A delayed job rescheduled gets its new `delay` and a `delayed` event with its new due
/// time; a waiting job is refused, a missing one reported.
pub async fn change_delay_reschedules_a_delayed_job(backend: Arc<dyn Backend>, queue: &str) {
    let c = Ctx::new(backend, queue).await;
    let id = c.add("d", r#"{"delay":60000}"#).await;
    let waiting = c.add("w", "{}").await;
    let before = crate::now_ms();
    assert_eq!(
        c.queue
            .change_delay(&id, std::time::Duration::from_secs(120))
            .await
            .unwrap(),
        ControlOutcome::Moved
    );
    assert_eq!(c.state(&id).await, JobState::Delayed);
    assert_eq!(c.queue.get_job(&id).await.unwrap().unwrap().delay, 120_000);
    if super::profile().change_delay_emits_delayed {
        let event = c.events_named("delayed").await.last().cloned().unwrap();
        assert_eq!(event["jobId"], id);
        let due: u64 = event["delay"].parse().unwrap();
        assert!(due >= before + 120_000, "due {due} from {before}");
    } else {
        assert_eq!(c.events_named("delayed").await.len(), 1, "only the add's");
    }
    assert_eq!(
        c.queue
            .change_delay(&waiting, std::time::Duration::from_secs(1))
            .await
            .unwrap(),
        ControlOutcome::NotInState
    );
    assert_eq!(c.state(&waiting).await, JobState::Waiting);
    assert_eq!(
        c.queue
            .change_delay("missing", std::time::Duration::from_secs(1))
            .await
            .unwrap(),
        ControlOutcome::NotFound
    );
    c.close().await;
}

/// Clearing a job's logs keeps the newest `keep` lines, or none for 0.
pub async fn clear_logs_keeps_the_newest(backend: Arc<dyn Backend>, queue: &str) {
    let c = Ctx::new(backend, queue).await;
    let id = c.add("a", "{}").await;
    for line in ["a", "b", "c"] {
        c.queue.add_log(&id, line, None).await.unwrap();
    }
    c.queue.clear_logs(&id, 2).await.unwrap();
    assert_eq!(
        c.queue.get_job_logs(&id, 0, -1, true).await.unwrap(),
        (vec!["b".to_owned(), "c".to_owned()], 2)
    );
    c.queue.clear_logs(&id, 0).await.unwrap();
    assert_eq!(c.queue.get_job_logs(&id, 0, -1, true).await.unwrap().1, 0);
    c.queue.clear_logs("missing", 0).await.unwrap();
    c.close().await;
}

/// `retry_jobs` moves finished jobs of one set, oldest first and `count` per call, to `wait`
/// (a prioritized one too, as Node's script), clearing their outcome but not their attempts,
/// with one `waiting` event each; jobs finished after the cutoff, and the other set, stay.
pub async fn retry_jobs_moves_finished_jobs_in_batches(backend: Arc<dyn Backend>, queue: &str) {
    let c = Ctx::new(backend, queue).await;
    let mut done = Vec::new();
    for opts in ["{}", r#"{"priority":4}"#, "{}"] {
        let id = c.add("done", opts).await;
        let job = c.fetch_one().await;
        assert_eq!(job.id, id);
        assert_eq!(c.complete(&job, Retention::KEEP_ALL).await, FinishCode::Ok);
        done.push(id);
    }
    let failed = c.add("failed", "{}").await;
    let job = c.fetch_one().await;
    let fail = FinishAction::Fail {
        reason: "boom".into(),
        stacktrace: None,
        attempts: 1,
        keep: Retention::KEEP_ALL,
    };
    assert_eq!(c.finish(&job, fail).await, FinishCode::Ok);

    assert_eq!(
        c.queue
            .retry_jobs(RetryFrom::Completed, 10, 0)
            .await
            .unwrap(),
        0,
        "nothing finished by time 0"
    );
    let by = crate::now_ms();
    assert_eq!(
        c.queue
            .retry_jobs(RetryFrom::Completed, 2, by)
            .await
            .unwrap(),
        2,
        "a full batch"
    );
    assert_eq!(c.count(JobState::Completed).await, 1);
    assert_eq!(
        c.queue
            .retry_jobs(RetryFrom::Completed, 2, by)
            .await
            .unwrap(),
        1,
        "the rest"
    );
    let profile = super::profile();
    for (i, id) in done.iter().enumerate() {
        // done[1] has priority 4.
        let expected = if profile.batch_moves_ignore_priority || i != 1 {
            JobState::Waiting
        } else {
            JobState::Prioritized
        };
        assert_eq!(c.state(id).await, expected, "{id} back in wait");
        let record = c.queue.get_job(id).await.unwrap().expect("job kept");
        assert_eq!(
            (record.finished_on, record.processed_on, record.returnvalue),
            (None, None, None)
        );
        let attempts = u32::from(super::profile().retry_jobs_keeps_attempts);
        assert_eq!(record.attempts_made, attempts, "attempts kept");
    }
    let waiting: Vec<String> = c
        .events_named("waiting")
        .await
        .into_iter()
        .filter(|e| e.get("prev").map(String::as_str) == Some("completed"))
        .map(|e| e["jobId"].clone())
        .collect();
    if profile.batch_moves_emit_events {
        assert_eq!(waiting, done, "one event per job, oldest first");
    } else {
        assert!(waiting.is_empty(), "{waiting:?}");
    }
    assert_eq!(
        c.state(&failed).await,
        JobState::Failed,
        "the other set stays"
    );

    // The oldest finished job is fetched first.
    assert_eq!(c.fetch_one().await.id, done[0]);
    assert_eq!(
        c.queue
            .retry_jobs(RetryFrom::Failed, 1, crate::now_ms())
            .await
            .unwrap(),
        1
    );
    assert_eq!(c.state(&failed).await, JobState::Waiting);
    let record = c.queue.get_job(&failed).await.unwrap().expect("job kept");
    assert_eq!(record.failed_reason, None);
    c.close().await;
}

/// `promote_jobs` moves every delayed job, soonest due first and `count` per call, to `wait`
/// (a prioritized one too), leaving its `delay` field, with one `waiting` event each.
pub async fn promote_jobs_moves_delayed_jobs_in_batches(backend: Arc<dyn Backend>, queue: &str) {
    let c = Ctx::new(backend, queue).await;
    let late = c.add("late", r#"{"delay":90000}"#).await;
    let soon = c.add("soon", r#"{"delay":30000,"priority":2}"#).await;
    let mid = c.add("mid", r#"{"delay":60000}"#).await;
    let waiting = c.add("waiting", "{}").await;
    assert_eq!(c.queue.promote_jobs(2).await.unwrap(), 2);
    assert_eq!(
        c.state(&late).await,
        JobState::Delayed,
        "the latest is left"
    );
    assert_eq!(c.queue.promote_jobs(2).await.unwrap(), 1);
    assert_eq!(c.queue.promote_jobs(2).await.unwrap(), 0);
    let ignores_priority = super::profile().batch_moves_ignore_priority;
    for id in [&late, &soon, &mid] {
        let expected = if ignores_priority || id != &soon {
            JobState::Waiting
        } else {
            JobState::Prioritized
        };
        assert_eq!(c.state(id).await, expected, "{id} promoted");
    }
    assert_eq!(
        c.count(JobState::Prioritized).await,
        u64::from(!ignores_priority)
    );
    assert_eq!(
        c.queue.get_job(&soon).await.unwrap().unwrap().delay,
        30_000,
        "the delay field is left as it was"
    );
    let promoted: Vec<String> = c
        .events_named("waiting")
        .await
        .into_iter()
        .filter(|e| e.get("prev").map(String::as_str) == Some("delayed"))
        .map(|e| e["jobId"].clone())
        .collect();
    if super::profile().batch_moves_emit_events {
        assert_eq!(promoted, [soon.clone(), mid.clone(), late.clone()]);
    } else {
        assert!(promoted.is_empty(), "{promoted:?}");
    }
    let mut fetched = Vec::with_capacity(4);
    for _ in 0..4 {
        fetched.push(c.fetch_one().await.id);
    }
    if ignores_priority {
        // Promoted jobs join the back of the line.
        assert_eq!(fetched, [waiting, soon, mid, late]);
    } else {
        // Promoted jobs join the back of the line too, but keep their priority.
        assert_eq!(fetched, [waiting, mid, late, soon]);
    }
    c.close().await;
}

/// `extend_lock` renews the lock carrying the token (taking the job out of the stalled
/// candidates), and tells a lock held by another token from a missing one.
pub async fn extend_lock_checks_the_token(backend: Arc<dyn Backend>, queue: &str) {
    let c = Ctx::new(backend, queue).await;
    let id = c.add("a", "{}").await;
    let job = c.fetch_one().await;
    let long = std::time::Duration::from_secs(60);
    assert_eq!(
        c.queue.extend_lock(&id, &job.token, long).await.unwrap(),
        LockOutcome::Extended
    );
    assert_eq!(
        c.queue
            .extend_lock(&id, "someone-else", long)
            .await
            .unwrap(),
        LockOutcome::HeldByOther
    );
    assert_eq!(
        c.queue
            .extend_lock("missing", &job.token, long)
            .await
            .unwrap(),
        LockOutcome::Missing
    );
    assert_eq!(c.complete(&job, Retention::KEEP_ALL).await, FinishCode::Ok);
    assert_eq!(
        c.queue.extend_lock(&id, &job.token, long).await.unwrap(),
        LockOutcome::Missing,
        "a finished job holds no lock"
    );
    c.close().await;
}
