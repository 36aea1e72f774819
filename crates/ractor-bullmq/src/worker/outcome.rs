//! How a job ended, and what the Worker records for it.
//!
//! A job goes through stages: the job actor runs the processor and reports how it [`Ended`];
//! [`classify`] turns that into a [`JobOutcome`]; [`decide`] turns the outcome into the
//! [`Verdict`] the Worker records (complete, retry now, retry after backoff, fail, delay,
//! rate-limit, or nothing when the job is no longer ours). The verdict is built once and is
//! the one value everything after reads: the finish call ([`Verdict::action`]), the callbacks
//! and telemetry ([`Verdict::attempt_end`]). Jobs that fail without running (a hash that
//! cannot be read, a deferred failure, started too often, a completion refused for failed
//! children) go through the same constructors ([`JobOutcome::unrecoverable`], [`Verdict::unreadable`]).
//!
//! # Attempts
//!
//! Two counters of the job hash, and only these names for them in the Worker and telemetry:
//! **attempts made** (`atm`, [`Job::attempts_made`]) counts attempts that ended and were
//! recorded as failed or retried; **attempts started** (`ats`, [`Job::attempts_started`])
//! counts fetches into active, including attempts that stalled or were cut short. The number of
//! the running attempt is attempts made + 1 (`JobContext::attempt`, telemetry's `attempt`
//! field). The job's `attempts` option is its **maximum attempts**.

use std::time::Duration;

use bullmq_protocol::backoff::{backoff_delay, BackoffDelay};
use bullmq_protocol::KeepJobs;
use serde_json::Value;

use super::context::Moved;
use super::errors::{
    DelayedError, RateLimitError, UnrecoverableError, WaitingChildrenError, WaitingError,
};
use super::options::WorkerOptions;
use super::Job;
use crate::store::{FinishAction, Retention};
use crate::telemetry::AttemptEnd;

/// Why a running job's cancellation token was cancelled.
///
/// [`LockLost`](Self::LockLost) and [`Shutdown`](Self::Shutdown) are *hard*: the job is no
/// longer this worker's to record, its processor is dropped at once and the job is left to
/// stalled recovery. [`Requested`](Self::Requested) and [`TimedOut`](Self::TimedOut) are
/// *soft*: the processor gets the worker's `cancel_grace` to return, then the attempt fails
/// with the cancellation's message (retried while attempts remain), whatever it returned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum CancelReason {
    /// Its lock could not be renewed: another worker may own the job now.
    LockLost,
    /// The worker was closed with `close_force`.
    Shutdown,
    /// `WorkerHandle::cancel_job` / `cancel_all_jobs` (Node `worker.cancelJob` /
    /// `cancelAllJobs`).
    Requested,
    /// The attempt ran longer than its timeout (`WorkerOptions::job_timeout`).
    TimedOut,
}

impl CancelReason {
    /// Whether the job is no longer this worker's to record (the processor is dropped at once).
    pub fn is_hard(self) -> bool {
        matches!(self, Self::LockLost | Self::Shutdown)
    }

    /// Whether a cancellation for `self` replaces one already recorded for `current`: the first
    /// reason sticks, except that a hard reason replaces a soft one (a job cancelled on request
    /// whose lock is then lost is no longer ours to fail).
    pub(crate) fn replaces(self, current: Option<CancelReason>) -> bool {
        match current {
            None => true,
            Some(current) => self.is_hard() && !current.is_hard(),
        }
    }
}

/// A cancellation as the context records it: why, and for a soft one the `failedReason` the
/// attempt fails with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Cancellation {
    /// Why.
    pub(crate) reason: CancelReason,
    /// What the failed attempt records (`failedReason`); unused for hard reasons.
    pub(crate) message: String,
}

impl Cancellation {
    /// The default message of a cancellation requested without a reason.
    pub(crate) const DEFAULT_REQUESTED: &'static str = "job cancelled";

    /// A cancellation for a hard reason (no message is recorded).
    pub(crate) fn hard(reason: CancelReason) -> Self {
        Self {
            reason,
            message: String::new(),
        }
    }

