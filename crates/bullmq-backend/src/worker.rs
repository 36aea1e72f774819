//! The worker side of the seam: take jobs, finish them, keep their locks, recover stalled ones,
//! wait for work, and update a running job ([`JobUpdates`]).

use std::time::Duration;

use async_trait::async_trait;
use bullmq_protocol::scheduler::NextIterationPlan;
use bullmq_protocol::JobRecord;
use tokio::sync::broadcast;

use crate::capability::{unsupported, Capability};
use crate::error::{BackendError, BackendResult};
use crate::flows::JobFlows;
use crate::schedulers::NextIteration;
use crate::ConnectionChange;

/// What a worker asks for when it fetches jobs.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct FetchRequest {
    /// How many jobs at most (the worker's free slots).
    pub count: u32,
    /// Identifies the worker in the lock tokens the backend hands out: every token of this
    /// worker starts with `{token_prefix}:`.
    pub token_prefix: String,
    /// Lock time to live (Node `lockDuration`).
    pub lock_duration: Duration,
    /// Worker name, stored with the job as "processed by" (`pb`) when set.
    pub worker_name: Option<String>,
    /// Worker rate limit: at most `max` jobs per `duration` (Node `limiter`). A queue-level
    /// limit takes precedence, as in Node.
    pub limiter: Option<(u32, Duration)>,
    /// The caller's own lock token: every job of this fetch is locked with exactly this value
    /// instead of `{token_prefix}:{seq}` (Node's `worker.getNextJob(token)`, whose token is the
    /// lock's value, so any client holding it can renew and finish the job). Meant for
    /// fetches of one job.
    pub token: Option<String>,
    /// In a [`WorkerStore::finish_batch`]: fetch only when every finish of the call was done
    /// ([`FinishCode::Ok`]), as Node's `moveToFinished(…, fetchNext)`, which fetches nothing
    /// after a refusal. `false` (the Worker's choice): fetch for the slots in any case.
    pub only_if_finished: bool,
}

impl FetchRequest {
    /// A request for `count` jobs with the given token prefix and lock duration.
    pub fn new(count: u32, token_prefix: impl Into<String>, lock_duration: Duration) -> Self {
        Self {
            count,
            token_prefix: token_prefix.into(),
            lock_duration,
            worker_name: None,
            limiter: None,
            token: None,
            only_if_finished: false,
        }
    }

    /// With the caller's own lock token (see [`FetchRequest::token`]).
    #[must_use]
    pub fn with_token(mut self, token: impl Into<String>) -> Self {
        self.token = Some(token.into());
        self
    }

    /// Fetch only after a finish call whose finishes were all done (see
    /// [`FetchRequest::only_if_finished`]).
    #[must_use]
    pub fn only_if_finished(mut self) -> Self {
        self.only_if_finished = true;
        self
    }

    /// The lock token of the job taken with sequence number `seq`: the caller's
    /// [`FetchRequest::token`] when set, else `{token_prefix}:{seq}`.
    pub fn token_for(&self, seq: u64) -> String {
        match &self.token {
            Some(token) => token.clone(),
            None => format!("{}:{seq}", self.token_prefix),
        }
    }
}

/// A backend's private note about a fetched job, handed back with its [`Finish`]: what the
/// backend learnt when it fetched the job and can use to finish it cheaper (the Redis backend
/// packs the attempts made and whether the job has a parent or a deduplication id, which spare
/// its finish script reads). Workers carry it without looking inside; [`Receipt::NONE`] means
/// "nothing known" and is always correct.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Receipt(pub u64);

impl Receipt {
    /// Nothing known: the backend reads what it needs.
    pub const NONE: Receipt = Receipt(0);
}

