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

pub use bullmq_backend::{AddResult, NewJob, ParentLink};

/// A child's parent as the scripts take it: the `parentKey` and `parent` fields to store and
/// the parent's dependencies set to register in (`""` to leave it alone).
pub(super) struct ParentArgs {
    pub(super) key: String,
    pub(super) json: String,
    pub(super) dependencies: String,
}

impl ParentArgs {
    pub(super) fn new(link: &ParentLink) -> Self {
        let key = link.parent_key();
        let dependencies = if link.register {
            format!("{key}:dependencies")
        } else {
            String::new()
        };
        Self {
            json: link.parent_json(),
            key,
            dependencies,
        }
    }

    fn len(&self) -> usize {
        self.key.len() + self.json.len() + self.dependencies.len()
    }
}

/// Bytes [`ScriptArgs::push_job`] writes for a job (with its parent's arguments), timestamp
/// aside.
pub(super) fn args_len(job: &NewJob, parent: Option<&ParentArgs>) -> usize {
    job.custom_id.as_ref().map_or(0, String::len)
        + job.name.len()
        + job.data.len()
        + job.opts.len()
        + parent.map_or(0, ParentArgs::len)
        + job.repeat_job_key.as_ref().map_or(0, String::len)
}

/// Script arguments written into one buffer, each argument a slice of it: building them costs
/// one allocation for the whole call instead of one per argument, and the copy the script
/// runner keeps for a `NOSCRIPT` retry only bumps the buffer's reference count.
pub(super) struct ScriptArgs {
    buf: BytesMut,
    ranges: Vec<Range<usize>>,
}

impl ScriptArgs {
    /// Room for `args` arguments of `bytes` bytes in total.
    pub(super) fn with_capacity(args: usize, bytes: usize) -> Self {
        Self {
            buf: BytesMut::with_capacity(bytes),
            ranges: Vec::with_capacity(args),
        }
    }

    pub(super) fn push(&mut self, arg: &str) {
        let start = self.buf.len();
        self.buf.extend_from_slice(arg.as_bytes());
        self.ranges.push(start..self.buf.len());
    }

    pub(super) fn push_u64(&mut self, arg: u64) {
        let start = self.buf.len();
        // Writing into a BytesMut cannot fail.
        let _ = write!(self.buf, "{arg}");
        self.ranges.push(start..self.buf.len());
    }

    /// The 9 per-job arguments, in add_job.lua's order (its ARGV 2..10); `parent` rendered
    /// from the job's [`NewJob::parent`].
    fn push_job(&mut self, job: &NewJob, parent: Option<&ParentArgs>) {
        self.push(job.custom_id.as_deref().unwrap_or(""));
        self.push(&job.name);
        self.push(&job.data);
        self.push(&job.opts);
        self.push_u64(job.timestamp_ms);
        self.push(parent.map_or("", |p| p.key.as_str()));
        self.push(parent.map_or("", |p| p.json.as_str()));
        self.push(parent.map_or("", |p| p.dependencies.as_str()));
        self.push(job.repeat_job_key.as_deref().unwrap_or(""));
    }

    /// One job's record for add_jobs_bulk.lua: a plain job (no custom id, parent or scheduler)
    /// as `""`, name, data, opts, timestamp; any other as `"+"` and the 9 arguments of
    /// [`ScriptArgs::push_job`]. Plain jobs, the usual bulk, cost Redis 4 arguments less.
    fn push_bulk_job(&mut self, job: &NewJob, parent: Option<&ParentArgs>) {
        if job.custom_id.is_none() && job.parent.is_none() && job.repeat_job_key.is_none() {
            self.push("");
            self.push(&job.name);
            self.push(&job.data);
            self.push(&job.opts);
            self.push_u64(job.timestamp_ms);
        } else {
            self.push("+");
            self.push_job(job, parent);
        }
    }

    pub(super) fn into_values(self) -> Vec<Value> {
        let buf: Bytes = self.buf.freeze();
        self.ranges
            .into_iter()
            .map(|range| Value::Bytes(buf.slice(range)))
            .collect()
    }
}

/// Per-job bytes reserved for the timestamp (13 digits today).
const TIMESTAMP_LEN: usize = 20;

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
        Value::Integer(PARENT_MISSING) => match &job.parent {
            Some(link) => Ok(AddResult::ParentMissing {
                parent: link.parent.clone(),
            }),
            None => Err(unexpected(
                script,
                "parent missing for a job without parent",
            )),
        },
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
    let parent = job.parent.as_ref().map(ParentArgs::new);
    let bytes = base.len() + args_len(job, parent.as_ref()) + TIMESTAMP_LEN;
    let mut args = ScriptArgs::with_capacity(10, bytes);
    args.push(base);
    args.push_job(job, parent.as_ref());
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
    let parents: Vec<Option<ParentArgs>> = jobs
        .iter()
        .map(|job| job.parent.as_ref().map(ParentArgs::new))
        .collect();
    let bytes = base.len()
        + jobs
            .iter()
            .zip(&parents)
            .map(|(job, parent)| args_len(job, parent.as_ref()) + TIMESTAMP_LEN)
            .sum::<usize>();
    let mut args = ScriptArgs::with_capacity(1 + 10 * jobs.len(), bytes + jobs.len());
    args.push(base);
    for (job, parent) in jobs.iter().zip(&parents) {
        args.push_bulk_job(job, parent.as_ref());
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
