//! [`FlowError`]: why a flow was not added or read.

use bullmq_protocol::flow::{FlowPath, FlowValidationError};

use crate::error::QueueError;

/// Why a [`FlowProducer`](super::FlowProducer) call failed. Every refusal
/// ([`Invalid`](Self::Invalid), [`InvalidNode`](Self::InvalidNode),
/// [`ParentNotFound`](Self::ParentNotFound),
/// [`ParentCannotBeReplaced`](Self::ParentCannotBeReplaced)) wrote nothing.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum FlowError {
    /// The tree was refused before anything was written.
    #[error("invalid flow: {0}")]
    Invalid(#[from] FlowValidationError),
    /// A node's options, merged over its queue's defaults, were refused (or its data could not
    /// be serialised); nothing was written.
    #[error("invalid flow node {path} ({name}): {source}")]
    InvalidNode {
        /// The node.
        path: FlowPath,
        /// Its job name.
        name: String,
        /// Why (boxed: it is the rare, large variant).
        #[source]
        source: Box<QueueError>,
    },
    /// The parent named by the root's `parent` option does not exist (Node's "Missing key for
    /// parent job"); nothing was written.
    #[error("flow node {path}: missing key for parent job {parent_key}")]
    ParentNotFound {
        /// The node naming it.
        path: FlowPath,
        /// The parent's job key.
        parent_key: String,
    },
    /// A node's job id exists as the child of another parent that still exists (Node's "The
    /// parent job … cannot be replaced", code -7); nothing was written.
    #[error("flow node {path}: job {job_key} already belongs to parent {existing_parent_key}; its parent cannot be replaced")]
    ParentCannotBeReplaced {
        /// The node.
        path: FlowPath,
        /// The existing job's key.
        job_key: String,
        /// The parent it belongs to.
        existing_parent_key: String,
    },
    /// The producer was closed.
    #[error("the flow producer is closed")]
    Closed,
    /// The backend failed (connection, command, reply); on Redis an `add` either wrote the
    /// whole flow or nothing.
    #[error(transparent)]
    Queue(#[from] QueueError),
}

impl From<bullmq_backend::BackendError> for FlowError {
    fn from(error: bullmq_backend::BackendError) -> Self {
        FlowError::Queue(error.into())
    }
}

impl From<bullmq_redis::RedisError> for FlowError {
    fn from(error: bullmq_redis::RedisError) -> Self {
        FlowError::Queue(error.into())
    }
}
