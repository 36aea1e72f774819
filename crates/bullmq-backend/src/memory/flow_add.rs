//! Adding whole flows (`add_flow.lua`) and reading them back, on the in-memory queues.

use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use async_trait::async_trait;
use bullmq_protocol::{JobRecord, QueueId};

use super::add::{
    add_one, decode_opts, dependencies_key, number_text, opt_number, register_dependency,
};
use super::flow::{dependencies_page, release_parent};
use super::queue_state::{job_ref_of, split_job_key};
use super::{Queues, World};
use crate::error::{BackendError, BackendResult};
use crate::flow_store::{FlowAdded, FlowNodeInsert, FlowNodeRead, FlowRefusal, FlowStore};
use crate::flows::DependencyKind;
use crate::queue::AddResult;

/// The flow store of a [`super::MemoryBackend`].
#[derive(Debug)]
pub(crate) struct MemoryFlowStore {
    pub(crate) world: Arc<World>,
    pub(crate) closed: AtomicBool,
}

impl MemoryFlowStore {
    fn check(&self) -> BackendResult<()> {
        if self.closed.load(Ordering::Acquire) {
            return Err(BackendError::Closed);
        }
        Ok(())
    }
}

impl crate::capability::BackendName for MemoryFlowStore {
    fn backend_name(&self) -> &'static str {
        super::NAME
    }
}

#[async_trait]
impl FlowStore for MemoryFlowStore {
    async fn add_flow(&self, nodes: &[FlowNodeInsert]) -> BackendResult<FlowAdded> {
        self.check()?;
        self.world
            .with_queues(|queues, now| add_flow(queues, nodes, now))
    }

    async fn read_node(
        &self,
        queue: &QueueId,
        job_id: &str,
        max_children: u64,
    ) -> BackendResult<Option<FlowNodeRead>> {
        self.check()?;
        let keys = queue.keys();
        self.world.with_queues(|queues, _| {
            let Some(q) = queues.existing(keys.base()) else {
                return Ok(None);
            };
            let Some(hash) = q.jobs.get(job_id) else {
                return Ok(None);
            };
            let record =
                JobRecord::decode(job_id, hash).map_err(|source| BackendError::Decode {
                    job_id: job_id.to_owned(),
                    source,
                })?;
            let mut children = Vec::new();
            for kind in [
                DependencyKind::Processed,
                DependencyKind::Unprocessed,
                DependencyKind::Failed,
                DependencyKind::Ignored,
            ] {
                let page = dependencies_page(q, job_id, kind, 0, max_children);
                children.extend(page.entries.into_iter().map(|(key, _)| key));
            }
            Ok(Some(FlowNodeRead::new(record, children)))
        })
    }

    async fn close(&self) -> BackendResult<()> {
        self.closed.store(true, Ordering::Release);
        Ok(())
    }
}

/// The job key of a node, when it has a custom id.
fn node_key(node: &FlowNodeInsert) -> Option<String> {
    node.job
        .custom_id
        .as_deref()
        .filter(|id| !id.is_empty())
        .map(|id| node.queue.keys().job(id))
}

/// Checks every node, then adds them in order and releases the parents left without pending
/// children, as `add_flow.lua` does.
pub(crate) fn add_flow(
    queues: &mut Queues,
    nodes: &[FlowNodeInsert],
    now: u64,
) -> BackendResult<FlowAdded> {
    let decoded = nodes
        .iter()
        .map(|node| decode_opts(&node.job.opts))
        .collect::<BackendResult<Vec<_>>>()?;
    if let Some(refusal) = refusal(queues, nodes) {
        return Ok(FlowAdded::Refused(refusal));
    }

    // Node's flow adds store `opts.maxLenEvents` on a fresh meta but not `version` (a Node
    // FlowProducer never opens a Queue): the queues without a version keep none.
    let unversioned: Vec<String> = nodes
        .iter()
        .map(|n| n.queue.keys().base().to_owned())
        .filter(|base| {
            queues
                .existing(base)
                .is_none_or(|q| !q.meta.contains_key("version"))
        })
        .collect();
    let mut ids = Vec::with_capacity(nodes.len());
    // Parents to release, by key, in the order first met (as Node's Map).
    let mut parents: Vec<(String, String)> = Vec::new();
    let mut seen = HashSet::new();
    for (node, opts) in nodes.iter().zip(&decoded) {
        let keys = node.queue.keys();
        let base = keys.base();
        let key = node_key(node);
        let id = if key.as_deref().is_some_and(|k| queues.job_exists(k)) {
            attach_existing(queues, node, now)
        } else if node.waiting_children {
            add_waiting_parent(queues, node, opts, now)
        } else {
            match add_one(queues, base, &node.job, opts, now) {
                AddResult::Id(id) => id,
                // Checked above: every parent exists or is added before its children.
                AddResult::ParentMissing { parent } => {
                    return Err(BackendError::backend(std::io::Error::other(format!(
                        "flow parent {parent} vanished during the insert"
                    ))))
                }
            }
        };
        if let Some(parent) = &node.job.parent {
            let parent_key = parent.parent_key();
            if seen.insert(parent_key.clone()) {
                if let Some((parent_base, parent_id)) = split_job_key(&parent_key) {
                    parents.push((parent_base.to_owned(), parent_id.to_owned()));
                }
            }
        }
        ids.push(id);
    }
    for (base, id) in parents {
        let pending = queues
            .existing(&base)
            .is_some_and(|q| q.dependencies.get(&id).is_some_and(|d| !d.is_empty()));
        if !pending {
            release_parent(queues, &base, &id, now);
        }
    }
    for base in unversioned {
        if let Some(q) = queues.existing(&base) {
            q.meta.remove("version");
        }
    }
    Ok(FlowAdded::Ids(ids))
}

