//! The Worker actor: one consumer of one queue.
//!
//! It owns the queue's slots: fetches jobs in batches into free slots, starts one linked job
//! actor per job, has its linked LockManager renew their locks, and records finished jobs in
//! batches whose round trip also fetches the next jobs. At most one fetch-or-finish call is in
//! flight; finishes reported meanwhile accumulate into the next batch, which is how batching
//! happens under load without any timer. When a fetch leaves slots empty, a task blocks on the
//! queue's marker (dedicated connection) and wakes the worker; Redis errors are retried with
//! backoff, never in a busy loop.
//!
//! # Supervision
//!
//! A job actor dying without reporting (it cannot: panics are caught) would be recorded as a
//! panicked job. The LockManager dying stops the Worker (with an error), so its supervisor
//! restarts it; jobs it held return through stalled recovery. A Worker that crashes leaves its
//! jobs locked until their locks expire; any worker's stalled check then recovers them.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Instant;

use ractor::{Actor, ActorId, ActorProcessingErr, ActorRef, RpcReplyPort, SupervisionEvent};
use tokio::task::JoinHandle;

use super::callbacks::WorkerCallbacks;
use super::context::JobContext;
use super::errors::WorkerError;
use super::lock_manager::{LockManager, LockManagerArgs, LockManagerMsg};
use super::options::WorkerOptions;
use super::outcome::{Ended, JobOutcome};
use super::{Job, Processor};
use crate::store::{
    Fetched, Finish, FinishReply, StalledReport, Store, StoreError, StoreResult, Traced,
};
use crate::{telemetry, ConnectionConfig};
use bullmq_backend::{Backend, WorkerStoreOptions};
use bullmq_protocol::keys::QueueKeys;
use bullmq_redis::RedisBackend;

/// Messages of the Worker.
#[derive(Debug)]
pub enum WorkerMsg {
    /// Stop fetching new jobs (running jobs continue).
    Pause,
    /// Fetch again after [`WorkerMsg::Pause`].
    Resume,
    /// Start fetching (for a worker spawned with `autorun = false`).
    Run,
    /// Fetch one job now, if a slot is free, and start processing it; replies with its id.
    GetNextJob(RpcReplyPort<Option<String>>),
    /// Close: stop fetching, finish (or with `force`, cancel) running jobs, flush, stop.
    Close {
        /// Cancel running jobs instead of waiting for them.
        force: bool,
        /// Answered when the worker has stopped.
        reply: RpcReplyPort<CloseReport>,
    },
    /// How many jobs are running.
    ActiveCount(RpcReplyPort<usize>),
    /// Whether the worker fetches jobs (started, not paused, not closing).
    IsRunning(RpcReplyPort<bool>),
    /// Messages the worker's own tasks and children send it.
    Internal(Internal),
}

/// What a closed worker leaves behind.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct CloseReport {
    /// Jobs still active in Redis under this worker's (expiring) locks, recovered by the next
    /// stalled check after their locks expire.
    pub left_for_stalled_recovery: Vec<String>,
}

/// An internal message (opaque outside the crate).
#[derive(Debug)]
pub struct Internal(InternalMsg);

impl Internal {
    pub(crate) fn job_ended(job_id: String, ended: Ended) -> Self {
        Self(InternalMsg::JobEnded { job_id, ended })
    }
    pub(crate) fn locks_lost(ids: Vec<String>) -> Self {
        Self(InternalMsg::LocksLost(ids))
    }
    pub(crate) fn store_error(error: StoreError) -> Self {
        Self(InternalMsg::StoreError(error))
    }
}

/// The Worker's messages to itself. Store replies are boxed: every message of the mailbox (one
/// `JobEnded` per job) is as large as the largest variant, and moving large messages costs the
/// worker loop measurably.
#[derive(Debug)]
pub(super) enum InternalMsg {
    Pump,
    /// Sent by the worker to itself: finishes reported before it are in `pending` now, so the
    /// next finish batch collects all of them (batching without a timer).
    Flush,
    Fetched {
        result: Box<StoreResult<Fetched>>,
        requested: u32,
        reply: Option<RpcReplyPort<Option<String>>>,
    },
    Finished {
        result: Box<StoreResult<FinishReply>>,
        batch: Vec<Pending>,
        requested: u32,
    },
    JobEnded {
        job_id: String,
        ended: Ended,
    },
    LocksLost(Vec<String>),
    StoreError(StoreError),
    Woken(StoreResult<bool>),
    StalledTick,
    StalledDone(Box<StoreResult<StalledReport>>),
    /// The store's connection dropped or came back (see `health.rs`).
    Connection(crate::store::ConnectionChange),
    /// A forced close has waited [`super::dispatch::FORCE_CLOSE_GRACE`] for store calls.
    CloseDeadline,
}

