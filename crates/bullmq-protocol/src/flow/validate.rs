//! Checking a flow before anything is written: [`validate_flow`].
//!
//! Node 6.7.0 refuses, for a flow: deduplication on a node with children (checked over the
//! whole tree first), `keepLastIfActive` deduplication on a node with a parent, and every
//! job-level refusal of `Job.validateOptions` (two parent-failure policies at once, a
//! deduplication with a parent, bad ids, priorities, jitter, sizes) — see
//! [`validate_job_at`]. We refuse three more things Node lets through to a broken or
//! surprising state: an empty name or queue name, a `parent` option on a node that is not the
//! root (Node silently replaces it), and a tree whose keys cannot live in one Redis Cluster
//! slot.

use std::fmt;

use crate::error::ValidationError;
use crate::flow::hash_tag::hash_tag;
use crate::flow::tree::FlowJob;
use crate::validation::validate_job_at;

/// Where a node sits in its tree: the child indices from the root (`[]` is the root).
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct FlowPath(pub Vec<usize>);

impl FlowPath {
    /// The path of the `index`-th child of this node.
    #[must_use]
    pub fn child(&self, index: usize) -> Self {
        let mut path = self.0.clone();
        path.push(index);
        Self(path)
    }

    /// The tree's `tree`-th flow of an `add_bulk`, in front of this path.
    #[must_use]
    pub fn in_bulk(&self, tree: usize) -> Self {
        let mut path = Vec::with_capacity(self.0.len() + 1);
        path.push(tree);
        path.extend_from_slice(&self.0);
        Self(path)
    }
}

impl fmt::Display for FlowPath {
    /// `root`, `root.children[1].children[0]`, …
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("root")?;
        for index in &self.0 {
            write!(f, ".children[{index}]")?;
        }
        Ok(())
    }
}

/// A queue of a flow and the hash tag of its keys, for [`FlowValidationError::CrossSlot`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueueTag {
    /// The queue, `{prefix}:{name}`.
    pub queue: String,
    /// The hash tag of its job keys; `None` when they are not tagged.
    pub tag: Option<String>,
}

/// Why a flow was refused before anything was written. Every variant but
/// [`CrossSlot`](Self::CrossSlot) names the node at fault.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum FlowValidationError {
    /// A node without a name.
    #[error("flow node {path}: the job name is empty")]
    EmptyName {
        /// The node.
        path: FlowPath,
    },
    /// A node without a queue name.
    #[error("flow node {path} ({name}): the queue name is empty")]
    EmptyQueueName {
        /// The node.
        path: FlowPath,
        /// Its job name.
        name: String,
    },
    /// A node's options are refused as a single job's would be.
    #[error("flow node {path} ({name}): {source}")]
    InvalidOptions {
        /// The node.
        path: FlowPath,
        /// Its job name.
        name: String,
        /// Why.
        #[source]
        source: ValidationError,
    },
    /// Deduplication on a node with children (Node: "Deduplication options cannot be used on
    /// flow nodes with children").
    #[error("flow node {path} ({name}): Deduplication options cannot be used on flow nodes with children")]
    DeduplicationWithChildren {
        /// The node.
        path: FlowPath,
        /// Its job name.
        name: String,
    },
    /// `keepLastIfActive` deduplication on a node with a parent (Node: "keepLastIfActive
    /// deduplication cannot be used on flow nodes with a parent").
    #[error("flow node {path} ({name}): keepLastIfActive deduplication cannot be used on flow nodes with a parent")]
    KeepLastIfActiveWithParent {
        /// The node.
        path: FlowPath,
        /// Its job name.
        name: String,
    },
    /// A `parent` option on a node that is not the root: its parent is the node above it.
    #[error("flow node {path} ({name}): only the root of a flow may name a parent; a child's parent is the node above it")]
    ParentOnChild {
        /// The node.
        path: FlowPath,
        /// Its job name.
        name: String,
    },
    /// The flow's keys would live in more than one Redis Cluster slot: when any of its queues
    /// is hash-tagged, all of them must share that tag.
    #[error("the queues of a flow must share one hash tag when any is tagged: {}", describe(.queues))]
    CrossSlot {
        /// Every queue of the flow with its tag, in the order first met.
        queues: Vec<QueueTag>,
    },
}

