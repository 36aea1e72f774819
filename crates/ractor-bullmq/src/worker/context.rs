//! [`JobContext`]: what a processor can do besides computing its result.

use std::fmt;
use std::sync::{Arc, Mutex, OnceLock};

use std::time::Duration;

use bullmq_protocol::options::ParentRef;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use super::callbacks::WorkerCallbacks;
use super::errors::WorkerError;
use super::outcome::{CancelReason, Cancellation};
use super::Job;
use crate::store::{
    ChildRef, FinishCode, MoveToWaitOutcome, Store, StoreError, StoreResult, WaitingChildrenOutcome,
};
use crate::telemetry::{self, JobTelemetry};

/// Where the processor moved its own job through the context (the step-job pattern). Set once,
/// by a move the store confirmed; the Worker then records nothing for the attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Moved {
    /// To `waiting-children` ([`JobContext::move_to_waiting_children`]).
    WaitingChildren,
    /// Back to `wait` ([`JobContext::move_to_wait`]).
    Wait,
}

/// How long one attempt may run, and how long a soft cancellation waits for the processor.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct AttemptLimits {
    /// The attempt's timeout (`WorkerOptions::job_timeout`, per job name); `None`: unbounded.
    pub(crate) timeout: Option<Duration>,
    /// After a soft cancellation, how long the processor may still run
    /// (`WorkerOptions::cancel_grace`).
    pub(crate) grace: Duration,
}

impl Default for AttemptLimits {
    fn default() -> Self {
        Self {
            timeout: None,
            grace: super::options::DEFAULT_CANCEL_GRACE,
        }
    }
}

/// Handed to the processor with its job: progress, logs, data updates, the attempt number,
/// the job's cancellation token, its lock token, and the moves of the step-job pattern
/// ([`JobContext::move_to_waiting_children`], [`JobContext::move_to_wait`]; see
/// `docs/recipes/step-jobs.md`).
///
/// The token is cancelled when the worker loses the job's lock (another worker may own the job
/// now), is force-closed, is asked to cancel the job (`WorkerHandle::cancel_job`), or the
/// attempt outruns its timeout; [`JobContext::cancel_reason`] says which. After a lost lock or
/// a forced close the worker stops waiting for the processor at once (its future is dropped);
/// after a requested cancellation or a timeout it waits up to its `cancel_grace` for the
/// processor to return, then drops it, and the attempt fails with
/// [`JobContext::cancel_message`]. Long computations should check the token between steps.
///
/// Cloning is cheap: clones share one context.
#[derive(Clone)]
pub struct JobContext {
    inner: Arc<ContextInner>,
}

struct ContextInner {
    job_id: String,
    job_name: String,
    token: String,
    /// `{prefix}:{queue}`, the queue as a child's parent option names it.
    queue_key: String,
    moved: OnceLock<Moved>,
    attempt: u32,
    keep_logs: Option<u64>,
    cancel: CancellationToken,
    /// Cancelled with `cancel` for hard reasons only: ends the soft cancellation's grace.
    hard: CancellationToken,
    cancellation: Mutex<Option<Cancellation>>,
    limits: AttemptLimits,
    store: Arc<dyn Store>,
    callbacks: WorkerCallbacks,
    worker: Arc<str>,
}

impl fmt::Debug for JobContext {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("JobContext")
            .field("job_id", &self.inner.job_id)
            .field("attempt", &self.inner.attempt)
            .field("cancelled", &self.inner.cancel.is_cancelled())
            .finish_non_exhaustive()
    }
}

impl JobContext {
    /// The context of one attempt of `job`, fetched with lock `token` from the queue whose
    /// qualified name (`{prefix}:{queue}`) is `queue_key`.
    pub(crate) fn new(
        job: &Job,
        token: String,
        queue_key: String,
        store: Arc<dyn Store>,
        callbacks: WorkerCallbacks,
        worker: Arc<str>,
        limits: AttemptLimits,
    ) -> Self {
        Self {
            inner: Arc::new(ContextInner {
                job_id: job.id().to_string(),
                job_name: job.name().to_string(),
                token,
                queue_key,
                moved: OnceLock::new(),
                worker,
                attempt: job.attempts_made().saturating_add(1),
                keep_logs: job.opts().keep_logs,
                cancel: CancellationToken::new(),
                hard: CancellationToken::new(),
                cancellation: Mutex::new(None),
                limits,
                store,
                callbacks,
            }),
        }
    }

