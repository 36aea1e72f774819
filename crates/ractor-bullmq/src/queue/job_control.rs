//! Job control from code: retry a finished job, promote a delayed one, and ask where a job
//! is (Node's `job.retry()`, `job.promote()`, `job.isCompleted()` …), retry or promote jobs in
//! bulk (`queue.retryJobs()`, `queue.promoteJobs()`) and renew a lock (`job.extendLock()`).
//! Each per-job method here takes the job's id; a [`Job`] the queue read has the same
//! actions without the id ([`crate::job::actions`]), which call these.
//!
//! [`Job`]: crate::Job

use std::time::{Duration, UNIX_EPOCH};

use bullmq_backend::{ControlOutcome, LockOutcome, RetryFrom, RetryReset};
use bullmq_protocol::score::MAX_PRIORITY;
use bullmq_protocol::state::JobState;
use bullmq_protocol::ValidationError;

use super::{add, PromoteJobsOptions, Queue, RetryJobsOptions};
use crate::error::{QueueError, Result};

impl Queue {
    /// Moves job `job_id` from `from` (failed or completed) back to be processed (Node
    /// `job.retry(state, opts)`): its outcome, `finishedOn` and `processedOn` are cleared (and
    /// its attempt counters as `reset` says), it is queued by its priority and `lifo`, a flow
    /// child becomes a pending dependency of its parent again, and `waiting` (prev = `from`)
    /// is emitted.
    ///
    /// ```no_run
    /// # async fn demo(queue: ractor_bullmq::Queue) -> Result<(), ractor_bullmq::QueueError> {
    /// use ractor_bullmq::{RetryFrom, RetryReset};
    /// queue.retry_job("7", RetryFrom::Failed, RetryReset::none().attempts_made(true)).await?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    ///
    /// [`QueueError::JobNotFound`]; [`QueueError::JobNotInState`] naming the state the job is
    /// in when it is not in `from` (nothing is written then); [`QueueError::Redis`].
    pub async fn retry_job(&self, job_id: &str, from: RetryFrom, reset: RetryReset) -> Result<()> {
        let outcome = self.inner.store.retry_job(job_id, from, reset).await?;
        self.control_result(job_id, from.as_str(), outcome).await
    }

    /// Moves the delayed job `job_id` to be processed now (Node `job.promote()`): prioritized
    /// when it has a priority, else to the back of `wait` as a new job; its `delay` becomes 0 and
    /// `waiting` (prev `delayed`) is emitted.
    ///
    /// # Errors
    ///
    /// [`QueueError::JobNotFound`]; [`QueueError::JobNotInState`] naming the job's state when
    /// it is not delayed (nothing is written then); [`QueueError::Redis`].
    pub async fn promote_job(&self, job_id: &str) -> Result<()> {
        let outcome = self.inner.store.promote_job(job_id).await?;
        self.control_result(job_id, "delayed", outcome).await
    }

    /// Sets a job's priority (Node `job.changePriority({priority, lifo})`; 0 = none). A
    /// waiting or prioritized job is queued again by it: with `lifo`, ahead of the jobs of
    /// its priority (or at the front of `wait` for 0); a job in any other state keeps its
    /// place and takes the priority when it is next queued. No event is emitted, as Node.
    ///
    /// # Errors
    ///
    /// [`QueueError::Validation`] when `priority` is above 2 097 151 (nothing written);
    /// [`QueueError::JobNotFound`]; [`QueueError::Redis`].
    pub async fn change_priority(&self, job_id: &str, priority: u32, lifo: bool) -> Result<()> {
        if priority > MAX_PRIORITY {
            return Err(ValidationError::PriorityOutOfRange { priority }.into());
        }
        let outcome = self
            .inner
            .store
            .change_priority(job_id, priority, lifo)
            .await?;
        self.control_result(job_id, "", outcome).await
    }

