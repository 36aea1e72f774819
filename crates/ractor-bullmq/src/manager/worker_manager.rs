//! The WorkerManager actor: runs N Workers of one queue and processor, scaled on demand or by
//! an autoscaling policy.
//!
//! Its Workers are children of a WorkerSupervisor (the Runtime's, or any dynamic supervisor),
//! with ids `<prefix>#1`, `<prefix>#2`, … (the prefix defaults to the queue name): the
//! supervisor restarts a crashed Worker, the manager decides how many there are. Scaling down
//! stops the most recently started Workers first; gracefully, each finishes its active jobs
//! (within its shutdown budget) in the background, so the manager stays responsive; forced, each
//! cancels its running jobs, which stalled recovery gives back to the queue.
//!
//! # Supervision
//!
//! Under the Runtime the manager is a child of the root. A restarted manager adopts the Workers
//! with its prefix still running under the WorkerSupervisor (its previous incarnation's), and
//! starts the initial number only when it finds none. Stopping the manager does not stop its
//! Workers: they belong to the WorkerSupervisor (scale down to 0 first to stop them).

use ractor::{Actor, ActorProcessingErr, ActorRef, RpcReplyPort};
use tokio::task::JoinHandle;

use super::autoscale::{Autoscale, AutoscaleInput};
use crate::error::QueueError;
use crate::queue::{JobCounts, Queue, QueueOptions};
use crate::supervision::SupervisorLocator;
use crate::worker::{SupervisedWorker, WorkerSpec};

/// Messages of the WorkerManager.
#[derive(Debug)]
pub enum WorkerManagerMsg {
    /// Start `n` more Workers.
    ScaleUp(usize),
    /// Stop `n` Workers (the most recent first); `force` cancels their running jobs instead of
    /// letting them finish.
    ScaleDown {
        /// How many.
        n: usize,
        /// Cancel running jobs (left to stalled recovery) rather than wait for them.
        force: bool,
    },
    /// How many Workers run now (after every message sent before this one).
    WorkerCount(RpcReplyPort<usize>),
    /// The child ids of the Workers, in start order.
    Workers(RpcReplyPort<Vec<String>>),
    /// Evaluate the autoscaling policy now (also sent by the manager's own timer).
    AutoscaleTick,
    /// Messages the manager's own tasks send it.
    Internal(ManagerInternal),
}

/// An internal message (opaque outside the crate).
#[derive(Debug)]
pub struct ManagerInternal(Internal);

#[derive(Debug)]
enum Internal {
    /// Adopt or start the initial Workers (sent once by `pre_start`).
    Init,
    /// Job counts read for an autoscale evaluation.
    Counts(Result<JobCounts, QueueError>),
}

/// Options of a WorkerManager.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct WorkerManagerOptions {
    /// Workers started initially. Default 1.
    pub workers: usize,
    /// Prefix of the Workers' child ids (`<prefix>#<n>`). Default: the queue name.
    pub id_prefix: Option<String>,
    /// Optional autoscaling policy; when set, `workers` is clamped to its bounds at start.
    pub autoscale: Option<Autoscale>,
}

impl Default for WorkerManagerOptions {
    fn default() -> Self {
        Self {
            workers: 1,
            id_prefix: None,
            autoscale: None,
        }
    }
}

impl WorkerManagerOptions {
    /// Default options (1 worker, no autoscaling).
    pub fn new() -> Self {
        Self::default()
    }

    /// Sets the initial number of Workers.
    #[must_use]
    pub fn workers(mut self, workers: usize) -> Self {
        self.workers = workers;
        self
    }

    /// Sets the child id prefix.
    #[must_use]
    pub fn id_prefix(mut self, prefix: impl Into<String>) -> Self {
        self.id_prefix = Some(prefix.into());
        self
    }

    /// Sets the autoscaling policy.
    #[must_use]
    pub fn autoscale(mut self, autoscale: Autoscale) -> Self {
        self.autoscale = Some(autoscale);
        self
    }
}

/// Start arguments of a WorkerManager.
#[derive(Debug, Clone)]
pub struct WorkerManagerArgs {
    /// How each Worker is started (queue, processor, options).
    pub spec: WorkerSpec,
    /// The supervisor the Workers live under.
    pub supervisor: SupervisorLocator,
    /// Scaling options.
    pub options: WorkerManagerOptions,
}