    /// The job's id.
    pub fn job_id(&self) -> &str {
        &self.inner.job_id
    }

    /// The lock token this attempt holds the job with (Node's `token` argument of the
    /// processor). The context's own moves present it; it is also what a store call made
    /// directly on this job's behalf needs.
    pub fn token(&self) -> &str {
        &self.inner.token
    }

    /// This job as the parent of children added from its processor: pass it to
    /// [`AddJob::parent`](crate::AddJob::parent) or `JobOptions::parent` (Node's
    /// `parent: { id: job.id, queue: job.queueQualifiedName }`).
    ///
    /// ```no_run
    /// use ractor_bullmq::worker::JobContext;
    /// use ractor_bullmq::Queue;
    ///
    /// async fn add_child(queue: &Queue, ctx: &JobContext) -> anyhow::Result<()> {
    ///     queue.add("child", serde_json::json!({ "n": 1 })).parent(ctx.parent_ref()).await?;
    ///     Ok(())
    /// }
    /// ```
    pub fn parent_ref(&self) -> ParentRef {
        ParentRef::new(self.inner.job_id.clone(), self.inner.queue_key.clone())
    }

    /// Where the processor moved the job, once a move succeeded.
    pub(crate) fn moved(&self) -> Option<Moved> {
        self.inner.moved.get().copied()
    }

    /// This attempt's number, from 1 (Node `job.attemptsMade + 1`).
    pub fn attempt(&self) -> u32 {
        self.inner.attempt
    }

    /// The job's cancellation token.
    pub fn cancellation_token(&self) -> &CancellationToken {
        &self.inner.cancel
    }

    /// Whether the job was cancelled.
    pub fn is_cancelled(&self) -> bool {
        self.inner.cancel.is_cancelled()
    }

    /// Why the job was cancelled, once it was.
    pub fn cancel_reason(&self) -> Option<CancelReason> {
        self.cancellation().map(|c| c.reason)
    }

    /// The `failedReason` this attempt fails with after a requested cancellation (the reason
    /// given to `cancel_job`, else `"job cancelled"`) or a timeout (`"job timed out after N
    /// ms"`); `None` when not cancelled or cancelled for a lost lock or a shutdown, which
    /// record nothing.
    pub fn cancel_message(&self) -> Option<String> {
        self.cancellation()
            .filter(|c| !c.reason.is_hard())
            .map(|c| c.message)
    }

    /// The recorded cancellation, once there is one.
    pub(crate) fn cancellation(&self) -> Option<Cancellation> {
        self.inner
            .cancellation
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    /// The attempt's timeout and grace.
    pub(crate) fn limits(&self) -> AttemptLimits {
        self.inner.limits
    }

    /// Fires when the job is cancelled for a hard reason (the processor is dropped at once).
    pub(crate) fn hard_token(&self) -> &CancellationToken {
        &self.inner.hard
    }

    /// Cancels the job's token for a hard reason (see [`JobContext::cancel_with`]).
    pub(crate) fn cancel(&self, reason: CancelReason) {
        self.cancel_with(Cancellation::hard(reason));
    }

    /// Cancels the job's token, recording `cancellation` unless an earlier one sticks (see
    /// `CancelReason::replaces`). Returns whether it was recorded.
    pub(crate) fn cancel_with(&self, cancellation: Cancellation) -> bool {
        let hard = cancellation.reason.is_hard();
        let recorded = {
            let mut current = self
                .inner
                .cancellation
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            let replaces = cancellation
                .reason
                .replaces(current.as_ref().map(|c| c.reason));
            if replaces {
                *current = Some(cancellation);
            }
            replaces
        };
        if hard {
            self.inner.hard.cancel();
        }
        self.inner.cancel.cancel();
        if recorded && !hard {
            self.report_cancelled();
        }
        recorded
    }

    /// Telemetry of a soft cancellation just recorded.
    fn report_cancelled(&self) {
        let Some(cancellation) = self.cancellation() else {
            return;
        };
        let cause = match cancellation.reason {
            CancelReason::TimedOut => "timed_out",
            _ => "requested",
        };
        telemetry::job_cancelled(&self.telemetry(), cause, &cancellation.message);
    }

    fn telemetry(&self) -> JobTelemetry<'_> {
        JobTelemetry::new(
            self.inner.store.queue_name(),
            &self.inner.job_id,
            &self.inner.job_name,
        )
        .attempt(self.inner.attempt)
        .worker(&self.inner.worker)
    }

