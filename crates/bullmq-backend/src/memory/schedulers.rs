//! Job schedulers, as Node 6.7.0's scripts keep them (`addJobScheduler.lua`,
//! `updateJobScheduler.lua`, `removeJobScheduler.lua`, `getJobScheduler.lua` and the
//! `getJobSchedulers` range): the `repeat` sorted set (scheduler id → next run) and one
//! `repeat:{id}` hash of text fields per scheduler, with the pending iteration stored as any
//! other job (`repeat:{id}:{millis}`, carrying `rjk`).
//!
//! Each function is one atomic step of the backend; like a Redis script, a step that gives up
//! half-way keeps what it already wrote (an upsert that finds every `every` slot busy has
//! already removed the pending iteration it replaces, as Node's script has).

use std::collections::HashMap;

use bullmq_protocol::scheduler::{
    every_next_millis, field, iteration_job_id, JobSchedulerRecord, NextIterationPlan,
    SchedulerFields, UpsertPlan,
};
use serde_json::{Map, Value};

use super::add::{dedup_id, number_text, opt_number, opt_true, place_new_job};
use super::admin::purge;
use super::queue_state::{QueueState, DEFAULT_MAX_EVENTS};
use super::sets::ZSet;
use super::Queues;
use crate::error::{BackendError, BackendResult};
use crate::schedulers::{NextIteration, UpsertOutcome};

/// How many `every` slots an upsert walks past taken ones before giving up (Node's bound).
const MAX_SLOT_SCANS: u32 = 32;

/// One queue's schedulers: the `repeat` zset and the `repeat:{id}` hashes.
#[derive(Debug, Default)]
pub(crate) struct Schedulers {
    /// Scheduler id → next run, ms.
    pub(crate) next: ZSet,
    /// Scheduler id → its hash fields.
    pub(crate) hashes: HashMap<String, HashMap<String, String>>,
}

impl Schedulers {
    /// Whether `job_id` (whose `rjk` is `rjk`) is the pending iteration of a registered
    /// scheduler: admin commands leave such jobs alone.
    pub(crate) fn is_pending_iteration(&self, job_id: &str, rjk: Option<&str>) -> bool {
        rjk.and_then(|id| {
            self.next
                .score(id)
                .map(|millis| iteration_job_id(id, millis))
        })
        .is_some_and(|current| current == job_id)
    }

    /// Whether the scheduler `id` exists in either key (the stalled check's test).
    pub(crate) fn exists(&self, id: &str) -> bool {
        self.next.score(id).is_some() || self.hashes.get(id).is_some_and(|h| !h.is_empty())
    }
}

/// Whether `job_id` is the pending iteration of one of the queue's schedulers.
pub(crate) fn is_scheduler_job(q: &QueueState, job_id: &str) -> bool {
    q.schedulers
        .is_pending_iteration(job_id, q.field(job_id, "rjk"))
}

/// `tonumber(v)` for the numbers the scripts read back from a hash (floored).
fn lua_tonumber(value: &str) -> Option<u64> {
    let value = value.trim();
    if let Ok(n) = value.parse::<u64>() {
        return Some(n);
    }
    match value.parse::<f64>() {
        // Truncation is what the arithmetic on the result does in the scripts.
        #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
        Ok(n) if n.is_finite() && n >= 0.0 => Some(n.floor() as u64),
        _ => None,
    }
}

/// `opts.repeat[name]` of an iteration's options, as a number.
fn repeat_number(opts: &Map<String, Value>, name: &str) -> Option<u64> {
    match opts.get("repeat") {
        Some(Value::Object(repeat)) =>
        {
            #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
            opt_number(repeat, name)
                .filter(|n| n.is_finite() && *n >= 0.0)
                .map(|n| n.floor() as u64)
        }
        _ => None,
    }
}

/// `opts.maxLenEvents` read without writing it (scripts that do not call `getOrSetMaxEvents`).
fn events_cap(q: &QueueState) -> u64 {
    q.meta
        .get("opts.maxLenEvents")
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(DEFAULT_MAX_EVENTS)
}

fn missing_name(id: &str) -> BackendError {
    BackendError::backend(std::io::Error::new(
        std::io::ErrorKind::InvalidData,
        format!("job scheduler {id} has no stored name"),
    ))
}

