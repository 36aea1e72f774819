//! Acting on a [`Job`] a queue read, as on Node's `Job`: `retry`, `promote`,
//! `changePriority`, `changeDelay`, `remove`, `updateData`, `updateProgress`, `log`,
//! `clearLogs`, `getState` and the `is*` checks, `extendLock`, `removeChildDependency`,
//! `removeUnprocessedChildren`, `removeDeduplicationKey`.
//!
//! Each action is the [`Queue`](crate::Queue) method of the same meaning called with this
//! job's id (one implementation of each), so its effects, events and errors are those
//! documented there. A job without a queue handle (built with [`Job::decode`] or
//! [`Job::from_record`], or fetched by a Worker) refuses every action with
//! [`QueueError::Detached`](crate::QueueError::Detached) before anything is read or written.
//!
//! ```no_run
//! # async fn demo(queue: ractor_bullmq::Queue) -> Result<(), ractor_bullmq::QueueError> {
//! use ractor_bullmq::{RetryFrom, RetryReset};
//! for job in queue.get_failed().await? {
//!     job.log("retried by the operator").await?;
//!     job.retry().await?; // Node's defaults: from failed, counters kept
//! }
//! for job in queue.get_completed().await? {
//!     job.retry_with(RetryFrom::Completed, RetryReset::none().attempts_made(true)).await?;
//! }
//! # Ok(()) }
//! ```
//!
//! The job itself is a snapshot: after an action, read it again (`queue.get_job(job.id())`)
//! for its new state.

use std::time::Duration;

use bullmq_backend::{RetryFrom, RetryReset};
use bullmq_protocol::state::JobState;
use serde::Serialize;

use super::{Inner, Queue, RemoveOptions};
use crate::error::Result;
use crate::job::Job;

/// The queue a [`Job`] carries, its key prefix, and the handle its actions go through.
impl Job {
    /// The queue this job was read through or added to; `None` for a job built by hand
    /// ([`Job::decode`], [`Job::from_record`]) or fetched by a Worker.
    pub fn queue(&self) -> Option<Queue> {
        let inner = self.queue_handle()?.clone().downcast::<Inner>().ok()?;
        Some(Queue { inner })
    }

    /// The key prefix of the job's queue (Node `job.prefix`, default `bull`); `None` for a job
    /// without a queue handle.
    pub fn prefix(&self) -> Option<&str> {
        let inner = self.queue_handle()?.downcast_ref::<Inner>()?;
        Some(inner.keys.prefix())
    }

    /// The queue the actions go through, or [`QueueError::Detached`](crate::QueueError::Detached).
    pub(crate) fn acting_queue(&self) -> Result<Queue> {
        self.queue().ok_or_else(|| self.detached())
    }
}

impl Job {
    /// Moves this failed job back to be processed, counters kept (Node `job.retry()`, whose
    /// defaults are `'failed'` and no reset); [`Job::retry_with`] for a completed job or a
    /// reset.
    ///
    /// # Errors
    ///
    /// [`QueueError::Detached`](crate::QueueError::Detached), and those of [`Queue::retry_job`](crate::Queue::retry_job).
    pub async fn retry(&self) -> Result<()> {
        self.retry_with(RetryFrom::Failed, RetryReset::none()).await
    }

    /// Moves this finished job back to be processed from state `from`, resetting the counters
    /// `reset` names (Node `job.retry(state, opts)`), as
    /// [`Queue::retry_job`](crate::Queue::retry_job).
    ///
    /// # Errors
    ///
    /// [`QueueError::Detached`](crate::QueueError::Detached), and those of [`Queue::retry_job`](crate::Queue::retry_job).
    pub async fn retry_with(&self, from: RetryFrom, reset: RetryReset) -> Result<()> {
        self.acting_queue()?.retry_job(self.id(), from, reset).await
    }

    /// Moves this delayed job to be processed now (Node `job.promote()`), as
    /// [`Queue::promote_job`](crate::Queue::promote_job).
    ///
    /// # Errors
    ///
    /// [`QueueError::Detached`](crate::QueueError::Detached), and those of [`Queue::promote_job`](crate::Queue::promote_job).
    pub async fn promote(&self) -> Result<()> {
        self.acting_queue()?.promote_job(self.id()).await
    }

