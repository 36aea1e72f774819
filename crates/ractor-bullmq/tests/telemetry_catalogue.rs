//! Every catalogue entry is emitted with its documented name, fields and metrics, seen through
//! the public test helpers (`telemetry::testing`).

use std::time::Duration;

use ractor_bullmq::telemetry::testing::{CapturedEvents, CapturedMetrics};
use ractor_bullmq::telemetry::{
    self, event_names as ev, metric_names as m, span_names, JobTelemetry,
};
use tracing::Level;

fn capture() -> (CapturedEvents, CapturedMetrics) {
    (CapturedEvents::new(), CapturedMetrics::new())
}

#[test]
fn job_lifecycle_events_carry_their_fields_and_metrics() {
    let (events, metrics) = capture();
    let _t = events.set_default();
    let _m = metrics.set_default();

    telemetry::job_added("mails", "7", "welcome");
    let job = JobTelemetry::new("mails", "7", "welcome")
        .attempt(2)
        .worker("mails#1");
    let span = telemetry::process_span(&job);
    {
        let _entered = span.enter();
        let active = telemetry::job_started(&job, Some(Duration::from_millis(250)));
        assert_eq!(
            metrics.gauge(m::WORKER_ACTIVE_JOBS, &[("queue", "mails")]),
            Some(1.0)
        );
        telemetry::job_progress(&job, &serde_json::json!({"step": 3}));
        telemetry::job_completed(&job, Duration::from_millis(1500));
        drop(active);
    }
    assert_eq!(
        metrics.gauge(m::WORKER_ACTIVE_JOBS, &[("queue", "mails")]),
        Some(0.0)
    );

    let added = events.first(ev::JOB_ADDED).expect("job added");
    assert_eq!(added.target, "bullmq");
    assert_eq!(added.field("queue"), Some("mails"));
    assert_eq!(added.field("job.id"), Some("7"));
    assert_eq!(added.field("job.name"), Some("welcome"));

    let started = events.first(ev::JOB_STARTED).expect("job started");
    assert_eq!(started.field("attempt"), Some("2"));
    assert_eq!(started.field("worker"), Some("mails#1"));
    assert_eq!(started.field("wait_ms"), Some("250"));
    assert_eq!(started.spans, vec![span_names::WORKER_PROCESS]);

    let progress = events.first(ev::JOB_PROGRESS).expect("job progress");
    assert_eq!(progress.level, Level::TRACE);
    assert_eq!(progress.field("progress"), Some(r#"{"step":3}"#));

    let completed = events.first(ev::JOB_COMPLETED).expect("job completed");
    assert_eq!(completed.field("duration_ms"), Some("1500"));
    assert_eq!(completed.field("job.id"), Some("7"));

    let process = &events.spans_named(span_names::WORKER_PROCESS)[0];
    for (field, value) in [
        ("queue", "mails"),
        ("job.id", "7"),
        ("job.name", "welcome"),
        ("attempt", "2"),
        ("worker", "mails#1"),
    ] {
        assert_eq!(process.field(field), Some(value), "{field}");
    }

    let labels = [("queue", "mails"), ("job_name", "welcome")];
    assert_eq!(metrics.counter(m::JOBS_ADDED, &labels), Some(1));
    assert_eq!(metrics.counter(m::JOBS_COMPLETED, &labels), Some(1));
    assert_eq!(metrics.histogram(m::JOB_WAIT, &labels), vec![0.25]);
    assert_eq!(
        metrics.histogram(m::JOB_DURATION, &[("status", "completed")]),
        vec![1.5]
    );
}

#[test]
fn failures_and_retries_are_told_apart() {
    let (events, metrics) = capture();
    let _t = events.set_default();
    let _m = metrics.set_default();
    let job = JobTelemetry::new("q", "1", "resize").worker("w");

    telemetry::job_retried(
        &job,
        Duration::from_millis(20),
        Duration::from_secs(2),
        &"timeout",
    );
    telemetry::job_failed(&job.attempt(2), Duration::from_millis(30), &"boom");

    let retried = events.first(ev::JOB_RETRIED).expect("retried");
    assert_eq!(retried.level, Level::INFO);
    assert_eq!(retried.field("attempt"), Some("1"));
    assert_eq!(retried.field("delay_ms"), Some("2000"));
    assert_eq!(retried.field("duration_ms"), Some("20"));
    assert_eq!(retried.field("error"), Some("timeout"));

    let failed = events.first(ev::JOB_FAILED).expect("failed");
    assert_eq!(failed.level, Level::WARN);
    assert_eq!(failed.field("attempt"), Some("2"));
    assert_eq!(failed.field("error"), Some("boom"));
    assert_eq!(failed.field("duration_ms"), Some("30"));

    assert_eq!(metrics.counter(m::JOBS_RETRIED, &[("queue", "q")]), Some(1));
    assert_eq!(metrics.counter(m::JOBS_FAILED, &[("queue", "q")]), Some(1));
    assert_eq!(metrics.counter(m::JOBS_COMPLETED, &[("queue", "q")]), None);
    assert_eq!(
        metrics.histogram(m::JOB_DURATION, &[("status", "retried")]),
        vec![0.02]
    );
    assert_eq!(
        metrics.histogram(m::JOB_DURATION, &[("status", "failed")]),
        vec![0.03]
    );
}

#[test]
fn worker_and_queue_events() {
    let (events, metrics) = capture();
    let _t = events.set_default();
    let _m = metrics.set_default();

    telemetry::worker_started("q", "q#1", 8);
    assert_eq!(metrics.gauge(m::WORKERS, &[("queue", "q")]), Some(1.0));
    telemetry::stalled_check("q", "q#1", 0, 0);
    telemetry::stalled_check("q", "q#1", 3, 1);
    telemetry::rate_limit_hit("q", "q#1", Duration::from_millis(900));
    telemetry::queue_paused("q");
    telemetry::queue_resumed("q");
    telemetry::queue_drained("q");
    telemetry::worker_stopped("q", "q#1", Duration::from_millis(61_500));
    assert_eq!(metrics.gauge(m::WORKERS, &[("queue", "q")]), Some(0.0));

    let started = events.first(ev::WORKER_STARTED).expect("worker started");
    assert_eq!(started.field("concurrency"), Some("8"));
    assert_eq!(started.field("worker"), Some("q#1"));
    let stopped = events.first(ev::WORKER_STOPPED).expect("worker stopped");
    assert_eq!(stopped.field("uptime_s"), Some("61.5"));

    let checks = events.named(ev::STALLED_CHECK);
    assert_eq!(checks.len(), 2);
    assert_eq!(checks[0].level, Level::DEBUG);
    assert_eq!(checks[1].level, Level::WARN);
    assert_eq!(checks[1].field("recovered"), Some("3"));
    assert_eq!(checks[1].field("failed"), Some("1"));
    assert_eq!(
        metrics.counter(m::JOBS_STALLED, &[("outcome", "recovered")]),
        Some(3)
    );
    assert_eq!(
        metrics.counter(m::JOBS_STALLED, &[("outcome", "failed")]),
        Some(1)
    );

    let limited = events.first(ev::RATE_LIMIT_HIT).expect("rate limit");
    assert_eq!(limited.field("delay_ms"), Some("900"));
    assert_eq!(
        metrics.counter(m::RATE_LIMIT_HITS, &[("queue", "q")]),
        Some(1)
    );

    for name in [ev::QUEUE_PAUSED, ev::QUEUE_RESUMED, ev::QUEUE_DRAINED] {
        assert_eq!(events.first(name).expect(name).field("queue"), Some("q"));
    }
}

#[test]
fn add_spans_record_the_job_id_once_known() {
    let events = CapturedEvents::new();
    let _t = events.set_default();

    let span = telemetry::add_span("q", "welcome");
    telemetry::record_job_id(&span, "42");
    let bulk = telemetry::add_bulk_span("q", 3);
    drop((span, bulk));

    let add = &events.spans_named(span_names::QUEUE_ADD)[0];
    assert_eq!(add.field("queue"), Some("q"));
    assert_eq!(add.field("job.name"), Some("welcome"));
    assert_eq!(add.field("job.id"), Some("42"));
    let bulk = &events.spans_named(span_names::QUEUE_ADD_BULK)[0];
    assert_eq!(bulk.field("count"), Some("3"));
}

#[test]
fn every_catalogue_event_and_metric_is_emitted_by_a_scripted_run() {
    let (events, metrics) = capture();
    let _t = events.set_default();
    let _m = metrics.set_default();
    telemetry::describe_metrics();

    // One run touching every entry once, as a worker and a producer would.
    telemetry::worker_started("s", "s#1", 1);
    telemetry::job_added("s", "1", "a");
    let job = JobTelemetry::new("s", "1", "a").worker("s#1");
    let active = telemetry::job_started(&job, Some(Duration::ZERO));
    telemetry::job_progress(&job, &serde_json::json!(50));
    telemetry::job_moved(&job, telemetry::MovedTo::WaitingChildren, Duration::ZERO);
    telemetry::job_retried(&job, active.elapsed(), Duration::ZERO, &"flaky");
    drop(active);
    let job = job.attempt(2);
    let active = telemetry::job_started(&job, None);
    telemetry::job_failed(&job, active.elapsed(), &"gave up");
    drop(active);
    let active = telemetry::job_started(&job.attempt(3), None);
    telemetry::job_completed(&job.attempt(3), active.elapsed());
    drop(active);
    telemetry::stalled_check("s", "s#1", 1, 1);
    telemetry::rate_limit_hit("s", "s#1", Duration::from_millis(5));
    telemetry::finish_refused("s", "s#1", "1", &"Missing lock for job 1. moveToFinished");
    telemetry::queue_paused("s");
    telemetry::queue_resumed("s");
    telemetry::queue_drained("s");
    telemetry::worker_queue_empty("s", "s#1");
    telemetry::job_cancelled(&job, "timed_out", "job timed out after 200 ms");
    telemetry::worker_concurrency_changed("s", "s#1", 4);
    telemetry::worker_stopped("s", "s#1", Duration::from_secs(1));
    telemetry::connection_lost("s", "worker", &"connection refused");
    telemetry::connection_restored("s", "worker", Duration::from_millis(1500));
    telemetry::worker_stuck("s", "w1", Duration::from_secs(31));
    telemetry::queue_jobs_counted("s", ractor_bullmq::protocol::state::JobState::Delayed, 2);
    assert_eq!(
        metrics.gauge(m::QUEUE_JOBS, &[("queue", "s"), ("state", "delayed")]),
        Some(2.0)
    );
    let stuck = events.first(ev::WORKER_STUCK).expect("worker stuck");
    assert_eq!(stuck.field("stalled_for_ms"), Some("31000"));
    let lost = events.first(ev::CONNECTION_LOST).expect("connection lost");
    assert_eq!(lost.level, Level::WARN);
    assert_eq!(lost.field("component"), Some("worker"));
    assert_eq!(lost.field("error"), Some("connection refused"));
    let cancelled = events.first(ev::JOB_CANCELLED).expect("job cancelled");
    assert_eq!(cancelled.level, Level::INFO);
    assert_eq!(cancelled.field("cause"), Some("timed_out"));
    assert_eq!(
        cancelled.field("reason"),
        Some("job timed out after 200 ms")
    );
    assert_eq!(cancelled.field("job.id"), Some("1"));
    let changed = events
        .first(ev::WORKER_CONCURRENCY_CHANGED)
        .expect("concurrency changed");
    assert_eq!(changed.field("concurrency"), Some("4"));
    let restored = events.first(ev::CONNECTION_RESTORED).expect("restored");
    assert_eq!(restored.field("downtime_ms"), Some("1500"));

    for name in ev::ALL {
        let seen = events
            .first(name)
            .unwrap_or_else(|| panic!("{name} not emitted"));
        assert_eq!(seen.target, telemetry::TARGET);
        assert_eq!(seen.field("queue"), Some("s"), "{name}");
    }
    let recorded = metrics.names();
    for name in m::ALL {
        assert!(recorded.iter().any(|r| r == name), "{name} not recorded");
    }
}

#[test]
fn job_finished_reports_each_attempt_end() {
    use ractor_bullmq::telemetry::AttemptEnd;

    let (events, metrics) = capture();
    let _t = events.set_default();
    let _m = metrics.set_default();
    let job = JobTelemetry::new("f", "9", "n").worker("f#1");
    let took = Duration::from_millis(10);

    let ends = [
        AttemptEnd::Completed,
        AttemptEnd::Failed { reason: "bad" },
        AttemptEnd::Retried {
            reason: "again",
            delay: Duration::ZERO,
        },
        AttemptEnd::Retried {
            reason: "backoff",
            delay: Duration::from_secs(4),
        },
        AttemptEnd::Delayed(Duration::from_secs(1)),
        AttemptEnd::RateLimited(Duration::from_millis(700)),
    ];
    for end in ends {
        telemetry::job_finished(&job, end, took);
    }

    assert_eq!(events.named(ev::JOB_COMPLETED).len(), 1);
    assert_eq!(
        events.first(ev::JOB_FAILED).expect("failed").field("error"),
        Some("bad")
    );
    let retries = events.named(ev::JOB_RETRIED);
    assert_eq!(
        retries.len(),
        2,
        "a processor-requested delay is not a retry"
    );
    assert_eq!(retries[0].field("delay_ms"), Some("0"));
    assert_eq!(retries[1].field("delay_ms"), Some("4000"));
    assert_eq!(retries[1].field("error"), Some("backoff"));
    assert_eq!(
        events
            .first(ev::RATE_LIMIT_HIT)
            .expect("limit")
            .field("delay_ms"),
        Some("700")
    );
    assert_eq!(metrics.counter(m::JOBS_RETRIED, &[("queue", "f")]), Some(2));
}
