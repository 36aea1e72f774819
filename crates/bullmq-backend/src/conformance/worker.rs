//! The worker side: fetch, finish, retries, locks, stalled recovery, pause, rate limits,
//! waiting for work.

use std::sync::Arc;
use std::time::Duration;

use bullmq_protocol::state::JobState;

use super::{fields, sleep_ms, Ctx, LONG_LOCK};
use crate::queue::JobEnd;
use crate::{Backend, Finish, FinishAction, FinishCode, Receipt, Retention};

/// A fetch moves the job to active, locks it with a token of the worker's prefix, stamps
/// `processedOn`, `ats` and the worker name, and emits `active`.
pub async fn fetch_locks_and_counts_attempts(backend: Arc<dyn Backend>, queue: &str) {
    let c = Ctx::new(backend, queue).await;
    let id = c.add("a", "{}").await;
    let before = crate::now_ms();
    let mut request = c.request(5, LONG_LOCK);
    request.worker_name = Some("worker-7".into());
    let fetched = c.fetch_with(&request).await;
    assert_eq!(fetched.jobs.len(), 1, "{fetched:?}");
    assert_eq!(fetched.rate_limited_for, Duration::ZERO);
    assert!(!fetched.gated);
    let job = &fetched.jobs[0];
    assert_eq!(job.id, id);
    assert!(
        job.token.starts_with("conformance-worker:"),
        "token {:?} carries the worker's prefix",
        job.token
    );
    let record = job.job.clone().expect("readable");
    assert_eq!(record.attempts_started, 1);
    assert_eq!(record.attempts_made, 0);
    assert_eq!(record.processed_by.as_deref(), Some("worker-7"));
    assert!(record.processed_on.is_some_and(|t| t + 5_000 >= before));
    assert_eq!(c.state(&id).await, JobState::Active);
    assert_eq!(c.count(JobState::Waiting).await, 0);
    let stored = c.queue.get_job(&id).await.unwrap().unwrap();
    assert_eq!(stored.attempts_started, 1, "ats stored");
    let active = c.events_named("active").await;
    assert_eq!(
        active,
        [fields(&[
            ("event", "active"),
            ("jobId", &id),
            ("prev", "waiting")
        ])]
    );
    // Nothing left: an empty fetch, and no delayed job to wait for.
    let empty = c.fetch(5).await;
    assert!(
        empty.jobs.is_empty() && empty.next_delayed_at.is_none(),
        "{empty:?}"
    );
    c.close().await;
}

