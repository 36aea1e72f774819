//! How a supervisor starts (and restarts) one child.

use std::fmt;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use ractor::{Actor, ActorCell, SpawnErr};

use super::backoff::Backoff;
use super::strategy::Restart;

/// The start function of a child: given the supervisor's cell, spawn the child **linked to it**
/// and return the child's cell. It is called again, with the same supervisor, on every restart,
/// so it must build fresh arguments each time.
pub type StartFn =
    Arc<dyn Fn(ActorCell) -> BoxFuture<'static, Result<ActorCell, SpawnErr>> + Send + Sync>;

/// A graceful-stop hook: given the running child and the time it may take, make it exit (for
/// a Worker: close, letting active jobs finish). The supervisor waits for the hook at most that
/// long, then stops the child the ordinary way and kills it if it is still there.
pub type StopFn = Arc<dyn Fn(ActorCell, Duration) -> BoxFuture<'static, ()> + Send + Sync>;

/// Default time a child gets to stop gracefully before it is killed (OTP's worker default).
pub const DEFAULT_SHUTDOWN: Duration = Duration::from_secs(5);

/// Everything a supervisor needs to start, restart and stop one child of any actor type.
///
/// # Examples
///
/// ```
/// use ractor::{Actor, ActorProcessingErr, ActorRef};
/// use ractor_bullmq::supervision::{ChildSpec, Restart};
///
/// struct Echo;
/// impl Actor for Echo {
///     type Msg = String;
///     type State = ();
///     type Arguments = ();
///     async fn pre_start(&self, _: ActorRef<String>, _: ()) -> Result<(), ActorProcessingErr> {
///         Ok(())
///     }
/// }
///
/// // Typed shortcut: a factory producing the handler and fresh arguments per (re)start.
/// let spec = ChildSpec::for_actor("echo", || (Echo, ())).restart(Restart::Transient);
/// assert_eq!(spec.id(), "echo");
///
/// // General form: any async code that spawns an actor linked to `supervisor`.
/// let spec = ChildSpec::new("echo-2", |supervisor| async move {
///     let (actor, _) = Actor::spawn_linked(None, Echo, (), supervisor).await?;
///     Ok(actor.get_cell())
/// });
/// assert_eq!(spec.restart_policy(), Restart::Permanent);
/// ```
#[derive(Clone)]
pub struct ChildSpec {
    id: String,
    start: StartFn,
    restart: Restart,
    shutdown: Duration,
    backoff: Option<Backoff>,
    stop: Option<StopFn>,
}

impl ChildSpec {
    /// A child named `id` (unique among its supervisor's children; not a registry name)
    /// started by `start`, which must spawn the actor with `spawn_linked(.., supervisor)`.
    /// Defaults: [`Restart::Permanent`], [`DEFAULT_SHUTDOWN`], the supervisor's backoff.
    pub fn new<F, Fut>(id: impl Into<String>, start: F) -> Self
    where
        F: Fn(ActorCell) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<ActorCell, SpawnErr>> + Send + 'static,
    {
        let start: StartFn = Arc::new(move |supervisor| Box::pin(start(supervisor)));
        Self {
            id: id.into(),
            start,
            restart: Restart::default(),
            shutdown: DEFAULT_SHUTDOWN,
            backoff: None,
            stop: None,
        }
    }

    /// A child spawned (unnamed, linked) from the handler and arguments `make` returns; `make`
    /// runs on every (re)start so each incarnation gets fresh arguments.
    pub fn for_actor<A, F>(id: impl Into<String>, make: F) -> Self
    where
        A: Actor,
        F: Fn() -> (A, A::Arguments) + Send + Sync + 'static,
    {
        let make = Arc::new(make);
        Self::new(id, move |supervisor| {
            let (handler, args) = make();
            async move {
                let (actor, _) = Actor::spawn_linked(None, handler, args, supervisor).await?;
                Ok(actor.get_cell())
            }
        })
    }

    /// Sets the restart policy (default [`Restart::Permanent`]).
    pub fn restart(mut self, restart: Restart) -> Self {
        self.restart = restart;
        self
    }

    /// Sets how long the child may take to stop gracefully before it is killed (default 5 s).
    /// Give supervisors and Workers draining jobs a longer value.
    pub fn shutdown(mut self, shutdown: Duration) -> Self {
        self.shutdown = shutdown;
        self
    }

    /// Overrides the supervisor's [`Backoff`] for this child.
    pub fn backoff(mut self, backoff: Backoff) -> Self {
        self.backoff = Some(backoff);
        self
    }

    /// Sets a graceful-stop hook, run instead of a plain `stop` whenever the supervisor stops this
    /// child (terminate, shutdown, a sibling's restart, give-up). It receives the child and the
    /// time it may take (the shutdown timeout, or the budget given to
    /// [`SupervisorRef::terminate_child_within`](super::SupervisorRef::terminate_child_within));
    /// when it returns or the time is up, a child still running is stopped and then killed.
    pub fn graceful_stop<F, Fut>(mut self, stop: F) -> Self
    where
        F: Fn(ActorCell, Duration) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = ()> + Send + 'static,
    {
        self.stop = Some(Arc::new(move |cell, budget| Box::pin(stop(cell, budget))));
        self
    }

    /// The graceful-stop hook, if any.
    pub fn stop_hook(&self) -> Option<StopFn> {
        self.stop.clone()
    }

    /// The child's id within its supervisor.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// The restart policy.
    pub fn restart_policy(&self) -> Restart {
        self.restart
    }

    /// The graceful-stop timeout.
    pub fn shutdown_timeout(&self) -> Duration {
        self.shutdown
    }

    /// The per-child backoff override, if any.
    pub fn backoff_override(&self) -> Option<Backoff> {
        self.backoff
    }

    /// Runs the start function once.
    pub(crate) fn start(
        &self,
        supervisor: ActorCell,
    ) -> BoxFuture<'static, Result<ActorCell, SpawnErr>> {
        (self.start)(supervisor)
    }
}

impl fmt::Debug for ChildSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ChildSpec")
            .field("id", &self.id)
            .field("restart", &self.restart)
            .field("shutdown", &self.shutdown)
            .field("backoff", &self.backoff)
            .field("graceful_stop", &self.stop.is_some())
            .finish_non_exhaustive()
    }
}
