//! One call for a Worker's finish path: reports the catalogue event of a [`FinishAction`].

use std::time::Duration;

use crate::store::FinishAction;

use super::events::{job_completed, job_failed, job_retried, JobTelemetry};

/// Reports how an attempt ended from the [`FinishAction`] the Worker is about to record, so
/// the finish path needs one telemetry call whatever the outcome:
///
/// | action | reported as |
/// |---|---|
/// | `Complete` | [`job_completed`] |
/// | `Fail` | [`job_failed`] with the `failedReason` |
/// | `Retry` | [`job_retried`], delay 0 |
/// | `Delay` with a reason (a retry with backoff) | [`job_retried`] with the delay |
/// | `Delay` without a reason (the processor asked for it) | nothing: not a failure |
/// | `RateLimit` | [`rate_limit_hit`](super::rate_limit_hit) with the ttl |
///
/// `duration` is the attempt's processing time ([`ActiveJob::elapsed`](super::ActiveJob)).
/// Call it when the action is decided; jobs whose lock was lost or that were cancelled by a
/// forced close have no action and are reported by dropping their `ActiveJob` only.
pub fn job_finished(job: &JobTelemetry<'_>, action: &FinishAction, duration: Duration) {
    match action {
        FinishAction::Complete { .. } => job_completed(job, duration),
        FinishAction::Fail { reason, .. } => job_failed(job, duration, reason),
        FinishAction::Retry { reason, .. } => job_retried(job, duration, Duration::ZERO, reason),
        FinishAction::Delay {
            delay,
            reason: Some(reason),
            ..
        } => job_retried(job, duration, *delay, reason),
        FinishAction::Delay { reason: None, .. } => {}
        FinishAction::RateLimit { ttl } => super::rate_limit_hit(job.queue, job.worker, *ttl),
    }
}
