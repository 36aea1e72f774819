//! The metrics side of the catalogue: one small function per metric update, so label sets are
//! spelled in one place, and [`describe_metrics`] for units and help texts.

use std::time::Duration;

use metrics::Unit;

use super::names::metric_names as m;

/// Registers unit and help text of every catalogue metric with the installed recorder.
///
/// Optional: exporters work without it, but Prometheus shows the help lines and some exporters
/// use the unit. Call it once after installing the recorder; calling it again is harmless.
pub fn describe_metrics() {
    metrics::describe_counter!(m::JOBS_ADDED, Unit::Count, "Jobs added to the queue");
    metrics::describe_counter!(m::JOBS_COMPLETED, Unit::Count, "Jobs completed");
    metrics::describe_counter!(m::JOBS_FAILED, Unit::Count, "Jobs failed for good");
    metrics::describe_counter!(
        m::JOBS_RETRIED,
        Unit::Count,
        "Failed attempts that will be retried"
    );
    metrics::describe_counter!(
        m::JOBS_STALLED,
        Unit::Count,
        "Jobs found stalled (lock expired while active)"
    );
    metrics::describe_counter!(m::RATE_LIMIT_HITS, Unit::Count, "Rate limit hits");
    metrics::describe_histogram!(
        m::JOB_DURATION,
        Unit::Seconds,
        "Processing time of one attempt"
    );
    metrics::describe_histogram!(
        m::JOB_WAIT,
        Unit::Seconds,
        "Time from ready (added, or due when delayed) to started"
    );
    metrics::describe_gauge!(
        m::WORKER_ACTIVE_JOBS,
        Unit::Count,
        "Attempts being processed in this process"
    );
    metrics::describe_gauge!(m::WORKERS, Unit::Count, "Running workers in this process");
    metrics::describe_gauge!(
        m::QUEUE_JOBS,
        Unit::Count,
        "Jobs of the queue in one state, as last counted by record_job_counts_metric"
    );
}

pub(super) fn added(queue: &str, job_name: &str) {
    metrics::counter!(m::JOBS_ADDED, "queue" => queue.to_owned(), "job_name" => job_name.to_owned())
        .increment(1);
}

/// How an attempt ended, for the `status` label of the duration histogram.
#[derive(Debug, Clone, Copy)]
pub(super) enum Status {
    Completed,
    Failed,
    Retried,
}

impl Status {
    fn label(self) -> &'static str {
        match self {
            Status::Completed => "completed",
            Status::Failed => "failed",
            Status::Retried => "retried",
        }
    }

    fn counter(self) -> &'static str {
        match self {
            Status::Completed => m::JOBS_COMPLETED,
            Status::Failed => m::JOBS_FAILED,
            Status::Retried => m::JOBS_RETRIED,
        }
    }
}

pub(super) fn finished(queue: &str, job_name: &str, status: Status, duration: Duration) {
    metrics::counter!(status.counter(), "queue" => queue.to_owned(), "job_name" => job_name.to_owned())
        .increment(1);
    metrics::histogram!(
        m::JOB_DURATION,
        "queue" => queue.to_owned(),
        "job_name" => job_name.to_owned(),
        "status" => status.label()
    )
    .record(duration.as_secs_f64());
}

pub(super) fn waited(queue: &str, job_name: &str, wait: Duration) {
    metrics::histogram!(m::JOB_WAIT, "queue" => queue.to_owned(), "job_name" => job_name.to_owned())
        .record(wait.as_secs_f64());
}

pub(super) fn active_jobs(queue: &str, delta: f64) {
    metrics::gauge!(m::WORKER_ACTIVE_JOBS, "queue" => queue.to_owned()).increment(delta);
}

pub(super) fn queue_jobs(queue: &str, state: &'static str, count: u64) {
    metrics::gauge!(m::QUEUE_JOBS, "queue" => queue.to_owned(), "state" => state).set(count as f64);
}

pub(super) fn workers(queue: &str, delta: f64) {
    metrics::gauge!(m::WORKERS, "queue" => queue.to_owned()).increment(delta);
}

pub(super) fn stalled(queue: &str, recovered: u64, failed: u64) {
    if recovered > 0 {
        metrics::counter!(m::JOBS_STALLED, "queue" => queue.to_owned(), "outcome" => "recovered")
            .increment(recovered);
    }
    if failed > 0 {
        metrics::counter!(m::JOBS_STALLED, "queue" => queue.to_owned(), "outcome" => "failed")
            .increment(failed);
    }
}

pub(super) fn rate_limited(queue: &str) {
    metrics::counter!(m::RATE_LIMIT_HITS, "queue" => queue.to_owned()).increment(1);
}