/// One job moved to active for this worker.
#[derive(Debug, Clone, PartialEq)]
pub struct FetchedJob {
    /// The job id.
    pub id: String,
    /// The lock token the worker must present to renew the lock and finish the job.
    pub token: String,
    /// The job as stored, or why it cannot be run (a field that is missing, not UTF-8 or not
    /// decodable, named in the reason): the worker fails such a job with that reason rather
    /// than run it on guessed data.
    pub job: Result<JobRecord, String>,
    /// The backend's note for finishing the job (see [`Receipt`]).
    pub receipt: Receipt,
    /// For an iteration of a job scheduler: what the backend already did about the next
    /// iteration in the fetch's own round trip (the Redis backend does it for `every`
    /// schedulers). `None`: nothing yet, the Worker asks with
    /// [`WorkerStore::schedule_next_iteration`].
    pub next_iteration: Option<NextIteration>,
}

impl FetchedJob {
    /// A fetched job with a readable record.
    pub fn new(token: impl Into<String>, record: JobRecord) -> Self {
        Self {
            id: record.id.clone(),
            token: token.into(),
            job: Ok(record),
            receipt: Receipt::NONE,
            next_iteration: None,
        }
    }

    /// A fetched job that cannot be run, and why.
    pub fn unreadable(id: impl Into<String>, token: impl Into<String>, reason: String) -> Self {
        Self {
            id: id.into(),
            token: token.into(),
            job: Err(reason),
            receipt: Receipt::NONE,
            next_iteration: None,
        }
    }

    /// With the backend's note.
    #[must_use]
    pub fn with_receipt(mut self, receipt: Receipt) -> Self {
        self.receipt = receipt;
        self
    }

    /// With what the fetch did about the next iteration of the job's scheduler.
    #[must_use]
    pub fn with_next_iteration(mut self, next: NextIteration) -> Self {
        self.next_iteration = Some(next);
        self
    }
}

/// A job the backend failed on its own because its stored record is corrupted: it is in
/// `failed` with `reason` as `failedReason`, and a `failed` event was emitted. The other jobs of
/// the call were processed as usual.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CorruptedJob {
    /// The job id (lossily decoded when it is not UTF-8, which is then the reason).
    pub id: String,
    /// `failedReason`, naming the field and its value.
    pub reason: String,
}

/// What a fetch returned.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Fetched {
    /// Jobs now active and locked for this worker, in the order they were taken.
    pub jobs: Vec<FetchedJob>,
    /// The rate limiter is closed for this long (zero when not limited).
    pub rate_limited_for: Duration,
    /// Ready time (ms since the epoch) of the earliest delayed job, when nothing was fetched.
    pub next_delayed_at: Option<u64>,
    /// The queue is paused or at its global concurrency.
    pub gated: bool,
    /// Jobs taken from wait that the backend failed because their record is corrupted.
    pub corrupted: Vec<CorruptedJob>,
    /// Ids taken from wait that had no job record: nothing to run or to fail; they were removed
    /// from the queue.
    pub dropped: Vec<String>,
    /// Queue settings another client stored in a form BullMQ never writes (Redis: `meta`
    /// fields such as `concurrency: "x"`), as (field, value): the backend read each as Node
    /// does where Node's reading is defined, else as absent, and went on.
    pub invalid_settings: Vec<(String, String)>,
}

impl Fetched {
    /// A reply carrying `jobs`.
    pub fn with_jobs(jobs: Vec<FetchedJob>) -> Self {
        Self {
            jobs,
            ..Self::default()
        }
    }
}

/// How many finished jobs to keep (Node `removeOnComplete` / `removeOnFail`, resolved).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct Retention {
    /// `None` keeps every job, `Some(0)` deletes the job right away, `Some(n)` keeps the newest n.
    pub count: Option<u64>,
    /// Delete jobs finished longer ago than this.
    pub age: Option<Duration>,
    /// At most this many jobs deleted by age per call (Node's `limit`, default 1000).
    pub limit: Option<u64>,
}

impl Retention {
    /// Keep every finished job (Node's default).
    pub const KEEP_ALL: Retention = Retention {
        count: None,
        age: None,
        limit: None,
    };
    /// Delete the job as soon as it finishes (Node `removeOnComplete: true`).
    pub const REMOVE: Retention = Retention {
        count: Some(0),
        age: None,
        limit: None,
    };

