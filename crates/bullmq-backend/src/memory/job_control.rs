//! Job control (retry a finished job, promote a delayed one, change a job's priority or
//! delay, move finished or delayed jobs in batches, renew a lock), step by step as the Redis
//! backend's scripts of the same names.

use crate::job_control::{ControlOutcome, LockOutcome, RetryFrom, RetryReset};

use super::queue_state::{split_job_key, QueueState};
use super::Queues;

/// Whether the job's stored options ask for LIFO (`"lifo": true`), as Node reads
/// `job.opts.lifo`. Unreadable options count as FIFO.
fn lifo(q: &QueueState, id: &str) -> bool {
    q.field(id, "opts")
        .and_then(|opts| serde_json::from_str::<serde_json::Value>(opts).ok())
        .and_then(|opts| opts.get("lifo").and_then(serde_json::Value::as_bool))
        .unwrap_or(false)
}

/// `job.retry(from, reset)`.
pub(crate) fn retry(
    queues: &mut Queues,
    base: &str,
    id: &str,
    from: RetryFrom,
    reset: RetryReset,
    now: u64,
) -> ControlOutcome {
    let q = queues.queue(base);
    if !q.jobs.contains_key(id) {
        return ControlOutcome::NotFound;
    }
    let removed = match from {
        RetryFrom::Failed => q.failed.remove(id),
        RetryFrom::Completed => q.completed.remove(id),
    };
    if !removed {
        return ControlOutcome::NotInState;
    }
    if let Some(hash) = q.jobs.get_mut(id) {
        for field in ["finishedOn", "processedOn", from.outcome_field()] {
            hash.remove(field);
        }
        if reset.attempts_made {
            hash.remove("atm");
        }
        if reset.attempts_started {
            hash.remove("ats");
        }
    }
    let lifo = lifo(q, id);
    q.enqueue_ready(id, lifo);
    let job_key = q.job_key(id);
    let parent_key = q.field(id, "parentKey").map(str::to_owned);
    if let Some(parent_key) = parent_key {
        back_to_parent_dependencies(queues, &parent_key, &job_key, from);
    }
    queues.queue(base).emit_queue(
        now,
        "waiting",
        &[("jobId", id.to_owned()), ("prev", from.as_str().into())],
    );
    ControlOutcome::Moved
}

/// A retried child is pending again for its parent, if the parent still records it as
/// finished (a parent that has moved on is left where it is).
fn back_to_parent_dependencies(
    queues: &mut Queues,
    parent_key: &str,
    job_key: &str,
    from: RetryFrom,
) {
    if !queues.job_exists(parent_key) {
        return;
    }
    let Some((parent_base, parent_id)) = split_job_key(parent_key) else {
        return;
    };
    let parent = queues.queue(parent_base);
    let was_finished = match from {
        RetryFrom::Failed => {
            let unsuccessful = parent
                .unsuccessful
                .get_mut(parent_id)
                .is_some_and(|set| set.remove(job_key));
            unsuccessful
                || parent
                    .failed_children
                    .get_mut(parent_id)
                    .is_some_and(|map| map.remove(job_key).is_some())
        }
        RetryFrom::Completed => parent
            .processed
            .get_mut(parent_id)
            .is_some_and(|map| map.remove(job_key).is_some()),
    };
    if was_finished {
        parent
            .dependencies
            .entry(parent_id.to_owned())
            .or_default()
            .insert(job_key.to_owned());
    }
}

/// `job.promote()`.
pub(crate) fn promote(q: &mut QueueState, id: &str, now: u64) -> ControlOutcome {
    if !q.delayed.remove(id) {
        return ControlOutcome::NotInState;
    }
    // Node pushes a promoted job to the back of the line (LPUSH) whatever its `lifo`.
    q.enqueue_ready(id, false);
    q.signal_delayed();
    // Node's promote appends this event without trimming the stream.
    q.emit_capped(
        now,
        "waiting",
        &[("jobId", id.to_owned()), ("prev", "delayed".into())],
        u64::MAX,
    );
    q.set_field(id, "delay", "0");
    ControlOutcome::Moved
}

/// `job.changePriority({priority, lifo})`.
pub(crate) fn change_priority(
    q: &mut QueueState,
    id: &str,
    priority: u32,
    lifo: bool,
) -> ControlOutcome {
    if !q.jobs.contains_key(id) {
        return ControlOutcome::NotFound;
    }
    let queued = q.prioritized.remove(id)
        || match q.wait.iter().rposition(|w| w == id) {
            Some(at) => q.wait.remove(at).is_some(),
            None => false,
        };
    if queued {
        let gated = q.paused_or_maxed();
        if priority == 0 {
            if lifo {
                q.wait.push_back(id.to_owned());
            } else {
                q.wait.push_front(id.to_owned());
            }
            if !gated {
                q.signal_ready();
            }
        } else if lifo {
            // Ahead of every job of its priority, and no marker, as Node.
            q.prioritized
                .add(bullmq_protocol::score::priority_score(priority, 0), id);
        } else {
            let score = q.next_priority_score(u64::from(priority));
            q.prioritized.add(score, id);
            if !gated {
                q.signal_ready();
            }
        }
    }
    q.set_field(id, "priority", priority.to_string());
    ControlOutcome::Moved
}

