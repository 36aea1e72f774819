//! The producer and admin side of the seam: add jobs ([`Producer`]), inspect and administer a
//! queue ([`QueueAdmin`]); [`QueueStore`] is both plus [`JobUpdates`].

use std::collections::HashMap;

use async_trait::async_trait;
use bullmq_protocol::state::JobState;
use bullmq_protocol::{JobRecord, JobRef};

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

/// What a child's failure does to its parent (Node's `failParentOnFailure`,
/// `continueParentOnFailure`, `ignoreDependencyOnFailure`, `removeDependencyOnFailure`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct ParentFlags {
    /// The parent fails with the child (`fpof`).
    pub fail_parent: bool,
    /// The parent goes on (is released) when the child fails (`cpof`).
    pub continue_parent: bool,
    /// The failure is recorded among the parent's ignored children (`idof`).
    pub ignore: bool,
    /// The child is removed from the parent's dependencies on failure (`rdof`).
    pub remove: bool,
}

impl ParentFlags {
    /// With `fail_parent` set to `on`.
    #[must_use]
    pub fn with_fail_parent(mut self, on: bool) -> Self {
        self.fail_parent = on;
        self
    }

    /// With `continue_parent` set to `on`.
    #[must_use]
    pub fn with_continue_parent(mut self, on: bool) -> Self {
        self.continue_parent = on;
        self
    }

    /// With `ignore` set to `on`.
    #[must_use]
    pub fn with_ignore(mut self, on: bool) -> Self {
        self.ignore = on;
        self
    }

    /// With `remove` set to `on`.
    #[must_use]
    pub fn with_remove(mut self, on: bool) -> Self {
        self.remove = on;
        self
    }

    /// The flags Node's job options set: `fail_parent_on_failure`,
    /// `continue_parent_on_failure`, `ignore_dependency_on_failure`,
    /// `remove_dependency_on_failure` (each on only when `Some(true)`).
    pub fn from_options(opts: &bullmq_protocol::JobOptions) -> Self {
        Self {
            fail_parent: opts.fail_parent_on_failure == Some(true),
            continue_parent: opts.continue_parent_on_failure == Some(true),
            ignore: opts.ignore_dependency_on_failure == Some(true),
            remove: opts.remove_dependency_on_failure == Some(true),
        }
    }
}

/// How a child job points at its parent (flows).
///
/// ```
/// use bullmq_backend::{JobRef, ParentFlags, ParentLink, QueueId};
/// let parent = JobRef::new(QueueId::new("bull", "flows"), "1");
/// let link = ParentLink::new(parent, ParentFlags::default());
/// assert!(link.register);
/// assert_eq!(link.parent_key(), "bull:flows:1");
/// assert_eq!(link.parent_json(), r#"{"id":"1","queueKey":"bull:flows"}"#);
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ParentLink {
    /// The parent; it must exist.
    pub parent: JobRef,
    /// What the child's failure does to the parent.
    pub flags: ParentFlags,
    /// Register the child among the parent's pending children (Node's add into the parent's
    /// dependencies); `false` leaves the parent's dependencies alone.
    pub register: bool,
}

impl ParentLink {
    /// A link to `parent` with `flags`, registering the child among the parent's pending
    /// children.
    pub fn new(parent: JobRef, flags: ParentFlags) -> Self {
        Self {
            parent,
            flags,
            register: true,
        }
    }

    /// Node's `parentKey` field of the child: the parent's job key, `{namespace}:{queue}:{id}`
    /// (for a backend that stores Node's job fields).
    pub fn parent_key(&self) -> String {
        self.parent.to_string()
    }

    /// Node's `parent` field of the child: `{"id":…,"queueKey":…}` plus the flags that are on
    /// (`fpof`, `rdof`, `idof`, `cpof`), as JSON text (for a backend that stores Node's job
    /// fields).
    pub fn parent_json(&self) -> String {
        let mut info = serde_json::json!({
            "id": self.parent.id,
            "queueKey": self.parent.queue.to_string(),
        });
        for (flag, on) in [
            ("fpof", self.flags.fail_parent),
            ("rdof", self.flags.remove),
            ("idof", self.flags.ignore),
            ("cpof", self.flags.continue_parent),
        ] {
            if on {
                info[flag] = serde_json::Value::Bool(true);
            }
        }
        info.to_string()
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
        /// The missing parent.
        parent: JobRef,
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
