//! Queue administration: pause/resume, drain, clean, obliterate, remove one job.

use bullmq_protocol::keys::{QueueKey, QueueKeys};
use bullmq_protocol::state::JobState;
use fred::prelude::{Client, HashesInterface, Value};

use super::reply::{integer, strings, unexpected};
use super::scripts::{CLEAN, DRAIN, OBLITERATE, PAUSE, REMOVE_JOB};
use crate::error::Result;

fn pause_keys(keys: &QueueKeys) -> Vec<String> {
    [
        QueueKey::Wait,
        QueueKey::Paused,
        QueueKey::Meta,
        QueueKey::Prioritized,
        QueueKey::Events,
        QueueKey::Delayed,
        QueueKey::Marker,
    ]
    .into_iter()
    .map(|key| keys.key(key))
    .collect()
}

/// Pauses the queue for every worker (meta `paused`, marker removed, event `paused`).
///
/// # Errors
///
/// [`crate::RedisError::Command`] when the call fails.
pub async fn pause(client: &Client, keys: &QueueKeys) -> Result<()> {
    let args = vec![Value::from("paused"), Value::from("1")];
    let _: Value = PAUSE.run(client, pause_keys(keys), args).await?;
    Ok(())
}

/// Resumes the queue (event `resumed`), moving jobs an old client left in the legacy `paused`
/// list back to `wait` and waking workers.
///
/// # Errors
///
/// [`crate::RedisError::Command`] when a call fails.
pub async fn resume(client: &Client, keys: &QueueKeys) -> Result<()> {
    let mut emit = "1";
    loop {
        let args = vec![Value::from("resumed"), Value::from(emit)];
        let reply: Value = PAUSE.run(client, pause_keys(keys), args).await?;
        // The script moves at most 7000 legacy jobs per call; the event goes with the first.
        if integer(PAUSE.name(), &reply)? <= 0 {
            return Ok(());
        }
        emit = "0";
    }
}

/// Whether the queue is paused (meta `paused` present).
///
/// # Errors
///
/// [`crate::RedisError::Command`] when the call fails.
pub async fn is_paused(client: &Client, keys: &QueueKeys) -> Result<bool> {
    Ok(client.hexists(keys.key(QueueKey::Meta), "paused").await?)
}

/// Removes every waiting (wait, legacy paused, prioritized) job and, with `delayed`, every
/// delayed job; active and finished jobs stay. Returns how many jobs were removed.
///
/// # Errors
///
/// [`crate::RedisError::Command`] when the call fails.
pub async fn drain(client: &Client, keys: &QueueKeys, delayed: bool) -> Result<u64> {
    let script_keys = vec![
        keys.key(QueueKey::Wait),
        keys.key(QueueKey::Paused),
        keys.key(QueueKey::Delayed),
        keys.key(QueueKey::Prioritized),
        keys.key(QueueKey::Repeat),
    ];
    let args = vec![
        Value::from(keys.base()),
        Value::from(if delayed { "1" } else { "0" }),
    ];
    let reply: Value = DRAIN.run(client, script_keys, args).await?;
    Ok(u64::try_from(integer(DRAIN.name(), &reply)?).unwrap_or(0))
}

/// Removes jobs in `state` whose age timestamp is at or before `cutoff_ms` (now minus the grace
/// period), at most `limit` (0 = no limit) in this call. Emits `cleaned` (count); returns the
/// removed ids.
///
/// # Errors
///
/// [`crate::RedisError::Command`] when the call fails, [`crate::RedisError::UnexpectedReply`]
/// for [`JobState::Unknown`], which has no key.
pub async fn clean(
    client: &Client,
    keys: &QueueKeys,
    state: JobState,
    cutoff_ms: u64,
    limit: u64,
) -> Result<Vec<String>> {
    let suffix = state
        .key_suffix()
        .ok_or_else(|| unexpected(CLEAN.name(), "cannot clean jobs of state `unknown`"))?;
    let script_keys = vec![
        format!("{}{suffix}", keys.base()),
        keys.key(QueueKey::Events),
        keys.key(QueueKey::Repeat),
        keys.key(QueueKey::Meta),
    ];
    let args = vec![
        Value::from(keys.base()),
        Value::from(cutoff_ms.to_string()),
        Value::from(limit.to_string()),
        Value::from(suffix),
    ];
    let reply: Value = CLEAN.run(client, script_keys, args).await?;
    strings(CLEAN.name(), reply)
}

pub use bullmq_backend::{ObliterateStep, RemoveOutcome};

/// Deletes up to `batch` jobs of a paused queue, then, once no job is left, every queue key.
///
/// # Errors
///
/// [`crate::RedisError::Command`] when the call fails.
pub async fn obliterate_batch(
    client: &Client,
    keys: &QueueKeys,
    batch: u32,
    force: bool,
) -> Result<ObliterateStep> {
    let script_keys = vec![keys.key(QueueKey::Meta), keys.base().to_owned()];
    let args = vec![
        Value::from(batch.max(1).to_string()),
        Value::from(if force { "1" } else { "" }),
    ];
    let reply: Value = OBLITERATE.run(client, script_keys, args).await?;
    match integer(OBLITERATE.name(), &reply)? {
        0 => Ok(ObliterateStep::Done),
        1 => Ok(ObliterateStep::More),
        -1 => Ok(ObliterateStep::NotPaused),
        -2 => Ok(ObliterateStep::ActiveJobs),
        code => Err(unexpected(
            OBLITERATE.name(),
            format!("unknown code {code}"),
        )),
    }
}

/// Pauses the queue and deletes it completely, `batch` jobs per call, as Node's
/// `Queue.obliterate` does. Returns [`ObliterateStep::Done`] or [`ObliterateStep::ActiveJobs`].
///
/// # Errors
///
/// [`crate::RedisError::Command`] when a call fails.
pub async fn obliterate(
    client: &Client,
    keys: &QueueKeys,
    force: bool,
    batch: u32,
) -> Result<ObliterateStep> {
    pause(client, keys).await?;
    loop {
        match obliterate_batch(client, keys, batch, force).await? {
            ObliterateStep::More => continue,
            // Another client resumed the queue between our calls: pause again and go on.
            ObliterateStep::NotPaused => pause(client, keys).await?,
            done => return Ok(done),
        }
    }
}

/// Removes a job from whatever state it is in with all its keys (and, with `children`, its
/// flow children), unless a worker holds its lock.
///
/// # Errors
///
/// [`crate::RedisError::Command`] when the call fails.
pub async fn remove_job(
    client: &Client,
    keys: &QueueKeys,
    job_id: &str,
    children: bool,
) -> Result<RemoveOutcome> {
    let script_keys = vec![keys.job(job_id), keys.key(QueueKey::Repeat)];
    let args = vec![
        Value::from(job_id),
        Value::from(if children { "1" } else { "0" }),
        Value::from(keys.base()),
    ];
    let reply: Value = REMOVE_JOB.run(client, script_keys, args).await?;
    match integer(REMOVE_JOB.name(), &reply)? {
        1 => Ok(RemoveOutcome::Removed),
        0 => Ok(RemoveOutcome::Locked),
        -1 => Ok(RemoveOutcome::NotFound),
        -8 => Ok(RemoveOutcome::SchedulerJob),
        code => Err(unexpected(
            REMOVE_JOB.name(),
            format!("unknown code {code}"),
        )),
    }
}
