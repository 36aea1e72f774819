//! Job options as BullMQ stores them in the job hash's `opts` field.
//!
//! Node BullMQ 6.7.0 writes the options object with its long camelCase keys (`attempts`,
//! `delay`, `removeOnComplete`, …) except for a few it compresses (`optsEncodeMap`):
//! `de` = deduplication, `fpof` / `cpof` / `idof` / `rdof` = parent-failure policies,
//! `kl` = keepLogs, and `tm` / `omc` for the telemetry metadata and omit-context flag.
//! [`JobOptions`] serialises to exactly that shape; every field is optional (absent stays
//! absent) and keys it does not know are kept in [`JobOptions::extra`] so options written by
//! other clients round-trip unchanged. Reading also accepts the long names of the compressed
//! keys (`deduplication`, `keepLogs`, …) as aliases, and is lenient with numbers another client
//! may write loosely: a float is truncated, a negative number reads as 0, `null` as absent.
//!
//! Key order: we write known keys in declaration order, then unknown keys in the order read.
//! Node's stored order is not reproducible in general: Node packs the options with msgpack and
//! its Lua script re-encodes them with cjson, whose key order follows Lua's table hashing.
//!
//! Note that Node adds `attempts: 0` to every job it creates (the constructor's default);
//! [`JobOptions::new`] does not, so callers that want byte-for-byte Node options set it.
//!
//! ```
//! use std::time::Duration;
//! use bullmq_protocol::options::{Backoff, JobOptions, KeepJobs};
//!
//! let opts = JobOptions::new()
//!     .attempts(3)
//!     .delay(Duration::from_secs(2))
//!     .backoff(Backoff::exponential(Duration::from_millis(500)))
//!     .remove_on_complete(KeepJobs::Count(100));
//! let json = serde_json::to_string(&opts).unwrap();
//! assert_eq!(
//!     json,
//!     r#"{"attempts":3,"delay":2000,"backoff":{"type":"exponential","delay":500},"removeOnComplete":100}"#
//! );
//! let back: JobOptions = serde_json::from_str(&json).unwrap();
//! assert_eq!(back, opts);
//! ```

use std::time::Duration;

use serde::de::{self, Deserializer};
use serde::ser::{SerializeMap, Serializer};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::lenient;

