//! Turning flow trees into the backend's parent-first inserts, and the ids it returns into
//! [`JobNode`] trees.

use std::collections::{HashMap, VecDeque};

use bullmq_backend::FlowNodeInsert;
use bullmq_protocol::flow::{FlowJob, FlowOptions, FlowPath};
use bullmq_protocol::keys::QueueKeys;
use bullmq_protocol::options::{JobOptions, ParentRef};
use bullmq_protocol::QueueId;

use super::error::FlowError;
use super::node::JobNode;
use crate::queue::add::{prepare, DefaultOptions, PreparedRecord};

/// The inserts of one `add` / `add_bulk` call and how to rebuild the trees from their ids.
pub(crate) struct Plan {
    /// Parents before their children, in Node's order (level by level across the trees: Node
    /// collects the entries of its concurrent `addNode` calls breadth first).
    pub(crate) inserts: Vec<FlowNodeInsert>,
    /// Where each insert sits in its tree.
    pub(crate) paths: Vec<FlowPath>,
    records: Vec<PreparedRecord>,
    queue_names: Vec<String>,
    children: Vec<Vec<usize>>,
    roots: Vec<usize>,
}

/// A job id like Node's `randomUUID()`: a version 4 UUID.
pub(crate) fn random_uuid() -> String {
    let mut bytes: [u8; 16] = rand::random();
    bytes[6] = (bytes[6] & 0x0f) | 0x40;
    bytes[8] = (bytes[8] & 0x3f) | 0x80;
    let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    format!(
        "{}-{}-{}-{}-{}",
        &hex[0..8],
        &hex[8..12],
        &hex[12..16],
        &hex[16..20],
        &hex[20..32]
    )
}

/// The parent a node is added under.
struct Above {
    index: usize,
    keys: QueueKeys,
    id: String,
}

/// Plans `trees` (validated already). `bulk` says whether paths start with the tree's index.
pub(crate) fn plan(
    trees: &[FlowJob],
    bulk: bool,
    default_prefix: &str,
    options: &FlowOptions,
    trace_metadata: Option<String>,
) -> Result<Plan, FlowError> {
    let mut plan = Plan {
        inserts: Vec::new(),
        paths: Vec::new(),
        records: Vec::new(),
        queue_names: Vec::new(),
        children: Vec::new(),
        roots: Vec::new(),
    };
    let mut defaults: HashMap<&str, DefaultOptions> = HashMap::new();
    let mut pending: VecDeque<(&FlowJob, FlowPath, Option<Above>)> = trees
        .iter()
        .enumerate()
        .map(|(i, tree)| {
            let path = if bulk {
                FlowPath(vec![i])
            } else {
                FlowPath::default()
            };
            (tree, path, None)
        })
        .collect();
    while let Some((node, path, above)) = pending.pop_front() {
        let index = plan.inserts.len();
        let prefix = node.prefix.as_deref().unwrap_or(default_prefix);
        let keys = QueueKeys::new(prefix, node.queue_name.as_str());
        let invalid = |source| FlowError::InvalidNode {
            path: path.clone(),
            name: node.name.clone(),
            source: Box::new(source),
        };
        if !defaults.contains_key(node.queue_name.as_str()) {
            let queue_defaults = options
                .queues_options
                .get(&node.queue_name)
                .cloned()
                .unwrap_or_default();
            let prepared = DefaultOptions::new(&queue_defaults).map_err(invalid)?;
            defaults.insert(node.queue_name.as_str(), prepared);
        }
        let queue_defaults = &defaults[node.queue_name.as_str()];
        let mut opts: JobOptions = node.opts.clone();
        if let Some(above) = &above {
            opts.parent = Some(ParentRef::new(
                above.id.clone(),
                above.keys.qualified_name(),
            ));
        }
        let id = opts
            .job_id
            .clone()
            .filter(|id| !id.is_empty())
            .unwrap_or_else(random_uuid);
        if let Some(reason) = node.data_error() {
            let error: serde_json::Error = serde::de::Error::custom(reason);
            return Err(invalid(error.into()));
        }
        let data = serde_json::to_string(&node.data).map_err(|e| invalid(e.into()))?;
        let prepared = prepare(
            &keys,
            queue_defaults,
            node.name.clone(),
            data,
            opts,
            trace_metadata.clone(),
        )
        .map_err(invalid)?;
        let (mut new_job, record) = prepared.into_parts();
        new_job.custom_id = Some(id.clone());
        let waiting_children = !node.children.is_empty();
        plan.inserts.push(FlowNodeInsert::new(
            QueueId::from(&keys),
            new_job,
            waiting_children,
        ));
        plan.paths.push(path.clone());
        plan.records.push(record);
        plan.queue_names.push(node.queue_name.clone());
        plan.children.push(Vec::new());
        match &above {
            Some(above) => plan.children[above.index].push(index),
            None => plan.roots.push(index),
        }
        for (i, child) in node.children.iter().enumerate() {
            pending.push_back((
                child,
                path.child(i),
                Some(Above {
                    index,
                    keys: keys.clone(),
                    id: id.clone(),
                }),
            ));
        }
    }
    Ok(plan)
}

