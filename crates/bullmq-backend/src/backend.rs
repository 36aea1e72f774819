//! [`Backend`]: the factory the runtime opens every store through.

use std::sync::Arc;

use async_trait::async_trait;
use bullmq_protocol::QueueId;

use crate::capability::{unsupported, BackendName, Capabilities, Capability};
use crate::error::BackendResult;
use crate::events::{EventPublisher, EventStream};
use crate::flow_store::FlowStore;
use crate::queue::QueueStore;
use crate::worker::WorkerStore;

/// What a worker's store is opened for.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct WorkerStoreOptions {
    /// The worker's name (Node's `name` worker option): it names the worker's connections so
    /// `getWorkers` lists it, and is stored with the jobs it processes.
    pub worker_name: Option<String>,
    /// Collect Node-compatible per-minute metrics with up to this many data points (Node's
    /// `metrics.maxDataPoints`; 0 disables).
    pub metrics_max_points: u32,
}

/// A storage backend: opens the stores of a queue. Cloned (through `Arc`) into every
/// supervised worker, so a restarted worker opens fresh stores from it.
///
/// Every store a backend opens serves one queue, named by its [`QueueId`] (namespace and name;
/// the Redis backend makes its key names from it).
///
/// Required: [`BackendName::backend_name`] and the four stores of a queue. Optional:
/// [`Backend::flow_store`] ([`Capability::Flows`]) and [`Backend::list_queues`]
/// ([`Capability::QueueDiscovery`]), whose default bodies decline;
/// [`Backend::capabilities`] says which optional parts (of the backend and of its stores) it
/// offers, and defaults to none.
#[async_trait]
#[allow(unused_variables)] // the default bodies decline without reading their arguments
pub trait Backend: BackendName + std::fmt::Debug {
    /// Opens the producer/admin store of `queue`.
    async fn queue_store(&self, queue: &QueueId) -> BackendResult<Arc<dyn QueueStore>>;

    /// Opens the store of one worker of `queue`.
    async fn worker_store(
        &self,
        queue: &QueueId,
        options: &WorkerStoreOptions,
    ) -> BackendResult<Arc<dyn WorkerStore>>;

    /// Opens a reader of `queue`'s event log.
    async fn event_stream(&self, queue: &QueueId) -> BackendResult<Arc<dyn EventStream>>;

    /// Opens a publisher into `queue`'s event log.
    async fn event_publisher(&self, queue: &QueueId) -> BackendResult<Arc<dyn EventPublisher>>;

    /// Opens a store that adds and reads flows across every queue of this backend (each call
    /// names the queues it touches). Declined ([`Capability::Flows`]) by default.
    async fn flow_store(&self) -> BackendResult<Arc<dyn FlowStore>> {
        unsupported(self, Capability::Flows)
    }

    /// The queues under `namespace` (the Redis backend: the key prefix), sorted by name,
    /// whoever created them. Declined ([`Capability::QueueDiscovery`]) by default.
    async fn list_queues(&self, namespace: &str) -> BackendResult<Vec<QueueId>> {
        unsupported(self, Capability::QueueDiscovery)
    }

    /// Which optional capabilities this backend and the stores it opens offer. The default,
    /// [`Capabilities::none`], is the required core only: a backend that implements optional
    /// methods says so here.
    fn capabilities(&self) -> Capabilities {
        Capabilities::none()
    }
}
