//! BullMQ-compatible job queues for Rust, with workers supervised as `ractor` actors.
//!
//! Jobs live in Redis in exactly the layout Node BullMQ 6.7.0 uses, so Node producers can feed
//! Rust workers and the other way round. Everything that touches storage goes through the
//! backend seam of [`bullmq_backend`], so the same Queue, Worker, QueueEvents and Runtime also
//! run on its in-memory backend (feature `memory` of that crate), e.g. in tests. Flows — trees
//! of jobs across queues — are added with [`flow::FlowProducer`].

pub mod error;
pub mod events;
pub mod flow;
pub mod job;
pub mod job_wait;
pub mod manager;
mod outage;
pub mod queue;
pub mod runtime;
pub mod store;
pub mod supervision;
pub mod telemetry;
#[cfg(feature = "test-util")]
pub mod testing;
pub mod worker;

pub use bullmq_backend::GlobalRateLimit;
/// A flow parent's children (`Queue::get_dependencies`, `Job::get_dependencies`): by outcome,
/// their counts, one page of one kind.
pub use bullmq_backend::{DependencyCounts, DependencyKind};
/// Job control options: which finished set a retry takes from, what it resets (see
/// [`Queue::retry_job`]).
pub use bullmq_backend::{RetryFrom, RetryReset};
pub use bullmq_protocol as protocol;
/// Job schedulers: [`Repeat`], [`SchedulerTemplate`],
/// the stored [`JobSchedulerRecord`](scheduler::JobSchedulerRecord) (see
/// [`Queue::upsert_job_scheduler`]).
pub use bullmq_protocol::scheduler;
/// A job scheduler's iteration template and repeat options (also under [`scheduler`]).
pub use bullmq_protocol::scheduler::{Repeat, SchedulerTemplate};
/// Where and how to connect: one server, a cluster or Sentinel, and TLS (the nodes of a
/// topology are [`bullmq_redis::Node`]s).
pub use bullmq_redis::{ConnectionConfig, Reconnect, TlsOptions, Topology};
pub use error::QueueError;
pub use events::{
    QueueEvent, QueueEvents, QueueEventsArgs, QueueEventsError, QueueEventsHandle,
    QueueEventsHandler, QueueEventsMsg, QueueEventsOptions, QueueEventsProducer,
};
pub use flow::{FlowError, FlowJob, FlowProducer, FlowProducerOptions, JobNode};
pub use job::Job;
pub use job_wait::{JobFinished, WaitError};
pub use manager::{Autoscale, WorkerManagerHandle, WorkerManagerOptions};
pub use queue::{
    AddJob, CleanOptions, JobCounts, JobLogs, JobSchedulersRange, ObliterateOptions,
    PromoteJobsOptions, Queue, QueueMeta, QueueOptions, RateLimitTtl, RemoveOptions,
    RetryJobsOptions, WorkerInfo,
};
pub use queue::{Dependencies, DependencyPage};
pub use runtime::{Runtime, RuntimeOptions};
pub use supervision::RuntimeEvent;
pub use telemetry::{Metrics, MetricsKind};
pub use worker::{
    DelayedError, JobContext, ManualError, ManualJob, ManualWorker, RateLimitError,
    SupervisedWorker, UnrecoverableError, WaitingChildrenError, WaitingError, Worker, WorkerArgs,
    WorkerCallbacks, WorkerHandle, WorkerOptions,
};
