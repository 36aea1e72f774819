//! [`RedisFlowStore`]: adding and reading flows across the queues of one Redis.

use async_trait::async_trait;
use bullmq_backend::{
    BackendError, BackendResult, FlowAdded, FlowNodeInsert, FlowNodeRead, FlowStore, JobRecord,
};
use bullmq_protocol::job_record::text_fields;
use bullmq_protocol::QueueId;
use fred::prelude::Client;

use crate::queue as calls;
use crate::{ConnectionConfig, Connections};

/// The flow store of a [`super::RedisBackend`]: one command connection (unnamed, as Node's
/// `FlowProducer`), serving every queue a call names.
///
/// Cloning shares the connection; it closes on [`FlowStore::close`] or when the last clone of
/// a store opened by [`RedisFlowStore::connect`] is dropped.
#[derive(Debug, Clone)]
pub struct RedisFlowStore {
    client: Client,
    owned: Option<std::sync::Arc<Connections>>,
}

impl RedisFlowStore {
    /// Connects a flow store.
    ///
    /// # Errors
    ///
    /// [`crate::RedisError::Connect`] when Redis cannot be reached within the configured
    /// timeout.
    pub async fn connect(config: &ConnectionConfig) -> crate::Result<Self> {
        let client = config.connect(None).await?;
        let owned = Connections::new(vec![client.clone()], Vec::new());
        Ok(Self {
            client,
            owned: Some(std::sync::Arc::new(owned)),
        })
    }

    /// A store on an existing client, which [`FlowStore::close`] leaves open.
    pub fn with_client(client: Client) -> Self {
        Self {
            client,
            owned: None,
        }
    }
}

impl bullmq_backend::BackendName for RedisFlowStore {
    fn backend_name(&self) -> &'static str {
        super::NAME
    }
}

#[async_trait]
impl FlowStore for RedisFlowStore {
    async fn add_flow(&self, nodes: &[FlowNodeInsert]) -> BackendResult<FlowAdded> {
        Ok(calls::add_flow(&self.client, nodes, bullmq_backend::now_ms()).await?)
    }

    async fn read_node(
        &self,
        queue: &QueueId,
        job_id: &str,
        max_children: u64,
    ) -> BackendResult<Option<FlowNodeRead>> {
        let queue = &queue.keys();
        let raw = calls::get_job_hash(&self.client, queue, job_id).await?;
        if raw.is_empty() {
            return Ok(None);
        }
        let decode = |source| BackendError::Decode {
            job_id: job_id.to_owned(),
            source,
        };
        let fields = text_fields(raw).map_err(decode)?;
        let record = JobRecord::decode(job_id, &fields).map_err(decode)?;
        let children = calls::flow_children(&self.client, queue, job_id, max_children).await?;
        let children = super::refs::job_refs(job_id, "children", &children)?;
        Ok(Some(FlowNodeRead::new(record, children)))
    }

    async fn close(&self) -> BackendResult<()> {
        if let Some(owned) = &self.owned {
            owned.close().await;
        }
        Ok(())
    }
}
