//! Typed handle over a supervisor actor: the RPCs of [`SupervisorMsg`] as async methods.

use std::time::Duration;

use ractor::rpc::CallResult;
use ractor::{ActorCell, ActorRef, RactorErr};

use super::child_spec::ChildSpec;
use super::error::SupervisionError;
use super::supervisor::{ChildInfo, SupervisorMsg};

/// A cheap, clonable handle to a running [`Supervisor`](super::Supervisor).
#[derive(Debug, Clone)]
pub struct SupervisorRef {
    actor: ActorRef<SupervisorMsg>,
}

impl SupervisorRef {
    /// Wraps an actor reference.
    pub fn new(actor: ActorRef<SupervisorMsg>) -> Self {
        Self { actor }
    }

    /// The underlying actor.
    pub fn actor(&self) -> &ActorRef<SupervisorMsg> {
        &self.actor
    }

    /// The underlying actor's cell (to pass as a parent to `spawn_linked`).
    pub fn cell(&self) -> ActorCell {
        self.actor.get_cell()
    }

    /// The supervisor's registry name, or its actor id.
    pub fn name(&self) -> String {
        self.actor
            .get_name()
            .unwrap_or_else(|| format!("supervisor-{}", self.actor.get_id()))
    }

    async fn call<T: Send + 'static>(
        &self,
        build: impl FnOnce(ractor::RpcReplyPort<T>) -> SupervisorMsg,
    ) -> Result<T, SupervisionError> {
        // No timeout: every supervisor operation is bounded by the children's own start and
        // shutdown times, and a dead supervisor drops the reply port, which ends the call.
        match self.actor.call(build, None).await {
            Ok(CallResult::Success(value)) => Ok(value),
            Ok(_) | Err(_) => Err(SupervisionError::NotRunning(self.name())),
        }
    }

    /// Starts a new child at the end of the start order and returns its cell. Convert it with
    /// `ActorRef::<M>::from(cell)` when the message type is known.
    ///
    /// # Errors
    ///
    /// [`SupervisionError::DuplicateChild`], [`SupervisionError::StartFailed`],
    /// [`SupervisionError::NotLinked`], or [`SupervisionError::NotRunning`].
    ///
    /// # Cancel safety
    ///
    /// Not cancel safe: if dropped after sending, the child may still be started.
    pub async fn start_child(&self, spec: ChildSpec) -> Result<ActorCell, SupervisionError> {
        self.call(|reply| SupervisorMsg::StartChild(spec, reply))
            .await?
    }

    /// Stops the child `id` gracefully (killing it after its shutdown timeout) and removes it;
    /// it is not restarted.
    ///
    /// # Errors
    ///
    /// [`SupervisionError::UnknownChild`] or [`SupervisionError::NotRunning`].
    pub async fn terminate_child(&self, id: &str) -> Result<(), SupervisionError> {
        let id = id.to_owned();
        self.call(|reply| SupervisorMsg::TerminateChild(id, reply))
            .await?
    }

    /// As [`terminate_child`](Self::terminate_child), giving the child `budget` instead of its
    /// shutdown timeout to stop (a Worker spec treats zero as a forced close).
    ///
    /// # Errors
    ///
    /// [`SupervisionError::UnknownChild`] or [`SupervisionError::NotRunning`].
    pub async fn terminate_child_within(
        &self,
        id: &str,
        budget: Duration,
    ) -> Result<(), SupervisionError> {
        let id = id.to_owned();
        self.call(|reply| SupervisorMsg::TerminateChildWithin(id, budget, reply))
            .await?
    }

    /// Finds a running supervisor registered as `name` (e.g. `"<runtime>.workers"`).
    ///
    /// # Errors
    ///
    /// [`SupervisionError::NotRunning`] when no running actor has that name.
    pub fn lookup(name: &str) -> Result<Self, SupervisionError> {
        ActorRef::<SupervisorMsg>::where_is(name)
            .filter(|a| a.get_status() < ractor::ActorStatus::Stopping)
            .map(Self::new)
            .ok_or_else(|| SupervisionError::NotRunning(name.to_owned()))
    }

    /// The children in start order.
    ///
    /// # Errors
    ///
    /// [`SupervisionError::NotRunning`].
    pub async fn which_children(&self) -> Result<Vec<ChildInfo>, SupervisionError> {
        self.call(SupervisorMsg::WhichChildren).await
    }

    /// The current incarnation of child `id`, if it is running.
    ///
    /// # Errors
    ///
    /// [`SupervisionError::NotRunning`].
    pub async fn child(&self, id: &str) -> Result<Option<ActorCell>, SupervisionError> {
        Ok(self
            .which_children()
            .await?
            .into_iter()
            .find(|c| c.id == id)
            .and_then(|c| c.cell))
    }

    /// Stops the supervisor gracefully (children in reverse start order) and waits up to
    /// `timeout`, after which the supervisor and what is left of its tree are killed.
    ///
    /// # Errors
    ///
    /// [`SupervisionError::ShutdownTimedOut`] when the timeout was hit.
    pub async fn shutdown(&self, timeout: Duration) -> Result<(), SupervisionError> {
        match self
            .actor
            .stop_and_wait(
                Some(super::strategy::SHUTDOWN_REASON.to_owned()),
                Some(timeout),
            )
            .await
        {
            Err(RactorErr::Timeout) => {
                tracing::error!(supervisor = %self.name(), ?timeout, "shutdown timed out; killing");
                // Killing skips post_stop; ractor then kills every remaining descendant.
                let _ = self.actor.kill_and_wait(Some(Duration::from_secs(5))).await;
                Err(SupervisionError::ShutdownTimedOut(timeout))
            }
            // Ok, or it had already stopped.
            _ => Ok(()),
        }
    }
}