/// Options of one job, in BullMQ's stored JSON form (see the [module docs](self)).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct JobOptions {
    /// Total number of tries (Node `attempts`; Node stores `0` by default, meaning one try).
    #[serde(
        default,
        deserialize_with = "lenient::opt_uint",
        skip_serializing_if = "Option::is_none"
    )]
    pub attempts: Option<u32>,
    /// Milliseconds to wait before the job can run (Node `delay`).
    #[serde(
        default,
        deserialize_with = "lenient::opt_uint",
        skip_serializing_if = "Option::is_none"
    )]
    pub delay: Option<u64>,
    /// `0` = none; otherwise `1..=2 097 151`, lower runs first (Node `priority`).
    #[serde(
        default,
        deserialize_with = "lenient::opt_uint",
        skip_serializing_if = "Option::is_none"
    )]
    pub priority: Option<u32>,
    /// Retry backoff (Node `backoff`; a bare number means fixed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backoff: Option<Backoff>,
    /// Push to the front of the wait list instead of the back (Node `lifo`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lifo: Option<bool>,
    /// Custom job id (Node `jobId`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub job_id: Option<String>,
    /// What to keep of completed jobs (Node `removeOnComplete`; default: keep all).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub remove_on_complete: Option<KeepJobs>,
    /// What to keep of failed jobs (Node `removeOnFail`; default: keep all).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub remove_on_fail: Option<KeepJobs>,
    /// How many stack traces to keep in `stacktrace` (Node `stackTraceLimit`).
    #[serde(
        default,
        deserialize_with = "lenient::opt_uint",
        skip_serializing_if = "Option::is_none"
    )]
    pub stack_trace_limit: Option<u32>,
    /// Maximum size in bytes of the serialised `data` (Node `sizeLimit`).
    #[serde(
        default,
        deserialize_with = "lenient::opt_uint",
        skip_serializing_if = "Option::is_none"
    )]
    pub size_limit: Option<u64>,
    /// Creation time, ms since the Unix epoch (Node `timestamp`; default: now).
    #[serde(
        default,
        deserialize_with = "lenient::opt_uint",
        skip_serializing_if = "Option::is_none"
    )]
    pub timestamp: Option<u64>,
    /// Parent job of a flow (Node `parent`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent: Option<ParentRef>,
    /// Repeat options of a repeatable job, kept as raw JSON (Node `repeat`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub repeat: Option<Value>,
    /// Previous run of a repeatable job, ms since the Unix epoch (Node `prevMillis`).
    #[serde(
        default,
        deserialize_with = "lenient::opt_uint",
        skip_serializing_if = "Option::is_none"
    )]
    pub prev_millis: Option<u64>,
    /// Key of the job scheduler that produced this job (Node `repeatJobKey`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub repeat_job_key: Option<String>,
    /// Deduplication (stored as `de`, Node `deduplication`).
    #[serde(
        default,
        rename = "de",
        alias = "deduplication",
        skip_serializing_if = "Option::is_none"
    )]
    pub deduplication: Option<Deduplication>,
    /// Fail the parent when this job fails (stored as `fpof`, Node `failParentOnFailure`).
    #[serde(
        default,
        rename = "fpof",
        alias = "failParentOnFailure",
        skip_serializing_if = "Option::is_none"
    )]
    pub fail_parent_on_failure: Option<bool>,
    /// Let the parent continue when this job fails (stored as `cpof`, Node
    /// `continueParentOnFailure`).
    #[serde(
        default,
        rename = "cpof",
        alias = "continueParentOnFailure",
        skip_serializing_if = "Option::is_none"
    )]
    pub continue_parent_on_failure: Option<bool>,
    /// Move this job to the parent's ignored dependencies when it fails (stored as `idof`,
    /// Node `ignoreDependencyOnFailure`).
    #[serde(
        default,
        rename = "idof",
        alias = "ignoreDependencyOnFailure",
        skip_serializing_if = "Option::is_none"
    )]
    pub ignore_dependency_on_failure: Option<bool>,
    /// Remove this job from the parent's dependencies when it fails (stored as `rdof`, Node
    /// `removeDependencyOnFailure`).
    #[serde(
        default,
        rename = "rdof",
        alias = "removeDependencyOnFailure",
        skip_serializing_if = "Option::is_none"
    )]
    pub remove_dependency_on_failure: Option<bool>,
    /// Number of log lines to keep (stored as `kl`, Node `keepLogs`).
    #[serde(
        default,
        rename = "kl",
        alias = "keepLogs",
        deserialize_with = "lenient::opt_uint",
        skip_serializing_if = "Option::is_none"
    )]
    pub keep_logs: Option<u64>,
    /// Serialised telemetry context of the producer (stored as `tm`, Node
    /// `telemetry.metadata`).
    #[serde(default, rename = "tm", skip_serializing_if = "Option::is_none")]
    pub telemetry_metadata: Option<String>,
    /// Do not propagate the telemetry context (stored as `omc`, Node `telemetry.omitContext`).
    #[serde(default, rename = "omc", skip_serializing_if = "Option::is_none")]
    pub omit_context: Option<bool>,
    /// Keys this type does not know, kept verbatim so they round-trip.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

impl JobOptions {
    /// Empty options: every field absent.
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    /// Sets `attempts` (total tries).
    #[must_use]
    pub fn attempts(mut self, attempts: u32) -> Self {
        self.attempts = Some(attempts);
        self
    }

    /// Sets `delay` (stored in whole milliseconds, sub-millisecond parts are dropped).
    #[must_use]
    pub fn delay(mut self, delay: Duration) -> Self {
        self.delay = Some(duration_ms(delay));
        self
    }

    /// Sets `priority` (`0` = none, lower runs first; see
    /// [`MAX_PRIORITY`](crate::score::MAX_PRIORITY)).
    #[must_use]
    pub fn priority(mut self, priority: u32) -> Self {
        self.priority = Some(priority);
        self
    }

    /// Sets `backoff`.
    #[must_use]
    pub fn backoff(mut self, backoff: Backoff) -> Self {
        self.backoff = Some(backoff);
        self
    }

    /// Sets `lifo`.
    #[must_use]
    pub fn lifo(mut self, lifo: bool) -> Self {
        self.lifo = Some(lifo);
        self
    }

    /// Sets a custom `jobId`.
    #[must_use]
    pub fn job_id(mut self, job_id: impl Into<String>) -> Self {
        self.job_id = Some(job_id.into());
        self
    }

    /// Sets `removeOnComplete`.
    #[must_use]
    pub fn remove_on_complete(mut self, keep: KeepJobs) -> Self {
        self.remove_on_complete = Some(keep);
        self
    }

