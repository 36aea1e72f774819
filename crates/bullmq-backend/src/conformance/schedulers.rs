//! Job schedulers: upsert and its pending iteration, replacement, the next iteration a worker
//! creates, removal, listing, slot collisions, and the admin calls that keep a pending
//! iteration — as Node 6.7.0's scripts do.
//!
//! Plans are made with [`bullmq_protocol::scheduler`] at a time the case picks; backends
//! compute slots from the plan's `now_ms`, so the expected ids are exact.

use std::sync::Arc;
use std::time::Duration;

use bullmq_protocol::scheduler::{
    every_next_millis, iteration_job_id, plan_next_iteration, plan_upsert, NextIterationPlan,
    Repeat, SchedulerTemplate, UpsertPlan,
};
use bullmq_protocol::state::JobState;
use bullmq_protocol::JobOptions;
use serde_json::json;

use super::{fields, profile, Ctx};
use crate::{Backend, NewJob, NextIteration, RemoveOutcome, UpsertOutcome};

/// The interval of most cases: long enough that no iteration becomes due during a case.
const EVERY: u64 = 60_000;

fn every(ms: u64) -> Repeat {
    Repeat::every(Duration::from_millis(ms))
}

fn plan(id: &str, repeat: &Repeat, template: &SchedulerTemplate, now: u64) -> UpsertPlan {
    plan_upsert(id, repeat, template, now)
        .expect("valid upsert")
        .expect("an iteration is planned")
}

async fn upsert(c: &Ctx, plan: &UpsertPlan) -> UpsertOutcome {
    c.queue.upsert_job_scheduler(plan).await.expect("upsert")
}

/// The plan a worker makes when it starts the stored job `job_id` at `now`.
async fn next_plan(c: &Ctx, job_id: &str, scheduler: &str, now: u64) -> NextIterationPlan {
    let job = c
        .queue
        .get_job(job_id)
        .await
        .unwrap()
        .unwrap_or_else(|| panic!("job {job_id} exists"));
    plan_next_iteration(job_id, scheduler, &job.opts, now)
        .expect("readable repeat options")
        .expect("a next iteration is planned")
}

/// An upsert with no offset and no start date runs now: the scheduler is stored (name,
/// interval, the phase of now as its offset, the template, `ic` 1, next = now) and its first
/// iteration `repeat:{id}:{now}` waits, carrying `rjk`, the template and the iteration's
/// repeat options; `added` then `waiting` are emitted and the id counter moves.
pub async fn scheduler_upsert_creates_scheduler_and_iteration(
    backend: Arc<dyn Backend>,
    queue: &str,
) {
    let c = Ctx::new(backend, queue).await;
    let now = crate::now_ms();
    let template = SchedulerTemplate::new("tick")
        .data(json!({"a": 1}))
        .opts(JobOptions::new().attempts(3));
    let job_id = iteration_job_id("sched", now);
    assert_eq!(
        upsert(&c, &plan("sched", &every(EVERY), &template, now)).await,
        UpsertOutcome::Added {
            job_id: job_id.clone(),
            delay: 0
        }
    );
    assert_eq!(job_id, format!("repeat:sched:{now}"));
    assert_eq!(c.state(&job_id).await, JobState::Waiting);

    let job = c.queue.get_job(&job_id).await.unwrap().expect("iteration");
    assert_eq!(job.name, "tick");
    assert_eq!(job.data, json!({"a": 1}));
    assert_eq!(job.timestamp, now);
    assert_eq!((job.delay, job.priority), (0, 0));
    assert_eq!(job.repeat_job_key.as_deref(), Some("sched"));
    assert_eq!(job.opts.attempts, Some(3));
    assert_eq!(job.opts.job_id.as_deref(), Some(job_id.as_str()));
    assert_eq!(job.opts.repeat_job_key.as_deref(), Some("sched"));
    let repeat = job.opts.repeat.clone().expect("opts.repeat");
    assert_eq!(repeat["every"], EVERY);
    assert_eq!(repeat["count"], 1);

    let record = c
        .queue
        .get_job_scheduler("sched")
        .await
        .unwrap()
        .expect("scheduler");
    assert_eq!(record.key, "sched");
    assert_eq!(record.name, "tick");
    assert_eq!(record.next, Some(now));
    assert_eq!(record.iteration_count, Some(1));
    assert_eq!(record.every, Some(EVERY));
    assert_eq!(
        record.offset,
        Some(now % EVERY),
        "the phase of the first run"
    );
    assert_eq!(record.pattern, None);
    let stored = record.template.expect("template stored");
    assert_eq!(stored.data, Some(json!({"a": 1})));
    assert_eq!(stored.opts.and_then(|o| o.attempts), Some(3));
    assert_eq!(c.queue.get_job_schedulers_count().await.unwrap(), 1);
    assert_eq!(c.queue.get_job_scheduler("nope").await.unwrap(), None);

    let (added, waiting) = if profile().scheduler_iterations_emit_events {
        (
            vec![fields(&[
                ("event", "added"),
                ("jobId", &job_id),
                ("name", "tick"),
            ])],
            vec![fields(&[("event", "waiting"), ("jobId", &job_id)])],
        )
    } else {
        (Vec::new(), Vec::new())
    };
    assert_eq!(c.events_named("added").await, added);
    assert_eq!(c.events_named("waiting").await, waiting);
    // The upsert took a number from the id counter (where custom ids take one).
    let next = if profile().custom_ids_take_a_number {
        "2"
    } else {
        "1"
    };
    assert_eq!(c.add("plain", "{}").await, next);
    c.close().await;
}