fn describe(queues: &[QueueTag]) -> String {
    queues
        .iter()
        .map(|q| match &q.tag {
            Some(tag) => format!("{} {{{tag}}}", q.queue),
            None => format!("{} (untagged)", q.queue),
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// Checks one flow whose nodes without a prefix of their own use `default_prefix`.
///
/// # Errors
///
/// The first [`FlowValidationError`], in Node's order: deduplication on a node with children
/// anywhere in the tree, then node by node (parents before children) the node's own checks,
/// then the cross-slot check.
pub fn validate_flow(tree: &FlowJob, default_prefix: &str) -> Result<(), FlowValidationError> {
    validate_trees(std::slice::from_ref(tree), default_prefix, false)
}

/// [`validate_flow`] for the flows of one `add_bulk` (paths start with the flow's index). All
/// of them are written by one call, so the cross-slot check spans all of them.
///
/// # Errors
///
/// As [`validate_flow`].
pub fn validate_flows(trees: &[FlowJob], default_prefix: &str) -> Result<(), FlowValidationError> {
    validate_trees(trees, default_prefix, true)
}

fn validate_trees(
    trees: &[FlowJob],
    default_prefix: &str,
    bulk: bool,
) -> Result<(), FlowValidationError> {
    let root_path = |index: usize| {
        if bulk {
            FlowPath(vec![index])
        } else {
            FlowPath::default()
        }
    };
    for (index, tree) in trees.iter().enumerate() {
        for (path, node) in walk(tree, root_path(index)) {
            if node.opts.deduplication.is_some() && !node.children.is_empty() {
                return Err(FlowValidationError::DeduplicationWithChildren {
                    path,
                    name: node.name.clone(),
                });
            }
        }
    }
    let mut tags = Tags::default();
    for (index, tree) in trees.iter().enumerate() {
        let root = root_path(index);
        let root_depth = root.0.len();
        if let Some(parent) = &tree.opts.parent {
            tags.add(&parent.queue, &parent.job_key());
        }
        for (path, node) in walk(tree, root) {
            let is_root = path.0.len() == root_depth;
            validate_node(node, &path, is_root)?;
            let prefix = node.prefix.as_deref().unwrap_or(default_prefix);
            let queue = format!("{prefix}:{}", node.queue_name);
            let id = node.opts.job_id.as_deref().unwrap_or("");
            tags.add(&queue, &format!("{queue}:{id}"));
        }
    }
    tags.check()
}

fn validate_node(
    node: &FlowJob,
    path: &FlowPath,
    is_root: bool,
) -> Result<(), FlowValidationError> {
    if node.name.is_empty() {
        return Err(FlowValidationError::EmptyName { path: path.clone() });
    }
    let name = || node.name.clone();
    if node.queue_name.is_empty() {
        return Err(FlowValidationError::EmptyQueueName {
            path: path.clone(),
            name: name(),
        });
    }
    if !is_root && node.opts.parent.is_some() {
        return Err(FlowValidationError::ParentOnChild {
            path: path.clone(),
            name: name(),
        });
    }
    let has_parent = !is_root || node.opts.parent.is_some();
    if let Some(dedup) = &node.opts.deduplication {
        if has_parent && dedup.keep_last_if_active == Some(true) {
            return Err(FlowValidationError::KeepLastIfActiveWithParent {
                path: path.clone(),
                name: name(),
            });
        }
    }
    let invalid = |source| FlowValidationError::InvalidOptions {
        path: path.clone(),
        name: name(),
        source,
    };
    let data_len = serde_json::to_string(&node.data).map_or(0, |s| s.len());
    let timestamp = node
        .opts
        .timestamp
        .unwrap_or_else(crate::validation::system_now_ms);
    validate_job_at(&node.name, data_len, &node.opts, timestamp).map_err(invalid)?;
    // A child's own options carry no parent (the tree gives it one when it is added), so the
    // job-level "deduplication and parent" refusal is checked here for it.
    if has_parent && node.opts.deduplication.is_some() {
        return Err(invalid(ValidationError::DeduplicationWithParent));
    }
    Ok(())
}

/// Every node of `tree` with its path, parents before their children, without recursion (a
/// deep chain must not exhaust the stack).
fn walk(tree: &FlowJob, root: FlowPath) -> Vec<(FlowPath, &FlowJob)> {
    let mut out = Vec::new();
    let mut stack = vec![(root, tree)];
    while let Some((path, node)) = stack.pop() {
        for (index, child) in node.children.iter().enumerate().rev() {
            stack.push((path.child(index), child));
        }
        out.push((path, node));
    }
    out
}

/// The queues met and the hash tags of their keys.
#[derive(Default)]
struct Tags {
    queues: Vec<QueueTag>,
    any_tagged: bool,
    mixed: bool,
}

impl Tags {
    fn add(&mut self, queue: &str, key: &str) {
        let tag = hash_tag(key).map(str::to_owned);
        if let Some(first) = self.queues.first() {
            if first.tag != tag {
                self.mixed = true;
            }
        }
        self.any_tagged |= tag.is_some();
        let entry = QueueTag {
            queue: queue.to_owned(),
            tag,
        };
        if !self.queues.contains(&entry) {
            self.queues.push(entry);
        }
    }

    fn check(self) -> Result<(), FlowValidationError> {
        if self.any_tagged && self.mixed {
            return Err(FlowValidationError::CrossSlot {
                queues: self.queues,
            });
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests;