    /// Keep the newest `count` jobs (`None`: all), those younger than `age` (`None`: any age),
    /// deleting at most `limit` by age per call.
    pub fn new(count: Option<u64>, age: Option<Duration>, limit: Option<u64>) -> Self {
        Self { count, age, limit }
    }

    /// Keep the newest `count` jobs.
    pub fn count(count: u64) -> Self {
        Self {
            count: Some(count),
            ..Self::KEEP_ALL
        }
    }

    /// Keep jobs younger than `age` (and at most `count` when given).
    pub fn age(age: Duration, count: Option<u64>, limit: Option<u64>) -> Self {
        Self {
            count,
            age: Some(age),
            limit,
        }
    }
}

/// What to do with one job a worker holds. Exhaustive on purpose: a new action must be
/// implemented by every backend.
#[derive(Debug, Clone, PartialEq)]
pub enum FinishAction {
    /// Completed with `returnvalue` (JSON text).
    Complete {
        /// JSON of the processor's result (`"null"` for none).
        returnvalue: String,
        /// Retention of the `completed` set.
        keep: Retention,
    },
    /// Failed for good (attempts exhausted, unrecoverable, or deferred failure).
    Fail {
        /// `failedReason`.
        reason: String,
        /// `stacktrace` (a JSON array of strings), already trimmed to `stackTraceLimit`.
        stacktrace: Option<String>,
        /// The job's `attempts` option, for `retries-exhausted`.
        attempts: u32,
        /// Retention of the `failed` set.
        keep: Retention,
    },
    /// Failed, retried at once (back to wait, or prioritized).
    Retry {
        /// `failedReason` of this attempt.
        reason: String,
        /// `stacktrace` JSON.
        stacktrace: Option<String>,
        /// The job's `lifo` option.
        lifo: bool,
    },
    /// To `delayed`: a retry with backoff, or the processor asked for a delay.
    Delay {
        /// How long.
        delay: Duration,
        /// `failedReason` of this attempt (retries only).
        reason: Option<String>,
        /// `stacktrace` JSON (retries only).
        stacktrace: Option<String>,
        /// Do not count an attempt (attempts made unchanged), as for Node's `job.moveToDelayed`.
        skip_attempt: bool,
    },
    /// The processor hit a rate limit: the job goes back to the front of wait and the queue's
    /// limiter is closed for `ttl`.
    RateLimit {
        /// How long the queue stays limited.
        ttl: Duration,
    },
}

/// One job to finish.
#[derive(Debug, Clone, PartialEq)]
pub struct Finish {
    /// Job id.
    pub job_id: String,
    /// The lock token the job was fetched with.
    pub token: String,
    /// What to do.
    pub action: FinishAction,
    /// The backend's note from the fetch ([`Receipt::NONE`] when unknown).
    pub receipt: Receipt,
}

/// Result of one [`Finish`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum FinishCode {
    /// Done.
    Ok,
    /// The job no longer exists.
    MissingJob,
    /// The job has no lock (it expired).
    MissingLock,
    /// The job is not active.
    NotActive,
    /// The job still has pending children.
    PendingChildren,
    /// Another worker holds the lock.
    LockNotOwned,
    /// The job has failed children and cannot complete.
    FailedChildren,
    /// The job's record is corrupted: the backend failed the job instead, with the reason in
    /// [`FinishReply::corrupted`].
    Corrupted,
    /// A code this version does not know.
    Other(i64),
}

impl FinishCode {
    /// The outcome of Node's script code `code` (0 done, -1 missing job, -2 missing lock, -3 not
    /// active, -4 pending children, -6 lock not owned, -9 failed children, -100 corrupted).
    pub fn from_code(code: i64) -> Self {
        match code {
            0 => Self::Ok,
            -1 => Self::MissingJob,
            -2 => Self::MissingLock,
            -3 => Self::NotActive,
            -4 => Self::PendingChildren,
            -6 => Self::LockNotOwned,
            -9 => Self::FailedChildren,
            -100 => Self::Corrupted,
            other => Self::Other(other),
        }
    }

