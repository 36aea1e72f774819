//! Finishing jobs (`worker_finish_batch.lua`): lock checks, complete / fail with retention and
//! metrics, retry, delay, rate limit, the deduplication release (`includes/worker_dedup.lua`)
//! and the `drained` event.

use std::collections::HashSet;
use std::sync::atomic::AtomicU64;
use std::time::Duration;

use super::add::{decode_opts, opt_number, opt_true, register_dependency};
use super::fetch::fetch;
use super::flow::{child_completed, child_failed, parent_of, ParentOf};
use super::queue_control::limiter_pttl;
use super::queue_state::{Expiring, JobHash, MetricsStore, QueueState};
use super::Queues;
use crate::worker::{
    FetchRequest, Fetched, Finish, FinishAction, FinishCode, FinishReply, Retention,
};

/// Finishes `finishes` in order, then fetches with `fetch` (in the same atomic step).
pub(crate) fn finish_batch(
    queues: &mut Queues,
    base: &str,
    finishes: &[Finish],
    fetch_request: Option<&FetchRequest>,
    metrics_max: u32,
    now: u64,
    token_seq: &AtomicU64,
) -> FinishReply {
    let mut reply = FinishReply::default();
    let mut released = HashSet::new();
    let mut finished_any = false;
    let (mut completed_count, mut failed_count) = (0u64, 0u64);
    for finish in finishes {
        let outcome = finish_one(queues, base, finish, &mut released, now);
        match outcome {
            Outcome::Code(code) => reply.codes.push(code),
            Outcome::Finished { completed } => {
                finished_any = true;
                if completed {
                    completed_count += 1;
                } else {
                    failed_count += 1;
                }
                reply.codes.push(FinishCode::Ok);
            }
            Outcome::Corrupted(reason) => {
                reply.corrupted.push((reply.codes.len(), reason));
                reply.codes.push(FinishCode::Corrupted);
            }
        }
    }
    let q = queues.queue(base);
    if metrics_max > 0 {
        if completed_count > 0 {
            count_metrics(&mut q.metrics_completed, metrics_max, now, completed_count);
        }
        if failed_count > 0 {
            count_metrics(&mut q.metrics_failed, metrics_max, now, failed_count);
        }
    }
    for id in &released {
        q.stalled.remove(id);
    }

    let mut looked = false;
    let all_finished = reply.codes.iter().all(|c| c.is_ok());
    if let Some(request) =
        fetch_request.filter(|r| r.count > 0 && (all_finished || !r.only_if_finished))
    {
        reply.fetched = fetch(q, request, now, token_seq);
        looked = true;
    }
    if finishes
        .iter()
        .any(|f| matches!(f.action, FinishAction::RateLimit { .. }))
    {
        // As the Redis script: the worker waits for the limiter's remaining time.
        let pttl = u64::try_from(limiter_pttl(q, now)).unwrap_or(0);
        let pttl = Duration::from_millis(pttl);
        if pttl > reply.fetched.rate_limited_for {
            reply.fetched.rate_limited_for = pttl;
        }
    }
    let f: &Fetched = &reply.fetched;
    let quiet =
        !looked || (f.rate_limited_for.is_zero() && f.next_delayed_at.is_none() && !f.gated);
    if finished_any
        && f.jobs.is_empty()
        && quiet
        && q.wait.is_empty()
        && q.active.is_empty()
        && q.prioritized.is_empty()
    {
        q.emit(now, "drained", &[]);
    }
    reply
}

enum Outcome {
    Code(FinishCode),
    Finished { completed: bool },
    Corrupted(String),
}