    /// Sets this job's priority (Node `job.changePriority({priority, lifo})`), as
    /// [`Queue::change_priority`](crate::Queue::change_priority).
    ///
    /// # Errors
    ///
    /// [`QueueError::Detached`](crate::QueueError::Detached), and those of
    /// [`Queue::change_priority`](crate::Queue::change_priority).
    pub async fn change_priority(&self, priority: u32, lifo: bool) -> Result<()> {
        self.acting_queue()?
            .change_priority(self.id(), priority, lifo)
            .await
    }

    /// Reschedules this delayed job to be due `delay` from now (Node `job.changeDelay(ms)`),
    /// as [`Queue::change_delay`](crate::Queue::change_delay).
    ///
    /// # Errors
    ///
    /// [`QueueError::Detached`](crate::QueueError::Detached), and those of [`Queue::change_delay`](crate::Queue::change_delay).
    pub async fn change_delay(&self, delay: Duration) -> Result<()> {
        self.acting_queue()?.change_delay(self.id(), delay).await
    }

    /// Removes this job and its flow children (Node `job.remove()`); `false` when it was
    /// already gone. As [`Queue::remove`](crate::Queue::remove).
    ///
    /// # Errors
    ///
    /// [`QueueError::Detached`](crate::QueueError::Detached), and those of [`Queue::remove_with`](crate::Queue::remove_with)
    /// ([`QueueError::JobLocked`](crate::QueueError::JobLocked) while a worker holds it).
    pub async fn remove(&self) -> Result<bool> {
        self.acting_queue()?.remove(self.id()).await
    }

    /// Removes this job with Node's options (`job.remove({removeChildren})`), as
    /// [`Queue::remove_with`](crate::Queue::remove_with).
    ///
    /// # Errors
    ///
    /// As [`Job::remove`].
    pub async fn remove_with(&self, options: RemoveOptions) -> Result<bool> {
        self.acting_queue()?.remove_with(self.id(), options).await
    }

    /// Replaces this job's data (Node `job.updateData(data)`), as
    /// [`Queue::update_data`](crate::Queue::update_data).
    ///
    /// # Errors
    ///
    /// [`QueueError::Detached`](crate::QueueError::Detached), [`QueueError::JobNotFound`](crate::QueueError::JobNotFound), [`QueueError::Json`](crate::QueueError::Json),
    /// [`QueueError::Redis`](crate::QueueError::Redis).
    pub async fn update_data(&self, data: impl Serialize) -> Result<()> {
        self.acting_queue()?.update_data(self.id(), data).await
    }

    /// Sets this job's progress and emits `progress` (Node `job.updateProgress(progress)`),
    /// as [`Queue::update_progress`](crate::Queue::update_progress).
    ///
    /// # Errors
    ///
    /// [`QueueError::Detached`](crate::QueueError::Detached), [`QueueError::JobNotFound`](crate::QueueError::JobNotFound), [`QueueError::Json`](crate::QueueError::Json),
    /// [`QueueError::Redis`](crate::QueueError::Redis).
    pub async fn update_progress(&self, progress: impl Serialize) -> Result<()> {
        self.acting_queue()?
            .update_progress(self.id(), progress)
            .await
    }

    /// Appends a line to this job's log, keeping the newest `keepLogs` lines of its options
    /// when set (Node `job.log(row)`); returns the number of lines kept. As
    /// [`Queue::add_job_log`](crate::Queue::add_job_log).
    ///
    /// # Errors
    ///
    /// [`QueueError::Detached`](crate::QueueError::Detached), [`QueueError::JobNotFound`](crate::QueueError::JobNotFound), [`QueueError::Redis`](crate::QueueError::Redis).
    pub async fn log(&self, line: &str) -> Result<u64> {
        self.acting_queue()?
            .add_job_log(self.id(), line, self.opts().keep_logs)
            .await
    }

    /// Deletes this job's log lines but the newest `keep` (0: all) (Node
    /// `job.clearLogs(keepLogs)`), as [`Queue::clear_logs`](crate::Queue::clear_logs).
    ///
    /// # Errors
    ///
    /// [`QueueError::Detached`](crate::QueueError::Detached), [`QueueError::Redis`](crate::QueueError::Redis).
    pub async fn clear_logs(&self, keep: u64) -> Result<()> {
        self.acting_queue()?.clear_logs(self.id(), keep).await
    }