/// Node's `addJobScheduler`: stores the scheduler of `plan` and its pending iteration,
/// replacing a pending iteration that has not started.
pub(crate) fn upsert(
    queues: &mut Queues,
    base: &str,
    plan: &UpsertPlan,
    clock: u64,
) -> BackendResult<UpsertOutcome> {
    let now = plan.now_ms;
    let id = plan.id.as_str();
    let q = queues.queue(base);
    q.max_events(false);
    let prev = q.schedulers.next.score(id);
    let every = plan.fields.every;
    // The options' offset is read too, as Node does for iterations written by older clients.
    let offset = plan
        .fields
        .offset
        .or_else(|| repeat_number(&plan.iteration_opts, "offset"))
        .unwrap_or(0);
    let mut new_offset = offset;
    let mut updated_every = false;
    let mut next = plan.next_millis;
    if let Some(every) = every {
        let mut millis = prev;
        if prev.is_some() {
            let stored_every = q
                .schedulers
                .hashes
                .get(id)
                .and_then(|h| h.get(field::EVERY))
                .and_then(|v| lua_tonumber(v));
            if stored_every != Some(every) {
                // A new interval starts a new grid: the old slot is forgotten.
                millis = None;
                updated_every = true;
            }
        }
        let (millis, phase) =
            every_next_millis(millis, every, now, Some(offset), plan.fields.start_date);
        next = Some(millis);
        new_offset = phase;
    }
    let Some(mut next) = next else {
        return Err(BackendError::backend(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            format!("job scheduler {id}: a cron plan must carry its next run"),
        )));
    };

    // Decided before anything is written: a refused upsert leaves the pending iteration (and
    // so the series) as it was, where Node has already removed it.
    let pending_prev = prev
        .map(|prev| iteration_job_id(id, prev))
        .filter(|current| is_unstarted(q, current));
    let stored_offset = if pending_prev.is_some() {
        if every.is_some() && !updated_every {
            // The replaced iteration's slot is reused.
            next = prev.unwrap_or(next);
        }
        plan.fields.offset
    } else {
        Some(new_offset)
    };

    // The replaced iteration's id is free: it goes before the new one is written.
    let taken = |q: &QueueState, job_id: &str| {
        pending_prev.as_deref() != Some(job_id) && q.jobs.contains_key(job_id)
    };
    let mut job_id = iteration_job_id(id, next);
    if taken(q, &job_id) {
        match every {
            Some(every) => {
                // Finished iterations of an earlier scheduler of the same id may hold several
                // slots in a row.
                let mut scanned = 0;
                let mut busy = true;
                while busy && scanned < MAX_SLOT_SCANS {
                    next += every;
                    job_id = iteration_job_id(id, next);
                    scanned += 1;
                    busy = taken(q, &job_id);
                }
                if busy {
                    return Ok(UpsertOutcome::SlotsBusy);
                }
            }
            None => return Ok(UpsertOutcome::IdCollision),
        }
    }
    if let Some(current) = &pending_prev {
        remove_unstarted(queues, base, current, clock);
    }
    let q = queues.queue(base);
    let delay = next.saturating_sub(now);
    store_scheduler(q, id, next, &plan.fields, stored_offset, plan);
    q.id_counter += 1;
    add_iteration(
        q,
        Iteration {
            job_id: &job_id,
            scheduler_id: id,
            name: &plan.fields.name,
            data: &plan.template_data,
            opts: plan.iteration_opts.clone(),
            timestamp: now,
            delay,
        },
        clock,
    );
    Ok(UpsertOutcome::Added { job_id, delay })
}

/// Whether the pending iteration `job_id` has not started: delayed, prioritized or waiting.
/// Node looks for a waiting one in the legacy `paused` list when the queue is paused; this
/// backend never writes that list, so a waiting iteration of a paused queue counts as started
/// and stays, as it does there.
fn is_unstarted(q: &QueueState, job_id: &str) -> bool {
    q.jobs.contains_key(job_id)
        && (q.delayed.score(job_id).is_some()
            || q.prioritized.score(job_id).is_some()
            || (!q.is_paused() && q.wait.iter().any(|w| w == job_id)))
}

/// Removes the unstarted pending iteration `job_id` with its keys and deduplication window;
/// no event, as Node's upsert.
fn remove_unstarted(queues: &mut Queues, base: &str, job_id: &str, clock: u64) {
    let q = queues.queue(base);
    if !q.delayed.remove(job_id) && !q.prioritized.remove(job_id) {
        if let Some(at) = q.wait.iter().position(|w| w == job_id) {
            q.wait.remove(at);
        }
    }
    purge(queues, base, job_id, clock);
}

