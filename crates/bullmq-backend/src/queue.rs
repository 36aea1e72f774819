//! The producer and admin side of the seam: add jobs ([`Producer`]), inspect and administer a
//! queue ([`QueueAdmin`]); [`QueueStore`] is both plus [`JobUpdates`].

use std::collections::HashMap;

use async_trait::async_trait;
use bullmq_protocol::state::JobState;
use bullmq_protocol::JobRecord;

use crate::capability::{unsupported, BackendName, Capability};
use crate::error::BackendResult;
use crate::flows::JobFlows;
use crate::job_control::JobControl;
use crate::metrics::{Metrics, MetricsKind};
use crate::queue_control::QueueControl;
use crate::schedulers::JobSchedulers;
use crate::worker::JobUpdates;

/// A job to add, with its payload and options already encoded as JSON.
///
/// ```
/// use bullmq_backend::NewJob;
/// let job = NewJob::new("email", r#"{"to":"a@b.c"}"#, r#"{"attempts":3}"#, 1_700_000_000_000);
/// assert!(job.custom_id.is_none());
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct NewJob {
    /// Job name.
    pub name: String,
    /// JSON of the job's data.
    pub data: String,
    /// JSON of the job's options with BullMQ's short keys, stored verbatim. The backend reads
    /// `delay`, `priority`, `lifo` and `de` from it to place the job.
    pub opts: String,
    /// Creation time in ms since the Unix epoch (base of the delay).
    pub timestamp_ms: u64,
    /// Custom job id (Node `jobId`); `None` takes the queue's next number.
    pub custom_id: Option<String>,
    /// The parent this job is a child of (flows).
    pub parent: Option<ParentLink>,
    /// Key of the job scheduler that produced this job (`rjk`).
    pub repeat_job_key: Option<String>,
}

impl NewJob {
    /// A job with generated id, no parent and no scheduler.
    pub fn new(
        name: impl Into<String>,
        data: impl Into<String>,
        opts: impl Into<String>,
        timestamp_ms: u64,
    ) -> Self {
        Self {
            name: name.into(),
            data: data.into(),
            opts: opts.into(),
            timestamp_ms,
            custom_id: None,
            parent: None,
            repeat_job_key: None,
        }
    }

    /// With a custom id.
    #[must_use]
    pub fn with_custom_id(mut self, id: impl Into<String>) -> Self {
        self.custom_id = Some(id.into());
        self
    }

    /// As a child of `parent`.
    #[must_use]
    pub fn with_parent(mut self, parent: ParentLink) -> Self {
        self.parent = Some(parent);
        self
    }
}

/// How a child job points at its parent (BullMQ's `parentKey` and `parent` fields).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ParentLink {
    /// The parent's job key, `{prefix}:{queue}:{id}`; it must exist.
    pub parent_key: String,
    /// JSON stored as the child's `parent`: `{"id":…,"queueKey":…}` plus flags.
    pub parent_json: String,
    /// The parent's dependencies set the child is registered in (`None` to leave it alone).
    pub dependencies_key: Option<String>,
}

impl ParentLink {
    /// A link to `parent_key` described by `parent_json`, registering the child in the parent's
    /// `{parent_key}:dependencies`.
    pub fn new(parent_key: impl Into<String>, parent_json: impl Into<String>) -> Self {
        let parent_key = parent_key.into();
        let dependencies_key = Some(format!("{parent_key}:dependencies"));
        Self {
            parent_key,
            parent_json: parent_json.into(),
            dependencies_key,
        }
    }
}

/// What adding one job did. Exhaustive on purpose: a new outcome must be handled by every
/// caller.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AddResult {
    /// The job id: the new job's, or the existing job's when the custom id was taken
    /// (`duplicated` event) or the job was deduplicated (`deduplicated` event).
    Id(String),
    /// The parent named in [`NewJob::parent`] does not exist; nothing was written (Node -5).
    ParentMissing {
        /// The missing parent key.
        parent_key: String,
    },
}

/// Outcome of one [`QueueAdmin::obliterate_batch`] call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ObliterateStep {
    /// Every job and key of the queue is gone.
    Done,
    /// The batch was used up; call again.
    More,
    /// The queue must be paused first (Node code -1).
    NotPaused,
    /// Jobs are active and `force` was not given (Node code -2).
    ActiveJobs,
}

