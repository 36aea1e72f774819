//! [`WorkerSpec`]: how a supervisor starts, restarts and stops one Worker (the Worker's child
//! spec, as [`QueueEventsArgs::child_spec`](crate::events::QueueEventsArgs::child_spec) is the
//! QueueEvents'). [`SupervisedWorker`](super::SupervisedWorker) is the handle on the result.
//!
//! # Supervision
//!
//! Every (re)start connects a fresh [`WorkerArgs`] (new connections) and spawns a [`Worker`]
//! linked to the supervisor, so a restarted Worker also starts a fresh LockManager. Stopping
//! the child (terminate, scale down, Runtime shutdown) closes the Worker: it stops fetching and
//! lets its active jobs finish within the budget, then cancels what still runs (those jobs are
//! left to stalled recovery).

use std::sync::{Arc, Mutex};
use std::time::Duration;

use ractor::{Actor, ActorCell, ActorRef, SpawnErr};
use tokio::time::Instant;

use super::callbacks::WorkerCallbacks;
use super::close::{close_in_two_steps, CloseOutcome};
use super::options::WorkerOptions;
use super::worker::{Worker, WorkerArgs, WorkerMsg};
use super::Processor;
use crate::supervision::{ChildSpec, Restart, SupervisionError};
use crate::ConnectionConfig;
use bullmq_backend::Backend;
use bullmq_redis::RedisBackend;

/// Default time a supervised Worker gets to finish its active jobs when it is stopped.
pub const DEFAULT_WORKER_SHUTDOWN: Duration = Duration::from_secs(30);

/// Part of a graceful budget kept for the forced close that follows it (at most 2 s).
const FORCE_RESERVE_MAX: Duration = Duration::from_secs(2);

/// A moment after which supervised Workers no longer wait for their jobs, and the moment by
/// which their forced close must be over (the Runtime sets both at shutdown so a bounded
/// shutdown cancels what is left instead of being killed). Shared by every spec cloned from one
/// Runtime.
#[derive(Debug, Clone, Default)]
pub(crate) struct ForceDeadline(Arc<Mutex<Option<(Instant, Instant)>>>);

impl ForceDeadline {
    /// Force at `at`, be closed by `end`.
    pub(crate) fn set(&self, at: Instant, end: Instant) {
        if let Ok(mut slot) = self.0.lock() {
            *slot = Some((at, end));
        }
    }

    fn get(&self) -> Option<(Instant, Instant)> {
        self.0.lock().ok().and_then(|slot| *slot)
    }
}

/// What a forced close under a shutdown deadline leaves the supervisors above it to stop.
const STOP_MARGIN: Duration = Duration::from_millis(300);

/// How a supervisor starts, restarts and stops one Worker.
///
/// # Examples
///
/// ```no_run
/// use ractor_bullmq::supervision::{DynamicSupervisor, SupervisorOptions};
/// use ractor_bullmq::worker::{Job, JobContext, WorkerOptions, WorkerSpec};
/// use ractor_bullmq::ConnectionConfig;
///
/// # async fn demo() -> anyhow::Result<()> {
/// let (workers, _) = DynamicSupervisor::spawn(None, SupervisorOptions::default()).await?;
/// let spec = WorkerSpec::new(
///     ConnectionConfig::from_env()?,
///     "emails",
///     |job: Job, _ctx: JobContext| async move { Ok(job.data_value().clone()) },
///     WorkerOptions::new().concurrency(10),
/// );
/// workers.start_child(spec.child_spec("emails#1")).await?;
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct WorkerSpec {
    backend: Arc<dyn Backend>,
    queue: String,
    processor: Arc<dyn Processor>,
    options: WorkerOptions,
    callbacks: WorkerCallbacks,
    shutdown: Duration,
    restart: Restart,
    force_at: ForceDeadline,
}

impl std::fmt::Debug for WorkerSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WorkerSpec")
            .field("queue", &self.queue)
            .field("options", &self.options)
            .field("shutdown", &self.shutdown)
            .field("restart", &self.restart)
            .finish_non_exhaustive()
    }
}

impl WorkerSpec {
    /// Workers consuming `queue` on the Redis at `connection` with `processor` and `options`;
    /// no callbacks, [`Restart::Permanent`], [`DEFAULT_WORKER_SHUTDOWN`].
    pub fn new(
        connection: ConnectionConfig,
        queue: impl Into<String>,
        processor: impl Processor,
        options: WorkerOptions,
    ) -> Self {
        Self::with_shared_processor(connection, queue, Arc::new(processor), options)
    }

    /// As [`WorkerSpec::new`] with a processor already shared (several specs, one processor).
    pub fn with_shared_processor(
        connection: ConnectionConfig,
        queue: impl Into<String>,
        processor: Arc<dyn Processor>,
        options: WorkerOptions,
    ) -> Self {
        Self::on_backend(
            Arc::new(RedisBackend::new(connection)),
            queue,
            processor,
            options,
        )
    }