    /// Stores the job's progress (any JSON: a number, an object) and emits a `progress` event.
    ///
    /// # Errors
    ///
    /// The backend's error when the update could not be stored.
    pub async fn update_progress(&self, progress: impl Into<Value>) -> StoreResult<()> {
        let progress = progress.into();
        self.inner
            .store
            .update_progress(&self.inner.job_id, &progress)
            .await?;
        telemetry::job_progress(&self.telemetry(), &progress);
        self.inner.callbacks.progress(&self.inner.job_id, &progress);
        Ok(())
    }

    /// Appends a line to the job's log (honouring the job's `keepLogs`); returns the number of
    /// lines kept.
    ///
    /// # Errors
    ///
    /// The backend's error when the line could not be stored.
    pub async fn log(&self, line: impl AsRef<str>) -> StoreResult<u64> {
        let job_id = &self.inner.job_id;
        self.inner
            .store
            .add_log(job_id, line.as_ref(), self.inner.keep_logs)
            .await?
            .ok_or_else(|| StoreError::JobNotFound {
                job_id: job_id.clone(),
            })
    }

    /// Replaces the job's data.
    ///
    /// # Errors
    ///
    /// The backend's error when the data could not be stored.
    pub async fn update_data(&self, data: Value) -> StoreResult<()> {
        // As before the seam reported it: a job that vanished meanwhile is not an error here.
        self.inner
            .store
            .update_data(&self.inner.job_id, &data)
            .await
            .map(drop)
    }

    /// What this job's completed children returned, by child job key, each read as `T`
    /// (Node's `job.getChildrenValues()`; `T = serde_json::Value` for any).
    ///
    /// # Errors
    ///
    /// The backend's error, or [`StoreError::Backend`] wrapping the JSON error when a value is
    /// not a `T`.
    pub async fn get_children_values<T: serde::de::DeserializeOwned>(
        &self,
    ) -> StoreResult<std::collections::BTreeMap<String, T>> {
        let deps = self.get_dependencies().await?;
        crate::job::children_values(deps.processed).map_err(StoreError::backend)
    }

    /// The failure reasons of this job's children that failed with
    /// `ignoreDependencyOnFailure`, by child job key (Node's
    /// `job.getIgnoredChildrenFailures()`, also `getFailedChildrenValues`).
    ///
    /// # Errors
    ///
    /// The backend's error.
    pub async fn get_ignored_children_failures(
        &self,
    ) -> StoreResult<std::collections::BTreeMap<String, String>> {
        Ok(self.get_dependencies().await?.ignored)
    }

    /// This job's children by outcome (Node's `job.getDependencies()`).
    ///
    /// # Errors
    ///
    /// The backend's error.
    pub async fn get_dependencies(&self) -> StoreResult<crate::Dependencies> {
        let deps = self
            .inner
            .store
            .get_dependencies(&self.inner.job_id)
            .await?;
        Ok(deps.into())
    }

    /// About `count` of this job's children of one `kind`, from `cursor` (0 to start; 0 again
    /// as the page's `next_cursor` after the last page), as Node's paged `getDependencies`.
    ///
    /// # Errors
    ///
    /// The backend's error.
    pub async fn get_dependencies_page(
        &self,
        kind: crate::store::DependencyKind,
        cursor: u64,
        count: u64,
    ) -> StoreResult<crate::DependencyPage> {
        let page = self
            .inner
            .store
            .get_dependencies_page(&self.inner.job_id, kind, cursor, count)
            .await?;
        Ok(page.into())
    }

    /// How many children this job has by outcome (Node's `job.getDependenciesCount()`).
    ///
    /// # Errors
    ///
    /// The backend's error.
    pub async fn get_dependencies_count(&self) -> StoreResult<crate::store::DependencyCounts> {
        self.inner
            .store
            .get_dependency_counts(&self.inner.job_id)
            .await
    }