/// Outcome of [`QueueAdmin::remove_job`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum RemoveOutcome {
    /// The job is gone; `removed` was emitted.
    Removed,
    /// A worker holds the job's lock (or a pending child's): nothing was removed (Node 0).
    Locked,
    /// No such job.
    NotFound,
    /// The job is the pending run of a job scheduler; remove the scheduler instead (Node -8).
    SchedulerJob,
}

/// Where a job stands for someone waiting for it to finish, read atomically.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum JobEnd {
    /// No such job.
    Missing,
    /// Not finished yet.
    Unfinished,
    /// In `completed`, with its return value (JSON text, `None` when absent).
    Completed(Option<String>),
    /// In `failed`, with its `failedReason` (`None` when absent).
    Failed(Option<String>),
}

/// Adding jobs.
#[async_trait]
pub trait Producer: Send + Sync + 'static {
    /// Adds one job (placed by its options: wait, prioritized or delayed).
    async fn add(&self, job: &NewJob) -> BackendResult<AddResult>;

    /// Adds many jobs atomically, in order: the queue ends as after adding them one by one.
    async fn add_bulk(&self, jobs: &[NewJob]) -> BackendResult<Vec<AddResult>>;
}

/// Inspecting and administering a queue.
///
/// Core: everything but `get_job_logs` ([`Capability::Logs`]), `drain`, `clean`,
/// `obliterate_batch` ([`Capability::Cleanup`]) and `get_metrics` ([`Capability::Metrics`]),
/// which a backend may decline (their default bodies do).
#[async_trait]
#[allow(unused_variables)] // the default bodies decline without reading their arguments
pub trait QueueAdmin: BackendName {
    /// Writes the queue's meta as a Node `Queue` does on open (`version`, `opts.maxLenEvents`).
    async fn set_meta(&self, max_len_events: u64) -> BackendResult<()>;

    /// The queue's meta (paused, version, opts.maxLenEvents, concurrency, …) as text values.
    async fn get_meta(&self) -> BackendResult<HashMap<String, String>>;

    /// The number of jobs in each state, in the order given.
    async fn get_counts(&self, states: &[JobState]) -> BackendResult<Vec<u64>>;

    /// Job ids in each of `states` (its range `start..=end`, negative from the end, as Node's
    /// `getRanges`), one list per state in the order given.
    async fn get_ranges(
        &self,
        states: &[JobState],
        start: i64,
        end: i64,
        ascending: bool,
    ) -> BackendResult<Vec<Vec<String>>>;

    /// The state of one job ([`JobState::Unknown`] when it does not exist).
    async fn get_state(&self, job_id: &str) -> BackendResult<JobState>;

    /// One job, decoded; `None` when it does not exist.
    ///
    /// # Errors
    ///
    /// [`BackendError::Decode`](crate::BackendError::Decode) when its record is corrupted.
    async fn get_job(&self, job_id: &str) -> BackendResult<Option<JobRecord>>;

    /// Where a job stands, for [`wait_until_finished`](https://docs.bullmq.io): read in one
    /// atomic step so no finish can slip between two reads.
    async fn job_end(&self, job_id: &str) -> BackendResult<JobEnd>;

    /// The job's log lines `start..=end` (negative from the end; descending mirrors the range
    /// from the newest line, as Node) and the total number of lines.
    async fn get_job_logs(
        &self,
        job_id: &str,
        start: i64,
        end: i64,
        ascending: bool,
    ) -> BackendResult<(Vec<String>, u64)> {
        unsupported(self, Capability::Logs)
    }

    /// Pauses the queue (emits `paused`).
    async fn pause(&self) -> BackendResult<()>;

    /// Resumes the queue (emits `resumed`).
    async fn resume(&self) -> BackendResult<()>;

    /// Whether the queue is paused.
    async fn is_paused(&self) -> BackendResult<bool>;

    /// Removes every waiting job (and delayed ones when `delayed`), as Node's `drain`;
    /// returns how many were removed.
    async fn drain(&self, delayed: bool) -> BackendResult<u64> {
        unsupported(self, Capability::Cleanup)
    }

