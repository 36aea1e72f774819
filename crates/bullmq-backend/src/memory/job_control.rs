//! Job control (retry a finished job, promote a delayed one, change a job's priority or
//! delay), step by step as the Redis backend's scripts of the same names.

use crate::job_control::{ControlOutcome, RetryFrom, RetryReset};

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