pub(super) fn internal(msg: InternalMsg) -> WorkerMsg {
    WorkerMsg::Internal(Internal(msg))
}

/// Start arguments of a Worker. Cloneable so the same processor and options can start several
/// Workers, but the store (and its connections) is shared by the clones and closed when a Worker
/// using it stops; supervisors therefore build fresh arguments for every (re)start, as
/// `WorkerSpec` does.
#[derive(Clone)]
pub struct WorkerArgs {
    store: Arc<dyn Store>,
    processor: Arc<dyn Processor>,
    options: WorkerOptions,
    callbacks: WorkerCallbacks,
}

impl std::fmt::Debug for WorkerArgs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WorkerArgs")
            .field("queue", &self.store.queue_name())
            .field("options", &self.options)
            .finish_non_exhaustive()
    }
}

impl WorkerArgs {
    /// A worker on `store` running `processor`, with default options and no callbacks.
    pub fn new(store: Arc<dyn Store>, processor: impl Processor) -> Self {
        Self {
            store,
            processor: Arc::new(processor),
            options: WorkerOptions::default(),
            callbacks: WorkerCallbacks::default(),
        }
    }

    /// Opens a traced store for `queue` on `backend` (prefix, worker name and metrics from
    /// `options`).
    ///
    /// # Errors
    ///
    /// [`WorkerError::InvalidOption`] for bad options, [`WorkerError::Store`] when the backend
    /// cannot be reached.
    pub async fn open(
        backend: &dyn Backend,
        queue: &str,
        processor: impl Processor,
        options: WorkerOptions,
    ) -> Result<Self, WorkerError> {
        options.validate()?;
        let mut store_options = WorkerStoreOptions::default();
        store_options.worker_name = options.name.clone();
        store_options.metrics_max_points = options.metrics_max_data_points;
        let keys = QueueKeys::new(options.prefix.clone(), queue);
        let store = backend.worker_store(&keys, &store_options).await?;
        Ok(Self::new(Arc::new(Traced(store)), processor).options(options))
    }

    /// Connects a traced Redis store for `queue` (prefix and name from `options`): a shortcut
    /// for [`WorkerArgs::open`] on a [`RedisBackend`].
    ///
    /// # Errors
    ///
    /// [`WorkerError::InvalidOption`] for bad options, [`WorkerError::Store`] when Redis cannot
    /// be reached.
    pub async fn connect(
        config: &ConnectionConfig,
        queue: &str,
        processor: impl Processor,
        options: WorkerOptions,
    ) -> Result<Self, WorkerError> {
        Self::open(
            &RedisBackend::new(config.clone()),
            queue,
            processor,
            options,
        )
        .await
    }

    /// Sets the options.
    #[must_use]
    pub fn options(mut self, options: WorkerOptions) -> Self {
        self.options = options;
        self
    }

    /// Sets the callbacks.
    #[must_use]
    pub fn callbacks(mut self, callbacks: WorkerCallbacks) -> Self {
        self.callbacks = callbacks;
        self
    }
}

pub(super) struct RunningJob {
    pub(super) job: Job,
    pub(super) token: String,
    /// The backend's note from the fetch, handed back with the job's finish.
    pub(super) receipt: crate::store::Receipt,
    pub(super) context: JobContext,
    /// Telemetry guard of the attempt (`bullmq_worker_active_jobs` while it lives).
    pub(super) active: telemetry::ActiveJob,
    /// The job's task ([`JobRunner::Task`](super::JobRunner::Task)), aborted if the Worker
    /// drops it while the job still runs.
    pub(super) _task: Option<super::job_runner::JobTask>,
}

#[derive(Debug)]
pub(super) struct Pending {
    pub(super) finish: Finish,
    pub(super) job: Option<Job>,
    pub(super) outcome: JobOutcome,
    /// How long the attempt ran (zero for jobs failed without running).
    pub(super) duration: std::time::Duration,
}

