//! The Worker actor: one consumer of one queue.
//!
//! It fetches jobs in batches into its `concurrency` slots, runs each on a task or a linked job
//! actor, has its linked LockManager renew their locks, and records finished jobs in batches
//! whose round trip also fetches the next jobs. When a fetch leaves slots empty, a task blocks
//! on the queue's marker (dedicated connection) and wakes the worker; store errors are retried
//! with backoff, never in a busy loop.
//!
//! *When* to call the store is decided by the [`Dispatcher`] (`dispatcher.rs`), a pure state
//! machine: this file turns messages into its [`Event`]s and carries out its [`Command`]s
//! (store calls as spawned tasks that answer with messages, timers, cancellations, reports).
//! Starting fetched jobs is in `start.rs`, recording and reporting finished ones in
//! `settle.rs`.
//!
//! # Supervision
//!
//! A job actor dying without reporting (it cannot: panics are caught) would be recorded as a
//! panicked job. The LockManager dying stops the Worker (with an error), so its supervisor
//! restarts it; jobs it held return through stalled recovery. A Worker that crashes leaves its
//! jobs locked until their locks expire; any worker's stalled check then recovers them.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use ractor::{Actor, ActorId, ActorProcessingErr, ActorRef, RpcReplyPort, SupervisionEvent};
use tokio::task::JoinHandle;

