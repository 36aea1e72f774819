//! Unit-testing processors without Redis (feature `test-util`).
//!
//! [`run_processor`] runs a processor on one job the way a Worker's job actor does (same panic
//! catching, same classification into a [`JobOutcome`]), with a [`JobContext`] backed by an
//! in-memory store that records what the processor did: progress updates, log lines and data
//! updates. [`TestJob`] builds the [`Job`] to run.
//!
//! ```
//! use ractor_bullmq::testing::{run_processor, TestJob};
//! use ractor_bullmq::worker::{Job, JobContext, JobOutcome};
//! use serde_json::json;
//!
//! async fn send_email(job: Job, ctx: JobContext) -> anyhow::Result<serde_json::Value> {
//!     let to: String = job.data_value()["to"].as_str().unwrap_or_default().to_string();
//!     ctx.log(format!("sending to {to}")).await?;
//!     ctx.update_progress(100).await?;
//!     Ok(json!({ "sent": to }))
//! }
//!
//! # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
//! let run = run_processor(send_email, TestJob::new("welcome", json!({ "to": "a@b.c" }))).await;
//! assert_eq!(run.outcome, JobOutcome::Completed(json!({ "sent": "a@b.c" })));
//! assert_eq!(run.logs, ["sending to a@b.c"]);
//! assert_eq!(run.progress, [json!(100)]);
//! # });
//! ```
//!
//! What the Worker would then do with the outcome in Redis (retry, backoff, fail) is not
//! simulated: the outcome is what the processor decided.

use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use async_trait::async_trait;
use bullmq_protocol::job_record::JobRecord;
use serde::Serialize;
use serde_json::Value;

use crate::store::{
    FetchRequest, Fetched, Finish, FinishReply, JobUpdates, StalledReport, Store, StoreError,
    StoreResult,
};
use crate::worker::{classify, run_job, AttemptLimits, JobContext, Processor, WorkerCallbacks};

pub use crate::worker::JobOutcome;
pub use crate::Job;
pub use bullmq_protocol::options::JobOptions;

/// Builds a [`Job`] for a test: as a producer would add it, then moved to active.
///
/// Defaults: queue `test`, id `1`, default options, no finished attempts, timestamp now.
///
/// ```
/// use ractor_bullmq::testing::{JobOptions, TestJob};
///
/// let job = TestJob::new("resize", serde_json::json!({ "w": 64 }))
///     .id("42")
///     .opts(JobOptions::new().attempts(3))
///     .attempts_made(2)
///     .build();
/// assert_eq!(job.id(), "42");
/// assert_eq!(job.attempts_made(), 2);
/// assert_eq!(job.opts().attempts, Some(3));
/// ```
#[derive(Debug, Clone)]
pub struct TestJob {
    queue: String,
    record: JobRecord,
    attempts_started: Option<u32>,
}

impl TestJob {
    /// A job named `name` carrying `data` (serialised to JSON).
    ///
    /// # Panics
    ///
    /// When `data` cannot be serialised to JSON (a map with non-string keys, a failing
    /// `Serialize` impl): a bug in the test.
    pub fn new(name: impl Into<String>, data: impl Serialize) -> Self {
        let data = match serde_json::to_value(data) {
            Ok(data) => data,
            Err(e) => panic!("TestJob data is not serialisable to JSON: {e}"),
        };
        Self {
            queue: "test".to_string(),
            record: JobRecord::new(
                "1",
                name,
                data,
                JobOptions::default(),
                crate::store::now_ms(),
            ),
            attempts_started: None,
        }
    }

    /// The job's id.
    #[must_use]
    pub fn id(mut self, id: impl Into<String>) -> Self {
        self.record.id = id.into();
        self
    }

    /// The queue the job belongs to.
    #[must_use]
    pub fn queue(mut self, queue: impl Into<String>) -> Self {
        self.queue = queue.into();
        self
    }

    /// The job's options (`attempts`, `backoff`, `keepLogs`, ...). Also sets the record's
    /// `delay` and `priority` from them, as adding the job does.
    #[must_use]
    pub fn opts(mut self, opts: JobOptions) -> Self {
        let name = std::mem::take(&mut self.record.name);
        let data = std::mem::take(&mut self.record.data);
        let mut record = JobRecord::new(
            std::mem::take(&mut self.record.id),
            name,
            data,
            opts,
            self.record.timestamp,
        );
        record.attempts_made = self.record.attempts_made;
        record.progress = std::mem::take(&mut self.record.progress);
        record.stacktrace = std::mem::take(&mut self.record.stacktrace);
        self.record = record;
        self
    }

