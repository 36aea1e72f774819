//! Adding jobs: turning a name, data and options into what `add_job.lua` stores, and the
//! `queue.add(..)` builder.

use std::future::{Future, IntoFuture};
use std::pin::Pin;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use bullmq_backend::{AddResult, NewJob, ParentFlags, ParentLink};
use bullmq_protocol::job_record::{JobRecord, ParentInfo};
use bullmq_protocol::keys::QueueKeys;
use bullmq_protocol::options::{Backoff, Deduplication, JobOptions, KeepJobs, ParentRef};
use bullmq_protocol::validation::validate_job_at;
use serde::Serialize;
use serde_json::{Map, Value};

use super::Queue;
use crate::error::{QueueError, Result};
use crate::job::Job;

/// A job ready to be written, with the [`Job`] it becomes once its id is known.
pub(crate) struct PreparedJob {
    pub(crate) new_job: NewJob,
    /// What the job hash will hold, built from the values already at hand rather than by
    /// decoding the encoded fields again; the id is filled in from the script's reply.
    record: JobRecord,
}

impl PreparedJob {
    /// Splits into what is written and the record the [`Job`] is made of.
    pub(crate) fn into_parts(self) -> (NewJob, PreparedRecord) {
        (self.new_job, PreparedRecord(self.record))
    }

    /// The [`Job`] as stored under the id the script returned.
    pub(crate) fn into_job(self, queue: &Queue, result: AddResult) -> Result<Job> {
        PreparedRecord(self.record).into_job(queue, result)
    }
}

/// The record of a [`PreparedJob`] whose [`NewJob`] has been handed to the script call.
pub(crate) struct PreparedRecord(JobRecord);

impl PreparedRecord {
    /// The [`Job`] as stored under `id`, without a queue handle (a flow's nodes, added by a
    /// `FlowProducer` that holds no `Queue`).
    pub(crate) fn into_detached_job(self, queue_name: &str, id: String) -> Job {
        let mut record = self.0;
        record.id = id;
        Job::from_record(queue_name, record)
    }

    /// The [`Job`] as stored under the id the script returned.
    pub(crate) fn into_job(self, queue: &Queue, result: AddResult) -> Result<Job> {
        let mut record = self.0;
        match result {
            AddResult::Id(id) => {
                record.id = id;
                Ok(queue.job_of(record))
            }
            AddResult::ParentMissing { parent } => Err(QueueError::ParentNotFound {
                parent_key: parent.to_string(),
            }),
        }
    }
}

/// Milliseconds since the Unix epoch, from the system clock.
pub(crate) fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
        .unwrap_or(0)
}

/// A queue's default job options, serialised once for all the jobs of one call.
pub(crate) struct DefaultOptions {
    /// `None` when there are no defaults: the job's own options are then used as they are.
    map: Option<Map<String, Value>>,
}

impl DefaultOptions {
    /// Prepares `defaults` for merging under job options.
    pub(crate) fn new(defaults: &JobOptions) -> Result<Self> {
        if *defaults == JobOptions::default() {
            return Ok(Self { map: None });
        }
        let map = match serde_json::to_value(defaults)? {
            Value::Object(map) => map,
            _ => Map::new(),
        };
        Ok(Self { map: Some(map) })
    }

    /// Node's `Object.assign({}, defaults, opts, { jobId: opts.jobId })`: per option, the
    /// job's own value wins; the custom id never comes from the defaults.
    pub(crate) fn merge(&self, opts: JobOptions) -> Result<JobOptions> {
        let Some(defaults) = &self.map else {
            return Ok(opts);
        };
        let job_id = opts.job_id.clone();
        let mut merged = defaults.clone();
        if let Value::Object(own) = serde_json::to_value(&opts)? {
            merged.extend(own);
        }
        let mut merged: JobOptions = serde_json::from_value(Value::Object(merged))?;
        merged.job_id = job_id;
        Ok(merged)
    }
}

