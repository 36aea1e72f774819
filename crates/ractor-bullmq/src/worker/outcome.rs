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

impl JobOutcome {
    /// A job failed for good without running (a deferred failure, started too often, or a
    /// completion the store refused because of failed children), with `reason`.
    pub(crate) fn refused(reason: String) -> Self {
        Self::Unrecoverable {
            trace: format!("UnrecoverableError: {reason}"),
            reason,
        }
    }
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
                    trace: error_trace("UnrecoverableError", &error),
                }
            } else if let Some(e) = error.downcast_ref::<DelayedError>() {
                JobOutcome::Delayed(e.delay)
            } else if let Some(e) = error.downcast_ref::<RateLimitError>() {
                JobOutcome::RateLimited(e.ttl)
            } else {
                JobOutcome::Failed {
                    reason: error.to_string(),
                    trace: error_trace("Error", &error),
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

/// The `stacktrace` entry of a processor error: its message and cause chain, one per line, in
/// the `Kind: message` shape of Node's `err.stack`. The captured backtrace (present when
/// `RUST_BACKTRACE` is set) is left out on purpose: it runs to kilobytes per attempt, is stored in
/// every job hash and names async-runtime frames rather than the caller's code.
fn error_trace(kind: &str, error: &anyhow::Error) -> String {
    let mut trace = format!("{kind}: {error}");
    for cause in error.chain().skip(1) {
        trace.push_str("\n    caused by: ");
        trace.push_str(&cause.to_string());
    }
    trace
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

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;

    fn job(opts: &str, atm: u32, stacktrace: &str) -> Job {
        let fields: HashMap<String, String> = [
            ("name", "t"),
            ("data", "{}"),
            ("opts", opts),
            ("atm", &atm.to_string()),
            ("ats", &(atm + 1).to_string()),
            ("stacktrace", stacktrace),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        Job::decode("q", "1", &fields).expect("valid job")
    }

    #[test]
    fn error_trace_keeps_the_cause_chain_and_no_backtrace() {
        let error = anyhow::anyhow!("disk full").context("writing the invoice");
        let trace = error_trace("Error", &error);
        assert_eq!(
            trace,
            "Error: writing the invoice\n    caused by: disk full"
        );
    }

    #[test]
    fn classify_downcasts_the_processor_errors() {
        let ended = |e: anyhow::Error| classify(Ended::Returned(Err(e)), None);
        assert!(matches!(
            ended(UnrecoverableError::new("no").into()),
            JobOutcome::Unrecoverable { reason, .. } if reason == "no"
        ));
        assert_eq!(
            ended(DelayedError::new(Duration::from_secs(2)).into()),
            JobOutcome::Delayed(Duration::from_secs(2))
        );
        assert_eq!(
            ended(RateLimitError::new(Duration::from_millis(5)).into()),
            JobOutcome::RateLimited(Duration::from_millis(5))
        );
        assert!(
            matches!(ended(anyhow::anyhow!("boom")), JobOutcome::Failed { reason, .. } if reason == "boom")
        );
        assert_eq!(
            classify(
                Ended::Returned(Ok(Value::from(1))),
                Some(CancelReason::LockLost)
            ),
            JobOutcome::LockLost
        );
        assert_eq!(
            classify(Ended::Cancelled, Some(CancelReason::Shutdown)),
            JobOutcome::Cancelled
        );
    }

    #[test]
    fn failures_retry_until_attempts_run_out() {
        let opts = WorkerOptions::default();
        let failed = JobOutcome::Failed {
            reason: "x".into(),
            trace: "x-trace".into(),
        };
        let first = job(
            r#"{"attempts":3,"backoff":{"type":"exponential","delay":100}}"#,
            1,
            "",
        );
        match record(&first, &failed, &opts) {
            Some(FinishAction::Delay {
                delay,
                skip_attempt: false,
                ..
            }) => {
                assert_eq!(delay, Duration::from_millis(200));
            }
            other => panic!("expected a delayed retry, got {other:?}"),
        }
        let no_backoff = job(r#"{"attempts":3}"#, 0, "");
        assert!(matches!(
            record(&no_backoff, &failed, &opts),
            Some(FinishAction::Retry { lifo: false, .. })
        ));
        let last = job(r#"{"attempts":3}"#, 2, r#"["a","b"]"#);
        match record(&last, &failed, &opts) {
            Some(FinishAction::Fail {
                attempts: 3,
                stacktrace: Some(trace),
                ..
            }) => {
                assert_eq!(trace, r#"["a","b","x-trace"]"#);
            }
            other => panic!("expected a final failure, got {other:?}"),
        }
        assert_eq!(record(&last, &JobOutcome::LockLost, &opts), None);
    }

    #[test]
    fn stack_trace_limit_and_custom_backoff() {
        let opts = WorkerOptions::default().backoff_strategy("never", |_, _, _| None);
        let failed = JobOutcome::Failed {
            reason: "x".into(),
            trace: "t".into(),
        };
        let limited = job(
            r#"{"attempts":5,"stackTraceLimit":1,"backoff":{"type":"never"}}"#,
            0,
            r#"["old"]"#,
        );
        match record(&limited, &failed, &opts) {
            Some(FinishAction::Fail {
                stacktrace: Some(trace),
                ..
            }) => assert_eq!(trace, r#"["t"]"#),
            other => panic!("custom strategy said stop: {other:?}"),
        }
    }

    #[test]
    fn job_retention_wins_over_the_workers() {
        let worker = Some(KeepJobs::Count(10));
        assert_eq!(retention(None, worker.as_ref()), Retention::count(10));
        assert_eq!(
            retention(Some(&KeepJobs::Bool(true)), worker.as_ref()),
            Retention::REMOVE
        );
        assert_eq!(
            retention(Some(&KeepJobs::Bool(false)), worker.as_ref()),
            Retention::KEEP_ALL
        );
        assert_eq!(
            retention(Some(&KeepJobs::Count(-1)), None),
            Retention::KEEP_ALL
        );
        let policy = KeepJobs::Policy {
            age: Some(60),
            count: Some(5),
            limit: None,
        };
        assert_eq!(
            retention(Some(&policy), None),
            Retention::new(Some(5), Some(Duration::from_secs(60)), None)
        );
    }
}
