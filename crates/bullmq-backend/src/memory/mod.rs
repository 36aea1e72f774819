//! [`MemoryBackend`]: the whole seam in one process, with the Redis backend's semantics.
//!
//! Every queue is held as the Redis backend holds it (lists, sorted sets, job hashes of text
//! fields, locks with expiry, the meta hash, an event log), and every operation follows the
//! Lua script the Redis backend runs for it, so a test written against this backend observes
//! what it would observe against Redis: the same states, orders, counters, event names and
//! fields. One backend holds any number of queues (keyed by prefix and name) behind one
//! `std::sync::Mutex`, never held across an await: each call is one atomic step, as a script
//! is. Blocking calls (`EventStream::read`, `WorkerStore::wait_for_job`) wait on a
//! `tokio::sync::Notify` outside the lock.
//!
//! What it covers, as the scripts do: the states (wait, active, prioritized with the priority
//! counter, delayed with its per-millisecond sequence, completed, failed, waiting-children),
//! LIFO, custom ids (`duplicated`, the id counter moving on every add), deduplication (`de`:
//! plain window, ttl, extend, replace, reschedule, keepLastIfActive, released when its job
//! completes, fails for good or is removed), promotion of due delayed jobs on fetch, attempts
//! started (`ats`) and made (`atm`), retries (to wait, front with lifo, prioritized) and
//! backoff (to delayed), final failures with `retries-exhausted`, lock tokens with expiry and
//! their checks on finish, lock renewal, stalled recovery (`stc`, the deferred failure `defa`
//! past `max_stalled_count`, once per interval), retention by count and age, the per-minute
//! metrics, pause/resume, a running job's own moves (to waiting-children while children are
//! pending, back to wait ahead of its priority), the worker limiter and `RateLimit`, global concurrency and the
//! global limiter when the meta holds them (`concurrency`, `max`/`duration`), flow children
//! (parent must exist, pending children block completion, parent policies on failure, removal
//! with children), job logs with keep, progress, data, drain, clean, obliterate, remove, the
//! event log with the scripts' event names and fields, and `drained`. Job schedulers are held
//! as Redis holds them (the `repeat` sorted set of next runs and a `repeat:{id}` hash per
//! scheduler, their iterations `repeat:{id}:{millis}` as other jobs with `rjk`): upsert with
//! the replacement of a pending iteration and the `every` slot walk, the next iteration a
//! worker creates (only from the scheduler's current iteration), reads, counts and removal;
//! the admin calls keep a scheduler's pending iteration (remove refuses it, drain and clean
//! skip it), obliterate deletes the schedulers, and a stalled iteration is never failed for
//! stalling.
//!
//! What differs from Redis: the event log is trimmed to exactly `opts.maxLenEvents` (Redis trims
//! approximately, whole stream nodes at a time, so it keeps somewhat more); `wait_for_job`
//! sleeps until the earliest delayed job is due and then returns `true` (Redis' marker carries
//! that time for the worker to wait on); the legacy `paused` list does not exist here (nothing
//! in the seam creates it), so an upsert on a paused queue leaves a waiting iteration in
//! place, as Node's script (which looks for it in that list) does; records cannot be
//! corrupted through the seam, so the corrupted-record paths (`Fetched::corrupted`,
//! `FinishCode::Corrupted`) are never taken; there is no
//! connection to lose (`connection_changes` is `None`, `reconnect` does nothing); there are no
//! connections to list either, so `list_workers` lists the worker stores the backend has open
//! (each registered when opened and forgotten when closed or dropped, `addr` `memory`,
//! `raw_name` the name Node would give that worker's connection) and `list_queues` the queues
//! any call has touched under the namespace. Where Redis'
//! order is a hash set's (the children a removal visits, the jobs one stalled check recovers),
//! this backend takes ids in sorted order.
//!
//! Time is read from the backend's clock, [`crate::now_ms`] unless [`MemoryBackend::with_clock`]
//! says otherwise; lock, limiter and deduplication expiries are compared with it when read.
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")] async fn main() {
//! use bullmq_backend::memory::MemoryBackend;
//! use bullmq_backend::{AddResult, Backend, NewJob};
//! use bullmq_protocol::{JobState, QueueId};
//!
//! let backend = MemoryBackend::new();
//! let queue = backend.queue_store(&QueueId::new("bull", "emails")).await.unwrap();
//! let added = queue.add(&NewJob::new("send", "{}", "{}", bullmq_backend::now_ms())).await.unwrap();
//! assert_eq!(added, AddResult::Id("1".into()));
//! assert_eq!(queue.get_state("1").await.unwrap(), JobState::Waiting);
//! # }
//! ```

