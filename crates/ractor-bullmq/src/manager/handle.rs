//! [`WorkerManagerHandle`]: typed control of a WorkerManager, wherever it runs.

use ractor::ActorRef;

use super::worker_manager::WorkerManagerMsg;
use crate::supervision::{SupervisionError, SupervisorLocator};
use crate::worker::SupervisedWorker;

/// Controls one WorkerManager. Cheap to clone. When the manager runs under a supervisor (the
/// Runtime's root) the handle finds its current incarnation by child id at every call.
#[derive(Debug, Clone)]
pub struct WorkerManagerHandle {
    target: Target,
    workers: SupervisorLocator,
}

#[derive(Debug, Clone)]
enum Target {
    Actor(ActorRef<WorkerManagerMsg>),
    Child {
        supervisor: SupervisorLocator,
        id: String,
    },
}

impl WorkerManagerHandle {
    /// A handle on a manager actor you spawned yourself; `workers` is where its Workers live.
    pub fn new(actor: ActorRef<WorkerManagerMsg>, workers: SupervisorLocator) -> Self {
        Self {
            target: Target::Actor(actor),
            workers,
        }
    }

    /// A handle on the manager that is child `id` of `supervisor`.
    pub fn child(
        supervisor: SupervisorLocator,
        id: impl Into<String>,
        workers: SupervisorLocator,
    ) -> Self {
        Self {
            target: Target::Child {
                supervisor,
                id: id.into(),
            },
            workers,
        }
    }

    /// The manager actor now.
    ///
    /// # Errors
    ///
    /// [`SupervisionError::NotRunning`] while it is stopped or being restarted.
    pub async fn actor(&self) -> Result<ActorRef<WorkerManagerMsg>, SupervisionError> {
        match &self.target {
            Target::Actor(actor) => Ok(actor.clone()),
            Target::Child { supervisor, id } => supervisor
                .resolve()?
                .child(id)
                .await?
                .map(ActorRef::from)
                .ok_or_else(|| SupervisionError::NotRunning(id.clone())),
        }
    }

    async fn cast(&self, msg: WorkerManagerMsg) -> Result<(), SupervisionError> {
        let actor = self.actor().await?;
        actor
            .cast(msg)
            .map_err(|_| SupervisionError::NotRunning(actor.get_id().to_string()))
    }

    /// Starts `n` more Workers; returns the count afterwards (lower than asked when some could
    /// not start, e.g. Redis unreachable).
    ///
    /// # Errors
    ///
    /// [`SupervisionError::NotRunning`] when the manager is not running.
    pub async fn scale_up(&self, n: usize) -> Result<usize, SupervisionError> {
        self.cast(WorkerManagerMsg::ScaleUp(n)).await?;
        self.worker_count().await
    }

    /// Stops `n` Workers gracefully (most recent first): they stop fetching at once and finish
    /// their active jobs in the background, each within its shutdown budget. Returns the count
    /// afterwards (the draining Workers are no longer counted).
    ///
    /// # Errors
    ///
    /// [`SupervisionError::NotRunning`] when the manager is not running.
    pub async fn scale_down(&self, n: usize) -> Result<usize, SupervisionError> {
        self.cast(WorkerManagerMsg::ScaleDown { n, force: false })
            .await?;
        self.worker_count().await
    }

    /// Stops `n` Workers at once, cancelling their running jobs (stalled recovery gives those
    /// back to the queue). Returns the count afterwards.
    ///
    /// # Errors
    ///
    /// [`SupervisionError::NotRunning`] when the manager is not running.
    pub async fn scale_down_force(&self, n: usize) -> Result<usize, SupervisionError> {
        self.cast(WorkerManagerMsg::ScaleDown { n, force: true })
            .await?;
        self.worker_count().await
    }

    /// Workers running now.
    ///
    /// # Errors
    ///
    /// [`SupervisionError::NotRunning`] when the manager is not running.
    pub async fn worker_count(&self) -> Result<usize, SupervisionError> {
        let actor = self.actor().await?;
        ractor::call!(actor, WorkerManagerMsg::WorkerCount)
            .map_err(|_| SupervisionError::NotRunning(actor.get_id().to_string()))
    }

    /// Handles on the Workers (each follows its Worker across restarts).
    ///
    /// # Errors
    ///
    /// [`SupervisionError::NotRunning`] when the manager is not running.
    pub async fn workers(&self) -> Result<Vec<SupervisedWorker>, SupervisionError> {
        let actor = self.actor().await?;
        let ids = ractor::call!(actor, WorkerManagerMsg::Workers)
            .map_err(|_| SupervisionError::NotRunning(actor.get_id().to_string()))?;
        Ok(ids
            .into_iter()
            .map(|id| SupervisedWorker::new(id, self.workers.clone()))
            .collect())
    }
}