/// With an offset the first run waits for the next slot `k * every + offset`; with a start
/// date in the future it waits for the start date. Both iterations are delayed and announced
/// with `delayed` carrying the run time.
pub async fn scheduler_offset_and_start_date_delay_the_first_run(
    backend: Arc<dyn Backend>,
    queue: &str,
) {
    let c = Ctx::new(backend, queue).await;
    let now = crate::now_ms();
    let template = SchedulerTemplate::new("tick");

    let shifted = every(EVERY).offset(Duration::from_millis(100));
    let (slot, _) = every_next_millis(None, EVERY, now, Some(100), None);
    let slot_id = iteration_job_id("shifted", slot);
    assert_eq!(
        upsert(&c, &plan("shifted", &shifted, &template, now)).await,
        UpsertOutcome::Added {
            job_id: slot_id.clone(),
            delay: slot - now
        }
    );
    assert_eq!(slot % EVERY, 100, "aligned on the offset grid");
    assert_eq!(c.state(&slot_id).await, JobState::Delayed);
    let job = c.queue.get_job(&slot_id).await.unwrap().expect("iteration");
    assert_eq!((job.timestamp, job.delay), (now, slot - now));
    let record = c.queue.get_job_scheduler("shifted").await.unwrap().unwrap();
    assert_eq!((record.next, record.offset), (Some(slot), Some(100)));
    assert_eq!(record.template, None, "no data and no options: no template");

    let mut later = every(EVERY);
    let start = now + 120_000;
    later.start_date = Some(start);
    let start_id = iteration_job_id("later", start);
    assert_eq!(
        upsert(&c, &plan("later", &later, &template, now)).await,
        UpsertOutcome::Added {
            job_id: start_id.clone(),
            delay: 120_000
        }
    );
    assert_eq!(c.state(&start_id).await, JobState::Delayed);
    let record = c.queue.get_job_scheduler("later").await.unwrap().unwrap();
    assert_eq!(record.next, Some(start));
    assert_eq!(record.start_date, Some(start));
    assert_eq!(record.offset, Some(start % EVERY));

    let delayed = if profile().scheduler_iterations_emit_events {
        vec![
            fields(&[
                ("event", "delayed"),
                ("jobId", &slot_id),
                ("delay", &slot.to_string()),
            ]),
            fields(&[
                ("event", "delayed"),
                ("jobId", &start_id),
                ("delay", &start.to_string()),
            ]),
        ]
    } else {
        Vec::new()
    };
    assert_eq!(c.events_named("delayed").await, delayed);
    assert!(c.events_named("waiting").await.is_empty());
    assert_eq!(c.count(JobState::Delayed).await, 2);
    c.close().await;
}

