//! Queue upkeep on the memory backend ([`QueueMaintenance`]), following the Redis backend's
//! scripts: the delayed count before a time (`ZCOUNT`), the scheduler check (`HEXISTS … ic`),
//! the job-owned `de:{id}` key, detaching a pending child, removing a parent's pending
//! children, and removing orphaned job keys.

use std::collections::BTreeSet;

use async_trait::async_trait;
use bullmq_protocol::score::DELAYED_SCORE_MULTIPLIER;

use super::flow::detach_from_parent;
use super::queue_state::{split_job_key, QueueState};
use super::stores::MemoryQueueStore;
use super::Queues;
use crate::error::BackendResult;
use crate::maintenance::{ChildDependency, QueueMaintenance};

/// Flow trees deeper than this are not followed (a cycle written by a foreign client).
const MAX_DEPTH: usize = 64;

#[async_trait]
impl QueueMaintenance for MemoryQueueStore {
    async fn get_delayed_count_before(&self, timestamp_ms: u64) -> BackendResult<u64> {
        let below = timestamp_ms.saturating_mul(DELAYED_SCORE_MULTIPLIER);
        self.queue(|q, _| {
            let count = q
                .delayed
                .members()
                .iter()
                .filter(|id| q.delayed.score(id).is_some_and(|score| score < below))
                .count();
            Ok(count as u64)
        })
    }

    async fn remove_deprecated_priority_key(&self) -> BackendResult<bool> {
        // This backend never had BullMQ 4's `priority` key.
        self.queue(|_, _| Ok(false))
    }

    async fn is_job_scheduler(&self, id: &str) -> BackendResult<bool> {
        self.queue(|q, _| {
            Ok(q.schedulers
                .hashes
                .get(id)
                .is_some_and(|hash| hash.contains_key("ic")))
        })
    }

    async fn remove_owned_deduplication_key(
        &self,
        dedup_id: &str,
        job_id: &str,
    ) -> BackendResult<bool> {
        self.queue(|q, now| {
            let owns = q
                .dedup
                .get(dedup_id)
                .is_some_and(|w| w.live(now) && w.value == job_id);
            if owns {
                q.dedup.remove(dedup_id);
            }
            Ok(owns)
        })
    }

    async fn remove_child_dependency(&self, job_id: &str) -> BackendResult<ChildDependency> {
        self.queues(|queues, now| Ok(remove_child_dependency(queues, &self.base, job_id, now)))
    }

    async fn remove_unprocessed_children(
        &self,
        job_id: &str,
    ) -> BackendResult<Vec<bullmq_protocol::JobRef>> {
        self.queues(|queues, now| {
            let mut removed = Vec::new();
            remove_pending_children(queues, &self.base, job_id, now, 0, &mut removed);
            // The keys are this backend's own, so each names a job.
            Ok(removed
                .iter()
                .filter_map(|key| super::queue_state::job_ref_of(key))
                .collect())
        })
    }

    async fn remove_orphaned_jobs(&self, _count: u32, limit: u64) -> BackendResult<u64> {
        // One step covers the whole queue here, so `limit` is exact.
        self.queue(|q, _| Ok(remove_orphans(q, limit)))
    }
}

fn remove_child_dependency(
    queues: &mut Queues,
    base: &str,
    job_id: &str,
    now: u64,
) -> ChildDependency {
    let Some(q) = queues
        .existing(base)
        .filter(|q| q.jobs.contains_key(job_id))
    else {
        return ChildDependency::JobMissing;
    };
    let child_key = q.job_key(job_id);
    let Some(parent_key) = q
        .field(job_id, "parentKey")
        .filter(|k| !k.is_empty())
        .map(str::to_owned)
    else {
        return ChildDependency::NotPending;
    };
    let Some((parent_base, parent_id)) = split_job_key(&parent_key) else {
        return ChildDependency::ParentMissing;
    };
    let Some(parent_q) = queues
        .existing(parent_base)
        .filter(|pq| pq.jobs.contains_key(parent_id))
    else {
        return ChildDependency::ParentMissing;
    };
    let pending = parent_q
        .dependencies
        .get(parent_id)
        .is_some_and(|deps| deps.contains(&child_key));
    if !pending {
        return ChildDependency::NotPending;
    }
    detach_from_parent(queues, base, job_id, false, now);
    if let Some(hash) = queues.queue(base).jobs.get_mut(job_id) {
        hash.remove("parentKey");
        hash.remove("parent");
    }
    ChildDependency::Removed
}

/// Removes the pending children of `job_id`, depth first, as Node's
/// `removeUnprocessedChildren`.
/// Removes the pending children of `job_id`, pushing the key of each job removed (deepest
/// first) on `removed`.
fn remove_pending_children(
    queues: &mut Queues,
    base: &str,
    job_id: &str,
    now: u64,
    depth: usize,
    removed: &mut Vec<String>,
) {
    if depth > MAX_DEPTH {
        return;
    }
    let mut pending: Vec<String> = queues
        .existing(base)
        .and_then(|q| q.dependencies.get(job_id))
        .map(|deps| deps.iter().cloned().collect())
        .unwrap_or_default();
    pending.sort();
    for key in pending {
        if let Some((child_base, child_id)) = split_job_key(&key) {
            let (child_base, child_id) = (child_base.to_owned(), child_id.to_owned());
            if remove_unprocessed(queues, &child_base, &child_id, now, depth + 1, removed) {
                removed.push(key);
            }
        }
    }
}

/// One pending child: kept when locked or failed, else detached, emptied of its own pending
/// children (pushed on `removed`), and removed with a `removed` event; whether it was removed.
fn remove_unprocessed(
    queues: &mut Queues,
    base: &str,
    job_id: &str,
    now: u64,
    depth: usize,
    removed: &mut Vec<String>,
) -> bool {
    {
        let q = queues.queue(base);
        if q.lock(job_id, now).is_some() || q.failed.score(job_id).is_some() {
            return false;
        }
    }
    detach_from_parent(queues, base, job_id, false, now);
    remove_pending_children(queues, base, job_id, now, depth, removed);
    let q = queues.queue(base);
    let prev = q.remove_from_any_state(job_id);
    q.release_dedup_of_removed(job_id, now);
    if !q.delete_job_keys(job_id) {
        return false;
    }
    q.emit_queue(
        now,
        "removed",
        &[("jobId", job_id.to_owned()), ("prev", prev.to_owned())],
    );
    true
}

/// Deletes the keys of every job id that no state references; at most `limit` (0: all).
fn remove_orphans(q: &mut QueueState, limit: u64) -> u64 {
    let mut candidates: BTreeSet<String> = BTreeSet::new();
    candidates.extend(q.jobs.keys().cloned());
    candidates.extend(q.logs.keys().cloned());
    candidates.extend(q.locks.keys().cloned());
    candidates.extend(q.dependencies.keys().cloned());
    candidates.extend(q.processed.keys().cloned());
    candidates.extend(q.failed_children.keys().cloned());
    candidates.extend(q.unsuccessful.keys().cloned());
    let mut removed = 0;
    for id in candidates {
        let referenced = q.wait.contains(&id)
            || q.active.contains(&id)
            || q.stalled.contains(&id)
            || [
                &q.prioritized,
                &q.delayed,
                &q.completed,
                &q.failed,
                &q.waiting_children,
                &q.schedulers.next,
            ]
            .iter()
            .any(|set| set.score(&id).is_some());
        if referenced {
            continue;
        }
        q.delete_job_keys(&id);
        removed += 1;
        if limit > 0 && removed >= limit {
            break;
        }
    }
    removed
}
