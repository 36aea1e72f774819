//! Lock renewal and stalled-job recovery: `worker_extend_locks.lua`, `worker_move_stalled.lua`.

use std::time::Duration;

use fred::prelude::{Client, Value};

use super::fetch::corrupted_jobs;
use super::reply::{array, strings, unexpected};
use super::scripts::{EXTEND_LOCKS, MOVE_STALLED};
use super::WorkerKeys;
use crate::error::Result;

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX).max(1)
}

/// Renews the locks of `jobs` (`(job id, token)` pairs) to `lock_duration` in one call and
/// returns the ids whose lock could not be renewed (expired or held by someone else).
/// Renewed jobs leave the `stalled` set.
///
/// # Errors
///
/// [`crate::RedisError::Command`] when Redis fails.
///
/// # Cancel safety
///
/// Cancel safe: renewing twice is harmless.
pub async fn extend_locks(
    client: &Client,
    keys: &WorkerKeys,
    jobs: &[(String, String)],
    lock_duration: Duration,
) -> Result<Vec<String>> {
    if jobs.is_empty() {
        return Ok(Vec::new());
    }
    let mut args: Vec<Value> = Vec::with_capacity(2 + jobs.len() * 2);
    args.push(keys.queue().base().into());
    args.push(millis(lock_duration).to_string().into());
    for (id, token) in jobs {
        args.push(id.as_str().into());
        args.push(token.as_str().into());
    }
    let reply: Value = EXTEND_LOCKS.run(client, keys.script_keys(), args).await?;
    strings(EXTEND_LOCKS.name(), reply)
}

pub use bullmq_backend::StalledReport;

/// Runs the stalled check unless another worker ran it less than `interval` ago (then the
/// report is empty).
///
/// # Errors
///
/// [`crate::RedisError::Command`] when Redis fails; [`crate::RedisError::UnexpectedReply`]
/// when the reply is malformed.
///
/// # Cancel safety
///
/// Not cancel safe: the script may have run when the future is dropped.
pub async fn move_stalled(
    client: &Client,
    keys: &WorkerKeys,
    max_stalled_count: u32,
    interval: Duration,
    now_ms: u64,
) -> Result<StalledReport> {
    let args: Vec<Value> = vec![
        keys.queue().base().into(),
        max_stalled_count.to_string().into(),
        now_ms.to_string().into(),
        millis(interval).to_string().into(),
    ];
    let script = MOVE_STALLED.name();
    let reply: Value = MOVE_STALLED.run(client, keys.script_keys(), args).await?;
    let mut parts = array(script, reply)?.into_iter();
    let (Some(recovered), Some(corrupted), Some(dropped)) =
        (parts.next(), parts.next(), parts.next())
    else {
        return Err(unexpected(script, "stalled reply has fewer than 3 parts"));
    };
    Ok(StalledReport {
        recovered: strings(script, recovered)?,
        corrupted: corrupted_jobs(script, corrupted)?,
        dropped: strings(script, dropped)?,
    })
}