    /// Workers consuming `queue` on `backend`: every (re)start opens fresh stores from it.
    pub fn on_backend(
        backend: Arc<dyn Backend>,
        queue: impl Into<String>,
        processor: Arc<dyn Processor>,
        options: WorkerOptions,
    ) -> Self {
        Self {
            backend,
            queue: queue.into(),
            processor,
            options,
            callbacks: WorkerCallbacks::default(),
            shutdown: DEFAULT_WORKER_SHUTDOWN,
            restart: Restart::Permanent,
            force_at: ForceDeadline::default(),
        }
    }

    /// Sets the callbacks every incarnation gets.
    #[must_use]
    pub fn callbacks(mut self, callbacks: WorkerCallbacks) -> Self {
        self.callbacks = callbacks;
        self
    }

    /// Sets how long a stopped Worker may spend finishing its active jobs (default 30 s);
    /// after it, running jobs are cancelled and left to stalled recovery.
    #[must_use]
    pub fn shutdown(mut self, shutdown: Duration) -> Self {
        self.shutdown = shutdown;
        self
    }

    /// Sets the restart policy (default [`Restart::Permanent`]).
    #[must_use]
    pub fn restart(mut self, restart: Restart) -> Self {
        self.restart = restart;
        self
    }

    pub(crate) fn force_deadline(mut self, force_at: ForceDeadline) -> Self {
        self.force_at = force_at;
        self
    }

    /// The backend the Workers open their stores on.
    pub fn backend(&self) -> &Arc<dyn Backend> {
        &self.backend
    }

    /// The queue name.
    pub fn queue(&self) -> &str {
        &self.queue
    }

    /// The worker options.
    pub fn options(&self) -> &WorkerOptions {
        &self.options
    }

    /// Checks the options without starting anything.
    ///
    /// # Errors
    ///
    /// [`SupervisionError::InvalidOption`] naming the bad option.
    pub fn validate(&self) -> Result<(), SupervisionError> {
        self.options
            .validate()
            .map_err(SupervisionError::invalid_option)
    }

    /// Connects and spawns one Worker linked to `supervisor`.
    ///
    /// # Errors
    ///
    /// `SpawnErr::StartupFailed` when Redis cannot be reached or the options are invalid.
    pub async fn spawn_linked(
        &self,
        supervisor: ActorCell,
    ) -> Result<ActorRef<WorkerMsg>, SpawnErr> {
        let args = WorkerArgs::open_shared(
            self.backend.as_ref(),
            &self.queue,
            self.processor.clone(),
            self.options.clone(),
        )
        .await
        .map_err(|e| SpawnErr::StartupFailed(Box::new(e)))?
        .callbacks(self.callbacks.clone());
        let (actor, _) = Actor::spawn_linked(None, Worker, args, supervisor).await?;
        Ok(actor)
    }

    /// The child spec of child `id`: every (re)start runs [`WorkerSpec::spawn_linked`]; every
    /// stop closes the Worker gracefully within the budget, then forcibly.
    pub fn child_spec(&self, id: impl Into<String>) -> ChildSpec {
        let start = self.clone();
        let force_at = self.force_at.clone();
        ChildSpec::new(id, move |supervisor| {
            let spec = start.clone();
            async move { Ok(spec.spawn_linked(supervisor).await?.get_cell()) }
        })
        .restart(self.restart)
        // The supervisor's own bound: graceful budget, the forced close, and a margin to stop.
        .shutdown(self.shutdown + FORCE_RESERVE_MAX)
        .graceful_stop(move |cell, budget| {
            let deadlines = force_at.get();
            async move { close_worker(cell.into(), budget, deadlines).await }
        })
    }
}

/// Closes a Worker: gracefully for most of `budget` (or until the shutdown deadline), then
/// forcibly, within what is left of the budget and of the shutdown. A zero budget is a forced
/// close at once.
async fn close_worker(
    worker: ActorRef<WorkerMsg>,
    budget: Duration,
    deadlines: Option<(Instant, Instant)>,
) {
    let reserve = (budget / 5).min(FORCE_RESERVE_MAX);
    let mut graceful = budget.saturating_sub(reserve);
    if let Some((at, _)) = deadlines {
        graceful = graceful.min(at.saturating_duration_since(Instant::now()));
    }
    // The Worker answers within its grace even with Redis unresponsive, so the supervisor need
    // not kill it (a kill would lose the report).
    let grace = || {
        let mut grace = reserve.max(Duration::from_millis(500));
        if let Some((_, end)) = deadlines {
            let left = end.saturating_duration_since(Instant::now());
            grace = grace.min(left.saturating_sub(STOP_MARGIN));
        }
        grace
    };
    if let CloseOutcome::Closed(report) =
        close_in_two_steps(&worker, graceful, grace, Duration::from_millis(500)).await
    {
        log_left_behind(&worker, &report);
    }
}

/// Says which jobs a supervised Worker's close left for stalled recovery (no caller receives
/// its [`CloseReport`](super::CloseReport)).
fn log_left_behind(worker: &ActorRef<WorkerMsg>, report: &super::CloseReport) {
    if !report.left_for_stalled_recovery.is_empty() {
        tracing::warn!(worker = %worker.get_id(), jobs = ?report.left_for_stalled_recovery,
            "closed worker left jobs for stalled recovery");
    }
}