/// Upserting again with the same interval replaces the pending iteration that has not
/// started (waiting or delayed) in the same slot: same id, new template, no `removed`
/// event, `ic` unchanged, the stored offset kept.
pub async fn scheduler_upsert_replaces_pending_iteration(backend: Arc<dyn Backend>, queue: &str) {
    let c = Ctx::new(backend, queue).await;
    let now = crate::now_ms();
    let first = SchedulerTemplate::new("v1").data(json!({"v": 1}));
    let second = SchedulerTemplate::new("v2").data(json!({"v": 2}));

    // Waiting: the replacement runs now too, in the first one's slot.
    let job_id = iteration_job_id("w", now);
    upsert(&c, &plan("w", &every(EVERY), &first, now)).await;
    assert_eq!(
        upsert(&c, &plan("w", &every(EVERY), &second, now + 5)).await,
        UpsertOutcome::Added {
            job_id: job_id.clone(),
            delay: 0
        }
    );
    assert_eq!(c.count(JobState::Waiting).await, 1);
    let job = c.queue.get_job(&job_id).await.unwrap().expect("replaced");
    assert_eq!((job.name.as_str(), job.timestamp), ("v2", now + 5));
    assert_eq!(job.data, json!({"v": 2}));
    let record = c.queue.get_job_scheduler("w").await.unwrap().unwrap();
    assert_eq!(record.next, Some(now));
    assert_eq!(record.iteration_count, Some(1));
    assert_eq!(
        record.offset,
        Some(now % EVERY),
        "the stored offset is kept"
    );
    assert_eq!(record.name, "v2");

    // Delayed: the replacement keeps the slot (half an interval away, so it stays delayed).
    let offset = ((now + EVERY / 2) % EVERY).max(1);
    let shifted = every(EVERY).offset(Duration::from_millis(offset));
    let (slot, _) = every_next_millis(None, EVERY, now, Some(offset), None);
    let slot_id = iteration_job_id("d", slot);
    upsert(&c, &plan("d", &shifted, &first, now)).await;
    assert_eq!(
        upsert(&c, &plan("d", &shifted, &second, now + 5)).await,
        UpsertOutcome::Added {
            job_id: slot_id.clone(),
            delay: slot.saturating_sub(now + 5)
        }
    );
    assert_eq!(c.count(JobState::Delayed).await, 1);
    assert_eq!(c.state(&slot_id).await, JobState::Delayed);
    let job = c.queue.get_job(&slot_id).await.unwrap().unwrap();
    assert_eq!(job.name, "v2");
    let record = c.queue.get_job_scheduler("d").await.unwrap().unwrap();
    assert_eq!((record.next, record.offset), (Some(slot), Some(offset)));
    assert_eq!(record.iteration_count, Some(1));

    assert!(
        c.events_named("removed").await.is_empty(),
        "a replaced iteration is not announced as removed"
    );
    let added = if profile().scheduler_iterations_emit_events {
        4
    } else {
        0
    };
    assert_eq!(c.events_named("added").await.len(), added);
    assert_eq!(c.queue.get_job_schedulers_count().await.unwrap(), 2);
    c.close().await;
}