    /// `cancel_job(id, reason)`: fails the attempt with `reason`, or [`Self::DEFAULT_REQUESTED`].
    pub(crate) fn requested(reason: Option<&str>) -> Self {
        Self {
            reason: CancelReason::Requested,
            message: reason
                .filter(|r| !r.is_empty())
                .unwrap_or(Self::DEFAULT_REQUESTED)
                .to_string(),
        }
    }

    /// The attempt outran its `timeout`.
    pub(crate) fn timed_out(timeout: Duration) -> Self {
        Self {
            reason: CancelReason::TimedOut,
            message: timed_out_reason(timeout),
        }
    }
}

/// `failedReason` of an attempt that outran its timeout.
pub(crate) fn timed_out_reason(timeout: Duration) -> String {
    format!("job timed out after {} ms", timeout.as_millis())
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
    /// The processor moved the job to `waiting-children` itself
    /// (`JobContext::move_to_waiting_children`, then [`WaitingChildrenError`]): nothing to
    /// record, it runs again once its children are done.
    MovedToWaitingChildren,
    /// The processor moved the job back to `wait` itself (`JobContext::move_to_wait`, then
    /// [`WaitingError`]): nothing to record, no attempt counted.
    MovedToWait,
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
    /// A failure the Worker decided itself, without running the job or after it ran (a
    /// deferred failure, started too often, a completion refused for failed children): failed
    /// for good with `reason`, traced as an `UnrecoverableError`.
    pub(crate) fn unrecoverable(reason: String) -> Self {
        Self::Unrecoverable {
            trace: format!("UnrecoverableError: {reason}"),
            reason,
        }
    }

    /// A failure the Worker decided itself that is retried while attempts remain (a
    /// completion refused for pending children), traced as an `Error`.
    pub(crate) fn failed(reason: String) -> Self {
        Self::Failed {
            trace: format!("Error: {reason}"),
            reason,
        }
    }
}

/// Why a [`WaitingChildrenError`] or [`WaitingError`] returned without the move it announces
/// fails the attempt.
pub(crate) fn unmoved_reason(error: &str, call: &str) -> String {
    format!(
        "{error} returned, but the job was not moved (JobContext::{call} was not called or did \
         not move it): the job is still active, so this attempt fails"
    )
}

