//! The supervisor actor: starts children in order, restarts them by strategy, policy,
//! intensity and backoff, and stops them in reverse order.
//!
//! Messages: [`SupervisorMsg`] (start/terminate/list children; one internal timer message).
//! One actor type serves both the static supervisor (children given at start) and the dynamic
//! one (children added later with `start_child`), exactly as OTP's `supervisor` accepts
//! `start_child` whatever its initial child list.
//!
//! # Supervision
//!
//! Children must be spawned linked to this actor (their [`ChildSpec`] start function receives
//! its cell). When the restart intensity is exceeded this actor stops every child (reverse start
//! order) and then fails with [`SupervisionError::GaveUp`], so its own parent receives
//! `SupervisionEvent::ActorFailed`. A normal stop (`stop`, `stop_and_wait`, the Runtime's
//! shutdown) stops the children gracefully in reverse start order, each within its
//! `shutdown` timeout, after which it is killed.

use std::time::Duration;

use tokio::time::Instant;

use ractor::{
    Actor, ActorCell, ActorProcessingErr, ActorRef, ActorStatus, RactorErr, RpcReplyPort, SpawnErr,
    SupervisionEvent,
};
use tokio::task::JoinHandle;

use super::child_spec::ChildSpec;
use super::error::SupervisionError;
use super::event::RuntimeEvent;
use super::handle::SupervisorRef;
use super::options::SupervisorOptions;
use super::strategy::{ExitKind, Restart, RestartWindow, Strategy, SHUTDOWN_REASON};

/// How long a killed child may take to disappear before the supervisor moves on.
const KILL_WAIT: Duration = Duration::from_secs(5);

/// Shutdown timeout given to nested supervisors: effectively OTP's `infinity`, because a
/// supervisor's own children are each bounded by their own timeouts.
pub const SUPERVISOR_SHUTDOWN: Duration = Duration::from_secs(24 * 60 * 60);

/// Messages of the supervisor actor. Use [`SupervisorRef`] rather than sending them by hand.
#[derive(Debug)]
pub enum SupervisorMsg {
    /// Start a new child (appended to the start order); replies with its cell.
    StartChild(ChildSpec, RpcReplyPort<Result<ActorCell, SupervisionError>>),
    /// Stop a child gracefully and forget it (it is not restarted).
    TerminateChild(String, RpcReplyPort<Result<(), SupervisionError>>),
    /// As `TerminateChild`, giving the child `Duration` instead of its shutdown timeout (a
    /// Worker's graceful-stop hook treats zero as "cancel the running jobs now").
    TerminateChildWithin(String, Duration, RpcReplyPort<Result<(), SupervisionError>>),
    /// List the children in start order.
    WhichChildren(RpcReplyPort<Vec<ChildInfo>>),
    /// Internal: a restart backoff elapsed. Cannot be built outside this crate.
    RestartDue(RestartDue),
}

/// Marker carried by [`SupervisorMsg::RestartDue`]; only the supervisor creates it.
#[derive(Debug)]
pub struct RestartDue(());

/// A child as reported by [`SupervisorRef::which_children`].
#[derive(Debug, Clone)]
pub struct ChildInfo {
    /// The child's id.
    pub id: String,
    /// The running incarnation, or `None` while a restart is pending (backoff).
    pub cell: Option<ActorCell>,
    /// Its restart policy.
    pub restart: Restart,
    /// How many times it has been restarted.
    pub restarts: u32,
}

/// Start arguments of [`Supervisor`].
#[derive(Debug, Clone, Default)]
pub struct SupervisorArgs {
    /// Restart behaviour.
    pub options: SupervisorOptions,
    /// Children started in this order before the supervisor reports itself started.
    pub children: Vec<ChildSpec>,
}

/// The supervisor actor (static when given children, dynamic when children are added later).
#[derive(Debug, Clone, Copy, Default)]
pub struct Supervisor;

/// State of a [`Supervisor`].
#[derive(Debug)]
pub struct SupervisorState {
    name: String,
    options: SupervisorOptions,
    children: Vec<Child>,
    window: RestartWindow,
}

#[derive(Debug)]
struct Child {
    spec: ChildSpec,
    /// `None` while a restart is pending.
    cell: Option<ActorCell>,
    restarts: u32,
    /// Restarts since the child last ran for a whole intensity period (drives the backoff).
    consecutive: u32,
    started_at: Instant,
    /// Set while a restart is pending.
    pending: Option<Pending>,
}

