//! Errors of the QueueEvents side: starting, running, closing, publishing.

use bullmq_backend::BackendError;
use bullmq_redis::RedisError;
use ractor::SpawnErr;

use crate::supervision::SupervisionError;

/// What went wrong with a [`QueueEvents`](super::QueueEvents) actor or a
/// [`QueueEventsProducer`](super::QueueEventsProducer).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum QueueEventsError {
    /// An option is not valid (the message names it).
    #[error("invalid QueueEvents option: {0}")]
    InvalidOption(String),
    /// The actor could not be spawned: its name is already registered, or its start failed
    /// (then the source's source is the [`QueueEventsError`] its start returned, such as
    /// [`QueueEventsError::HandlerInit`]).
    #[error("could not start QueueEvents: {0}")]
    Spawn(#[source] SpawnErr),
    /// The handler's [`init`](super::QueueEventsHandler::init) failed, so the actor did not start;
    /// the source is the handler's error.
    #[error("could not start QueueEvents: QueueEventsHandler::init failed: {0:#}")]
    HandlerInit(#[source] anyhow::Error),
    /// The supervisor asked to run it refused or could not start it.
    #[error("could not start QueueEvents: {0}")]
    Supervisor(#[source] SupervisionError),
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

#[cfg(test)]
mod tests {
    use std::error::Error as _;

    use super::*;

    #[test]
    fn start_errors_keep_their_cause_and_their_wording() {
        let init = QueueEventsError::HandlerInit(anyhow::anyhow!("no database"));
        assert_eq!(
            init.to_string(),
            "could not start QueueEvents: QueueEventsHandler::init failed: no database"
        );
        assert_eq!(
            init.source().map(ToString::to_string).as_deref(),
            Some("no database")
        );

        let supervisor = QueueEventsError::Supervisor(SupervisionError::NotRunning("qe".into()));
        assert_eq!(
            supervisor.to_string(),
            "could not start QueueEvents: supervisor `qe` is not running"
        );
        assert!(supervisor
            .source()
            .is_some_and(|s| s.downcast_ref::<SupervisionError>().is_some()));
    }
}