use super::callbacks::WorkerCallbacks;
use super::context::JobContext;
use super::dispatcher::{Command, Dispatcher, Event, Lifecycle, Limits};
use super::errors::WorkerError;
use super::fetched::Lease;
use super::lock_manager::{LockManager, LockManagerArgs, LockManagerMsg};
use super::options::WorkerOptions;
use super::outcome::{CancelReason, Cancellation, Ended, Verdict};
use super::{Job, Processor};
use crate::store::{
    FetchRequest, Fetched, Finish, FinishReply, StalledReport, Store, StoreError, StoreResult,
};
use crate::{telemetry, ConnectionConfig};
use bullmq_backend::Backend;
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
    /// Forced close with a deadline: cancel running jobs, wait for store calls in flight (three
    /// quarters of `grace`, instead of the forced close's usual few seconds) and for the
    /// connections to close (the rest); what is unconfirmed then is left to stalled recovery and
    /// listed in the report. Answered within `grace` (and a turn of the actor), also with Redis
    /// unreachable or unresponsive.
    CloseWithin {
        /// Longest time until the answer.
        grace: Duration,
        /// Answered when the worker has stopped.
        reply: RpcReplyPort<CloseReport>,
    },
    /// How many jobs are running.
    ActiveCount(RpcReplyPort<usize>),
    /// Whether the worker fetches jobs (started, not paused, not closing).
    IsRunning(RpcReplyPort<bool>),
    /// Whether the worker is paused (Node `worker.isPaused()`), also before being run.
    IsPaused(RpcReplyPort<bool>),
    /// Renew the locks of `(job id, token)` pairs to `duration` (Node
    /// `worker.extendJobLocks`); replies with the ids that could not be renewed. The call runs
    /// on a task of its own, so the worker goes on meanwhile.
    ExtendJobLocks {
        /// `(job id, lock token)` pairs.
        jobs: Vec<(String, String)>,
        /// The locks' new time to live.
        duration: Duration,
        /// The ids whose lock was missing or held by another token, or the store's error.
        reply: RpcReplyPort<StoreResult<Vec<String>>>,
    },
    /// Cancel one running job's token (Node `worker.cancelJob`); replies whether it was
    /// running here.
    CancelJob {
        /// The job.
        job_id: String,
        /// Its `failedReason` (default `"job cancelled"`).
        reason: Option<String>,
        /// Whether the job was running here.
        reply: RpcReplyPort<bool>,
    },
    /// Cancel every running job's token (Node `worker.cancelAllJobs`); replies how many.
    CancelAllJobs {
        /// Their `failedReason` (default `"job cancelled"`).
        reason: Option<String>,
        /// How many jobs were cancelled.
        reply: RpcReplyPort<usize>,
    },
    /// Change the number of slots (Node `worker.concurrency = n`); at least 1.
    SetConcurrency(usize),
    /// The number of slots now.
    Concurrency(RpcReplyPort<usize>),
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
    pub(crate) fn job_ended(job_id: String, token: String, ended: Ended) -> Self {
        Self(InternalMsg::JobEnded {
            job_id,
            token,
            ended,
        })
    }
    pub(crate) fn locks_lost(ids: Vec<String>) -> Self {
        Self(InternalMsg::LocksLost(ids))
    }
    pub(crate) fn locks_renewed(ids: Vec<String>) -> Self {
        Self(InternalMsg::LocksRenewed(ids))
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
    /// A [`Command::WakeAfter`] timer fired, or `autorun` started the Worker: nothing to do
    /// but the end-of-turn pump.
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
        /// The lock token of the attempt that ended: a job fetched again while an earlier
        /// attempt's end was still in the mailbox (a step job moved to wait, or one whose lock
        /// was lost) must not be ended by the earlier attempt's report.
        token: String,
        ended: Ended,
    },
    LocksLost(Vec<String>),
    /// The LockManager renewed these locks (for `on_locks_renewed`).
    LocksRenewed(Vec<String>),
    StoreError(StoreError),
    Woken(StoreResult<bool>),
    StalledTick,
    StalledDone(Box<StoreResult<StalledReport>>),
    /// The store's connection dropped or came back (see `health.rs`).
    Connection(crate::store::ConnectionChange),
    /// A forced close has waited [`super::dispatcher::FORCE_CLOSE_GRACE`] for store calls.
    CloseDeadline,
    /// The progress watchdog's timer (see `watchdog.rs`).
    WatchdogTick,
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
        Self::open_shared(backend, queue, Arc::new(processor), options).await
    }

    /// [`WorkerArgs::open`] with a processor shared with other workers.
    ///
    /// # Errors
    ///
    /// As [`WorkerArgs::open`].
    pub async fn open_shared(
        backend: &dyn Backend,
        queue: &str,
        processor: Arc<dyn Processor>,
        options: WorkerOptions,
    ) -> Result<Self, WorkerError> {
        options.validate()?;
        Ok(Self {
            store: options.open_store(backend, queue).await?,
            processor,
            options,
            callbacks: WorkerCallbacks::default(),
        })
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
    /// Its lock token and the store's note, handed back with its finish.
    pub(super) lease: Lease,
    pub(super) context: JobContext,
    /// Telemetry guard of the attempt (`bullmq_worker_active_jobs` while it lives).
    pub(super) active: telemetry::ActiveJob,
    /// The job's task ([`JobRunner::Task`](super::JobRunner::Task)), aborted if the Worker
    /// drops it while the job still runs.
    pub(super) _task: Option<super::job_runner::JobTask>,
}

/// A finished job waiting for its finish batch.
#[derive(Debug)]
pub(super) struct Pending {
    pub(super) job_id: String,
    /// The lock token and the store's note the job was fetched with.
    pub(super) lease: Lease,
    /// What to record; the callbacks and telemetry report the same value.
    pub(super) verdict: Verdict,
    /// `None` for a job that could not be read.
    pub(super) job: Option<Job>,
    /// How long the attempt ran (zero for jobs failed without running).
    pub(super) duration: Duration,
}

impl Pending {
    /// The store call's item for this job.
    fn finish(&self) -> Finish {
        Finish {
            job_id: self.job_id.clone(),
            token: self.lease.token.clone(),
            action: self.verdict.action(),
            receipt: self.lease.receipt,
        }
    }
}