mod add;
mod admin;
mod events;
mod fetch;
mod finish;
mod flow;
mod flow_add;
mod job_control;
mod locks;
mod maintenance;
mod queue_control;
mod queue_state;
mod schedulers;
mod sets;
mod steps;
mod stores;
#[cfg(test)]
mod tests;
mod workers;

use std::collections::HashMap;
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex, MutexGuard};

use async_trait::async_trait;
use bullmq_protocol::QueueId;

use crate::backend::{Backend, WorkerStoreOptions};
use crate::capability::{BackendName, Capabilities};
use crate::error::BackendResult;
use crate::events::{EventPublisher, EventStream};
use crate::flow_store::FlowStore;
use crate::queue::QueueStore;
use crate::worker::WorkerStore;
use queue_state::{QueueState, Signals};

/// The clock a [`MemoryBackend`] reads: ms since the Unix epoch.
pub type Clock = Arc<dyn Fn() -> u64 + Send + Sync>;

/// An in-memory backend: every queue of every store it opens lives in this value (clones
/// share it). See the [module docs](self).
#[derive(Clone)]
pub struct MemoryBackend {
    world: Arc<World>,
}

impl std::fmt::Debug for MemoryBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let queues = self.world.lock().queues.len();
        f.debug_struct("MemoryBackend")
            .field("queues", &queues)
            .finish()
    }
}

impl Default for MemoryBackend {
    fn default() -> Self {
        Self::new()
    }
}

impl MemoryBackend {
    /// An empty backend on the system clock.
    pub fn new() -> Self {
        Self::with_clock(Arc::new(crate::now_ms))
    }

    /// An empty backend reading time from `clock` (ms since the Unix epoch), for tests that
    /// drive expiries by hand.
    pub fn with_clock(clock: Clock) -> Self {
        Self {
            world: Arc::new(World {
                queues: Mutex::new(Queues::default()),
                workers: Mutex::new(workers::Registry::default()),
                clock,
            }),
        }
    }

    /// Names (`{prefix}:{queue}`) of the queues this backend holds, sorted. A queue exists here
    /// once any call touched it (as a Redis key springs into being), until it is obliterated.
    pub fn queue_names(&self) -> Vec<String> {
        let mut names: Vec<String> = self
            .world
            .lock()
            .queues
            .keys()
            .map(|base| base.trim_end_matches(':').to_owned())
            .collect();
        names.sort();
        names
    }
}

impl BackendName for MemoryBackend {
    fn backend_name(&self) -> &'static str {
        NAME
    }
}

/// The memory backend's [`BackendName::backend_name`].
pub(crate) const NAME: &str = "memory";

#[async_trait]
impl Backend for MemoryBackend {
    async fn queue_store(&self, queue: &QueueId) -> BackendResult<Arc<dyn QueueStore>> {
        let queue = &queue.keys();
        Ok(Arc::new(stores::MemoryQueueStore {
            world: self.world.clone(),
            base: queue.base().to_owned(),
            name: queue.name().to_owned(),
            closed: AtomicBool::new(false),
        }))
    }

    async fn worker_store(
        &self,
        queue: &QueueId,
        options: &WorkerStoreOptions,
    ) -> BackendResult<Arc<dyn WorkerStore>> {
        Ok(Arc::new(stores::MemoryWorkerStore::new(
            self.world.clone(),
            &queue.keys(),
            options.clone(),
        )))
    }

    async fn event_stream(&self, queue: &QueueId) -> BackendResult<Arc<dyn EventStream>> {
        let queue = &queue.keys();
        Ok(Arc::new(events::MemoryEventStream {
            world: self.world.clone(),
            base: queue.base().to_owned(),
            closed: AtomicBool::new(false),
        }))
    }

    async fn event_publisher(&self, queue: &QueueId) -> BackendResult<Arc<dyn EventPublisher>> {
        let queue = &queue.keys();
        Ok(Arc::new(events::MemoryEventPublisher {
            world: self.world.clone(),
            base: queue.base().to_owned(),
            closed: AtomicBool::new(false),
        }))
    }

