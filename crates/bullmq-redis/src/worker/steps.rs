//! A running job stepping aside (the step-job pattern): `worker_move_to_waiting_children.lua`
//! and `worker_move_to_wait.lua`.

use std::time::Duration;

use bullmq_backend::{ChildRef, FinishCode, MoveToWaitOutcome, WaitingChildrenOutcome};
use bullmq_protocol::keys::QueueKey;
use fred::prelude::{Client, Value};

use super::reply::integer;
use super::scripts::{MOVE_TO_WAIT, MOVE_TO_WAITING_CHILDREN};
use super::WorkerKeys;
use crate::error::Result;

/// Moves active job `job_id` to `waiting-children` when it has a pending child (or when
/// `child` is pending), releasing its lock (Node's `job.moveToWaitingChildren`). A refusal
/// writes nothing.
///
/// # Errors
///
/// [`crate::RedisError::Command`] when Redis fails; [`crate::RedisError::UnexpectedReply`]
/// when the script answers something else than a code.
///
/// # Cancel safety
///
/// Not cancel safe: the script may have run when the future is dropped.
pub async fn move_to_waiting_children(
    client: &Client,
    keys: &WorkerKeys,
    job_id: &str,
    token: &str,
    child: Option<&ChildRef>,
    now_ms: u64,
) -> Result<WaitingChildrenOutcome> {
    let mut script_keys = keys.script_keys();
    script_keys.push(keys.queue().key(QueueKey::WaitingChildren));
    let args: Vec<Value> = vec![
        keys.queue().base().into(),
        job_id.into(),
        token.into(),
        child.map(ChildRef::to_string).unwrap_or_default().into(),
        now_ms.to_string().into(),
    ];
    let reply: Value = MOVE_TO_WAITING_CHILDREN
        .run(client, script_keys, args)
        .await?;
    Ok(match integer(MOVE_TO_WAITING_CHILDREN.name(), reply)? {
        0 => WaitingChildrenOutcome::Moved,
        1 => WaitingChildrenOutcome::NoPendingChildren,
        code => WaitingChildrenOutcome::Refused(FinishCode::from_code(code)),
    })
}

/// Moves active job `job_id` back to `wait` (or `prioritized`) without counting an attempt,
/// releasing its lock (Node's `job.moveToWait`). A refusal writes nothing.
///
/// # Errors
///
/// As [`move_to_waiting_children`].
///
/// # Cancel safety
///
/// Not cancel safe: the script may have run when the future is dropped.
pub async fn move_to_wait(
    client: &Client,
    keys: &WorkerKeys,
    job_id: &str,
    token: &str,
) -> Result<MoveToWaitOutcome> {
    let args: Vec<Value> = vec![keys.queue().base().into(), job_id.into(), token.into()];
    let reply: Value = MOVE_TO_WAIT.run(client, keys.script_keys(), args).await?;
    Ok(match integer(MOVE_TO_WAIT.name(), reply)? {
        code if code < 0 => MoveToWaitOutcome::Refused(FinishCode::from_code(code)),
        ttl => MoveToWaitOutcome::Moved {
            rate_limited_for: Duration::from_millis(u64::try_from(ttl).unwrap_or(0)),
        },
    })
}