/// State of a Worker. When to call the store is the [`Dispatcher`]'s business; the rest is
/// what carrying out its commands needs.
pub struct WorkerState {
    pub(super) store: Arc<dyn Store>,
    pub(super) processor: Arc<dyn Processor>,
    pub(super) opts: WorkerOptions,
    pub(super) callbacks: WorkerCallbacks,
    pub(super) dispatcher: Dispatcher<Pending>,
    pub(super) lock_manager: Option<ActorRef<LockManagerMsg>>,
    pub(super) running: HashMap<String, RunningJob>,
    pub(super) job_actors: HashMap<ActorId, String>,
    /// The marker wait in flight ([`Command::WaitForWork`]).
    pub(super) waiting: Option<JoinHandle<()>>,
    pub(super) close_replies: Vec<RpcReplyPort<CloseReport>>,
    pub(super) left_behind: Vec<String>,
    pub(super) timers: Vec<JoinHandle<()>>,
    pub(super) token_prefix: String,
    /// The worker's name in telemetry (`worker` field): its `name` option, else its token
    /// prefix, which is unique per worker.
    pub(super) label: Arc<str>,
    pub(super) started_at: Instant,
    /// `post_stop` closed the store; otherwise dropping the state closes it.
    pub(super) store_closed: bool,
    /// Store trouble, reported once per outage (see `health.rs`).
    pub(super) outage: crate::outage::Outage,
    /// The last successful store answer, or the last moment the Worker was idle by its own
    /// choice: what the progress watchdog measures from (see `watchdog.rs`).
    pub(super) last_progress: Instant,
    /// The earliest deadline a [`WorkerMsg::CloseWithin`] asked for: the release of the
    /// connections waits no longer than it.
    pub(super) close_by: Option<Instant>,
    /// The store said its connection dropped and has not said it is back: the client is
    /// reconnecting by itself, and the progress watchdog waits for it (a restart could not
    /// connect either).
    pub(super) connection_down: bool,
    /// `meta` fields already reported as [`WorkerError::InvalidQueueMeta`] (once each).
    pub(super) invalid_meta_reported: std::collections::HashSet<String>,
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
            .map_err(WorkerError::Spawn)?;
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
        if let Some(bound) = opts.progress_bound() {
            timers.push(
                myself.send_interval(super::watchdog::tick_period(bound), || {
                    internal(InternalMsg::WatchdogTick)
                }),
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
        let limits = Limits {
            concurrency: opts.concurrency,
            max_finish_batch: opts.max_finish_batch,
            drain_delay: opts.drain_delay,
        };
        // Connected (the store was opened with the arguments) and about to take messages.
        args.callbacks.ready();
        Ok(WorkerState {
            store: args.store,
            processor: args.processor,
            callbacks: args.callbacks,
            dispatcher: Dispatcher::new(limits, opts.autorun),
            lock_manager,
            running: HashMap::new(),
            job_actors: HashMap::new(),
            waiting: None,
            close_replies: Vec::new(),
            left_behind: Vec::new(),
            timers,
            token_prefix,
            label,
            started_at: Instant::now(),
            store_closed: false,
            outage: crate::outage::Outage::default(),
            last_progress: Instant::now(),
            close_by: None,
            connection_down: false,
            invalid_meta_reported: std::collections::HashSet::new(),
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
        // A close has released the store already; a Worker stopped otherwise has not, and its
        // connections would outlive it (its supervisor's restart opens new ones).
        state.release_store().await;
        telemetry::worker_stopped(
            state.store.queue_name(),
            &state.label,
            state.started_at.elapsed(),
        );
        state.callbacks.closed();
        Ok(())
    }

    async fn handle(
        &self,
        myself: ActorRef<Self::Msg>,
        message: Self::Msg,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        match message {
            WorkerMsg::Pause => {
                let was_paused = state.dispatcher.lifecycle().is_paused();
                state.dispatch(Event::Pause);
                if !was_paused && state.dispatcher.lifecycle().is_paused() {
                    state.callbacks.paused();
                }
            }
            WorkerMsg::Resume => {
                let was_paused = state.dispatcher.lifecycle().is_paused();
                state.dispatch(Event::Resume);
                if was_paused && !state.dispatcher.lifecycle().is_paused() {
                    state.callbacks.resumed();
                }
            }
            WorkerMsg::CancelJob {
                job_id,
                reason,
                reply,
            } => {
                let cancelled = state.cancel_requested(Some(&job_id), reason.as_deref());
                let _ = reply.send(cancelled > 0);
            }
            WorkerMsg::CancelAllJobs { reason, reply } => {
                let cancelled = state.cancel_requested(None, reason.as_deref());
                let _ = reply.send(cancelled);
            }
            WorkerMsg::SetConcurrency(concurrency) => {
                // The handle refuses 0; a message sent directly is clamped rather than trusted.
                let concurrency = concurrency.max(1);
                if concurrency != state.dispatcher.concurrency() {
                    state.dispatch(Event::SetConcurrency(concurrency));
                    telemetry::worker_concurrency_changed(
                        state.store.queue_name(),
                        &state.label,
                        concurrency,
                    );
                }
            }
            WorkerMsg::Concurrency(reply) => {
                let _ = reply.send(state.dispatcher.concurrency());
            }
            WorkerMsg::Run => state.dispatch(Event::Run),
            WorkerMsg::GetNextJob(reply) => {
                if state.dispatcher.try_fetch_one() {
                    state.spawn_fetch(&myself, 1, Some(reply));
                } else {
                    let _ = reply.send(None);
                }
            }
            WorkerMsg::Close { force, reply } => {
                state.close_replies.push(reply);
                if !state.dispatcher.lifecycle().is_closing() {
                    state.callbacks.closing();
                }
                state.dispatch(Event::Close { force });
            }
            WorkerMsg::CloseWithin { grace, reply } => {
                state.close_replies.push(reply);
                if !state.dispatcher.lifecycle().is_closing() {
                    state.callbacks.closing();
                }
                let by = Instant::now() + grace;
                state.close_by = Some(state.close_by.map_or(by, |earlier| earlier.min(by)));
                state.dispatch(Event::CloseWithin(grace * 3 / 4));
            }
            WorkerMsg::ActiveCount(reply) => {
                let _ = reply.send(state.running.len());
            }
            WorkerMsg::IsRunning(reply) => {
                let _ = reply.send(state.dispatcher.lifecycle() == Lifecycle::Running);
            }
            WorkerMsg::IsPaused(reply) => {
                let _ = reply.send(state.dispatcher.lifecycle().is_paused());
            }
            WorkerMsg::ExtendJobLocks {
                jobs,
                duration,
                reply,
            } => {
                let store = Arc::clone(&state.store);
                tokio::spawn(async move {
                    let _ = reply.send(store.extend_locks(&jobs, duration).await);
                });
            }
            // A stuck Worker ends here with an error: its supervisor restarts it.
            WorkerMsg::Internal(Internal(InternalMsg::WatchdogTick)) => state.watchdog()?,
            WorkerMsg::Internal(Internal(msg)) => state.handle_internal(&myself, msg).await,
        }
        state.end_turn(&myself).await;
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
            if state.dispatcher.lifecycle().is_closing() {
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
                    state.job_ended(job_id, None, Ended::Panicked(message));
                    state.end_turn(&myself).await;
                }
            }
        }
        Ok(())
    }
}

// ---- Worker control ----

impl WorkerState {
    /// Cancels the token of `job_id` (or of every running job) softly, failing the attempt
    /// with `reason`; returns how many cancellations were recorded (a job already cancelled
    /// keeps its first reason).
    fn cancel_requested(&mut self, job_id: Option<&str>, reason: Option<&str>) -> usize {
        let cancellation = Cancellation::requested(reason);
        let targets: Vec<&RunningJob> = match job_id {
            Some(id) => self.running.get(id).into_iter().collect(),
            None => self.running.values().collect(),
        };
        let mut cancelled = 0;
        for running in targets {
            // A job its processor moved itself is not this worker's any more.
            if running.context.moved().is_some() {
                continue;
            }
            if running.context.cancel_with(cancellation.clone()) {
                cancelled += 1;
            }
        }
        cancelled
    }
}

// ---- Carrying out the dispatcher's commands ----

impl WorkerState {
    /// Feeds `event` to the dispatcher at the current time.
    pub(super) fn dispatch(&mut self, event: Event<Pending>) {
        self.dispatcher.handle(event, Instant::now());
    }