/// State of a WorkerManager.
pub struct WorkerManagerState {
    args: WorkerManagerArgs,
    prefix: String,
    /// Child ids, in start order.
    workers: Vec<String>,
    next: u64,
    queue: Option<Queue>,
    reading: bool,
    timer: Option<JoinHandle<()>>,
}

impl std::fmt::Debug for WorkerManagerState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WorkerManagerState")
            .field("prefix", &self.prefix)
            .field("workers", &self.workers)
            .finish_non_exhaustive()
    }
}

/// The WorkerManager actor: starts and stops the Workers of one queue and processor under the
/// WorkerSupervisor, on `ScaleUp` / `ScaleDown` messages or its autoscaling policy.
#[derive(Debug, Clone, Copy, Default)]
pub struct WorkerManager;

impl Actor for WorkerManager {
    type Msg = WorkerManagerMsg;
    type State = WorkerManagerState;
    type Arguments = WorkerManagerArgs;

    async fn pre_start(
        &self,
        myself: ActorRef<Self::Msg>,
        args: Self::Arguments,
    ) -> Result<Self::State, ActorProcessingErr> {
        args.spec.validate()?;
        if let Some(autoscale) = &args.options.autoscale {
            autoscale.validate()?;
        }
        let prefix = args
            .options
            .id_prefix
            .clone()
            .unwrap_or_else(|| args.spec.queue().to_owned());
        // The supervisors are not touched here: the parent may be waiting for this spawn.
        myself.cast(WorkerManagerMsg::Internal(ManagerInternal(Internal::Init)))?;
        Ok(WorkerManagerState {
            args,
            prefix,
            workers: Vec::new(),
            next: 1,
            queue: None,
            reading: false,
            timer: None,
        })
    }

    async fn post_stop(
        &self,
        _myself: ActorRef<Self::Msg>,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        if let Some(timer) = state.timer.take() {
            timer.abort();
        }
        if let Some(queue) = state.queue.take() {
            let _ = queue.close().await;
        }
        Ok(())
    }

    async fn handle(
        &self,
        myself: ActorRef<Self::Msg>,
        message: Self::Msg,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        match message {
            WorkerManagerMsg::ScaleUp(n) => state.scale_up(n).await,
            WorkerManagerMsg::ScaleDown { n, force } => state.scale_down(n, force),
            WorkerManagerMsg::WorkerCount(reply) => {
                state.reconcile().await;
                let _ = reply.send(state.workers.len());
            }
            WorkerManagerMsg::Workers(reply) => {
                state.reconcile().await;
                let _ = reply.send(state.workers.clone());
            }
            WorkerManagerMsg::AutoscaleTick => state.read_counts(&myself),
            WorkerManagerMsg::Internal(ManagerInternal(Internal::Init)) => {
                state.init(&myself).await?;
            }
            WorkerManagerMsg::Internal(ManagerInternal(Internal::Counts(counts))) => {
                state.reading = false;
                state.autoscale(counts).await;
            }
        }
        Ok(())
    }
}

// ---- scaling --------------------------------------------------------------------------------

impl WorkerManagerState {
    fn is_mine(&self, id: &str) -> Option<u64> {
        id.strip_prefix(&self.prefix)?
            .strip_prefix('#')?
            .parse()
            .ok()
    }

    async fn init(
        &mut self,
        myself: &ActorRef<WorkerManagerMsg>,
    ) -> Result<(), ActorProcessingErr> {
        // Adopt the Workers a previous incarnation of this manager started.
        if let Ok(supervisor) = self.args.supervisor.resolve() {
            if let Ok(children) = supervisor.which_children().await {
                for child in children {
                    if let Some(n) = self.is_mine(&child.id) {
                        self.next = self.next.max(n + 1);
                        self.workers.push(child.id);
                    }
                }
            }
        }
        if self.workers.is_empty() {
            let mut initial = self.args.options.workers;
            if let Some(autoscale) = &self.args.options.autoscale {
                initial = initial.clamp(autoscale.min, autoscale.max);
            }
            self.scale_up(initial).await;
        } else {
            tracing::info!(manager = %self.prefix, workers = self.workers.len(), "adopted running workers");
        }
        if let Some(autoscale) = &self.args.options.autoscale {
            let options = QueueOptions::new(self.args.spec.connection().clone())
                .prefix(self.args.spec.options().prefix.clone());
            let queue = Queue::new(self.args.spec.queue(), options).await?;
            self.queue = Some(queue);
            self.timer =
                Some(myself.send_interval(autoscale.interval, || WorkerManagerMsg::AutoscaleTick));
        }
        Ok(())
    }