    /// Where this job is now (Node `job.getState()`; [`JobState::Unknown`] when it is
    /// gone), as [`Queue::get_job_state`](crate::Queue::get_job_state).
    ///
    /// # Errors
    ///
    /// [`QueueError::Detached`](crate::QueueError::Detached), [`QueueError::Redis`](crate::QueueError::Redis).
    pub async fn get_state(&self) -> Result<JobState> {
        self.acting_queue()?.get_job_state(self.id()).await
    }

    /// Whether this job is completed now (Node `job.isCompleted()`).
    ///
    /// # Errors
    ///
    /// As [`Job::get_state`].
    pub async fn is_completed(&self) -> Result<bool> {
        self.acting_queue()?.is_completed(self.id()).await
    }

    /// Whether this job is failed now (Node `job.isFailed()`).
    ///
    /// # Errors
    ///
    /// As [`Job::get_state`].
    pub async fn is_failed(&self) -> Result<bool> {
        self.acting_queue()?.is_failed(self.id()).await
    }

    /// Whether this job is delayed now (Node `job.isDelayed()`).
    ///
    /// # Errors
    ///
    /// As [`Job::get_state`].
    pub async fn is_delayed(&self) -> Result<bool> {
        self.acting_queue()?.is_delayed(self.id()).await
    }

    /// Whether a worker has this job now (Node `job.isActive()`).
    ///
    /// # Errors
    ///
    /// As [`Job::get_state`].
    pub async fn is_active(&self) -> Result<bool> {
        self.acting_queue()?.is_active(self.id()).await
    }

    /// Whether this job is in the `wait` list now (Node `job.isWaiting()`; a prioritized job
    /// is not).
    ///
    /// # Errors
    ///
    /// As [`Job::get_state`].
    pub async fn is_waiting(&self) -> Result<bool> {
        self.acting_queue()?.is_waiting(self.id()).await
    }

    /// Whether this flow parent waits for its children now (Node `job.isWaitingChildren()`).
    ///
    /// # Errors
    ///
    /// As [`Job::get_state`].
    pub async fn is_waiting_children(&self) -> Result<bool> {
        self.acting_queue()?.is_waiting_children(self.id()).await
    }

    /// Renews this job's lock for `duration` when it carries `token` (Node
    /// `job.extendLock(token, duration)`), as [`Queue::extend_lock`](crate::Queue::extend_lock).
    ///
    /// # Errors
    ///
    /// [`QueueError::Detached`](crate::QueueError::Detached), and those of [`Queue::extend_lock`](crate::Queue::extend_lock).
    pub async fn extend_lock(&self, token: &str, duration: Duration) -> Result<()> {
        self.acting_queue()?
            .extend_lock(self.id(), token, duration)
            .await
    }

    /// Detaches this job from its flow parent while it is a pending child (Node
    /// `job.removeChildDependency()`), as
    /// [`Queue::remove_child_dependency`](crate::Queue::remove_child_dependency); `false` when
    /// it was not. This snapshot still shows its parent: read the job again.
    ///
    /// # Errors
    ///
    /// [`QueueError::Detached`](crate::QueueError::Detached), and those of
    /// [`Queue::remove_child_dependency`](crate::Queue::remove_child_dependency).
    pub async fn remove_child_dependency(&self) -> Result<bool> {
        self.acting_queue()?
            .remove_child_dependency(self.id())
            .await
    }

    /// Removes this parent's pending children (Node `job.removeUnprocessedChildren()`), as
    /// [`Queue::remove_unprocessed_children`](crate::Queue::remove_unprocessed_children), whose
    /// reply (the keys of the jobs removed) it returns.
    ///
    /// # Errors
    ///
    /// [`QueueError::Detached`](crate::QueueError::Detached), [`QueueError::Redis`](crate::QueueError::Redis).
    pub async fn remove_unprocessed_children(&self) -> Result<Vec<String>> {
        self.acting_queue()?
            .remove_unprocessed_children(self.id())
            .await
    }

    /// Releases this job's deduplication id while this job still owns it (Node
    /// `job.removeDeduplicationKey()`); `false` when the job has none or another job holds it
    /// now. As [`Queue::remove_job_deduplication_key`](crate::Queue::remove_job_deduplication_key),
    /// with the id this snapshot carries.
    ///
    /// # Errors
    ///
    /// [`QueueError::Detached`](crate::QueueError::Detached), [`QueueError::Redis`](crate::QueueError::Redis).
    pub async fn remove_deduplication_key(&self) -> Result<bool> {
        self.acting_queue()?
            .remove_owned_deduplication_key(self.deduplication_id(), self.id())
            .await
    }
}