/// A different interval starts a new grid: the pending iteration is removed and the new one
/// runs as a first run would (now), while the offset stored for the old grid is kept when
/// the new schedule gives none (as Node's script does).
pub async fn scheduler_new_interval_resets_the_slot(backend: Arc<dyn Backend>, queue: &str) {
    let c = Ctx::new(backend, queue).await;
    let now = crate::now_ms();
    let template = SchedulerTemplate::new("tick");
    let mut first = every(EVERY);
    let start = now + 120_000;
    first.start_date = Some(start);
    let old_id = iteration_job_id("s", start);
    upsert(&c, &plan("s", &first, &template, now)).await;
    assert_eq!(c.state(&old_id).await, JobState::Delayed);

    let faster = EVERY / 2;
    let new_id = iteration_job_id("s", now + 5);
    assert_eq!(
        upsert(&c, &plan("s", &every(faster), &template, now + 5)).await,
        UpsertOutcome::Added {
            job_id: new_id.clone(),
            delay: 0
        }
    );
    assert_eq!(
        c.queue.get_job(&old_id).await.unwrap(),
        None,
        "old run gone"
    );
    assert_eq!(c.count(JobState::Delayed).await, 0);
    assert_eq!(c.state(&new_id).await, JobState::Waiting);
    let record = c.queue.get_job_scheduler("s").await.unwrap().unwrap();
    assert_eq!(record.every, Some(faster));
    assert_eq!(record.next, Some(now + 5));
    assert_eq!(record.start_date, None);
    assert_eq!(record.offset, Some(start % EVERY), "the old grid's offset");
    assert_eq!(record.iteration_count, Some(1));
    c.close().await;
}

/// Fetching the current iteration of an `every` scheduler creates the next one in the same
/// call (reported in `FetchedJob::next_iteration`), `every` after it, delayed, from the
/// scheduler's template (`ic` 2, next moved on); the same start again (a retried or stalled
/// iteration) is no longer current and creates nothing; a next slot that is taken is reported
/// `Duplicated` with a `duplicated` event; an unknown scheduler is `NotCurrent`.
pub async fn scheduler_next_iteration_from_the_current_one_only(
    backend: Arc<dyn Backend>,
    queue: &str,
) {
    let c = Ctx::new(backend, queue).await;
    let now = crate::now_ms();
    let template = SchedulerTemplate::new("tick")
        .data(json!({"a": 1}))
        .opts(JobOptions::new().attempts(2));
    let first = iteration_job_id("s", now);
    upsert(&c, &plan("s", &every(EVERY), &template, now)).await;
    let fetched = c.fetch_one().await;
    assert_eq!(fetched.id, first);
    let second = iteration_job_id("s", now + EVERY);
    assert_eq!(
        fetched.next_iteration,
        Some(NextIteration::Created(second.clone())),
        "the fetch creates an every scheduler's next iteration"
    );

    assert_eq!(c.state(&second).await, JobState::Delayed);
    let job = c.queue.get_job(&second).await.unwrap().expect("next run");
    assert_eq!(job.name, "tick");
    assert_eq!(job.data, json!({"a": 1}));
    // Created at the fetch, due `every` after the first run.
    assert!(job.timestamp >= now, "{job:?}");
    assert_eq!(job.timestamp + job.delay, now + EVERY);
    assert_eq!(job.repeat_job_key.as_deref(), Some("s"));
    assert_eq!(job.opts.attempts, Some(2));
    assert_eq!(job.opts.job_id.as_deref(), Some(second.as_str()));
    assert_eq!(
        job.opts.repeat.as_ref().map(|r| r["count"].clone()),
        Some(json!(2))
    );
    let record = c.queue.get_job_scheduler("s").await.unwrap().unwrap();
    assert_eq!(record.next, Some(now + EVERY));
    assert_eq!(record.iteration_count, Some(2));
    let delayed = if profile().scheduler_iterations_emit_events {
        vec![fields(&[
            ("event", "delayed"),
            ("jobId", &second),
            ("delay", &(now + EVERY).to_string()),
        ])]
    } else {
        Vec::new()
    };
    assert_eq!(c.events_named("delayed").await, delayed);

    // The first iteration is no longer the current one.
    let started = next_plan(&c, &first, "s", now + 10).await;
    assert_eq!(
        c.worker.schedule_next_iteration(&started).await.unwrap(),
        NextIteration::NotCurrent
    );
    assert_eq!(c.count(JobState::Delayed).await, 1);
    let record = c.queue.get_job_scheduler("s").await.unwrap().unwrap();
    assert_eq!(record.iteration_count, Some(2));

    // The slot after the second iteration is taken by a job of that id.
    let third = iteration_job_id("s", now + 2 * EVERY);
    c.add_job(NewJob::new("squatter", "{}", "{}", now).with_custom_id(third.clone()))
        .await;
    let from_second = next_plan(&c, &second, "s", now + 20).await;
    assert_eq!(
        c.queue.create_next_iteration(&from_second).await.unwrap(),
        NextIteration::Duplicated(third.clone())
    );
    assert_eq!(
        c.events_named("duplicated").await,
        [fields(&[("event", "duplicated"), ("jobId", &third)])]
    );
    let record = c.queue.get_job_scheduler("s").await.unwrap().unwrap();
    assert_eq!(
        (record.next, record.iteration_count),
        (Some(now + EVERY), Some(2)),
        "a duplicate moves nothing"
    );

    let mut ghost = started.clone();
    ghost.scheduler_id = "ghost".into();
    assert_eq!(
        c.queue.create_next_iteration(&ghost).await.unwrap(),
        NextIteration::NotCurrent
    );
    c.close().await;
}