    /// Reschedules a delayed job to be due `delay` from now (Node `job.changeDelay(delay)`),
    /// emitting `delayed`.
    ///
    /// # Errors
    ///
    /// [`QueueError::JobNotFound`]; [`QueueError::JobNotInState`] naming the job's state when
    /// it is not delayed (nothing is written then); [`QueueError::Redis`].
    pub async fn change_delay(&self, job_id: &str, delay: Duration) -> Result<()> {
        let outcome = self.inner.store.change_delay(job_id, delay).await?;
        self.control_result(job_id, "delayed", outcome).await
    }

    /// Deletes the job's log lines but the newest `keep` (0: all), as Node's
    /// `job.clearLogs(keepLogs)`. A job without logs is not an error.
    ///
    /// # Errors
    ///
    /// [`QueueError::Redis`].
    pub async fn clear_logs(&self, job_id: &str, keep: u64) -> Result<()> {
        Ok(self.inner.store.clear_logs(job_id, keep).await?)
    }

    /// Moves every job of `options.state` (default failed) finished at or before
    /// `options.timestamp` (default now, read again for each batch as Node does) back to
    /// `wait`, `options.count` (default 1000) jobs per call, until a call moves fewer (Node
    /// `queue.retryJobs({state, count, timestamp})`). Each job goes to the back of
    /// `wait` whatever its priority or `lifo` (as Node's script), loses `finishedOn`,
    /// `processedOn` and its outcome (its attempt counters are kept), becomes a pending
    /// dependency of its flow parent again, and `waiting` (prev = the state) is emitted for
    /// it. Returns how many jobs moved.
    ///
    /// ```no_run
    /// # async fn demo(queue: ractor_bullmq::Queue) -> Result<(), ractor_bullmq::QueueError> {
    /// use ractor_bullmq::{RetryFrom, RetryJobsOptions};
    /// let moved = queue.retry_jobs(RetryJobsOptions::new()).await?;
    /// println!("{moved} failed jobs retried");
    /// let moved = queue
    ///     .retry_jobs(RetryJobsOptions::new().state(RetryFrom::Completed).count(100))
    ///     .await?;
    /// println!("{moved} completed jobs run again");
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    ///
    /// [`QueueError::InvalidArgument`] when `count` is 0 (nothing written; Node would loop
    /// forever); [`QueueError::Redis`] / [`QueueError::Backend`] (batches moved before the
    /// failure stay moved).
    pub async fn retry_jobs(&self, options: RetryJobsOptions) -> Result<u64> {
        let RetryJobsOptions {
            state: from,
            count,
            timestamp,
        } = options;
        check_count(count)?;
        let fixed = timestamp.map(|at| {
            at.duration_since(UNIX_EPOCH)
                .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
                .unwrap_or(0)
        });
        let mut total = 0;
        loop {
            let by = fixed.unwrap_or_else(add::now_ms);
            let moved = self.inner.store.retry_jobs(from, count, by).await?;
            total += moved;
            if moved < u64::from(count) {
                return Ok(total);
            }
        }
    }

    /// Moves every delayed job to `wait` now, `options.count` (default 1000) per call, until a
    /// call moves fewer (Node `queue.promoteJobs({count})`): soonest due first, each to the back of `wait`
    /// whatever its priority (as Node's script), its `delay` field left as it was, emitting
    /// `waiting` (prev `delayed`) per job. Returns how many jobs moved.
    ///
    /// # Errors
    ///
    /// [`QueueError::InvalidArgument`] when `count` is 0 (nothing written);
    /// [`QueueError::Redis`] / [`QueueError::Backend`] (batches moved before the failure stay
    /// moved).
    pub async fn promote_jobs(&self, options: PromoteJobsOptions) -> Result<u64> {
        let count = options.count;
        check_count(count)?;
        let mut total = 0;
        loop {
            let moved = self.inner.store.promote_jobs(count).await?;
            total += moved;
            if moved < u64::from(count) {
                return Ok(total);
            }
        }
    }