/// State of a Worker.
pub struct WorkerState {
    pub(super) store: Arc<dyn Store>,
    pub(super) processor: Arc<dyn Processor>,
    pub(super) opts: WorkerOptions,
    pub(super) callbacks: WorkerCallbacks,
    pub(super) lock_manager: Option<ActorRef<LockManagerMsg>>,
    pub(super) running: HashMap<String, RunningJob>,
    pub(super) job_actors: HashMap<ActorId, String>,
    pub(super) pending: Vec<Pending>,
    /// Store calls in flight (fetches and finish batches).
    pub(super) inflight: usize,
    /// Slots promised to jobs that in-flight fetches may bring.
    pub(super) reserved: usize,
    pub(super) waiting: Option<JoinHandle<()>>,
    pub(super) idle: bool,
    pub(super) next_delayed_at: Option<u64>,
    pub(super) limited_until: Option<Instant>,
    pub(super) limit_timer_for: Option<Instant>,
    pub(super) cooldown_until: Option<Instant>,
    pub(super) error_streak: u32,
    pub(super) drained: bool,
    pub(super) started: bool,
    pub(super) paused: bool,
    pub(super) closing: Option<bool>,
    /// The forced close's grace ran out: stop without waiting for store calls in flight
    /// (Redis may be unreachable); their jobs are left to stalled recovery.
    pub(super) abandon_inflight: bool,
    pub(super) close_replies: Vec<RpcReplyPort<CloseReport>>,
    pub(super) left_behind: Vec<String>,
    pub(super) stalled_busy: bool,
    pub(super) timers: Vec<JoinHandle<()>>,
    pub(super) token_prefix: String,
    /// A [`InternalMsg::Flush`] is in the mailbox.
    pub(super) flush_queued: bool,
    /// Handling that flush: send the pending finishes now.
    pub(super) flush_now: bool,
    /// The worker's name in telemetry (`worker` field): its `name` option, else its token
    /// prefix, which is unique per worker.
    pub(super) label: Arc<str>,
    pub(super) started_at: Instant,
    /// `post_stop` closed the store; otherwise dropping the state closes it.
    pub(super) store_closed: bool,
    /// Store trouble, reported once per outage (see `health.rs`).
    pub(super) outage: crate::outage::Outage,
}

impl Drop for WorkerState {
    /// Reached however the Worker ends, also when ractor skips `post_stop` (a handler error, a
    /// panic, a kill, a linked LockManager crash): the marker wait and the timers must not
    /// outlive the Worker, and neither may its connections, whose blocking one keeps the
    /// worker's name (Node's `getWorkers()` would list a dead worker). Other holders of the
    /// store (a fetch still in flight) see their calls fail.
    fn drop(&mut self) {
        for timer in self.timers.drain(..) {
            timer.abort();
        }
        if let Some(waiting) = self.waiting.take() {
            waiting.abort();
        }
        if let Some(lm) = self.lock_manager.take() {
            lm.stop(None);
        }
        if !self.store_closed {
            if let Ok(runtime) = tokio::runtime::Handle::try_current() {
                let store = self.store.clone();
                runtime.spawn(async move { store.close().await });
            }
        }
    }
}

/// The Worker actor: consumes one queue with `concurrency` slots. Spawn it with [`Worker::spawn`], or link it
/// into your own supervision tree with `Actor::spawn_linked(name, Worker, args, supervisor)`.
#[derive(Debug, Clone, Copy, Default)]
pub struct Worker;

impl Worker {
    /// Spawns a worker (unsupervised) and returns its handle.
    ///
    /// # Errors
    ///
    /// [`WorkerError::InvalidOption`] for bad options, [`WorkerError::Spawn`] when the actor
    /// fails to start.
    pub async fn spawn(args: WorkerArgs) -> Result<super::WorkerHandle, WorkerError> {
        args.options.validate()?;
        let (actor, join) = Actor::spawn(None, Worker, args)
            .await
            .map_err(|e| WorkerError::Spawn(e.to_string()))?;
        Ok(super::WorkerHandle::new(actor, join))
    }
}

impl Actor for Worker {
    type Msg = WorkerMsg;
    type State = WorkerState;
    type Arguments = WorkerArgs;

