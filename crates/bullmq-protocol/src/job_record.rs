//! Typed view of a job hash (`{prefix}:{queue}:{jobId}`), decoded as tolerantly as Node
//! BullMQ 6.7.0 reads it.
//!
//! Fields and how they are read:
//!
//! | field | type | when absent | Node's tolerance we copy |
//! |---|---|---|---|
//! | `name` | string | `""` | |
//! | `data` | JSON | `{}` | invalid JSON is an error |
//! | `opts` | [`JobOptions`] JSON | empty | invalid JSON is an error |
//! | `timestamp` `delay` `priority` | integer | 0 | `"12.7"` reads 12 (`parseInt`) |
//! | `progress` | JSON (number or object) | `0` | invalid JSON is an error |
//! | `processedOn` `finishedOn` | integer | `None` | empty string is `None` |
//! | `returnvalue` | JSON | `None` | invalid JSON or `null` is `None` |
//! | `failedReason` | string | `None` | |
//! | `stacktrace` | JSON array of strings | `[]` | invalid is `[]` |
//! | `atm` (legacy `attemptsMade`) `ats` `stc` | integer | 0 | |
//! | `pb` `parentKey` `rjk` `deid` `defa` | string | `None` | |
//! | `parent` | JSON `{id, queueKey, fpof?, …}` | `None` | invalid JSON is an error |
//!
//! ```
//! use std::collections::HashMap;
//! use bullmq_protocol::job_record::JobRecord;
//!
//! let hash: HashMap<String, String> = [
//!     ("name", "email"),
//!     ("data", r#"{"to":"a@b.c"}"#),
//!     ("opts", r#"{"attempts":3}"#),
//!     ("timestamp", "1764000000000"),
//!     ("delay", "0"),
//!     ("priority", "0"),
//! ]
//! .into_iter()
//! .map(|(k, v)| (k.to_owned(), v.to_owned()))
//! .collect();
//! let job = JobRecord::decode("1", &hash).unwrap();
//! assert_eq!(job.data["to"], "a@b.c");
//! assert_eq!(job.opts.attempts, Some(3));
//! assert_eq!(job.attempts_made, 0);
//! ```

use std::collections::{BTreeMap, HashMap};

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::error::{DecodeError, DecodeReason};
use crate::options::JobOptions;

/// Turns a raw `HGETALL` reply (field names and values as bytes) into the text map
/// [`JobRecord::decode`] reads.
///
/// ```
/// use bullmq_protocol::job_record::text_fields;
/// use bullmq_protocol::DecodeReason;
///
/// let ok = text_fields([(b"name".to_vec(), b"email".to_vec())]).unwrap();
/// assert_eq!(ok["name"], "email");
/// let error = text_fields([(b"data".to_vec(), vec![b'{', 0xff, b'}'])]).unwrap_err();
/// assert_eq!(error.field, "data");
/// assert!(matches!(error.reason, DecodeReason::NotUtf8 { bytes: 3, valid_up_to: 1 }));
/// ```
///
/// # Errors
///
/// [`DecodeReason::NotUtf8`] naming the first field whose value (or name, then shown lossily)
/// is not valid UTF-8.
pub fn text_fields<I>(pairs: I) -> Result<HashMap<String, String>, DecodeError>
where
    I: IntoIterator<Item = (Vec<u8>, Vec<u8>)>,
{
    let not_utf8 = |field: &str, raw: &[u8], error: std::str::Utf8Error| {
        DecodeError::new(
            field,
            DecodeReason::NotUtf8 {
                bytes: raw.len(),
                valid_up_to: error.valid_up_to(),
            },
        )
    };
    let mut fields = HashMap::new();
    for (name, value) in pairs {
        let name = match String::from_utf8(name) {
            Ok(name) => name,
            Err(error) => {
                let lossy = String::from_utf8_lossy(error.as_bytes()).into_owned();
                return Err(not_utf8(&lossy, error.as_bytes(), error.utf8_error()));
            }
        };
        let value = match String::from_utf8(value) {
            Ok(value) => value,
            Err(error) => return Err(not_utf8(&name, error.as_bytes(), error.utf8_error())),
        };
        fields.insert(name, value);
    }
    Ok(fields)
}

