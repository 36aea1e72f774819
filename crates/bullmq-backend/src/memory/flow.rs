//! Parent/child bookkeeping when a child finishes (`includes/worker_flow.lua`) or is removed
//! (`detachFromParent` of `includes/remove_job_fully.lua`). Parents may live in any queue of
//! the same backend.

use std::collections::{HashMap, HashSet};

use serde_json::Value;

use bullmq_protocol::JobRef;

use super::queue_state::{job_ref_of, split_job_key, QueueState};
use super::Queues;

/// A child's parent, read from its `parent` JSON or `parentKey`.
#[derive(Debug, Clone)]
pub(crate) struct ParentOf {
    pub(crate) base: String,
    pub(crate) id: String,
    policy: serde_json::Map<String, Value>,
}

impl ParentOf {
    fn flag(&self, name: &str) -> bool {
        self.policy
            .get(name)
            .is_some_and(|v| v.as_bool() == Some(true))
    }
}

/// The parent of `job_id`; `Err(reason)` when the fields are corrupted.
pub(crate) fn parent_of(q: &QueueState, job_id: &str) -> Result<Option<ParentOf>, String> {
    if let Some(raw) = q.field(job_id, "parent") {
        let parsed: Option<serde_json::Map<String, Value>> = serde_json::from_str(raw).ok();
        let reference = parsed.as_ref().and_then(|p| {
            let id = match p.get("id")? {
                Value::String(s) => s.clone(),
                Value::Number(n) => n.to_string(),
                _ => return None,
            };
            let queue_key = p.get("queueKey")?.as_str()?;
            Some((id, format!("{queue_key}:")))
        });
        return match (reference, parsed) {
            (Some((id, base)), Some(policy)) => Ok(Some(ParentOf { base, id, policy })),
            _ => Err(format!(
                "corrupted job hash: parent is {raw:?}, not a parent reference"
            )),
        };
    }
    match q.field(job_id, "parentKey").filter(|k| !k.is_empty()) {
        None => Ok(None),
        Some(key) => match split_job_key(key) {
            Some((base, id)) if !id.is_empty() => Ok(Some(ParentOf {
                base: base.to_owned(),
                id: id.to_owned(),
                policy: serde_json::Map::new(),
            })),
            _ => Err(format!(
                "corrupted job hash: parentKey is {key:?}, not a job key"
            )),
        },
    }
}

/// Moves a parent out of `waiting-children` into delayed / prioritized / wait.
pub(crate) fn release_parent(queues: &mut Queues, base: &str, parent_id: &str, now: u64) {
    let Some(q) = queues.existing(base) else {
        return;
    };
    if !q.jobs.contains_key(parent_id) || !q.waiting_children.remove(parent_id) {
        return;
    }
    let delay = q.int_field(parent_id, "delay");
    if delay > 0 {
        let ready_at = now.saturating_add(delay);
        q.delayed.add(
            bullmq_protocol::score::delayed_score(ready_at, 0),
            parent_id,
        );
        q.emit(
            now,
            "delayed",
            &[
                ("jobId", parent_id.to_owned()),
                ("delay", ready_at.to_string()),
            ],
        );
        q.signal_delayed();
        return;
    }
    q.enqueue_ready(parent_id, true);
    q.emit(
        now,
        "waiting",
        &[
            ("jobId", parent_id.to_owned()),
            ("prev", "waiting-children".into()),
        ],
    );
}

/// A child completed with `returnvalue`.
pub(crate) fn child_completed(
    queues: &mut Queues,
    parent: &ParentOf,
    child_key: &str,
    returnvalue: &str,
    now: u64,
) {
    let q = queues.queue(&parent.base);
    let removed = q
        .dependencies
        .get_mut(&parent.id)
        .is_some_and(|deps| deps.remove(child_key));
    if !removed {
        return;
    }
    q.processed
        .entry(parent.id.clone())
        .or_default()
        .insert(child_key.to_owned(), returnvalue.to_owned());
    if q.dependencies.get(&parent.id).is_none_or(|d| d.is_empty()) {
        q.dependencies.remove(&parent.id);
        release_parent(queues, &parent.base, &parent.id, now);
    }
}

/// A child failed for good with `reason`: the parent's failure policy applies.
pub(crate) fn child_failed(
    queues: &mut Queues,
    parent: &ParentOf,
    child_key: &str,
    reason: &str,
    now: u64,
) {
    let q = queues.queue(&parent.base);
    let policy_applies =
        parent.flag("fpof") || parent.flag("cpof") || parent.flag("idof") || parent.flag("rdof");
    if !policy_applies {
        return;
    }
    let removed = q
        .dependencies
        .get_mut(&parent.id)
        .is_some_and(|deps| deps.remove(child_key));
    if !removed {
        return;
    }
    let pending_left = q
        .dependencies
        .get(&parent.id)
        .is_some_and(|d| !d.is_empty());
    if !pending_left {
        q.dependencies.remove(&parent.id);
    }
    let id = parent.id.clone();
    if parent.flag("fpof") {
        q.unsuccessful
            .entry(id.clone())
            .or_default()
            .insert(child_key.to_owned());
        if !q.jobs.contains_key(&id) {
            return;
        }
        let failure = format!("child {child_key} failed");
        if q.delayed.remove(&id) {
            // A delayed parent is failed now rather than after its delay.
            q.set_field(&id, "delay", "0");
            q.waiting_children.add(now, &id);
        }
        if q.waiting_children.score(&id).is_some() {
            q.set_field(&id, "defa", failure);
            release_parent(queues, &parent.base, &id, now);
        } else if q.failed.score(&id).is_none() {
            q.set_field(&id, "defa", failure);
        }
    } else if parent.flag("cpof") {
        q.failed_children
            .entry(id.clone())
            .or_default()
            .insert(child_key.to_owned(), reason.to_owned());
        release_parent(queues, &parent.base, &id, now);
    } else {
        if parent.flag("idof") {
            q.failed_children
                .entry(id.clone())
                .or_default()
                .insert(child_key.to_owned(), reason.to_owned());
        }
        if !pending_left {
            release_parent(queues, &parent.base, &id, now);
        }
    }
}

