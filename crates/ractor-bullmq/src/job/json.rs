//! A [`Job`] as JSON, in the shape of Node's `job.toJSON()` (what `JSON.stringify(job)` gives):
//! `id`, `name`, `data`, `opts`, `progress`, `returnvalue`, `stacktrace`, `delay`,
//! `priority`, `attemptsMade`, `attemptsStarted`, `stalledCounter`, `timestamp`,
//! `finishedOn`, `processedOn`, `failedReason`, `parentKey`, `parent`, `repeatJobKey`,
//! `deduplicationId`, `processedBy`, and the queue's name as `queueName`. A job read back from
//! JSON has no queue handle.
//!
//! ```
//! use std::collections::HashMap;
//! use ractor_bullmq::Job;
//!
//! let hash: HashMap<String, String> = [("name", "email"), ("data", r#"{"to":"a@b.c"}"#)]
//!     .into_iter()
//!     .map(|(k, v)| (k.to_string(), v.to_string()))
//!     .collect();
//! let job = Job::decode("emails", "7", &hash).unwrap();
//! let json = serde_json::to_value(&job).unwrap();
//! assert_eq!((json["id"].as_str(), json["queueName"].as_str()), (Some("7"), Some("emails")));
//! assert_eq!(json["data"]["to"], "a@b.c");
//! let back: Job = serde_json::from_value(json).unwrap();
//! assert_eq!(back, job);
//! ```

use bullmq_protocol::job_record::{JobRecord, ParentInfo};
use bullmq_protocol::options::JobOptions;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::Value;

use super::Job;

#[derive(Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct JobJson {
    id: String,
    name: String,
    #[serde(default)]
    data: Value,
    #[serde(default)]
    opts: JobOptions,
    #[serde(default)]
    progress: Value,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    returnvalue: Option<Value>,
    #[serde(default)]
    stacktrace: Vec<String>,
    #[serde(default)]
    delay: u64,
    #[serde(default)]
    priority: u32,
    #[serde(default)]
    attempts_made: u32,
    #[serde(default)]
    attempts_started: u32,
    #[serde(default)]
    stalled_counter: u32,
    #[serde(default)]
    timestamp: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    finished_on: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    processed_on: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    failed_reason: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    parent_key: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    parent: Option<ParentInfo>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    repeat_job_key: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    deduplication_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    processed_by: Option<String>,
    #[serde(default)]
    queue_name: String,
}

/// Node's `job.toJSON()` shape: `id`, `name`, `data`, `opts`, … and `queueName`.
impl Serialize for Job {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let r = self.record();
        JobJson {
            id: r.id.clone(),
            name: r.name.clone(),
            data: r.data.clone(),
            opts: r.opts.clone(),
            progress: r.progress.clone(),
            returnvalue: r.returnvalue.clone(),
            stacktrace: r.stacktrace.clone(),
            delay: r.delay,
            priority: r.priority,
            attempts_made: r.attempts_made,
            attempts_started: r.attempts_started,
            stalled_counter: r.stalled_counter,
            timestamp: r.timestamp,
            finished_on: r.finished_on,
            processed_on: r.processed_on,
            failed_reason: r.failed_reason.clone(),
            parent_key: r.parent_key.clone(),
            parent: r.parent.clone(),
            repeat_job_key: r.repeat_job_key.clone(),
            deduplication_id: r.deduplication_id.clone(),
            processed_by: r.processed_by.clone(),
            queue_name: self.queue_name().to_owned(),
        }
        .serialize(serializer)
    }
}

/// Reads Node's `job.toJSON()` shape back; the job has no queue handle.
impl<'de> Deserialize<'de> for Job {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let j = JobJson::deserialize(deserializer)?;
        let mut r = JobRecord::new(j.id, j.name, j.data, j.opts, j.timestamp);
        r.delay = j.delay;
        r.priority = j.priority;
        r.progress = j.progress;
        r.returnvalue = j.returnvalue;
        r.stacktrace = j.stacktrace;
        r.attempts_made = j.attempts_made;
        r.attempts_started = j.attempts_started;
        r.stalled_counter = j.stalled_counter;
        r.finished_on = j.finished_on;
        r.processed_on = j.processed_on;
        r.failed_reason = j.failed_reason;
        r.parent_key = j.parent_key;
        r.parent = j.parent;
        r.repeat_job_key = j.repeat_job_key;
        r.deduplication_id = j.deduplication_id;
        r.processed_by = j.processed_by;
        Ok(Job::from_record(j.queue_name, r))
    }
}