/// A restart waiting for its backoff.
#[derive(Debug)]
struct Pending {
    /// Why the restart happens (for the event).
    reason: String,
    /// The backoff being waited.
    delay: Duration,
    /// Not restarted before this instant.
    due: Instant,
}

impl Supervisor {
    /// Spawns an unlinked supervisor, starting `children` in order. Fails if any child fails to
    /// start (the ones already started are stopped first).
    ///
    /// # Errors
    ///
    /// `SpawnErr` if the name is taken or a child failed to start.
    pub async fn spawn(
        name: Option<String>,
        options: SupervisorOptions,
        children: Vec<ChildSpec>,
    ) -> Result<(SupervisorRef, JoinHandle<()>), SpawnErr> {
        let args = SupervisorArgs { options, children };
        let (actor, handle) = Actor::spawn(name, Supervisor, args).await?;
        Ok((SupervisorRef::new(actor), handle))
    }

    /// As [`Supervisor::spawn`], linked to `parent` (which then sees this supervisor fail when
    /// it gives up).
    ///
    /// # Errors
    ///
    /// `SpawnErr` if the name is taken or a child failed to start.
    pub async fn spawn_linked(
        name: Option<String>,
        options: SupervisorOptions,
        children: Vec<ChildSpec>,
        parent: ActorCell,
    ) -> Result<(SupervisorRef, JoinHandle<()>), SpawnErr> {
        let args = SupervisorArgs { options, children };
        let (actor, handle) = Actor::spawn_linked(name, Supervisor, args, parent).await?;
        Ok((SupervisorRef::new(actor), handle))
    }

    /// A [`ChildSpec`] that runs a supervisor (registered as `name` if given) under another
    /// supervisor: permanent, with [`SUPERVISOR_SHUTDOWN`] as its shutdown timeout.
    pub fn child_spec(
        id: impl Into<String>,
        name: Option<String>,
        options: SupervisorOptions,
        children: Vec<ChildSpec>,
    ) -> ChildSpec {
        ChildSpec::new(id, move |parent| {
            let args = SupervisorArgs {
                options: options.clone(),
                children: children.clone(),
            };
            let name = name.clone();
            async move {
                let (actor, _) = Actor::spawn_linked(name, Supervisor, args, parent).await?;
                Ok(actor.get_cell())
            }
        })
        .shutdown(SUPERVISOR_SHUTDOWN)
    }
}

impl Actor for Supervisor {
    type Msg = SupervisorMsg;
    type State = SupervisorState;
    type Arguments = SupervisorArgs;

    async fn pre_start(
        &self,
        myself: ActorRef<SupervisorMsg>,
        args: SupervisorArgs,
    ) -> Result<SupervisorState, ActorProcessingErr> {
        let name = myself
            .get_name()
            .unwrap_or_else(|| format!("supervisor-{}", myself.get_id()));
        let mut state = SupervisorState {
            name,
            options: args.options,
            children: Vec::with_capacity(args.children.len()),
            window: RestartWindow::default(),
        };
        for spec in args.children {
            match state.spawn_child(&myself, &spec).await {
                Ok(cell) => state.push_started(spec, cell),
                Err(err) => {
                    // OTP semantics: a static supervisor whose child cannot start does not
                    // start either; undo what was started.
                    state.stop_all().await;
                    return Err(Box::new(err));
                }
            }
        }
        Ok(state)
    }

    async fn handle(
        &self,
        myself: ActorRef<SupervisorMsg>,
        msg: SupervisorMsg,
        state: &mut SupervisorState,
    ) -> Result<(), ActorProcessingErr> {
        match msg {
            SupervisorMsg::StartChild(spec, reply) => {
                let result = state.start_new_child(&myself, spec).await;
                // The caller may have given up waiting; that is not our failure.
                let _ = reply.send(result);
            }
            SupervisorMsg::TerminateChild(id, reply) => state.terminate_child(&id, None, reply),
            SupervisorMsg::TerminateChildWithin(id, budget, reply) => {
                state.terminate_child(&id, Some(budget), reply);
            }
            SupervisorMsg::WhichChildren(reply) => {
                let _ = reply.send(state.child_infos());
            }
            SupervisorMsg::RestartDue(_) => state.restart_pending(&myself).await?,
        }
        Ok(())
    }

