//! The storage seam of ractor-bullmq, in backend-neutral terms.
//!
//! The actors (Worker, QueueEvents) and the handles (Queue, QueueEventsProducer) never talk to
//! Redis: they talk to the small traits of this crate, each one capability:
//!
//! | trait | what | used by |
//! |---|---|---|
//! | [`Producer`] | add one job, add many atomically | `Queue::add`, `add_bulk` |
//! | [`QueueAdmin`] | counts, ranges, state, jobs, logs, meta, pause, drain, clean, obliterate, remove, metrics | `Queue` getters and admin, `wait_until_finished`, the autoscaler |
//! | [`QueueStore`] | all of the queue's traits, plus listing the queue's workers | `Queue` |
//! | [`JobUpdates`] | progress, log, data of one job | `Queue`, a running job's context |
//! | [`JobFlows`] | a flow parent's children by outcome, and their counts | `Queue`, a running job's context |
//! | [`FlowStore`] | add a whole flow (a tree of jobs across queues) atomically, read it back node by node | `FlowProducer` |
//! | [`JobControl`] | retry a finished job, promote a delayed one (one by one or in batches), change priority or delay, renew a lock | `Queue` job control |
//! | [`QueueMaintenance`] | delayed count before a time, deprecated keys, scheduler check, job-owned dedup key, a parent's pending children, orphaned jobs | `Queue` and `Job` upkeep |
//! | [`JobSchedulers`] | upsert, next iteration, read, count, remove job schedulers | `Queue` scheduler API, the CLI |
//! | [`WorkerStore`] | fetch, finish (+ fetch), locks, stalled check, wait for work, next scheduler iteration, a running job's own moves (to waiting-children, back to wait) | the Worker, its LockManager, a running job's context |
//! | [`EventStream`] / [`EventPublisher`] | read the event log from a cursor, publish | QueueEvents, QueueEventsProducer |
//! | [`Backend`] | opens all of the above for a queue; lists the queues of a namespace | `Runtime`, `WorkerSpec`, `Queue::with_backend`, the CLI |
//!
//! Beyond a required core, every method is optional: its default body declines with
//! [`BackendError::Unsupported`] naming its [`Capability`] and the store's [`BackendName`], and
//! [`Backend::capabilities`] says which capabilities a backend offers (see [`capability`] for
//! the core and the groups).
//!
//! Queues are named by [`QueueId`] (namespace and name), never by a backend's key names.
//! Values cross the seam as job records ([`JobRecord`]), not as a backend's encoding;
//! optimisations a backend makes (the Redis backend's hints to its scripts, its lock-token
//! sequences) stay inside it, carried opaquely as a [`Receipt`] where the worker must hand
//! them back.
//!
//! Backends: `bullmq_redis::RedisBackend` (Node BullMQ's exact Redis layout), and, behind the
//! `memory` feature, [`memory::MemoryBackend`] — the whole seam in one process, for tests of
//! real Workers without Redis. The `conformance` feature holds the behaviour suite every
//! backend must pass ([`conformance`]).

mod backend;
pub mod capability;
mod error;
pub mod events;
pub mod flow_store;
pub mod flows;
pub mod job_control;
pub mod maintenance;
pub mod metrics;
pub mod queue;
pub mod queue_control;
pub mod schedulers;
pub mod worker;

#[cfg(feature = "conformance")]
pub mod conformance;
#[cfg(feature = "memory")]
pub mod memory;

use std::sync::Arc;

pub use backend::{Backend, WorkerStoreOptions};
pub use bullmq_protocol::{JobRecord, JobRef, QueueId};
pub use capability::{BackendName, Capabilities, Capability};
pub use error::{BackendError, BackendResult, BoxError};
pub use events::{EventEntry, EventPublisher, EventStream};
pub use flow_store::{FlowAdded, FlowNodeInsert, FlowNodeRead, FlowRefusal, FlowStore};
pub use flows::{Dependencies, DependencyCounts, DependencyKind, DependencyPage, JobFlows};
pub use job_control::{ControlOutcome, JobControl, LockOutcome, RetryFrom, RetryReset};
pub use maintenance::{ChildDependency, QueueMaintenance};
pub use metrics::{Metrics, MetricsKind, MetricsMeta};
pub use queue::{
    AddResult, JobEnd, NewJob, ObliterateStep, ParentFlags, ParentLink, Producer, QueueAdmin,
    QueueStore, RemoveOutcome, WorkerInfo,
};
pub use queue_control::{GlobalRateLimit, QueueControl};
pub use schedulers::{JobSchedulers, NextIteration, UpsertOutcome};
pub use worker::{
    ChildRef, CorruptedJob, FetchRequest, Fetched, FetchedJob, Finish, FinishAction, FinishCode,
    FinishReply, JobUpdates, MoveToWaitOutcome, Receipt, Retention, StalledReport,
    WaitingChildrenOutcome, WorkerStore,
};

/// A change of a store's connection.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum ConnectionChange {
    /// The connection dropped or a reconnect failed. A store may send it more than once per
    /// outage; listeners report only the first of an outage.
    Lost(Arc<dyn std::error::Error + Send + Sync>),
    /// The connection works again.
    Restored,
}

/// Milliseconds since the Unix epoch, the clock of every BullMQ timestamp.
pub fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
        .unwrap_or_default()
}
