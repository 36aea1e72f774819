//! [`QueueMaintenance`] on Redis: the calls of [`crate::queue::maintenance`]. The delayed count
//! and the scheduler check are reads, routed as the other getters (to a replica when
//! [`crate::ConnectionConfig::replica_reads`] is on).

use async_trait::async_trait;
use bullmq_backend::{BackendResult, ChildDependency, QueueMaintenance};

use super::queue_store::RedisQueueStore;
use crate::queue::maintenance as calls;

#[async_trait]
impl QueueMaintenance for RedisQueueStore {
    async fn get_delayed_count_before(&self, timestamp_ms: u64) -> BackendResult<u64> {
        let keys = &self.keys;
        Ok(self
            .reads
            .read(|c| async move { calls::get_delayed_count_before(&c, keys, timestamp_ms).await })
            .await?)
    }

    async fn remove_deprecated_priority_key(&self) -> BackendResult<bool> {
        Ok(calls::remove_deprecated_priority_key(&self.client, &self.keys).await?)
    }

    async fn is_job_scheduler(&self, id: &str) -> BackendResult<bool> {
        let keys = &self.keys;
        Ok(self
            .reads
            .read(|c| async move { calls::is_job_scheduler(&c, keys, id).await })
            .await?)
    }

    async fn remove_owned_deduplication_key(
        &self,
        dedup_id: &str,
        job_id: &str,
    ) -> BackendResult<bool> {
        Ok(
            calls::remove_owned_deduplication_key(&self.client, &self.keys, dedup_id, job_id)
                .await?,
        )
    }

    async fn remove_child_dependency(&self, job_id: &str) -> BackendResult<ChildDependency> {
        Ok(calls::remove_child_dependency(&self.client, &self.keys, job_id).await?)
    }

    async fn remove_unprocessed_children(
        &self,
        job_id: &str,
    ) -> BackendResult<Vec<bullmq_protocol::JobRef>> {
        let removed = calls::remove_unprocessed_children(&self.client, &self.keys, job_id).await?;
        super::refs::job_refs(job_id, "dependencies", &removed)
    }

    async fn remove_orphaned_jobs(&self, count: u32, limit: u64) -> BackendResult<u64> {
        Ok(calls::remove_orphaned_jobs(&self.client, &self.keys, count, limit).await?)
    }
}