    /// After every message: starts whatever store call is due, carries out the commands.
    async fn end_turn(&mut self, myself: &ActorRef<WorkerMsg>) {
        self.dispatcher.pump(Instant::now());
        self.run_commands(myself).await;
        debug_assert_eq!(self.dispatcher.running(), self.running.len());
    }

    /// Carries out the commands the dispatcher queued, in order.
    pub(super) async fn run_commands(&mut self, myself: &ActorRef<WorkerMsg>) {
        while let Some(command) = self.dispatcher.take_command() {
            match command {
                Command::Fetch { count } => self.spawn_fetch(myself, count, None),
                Command::FinishBatch { batch, fetch } => self.spawn_finish(myself, batch, fetch),
                Command::WaitForWork { timeout } => self.spawn_wait(myself, timeout),
                Command::CancelWait => {
                    if let Some(waiting) = self.waiting.take() {
                        waiting.abort();
                    }
                }
                // Detached timers: the Worker may stop before they fire.
                Command::WakeAfter(after) => {
                    drop(myself.send_after(after, || internal(InternalMsg::Pump)));
                }
                Command::ArmCloseDeadline(after) => {
                    drop(myself.send_after(after, || internal(InternalMsg::CloseDeadline)));
                }
                Command::FlushSoon => {
                    // Fails only when the Worker is gone, and then nothing waits for the flush.
                    let _ = myself.cast(internal(InternalMsg::Flush));
                }
                Command::CheckStalled => self.spawn_stalled_check(myself),
                Command::CancelRunning => {
                    for running in self.running.values() {
                        running.context.cancel(CancelReason::Shutdown);
                    }
                }
                Command::GiveUp(batch) => {
                    self.left_behind.extend(batch.into_iter().map(|p| p.job_id));
                }
                Command::AbandonAll(pending) => {
                    self.left_behind
                        .extend(pending.into_iter().map(|p| p.job_id));
                    let running: Vec<String> = self.running.drain().map(|(id, _)| id).collect();
                    self.left_behind.extend(running);
                }
                Command::ReportRateLimited(ttl) => {
                    telemetry::rate_limit_hit(self.store.queue_name(), &self.label, ttl);
                }
                Command::ReportQueueEmpty => {
                    // Node's name for it, kept for the callback.
                    self.callbacks.drained();
                    telemetry::worker_queue_empty(self.store.queue_name(), &self.label);
                }
                Command::Stop => self.stop(myself).await,
            }
        }
    }

