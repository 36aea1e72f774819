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
use std::time::Duration;

use ractor::{ActorCell, ActorRef, ActorStatus};
use tokio::sync::broadcast;

use super::child_spec::ChildSpec;
use super::dynamic::DynamicSupervisor;
use super::error::SupervisionError;
use super::event::RuntimeEvent;
use super::handle::SupervisorRef;
use super::options::SupervisorOptions;
use super::supervisor::{Supervisor, SupervisorMsg};

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
}

impl Default for RuntimeOptions {
    fn default() -> Self {
        Self {
            name: None,
            root: SupervisorOptions::default(),
            worker_supervisor: SupervisorOptions::default(),
            queue_events_supervisor: SupervisorOptions::default(),
            event_capacity: 1024,
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
        Ok(Self { name, root, events })
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

    /// Graceful shutdown: the root stops its children in reverse start order (root-level
    /// children such as WorkerManagers first, then the QueueEventsSupervisor, then the
    /// WorkerSupervisor), each supervisor doing the same with its own children within their
    /// shutdown timeouts. After `timeout` whatever is left is killed.
    ///
    /// # Errors
    ///
    /// [`SupervisionError::ShutdownTimedOut`] when the timeout was hit.
    pub async fn shutdown(&self, timeout: Duration) -> Result<(), SupervisionError> {
        tracing::info!(runtime = %self.name, ?timeout, "runtime shutting down");
        let result = self.root.shutdown(timeout).await;
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
