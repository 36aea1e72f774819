//! Job control: retry a finished job, promote a delayed one (Node `job.retry`,
//! `job.promote`). Each is one script that checks before it writes.

use bullmq_backend::{ControlOutcome, RetryFrom, RetryReset};
use bullmq_protocol::keys::{QueueKey, QueueKeys};
use fred::prelude::{Client, Value};

use super::reply::{integer, unexpected};
use super::scripts::{PROMOTE_JOB, RETRY_JOB};
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
