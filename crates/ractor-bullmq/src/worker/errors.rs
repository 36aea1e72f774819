//! Errors: the ones a processor returns to steer its job, and the Worker's own.

use std::time::Duration;

use crate::store::{FinishCode, StoreError};

/// Return this from a processor (through `anyhow`) to fail the job without further attempts,
/// as Node's `UnrecoverableError`. The message becomes `failedReason`.
///
/// ```
/// use ractor_bullmq::worker::UnrecoverableError;
/// fn check(input: i64) -> anyhow::Result<serde_json::Value> {
///     if input < 0 {
///         return Err(UnrecoverableError::new("negative input").into());
///     }
///     Ok(serde_json::json!(input))
/// }
/// assert!(check(-1).is_err());
/// ```
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct UnrecoverableError(pub String);

impl UnrecoverableError {
    /// An unrecoverable failure with this message.
    pub fn new(message: impl Into<String>) -> Self {
        Self(message.into())
    }
}

/// Return this from a processor to put the job back in `delayed` for `delay`, without counting
/// an attempt (Node: `job.moveToDelayed(...)` then `throw new DelayedError()`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("job delayed for {delay:?}")]
pub struct DelayedError {
    /// How long to wait before the job is ready again.
    pub delay: Duration,
}

impl DelayedError {
    /// Delay the job by `delay`.
    pub fn new(delay: Duration) -> Self {
        Self { delay }
    }
}

/// Return this from a processor after [`JobContext::move_to_waiting_children`] returned
/// `true`: the job is already in `waiting-children`, so the Worker records nothing for the
/// attempt (no finish, no `completed` / `failed` event or callback), stops renewing its lock and
/// frees its slot (Node: `await job.moveToWaitingChildren(token)` then
/// `throw new WaitingChildrenError()`).
///
/// Returned without a successful move (the context said `false`, or was not asked), the job is
/// still active under this worker: the Worker fails the attempt as an ordinary error (retried
/// while attempts remain) whose reason says so, rather than leave it active and unrenewed until
/// a stalled check, which is what Node's Worker does.
///
/// [`JobContext::move_to_waiting_children`]: super::JobContext::move_to_waiting_children
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, thiserror::Error)]
#[error("bullmq:movedToWaitingChildren")]
pub struct WaitingChildrenError;

/// Return this from a processor after [`JobContext::move_to_wait`] succeeded: the job is
/// already back in `wait`, so the Worker records nothing for the attempt, stops renewing its
/// lock and frees its slot (Node: `await job.moveToWait(token)` then
/// `throw new WaitingError()`). Returned without that move, the attempt fails as an ordinary
/// error, as for [`WaitingChildrenError`].
///
/// [`JobContext::move_to_wait`]: super::JobContext::move_to_wait
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, thiserror::Error)]
#[error("bullmq:movedToWait")]
pub struct WaitingError;

/// Return this from a processor when an upstream service rate-limited you: the job goes back
/// to the front of the wait list and the queue's `limiter` key is set for `ttl` (Node:
/// `worker.rateLimit(ttl)` then `throw Worker.RateLimitError()`); a `ttl` of zero leaves the
/// key as it is, for a limit already set with `Queue::rate_limit` (Node's plain
/// `throw Worker.RateLimitError()`). As in Node, this Worker then fetches nothing until the
/// key's remaining time has passed (at most 30 s, Node's `maximumRateLimitDelay` default),
/// with or without a `limiter` option; the key also holds back every worker — in any
/// language — that runs with a `limiter`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("rate limited for {ttl:?}")]
pub struct RateLimitError {
    /// How long the queue's limiter key holds rate-limited workers back (zero: leave the key
    /// as it is).
    pub ttl: Duration,
}

impl RateLimitError {
    /// Rate-limit the queue for `ttl`.
    pub fn new(ttl: Duration) -> Self {
        Self { ttl }
    }
}