/// Job hash field names, as BullMQ writes them.
pub mod field {
    /// Job name.
    pub const NAME: &str = "name";
    /// JSON payload.
    pub const DATA: &str = "data";
    /// JSON options (short keys).
    pub const OPTS: &str = "opts";
    /// Creation time, ms.
    pub const TIMESTAMP: &str = "timestamp";
    /// Delay, ms.
    pub const DELAY: &str = "delay";
    /// Priority.
    pub const PRIORITY: &str = "priority";
    /// JSON progress.
    pub const PROGRESS: &str = "progress";
    /// Time the current attempt started, ms.
    pub const PROCESSED_ON: &str = "processedOn";
    /// Time the job finished, ms.
    pub const FINISHED_ON: &str = "finishedOn";
    /// JSON return value.
    pub const RETURN_VALUE: &str = "returnvalue";
    /// Failure message.
    pub const FAILED_REASON: &str = "failedReason";
    /// JSON array of stack traces.
    pub const STACKTRACE: &str = "stacktrace";
    /// Attempts made (finished attempts).
    pub const ATTEMPTS_MADE: &str = "atm";
    /// Legacy long name of `atm`.
    pub const ATTEMPTS_MADE_LEGACY: &str = "attemptsMade";
    /// Attempts started.
    pub const ATTEMPTS_STARTED: &str = "ats";
    /// Stalled counter.
    pub const STALLED_COUNTER: &str = "stc";
    /// Name of the worker that processed the job.
    pub const PROCESSED_BY: &str = "pb";
    /// Parent job key.
    pub const PARENT_KEY: &str = "parentKey";
    /// JSON parent info.
    pub const PARENT: &str = "parent";
    /// Repeat job key.
    pub const REPEAT_JOB_KEY: &str = "rjk";
    /// Deduplication id.
    pub const DEDUPLICATION_ID: &str = "deid";
    /// Deferred failure message.
    pub const DEFERRED_FAILURE: &str = "defa";

    /// Every field above, in the order [`JobRecord::encode`](super::JobRecord::encode) writes.
    pub const ALL: [&str; 22] = [
        NAME,
        DATA,
        OPTS,
        TIMESTAMP,
        DELAY,
        PRIORITY,
        PROGRESS,
        PROCESSED_ON,
        FINISHED_ON,
        RETURN_VALUE,
        FAILED_REASON,
        STACKTRACE,
        ATTEMPTS_MADE,
        ATTEMPTS_MADE_LEGACY,
        ATTEMPTS_STARTED,
        STALLED_COUNTER,
        PROCESSED_BY,
        PARENT_KEY,
        PARENT,
        REPEAT_JOB_KEY,
        DEDUPLICATION_ID,
        DEFERRED_FAILURE,
    ];
}

/// The `parent` field of a child job in a flow.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ParentInfo {
    /// Parent job id.
    pub id: String,
    /// Parent queue, `{prefix}:{queue}`.
    pub queue_key: String,
    /// Fail the parent when this child fails.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fpof: Option<bool>,
    /// Remove this child from the parent's dependencies when it fails.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rdof: Option<bool>,
    /// Ignore this child's failure in the parent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub idof: Option<bool>,
    /// Let the parent continue when this child fails.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpof: Option<bool>,
}

