//! A running job stepping aside, the step-job pattern (`worker_move_to_waiting_children.lua`,
//! `worker_move_to_wait.lua`): to `waiting-children` until its children are done, or back to
//! `wait`. Checks in the scripts' order, all before the first change.

use std::time::Duration;

use super::queue_state::QueueState;
use crate::worker::{FinishCode, MoveToWaitOutcome, WaitingChildrenOutcome};

/// The lock check of both moves: `None` when `token` holds the job's live lock (or is `"0"`,
/// which skips the check as Node's scripts do).
fn lock_refusal(q: &QueueState, id: &str, token: &str, now: u64) -> Option<FinishCode> {
    if token == "0" {
        return None;
    }
    match q.lock(id, now) {
        None => Some(FinishCode::MissingLock),
        Some(lock) if lock.token != token => Some(FinishCode::LockNotOwned),
        Some(_) => None,
    }
}

/// Releases the job's lock and takes it out of `stalled`.
fn release(q: &mut QueueState, id: &str) {
    q.locks.remove(id);
    q.stalled.remove(id);
}

/// To `waiting-children` when the job has a pending child (or `child_key` is pending).
pub(crate) fn move_to_waiting_children(
    q: &mut QueueState,
    id: &str,
    token: &str,
    child_key: Option<&str>,
    now: u64,
) -> WaitingChildrenOutcome {
    if !q.jobs.contains_key(id) {
        return WaitingChildrenOutcome::Refused(FinishCode::MissingJob);
    }
    if q.unsuccessful.get(id).is_some_and(|s| !s.is_empty()) {
        return WaitingChildrenOutcome::Refused(FinishCode::FailedChildren);
    }
    let pending = q.dependencies.get(id).is_some_and(|deps| match child_key {
        Some(key) => deps.contains(key),
        None => !deps.is_empty(),
    });
    if !pending {
        return WaitingChildrenOutcome::NoPendingChildren;
    }
    if let Some(code) = lock_refusal(q, id, token, now) {
        return WaitingChildrenOutcome::Refused(code);
    }
    if !q.active.iter().any(|a| a == id) {
        return WaitingChildrenOutcome::Refused(FinishCode::NotActive);
    }
    release(q, id);
    q.remove_active(id);
    q.waiting_children.add(now, id);
    q.emit(
        now,
        "waiting-children",
        &[("jobId", id.to_owned()), ("prev", "active".into())],
    );
    WaitingChildrenOutcome::Moved
}

/// Back to `wait` (or `prioritized`, ahead of its priority) without counting an attempt.
pub(crate) fn move_to_wait(
    q: &mut QueueState,
    id: &str,
    token: &str,
    now: u64,
) -> MoveToWaitOutcome {
    if !q.jobs.contains_key(id) {
        return MoveToWaitOutcome::Refused(FinishCode::MissingJob);
    }
    if let Some(code) = lock_refusal(q, id, token, now) {
        return MoveToWaitOutcome::Refused(code);
    }
    if !q.active.iter().any(|a| a == id) {
        return MoveToWaitOutcome::Refused(FinishCode::NotActive);
    }
    release(q, id);
    // `LREM active 1 id`: the first occurrence.
    if let Some(at) = q.active.iter().position(|a| a == id) {
        q.active.remove(at);
    }
    q.back_to_wait_from_active(id, now);
    let limited_ms = match &q.limiter {
        Some(l) if l.live(now) => l.expires_at.map_or(0, |at| at.saturating_sub(now)),
        _ => 0,
    };
    MoveToWaitOutcome::Moved {
        rate_limited_for: Duration::from_millis(limited_ms),
    }
}