/// Turns how a job actor ended into a [`JobOutcome`]. A move the processor made through its
/// context (`moved`) wins over everything: the job is no longer this worker's, whatever the
/// processor returned or however it was cut short afterwards (its lock, released by the move,
/// cannot be renewed). Then a cancellation reason recorded by the worker wins over whatever the
/// processor returned afterwards.
pub(crate) fn classify(
    ended: Ended,
    cancelled: Option<&Cancellation>,
    moved: Option<Moved>,
) -> JobOutcome {
    match moved {
        Some(Moved::WaitingChildren) => return JobOutcome::MovedToWaitingChildren,
        Some(Moved::Wait) => return JobOutcome::MovedToWait,
        None => {}
    }
    if let Some(cancellation) = cancelled {
        match cancellation.reason {
            CancelReason::LockLost => return JobOutcome::LockLost,
            CancelReason::Shutdown => return JobOutcome::Cancelled,
            // Soft: the attempt fails with the cancellation's message, whether the processor
            // honoured the token (and returned its own error), ignored it (and returned a
            // value), or was dropped after the grace period. Retried while attempts remain.
            CancelReason::Requested => {
                return JobOutcome::Failed {
                    trace: format!("CancelledError: {}", cancellation.message),
                    reason: cancellation.message.clone(),
                };
            }
            CancelReason::TimedOut => {
                return JobOutcome::Failed {
                    trace: format!("TimeoutError: {}", cancellation.message),
                    reason: cancellation.message.clone(),
                };
            }
        }
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
            } else if error.downcast_ref::<WaitingChildrenError>().is_some() {
                JobOutcome::failed(unmoved_reason(
                    "WaitingChildrenError",
                    "move_to_waiting_children",
                ))
            } else if error.downcast_ref::<WaitingError>().is_some() {
                JobOutcome::failed(unmoved_reason("WaitingError", "move_to_wait"))
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

/// The outcome of a failure reported by hand (Node's `job.moveToFailed(err)`): failed for
/// good for an [`UnrecoverableError`], else failed and retried while attempts remain. Unlike a
/// processor's error, [`DelayedError`] and [`RateLimitError`] are plain failures here, as in
/// Node, whose `moveToFailed` looks only for `UnrecoverableError`.
pub(crate) fn failure(error: &anyhow::Error) -> JobOutcome {
    if let Some(e) = error.downcast_ref::<UnrecoverableError>() {
        JobOutcome::Unrecoverable {
            reason: e.0.clone(),
            trace: error_trace("UnrecoverableError", error),
        }
    } else {
        JobOutcome::Failed {
            reason: error.to_string(),
            trace: error_trace("Error", error),
        }
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

/// What the Worker records for a job that ended: built once, by [`decide`] or
/// [`Verdict::unreadable`], then read by the finish call, the callbacks and telemetry.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Verdict {
    /// Completed with the processor's value.
    Completed {
        /// The processor's value (`returnvalue`).
        value: Value,
        /// Retention of the `completed` set.
        keep: Retention,
    },
    /// Failed for good.
    Failed {
        /// `failedReason`.
        reason: String,
        /// `stacktrace` JSON, trimmed to `stackTraceLimit`.
        stacktrace: Option<String>,
        /// The job's maximum attempts (its `attempts` option), for `retries-exhausted`.
        max_attempts: u32,
        /// Retention of the `failed` set.
        keep: Retention,
    },
    /// Failed, and runs again `after` this long (zero: at once, back to wait).
    Retried {
        /// `failedReason` of this attempt.
        reason: String,
        /// `stacktrace` JSON.
        stacktrace: String,
        /// The backoff.
        after: Duration,
        /// The job's `lifo` option (for a retry at once).
        lifo: bool,
    },
    /// The processor asked for the job to be delayed: not a failure, no attempt counted.
    Delayed(Duration),
    /// The processor reported a rate limit: the job goes back to wait.
    RateLimited(Duration),
}

impl Verdict {
    /// A job failed for good without running: `failedReason` = `reason`, no stacktrace, kept.
    /// For a fetched job that cannot be read, which has no options to consult.
    pub(crate) fn unreadable(reason: String) -> Self {
        Self::Failed {
            reason,
            stacktrace: None,
            max_attempts: 0,
            keep: Retention::default(),
        }
    }

    /// The store transition that records this verdict.
    pub(crate) fn action(&self) -> FinishAction {
        match self {
            Self::Completed { value, keep } => FinishAction::Complete {
                returnvalue: value.to_string(),
                keep: *keep,
            },
            Self::Failed {
                reason,
                stacktrace,
                max_attempts,
                keep,
            } => FinishAction::Fail {
                reason: reason.clone(),
                stacktrace: stacktrace.clone(),
                attempts: *max_attempts,
                keep: *keep,
            },
            Self::Retried {
                reason,
                stacktrace,
                after,
                lifo,
            } if after.is_zero() => FinishAction::Retry {
                reason: reason.clone(),
                stacktrace: Some(stacktrace.clone()),
                lifo: *lifo,
            },
            Self::Retried {
                reason,
                stacktrace,
                after,
                ..
            } => FinishAction::Delay {
                delay: *after,
                reason: Some(reason.clone()),
                stacktrace: Some(stacktrace.clone()),
                skip_attempt: false,
            },
            Self::Delayed(delay) => FinishAction::Delay {
                delay: *delay,
                reason: None,
                stacktrace: None,
                skip_attempt: true,
            },
            Self::RateLimited(ttl) => FinishAction::RateLimit { ttl: *ttl },
        }
    }

    /// How the attempt ended, for telemetry.
    pub(crate) fn attempt_end(&self) -> AttemptEnd<'_> {
        match self {
            Self::Completed { .. } => AttemptEnd::Completed,
            Self::Failed { reason, .. } => AttemptEnd::Failed { reason },
            Self::Retried { reason, after, .. } => AttemptEnd::Retried {
                reason,
                delay: *after,
            },
            Self::Delayed(delay) => AttemptEnd::Delayed(*delay),
            Self::RateLimited(ttl) => AttemptEnd::RateLimited(*ttl),
        }
    }

    /// The store command Node's Worker would name in an error about this verdict.
    pub(crate) fn command(&self) -> &'static str {
        match self {
            Self::Retried { after, .. } if after.is_zero() => "retryJob",
            Self::Retried { .. } | Self::Delayed(_) => "moveToDelayed",
            Self::RateLimited(_) => "moveJobFromActiveToWait",
            Self::Completed { .. } | Self::Failed { .. } => "moveToFinished",
        }
    }
}

/// Decides what to record for a job that ended with `outcome`. `None`: leave the job alone
/// (it is no longer ours, or stalled recovery will bring it back).
pub(crate) fn decide(job: &Job, outcome: JobOutcome, opts: &WorkerOptions) -> Option<Verdict> {
    match outcome {
        JobOutcome::Completed(value) => Some(Verdict::Completed {
            value,
            keep: retention(
                job.opts().remove_on_complete.as_ref(),
                opts.remove_on_complete.as_ref(),
            ),
        }),
        JobOutcome::Unrecoverable { reason, trace } => {
            let stack = stacktrace(job, &trace);
            Some(fail(job, reason, stack, opts))
        }
        JobOutcome::Failed { reason, trace } => Some(retry_or_fail(job, reason, &trace, opts)),
        JobOutcome::Panicked { message } => {
            let trace = format!("panic: {message}");
            Some(retry_or_fail(job, message, &trace, opts))
        }
        JobOutcome::Delayed(delay) => Some(Verdict::Delayed(delay)),
        JobOutcome::RateLimited(ttl) => Some(Verdict::RateLimited(ttl)),
        JobOutcome::LockLost
        | JobOutcome::Cancelled
        | JobOutcome::MovedToWaitingChildren
        | JobOutcome::MovedToWait => None,
    }
}

/// Fails `job` for good with `reason` and its stacktrace JSON.
fn fail(job: &Job, reason: String, stacktrace: String, opts: &WorkerOptions) -> Verdict {
    Verdict::Failed {
        reason,
        stacktrace: Some(stacktrace),
        max_attempts: job.opts().attempts.unwrap_or(0),
        keep: retention(
            job.opts().remove_on_fail.as_ref(),
            opts.remove_on_fail.as_ref(),
        ),
    }
}

fn retry_or_fail(job: &Job, reason: String, trace: &str, opts: &WorkerOptions) -> Verdict {
    let stack = stacktrace(job, trace);
    let max_attempts = job.opts().attempts.unwrap_or(0);
    let attempts_made = job.attempts_made();
    let started_too_often = opts
        .max_started_attempts
        .is_some_and(|max| max > 0 && max <= job.attempts_started());
    if attempts_made + 1 >= max_attempts || started_too_often {
        return fail(job, reason, stack, opts);
    }
    let delay = match &job.opts().backoff {
        None => Some(Duration::ZERO),
        Some(backoff) => match backoff_delay(backoff, attempts_made + 1, rand::random::<f64>()) {
            BackoffDelay::After(delay) => Some(delay),
            BackoffDelay::Custom(name) => match opts.backoff_strategies.get(&name) {
                Some(strategy) => strategy(attempts_made + 1, job, &reason),
                None => {
                    let reason = format!("unknown backoff strategy {name}: register it with WorkerOptions::backoff_strategy");
                    return fail(job, reason, stack, opts);
                }
            },
        },
    };
    match delay {
        None => fail(job, reason, stack, opts),
        Some(after) => Verdict::Retried {
            reason,
            stacktrace: stack,
            after,
            lifo: job.opts().lifo.unwrap_or(false),
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
        let ended = |e: anyhow::Error| classify(Ended::Returned(Err(e)), None, None);
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
                Some(&Cancellation::hard(CancelReason::LockLost)),
                None
            ),
            JobOutcome::LockLost
        );
        assert_eq!(
            classify(
                Ended::Cancelled,
                Some(&Cancellation::hard(CancelReason::Shutdown)),
                None
            ),
            JobOutcome::Cancelled
        );
    }

    #[test]
    fn soft_cancellations_fail_the_attempt_with_their_message_whatever_the_processor_did() {
        let requested = Cancellation::requested(Some("user asked"));
        for ended in [
            Ended::Returned(Ok(Value::from(1))),
            Ended::Returned(Err(anyhow::anyhow!("aborted"))),
            Ended::Cancelled,
        ] {
            assert_eq!(
                classify(ended, Some(&requested), None),
                JobOutcome::Failed {
                    reason: "user asked".into(),
                    trace: "CancelledError: user asked".into()
                }
            );
        }
        assert_eq!(
            Cancellation::requested(None).message,
            Cancellation::DEFAULT_REQUESTED
        );
        assert_eq!(
            Cancellation::requested(Some("")).message,
            Cancellation::DEFAULT_REQUESTED
        );
        let timed_out = Cancellation::timed_out(Duration::from_millis(1500));
        assert_eq!(timed_out.message, "job timed out after 1500 ms");
        assert!(matches!(
            classify(Ended::Cancelled, Some(&timed_out), None),
            JobOutcome::Failed { reason, trace }
                if reason == "job timed out after 1500 ms" && trace.starts_with("TimeoutError: ")
        ));
    }

    #[test]
    fn the_first_cancel_reason_sticks_unless_a_hard_one_follows_a_soft_one() {
        use CancelReason::*;
        assert!(Requested.replaces(None));
        assert!(!TimedOut.replaces(Some(Requested)));
        assert!(!Requested.replaces(Some(TimedOut)));
        assert!(LockLost.replaces(Some(Requested)));
        assert!(Shutdown.replaces(Some(TimedOut)));
        assert!(!Shutdown.replaces(Some(LockLost)));
        assert!(!Requested.replaces(Some(Shutdown)));
        assert!(LockLost.is_hard() && Shutdown.is_hard());
        assert!(!Requested.is_hard() && !TimedOut.is_hard());
    }

    #[test]
    fn a_move_made_through_the_context_wins_and_records_nothing() {
        let moved = |ended, cancelled, moved| classify(ended, cancelled, Some(moved));
        assert_eq!(
            moved(
                Ended::Returned(Err(WaitingChildrenError.into())),
                None,
                Moved::WaitingChildren
            ),
            JobOutcome::MovedToWaitingChildren
        );
        assert_eq!(
            moved(Ended::Returned(Err(WaitingError.into())), None, Moved::Wait),
            JobOutcome::MovedToWait
        );
        // The move released the lock: a renewal that failed afterwards is expected.
        assert_eq!(
            moved(
                Ended::Cancelled,
                Some(&Cancellation::hard(CancelReason::LockLost)),
                Moved::Wait
            ),
            JobOutcome::MovedToWait
        );
        let opts = WorkerOptions::default();
        let job = job(r#"{"attempts":3}"#, 0, "");
        assert_eq!(
            decide(&job, JobOutcome::MovedToWaitingChildren, &opts),
            None
        );
        assert_eq!(decide(&job, JobOutcome::MovedToWait, &opts), None);
    }

    #[test]
    fn waiting_errors_without_a_move_fail_the_attempt() {
        let ended = |e: anyhow::Error| classify(Ended::Returned(Err(e)), None, None);
        match ended(WaitingChildrenError.into()) {
            JobOutcome::Failed { reason, .. } => {
                assert!(
                    reason.starts_with("WaitingChildrenError returned, but the job was not moved")
                );
                assert!(reason.contains("move_to_waiting_children"));
            }
            other => panic!("expected a failure, got {other:?}"),
        }
        match ended(WaitingError.into()) {
            JobOutcome::Failed { reason, .. } => assert!(reason.contains("move_to_wait")),
            other => panic!("expected a failure, got {other:?}"),
        }
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
        let delayed = decide(&first, failed.clone(), &opts).expect("a verdict");
        match delayed.action() {
            FinishAction::Delay {
                delay,
                skip_attempt: false,
                ..
            } => {
                assert_eq!(delay, Duration::from_millis(200));
            }
            other => panic!("expected a delayed retry, got {other:?}"),
        }
        assert_eq!(
            delayed.attempt_end(),
            AttemptEnd::Retried {
                reason: "x",
                delay: Duration::from_millis(200)
            }
        );
        let no_backoff = job(r#"{"attempts":3}"#, 0, "");
        assert!(matches!(
            decide(&no_backoff, failed.clone(), &opts).map(|v| v.action()),
            Some(FinishAction::Retry { lifo: false, .. })
        ));
        let last = job(r#"{"attempts":3}"#, 2, r#"["a","b"]"#);
        match decide(&last, failed, &opts).map(|v| v.action()) {
            Some(FinishAction::Fail {
                attempts: 3,
                stacktrace: Some(trace),
                ..
            }) => {
                assert_eq!(trace, r#"["a","b","x-trace"]"#);
            }
            other => panic!("expected a final failure, got {other:?}"),
        }
        assert_eq!(decide(&last, JobOutcome::LockLost, &opts), None);
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
        match decide(&limited, failed, &opts).map(|v| v.action()) {
            Some(FinishAction::Fail {
                stacktrace: Some(trace),
                ..
            }) => assert_eq!(trace, r#"["t"]"#),
            other => panic!("custom strategy said stop: {other:?}"),
        }
    }

    #[test]
    fn refusals_and_unreadable_jobs_fail_for_good() {
        let opts = WorkerOptions::default();
        let refused = JobOutcome::unrecoverable("job started more than allowable limit".into());
        let job = job(r#"{"attempts":3}"#, 0, "");
        match decide(&job, refused, &opts) {
            Some(Verdict::Failed {
                reason,
                stacktrace: Some(trace),
                max_attempts: 3,
                ..
            }) => {
                assert_eq!(reason, "job started more than allowable limit");
                assert_eq!(
                    trace,
                    r#"["UnrecoverableError: job started more than allowable limit"]"#
                );
            }
            other => panic!("expected a failure, got {other:?}"),
        }
        let unreadable = Verdict::unreadable("corrupted job hash: name is missing".into());
        assert_eq!(
            unreadable.action(),
            FinishAction::Fail {
                reason: "corrupted job hash: name is missing".into(),
                stacktrace: None,
                attempts: 0,
                keep: Retention::KEEP_ALL,
            }
        );
        assert_eq!(unreadable.command(), "moveToFinished");
    }

    #[test]
    fn verdicts_map_to_store_actions_and_telemetry() {
        let delayed = Verdict::Delayed(Duration::from_secs(1));
        assert_eq!(
            delayed.action(),
            FinishAction::Delay {
                delay: Duration::from_secs(1),
                reason: None,
                stacktrace: None,
                skip_attempt: true
            }
        );
        assert_eq!(
            delayed.attempt_end(),
            AttemptEnd::Delayed(Duration::from_secs(1))
        );
        assert_eq!(delayed.command(), "moveToDelayed");
        let limited = Verdict::RateLimited(Duration::from_millis(5));
        assert_eq!(
            limited.action(),
            FinishAction::RateLimit {
                ttl: Duration::from_millis(5)
            }
        );
        assert_eq!(limited.command(), "moveJobFromActiveToWait");
        let completed = Verdict::Completed {
            value: serde_json::json!({"n": 1}),
            keep: Retention::REMOVE,
        };
        assert_eq!(
            completed.action(),
            FinishAction::Complete {
                returnvalue: r#"{"n":1}"#.into(),
                keep: Retention::REMOVE
            }
        );
        assert_eq!(completed.attempt_end(), AttemptEnd::Completed);
        let retried = Verdict::Retried {
            reason: "x".into(),
            stacktrace: "[]".into(),
            after: Duration::ZERO,
            lifo: true,
        };
        assert_eq!(retried.command(), "retryJob");
        assert!(matches!(
            retried.action(),
            FinishAction::Retry { lifo: true, .. }
        ));
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
