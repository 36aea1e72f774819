//! The Runtime: the root supervisor of an embedding application, owning the WorkerSupervisor
//! and the QueueEventsSupervisor (two dynamic supervisors) and any WorkerManagers.
//!
//! ```text
//! Runtime root            (OneForOne)
//! ├── WorkerSupervisor    "<name>.workers"       dynamic; Workers
//! ├── QueueEventsSupervisor "<name>.queue_events" dynamic; QueueEvents
//! └── (children added with start_child_under(Branch::Root, ..), e.g. WorkerManagers)
//! ```
//!
//! # Supervision
//!
//! Every supervisor of the tree publishes [`RuntimeEvent`]s on one broadcast channel
//! ([`Runtime::subscribe`]). When a branch supervisor exceeds its restart intensity it fails and
//! the root restarts it (empty: its dynamic children were started by callers, who see
//! `SupervisorGaveUp` and decide); when the root itself exceeds its intensity, it stops the
//! whole tree and publishes `SupervisorGaveUp` for itself.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use ractor::{Actor, ActorCell, ActorRef, ActorStatus};
use tokio::sync::broadcast;
use tokio::time::Instant;

use super::child_spec::ChildSpec;
use super::dynamic::DynamicSupervisor;
use super::error::SupervisionError;
use super::event::RuntimeEvent;
use super::handle::SupervisorRef;
use super::options::SupervisorOptions;
use super::strategy::Restart;
use super::supervisor::{Supervisor, SupervisorMsg};
use super::worker_child::{ForceDeadline, SupervisedWorker, SupervisorLocator, WorkerSpec};
use crate::events::{QueueEventsArgs, QueueEventsHandle, QueueEventsOptions};
use crate::manager::{WorkerManager, WorkerManagerArgs, WorkerManagerHandle, WorkerManagerOptions};
use crate::worker::{Processor, WorkerMsg, WorkerOptions};
use crate::ConnectionConfig;

/// Child id of the WorkerSupervisor under the root.
const WORKER_SUPERVISOR_ID: &str = "worker_supervisor";
/// Child id of the QueueEventsSupervisor under the root.
const QUEUE_EVENTS_SUPERVISOR_ID: &str = "queue_events_supervisor";

/// Gives each unnamed runtime of the process a distinct registry prefix.
static NEXT_RUNTIME: AtomicU64 = AtomicU64::new(1);

/// Options of [`Runtime::start`]. The runtime replaces the `events` sender of the three
/// supervisor option sets with its own channel ([`Runtime::subscribe`]).
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct RuntimeOptions {
    /// Registry name of the root; the branch supervisors are registered as `<name>.workers` and
    /// `<name>.queue_events`. Default `bullmq-runtime-<n>`, unique in the process.
    pub name: Option<String>,
    /// Root supervisor options (default OneForOne, 3 restarts in 5 s).
    pub root: SupervisorOptions,
    /// WorkerSupervisor options (default OneForOne, 3 restarts in 5 s).
    pub worker_supervisor: SupervisorOptions,
    /// QueueEventsSupervisor options (default OneForOne, 3 restarts in 5 s).
    pub queue_events_supervisor: SupervisorOptions,
    /// Capacity of the event broadcast channel; slow subscribers lose the oldest events
    /// (`RecvError::Lagged`). Default 1024.
    pub event_capacity: usize,
    /// Redis connection of the Workers and WorkerManagers the runtime starts. Default
    /// `ConnectionConfig::default()` (`redis://127.0.0.1:6379`); see
    /// [`ConnectionConfig::from_env`].
    pub connection: ConnectionConfig,
    /// How long a Worker stopped by the runtime (shutdown, scale down, close) may spend
    /// finishing its active jobs before they are cancelled. Default 30 s.
    pub worker_shutdown: Duration,
}

