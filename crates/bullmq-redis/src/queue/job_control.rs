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
use crate::script::Script;

/// The keys a script that re-queues a job through the shared `enqueue` include takes after
/// its own leading keys, in the order those scripts read them.
const ENQUEUE_KEYS: [QueueKey; 6] = [
    QueueKey::Wait,
    QueueKey::Prioritized,
    QueueKey::PriorityCounter,
    QueueKey::Marker,
    QueueKey::Meta,
    QueueKey::Active,
];

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
    let lead = [keys.job(job_id), keys.key(finished_key(from))];
    let script_keys = script_keys(keys, lead, &ENQUEUE_KEYS, &[QueueKey::Events]);
    let flag = |on: bool| Value::from(if on { "1" } else { "0" });
    let args = vec![
        Value::from(job_id),
        Value::from(from.as_str()),
        Value::from(from.outcome_field()),
        flag(reset.attempts_made),
        flag(reset.attempts_started),
    ];
    let outcomes = [
        (1, ControlOutcome::Moved),
        (-1, ControlOutcome::NotFound),
        (-3, ControlOutcome::NotInState),
    ];
    run_for_outcome(&RETRY_JOB, client, script_keys, args, &outcomes).await
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
    let lead = [keys.key(QueueKey::Delayed)];
    let script_keys = script_keys(keys, lead, &ENQUEUE_KEYS, &[QueueKey::Events]);
    let args = vec![Value::from(keys.base()), Value::from(job_id)];
    let outcomes = [(0, ControlOutcome::Moved), (-3, ControlOutcome::NotInState)];
    run_for_outcome(&PROMOTE_JOB, client, script_keys, args, &outcomes).await
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
    let script_keys = script_keys(keys, [keys.job(job_id)], &ENQUEUE_KEYS, &[]);
    let args = vec![
        Value::from(job_id),
        Value::from(i64::from(priority)),
        Value::from(if lifo { "1" } else { "0" }),
    ];
    let outcomes = [(0, ControlOutcome::Moved), (-1, ControlOutcome::NotFound)];
    run_for_outcome(&CHANGE_PRIORITY, client, script_keys, args, &outcomes).await
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
    let tail = [
        QueueKey::Delayed,
        QueueKey::Marker,
        QueueKey::Meta,
        QueueKey::Events,
    ];
    let script_keys = script_keys(keys, [keys.job(job_id)], &tail, &[]);
    let args = vec![
        Value::from(job_id),
        Value::from(delay_ms.to_string()),
        Value::from(now_ms.to_string()),
    ];
    let outcomes = [
        (0, ControlOutcome::Moved),
        (-1, ControlOutcome::NotFound),
        (-3, ControlOutcome::NotInState),
    ];
    run_for_outcome(&CHANGE_DELAY, client, script_keys, args, &outcomes).await
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
    let outcomes = [
        (1, LockOutcome::Extended),
        (0, LockOutcome::Missing),
        (-1, LockOutcome::HeldByOther),
    ];
    run_for_outcome(&EXTEND_LOCK, client, script_keys, args, &outcomes).await
}

/// The KEYS of one script call: `lead` (job keys and the like), then the queue's keys `named`,
/// then those of `after`.
fn script_keys<const N: usize>(
    keys: &QueueKeys,
    lead: [String; N],
    named: &[QueueKey],
    after: &[QueueKey],
) -> Vec<String> {
    let queue_keys = named.iter().chain(after).map(|name| keys.key(*name));
    lead.into_iter().chain(queue_keys).collect()
}

/// Runs `script` and reads its integer reply as the outcome `outcomes` pairs it with: every
/// control script answers with a status code, and a code it is not known to return means the
/// script and this crate disagree, so it is an error rather than a guess.
async fn run_for_outcome<T: Copy>(
    script: &Script,
    client: &Client,
    script_keys: Vec<String>,
    args: Vec<Value>,
    outcomes: &[(i64, T)],
) -> Result<T> {
    let reply: Value = script.run(client, script_keys, args).await?;
    let code = integer(script.name(), &reply)?;
    outcomes
        .iter()
        .find(|(known, _)| *known == code)
        .map(|(_, outcome)| *outcome)
        .ok_or_else(|| unexpected(script.name(), format!("unknown code {code}")))
}
