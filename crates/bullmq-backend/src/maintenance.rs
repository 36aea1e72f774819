//! Queue and job upkeep that Node BullMQ 6.7 has on `Queue` and `Job` beyond the core
//! ([`QueueMaintenance`]): the delayed count before a time, the deprecated `priority` key, the
//! scheduler check, the job-owned deduplication key, detaching or removing a parent's pending
//! children, and removing orphaned job keys.

use async_trait::async_trait;
use bullmq_protocol::JobRef;

use crate::capability::{unsupported, BackendName, Capability};
use crate::error::BackendResult;

/// Outcome of [`QueueMaintenance::remove_child_dependency`] (Node's codes 0, 1, -1, -5).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ChildDependency {
    /// The job was a pending child of its parent and is not any more (Node 0); its `parentKey`
    /// and `parent` fields are gone, and a parent left without pending children moved to
    /// `wait` (with its `waiting` event, prev `waiting-children`).
    Removed,
    /// The job has no parent, or is not among its parent's pending children (Node 1).
    NotPending,
    /// No such job (Node -1).
    JobMissing,
    /// The job names a parent that does not exist (Node -5).
    ParentMissing,
}

/// Upkeep of one queue and its jobs.
#[async_trait]
#[allow(unused_variables)] // the default bodies decline without reading their arguments
pub trait QueueMaintenance: BackendName {
    /// Delayed jobs due strictly before `timestamp_ms` (Node `getDelayedCount(timestamp)`).
    async fn get_delayed_count_before(&self, timestamp_ms: u64) -> BackendResult<u64> {
        unsupported(self, Capability::Maintenance)
    }

    /// Deletes the `priority` key BullMQ before 5 kept (Node `removeDeprecatedPriorityKey`);
    /// `true` when it existed.
    async fn remove_deprecated_priority_key(&self) -> BackendResult<bool> {
        unsupported(self, Capability::Maintenance)
    }

    /// Whether `id` is a job scheduler of BullMQ 5.x or later (its hash has an iteration
    /// count, `ic`), as Node's `JobScheduler.isJobScheduler`.
    async fn is_job_scheduler(&self, id: &str) -> BackendResult<bool> {
        unsupported(self, Capability::Maintenance)
    }

    /// Deletes `de:{dedup_id}` only while job `job_id` owns it (Node
    /// `job.removeDeduplicationKey()`); `true` when it was deleted.
    async fn remove_owned_deduplication_key(
        &self,
        dedup_id: &str,
        job_id: &str,
    ) -> BackendResult<bool> {
        unsupported(self, Capability::Maintenance)
    }

    /// Detaches job `job_id` from its parent while it is a pending child (Node
    /// `job.removeChildDependency()`).
    async fn remove_child_dependency(&self, job_id: &str) -> BackendResult<ChildDependency> {
        unsupported(self, Capability::Maintenance)
    }

    /// Removes the pending children of `job_id` (its `:dependencies`), recursively, each in its
    /// queue with a `removed` event, skipping locked children and failed ones (Node
    /// `job.removeUnprocessedChildren()`). A parent left without pending children moves to
    /// `wait`. Returns the jobs removed, each after its own children.
    async fn remove_unprocessed_children(&self, job_id: &str) -> BackendResult<Vec<JobRef>> {
        unsupported(self, Capability::Maintenance)
    }

    /// Deletes job keys that no state of the queue references (Node
    /// `removeOrphanedJobs(count, limit)`), scanning about `count` keys per step and stopping
    /// after the step that reached `limit` (0: no limit); returns how many jobs were removed.
    async fn remove_orphaned_jobs(&self, count: u32, limit: u64) -> BackendResult<u64> {
        unsupported(self, Capability::Maintenance)
    }
}

#[async_trait]
impl<T: QueueMaintenance + ?Sized> QueueMaintenance for std::sync::Arc<T> {
    async fn get_delayed_count_before(&self, timestamp_ms: u64) -> BackendResult<u64> {
        (**self).get_delayed_count_before(timestamp_ms).await
    }

    async fn remove_deprecated_priority_key(&self) -> BackendResult<bool> {
        (**self).remove_deprecated_priority_key().await
    }

    async fn is_job_scheduler(&self, id: &str) -> BackendResult<bool> {
        (**self).is_job_scheduler(id).await
    }

    async fn remove_owned_deduplication_key(
        &self,
        dedup_id: &str,
        job_id: &str,
    ) -> BackendResult<bool> {
        (**self)
            .remove_owned_deduplication_key(dedup_id, job_id)
            .await
    }

    async fn remove_child_dependency(&self, job_id: &str) -> BackendResult<ChildDependency> {
        (**self).remove_child_dependency(job_id).await
    }

    async fn remove_unprocessed_children(&self, job_id: &str) -> BackendResult<Vec<JobRef>> {
        (**self).remove_unprocessed_children(job_id).await
    }

    async fn remove_orphaned_jobs(&self, count: u32, limit: u64) -> BackendResult<u64> {
        (**self).remove_orphaned_jobs(count, limit).await
    }
}
