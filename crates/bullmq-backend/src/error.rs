//! [`BackendError`]: why a backend call failed, in terms every backend can report.

use std::sync::Arc;
use std::time::Duration;

use bullmq_protocol::DecodeError;

use crate::capability::Capability;

/// A backend's own error (a Redis client error, a SQL error), kept with its type so callers can
/// downcast it (`error.downcast_ref::<bullmq_redis::RedisError>()`).
pub type BoxError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// Why a backend call failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum BackendError {
    /// The backend could not be reached at all (the first connection failed or timed out).
    #[error(transparent)]
    Connect(BoxError),
    /// The connection dropped (or a reconnect failed); the backend reconnects with backoff and
    /// calls wait for it meanwhile.
    #[error("connection to the store lost (reconnecting with backoff): {0}")]
    ConnectionLost(#[source] Arc<dyn std::error::Error + Send + Sync>),
    /// A call did not complete within `after`.
    #[error("{operation} did not complete within {after:?}")]
    Timeout {
        /// The call that timed out.
        operation: &'static str,
        /// How long it was given.
        after: Duration,
    },
    /// The job does not exist (any more).
    #[error("job {job_id} does not exist")]
    JobNotFound {
        /// The missing job's id.
        job_id: String,
    },
    /// A stored job could not be decoded (written by a buggy or foreign client).
    #[error("job {job_id} cannot be read: {source}")]
    Decode {
        /// The job whose record is corrupted.
        job_id: String,
        /// The field and the reason.
        #[source]
        source: DecodeError,
    },
    /// The backend has been closed.
    #[error("the backend is closed")]
    Closed,
    /// The backend declines this optional part of the seam (see [`Capability`]); nothing was
    /// read or written.
    #[error("the {backend} backend does not support {capability}")]
    Unsupported {
        /// What was declined.
        capability: Capability,
        /// The backend's [`BackendName::backend_name`](crate::BackendName::backend_name).
        backend: &'static str,
    },
    /// Any other failure of the backend (a command failed, a reply was malformed), typed.
    #[error(transparent)]
    Backend(BoxError),
}

impl BackendError {
    /// Wraps a backend-specific error.
    pub fn backend(error: impl std::error::Error + Send + Sync + 'static) -> Self {
        Self::Backend(Box::new(error))
    }

    /// The capability the backend declined, when this is [`BackendError::Unsupported`].
    pub fn unsupported_capability(&self) -> Option<Capability> {
        match self {
            Self::Unsupported { capability, .. } => Some(*capability),
            _ => None,
        }
    }

    /// True when the backend could not be reached at all.
    pub fn is_connect(&self) -> bool {
        matches!(self, Self::Connect(_))
    }

    /// The backend-specific error inside [`BackendError::Connect`] or
    /// [`BackendError::Backend`], when it is an `E`.
    pub fn downcast_ref<E: std::error::Error + 'static>(&self) -> Option<&E> {
        match self {
            Self::Connect(error) | Self::Backend(error) => error.downcast_ref(),
            _ => None,
        }
    }
}

/// Result alias of backend calls.
pub type BackendResult<T> = Result<T, BackendError>;
