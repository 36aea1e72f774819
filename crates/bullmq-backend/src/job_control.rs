//! Job control on the seam: moving one job by hand, as Node's `job.retry()` and
//! `job.promote()` do, moving finished or delayed jobs in batches, as Node's
//! `queue.retryJobs()` and `queue.promoteJobs()` do, and renewing one job's lock
//! ([`JobControl`]).
//!
//! Each operation is one atomic step of the backend that checks where the job is before it
//! writes anything; a refusal (no such job, not in the expected state) is a typed outcome and
//! leaves the queue untouched.

use std::time::Duration;

use async_trait::async_trait;

use crate::capability::{unsupported, BackendName, Capability};
use crate::error::BackendResult;

/// Which finished set a retried job is taken from (Node `job.retry(state)`). Exhaustive:
/// Node retries from these two states only.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum RetryFrom {
    /// The `failed` set (Node's default).
    #[default]
    Failed,
    /// The `completed` set.
    Completed,
}

impl RetryFrom {
    /// The state's name as Node writes it (`failed` / `completed`), e.g. in the `waiting`
    /// event's `prev`.
    pub fn as_str(self) -> &'static str {
        match self {
            RetryFrom::Failed => "failed",
            RetryFrom::Completed => "completed",
        }
    }

    /// The job hash field holding the outcome that a retry clears (`failedReason` /
    /// `returnvalue`).
    pub fn outcome_field(self) -> &'static str {
        match self {
            RetryFrom::Failed => "failedReason",
            RetryFrom::Completed => "returnvalue",
        }
    }
}

/// What a retry resets besides the outcome (Node `RetryOptions`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct RetryReset {
    /// Clear `atm`, the attempts made (Node `resetAttemptsMade`, default false).
    pub attempts_made: bool,
    /// Clear `ats`, the attempts started (Node `resetAttemptsStarted`, default false).
    pub attempts_started: bool,
}

impl RetryReset {
    /// Resets nothing but the outcome.
    pub fn none() -> Self {
        Self::default()
    }

    /// Also clears the attempts made.
    #[must_use]
    pub fn attempts_made(mut self, reset: bool) -> Self {
        self.attempts_made = reset;
        self
    }

    /// Also clears the attempts started.
    #[must_use]
    pub fn attempts_started(mut self, reset: bool) -> Self {
        self.attempts_started = reset;
        self
    }
}

/// Outcome of a [`JobControl`] move. Exhaustive: every caller handles each refusal.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ControlOutcome {
    /// The job moved; the operation's event was emitted.
    Moved,
    /// No such job; nothing was written (Node -1).
    NotFound,
    /// The job is not in the state the operation needs; nothing was written (Node -3).
    NotInState,
}

/// Outcome of [`JobControl::extend_lock`]. Exhaustive: the two refusals mean different
/// things to the caller (the job was lost to the stalled check, or another worker has it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LockOutcome {
    /// The lock carried the token and now lives `duration` more; the job left `stalled`.
    Extended,
    /// No lock (it expired, the job finished, or the job does not exist); nothing written.
    Missing,
    /// The lock carries another token; nothing written.
    HeldByOther,
}

/// Moving jobs by hand.
#[async_trait]
#[allow(unused_variables)] // the default bodies decline without reading their arguments
pub trait JobControl: BackendName {
    /// Moves a job from `from` back to be processed again (Node `job.retry(state, opts)`):
    /// clears `finishedOn`, `processedOn` and the outcome field (plus `atm` / `ats` as
    /// `reset` says), queues it as its `priority` and `lifo` say (prioritized, or the front
    /// or back of `wait`, waking a worker unless the queue is paused or at its global
    /// concurrency), returns a flow child to its parent's pending dependencies, and emits
    /// `waiting` (prev = `from`).
    async fn retry_job(
        &self,
        job_id: &str,
        from: RetryFrom,
        reset: RetryReset,
    ) -> BackendResult<ControlOutcome> {
        unsupported(self, Capability::JobControl)
    }

    /// Moves a delayed job to be processed now (Node `job.promote()`): into `prioritized`
    /// when it has a priority, else to the back of `wait` as a new job (whatever its `lifo`); sets its `delay` to 0
    /// and emits `waiting` (prev `delayed`).
    async fn promote_job(&self, job_id: &str) -> BackendResult<ControlOutcome> {
        unsupported(self, Capability::JobControl)
    }