    async fn handle_supervisor_evt(
        &self,
        myself: ActorRef<SupervisorMsg>,
        evt: SupervisionEvent,
        state: &mut SupervisorState,
    ) -> Result<(), ActorProcessingErr> {
        // Overriding this is the point: ractor's default stops the supervisor on any child exit.
        match evt {
            SupervisionEvent::ActorTerminated(cell, _, reason) => {
                let kind = ExitKind::classify_stop(reason.as_deref());
                let reason = reason.unwrap_or_else(|| "normal".to_owned());
                state.on_child_exit(&myself, &cell, kind, reason).await
            }
            SupervisionEvent::ActorFailed(cell, err) => {
                let reason = err.to_string();
                state
                    .on_child_exit(&myself, &cell, ExitKind::Abnormal, reason)
                    .await
            }
            _ => Ok(()),
        }
    }

    async fn post_stop(
        &self,
        _myself: ActorRef<SupervisorMsg>,
        state: &mut SupervisorState,
    ) -> Result<(), ActorProcessingErr> {
        // Graceful stop: ractor would kill the remaining children right after this returns, so
        // stop them ourselves first, in reverse start order, each within its timeout.
        state.stop_all().await;
        Ok(())
    }
}

// ---- child bookkeeping ----------------------------------------------------------------------

impl SupervisorState {
    fn emit(&self, event: RuntimeEvent) {
        if let Some(tx) = &self.options.events {
            // No subscriber is not an error: events are for whoever listens.
            let _ = tx.send(event);
        }
    }

    fn position_of_cell(&self, cell: &ActorCell) -> Option<usize> {
        let id = cell.get_id();
        self.children
            .iter()
            .position(|c| c.cell.as_ref().is_some_and(|x| x.get_id() == id))
    }

    fn child_infos(&self) -> Vec<ChildInfo> {
        self.children
            .iter()
            .map(|c| ChildInfo {
                id: c.spec.id().to_owned(),
                cell: c.cell.clone(),
                restart: c.spec.restart_policy(),
                restarts: c.restarts,
            })
            .collect()
    }

    fn push_started(&mut self, spec: ChildSpec, cell: ActorCell) {
        tracing::debug!(supervisor = %self.name, child = spec.id(), "child started");
        self.emit(RuntimeEvent::ChildStarted {
            supervisor: self.name.clone(),
            child: spec.id().to_owned(),
        });
        self.children.push(Child {
            spec,
            cell: Some(cell),
            restarts: 0,
            consecutive: 0,
            started_at: Instant::now(),
            pending: None,
        });
    }

    /// Runs the start function and checks the result is linked to this supervisor.
    async fn spawn_child(
        &self,
        myself: &ActorRef<SupervisorMsg>,
        spec: &ChildSpec,
    ) -> Result<ActorCell, SupervisionError> {
        let cell = spec
            .start(myself.get_cell())
            .await
            .map_err(|e| SupervisionError::start_failed(spec.id(), e))?;
        let linked_here = cell
            .try_get_supervisor()
            .is_some_and(|s| s.get_id() == myself.get_id());
        // A child that already exited has been unlinked by ractor; its exit event is queued
        // for us and is handled like any other exit.
        let already_gone = cell.get_status() >= ActorStatus::Stopping;
        if !linked_here && !already_gone {
            // Without the link we would never hear of its exit; refuse rather than leak it.
            cell.kill();
            return Err(SupervisionError::NotLinked {
                id: spec.id().to_owned(),
            });
        }
        Ok(cell)
    }

    async fn start_new_child(
        &mut self,
        myself: &ActorRef<SupervisorMsg>,
        spec: ChildSpec,
    ) -> Result<ActorCell, SupervisionError> {
        if self.children.iter().any(|c| c.spec.id() == spec.id()) {
            return Err(SupervisionError::DuplicateChild {
                supervisor: self.name.clone(),
                id: spec.id().to_owned(),
            });
        }
        let cell = self.spawn_child(myself, &spec).await?;
        self.push_started(spec, cell.clone());
        Ok(cell)
    }

    /// Detaches child `id` (so it is never restarted and its exit is ignored) and stops it in a
    /// task, which answers `reply` once the child is gone: a Worker draining its jobs for a
    /// minute does not hold up the other children's starts and restarts meanwhile.
    fn terminate_child(
        &mut self,
        id: &str,
        budget: Option<Duration>,
        reply: RpcReplyPort<Result<(), SupervisionError>>,
    ) {
        let Some(idx) = self.children.iter().position(|c| c.spec.id() == id) else {
            let _ = reply.send(Err(SupervisionError::UnknownChild {
                supervisor: self.name.clone(),
                id: id.to_owned(),
            }));
            return;
        };
        let child = self.children.remove(idx);
        let Some(cell) = child.cell else {
            // A pending restart is simply dropped.
            let _ = reply.send(Ok(()));
            return;
        };
        let name = self.name.clone();
        let options = self.options.clone();
        let timeout = budget.unwrap_or_else(|| child.spec.shutdown_timeout());
        tokio::spawn(async move {
            stop_child(&name, &options, &child.spec, &cell, timeout).await;
            let _ = reply.send(Ok(()));
        });
    }