fn finish_one(
    queues: &mut Queues,
    base: &str,
    finish: &Finish,
    released: &mut HashSet<String>,
    now: u64,
) -> Outcome {
    let q = queues.queue(base);
    let id = finish.job_id.as_str();
    let current = if released.contains(id) {
        None
    } else {
        q.lock(id, now).map(|l| l.token.clone())
    };
    if current.as_deref() != Some(finish.token.as_str()) {
        if !q.jobs.contains_key(id) {
            return Outcome::Code(FinishCode::MissingJob);
        }
        if current.is_some() {
            return Outcome::Code(FinishCode::LockNotOwned);
        }
        return Outcome::Code(FinishCode::MissingLock);
    }
    if matches!(finish.action, FinishAction::Complete { .. }) {
        if q.dependencies.get(id).is_some_and(|d| !d.is_empty()) {
            return Outcome::Code(FinishCode::PendingChildren);
        }
        if q.unsuccessful.get(id).is_some_and(|d| !d.is_empty()) {
            return Outcome::Code(FinishCode::FailedChildren);
        }
    }
    let counts_attempt = !matches!(
        finish.action,
        FinishAction::RateLimit { .. }
            | FinishAction::Delay {
                skip_attempt: true,
                ..
            }
    );
    let attempts_made = q.int_field(id, "atm") + 1;
    let parent = match &finish.action {
        FinishAction::Complete { .. } | FinishAction::Fail { .. } => parent_of(q, id),
        _ => Ok(None),
    };
    released.insert(id.to_owned());
    q.locks.remove(id);
    if !q.remove_active(id) {
        return Outcome::Code(FinishCode::NotActive);
    }
    let parent = match parent {
        Ok(parent) => parent,
        Err(reason) => {
            finalize_dedup(queues, base, id, now);
            let q = queues.queue(base);
            fail_corrupted(q, id, &reason, now, "active");
            return Outcome::Corrupted(reason);
        }
    };
    let atm = attempts_made.to_string();

    match &finish.action {
        FinishAction::Complete { returnvalue, keep } => {
            finish_for_good(
                queues,
                base,
                id,
                true,
                returnvalue,
                None,
                *keep,
                &atm,
                parent,
                now,
            );
            Outcome::Finished { completed: true }
        }
        FinishAction::Fail {
            reason,
            stacktrace,
            attempts,
            keep,
        } => {
            finish_for_good(
                queues,
                base,
                id,
                false,
                reason,
                stacktrace.as_deref(),
                *keep,
                &atm,
                parent,
                now,
            );
            let q = queues.queue(base);
            if attempts_made >= u64::from(*attempts) {
                q.emit(
                    now,
                    "retries-exhausted",
                    &[("jobId", id.to_owned()), ("attemptsMade", atm.clone())],
                );
            }
            Outcome::Finished { completed: false }
        }
        FinishAction::Retry {
            reason,
            stacktrace,
            lifo,
        } => {
            save_failure(q, id, Some(reason), stacktrace.as_deref());
            q.enqueue_ready(id, *lifo);
            q.set_field(id, "atm", atm);
            q.emit(
                now,
                "waiting",
                &[("jobId", id.to_owned()), ("prev", "active".into())],
            );
            Outcome::Code(FinishCode::Ok)
        }
        FinishAction::Delay {
            delay,
            reason,
            stacktrace,
            ..
        } => {
            save_failure(q, id, reason.as_deref(), stacktrace.as_deref());
            let delay_ms = u64::try_from(delay.as_millis()).unwrap_or(u64::MAX);
            q.set_field(id, "delay", delay_ms.to_string());
            if counts_attempt {
                q.set_field(id, "atm", atm);
            }
            q.push_delayed(now, id, now.saturating_add(delay_ms), false);
            Outcome::Code(FinishCode::Ok)
        }
        FinishAction::RateLimit { ttl } => {
            let ttl_ms = u64::try_from(ttl.as_millis()).unwrap_or(u64::MAX);
            // As a Node worker's rateLimit(ttl): the limiter is saturated for ttl; a ttl of 0
            // leaves it as it is (Node's plain RateLimitError).
            if ttl_ms > 0 {
                q.limiter = Some(Expiring {
                    value: 9_007_199_254_740_991,
                    expires_at: Some(now.saturating_add(ttl_ms)),
                });
            }
            q.back_to_wait_from_active(id, now);
            Outcome::Code(FinishCode::Ok)
        }
    }
}

