//! Queue and job upkeep on Redis (Node 6.7's `getDelayedCount(timestamp)`,
//! `removeDeprecatedPriorityKey`, `JobScheduler.isJobScheduler`, `job.removeDeduplicationKey`,
//! `job.removeChildDependency`, `job.removeUnprocessedChildren`, `queue.removeOrphanedJobs`):
//! single commands where one is atomic on its own (`ZCOUNT`, `DEL`, `HEXISTS`), scripts where a
//! decision and a write must not be split.

use std::collections::BTreeSet;

use bullmq_backend::ChildDependency;
use bullmq_protocol::keys::{QueueKey, QueueKeys};
use bullmq_protocol::score::DELAYED_SCORE_MULTIPLIER;
use fred::interfaces::ClusterInterface;
use fred::prelude::{
    Client, ClientLike, HashesInterface, KeysInterface, SortedSetsInterface, Value,
};

use super::discover::{glob_escape, scan_step};
use super::reply::{integer, strings, unexpected};
use super::scripts::{
    REMOVE_CHILD_DEPENDENCY, REMOVE_ORPHANED_JOBS, REMOVE_OWNED_DEDUP_KEY,
    REMOVE_UNPROCESSED_CHILDREN,
};
use crate::error::Result;

/// `ZCOUNT delayed -inf (timestamp·0x1000)`: delayed jobs due strictly before `timestamp_ms`.
///
/// # Errors
///
/// [`crate::RedisError::Command`] when Redis fails.
pub(crate) async fn get_delayed_count_before(
    client: &Client,
    keys: &QueueKeys,
    timestamp_ms: u64,
) -> Result<u64> {
    let below = timestamp_ms.saturating_mul(DELAYED_SCORE_MULTIPLIER);
    let count: u64 = client
        .zcount(
            keys.key(QueueKey::Delayed),
            f64::NEG_INFINITY,
            below as f64 - 1.0,
        )
        .await?;
    Ok(count)
}

/// `DEL {base}priority` (BullMQ 4's priority key); whether it existed.
///
/// # Errors
///
/// As [`get_delayed_count_before`].
pub(crate) async fn remove_deprecated_priority_key(
    client: &Client,
    keys: &QueueKeys,
) -> Result<bool> {
    let removed: u64 = client.del(format!("{}priority", keys.base())).await?;
    Ok(removed > 0)
}

/// `HEXISTS repeat:{id} ic`: a BullMQ 5+ job scheduler keeps its iteration count there.
///
/// # Errors
///
/// As [`get_delayed_count_before`].
pub(crate) async fn is_job_scheduler(client: &Client, keys: &QueueKeys, id: &str) -> Result<bool> {
    let key = format!("{}:{id}", keys.key(QueueKey::Repeat));
    let exists: bool = client.hexists(key, "ic").await?;
    Ok(exists)
}

/// Runs `remove_owned_dedup_key.lua`: `de:{dedup_id}` goes only while `job_id` owns it.
///
/// # Errors
///
/// As [`get_delayed_count_before`]; [`crate::RedisError::UnexpectedReply`] on a non-integer
/// reply.
pub(crate) async fn remove_owned_deduplication_key(
    client: &Client,
    keys: &QueueKeys,
    dedup_id: &str,
    job_id: &str,
) -> Result<bool> {
    let reply: Value = REMOVE_OWNED_DEDUP_KEY
        .run(
            client,
            vec![keys.deduplication(dedup_id)],
            vec![Value::from(job_id)],
        )
        .await?;
    Ok(integer(REMOVE_OWNED_DEDUP_KEY.name(), &reply)? > 0)
}

/// Runs `remove_child_dependency.lua`.
///
/// # Errors
///
/// As [`remove_owned_deduplication_key`], also for a code the script does not return.
pub(crate) async fn remove_child_dependency(
    client: &Client,
    keys: &QueueKeys,
    job_id: &str,
) -> Result<ChildDependency> {
    let name = REMOVE_CHILD_DEPENDENCY.name();
    let reply: Value = REMOVE_CHILD_DEPENDENCY
        .run(
            client,
            vec![keys.job(job_id)],
            vec![Value::from(keys.base())],
        )
        .await?;
    match integer(name, &reply)? {
        0 => Ok(ChildDependency::Removed),
        1 => Ok(ChildDependency::NotPending),
        -1 => Ok(ChildDependency::JobMissing),
        -5 => Ok(ChildDependency::ParentMissing),
        code => Err(unexpected(name, format!("unknown code {code}"))),
    }
}

