//! The Worker and its store, without Redis: however the Worker ends its store is closed
//! (clean close, kill, a panic in its handler, a crashed LockManager), and store trouble
//! reaches `on_error` once per outage, not once per retry (issue 10, items 5 and 6e).

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use ractor::ActorRef;
use ractor_bullmq::store::{
    ConnectionChange, FetchRequest, Fetched, Finish, FinishReply, JobUpdates, StalledReport, Store,
    StoreError, StoreResult,
};
use ractor_bullmq::worker::{Job, JobContext, LockManagerMsg, WorkerMsg};
use ractor_bullmq::{Worker, WorkerArgs, WorkerCallbacks, WorkerOptions};
use serde_json::{json, Value};
use tokio::sync::broadcast;

const LONG: Duration = Duration::from_secs(20);

/// Counts `close` calls; fetches fail while `failing` is set and never answer while `hanging`
/// is (a Redis that stopped answering); publishes connection changes.
struct CountingStore {
    closes: AtomicUsize,
    failing: AtomicBool,
    hanging: AtomicBool,
    fetches: AtomicUsize,
    changes: broadcast::Sender<ConnectionChange>,
}

impl CountingStore {
    fn new() -> Arc<Self> {
        Arc::new(Self {
            closes: AtomicUsize::new(0),
            failing: AtomicBool::new(false),
            hanging: AtomicBool::new(false),
            fetches: AtomicUsize::new(0),
            changes: broadcast::channel(16).0,
        })
    }

    fn closes(&self) -> usize {
        self.closes.load(Ordering::SeqCst)
    }
}

impl ractor_bullmq::store::BackendName for CountingStore {
    fn backend_name(&self) -> &'static str {
        "fake"
    }
}

#[async_trait]
impl ractor_bullmq::store::JobFlows for CountingStore {
    async fn get_dependencies(&self, _id: &str) -> StoreResult<ractor_bullmq::store::Dependencies> {
        Ok(ractor_bullmq::store::Dependencies::default())
    }
    async fn get_dependency_counts(
        &self,
        _id: &str,
    ) -> StoreResult<ractor_bullmq::store::DependencyCounts> {
        Ok(ractor_bullmq::store::DependencyCounts::default())
    }
    async fn get_dependencies_page(
        &self,
        _id: &str,
        _kind: ractor_bullmq::store::DependencyKind,
        _cursor: u64,
        _count: u64,
    ) -> StoreResult<ractor_bullmq::store::DependencyPage> {
        Ok(ractor_bullmq::store::DependencyPage::default())
    }
}

#[async_trait]
impl JobUpdates for CountingStore {
    async fn update_progress(&self, _id: &str, _p: &Value) -> StoreResult<bool> {
        Ok(true)
    }
    async fn add_log(
        &self,
        _id: &str,
        _line: &str,
        _keep: Option<u64>,
    ) -> StoreResult<Option<u64>> {
        Ok(Some(1))
    }
    async fn update_data(&self, _id: &str, _data: &Value) -> StoreResult<bool> {
        Ok(true)
    }
}

#[async_trait]
impl Store for CountingStore {
    fn queue_name(&self) -> &str {
        "counting"
    }
    async fn fetch_batch(&self, _request: &FetchRequest) -> StoreResult<Fetched> {
        self.fetches.fetch_add(1, Ordering::SeqCst);
        if self.hanging.load(Ordering::SeqCst) {
            std::future::pending::<()>().await;
        }
        if self.failing.load(Ordering::SeqCst) {
            return Err(StoreError::backend(std::io::Error::other(
                "connection refused",
            )));
        }
        Ok(Fetched::default())
    }
    async fn finish_batch(
        &self,
        _finishes: &[Finish],
        _fetch: Option<&FetchRequest>,
    ) -> StoreResult<FinishReply> {
        Ok(FinishReply::default())
    }
    async fn extend_locks(
        &self,
        _jobs: &[(String, String)],
        _ttl: Duration,
    ) -> StoreResult<Vec<String>> {
        Ok(Vec::new())
    }
    async fn check_stalled(&self, _max: u32, _interval: Duration) -> StoreResult<StalledReport> {
        Ok(StalledReport::default())
    }
    async fn wait_for_job(&self, timeout: Duration) -> StoreResult<bool> {
        tokio::time::sleep(timeout.min(Duration::from_millis(20))).await;
        Ok(false)
    }
    fn connection_changes(&self) -> Option<broadcast::Receiver<ConnectionChange>> {
        Some(self.changes.subscribe())
    }
    async fn close(&self) {
        self.closes.fetch_add(1, Ordering::SeqCst);
    }
    async fn schedule_next_iteration(
        &self,
        plan: &ractor_bullmq::store::NextIterationPlan,
    ) -> StoreResult<ractor_bullmq::store::NextIteration> {
        let _ = plan;
        Ok(ractor_bullmq::store::NextIteration::NotCurrent)
    }
    async fn move_to_waiting_children(
        &self,
        _job_id: &str,
        _token: &str,
        _child: Option<&ractor_bullmq::store::ChildRef>,
    ) -> StoreResult<ractor_bullmq::store::WaitingChildrenOutcome> {
        Ok(ractor_bullmq::store::WaitingChildrenOutcome::NoPendingChildren)
    }
    async fn move_to_wait(
        &self,
        _job_id: &str,
        _token: &str,
    ) -> StoreResult<ractor_bullmq::store::MoveToWaitOutcome> {
        Ok(ractor_bullmq::store::MoveToWaitOutcome::Refused(
            ractor_bullmq::store::FinishCode::NotActive,
        ))
    }
}