/// Drops a removed job from its parent's pending children; a parent left without any is
/// deleted too (`hard`, same queue: drain, clean, obliterate) or released to wait.
pub(crate) fn detach_from_parent(
    queues: &mut Queues,
    base: &str,
    job_id: &str,
    hard: bool,
    now: u64,
) {
    let Some(q) = queues.existing(base) else {
        return;
    };
    let Some(parent_key) = q.field(job_id, "parentKey").filter(|k| !k.is_empty()) else {
        return;
    };
    let parent_key = parent_key.to_owned();
    let child_key = q.job_key(job_id);
    let Some((parent_base, parent_id)) = split_job_key(&parent_key) else {
        return;
    };
    let (parent_base, parent_id) = (parent_base.to_owned(), parent_id.to_owned());
    let parent_q = queues.queue(&parent_base);
    let removed = parent_q
        .dependencies
        .get_mut(&parent_id)
        .is_some_and(|deps| deps.remove(&child_key));
    if !removed
        || parent_q
            .dependencies
            .get(&parent_id)
            .is_some_and(|d| !d.is_empty())
    {
        return;
    }
    parent_q.dependencies.remove(&parent_id);
    if !parent_q.waiting_children.remove(&parent_id) {
        return;
    }
    if hard && parent_base == base {
        detach_from_parent(queues, base, &parent_id, hard, now);
        let q = queues.queue(base);
        q.release_dedup_of_removed(&parent_id, now);
        q.delete_job_keys(&parent_id);
    } else {
        let parent_q = queues.queue(&parent_base);
        let gated = parent_q.paused_or_maxed();
        parent_q.wait.push_back(parent_id.clone());
        if !gated {
            parent_q.signal_ready();
        }
        if !hard {
            parent_q.emit_queue(
                now,
                "waiting",
                &[("jobId", parent_id), ("prev", "waiting-children".into())],
            );
        }
    }
}

/// `job_id`'s children by outcome (Node's `getDependencies`). The `:unsuccessful` children are
/// sorted by key: this backend does not keep when they failed.
pub(crate) fn dependencies(q: &QueueState, job_id: &str) -> crate::flows::Dependencies {
    // Child keys are written by this backend, so each names a job.
    let sorted = |set: Option<&HashSet<String>>| {
        let mut refs: Vec<JobRef> = set
            .into_iter()
            .flatten()
            .filter_map(|k| job_ref_of(k))
            .collect();
        refs.sort();
        refs
    };
    let map = |m: Option<&HashMap<String, String>>| {
        m.into_iter()
            .flatten()
            .filter_map(|(k, v)| Some((job_ref_of(k)?, v.clone())))
            .collect()
    };
    crate::flows::Dependencies::new(
        map(q.processed.get(job_id)),
        sorted(q.dependencies.get(job_id)),
        map(q.failed_children.get(job_id)),
        sorted(q.unsuccessful.get(job_id)),
    )
}

/// How many children of `job_id` there are by outcome.
pub(crate) fn dependency_counts(q: &QueueState, job_id: &str) -> crate::flows::DependencyCounts {
    let len = |n: usize| u64::try_from(n).unwrap_or(u64::MAX);
    crate::flows::DependencyCounts::new(
        len(q.processed.get(job_id).map_or(0, HashMap::len)),
        len(q.dependencies.get(job_id).map_or(0, HashSet::len)),
        len(q.failed_children.get(job_id).map_or(0, HashMap::len)),
        len(q.unsuccessful.get(job_id).map_or(0, HashSet::len)),
    )
}

/// One page of `job_id`'s children of `kind`, ranked by job.
pub(crate) fn dependencies_page(
    q: &QueueState,
    job_id: &str,
    kind: crate::flows::DependencyKind,
    cursor: u64,
    count: u64,
) -> crate::flows::DependencyPage {
    use crate::flows::DependencyKind;
    let deps = dependencies(q, job_id);
    let with = |m: std::collections::BTreeMap<JobRef, String>| {
        m.into_iter().map(|(k, v)| (k, Some(v))).collect::<Vec<_>>()
    };
    let without = |keys: Vec<JobRef>| keys.into_iter().map(|k| (k, None)).collect::<Vec<_>>();
    let all = match kind {
        // The page carries the stored text, as Redis' HSCAN does.
        DependencyKind::Processed => with(
            q.processed
                .get(job_id)
                .into_iter()
                .flatten()
                .filter_map(|(k, v)| Some((job_ref_of(k)?, v.clone())))
                .collect(),
        ),
        DependencyKind::Ignored => with(deps.ignored),
        DependencyKind::Unprocessed => without(deps.unprocessed),
        DependencyKind::Failed => without(deps.failed),
    };
    crate::flows::page_of(all, cursor, count)
}
