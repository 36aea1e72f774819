//! Getters and admin of a queue (`get_counts.lua`, `get_ranges.lua`, `get_state.lua`,
//! `pause.lua`, `drain.lua`, `clean.lua`, `obliterate.lua`, `remove_job.lua`,
//! `includes/remove_job_fully.lua`) and the job updates (`update_progress.lua`,
//! `update_data.lua`, `add_log.lua`).

use bullmq_protocol::state::JobState;

use super::flow::detach_from_parent;
use super::queue_state::{lua_number, MetricsStore, QueueState};
use super::schedulers::is_scheduler_job;
use super::sets::{list_range, range_indices};
use super::Queues;
use crate::error::{BackendError, BackendResult};
use crate::metrics::Metrics;
use crate::queue::{JobEnd, ObliterateStep, RemoveOutcome};

/// Counts per state.
pub(crate) fn counts(q: &QueueState, states: &[JobState]) -> Vec<u64> {
    states
        .iter()
        .map(|state| match state {
            JobState::Waiting => q.wait.len(),
            JobState::Active => q.active.len(),
            JobState::Delayed => q.delayed.len(),
            JobState::Prioritized => q.prioritized.len(),
            JobState::Completed => q.completed.len(),
            JobState::Failed => q.failed.len(),
            JobState::WaitingChildren => q.waiting_children.len(),
            // The legacy `paused` list is never written by this backend.
            JobState::Paused | JobState::Unknown => 0,
        } as u64)
        .collect()
}

/// Ids per state; lists hold the newest job on the left, so ascending reads
/// them from the right end.
pub(crate) fn ranges(
    q: &QueueState,
    states: &[JobState],
    start: i64,
    end: i64,
    ascending: bool,
) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    for state in states {
        let list = match state {
            JobState::Waiting => Some(&q.wait),
            JobState::Active => Some(&q.active),
            _ => None,
        };
        if let Some(list) = list {
            if ascending {
                let from = if end == -1 { 0 } else { -(end + 1) };
                let to = if start == -1 { 0 } else { -(start + 1) };
                let mut ids = list_range(list.iter(), list.len(), from, to);
                ids.reverse();
                out.push(ids);
            } else {
                out.push(list_range(list.iter(), list.len(), start, end));
            }
            continue;
        }
        let set = match state {
            JobState::Delayed => &q.delayed,
            JobState::Prioritized => &q.prioritized,
            JobState::Completed => &q.completed,
            JobState::Failed => &q.failed,
            JobState::WaitingChildren => &q.waiting_children,
            // The legacy `paused` list is never written here; `unknown` has no key.
            _ => {
                out.push(Vec::new());
                continue;
            }
        };
        out.push(set.range(start, end, ascending));
    }
    out
}

/// The state of one job, checked in BullMQ's order.
pub(crate) fn state(q: &QueueState, id: &str) -> JobState {
    if q.completed.score(id).is_some() {
        JobState::Completed
    } else if q.failed.score(id).is_some() {
        JobState::Failed
    } else if q.delayed.score(id).is_some() {
        JobState::Delayed
    } else if q.prioritized.score(id).is_some() {
        JobState::Prioritized
    } else if q.active.iter().any(|a| a == id) {
        JobState::Active
    } else if q.wait.iter().any(|a| a == id) {
        JobState::Waiting
    } else if q.waiting_children.score(id).is_some() {
        JobState::WaitingChildren
    } else {
        JobState::Unknown
    }
}

/// Where a job stands for a waiter, in one step.
pub(crate) fn job_end(q: &QueueState, id: &str) -> JobEnd {
    if !q.jobs.contains_key(id) {
        return JobEnd::Missing;
    }
    let field = |name: &str| q.field(id, name).map(str::to_owned);
    if q.completed.score(id).is_some() {
        JobEnd::Completed(field("returnvalue"))
    } else if q.failed.score(id).is_some() {
        JobEnd::Failed(field("failedReason"))
    } else {
        JobEnd::Unfinished
    }
}

