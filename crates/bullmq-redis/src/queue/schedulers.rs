//! Job schedulers on Redis: Node 6.7.0's `repeat` zset, `repeat:{id}` hashes and
//! `repeat:{id}:{millis}` iterations, written by this crate's scheduler scripts.

use std::collections::HashMap;

use bullmq_backend::{BackendError, BackendResult, NextIteration, UpsertOutcome};
use bullmq_protocol::keys::{QueueKey, QueueKeys};
use bullmq_protocol::scheduler::{
    has_legacy_repeat_key_shape, JobSchedulerRecord, NextIterationPlan, UpsertPlan,
};
use fred::prelude::{Client, Value};
use serde_json::Map;

use super::reply::{array, integer, string, unexpected};
use super::scripts::{
    ADD_JOB_SCHEDULER, NEXT_SCHEDULER_ITERATION, READ_JOB_SCHEDULERS, REMOVE_JOB_SCHEDULER,
};
use crate::error::Result;

fn iteration_keys(keys: &QueueKeys) -> Vec<String> {
    [
        QueueKey::Repeat,
        QueueKey::Delayed,
        QueueKey::Wait,
        QueueKey::Meta,
        QueueKey::Prioritized,
        QueueKey::Marker,
        QueueKey::Id,
        QueueKey::Events,
        QueueKey::PriorityCounter,
        QueueKey::Active,
    ]
    .into_iter()
    .map(|key| keys.key(key))
    .collect()
}

fn optional<T: ToString>(value: Option<&T>) -> Value {
    Value::from(value.map(ToString::to_string).unwrap_or_default())
}

fn json(opts: &Map<String, serde_json::Value>) -> Value {
    Value::from(serde_json::Value::Object(opts.clone()).to_string())
}

/// Stores the scheduler of `plan` with its pending iteration (replacing an existing one).
///
/// # Errors
///
/// [`crate::RedisError::Command`] when the call fails, `UnexpectedReply` on a reply of another
/// shape.
pub async fn upsert_job_scheduler(
    client: &Client,
    keys: &QueueKeys,
    plan: &UpsertPlan,
) -> Result<UpsertOutcome> {
    let f = &plan.fields;
    let args = vec![
        Value::from(keys.base()),
        Value::from(plan.id.as_str()),
        optional(plan.next_millis.as_ref()),
        Value::from(plan.now_ms.to_string()),
        Value::from(f.name.as_str()),
        optional(f.tz.as_ref()),
        optional(f.pattern.as_ref()),
        optional(f.every.as_ref()),
        optional(f.limit.as_ref()),
        optional(f.offset.as_ref()),
        optional(f.start_date.as_ref()),
        optional(f.end_date.as_ref()),
        Value::from(plan.template_data.as_str()),
        Value::from(plan.template_opts.as_str()),
        json(&plan.iteration_opts),
    ];
    let name = ADD_JOB_SCHEDULER.name();
    let reply: Value = ADD_JOB_SCHEDULER
        .run(client, iteration_keys(keys), args)
        .await?;
    match reply {
        Value::Array(items) => {
            let mut items = items.into_iter();
            let (Some(job_id), Some(delay)) = (items.next(), items.next()) else {
                return Err(unexpected(name, "expected {jobId, delay}"));
            };
            let delay = u64::try_from(integer(name, &delay)?).unwrap_or(0);
            Ok(UpsertOutcome::Added {
                job_id: string(name, job_id)?,
                delay,
            })
        }
        other => match integer(name, &other)? {
            -10 => Ok(UpsertOutcome::IdCollision),
            -11 => Ok(UpsertOutcome::SlotsBusy),
            code => Err(unexpected(name, format!("unknown code {code}"))),
        },
    }
}

/// Creates the iteration after the started job of `plan`, if it is the current one.
///
/// # Errors
///
/// [`crate::RedisError::Command`] when the call fails.
pub async fn create_next_iteration(
    client: &Client,
    keys: &QueueKeys,
    plan: &NextIterationPlan,
) -> Result<NextIteration> {
    let args = vec![
        Value::from(keys.base()),
        Value::from(plan.scheduler_id.as_str()),
        optional(plan.next_millis.as_ref()),
        Value::from(plan.now_ms.to_string()),
        Value::from(plan.producer_id.as_str()),
        json(&plan.iteration_opts),
        Value::from(if plan.legacy_key_shape { "1" } else { "0" }),
    ];
    let name = NEXT_SCHEDULER_ITERATION.name();
    let reply: Value = NEXT_SCHEDULER_ITERATION
        .run(client, iteration_keys(keys), args)
        .await?;
    let mut items = array(name, reply)?.into_iter();
    let code = items
        .next()
        .map(|code| integer(name, &code))
        .transpose()?
        .ok_or_else(|| unexpected(name, "empty reply"))?;
    let job_id = items.next().map(|id| string(name, id)).transpose()?;
    next_iteration(name, code, job_id)
}

/// The outcome a scheduler script (or the fetch) reports for a next iteration: its code and,
/// for 1 and 2, the next iteration's id.
pub(crate) fn next_iteration(
    script: &'static str,
    code: i64,
    job_id: Option<String>,
) -> Result<NextIteration> {
    let job_id = || {
        job_id
            .filter(|id| !id.is_empty())
            .ok_or_else(|| unexpected(script, "missing job id"))
    };
    match code {
        0 => Ok(NextIteration::NotCurrent),
        1 => Ok(NextIteration::Created(job_id()?)),
        2 => Ok(NextIteration::Duplicated(job_id()?)),
        3 => Ok(NextIteration::Legacy),
        4 => Ok(NextIteration::Ended),
        other => Err(unexpected(
            script,
            format!("unknown next-iteration code {other}"),
        )),
    }
}