    async fn handle_internal(&mut self, myself: &ActorRef<WorkerMsg>, msg: InternalMsg) {
        match msg {
            InternalMsg::Pump => self.dispatch(Event::Wake),
            InternalMsg::CloseDeadline => self.dispatch(Event::CloseDeadline),
            InternalMsg::Flush => self.dispatch(Event::Flush),
            InternalMsg::Fetched {
                result,
                requested,
                reply,
            } => match *result {
                Ok(fetched) => {
                    self.dispatch(Event::CallSucceeded { requested });
                    self.made_progress();
                    self.store_recovered();
                    let ids = self.accept_fetched(myself, fetched, requested).await;
                    if let Some(reply) = reply {
                        let _ = reply.send(ids.into_iter().next());
                    }
                }
                Err(error) => {
                    if let Some(reply) = reply {
                        let _ = reply.send(None);
                    }
                    self.dispatch(Event::FetchFailed { requested });
                    self.report_store_error(error);
                }
            },
            InternalMsg::Finished {
                result,
                batch,
                requested,
            } => match *result {
                Ok(reply) => {
                    self.dispatch(Event::CallSucceeded { requested });
                    self.made_progress();
                    self.store_recovered();
                    let fetched = self.settle_batch(batch, reply);
                    self.report_invalid_meta(&fetched.invalid_settings);
                    // A batch that fetched nothing still reports a processor's rate limit.
                    if requested > 0 || !fetched.rate_limited_for.is_zero() {
                        self.accept_fetched(myself, fetched, requested).await;
                    }
                }
                Err(error) => {
                    let closing = self.dispatcher.lifecycle().is_closing();
                    self.dispatch(Event::FinishFailed { requested, batch });
                    if closing {
                        // Given up (see `Command::GiveUp`): said once, not as an outage.
                        self.callbacks.error(&WorkerError::Store(error));
                    } else {
                        self.report_store_error(error);
                    }
                }
            },
            InternalMsg::JobEnded {
                job_id,
                token,
                ended,
            } => self.job_ended(job_id, Some(&token), ended),
            InternalMsg::LocksLost(ids) => {
                let mut lost = Vec::new();
                for id in ids {
                    if let Some(running) = self.running.get(&id) {
                        // A job its processor moved (step jobs) released its lock on purpose:
                        // not a lost lock, and the processor is about to return.
                        if running.context.moved().is_some() {
                            continue;
                        }
                        running.context.cancel(CancelReason::LockLost);
                        lost.push(id);
                    }
                }
                if !lost.is_empty() {
                    self.callbacks.lock_renewal_failed(&lost);
                }
            }
            InternalMsg::LocksRenewed(ids) => self.callbacks.locks_renewed(&ids),
            InternalMsg::StoreError(error) => self.report_store_error(error),
            InternalMsg::Connection(change) => self.on_connection_change(change),
            InternalMsg::Woken(result) => {
                tracing::trace!(?result, "woken");
                self.waiting = None;
                self.dispatch(Event::WaitEnded {
                    failed: result.is_err(),
                });
                match result {
                    Ok(_) => self.made_progress(),
                    Err(error) => self.report_store_error(error),
                }
            }
            InternalMsg::StalledTick => self.dispatch(Event::StalledTick),
            // Handled by `Worker::handle` (it may stop the Worker); never reaches here.
            InternalMsg::WatchdogTick => {}
            InternalMsg::StalledDone(result) => {
                if result.is_ok() {
                    self.made_progress();
                }
                self.dispatch(Event::StalledDone);
                self.stalled_checked(*result);
            }
        }
        self.run_commands(myself).await;
    }

