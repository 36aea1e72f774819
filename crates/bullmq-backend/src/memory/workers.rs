//! The worker stores a [`MemoryBackend`](super::MemoryBackend) has open, listed by
//! [`QueueStore::list_workers`](crate::QueueStore::list_workers) as Redis lists a queue's worker
//! connections: a worker store is registered when it is opened and forgotten when it is closed
//! (or dropped).

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crate::queue::WorkerInfo;

/// One open worker store.
#[derive(Debug)]
struct Registered {
    /// `{prefix}:{queue}:` of its queue.
    base: String,
    /// The name a Node-compatible connection of this worker would have
    /// (`{prefix}:{base64(queue)}[:w:{name}]`).
    raw_name: String,
    worker_name: Option<String>,
    opened_ms: u64,
    /// When the store was last called (ms), updated by the store itself.
    last_call_ms: Arc<AtomicU64>,
}

/// Every open worker store of one backend, by registration number.
#[derive(Debug, Default)]
pub(crate) struct Registry {
    next: u64,
    workers: BTreeMap<u64, Registered>,
}

impl Registry {
    /// Registers a worker store of the queue at `base`; returns its number.
    pub(crate) fn register(
        &mut self,
        base: &str,
        raw_name: String,
        worker_name: Option<String>,
        now: u64,
        last_call_ms: Arc<AtomicU64>,
    ) -> u64 {
        self.next += 1;
        self.workers.insert(
            self.next,
            Registered {
                base: base.to_owned(),
                raw_name,
                worker_name,
                opened_ms: now,
                last_call_ms,
            },
        );
        self.next
    }

    /// Forgets worker store `id` (idempotent).
    pub(crate) fn deregister(&mut self, id: u64) {
        self.workers.remove(&id);
    }

    /// The open worker stores of the queue at `base` (named `queue`), oldest first, with the
    /// fields of a Node `getWorkers()` entry.
    pub(crate) fn list(&self, base: &str, queue: &str, now: u64) -> Vec<WorkerInfo> {
        self.workers
            .iter()
            .filter(|(_, w)| w.base == base)
            .map(|(id, w)| {
                let secs = |since: u64| Duration::from_secs(now.saturating_sub(since) / 1000);
                let age = secs(w.opened_ms);
                let idle = secs(w.last_call_ms.load(Ordering::Relaxed));
                let fields = BTreeMap::from([
                    ("id".to_owned(), id.to_string()),
                    ("addr".to_owned(), "memory".to_owned()),
                    ("age".to_owned(), age.as_secs().to_string()),
                    ("idle".to_owned(), idle.as_secs().to_string()),
                    ("name".to_owned(), queue.to_owned()),
                    ("rawname".to_owned(), w.raw_name.clone()),
                ]);
                WorkerInfo::new(
                    w.raw_name.clone(),
                    w.worker_name.clone(),
                    id.to_string(),
                    "memory",
                    age,
                    idle,
                )
                .with_fields(fields)
            })
            .collect()
    }
}
