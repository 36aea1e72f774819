//! Supervised Workers: [`Runtime::start_worker`] and friends start a [`WorkerSpec`] under the
//! WorkerSupervisor and return a [`SupervisedWorker`] that follows it across restarts.

use std::sync::atomic::Ordering;

use super::runtime::{workers_name, Branch, Runtime};
use crate::supervision::{SupervisionError, SupervisorLocator};
use crate::worker::{Processor, SupervisedWorker, WorkerOptions, WorkerSpec};

impl Runtime {
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
}