/// A decoded job hash (see the [module docs](self) for each field's decoding).
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct JobRecord {
    /// Job id (the key's last segment; not stored in the hash).
    pub id: String,
    /// `name`.
    pub name: String,
    /// `data`, parsed.
    pub data: Value,
    /// `data` as stored (`{}` when absent), for passing through without re-serialising.
    pub data_raw: String,
    /// `opts`.
    pub opts: JobOptions,
    /// `timestamp`: creation time, ms since the Unix epoch.
    pub timestamp: u64,
    /// `delay` in ms.
    pub delay: u64,
    /// `priority`.
    pub priority: u32,
    /// `progress`: a number or an object.
    pub progress: Value,
    /// `processedOn`: start of the current/last attempt, ms.
    pub processed_on: Option<u64>,
    /// `finishedOn`: ms.
    pub finished_on: Option<u64>,
    /// `returnvalue`, parsed.
    pub returnvalue: Option<Value>,
    /// `failedReason`.
    pub failed_reason: Option<String>,
    /// `stacktrace`.
    pub stacktrace: Vec<String>,
    /// `atm` (or legacy `attemptsMade`): finished attempts.
    pub attempts_made: u32,
    /// `ats`: started attempts.
    pub attempts_started: u32,
    /// `stc`: how often the job stalled.
    pub stalled_counter: u32,
    /// `pb`: name of the worker that processed it.
    pub processed_by: Option<String>,
    /// `parentKey`: the parent's job hash key.
    pub parent_key: Option<String>,
    /// `parent`.
    pub parent: Option<ParentInfo>,
    /// `rjk`: job scheduler key.
    pub repeat_job_key: Option<String>,
    /// `deid`: deduplication id.
    pub deduplication_id: Option<String>,
    /// `defa`: deferred failure message.
    pub deferred_failure: Option<String>,
    /// Fields this type does not know, verbatim.
    pub extra: BTreeMap<String, String>,
}

impl JobRecord {
    /// A new job as BullMQ creates it: the given fields, zero counters, progress `0`, no
    /// result. `delay` and `priority` are taken from `opts`, and `data_raw` is `data`
    /// serialised. Set the other public fields directly.
    #[must_use]
    pub fn new(
        id: impl Into<String>,
        name: impl Into<String>,
        data: Value,
        opts: JobOptions,
        timestamp: u64,
    ) -> Self {
        JobRecord {
            id: id.into(),
            name: name.into(),
            data_raw: data.to_string(),
            data,
            delay: opts.delay.unwrap_or(0),
            priority: opts.priority.unwrap_or(0),
            opts,
            timestamp,
            progress: Value::from(0),
            processed_on: None,
            finished_on: None,
            returnvalue: None,
            failed_reason: None,
            stacktrace: Vec::new(),
            attempts_made: 0,
            attempts_started: 0,
            stalled_counter: 0,
            processed_by: None,
            parent_key: None,
            parent: None,
            repeat_job_key: None,
            deduplication_id: None,
            deferred_failure: None,
            extra: BTreeMap::new(),
        }
    }

    /// `opts.attempts` as Node counts them (absent or 0 is one try).
    #[must_use]
    pub fn max_attempts(&self) -> u32 {
        self.opts.max_attempts()
    }

