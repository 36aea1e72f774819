//! Finding the workers of a queue the way Node's `Queue.getWorkers()` does: by the names their
//! Redis connections were given with `CLIENT SETNAME`.

use anyhow::{Context as _, Result};
use serde::Serialize;

/// One worker connection found in `CLIENT LIST`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct WorkerConnection {
    /// The raw connection name (`{prefix}:{base64(queue)}[:w:{worker name}]`).
    pub(crate) name: String,
    /// The worker's own name, when it has one (the part after `:w:`).
    pub(crate) worker_name: Option<String>,
    /// Client address as Redis reports it.
    pub(crate) addr: String,
    /// Seconds since the connection was opened.
    pub(crate) age_secs: u64,
    /// Seconds since the connection's last command.
    pub(crate) idle_secs: u64,
}

impl From<ractor_bullmq::WorkerInfo> for WorkerConnection {
    fn from(info: ractor_bullmq::WorkerInfo) -> Self {
        Self {
            name: info.raw_name,
            worker_name: info.worker_name,
            addr: info.addr,
            age_secs: info.age.as_secs(),
            idle_secs: info.idle.as_secs(),
        }
    }
}

/// The worker connections of a queue, read by [`ractor_bullmq::Queue::get_workers`] (the
/// library owns Node's matching rule; this keeps the CLI's own output shape).
pub(crate) async fn list_workers(queue: &ractor_bullmq::Queue) -> Result<Vec<WorkerConnection>> {
    let workers = queue
        .get_workers()
        .await
        .context("CLIENT LIST failed (some hosted Redis services disable it)")?;
    Ok(workers.into_iter().map(WorkerConnection::from).collect())
}