/// `storeJobScheduler`: the zset score, and the hash rewritten from scratch.
fn store_scheduler(
    q: &mut QueueState,
    id: &str,
    next: u64,
    fields: &SchedulerFields,
    offset: Option<u64>,
    plan: &UpsertPlan,
) {
    q.schedulers.next.add(next, id);
    let old = q.schedulers.hashes.remove(id).unwrap_or_default();
    let mut hash = HashMap::new();
    hash.insert(field::NAME.to_owned(), fields.name.clone());
    let mut put = |name: &str, value: Option<String>| {
        if let Some(value) = value {
            hash.insert(name.to_owned(), value);
        }
    };
    put(field::TZ, fields.tz.clone());
    put(field::LIMIT, fields.limit.map(|v| v.to_string()));
    put(field::PATTERN, fields.pattern.clone());
    put(field::START_DATE, fields.start_date.map(|v| v.to_string()));
    put(field::END_DATE, fields.end_date.map(|v| v.to_string()));
    put(field::EVERY, fields.every.map(|v| v.to_string()));
    let offset = offset.or_else(|| old.get(field::OFFSET).and_then(|v| lua_tonumber(v)));
    put(field::OFFSET, offset.map(|v| v.to_string()));
    put(
        field::OPTS,
        Some(plan.template_opts.clone()).filter(|o| o != "{}"),
    );
    put(
        field::DATA,
        Some(plan.template_data.clone()).filter(|d| d != "{}"),
    );
    let ic = old
        .get(field::ITERATION_COUNT)
        .cloned()
        .unwrap_or_else(|| String::from("1"));
    put(field::ITERATION_COUNT, Some(ic));
    q.schedulers.hashes.insert(id.to_owned(), hash);
}

/// One iteration to store (`addJobFromScheduler`).
struct Iteration<'a> {
    job_id: &'a str,
    scheduler_id: &'a str,
    name: &'a str,
    data: &'a str,
    opts: Map<String, Value>,
    timestamp: u64,
    delay: u64,
}

/// `addJobFromScheduler` / `storeAndEnqueueJob`: writes the job (over an existing hash, field
/// by field, as `HMSET`), emits `added`, then queues it: delayed, prioritized or wait.
fn add_iteration(q: &mut QueueState, it: Iteration<'_>, clock: u64) {
    let mut opts = it.opts;
    opts.insert("delay".into(), it.delay.into());
    opts.insert("jobId".into(), it.job_id.into());
    let priority = opt_number(&opts, "priority").unwrap_or(0.0);
    let lifo = opt_true(&opts, "lifo");
    let dedup = match opts.get("de") {
        Some(Value::Object(de)) => dedup_id(de),
        _ => None,
    };
    let opts_json = Value::Object(opts).to_string();
    let hash = q.jobs.entry(it.job_id.to_owned()).or_default();
    hash.insert("name".into(), it.name.to_owned());
    hash.insert("data".into(), it.data.to_owned());
    hash.insert("opts".into(), opts_json);
    hash.insert("timestamp".into(), it.timestamp.to_string());
    hash.insert("delay".into(), it.delay.to_string());
    hash.insert("priority".into(), number_text(priority));
    hash.insert("rjk".into(), it.scheduler_id.to_owned());
    if let Some(dedup) = dedup {
        hash.insert("deid".into(), dedup);
    }
    q.emit(
        clock,
        "added",
        &[
            ("jobId", it.job_id.to_owned()),
            ("name", it.name.to_owned()),
        ],
    );
    #[allow(clippy::cast_precision_loss)]
    let delay = it.delay as f64;
    place_new_job(q, it.job_id, it.timestamp, delay, priority, lifo, clock);
}

/// What a fetch does for a fetched iteration of an `every` scheduler, as the Redis backend's
/// fetch script does: creates the next iteration (or finds the series ended) in the same call.
/// `None` for anything else (cron runs, ids that may be BullMQ 5 keys, options the plan
/// refuses): the Worker asks with `schedule_next_iteration`.
pub(crate) fn next_at_fetch(
    q: &mut QueueState,
    record: &bullmq_protocol::JobRecord,
    now: u64,
) -> Option<NextIteration> {
    let id = record
        .repeat_job_key
        .as_deref()
        .filter(|id| !id.is_empty() && !id.contains(':'))?;
    let every = record
        .opts
        .repeat
        .as_ref()
        .is_some_and(|r| r.get("pattern").is_none_or(serde_json::Value::is_null));
    if !every {
        return None;
    }
    match bullmq_protocol::scheduler::plan_next_iteration(&record.id, id, &record.opts, now) {
        Ok(Some(plan)) => next_iteration(q, &plan, now).ok(),
        Ok(None) => Some(NextIteration::Ended),
        Err(_) => None,
    }
}

