//! The Worker actor, its LockManager and its jobs.
//!
//! A [`Worker`] consumes one queue with `concurrency` slots: it fetches jobs in batches (one
//! script call moves up to its free slots of jobs to active), runs each with the user's
//! [`Processor`] on a task it supervises (or a linked job actor, see [`JobRunner`]), keeps their locks alive through a linked LockManager, and
//! records finished jobs in batches whose round trip also fetches the next jobs. An idle worker
//! blocks on `BZPOPMIN marker` on a connection of its own.
//!
//! ```no_run
//! use ractor_bullmq::worker::{Job, JobContext, Worker, WorkerArgs, WorkerOptions};
//! use ractor_bullmq::ConnectionConfig;
//!
//! # async fn demo() -> anyhow::Result<()> {
//! let config = ConnectionConfig::from_env()?;
//! let processor = |job: Job, ctx: JobContext| async move {
//!     ctx.update_progress(50).await?;
//!     Ok(serde_json::json!({ "echo": job.data_value() }))
//! };
//! let args = WorkerArgs::connect(&config, "emails", processor, WorkerOptions::new().concurrency(10)).await?;
//! let worker = Worker::spawn(args).await?;
//! // ... later
//! let report = worker.close().await?;
//! # Ok(()) }
//! ```

mod callbacks;
mod close;
mod context;
mod dispatcher;
mod errors;
mod fetched;
mod handle;
mod health;
mod job_actor;
mod job_runner;
mod lock_manager;
mod manual;
mod options;
mod outcome;
mod scheduling;
mod settle;
mod spec;
mod start;
mod supervised;
mod watchdog;
#[allow(clippy::module_inception)]
mod worker;

use std::future::Future;

use futures::future::BoxFuture;
use serde_json::Value;

pub use callbacks::{FailedJob, WorkerCallbacks};
pub use context::JobContext;
pub use errors::{
    DelayedError, RateLimitError, UnrecoverableError, WaitingChildrenError, WaitingError,
    WorkerError,
};
pub use handle::WorkerHandle;
pub use job_actor::JobActorMsg;
pub use job_runner::JobRunner;
pub use lock_manager::{LockManager, LockManagerArgs, LockManagerMsg, LockManagerState};
pub use manual::{ManualError, ManualJob, ManualWorker};
pub use options::{
    BackoffStrategy, Limiter, WorkerOptions, DEFAULT_CANCEL_GRACE, DEFAULT_PROGRESS_TIMEOUT,
};
pub use outcome::{CancelReason, JobOutcome};
pub(crate) use spec::ForceDeadline;
pub use spec::{WorkerSpec, DEFAULT_WORKER_SHUTDOWN};
pub use supervised::SupervisedWorker;
pub use worker::{CloseReport, Internal, Worker, WorkerArgs, WorkerMsg};

pub use crate::job::Job;

// The testing module runs processors exactly as the worker does.
#[cfg(feature = "test-util")]
pub(crate) use context::AttemptLimits;
#[cfg(feature = "test-util")]
pub(crate) use job_actor::run as run_job;
#[cfg(feature = "test-util")]
pub(crate) use outcome::classify;

/// Processes one job. Implemented for every `Fn(Job, JobContext) -> impl Future<Output =
/// anyhow::Result<Value>>` closure, so an `async` closure or function is a processor.
///
/// Return `Ok(value)` to complete the job with `returnvalue` = `value`; an error fails the
/// attempt (retried per the job's `attempts` / `backoff`), except [`UnrecoverableError`]
/// (fail now), [`DelayedError`] (delay the job), [`RateLimitError`] (rate-limit the queue),
/// and [`WaitingChildrenError`] / [`WaitingError`] after the processor moved its job itself
/// with [`JobContext::move_to_waiting_children`] / [`JobContext::move_to_wait`] (step jobs).
/// A panic fails the attempt with the panic message.
pub trait Processor: Send + Sync + 'static {
    /// Runs the job.
    fn process(&self, job: Job, context: JobContext) -> BoxFuture<'static, anyhow::Result<Value>>;
}

impl<F, Fut> Processor for F
where
    F: Fn(Job, JobContext) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = anyhow::Result<Value>> + Send + 'static,
{
    fn process(&self, job: Job, context: JobContext) -> BoxFuture<'static, anyhow::Result<Value>> {
        Box::pin(self(job, context))
    }
}
