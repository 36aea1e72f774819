//! Adding jobs: `add_job.lua` (one) and `add_jobs_bulk.lua` (many in one call).

use std::fmt::Write as _;
use std::ops::Range;

use bullmq_protocol::keys::{QueueKey, QueueKeys};
use fred::bytes::{Bytes, BytesMut};
use fred::prelude::{Client, Value};

use super::reply::{array, string, unexpected};
use super::scripts::{ADD_JOB, ADD_JOBS_BULK};
use crate::error::Result;

/// Script code: the parent named by the job does not exist.
const PARENT_MISSING: i64 = -5;

/// A job to add, with its payload and options already encoded as JSON.
///
/// ```
/// use bullmq_redis::queue::NewJob;
/// let job = NewJob::new("email", r#"{"to":"a@b.c"}"#, r#"{"attempts":3}"#, 1_700_000_000_000);
/// assert!(job.custom_id.is_none());
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct NewJob {
    /// Job name (hash field `name`).
    pub name: String,
    /// JSON of the job's data (hash field `data`).
    pub data: String,
    /// JSON of the job's options with BullMQ's short keys (hash field `opts`, stored verbatim).
    /// The script reads `delay`, `priority`, `lifo` and `de` from it to place the job.
    pub opts: String,
    /// Creation time in ms since the Unix epoch (hash field `timestamp`; base of the delay).
    pub timestamp_ms: u64,
    /// Custom job id (Node `jobId`); `None` takes the next number of the queue's `id` counter.
    pub custom_id: Option<String>,
    /// The parent this job is a child of (flows).
    pub parent: Option<ParentLink>,
    /// Key of the job scheduler that produced this job (hash field `rjk`).
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

    /// Sets the custom job id.
    pub fn with_custom_id(mut self, id: impl Into<String>) -> Self {
        self.custom_id = Some(id.into());
        self
    }

    /// Sets the parent link.
    pub fn with_parent(mut self, parent: ParentLink) -> Self {
        self.parent = Some(parent);
        self
    }

    /// Bytes [`ScriptArgs::push_job`] writes for this job, timestamp aside.
    fn args_len(&self) -> usize {
        let parent = self.parent.as_ref();
        self.custom_id.as_ref().map_or(0, String::len)
            + self.name.len()
            + self.data.len()
            + self.opts.len()
            + parent.map_or(0, |p| {
                p.parent_key.len()
                    + p.parent_json.len()
                    + p.dependencies_key.as_ref().map_or(0, String::len)
            })
            + self.repeat_job_key.as_ref().map_or(0, String::len)
    }
}

/// Script arguments written into one buffer, each argument a slice of it: building them costs
/// one allocation for the whole call instead of one per argument, and the copy the script
/// runner keeps for a `NOSCRIPT` retry only bumps the buffer's reference count.
struct ScriptArgs {
    buf: BytesMut,
    ranges: Vec<Range<usize>>,
}

impl ScriptArgs {
    /// Room for `args` arguments of `bytes` bytes in total.
    fn with_capacity(args: usize, bytes: usize) -> Self {
        Self {
            buf: BytesMut::with_capacity(bytes),
            ranges: Vec::with_capacity(args),
        }
    }

    fn push(&mut self, arg: &str) {
        let start = self.buf.len();
        self.buf.extend_from_slice(arg.as_bytes());
        self.ranges.push(start..self.buf.len());
    }

    fn push_u64(&mut self, arg: u64) {
        let start = self.buf.len();
        // Writing into a BytesMut cannot fail.
        let _ = write!(self.buf, "{arg}");
        self.ranges.push(start..self.buf.len());
    }

    /// The 9 per-job arguments, in add_job.lua's order (its ARGV 2..10).
    fn push_job(&mut self, job: &NewJob) {
        let parent = job.parent.as_ref();
        self.push(job.custom_id.as_deref().unwrap_or(""));
        self.push(&job.name);
        self.push(&job.data);
        self.push(&job.opts);
        self.push_u64(job.timestamp_ms);
        self.push(parent.map_or("", |p| p.parent_key.as_str()));
        self.push(parent.map_or("", |p| p.parent_json.as_str()));
        self.push(
            parent
                .and_then(|p| p.dependencies_key.as_deref())
                .unwrap_or(""),
        );
        self.push(job.repeat_job_key.as_deref().unwrap_or(""));
    }