impl Default for RuntimeOptions {
    fn default() -> Self {
        Self {
            name: None,
            root: SupervisorOptions::default(),
            worker_supervisor: SupervisorOptions::default(),
            queue_events_supervisor: SupervisorOptions::default(),
            event_capacity: 1024,
            connection: ConnectionConfig::default(),
            worker_shutdown: super::worker_child::DEFAULT_WORKER_SHUTDOWN,
        }
    }
}

impl RuntimeOptions {
    /// Sets the registry name prefix.
    pub fn name(mut self, name: impl Into<String>) -> Self {
        self.name = Some(name.into());
        self
    }

    /// Sets the root supervisor's options.
    pub fn root(mut self, options: SupervisorOptions) -> Self {
        self.root = options;
        self
    }

    /// Sets the WorkerSupervisor's options.
    pub fn worker_supervisor(mut self, options: SupervisorOptions) -> Self {
        self.worker_supervisor = options;
        self
    }

    /// Sets the QueueEventsSupervisor's options.
    pub fn queue_events_supervisor(mut self, options: SupervisorOptions) -> Self {
        self.queue_events_supervisor = options;
        self
    }

    /// Sets the Redis connection of the Workers the runtime starts.
    pub fn connection(mut self, connection: ConnectionConfig) -> Self {
        self.connection = connection;
        self
    }

    /// Sets how long a stopped Worker may spend finishing its active jobs (default 30 s).
    pub fn worker_shutdown(mut self, shutdown: Duration) -> Self {
        self.worker_shutdown = shutdown;
        self
    }
}

/// Where [`Runtime::start_child_under`] puts a child.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Branch {
    /// Directly under the root (WorkerManagers live here).
    Root,
    /// Under the WorkerSupervisor.
    Workers,
    /// Under the QueueEventsSupervisor.
    QueueEvents,
}

/// A running supervision tree. Cheap to clone; every clone drives the same tree.
///
/// # Examples
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> anyhow::Result<()> {
/// use std::time::Duration;
/// use ractor_bullmq::supervision::{Runtime, RuntimeOptions};
///
/// let runtime = Runtime::start(RuntimeOptions::default()).await?;
/// let mut events = runtime.subscribe();
/// let workers = runtime.worker_supervisor()?;
/// assert!(workers.which_children().await?.is_empty());
/// runtime.shutdown(Duration::from_secs(10)).await?;
/// # drop(events.try_recv());
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone)]
pub struct Runtime {
    name: String,
    root: SupervisorRef,
    events: broadcast::Sender<RuntimeEvent>,
    connection: ConnectionConfig,
    worker_shutdown: Duration,
    force_at: ForceDeadline,
    next_id: Arc<AtomicU64>,
    /// QueueEvents started through this runtime: their subscriptions end at shutdown.
    queue_events: Arc<std::sync::Mutex<Vec<QueueEventsHandle>>>,
}

impl Runtime {
    /// Starts the root supervisor with its two dynamic branch supervisors.
    ///
    /// # Errors
    ///
    /// [`SupervisionError::StartFailed`] if a name is already registered.
    pub async fn start(options: RuntimeOptions) -> Result<Self, SupervisionError> {
        let name = options.name.unwrap_or_else(|| {
            format!(
                "bullmq-runtime-{}",
                NEXT_RUNTIME.fetch_add(1, Ordering::Relaxed)
            )
        });
        let (events, _) = broadcast::channel(options.event_capacity.max(1));
        let children = vec![
            DynamicSupervisor::child_spec(
                WORKER_SUPERVISOR_ID,
                Some(workers_name(&name)),
                options.worker_supervisor.events(events.clone()),
            ),
            DynamicSupervisor::child_spec(
                QUEUE_EVENTS_SUPERVISOR_ID,
                Some(queue_events_name(&name)),
                options.queue_events_supervisor.events(events.clone()),
            ),
        ];
        let (root, _handle) = Supervisor::spawn(
            Some(name.clone()),
            options.root.events(events.clone()),
            children,
        )
        .await
        .map_err(|e| SupervisionError::StartFailed {
            id: name.clone(),
            reason: e.to_string(),
        })?;
        tracing::info!(runtime = %name, "runtime started");
        Ok(Self {
            name,
            root,
            events,
            connection: options.connection,
            worker_shutdown: options.worker_shutdown,
            force_at: ForceDeadline::default(),
            next_id: Arc::new(AtomicU64::new(1)),
            queue_events: Arc::default(),
        })
    }

