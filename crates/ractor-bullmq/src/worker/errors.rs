//! Errors: the ones a processor returns to steer its job, and the Worker's own.

use std::time::Duration;

use crate::store::StoreError;

/// Return this from a processor (through `anyhow`) to fail the job without further attempts,
/// as Node's `UnrecoverableError`. The message becomes `failedReason`.
///
/// ```
/// use ractor_bullmq::worker::UnrecoverableError;
/// fn check(input: i64) -> anyhow::Result<serde_json::Value> {
///     if input < 0 {
///         return Err(UnrecoverableError::new("negative input").into());
///     }
///     Ok(serde_json::json!(input))
/// }
/// assert!(check(-1).is_err());
/// ```
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct UnrecoverableError(pub String);

impl UnrecoverableError {
    /// An unrecoverable failure with this message.
    pub fn new(message: impl Into<String>) -> Self {
        Self(message.into())
    }
}

/// Return this from a processor to put the job back in `delayed` for `delay`, without counting
/// an attempt (Node: `job.moveToDelayed(...)` then `throw new DelayedError()`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("job delayed for {delay:?}")]
pub struct DelayedError {
    /// How long to wait before the job is ready again.
    pub delay: Duration,
}

impl DelayedError {
    /// Delay the job by `delay`.
    pub fn new(delay: Duration) -> Self {
        Self { delay }
    }
}

/// Return this from a processor when an upstream service rate-limited you: the job goes back
/// to the front of the wait list and the queue's `limiter` key is set for `ttl` (Node:
/// `worker.rateLimit(ttl)` then `throw Worker.RateLimitError()`). As in Node, the key holds back
/// this worker and every worker — in any language — that runs with a `limiter`; workers without
/// a limiter do not consult it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("rate limited for {ttl:?}")]
pub struct RateLimitError {
    /// How long the queue's limiter key holds rate-limited workers back.
    pub ttl: Duration,
}

impl RateLimitError {
    /// Rate-limit the queue for `ttl`.
    pub fn new(ttl: Duration) -> Self {
        Self { ttl }
    }
}

/// What can go wrong starting, running or controlling a Worker.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum WorkerError {
    /// An option is out of range.
    #[error("invalid worker option `{option}`: {reason}")]
    InvalidOption {
        /// The option's Rust name.
        option: &'static str,
        /// What is wrong with it.
        reason: String,
    },
    /// The backend failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The actor could not be spawned.
    #[error("could not spawn the worker actor: {0}")]
    Spawn(String),
    /// The worker has stopped (or is stopping) and cannot take the request.
    #[error("the worker is not running")]
    NotRunning,
}