    /// Decodes the fields of the job hash of job `id` (as returned by `HGETALL`).
    ///
    /// # Errors
    ///
    /// A [`DecodeError`] naming the first field Node would also fail on (`data`, `opts`,
    /// `progress`, `parent`), or a numeric field that is not a number.
    pub fn decode(id: &str, fields: &HashMap<String, String>) -> Result<JobRecord, DecodeError> {
        let get = |name: &str| fields.get(name).map(String::as_str);
        let data_raw = match get(field::DATA) {
            Some(raw) if !raw.is_empty() => raw.to_owned(),
            _ => String::from("{}"),
        };
        let data = parse_json(field::DATA, &data_raw)?;
        let opts = JobOptions::from_json(get(field::OPTS).unwrap_or(""))
            .map_err(|e| DecodeError::new(field::OPTS, DecodeReason::InvalidJson(e.to_string())))?;
        let progress = match get(field::PROGRESS) {
            Some(raw) if !raw.is_empty() => parse_json(field::PROGRESS, raw)?,
            _ => Value::from(0),
        };
        let returnvalue = get(field::RETURN_VALUE)
            .and_then(|raw| serde_json::from_str::<Value>(raw).ok())
            .filter(|v| !v.is_null());
        let stacktrace = get(field::STACKTRACE)
            .and_then(|raw| serde_json::from_str::<Vec<Value>>(raw).ok())
            .map(|traces| traces.into_iter().map(trace_string).collect())
            .unwrap_or_default();
        let parent = match get(field::PARENT) {
            Some(raw) if !raw.is_empty() => {
                Some(serde_json::from_str::<ParentInfo>(raw).map_err(|e| {
                    DecodeError::new(field::PARENT, DecodeReason::InvalidJson(e.to_string()))
                })?)
            }
            _ => None,
        };
        let attempts_made = match get(field::ATTEMPTS_MADE) {
            Some(_) => int_or_zero(fields, field::ATTEMPTS_MADE)?,
            None => int_or_zero(fields, field::ATTEMPTS_MADE_LEGACY)?,
        };
        let extra = fields
            .iter()
            .filter(|(k, _)| !field::ALL.contains(&k.as_str()))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        Ok(JobRecord {
            id: id.to_owned(),
            name: get(field::NAME).unwrap_or_default().to_owned(),
            data,
            data_raw,
            opts,
            timestamp: int_or_zero(fields, field::TIMESTAMP)?,
            delay: int_or_zero(fields, field::DELAY)?,
            priority: int_or_zero(fields, field::PRIORITY)?,
            progress,
            processed_on: int_opt(fields, field::PROCESSED_ON)?,
            finished_on: int_opt(fields, field::FINISHED_ON)?,
            returnvalue,
            failed_reason: get(field::FAILED_REASON).map(str::to_owned),
            stacktrace,
            attempts_made,
            attempts_started: int_or_zero(fields, field::ATTEMPTS_STARTED)?,
            stalled_counter: int_or_zero(fields, field::STALLED_COUNTER)?,
            processed_by: get(field::PROCESSED_BY).map(str::to_owned),
            parent_key: get(field::PARENT_KEY)
                .filter(|s| !s.is_empty())
                .map(str::to_owned),
            parent,
            repeat_job_key: get(field::REPEAT_JOB_KEY).map(str::to_owned),
            deduplication_id: get(field::DEDUPLICATION_ID).map(str::to_owned),
            deferred_failure: get(field::DEFERRED_FAILURE).map(str::to_owned),
            extra,
        })
    }

    /// Encodes every present field as `(field, value)` pairs for `HSET`, such that
    /// [`JobRecord::decode`] gives the record back. Absent optional fields are not written;
    /// `atm`, `ats` and `stc` are written only when non-zero, as BullMQ does.
    #[must_use]
    pub fn encode(&self) -> Vec<(String, String)> {
        let mut out = encode_new(&self.name, &self.data_raw, &self.opts, self.timestamp);
        // encode_new derives delay/priority from opts; the hash's own values win.
        set(&mut out, field::DELAY, self.delay.to_string());
        set(&mut out, field::PRIORITY, self.priority.to_string());
        out.retain(|(k, _)| k != field::REPEAT_JOB_KEY && k != field::DEDUPLICATION_ID);
        let mut push = |k: &str, v: String| out.push((k.to_owned(), v));
        push(field::PROGRESS, self.progress.to_string());
        if let Some(v) = self.processed_on {
            push(field::PROCESSED_ON, v.to_string());
        }
        if let Some(v) = self.finished_on {
            push(field::FINISHED_ON, v.to_string());
        }
        if let Some(v) = &self.returnvalue {
            push(field::RETURN_VALUE, v.to_string());
        }
        if let Some(v) = &self.failed_reason {
            push(field::FAILED_REASON, v.clone());
        }
        if !self.stacktrace.is_empty() {
            push(
                field::STACKTRACE,
                Value::from(self.stacktrace.clone()).to_string(),
            );
        }
        for (k, v) in [
            (field::ATTEMPTS_MADE, self.attempts_made),
            (field::ATTEMPTS_STARTED, self.attempts_started),
            (field::STALLED_COUNTER, self.stalled_counter),
        ] {
            if v != 0 {
                push(k, v.to_string());
            }
        }
        for (k, v) in [
            (field::PROCESSED_BY, &self.processed_by),
            (field::PARENT_KEY, &self.parent_key),
            (field::REPEAT_JOB_KEY, &self.repeat_job_key),
            (field::DEDUPLICATION_ID, &self.deduplication_id),
            (field::DEFERRED_FAILURE, &self.deferred_failure),
        ] {
            if let Some(v) = v {
                push(k, v.clone());
            }
        }
        if let Some(parent) = &self.parent {
            push(
                field::PARENT,
                serde_json::to_string(parent).unwrap_or_default(),
            );
        }
        for (k, v) in &self.extra {
            push(k, v.clone());
        }
        out
    }
}