    /// The root's registry name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The root supervisor.
    pub fn root(&self) -> &SupervisorRef {
        &self.root
    }

    /// Whether the root supervisor is still running (false after shutdown or if it gave up).
    pub fn is_running(&self) -> bool {
        self.root.actor().get_status() < ActorStatus::Stopping
    }

    /// The current WorkerSupervisor (looked up by name, so it is valid after a restart).
    ///
    /// # Errors
    ///
    /// [`SupervisionError::NotRunning`] while it is stopped or being restarted.
    pub fn worker_supervisor(&self) -> Result<SupervisorRef, SupervisionError> {
        lookup(&workers_name(&self.name))
    }

    /// The current QueueEventsSupervisor (looked up by name).
    ///
    /// # Errors
    ///
    /// [`SupervisionError::NotRunning`] while it is stopped or being restarted.
    pub fn queue_events_supervisor(&self) -> Result<SupervisorRef, SupervisionError> {
        lookup(&queue_events_name(&self.name))
    }

    /// Starts `spec` under the chosen branch and returns the child's cell.
    ///
    /// # Errors
    ///
    /// As [`SupervisorRef::start_child`], or [`SupervisionError::NotRunning`].
    pub async fn start_child_under(
        &self,
        branch: Branch,
        spec: ChildSpec,
    ) -> Result<ActorCell, SupervisionError> {
        let supervisor = match branch {
            Branch::Root => self.root.clone(),
            Branch::Workers => self.worker_supervisor()?,
            Branch::QueueEvents => self.queue_events_supervisor()?,
        };
        supervisor.start_child(spec).await
    }

    /// Subscribes to the events of every supervisor in the tree (restarts, give-ups, kills).
    pub fn subscribe(&self) -> broadcast::Receiver<RuntimeEvent> {
        self.events.subscribe()
    }

    /// The sender the tree publishes on, for supervisors started outside the tree that should
    /// report to the same stream (pass it to [`SupervisorOptions::events`]).
    pub fn event_sender(&self) -> broadcast::Sender<RuntimeEvent> {
        self.events.clone()
    }

    /// The Redis connection the runtime's Workers use.
    pub fn connection(&self) -> &ConnectionConfig {
        &self.connection
    }

    /// A [`WorkerSpec`] for `queue` with this runtime's connection and worker shutdown budget,
    /// whose stop honours [`Runtime::shutdown`]'s deadline. Start it with
    /// [`Runtime::start_worker_spec`], or hand it to a manager.
    pub fn worker_spec(
        &self,
        queue: impl Into<String>,
        processor: impl Processor,
        options: WorkerOptions,
    ) -> WorkerSpec {
        WorkerSpec::new(self.connection.clone(), queue, processor, options)
            .shutdown(self.worker_shutdown)
            .force_deadline(self.force_at.clone())
    }

    /// Starts a Worker on `queue` as a Permanent child of the WorkerSupervisor (child id
    /// `<queue>/<n>`). Every restart connects afresh and starts a fresh LockManager; the
    /// returned handle follows the current incarnation.
    ///
    /// # Errors
    ///
    /// [`SupervisionError::InvalidOption`] for bad options, [`SupervisionError::StartFailed`]
    /// when Redis cannot be reached, [`SupervisionError::NotRunning`].
    pub async fn start_worker(
        &self,
        queue: &str,
        processor: impl Processor,
        options: WorkerOptions,
    ) -> Result<SupervisedWorker, SupervisionError> {
        let id = format!("{queue}/{}", self.next_id.fetch_add(1, Ordering::Relaxed));
        let spec = self.worker_spec(queue, processor, options);
        self.start_worker_spec(id, spec).await
    }

