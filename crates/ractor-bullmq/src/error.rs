//! Errors of the runtime crate.
//!
//! [`QueueError`] is what every [`Queue`](crate::Queue) and [`Job`](crate::Job) operation
//! returns: Redis failures (including an unreachable server), input rejected before anything is
//! written, job hashes that cannot be decoded, and the refusals BullMQ's scripts signal with
//! codes (a locked job, active jobs on obliterate, a missing job).

use bullmq_protocol::{DecodeError, ValidationError};
use bullmq_redis::RedisError;

/// What went wrong in a queue operation.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum QueueError {
    /// Redis could not be reached, a command failed, or a script replied unexpectedly.
    /// An unreachable server is `Redis(RedisError::Connect { .. })`; see
    /// [`QueueError::is_connect`].
    #[error(transparent)]
    Redis(#[from] RedisError),
    /// The job was rejected before anything was written (Node's messages).
    #[error("invalid job: {0}")]
    Validation(#[from] ValidationError),
    /// A job option this library does not implement yet; nothing was written.
    #[error("unsupported job option `{option}`: {reason}")]
    Unsupported {
        /// The option, by its Node name.
        option: &'static str,
        /// Why it is refused.
        reason: &'static str,
    },
    /// A job hash could not be decoded (written by a buggy or foreign client); names the field.
    #[error("job {job_id} cannot be read: {source}")]
    Decode {
        /// The job whose hash is corrupted.
        job_id: String,
        /// The field and the reason.
        #[source]
        source: DecodeError,
    },
    /// Data, progress or a return value could not be (de)serialised as JSON.
    #[error("JSON (de)serialisation failed: {0}")]
    Json(#[from] serde_json::Error),
    /// The job does not exist (Node script code -1).
    #[error("job {job_id} does not exist")]
    JobNotFound {
        /// The missing job's id.
        job_id: String,
    },
    /// The parent named in the job's options does not exist (Node script code -5).
    #[error("parent job {parent_key} does not exist")]
    ParentNotFound {
        /// The parent's job key.
        parent_key: String,
    },
    /// A worker holds the job's lock, so it cannot be removed now.
    #[error("job {job_id} is locked by a worker and cannot be removed")]
    JobLocked {
        /// The locked job's id.
        job_id: String,
    },
    /// The job is the pending run of a job scheduler; remove the scheduler instead (Node -8).
    #[error("job {job_id} belongs to a job scheduler; remove the scheduler instead")]
    SchedulerJob {
        /// The job's id.
        job_id: String,
    },
    /// Obliterate refused: jobs are active and `force` was not set (Node -2).
    #[error("cannot obliterate queue {queue}: it has active jobs (use force)")]
    ActiveJobs {
        /// The qualified queue name.
        queue: String,
    },
}

impl QueueError {
    /// True when Redis could not be reached at all (first connection failed or timed out).
    pub fn is_connect(&self) -> bool {
        matches!(self, QueueError::Redis(RedisError::Connect { .. }))
    }
}

/// Result alias of queue operations.
pub type Result<T, E = QueueError> = std::result::Result<T, E>;