    /// Finished attempts (`atm`); the context's [`JobContext::attempt`] is this plus one.
    #[must_use]
    pub fn attempts_made(mut self, attempts: u32) -> Self {
        self.record.attempts_made = attempts;
        self
    }

    /// Started attempts (`ats`); defaults to finished attempts plus one (this run).
    #[must_use]
    pub fn attempts_started(mut self, attempts: u32) -> Self {
        self.attempts_started = Some(attempts);
        self
    }

    /// The creation time, ms since the Unix epoch.
    #[must_use]
    pub fn timestamp(mut self, ms: u64) -> Self {
        self.record.timestamp = ms;
        self
    }

    /// The job's stored progress before this run.
    #[must_use]
    pub fn progress(mut self, progress: impl Into<Value>) -> Self {
        self.record.progress = progress.into();
        self
    }

    /// Stack traces of earlier failed attempts.
    #[must_use]
    pub fn stacktrace(mut self, traces: Vec<String>) -> Self {
        self.record.stacktrace = traces;
        self
    }

    /// The [`Job`].
    #[must_use]
    pub fn build(self) -> Job {
        let mut record = self.record;
        record.attempts_started = self
            .attempts_started
            .unwrap_or_else(|| record.attempts_made.saturating_add(1));
        Job::from_record(self.queue, record)
    }
}

impl From<TestJob> for Job {
    fn from(job: TestJob) -> Self {
        job.build()
    }
}

/// What one [`run_processor`] call observed.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct TestRun {
    /// How the run was classified, as the Worker classifies it.
    pub outcome: JobOutcome,
    /// Every [`JobContext::update_progress`] value, in order.
    pub progress: Vec<Value>,
    /// Every [`JobContext::log`] line, in order (before any `keepLogs` trimming).
    pub logs: Vec<String>,
    /// Every [`JobContext::update_data`] value, in order.
    pub data_updates: Vec<Value>,
}

/// Runs `processor` on `job` as a Worker's job actor would, without Redis: the processor gets
/// a [`JobContext`] whose progress, log and data calls are recorded (and succeed), a panic is
/// caught into [`JobOutcome::Panicked`], and the result is classified exactly as the Worker
/// does (an [`UnrecoverableError`](crate::UnrecoverableError) gives
/// [`JobOutcome::Unrecoverable`], a [`DelayedError`](crate::DelayedError)
/// [`JobOutcome::Delayed`], and so on).
///
/// Worker callbacks are not invoked; telemetry events are emitted as in a real run.
pub async fn run_processor(processor: impl Processor, job: impl Into<Job>) -> TestRun {
    let job = job.into();
    let store = Arc::new(RecordingStore::new(job.queue_name()));
    let context = JobContext::new(
        &job,
        "test-token".to_string(),
        format!("bull:{}", job.queue_name()),
        store.clone(),
        WorkerCallbacks::new(),
        Arc::from("test-worker"),
        AttemptLimits::default(),
    );
    let reason_source = context.clone();
    let ended = run_job(job, context, Arc::new(processor)).await;
    let cancellation = reason_source.cancellation();
    let outcome = classify(ended, cancellation.as_ref(), reason_source.moved());
    let recorded = store.take();
    TestRun {
        outcome,
        progress: recorded.progress,
        logs: recorded.logs,
        data_updates: recorded.data_updates,
    }
}

/// What the processor did through its context.
#[derive(Debug, Default)]
struct Recorded {
    progress: Vec<Value>,
    logs: Vec<String>,
    data_updates: Vec<Value>,
}

/// An in-memory [`Store`] for one job: records context calls; the queue operations a job's
/// processor never reaches fail.
struct RecordingStore {
    queue: String,
    recorded: Mutex<Recorded>,
}

impl RecordingStore {
    fn new(queue: &str) -> Self {
        Self {
            queue: queue.to_string(),
            recorded: Mutex::new(Recorded::default()),
        }
    }

    // A panicking processor may have held nothing here, but a poisoned lock still holds
    // valid records.
    fn lock(&self) -> MutexGuard<'_, Recorded> {
        self.recorded.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn take(&self) -> Recorded {
        std::mem::take(&mut *self.lock())
    }
}

