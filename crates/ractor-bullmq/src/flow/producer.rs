//! [`FlowProducer`]: adds flows and reads them back.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use bullmq_backend::{Backend, FlowAdded, FlowRefusal, FlowStore};
use bullmq_protocol::flow::{validate_flow, validate_flows, FlowJob, FlowOptions, FlowPath};
use bullmq_protocol::QueueId;
use bullmq_redis::RedisFlowStore;
use tracing::Instrument;

use super::error::FlowError;
use super::node::{GetFlowOptions, JobNode};
use super::options::FlowProducerOptions;
use super::plan::{plan, Plan};
use crate::job::Job;
use crate::store::Traced;
use crate::telemetry;

/// Adds flows — trees of jobs across queues — atomically, and reads them back (Node's
/// `FlowProducer`).
///
/// Cloning is cheap and clones share the connection. See the [module docs](super) for an
/// example.
#[derive(Debug, Clone)]
pub struct FlowProducer {
    inner: Arc<Inner>,
}

struct Inner {
    store: Arc<dyn FlowStore>,
    options: FlowProducerOptions,
    closed: AtomicBool,
}

impl std::fmt::Debug for Inner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FlowProducer")
            .field("options", &self.options)
            .field("closed", &self.closed)
            .finish_non_exhaustive()
    }
}

type Result<T> = std::result::Result<T, FlowError>;

impl FlowProducer {
    /// Connects to Redis (one unnamed connection, as Node's `FlowProducer`).
    ///
    /// # Errors
    ///
    /// [`FlowError::Queue`] with the Redis connect error when Redis cannot be reached within
    /// the configured connect timeout, or with [`bullmq_redis::RedisError::CrossSlot`] when
    /// the connection is a Redis Cluster and the prefix holds no hash tag (a flow's queues
    /// must share one slot: use a prefix such as `{bull}`).
    pub async fn new(options: FlowProducerOptions) -> Result<Self> {
        // Checked before connecting: a flow's scripts touch the keys of several queues at once.
        options.connection.check_prefix_keys(&options.prefix)?;
        let store = RedisFlowStore::connect(&options.connection).await?;
        Ok(Self::from_store(Arc::new(Traced(store)), options))
    }

    /// Opens a producer on `backend` (the prefix comes from `options`; its `connection` is not
    /// used).
    ///
    /// # Errors
    ///
    /// [`FlowError::Queue`] when the backend cannot be reached.
    pub async fn with_backend(backend: &dyn Backend, options: FlowProducerOptions) -> Result<Self> {
        let store = backend.flow_store().await?;
        Ok(Self::from_store(Arc::new(Traced(store)), options))
    }

    fn from_store(store: Arc<dyn FlowStore>, options: FlowProducerOptions) -> Self {
        Self {
            inner: Arc::new(Inner {
                store,
                options,
                closed: AtomicBool::new(false),
            }),
        }
    }

    /// The options this producer was opened with.
    pub fn options(&self) -> &FlowProducerOptions {
        &self.inner.options
    }

    /// Adds the flow `tree` (Node `add(flow)`); returns it with every job as stored.
    ///
    /// # Errors
    ///
    /// As [`FlowProducer::add_with`].
    ///
    /// # Cancel safety
    ///
    /// Not cancel safe: dropping the future may or may not have added the flow (on Redis, all
    /// of it or nothing).
    pub async fn add(&self, tree: FlowJob) -> Result<JobNode> {
        self.add_with(tree, FlowOptions::default()).await
    }

    /// Adds the flow `tree` with per-queue default job options (Node `add(flow, opts)`).
    ///
    /// # Errors
    ///
    /// [`FlowError::Invalid`] / [`FlowError::InvalidNode`] for a refused tree,
    /// [`FlowError::ParentNotFound`] when the root's `parent` does not exist,
    /// [`FlowError::ParentCannotBeReplaced`] when a node's id belongs to another parent —
    /// none of which wrote anything; [`FlowError::Closed`]; [`FlowError::Queue`] when the
    /// backend fails.
    ///
    /// # Cancel safety
    ///
    /// As [`FlowProducer::add`].
    pub async fn add_with(&self, tree: FlowJob, options: FlowOptions) -> Result<JobNode> {
        self.check_open()?;
        let prefix = self.inner.options.prefix.as_str();
        let span = telemetry::flow_add_span(&tree.queue_name, &tree.name, tree.len());
        let trace_metadata = telemetry::propagation_metadata(&span);
        async {
            validate_flow(&tree, prefix)?;
            let plan = plan(
                std::slice::from_ref(&tree),
                false,
                prefix,
                &options,
                trace_metadata,
            )?;
            let mut trees = self.insert(plan).await?;
            let root = trees.pop().ok_or_else(|| {
                FlowError::Queue(crate::QueueError::Backend(
                    bullmq_backend::BackendError::backend(std::io::Error::other(
                        "a flow insert returned no tree",
                    )),
                ))
            })?;
            telemetry::record_job_id(&tracing::Span::current(), root.job.id());
            Ok(root)
        }
        .instrument(span)
        .await
    }

