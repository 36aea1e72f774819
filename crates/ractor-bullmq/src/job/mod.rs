//! The `Job` read model: a job as stored in Redis, decoded, and the actions on it.
//!
//! A [`Job`] is a snapshot: it is what [`Queue::get_job`](crate::Queue::get_job) read (or what
//! [`Queue::add`](crate::Queue::add) wrote), and does not change when the job moves on. Read it
//! again for fresh state.
//!
//! A job that a [`Queue`](crate::Queue) read or wrote (`get_job`, `get_jobs`, `add`,
//! `add_bulk`, `upsert_job_scheduler`) carries a handle on that queue (one `Arc` clone), so it
//! can be acted on as in Node: `job.retry()`, `job.promote()`, `job.remove()`,
//! `job.update_data(..)`, the flow reads (see `Job::retry` and the methods after it). Each
//! action is the queue's by-id method of the same name, so there is one implementation of each.
//! A job built by hand ([`Job::decode`], [`Job::from_record`]) or handed to a processor by a
//! Worker has no queue handle: its actions return [`QueueError::Detached`] (a processor acts
//! on its job through its `JobContext`).

mod json;

use std::sync::Arc;
use std::time::Duration;

use bullmq_protocol::job_record::{JobRecord, ParentInfo};
use bullmq_protocol::options::JobOptions;
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::error::{QueueError, Result};

/// The queue a job was read through, kept opaque here so this module does not depend on the
/// queue's: the queue module puts its shared state in and takes it back out.
pub(crate) type QueueHandle = Arc<dyn std::any::Any + Send + Sync>;

/// A job of a queue, decoded from its hash (`{prefix}:{queue}:{id}`).
///
/// ```
/// use std::collections::HashMap;
/// use ractor_bullmq::Job;
///
/// let hash: HashMap<String, String> = [("name", "email"), ("data", r#"{"to":"a@b.c"}"#)]
///     .into_iter()
///     .map(|(k, v)| (k.to_string(), v.to_string()))
///     .collect();
/// let job = Job::decode("emails", "7", &hash).unwrap();
/// #[derive(serde::Deserialize)]
/// struct Email { to: String }
/// assert_eq!(job.data::<Email>().unwrap().to, "a@b.c");
/// assert_eq!(job.attempts_made(), 0);
/// ```
///
/// Cloning is cheap (the decoded record is shared): the worker keeps one handle while the
/// processor gets another, and 10 000 in-flight jobs do not hold 10 000 deep copies.
#[derive(Debug, Clone, PartialEq)]
pub struct Job {
    inner: Arc<JobInner>,
}

struct JobInner {
    queue_name: String,
    record: JobRecord,
    /// The queue this job was read through or added to, for the actions; `None` for a job
    /// built by hand or fetched by a Worker.
    queue: Option<QueueHandle>,
}

impl std::fmt::Debug for JobInnerQueue<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.0.is_some() { "attached" } else { "none" })
    }
}

/// How a job's queue handle shows in `Debug`.
struct JobInnerQueue<'a>(&'a Option<QueueHandle>);

impl std::fmt::Debug for JobInner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JobInner")
            .field("queue_name", &self.queue_name)
            .field("record", &self.record)
            .field("queue", &JobInnerQueue(&self.queue))
            .finish()
    }
}

/// Two jobs are equal when they hold the same record of the same queue, whether or not they
/// carry a queue handle.
impl PartialEq for JobInner {
    fn eq(&self, other: &Self) -> bool {
        self.queue_name == other.queue_name && self.record == other.record
    }
}

impl Job {
    /// Wraps a decoded record of queue `queue_name`. The job has no queue handle: its actions
    /// ([`Job::retry`], [`Job::remove`], …) return [`QueueError::Detached`]; read it with
    /// [`Queue::get_job`](crate::Queue::get_job) to act on it.
    pub fn from_record(queue_name: impl Into<String>, record: JobRecord) -> Self {
        Self {
            inner: Arc::new(JobInner {
                queue_name: queue_name.into(),
                record,
                queue: None,
            }),
        }
    }

    /// Wraps a record of queue `queue_name` with the queue's handle, for the actions.
    pub(crate) fn with_queue_handle(
        queue_name: impl Into<String>,
        record: JobRecord,
        handle: QueueHandle,
    ) -> Self {
        Self {
            inner: Arc::new(JobInner {
                queue_name: queue_name.into(),
                record,
                queue: Some(handle),
            }),
        }
    }

    /// The queue handle, when the job has one.
    pub(crate) fn queue_handle(&self) -> Option<&QueueHandle> {
        self.inner.queue.as_ref()
    }

    /// [`QueueError::Detached`] for this job.
    pub(crate) fn detached(&self) -> QueueError {
        QueueError::Detached {
            job_id: self.inner.record.id.clone(),
        }
    }