    /// Starts a Worker from `spec` as child `id` of the WorkerSupervisor.
    ///
    /// # Errors
    ///
    /// As [`Runtime::start_worker`], and [`SupervisionError::DuplicateChild`].
    pub async fn start_worker_spec(
        &self,
        id: impl Into<String>,
        spec: WorkerSpec,
    ) -> Result<SupervisedWorker, SupervisionError> {
        spec.validate()?;
        let id = id.into();
        let spec = spec.force_deadline(self.force_at.clone());
        self.start_child_under(Branch::Workers, spec.child_spec(id.clone()))
            .await?;
        Ok(SupervisedWorker::new(
            id,
            SupervisorLocator::Named(workers_name(&self.name)),
        ))
    }

    /// Starts a QueueEvents reader under the QueueEventsSupervisor (child id `<queue>/<n>`):
    /// restarted when it crashes, resuming after the last delivered event id. Connects once
    /// first, so an unreachable server fails the start as it does for a Worker.
    ///
    /// # Errors
    ///
    /// [`SupervisionError::InvalidOption`] for bad options, [`SupervisionError::StartFailed`]
    /// (also when Redis cannot be reached), [`SupervisionError::NotRunning`].
    pub async fn start_queue_events(
        &self,
        options: QueueEventsOptions,
    ) -> Result<QueueEventsHandle, SupervisionError> {
        let args = QueueEventsArgs::new(options)
            .map_err(|e| SupervisionError::InvalidOption(e.to_string()))?;
        self.start_queue_events_args(args).await
    }

    /// As [`Runtime::start_queue_events`] from prepared arguments (e.g. with a handler:
    /// [`QueueEventsArgs::with_handler`]).
    ///
    /// # Errors
    ///
    /// As [`Runtime::start_queue_events`].
    pub async fn start_queue_events_args(
        &self,
        args: QueueEventsArgs,
    ) -> Result<QueueEventsHandle, SupervisionError> {
        let id = format!(
            "{}/{}",
            args.options().queue,
            self.next_id.fetch_add(1, Ordering::Relaxed)
        );
        crate::events::probe_connection(args.options())
            .await
            .map_err(|error| SupervisionError::StartFailed {
                id: id.clone(),
                reason: error.to_string(),
            })?;
        self.start_child_under(Branch::QueueEvents, args.child_spec(id))
            .await?;
        let handle = QueueEventsHandle::from_args(&args);
        if let Ok(mut started) = self.queue_events.lock() {
            started.push(handle.clone());
        }
        Ok(handle)
    }

    /// Starts a WorkerManager for `queue` under the root (child id `manager:<prefix>`), whose
    /// Workers (`<prefix>#1`, `<prefix>#2`, …) live under the WorkerSupervisor. The initial
    /// Workers start right after this returns; the handle's calls wait for them.
    ///
    /// # Errors
    ///
    /// [`SupervisionError::InvalidOption`] for bad worker options or autoscale bounds,
    /// [`SupervisionError::DuplicateChild`] when a manager with this prefix runs,
    /// [`SupervisionError::NotRunning`].
    pub async fn worker_manager(
        &self,
        queue: &str,
        processor: impl Processor,
        worker_options: WorkerOptions,
        options: WorkerManagerOptions,
    ) -> Result<WorkerManagerHandle, SupervisionError> {
        let spec = self.worker_spec(queue, processor, worker_options);
        self.worker_manager_spec(spec, options).await
    }