/// Removes the scheduler `id` and its delayed pending iteration; `false` when there was none.
///
/// # Errors
///
/// [`crate::RedisError::Command`] when the call fails.
pub async fn remove_job_scheduler(client: &Client, keys: &QueueKeys, id: &str) -> Result<bool> {
    let script_keys = vec![
        keys.key(QueueKey::Repeat),
        keys.key(QueueKey::Delayed),
        keys.key(QueueKey::Events),
    ];
    let args = vec![Value::from(keys.base()), Value::from(id)];
    let reply: Value = REMOVE_JOB_SCHEDULER.run(client, script_keys, args).await?;
    Ok(integer(REMOVE_JOB_SCHEDULER.name(), &reply)? == 1)
}

/// One scheduler as read: id, next run, hash.
type RawScheduler = (String, Option<u64>, HashMap<String, String>);

async fn read(client: &Client, keys: &QueueKeys, args: Vec<Value>) -> Result<Vec<RawScheduler>> {
    let name = READ_JOB_SCHEDULERS.name();
    let reply: Value = READ_JOB_SCHEDULERS
        .run(client, vec![keys.key(QueueKey::Repeat)], args)
        .await?;
    let items = array(name, reply)?;
    let mut out = Vec::with_capacity(items.len() / 3);
    let mut items = items.into_iter();
    while let (Some(id), Some(score), Some(hash)) = (items.next(), items.next(), items.next()) {
        let id = string(name, id)?;
        let score = string(name, score)?;
        let next = bullmq_protocol::scheduler::parse_score(&score);
        let pairs = array(name, hash)?;
        let mut fields = HashMap::with_capacity(pairs.len() / 2);
        let mut pairs = pairs.into_iter();
        while let (Some(field), Some(value)) = (pairs.next(), pairs.next()) {
            fields.insert(string(name, field)?, string(name, value)?);
        }
        out.push((id, next, fields));
    }
    Ok(out)
}

fn decode(raw: RawScheduler) -> BackendResult<Option<JobSchedulerRecord>> {
    let (id, next, fields) = raw;
    JobSchedulerRecord::decode(&id, &fields, next).map_err(BackendError::backend)
}

/// The scheduler `id`; `None` when there is none. A BullMQ 5 repeatable job under that key is
/// reported as an error that says it must be migrated (as Node does).
///
/// # Errors
///
/// [`BackendError`] when the call fails or the hash cannot be read.
pub async fn get_job_scheduler(
    client: &Client,
    keys: &QueueKeys,
    id: &str,
) -> BackendResult<Option<JobSchedulerRecord>> {
    let raw = read(client, keys, vec![Value::from("one"), Value::from(id)]).await?;
    match raw.into_iter().next() {
        None => Ok(None),
        Some(raw) if raw.2.is_empty() && has_legacy_repeat_key_shape(id) => {
            Err(BackendError::backend(
                bullmq_protocol::scheduler::LegacyRepeatableJob(id.to_owned()),
            ))
        }
        Some(raw) => decode(raw),
    }
}

/// Schedulers by next run. An entry without a hash is removed and skipped, as Node's getter
/// does. A BullMQ 5 repeatable job in the range (same zset, no hash, a legacy key) is left
/// alone and makes the whole read fail with Node's migration message, as Node 6.7.0's
/// `getJobSchedulers` does (the stale entries are still removed first).
///
/// # Errors
///
/// [`BackendError`] when a call fails or a hash cannot be read, or wrapping
/// [`bullmq_protocol::scheduler::LegacyRepeatableJob`] for a legacy entry.
pub async fn get_job_schedulers(
    client: &Client,
    keys: &QueueKeys,
    start: i64,
    end: i64,
    asc: bool,
) -> BackendResult<Vec<JobSchedulerRecord>> {
    get_job_schedulers_from(client, client, keys, start, end, asc).await
}

/// [`get_job_schedulers`] reading on `reader` (a replica, for replica reads) and removing the
/// stale entries on `writer` (the primary: a replica refuses writes).
///
/// # Errors
///
/// As [`get_job_schedulers`].
pub async fn get_job_schedulers_from(
    reader: &Client,
    writer: &Client,
    keys: &QueueKeys,
    start: i64,
    end: i64,
    asc: bool,
) -> BackendResult<Vec<JobSchedulerRecord>> {
    let args = vec![
        Value::from("range"),
        Value::from(start),
        Value::from(end),
        Value::from(if asc { "1" } else { "0" }),
    ];
    let mut out = Vec::new();
    let mut legacy = None;
    for raw in read(reader, keys, args).await? {
        if raw.2.is_empty() {
            if has_legacy_repeat_key_shape(&raw.0) {
                legacy.get_or_insert(raw.0);
            } else {
                remove_job_scheduler(writer, keys, &raw.0).await?;
            }
            continue;
        }
        out.extend(decode(raw)?);
    }
    match legacy {
        Some(key) => Err(BackendError::backend(
            bullmq_protocol::scheduler::LegacyRepeatableJob(key),
        )),
        None => Ok(out),
    }
}