    /// Sets `removeOnFail`.
    #[must_use]
    pub fn remove_on_fail(mut self, keep: KeepJobs) -> Self {
        self.remove_on_fail = Some(keep);
        self
    }

    /// Sets `stackTraceLimit`.
    #[must_use]
    pub fn stack_trace_limit(mut self, limit: u32) -> Self {
        self.stack_trace_limit = Some(limit);
        self
    }

    /// Sets `sizeLimit` in bytes.
    #[must_use]
    pub fn size_limit(mut self, bytes: u64) -> Self {
        self.size_limit = Some(bytes);
        self
    }

    /// Sets `timestamp` (ms since the Unix epoch).
    #[must_use]
    pub fn timestamp_ms(mut self, timestamp_ms: u64) -> Self {
        self.timestamp = Some(timestamp_ms);
        self
    }

    /// Sets `parent`.
    #[must_use]
    pub fn parent(mut self, parent: ParentRef) -> Self {
        self.parent = Some(parent);
        self
    }

    /// Sets `deduplication` (`de`).
    #[must_use]
    pub fn deduplication(mut self, deduplication: Deduplication) -> Self {
        self.deduplication = Some(deduplication);
        self
    }

    /// Sets `failParentOnFailure` (`fpof`).
    #[must_use]
    pub fn fail_parent_on_failure(mut self, on: bool) -> Self {
        self.fail_parent_on_failure = Some(on);
        self
    }

    /// Sets `continueParentOnFailure` (`cpof`).
    #[must_use]
    pub fn continue_parent_on_failure(mut self, on: bool) -> Self {
        self.continue_parent_on_failure = Some(on);
        self
    }

    /// Sets `ignoreDependencyOnFailure` (`idof`).
    #[must_use]
    pub fn ignore_dependency_on_failure(mut self, on: bool) -> Self {
        self.ignore_dependency_on_failure = Some(on);
        self
    }

    /// Sets `removeDependencyOnFailure` (`rdof`).
    #[must_use]
    pub fn remove_dependency_on_failure(mut self, on: bool) -> Self {
        self.remove_dependency_on_failure = Some(on);
        self
    }

    /// Sets `keepLogs` (`kl`).
    #[must_use]
    pub fn keep_logs(mut self, lines: u64) -> Self {
        self.keep_logs = Some(lines);
        self
    }

    /// Sets the telemetry metadata (`tm`).
    #[must_use]
    pub fn telemetry_metadata(mut self, metadata: impl Into<String>) -> Self {
        self.telemetry_metadata = Some(metadata.into());
        self
    }

    /// Sets the telemetry omit-context flag (`omc`).
    #[must_use]
    pub fn omit_context(mut self, omit: bool) -> Self {
        self.omit_context = Some(omit);
        self
    }

    /// `delay` as a [`Duration`] (zero when absent).
    #[must_use]
    pub fn delay_duration(&self) -> Duration {
        Duration::from_millis(self.delay.unwrap_or(0))
    }

    /// `attempts` as Node counts them: absent or `0` both mean a single try.
    #[must_use]
    pub fn max_attempts(&self) -> u32 {
        self.attempts.unwrap_or(0).max(1)
    }

    /// Serialises to the JSON stored in the job hash's `opts` field.
    #[must_use]
    pub fn to_json(&self) -> String {
        // Serialising a struct of strings, numbers, bools and JSON values cannot fail.
        serde_json::to_string(self).unwrap_or_else(|_| String::from("{}"))
    }

    /// Parses the job hash's `opts` field; an empty string means no options (as Node reads it).
    ///
    /// # Errors
    ///
    /// The JSON error when `raw` is not a JSON object of the expected shape.
    pub fn from_json(raw: &str) -> Result<Self, serde_json::Error> {
        if raw.trim().is_empty() {
            return Ok(Self::default());
        }
        serde_json::from_str(raw)
    }
}

/// Milliseconds of a [`Duration`], saturating at `u64::MAX`.
pub(crate) fn duration_ms(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// What to keep of finished jobs: Node's `boolean | number | KeepJobs`.
///
/// `true` removes the job at once, `false` keeps all, a number keeps that many of the newest,
/// and a policy keeps jobs younger than `age` seconds and at most `count`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum KeepJobs {
    /// `true`: remove immediately; `false`: keep all.
    Bool(bool),
    /// Keep the newest `n` jobs (negative keeps all, as in Node).
    Count(i64),
    /// Age/count policy.
    Policy {
        /// Maximum age in seconds.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        age: Option<u64>,
        /// Maximum number of jobs to keep.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        count: Option<i64>,
        /// Maximum number of jobs removed per cleanup pass.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        limit: Option<u64>,
    },
}

