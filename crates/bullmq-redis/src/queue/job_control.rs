//! Job control: retry a finished job, promote a delayed one, change a job's priority or
//! delay (Node `job.retry`, `job.promote`, `job.changePriority`, `job.changeDelay`), move
//! finished or delayed jobs in batches (`queue.retryJobs`, `queue.promoteJobs`) and renew one
//! job's lock (`job.extendLock`). Each is one script that checks before it writes.

use std::time::Duration;

use bullmq_backend::{ControlOutcome, LockOutcome, RetryFrom, RetryReset};
use bullmq_protocol::keys::{QueueKey, QueueKeys};
use fred::prelude::{Client, KeysInterface, ListInterface, Value};

use super::reply::{integer, unexpected};
use super::scripts::{
    CHANGE_DELAY, CHANGE_PRIORITY, EXTEND_LOCK, MOVE_JOBS_TO_WAIT, PROMOTE_JOB, RETRY_JOB,
};
use crate::error::Result;

/// Moves job `job_id` from the `from` set back to be processed (see
/// [`bullmq_backend::JobControl::retry_job`]).
///
/// # Errors
///
/// [`crate::RedisError::Command`] when the call fails.
pub async fn retry_job(
    client: &Client,
    keys: &QueueKeys,
    job_id: &str,
    from: RetryFrom,
    reset: RetryReset,
) -> Result<ControlOutcome> {
    let script_keys = vec![
        keys.job(job_id),
        keys.key(finished_key(from)),
        keys.key(QueueKey::Wait),
        keys.key(QueueKey::Prioritized),
        keys.key(QueueKey::PriorityCounter),
        keys.key(QueueKey::Marker),
        keys.key(QueueKey::Meta),
        keys.key(QueueKey::Active),
        keys.key(QueueKey::Events),
    ];
    let flag = |on: bool| Value::from(if on { "1" } else { "0" });
    let args = vec![
        Value::from(job_id),
        Value::from(from.as_str()),
        Value::from(from.outcome_field()),
        flag(reset.attempts_made),
        flag(reset.attempts_started),
    ];
    let reply: Value = RETRY_JOB.run(client, script_keys, args).await?;
    match integer(RETRY_JOB.name(), &reply)? {
        1 => Ok(ControlOutcome::Moved),
        -1 => Ok(ControlOutcome::NotFound),
        -3 => Ok(ControlOutcome::NotInState),
        code => Err(unexpected(RETRY_JOB.name(), format!("unknown code {code}"))),
    }
}

/// Moves the delayed job `job_id` to be processed now (see
/// [`bullmq_backend::JobControl::promote_job`]).
///
/// # Errors
///
/// [`crate::RedisError::Command`] when the call fails.
pub async fn promote_job(
    client: &Client,
    keys: &QueueKeys,
    job_id: &str,
) -> Result<ControlOutcome> {
    let script_keys = vec![
        keys.key(QueueKey::Delayed),
        keys.key(QueueKey::Wait),
        keys.key(QueueKey::Prioritized),
        keys.key(QueueKey::PriorityCounter),
        keys.key(QueueKey::Marker),
        keys.key(QueueKey::Meta),
        keys.key(QueueKey::Active),
        keys.key(QueueKey::Events),
    ];
    let args = vec![Value::from(keys.base()), Value::from(job_id)];
    let reply: Value = PROMOTE_JOB.run(client, script_keys, args).await?;
    match integer(PROMOTE_JOB.name(), &reply)? {
        0 => Ok(ControlOutcome::Moved),
        -3 => Ok(ControlOutcome::NotInState),
        code => Err(unexpected(
            PROMOTE_JOB.name(),
            format!("unknown code {code}"),
        )),
    }
}

/// Sets job `job_id`'s priority, re-queueing it when it is waiting or prioritized (see
/// [`bullmq_backend::JobControl::change_priority`]).
///
/// # Errors
///
/// [`crate::RedisError::Command`] when the call fails.
pub async fn change_priority(
    client: &Client,
    keys: &QueueKeys,
    job_id: &str,
    priority: u32,
    lifo: bool,
) -> Result<ControlOutcome> {
    let script_keys = vec![
        keys.job(job_id),
        keys.key(QueueKey::Wait),
        keys.key(QueueKey::Prioritized),
        keys.key(QueueKey::PriorityCounter),
        keys.key(QueueKey::Marker),
        keys.key(QueueKey::Meta),
        keys.key(QueueKey::Active),
    ];
    let args = vec![
        Value::from(job_id),
        Value::from(i64::from(priority)),
        Value::from(if lifo { "1" } else { "0" }),
    ];
    let reply: Value = CHANGE_PRIORITY.run(client, script_keys, args).await?;
    match integer(CHANGE_PRIORITY.name(), &reply)? {
        0 => Ok(ControlOutcome::Moved),
        -1 => Ok(ControlOutcome::NotFound),
        code => Err(unexpected(
            CHANGE_PRIORITY.name(),
            format!("unknown code {code}"),
        )),
    }
}

