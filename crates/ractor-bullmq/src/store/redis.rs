//! [`RedisStore`]: the [`Store`] over `bullmq-redis`.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use bullmq_protocol::keys::QueueKeys;
use bullmq_redis::fred::prelude::Client;
use bullmq_redis::worker::{self as calls, WorkerKeys};
use bullmq_redis::{ConnectionConfig, Connections};

use super::{now_ms, FetchRequest, Fetched, Finish, FinishReply, Store, StoreError, StoreResult};

/// A [`Store`] on Redis: one command connection and one blocking connection (named so Node's
/// `queue.getWorkers()` lists it).
///
/// Clones share the connections. They close on [`Store::close`] or, failing that, when the
/// last clone is dropped (a Worker killed or crashed without `post_stop` still releases them).
#[derive(Clone)]
pub struct RedisStore {
    client: Client,
    blocking: Client,
    connections: Arc<Connections>,
    keys: WorkerKeys,
    metrics_max_points: u32,
}

impl std::fmt::Debug for RedisStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisStore")
            .field("queue", &self.keys.queue().qualified_name())
            .finish_non_exhaustive()
    }
}

impl RedisStore {
    /// Connects the two connections of one worker of `queue` under `prefix`. The blocking
    /// connection is named `{prefix}:{base64(queue)}:w:{worker_name}` (or without the `:w:`
    /// part when unnamed), as Node names worker connections; the command connection
    /// `{prefix}:{base64(queue)}:wc[:{worker_name}]`, which Node's lookups ignore.
    ///
    /// # Errors
    ///
    /// [`StoreError::Redis`] when Redis cannot be reached.
    pub async fn connect(
        config: &ConnectionConfig,
        prefix: &str,
        queue: &str,
        worker_name: Option<&str>,
    ) -> StoreResult<Self> {
        let keys = QueueKeys::new(prefix, queue);
        let name = keys.worker_client_name(worker_name);
        let client = config
            .connect(Some(keys.worker_command_client_name(worker_name)))
            .await?;
        let blocking = match config.connect(Some(name)).await {
            Ok(blocking) => blocking,
            Err(error) => {
                Connections::new(vec![client], Vec::new()).close().await;
                return Err(error.into());
            }
        };
        Ok(Self {
            connections: Arc::new(Connections::new(
                vec![client.clone()],
                vec![blocking.clone()],
            )),
            client,
            blocking,
            keys: WorkerKeys::new(keys),
            metrics_max_points: 0,
        })
    }

    /// Collects Node-compatible `metrics:completed|failed` with up to `max_points` one-minute
    /// data points (Node worker option `metrics.maxDataPoints`; 0 disables, the default).
    pub fn with_metrics(mut self, max_points: u32) -> Self {
        self.metrics_max_points = max_points;
        self
    }

    /// The queue's keys.
    pub fn keys(&self) -> &QueueKeys {
        self.keys.queue()
    }
}

#[async_trait]
impl Store for RedisStore {
    fn queue_name(&self) -> &str {
        self.keys.queue().name()
    }

    async fn fetch_batch(&self, request: &FetchRequest) -> StoreResult<Fetched> {
        Ok(calls::fetch_batch(&self.client, &self.keys, request, now_ms()).await?)
    }

    async fn finish_batch(
        &self,
        finishes: &[Finish],
        fetch: Option<&FetchRequest>,
    ) -> StoreResult<FinishReply> {
        Ok(calls::finish_batch(
            &self.client,
            &self.keys,
            finishes,
            fetch,
            self.metrics_max_points,
            now_ms(),
        )
        .await?)
    }

    async fn extend_locks(
        &self,
        jobs: &[(String, String)],
        lock_duration: Duration,
    ) -> StoreResult<Vec<String>> {
        Ok(calls::extend_locks(&self.client, &self.keys, jobs, lock_duration).await?)
    }

    async fn check_stalled(
        &self,
        max_stalled_count: u32,
        interval: Duration,
    ) -> StoreResult<Vec<String>> {
        Ok(calls::move_stalled(
            &self.client,
            &self.keys,
            max_stalled_count,
            interval,
            now_ms(),
        )
        .await?)
    }

    async fn wait_for_job(&self, timeout: Duration) -> StoreResult<bool> {
        Ok(calls::wait_for_marker(&self.blocking, &self.keys, timeout)
            .await?
            .is_some())
    }

    async fn update_progress(&self, job_id: &str, progress: &serde_json::Value) -> StoreResult<()> {
        let text = progress.to_string();
        bullmq_redis::queue::update_progress(&self.client, self.keys.queue(), job_id, &text)
            .await?;
        Ok(())
    }

    async fn add_log(&self, job_id: &str, line: &str, keep_logs: Option<u64>) -> StoreResult<u64> {
        bullmq_redis::queue::add_log(&self.client, self.keys.queue(), job_id, line, keep_logs)
            .await?
            .ok_or_else(|| StoreError::Other(format!("job {job_id} no longer exists")))
    }

    async fn update_data(&self, job_id: &str, data: &serde_json::Value) -> StoreResult<()> {
        let text = data.to_string();
        bullmq_redis::queue::update_data(&self.client, self.keys.queue(), job_id, &text).await?;
        Ok(())
    }

    async fn close(&self) {
        // Interrupts a BZPOPMIN in flight first (a QUIT would wait for its timeout); idempotent.
        self.connections.close().await;
    }
}