/// Log lines `start..=end` (descending mirrors the range from the newest) and the total.
pub(crate) fn logs(
    q: &QueueState,
    id: &str,
    start: i64,
    end: i64,
    ascending: bool,
) -> (Vec<String>, u64) {
    let Some(lines) = q.logs.get(id) else {
        return (Vec::new(), 0);
    };
    let (from, to) = if ascending {
        (start, end)
    } else {
        (-(end + 1), -(start + 1))
    };
    let mut out = list_range(lines.iter(), lines.len(), from, to);
    if !ascending {
        out.reverse();
    }
    (out, lines.len() as u64)
}

/// Pauses (`paused`) or resumes (`resumed`) the queue.
pub(crate) fn set_paused(q: &mut QueueState, paused: bool, now: u64) {
    if paused {
        q.meta.insert("paused".into(), "1".into());
        q.marker_ready = false;
        q.emit_queue(now, "paused", &[]);
    } else {
        q.meta.remove("paused");
        if !q.wait.is_empty() || !q.prioritized.is_empty() {
            q.signal_ready();
        } else {
            q.signal_delayed();
        }
        q.emit_queue(now, "resumed", &[]);
    }
}

/// Removes a job's keys and bookkeeping for callers that take it out of its state
/// themselves (drain, clean, obliterate).
pub(crate) fn purge(queues: &mut Queues, base: &str, id: &str, now: u64) {
    detach_from_parent(queues, base, id, true, now);
    let q = queues.queue(base);
    q.release_dedup_of_removed(id, now);
    q.delete_job_keys(id);
}

/// Removes every waiting (and, with `delayed`, delayed) job; no events.
pub(crate) fn drain(queues: &mut Queues, base: &str, delayed: bool, now: u64) -> u64 {
    let q = queues.queue(base);
    // The pending iteration of each job scheduler stays (remove the scheduler instead).
    let drained = |q: &QueueState, id: &String| !is_scheduler_job(q, id);
    let mut ids: Vec<String> = q.wait.iter().filter(|id| drained(q, id)).cloned().collect();
    q.wait.retain(|id| !ids.contains(id));
    let mut zset_ids: Vec<String> = Vec::new();
    if delayed {
        zset_ids.extend(q.delayed.members().into_iter().filter(|id| drained(q, id)));
    }
    zset_ids.extend(
        q.prioritized
            .members()
            .into_iter()
            .filter(|id| drained(q, id)),
    );
    for id in &zset_ids {
        q.delayed.remove(id);
        q.prioritized.remove(id);
    }
    ids.extend(zset_ids);
    for id in &ids {
        purge(queues, base, id, now);
    }
    ids.len() as u64
}

/// Removes up to `limit` jobs of `state` older than `cutoff`; emits `cleaned`.
pub(crate) fn clean(
    queues: &mut Queues,
    base: &str,
    state: JobState,
    cutoff: u64,
    limit: u64,
    now: u64,
) -> BackendResult<Vec<String>> {
    if state == JobState::Unknown {
        return Err(BackendError::backend(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            "cannot clean jobs of state `unknown`",
        )));
    }
    let limit = usize::try_from(limit).unwrap_or(usize::MAX);
    let full = |deleted: &Vec<String>| limit > 0 && deleted.len() >= limit;
    let q = queues.queue(base);
    let old_enough = |q: &QueueState, id: &str, fields: &[&str]| {
        fields
            .iter()
            .find_map(|f| q.field(id, f))
            .is_none_or(|v| lua_number(v) <= cutoff)
    };
    let mut deleted = Vec::new();
    match state {
        JobState::Waiting | JobState::Active | JobState::Paused => {
            let list: Vec<String> = match state {
                JobState::Waiting => q.wait.iter().cloned().collect(),
                JobState::Active => q.active.iter().cloned().collect(),
                _ => Vec::new(),
            };
            let first = if limit > 0 {
                list.len().saturating_sub(limit)
            } else {
                0
            };
            for id in list[first..].iter().rev() {
                if full(&deleted) {
                    break;
                }
                let free = state != JobState::Active || q.lock(id, now).is_none();
                if free
                    && !is_scheduler_job(q, id)
                    && old_enough(q, id, &["finishedOn", "processedOn", "timestamp"])
                {
                    deleted.push(id.clone());
                }
            }
            let list = if state == JobState::Active {
                &mut q.active
            } else {
                &mut q.wait
            };
            list.retain(|id| !deleted.contains(id));
        }
        _ => {
            let (ids, fields): (Vec<String>, &[&str]) = {
                let set = match state {
                    JobState::Delayed => &q.delayed,
                    JobState::Prioritized => &q.prioritized,
                    JobState::Completed => &q.completed,
                    JobState::Failed => &q.failed,
                    _ => &q.waiting_children,
                };
                match state {
                    JobState::Delayed => (set.members(), &["processedOn", "timestamp"]),
                    JobState::Prioritized => (set.members(), &["timestamp"]),
                    _ => (set.range_by_score(0, cutoff), &[]),
                }
            };
            for id in ids {
                if full(&deleted) {
                    break;
                }
                if !is_scheduler_job(q, &id) && (fields.is_empty() || old_enough(q, &id, fields)) {
                    deleted.push(id);
                }
            }
            let set = match state {
                JobState::Delayed => &mut q.delayed,
                JobState::Prioritized => &mut q.prioritized,
                JobState::Completed => &mut q.completed,
                JobState::Failed => &mut q.failed,
                _ => &mut q.waiting_children,
            };
            for id in &deleted {
                set.remove(id);
            }
        }
    }
    for id in &deleted {
        purge(queues, base, id, now);
    }
    queues
        .queue(base)
        .emit_queue(now, "cleaned", &[("count", deleted.len().to_string())]);
    Ok(deleted)
}

