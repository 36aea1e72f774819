//! [`RedisWorkerStore`]: a worker's [`WorkerStore`] on Redis.

use std::sync::Arc;
use std::time::Duration;

use std::sync::atomic::{AtomicU64, Ordering};

use async_trait::async_trait;
use bullmq_backend::{
    now_ms, BackendResult, ChildRef, ConnectionChange, Dependencies, DependencyCounts,
    DependencyKind, DependencyPage, FetchRequest, Fetched, Finish, FinishReply, JobFlows,
    JobSchedulers, JobUpdates, MoveToWaitOutcome, NextIteration, StalledReport,
    WaitingChildrenOutcome, WorkerStore,
};
use bullmq_protocol::keys::QueueKeys;
use bullmq_protocol::scheduler::NextIterationPlan;
use fred::prelude::{Client, EventInterface};
use tokio::sync::broadcast;

use super::RedisQueueStore;
use crate::worker::{self as calls, WorkerKeys};
use crate::{ConnectionConfig, Connections};

/// A [`WorkerStore`] on Redis: one command connection and one blocking connection (named so Node's
/// `queue.getWorkers()` lists it).
///
/// Clones share the connections. They close on [`WorkerStore::close`] or, failing that, when the
/// last clone is dropped (a Worker killed or crashed without `post_stop` still releases them).
#[derive(Clone)]
pub struct RedisWorkerStore {
    client: Client,
    blocking: Client,
    connections: Arc<Connections>,
    changes: broadcast::Sender<ConnectionChange>,
    keys: WorkerKeys,
    metrics_max_points: u32,
    /// Next lock-token sequence number: each fetch reserves as many as it asks jobs for, so
    /// tokens `{prefix}:{n}` stay unique per worker whichever call hands them out.
    token_seq: Arc<AtomicU64>,
    /// A running job's progress, log and data updates and the next iterations of job
    /// schedulers: the queue store's, on the command connection.
    updates: RedisQueueStore,
}

impl std::fmt::Debug for RedisWorkerStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisWorkerStore")
            .field("queue", &self.keys.queue().qualified_name())
            .finish_non_exhaustive()
    }
}

