//! Admin and job updates: drain, clean, obliterate, remove, logs, progress, data, metrics.

use std::sync::Arc;

use bullmq_protocol::state::JobState;

use super::{fields, Ctx};
use crate::{
    Backend, FinishAction, FinishCode, MetricsKind, NewJob, ObliterateStep, RemoveOutcome,
    Retention, WorkerStoreOptions,
};

/// `drain` removes waiting and prioritized jobs, and delayed ones when asked.
pub async fn drain_removes_waiting_jobs(backend: Arc<dyn Backend>, queue: &str) {
    let c = Ctx::new(backend, queue).await;
    c.add("a", "{}").await;
    c.add("b", "{}").await;
    c.add("c", r#"{"priority":3}"#).await;
    let delayed = c.add("d", r#"{"delay":60000}"#).await;
    let active = c.add("e", "{}").await;
    // Take one job to active: it survives a drain.
    let fetched = c.fetch(1).await;
    assert_eq!(fetched.jobs[0].id, "1");
    assert_eq!(c.queue.drain(false).await.unwrap(), 3, "b, c, e");
    assert_eq!(c.count(JobState::Waiting).await, 0);
    assert_eq!(c.count(JobState::Prioritized).await, 0);
    assert_eq!(c.count(JobState::Active).await, 1);
    assert_eq!(c.state(&delayed).await, JobState::Delayed);
    assert_eq!(
        c.queue.get_job(&active).await.unwrap(),
        None,
        "drained jobs are deleted"
    );
    assert_eq!(c.queue.drain(true).await.unwrap(), 1);
    assert_eq!(c.count(JobState::Delayed).await, 0);
    c.close().await;
}

/// `clean` removes finished jobs older than the cutoff, up to the limit, with `cleaned`.
pub async fn clean_removes_old_finished_jobs(backend: Arc<dyn Backend>, queue: &str) {
    let c = Ctx::new(backend, queue).await;
    for name in ["a", "b", "c"] {
        c.add(name, "{}").await;
    }
    for job in c.fetch(3).await.jobs {
        assert_eq!(c.complete(&job, Retention::KEEP_ALL).await, FinishCode::Ok);
    }
    let long_ago = crate::now_ms() - 3_600_000;
    let none = c
        .queue
        .clean(JobState::Completed, long_ago, 0)
        .await
        .unwrap();
    assert!(none.is_empty(), "nothing that old: {none:?}");
    let cutoff = crate::now_ms() + 1_000;
    let one = c.queue.clean(JobState::Completed, cutoff, 1).await.unwrap();
    assert_eq!(one.len(), 1, "limit 1");
    let rest = c.queue.clean(JobState::Completed, cutoff, 0).await.unwrap();
    assert_eq!(rest.len(), 2);
    assert_eq!(c.count(JobState::Completed).await, 0);
    for id in one.iter().chain(&rest) {
        assert_eq!(c.queue.get_job(id).await.unwrap(), None);
    }
    let cleaned = c.events_named("cleaned").await;
    let counts: Vec<&str> = cleaned.iter().map(|e| e["count"].as_str()).collect();
    let expected: &[&str] = if super::profile().cleaned_event_when_nothing {
        &["0", "1", "2"]
    } else {
        &["1", "2"]
    };
    assert_eq!(counts, expected);

    // Waiting jobs are cleaned by creation time.
    c.add("w", "{}").await;
    let cleaned = c
        .queue
        .clean(JobState::Waiting, crate::now_ms() + 1_000, 0)
        .await
        .unwrap();
    assert_eq!(cleaned.len(), 1);
    assert_eq!(c.count(JobState::Waiting).await, 0);
    c.close().await;
}

/// `obliterate_batch` refuses a running queue, refuses active jobs without `force`, works
/// in batches and leaves nothing behind.
pub async fn obliterate_deletes_a_paused_queue(backend: Arc<dyn Backend>, queue: &str) {
    let c = Ctx::new(backend, queue).await;
    for name in ["a", "b", "c", "d"] {
        c.add(name, "{}").await;
    }
    let job = c.fetch_one().await;
    assert_eq!(
        c.queue.obliterate_batch(100, false).await.unwrap(),
        ObliterateStep::NotPaused
    );
    c.queue.pause().await.unwrap();
    assert_eq!(
        c.queue.obliterate_batch(100, false).await.unwrap(),
        ObliterateStep::ActiveJobs
    );
    assert_eq!(
        c.queue.obliterate_batch(2, true).await.unwrap(),
        ObliterateStep::More
    );
    let mut step = ObliterateStep::More;
    for _ in 0..10 {
        step = c.queue.obliterate_batch(2, true).await.unwrap();
        if step == ObliterateStep::Done {
            break;
        }
    }
    assert_eq!(step, ObliterateStep::Done);
    let counts = c.queue.get_counts(&JobState::ALL_COUNTABLE).await.unwrap();
    assert_eq!(counts, [0; 7]);
    for id in ["1", "2", "3", "4"] {
        assert_eq!(c.queue.get_job(id).await.unwrap(), None);
    }
    assert!(!c.queue.is_paused().await.unwrap(), "meta is gone");
    // The worker still holding a job finds its lock gone.
    assert_eq!(
        c.complete(&job, Retention::KEEP_ALL).await,
        FinishCode::MissingJob
    );
    c.close().await;
}

/// `remove_job` deletes a job from any state with `removed`, refuses a locked one and
/// reports a missing one.
pub async fn remove_job_by_id(backend: Arc<dyn Backend>, queue: &str) {
    let c = Ctx::new(backend, queue).await;
    let id = c.add("a", "{}").await;
    c.queue.add_log(&id, "line", None).await.unwrap();
    assert_eq!(
        c.queue.remove_job(&id, false).await.unwrap(),
        RemoveOutcome::Removed
    );
    assert_eq!(c.queue.get_job(&id).await.unwrap(), None);
    assert_eq!(c.state(&id).await, JobState::Unknown);
    assert_eq!(c.queue.get_job_logs(&id, 0, -1, true).await.unwrap().1, 0);
    let removed = if super::profile().removed_event {
        vec![fields(&[
            ("event", "removed"),
            ("jobId", &id),
            ("prev", "wait"),
        ])]
    } else {
        Vec::new()
    };
    assert_eq!(c.events_named("removed").await, removed);
    assert_eq!(
        c.queue.remove_job(&id, false).await.unwrap(),
        RemoveOutcome::NotFound
    );

    let delayed = c.add("b", r#"{"delay":60000}"#).await;
    assert_eq!(
        c.queue.remove_job(&delayed, true).await.unwrap(),
        RemoveOutcome::Removed
    );
    assert_eq!(c.count(JobState::Delayed).await, 0);

    let locked = c.add("c", "{}").await;
    let job = c.fetch_one().await;
    assert_eq!(
        c.queue.remove_job(&locked, false).await.unwrap(),
        RemoveOutcome::Locked
    );
    assert_eq!(c.state(&locked).await, JobState::Active);
    assert_eq!(c.complete(&job, Retention::KEEP_ALL).await, FinishCode::Ok);
    assert_eq!(
        c.queue.remove_job(&locked, false).await.unwrap(),
        RemoveOutcome::Removed
    );
    if super::profile().removed_event {
        let removed = c.events_named("removed").await;
        assert_eq!(removed.last().unwrap()["prev"], "completed");
    }
    c.close().await;
}

/// Job logs (with keep), progress (with `progress`) and data updates; missing jobs are
/// reported as such.
pub async fn logs_progress_and_data(backend: Arc<dyn Backend>, queue: &str) {
    let c = Ctx::new(backend, queue).await;
    let id = c.add("a", "{}").await;
    for (n, line) in ["a", "b", "c"].iter().enumerate() {
        assert_eq!(
            c.queue.add_log(&id, line, None).await.unwrap(),
            Some(n as u64 + 1)
        );
    }
    let (lines, total) = c.queue.get_job_logs(&id, 0, -1, true).await.unwrap();
    assert_eq!(
        (lines, total),
        (vec!["a".into(), "b".into(), "c".into()], 3)
    );
    let (newest, _) = c.queue.get_job_logs(&id, 0, 0, false).await.unwrap();
    assert_eq!(newest, ["c"]);
    let (newest_two, _) = c.queue.get_job_logs(&id, 0, 1, false).await.unwrap();
    assert_eq!(newest_two, ["c", "b"]);
    assert_eq!(c.worker.add_log(&id, "d", Some(2)).await.unwrap(), Some(2));
    let (lines, total) = c.queue.get_job_logs(&id, 0, -1, true).await.unwrap();
    assert_eq!((lines, total), (vec!["c".into(), "d".into()], 2));

    let progress = serde_json::json!({"percent": 50});
    assert!(c.worker.update_progress(&id, &progress).await.unwrap());
    let record = c.queue.get_job(&id).await.unwrap().unwrap();
    assert_eq!(record.progress, progress);
    assert_eq!(
        c.events_named("progress").await,
        [fields(&[
            ("event", "progress"),
            ("jobId", &id),
            ("data", r#"{"percent":50}"#)
        ])]
    );
    c.queue
        .update_progress(&id, &serde_json::json!(75))
        .await
        .unwrap();
    assert_eq!(
        c.queue.get_job(&id).await.unwrap().unwrap().progress,
        serde_json::json!(75)
    );

    let data = serde_json::json!({"to": "x@y.z"});
    assert!(c.queue.update_data(&id, &data).await.unwrap());
    assert_eq!(c.queue.get_job(&id).await.unwrap().unwrap().data, data);

    // A missing job is reported and nothing is written (no `progress` event).
    assert!(!c.queue.update_progress("404", &progress).await.unwrap());
    assert!(!c.queue.update_data("404", &data).await.unwrap());
    assert_eq!(c.queue.add_log("404", "x", None).await.unwrap(), None);
    assert_eq!(c.queue.get_job("404").await.unwrap(), None);
    assert_eq!(c.events_named("progress").await.len(), 2);
    c.close().await;
}

/// A worker collecting metrics counts finished jobs; the first finish opens the counters
/// with no data point yet. A worker without metrics counts nothing.
pub async fn metrics_count_finished_jobs(backend: Arc<dyn Backend>, queue: &str) {
    let options = WorkerStoreOptions {
        metrics_max_points: 10,
        ..WorkerStoreOptions::default()
    };
    let c = Ctx::with_options(backend.clone(), queue, options).await;
    let empty = c
        .queue
        .get_metrics(MetricsKind::Completed, 0, -1)
        .await
        .unwrap();
    assert_eq!(empty, crate::Metrics::default());
    c.add("ok", "{}").await;
    c.add("bad", "{}").await;
    let fetched = c.fetch(2).await;
    assert_eq!(
        c.complete(&fetched.jobs[0], Retention::KEEP_ALL).await,
        FinishCode::Ok
    );
    let fail = FinishAction::Fail {
        reason: "x".into(),
        stacktrace: None,
        attempts: 1,
        keep: Retention::KEEP_ALL,
    };
    assert_eq!(c.finish(&fetched.jobs[1], fail).await, FinishCode::Ok);
    for kind in [MetricsKind::Completed, MetricsKind::Failed] {
        let m = c.queue.get_metrics(kind, 0, -1).await.unwrap();
        assert_eq!(m.meta.count, 1, "{kind:?}: {m:?}");
        assert!(m.meta.prev_ts > 0);
        assert_eq!(m.meta.prev_count, 0);
        assert!(
            m.data.is_empty() && m.count == 0,
            "no minute closed yet: {m:?}"
        );
    }
    c.close().await;

    let plain = Ctx::new(backend, &format!("{queue}-plain")).await;
    plain
        .add_job(NewJob::new("ok", "{}", "{}", crate::now_ms()))
        .await;
    let job = plain.fetch_one().await;
    assert_eq!(
        plain.complete(&job, Retention::KEEP_ALL).await,
        FinishCode::Ok
    );
    let m = plain
        .queue
        .get_metrics(MetricsKind::Completed, 0, -1)
        .await
        .unwrap();
    assert_eq!(m.meta.count, 0, "no metrics without metrics_max_points");
    plain.close().await;
}
