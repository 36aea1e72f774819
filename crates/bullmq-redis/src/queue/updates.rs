//! Changing one job from the producer side: progress, logs, data.

use bullmq_protocol::keys::{QueueKey, QueueKeys};
use fred::prelude::{Client, Value};

use super::reply::{integer, unexpected};
use super::scripts::{ADD_LOG, UPDATE_DATA, UPDATE_PROGRESS};
use crate::error::Result;

/// Script code: the job does not exist.
const JOB_MISSING: i64 = -1;

/// Stores `progress_json` (a JSON number or object) in the job's `progress` field and emits
/// `progress` (jobId, data). Returns `false` when the job does not exist.
///
/// # Errors
///
/// [`crate::RedisError::Command`] when the call fails.
pub async fn update_progress(
    client: &Client,
    keys: &QueueKeys,
    job_id: &str,
    progress_json: &str,
) -> Result<bool> {
    let script_keys = vec![
        keys.job(job_id),
        keys.key(QueueKey::Events),
        keys.key(QueueKey::Meta),
    ];
    let args = vec![Value::from(job_id), Value::from(progress_json)];
    let reply: Value = UPDATE_PROGRESS.run(client, script_keys, args).await?;
    found(UPDATE_PROGRESS.name(), &reply)
}

/// Appends `line` to the job's log, keeping only the newest `keep_logs` lines when given.
/// Returns the number of lines kept, or `None` when the job does not exist.
///
/// # Errors
///
/// [`crate::RedisError::Command`] when the call fails.
pub async fn add_log(
    client: &Client,
    keys: &QueueKeys,
    job_id: &str,
    line: &str,
    keep_logs: Option<u64>,
) -> Result<Option<u64>> {
    let script_keys = vec![keys.job(job_id), keys.logs(job_id)];
    let keep = keep_logs.map(|n| n.to_string()).unwrap_or_default();
    let args = vec![Value::from(job_id), Value::from(line), Value::from(keep)];
    let reply: Value = ADD_LOG.run(client, script_keys, args).await?;
    match integer(ADD_LOG.name(), &reply)? {
        JOB_MISSING => Ok(None),
        count => Ok(Some(u64::try_from(count).unwrap_or(0))),
    }
}

/// Replaces the job's `data` with `data_json`. Returns `false` when the job does not exist.
///
/// # Errors
///
/// [`crate::RedisError::Command`] when the call fails.
pub async fn update_data(
    client: &Client,
    keys: &QueueKeys,
    job_id: &str,
    data_json: &str,
) -> Result<bool> {
    let reply: Value = UPDATE_DATA
        .run(client, vec![keys.job(job_id)], vec![Value::from(data_json)])
        .await?;
    found(UPDATE_DATA.name(), &reply)
}

fn found(script: &'static str, reply: &Value) -> Result<bool> {
    match integer(script, reply)? {
        0 => Ok(true),
        JOB_MISSING => Ok(false),
        code => Err(unexpected(script, format!("unknown code {code}"))),
    }
}
