//! One queue on a fresh in-memory backend, no Redis running: the set-up of the tests that run
//! a `Worker` or a `ManualWorker` against the memory backend and read what it did back from the
//! queue store and the event log.

// Each test binary that includes this module uses part of it.
#![allow(dead_code)]

use std::sync::Arc;

use bullmq_backend::memory::MemoryBackend;
use bullmq_backend::{AddResult, Backend, EventStream, NewJob, QueueStore};
use bullmq_protocol::keys::QueueKeys;
use bullmq_protocol::QueueId;

/// The backend, the queue (and its Redis key names), and its queue store and event stream.
pub(crate) struct Fixture {
    pub(crate) backend: MemoryBackend,
    pub(crate) id: QueueId,
    pub(crate) keys: QueueKeys,
    pub(crate) queue: Arc<dyn QueueStore>,
    pub(crate) events: Arc<dyn EventStream>,
}

impl Fixture {
    /// Queue `name` under the `bull` prefix on a new backend.
    pub(crate) async fn new(name: &str) -> Self {
        let backend = MemoryBackend::new();
        let id = QueueId::new("bull", name);
        let keys = id.keys();
        let queue = backend.queue_store(&id).await.unwrap();
        let events = backend.event_stream(&id).await.unwrap();
        Self {
            backend,
            id,
            keys,
            queue,
            events,
        }
    }

    /// Adds a job named `job` with `{}` data and the options JSON `opts`; its id.
    pub(crate) async fn add(&self, opts: &str) -> String {
        self.add_named("job", opts).await
    }

    /// Adds a job named `name` with `{}` data and the options JSON `opts`; its id.
    pub(crate) async fn add_named(&self, name: &str, opts: &str) -> String {
        let job = NewJob::new(name, "{}", opts, bullmq_backend::now_ms());
        match self.queue.add(&job).await.unwrap() {
            AddResult::Id(id) => id,
            other => panic!("{other:?}"),
        }
    }
}