impl KeepJobs {
    /// Policy keeping jobs younger than `age` (whole seconds).
    #[must_use]
    pub fn max_age(age: Duration) -> Self {
        Self::Policy {
            age: Some(age.as_secs()),
            count: None,
            limit: None,
        }
    }
}

/// Built-in or custom backoff strategy name (Node `backoff.type`).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum BackoffKind {
    /// `fixed`: the same delay before every retry.
    Fixed,
    /// `exponential`: `2^(attemptsMade−1) · delay`.
    Exponential,
    /// Any other name: a strategy registered with the worker.
    Custom(String),
}

impl BackoffKind {
    /// The name as stored in `backoff.type`.
    #[must_use]
    pub fn as_str(&self) -> &str {
        match self {
            Self::Fixed => "fixed",
            Self::Exponential => "exponential",
            Self::Custom(name) => name,
        }
    }

    fn from_name(name: &str) -> Self {
        match name {
            "fixed" => Self::Fixed,
            "exponential" => Self::Exponential,
            other => Self::Custom(other.to_owned()),
        }
    }
}

/// Retry backoff (Node `BackoffOptions`).
///
/// Serialises as Node stores it, `{"type":"fixed","delay":1000}`; also deserialises from a bare
/// number of milliseconds, which Node accepts as a fixed backoff.
///
/// ```
/// use bullmq_protocol::options::{Backoff, BackoffKind};
///
/// let b: Backoff = serde_json::from_str("1000").unwrap();
/// assert_eq!(b.kind, BackoffKind::Fixed);
/// assert_eq!(serde_json::to_string(&b).unwrap(), r#"{"type":"fixed","delay":1000}"#);
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct Backoff {
    /// Strategy (`type`).
    pub kind: BackoffKind,
    /// Base delay in milliseconds (`delay`).
    pub delay: Option<u64>,
    /// Fraction `0..=1` of the delay that is randomised (`jitter`).
    pub jitter: Option<f64>,
}

impl Backoff {
    /// Fixed backoff of `delay` before each retry.
    #[must_use]
    pub fn fixed(delay: Duration) -> Self {
        Self {
            kind: BackoffKind::Fixed,
            delay: Some(duration_ms(delay)),
            jitter: None,
        }
    }

    /// Exponential backoff starting at `delay`.
    #[must_use]
    pub fn exponential(delay: Duration) -> Self {
        Self {
            kind: BackoffKind::Exponential,
            delay: Some(duration_ms(delay)),
            jitter: None,
        }
    }

    /// A custom strategy registered with the worker under `name`.
    #[must_use]
    pub fn custom(name: impl Into<String>) -> Self {
        Self {
            kind: BackoffKind::Custom(name.into()),
            delay: None,
            jitter: None,
        }
    }

    /// Sets the jitter fraction (`0..=1`).
    #[must_use]
    pub fn with_jitter(mut self, jitter: f64) -> Self {
        self.jitter = Some(jitter);
        self
    }

    /// Sets the base delay.
    #[must_use]
    pub fn with_delay(mut self, delay: Duration) -> Self {
        self.delay = Some(duration_ms(delay));
        self
    }
}

impl Serialize for Backoff {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let len = 1 + usize::from(self.delay.is_some()) + usize::from(self.jitter.is_some());
        let mut map = serializer.serialize_map(Some(len))?;
        map.serialize_entry("type", self.kind.as_str())?;
        if let Some(delay) = self.delay {
            map.serialize_entry("delay", &delay)?;
        }
        if let Some(jitter) = self.jitter {
            map.serialize_entry("jitter", &jitter)?;
        }
        map.end()
    }
}

impl<'de> Deserialize<'de> for Backoff {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        struct Object {
            #[serde(rename = "type")]
            kind: String,
            #[serde(default, deserialize_with = "lenient::opt_uint")]
            delay: Option<u64>,
            #[serde(default)]
            jitter: Option<f64>,
        }
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Repr {
            Millis(#[serde(deserialize_with = "lenient::opt_uint")] Option<u64>),
            Object(Object),
        }
        match Repr::deserialize(deserializer) {
            Ok(Repr::Millis(ms)) => Ok(Self {
                kind: BackoffKind::Fixed,
                delay: ms,
                jitter: None,
            }),
            Ok(Repr::Object(o)) => Ok(Self {
                kind: BackoffKind::from_name(&o.kind),
                delay: o.delay,
                jitter: o.jitter,
            }),
            Err(_) => Err(de::Error::custom(
                "backoff must be a number of milliseconds or {type, delay?, jitter?}",
            )),
        }
    }
}