/// Why the flow must not be written: a parent that neither exists nor is added before its
/// child, or a node whose job exists as the child of another parent that still exists.
fn refusal(queues: &Queues, nodes: &[FlowNodeInsert]) -> Option<FlowRefusal> {
    let mut added: HashSet<String> = HashSet::new();
    for (index, node) in nodes.iter().enumerate() {
        let key = node_key(node);
        if let Some(parent) = &node.job.parent {
            let parent_key = parent.parent_key();
            if !added.contains(&parent_key) && !queues.job_exists(&parent_key) {
                return Some(FlowRefusal::ParentMissing {
                    index,
                    parent: parent.parent.clone(),
                });
            }
            if let Some(key) = key.as_deref() {
                let existing = split_job_key(key).and_then(|(base, id)| {
                    queues
                        .queues
                        .get(base)
                        .and_then(|q| q.field(id, "parentKey"))
                });
                if let Some(existing) = existing {
                    if existing != parent_key && queues.job_exists(existing) {
                        if let (Some(job), Some(existing_parent)) =
                            (job_ref_of(key), job_ref_of(existing))
                        {
                            return Some(FlowRefusal::ParentCannotBeReplaced {
                                index,
                                job,
                                existing_parent,
                            });
                        }
                    }
                }
            }
        }
        if let Some(key) = key {
            added.insert(key);
        }
    }
    None
}

/// A node whose id exists: the job is left as it is and attached to the node's parent (a
/// completed one is recorded as processed, any other becomes a pending dependency); emits
/// `duplicated`.
fn attach_existing(queues: &mut Queues, node: &FlowNodeInsert, now: u64) -> String {
    let keys = node.queue.keys();
    let base = keys.base();
    let id = node.job.custom_id.clone().unwrap_or_default();
    let job_key = keys.job(&id);
    let q = queues.queue(base);
    q.id_counter += 1;
    q.max_events(true);
    if let Some(parent) = &node.job.parent {
        let completed = q.completed.score(&id).is_some();
        let returnvalue = q.field(&id, "returnvalue").unwrap_or("null").to_owned();
        let parent_key = parent.parent_key();
        q.set_field(&id, "parentKey", parent_key.clone());
        q.set_field(&id, "parent", parent.parent_json());
        if completed {
            if let Some((parent_base, parent_id)) = split_job_key(&parent_key) {
                queues
                    .queue(parent_base)
                    .processed
                    .entry(parent_id.to_owned())
                    .or_default()
                    .insert(job_key.clone(), returnvalue);
            }
        } else if let Some(deps) = dependencies_key(parent) {
            register_dependency(queues, &deps, job_key.clone());
        }
    }
    queues
        .queue(base)
        .emit_queue(now, "duplicated", &[("jobId", id.clone())]);
    id
}

/// A new node with children: stored in `waiting-children` (scored by its timestamp), with
/// `added` and `waiting-children`.
fn add_waiting_parent(
    queues: &mut Queues,
    node: &FlowNodeInsert,
    opts: &serde_json::Map<String, serde_json::Value>,
    now: u64,
) -> String {
    let job = &node.job;
    let q = queues.queue(node.queue.keys().base());
    q.id_counter += 1;
    let id = match job.custom_id.as_deref() {
        Some(id) if !id.is_empty() => id.to_owned(),
        _ => q.id_counter.to_string(),
    };
    let mut hash = super::queue_state::JobHash::new();
    hash.insert("name".into(), job.name.clone());
    hash.insert("data".into(), job.data.clone());
    hash.insert("opts".into(), job.opts.clone());
    hash.insert("timestamp".into(), job.timestamp_ms.to_string());
    hash.insert(
        "delay".into(),
        number_text(opt_number(opts, "delay").unwrap_or(0.0)),
    );
    hash.insert(
        "priority".into(),
        number_text(opt_number(opts, "priority").unwrap_or(0.0)),
    );
    if let Some(parent) = &job.parent {
        hash.insert("parentKey".into(), parent.parent_key());
        hash.insert("parent".into(), parent.parent_json());
    }
    q.jobs.insert(id.clone(), hash);
    q.emit_queue(
        now,
        "added",
        &[("jobId", id.clone()), ("name", job.name.clone())],
    );
    q.waiting_children.add(job.timestamp_ms, &id);
    q.emit_queue(now, "waiting-children", &[("jobId", id.clone())]);
    let job_key = q.job_key(&id);
    if let Some(deps) = job.parent.as_ref().and_then(dependencies_key) {
        register_dependency(queues, &deps, job_key);
    }
    id
}
