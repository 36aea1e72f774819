//! Typed calls of the worker scripts: fetch a batch, finish a batch (and fetch in the same
//! round trip), extend locks, recover stalled jobs, step a running job aside (to
//! `waiting-children` or back to `wait`), and the blocking wait on the queue's
//! `marker`. Progress, log and data updates from a running job use the queue's calls
//! ([`crate::queue::update_progress`] and friends): they touch one job, not the worker layout.
//!
//! Every worker script takes the same key layout ([`WorkerKeys`]), so one key list is built per
//! queue and reused for every call.

mod blocking;
mod fetch;
mod finish;
mod locks;
mod reply;
mod scripts;
mod steps;

pub use blocking::wait_for_marker;
pub use fetch::{fetch_batch, CorruptedJob, FetchRequest, Fetched, FetchedJob};
pub use finish::{
    finish_batch, Finish, FinishAction, FinishCode, FinishReply, JobFacts, Retention,
};
pub use locks::{extend_locks, move_stalled, StalledReport};
pub use steps::{move_to_wait, move_to_waiting_children};

use bullmq_protocol::keys::{QueueKey, QueueKeys};

/// The key list every worker script receives (see `lua/includes/worker_common.lua`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkerKeys {
    queue: QueueKeys,
    keys: Vec<String>,
}

impl WorkerKeys {
    /// Builds the layout for one queue.
    pub fn new(queue: QueueKeys) -> Self {
        let keys = [
            QueueKey::Wait,
            QueueKey::Active,
            QueueKey::Prioritized,
            QueueKey::Delayed,
            QueueKey::Events,
            QueueKey::Stalled,
            QueueKey::Limiter,
            QueueKey::Meta,
            QueueKey::PriorityCounter,
            QueueKey::Marker,
            QueueKey::Completed,
            QueueKey::Failed,
            QueueKey::StalledCheck,
            QueueKey::Paused,
            QueueKey::Repeat,
            QueueKey::MetricsCompleted,
            QueueKey::MetricsFailed,
        ]
        .into_iter()
        .map(|key| queue.key(key))
        .collect();
        Self { queue, keys }
    }

    /// The queue's key builder.
    pub fn queue(&self) -> &QueueKeys {
        &self.queue
    }

    pub(crate) fn script_keys(&self) -> Vec<String> {
        self.keys.clone()
    }
}
