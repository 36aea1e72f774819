//! [`RedisBackend`]: the [`bullmq_backend`] seam over Redis, in exactly Node BullMQ's layout.
//!
//! A queue's [`QueueId`] becomes its [`QueueKeys`](bullmq_protocol::keys::QueueKeys) here
//! (prefix = namespace): callers of the seam name queues, the stores work on key names.
//!
//! Each store owns its connections (closed by its `close` or when its last clone is dropped):
//! a [`RedisQueueStore`] one command connection (plus one to a replica with replica reads), a
//! [`RedisWorkerStore`] a command and a blocking one, a [`RedisEventStream`] one blocking
//! connection, a [`RedisEventPublisher`] one command connection. Connections are named as Node names them, so Node's `getWorkers` lists
//! our workers.

mod event_stream;
mod flow_store;
mod queue_maintenance;
mod queue_store;
mod refs;
mod replica_reads;
mod worker_store;

use std::sync::Arc;

use async_trait::async_trait;
use bullmq_backend::{
    Backend, BackendError, BackendName, BackendResult, Capabilities, EventPublisher, EventStream,
    FlowStore, QueueStore, WorkerStore, WorkerStoreOptions,
};
use bullmq_protocol::QueueId;

pub use event_stream::{RedisEventPublisher, RedisEventStream};
pub use flow_store::RedisFlowStore;
pub use queue_store::RedisQueueStore;
pub use worker_store::RedisWorkerStore;

use crate::{ConnectionConfig, RedisError};

impl From<RedisError> for BackendError {
    fn from(error: RedisError) -> Self {
        match error {
            RedisError::Connect { .. } => BackendError::Connect(Box::new(error)),
            other => BackendError::Backend(Box::new(other)),
        }
    }
}

/// The Redis backend: opens every store of the seam on a Redis server described by a
/// [`ConnectionConfig`].
#[derive(Debug, Clone)]
pub struct RedisBackend {
    config: ConnectionConfig,
}

impl RedisBackend {
    /// A backend connecting with `config` (nothing is connected until a store is opened).
    pub fn new(config: ConnectionConfig) -> Self {
        Self { config }
    }

    /// The connection configuration.
    pub fn config(&self) -> &ConnectionConfig {
        &self.config
    }
}

/// The Redis backend's [`BackendName::backend_name`], of every store it opens.
pub(crate) const NAME: &str = "redis";

impl BackendName for RedisBackend {
    fn backend_name(&self) -> &'static str {
        NAME
    }
}

#[async_trait]
impl Backend for RedisBackend {
    async fn queue_store(&self, queue: &QueueId) -> BackendResult<Arc<dyn QueueStore>> {
        Ok(Arc::new(
            RedisQueueStore::connect(&self.config, queue.keys()).await?,
        ))
    }

    async fn worker_store(
        &self,
        queue: &QueueId,
        options: &WorkerStoreOptions,
    ) -> BackendResult<Arc<dyn WorkerStore>> {
        let store = RedisWorkerStore::connect(
            &self.config,
            queue.namespace(),
            queue.name(),
            options.worker_name.as_deref(),
        )
        .await?
        .with_metrics(options.metrics_max_points);
        Ok(Arc::new(store))
    }

    async fn event_stream(&self, queue: &QueueId) -> BackendResult<Arc<dyn EventStream>> {
        Ok(Arc::new(
            RedisEventStream::connect(&self.config, &queue.keys()).await?,
        ))
    }

    async fn event_publisher(&self, queue: &QueueId) -> BackendResult<Arc<dyn EventPublisher>> {
        Ok(Arc::new(
            RedisEventPublisher::connect(&self.config, &queue.keys()).await?,
        ))
    }

    async fn flow_store(&self) -> BackendResult<Arc<dyn FlowStore>> {
        Ok(Arc::new(RedisFlowStore::connect(&self.config).await?))
    }

    /// `SCAN` for the queues' marker keys under the prefix `namespace`, on a connection of its
    /// own closed afterwards ([`crate::queue::discover_queues`]).
    async fn list_queues(&self, namespace: &str) -> BackendResult<Vec<QueueId>> {
        use fred::prelude::ClientLike as _;
        let client = self.config.connect(None).await?;
        let names = crate::queue::discover_queues(&client, namespace).await;
        let _ = client.quit().await;
        Ok(names?
            .into_iter()
            .map(|name| QueueId::new(namespace, name))
            .collect())
    }

    /// Everything: the Redis backend implements the whole seam.
    fn capabilities(&self) -> Capabilities {
        Capabilities::all()
    }
}