/// What can go wrong starting, running or controlling a Worker.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum WorkerError {
    /// An option is out of range.
    #[error("invalid worker option `{option}`: {reason}")]
    InvalidOption {
        /// The option's Rust name.
        option: &'static str,
        /// What is wrong with it.
        reason: String,
    },
    /// An argument of a call is out of range; nothing was sent to the store.
    #[error("invalid argument `{argument}`: {reason}")]
    InvalidArgument {
        /// The argument's Rust name.
        argument: &'static str,
        /// What is wrong with it.
        reason: String,
    },
    /// The backend failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The actor could not be spawned.
    #[error("could not spawn the worker actor: {0}")]
    Spawn(#[source] ractor::SpawnErr),
    /// The worker has stopped (or is stopping) and cannot take the request.
    #[error("the worker is not running")]
    NotRunning,
    /// The store refused to record how a job ended (Node's `finishedErrors`; the message is
    /// Node's wording). What the Worker did next is Node's: a completion refused because of
    /// pending or failed children is recorded as a failure of the job instead; a job whose
    /// lock was lost is left to its new owner or to stalled recovery.
    #[error("{}", refusal_message(.job_id, *.code, .command))]
    FinishRefused {
        /// The job.
        job_id: String,
        /// What the store answered.
        code: FinishCode,
        /// The operation, in Node's words (`moveToFinished`, `retryJob`, `moveToDelayed`,
        /// `moveToWaitingChildren`, `moveJobFromActiveToWait`).
        command: &'static str,
    },
    /// A job id was taken from the queue but has no job hash (deleted under the queue by
    /// another client or by hand): there was nothing to run or to fail, and the id was removed
    /// from the queue's lists.
    #[error("job {job_id} has no job hash; its id was removed from the queue")]
    JobHashMissing {
        /// The id.
        job_id: String,
    },
    /// The progress watchdog stopped the Worker: it was waiting on the store (a call, the
    /// marker wait, or a backoff after failures) without one successful answer for
    /// `stalled_for`, more than [`WorkerOptions::progress_timeout`](super::WorkerOptions::progress_timeout).
    /// The Worker ends with this error so that its supervisor restarts it on fresh
    /// connections; its running jobs are left to stalled recovery.
    #[error("the worker made no progress for {stalled_for:?}; stopping it so it can be restarted")]
    NoProgress {
        /// How long it had been waiting on the store.
        stalled_for: Duration,
    },
    /// A bounded close did not hear from the Worker actor in time (it was killed instead, so
    /// its connections are released): the jobs it ran are left to stalled recovery, but which
    /// ones is not known.
    #[error("the worker did not close within {after:?}; it was killed")]
    CloseTimedOut {
        /// The bound.
        after: Duration,
    },
    /// A queue setting another client stored in the queue's `meta` is not what BullMQ writes
    /// there (`concurrency`, `max`, `duration` or `opts.maxLenEvents` that is not a
    /// non-negative integer). Nothing raises on it and jobs still finish: it is read as Node's
    /// scripts read it where that is defined (`max` not a number limits nothing, a negative
    /// `duration` counts as its absolute value), else as absent (the event stream's cap is then
    /// 10 000). Reported once per Worker and field.
    #[error("queue meta field `{field}` holds {value:?}, which is not a non-negative integer; it is read as Node reads it, or as unset")]
    InvalidQueueMeta {
        /// The `meta` field.
        field: String,
        /// What it holds.
        value: String,
    },
    /// The next iteration of a job scheduler could not be created when the Worker started its
    /// job `job_id` (the message starts as Node's Worker's). The job itself still runs.
    #[error("Failed to add repeatable job for next iteration: {reason}")]
    NextIteration {
        /// The started iteration.
        job_id: String,
        /// The job scheduler.
        scheduler_id: String,
        /// Why.
        reason: String,
    },
}

/// Refuses a lock time to live under 1 ms, which Redis would reject (`SET … PX 0` errors)
/// after the batch had begun; `argument` names the caller's argument.
pub(crate) fn check_lock_duration(
    argument: &'static str,
    duration: Duration,
) -> Result<(), WorkerError> {
    if duration < Duration::from_millis(1) {
        return Err(WorkerError::InvalidArgument {
            argument,
            reason: format!("a lock must live at least 1 ms, got {duration:?}"),
        });
    }
    Ok(())
}

/// Node 6.7.0's message for a refused finish (`finishedErrors`), so mixed fleets log one text.
pub(super) fn refusal_message(job_id: &str, code: FinishCode, command: &str) -> String {
    match code {
        FinishCode::MissingJob => format!("Missing key for job {job_id}. {command}"),
        FinishCode::MissingLock => format!("Missing lock for job {job_id}. {command}"),
        FinishCode::NotActive => format!("Job {job_id} is not in the active state. {command}"),
        FinishCode::PendingChildren => {
            format!("Job {job_id} has pending dependencies. {command}")
        }
        FinishCode::LockNotOwned => {
            format!("Lock mismatch for job {job_id}. Cmd {command} from active")
        }
        FinishCode::FailedChildren => format!(
            "Cannot complete job {job_id} because it has at least one failed child. {command}"
        ),
        FinishCode::Corrupted => format!("Job {job_id} has a corrupted hash. {command}"),
        other => format!(
            "Unknown code {} error for {job_id}. {command}",
            other.code()
        ),
    }
}