/// Validates and encodes one job, with `trace_metadata` (the add span's context) as its `tm`.
/// Nothing is written here; an error means nothing will be.
pub(crate) fn prepare(
    keys: &QueueKeys,
    defaults: &DefaultOptions,
    name: String,
    data_json: String,
    opts: JobOptions,
    trace_metadata: Option<String>,
) -> Result<PreparedJob> {
    let mut opts = defaults.merge(opts)?;
    // The producer's trace context travels in `tm`, unless the job set its own or opted out.
    if opts.telemetry_metadata.is_none() && opts.omit_context != Some(true) {
        opts.telemetry_metadata = trace_metadata;
    }
    // Node's Job constructor always stores `attempts` (0 = a single try).
    opts.attempts.get_or_insert(0);
    let timestamp = opts.timestamp.unwrap_or_else(now_ms);
    validate_job_at(&name, data_json.len(), &opts, timestamp)?;

    // Node keeps the scheduler key out of the stored options and in `rjk`.
    let repeat_job_key = opts.repeat_job_key.take();
    let parent = opts
        .parent
        .as_ref()
        .map(|parent| parent_link(parent, &opts));
    let opts_json = opts.to_json();

    // As the job hash decodes: the id comes with the script's reply, `data` as stored
    // (the serialiser's output always parses), `delay`/`priority` from the options.
    let data = serde_json::from_str::<Value>(&data_json)?;
    let mut record = JobRecord::new(String::new(), name.clone(), Value::Null, opts, timestamp);
    record.data = data;
    record.data_raw.clone_from(&data_json);
    if let Some(link) = &parent {
        record.parent_key = Some(link.parent_key());
        record.parent = Some(serde_json::from_str::<ParentInfo>(&link.parent_json())?);
    }
    record.repeat_job_key.clone_from(&repeat_job_key);
    record.deduplication_id = record.opts.deduplication.as_ref().map(|d| d.id.clone());

    let mut new_job = NewJob::new(name, data_json, opts_json, timestamp);
    new_job.custom_id = record.opts.job_id.clone().filter(|id| !id.is_empty());
    new_job.repeat_job_key = repeat_job_key;
    if let Some(link) = parent {
        new_job = new_job.with_parent(link);
    }
    tracing::trace!(queue = %keys, "job prepared");
    Ok(PreparedJob { new_job, record })
}

/// The child's link to its parent option (Node's `parent: {id, queue}`), with the failure
/// policy flags of its options.
fn parent_link(parent: &ParentRef, opts: &JobOptions) -> ParentLink {
    ParentLink::new(parent_job(parent), ParentFlags::from_options(opts))
}

/// The job a parent option names: its qualified queue split into namespace and name
/// ([`ParentRef::job_ref`]). A queue that is not qualified (no `:`) names no queue; it becomes
/// a queue of the empty namespace, which holds no job, so the add answers "parent not found"
/// as it did when the key was built from the text.
pub(crate) fn parent_job(parent: &ParentRef) -> bullmq_backend::JobRef {
    parent.job_ref().unwrap_or_else(|| {
        bullmq_backend::JobRef::new(
            bullmq_backend::QueueId::new("", parent.queue.clone()),
            parent.id.clone(),
        )
    })
}

/// `over`'s options set over `base`'s: each option `over` sets wins, each it leaves unset
/// keeps `base`'s value; unknown keys merge the same way.
pub(crate) fn merge_over(mut base: JobOptions, over: JobOptions) -> JobOptions {
    // Every field of `JobOptions` is optional; list them all (`extra` is merged below).
    macro_rules! set_over {
        ($($field:ident),* $(,)?) => {
            $(if over.$field.is_some() { base.$field = over.$field; })*
        };
    }
    set_over!(
        attempts,
        delay,
        priority,
        backoff,
        lifo,
        job_id,
        remove_on_complete,
        remove_on_fail,
        stack_trace_limit,
        size_limit,
        timestamp,
        parent,
        repeat,
        prev_millis,
        repeat_job_key,
        deduplication,
        fail_parent_on_failure,
        continue_parent_on_failure,
        ignore_dependency_on_failure,
        remove_dependency_on_failure,
        keep_logs,
        telemetry_metadata,
        omit_context,
    );
    base.extra.extend(over.extra);
    base
}

/// A job being added: set options, then `.await` it (Node `queue.add(name, data, opts)`).
///
/// ```no_run
/// # async fn demo(queue: &ractor_bullmq::Queue) -> Result<(), ractor_bullmq::QueueError> {
/// use std::time::Duration;
/// let job = queue
///     .add("email", &serde_json::json!({ "to": "a@b.c" }))
///     .delay(Duration::from_secs(5))
///     .priority(3)
///     .attempts(5)
///     .await?;
/// println!("added job {}", job.id());
/// # Ok(()) }
/// ```
#[must_use = "a job is only added when the builder is awaited"]
pub struct AddJob<'q> {
    queue: &'q Queue,
    name: String,
    data: std::result::Result<String, serde_json::Error>,
    opts: JobOptions,
}

impl<'q> AddJob<'q> {
    pub(crate) fn new(queue: &'q Queue, name: String, data: impl Serialize) -> Self {
        Self {
            queue,
            name,
            data: serde_json::to_string(&data),
            opts: JobOptions::new(),
        }
    }

    /// Sets every option that `opts` sets, over those set so far (by earlier setters or an
    /// earlier `opts`): an option `opts` leaves unset keeps its value, so the order of
    /// `.opts(..)` and the setters only matters for an option both set (the later wins).
    ///
    /// ```no_run
    /// # async fn demo(queue: &ractor_bullmq::Queue) -> Result<(), ractor_bullmq::QueueError> {
    /// use ractor_bullmq::protocol::options::JobOptions;
    /// let job = queue
    ///     .add("email", &serde_json::json!({}))
    ///     .priority(3)
    ///     .opts(JobOptions::new().attempts(5))
    ///     .await?;
    /// assert_eq!((job.priority(), job.opts().attempts), (3, Some(5)));
    /// # Ok(()) }
    /// ```
    pub fn opts(mut self, opts: JobOptions) -> Self {
        self.opts = merge_over(self.opts, opts);
        self
    }

