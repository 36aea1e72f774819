//! Queue and job upkeep on [`Queue`], as Node BullMQ 6.7's methods of the same names: the
//! delayed count (now or before a time), the library version in `meta`, the deprecated
//! `priority` key, the job-counts gauge, the scheduler check, a job's own deduplication key, a
//! flow child's link to its parent, a parent's pending children, and orphaned job keys.

use std::time::{SystemTime, UNIX_EPOCH};

use bullmq_backend::ChildDependency;
use bullmq_protocol::state::JobState;

use super::Queue;
use crate::error::{QueueError, Result};
use crate::telemetry;

impl Queue {
    /// Delayed jobs (Node `getDelayedCount()`).
    ///
    /// # Errors
    ///
    /// [`QueueError::Redis`] / [`QueueError::Backend`].
    pub async fn get_delayed_count(&self) -> Result<u64> {
        let counts = self.store().get_counts(&[JobState::Delayed]).await?;
        Ok(counts.first().copied().unwrap_or(0))
    }

    /// Delayed jobs due strictly before `timestamp` (Node `getDelayedCount(timestamp)`; a time
    /// before the Unix epoch counts none).
    ///
    /// # Errors
    ///
    /// As [`Queue::get_delayed_count`].
    pub async fn get_delayed_count_at(&self, timestamp: SystemTime) -> Result<u64> {
        let ms = timestamp
            .duration_since(UNIX_EPOCH)
            .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
            .unwrap_or(0);
        Ok(self.store().get_delayed_count_before(ms).await?)
    }

    /// The library version written in the queue's `meta` (`bullmq:6.7.0` for Node 6.7 and for
    /// this library), `None` when no client wrote it yet (Node `getVersion()`).
    ///
    /// # Errors
    ///
    /// As [`Queue::get_delayed_count`].
    pub async fn get_version(&self) -> Result<Option<String>> {
        Ok(self.store().get_meta().await?.remove("version"))
    }

    /// Deletes the `priority` key BullMQ 4 used (Node `removeDeprecatedPriorityKey()`); `true`
    /// when it existed.
    ///
    /// # Errors
    ///
    /// As [`Queue::get_delayed_count`].
    pub async fn remove_deprecated_priority_key(&self) -> Result<bool> {
        Ok(self.store().remove_deprecated_priority_key().await?)
    }

    /// Counts the jobs of `states` (empty: Node's default states) as
    /// [`Queue::get_job_counts_of`] and records each count on the gauge `bullmq_queue_jobs`
    /// (labels `queue`, `state`) of the installed `metrics` recorder (Node
    /// `recordJobCountsMetric(...types)`, which records `bullmq.queue.jobs` on its meter).
    ///
    /// # Errors
    ///
    /// As [`Queue::get_job_counts_of`]; nothing is recorded then.
    pub async fn record_job_counts_metric(
        &self,
        states: &[JobState],
    ) -> Result<Vec<(JobState, u64)>> {
        let counts = self.get_job_counts_of(states).await?;
        for (state, count) in &counts {
            telemetry::queue_jobs_counted(self.name(), *state, *count);
        }
        Ok(counts)
    }

    /// Whether `id` names a job scheduler of BullMQ 5 or later (its hash holds an iteration
    /// count), as Node's `JobScheduler.isJobScheduler(id)`; a BullMQ 4 repeatable job or an
    /// unknown id is not.
    ///
    /// # Errors
    ///
    /// As [`Queue::get_delayed_count`].
    pub async fn is_job_scheduler(&self, id: &str) -> Result<bool> {
        Ok(self.store().is_job_scheduler(id).await?)
    }

