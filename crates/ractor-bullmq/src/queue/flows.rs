//! A flow parent's children, read from the queue by job id or from a [`Job`] the queue read
//! (Node's `job.getChildrenValues()`, `getIgnoredChildrenFailures()`, `getDependencies()`,
//! `getDependenciesCount()`; inside a processor the same reads are on `JobContext`).

use std::collections::BTreeMap;

use bullmq_backend::{Dependencies, DependencyCounts, DependencyKind, DependencyPage};
use serde::de::DeserializeOwned;

use super::Queue;
use crate::error::{QueueError, Result};
use crate::job::Job;

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
        let deps = self.inner.store.get_dependencies(job_id).await?;
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
        Ok(self.inner.store.get_dependencies(job_id).await?.ignored)
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
        Ok(self.inner.store.get_dependencies(job_id).await?)
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
            .await?)
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

/// The same reads on a [`Job`], as Node has them on its `Job` class. A `Job` is a snapshot
/// without a connection, so each read takes the [`Queue`] the job belongs to; a queue of
/// another name is refused with [`QueueError::OtherQueue`] before anything is read.
///
/// ```no_run
/// # async fn run(queue: ractor_bullmq::Queue) -> Result<(), ractor_bullmq::QueueError> {
/// if let Some(parent) = queue.get_job("report-1").await? {
///     let totals = parent.get_children_values::<u64>(&queue).await?;
///     let counts = parent.get_dependencies_count(&queue).await?;
///     println!("{} children done, {} pending: {totals:?}", counts.processed, counts.unprocessed);
/// }
/// # Ok(())
/// # }
/// ```
impl Job {
    fn through<'q>(&self, queue: &'q Queue) -> Result<&'q Queue> {
        if self.queue_name() == queue.name() {
            Ok(queue)
        } else {
            Err(QueueError::OtherQueue {
                job_id: self.id().to_owned(),
                job_queue: self.queue_name().to_owned(),
                queue: queue.name().to_owned(),
            })
        }
    }

    /// What this job's completed children returned ([`Queue::get_children_values`]).
    ///
    /// # Errors
    ///
    /// [`QueueError::OtherQueue`], and those of [`Queue::get_children_values`].
    pub async fn get_children_values<T: DeserializeOwned>(
        &self,
        queue: &Queue,
    ) -> Result<BTreeMap<String, T>> {
        self.through(queue)?.get_children_values(self.id()).await
    }

    /// The failure reasons of this job's children ignored on failure
    /// ([`Queue::get_ignored_children_failures`]).
    ///
    /// # Errors
    ///
    /// [`QueueError::OtherQueue`], [`QueueError::Redis`].
    pub async fn get_ignored_children_failures(
        &self,
        queue: &Queue,
    ) -> Result<BTreeMap<String, String>> {
        self.through(queue)?
            .get_ignored_children_failures(self.id())
            .await
    }

    /// The same as [`Job::get_ignored_children_failures`] (Node's deprecated
    /// `getFailedChildrenValues`).
    ///
    /// # Errors
    ///
    /// [`QueueError::OtherQueue`], [`QueueError::Redis`].
    pub async fn get_failed_children_values(
        &self,
        queue: &Queue,
    ) -> Result<BTreeMap<String, String>> {
        self.get_ignored_children_failures(queue).await
    }

    /// This job's children by outcome ([`Queue::get_dependencies`]).
    ///
    /// # Errors
    ///
    /// [`QueueError::OtherQueue`], [`QueueError::Redis`].
    pub async fn get_dependencies(&self, queue: &Queue) -> Result<Dependencies> {
        self.through(queue)?.get_dependencies(self.id()).await
    }

    /// A page of this job's children of one `kind` ([`Queue::get_dependencies_page`]).
    ///
    /// # Errors
    ///
    /// [`QueueError::OtherQueue`], [`QueueError::Redis`].
    pub async fn get_dependencies_page(
        &self,
        queue: &Queue,
        kind: DependencyKind,
        cursor: u64,
        count: u64,
    ) -> Result<DependencyPage> {
        self.through(queue)?
            .get_dependencies_page(self.id(), kind, cursor, count)
            .await
    }

    /// How many children this job has by outcome ([`Queue::get_dependencies_count`]).
    ///
    /// # Errors
    ///
    /// [`QueueError::OtherQueue`], [`QueueError::Redis`].
    pub async fn get_dependencies_count(&self, queue: &Queue) -> Result<DependencyCounts> {
        self.through(queue)?.get_dependencies_count(self.id()).await
    }
}
