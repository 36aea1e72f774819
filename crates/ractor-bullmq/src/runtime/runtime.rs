//! The [`Runtime`]: a running tree (see the [module docs](super) for its shape), its branches,
//! its event stream and its bounded shutdown. Starting children on it is in the sibling files.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use ractor::{ActorCell, ActorRef, ActorStatus};
use tokio::sync::broadcast;
use tokio::time::Instant;

use super::options::RuntimeOptions;
use crate::events::QueueEventsHandle;
use crate::supervision::{
    ChildSpec, DynamicSupervisor, RuntimeEvent, SupervisionError, Supervisor, SupervisorRef,
};
use crate::worker::{ForceDeadline, WorkerMsg};
use bullmq_backend::Backend;
use bullmq_redis::RedisBackend;

/// Child id of the WorkerSupervisor under the root.
const WORKER_SUPERVISOR_ID: &str = "worker_supervisor";
/// Child id of the QueueEventsSupervisor under the root.
const QUEUE_EVENTS_SUPERVISOR_ID: &str = "queue_events_supervisor";

/// Gives each unnamed runtime of the process a distinct registry prefix.
static NEXT_RUNTIME: AtomicU64 = AtomicU64::new(1);

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
/// use ractor_bullmq::runtime::{Runtime, RuntimeOptions};
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
    pub(super) name: String,
    pub(super) root: SupervisorRef,
    pub(super) events: broadcast::Sender<RuntimeEvent>,
    pub(super) backend: Arc<dyn Backend>,
    pub(super) worker_shutdown: Duration,
    pub(super) force_at: ForceDeadline,
    pub(super) next_id: Arc<AtomicU64>,
    /// QueueEvents started through this runtime: their subscriptions end at shutdown.
    pub(super) queue_events: Arc<std::sync::Mutex<Vec<QueueEventsHandle>>>,
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
        .map_err(|e| SupervisionError::start_failed(name.clone(), e))?;
        tracing::info!(runtime = %name, "runtime started");
        Ok(Self {
            name,
            root,
            events,
            backend: options
                .backend
                .unwrap_or_else(|| Arc::new(RedisBackend::new(options.connection))),
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
        SupervisorRef::lookup(&workers_name(&self.name))
    }

    /// The current QueueEventsSupervisor (looked up by name).
    ///
    /// # Errors
    ///
    /// [`SupervisionError::NotRunning`] while it is stopped or being restarted.
    pub fn queue_events_supervisor(&self) -> Result<SupervisorRef, SupervisionError> {
        SupervisorRef::lookup(&queue_events_name(&self.name))
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
    /// report to the same stream (pass it to
    /// [`SupervisorOptions::events`](crate::supervision::SupervisorOptions::events)).
    pub fn event_sender(&self) -> broadcast::Sender<RuntimeEvent> {
        self.events.clone()
    }

    /// The backend the runtime's Workers use.
    pub fn backend(&self) -> &Arc<dyn Backend> {
        &self.backend
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
        let now = Instant::now();
        self.force_at
            .set(now + timeout.saturating_sub(reserve), now + timeout);
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

pub(super) fn workers_name(runtime: &str) -> String {
    format!("{runtime}.workers")
}

fn queue_events_name(runtime: &str) -> String {
    format!("{runtime}.queue_events")
}
