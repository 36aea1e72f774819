//! Reading a queue: counts, ids by state, a job's state, hash, logs, and the queue's meta.

use std::collections::HashMap;

use bullmq_protocol::keys::{QueueKey, QueueKeys};
use bullmq_protocol::state::JobState;
use fred::prelude::{Client, HashesInterface, ListInterface, Value};

use super::reply::{array, integer, string, strings, unexpected};
use super::scripts::{GET_COUNTS, GET_RANGES, GET_STATE};
use crate::error::Result;

/// What Node BullMQ writes into `meta.version`; dashboards require the field.
pub const META_VERSION: &str = "bullmq:6.7.0";

/// Default `opts.maxLenEvents` (Node's default events stream length).
pub const DEFAULT_MAX_LEN_EVENTS: u64 = 10_000;

fn suffixes(script: &'static str, states: &[JobState]) -> Result<Vec<Value>> {
    states
        .iter()
        .map(|state| {
            state
                .key_suffix()
                .map(Value::from)
                .ok_or_else(|| unexpected(script, "state `unknown` has no key"))
        })
        .collect()
}

/// Number of jobs in each of `states`, in order. `Waiting` counts `wait` plus the legacy
/// `paused` list; `Paused` counts the legacy list alone.
///
/// # Errors
///
/// [`crate::RedisError::Command`] when the call fails; [`crate::RedisError::UnexpectedReply`]
/// for [`JobState::Unknown`].
pub async fn get_counts(
    client: &Client,
    keys: &QueueKeys,
    states: &[JobState],
) -> Result<Vec<u64>> {
    if states.is_empty() {
        return Ok(Vec::new());
    }
    let args = suffixes(GET_COUNTS.name(), states)?;
    let reply: Value = GET_COUNTS
        .run(client, vec![keys.base().to_owned()], args)
        .await?;
    let counts = array(GET_COUNTS.name(), reply)?
        .iter()
        .map(|value| integer(GET_COUNTS.name(), value).map(|n| u64::try_from(n).unwrap_or(0)))
        .collect::<Result<Vec<_>>>()?;
    if counts.len() != states.len() {
        return Err(unexpected(
            GET_COUNTS.name(),
            "one count per state expected",
        ));
    }
    Ok(counts)
}

/// Job ids per state for positions `start..=end` (`-1` = last) of each state, oldest first when
/// `ascending`. One vector per state, in the order of `states`.
///
/// # Errors
///
/// As [`get_counts`].
pub async fn get_ranges(
    client: &Client,
    keys: &QueueKeys,
    states: &[JobState],
    start: i64,
    end: i64,
    ascending: bool,
) -> Result<Vec<Vec<String>>> {
    if states.is_empty() {
        return Ok(Vec::new());
    }
    let mut args = vec![
        Value::from(start.to_string()),
        Value::from(end.to_string()),
        Value::from(if ascending { "1" } else { "0" }),
    ];
    args.extend(suffixes(GET_RANGES.name(), states)?);
    let reply: Value = GET_RANGES
        .run(client, vec![keys.base().to_owned()], args)
        .await?;
    array(GET_RANGES.name(), reply)?
        .into_iter()
        .map(|ids| strings(GET_RANGES.name(), ids))
        .collect()
}

/// The state of job `job_id`, checked in Node's order; [`JobState::Unknown`] when in none.
///
/// # Errors
///
/// [`crate::RedisError::Command`] when the call fails.
pub async fn get_state(client: &Client, keys: &QueueKeys, job_id: &str) -> Result<JobState> {
    let script_keys = [
        QueueKey::Completed,
        QueueKey::Failed,
        QueueKey::Delayed,
        QueueKey::Active,
        QueueKey::Wait,
        QueueKey::Paused,
        QueueKey::WaitingChildren,
        QueueKey::Prioritized,
    ]
    .into_iter()
    .map(|key| keys.key(key))
    .collect();
    let reply: Value = GET_STATE
        .run(client, script_keys, vec![Value::from(job_id)])
        .await?;
    let name = string(GET_STATE.name(), reply)?;
    name.parse()
        .map_err(|_| unexpected(GET_STATE.name(), format!("unknown state {name:?}")))
}

/// The raw job hash as bytes, field by field (empty when the job does not exist). Bytes, not
/// strings: another client may have written binary values, which must be reported by field
/// (see [`bullmq_protocol::job_record::text_fields`]) rather than fail the whole reply.
///
/// # Errors
///
/// [`crate::RedisError::Command`] when the call fails.
pub async fn get_job_hash(
    client: &Client,
    keys: &QueueKeys,
    job_id: &str,
) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
    let reply: fred::types::Value = client.hgetall(keys.job(job_id)).await?;
    let mut values = reply.into_array().into_iter();
    let mut pairs = Vec::with_capacity(values.len() / 2);
    while let (Some(name), Some(value)) = (values.next(), values.next()) {
        let bytes = |v: fred::types::Value| v.into_owned_bytes().unwrap_or_default();
        pairs.push((bytes(name), bytes(value)));
    }
    Ok(pairs)
}

/// Log lines of a job for positions `start..=end` (`-1` = last), oldest first when `ascending`,
/// with the total number of lines.
///
/// # Errors
///
/// [`crate::RedisError::Command`] when the call fails.
pub async fn get_job_logs(
    client: &Client,
    keys: &QueueKeys,
    job_id: &str,
    start: i64,
    end: i64,
    ascending: bool,
) -> Result<(Vec<String>, u64)> {
    let logs_key = keys.logs(job_id);
    let pipeline = client.pipeline();
    // Descending reads the mirrored range from the end and reverses it, as Node does.
    let (from, to) = if ascending {
        (start, end)
    } else {
        (-(end + 1), -(start + 1))
    };
    let _: () = pipeline.lrange(&logs_key, from, to).await?;
    let _: () = pipeline.llen(&logs_key).await?;
    let (mut lines, count): (Vec<String>, u64) = pipeline.all().await?;
    if !ascending {
        lines.reverse();
    }
    Ok((lines, count))
}

/// The queue's `meta` hash (paused, version, opts.maxLenEvents, concurrency, …).
///
/// # Errors
///
/// [`crate::RedisError::Command`] when the call fails.
pub async fn get_meta(client: &Client, keys: &QueueKeys) -> Result<HashMap<String, String>> {
    Ok(client.hgetall(keys.key(QueueKey::Meta)).await?)
}

/// Writes `opts.maxLenEvents` and `version` ([`META_VERSION`]) into `meta`, as a Node `Queue`
/// does when it is created.
///
/// # Errors
///
/// [`crate::RedisError::Command`] when the call fails.
pub async fn set_meta(client: &Client, keys: &QueueKeys, max_len_events: u64) -> Result<()> {
    let values: Vec<(&str, Value)> = vec![
        ("opts.maxLenEvents", Value::from(max_len_events.to_string())),
        ("version", Value::from(META_VERSION)),
    ];
    let _: Value = client.hset(keys.key(QueueKey::Meta), values).await?;
    Ok(())
}
