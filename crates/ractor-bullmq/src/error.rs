//! Errors of the runtime crate.
//!
//! [`QueueError`] is what every [`Queue`](crate::Queue) and [`Job`](crate::Job) operation
//! returns: Redis failures (including an unreachable server), input rejected before anything is
//! written, job hashes that cannot be decoded, and the refusals BullMQ's scripts signal with
//! codes (a locked job, active jobs on obliterate, a missing job).

use bullmq_backend::BackendError;
use bullmq_protocol::scheduler::SchedulerError;
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
    /// A backend other than Redis failed (or Redis failed in a way that is not a
    /// [`RedisError`], such as a timeout).
    #[error(transparent)]
    Backend(BackendError),
    /// The job was rejected before anything was written (Node's messages).
    #[error("invalid job: {0}")]
    Validation(#[from] ValidationError),
    /// A job option this library does not implement yet; nothing was written.
    #[error("unsupported job option `{option}`: {reason}")]
    UnsupportedOption {
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
    /// The job has no lock to extend: it expired (the stalled check may take the job), the
    /// job finished, or it does not exist. Nothing was written (Node's `extendLock` returns 0).
    #[error("job {job_id} has no lock to extend")]
    LockMissing {
        /// The job's id.
        job_id: String,
    },
    /// The job's lock carries another token: another worker holds the job. Nothing was
    /// written (Node's `extendLock` returns 0).
    #[error("job {job_id} is locked with another token")]
    LockHeldByOther {
        /// The job's id.
        job_id: String,
    },
    /// The job is the pending run of a job scheduler; remove the scheduler instead (Node -8).
    #[error("job {job_id} belongs to a job scheduler; remove the scheduler instead")]
    SchedulerJob {
        /// The job's id.
        job_id: String,
    },
    /// A job scheduler upsert was refused before anything was written (Node's messages).
    #[error(transparent)]
    Scheduler(#[from] SchedulerError),
    /// A cron scheduler's next iteration id is taken by a job that cannot be replaced (Node
    /// -10; the message is Node's).
    #[error("Cannot create job scheduler iteration - job ID already exists. addJobScheduler (scheduler {scheduler_id})")]
    SchedulerIterationExists {
        /// The scheduler.
        scheduler_id: String,
    },
    /// Every `every` slot the upsert scanned holds a job already (Node -11; the message is
    /// Node's).
    #[error("Cannot create job scheduler iteration - current and next time slots already have jobs. addJobScheduler (scheduler {scheduler_id})")]
    SchedulerSlotsBusy {
        /// The scheduler.
        scheduler_id: String,
    },
    /// An argument of a queue-control call is out of range; nothing was written.
    #[error("invalid argument `{argument}`: {reason}")]
    InvalidArgument {
        /// The argument, by its Rust name.
        argument: &'static str,
        /// Why it is refused.
        reason: &'static str,
    },
    /// An action on a [`crate::Job`] that holds no queue handle (built with `Job::decode` or
    /// `Job::from_record`, or fetched by a Worker); nothing was read or written.
    #[error("job {job_id} was not read through a queue, so it cannot act on it (read it with Queue::get_job)")]
    Detached {
        /// The job's id.
        job_id: String,
    },
    /// The queue's backend declines this optional part of the seam (see
    /// [`Capability`](bullmq_backend::Capability)): `get_workers` on a backend without worker
    /// listing, job schedulers on one without schedulers, …; nothing was read or written.
    #[error("the {backend} backend does not support {capability}")]
    Unsupported {
        /// What was declined.
        capability: bullmq_backend::Capability,
        /// The backend's name (`"redis"`, `"memory"`, …).
        backend: &'static str,
    },
    /// Obliterate refused: jobs are active and `force` was not set (Node -2).
    #[error("cannot obliterate queue {queue}: it has active jobs (use force)")]
    ActiveJobs {
        /// The qualified queue name.
        queue: String,
    },
    /// A job control operation found the job in another state than it needs (Node -3,
    /// "Job … is not in the … state"); nothing was written.
    #[error("job {job_id} is not {expected}, it is {actual}")]
    JobNotInState {
        /// The job's id.
        job_id: String,
        /// The state the operation needs, as Node names it (`failed`, `completed`, `delayed`).
        expected: &'static str,
        /// Where the job was found right after the refusal.
        actual: bullmq_protocol::state::JobState,
    },
}

impl QueueError {
    /// True when Redis could not be reached at all (first connection failed or timed out).
    pub fn is_connect(&self) -> bool {
        match self {
            QueueError::Redis(error) => matches!(error, RedisError::Connect { .. }),
            QueueError::Backend(error) => error.is_connect(),
            _ => false,
        }
    }
}

/// A backend error as the queue reports it: the Redis backend's errors stay
/// [`QueueError::Redis`] (so `is_connect` and matches on [`RedisError`] keep working), a
/// missing or corrupted job and a declined capability get their own variants, anything else is
/// [`QueueError::Backend`].
impl From<BackendError> for QueueError {
    fn from(error: BackendError) -> Self {
        match redis_error(error) {
            Ok(redis) => QueueError::Redis(redis),
            Err(BackendError::JobNotFound { job_id }) => QueueError::JobNotFound { job_id },
            Err(BackendError::Decode { job_id, source }) => QueueError::Decode { job_id, source },
            Err(BackendError::Unsupported {
                capability,
                backend,
            }) => QueueError::Unsupported {
                capability,
                backend,
            },
            Err(other) => QueueError::Backend(other),
        }
    }
}

/// The [`RedisError`] inside a backend error of the Redis backend, or the error unchanged: the
/// runtime's error types keep Redis failures as their `Redis` variants.
pub(crate) fn redis_error(error: BackendError) -> std::result::Result<RedisError, BackendError> {
    match error {
        BackendError::Connect(inner) => inner
            .downcast::<RedisError>()
            .map(|redis| *redis)
            .map_err(BackendError::Connect),
        BackendError::Backend(inner) => inner
            .downcast::<RedisError>()
            .map(|redis| *redis)
            .map_err(BackendError::Backend),
        other => Err(other),
    }
}

/// Result alias of queue operations.
pub type Result<T, E = QueueError> = std::result::Result<T, E>;
