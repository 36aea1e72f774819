//! Taking jobs (`includes/worker_fetch.lua`): queue gates, promotion of due delayed jobs, the
//! rate limiter, wait before prioritized, locks and attempt counting.

use std::sync::atomic::{AtomicU64, Ordering};

use bullmq_protocol::score::DELAYED_SCORE_MULTIPLIER;
use bullmq_protocol::JobRecord;

use super::queue_state::{lua_number, Expiring, Lock, QueueState};
use crate::worker::{FetchRequest, Fetched, FetchedJob};

/// At most this many due delayed jobs are promoted per call, as the script does.
const PROMOTE_MAX: usize = 1000;

/// Moves due delayed jobs to wait / prioritized with a `waiting` event.
pub(crate) fn promote_delayed(q: &mut QueueState, now: u64, gated: bool) {
    let due = q.delayed.range_by_score(
        0,
        now.saturating_add(1)
            .saturating_mul(DELAYED_SCORE_MULTIPLIER)
            .saturating_sub(1),
    );
    if due.is_empty() {
        return;
    }
    for job_id in due.into_iter().take(PROMOTE_MAX) {
        q.delayed.remove(&job_id);
        let priority = q.int_field(&job_id, "priority");
        if priority > 0 {
            let score = q.next_priority_score(priority);
            q.prioritized.add(score, &job_id);
        } else {
            q.wait.push_front(job_id.clone());
        }
        q.emit(
            now,
            "waiting",
            &[("jobId", job_id.clone()), ("prev", "delayed".into())],
        );
        q.set_field(&job_id, "delay", "0");
    }
    if !gated {
        q.signal_ready();
    }
}

/// The ms the rate limiter stays closed for `max` jobs per window (0: open).
fn rate_limit_ttl(q: &mut QueueState, max: Option<u64>, now: u64) -> u64 {
    let Some(max) = max.filter(|m| *m > 0) else {
        return 0;
    };
    match &q.limiter {
        Some(l) if !l.live(now) => {
            q.limiter = None;
            0
        }
        Some(l) if l.value >= max => l.expires_at.map_or(0, |at| at.saturating_sub(now)),
        _ => 0,
    }
}

/// Counts one job against the limiter, opening a window of `window` ms on the first.
fn count_limited(q: &mut QueueState, window: u64, now: u64) {
    match &mut q.limiter {
        Some(l) if l.live(now) => l.value += 1,
        _ => {
            q.limiter = Some(Expiring {
                value: 1,
                expires_at: Some(now.saturating_add(window.max(1))),
            });
        }
    }
}

/// The next ready id: wait's right end, then the lowest prioritized score (resetting the
/// priority counter when none is left).
fn take_next(q: &mut QueueState) -> Option<String> {
    if let Some(id) = q.wait.pop_back() {
        q.active.push_front(id.clone());
        return Some(id);
    }
    if let Some(id) = q.prioritized.pop_min() {
        q.active.push_front(id.clone());
        return Some(id);
    }
    q.priority_counter = 0;
    None
}

/// Moves up to `request.count` ready jobs to active and locks them.
pub(crate) fn fetch(
    q: &mut QueueState,
    request: &FetchRequest,
    now: u64,
    token_seq: &AtomicU64,
) -> Fetched {
    let paused = q.is_paused();
    let concurrency = q.global_concurrency();
    let mut gated = paused;
    let mut room = None;
    if !gated {
        if let Some(c) = concurrency {
            let r = c.saturating_sub(q.active.len() as u64);
            room = Some(r);
            gated = r == 0;
        }
    }
    promote_delayed(q, now, gated);

    let meta_max = q.meta.get("max").map(|v| lua_number(v));
    let meta_duration = q.meta.get("duration").map(|v| lua_number(v));
    let limiter = request.limiter.map(|(max, window)| {
        (
            u64::from(max),
            u64::try_from(window.as_millis()).unwrap_or(u64::MAX),
        )
    });
    let max_jobs = meta_max.or(limiter.map(|(max, _)| max).filter(|m| *m > 0));
    let window = limiter
        .map(|(_, w)| w)
        .filter(|w| *w > 0)
        .or(meta_duration)
        .unwrap_or(0);

    let mut fetched = Fetched::default();
    let mut limited = rate_limit_ttl(q, max_jobs, now);
    if limited > 0 {
        fetched.rate_limited_for = std::time::Duration::from_millis(limited);
        return fetched;
    }
    if gated {
        fetched.gated = true;
        return fetched;
    }
    let mut want = u64::from(request.count);
    if let Some(room) = room {
        want = want.min(room);
    }

    let mut ids: Vec<String> = Vec::new();
    if max_jobs.is_some() {
        // Rate limited: one job at a time, each counted before the next is taken.
        while (ids.len() as u64) < want {
            if !ids.is_empty() {
                limited = rate_limit_ttl(q, max_jobs, now);
                if limited > 0 {
                    break;
                }
            }
            let Some(id) = take_next(q) else { break };
            // A deferred failure is failed at once by the worker and is not counted.
            if q.field(&id, "defa").is_none() {
                count_limited(q, window, now);
            }
            ids.push(id);
        }
    } else {
        while (ids.len() as u64) < want {
            let Some(id) = q.wait.pop_back() else { break };
            q.active.push_front(id.clone());
            ids.push(id);
        }
        while (ids.len() as u64) < want {
            let Some(id) = q.prioritized.pop_min() else {
                q.priority_counter = 0;
                break;
            };
            q.active.push_front(id.clone());
            ids.push(id);
        }
    }

    let lock_ms = u64::try_from(request.lock_duration.as_millis()).unwrap_or(u64::MAX);
    let name = request.worker_name.as_deref().filter(|n| !n.is_empty());
    for id in &ids {
        if !q.jobs.contains_key(id) {
            // An id without a job: nothing to run or to fail.
            if let Some(at) = q.active.iter().position(|a| a == id) {
                q.active.remove(at);
            }
            fetched.dropped.push(id.clone());
            continue;
        }
        let seq = token_seq.fetch_add(1, Ordering::Relaxed);
        let token = request.token_for(seq);
        q.locks.insert(
            id.clone(),
            Lock {
                token: token.clone(),
                expires_at: now.saturating_add(lock_ms),
            },
        );
        q.emit(
            now,
            "active",
            &[("jobId", id.clone()), ("prev", "waiting".into())],
        );
        let started = q.int_field(id, "ats") + 1;
        q.set_field(id, "processedOn", now.to_string());
        q.set_field(id, "ats", started.to_string());
        if let Some(name) = name {
            q.set_field(id, "pb", name);
        }
        let hash = &q.jobs[id];
        fetched.jobs.push(match JobRecord::decode(id, hash) {
            Ok(record) => match super::schedulers::next_at_fetch(q, &record, now) {
                Some(next) => FetchedJob::new(token, record).with_next_iteration(next),
                None => FetchedJob::new(token, record),
            },
            Err(error) => {
                FetchedJob::unreadable(id.clone(), token, format!("corrupted job hash: {error}"))
            }
        });
    }

    if !ids.is_empty() && (!q.wait.is_empty() || !q.prioritized.is_empty()) {
        // Work left over: wake another idle worker.
        q.signal_ready();
    }
    if fetched.jobs.is_empty() {
        fetched.next_delayed_at = q.next_delayed_at();
    } else {
        fetched.rate_limited_for = std::time::Duration::from_millis(limited);
    }
    fetched
}
