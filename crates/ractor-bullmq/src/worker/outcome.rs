//! How a job ended, and what that means in Redis.
//!
//! A job goes through stages: the job actor runs the processor and reports how it [`Ended`];
//! [`classify`] turns that into a [`JobOutcome`]; [`record`] decides the Redis transition
//! (complete, retry now, retry after backoff, fail, delay, rate-limit, or nothing when the job
//! is no longer ours) as a [`FinishAction`].

use std::time::Duration;

use bullmq_protocol::backoff::{backoff_delay, BackoffDelay};
use bullmq_protocol::KeepJobs;
use serde_json::Value;

use super::errors::{DelayedError, RateLimitError, UnrecoverableError};
use super::options::WorkerOptions;
use super::Job;
use crate::store::{FinishAction, Retention};

/// Why a running job's cancellation token was cancelled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum CancelReason {
    /// Its lock could not be renewed: another worker may own the job now.
    LockLost,
    /// The worker was closed with `close_force`.
    Shutdown,
}

/// How a job actor's run ended, before interpretation.
#[derive(Debug)]
pub(crate) enum Ended {
    /// The processor returned.
    Returned(anyhow::Result<Value>),
    /// The processor panicked with this message.
    Panicked(String),
    /// The cancellation token fired before the processor returned.
    Cancelled,
}

/// The classified end of one job.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum JobOutcome {
    /// The processor returned a value.
    Completed(Value),
    /// The processor returned an error (retried when attempts remain).
    Failed {
        /// The error message (`failedReason`).
        reason: String,
        /// The error with its chain, as stored in `stacktrace`.
        trace: String,
    },
    /// The processor returned [`UnrecoverableError`], or the job could not run at all
    /// (corrupted hash, deferred failure, started too often): failed without retry.
    Unrecoverable {
        /// `failedReason`.
        reason: String,
        /// What goes to `stacktrace`.
        trace: String,
    },
    /// The processor asked for the job to be delayed ([`DelayedError`]).
    Delayed(Duration),
    /// The processor reported a rate limit ([`RateLimitError`]).
    RateLimited(Duration),
    /// The job's lock was lost: the job is left to its new owner or to stalled recovery.
    LockLost,
    /// The worker was force-closed: the job is left to stalled recovery.
    Cancelled,
    /// The processor panicked (handled as a failure, retried when attempts remain).
    Panicked {
        /// The panic message (`failedReason`).
        message: String,
    },
}

/// Turns how a job actor ended into a [`JobOutcome`]. A cancellation reason recorded by the
/// worker wins over whatever the processor returned afterwards.
pub(crate) fn classify(ended: Ended, cancelled: Option<CancelReason>) -> JobOutcome {
    match cancelled {
        Some(CancelReason::LockLost) => return JobOutcome::LockLost,
        Some(CancelReason::Shutdown) => return JobOutcome::Cancelled,
        None => {}
    }
    match ended {
        Ended::Returned(Ok(value)) => JobOutcome::Completed(value),
        Ended::Returned(Err(error)) => {
            if let Some(e) = error.downcast_ref::<UnrecoverableError>() {
                JobOutcome::Unrecoverable {
                    reason: e.0.clone(),
                    trace: format!("UnrecoverableError: {error:?}"),
                }
            } else if let Some(e) = error.downcast_ref::<DelayedError>() {
                JobOutcome::Delayed(e.delay)
            } else if let Some(e) = error.downcast_ref::<RateLimitError>() {
                JobOutcome::RateLimited(e.ttl)
            } else {
                JobOutcome::Failed {
                    reason: error.to_string(),
                    trace: format!("{error:?}"),
                }
            }
        }
        Ended::Panicked(message) => JobOutcome::Panicked { message },
        // Cancelled without a recorded reason only happens when the worker is going away.
        Ended::Cancelled => JobOutcome::Cancelled,
    }
}

/// Job-level retention wins over the worker's; neither keeps everything.
pub(crate) fn retention(job: Option<&KeepJobs>, worker: Option<&KeepJobs>) -> Retention {
    match job.or(worker) {
        None | Some(KeepJobs::Bool(false)) => Retention::KEEP_ALL,
        Some(KeepJobs::Bool(true)) => Retention::REMOVE,
        Some(KeepJobs::Count(n)) if *n < 0 => Retention::KEEP_ALL,
        Some(KeepJobs::Count(n)) => Retention::count(u64::try_from(*n).unwrap_or(0)),
        Some(KeepJobs::Policy { age, count, limit }) => Retention::new(
            count.and_then(|c| u64::try_from(c).ok()),
            age.map(Duration::from_secs),
            *limit,
        ),
    }
}

