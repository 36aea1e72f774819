//! A `job` row as a [`JobRecord`]: the columns every read selects, and their decoding.
//!
//! The schema's enum types have a different OID in every schema, so states are selected as
//! text; jsonb is selected as text so `data_raw` is the stored JSON.

use bullmq_protocol::job_record::ParentInfo;
use bullmq_protocol::options::JobOptions;
use bullmq_protocol::{DecodeError, JobRecord};
use serde_json::Value;
use tokio_postgres::Row;

/// The columns of a job, in the order [`decode`] reads them (prefix each with a table alias
/// where needed).
pub(crate) const JOB_COLUMNS: &str = "id, name, state::text, data::text, opts::text, priority, \
     delay_ms, attempts_made, attempts_started, progress::text, return_value::text, \
     failed_reason, stacktrace::text, deferred_failure, processed_by, added_at_ms, \
     processed_at_ms, finished_at_ms, stalled_count, dedup_id, scheduler_id, parent_queue, \
     parent_id, parent_key, lock_token";

/// The job's id (column 0), readable even when the rest is not.
pub(crate) fn id(row: &Row) -> String {
    row.get(0)
}

/// Decodes a row selected with [`JOB_COLUMNS`].
pub(crate) fn decode(row: &Row) -> Result<JobRecord, DecodeError> {
    let id: String = row.get(0);
    let name: String = row.get(1);
    // jsonb renders with spaces (`{"a": 1}`); Node's clients see `JSON.stringify` of it.
    let data = parse("data", &row.get::<_, String>(3))?;
    let data_raw = data.to_string();
    let opts_raw: String = row.get(4);
    let opts = JobOptions::from_json(&opts_raw).map_err(|e| invalid("opts", e))?;
    let mut record = JobRecord::new(id, name, data, opts, non_negative(row.get::<_, i64>(15)));
    record.data_raw = data_raw;
    record.priority = u32::try_from(row.get::<_, i32>(5)).unwrap_or(0);
    record.delay = non_negative(row.get::<_, i64>(6));
    record.attempts_made = count(row.get::<_, i32>(7));
    record.attempts_started = count(row.get::<_, i32>(8));
    record.progress = match row.get::<_, Option<String>>(9) {
        Some(raw) => parse("progress", &raw)?,
        None => Value::from(0),
    };
    record.returnvalue = row
        .get::<_, Option<String>>(10)
        .and_then(|raw| serde_json::from_str::<Value>(&raw).ok())
        .filter(|v| !v.is_null());
    record.failed_reason = row.get(11);
    record.stacktrace = row
        .get::<_, Option<String>>(12)
        .and_then(|raw| serde_json::from_str::<Vec<Value>>(&raw).ok())
        .map(|traces| {
            traces
                .into_iter()
                .map(|t| match t {
                    Value::String(s) => s,
                    other => other.to_string(),
                })
                .collect()
        })
        .unwrap_or_default();
    record.deferred_failure = row.get(13);
    record.processed_by = row.get(14);
    record.processed_on = row.get::<_, Option<i64>>(16).map(non_negative);
    record.finished_on = row.get::<_, Option<i64>>(17).map(non_negative);
    record.stalled_counter = count(row.get::<_, i32>(18));
    record.deduplication_id = row.get(19);
    record.repeat_job_key = row.get(20);
    let parent_queue: Option<String> = row.get(21);
    let parent_id: Option<String> = row.get(22);
    record.parent_key = row.get(23);
    if let Some(parent_id) = parent_id {
        let opts = &record.opts;
        record.parent = Some(ParentInfo {
            id: parent_id,
            queue_key: parent_queue.unwrap_or_default(),
            fpof: opts.fail_parent_on_failure,
            rdof: opts.remove_dependency_on_failure,
            idof: opts.ignore_dependency_on_failure,
            cpof: opts.continue_parent_on_failure,
        });
    }
    Ok(record)
}

fn parse(field: &'static str, raw: &str) -> Result<Value, DecodeError> {
    serde_json::from_str(raw).map_err(|e| invalid(field, e))
}

fn invalid(field: &'static str, error: serde_json::Error) -> DecodeError {
    DecodeError::new(
        field,
        bullmq_protocol::DecodeReason::InvalidJson(error.to_string()),
    )
}

fn non_negative(v: i64) -> u64 {
    u64::try_from(v).unwrap_or(0)
}

fn count(v: i32) -> u32 {
    u32::try_from(v).unwrap_or(0)
}