    /// Decodes the fields of job `id` of queue `queue_name` (as `HGETALL` returns them).
    ///
    /// # Errors
    ///
    /// [`QueueError::Decode`] naming the field that could not be read.
    pub fn decode(
        queue_name: impl Into<String>,
        id: &str,
        fields: &std::collections::HashMap<String, String>,
    ) -> Result<Self> {
        let record = JobRecord::decode(id, fields).map_err(|source| QueueError::Decode {
            job_id: id.to_owned(),
            source,
        })?;
        Ok(Self::from_record(queue_name, record))
    }

    /// The queue this job belongs to (its name, without prefix).
    pub fn queue_name(&self) -> &str {
        &self.inner.queue_name
    }

    /// The job id.
    pub fn id(&self) -> &str {
        &self.inner.record.id
    }

    /// The job name.
    pub fn name(&self) -> &str {
        &self.inner.record.name
    }

    /// The data, deserialised into `T`.
    ///
    /// # Errors
    ///
    /// [`QueueError::Json`] when the data does not have the shape of `T`.
    pub fn data<T: DeserializeOwned>(&self) -> Result<T> {
        Ok(T::deserialize(&self.inner.record.data)?)
    }

    /// The data as a JSON value.
    pub fn data_value(&self) -> &Value {
        &self.inner.record.data
    }

    /// The data exactly as stored.
    pub fn data_raw(&self) -> &str {
        &self.inner.record.data_raw
    }

    /// The job's options.
    pub fn opts(&self) -> &JobOptions {
        &self.inner.record.opts
    }

    /// Creation time, ms since the Unix epoch.
    pub fn timestamp(&self) -> u64 {
        self.inner.record.timestamp
    }

    /// Delay requested when the job was added (or last delayed).
    pub fn delay(&self) -> Duration {
        Duration::from_millis(self.inner.record.delay)
    }

    /// Priority (`0` = none, lower runs first).
    pub fn priority(&self) -> u32 {
        self.inner.record.priority
    }

    /// Progress: a number or an object (`0` until reported).
    pub fn progress(&self) -> &Value {
        &self.inner.record.progress
    }

    /// Attempts that finished (failed or completed) (`atm`).
    pub fn attempts_made(&self) -> u32 {
        self.inner.record.attempts_made
    }

    /// Attempts that started (`ats`).
    pub fn attempts_started(&self) -> u32 {
        self.inner.record.attempts_started
    }

    /// How often the job stalled (`stc`).
    pub fn stalled_counter(&self) -> u32 {
        self.inner.record.stalled_counter
    }

    /// When the current or last attempt started, ms since the Unix epoch.
    pub fn processed_on(&self) -> Option<u64> {
        self.inner.record.processed_on
    }

    /// When the job finished, ms since the Unix epoch.
    pub fn finished_on(&self) -> Option<u64> {
        self.inner.record.finished_on
    }

    /// The processor's return value, for completed jobs.
    pub fn returnvalue(&self) -> Option<&Value> {
        self.inner.record.returnvalue.as_ref()
    }

    /// The failure message, for failed (or retried) jobs.
    pub fn failed_reason(&self) -> Option<&str> {
        self.inner.record.failed_reason.as_deref()
    }

    /// Stack traces of the failed attempts.
    pub fn stacktrace(&self) -> &[String] {
        &self.inner.record.stacktrace
    }

    /// Name of the worker that processed the job (`pb`).
    pub fn processed_by(&self) -> Option<&str> {
        self.inner.record.processed_by.as_deref()
    }

    /// The parent's job key, for a child of a flow.
    pub fn parent_key(&self) -> Option<&str> {
        self.inner.record.parent_key.as_deref()
    }

    /// The parent's id and queue, for a child of a flow.
    pub fn parent(&self) -> Option<&ParentInfo> {
        self.inner.record.parent.as_ref()
    }

    /// The job scheduler that produced the job (`rjk`).
    pub fn repeat_job_key(&self) -> Option<&str> {
        self.inner.record.repeat_job_key.as_deref()
    }

    /// The deduplication id (`deid`).
    pub fn deduplication_id(&self) -> Option<&str> {
        self.inner.record.deduplication_id.as_deref()
    }

    /// The whole decoded record.
    pub fn record(&self) -> &JobRecord {
        &self.inner.record
    }

    /// Consumes the job, returning its record (copied only when another handle to the same
    /// job is still alive).
    pub fn into_record(self) -> JobRecord {
        Arc::try_unwrap(self.inner)
            .map_or_else(|shared| shared.record.clone(), |inner| inner.record)
    }
}

/// Children's return values (parsed, by child job key) read as `T`, as Node's
/// `getChildrenValues` parses them.
pub(crate) fn children_values<T: DeserializeOwned>(
    processed: std::collections::BTreeMap<String, Value>,
) -> std::result::Result<std::collections::BTreeMap<String, T>, serde_json::Error> {
    processed
        .into_iter()
        .map(|(key, value)| Ok((key, T::deserialize(value)?)))
        .collect()
}