/// Deletes up to `batch` jobs of a paused queue, then the queue.
pub(crate) fn obliterate(
    queues: &mut Queues,
    base: &str,
    batch: u32,
    force: bool,
    now: u64,
) -> ObliterateStep {
    let q = queues.queue(base);
    if !q.is_paused() {
        return ObliterateStep::NotPaused;
    }
    if !force && !q.active.is_empty() {
        return ObliterateStep::ActiveJobs;
    }
    let mut budget = batch as usize;
    let mut purged = Vec::new();
    let take_list = |list: &mut std::collections::VecDeque<String>, budget: &mut usize| {
        let n = list.len().min(*budget);
        *budget -= n;
        list.drain(..n).collect::<Vec<_>>()
    };
    let take_set = |set: &mut super::sets::ZSet, budget: &mut usize| {
        let ids = set.range(0, i64::try_from(*budget).unwrap_or(i64::MAX) - 1, true);
        for id in &ids {
            set.remove(id);
        }
        *budget -= ids.len();
        ids
    };
    let mut more = false;
    for step in 0..9 {
        let ids = match step {
            0 => take_list(&mut q.active, &mut budget),
            1 => take_set(&mut q.delayed, &mut budget),
            2 => {
                // Job schedulers count against the batch as jobs do.
                let schedulers = &mut q.schedulers;
                for id in take_set(&mut schedulers.next, &mut budget) {
                    schedulers.hashes.remove(&id);
                }
                Vec::new()
            }
            3 => take_set(&mut q.completed, &mut budget),
            4 => take_list(&mut q.wait, &mut budget),
            5 => take_set(&mut q.prioritized, &mut budget),
            6 => take_set(&mut q.failed, &mut budget),
            7 => take_set(&mut q.waiting_children, &mut budget),
            _ => Vec::new(),
        };
        purged.extend(ids);
        if budget == 0 {
            more = true;
            break;
        }
    }
    for id in &purged {
        purge(queues, base, id, now);
    }
    if more {
        return ObliterateStep::More;
    }
    queues.drop_queue(base);
    ObliterateStep::Done
}

/// Removes one job from wherever it is, with its children (recursively, in their queues)
/// when `children`, unless it or a pending child is locked.
pub(crate) fn remove(
    queues: &mut Queues,
    base: &str,
    id: &str,
    children: bool,
    now: u64,
) -> RemoveOutcome {
    if is_scheduler_job(queues.queue(base), id) {
        return RemoveOutcome::SchedulerJob;
    }
    if locked_deep(queues, base, id, children, now, 0) {
        return RemoveOutcome::Locked;
    }
    let existed = queues.queue(base).jobs.contains_key(id);
    let prev = remove_everywhere(queues, base, id, children, now, 0);
    if !existed && prev == "unknown" {
        return RemoveOutcome::NotFound;
    }
    RemoveOutcome::Removed
}