    /// The code other BullMQ clients use for this outcome (0 for done, -100 for a corrupted
    /// job, which has no Node code).
    pub fn code(self) -> i64 {
        match self {
            Self::Ok => 0,
            Self::MissingJob => -1,
            Self::MissingLock => -2,
            Self::NotActive => -3,
            Self::PendingChildren => -4,
            Self::LockNotOwned => -6,
            Self::FailedChildren => -9,
            Self::Corrupted => -100,
            Self::Other(code) => code,
        }
    }

    /// Whether the job was finished.
    pub fn is_ok(self) -> bool {
        self == Self::Ok
    }
}

/// Reply of [`WorkerStore::finish_batch`].
#[derive(Debug, Clone, Default, PartialEq)]
pub struct FinishReply {
    /// One code per finish, in order.
    pub codes: Vec<FinishCode>,
    /// Jobs fetched for the freed slots (empty when no fetch was asked).
    pub fetched: Fetched,
    /// For each [`FinishCode::Corrupted`] code: its index in `codes` and the `failedReason` the
    /// backend failed the job with.
    pub corrupted: Vec<(usize, String)>,
}

impl FinishReply {
    /// A reply with these codes and fetched jobs.
    pub fn new(codes: Vec<FinishCode>, fetched: Fetched) -> Self {
        Self {
            codes,
            fetched,
            corrupted: Vec::new(),
        }
    }
}

/// What one stalled check did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StalledReport {
    /// Lock-less jobs moved back to wait (those stalled more than `max_stalled_count` times
    /// carry a deferred failure and are failed by the worker that fetches them).
    pub recovered: Vec<String>,
    /// Stalled jobs failed instead because their record is corrupted.
    pub corrupted: Vec<CorruptedJob>,
    /// Ids that were active without a job record; they were removed from active.
    pub dropped: Vec<String>,
}

impl StalledReport {
    /// A report of these recovered ids.
    pub fn recovered(ids: Vec<String>) -> Self {
        Self {
            recovered: ids,
            ..Self::default()
        }
    }
}

/// A job of a flow: the `child` a parent may wait for in
/// [`WorkerStore::move_to_waiting_children`] (Node's `opts.child`).
pub type ChildRef = bullmq_protocol::JobRef;

/// Answer of [`WorkerStore::move_to_waiting_children`] (Node's `moveToWaitingChildren`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum WaitingChildrenOutcome {
    /// The job left `active` for `waiting-children`: its lock was released and a
    /// `waiting-children` event emitted. The processor must stop (return
    /// `WaitingChildrenError`); the job is fetched again once its children are done.
    Moved,
    /// Nothing to wait for (no pending child, or the given child is not pending): the job is
    /// still active and locked, nothing was written. Node's code 1.
    NoPendingChildren,
    /// Refused, nothing written: [`FinishCode::MissingJob`], [`FinishCode::MissingLock`],
    /// [`FinishCode::LockNotOwned`], [`FinishCode::NotActive`], or
    /// [`FinishCode::FailedChildren`] (a child failed and the parent cannot wait any more).
    Refused(FinishCode),
}

/// Answer of [`WorkerStore::move_to_wait`] (Node's `moveJobFromActiveToWait`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum MoveToWaitOutcome {
    /// The job is back in `wait` (or `prioritized`, in front of its priority), its lock
    /// released, a `waiting` event emitted; attempts are not counted. `rate_limited_for` is the
    /// queue limiter's remaining time (zero when not limited), as Node returns it.
    Moved {
        /// Remaining time of the queue's rate limit.
        rate_limited_for: Duration,
    },
    /// Refused, nothing written: [`FinishCode::MissingJob`], [`FinishCode::MissingLock`],
    /// [`FinishCode::LockNotOwned`] or [`FinishCode::NotActive`].
    Refused(FinishCode),
}