/// The job's stacktrace after this failure: the previous traces plus `trace`, trimmed to the
/// job's `stackTraceLimit` (0 keeps none), as JSON.
fn stacktrace(job: &Job, trace: &str) -> String {
    let mut traces = job.stacktrace().to_vec();
    traces.push(trace.to_string());
    match job.opts().stack_trace_limit {
        Some(0) => traces.clear(),
        Some(limit) => {
            let limit = usize::try_from(limit).unwrap_or(usize::MAX);
            if traces.len() > limit {
                traces.drain(..traces.len() - limit);
            }
        }
        None => {}
    }
    serde_json::to_string(&traces).unwrap_or_else(|_| "[]".to_string())
}

/// Decides the Redis transition for a job that ended with `outcome`. `None`: leave the job
/// alone (it is no longer ours, or stalled recovery will bring it back).
pub(crate) fn record(
    job: &Job,
    outcome: &JobOutcome,
    opts: &WorkerOptions,
) -> Option<FinishAction> {
    let attempts = job.opts().attempts.unwrap_or(0);
    let fail = |reason: &str, trace: Option<String>| FinishAction::Fail {
        reason: reason.to_string(),
        stacktrace: trace,
        attempts,
        keep: retention(
            job.opts().remove_on_fail.as_ref(),
            opts.remove_on_fail.as_ref(),
        ),
    };
    match outcome {
        JobOutcome::Completed(value) => Some(FinishAction::Complete {
            returnvalue: value.to_string(),
            keep: retention(
                job.opts().remove_on_complete.as_ref(),
                opts.remove_on_complete.as_ref(),
            ),
        }),
        JobOutcome::Unrecoverable { reason, trace } => {
            Some(fail(reason, Some(stacktrace(job, trace))))
        }
        JobOutcome::Failed { reason, trace } => Some(retry_or_fail(job, reason, trace, opts, fail)),
        JobOutcome::Panicked { message } => {
            let trace = format!("panic: {message}");
            Some(retry_or_fail(job, message, &trace, opts, fail))
        }
        JobOutcome::Delayed(delay) => Some(FinishAction::Delay {
            delay: *delay,
            reason: None,
            stacktrace: None,
            skip_attempt: true,
        }),
        JobOutcome::RateLimited(ttl) => Some(FinishAction::RateLimit { ttl: *ttl }),
        JobOutcome::LockLost | JobOutcome::Cancelled => None,
    }
}

fn retry_or_fail(
    job: &Job,
    reason: &str,
    trace: &str,
    opts: &WorkerOptions,
    fail: impl Fn(&str, Option<String>) -> FinishAction,
) -> FinishAction {
    let stack = stacktrace(job, trace);
    let attempts = job.opts().attempts.unwrap_or(0);
    let made = job.attempts_made();
    let started_too_often = opts
        .max_started_attempts
        .is_some_and(|max| max > 0 && max <= job.attempts_started());
    if made + 1 >= attempts || started_too_often {
        return fail(reason, Some(stack));
    }
    let delay = match &job.opts().backoff {
        None => Some(Duration::ZERO),
        Some(backoff) => match backoff_delay(backoff, made + 1, rand::random::<f64>()) {
            BackoffDelay::After(delay) => Some(delay),
            BackoffDelay::Custom(name) => match opts.backoff_strategies.get(&name) {
                Some(strategy) => strategy(made + 1, job, reason),
                None => {
                    return fail(
                        &format!("unknown backoff strategy {name}: register it with WorkerOptions::backoff_strategy"),
                        Some(stack),
                    )
                }
            },
        },
    };
    match delay {
        None => fail(reason, Some(stack)),
        Some(delay) if delay.is_zero() => FinishAction::Retry {
            reason: reason.to_string(),
            stacktrace: Some(stack),
            lifo: job.opts().lifo.unwrap_or(false),
        },
        Some(delay) => FinishAction::Delay {
            delay,
            reason: Some(reason.to_string()),
            stacktrace: Some(stack),
            skip_attempt: false,
        },
    }
}