    /// Adds many flows in one atomic call (Node `addBulk`); returns them in order. As Node's,
    /// no per-queue defaults apply.
    ///
    /// # Errors
    ///
    /// As [`FlowProducer::add_with`]; paths in errors start with the flow's index.
    ///
    /// # Cancel safety
    ///
    /// As [`FlowProducer::add`].
    pub async fn add_bulk(&self, trees: Vec<FlowJob>) -> Result<Vec<JobNode>> {
        self.check_open()?;
        let prefix = self.inner.options.prefix.as_str();
        let jobs: usize = trees.iter().map(FlowJob::len).sum();
        let span = telemetry::flow_add_bulk_span(trees.len(), jobs);
        let trace_metadata = telemetry::propagation_metadata(&span);
        async {
            validate_flows(&trees, prefix)?;
            let plan = plan(
                &trees,
                true,
                prefix,
                &FlowOptions::default(),
                trace_metadata,
            )?;
            self.insert(plan).await
        }
        .instrument(span)
        .await
    }

    async fn insert(&self, plan: Plan) -> Result<Vec<JobNode>> {
        if plan.inserts.is_empty() {
            return Ok(Vec::new());
        }
        match self.inner.store.add_flow(&plan.inserts).await? {
            FlowAdded::Ids(ids) => {
                for (insert, id) in plan.inserts.iter().zip(&ids) {
                    telemetry::job_added(insert.queue.name(), id, &insert.job.name);
                }
                plan.into_trees(ids)
            }
            FlowAdded::Refused(refusal) => Err(refused(&plan.paths, refusal)),
        }
    }

    /// Reads the flow rooted at `opts.id` (Node `getFlow`): the job and, down to `opts.depth`
    /// levels, its children (about `opts.max_children` of each kind per node); `None` when the
    /// root does not exist. Children that vanished between two reads are left out.
    ///
    /// # Errors
    ///
    /// [`FlowError::Closed`]; [`FlowError::Queue`] when the backend fails or a job's hash
    /// cannot be decoded.
    pub async fn get_flow(&self, opts: GetFlowOptions) -> Result<Option<JobNode>> {
        self.check_open()?;
        let span = telemetry::flow_get_span(&opts.queue_name, &opts.id);
        let prefix = opts
            .prefix
            .clone()
            .unwrap_or_else(|| self.inner.options.prefix.clone());
        let queue = QueueId::new(prefix, opts.queue_name.as_str());
        self.read_node(queue, opts.id.clone(), opts.depth, opts.max_children)
            .instrument(span)
            .await
    }

    fn read_node(
        &self,
        queue: QueueId,
        id: String,
        depth: u32,
        max_children: u64,
    ) -> Pin<Box<dyn Future<Output = Result<Option<JobNode>>> + Send + '_>> {
        Box::pin(async move {
            let Some(read) = self
                .inner
                .store
                .read_node(&queue, &id, max_children)
                .await?
            else {
                return Ok(None);
            };
            let job = Job::from_record(queue.name(), read.record);
            let depth = depth.saturating_sub(1);
            let mut children = Vec::new();
            if depth > 0 {
                for child in read.children {
                    if let Some(child) = self
                        .read_node(child.queue, child.id, depth, max_children)
                        .await?
                    {
                        children.push(child);
                    }
                }
            }
            Ok(Some(JobNode::new(job, children)))
        })
    }

    /// Closes the connection (when this producer owns it); later calls fail with
    /// [`FlowError::Closed`]. Idempotent.
    ///
    /// # Errors
    ///
    /// [`FlowError::Queue`] when closing fails.
    pub async fn close(&self) -> Result<()> {
        if !self.inner.closed.swap(true, Ordering::AcqRel) {
            self.inner.store.close().await?;
        }
        Ok(())
    }

    fn check_open(&self) -> Result<()> {
        if self.inner.closed.load(Ordering::Acquire) {
            return Err(FlowError::Closed);
        }
        Ok(())
    }
}

fn refused(paths: &[FlowPath], refusal: FlowRefusal) -> FlowError {
    let path_of = |index: usize| paths.get(index).cloned().unwrap_or_default();
    match refusal {
        FlowRefusal::ParentMissing { index, parent } => FlowError::ParentNotFound {
            path: path_of(index),
            parent_key: parent.to_string(),
        },
        FlowRefusal::ParentCannotBeReplaced {
            index,
            job,
            existing_parent,
        } => FlowError::ParentCannotBeReplaced {
            path: path_of(index),
            job_key: job.to_string(),
            existing_parent_key: existing_parent.to_string(),
        },
        other => FlowError::Queue(crate::QueueError::Backend(
            bullmq_backend::BackendError::backend(std::io::Error::other(format!(
                "flow refused: {other:?}"
            ))),
        )),
    }
}