/// An upsert while the current iteration runs (active) cannot replace it: the scheduler
/// moves on to the slot after it and a new pending iteration is created there.
pub async fn scheduler_upsert_while_iteration_runs(backend: Arc<dyn Backend>, queue: &str) {
    let c = Ctx::new(backend, queue).await;
    let now = crate::now_ms();
    let template = SchedulerTemplate::new("tick");
    let first = iteration_job_id("s", now);
    // Limit 1: the fetch creates no next iteration, so only the upsert below does.
    let repeat = every(EVERY).limit(1);
    upsert(&c, &plan("s", &repeat, &template, now)).await;
    let fetched = c.fetch_one().await;
    assert_eq!(fetched.id, first);
    assert_eq!(
        fetched.next_iteration,
        Some(NextIteration::Ended),
        "limit 1"
    );

    let next = iteration_job_id("s", now + EVERY);
    assert_eq!(
        upsert(&c, &plan("s", &every(EVERY), &template, now + 10)).await,
        UpsertOutcome::Added {
            job_id: next.clone(),
            delay: EVERY - 10
        }
    );
    assert_eq!(
        c.state(&first).await,
        JobState::Active,
        "the running one stays"
    );
    assert_eq!(c.state(&next).await, JobState::Delayed);
    let record = c.queue.get_job_scheduler("s").await.unwrap().unwrap();
    assert_eq!(record.next, Some(now + EVERY));
    assert_eq!(record.iteration_count, Some(1), "an upsert does not count");
    assert_eq!(record.offset, Some(now % EVERY));
    c.close().await;
}

/// Removing a scheduler deletes its hash, its entry and its pending iteration when that is
/// delayed (`removed`, prev `delayed`); a waiting one stays, as an ordinary job. The pending
/// iteration itself cannot be removed as a job. A second removal finds nothing.
pub async fn scheduler_remove_deletes_scheduler_and_delayed_iteration(
    backend: Arc<dyn Backend>,
    queue: &str,
) {
    let c = Ctx::new(backend, queue).await;
    let now = crate::now_ms();
    let template = SchedulerTemplate::new("tick");
    let mut later = every(EVERY);
    later.start_date = Some(now + 120_000);
    let delayed = iteration_job_id("d", now + 120_000);
    upsert(&c, &plan("d", &later, &template, now)).await;
    let waiting = iteration_job_id("w", now);
    upsert(&c, &plan("w", &every(EVERY), &template, now)).await;

    for job in [&delayed, &waiting] {
        assert_eq!(
            c.queue.remove_job(job, false).await.unwrap(),
            RemoveOutcome::SchedulerJob,
            "{job} is a scheduler's pending run"
        );
    }

    assert!(c.queue.remove_job_scheduler("d").await.unwrap());
    assert_eq!(c.queue.get_job_scheduler("d").await.unwrap(), None);
    assert_eq!(c.queue.get_job(&delayed).await.unwrap(), None);
    assert_eq!(c.count(JobState::Delayed).await, 0);
    assert_eq!(
        c.events_named("removed").await,
        [fields(&[
            ("event", "removed"),
            ("jobId", &delayed),
            ("prev", "delayed")
        ])]
    );
    assert!(!c.queue.remove_job_scheduler("d").await.unwrap());

    assert!(c.queue.remove_job_scheduler("w").await.unwrap());
    assert_eq!(
        c.state(&waiting).await,
        JobState::Waiting,
        "waiting run stays"
    );
    let outcome = if profile().former_iteration_removable {
        RemoveOutcome::Removed
    } else {
        RemoveOutcome::SchedulerJob
    };
    assert_eq!(
        c.queue.remove_job(&waiting, false).await.unwrap(),
        outcome,
        "no scheduler owns it any more (or, by profile, its scheduler made it)"
    );
    assert_eq!(c.queue.get_job_schedulers_count().await.unwrap(), 0);
    assert!(c
        .queue
        .get_job_schedulers(0, -1, true)
        .await
        .unwrap()
        .is_empty());
    c.close().await;
}

