//! WorkerManagers under the Runtime's root: N Workers of one queue, whose Workers live under the
//! WorkerSupervisor.

use ractor::Actor;

use super::runtime::{workers_name, Branch, Runtime};
use crate::manager::{WorkerManager, WorkerManagerArgs, WorkerManagerHandle, WorkerManagerOptions};
use crate::supervision::{ChildSpec, Restart, SupervisionError, SupervisorLocator};
use crate::worker::{Processor, WorkerOptions, WorkerSpec};

impl Runtime {
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
            autoscale
                .validate()
                .map_err(SupervisionError::invalid_option)?;
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
}
