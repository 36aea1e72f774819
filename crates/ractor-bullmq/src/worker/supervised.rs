//! [`SupervisedWorker`]: a handle on a Worker running under a supervisor, that follows it
//! across restarts.

use std::time::Duration;

use ractor::ActorRef;

use super::worker::WorkerMsg;
use crate::supervision::{SupervisionError, SupervisorLocator};

/// A Worker running under a supervisor, addressed by its child id: every call resolves the
/// current incarnation, so the handle keeps working after the Worker was restarted.
#[derive(Debug, Clone)]
pub struct SupervisedWorker {
    id: String,
    supervisor: SupervisorLocator,
}

impl SupervisedWorker {
    /// A handle on child `id` of the supervisor `supervisor` points at.
    pub fn new(id: impl Into<String>, supervisor: SupervisorLocator) -> Self {
        Self {
            id: id.into(),
            supervisor,
        }
    }

    /// The child id (e.g. `emails#1`).
    pub fn id(&self) -> &str {
        &self.id
    }

    /// The current Worker actor; `None` while it is being restarted or after it stopped.
    pub async fn actor(&self) -> Option<ActorRef<WorkerMsg>> {
        let supervisor = self.supervisor.resolve().ok()?;
        let cell = supervisor.child(&self.id).await.ok()??;
        Some(cell.into())
    }

    /// How many times the supervisor restarted this Worker; `None` when it is not a child.
    ///
    /// # Errors
    ///
    /// [`SupervisionError::NotRunning`] when the supervisor is not running.
    pub async fn restarts(&self) -> Result<Option<u32>, SupervisionError> {
        Ok(self
            .supervisor
            .resolve()?
            .which_children()
            .await?
            .into_iter()
            .find(|c| c.id == self.id)
            .map(|c| c.restarts))
    }

    async fn current(&self) -> Result<ActorRef<WorkerMsg>, SupervisionError> {
        self.actor()
            .await
            .ok_or_else(|| SupervisionError::NotRunning(self.id.clone()))
    }

    /// Stops fetching new jobs; running jobs continue. A restarted Worker fetches again.
    ///
    /// # Errors
    ///
    /// [`SupervisionError::NotRunning`] when no incarnation is running.
    pub async fn pause(&self) -> Result<(), SupervisionError> {
        self.current()
            .await?
            .cast(WorkerMsg::Pause)
            .map_err(|_| SupervisionError::NotRunning(self.id.clone()))
    }

    /// Fetches again after [`SupervisedWorker::pause`].
    ///
    /// # Errors
    ///
    /// [`SupervisionError::NotRunning`] when no incarnation is running.
    pub async fn resume(&self) -> Result<(), SupervisionError> {
        self.current()
            .await?
            .cast(WorkerMsg::Resume)
            .map_err(|_| SupervisionError::NotRunning(self.id.clone()))
    }

    /// Jobs the current incarnation is running.
    ///
    /// # Errors
    ///
    /// [`SupervisionError::NotRunning`] when no incarnation is running.
    pub async fn active_count(&self) -> Result<usize, SupervisionError> {
        ractor::call!(self.current().await?, WorkerMsg::ActiveCount)
            .map_err(|_| SupervisionError::NotRunning(self.id.clone()))
    }

    /// Cancels a job the current incarnation runs, as
    /// [`WorkerHandle::cancel_job`](super::WorkerHandle::cancel_job); `Ok(false)` when it does
    /// not run it.
    ///
    /// # Errors
    ///
    /// [`SupervisionError::NotRunning`] when no incarnation is running.
    pub async fn cancel_job(
        &self,
        job_id: &str,
        reason: Option<&str>,
    ) -> Result<bool, SupervisionError> {
        ractor::call!(self.current().await?, |reply| WorkerMsg::CancelJob {
            job_id: job_id.to_string(),
            reason: reason.map(str::to_string),
            reply,
        })
        .map_err(|_| SupervisionError::NotRunning(self.id.clone()))
    }

    /// Cancels every job the current incarnation runs, as
    /// [`WorkerHandle::cancel_all_jobs`](super::WorkerHandle::cancel_all_jobs).
    ///
    /// # Errors
    ///
    /// [`SupervisionError::NotRunning`] when no incarnation is running.
    pub async fn cancel_all_jobs(&self, reason: Option<&str>) -> Result<usize, SupervisionError> {
        ractor::call!(self.current().await?, |reply| WorkerMsg::CancelAllJobs {
            reason: reason.map(str::to_string),
            reply,
        })
        .map_err(|_| SupervisionError::NotRunning(self.id.clone()))
    }

    /// Changes the current incarnation's concurrency, as
    /// [`WorkerHandle::set_concurrency`](super::WorkerHandle::set_concurrency) (0 is taken as
    /// 1). A restarted Worker starts again with its spec's concurrency.
    ///
    /// # Errors
    ///
    /// [`SupervisionError::NotRunning`] when no incarnation is running.
    pub async fn set_concurrency(&self, concurrency: usize) -> Result<(), SupervisionError> {
        self.current()
            .await?
            .cast(WorkerMsg::SetConcurrency(concurrency))
            .map_err(|_| SupervisionError::NotRunning(self.id.clone()))
    }

    /// Whether an incarnation is running and fetching.
    pub async fn is_running(&self) -> bool {
        match self.actor().await {
            Some(actor) => ractor::call!(actor, WorkerMsg::IsRunning).unwrap_or(false),
            None => false,
        }
    }

    /// Whether the current incarnation is paused, as
    /// [`WorkerHandle::is_paused`](super::WorkerHandle::is_paused) (Node `worker.isPaused()`);
    /// `false` when none is running. A restarted Worker starts unpaused.
    pub async fn is_paused(&self) -> bool {
        match self.actor().await {
            Some(actor) => ractor::call!(actor, WorkerMsg::IsPaused).unwrap_or(false),
            None => false,
        }
    }

    /// Graceful close: removes the child from its supervisor (never restarted) and waits while
    /// the Worker finishes its active jobs, within the spec's shutdown budget.
    ///
    /// # Errors
    ///
    /// [`SupervisionError::UnknownChild`] when it was already closed,
    /// [`SupervisionError::NotRunning`] when the supervisor is gone.
    pub async fn close(&self) -> Result<(), SupervisionError> {
        self.supervisor.resolve()?.terminate_child(&self.id).await
    }

    /// Forced close: cancels running jobs at once (they are left to stalled recovery).
    ///
    /// # Errors
    ///
    /// As [`SupervisedWorker::close`].
    pub async fn close_force(&self) -> Result<(), SupervisionError> {
        self.supervisor
            .resolve()?
            .terminate_child_within(&self.id, Duration::ZERO)
            .await
    }
}