    /// Moves the job to `waiting-children` if it has children still pending (Node's
    /// `job.moveToWaitingChildren(token)`): the step-job pattern's "wait for my children".
    ///
    /// `Ok(true)`: moved. Its lock is released and the Worker stops renewing it; the
    /// processor must now return [`WaitingChildrenError`](crate::worker::WaitingChildrenError),
    /// and the job is fetched again (a new attempt with the same attempt number, from the top of
    /// the processor) once its last child completed. `Ok(false)`: no child is pending (none
    /// was added, or all are done): the job is still active and locked here, and the processor
    /// goes on, typically with its next step.
    ///
    /// # Errors
    ///
    /// [`WorkerError::FinishRefused`] with command `moveToWaitingChildren` when the store
    /// refused (nothing changed): [`FinishCode::MissingLock`] / [`FinishCode::LockNotOwned`]
    /// when the lock was lost, [`FinishCode::FailedChildren`] when a child failed for good,
    /// [`FinishCode::MissingJob`], [`FinishCode::NotActive`]; [`WorkerError::Store`] when the
    /// backend failed.
    pub async fn move_to_waiting_children(&self) -> Result<bool, WorkerError> {
        self.waiting_children(None).await
    }

    /// [`JobContext::move_to_waiting_children`] waiting for one child: moved only while
    /// `child` is pending (Node's `opts.child`, `{ id, queue }` with the child's qualified
    /// queue name, the shape of [`JobContext::parent_ref`]).
    ///
    /// # Errors
    ///
    /// As [`JobContext::move_to_waiting_children`].
    pub async fn move_to_waiting_children_for(
        &self,
        child: &ParentRef,
    ) -> Result<bool, WorkerError> {
        let child: ChildRef = crate::queue::add::parent_job(child);
        self.waiting_children(Some(&child)).await
    }

    async fn waiting_children(&self, child: Option<&ChildRef>) -> Result<bool, WorkerError> {
        let inner = &self.inner;
        let outcome = inner
            .store
            .move_to_waiting_children(&inner.job_id, &inner.token, child)
            .await?;
        match outcome {
            WaitingChildrenOutcome::Moved => {
                let _ = inner.moved.set(Moved::WaitingChildren);
                Ok(true)
            }
            WaitingChildrenOutcome::NoPendingChildren => Ok(false),
            WaitingChildrenOutcome::Refused(code) => {
                Err(self.refused(code, "moveToWaitingChildren"))
            }
            // An answer this version does not know: the job's state is unknown, so not ours.
            _ => Err(self.refused(FinishCode::Other(0), "moveToWaitingChildren")),
        }
    }

    /// Moves the job back to `wait` without counting an attempt (Node's
    /// `job.moveToWait(token)`), to run again from the top of the processor (a job with a
    /// priority goes ahead of its priority in `prioritized`). Its lock is released and the
    /// Worker stops renewing it; the processor must now return
    /// [`WaitingError`](crate::worker::WaitingError). Returns the queue's remaining rate limit
    /// (zero when not limited), as Node does.
    ///
    /// # Errors
    ///
    /// [`WorkerError::FinishRefused`] with command `moveJobFromActiveToWait` when the store
    /// refused (nothing changed): the lock was lost ([`FinishCode::MissingLock`],
    /// [`FinishCode::LockNotOwned`]), [`FinishCode::MissingJob`], [`FinishCode::NotActive`];
    /// [`WorkerError::Store`] when the backend failed.
    pub async fn move_to_wait(&self) -> Result<Duration, WorkerError> {
        let inner = &self.inner;
        match inner
            .store
            .move_to_wait(&inner.job_id, &inner.token)
            .await?
        {
            MoveToWaitOutcome::Moved { rate_limited_for } => {
                let _ = inner.moved.set(Moved::Wait);
                Ok(rate_limited_for)
            }
            MoveToWaitOutcome::Refused(code) => Err(self.refused(code, "moveJobFromActiveToWait")),
            // An answer this version does not know: the job's state is unknown, so not ours.
            _ => Err(self.refused(FinishCode::Other(0), "moveJobFromActiveToWait")),
        }
    }

    fn refused(&self, code: FinishCode, command: &'static str) -> WorkerError {
        WorkerError::FinishRefused {
            job_id: self.inner.job_id.clone(),
            code,
            command,
        }
    }
}
