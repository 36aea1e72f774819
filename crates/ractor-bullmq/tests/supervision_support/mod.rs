//! Test actors and helpers shared by the `supervision_*` tests (no Redis needed).
#![allow(dead_code, unreachable_pub)]

use std::collections::HashMap;
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use ractor::{Actor, ActorCell, ActorProcessingErr, ActorRef, RpcReplyPort, SupervisionEvent};
use ractor_bullmq::supervision::{
    ChildSpec, RuntimeEvent, Supervisor, SupervisorOptions, SupervisorRef,
};
use tokio::sync::{broadcast, mpsc};

/// Generous: these tests never assert on speed.
pub const TIMEOUT: Duration = Duration::from_secs(10);

/// Polls `cond` until it holds, panicking after [`TIMEOUT`] (tokio time, so paused tests work).
pub async fn eventually(what: &str, mut cond: impl FnMut() -> bool) {
    let deadline = tokio::time::Instant::now() + TIMEOUT;
    while !cond() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// As [`eventually`] with an async condition.
pub async fn eventually_async<F, Fut>(what: &str, mut cond: F)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    let deadline = tokio::time::Instant::now() + TIMEOUT;
    while !cond().await {
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// Waits for the first event matching `pick`, skipping others.
pub async fn next_event<T>(
    rx: &mut broadcast::Receiver<RuntimeEvent>,
    mut pick: impl FnMut(&RuntimeEvent) -> Option<T>,
) -> T {
    let wait = async {
        loop {
            match rx.recv().await {
                Ok(ev) => {
                    if let Some(v) = pick(&ev) {
                        return v;
                    }
                }
                Err(broadcast::error::RecvError::Lagged(_)) => continue,
                Err(broadcast::error::RecvError::Closed) => panic!("event channel closed"),
            }
        }
    };
    tokio::time::timeout(TIMEOUT, wait)
        .await
        .expect("timed out waiting for an event")
}

/// What a test child can be told to do.
#[derive(Debug)]
pub enum TestMsg {
    /// Panic in the handler (abnormal exit: `ActorFailed`).
    Panic,
    /// Return an error from the handler (abnormal exit: `ActorFailed`).
    Fail,
    /// Stop with no reason (normal exit).
    StopNormal,
    /// Stop with this reason (normal if `normal`/`shutdown`, abnormal otherwise).
    StopWith(String),
    /// Reply with the child's id.
    Ping(RpcReplyPort<String>),
}

/// Records starts and graceful stops of every test child, in order.
#[derive(Clone, Default, Debug)]
pub struct Probe {
    log: Arc<Mutex<Vec<String>>>,
    starts: Arc<Mutex<HashMap<String, usize>>>,
}

impl Probe {
    pub fn starts(&self, id: &str) -> usize {
        self.starts.lock().unwrap().get(id).copied().unwrap_or(0)
    }

    pub fn log(&self) -> Vec<String> {
        self.log.lock().unwrap().clone()
    }

    pub fn clear_log(&self) {
        self.log.lock().unwrap().clear();
    }

    fn record(&self, line: String) {
        self.log.lock().unwrap().push(line);
    }

    /// A spec for a test child `id` with fresh args on every start.
    pub fn spec(&self, id: &str) -> ChildSpec {
        self.spec_with(id, Duration::ZERO)
    }

    /// A spec whose child takes `stop_delay` in `post_stop` (to exercise shutdown timeouts).
    pub fn spec_with(&self, id: &str, stop_delay: Duration) -> ChildSpec {
        let probe = self.clone();
        let id_owned = id.to_owned();
        ChildSpec::for_actor(id, move || {
            (
                TestChild,
                TestArgs {
                    id: id_owned.clone(),
                    probe: probe.clone(),
                    stop_delay,
                },
            )
        })
    }
}

/// Arguments for a test child `id` reporting to `probe` (for tests spawning it by hand).
pub fn test_args(probe: &Probe, id: &str) -> TestArgs {
    TestArgs {
        id: id.to_owned(),
        probe: probe.clone(),
        stop_delay: Duration::ZERO,
    }
}

pub struct TestArgs {
    id: String,
    probe: Probe,
    stop_delay: Duration,
}

pub struct TestChild;

impl Actor for TestChild {
    type Msg = TestMsg;
    type State = TestArgs;
    type Arguments = TestArgs;

    async fn pre_start(
        &self,
        _myself: ActorRef<TestMsg>,
        args: TestArgs,
    ) -> Result<TestArgs, ActorProcessingErr> {
        *args
            .probe
            .starts
            .lock()
            .unwrap()
            .entry(args.id.clone())
            .or_default() += 1;
        args.probe.record(format!("start:{}", args.id));
        Ok(args)
    }

    async fn handle(
        &self,
        myself: ActorRef<TestMsg>,
        msg: TestMsg,
        state: &mut TestArgs,
    ) -> Result<(), ActorProcessingErr> {
        match msg {
            TestMsg::Panic => panic!("test child {} told to panic", state.id),
            TestMsg::Fail => return Err(format!("test child {} told to fail", state.id).into()),
            TestMsg::StopNormal => myself.stop(None),
            TestMsg::StopWith(reason) => myself.stop(Some(reason)),
            TestMsg::Ping(reply) => {
                let _ = reply.send(state.id.clone());
            }
        }
        Ok(())
    }

    async fn post_stop(
        &self,
        _myself: ActorRef<TestMsg>,
        state: &mut TestArgs,
    ) -> Result<(), ActorProcessingErr> {
        if !state.stop_delay.is_zero() {
            tokio::time::sleep(state.stop_delay).await;
        }
        state.probe.record(format!("stop:{}", state.id));
        Ok(())
    }
}

/// The current incarnation of child `id` as a typed ref.
pub async fn child_ref(sup: &SupervisorRef, id: &str) -> ActorRef<TestMsg> {
    let cell = sup
        .child(id)
        .await
        .expect("supervisor running")
        .unwrap_or_else(|| panic!("child {id} not running"));
    ActorRef::from(cell)
}

/// Sends `msg` to the current incarnation of child `id`.
pub async fn tell(sup: &SupervisorRef, id: &str, msg: TestMsg) {
    child_ref(sup, id)
        .await
        .send_message(msg)
        .expect("child alive");
}

/// Waits until child `id` has been started `n` times and is running again.
pub async fn wait_started(probe: &Probe, sup: &SupervisorRef, id: &str, n: usize) {
    eventually(&format!("{id} started {n} times"), || probe.starts(id) >= n).await;
    eventually_async(&format!("{id} running"), || async {
        matches!(sup.child(id).await, Ok(Some(_)))
    })
    .await;
}

/// A parent actor that spawns a supervisor linked to itself and reports its supervision
/// events ("failed: <err>" / "terminated") on a channel.
pub struct Parent;

pub struct ParentArgs {
    pub options: SupervisorOptions,
    pub children: Vec<ChildSpec>,
    pub report: mpsc::UnboundedSender<String>,
    pub sup_out: mpsc::UnboundedSender<SupervisorRef>,
}

impl Actor for Parent {
    type Msg = ();
    type State = mpsc::UnboundedSender<String>;
    type Arguments = ParentArgs;

    async fn pre_start(
        &self,
        myself: ActorRef<()>,
        args: ParentArgs,
    ) -> Result<Self::State, ActorProcessingErr> {
        let (sup, _) =
            Supervisor::spawn_linked(None, args.options, args.children, myself.get_cell()).await?;
        let _ = args.sup_out.send(sup);
        Ok(args.report)
    }

    async fn handle_supervisor_evt(
        &self,
        _myself: ActorRef<()>,
        evt: SupervisionEvent,
        report: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        match evt {
            SupervisionEvent::ActorFailed(_, err) => {
                let _ = report.send(format!("failed: {err}"));
            }
            SupervisionEvent::ActorTerminated(_, _, reason) => {
                let _ = report.send(format!("terminated: {reason:?}"));
            }
            _ => {}
        }
        Ok(())
    }
}

/// Whether `cell` has stopped.
pub fn is_stopped(cell: &ActorCell) -> bool {
    cell.get_status() >= ractor::ActorStatus::Stopping
}