/// Reschedules the delayed job `job_id` to be due `delay_ms` after `now_ms` (see
/// [`bullmq_backend::JobControl::change_delay`]).
///
/// # Errors
///
/// [`crate::RedisError::Command`] when the call fails.
pub async fn change_delay(
    client: &Client,
    keys: &QueueKeys,
    job_id: &str,
    delay_ms: u64,
    now_ms: u64,
) -> Result<ControlOutcome> {
    let script_keys = vec![
        keys.job(job_id),
        keys.key(QueueKey::Delayed),
        keys.key(QueueKey::Marker),
        keys.key(QueueKey::Meta),
        keys.key(QueueKey::Events),
    ];
    let args = vec![
        Value::from(job_id),
        Value::from(delay_ms.to_string()),
        Value::from(now_ms.to_string()),
    ];
    let reply: Value = CHANGE_DELAY.run(client, script_keys, args).await?;
    match integer(CHANGE_DELAY.name(), &reply)? {
        0 => Ok(ControlOutcome::Moved),
        -1 => Ok(ControlOutcome::NotFound),
        -3 => Ok(ControlOutcome::NotInState),
        code => Err(unexpected(
            CHANGE_DELAY.name(),
            format!("unknown code {code}"),
        )),
    }
}

/// Deletes job `job_id`'s log lines but the newest `keep` (0: all), with one command as Node
/// (`LTRIM {id}:logs -keep -1`, or `DEL`).
///
/// # Errors
///
/// [`crate::RedisError::Command`] when the call fails.
pub async fn clear_logs(client: &Client, keys: &QueueKeys, job_id: &str, keep: u64) -> Result<()> {
    let logs = format!("{}:logs", keys.job(job_id));
    if keep == 0 {
        let _: i64 = client.del(logs).await?;
    } else {
        let start = -i64::try_from(keep).unwrap_or(i64::MAX);
        let _: () = client.ltrim(logs, start, -1).await?;
    }
    Ok(())
}

/// The set a retry takes its jobs from.
fn finished_key(from: RetryFrom) -> QueueKey {
    match from {
        RetryFrom::Failed => QueueKey::Failed,
        RetryFrom::Completed => QueueKey::Completed,
    }
}

/// One batch of `queue.retryJobs`: up to `count` jobs of `from` finished at or before
/// `finished_by_ms` back to `wait` (see [`bullmq_backend::JobControl::retry_jobs`]). Returns
/// how many moved.
///
/// # Errors
///
/// [`crate::RedisError::Command`] when the call fails.
pub async fn retry_jobs(
    client: &Client,
    keys: &QueueKeys,
    from: RetryFrom,
    count: u32,
    finished_by_ms: u64,
) -> Result<u64> {
    let source = finished_key(from);
    move_jobs_to_wait(
        client,
        keys,
        source,
        count,
        finished_by_ms.to_string(),
        from.outcome_field(),
    )
    .await
}

/// One batch of `queue.promoteJobs`: up to `count` delayed jobs to `wait` (see
/// [`bullmq_backend::JobControl::promote_jobs`]). Returns how many moved.
///
/// # Errors
///
/// [`crate::RedisError::Command`] when the call fails.
pub async fn promote_jobs(client: &Client, keys: &QueueKeys, count: u32) -> Result<u64> {
    move_jobs_to_wait(client, keys, QueueKey::Delayed, count, "+inf".into(), "").await
}

/// The script both batch moves share; `outcome_field` is empty for delayed jobs.
async fn move_jobs_to_wait(
    client: &Client,
    keys: &QueueKeys,
    source: QueueKey,
    count: u32,
    max_score: String,
    outcome_field: &str,
) -> Result<u64> {
    let script_keys = vec![
        keys.key(source),
        keys.key(QueueKey::Wait),
        keys.key(QueueKey::Marker),
        keys.key(QueueKey::Meta),
        keys.key(QueueKey::Active),
        keys.key(QueueKey::Events),
    ];
    let args = vec![
        Value::from(keys.base()),
        Value::from(i64::from(count.max(1))),
        Value::from(max_score),
        Value::from(source.suffix()),
        Value::from(outcome_field),
    ];
    let reply: Value = MOVE_JOBS_TO_WAIT.run(client, script_keys, args).await?;
    let moved = integer(MOVE_JOBS_TO_WAIT.name(), &reply)?;
    u64::try_from(moved)
        .map_err(|_| unexpected(MOVE_JOBS_TO_WAIT.name(), format!("negative count {moved}")))
}

/// Renews job `job_id`'s lock for `duration` when it carries `token` (see
/// [`bullmq_backend::JobControl::extend_lock`]).
///
/// # Errors
///
/// [`crate::RedisError::Command`] when the call fails.
pub async fn extend_lock(
    client: &Client,
    keys: &QueueKeys,
    job_id: &str,
    token: &str,
    duration: Duration,
) -> Result<LockOutcome> {
    let script_keys = vec![
        format!("{}:lock", keys.job(job_id)),
        keys.key(QueueKey::Stalled),
    ];
    // `SET PX 0` is refused by Redis: a zero duration renews for the shortest lock there is.
    let duration_ms = u64::try_from(duration.as_millis())
        .unwrap_or(u64::MAX)
        .max(1);
    let args = vec![
        Value::from(token),
        Value::from(duration_ms.to_string()),
        Value::from(job_id),
    ];
    let reply: Value = EXTEND_LOCK.run(client, script_keys, args).await?;
    match integer(EXTEND_LOCK.name(), &reply)? {
        1 => Ok(LockOutcome::Extended),
        0 => Ok(LockOutcome::Missing),
        -1 => Ok(LockOutcome::HeldByOther),
        code => Err(unexpected(
            EXTEND_LOCK.name(),
            format!("unknown code {code}"),
        )),
    }
}