/// `job.changeDelay(delay)`.
pub(crate) fn change_delay(q: &mut QueueState, id: &str, delay: u64, now: u64) -> ControlOutcome {
    if !q.jobs.contains_key(id) {
        return ControlOutcome::NotFound;
    }
    if !q.delayed.remove(id) {
        return ControlOutcome::NotInState;
    }
    q.set_field(id, "delay", delay.to_string());
    q.push_delayed(now, id, now.saturating_add(delay), true);
    ControlOutcome::Moved
}

/// `job.clearLogs(keep)`: `LTRIM -keep -1`, or `DEL` for 0.
pub(crate) fn clear_logs(q: &mut QueueState, id: &str, keep: u64) {
    let keep = usize::try_from(keep).unwrap_or(usize::MAX);
    if keep == 0 {
        q.logs.remove(id);
        return;
    }
    if let Some(lines) = q.logs.get_mut(id) {
        let drop = lines.len().saturating_sub(keep);
        lines.drain(..drop);
    }
}

/// Where a batch move takes its jobs from, and up to which score.
#[derive(Debug, Clone, Copy)]
pub(crate) enum MoveSource {
    /// `retryJobs`: jobs of that finished set finished at or before the time (ms).
    Finished(RetryFrom, u64),
    /// `promoteJobs`: every delayed job.
    Delayed,
}

/// One batch of `retryJobs` / `promoteJobs` (`move_jobs_to_wait.lua`): the lowest-scored
/// `count` jobs to the back of `wait` whatever their priority; returns how many moved.
pub(crate) fn move_jobs_to_wait(
    queues: &mut Queues,
    base: &str,
    source: MoveSource,
    count: u32,
    now: u64,
) -> u64 {
    let q = queues.queue(base);
    let count = usize::try_from(count.max(1)).unwrap_or(usize::MAX);
    let set = match source {
        MoveSource::Finished(RetryFrom::Failed, _) => &q.failed,
        MoveSource::Finished(RetryFrom::Completed, _) => &q.completed,
        MoveSource::Delayed => &q.delayed,
    };
    let max = match source {
        MoveSource::Finished(_, by) => by,
        MoveSource::Delayed => u64::MAX,
    };
    let ids: Vec<String> = set.range_by_score(0, max).into_iter().take(count).collect();
    if ids.is_empty() {
        return 0;
    }
    let blocked = q.paused_or_maxed();
    if let MoveSource::Finished(from, _) = source {
        for id in &ids {
            let q = queues.queue(base);
            if let Some(hash) = q.jobs.get_mut(id) {
                for field in ["finishedOn", "processedOn", from.outcome_field()] {
                    hash.remove(field);
                }
            }
            let job_key = q.job_key(id);
            if let Some(parent_key) = q.field(id, "parentKey").map(str::to_owned) {
                back_to_parent_dependencies(queues, &parent_key, &job_key, from);
            }
        }
    }
    let q = queues.queue(base);
    let prev = match source {
        MoveSource::Finished(from, _) => from.as_str(),
        MoveSource::Delayed => "delayed",
    };
    // Every event is capped, and the default cap is stored without `version`, as Node's script.
    let max_events = q.max_events(false);
    for id in &ids {
        q.emit_capped(
            now,
            "waiting",
            &[("jobId", id.clone()), ("prev", prev.into())],
            max_events,
        );
    }
    for id in &ids {
        let removed = match source {
            MoveSource::Finished(RetryFrom::Failed, _) => q.failed.remove(id),
            MoveSource::Finished(RetryFrom::Completed, _) => q.completed.remove(id),
            MoveSource::Delayed => q.delayed.remove(id),
        };
        debug_assert!(removed, "{id} was read from the set");
        q.wait.push_front(id.clone());
    }
    if matches!(source, MoveSource::Delayed) {
        q.signal_delayed();
    }
    if !blocked {
        q.signal_ready();
    }
    ids.len() as u64
}

/// `job.extendLock(token, duration)` (`extend_lock.lua`).
pub(crate) fn extend_lock(
    q: &mut QueueState,
    id: &str,
    token: &str,
    lock_ms: u64,
    now: u64,
) -> LockOutcome {
    match q.locks.get_mut(id) {
        Some(lock) if lock.expires_at > now => {
            if lock.token != token {
                return LockOutcome::HeldByOther;
            }
            lock.expires_at = now.saturating_add(lock_ms.max(1));
            q.stalled.remove(id);
            LockOutcome::Extended
        }
        _ => LockOutcome::Missing,
    }
}