    async fn pre_start(
        &self,
        myself: ActorRef<Self::Msg>,
        args: Self::Arguments,
    ) -> Result<Self::State, ActorProcessingErr> {
        args.options.validate()?;
        let opts = args.options;
        let lock_manager = if opts.skip_lock_renewal {
            None
        } else {
            let lm_args = LockManagerArgs {
                store: args.store.clone(),
                lock_duration: opts.lock_duration,
                renew_time: opts.lock_renew_time(),
                worker: myself.clone(),
            };
            let (lm, _) =
                Actor::spawn_linked(None, LockManager, lm_args, myself.get_cell()).await?;
            Some(lm)
        };
        let mut timers = Vec::new();
        // Aborted with the timers when the Worker ends.
        timers.extend(super::health::watch_store(&*args.store, myself.clone()));
        if !opts.skip_stalled_check {
            myself.cast(internal(InternalMsg::StalledTick))?;
            timers.push(
                myself.send_interval(opts.stalled_interval, || internal(InternalMsg::StalledTick)),
            );
        }
        if opts.autorun {
            myself.cast(internal(InternalMsg::Pump))?;
        }
        let token_prefix = format!(
            "{}-{:016x}",
            opts.name.as_deref().unwrap_or("w"),
            rand::random::<u64>()
        );
        let label: Arc<str> = opts.name.as_deref().unwrap_or(&token_prefix).into();
        telemetry::worker_started(args.store.queue_name(), &label, opts.concurrency);
        Ok(WorkerState {
            store: args.store,
            processor: args.processor,
            callbacks: args.callbacks,
            lock_manager,
            running: HashMap::new(),
            job_actors: HashMap::new(),
            pending: Vec::new(),
            inflight: 0,
            reserved: 0,
            waiting: None,
            idle: false,
            next_delayed_at: None,
            limited_until: None,
            limit_timer_for: None,
            cooldown_until: None,
            error_streak: 0,
            drained: false,
            started: opts.autorun,
            paused: false,
            closing: None,
            abandon_inflight: false,
            close_replies: Vec::new(),
            left_behind: Vec::new(),
            stalled_busy: false,
            timers,
            token_prefix,
            flush_queued: false,
            flush_now: false,
            label,
            started_at: Instant::now(),
            store_closed: false,
            outage: crate::outage::Outage::default(),
            opts,
        })
    }

    async fn post_stop(
        &self,
        _myself: ActorRef<Self::Msg>,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        for timer in state.timers.drain(..) {
            timer.abort();
        }
        if let Some(waiting) = state.waiting.take() {
            waiting.abort();
        }
        if let Some(lm) = state.lock_manager.take() {
            lm.stop(None);
        }
        // A graceful close has closed the store already (closing again is a no-op); a Worker
        // stopped otherwise has not, and its connections would outlive it (its supervisor's
        // restart opens new ones).
        state.store.close().await;
        state.store_closed = true;
        telemetry::worker_stopped(
            state.store.queue_name(),
            &state.label,
            state.started_at.elapsed(),
        );
        Ok(())
    }

    async fn handle(
        &self,
        myself: ActorRef<Self::Msg>,
        message: Self::Msg,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        match message {
            WorkerMsg::Pause => state.paused = true,
            WorkerMsg::Resume => state.paused = false,
            WorkerMsg::Run => state.started = true,
            WorkerMsg::GetNextJob(reply) => {
                if state.closing.is_some() || state.inflight > 0 || state.free_slots() == 0 {
                    let _ = reply.send(None);
                } else {
                    state.spawn_fetch(&myself, 1, Some(reply));
                }
            }
            WorkerMsg::Close { force, reply } => {
                state.close_replies.push(reply);
                state.begin_close(&myself, force);
            }
            WorkerMsg::ActiveCount(reply) => {
                let _ = reply.send(state.running.len());
            }
            WorkerMsg::IsRunning(reply) => {
                let _ = reply.send(state.started && !state.paused && state.closing.is_none());
            }
            WorkerMsg::Internal(Internal(msg)) => state.handle_internal(&myself, msg).await?,
        }
        state.pump(&myself);
        state.maybe_stop(&myself).await;
        Ok(())
    }

    async fn handle_supervisor_evt(
        &self,
        myself: ActorRef<Self::Msg>,
        event: SupervisionEvent,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        // Never let a child's exit stop the worker by default (ractor's default does).
        let (cell, panic, stop_reason) = match event {
            SupervisionEvent::ActorTerminated(cell, _, reason) => (cell, None, reason),
            SupervisionEvent::ActorFailed(cell, error) => (cell, Some(error.to_string()), None),
            _ => return Ok(()),
        };
        let is_lock_manager = state
            .lock_manager
            .as_ref()
            .is_some_and(|lm| lm.get_id() == cell.get_id());
        if is_lock_manager {
            if state.closing.is_some() {
                return Ok(());
            }
            let reason = panic
                .or(stop_reason)
                .unwrap_or_else(|| "stopped without a reason".to_string());
            return Err(format!("lock manager stopped: {reason}").into());
        }
        if let Some(job_id) = state.job_actors.remove(&cell.get_id()) {
            if let Some(message) = panic {
                if state.running.contains_key(&job_id) {
                    state
                        .handle_internal(
                            &myself,
                            InternalMsg::JobEnded {
                                job_id,
                                ended: Ended::Panicked(message),
                            },
                        )
                        .await?;
                    state.pump(&myself);
                    state.maybe_stop(&myself).await;
                }
            }
        }
        Ok(())
    }
}