/// Schedulers are listed by next run, soonest first when ascending, by rank ranges as Redis
/// reads them (inclusive, negative from the end), and counted.
pub async fn scheduler_listing_and_counts(backend: Arc<dyn Backend>, queue: &str) {
    let c = Ctx::new(backend, queue).await;
    let now = crate::now_ms();
    let template = SchedulerTemplate::new("tick");
    for (id, start) in [("a", 30_000), ("b", 10_000), ("c", 20_000)] {
        let mut repeat = every(EVERY);
        repeat.start_date = Some(now + start);
        upsert(&c, &plan(id, &repeat, &template, now)).await;
    }
    assert_eq!(c.queue.get_job_schedulers_count().await.unwrap(), 3);
    let keys = |records: Vec<bullmq_protocol::scheduler::JobSchedulerRecord>| {
        records.into_iter().map(|r| r.key).collect::<Vec<_>>()
    };
    let range = |start, end, asc| {
        let queue = c.queue.clone();
        async move { keys(queue.get_job_schedulers(start, end, asc).await.unwrap()) }
    };
    assert_eq!(range(0, -1, true).await, ["b", "c", "a"]);
    assert_eq!(range(0, -1, false).await, ["a", "c", "b"]);
    assert_eq!(range(0, 0, true).await, ["b"]);
    assert_eq!(range(1, -1, false).await, ["c", "b"]);
    assert_eq!(range(-1, -1, true).await, ["a"]);
    assert_eq!(range(1, 100, true).await, ["c", "a"]);
    assert!(range(5, 10, true).await.is_empty());
    let all = c.queue.get_job_schedulers(0, -1, true).await.unwrap();
    let nexts: Vec<Option<u64>> = all.iter().map(|r| r.next).collect();
    assert_eq!(
        nexts,
        [Some(now + 10_000), Some(now + 20_000), Some(now + 30_000)]
    );
    c.close().await;
}

/// Slots taken by other jobs: an `every` upsert walks up to 32 slots past the first taken
/// one (Node's PostgreSQL function: one, see the profile) and reports `SlotsBusy` when all are
/// taken (no scheduler stored); with the last one free it lands there.
pub async fn scheduler_every_walks_past_taken_slots(backend: Arc<dyn Backend>, queue: &str) {
    let c = Ctx::new(backend, queue).await;
    let now = crate::now_ms();
    let template = SchedulerTemplate::new("tick");
    let slot = |k: u64| iteration_job_id("s", now + k * EVERY);
    let last = u64::from(profile().every_upsert_slots_tried);
    for k in 0..=last {
        c.add_job(NewJob::new("old", "{}", "{}", now).with_custom_id(slot(k)))
            .await;
    }
    let upsert_plan = plan("s", &every(EVERY), &template, now);
    assert_eq!(upsert(&c, &upsert_plan).await, UpsertOutcome::SlotsBusy);
    assert_eq!(c.queue.get_job_scheduler("s").await.unwrap(), None);
    assert_eq!(c.queue.get_job_schedulers_count().await.unwrap(), 0);

    assert_eq!(
        c.queue.remove_job(&slot(last), false).await.unwrap(),
        RemoveOutcome::Removed
    );
    assert_eq!(
        upsert(&c, &upsert_plan).await,
        UpsertOutcome::Added {
            job_id: slot(last),
            delay: last * EVERY
        }
    );
    let record = c.queue.get_job_scheduler("s").await.unwrap().unwrap();
    assert_eq!(record.next, Some(now + last * EVERY));
    assert_eq!(c.state(&slot(last)).await, JobState::Delayed);
    c.close().await;
}

