//! Job control: retry a finished job, promote a delayed one, change a job's priority or
//! delay (Node `job.retry`, `job.promote`, `job.changePriority`, `job.changeDelay`). Each is one script that checks before it writes.

use bullmq_backend::{ControlOutcome, RetryFrom, RetryReset};
use bullmq_protocol::keys::{QueueKey, QueueKeys};
use fred::prelude::{Client, KeysInterface, ListInterface, Value};

use super::reply::{integer, unexpected};
use super::scripts::{CHANGE_DELAY, CHANGE_PRIORITY, PROMOTE_JOB, RETRY_JOB};
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
    let finished = match from {
        RetryFrom::Failed => QueueKey::Failed,
        RetryFrom::Completed => QueueKey::Completed,
    };
    let script_keys = vec![
        keys.job(job_id),
        keys.key(finished),
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