/// Updates of one job while it runs (Node's `job.updateProgress`, `job.log`, `job.updateData`);
/// also used by the admin side.
#[async_trait]
pub trait JobUpdates: Send + Sync + 'static {
    /// Stores a job's progress (JSON) and emits `progress`; `false` when the job does not
    /// exist (nothing written).
    async fn update_progress(
        &self,
        job_id: &str,
        progress: &serde_json::Value,
    ) -> BackendResult<bool>;

    /// Appends a line to the job's log, keeping the newest `keep_logs` lines; returns the
    /// number of lines kept, `None` when the job does not exist (nothing written).
    async fn add_log(
        &self,
        job_id: &str,
        line: &str,
        keep_logs: Option<u64>,
    ) -> BackendResult<Option<u64>>;

    /// Replaces the job's data; `false` when the job does not exist (nothing written).
    async fn update_data(&self, job_id: &str, data: &serde_json::Value) -> BackendResult<bool>;
}

/// What a Worker needs from the backend holding its queue. One store serves one worker of one
/// queue; every method is one round trip for the Redis backend.
#[async_trait]
#[allow(unused_variables)] // the default bodies decline without reading their arguments
pub trait WorkerStore: JobUpdates + JobFlows {
    /// The queue's name.
    fn queue_name(&self) -> &str;

    /// Moves up to `request.count` ready jobs to active and locks them for the caller.
    async fn fetch_batch(&self, request: &FetchRequest) -> BackendResult<Fetched>;

    /// Finishes jobs (each checked against its token) and fetches jobs for the freed slots.
    async fn finish_batch(
        &self,
        finishes: &[Finish],
        fetch: Option<&FetchRequest>,
    ) -> BackendResult<FinishReply>;

    /// Renews the locks of `(job id, token)` pairs; returns the ids that could not be renewed.
    async fn extend_locks(
        &self,
        jobs: &[(String, String)],
        lock_duration: Duration,
    ) -> BackendResult<Vec<String>>;

    /// Runs the stalled check (at most once per `interval` across all workers); reports the
    /// ids moved back to wait and the corrupted jobs it failed instead.
    async fn check_stalled(
        &self,
        max_stalled_count: u32,
        interval: Duration,
    ) -> BackendResult<StalledReport>;

    /// Blocks up to `timeout` until jobs may be ready (a producer or a finished retry signalled
    /// the queue). `true` when woken by a signal, `false` on timeout.
    async fn wait_for_job(&self, timeout: Duration) -> BackendResult<bool>;

    /// Changes of the backend's connection, for the Worker to report an outage even while its
    /// calls just wait for the reconnect. `None` (the default) when there is nothing to watch.
    fn connection_changes(&self) -> Option<broadcast::Receiver<ConnectionChange>> {
        None
    }

    /// Releases connections; later calls fail. Must be idempotent: a Worker calls it when it
    /// stops, and again (from a spawned task) when its state is dropped without `post_stop`.
    async fn close(&self);

    /// Creates the iteration that follows a job scheduler's started iteration (see
    /// [`JobSchedulers::create_next_iteration`](crate::JobSchedulers::create_next_iteration)).
    /// The Worker calls it when it starts a job that has a `rjk`, as Node's Worker does.
    async fn schedule_next_iteration(
        &self,
        plan: &NextIterationPlan,
    ) -> BackendResult<NextIteration> {
        unsupported(self, Capability::Schedulers)
    }

    /// Moves one active job to `delayed` for `delay` without counting an attempt (Node's
    /// `job.moveToDelayed`); a one-item [`WorkerStore::finish_batch`].
    async fn move_to_delayed(
        &self,
        job_id: &str,
        token: &str,
        delay: Duration,
    ) -> BackendResult<FinishCode> {
        let finish = Finish {
            job_id: job_id.to_string(),
            token: token.to_string(),
            action: FinishAction::Delay {
                delay,
                reason: None,
                stacktrace: None,
                skip_attempt: true,
            },
            receipt: Receipt::NONE,
        };
        let reply = self.finish_batch(&[finish], None).await?;
        reply
            .codes
            .first()
            .copied()
            .ok_or(BackendError::JobNotFound {
                job_id: job_id.to_string(),
            })
    }