    /// Releases the deduplication id of job `job_id` only while that job still owns it (Node
    /// `job.removeDeduplicationKey()`): `false` when the job does not exist, has no
    /// deduplication id, or another job holds the id now. Compare
    /// [`Queue::remove_deduplication_key`], which releases an id whoever holds it.
    ///
    /// # Errors
    ///
    /// [`QueueError::Decode`] for a corrupted job hash; as [`Queue::get_delayed_count`].
    pub async fn remove_job_deduplication_key(&self, job_id: &str) -> Result<bool> {
        let Some(record) = self.store().get_job(job_id).await? else {
            return Ok(false);
        };
        self.remove_owned_deduplication_key(record.deduplication_id.as_deref(), job_id)
            .await
    }

    /// The one implementation of the job-owned release, for [`Queue::remove_job_deduplication_key`]
    /// and `Job::remove_deduplication_key` (which knows its deduplication id already).
    pub(crate) async fn remove_owned_deduplication_key(
        &self,
        dedup_id: Option<&str>,
        job_id: &str,
    ) -> Result<bool> {
        match dedup_id {
            Some(dedup_id) => Ok(self
                .store()
                .remove_owned_deduplication_key(dedup_id, job_id)
                .await?),
            None => Ok(false),
        }
    }

    /// Detaches job `job_id` from its flow parent while it is still a pending child (Node
    /// `job.removeChildDependency()`): the job loses its `parentKey` and `parent` fields, and
    /// a parent left without pending children moves to `wait` (emitting `waiting`, prev
    /// `waiting-children`). `false`, writing nothing, when the job has no parent or is no
    /// longer pending for it (Node throws for a job without a parent; this returns `false`).
    ///
    /// # Errors
    ///
    /// [`QueueError::JobNotFound`] (Node -1); [`QueueError::ParentNotFound`] when the parent
    /// is gone (Node -5); nothing is written then. As [`Queue::get_delayed_count`].
    pub async fn remove_child_dependency(&self, job_id: &str) -> Result<bool> {
        match self.store().remove_child_dependency(job_id).await? {
            ChildDependency::Removed => Ok(true),
            ChildDependency::JobMissing => Err(QueueError::JobNotFound {
                job_id: job_id.to_owned(),
            }),
            ChildDependency::ParentMissing => {
                let record = self.store().get_job(job_id).await?;
                Err(QueueError::ParentNotFound {
                    parent_key: record.and_then(|r| r.parent_key).unwrap_or_default(),
                })
            }
            _ => Ok(false),
        }
    }

    /// Removes the pending children of job `job_id` (those not completed, failed or active),
    /// recursively through their own pending children, each with its keys and a `removed`
    /// event in its queue (Node `job.removeUnprocessedChildren()`). Children holding a lock,
    /// and failed ones, are kept; a parent left without pending children moves to `wait`.
    /// Returns the job keys (`{prefix}:{queue}:{id}`) of the jobs removed, each after its own
    /// children (Node returns nothing).
    ///
    /// # Errors
    ///
    /// As [`Queue::get_delayed_count`].
    pub async fn remove_unprocessed_children(&self, job_id: &str) -> Result<Vec<String>> {
        let removed = self.store().remove_unprocessed_children(job_id).await?;
        Ok(removed.iter().map(ToString::to_string).collect())
    }

    /// Deletes job keys that no state of the queue references — left behind by a BullMQ
    /// 5.66.6 bug — scanning about `count` keys per step (Node's default 1000) and stopping
    /// after the step that reached `limit` (0: no limit, Node's default), so a step may remove
    /// a few more than `limit`; returns how many jobs were removed (Node
    /// `removeOrphanedJobs(count, limit)`). Call it in a loop while it returns `limit` to
    /// clean a large queue in parts.
    ///
    /// # Errors
    ///
    /// [`QueueError::InvalidArgument`] when `count` is 0 (nothing written); as
    /// [`Queue::get_delayed_count`] (orphans removed by earlier steps stay removed).
    pub async fn remove_orphaned_jobs(&self, count: u32, limit: u64) -> Result<u64> {
        if count == 0 {
            return Err(QueueError::InvalidArgument {
                argument: "count",
                reason: "at least 1 key per scan step",
            });
        }
        Ok(self.store().remove_orphaned_jobs(count, limit).await?)
    }
}