/// Completing stores the return value and keeps the newest jobs by retention; `drained`
/// follows the last job.
pub async fn complete_with_retention(backend: Arc<dyn Backend>, queue: &str) {
    let c = Ctx::new(backend, queue).await;
    for name in ["a", "b", "c"] {
        c.add(name, "{}").await;
    }
    let fetched = c.fetch(3).await;
    assert_eq!(fetched.jobs.len(), 3);
    for job in &fetched.jobs {
        assert_eq!(c.complete(job, Retention::count(2)).await, FinishCode::Ok);
    }
    assert_eq!(c.count(JobState::Completed).await, 2, "kept the newest 2");
    assert_eq!(c.queue.get_job("1").await.unwrap(), None, "oldest deleted");
    let kept = c.queue.get_job("3").await.unwrap().expect("newest kept");
    assert_eq!(kept.returnvalue, Some(serde_json::json!({"ok": 1})));
    assert_eq!(kept.attempts_made, 1);
    assert!(kept.finished_on.is_some());
    assert_eq!(c.state("3").await, JobState::Completed);
    assert_eq!(
        c.queue.job_end("3").await.unwrap(),
        JobEnd::Completed(Some(r#"{"ok":1}"#.into()))
    );
    let completed = c.events_named("completed").await;
    assert_eq!(completed.len(), 3);
    assert_eq!(
        completed[2],
        fields(&[
            ("event", "completed"),
            ("jobId", "3"),
            ("returnvalue", r#"{"ok":1}"#),
            ("prev", "active"),
        ])
    );
    assert!(
        !c.events_named("drained").await.is_empty(),
        "drained after the last job"
    );

    // Retention::REMOVE deletes the job at once, and it is still announced.
    let id = c.add("d", "{}").await;
    let job = c.fetch_one().await;
    assert_eq!(c.complete(&job, Retention::REMOVE).await, FinishCode::Ok);
    assert_eq!(c.queue.get_job(&id).await.unwrap(), None);
    assert_eq!(c.count(JobState::Completed).await, 2);
    assert_eq!(c.events_named("completed").await.len(), 4);
    c.close().await;
}

/// `finish_batch` with a fetch finishes the job and hands out the next one in the same call.
pub async fn finish_and_fetch_in_one_call(backend: Arc<dyn Backend>, queue: &str) {
    let c = Ctx::new(backend, queue).await;
    c.add("a", "{}").await;
    c.add("b", "{}").await;
    let job = c.fetch_one().await;
    let finish = Finish {
        job_id: job.id.clone(),
        token: job.token.clone(),
        action: FinishAction::Complete {
            returnvalue: "null".into(),
            keep: Retention::KEEP_ALL,
        },
        receipt: job.receipt,
    };
    let reply = c
        .worker
        .finish_batch(&[finish], Some(&c.request(1, LONG_LOCK)))
        .await
        .unwrap();
    assert_eq!(reply.codes, [FinishCode::Ok]);
    assert_eq!(reply.fetched.jobs.len(), 1, "{reply:?}");
    assert_eq!(reply.fetched.jobs[0].id, "2");
    assert_eq!(c.state("1").await, JobState::Completed);
    assert_eq!(c.state("2").await, JobState::Active);
    assert!(
        c.events_named("drained").await.is_empty(),
        "job 2 still runs"
    );
    c.close().await;
}

/// A retry puts the job back in wait counting the attempt; the final failure fails it and
/// emits `retries-exhausted` once the attempts are used up.
pub async fn retry_then_fail_with_retries_exhausted(backend: Arc<dyn Backend>, queue: &str) {
    let c = Ctx::new(backend, queue).await;
    let id = c.add("flaky", r#"{"attempts":2}"#).await;
    let job = c.fetch_one().await;
    let retry = FinishAction::Retry {
        reason: "boom".into(),
        stacktrace: Some(r#"["at one"]"#.into()),
        lifo: false,
    };
    assert_eq!(c.finish(&job, retry).await, FinishCode::Ok);
    assert_eq!(c.state(&id).await, JobState::Waiting);
    let record = c.queue.get_job(&id).await.unwrap().unwrap();
    assert_eq!(record.attempts_made, 1);
    assert_eq!(record.failed_reason.as_deref(), Some("boom"));
    assert_eq!(record.stacktrace, ["at one"]);
    let waiting = c.events_named("waiting").await;
    assert_eq!(
        waiting.last(),
        Some(&fields(&[
            ("event", "waiting"),
            ("jobId", &id),
            ("prev", "active")
        ]))
    );

    let job = c.fetch_one().await;
    assert_eq!(job.job.as_ref().unwrap().attempts_started, 2);
    let fail = FinishAction::Fail {
        reason: "boom again".into(),
        stacktrace: None,
        attempts: 2,
        keep: Retention::KEEP_ALL,
    };
    assert_eq!(c.finish(&job, fail).await, FinishCode::Ok);
    assert_eq!(c.state(&id).await, JobState::Failed);
    let record = c.queue.get_job(&id).await.unwrap().unwrap();
    assert_eq!(record.attempts_made, 2);
    assert_eq!(record.failed_reason.as_deref(), Some("boom again"));
    assert_eq!(
        c.queue.job_end(&id).await.unwrap(),
        JobEnd::Failed(Some("boom again".into()))
    );
    assert_eq!(
        c.events_named("failed").await,
        [fields(&[
            ("event", "failed"),
            ("jobId", &id),
            ("failedReason", "boom again"),
            ("prev", "active"),
        ])]
    );
    assert_eq!(
        c.events_named("retries-exhausted").await,
        [fields(&[
            ("event", "retries-exhausted"),
            ("jobId", &id),
            ("attemptsMade", "2")
        ])]
    );

    // A failure with attempts left (an unrecoverable error) emits no retries-exhausted.
    let other = c.add("fatal", r#"{"attempts":5}"#).await;
    let job = c.fetch_one().await;
    let fail = FinishAction::Fail {
        reason: "fatal".into(),
        stacktrace: None,
        attempts: 5,
        keep: Retention::KEEP_ALL,
    };
    assert_eq!(c.finish(&job, fail).await, FinishCode::Ok);
    assert_eq!(c.state(&other).await, JobState::Failed);
    let exhausted = if super::profile().retries_exhausted_only_when_exhausted {
        1
    } else {
        2
    };
    assert_eq!(c.events_named("retries-exhausted").await.len(), exhausted);
    c.close().await;
}

/// A retry with backoff goes to `delayed` counting the attempt and comes back when due;
/// `move_to_delayed` does not count one.
pub async fn retry_backoff_delay(backend: Arc<dyn Backend>, queue: &str) {
    let c = Ctx::new(backend, queue).await;
    let id = c.add("backoff", r#"{"attempts":3}"#).await;
    let job = c.fetch_one().await;
    let before = crate::now_ms();
    let delay = FinishAction::Delay {
        delay: Duration::from_millis(400),
        reason: Some("later".into()),
        stacktrace: None,
        skip_attempt: false,
    };
    assert_eq!(c.finish(&job, delay).await, FinishCode::Ok);
    assert_eq!(c.state(&id).await, JobState::Delayed);
    let record = c.queue.get_job(&id).await.unwrap().unwrap();
    assert_eq!(record.attempts_made, 1);
    assert_eq!(record.failed_reason.as_deref(), Some("later"));
    let delayed = c.events_named("delayed").await;
    assert_eq!(delayed.len(), 1);
    let due: u64 = delayed[0]["delay"].parse().expect("delay is the due time");
    assert!(due >= before + 400, "due {due} not before {before} + 400");
    assert!(c.fetch(1).await.jobs.is_empty(), "not due yet");

    sleep_ms(800).await;
    let job = c.fetch_one().await;
    assert_eq!(job.id, id);
    let code = c
        .worker
        .move_to_delayed(&job.id, &job.token, Duration::from_secs(60))
        .await
        .unwrap();
    assert_eq!(code, FinishCode::Ok);
    assert_eq!(c.state(&id).await, JobState::Delayed);
    let record = c.queue.get_job(&id).await.unwrap().unwrap();
    assert_eq!(record.attempts_made, 1, "move_to_delayed counts no attempt");
    c.close().await;
}

/// Finishing checks the lock: another token is refused, a missing job and an expired lock
/// are reported, and none of them changes the job.
pub async fn lock_checks_on_finish(backend: Arc<dyn Backend>, queue: &str) {
    let c = Ctx::new(backend, queue).await;
    let id = c.add("a", "{}").await;
    let job = c.fetch_one().await;
    let complete = || FinishAction::Complete {
        returnvalue: "1".into(),
        keep: Retention::KEEP_ALL,
    };
    let code = c
        .finish_token(&id, "someone-else:1", complete(), Receipt::NONE)
        .await;
    assert_eq!(code, FinishCode::LockNotOwned);
    assert_eq!(c.state(&id).await, JobState::Active);
    let code = c
        .finish_token("404", &job.token, complete(), Receipt::NONE)
        .await;
    assert_eq!(code, FinishCode::MissingJob);
    assert_eq!(c.finish(&job, complete()).await, FinishCode::Ok);
    // Finished once: the lock is gone (or, checked first, the state).
    assert_eq!(
        c.finish(&job, complete()).await,
        super::profile().left_active()
    );

    let id = c.add("b", "{}").await;
    let fetched = c
        .fetch_with(&c.request(1, Duration::from_millis(150)))
        .await;
    let job = &fetched.jobs[0];
    sleep_ms(600).await;
    if super::profile().locks_lapse {
        assert_eq!(c.finish(job, complete()).await, FinishCode::MissingLock);
        assert_eq!(c.state(&id).await, JobState::Active, "still active");
    } else {
        // The lock column stays until a stalled check takes the job back.
        assert_eq!(c.finish(job, complete()).await, FinishCode::Ok);
    }
    c.close().await;
}

/// A fetch with the caller's own token (Node's `getNextJob(token)`) locks the job with exactly
/// that token, in a fetch alone and in a finish's fetch; the token renews and finishes the job,
/// and another token is refused. A finish's fetch with `only_if_finished` is skipped after a
/// refusal.
pub async fn fetch_with_exact_token(backend: Arc<dyn Backend>, queue: &str) {
    let c = Ctx::new(backend, queue).await;
    let a = c.add("a", "{}").await;
    let b = c.add("b", "{}").await;
    let request = c.request(1, LONG_LOCK).with_token("my-token");
    let fetched = c.fetch_with(&request).await;
    assert_eq!(fetched.jobs.len(), 1, "{fetched:?}");
    let job = &fetched.jobs[0];
    assert_eq!(
        (job.id.as_str(), job.token.as_str()),
        (a.as_str(), "my-token")
    );
    let lost = c
        .worker
        .extend_locks(&[(a.clone(), "my-token".into())], LONG_LOCK)
        .await
        .unwrap();
    assert!(lost.is_empty(), "renewed with the caller's token: {lost:?}");
    let complete = || FinishAction::Complete {
        returnvalue: "1".into(),
        keep: Retention::KEEP_ALL,
    };
    let code = c
        .finish_token(&a, "conformance-worker:0", complete(), Receipt::NONE)
        .await;
    assert_eq!(
        code,
        FinishCode::LockNotOwned,
        "the prefix token is not the lock"
    );
    let finish = Finish {
        job_id: a.clone(),
        token: "my-token".into(),
        action: complete(),
        receipt: job.receipt,
    };
    let reply = c
        .worker
        .finish_batch(&[finish], Some(&request))
        .await
        .unwrap();
    assert_eq!(reply.codes, [FinishCode::Ok]);
    assert_eq!(reply.fetched.jobs.len(), 1, "{reply:?}");
    let next = &reply.fetched.jobs[0];
    assert_eq!(
        (next.id.as_str(), next.token.as_str()),
        (b.as_str(), "my-token")
    );
    assert_eq!(c.state(&a).await, JobState::Completed);
    // A refused finish fetches nothing when asked so (Node's moveToFinished), and the next
    // job stays waiting.
    let d = c.add("d", "{}").await;
    let refused = Finish {
        job_id: b.clone(),
        token: "not-my-token".into(),
        action: complete(),
        receipt: next.receipt,
    };
    let strict = request.clone().only_if_finished();
    let reply = c
        .worker
        .finish_batch(std::slice::from_ref(&refused), Some(&strict))
        .await
        .unwrap();
    assert_eq!(reply.codes, [FinishCode::LockNotOwned]);
    assert!(reply.fetched.jobs.is_empty(), "{reply:?}");
    assert_eq!(c.state(&d).await, JobState::Waiting);
    // The Worker's fetch (without the flag) fetches for the slot in any case.
    let reply = c
        .worker
        .finish_batch(std::slice::from_ref(&refused), Some(&request))
        .await
        .unwrap();
    assert_eq!(reply.codes, [FinishCode::LockNotOwned]);
    assert_eq!(reply.fetched.jobs.len(), 1, "{reply:?}");
    assert_eq!(reply.fetched.jobs[0].id, d);
    assert_eq!(c.finish(next, complete()).await, FinishCode::Ok);
    c.close().await;
}

/// `extend_locks` renews locks carrying their token and reports the others.
pub async fn extend_locks_renews_own_locks(backend: Arc<dyn Backend>, queue: &str) {
    let c = Ctx::new(backend, queue).await;
    c.add("a", "{}").await;
    c.add("b", "{}").await;
    let fetched = c
        .fetch_with(&c.request(2, Duration::from_millis(300)))
        .await;
    assert_eq!(fetched.jobs.len(), 2);
    let (a, b) = (&fetched.jobs[0], &fetched.jobs[1]);
    let lost = c
        .worker
        .extend_locks(
            &[
                (a.id.clone(), a.token.clone()),
                (b.id.clone(), "someone-else:9".into()),
                ("404".into(), "conformance-worker:1".into()),
            ],
            Duration::from_secs(30),
        )
        .await
        .unwrap();
    let mut lost = lost;
    lost.sort();
    let mut expected = vec![b.id.clone(), "404".to_owned()];
    expected.sort();
    assert_eq!(lost, expected);
    sleep_ms(800).await;
    assert_eq!(
        c.complete(a, Retention::KEEP_ALL).await,
        FinishCode::Ok,
        "renewed"
    );
    // A lapsed lock is gone (Redis); a lock column stays until the stalled check.
    let lapsed = if super::profile().locks_lapse {
        FinishCode::MissingLock
    } else {
        FinishCode::Ok
    };
    assert_eq!(
        c.complete(b, Retention::KEEP_ALL).await,
        lapsed,
        "not renewed, expired"
    );
    c.close().await;
}

/// A job whose lock expired is moved back to wait by the second stalled check (the first
/// marks it), with `stc` counted and `stalled`; past `max_stalled_count` it carries the
/// deferred failure. Jobs whose lock holds are left alone.
pub async fn stalled_jobs_recovered(backend: Arc<dyn Backend>, queue: &str) {
    let c = Ctx::new(backend, queue).await;
    let held = c.add("held", "{}").await;
    let held_job = c.fetch_one().await;
    assert_eq!(held_job.id, held);
    let id = c.add("stalls", "{}").await;
    let short = c.request(1, Duration::from_millis(150));
    let interval = Duration::from_millis(1);

    for round in 1..=2u32 {
        let fetched = c.fetch_with(&short).await;
        assert_eq!(fetched.jobs.len(), 1, "round {round}: {fetched:?}");
        sleep_ms(20).await;
        let marked = c.worker.check_stalled(1, interval).await.unwrap();
        assert!(
            marked.recovered.is_empty(),
            "round {round}: the first check only marks"
        );
        sleep_ms(600).await;
        let report = c.worker.check_stalled(1, interval).await.unwrap();
        assert_eq!(report.recovered, std::slice::from_ref(&id), "round {round}");
        assert_eq!(c.state(&id).await, JobState::Waiting);
        let record = c.queue.get_job(&id).await.unwrap().unwrap();
        assert_eq!(record.stalled_counter, round);
        if round == 1 {
            assert_eq!(record.deferred_failure, None);
        } else {
            assert_eq!(
                record.deferred_failure.as_deref(),
                Some("job stalled more than allowable limit")
            );
        }
        sleep_ms(20).await;
    }
    assert_eq!(
        c.state(&held).await,
        JobState::Active,
        "a held lock is not stalled"
    );
    let stalled = c.events_named("stalled").await;
    assert_eq!(stalled.len(), 2);
    assert_eq!(stalled[0], fields(&[("event", "stalled"), ("jobId", &id)]));
    c.close().await;
}

/// A paused queue takes jobs in but gives none out until resumed.
pub async fn pause_gates_fetch(backend: Arc<dyn Backend>, queue: &str) {
    let c = Ctx::new(backend, queue).await;
    assert!(!c.queue.is_paused().await.unwrap());
    c.queue.pause().await.unwrap();
    assert!(c.queue.is_paused().await.unwrap());
    assert!(c.queue.get_meta().await.unwrap().contains_key("paused"));
    let id = c.add("a", "{}").await;
    assert_eq!(c.state(&id).await, JobState::Waiting);
    let fetched = c.fetch(1).await;
    assert!(fetched.jobs.is_empty() && fetched.gated, "{fetched:?}");
    c.queue.resume().await.unwrap();
    assert!(!c.queue.is_paused().await.unwrap());
    let job = c.fetch_one().await;
    assert_eq!(job.id, id);
    assert_eq!(
        c.events_named("paused").await,
        [fields(&[("event", "paused")])]
    );
    assert_eq!(
        c.events_named("resumed").await,
        [fields(&[("event", "resumed")])]
    );
    c.close().await;
}

/// The worker limiter lets `max` jobs through per window; `RateLimit` puts the job back and
/// closes the limiter for its ttl.
pub async fn rate_limits(backend: Arc<dyn Backend>, queue: &str) {
    let c = Ctx::new(backend.clone(), queue).await;
    for name in ["a", "b", "c"] {
        c.add(name, "{}").await;
    }
    let mut limited = c.request(3, LONG_LOCK);
    limited.limiter = Some((1, Duration::from_secs(2)));
    let fetched = c.fetch_with(&limited).await;
    assert_eq!(fetched.jobs.len(), 1, "one job per window: {fetched:?}");
    let again = c.fetch_with(&limited).await;
    assert!(again.jobs.is_empty(), "{again:?}");
    assert!(
        again.rate_limited_for > Duration::ZERO && again.rate_limited_for <= Duration::from_secs(2),
        "{again:?}"
    );
    c.close().await;

    let c = Ctx::new(backend.clone(), &format!("{queue}-ttl")).await;
    let id = c.add("a", "{}").await;
    let mut limited = c.request(1, LONG_LOCK);
    limited.limiter = Some((10, Duration::from_secs(1)));
    let job = c.fetch_with(&limited).await.jobs.remove(0);
    let action = FinishAction::RateLimit {
        ttl: Duration::from_millis(500),
    };
    assert_eq!(c.finish(&job, action).await, FinishCode::Ok);
    assert_eq!(c.state(&id).await, JobState::Waiting, "back to wait");
    let record = c.queue.get_job(&id).await.unwrap().unwrap();
    assert_eq!(record.attempts_made, 0, "a rate limit counts no attempt");
    let blocked = c.fetch_with(&limited).await;
    assert!(blocked.jobs.is_empty(), "{blocked:?}");
    assert!(
        blocked.rate_limited_for > Duration::ZERO
            && blocked.rate_limited_for <= Duration::from_millis(500),
        "{blocked:?}"
    );
    sleep_ms(900).await;
    let job = c.fetch_with(&limited).await;
    assert_eq!(job.jobs.len(), 1, "the limiter opened again: {job:?}");
    c.close().await;

    // A zero ttl (Node's plain RateLimitError after `Queue.rateLimit`) leaves the limiter as
    // it is, and the finish reports its remaining time, fetching nothing.
    let c = Ctx::new(backend, &format!("{queue}-zero")).await;
    let id = c.add("a", "{}").await;
    let job = c.fetch_one().await;
    c.queue.set_rate_limit(20_000).await.unwrap();
    let finish = Finish {
        job_id: job.id.clone(),
        token: job.token.clone(),
        action: FinishAction::RateLimit {
            ttl: Duration::ZERO,
        },
        receipt: job.receipt,
    };
    let reply = c.worker.finish_batch(&[finish], None).await.unwrap();
    assert_eq!(reply.codes, [FinishCode::Ok]);
    assert!(reply.fetched.jobs.is_empty(), "{reply:?}");
    let left = reply.fetched.rate_limited_for;
    assert!(
        left > Duration::from_secs(15) && left <= Duration::from_secs(20),
        "the queue's limit is kept and reported: {left:?}"
    );
    assert_eq!(c.state(&id).await, JobState::Waiting, "back to wait");
    c.close().await;
}

/// `wait_for_job` times out on an idle queue and wakes when a job is added.
pub async fn wait_for_job_woken_by_add(backend: Arc<dyn Backend>, queue: &str) {
    let c = Ctx::new(backend, queue).await;
    let woken = c
        .worker
        .wait_for_job(Duration::from_millis(200))
        .await
        .unwrap();
    assert!(!woken, "nothing to wake for");
    let worker = c.worker.clone();
    let waiter = tokio::spawn(async move { worker.wait_for_job(Duration::from_secs(8)).await });
    sleep_ms(200).await;
    let id = c.add("a", "{}").await;
    let woken = tokio::time::timeout(Duration::from_secs(8), waiter)
        .await
        .expect("woken in time")
        .expect("waiter ran")
        .unwrap();
    assert!(woken, "woken by the add");
    assert_eq!(c.fetch_one().await.id, id);
    c.close().await;
}