    /// One job's record for add_jobs_bulk.lua: a plain job (no custom id, parent or scheduler)
    /// as `""`, name, data, opts, timestamp; any other as `"+"` and the 9 arguments of
    /// [`ScriptArgs::push_job`]. Plain jobs, the usual bulk, cost Redis 4 arguments less.
    fn push_bulk_job(&mut self, job: &NewJob) {
        if job.custom_id.is_none() && job.parent.is_none() && job.repeat_job_key.is_none() {
            self.push("");
            self.push(&job.name);
            self.push(&job.data);
            self.push(&job.opts);
            self.push_u64(job.timestamp_ms);
        } else {
            self.push("+");
            self.push_job(job);
        }
    }

    fn into_values(self) -> Vec<Value> {
        let buf: Bytes = self.buf.freeze();
        self.ranges
            .into_iter()
            .map(|range| Value::Bytes(buf.slice(range)))
            .collect()
    }
}

/// Per-job bytes reserved for the timestamp (13 digits today).
const TIMESTAMP_LEN: usize = 20;

/// How a child job points at its parent (hash fields `parentKey` and `parent`).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ParentLink {
    /// The parent's job hash key, `{prefix}:{queue}:{id}`; it must exist.
    pub parent_key: String,
    /// JSON stored in the child's `parent` field: `{"id":…,"queueKey":…}` plus flags.
    pub parent_json: String,
    /// The parent's `:dependencies` set the child is added to (`None` to leave it alone).
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

/// What adding one job did.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
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

fn add_keys(keys: &QueueKeys) -> Vec<String> {
    [
        QueueKey::Wait,
        QueueKey::Meta,
        QueueKey::Id,
        QueueKey::Delayed,
        QueueKey::Prioritized,
        QueueKey::PriorityCounter,
        QueueKey::Active,
        QueueKey::Events,
        QueueKey::Marker,
    ]
    .into_iter()
    .map(|key| keys.key(key))
    .collect()
}

fn read_result(script: &'static str, job: &NewJob, value: Value) -> Result<AddResult> {
    match value {
        Value::Integer(PARENT_MISSING) => Ok(AddResult::ParentMissing {
            parent_key: job
                .parent
                .as_ref()
                .map(|p| p.parent_key.clone())
                .unwrap_or_default(),
        }),
        Value::Integer(code) => Err(unexpected(script, format!("unknown code {code}"))),
        other => Ok(AddResult::Id(string(script, other)?)),
    }
}

/// Adds one job: stores its hash and puts it in `wait`, `prioritized` or `delayed` according to
/// its options, signalling the marker and emitting `added` + `waiting`/`delayed`.
///
/// # Errors
///
/// [`crate::RedisError::Command`] when the call fails (e.g. `opts` is not JSON), or
/// [`crate::RedisError::UnexpectedReply`].
///
/// # Cancel safety
///
/// Not cancel safe: dropping the future may or may not have added the job.
pub async fn add_job(client: &Client, keys: &QueueKeys, job: &NewJob) -> Result<AddResult> {
    let base = keys.base();
    let mut args = ScriptArgs::with_capacity(10, base.len() + job.args_len() + TIMESTAMP_LEN);
    args.push(base);
    args.push_job(job);
    let reply: Value = ADD_JOB
        .run(client, add_keys(keys), args.into_values())
        .await?;
    read_result(ADD_JOB.name(), job, reply)
}

/// Adds many jobs in one script call; Redis ends in the same state, with the same events in the
/// same order, as after adding them one by one with [`add_job`].
///
/// # Errors
///
/// As [`add_job`]. Every `opts` is decoded before the first write, so a malformed one fails the
/// call with nothing added.
///
/// # Cancel safety
///
/// Not cancel safe.
pub async fn add_jobs_bulk(
    client: &Client,
    keys: &QueueKeys,
    jobs: &[NewJob],
) -> Result<Vec<AddResult>> {
    if jobs.is_empty() {
        return Ok(Vec::new());
    }
    let base = keys.base();
    let bytes = base.len()
        + jobs
            .iter()
            .map(|job| job.args_len() + TIMESTAMP_LEN)
            .sum::<usize>();
    let mut args = ScriptArgs::with_capacity(1 + 10 * jobs.len(), bytes + jobs.len());
    args.push(base);
    for job in jobs {
        args.push_bulk_job(job);
    }
    let reply: Value = ADD_JOBS_BULK
        .run(client, add_keys(keys), args.into_values())
        .await?;
    let items = array(ADD_JOBS_BULK.name(), reply)?;
    if items.len() != jobs.len() {
        return Err(unexpected(
            ADD_JOBS_BULK.name(),
            format!("{} results for {} jobs", items.len(), jobs.len()),
        ));
    }
    jobs.iter()
        .zip(items)
        .map(|(job, item)| read_result(ADD_JOBS_BULK.name(), job, item))
        .collect()
}