async fn noop(_job: Job, _ctx: JobContext) -> anyhow::Result<Value> {
    Ok(json!(null))
}

async fn eventually(what: &str, mut condition: impl FnMut() -> bool) {
    let deadline = tokio::time::Instant::now() + LONG;
    while !condition() {
        assert!(tokio::time::Instant::now() < deadline, "timed out: {what}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

async fn spawn(store: &Arc<CountingStore>, callbacks: WorkerCallbacks) -> ActorRef<WorkerMsg> {
    let args = WorkerArgs::new(store.clone(), noop)
        .options(WorkerOptions::new().drain_delay(Duration::from_millis(50)))
        .callbacks(callbacks);
    let (actor, _join) = ractor::Actor::spawn(None, Worker, args).await.unwrap();
    actor
}

#[tokio::test]
async fn clean_close_closes_the_store() {
    let store = CountingStore::new();
    let actor = spawn(&store, WorkerCallbacks::new()).await;
    let _report = ractor::call!(actor, |reply| WorkerMsg::Close {
        force: false,
        reply
    })
    .unwrap();
    eventually("the store closed", || store.closes() >= 1).await;
}

#[tokio::test]
async fn a_forced_close_returns_while_a_store_call_hangs() {
    let store = CountingStore::new();
    store.hanging.store(true, Ordering::SeqCst);
    let actor = spawn(&store, WorkerCallbacks::new()).await;
    eventually("a fetch in flight", || {
        store.fetches.load(Ordering::SeqCst) > 0
    })
    .await;
    let started = std::time::Instant::now();
    let close = async { ractor::call!(actor, |reply| WorkerMsg::Close { force: true, reply }) };
    let report = tokio::time::timeout(LONG, close)
        .await
        .expect("the forced close returned")
        .unwrap();
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "bounded by the grace, not the call timeout: {:?}",
        started.elapsed()
    );
    assert!(report.left_for_stalled_recovery.is_empty(), "{report:?}");
    eventually("the store closed", || store.closes() >= 1).await;
}

#[tokio::test]
async fn kill_closes_the_store() {
    let store = CountingStore::new();
    let actor = spawn(&store, WorkerCallbacks::new()).await;
    eventually("a fetch", || store.fetches.load(Ordering::SeqCst) > 0).await;
    actor.kill();
    eventually("the store closed after the kill", || store.closes() >= 1).await;
}

#[tokio::test]
async fn lock_manager_crash_closes_the_store() {
    let store = CountingStore::new();
    let actor = spawn(&store, WorkerCallbacks::new()).await;
    let lock_manager = actor
        .get_children()
        .into_iter()
        .find(|c| c.is_message_type_of::<LockManagerMsg>() == Some(true))
        .expect("a LockManager");
    lock_manager.kill();
    eventually("the Worker stopped", || {
        actor.get_status() == ractor::ActorStatus::Stopped
    })
    .await;
    eventually("the store closed after the crash", || store.closes() >= 1).await;
}

#[tokio::test]
async fn panic_in_a_worker_handler_closes_the_store() {
    // A user callback that panics runs inside the Worker's handler: the actor dies with the
    // panic and ractor skips post_stop.
    let store = CountingStore::new();
    store.failing.store(true, Ordering::SeqCst);
    let callbacks = WorkerCallbacks::new().on_error(|_| panic!("on_error blew up"));
    let actor = spawn(&store, callbacks).await;
    eventually("the Worker died of the panic", || {
        actor.get_status() == ractor::ActorStatus::Stopped
    })
    .await;
    eventually("the store closed after the panic", || store.closes() >= 1).await;
}

#[tokio::test]
async fn store_errors_reach_on_error_once_per_outage() {
    let store = CountingStore::new();
    let errors = Arc::new(AtomicUsize::new(0));
    let callbacks = WorkerCallbacks::new().on_error({
        let errors = errors.clone();
        move |_| {
            errors.fetch_add(1, Ordering::SeqCst);
        }
    });
    let actor = spawn(&store, callbacks).await;
    eventually("a fetch", || store.fetches.load(Ordering::SeqCst) > 0).await;

    // Outage 1: fetches fail, are retried several times, one report.
    store.failing.store(true, Ordering::SeqCst);
    let before = store.fetches.load(Ordering::SeqCst);
    eventually("several failed retries", || {
        store.fetches.load(Ordering::SeqCst) >= before + 4
    })
    .await;
    assert_eq!(errors.load(Ordering::SeqCst), 1, "one report for outage 1");

    // Recovery, then outage 2 through the store's connection changes: one more report, even
    // though the connection reports itself lost several times.
    store.failing.store(false, Ordering::SeqCst);
    let before = store.fetches.load(Ordering::SeqCst);
    eventually("a successful fetch", || {
        store.fetches.load(Ordering::SeqCst) > before + 1
    })
    .await;
    for _ in 0..5 {
        let lost: Arc<dyn std::error::Error + Send + Sync> =
            Arc::new(std::io::Error::other("connection reset"));
        store.changes.send(ConnectionChange::Lost(lost)).unwrap();
    }
    eventually("outage 2 reported", || errors.load(Ordering::SeqCst) == 2).await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(errors.load(Ordering::SeqCst), 2, "one report for outage 2");

    // Restored, then lost again: a third outage, a third report.
    store.changes.send(ConnectionChange::Restored).unwrap();
    let lost: Arc<dyn std::error::Error + Send + Sync> =
        Arc::new(std::io::Error::other("connection reset"));
    store.changes.send(ConnectionChange::Lost(lost)).unwrap();
    eventually("outage 3 reported", || errors.load(Ordering::SeqCst) == 3).await;
    actor.kill();
}
