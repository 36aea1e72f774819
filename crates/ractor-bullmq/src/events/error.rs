//! Errors of the QueueEvents side: starting, running, closing, publishing.

use bullmq_backend::BackendError;
use bullmq_redis::RedisError;

/// What went wrong with a [`QueueEvents`](super::QueueEvents) actor or a
/// [`QueueEventsProducer`](super::QueueEventsProducer).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum QueueEventsError {
    /// An option is not valid (the message names it).
    #[error("invalid QueueEvents option: {0}")]
    InvalidOption(String),
    /// The actor could not be spawned (name already registered, or `init` of the handler failed).
    #[error("could not start QueueEvents: {0}")]
    Spawn(String),
    /// [`run`](super::QueueEventsHandle::run) was called while the read loop already runs
    /// (Node: `Queue Events is already running.`).
    #[error("QueueEvents is already running")]
    AlreadyRunning,
    /// The actor is not alive (closed, or crashed and not restarted).
    #[error("QueueEvents is not running (closed or stopped)")]
    NotRunning,
    /// Redis refused a command or could not be reached.
    #[error(transparent)]
    Redis(#[from] RedisError),
    /// Another backend failed (or Redis failed in a way that is not a [`RedisError`]).
    #[error(transparent)]
    Backend(BackendError),
}

/// Redis failures stay [`QueueEventsError::Redis`], so matches on [`RedisError::Connect`] keep
/// working; anything else is [`QueueEventsError::Backend`].
impl From<BackendError> for QueueEventsError {
    fn from(error: BackendError) -> Self {
        crate::error::redis_error(error)
            .map_or_else(QueueEventsError::Backend, QueueEventsError::Redis)
    }
}
