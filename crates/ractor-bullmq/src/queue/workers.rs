//! [`Queue::get_workers`]: the workers of a queue, through the seam's
//! [`QueueStore::list_workers`](bullmq_backend::QueueStore::list_workers). On Redis they are
//! found as Node's `Queue.getWorkers()` finds them — by the names their connections were
//! given with `CLIENT SETNAME` (the parsing is [`bullmq_redis::queue::parse_client_list`],
//! re-exported here); another backend lists what it knows of its workers, or declines.

use crate::error::{QueueError, Result};
use crate::queue::Queue;

pub use bullmq_backend::WorkerInfo;
pub use bullmq_redis::queue::{parse_client_list, parse_client_lists};

impl Queue {
    /// The workers of this queue, any language, as Node's `queue.getWorkers()`: on Redis the
    /// connections `CLIENT LIST` names `{prefix}:{base64(queue)}` or `…:w:{worker name}`; on
    /// the memory backend the worker stores it has open.
    ///
    /// On Redis only as good as the server's `CLIENT LIST`: some hosted services disable it
    /// (Node returns a placeholder entry there; this returns the error).
    ///
    /// # Errors
    ///
    /// [`QueueError::Unsupported`] when the backend does not list workers
    /// ([`Capability::WorkerListing`](bullmq_backend::Capability::WorkerListing));
    /// [`QueueError::Redis`] when the command fails.
    ///
    /// # Cancel safety
    ///
    /// Read-only: cancelling loses nothing.
    pub async fn get_workers(&self) -> Result<Vec<WorkerInfo>> {
        Ok(self.store().list_workers().await?)
    }

    /// How many workers [`Queue::get_workers`] finds (Node `getWorkersCount`).
    ///
    /// # Errors
    ///
    /// As [`Queue::get_workers`].
    ///
    /// # Cancel safety
    ///
    /// Read-only: cancelling loses nothing.
    pub async fn get_workers_count(&self) -> Result<usize> {
        Ok(self.get_workers().await?.len())
    }

    /// The QueueEvents readers of this queue, any language, read from `CLIENT LIST` as Node's
    /// (deprecated) `queue.getQueueEvents()`: connections named exactly
    /// `{prefix}:{base64(queue)}:qe`, of the node listing the most on a cluster. Each entry's
    /// [`WorkerInfo::worker_name`] is `None`.
    ///
    /// Redis only: the seam has no listing of event readers.
    ///
    /// # Errors
    ///
    /// [`QueueError::Unsupported`] (worker listing) on another backend; [`QueueError::Redis`]
    /// when the command fails.
    ///
    /// # Cancel safety
    ///
    /// Read-only: cancelling loses nothing.
    pub async fn get_queue_events(&self) -> Result<Vec<WorkerInfo>> {
        let client = self.redis_client().ok_or(QueueError::Unsupported {
            capability: bullmq_backend::Capability::WorkerListing,
            backend: self.store().backend_name(),
        })?;
        Ok(bullmq_redis::queue::list_queue_events(client, self.keys()).await?)
    }
}
