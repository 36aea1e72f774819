//! [`JobContext`]: what a processor can do besides computing its result.

use std::fmt;
use std::sync::{Arc, OnceLock};

use serde_json::Value;
use tokio_util::sync::CancellationToken;

use super::callbacks::WorkerCallbacks;
use super::outcome::CancelReason;
use crate::store::{Store, StoreError, StoreResult};
use crate::telemetry::{self, JobTelemetry};

/// Handed to the processor with its job: progress, logs, data updates, the attempt number and
/// the job's cancellation token.
///
/// The token is cancelled when the worker loses the job's lock (another worker may own the job
/// now) or is force-closed; [`JobContext::cancel_reason`] says which. The worker stops waiting
/// for the processor at that point (its future is dropped), so long computations should check
/// the token between steps.
///
/// Cloning is cheap: clones share one context.
#[derive(Clone)]
pub struct JobContext {
    inner: Arc<ContextInner>,
}

struct ContextInner {
    job_id: String,
    job_name: String,
    attempt: u32,
    keep_logs: Option<u64>,
    cancel: CancellationToken,
    reason: OnceLock<CancelReason>,
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
    pub(crate) fn new(
        job_id: String,
        job_name: String,
        attempt: u32,
        keep_logs: Option<u64>,
        store: Arc<dyn Store>,
        callbacks: WorkerCallbacks,
        worker: Arc<str>,
    ) -> Self {
        Self {
            inner: Arc::new(ContextInner {
                job_id,
                job_name,
                worker,
                attempt,
                keep_logs,
                cancel: CancellationToken::new(),
                reason: OnceLock::new(),
                store,
                callbacks,
            }),
        }
    }

    /// The job's id.
    pub fn job_id(&self) -> &str {
        &self.inner.job_id
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
        self.inner.reason.get().copied()
    }

    /// Cancels the job's token with `reason` (the first reason sticks).
    pub(crate) fn cancel(&self, reason: CancelReason) {
        let _ = self.inner.reason.set(reason);
        self.inner.cancel.cancel();
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
        let jt = JobTelemetry::new(
            self.inner.store.queue_name(),
            &self.inner.job_id,
            &self.inner.job_name,
        )
        .attempt(self.inner.attempt)
        .worker(&self.inner.worker);
        telemetry::job_progress(&jt, &progress);
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
        let deps = self
            .inner
            .store
            .get_dependencies(&self.inner.job_id)
            .await?;
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
        Ok(self
            .inner
            .store
            .get_dependencies(&self.inner.job_id)
            .await?
            .ignored)
    }

    /// This job's children by outcome (Node's `job.getDependencies()`).
    ///
    /// # Errors
    ///
    /// The backend's error.
    pub async fn get_dependencies(&self) -> StoreResult<crate::store::Dependencies> {
        self.inner.store.get_dependencies(&self.inner.job_id).await
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
    ) -> StoreResult<crate::store::DependencyPage> {
        self.inner
            .store
            .get_dependencies_page(&self.inner.job_id, kind, cursor, count)
            .await
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
}