    /// Removes up to `limit` jobs (0: no limit) in `state` finished (or created) before
    /// `cutoff_ms`; returns their ids.
    async fn clean(
        &self,
        state: JobState,
        cutoff_ms: u64,
        limit: u64,
    ) -> BackendResult<Vec<String>> {
        unsupported(self, Capability::Cleanup)
    }

    /// Deletes up to `batch` jobs of a paused queue, then, once no job is left, the queue.
    async fn obliterate_batch(&self, batch: u32, force: bool) -> BackendResult<ObliterateStep> {
        unsupported(self, Capability::Cleanup)
    }

    /// Removes one job (and its children when `children`), unless a worker holds it.
    async fn remove_job(&self, job_id: &str, children: bool) -> BackendResult<RemoveOutcome>;

    /// The `kind` metrics: the totals and the per-minute data points `start..=end` (0 = newest
    /// minute, negative from the end, as Node's `getMetrics`).
    async fn get_metrics(&self, kind: MetricsKind, start: i64, end: i64) -> BackendResult<Metrics> {
        unsupported(self, Capability::Metrics)
    }
}

/// One worker connected to a queue, as [`QueueStore::list_workers`] lists it (one entry of
/// Node's `queue.getWorkers()`).
///
/// The Redis backend fills it from `CLIENT LIST` (the connections named as Node names a
/// worker's); another backend from what it knows of its workers' sessions (the memory backend:
/// the worker stores it has open).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct WorkerInfo {
    /// The raw connection name, `{prefix}:{base64(queue)}[:w:{worker name}]` (Node `rawname`).
    pub raw_name: String,
    /// The worker's own name, the part after `:w:` (`None` for a worker without a name).
    pub worker_name: Option<String>,
    /// The backend's id of the connection (Redis: the client id, `id`).
    pub id: String,
    /// The client's address as the backend reports it (Redis: `addr`).
    pub addr: String,
    /// Time since the connection was opened (Redis: `age`, whole seconds).
    pub age: std::time::Duration,
    /// Time since the connection's last command (Redis: `idle`, whole seconds).
    pub idle: std::time::Duration,
    /// Every field the backend reports, as text (Redis: every field of the `CLIENT LIST` line,
    /// `name` replaced by the queue's name and the original kept as `rawname`, as Node's
    /// entry).
    pub fields: std::collections::BTreeMap<String, String>,
}

impl WorkerInfo {
    /// A worker connection named `raw_name` (`worker_name` its own name), with its backend id,
    /// address, age and idle time, and no other fields.
    pub fn new(
        raw_name: impl Into<String>,
        worker_name: Option<String>,
        id: impl Into<String>,
        addr: impl Into<String>,
        age: std::time::Duration,
        idle: std::time::Duration,
    ) -> Self {
        Self {
            raw_name: raw_name.into(),
            worker_name,
            id: id.into(),
            addr: addr.into(),
            age,
            idle,
            fields: std::collections::BTreeMap::new(),
        }
    }

    /// With the backend's fields (see [`WorkerInfo::fields`]).
    #[must_use]
    pub fn with_fields(mut self, fields: std::collections::BTreeMap<String, String>) -> Self {
        self.fields = fields;
        self
    }
}

/// Everything a `Queue` handle needs: [`Producer`], [`QueueAdmin`] and [`JobUpdates`] on one
/// queue, plus closing.
///
/// `list_workers` is optional ([`Capability::WorkerListing`]); the traits it extends say
/// which of theirs are.
#[async_trait]
pub trait QueueStore:
    Producer
    + QueueAdmin
    + JobUpdates
    + JobFlows
    + JobSchedulers
    + QueueControl
    + JobControl
    + crate::QueueMaintenance
{
    /// The queue's name.
    fn queue_name(&self) -> &str;

    /// Releases the connection when this store owns it; idempotent.
    async fn close(&self) -> BackendResult<()>;

    /// The workers connected to this queue, any language (Node's `queue.getWorkers()`).
    async fn list_workers(&self) -> BackendResult<Vec<WorkerInfo>> {
        unsupported(self, Capability::WorkerListing)
    }
}