    /// Stops one child gracefully, killing it after `timeout`. The child must already be
    /// detached from `children` so its exit event is ignored.
    async fn stop_child(&self, spec: &ChildSpec, cell: &ActorCell, timeout: Duration) {
        stop_child(&self.name, &self.options, spec, cell, timeout).await;
    }

    /// Stops every running child in reverse start order.
    async fn stop_all(&mut self) {
        for idx in (0..self.children.len()).rev() {
            if let Some(cell) = self.children[idx].cell.take() {
                let spec = self.children[idx].spec.clone();
                self.stop_child(&spec, &cell, spec.shutdown_timeout()).await;
            }
        }
    }
}

/// Stops `cell` within `timeout`: through the spec's graceful-stop hook when it has one, then
/// with a `shutdown` stop, and kills it when that does not end it in time.
async fn stop_child(
    supervisor: &str,
    options: &SupervisorOptions,
    spec: &ChildSpec,
    cell: &ActorCell,
    timeout: Duration,
) {
    let started = Instant::now();
    if let Some(hook) = spec.stop_hook() {
        let _ = tokio::time::timeout(timeout, hook(cell.clone(), timeout)).await;
        if cell.get_status() == ActorStatus::Stopped {
            return;
        }
    }
    // Whatever the hook left: at least a moment to finish stopping, at most what is left.
    let remaining = timeout
        .saturating_sub(started.elapsed())
        .max(Duration::from_millis(100));
    let stopped = cell
        .stop_and_wait(Some(SHUTDOWN_REASON.to_owned()), Some(remaining))
        .await;
    // Any other error means the actor was already gone: either way it is stopped.
    if let Err(RactorErr::Timeout) = stopped {
        tracing::warn!(
            supervisor,
            child = spec.id(),
            ?timeout,
            "child did not stop in time; killing it"
        );
        if let Some(tx) = &options.events {
            let _ = tx.send(RuntimeEvent::ChildKilled {
                supervisor: supervisor.to_owned(),
                child: spec.id().to_owned(),
            });
        }
        let _ = cell.kill_and_wait(Some(KILL_WAIT)).await;
    }
}

// ---- restarts -------------------------------------------------------------------------------

impl SupervisorState {
    async fn on_child_exit(
        &mut self,
        myself: &ActorRef<SupervisorMsg>,
        cell: &ActorCell,
        kind: ExitKind,
        reason: String,
    ) -> Result<(), ActorProcessingErr> {
        // Children we stopped ourselves were detached first, so an unknown cell is expected.
        let Some(idx) = self.position_of_cell(cell) else {
            return Ok(());
        };
        let id = self.children[idx].spec.id().to_owned();
        self.children[idx].cell = None;

        if !self.children[idx]
            .spec
            .restart_policy()
            .should_restart(kind)
        {
            tracing::info!(supervisor = %self.name, child = %id, %reason, "child exited; not restarted");
            self.children.remove(idx);
            self.emit(RuntimeEvent::ChildExited {
                supervisor: self.name.clone(),
                child: id,
                reason,
            });
            return Ok(());
        }

        let now = Instant::now();
        let intensity = self.options.intensity;
        if self.window.record(now, intensity).is_err() {
            return Err(self.give_up(&id, &reason).await);
        }

        let child = &mut self.children[idx];
        // A child that stayed up for a whole period starts its backoff from scratch.
        child.consecutive = if now.saturating_duration_since(child.started_at) >= intensity.period {
            1
        } else {
            child.consecutive.saturating_add(1)
        };
        let backoff = child
            .spec
            .backoff_override()
            .unwrap_or(self.options.backoff);
        let delay = backoff.delay(child.consecutive);
        let due = now + delay;
        child.pending = Some(Pending {
            reason: reason.clone(),
            delay,
            due,
        });
        tracing::warn!(supervisor = %self.name, child = %id, %reason, ?delay, "child exited; restarting");

        let affected: Vec<usize> = match self.options.strategy {
            Strategy::OneForOne => Vec::new(),
            Strategy::OneForAll => (0..self.children.len()).filter(|&j| j != idx).collect(),
            Strategy::RestForOne => (idx + 1..self.children.len()).collect(),
        };
        let sibling_reason = format!("sibling `{id}` exited: {reason}");
        let mut temporaries = Vec::new();
        for &j in affected.iter().rev() {
            let Some(sibling) = self.children[j].cell.take() else {
                continue;
            };
            let spec = self.children[j].spec.clone();
            self.stop_child(&spec, &sibling, spec.shutdown_timeout())
                .await;
            if spec.restart_policy() == Restart::Temporary {
                temporaries.push(j);
            } else {
                self.children[j].pending = Some(Pending {
                    reason: sibling_reason.clone(),
                    delay,
                    due,
                });
            }
        }
        // Remove from the back so earlier indices stay valid.
        for j in temporaries.into_iter().rev() {
            self.children.remove(j);
        }

        if delay.is_zero() {
            self.restart_pending(myself).await
        } else {
            myself.send_after(delay, || SupervisorMsg::RestartDue(RestartDue(())));
            Ok(())
        }
    }