    /// Moves one active job to `waiting-children` when it has pending children (or, with
    /// `child`, when that child is pending), releasing its lock (Node's
    /// `job.moveToWaitingChildren(token, { child })`). Checks the job, its failed children,
    /// the children and the lock before writing anything.
    async fn move_to_waiting_children(
        &self,
        job_id: &str,
        token: &str,
        child: Option<&ChildRef>,
    ) -> BackendResult<WaitingChildrenOutcome> {
        unsupported(self, Capability::Steps)
    }

    /// Moves one active job back to `wait` (or `prioritized`) without counting an attempt,
    /// releasing its lock (Node's `job.moveToWait(token)`).
    async fn move_to_wait(&self, job_id: &str, token: &str) -> BackendResult<MoveToWaitOutcome> {
        unsupported(self, Capability::Steps)
    }
}

/// A shared store is a store: wrappers (such as a tracing one) take an `Arc<dyn WorkerStore>`
/// from a [`Backend`](crate::Backend) as they take a concrete store.
#[async_trait]
impl<T: JobUpdates + ?Sized> JobUpdates for std::sync::Arc<T> {
    async fn update_progress(
        &self,
        job_id: &str,
        progress: &serde_json::Value,
    ) -> BackendResult<bool> {
        (**self).update_progress(job_id, progress).await
    }

    async fn add_log(
        &self,
        job_id: &str,
        line: &str,
        keep_logs: Option<u64>,
    ) -> BackendResult<Option<u64>> {
        (**self).add_log(job_id, line, keep_logs).await
    }

    async fn update_data(&self, job_id: &str, data: &serde_json::Value) -> BackendResult<bool> {
        (**self).update_data(job_id, data).await
    }
}

#[async_trait]
impl<T: WorkerStore + ?Sized> WorkerStore for std::sync::Arc<T> {
    fn queue_name(&self) -> &str {
        (**self).queue_name()
    }

    async fn fetch_batch(&self, request: &FetchRequest) -> BackendResult<Fetched> {
        (**self).fetch_batch(request).await
    }

    async fn finish_batch(
        &self,
        finishes: &[Finish],
        fetch: Option<&FetchRequest>,
    ) -> BackendResult<FinishReply> {
        (**self).finish_batch(finishes, fetch).await
    }

    async fn extend_locks(
        &self,
        jobs: &[(String, String)],
        lock_duration: Duration,
    ) -> BackendResult<Vec<String>> {
        (**self).extend_locks(jobs, lock_duration).await
    }

    async fn check_stalled(
        &self,
        max_stalled_count: u32,
        interval: Duration,
    ) -> BackendResult<StalledReport> {
        (**self).check_stalled(max_stalled_count, interval).await
    }

    async fn wait_for_job(&self, timeout: Duration) -> BackendResult<bool> {
        (**self).wait_for_job(timeout).await
    }

    fn connection_changes(&self) -> Option<broadcast::Receiver<ConnectionChange>> {
        (**self).connection_changes()
    }

    async fn close(&self) {
        (**self).close().await;
    }

    async fn schedule_next_iteration(
        &self,
        plan: &NextIterationPlan,
    ) -> BackendResult<NextIteration> {
        (**self).schedule_next_iteration(plan).await
    }

    async fn move_to_delayed(
        &self,
        job_id: &str,
        token: &str,
        delay: Duration,
    ) -> BackendResult<FinishCode> {
        (**self).move_to_delayed(job_id, token, delay).await
    }

    async fn move_to_waiting_children(
        &self,
        job_id: &str,
        token: &str,
        child: Option<&ChildRef>,
    ) -> BackendResult<WaitingChildrenOutcome> {
        (**self)
            .move_to_waiting_children(job_id, token, child)
            .await
    }

    async fn move_to_wait(&self, job_id: &str, token: &str) -> BackendResult<MoveToWaitOutcome> {
        (**self).move_to_wait(job_id, token).await
    }
}