/// Flow trees deeper than this are not followed (a cycle written by a foreign client).
const MAX_DEPTH: usize = 64;

fn child_keys(q: &QueueState, id: &str) -> Vec<String> {
    let mut keys: Vec<String> = Vec::new();
    if let Some(deps) = q.dependencies.get(id) {
        keys.extend(deps.iter().cloned());
    }
    for map in [q.processed.get(id), q.failed_children.get(id)]
        .into_iter()
        .flatten()
    {
        keys.extend(map.keys().cloned());
    }
    if let Some(set) = q.unsuccessful.get(id) {
        keys.extend(set.iter().cloned());
    }
    keys.sort();
    keys
}

fn locked_deep(
    queues: &mut Queues,
    base: &str,
    id: &str,
    children: bool,
    now: u64,
    depth: usize,
) -> bool {
    let q = queues.queue(base);
    if q.lock(id, now).is_some() {
        return true;
    }
    if !children || depth > MAX_DEPTH {
        return false;
    }
    let mut pending: Vec<String> = q
        .dependencies
        .get(id)
        .map(|d| d.iter().cloned().collect())
        .unwrap_or_default();
    pending.sort();
    pending.iter().any(|key| {
        super::queue_state::split_job_key(key)
            .is_some_and(|(b, child)| locked_deep(queues, b, child, true, now, depth + 1))
    })
}

fn remove_everywhere(
    queues: &mut Queues,
    base: &str,
    id: &str,
    children: bool,
    now: u64,
    depth: usize,
) -> &'static str {
    detach_from_parent(queues, base, id, false, now);
    // Each child detaches itself too, as in Node: a parent whose last pending child goes is
    // released to `wait` (with its `waiting` event) just before it is removed itself.
    if children && depth <= MAX_DEPTH {
        let keys = child_keys(queues.queue(base), id);
        for key in keys {
            if let Some((b, child)) = super::queue_state::split_job_key(&key) {
                let (b, child) = (b.to_owned(), child.to_owned());
                remove_everywhere(queues, &b, &child, true, now, depth + 1);
            }
        }
    }
    let q = queues.queue(base);
    let prev = q.remove_from_any_state(id);
    q.release_dedup_of_removed(id, now);
    if q.delete_job_keys(id) {
        q.emit_queue(
            now,
            "removed",
            &[("jobId", id.to_owned()), ("prev", prev.to_owned())],
        );
    }
    prev
}

/// One kind's metrics, points `start..=end`.
pub(crate) fn metrics(m: &MetricsStore, start: i64, end: i64) -> Metrics {
    let data = match range_indices(m.data.len(), start, end) {
        Some((from, to)) => m
            .data
            .iter()
            .skip(from)
            .take(to - from + 1)
            .copied()
            .collect(),
        None => Vec::new(),
    };
    Metrics {
        meta: crate::metrics::MetricsMeta {
            count: m.count.unwrap_or(0),
            prev_ts: m.prev_ts.unwrap_or(0),
            prev_count: m.prev_count.unwrap_or(0),
        },
        data,
        count: m.data.len() as u64,
    }
}

/// Appends a log line, keeping the newest `keep`; the number of lines kept.
pub(crate) fn add_log(q: &mut QueueState, id: &str, line: &str, keep: Option<u64>) -> Option<u64> {
    if !q.jobs.contains_key(id) {
        return None;
    }
    let lines = q.logs.entry(id.to_owned()).or_default();
    lines.push_back(line.to_owned());
    let count = lines.len() as u64;
    match keep {
        // `LTRIM -0 -1` keeps every line, as the script does for 0.
        Some(0) => Some(0),
        Some(keep) => {
            while lines.len() as u64 > keep {
                lines.pop_front();
            }
            if lines.is_empty() {
                q.logs.remove(id);
            }
            Some(keep.min(count))
        }
        None => Some(count),
    }
}