    /// Run no earlier than `delay` from now (Node `delay`).
    pub fn delay(mut self, delay: Duration) -> Self {
        self.opts = self.opts.delay(delay);
        self
    }

    /// Priority `1..=2 097 151`, lower first; 0 = none (Node `priority`).
    pub fn priority(mut self, priority: u32) -> Self {
        self.opts = self.opts.priority(priority);
        self
    }

    /// Take this job before the others waiting (Node `lifo`).
    pub fn lifo(mut self, lifo: bool) -> Self {
        self.opts = self.opts.lifo(lifo);
        self
    }

    /// Custom job id (Node `jobId`); adding an existing id does not overwrite it.
    pub fn job_id(mut self, id: impl Into<String>) -> Self {
        self.opts = self.opts.job_id(id);
        self
    }

    /// Total tries (Node `attempts`).
    pub fn attempts(mut self, attempts: u32) -> Self {
        self.opts = self.opts.attempts(attempts);
        self
    }

    /// Delay between tries (Node `backoff`).
    pub fn backoff(mut self, backoff: Backoff) -> Self {
        self.opts = self.opts.backoff(backoff);
        self
    }

    /// What to keep of the job once completed (Node `removeOnComplete`).
    pub fn remove_on_complete(mut self, keep: KeepJobs) -> Self {
        self.opts = self.opts.remove_on_complete(keep);
        self
    }

    /// What to keep of the job once failed (Node `removeOnFail`).
    pub fn remove_on_fail(mut self, keep: KeepJobs) -> Self {
        self.opts = self.opts.remove_on_fail(keep);
        self
    }

    /// Deduplicate against other jobs with the same id (Node `deduplication`).
    pub fn deduplication(mut self, deduplication: Deduplication) -> Self {
        self.opts = self.opts.deduplication(deduplication);
        self
    }

    /// Adds the job as a child of `parent` in a flow (Node `parent`): the parent waits for it
    /// before it can complete. From a processor, `ctx.parent_ref()` names the running job
    /// (the step-job pattern, `docs/recipes/step-jobs.md`).
    pub fn parent(mut self, parent: ParentRef) -> Self {
        self.opts = self.opts.parent(parent);
        self
    }

    /// Adds the job.
    ///
    /// # Errors
    ///
    /// See [`Queue::add_job`].
    pub async fn send(self) -> Result<Job> {
        let data = self.data?;
        self.queue.add_json(self.name, data, self.opts).await
    }
}

impl<'q> IntoFuture for AddJob<'q> {
    type Output = Result<Job>;
    type IntoFuture = Pin<Box<dyn Future<Output = Result<Job>> + Send + 'q>>;

    fn into_future(self) -> Self::IntoFuture {
        Box::pin(self.send())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn opts_keep_what_setters_set_before() {
        let before = JobOptions::new().priority(3).delay(Duration::from_secs(1));
        let merged = merge_over(before, JobOptions::new().attempts(5));
        assert_eq!(merged.priority, Some(3));
        assert_eq!(merged.delay, Some(1000));
        assert_eq!(merged.attempts, Some(5));
    }

    #[test]
    fn later_value_wins_for_an_option_set_twice() {
        let merged = merge_over(JobOptions::new().priority(3), JobOptions::new().priority(7));
        assert_eq!(merged.priority, Some(7));
        let back = merge_over(merged, JobOptions::new().lifo(true));
        assert_eq!((back.priority, back.lifo), (Some(7), Some(true)));
    }

    #[test]
    fn merge_over_sets_every_field_the_serialised_form_has() {
        // Every option set (as JSON) must survive a merge over empty options: a field missing
        // from `merge_over`'s list would be dropped here.
        let full: JobOptions = serde_json::from_value(json!({
            "attempts": 3, "delay": 10, "priority": 2, "backoff": {"type": "fixed", "delay": 5},
            "lifo": true, "jobId": "x", "removeOnComplete": true, "removeOnFail": 4,
            "stackTraceLimit": 2, "sizeLimit": 100, "timestamp": 1, "parent": {"id": "p", "queue": "bull:q"},
            "repeat": {"every": 5}, "prevMillis": 3, "repeatJobKey": "k",
            "de": {"id": "d"}, "fpof": true, "cpof": true, "idof": true, "rdof": true,
            "kl": 9, "tm": "t", "omc": true, "custom": 1
        }))
        .expect("options");
        let merged = merge_over(JobOptions::new(), full.clone());
        assert_eq!(merged, full);
        assert_eq!(merge_over(full.clone(), JobOptions::new()), full);
    }
}