fn save_failure(q: &mut QueueState, id: &str, reason: Option<&str>, stacktrace: Option<&str>) {
    if let Some(reason) = reason {
        q.set_field(id, "failedReason", reason);
    }
    if let Some(stacktrace) = stacktrace {
        q.set_field(id, "stacktrace", stacktrace);
    }
}

/// Completes or fails a job for good: deduplication release, parent bookkeeping, the finished
/// set and its retention, the event.
#[allow(clippy::too_many_arguments)]
fn finish_for_good(
    queues: &mut Queues,
    base: &str,
    id: &str,
    completed: bool,
    value: &str,
    stacktrace: Option<&str>,
    keep: Retention,
    atm: &str,
    parent: Option<ParentOf>,
    now: u64,
) {
    finalize_dedup(queues, base, id, now);
    let q = queues.queue(base);
    if !completed {
        save_failure(q, id, Some(value), stacktrace);
    }
    let job_key = q.job_key(id);
    if let Some(parent) = &parent {
        // The parent is told before this job's own state changes, as other clients order it.
        if completed {
            child_completed(queues, parent, &job_key, value, now);
        } else {
            child_failed(queues, parent, &job_key, value, now);
        }
    }
    let q = queues.queue(base);
    let field = if completed {
        "returnvalue"
    } else {
        "failedReason"
    };
    if keep.count == Some(0) {
        q.delete_job_keys(id);
    } else {
        q.set_field(id, field, value);
        q.set_field(id, "finishedOn", now.to_string());
        q.set_field(id, "atm", atm);
        if !completed {
            if let Some(hash) = q.jobs.get_mut(id) {
                hash.remove("defa");
            }
        }
        let set = if completed {
            &mut q.completed
        } else {
            &mut q.failed
        };
        set.add(now, id);
        let mut doomed = Vec::new();
        if let Some(age) = keep.age {
            let cutoff = now.saturating_sub(u64::try_from(age.as_millis()).unwrap_or(u64::MAX));
            let limit = usize::try_from(keep.limit.unwrap_or(1000)).unwrap_or(usize::MAX);
            let mut old = set.range_by_score(0, cutoff);
            old.reverse();
            old.truncate(limit);
            for old_id in &old {
                set.remove(old_id);
            }
            doomed.extend(old);
        }
        if let Some(count) = keep.count.filter(|c| *c > 0) {
            let excess = set.range(i64::try_from(count).unwrap_or(i64::MAX), -1, false);
            for old_id in &excess {
                set.remove(old_id);
            }
            doomed.extend(excess);
        }
        for old_id in doomed {
            delete_finished(q, &old_id);
        }
    }
    let kind = if completed { "completed" } else { "failed" };
    q.emit(
        now,
        kind,
        &[
            ("jobId", id.to_owned()),
            (field, value.to_owned()),
            ("prev", "active".into()),
        ],
    );
}

/// Deletes a finished job trimmed by retention (its hash and satellites, not its lock).
fn delete_finished(q: &mut QueueState, id: &str) {
    q.jobs.remove(id);
    q.logs.remove(id);
    q.dependencies.remove(id);
    q.processed.remove(id);
    q.failed_children.remove(id);
    q.unsuccessful.remove(id);
}

/// Fails a job whose record is corrupted, on its own.
pub(crate) fn fail_corrupted(q: &mut QueueState, id: &str, reason: &str, now: u64, prev: &str) {
    q.failed.add(now, id);
    q.set_field(id, "failedReason", reason);
    q.set_field(id, "finishedOn", now.to_string());
    q.emit(
        now,
        "failed",
        &[
            ("jobId", id.to_owned()),
            ("failedReason", reason.to_owned()),
            ("prev", prev.to_owned()),
        ],
    );
}