impl Plan {
    /// The trees, from the ids the backend returned (one per insert, in order).
    pub(crate) fn into_trees(self, ids: Vec<String>) -> Result<Vec<JobNode>, FlowError> {
        let Plan {
            records,
            queue_names,
            children,
            roots,
            ..
        } = self;
        let mut nodes: Vec<Option<JobNode>> = Vec::with_capacity(records.len());
        for ((record, queue), id) in records.into_iter().zip(&queue_names).zip(ids) {
            let job = record.into_detached_job(queue, id);
            nodes.push(Some(JobNode::new(job, Vec::new())));
        }
        // Children come after their parents: assembling from the end moves every finished
        // subtree into its parent without recursion.
        for index in (0..nodes.len()).rev() {
            let kids: Vec<JobNode> = children[index]
                .iter()
                .filter_map(|&child| nodes[child].take())
                .collect();
            if let Some(node) = nodes[index].as_mut() {
                node.children = kids;
            }
        }
        Ok(roots
            .into_iter()
            .filter_map(|root| nodes[root].take())
            .collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uuids_look_like_nodes() {
        let id = random_uuid();
        assert_eq!(id.len(), 36);
        let parts: Vec<&str> = id.split('-').collect();
        assert_eq!(
            parts.iter().map(|p| p.len()).collect::<Vec<_>>(),
            [8, 4, 4, 4, 12]
        );
        assert!(parts[2].starts_with('4'));
        assert!(matches!(&parts[3][..1], "8" | "9" | "a" | "b"));
        assert_ne!(id, random_uuid());
    }

    #[test]
    fn inserts_are_breadth_first_with_parents_linked() {
        let tree = FlowJob::new("root", "a")
            .child(FlowJob::new("c1", "b").child(FlowJob::new("g1", "a")))
            .child(FlowJob::new("c2", "b"));
        let plan = plan(&[tree], false, "bull", &FlowOptions::new(), None).unwrap();
        let names: Vec<&str> = plan.inserts.iter().map(|i| i.job.name.as_str()).collect();
        assert_eq!(names, ["root", "c1", "c2", "g1"]);
        let waiting: Vec<bool> = plan.inserts.iter().map(|i| i.waiting_children).collect();
        assert_eq!(waiting, [true, true, false, false]);
        let root_id = plan.inserts[0].job.custom_id.clone().unwrap();
        let c1 = plan.inserts[1].job.parent.as_ref().unwrap();
        assert_eq!(c1.parent_key(), format!("bull:a:{root_id}"));
        let g1 = plan.inserts[3].job.parent.as_ref().unwrap();
        let c1_id = plan.inserts[1].job.custom_id.clone().unwrap();
        assert_eq!(g1.parent_key(), format!("bull:b:{c1_id}"));
        assert_eq!(plan.paths[3], FlowPath(vec![0, 0]));
        let ids: Vec<String> = (0..4).map(|i| format!("id{i}")).collect();
        let trees = plan.into_trees(ids).unwrap();
        assert_eq!(trees[0].job.id(), "id0");
        assert_eq!(trees[0].children.len(), 2);
        assert_eq!(trees[0].children[0].children[0].job.id(), "id3");
    }

    #[test]
    fn queue_defaults_apply_under_a_nodes_own_options() {
        let tree = FlowJob::new("root", "a")
            .opts(JobOptions::new().attempts(5))
            .child(FlowJob::new("c", "b"));
        let options = FlowOptions::new()
            .queue_defaults("a", JobOptions::new().attempts(2).priority(3))
            .queue_defaults("b", JobOptions::new().attempts(7));
        let plan = plan(&[tree], false, "bull", &options, None).unwrap();
        let root = JobOptions::from_json(&plan.inserts[0].job.opts).unwrap();
        assert_eq!((root.attempts, root.priority), (Some(5), Some(3)));
        let child = JobOptions::from_json(&plan.inserts[1].job.opts).unwrap();
        assert_eq!(child.attempts, Some(7));
    }
}