    /// As [`Runtime::worker_manager`] with a prepared [`WorkerSpec`] (callbacks, shutdown
    /// budget, restart policy), e.g. from [`Runtime::worker_spec`].
    ///
    /// # Errors
    ///
    /// As [`Runtime::worker_manager`].
    pub async fn worker_manager_spec(
        &self,
        spec: WorkerSpec,
        options: WorkerManagerOptions,
    ) -> Result<WorkerManagerHandle, SupervisionError> {
        spec.validate()?;
        let spec = spec.force_deadline(self.force_at.clone());
        let queue = spec.queue().to_owned();
        if let Some(autoscale) = &options.autoscale {
            autoscale.validate()?;
        }
        let prefix = options
            .id_prefix
            .clone()
            .unwrap_or_else(|| queue.to_owned());
        let id = format!("manager:{prefix}");
        let workers = SupervisorLocator::Named(workers_name(&self.name));
        let args = WorkerManagerArgs {
            spec,
            supervisor: workers.clone(),
            options,
        };
        let child = ChildSpec::new(id.clone(), move |parent| {
            let args = args.clone();
            async move {
                let (actor, _) = Actor::spawn_linked(None, WorkerManager, args, parent).await?;
                Ok(actor.get_cell())
            }
        })
        // Stopped on purpose only by shutdown or terminate_child; a crash restarts it.
        .restart(Restart::Transient);
        self.start_child_under(Branch::Root, child).await?;
        Ok(WorkerManagerHandle::child(
            SupervisorLocator::Ref(self.root.clone()),
            id,
            workers,
        ))
    }

    /// Graceful shutdown, bounded by `timeout`:
    ///
    /// 1. every Worker stops fetching at once (so they all drain together, not in turn);
    /// 2. the root stops its children in reverse start order (root-level children such as
    ///    WorkerManagers first, then the QueueEventsSupervisor, then the WorkerSupervisor),
    ///    each supervisor doing the same with its own children; a Worker's stop is its close:
    ///    it finishes its active jobs and records them;
    /// 3. Workers whose jobs still run when most of `timeout` is spent (all but a fifth, at
    ///    most 5 s) cancel them: they are left to stalled recovery;
    /// 4. after `timeout` whatever is left is killed.
    ///
    /// Each Worker closes its own connections as it stops; the subscriptions of QueueEvents
    /// started with [`Runtime::start_queue_events`] end.
    ///
    /// # Errors
    ///
    /// [`SupervisionError::ShutdownTimedOut`] when the timeout was hit.
    pub async fn shutdown(&self, timeout: Duration) -> Result<(), SupervisionError> {
        tracing::info!(runtime = %self.name, ?timeout, "runtime shutting down");
        let reserve = (timeout / 5).min(Duration::from_secs(5));
        self.force_at
            .set(Instant::now() + timeout.saturating_sub(reserve));
        if let Ok(workers) = self.worker_supervisor() {
            if let Ok(children) = workers.which_children().await {
                for cell in children.into_iter().filter_map(|c| c.cell) {
                    if cell.is_message_type_of::<WorkerMsg>() == Some(true) {
                        let _ = ActorRef::<WorkerMsg>::from(cell).cast(WorkerMsg::Pause);
                    }
                }
            }
        }
        let result = self.root.shutdown(timeout).await;
        // The readers are stopped; end their subscriptions too (a supervisor's stop keeps them
        // for the restart that will not come).
        let started = self
            .queue_events
            .lock()
            .map(|mut started| std::mem::take(&mut *started))
            .unwrap_or_default();
        for handle in started {
            handle.close().await;
        }
        tracing::info!(runtime = %self.name, ok = result.is_ok(), "runtime stopped");
        result
    }
}

fn workers_name(runtime: &str) -> String {
    format!("{runtime}.workers")
}

fn queue_events_name(runtime: &str) -> String {
    format!("{runtime}.queue_events")
}

fn lookup(name: &str) -> Result<SupervisorRef, SupervisionError> {
    ActorRef::<SupervisorMsg>::where_is(name)
        .filter(|a| a.get_status() < ActorStatus::Stopping)
        .map(SupervisorRef::new)
        .ok_or_else(|| SupervisionError::NotRunning(name.to_owned()))
}