    async fn flow_store(&self) -> BackendResult<Arc<dyn FlowStore>> {
        Ok(Arc::new(flow_add::MemoryFlowStore {
            world: self.world.clone(),
            closed: AtomicBool::new(false),
        }))
    }

    /// The queues this backend holds under `namespace` (see [`MemoryBackend::queue_names`]):
    /// those whose qualified name starts with `{namespace}:` (as Redis' `SCAN`, so namespace
    /// `a` also lists queue `b:c` of namespace `a:b`).
    async fn list_queues(&self, namespace: &str) -> BackendResult<Vec<QueueId>> {
        let head = format!("{namespace}:");
        Ok(self
            .queue_names()
            .iter()
            .filter_map(|name| name.strip_prefix(&head))
            .map(|name| QueueId::new(namespace, name))
            .collect())
    }

    /// Everything: the memory backend implements the whole seam (its worker listing lists the
    /// worker stores it has open).
    fn capabilities(&self) -> Capabilities {
        Capabilities::all()
    }
}

/// Every queue of one backend, its open worker stores, and its clock.
pub(crate) struct World {
    queues: Mutex<Queues>,
    workers: Mutex<workers::Registry>,
    clock: Clock,
}

impl std::fmt::Debug for World {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("World").finish_non_exhaustive()
    }
}

/// The queues, by base (`{prefix}:{queue}:`), and their wake-ups.
#[derive(Debug, Default)]
pub(crate) struct Queues {
    queues: HashMap<String, QueueState>,
    signals: HashMap<String, Arc<Signals>>,
}

impl Queues {
    /// The queue at `base`, created empty on first touch (as Redis keys spring into being).
    pub(crate) fn queue(&mut self, base: &str) -> &mut QueueState {
        if !self.queues.contains_key(base) {
            let signals = self.signals.entry(base.to_owned()).or_default().clone();
            self.queues
                .insert(base.to_owned(), QueueState::new(base.to_owned(), signals));
        }
        self.queues.get_mut(base).expect("inserted above")
    }

    /// The queue at `base` when it exists.
    pub(crate) fn existing(&mut self, base: &str) -> Option<&mut QueueState> {
        self.queues.get_mut(base)
    }

    /// Whether the job hash `job_key` (`{prefix}:{queue}:{id}`) exists.
    pub(crate) fn job_exists(&self, job_key: &str) -> bool {
        queue_state::split_job_key(job_key).is_some_and(|(base, id)| {
            self.queues
                .get(base)
                .is_some_and(|q| q.jobs.contains_key(id))
        })
    }

    /// Forgets a queue's state (its wake-ups stay, for readers still waiting on them).
    pub(crate) fn drop_queue(&mut self, base: &str) {
        self.queues.remove(base);
    }
}

impl World {
    fn lock(&self) -> MutexGuard<'_, Queues> {
        // A panic while the lock was held leaves a queue mid-update; the data is still
        // structurally valid, and tests see the panic itself.
        self.queues.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The registry of open worker stores (a lock of its own, never held with the queues').
    pub(crate) fn workers(&self) -> MutexGuard<'_, workers::Registry> {
        self.workers.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The current time of this backend's clock.
    pub(crate) fn now(&self) -> u64 {
        (self.clock)()
    }

    /// Runs `f` on the queue at `base` (created on first touch), atomically.
    pub(crate) fn with_queue<T>(
        &self,
        base: &str,
        f: impl FnOnce(&mut QueueState, u64) -> BackendResult<T>,
    ) -> BackendResult<T> {
        let now = self.now();
        let mut queues = self.lock();
        f(queues.queue(base), now)
    }

    /// Runs `f` on every queue, atomically (flows reach into other queues).
    pub(crate) fn with_queues<T>(
        &self,
        f: impl FnOnce(&mut Queues, u64) -> BackendResult<T>,
    ) -> BackendResult<T> {
        let now = self.now();
        let mut queues = self.lock();
        f(&mut queues, now)
    }

    /// The wake-ups of the queue at `base`.
    pub(crate) fn signals(&self, base: &str) -> Arc<Signals> {
        self.lock()
            .signals
            .entry(base.to_owned())
            .or_default()
            .clone()
    }
}