    async fn scale_up(&mut self, n: usize) {
        let supervisor = match self.args.supervisor.resolve() {
            Ok(supervisor) => supervisor,
            Err(error) => {
                tracing::warn!(manager = %self.prefix, %error, "cannot scale up: no worker supervisor");
                return;
            }
        };
        for _ in 0..n {
            let id = format!("{}#{}", self.prefix, self.next);
            self.next += 1;
            match supervisor
                .start_child(self.args.spec.child_spec(id.clone()))
                .await
            {
                Ok(_) => self.workers.push(id),
                Err(error) => {
                    // Redis unreachable, typically: stop trying this round; the caller sees the
                    // count, autoscaling tries again at its next tick.
                    tracing::warn!(manager = %self.prefix, worker = %id, %error, "worker failed to start");
                    break;
                }
            }
        }
        tracing::info!(manager = %self.prefix, workers = self.workers.len(), "scaled up");
    }

    fn scale_down(&mut self, n: usize, force: bool) {
        let keep = self.workers.len().saturating_sub(n);
        let stopping = self.workers.split_off(keep);
        if stopping.is_empty() {
            return;
        }
        tracing::info!(manager = %self.prefix, ?stopping, force, "scaling down");
        let supervisor = self.args.supervisor.clone();
        // Stopped in the background: a graceful stop lasts as long as the longest active job.
        for id in stopping.into_iter().rev() {
            let worker = SupervisedWorker::new(id, supervisor.clone());
            tokio::spawn(async move {
                let result = if force {
                    worker.close_force().await
                } else {
                    worker.close().await
                };
                if let Err(error) = result {
                    tracing::debug!(worker = worker.id(), %error, "worker already gone at scale down");
                }
            });
        }
    }

    /// Forgets Workers the supervisor no longer has (it gave up and was restarted empty).
    async fn reconcile(&mut self) {
        let Ok(supervisor) = self.args.supervisor.resolve() else {
            self.workers.clear();
            return;
        };
        if let Ok(children) = supervisor.which_children().await {
            self.workers
                .retain(|id| children.iter().any(|c| &c.id == id));
        }
    }

    fn read_counts(&mut self, myself: &ActorRef<WorkerManagerMsg>) {
        let Some(queue) = self.queue.clone() else {
            return;
        };
        if self.reading {
            return;
        }
        self.reading = true;
        let myself = myself.clone();
        tokio::spawn(async move {
            let counts = queue.get_job_counts().await;
            let _ = myself.cast(WorkerManagerMsg::Internal(ManagerInternal(
                Internal::Counts(counts),
            )));
        });
    }

    async fn autoscale(&mut self, counts: Result<JobCounts, QueueError>) {
        let Some(autoscale) = self.args.options.autoscale.clone() else {
            return;
        };
        let counts = match counts {
            Ok(counts) => counts,
            Err(error) => {
                tracing::warn!(manager = %self.prefix, %error, "autoscale: cannot read job counts");
                return;
            }
        };
        self.reconcile().await;
        let input = AutoscaleInput {
            waiting: counts.waiting + counts.prioritized,
            active: counts.active,
            current_workers: self.workers.len(),
        };
        let desired = autoscale.desired(input);
        let current = self.workers.len();
        if desired > current {
            tracing::info!(manager = %self.prefix, ?input, desired, "autoscale up");
            self.scale_up(desired - current).await;
        } else if desired < current {
            tracing::info!(manager = %self.prefix, ?input, desired, "autoscale down");
            self.scale_down(current - desired, false);
        }
    }
}
