//! Updates a processor makes while it runs: progress, log lines, data.

use fred::prelude::{Client, Value};

use super::reply::integer;
use super::scripts::{ADD_LOG, UPDATE_DATA, UPDATE_PROGRESS};
use super::WorkerKeys;
use crate::error::Result;

/// Stores `progress` (JSON text) in the job hash and emits a `progress` event. Returns `false`
/// when the job no longer exists.
///
/// # Errors
///
/// [`crate::RedisError::Command`] when Redis fails.
pub async fn update_progress(
    client: &Client,
    keys: &WorkerKeys,
    job_id: &str,
    progress: &str,
) -> Result<bool> {
    let args: Vec<Value> = vec![keys.queue().base().into(), job_id.into(), progress.into()];
    let reply: Value = UPDATE_PROGRESS
        .run(client, keys.script_keys(), args)
        .await?;
    Ok(integer(UPDATE_PROGRESS.name(), reply)? >= 0)
}

/// Appends `line` to the job's log list, keeping the newest `keep_logs` lines when given.
/// Returns the number of lines kept, or `None` when the job no longer exists.
///
/// # Errors
///
/// [`crate::RedisError::Command`] when Redis fails.
pub async fn add_log(
    client: &Client,
    keys: &WorkerKeys,
    job_id: &str,
    line: &str,
    keep_logs: Option<u64>,
) -> Result<Option<u64>> {
    let keep = keep_logs.map(|k| k.to_string()).unwrap_or_default();
    let args: Vec<Value> = vec![
        keys.queue().base().into(),
        job_id.into(),
        line.into(),
        keep.into(),
    ];
    let reply: Value = ADD_LOG.run(client, keys.script_keys(), args).await?;
    Ok(u64::try_from(integer(ADD_LOG.name(), reply)?).ok())
}

/// Replaces the job's `data` (JSON text). Returns `false` when the job no longer exists.
///
/// # Errors
///
/// [`crate::RedisError::Command`] when Redis fails.
pub async fn update_data(
    client: &Client,
    keys: &WorkerKeys,
    job_id: &str,
    data: &str,
) -> Result<bool> {
    let args: Vec<Value> = vec![keys.queue().base().into(), job_id.into(), data.into()];
    let reply: Value = UPDATE_DATA.run(client, keys.script_keys(), args).await?;
    Ok(integer(UPDATE_DATA.name(), reply)? >= 0)
}