/// Deduplication options (stored as `de`).
///
/// Until the job owning `id` completes, fails for good or is removed (with `ttl`: for that many
/// milliseconds instead), adding another job with the same `id` adds nothing and emits
/// `deduplicated`; the add returns the owner's id. Retries keep the window open.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct Deduplication {
    /// Deduplication id (required).
    pub id: String,
    /// Time to live of the deduplication key, in milliseconds.
    #[serde(
        default,
        deserialize_with = "lenient::opt_uint",
        skip_serializing_if = "Option::is_none"
    )]
    pub ttl: Option<u64>,
    /// Extend the ttl on each duplicate.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub extend: Option<bool>,
    /// Replace the pending (delayed) job's data and options with the duplicate's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replace: Option<bool>,
    /// Reset the pending job's delay on each duplicate.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reschedule: Option<bool>,
    /// Keep the last duplicate added while the job is active and add it as a new job when the
    /// active one completes or fails (Node `keepLastIfActive`); the window then never expires
    /// (`ttl` is ignored) and ends when its job finishes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub keep_last_if_active: Option<bool>,
}

impl Deduplication {
    /// Deduplicate on `id` for as long as the job exists.
    #[must_use]
    pub fn new(id: impl Into<String>) -> Self {
        Self {
            id: id.into(),
            ..Self::default()
        }
    }

    /// Sets the ttl (stored in whole milliseconds).
    #[must_use]
    pub fn ttl(mut self, ttl: Duration) -> Self {
        self.ttl = Some(duration_ms(ttl));
        self
    }

    /// Sets `extend`.
    #[must_use]
    pub fn extend(mut self, on: bool) -> Self {
        self.extend = Some(on);
        self
    }

    /// Sets `replace`.
    #[must_use]
    pub fn replace(mut self, on: bool) -> Self {
        self.replace = Some(on);
        self
    }

    /// Sets `reschedule`.
    #[must_use]
    pub fn reschedule(mut self, on: bool) -> Self {
        self.reschedule = Some(on);
        self
    }

    /// Sets `keepLastIfActive`.
    #[must_use]
    pub fn keep_last_if_active(mut self, on: bool) -> Self {
        self.keep_last_if_active = Some(on);
        self
    }
}

/// Parent of a job in a flow, as given in the options (Node `ParentOptions`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ParentRef {
    /// Parent job id.
    pub id: String,
    /// Fully qualified parent queue, `{prefix}:{queue}` (e.g. `bull:flows`).
    pub queue: String,
}

impl ParentRef {
    /// Parent `id` in the queue whose qualified name is `queue`.
    #[must_use]
    pub fn new(id: impl Into<String>, queue: impl Into<String>) -> Self {
        Self {
            id: id.into(),
            queue: queue.into(),
        }
    }

    /// The parent's job hash key, `{queue}:{id}` (Node `getParentKey`).
    #[must_use]
    pub fn job_key(&self) -> String {
        format!("{}:{}", self.queue, self.id)
    }

    /// The parent as a [`JobRef`](crate::ids::JobRef): the qualified queue split at its last
    /// `:` into namespace (the prefix, which may hold `:`) and queue name. `None` when the
    /// queue is not qualified (no `:`), so it names no queue.
    ///
    /// ```
    /// use bullmq_protocol::ParentRef;
    /// let parent = ParentRef::new("7", "bull:flows").job_ref().unwrap();
    /// assert_eq!((parent.queue.namespace(), parent.queue.name(), parent.id.as_str()), ("bull", "flows", "7"));
    /// assert_eq!(ParentRef::from(&parent), ParentRef::new("7", "bull:flows"));
    /// assert!(ParentRef::new("7", "flows").job_ref().is_none());
    /// ```
    #[must_use]
    pub fn job_ref(&self) -> Option<crate::ids::JobRef> {
        let (namespace, name) = self.queue.rsplit_once(':')?;
        Some(crate::ids::JobRef::new(
            crate::ids::QueueId::new(namespace, name),
            self.id.clone(),
        ))
    }
}

impl From<&crate::ids::JobRef> for ParentRef {
    /// Node's option shape of `job`: its id and qualified queue `{namespace}:{name}`.
    fn from(job: &crate::ids::JobRef) -> Self {
        Self::new(job.id.clone(), job.queue.to_string())
    }
}
