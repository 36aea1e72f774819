//! Worker supervision and shutdown against a fake store (no Redis): a LockManager crash stops
//! its Worker, graceful close waits for running jobs and flushes their finishes, a bounded
//! close cancels what is still running.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use ractor_bullmq::protocol::JobRecord;
use ractor_bullmq::store::{
    FetchRequest, Fetched, FetchedJob, Finish, FinishAction, FinishCode, FinishReply, JobUpdates,
    StalledReport, Store, StoreResult,
};
use ractor_bullmq::worker::{Job, JobContext};
use ractor_bullmq::{Worker, WorkerArgs, WorkerOptions};
use serde_json::json;

/// Hands out the queued jobs once, records finishes; `extend_locks` can be made to panic.
#[derive(Default)]
struct FakeStore {
    ready: Mutex<VecDeque<String>>,
    finished: Mutex<Vec<Finish>>,
    panic_on_extend: bool,
}

impl FakeStore {
    fn with_jobs(n: usize, panic_on_extend: bool) -> Arc<Self> {
        Arc::new(Self {
            ready: Mutex::new((1..=n).map(|i| i.to_string()).collect()),
            finished: Mutex::default(),
            panic_on_extend,
        })
    }

    fn take(&self, count: u32) -> Fetched {
        let mut ready = self.ready.lock().unwrap();
        let jobs = (0..count)
            .filter_map(|_| ready.pop_front())
            .map(|id| {
                let fields = HashMap::from([
                    ("name".to_string(), "fake".to_string()),
                    ("data".to_string(), "{}".to_string()),
                    ("opts".to_string(), r#"{"attempts":0}"#.to_string()),
                ]);
                let record = JobRecord::decode(&id, &fields).expect("a valid job");
                FetchedJob::new(format!("t-{id}"), record)
            })
            .collect();
        Fetched::with_jobs(jobs)
    }

    fn completed(&self) -> Vec<String> {
        self.finished
            .lock()
            .unwrap()
            .iter()
            .filter(|f| matches!(f.action, FinishAction::Complete { .. }))
            .map(|f| f.job_id.clone())
            .collect()
    }
}

impl ractor_bullmq::store::BackendName for FakeStore {
    fn backend_name(&self) -> &'static str {
        "fake"
    }
}

#[async_trait]
impl ractor_bullmq::store::JobFlows for FakeStore {
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
impl JobUpdates for FakeStore {
    async fn update_progress(&self, _id: &str, _p: &serde_json::Value) -> StoreResult<bool> {
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
    async fn update_data(&self, _id: &str, _data: &serde_json::Value) -> StoreResult<bool> {
        Ok(true)
    }
}

#[async_trait]
impl Store for FakeStore {
    fn queue_name(&self) -> &str {
        "fake"
    }
    async fn fetch_batch(&self, request: &FetchRequest) -> StoreResult<Fetched> {
        Ok(self.take(request.count))
    }
    async fn finish_batch(
        &self,
        finishes: &[Finish],
        fetch: Option<&FetchRequest>,
    ) -> StoreResult<FinishReply> {
        self.finished.lock().unwrap().extend_from_slice(finishes);
        let fetched = fetch.map(|f| self.take(f.count)).unwrap_or_default();
        Ok(FinishReply::new(
            vec![FinishCode::Ok; finishes.len()],
            fetched,
        ))
    }
    async fn extend_locks(
        &self,
        _jobs: &[(String, String)],
        _ttl: Duration,
    ) -> StoreResult<Vec<String>> {
        if self.panic_on_extend {
            panic!("extend_locks blew up");
        }
        Ok(Vec::new())
    }
    async fn check_stalled(&self, _max: u32, _interval: Duration) -> StoreResult<StalledReport> {
        Ok(StalledReport::default())
    }
    async fn wait_for_job(&self, timeout: Duration) -> StoreResult<bool> {
        tokio::time::sleep(timeout.min(Duration::from_millis(50))).await;
        Ok(false)
    }
    async fn close(&self) {}
    async fn schedule_next_iteration(
        &self,
        _plan: &ractor_bullmq::store::NextIterationPlan,
    ) -> StoreResult<ractor_bullmq::store::NextIteration> {
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

fn sleeper(
    ms: u64,
) -> impl Fn(Job, JobContext) -> futures::future::BoxFuture<'static, anyhow::Result<serde_json::Value>>
       + Send
       + Sync
       + 'static {
    move |_job, _ctx| {
        Box::pin(async move {
            tokio::time::sleep(Duration::from_millis(ms)).await;
            Ok(json!("done"))
        })
    }
}

#[tokio::test]
async fn lock_manager_crash_stops_the_worker() -> anyhow::Result<()> {
    let store = FakeStore::with_jobs(1, true);
    let options = WorkerOptions::new()
        .lock_duration(Duration::from_millis(40))
        .skip_stalled_check(true);
    let worker =
        Worker::spawn(WorkerArgs::new(store.clone(), sleeper(10_000)).options(options)).await?;
    let started = Instant::now();
    tokio::time::timeout(Duration::from_secs(10), worker.wait()).await?;
    assert!(started.elapsed() < Duration::from_secs(10));
    assert!(!worker.is_running().await);
    // The job was never recorded: it is left to stalled recovery.
    assert!(store.finished.lock().unwrap().is_empty());
    Ok(())
}

#[tokio::test]
async fn graceful_close_waits_for_running_jobs_and_flushes_their_finishes() -> anyhow::Result<()> {
    let store = FakeStore::with_jobs(3, false);
    let options = WorkerOptions::new().concurrency(3).skip_stalled_check(true);
    let worker =
        Worker::spawn(WorkerArgs::new(store.clone(), sleeper(300)).options(options)).await?;
    let deadline = Instant::now() + Duration::from_secs(10);
    while worker.active_count().await? < 3 {
        assert!(Instant::now() < deadline, "jobs never started");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let report = worker.close().await?;
    assert!(report.left_for_stalled_recovery.is_empty());
    let mut completed = store.completed();
    completed.sort();
    assert_eq!(completed, ["1", "2", "3"]);
    Ok(())
}

#[tokio::test]
async fn bounded_close_cancels_jobs_still_running() -> anyhow::Result<()> {
    let store = FakeStore::with_jobs(2, false);
    let options = WorkerOptions::new().concurrency(2).skip_stalled_check(true);
    let worker =
        Worker::spawn(WorkerArgs::new(store.clone(), sleeper(60_000)).options(options)).await?;
    let deadline = Instant::now() + Duration::from_secs(10);
    while worker.active_count().await? < 2 {
        assert!(Instant::now() < deadline, "jobs never started");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let report = worker.close_timeout(Duration::from_millis(200)).await?;
    let mut left = report.left_for_stalled_recovery;
    left.sort();
    assert_eq!(left, ["1", "2"]);
    assert!(store.finished.lock().unwrap().is_empty());
    Ok(())
}
