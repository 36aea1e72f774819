//! One call for a Worker's finish path: reports the catalogue event of how an attempt ended.

use std::time::Duration;

use super::events::{job_completed, job_failed, job_retried, JobTelemetry};

/// How an attempt ended, as the Worker decided it (borrowed from the Worker's verdict, so
/// reporting allocates nothing).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum AttemptEnd<'a> {
    /// The processor returned a value and the job completed.
    Completed,
    /// The job failed for good, with this `failedReason`.
    Failed {
        /// `failedReason`.
        reason: &'a str,
    },
    /// The attempt failed and the job runs again after `delay` (zero: at once).
    Retried {
        /// `failedReason` of the attempt.
        reason: &'a str,
        /// The backoff.
        delay: Duration,
    },
    /// The processor asked for the job to be delayed this long: not a failure.
    Delayed(Duration),
    /// The processor reported a rate limit of this long.
    RateLimited(Duration),
}

/// Reports how an attempt ended, so the finish path needs one telemetry call whatever the
/// outcome:
///
/// | end | reported as |
/// |---|---|
/// | `Completed` | [`job_completed`] |
/// | `Failed` | [`job_failed`] with the `failedReason` |
/// | `Retried` | [`job_retried`] with the delay (0 for a retry at once) |
/// | `Delayed` (the processor asked for it) | nothing: not a failure |
/// | `RateLimited` | [`rate_limit_hit`](super::rate_limit_hit) with the ttl |
///
/// `duration` is the attempt's processing time ([`ActiveJob::elapsed`](super::ActiveJob)).
/// Call it when the end is decided; jobs whose lock was lost or that were cancelled by a
/// forced close have no end to record and are reported by dropping their `ActiveJob` only.
pub fn job_finished(job: &JobTelemetry<'_>, end: AttemptEnd<'_>, duration: Duration) {
    match end {
        AttemptEnd::Completed => job_completed(job, duration),
        AttemptEnd::Failed { reason } => job_failed(job, duration, &reason),
        AttemptEnd::Retried { reason, delay } => job_retried(job, duration, delay, &reason),
        AttemptEnd::Delayed(_) => {}
        AttemptEnd::RateLimited(ttl) => super::rate_limit_hit(job.queue, job.worker, ttl),
    }
}