/// A cron upsert whose run is taken by another job is refused (`IdCollision`, nothing
/// stored); otherwise it stores the pattern with offset 0 (Node stores `offset: 0` for cron
/// schedulers) and creates the run at the planned time.
pub async fn scheduler_cron_run_collision(backend: Arc<dyn Backend>, queue: &str) {
    let c = Ctx::new(backend, queue).await;
    let now = crate::now_ms();
    let template = SchedulerTemplate::new("cron");
    // A cron plan, made from an `every` one: the backend takes a cron run as given.
    let cron_plan = |next: u64| {
        let mut plan = plan("c", &every(EVERY), &template, now);
        plan.fields.every = None;
        plan.fields.pattern = Some("0 * * * * *".into());
        plan.next_millis = Some(next);
        let mut repeat = serde_json::Map::new();
        repeat.insert("pattern".into(), json!("0 * * * * *"));
        repeat.insert("count".into(), json!(1));
        plan.iteration_opts.insert("repeat".into(), repeat.into());
        plan.iteration_opts.insert("prevMillis".into(), next.into());
        plan
    };
    let taken = now + 60_000;
    c.add_job(NewJob::new("old", "{}", "{}", now).with_custom_id(iteration_job_id("c", taken)))
        .await;
    assert_eq!(
        upsert(&c, &cron_plan(taken)).await,
        UpsertOutcome::IdCollision
    );
    assert_eq!(c.queue.get_job_schedulers_count().await.unwrap(), 0);

    let free = now + 120_000;
    let job_id = iteration_job_id("c", free);
    assert_eq!(
        upsert(&c, &cron_plan(free)).await,
        UpsertOutcome::Added {
            job_id: job_id.clone(),
            delay: 120_000
        }
    );
    let record = c.queue.get_job_scheduler("c").await.unwrap().unwrap();
    assert_eq!(record.pattern.as_deref(), Some("0 * * * * *"));
    assert_eq!((record.every, record.offset), (None, Some(0)));
    assert_eq!(record.next, Some(free));
    assert_eq!(c.state(&job_id).await, JobState::Delayed);

    if profile().cron_upsert_takes_over_a_taken_run {
        // The pending iteration is removed, then the taken run is reset into the iteration.
        let taken_id = iteration_job_id("c", taken);
        assert_eq!(
            upsert(&c, &cron_plan(taken)).await,
            UpsertOutcome::Added {
                job_id: taken_id.clone(),
                delay: 60_000
            }
        );
        assert_eq!(c.state(&job_id).await, JobState::Unknown);
        assert_eq!(c.state(&taken_id).await, JobState::Delayed);
        let job = c
            .queue
            .get_job(&taken_id)
            .await
            .unwrap()
            .expect("taken over");
        assert_eq!(
            (job.name.as_str(), job.repeat_job_key.as_deref()),
            ("cron", Some("c"))
        );
        let record = c.queue.get_job_scheduler("c").await.unwrap().unwrap();
        assert_eq!(record.next, Some(taken));
    } else {
        // Refused again on the taken run: the pending iteration and the scheduler stay as
        // they were, so the series goes on (Node removes the pending iteration before it
        // refuses).
        assert_eq!(
            upsert(&c, &cron_plan(taken)).await,
            UpsertOutcome::IdCollision
        );
        assert_eq!(c.state(&job_id).await, JobState::Delayed);
        let record = c.queue.get_job_scheduler("c").await.unwrap().unwrap();
        assert_eq!(record.next, Some(free));
    }
    c.close().await;
}