/// Runs `remove_unprocessed_children.lua` on parent `job_id`.
///
/// # Errors
///
/// As [`remove_owned_deduplication_key`].
pub(crate) async fn remove_unprocessed_children(
    client: &Client,
    keys: &QueueKeys,
    job_id: &str,
) -> Result<Vec<String>> {
    let reply: Value = REMOVE_UNPROCESSED_CHILDREN
        .run(client, vec![keys.job(job_id)], Vec::new())
        .await?;
    strings(REMOVE_UNPROCESSED_CHILDREN.name(), reply)
}

/// The infrastructure suffixes of a queue (Node's queue key map): keys with these names, and
/// keys under them (`repeat:…`, `de:…`), are never job keys.
const QUEUE_SUFFIXES: [&str; 19] = [
    "",
    "active",
    "wait",
    "waiting-children",
    "paused",
    "id",
    "delayed",
    "prioritized",
    "stalled-check",
    "completed",
    "failed",
    "stalled",
    "repeat",
    "limiter",
    "meta",
    "events",
    "pc",
    "marker",
    "de",
];

/// A job's own sub-keys, the only `{id}:{suffix}` keys that make `{id}` a candidate.
const JOB_SUB_KEYS: [&str; 6] = [
    "logs",
    "dependencies",
    "processed",
    "failed",
    "unsuccessful",
    "lock",
];

/// The job id a scanned key belongs to, when it is a job hash or one of its sub-keys (as Node's
/// `removeOrphanedJobs` reads keys).
fn candidate_id<'k>(key: &'k str, base: &str) -> Option<&'k str> {
    let suffix = key.strip_prefix(base)?;
    if QUEUE_SUFFIXES.contains(&suffix) {
        return None;
    }
    match suffix.split_once(':') {
        None => Some(suffix),
        Some((head, _)) if QUEUE_SUFFIXES.contains(&head) => None,
        Some((id, sub)) => JOB_SUB_KEYS.contains(&sub).then_some(id),
    }
}

/// Node's `removeOrphanedJobs(count, limit)`: `SCAN {base}* COUNT count`, and for each step
/// with candidates one `remove_orphaned_jobs.lua` call; stops after the step that reached
/// `limit` (0: none). On a cluster the node holding the queue's slot is scanned.
///
/// # Errors
///
/// As [`remove_owned_deduplication_key`]; orphans removed by earlier steps stay removed.
pub(crate) async fn remove_orphaned_jobs(
    client: &Client,
    keys: &QueueKeys,
    count: u32,
    limit: u64,
) -> Result<u64> {
    let base = keys.base();
    let pattern = format!("{}*", glob_escape(base));
    let node = if client.is_clustered() {
        let slot = fred::util::redis_keyslot(base.as_bytes());
        client
            .cached_cluster_state()
            .and_then(|state| state.get_server(slot).cloned())
    } else {
        None
    };
    let mut removed = 0;
    let mut cursor = "0".to_owned();
    loop {
        let (next, found) = scan_step(client, node.as_ref(), &cursor, &pattern, count).await?;
        cursor = next;
        let candidates: BTreeSet<&str> = found
            .iter()
            .filter_map(|key| candidate_id(key, base))
            .collect();
        if !candidates.is_empty() {
            let reply: Value = REMOVE_ORPHANED_JOBS
                .run(
                    client,
                    vec![base.to_owned()],
                    candidates.into_iter().map(Value::from).collect(),
                )
                .await?;
            let n = integer(REMOVE_ORPHANED_JOBS.name(), &reply)?;
            removed += u64::try_from(n).unwrap_or(0);
            if limit > 0 && removed >= limit {
                return Ok(removed);
            }
        }
        if cursor == "0" {
            return Ok(removed);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::candidate_id;

    #[test]
    fn candidates_are_job_hashes_and_their_sub_keys() {
        let base = "bull:q:";
        assert_eq!(candidate_id("bull:q:42", base), Some("42"));
        assert_eq!(candidate_id("bull:q:42:logs", base), Some("42"));
        assert_eq!(candidate_id("bull:q:42:lock", base), Some("42"));
        assert_eq!(candidate_id("bull:q:42:other", base), None);
        for infra in [
            "bull:q:meta",
            "bull:q:wait",
            "bull:q:",
            "bull:q:de",
            "bull:q:repeat:a:b",
        ] {
            assert_eq!(candidate_id(infra, base), None, "{infra}");
        }
        assert_eq!(candidate_id("bull:q:de:x", base), None);
        assert_eq!(candidate_id("bull:q:metrics:completed", base), None);
        assert_eq!(candidate_id("bull:other:1", base), None);
    }
}
