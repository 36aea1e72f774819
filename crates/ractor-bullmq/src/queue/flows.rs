//! A flow parent's children, read from the queue by job id (Node's `job.getChildrenValues()`,
//! `getIgnoredChildrenFailures()`, `getDependencies()`, `getDependenciesCount()`; the same
//! reads are on a [`Job`](crate::Job) the queue read, and inside a processor on `JobContext`).

use std::collections::BTreeMap;

use bullmq_backend::{DependencyCounts, DependencyKind};
use serde::de::DeserializeOwned;

use super::{Dependencies, DependencyPage, Queue};
use crate::error::Result;

impl Queue {
    /// What the completed children of `job_id` returned, by child job key
    /// (`{prefix}:{queue}:{id}`), each read as `T` (`serde_json::Value` for any).
    ///
    /// # Errors
    ///
    /// [`crate::QueueError::Json`] when a value is not a `T`, [`crate::QueueError::Redis`].
    pub async fn get_children_values<T: DeserializeOwned>(
        &self,
        job_id: &str,
    ) -> Result<BTreeMap<String, T>> {
        let deps = Dependencies::from(self.inner.store.get_dependencies(job_id).await?);
        Ok(crate::job::children_values(deps.processed)?)
    }

    /// The failure reasons of the children of `job_id` that failed with
    /// `ignoreDependencyOnFailure`, by child job key (Node's `getIgnoredChildrenFailures`).
    ///
    /// # Errors
    ///
    /// [`crate::QueueError::Redis`].
    pub async fn get_ignored_children_failures(
        &self,
        job_id: &str,
    ) -> Result<BTreeMap<String, String>> {
        let deps = Dependencies::from(self.inner.store.get_dependencies(job_id).await?);
        Ok(deps.ignored)
    }

    /// The same as [`Queue::get_ignored_children_failures`] (Node's deprecated
    /// `getFailedChildrenValues`).
    ///
    /// # Errors
    ///
    /// [`crate::QueueError::Redis`].
    pub async fn get_failed_children_values(
        &self,
        job_id: &str,
    ) -> Result<BTreeMap<String, String>> {
        self.get_ignored_children_failures(job_id).await
    }

    /// The children of `job_id` by outcome: processed (with return values), unprocessed,
    /// ignored (with failure reasons) and failed.
    ///
    /// # Errors
    ///
    /// [`crate::QueueError::Redis`].
    pub async fn get_dependencies(&self, job_id: &str) -> Result<Dependencies> {
        Ok(self.inner.store.get_dependencies(job_id).await?.into())
    }

    /// About `count` children of `job_id` of one `kind`, from `cursor` (0 to start; the page's
    /// `next_cursor` is 0 after the last page), as Node's `getDependencies` with paging
    /// options.
    ///
    /// # Errors
    ///
    /// [`crate::QueueError::Redis`].
    pub async fn get_dependencies_page(
        &self,
        job_id: &str,
        kind: DependencyKind,
        cursor: u64,
        count: u64,
    ) -> Result<DependencyPage> {
        Ok(self
            .inner
            .store
            .get_dependencies_page(job_id, kind, cursor, count)
            .await?
            .into())
    }

    /// How many children `job_id` has by outcome.
    ///
    /// # Errors
    ///
    /// [`crate::QueueError::Redis`].
    pub async fn get_dependencies_count(&self, job_id: &str) -> Result<DependencyCounts> {
        Ok(self.inner.store.get_dependency_counts(job_id).await?)
    }
}