/// A worker call made on the recording store, which has no queue behind it.
#[derive(Debug, thiserror::Error)]
#[error("{0} is not available in ractor_bullmq::testing (no queue behind the context)")]
struct Unsupported(&'static str);

fn unsupported(operation: &'static str) -> StoreError {
    StoreError::backend(Unsupported(operation))
}

impl bullmq_backend::BackendName for RecordingStore {
    fn backend_name(&self) -> &'static str {
        "testing"
    }
}

#[async_trait]
impl Store for RecordingStore {
    fn queue_name(&self) -> &str {
        &self.queue
    }

    async fn fetch_batch(&self, _request: &FetchRequest) -> StoreResult<Fetched> {
        Err(unsupported("fetch_batch"))
    }

    async fn finish_batch(
        &self,
        _finishes: &[Finish],
        _fetch: Option<&FetchRequest>,
    ) -> StoreResult<FinishReply> {
        Err(unsupported("finish_batch"))
    }

    async fn extend_locks(
        &self,
        _jobs: &[(String, String)],
        _lock_duration: Duration,
    ) -> StoreResult<Vec<String>> {
        Err(unsupported("extend_locks"))
    }

    async fn check_stalled(
        &self,
        _max_stalled_count: u32,
        _interval: Duration,
    ) -> StoreResult<StalledReport> {
        Err(unsupported("check_stalled"))
    }

    async fn wait_for_job(&self, _timeout: Duration) -> StoreResult<bool> {
        Err(unsupported("wait_for_job"))
    }

    async fn close(&self) {}

    async fn schedule_next_iteration(
        &self,
        _plan: &crate::store::NextIterationPlan,
    ) -> StoreResult<crate::store::NextIteration> {
        Err(unsupported("schedule_next_iteration"))
    }

    /// A job run on its own has no children: nothing to wait for.
    async fn move_to_waiting_children(
        &self,
        _job_id: &str,
        _token: &str,
        _child: Option<&crate::store::ChildRef>,
    ) -> StoreResult<crate::store::WaitingChildrenOutcome> {
        Ok(crate::store::WaitingChildrenOutcome::NoPendingChildren)
    }

    /// Accepted: the outcome then says [`JobOutcome::MovedToWait`].
    async fn move_to_wait(
        &self,
        _job_id: &str,
        _token: &str,
    ) -> StoreResult<crate::store::MoveToWaitOutcome> {
        Ok(crate::store::MoveToWaitOutcome::Moved {
            rate_limited_for: Duration::ZERO,
        })
    }
}

/// A job run on its own has no children.
#[async_trait]
impl crate::store::JobFlows for RecordingStore {
    async fn get_dependencies(&self, _job_id: &str) -> StoreResult<crate::store::Dependencies> {
        Ok(crate::store::Dependencies::default())
    }

    async fn get_dependency_counts(
        &self,
        _job_id: &str,
    ) -> StoreResult<crate::store::DependencyCounts> {
        Ok(crate::store::DependencyCounts::default())
    }

    async fn get_dependencies_page(
        &self,
        _job_id: &str,
        _kind: crate::store::DependencyKind,
        _cursor: u64,
        _count: u64,
    ) -> StoreResult<crate::store::DependencyPage> {
        Ok(crate::store::DependencyPage::default())
    }
}

#[async_trait]
impl JobUpdates for RecordingStore {
    async fn update_progress(&self, _job_id: &str, progress: &Value) -> StoreResult<bool> {
        self.lock().progress.push(progress.clone());
        Ok(true)
    }

    async fn add_log(
        &self,
        _job_id: &str,
        line: &str,
        keep_logs: Option<u64>,
    ) -> StoreResult<Option<u64>> {
        let mut recorded = self.lock();
        recorded.logs.push(line.to_string());
        let total = u64::try_from(recorded.logs.len()).unwrap_or(u64::MAX);
        // Report the count Redis would keep, so code reading the return value behaves alike.
        Ok(Some(keep_logs.map_or(total, |keep| total.min(keep))))
    }

    async fn update_data(&self, _job_id: &str, data: &Value) -> StoreResult<bool> {
        self.lock().data_updates.push(data.clone());
        Ok(true)
    }
}