/// Node's `updateJobScheduler`: the iteration after `plan.producer_id`, when that job is the
/// scheduler's current one.
pub(crate) fn next_iteration(
    q: &mut QueueState,
    plan: &NextIterationPlan,
    clock: u64,
) -> BackendResult<NextIteration> {
    let id = plan.scheduler_id.as_str();
    let Some(prev) = q.schedulers.next.score(id) else {
        return Ok(NextIteration::NotCurrent);
    };
    let hash = q.schedulers.hashes.get(id).cloned().unwrap_or_default();
    if plan.legacy_key_shape && !hash.contains_key(field::ITERATION_COUNT) {
        return Ok(NextIteration::Legacy);
    }
    let now = plan.now_ms;
    let every = hash
        .get(field::EVERY)
        .and_then(|v| lua_tonumber(v))
        .or_else(|| repeat_number(&plan.iteration_opts, "every"));
    let next = match every {
        Some(every) => {
            let offset = match hash.get(field::OFFSET) {
                Some(stored) => lua_tonumber(stored).unwrap_or(0),
                None => repeat_number(&plan.iteration_opts, "offset").unwrap_or(0),
            };
            let start = hash.get(field::START_DATE).and_then(|v| lua_tonumber(v));
            every_next_millis(Some(prev), every, now, Some(offset), start).0
        }
        None => plan.next_millis.ok_or_else(|| {
            BackendError::backend(std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                format!("job scheduler {id}: neither an interval nor a next run"),
            ))
        })?,
    };
    if plan.producer_id != iteration_job_id(id, prev) {
        return Ok(NextIteration::NotCurrent);
    }
    q.max_events(false);
    let job_id = iteration_job_id(id, next);
    if q.jobs.contains_key(&job_id) {
        q.emit(clock, "duplicated", &[("jobId", job_id.clone())]);
        return Ok(NextIteration::Duplicated(job_id));
    }
    let name = hash
        .get(field::NAME)
        .cloned()
        .ok_or_else(|| missing_name(id))?;
    q.schedulers.next.add(next, id);
    let stored = q.schedulers.hashes.entry(id.to_owned()).or_default();
    let ic = stored
        .get(field::ITERATION_COUNT)
        .and_then(|v| lua_tonumber(v))
        .unwrap_or(0)
        + 1;
    stored.insert(field::ITERATION_COUNT.to_owned(), ic.to_string());
    q.id_counter += 1;
    let data = hash
        .get(field::DATA)
        .cloned()
        .unwrap_or_else(|| String::from("{}"));
    add_iteration(
        q,
        Iteration {
            job_id: &job_id,
            scheduler_id: id,
            name: &name,
            data: &data,
            opts: plan.iteration_opts.clone(),
            timestamp: now,
            delay: next.saturating_sub(now),
        },
        clock,
    );
    Ok(NextIteration::Created(job_id))
}

/// Node's `removeJobScheduler`: the pending iteration when delayed (`removed`, prev
/// `delayed`), then the scheduler; whether there was one.
pub(crate) fn remove(q: &mut QueueState, id: &str, clock: u64) -> bool {
    if let Some(millis) = q.schedulers.next.score(id) {
        let job_id = iteration_job_id(id, millis);
        if q.delayed.remove(&job_id) {
            q.delete_job_keys(&job_id);
            let cap = events_cap(q);
            q.emit_capped(
                clock,
                "removed",
                &[("jobId", job_id), ("prev", "delayed".into())],
                cap,
            );
        }
    }
    if q.schedulers.next.remove(id) {
        q.schedulers.hashes.remove(id);
        return true;
    }
    false
}

/// The scheduler `id` read back.
pub(crate) fn get(q: &QueueState, id: &str) -> BackendResult<Option<JobSchedulerRecord>> {
    let Some(next) = q.schedulers.next.score(id) else {
        return Ok(None);
    };
    let empty = HashMap::new();
    let hash = q.schedulers.hashes.get(id).unwrap_or(&empty);
    JobSchedulerRecord::decode(id, hash, Some(next)).map_err(BackendError::backend)
}

