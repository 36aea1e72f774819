//! The seam between the actors and Redis.
//!
//! The Worker, its LockManager and its job actors never call a Redis client: they call a
//! [`Store`]. [`RedisStore`] implements it over `bullmq-redis`; [`Traced`] wraps any store and
//! opens one `bullmq.store.*` tracing span per call, so implementations stay free of
//! instrumentation; a fake store lets supervision and fault tests run without Redis.
//!
//! Telemetry spans: `bullmq.store.fetch_batch` (queue, requested, fetched),
//! `bullmq.store.finish_batch` (queue, finished, requested, fetched),
//! `bullmq.store.extend_locks` (queue, jobs, lost), `bullmq.store.check_stalled` (queue,
//! recovered), `bullmq.store.wait_for_job` (queue), `bullmq.store.update_progress`,
//! `bullmq.store.add_log`, `bullmq.store.update_data` (queue, job_id).

mod redis;
mod traced;

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use tokio::sync::broadcast;

pub use bullmq_redis::worker::{
    CorruptedJob, FetchRequest, Fetched, FetchedJob, Finish, FinishAction, FinishCode, FinishReply,
    JobFacts, Retention, StalledReport,
};
pub use redis::RedisStore;
pub use traced::Traced;

/// Why a [`Store`] call failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    /// Redis failed (connection lost, script error, bad reply).
    #[error(transparent)]
    Redis(#[from] bullmq_redis::RedisError),
    /// Another backend's failure, described.
    #[error("store failure: {0}")]
    Other(String),
    /// The backend's connection dropped (or a reconnect failed); the client reconnects with
    /// backoff and calls wait for it meanwhile. Reported by the Worker once per outage.
    #[error("connection to the store lost (reconnecting with backoff): {0}")]
    ConnectionLost(#[source] Arc<dyn std::error::Error + Send + Sync>),
}

/// A change of a store's connection, from [`Store::connection_changes`].
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum ConnectionChange {
    /// The connection dropped or a reconnect failed. A store may send it more than once per
    /// outage ([`RedisStore`] sends it once, when the first of its connections drops); the
    /// Worker reports only the first of an outage.
    Lost(Arc<dyn std::error::Error + Send + Sync>),
    /// The connection works again.
    Restored,
}

/// Result alias of [`Store`] calls.
pub type StoreResult<T> = Result<T, StoreError>;

/// What a Worker needs from the backend holding the queue. One store serves one queue.
///
/// Every method is one round trip for the Redis implementation.
#[async_trait]
pub trait Store: Send + Sync + 'static {
    /// The queue's name (for telemetry).
    fn queue_name(&self) -> &str;

    /// Moves up to `request.count` ready jobs to active and locks them for the caller.
    async fn fetch_batch(&self, request: &FetchRequest) -> StoreResult<Fetched>;

    /// Finishes jobs (each checked against its token) and fetches jobs for the freed slots.
    async fn finish_batch(
        &self,
        finishes: &[Finish],
        fetch: Option<&FetchRequest>,
    ) -> StoreResult<FinishReply>;

    /// Renews the locks of `(job id, token)` pairs; returns the ids that could not be renewed.
    async fn extend_locks(
        &self,
        jobs: &[(String, String)],
        lock_duration: Duration,
    ) -> StoreResult<Vec<String>>;

    /// Runs the stalled check (at most once per `interval` across all workers); reports the
    /// ids moved back to wait and the corrupted jobs it failed instead.
    async fn check_stalled(
        &self,
        max_stalled_count: u32,
        interval: Duration,
    ) -> StoreResult<StalledReport>;

    /// Blocks up to `timeout` until jobs may be ready (a producer or a finished retry signalled
    /// the queue). `true` when woken by a signal, `false` on timeout.
    async fn wait_for_job(&self, timeout: Duration) -> StoreResult<bool>;

    /// Stores a job's progress (JSON) and emits `progress`.
    async fn update_progress(&self, job_id: &str, progress: &serde_json::Value) -> StoreResult<()>;

    /// Appends a line to the job's log; returns the number of lines kept.
    async fn add_log(&self, job_id: &str, line: &str, keep_logs: Option<u64>) -> StoreResult<u64>;

    /// Replaces the job's data.
    async fn update_data(&self, job_id: &str, data: &serde_json::Value) -> StoreResult<()>;

    /// Changes of the backend's connection, for the Worker to report an outage even while its
    /// calls just wait for the reconnect (a Redis client queues commands meanwhile, so no call
    /// fails during a short outage). `None` (the default) when the backend has no connection
    /// to watch.
    fn connection_changes(&self) -> Option<broadcast::Receiver<ConnectionChange>> {
        None
    }

    /// Releases connections; later calls fail. Must be idempotent: a Worker calls it when it
    /// stops, and again (from a spawned task) when its state is dropped without `post_stop`.
    async fn close(&self);

    /// Moves one active job to `delayed` for `delay` without counting an attempt (Node's
    /// `job.moveToDelayed`); a one-item [`Store::finish_batch`].
    async fn move_to_delayed(
        &self,
        job_id: &str,
        token: &str,
        delay: Duration,
    ) -> StoreResult<FinishCode> {
        let finish = Finish {
            job_id: job_id.to_string(),
            token: token.to_string(),
            action: FinishAction::Delay {
                delay,
                reason: None,
                stacktrace: None,
                skip_attempt: true,
            },
            facts: JobFacts::default(),
        };
        let reply = self.finish_batch(&[finish], None).await?;
        reply
            .codes
            .first()
            .copied()
            .ok_or_else(|| StoreError::Other("finish_batch returned no code".to_string()))
    }
}

/// Milliseconds since the Unix epoch, as the scripts expect.
pub(crate) fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
        .unwrap_or_default()
}