    /// Sets a job's `priority` (Node `job.changePriority({priority, lifo})`; 0 = none, already
    /// validated by the caller). A job in `prioritized` or `wait` is queued again: priority 0
    /// goes to `wait` (its back, or its front with `lifo`), a priority to `prioritized` (after
    /// the jobs of that priority, or ahead of them all with `lifo`). A job in another state
    /// only has its field changed. No event, as Node. Never [`ControlOutcome::NotInState`].
    async fn change_priority(
        &self,
        job_id: &str,
        priority: u32,
        lifo: bool,
    ) -> BackendResult<ControlOutcome> {
        unsupported(self, Capability::JobControl)
    }

    /// Reschedules a delayed job to be due `delay` from now (Node `job.changeDelay(delay)`):
    /// sets its `delay` field and emits `delayed` (jobId, delay = the due time in ms).
    async fn change_delay(&self, job_id: &str, delay: Duration) -> BackendResult<ControlOutcome> {
        unsupported(self, Capability::JobControl)
    }

    /// Deletes a job's log lines, keeping the newest `keep` (0: all go), as Node's
    /// `job.clearLogs(keepLogs)`. A job without logs (or no such job) is not an error.
    async fn clear_logs(&self, job_id: &str, keep: u64) -> BackendResult<()> {
        unsupported(self, Capability::Logs)
    }

    /// One batch of Node's `queue.retryJobs({state, count, timestamp})`: moves up to `count`
    /// (at least 1) jobs of `from` finished at or before `finished_by_ms`, oldest first, to
    /// the back of `wait` (whatever their priority or `lifo`, as Node's script), clearing
    /// `finishedOn`, `processedOn` and the outcome field (attempt counters are kept), making
    /// each flow child a pending dependency of its parent again, emitting `waiting` (prev =
    /// `from`) per job, and waking a worker unless the queue is paused or maxed. Returns how
    /// many moved: a full batch (`count`) means more may be left, as Node's cursor 1.
    async fn retry_jobs(
        &self,
        from: RetryFrom,
        count: u32,
        finished_by_ms: u64,
    ) -> BackendResult<u64> {
        unsupported(self, Capability::JobControl)
    }

    /// One batch of Node's `queue.promoteJobs({count})`: moves up to `count` (at least 1)
    /// delayed jobs, soonest due first, to the back of `wait` (whatever their priority, as
    /// Node's script; their `delay` field is left as it was), emitting `waiting` (prev
    /// `delayed`) per job. Returns how many moved, as [`JobControl::retry_jobs`].
    async fn promote_jobs(&self, count: u32) -> BackendResult<u64> {
        unsupported(self, Capability::JobControl)
    }

    /// Renews job `job_id`'s lock for `duration` if it carries `token` (Node
    /// `job.extendLock(token, duration)`), taking the job out of the stalled candidates.
    async fn extend_lock(
        &self,
        job_id: &str,
        token: &str,
        duration: Duration,
    ) -> BackendResult<LockOutcome> {
        unsupported(self, Capability::JobControl)
    }
}

#[async_trait]
impl<T: JobControl + ?Sized> JobControl for std::sync::Arc<T> {
    async fn retry_job(
        &self,
        job_id: &str,
        from: RetryFrom,
        reset: RetryReset,
    ) -> BackendResult<ControlOutcome> {
        (**self).retry_job(job_id, from, reset).await
    }

    async fn promote_job(&self, job_id: &str) -> BackendResult<ControlOutcome> {
        (**self).promote_job(job_id).await
    }

    async fn change_priority(
        &self,
        job_id: &str,
        priority: u32,
        lifo: bool,
    ) -> BackendResult<ControlOutcome> {
        (**self).change_priority(job_id, priority, lifo).await
    }

    async fn change_delay(&self, job_id: &str, delay: Duration) -> BackendResult<ControlOutcome> {
        (**self).change_delay(job_id, delay).await
    }

    async fn clear_logs(&self, job_id: &str, keep: u64) -> BackendResult<()> {
        (**self).clear_logs(job_id, keep).await
    }

    async fn retry_jobs(
        &self,
        from: RetryFrom,
        count: u32,
        finished_by_ms: u64,
    ) -> BackendResult<u64> {
        (**self).retry_jobs(from, count, finished_by_ms).await
    }

    async fn promote_jobs(&self, count: u32) -> BackendResult<u64> {
        (**self).promote_jobs(count).await
    }

    async fn extend_lock(
        &self,
        job_id: &str,
        token: &str,
        duration: Duration,
    ) -> BackendResult<LockOutcome> {
        (**self).extend_lock(job_id, token, duration).await
    }
}