/// Schedulers by next run, ranks `start..=end`; a scheduler without a hash is removed and
/// skipped, as Node's getter does.
pub(crate) fn range(
    q: &mut QueueState,
    start: i64,
    end: i64,
    asc: bool,
    clock: u64,
) -> BackendResult<Vec<JobSchedulerRecord>> {
    let ids = q.schedulers.next.range(start, end, asc);
    let mut out = Vec::with_capacity(ids.len());
    for id in ids {
        match get(q, &id)? {
            Some(record) => out.push(record),
            None => {
                remove(q, &id, clock);
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::sync::Arc;
    use std::time::Duration;

    use bullmq_protocol::scheduler::{iteration_job_id, plan_upsert, Repeat, SchedulerTemplate};
    use bullmq_protocol::state::JobState;
    use bullmq_protocol::QueueId;

    use super::lua_tonumber;
    use crate::memory::MemoryBackend;
    use crate::{
        Backend, FetchRequest, ObliterateStep, QueueStore, UpsertOutcome, WorkerStore,
        WorkerStoreOptions,
    };

    const T0: u64 = 1_700_000_000_000;
    const EVERY: u64 = 60_000;

    async fn stores() -> (Arc<AtomicU64>, Arc<dyn QueueStore>, Arc<dyn WorkerStore>) {
        let clock = Arc::new(AtomicU64::new(T0));
        let read = clock.clone();
        let backend = MemoryBackend::with_clock(Arc::new(move || read.load(Ordering::SeqCst)));
        let keys = QueueId::new("bull", "q");
        let queue = backend.queue_store(&keys).await.unwrap();
        let worker = backend
            .worker_store(&keys, &WorkerStoreOptions::default())
            .await
            .unwrap();
        (clock, queue, worker)
    }

    async fn upsert(queue: &Arc<dyn QueueStore>, id: &str, now: u64) -> UpsertOutcome {
        let repeat = Repeat::every(Duration::from_millis(EVERY));
        let plan = plan_upsert(id, &repeat, &SchedulerTemplate::new("tick"), now)
            .unwrap()
            .unwrap();
        queue.upsert_job_scheduler(&plan).await.unwrap()
    }

    #[tokio::test]
    async fn a_paused_queue_keeps_its_waiting_iteration_on_upsert() {
        // Node looks for it in the legacy `paused` list, which holds nothing since BullMQ 5.
        let (_, queue, _) = stores().await;
        upsert(&queue, "s", T0).await;
        queue.pause().await.unwrap();
        assert_eq!(
            upsert(&queue, "s", T0 + 5).await,
            UpsertOutcome::Added {
                job_id: iteration_job_id("s", T0 + EVERY),
                delay: EVERY - 5
            }
        );
        let first = iteration_job_id("s", T0);
        assert_eq!(queue.get_state(&first).await.unwrap(), JobState::Waiting);
    }

    #[tokio::test]
    async fn a_stalled_iteration_is_not_failed_for_stalling() {
        let (clock, queue, worker) = stores().await;
        upsert(&queue, "s", T0).await;
        let request = FetchRequest::new(1, "w", Duration::from_millis(1_000));
        let fetched = worker.fetch_batch(&request).await.unwrap();
        let id = fetched.jobs[0].id.clone();
        let interval = Duration::from_millis(10);
        worker.check_stalled(0, interval).await.unwrap();
        clock.fetch_add(5_000, Ordering::SeqCst);
        let report = worker.check_stalled(0, interval).await.unwrap();
        assert_eq!(report.recovered, std::slice::from_ref(&id));
        let job = queue.get_job(&id).await.unwrap().unwrap();
        assert_eq!(job.stalled_counter, 1);
        assert_eq!(job.deferred_failure, None, "no deferred failure");
    }

    #[tokio::test]
    async fn obliterate_deletes_the_schedulers() {
        let (_, queue, _) = stores().await;
        upsert(&queue, "a", T0).await;
        upsert(&queue, "b", T0).await;
        queue.pause().await.unwrap();
        // The two schedulers count against the batch (before the waiting iterations).
        assert_eq!(
            queue.obliterate_batch(3, false).await.unwrap(),
            ObliterateStep::More
        );
        assert_eq!(
            queue.obliterate_batch(3, false).await.unwrap(),
            ObliterateStep::Done
        );
        assert_eq!(queue.get_job_schedulers_count().await.unwrap(), 0);
        assert_eq!(queue.get_job_scheduler("a").await.unwrap(), None);
    }

    #[test]
    fn hash_numbers_read_as_lua_reads_them() {
        assert_eq!(lua_tonumber("1000"), Some(1000));
        assert_eq!(lua_tonumber(" 1.5e3 "), Some(1500));
        assert_eq!(lua_tonumber("soon"), None);
        assert_eq!(lua_tonumber("-1"), None);
    }
}