    fn fetch_request(&mut self, count: usize) -> FetchRequest {
        let mut request = FetchRequest::new(
            u32::try_from(count).unwrap_or(u32::MAX),
            self.token_prefix.clone(),
            self.opts.lock_duration,
        );
        request.worker_name = self.opts.name.clone();
        request.limiter = self.opts.limiter.map(|l| (l.max, l.duration));
        request
    }

    /// Fetches `count` jobs; `reply` (from `getNextJob`) hears the first one's id.
    fn spawn_fetch(
        &mut self,
        myself: &ActorRef<WorkerMsg>,
        count: usize,
        reply: Option<RpcReplyPort<Option<String>>>,
    ) {
        let request = self.fetch_request(count);
        let store = self.store.clone();
        let me = myself.clone();
        tokio::spawn(async move {
            let result = guarded(CALL_TIMEOUT, store.fetch_batch(&request)).await;
            let _ = me.cast(internal(InternalMsg::Fetched {
                result: Box::new(result),
                requested: request.count,
                reply,
            }));
        });
    }

    /// Records `batch`, fetching up to `fetch` jobs in the same call.
    fn spawn_finish(&mut self, myself: &ActorRef<WorkerMsg>, batch: Vec<Pending>, fetch: usize) {
        let fetch = (fetch > 0).then(|| self.fetch_request(fetch));
        let store = self.store.clone();
        let me = myself.clone();
        tokio::spawn(async move {
            let finishes: Vec<Finish> = batch.iter().map(Pending::finish).collect();
            let result = guarded(CALL_TIMEOUT, store.finish_batch(&finishes, fetch.as_ref())).await;
            let requested = fetch.map_or(0, |f| f.count);
            let _ = me.cast(internal(InternalMsg::Finished {
                result: Box::new(result),
                batch,
                requested,
            }));
        });
    }