    /// Starts every child whose restart is pending, in start order. A child that fails to start
    /// counts against the intensity and is retried (after its backoff); later children wait
    /// for it so the start order holds.
    async fn restart_pending(
        &mut self,
        myself: &ActorRef<SupervisorMsg>,
    ) -> Result<(), ActorProcessingErr> {
        let now = Instant::now();
        for idx in 0..self.children.len() {
            if self.children[idx].cell.is_some() {
                continue;
            }
            let due = self.children[idx].pending.as_ref().map_or(now, |p| p.due);
            if due > now {
                // Its own timer will come. Only OneForOne may start later children first.
                if self.options.strategy == Strategy::OneForOne {
                    continue;
                }
                break;
            }
            let spec = self.children[idx].spec.clone();
            match self.spawn_child(myself, &spec).await {
                Ok(cell) => {
                    let child = &mut self.children[idx];
                    child.cell = Some(cell);
                    child.restarts = child.restarts.saturating_add(1);
                    child.started_at = Instant::now();
                    let (reason, delay) = child
                        .pending
                        .take()
                        .map_or_else(|| (String::new(), Duration::ZERO), |p| (p.reason, p.delay));
                    let restarts = child.restarts;
                    self.emit(RuntimeEvent::ChildRestarted {
                        supervisor: self.name.clone(),
                        child: spec.id().to_owned(),
                        reason,
                        restarts,
                        delay,
                    });
                }
                Err(err) => {
                    let error = err.to_string();
                    tracing::warn!(supervisor = %self.name, child = spec.id(), %error, "restart failed");
                    self.emit(RuntimeEvent::ChildStartFailed {
                        supervisor: self.name.clone(),
                        child: spec.id().to_owned(),
                        error: error.clone(),
                    });
                    if self
                        .window
                        .record(Instant::now(), self.options.intensity)
                        .is_err()
                    {
                        return Err(self.give_up(spec.id(), &error).await);
                    }
                    let child = &mut self.children[idx];
                    child.consecutive = child.consecutive.saturating_add(1);
                    let backoff = spec.backoff_override().unwrap_or(self.options.backoff);
                    let delay = backoff.delay(child.consecutive);
                    child.pending = Some(Pending {
                        reason: error,
                        delay,
                        due: Instant::now() + delay,
                    });
                    // Never retry inline: a start function failing instantly would spin here.
                    myself.send_after(delay, || SupervisorMsg::RestartDue(RestartDue(())));
                    return Ok(());
                }
            }
        }
        Ok(())
    }

    /// Intensity exceeded: report, stop every child, and return the error that fails us.
    async fn give_up(&mut self, child: &str, reason: &str) -> ActorProcessingErr {
        let intensity = self.options.intensity;
        tracing::error!(
            supervisor = %self.name,
            child,
            reason,
            max_restarts = intensity.max_restarts,
            period = ?intensity.period,
            "too many restarts; supervisor gives up and fails upward"
        );
        self.emit(RuntimeEvent::SupervisorGaveUp {
            supervisor: self.name.clone(),
            child: child.to_owned(),
            reason: reason.to_owned(),
            max_restarts: intensity.max_restarts,
            period: intensity.period,
        });
        self.stop_all().await;
        Box::new(SupervisionError::GaveUp {
            supervisor: self.name.clone(),
            child: child.to_owned(),
            max_restarts: intensity.max_restarts,
            period: intensity.period,
        })
    }
}