impl RedisWorkerStore {
    /// Connects the two connections of one worker of `queue` under `prefix`. The blocking
    /// connection is named `{prefix}:{base64(queue)}:w:{worker_name}` (or without the `:w:`
    /// part when unnamed), as Node names worker connections; the command connection
    /// `{prefix}:{base64(queue)}:wc[:{worker_name}]`, which Node's lookups ignore.
    ///
    /// # Errors
    ///
    /// [`crate::RedisError::Connect`] when Redis cannot be reached;
    /// [`crate::RedisError::CrossSlot`] on a cluster when the queue's keys would not share a
    /// slot.
    pub async fn connect(
        config: &ConnectionConfig,
        prefix: &str,
        queue: &str,
        worker_name: Option<&str>,
    ) -> crate::Result<Self> {
        config.check_queue_keys(prefix, queue)?;
        let keys = QueueKeys::new(prefix, queue);
        let name = keys.worker_client_name(worker_name);
        let client = config
            .connect(Some(keys.worker_command_client_name(worker_name)))
            .await?;
        let blocking = match config.connect(Some(name)).await {
            Ok(blocking) => blocking,
            Err(error) => {
                Connections::new(vec![client], Vec::new()).close().await;
                return Err(error);
            }
        };
        let (changes, _) = broadcast::channel(16);
        let down = Arc::new(std::sync::Mutex::new([false; 2]));
        for (index, watched) in [&client, &blocking].into_iter().enumerate() {
            watch_connection(watched, index, &down, &changes);
        }
        Ok(Self {
            connections: Arc::new(Connections::new(
                vec![client.clone()],
                vec![blocking.clone()],
            )),
            changes,
            updates: RedisQueueStore::with_client(client.clone(), keys.clone()),
            client,
            blocking,
            keys: WorkerKeys::new(keys),
            metrics_max_points: 0,
            token_seq: Arc::new(AtomicU64::new(0)),
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

/// Which of the store's connections (command, blocking) are down.
type Down = Arc<std::sync::Mutex<[bool; 2]>>;

/// Forwards connection `index`'s errors and reconnects to `changes`, as transitions of the
/// store as a whole: `Lost` when the first connection goes down (not on every failed
/// reconnect attempt, nor again for the second one), `Restored` when the last one is back.
/// The listeners end when the client is closed.
fn watch_connection(
    client: &Client,
    index: usize,
    down: &Down,
    changes: &broadcast::Sender<ConnectionChange>,
) {
    let mark = |down: &Down, index: usize, is_down: bool| {
        let mut flags = match down.lock() {
            Ok(flags) => flags,
            Err(poisoned) => poisoned.into_inner(),
        };
        let was_up = !flags.iter().any(|d| *d);
        flags[index] = is_down;
        let is_up = !flags.iter().any(|d| *d);
        (was_up, is_up)
    };
    let (lost_down, lost) = (down.clone(), changes.clone());
    client.on_error(move |(error, _server)| {
        if let (true, false) = mark(&lost_down, index, true) {
            // No receiver (no Worker yet, or it stopped) is fine: nobody to tell.
            let _ = lost.send(ConnectionChange::Lost(Arc::new(error)));
        }
        async { Ok(()) }
    });
    let (restored_down, restored) = (down.clone(), changes.clone());
    client.on_reconnect(move |_server| {
        if let (false, true) = mark(&restored_down, index, false) {
            let _ = restored.send(ConnectionChange::Restored);
        }
        async { Ok(()) }
    });
}

impl RedisWorkerStore {
    /// Reserves `count` token sequence numbers; returns the first.
    fn reserve_tokens(&self, count: u32) -> u64 {
        self.token_seq
            .fetch_add(u64::from(count), Ordering::Relaxed)
    }
}

impl bullmq_backend::BackendName for RedisWorkerStore {
    fn backend_name(&self) -> &'static str {
        super::NAME
    }
}

#[async_trait]
impl WorkerStore for RedisWorkerStore {
    fn queue_name(&self) -> &str {
        self.keys.queue().name()
    }

    async fn fetch_batch(&self, request: &FetchRequest) -> BackendResult<Fetched> {
        let seq = self.reserve_tokens(request.count);
        Ok(calls::fetch_batch(&self.client, &self.keys, request, seq, now_ms()).await?)
    }

    async fn finish_batch(
        &self,
        finishes: &[Finish],
        fetch: Option<&FetchRequest>,
    ) -> BackendResult<FinishReply> {
        let fetch = fetch.map(|request| (request, self.reserve_tokens(request.count)));
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
    ) -> BackendResult<Vec<String>> {
        Ok(calls::extend_locks(&self.client, &self.keys, jobs, lock_duration).await?)
    }

    async fn check_stalled(
        &self,
        max_stalled_count: u32,
        interval: Duration,
    ) -> BackendResult<StalledReport> {
        Ok(calls::move_stalled(
            &self.client,
            &self.keys,
            max_stalled_count,
            interval,
            now_ms(),
        )
        .await?)
    }

    async fn wait_for_job(&self, timeout: Duration) -> BackendResult<bool> {
        Ok(calls::wait_for_marker(&self.blocking, &self.keys, timeout)
            .await?
            .is_some())
    }

    fn connection_changes(&self) -> Option<broadcast::Receiver<ConnectionChange>> {
        Some(self.changes.subscribe())
    }

    async fn close(&self) {
        // Interrupts a BZPOPMIN in flight first (a QUIT would wait for its timeout); idempotent.
        self.connections.close().await;
    }

    async fn schedule_next_iteration(
        &self,
        plan: &NextIterationPlan,
    ) -> BackendResult<NextIteration> {
        self.updates.create_next_iteration(plan).await
    }

    async fn move_to_waiting_children(
        &self,
        job_id: &str,
        token: &str,
        child: Option<&ChildRef>,
    ) -> BackendResult<WaitingChildrenOutcome> {
        Ok(calls::move_to_waiting_children(
            &self.client,
            &self.keys,
            job_id,
            token,
            child,
            now_ms(),
        )
        .await?)
    }

    async fn move_to_wait(&self, job_id: &str, token: &str) -> BackendResult<MoveToWaitOutcome> {
        Ok(calls::move_to_wait(&self.client, &self.keys, job_id, token).await?)
    }
}

#[async_trait]
impl JobFlows for RedisWorkerStore {
    async fn get_dependencies(&self, job_id: &str) -> BackendResult<Dependencies> {
        self.updates.get_dependencies(job_id).await
    }

    async fn get_dependency_counts(&self, job_id: &str) -> BackendResult<DependencyCounts> {
        self.updates.get_dependency_counts(job_id).await
    }

    async fn get_dependencies_page(
        &self,
        job_id: &str,
        kind: DependencyKind,
        cursor: u64,
        count: u64,
    ) -> BackendResult<DependencyPage> {
        self.updates
            .get_dependencies_page(job_id, kind, cursor, count)
            .await
    }
}

#[async_trait]
impl JobUpdates for RedisWorkerStore {
    async fn update_progress(
        &self,
        job_id: &str,
        progress: &serde_json::Value,
    ) -> BackendResult<bool> {
        self.updates.update_progress(job_id, progress).await
    }

    async fn add_log(
        &self,
        job_id: &str,
        line: &str,
        keep_logs: Option<u64>,
    ) -> BackendResult<Option<u64>> {
        self.updates.add_log(job_id, line, keep_logs).await
    }

    async fn update_data(&self, job_id: &str, data: &serde_json::Value) -> BackendResult<bool> {
        self.updates.update_data(job_id, data).await
    }
}
