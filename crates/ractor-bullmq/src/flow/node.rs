//! [`JobNode`] (a flow read back or just added) and [`GetFlowOptions`].

use crate::job::Job;

/// One job of a flow and its children (Node's `JobNode`); as JSON `{job, children}`, the job
/// in Node's `job.toJSON()` shape.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[non_exhaustive]
pub struct JobNode {
    /// The job.
    pub job: Job,
    /// Its children (empty for a leaf, or past the depth read).
    #[serde(default)]
    pub children: Vec<JobNode>,
}

impl JobNode {
    /// A node.
    pub fn new(job: Job, children: Vec<JobNode>) -> Self {
        Self { job, children }
    }
}

/// Which flow [`FlowProducer::get_flow`](super::FlowProducer::get_flow) reads, and how much
/// of it (Node's `NodeOpts`).
///
/// ```
/// use ractor_bullmq::flow::GetFlowOptions;
/// let opts = GetFlowOptions::new("report-1", "reports").depth(3).max_children(100);
/// assert_eq!((opts.depth, opts.max_children), (3, 100));
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct GetFlowOptions {
    /// The root job's id (Node `id`).
    pub id: String,
    /// The root job's queue (Node `queueName`).
    pub queue_name: String,
    /// How many levels to read, the root's included (Node `depth`, default 10).
    pub depth: u32,
    /// About how many children of each kind (processed, pending, failed, ignored) to read per
    /// node (Node `maxChildren`, default 20; a `COUNT` hint on Redis).
    pub max_children: u64,
    /// The root's key prefix (Node `prefix`); the producer's when `None`.
    pub prefix: Option<String>,
}

impl GetFlowOptions {
    /// The flow rooted at job `id` of `queue_name`, with Node's defaults.
    pub fn new(id: impl Into<String>, queue_name: impl Into<String>) -> Self {
        Self {
            id: id.into(),
            queue_name: queue_name.into(),
            depth: 10,
            max_children: 20,
            prefix: None,
        }
    }

    /// Reads `depth` levels.
    #[must_use]
    pub fn depth(mut self, depth: u32) -> Self {
        self.depth = depth;
        self
    }

    /// Reads about `max_children` children of each kind per node.
    #[must_use]
    pub fn max_children(mut self, max_children: u64) -> Self {
        self.max_children = max_children;
        self
    }

    /// With the root's key prefix.
    #[must_use]
    pub fn prefix(mut self, prefix: impl Into<String>) -> Self {
        self.prefix = Some(prefix.into());
        self
    }
}