/// Releases the deduplication window of a job finished for good and turns a duplicate kept
/// while it ran (keepLastIfActive) into a new job.
pub(crate) fn finalize_dedup(queues: &mut Queues, base: &str, id: &str, now: u64) {
    let q = queues.queue(base);
    let Some(dedup_id) = q.field(id, "deid").map(str::to_owned) else {
        return;
    };
    match q.dedup.get(&dedup_id) {
        Some(w) if !w.live(now) => {
            q.dedup.remove(&dedup_id);
        }
        Some(w) if w.expires_at.is_none() && w.value == id => {
            q.dedup.remove(&dedup_id);
        }
        _ => {}
    }
    let Some(kept) = q.kept_duplicates.remove(&dedup_id) else {
        return;
    };
    let opts = decode_opts(&kept.opts).unwrap_or_default();
    let de = match opts.get("de") {
        Some(serde_json::Value::Object(de)) => de.clone(),
        _ => serde_json::Map::new(),
    };
    let ttl = if opt_true(&de, "keepLastIfActive") {
        None
    } else {
        opt_number(&de, "ttl").map(|t| t.floor() as i64)
    };
    let delay = opt_number(&opts, "delay").unwrap_or(0.0).max(0.0).floor() as u64;
    let priority = opt_number(&opts, "priority")
        .unwrap_or(0.0)
        .max(0.0)
        .floor() as u64;

    q.id_counter += 1;
    let job_id = if !kept.job_id.is_empty() && !q.jobs.contains_key(&kept.job_id) {
        kept.job_id.clone()
    } else {
        q.id_counter.to_string()
    };
    let mut hash = JobHash::new();
    for (field, value) in [
        ("timestamp", Some(now.to_string())),
        ("delay", Some(delay.to_string())),
        ("priority", Some(priority.to_string())),
        ("deid", Some(dedup_id.clone())),
        ("name", Some(kept.name.clone())),
        ("data", Some(kept.data.clone())),
        ("opts", Some(kept.opts.clone())),
        ("parentKey", kept.parent_key.clone()),
        ("parent", kept.parent_json.clone()),
        ("rjk", kept.repeat_job_key.clone()),
    ] {
        if let Some(value) = value {
            hash.insert(field.to_owned(), value);
        }
    }
    q.jobs.insert(job_id.clone(), hash);
    q.dedup.insert(
        dedup_id,
        Expiring {
            value: job_id.clone(),
            expires_at: ttl.filter(|t| *t > 0).map(|t| now.saturating_add(t as u64)),
        },
    );
    q.emit(
        now,
        "added",
        &[("jobId", job_id.clone()), ("name", kept.name.clone())],
    );
    if delay > 0 {
        q.push_delayed(now, &job_id, now.saturating_add(delay), false);
    } else {
        let gated = q.paused_or_maxed();
        if priority > 0 {
            let score = q.next_priority_score(priority);
            q.prioritized.add(score, &job_id);
        } else if opt_true(&opts, "lifo") {
            q.wait.push_back(job_id.clone());
        } else {
            q.wait.push_front(job_id.clone());
        }
        if !gated {
            q.signal_ready();
        }
        q.emit(now, "waiting", &[("jobId", job_id.clone())]);
    }
    let job_key = q.job_key(&job_id);
    if let Some(deps) = kept.dependencies_key.as_deref() {
        register_dependency(queues, deps, job_key);
    }
}

/// Counts `n` jobs finished at `now` into one kind's metrics.
fn count_metrics(m: &mut MetricsStore, max_points: u32, now: u64, n: u64) {
    let count = m.count.unwrap_or(0);
    let Some(prev_ts) = m.prev_ts else {
        m.count = Some(count + n);
        m.prev_ts = Some(now);
        m.prev_count = Some(0);
        return;
    };
    let minutes = (now / 60_000)
        .saturating_sub(prev_ts / 60_000)
        .min(u64::from(max_points));
    if minutes == 0 {
        m.count = Some(count + n);
        return;
    }
    m.data
        .push_front(count.saturating_sub(m.prev_count.unwrap_or(0)));
    // Minutes without any finished job between the two points count as zero.
    for _ in 1..minutes {
        m.data.push_front(0);
    }
    m.data.truncate(max_points as usize);
    m.count = Some(count + n);
    m.prev_count = Some(count);
    m.prev_ts = Some(now);
}