/// The fields BullMQ writes when it creates a job: `name data opts timestamp delay priority`,
/// then `rjk` (from `opts.repeatJobKey`) and `deid` (from `opts.de.id`) when present.
///
/// `parentKey` and `parent` need the parent queue's prefix and are added by the caller.
/// `data_json` must already be serialised JSON.
#[must_use]
pub fn encode_new(
    name: &str,
    data_json: &str,
    opts: &JobOptions,
    timestamp_ms: u64,
) -> Vec<(String, String)> {
    let mut out = vec![
        (field::NAME.to_owned(), name.to_owned()),
        (field::DATA.to_owned(), data_json.to_owned()),
        (field::OPTS.to_owned(), opts.to_json()),
        (field::TIMESTAMP.to_owned(), timestamp_ms.to_string()),
        (field::DELAY.to_owned(), opts.delay.unwrap_or(0).to_string()),
        (
            field::PRIORITY.to_owned(),
            opts.priority.unwrap_or(0).to_string(),
        ),
    ];
    if let Some(rjk) = &opts.repeat_job_key {
        out.push((field::REPEAT_JOB_KEY.to_owned(), rjk.clone()));
    }
    if let Some(dedup) = &opts.deduplication {
        out.push((field::DEDUPLICATION_ID.to_owned(), dedup.id.clone()));
    }
    out
}

fn set(out: &mut [(String, String)], key: &str, value: String) {
    if let Some(slot) = out.iter_mut().find(|(k, _)| k == key) {
        slot.1 = value;
    }
}

fn parse_json(name: &str, raw: &str) -> Result<Value, DecodeError> {
    serde_json::from_str(raw)
        .map_err(|e| DecodeError::new(name, DecodeReason::InvalidJson(e.to_string())))
}

/// Node's stack traces are strings; anything else is kept as its JSON text.
fn trace_string(v: Value) -> String {
    match v {
        Value::String(s) => s,
        other => other.to_string(),
    }
}

/// Parses an integer field the way `parseInt` does for the values BullMQ writes: decimal
/// digits, optionally with a fractional part (truncated). Empty is `None`.
fn parse_int(name: &str, raw: &str) -> Result<Option<u64>, DecodeError> {
    let s = raw.trim();
    if s.is_empty() {
        return Ok(None);
    }
    if let Ok(v) = s.parse::<u64>() {
        return Ok(Some(v));
    }
    match s.parse::<f64>() {
        Ok(v) if v.is_finite() && v >= 0.0 => Ok(Some(v.trunc() as u64)),
        // A negative value (never written by BullMQ) reads as 0 rather than failing the job.
        Ok(v) if v.is_finite() => Ok(Some(0)),
        _ => Err(DecodeError::new(
            name,
            DecodeReason::InvalidNumber(raw.to_owned()),
        )),
    }
}

fn int_opt<T: TryFrom<u64>>(
    fields: &HashMap<String, String>,
    name: &str,
) -> Result<Option<T>, DecodeError> {
    match fields.get(name) {
        None => Ok(None),
        Some(raw) => match parse_int(name, raw)? {
            None => Ok(None),
            Some(v) => T::try_from(v)
                .map(Some)
                .map_err(|_| DecodeError::new(name, DecodeReason::InvalidNumber(raw.clone()))),
        },
    }
}

fn int_or_zero<T: TryFrom<u64> + Default>(
    fields: &HashMap<String, String>,
    name: &str,
) -> Result<T, DecodeError> {
    Ok(int_opt(fields, name)?.unwrap_or_default())
}
