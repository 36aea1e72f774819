//! Adding whole flows ([`FlowStore`]): a tree of jobs across the queues of one backend, in one
//! atomic step, and reading a flow back node by node.

use async_trait::async_trait;
use bullmq_protocol::{JobRecord, JobRef, QueueId};

use crate::capability::{unsupported, BackendName, Capability};
use crate::error::BackendResult;
use crate::queue::NewJob;

/// One job of a flow insert. A flow is a slice of these, parents before their children; a
/// child's [`NewJob::parent`] names its parent and registers the child among the parent's
/// pending children.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct FlowNodeInsert {
    /// The queue the job is added to.
    pub queue: QueueId,
    /// The job, with its custom id (a flow producer always gives one, Node a UUID).
    pub job: NewJob,
    /// The job has children in this insert: it is added to `waiting-children` (whatever its
    /// delay or priority, applied when it is released), and released after the whole insert
    /// when none of its children is pending (all of them already existed, completed).
    pub waiting_children: bool,
}

impl FlowNodeInsert {
    /// `job` in `queue`, with children when `waiting_children`.
    pub fn new(queue: QueueId, job: NewJob, waiting_children: bool) -> Self {
        Self {
            queue,
            job,
            waiting_children,
        }
    }
}

/// Why a flow insert wrote nothing.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum FlowRefusal {
    /// The parent named by the node at `index` (the root's `parent` option) does not exist
    /// (Node -5, `ParentJobNotExist`).
    ParentMissing {
        /// The node's index in the insert.
        index: usize,
        /// The missing parent.
        parent: JobRef,
    },
    /// The node at `index` names a job that already exists and is the child of another parent
    /// that still exists (Node -7, `ParentJobCannotBeReplaced`). Node keeps the jobs its
    /// transaction added before that node; we write nothing.
    ParentCannotBeReplaced {
        /// The node's index in the insert.
        index: usize,
        /// The existing job.
        job: JobRef,
        /// The parent it already has.
        existing_parent: JobRef,
    },
}

/// What a flow insert did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FlowAdded {
    /// Every node was added (or, for an id that existed, attached to its parent): one job id
    /// per node, in the insert's order.
    Ids(Vec<String>),
    /// Nothing was written.
    Refused(FlowRefusal),
}

/// One node of a flow read back ([`FlowStore::read_node`]).
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct FlowNodeRead {
    /// The job.
    pub record: JobRecord,
    /// Its children: processed, unprocessed, failed, ignored, in that order (Node `getFlow`'s
    /// order), each kind limited to one page of about `max_children`.
    pub children: Vec<JobRef>,
}

impl FlowNodeRead {
    /// A node read back.
    pub fn new(record: JobRecord, children: Vec<JobRef>) -> Self {
        Self { record, children }
    }
}

/// Adding and reading flows, across the queues of one backend.
#[async_trait]
#[allow(unused_variables)] // the default bodies decline without reading their arguments
pub trait FlowStore: BackendName {
    /// Adds every node of `nodes` (parents before children) in one atomic step: every node is
    /// checked before the first write, so a refusal writes nothing.
    async fn add_flow(&self, nodes: &[FlowNodeInsert]) -> BackendResult<FlowAdded> {
        unsupported(self, Capability::Flows)
    }

    /// The job `job_id` of `queue` and the keys of its children (the first page of each kind,
    /// about `max_children` each, as Node's `getFlow` reads them); `None` when it does not
    /// exist.
    async fn read_node(
        &self,
        queue: &QueueId,
        job_id: &str,
        max_children: u64,
    ) -> BackendResult<Option<FlowNodeRead>> {
        unsupported(self, Capability::Flows)
    }

    /// Releases the connection when this store owns it; idempotent.
    async fn close(&self) -> BackendResult<()>;
}

#[async_trait]
impl<T: FlowStore + ?Sized> FlowStore for std::sync::Arc<T> {
    async fn add_flow(&self, nodes: &[FlowNodeInsert]) -> BackendResult<FlowAdded> {
        (**self).add_flow(nodes).await
    }

    async fn read_node(
        &self,
        queue: &QueueId,
        job_id: &str,
        max_children: u64,
    ) -> BackendResult<Option<FlowNodeRead>> {
        (**self).read_node(queue, job_id, max_children).await
    }

    async fn close(&self) -> BackendResult<()> {
        (**self).close().await
    }
}