/// A cron scheduler's iteration is not advanced by the fetch (its runs need the tz database,
/// which a backend's scripts may not have): the worker's `schedule_next_iteration` creates the
/// run its plan computed, once.
pub async fn scheduler_cron_next_iteration_by_the_worker(backend: Arc<dyn Backend>, queue: &str) {
    let c = Ctx::new(backend, queue).await;
    let now = crate::now_ms();
    let pattern = "0 * * * * *";
    let mut cron = plan("c", &every(EVERY), &SchedulerTemplate::new("cron"), now);
    cron.fields.every = None;
    cron.fields.pattern = Some(pattern.into());
    cron.next_millis = Some(now);
    cron.iteration_opts
        .insert("repeat".into(), json!({"pattern": pattern, "count": 1}));
    cron.iteration_opts.insert("prevMillis".into(), now.into());
    upsert(&c, &cron).await;
    let first = iteration_job_id("c", now);
    let fetched = c.fetch_one().await;
    assert_eq!(
        (fetched.id.as_str(), &fetched.next_iteration),
        (first.as_str(), &None)
    );

    let started = next_plan(&c, &first, "c", now + 5).await;
    let run = started.next_millis.expect("a cron run");
    assert!(run > now && run % 60_000 == 0, "the next minute: {run}");
    let second = iteration_job_id("c", run);
    assert_eq!(
        c.worker.schedule_next_iteration(&started).await.unwrap(),
        NextIteration::Created(second.clone())
    );
    assert_eq!(c.state(&second).await, JobState::Delayed);
    let job = c.queue.get_job(&second).await.unwrap().expect("next run");
    assert_eq!(job.opts.prev_millis, Some(run));
    assert_eq!((job.timestamp, job.delay), (now + 5, run - now - 5));
    let record = c.queue.get_job_scheduler("c").await.unwrap().unwrap();
    assert_eq!((record.next, record.iteration_count), (Some(run), Some(2)));
    assert_eq!(
        c.worker.schedule_next_iteration(&started).await.unwrap(),
        NextIteration::NotCurrent
    );
    c.close().await;
}

/// Drain and clean leave a scheduler's pending iteration alone (remove the scheduler
/// instead); other jobs go as usual.
pub async fn scheduler_iteration_kept_by_drain_and_clean(backend: Arc<dyn Backend>, queue: &str) {
    let c = Ctx::new(backend, queue).await;
    let now = crate::now_ms();
    let template = SchedulerTemplate::new("tick");
    let waiting = iteration_job_id("w", now);
    upsert(&c, &plan("w", &every(EVERY), &template, now)).await;
    let mut later = every(EVERY);
    later.start_date = Some(now + 120_000);
    let delayed = iteration_job_id("d", now + 120_000);
    upsert(&c, &plan("d", &later, &template, now)).await;
    c.add("plain", "{}").await;
    c.add("late", r#"{"delay":120000}"#).await;

    assert_eq!(c.queue.drain(true).await.unwrap(), 2, "plain and late");
    assert_eq!(c.state(&waiting).await, JobState::Waiting);
    assert_eq!(c.state(&delayed).await, JobState::Delayed);

    let cutoff = crate::now_ms() + 1_000;
    let cleaned = c.queue.clean(JobState::Waiting, cutoff, 0).await.unwrap();
    assert!(cleaned.is_empty(), "kept: {cleaned:?}");
    let cleaned = c.queue.clean(JobState::Delayed, cutoff, 0).await.unwrap();
    assert!(cleaned.is_empty(), "kept: {cleaned:?}");
    assert_eq!(c.state(&waiting).await, JobState::Waiting);
    assert_eq!(c.state(&delayed).await, JobState::Delayed);
    c.close().await;
}