    /// Blocks on the queue's marker for at most `timeout`.
    fn spawn_wait(&mut self, myself: &ActorRef<WorkerMsg>, timeout: Duration) {
        tracing::trace!(?timeout, "worker idle, waiting for jobs");
        let store = self.store.clone();
        let me = myself.clone();
        self.waiting = Some(tokio::spawn(async move {
            let result = guarded(timeout + CALL_TIMEOUT, store.wait_for_job(timeout)).await;
            let _ = me.cast(internal(InternalMsg::Woken(result)));
        }));
    }

    fn spawn_stalled_check(&self, myself: &ActorRef<WorkerMsg>) {
        let store = self.store.clone();
        let me = myself.clone();
        let (max, interval) = (self.opts.max_stalled_count, self.opts.stalled_interval);
        tokio::spawn(async move {
            let result = guarded(CALL_TIMEOUT, store.check_stalled(max, interval)).await;
            let _ = me.cast(internal(InternalMsg::StalledDone(Box::new(result))));
        });
    }

    /// Reports what a stalled check did.
    fn stalled_checked(&self, result: StoreResult<StalledReport>) {
        match result {
            Ok(report) => {
                telemetry::stalled_check(
                    self.store.queue_name(),
                    &self.label,
                    report.recovered.len() as u64,
                    report.corrupted.len() as u64,
                );
                for id in &report.recovered {
                    tracing::info!(job_id = %id, "stalled job moved back to wait");
                    self.callbacks.stalled(id);
                }
                self.report_failed_by_store(&report.corrupted, &report.dropped);
            }
            Err(error) => self.callbacks.error(&WorkerError::Store(error)),
        }
    }

    /// Stops the actor: the close has nothing left to wait for.
    async fn stop(&mut self, myself: &ActorRef<WorkerMsg>) {
        if let Some(lm) = self.lock_manager.take() {
            lm.stop(None);
        }
        self.release_store().await;
        let report = CloseReport {
            left_for_stalled_recovery: std::mem::take(&mut self.left_behind),
        };
        for reply in self.close_replies.drain(..) {
            let _ = reply.send(report.clone());
        }
        myself.stop(None);
    }
}

/// How long a stopping Worker waits for its connections to close before it stops anyway: with
/// Redis unresponsive each `QUIT` waits for its own bound, and a bounded close must not spend
/// its caller's time on them. The close goes on in a background task (each step bounded), so
/// the connections are still released when the server answers again.
pub(super) const RELEASE_WAIT: Duration = Duration::from_secs(1);

/// The least a close with a deadline waits for the connections to close.
const MIN_RELEASE_WAIT: Duration = Duration::from_millis(50);

impl WorkerState {
    /// Closes the store's connections (once), waiting at most [`RELEASE_WAIT`] for it.
    async fn release_store(&mut self) {
        if std::mem::replace(&mut self.store_closed, true) {
            return;
        }
        let wait = self.close_by.map_or(RELEASE_WAIT, |by| {
            // Some time even when the deadline has passed: a healthy close takes milliseconds.
            let left = by.saturating_duration_since(Instant::now());
            left.clamp(MIN_RELEASE_WAIT, RELEASE_WAIT)
        });
        let store = self.store.clone();
        let closing = tokio::spawn(async move { store.close().await });
        // On timeout the task is detached, not aborted: it finishes the close later.
        if tokio::time::timeout(wait, closing).await.is_err() {
            tracing::debug!(queue = self.store.queue_name(), worker = %self.label,
                "connections still closing after {wait:?}; finishing in the background");
        }
    }
}

/// A store call that has not answered after this long is treated as failed, so a connection
/// that died silently cannot stall the worker forever (the call is retried).
const CALL_TIMEOUT: Duration = Duration::from_secs(30);

async fn guarded<T>(
    limit: Duration,
    call: impl std::future::Future<Output = StoreResult<T>>,
) -> StoreResult<T> {
    match tokio::time::timeout(limit, call).await {
        Ok(result) => result,
        Err(_) => Err(StoreError::Timeout {
            operation: "store call",
            after: limit,
        }),
    }
}