    /// Renews job `job_id`'s lock for `duration` when it carries `token` (Node
    /// `job.extendLock(token, duration)`), also taking the job off the stalled candidates: for
    /// a client that fetched the job itself (a manual worker in another process) and keeps it
    /// longer than its lock.
    ///
    /// # Errors
    ///
    /// [`QueueError::InvalidArgument`] when `duration` is under 1 ms;
    /// [`QueueError::LockMissing`] when the job holds no lock (expired, finished, or no such
    /// job); [`QueueError::LockHeldByOther`] when the lock carries another token (nothing is
    /// written on a refusal); [`QueueError::Redis`].
    pub async fn extend_lock(&self, job_id: &str, token: &str, duration: Duration) -> Result<()> {
        if duration < Duration::from_millis(1) {
            return Err(QueueError::InvalidArgument {
                argument: "duration",
                reason: "a lock must last at least 1 ms",
            });
        }
        match self
            .inner
            .store
            .extend_lock(job_id, token, duration)
            .await?
        {
            LockOutcome::Extended => Ok(()),
            LockOutcome::Missing => Err(QueueError::LockMissing {
                job_id: job_id.to_owned(),
            }),
            LockOutcome::HeldByOther => Err(QueueError::LockHeldByOther {
                job_id: job_id.to_owned(),
            }),
        }
    }

    /// Whether the job is completed (Node `job.isCompleted()`).
    ///
    /// # Errors
    ///
    /// [`QueueError::Redis`].
    pub async fn is_completed(&self, job_id: &str) -> Result<bool> {
        Ok(self.get_job_state(job_id).await? == JobState::Completed)
    }

    /// Whether the job is failed (Node `job.isFailed()`).
    ///
    /// # Errors
    ///
    /// [`QueueError::Redis`].
    pub async fn is_failed(&self, job_id: &str) -> Result<bool> {
        Ok(self.get_job_state(job_id).await? == JobState::Failed)
    }

    /// Whether the job is delayed (Node `job.isDelayed()`).
    ///
    /// # Errors
    ///
    /// [`QueueError::Redis`].
    pub async fn is_delayed(&self, job_id: &str) -> Result<bool> {
        Ok(self.get_job_state(job_id).await? == JobState::Delayed)
    }

    /// Whether a worker has the job (Node `job.isActive()`).
    ///
    /// # Errors
    ///
    /// [`QueueError::Redis`].
    pub async fn is_active(&self, job_id: &str) -> Result<bool> {
        Ok(self.get_job_state(job_id).await? == JobState::Active)
    }

    /// Whether the job is in the `wait` list (or the legacy `paused` list), as Node's
    /// `job.isWaiting()`; a prioritized job is not "waiting" in this sense.
    ///
    /// # Errors
    ///
    /// [`QueueError::Redis`].
    pub async fn is_waiting(&self, job_id: &str) -> Result<bool> {
        Ok(matches!(
            self.get_job_state(job_id).await?,
            JobState::Waiting | JobState::Paused
        ))
    }

    /// Whether the job is a flow parent waiting for its children (Node
    /// `job.isWaitingChildren()`).
    ///
    /// # Errors
    ///
    /// [`QueueError::Redis`].
    pub async fn is_waiting_children(&self, job_id: &str) -> Result<bool> {
        Ok(self.get_job_state(job_id).await? == JobState::WaitingChildren)
    }

    /// Turns a refusal into its typed error; the state named in a "not in state" error is
    /// read after the refusal (the refusing step wrote nothing, so this read is only
    /// informative and may race with a worker).
    async fn control_result(
        &self,
        job_id: &str,
        expected: &'static str,
        outcome: ControlOutcome,
    ) -> Result<()> {
        match outcome {
            ControlOutcome::Moved => Ok(()),
            ControlOutcome::NotFound => Err(not_found(job_id)),
            ControlOutcome::NotInState => match self.get_job_state(job_id).await? {
                JobState::Unknown => Err(not_found(job_id)),
                actual => Err(QueueError::JobNotInState {
                    job_id: job_id.to_owned(),
                    expected,
                    actual,
                }),
            },
        }
    }
}

fn not_found(job_id: &str) -> QueueError {
    QueueError::JobNotFound {
        job_id: job_id.to_owned(),
    }
}

/// A batch move needs at least one job per call: with 0 every call would report a full batch.
fn check_count(count: u32) -> Result<()> {
    if count == 0 {
        return Err(QueueError::InvalidArgument {
            argument: "count",
            reason: "at least 1 job per batch",
        });
    }
    Ok(())
}
