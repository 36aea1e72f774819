//! Differential testing: the same pseudo-random operations on two backends, comparing after
//! every step what each call returned, the counts and ranges of every state, the event log and
//! the job records. Where the cases of this suite check chosen behaviours, this finds the
//! orders, counters and events two backends disagree on in sequences nobody thought of.
//!
//! Operations avoid the clock (delays are far in the future, locks outlive the run), so both
//! backends see the same logical history; times in records and `delay` event fields are
//! masked.

use std::sync::Arc;
use std::time::Duration;

use bullmq_protocol::state::JobState;
use bullmq_protocol::JobRecord;
use bullmq_protocol::QueueId;

use crate::{
    Backend, EventStream, FetchRequest, FetchedJob, Finish, FinishAction, NewJob, QueueStore,
    Retention, WorkerStore, WorkerStoreOptions,
};

/// A xorshift generator: the same seed gives the same operations on both sides.
struct Rng(u64);

impl Rng {
    fn new(seed: u64) -> Self {
        Self(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n
    }
}

/// One backend's stores of the queue, and the jobs its worker holds.
struct Side {
    id: QueueId,
    queue: Arc<dyn QueueStore>,
    worker: Arc<dyn WorkerStore>,
    events: Arc<dyn EventStream>,
    held: Vec<FetchedJob>,
}

impl Side {
    /// A link to parent `id` of this side's queue, registering the child, no flags.
    fn parent_link(&self, id: &str) -> crate::ParentLink {
        crate::ParentLink::new(
            crate::JobRef::new(self.id.clone(), id),
            crate::ParentFlags::default(),
        )
    }

    async fn open(backend: &Arc<dyn Backend>, queue: &str) -> Self {
        let id = QueueId::new("bull", queue);
        Self {
            id: id.clone(),
            queue: backend.queue_store(&id).await.expect("queue store"),
            worker: backend
                .worker_store(&id, &WorkerStoreOptions::default())
                .await
                .expect("worker store"),
            events: backend.event_stream(&id).await.expect("event stream"),
            held: Vec::new(),
        }
    }

    async fn close(&self) {
        self.worker.close().await;
        self.events.close().await;
        let _ = self.queue.close().await;
    }
}

/// The custom ids a run uses.
const CUSTOM_IDS: [&str; 3] = ["c1", "c2", "c3"];

/// What is compared after each step.
#[derive(Debug, PartialEq)]
struct Snapshot {
    counts: Vec<u64>,
    ranges: Vec<Vec<String>>,
    events: Vec<Vec<(String, String)>>,
    jobs: Vec<Option<JobRecord>>,
}

fn mask_times(mut record: JobRecord) -> JobRecord {
    record.processed_on = record.processed_on.map(|_| 0);
    record.finished_on = record.finished_on.map(|_| 0);
    // Node's `Job` always stores `attempts` (0 when not set); a backend that fills it in for
    // a raw add (PostgreSQL, storing Node's long form) holds the same options.
    if record.opts.attempts == Some(0) {
        record.opts.attempts = None;
    }
    record
}

async fn snapshot(side: &Side) -> Snapshot {
    let mut counts = side
        .queue
        .get_counts(&JobState::ALL_COUNTABLE)
        .await
        .expect("counts");
    // A paused queue's waiting jobs count as `paused` on PostgreSQL (Node's getCounts there)
    // and stay `waiting` on Redis (whose legacy paused list is empty): compare their sum.
    let paused = side
        .queue
        .get_counts(&[JobState::Paused])
        .await
        .expect("counts")[0];
    let waiting = JobState::ALL_COUNTABLE
        .iter()
        .position(|s| *s == JobState::Waiting)
        .expect("waiting is countable");
    counts[waiting] += paused;
    let mut ranges = Vec::new();
    for state in JobState::ALL_COUNTABLE {
        let mut ids = side
            .queue
            .get_ranges(&[state], 0, -1, true)
            .await
            .expect("ranges")
            .concat();
        if state == JobState::Active && !super::profile().active_listed_by_activation {
            ids.sort();
        }
        ranges.push(ids);
    }
    let mut events: Vec<Vec<(String, String)>> = side
        .events
        .read("0-0", Duration::from_millis(5), 1_000_000)
        .await
        .expect("events")
        .into_iter()
        .map(|entry| {
            entry
                .fields
                .into_iter()
                .map(|(k, v)| {
                    if k == "delay" {
                        (k, "T".into())
                    } else {
                        let v = super::rendered(&v);
                        (k, v)
                    }
                })
                .collect::<Vec<_>>()
        })
        .map(|fields| super::in_profile_order(&fields))
        .collect();
    if !super::profile().drained_only_when_wait_is_empty {
        // `drained` follows another rule there (see `Profile`): compare everything else.
        events.retain(|e| e.first().is_none_or(|(_, v)| v != "drained"));
    }
    sort_removal_runs(&mut events);
    // The records of every job in a state (the ranges are compared too) and the custom ids.
    let mut ids: Vec<String> = ranges.concat();
    ids.extend(CUSTOM_IDS.iter().map(|s| (*s).to_owned()));
    ids.sort();
    ids.dedup();
    let mut jobs = Vec::new();
    for id in ids {
        jobs.push(side.queue.get_job(&id).await.expect("job").map(mask_times));
    }
    Snapshot {
        counts,
        ranges,
        events,
        jobs,
    }
}

/// Sorts each run of consecutive `removed` events: a removal with children visits them in the
/// order of a set (Redis: a hash table's order for job keys, unspecified), so only the set of
/// removals is comparable.
fn sort_removal_runs(events: &mut [Vec<(String, String)>]) {
    let is_removal = |e: &Vec<(String, String)>| {
        e.first()
            .is_some_and(|(k, v)| k == "event" && v == "removed")
    };
    let mut start = 0;
    while start < events.len() {
        let mut end = start;
        while end < events.len() && is_removal(&events[end]) {
            end += 1;
        }
        if end > start {
            events[start..end].sort();
            start = end;
        } else {
            start += 1;
        }
    }
}

/// Runs one operation; its outcome as text.
async fn step(side: &mut Side, op: u64, arg: u64, arg2: u64) -> String {
    let profile = super::profile();
    // Fixed timestamps: records carry them, and both sides must store the same.
    let ts = 1_700_000_000_000 + arg;
    match op {
        0..=3 => {
            let opts = match arg % 7 {
                0 => r#"{"priority":2}"#.to_owned(),
                1 => r#"{"priority":1,"attempts":3}"#.to_owned(),
                2 => r#"{"lifo":true}"#.to_owned(),
                // The run's timestamps are in 2023, so an hour's delay is already due: where
                // due jobs are promoted in another order (see `Profile`), they stay delayed.
                3 if !profile.delayed_promoted_in_due_order => {
                    r#"{"delay":3153600000000}"#.to_owned()
                }
                3 => r#"{"delay":3600000}"#.to_owned(),
                4 => format!(r#"{{"de":{{"id":"d{}"}}}}"#, arg2 % 3),
                5 => r#"{"attempts":2}"#.to_owned(),
                _ => "{}".to_owned(),
            };
            let mut job = NewJob::new(format!("n{arg}"), "{}", opts, ts);
            // A custom id takes a number on Redis only: the ids after it would differ.
            if arg2 % 5 == 0 && profile.custom_ids_take_a_number {
                job = job.with_custom_id(CUSTOM_IDS[(arg % 3) as usize]);
            }
            format!("{:?}", side.queue.add(&job).await.expect("add"))
        }
        4 | 5 => {
            let request = FetchRequest::new((arg % 3 + 1) as u32, "w", Duration::from_secs(600));
            let fetched = side.worker.fetch_batch(&request).await.expect("fetch");
            let ids: Vec<String> = fetched.jobs.iter().map(|j| j.id.clone()).collect();
            side.held.extend(fetched.jobs);
            format!("{ids:?} gated={}", fetched.gated)
        }
        6..=8 => {
            if side.held.is_empty() {
                return "none held".into();
            }
            let job = side.held.remove((arg as usize) % side.held.len());
            let keep = match arg2 % 3 {
                0 => Retention::KEEP_ALL,
                1 => Retention::count(2),
                _ => Retention::REMOVE,
            };
            let action = match arg2 % 6 {
                0 | 1 => FinishAction::Complete {
                    returnvalue: arg.to_string(),
                    keep,
                },
                // Node's PostgreSQL failure emits `retries-exhausted` even with attempts
                // left: only an exhausted failure (attempts 1) reads alike there.
                2 if !profile.retries_exhausted_only_when_exhausted => FinishAction::Fail {
                    reason: "f".into(),
                    stacktrace: None,
                    attempts: 1,
                    keep,
                },
                2 => FinishAction::Fail {
                    reason: "f".into(),
                    stacktrace: None,
                    attempts: 2,
                    keep,
                },
                3 => FinishAction::Retry {
                    reason: "r".into(),
                    stacktrace: Some(r#"["s"]"#.into()),
                    lifo: arg % 2 == 0,
                },
                4 => FinishAction::Delay {
                    delay: Duration::from_secs(3600),
                    reason: None,
                    stacktrace: None,
                    skip_attempt: arg % 2 == 0,
                },
                _ => FinishAction::Retry {
                    reason: "r2".into(),
                    stacktrace: None,
                    lifo: false,
                },
            };
            let finish = Finish {
                job_id: job.id.clone(),
                token: job.token.clone(),
                action,
                receipt: job.receipt,
            };
            let fetch = FetchRequest::new(1, "w", Duration::from_secs(600));
            let reply = side
                .worker
                .finish_batch(&[finish], (arg % 3 == 0).then_some(&fetch))
                .await
                .expect("finish");
            let ids: Vec<String> = reply.fetched.jobs.iter().map(|j| j.id.clone()).collect();
            side.held.extend(reply.fetched.jobs);
            format!("{:?} {ids:?}", reply.codes)
        }
        // Operations whose events or placement differ by design between the protocols (see
        // `Profile`) are left out where the profile says so.
        9 if !profile.removed_event => "skipped: remove emits no event here".into(),
        11 if arg % 4 != 0 && !profile.cleaned_event_when_nothing => {
            "skipped: clean emits no event when nothing is cleaned here".into()
        }
        13 | 17 if !profile.move_to_wait_goes_first => {
            "skipped: step moves and children place jobs differently here".into()
        }
        9 => {
            let id = (arg % 20 + 1).to_string();
            let outcome = side
                .queue
                .remove_job(&id, arg2 % 2 == 0)
                .await
                .expect("remove");
            format!("{outcome:?}")
        }
        10 => {
            if arg % 2 == 0 {
                side.queue.pause().await.expect("pause");
            } else {
                side.queue.resume().await.expect("resume");
            }
            "paused or resumed".into()
        }
        11 if arg % 4 == 0 => {
            let removed = side.queue.drain(arg2 % 2 == 0).await.expect("drain");
            format!("drained {removed}")
        }
        11 => {
            let state = [
                JobState::Completed,
                JobState::Failed,
                JobState::Waiting,
                JobState::Delayed,
                JobState::Prioritized,
            ][(arg2 % 5) as usize];
            let mut ids = side
                .queue
                .clean(state, 1_900_000_000_000, arg % 3)
                .await
                .expect("clean");
            ids.sort();
            format!("cleaned {ids:?}")
        }
        12 => {
            let id = (arg % 20 + 1).to_string();
            let log = side.queue.add_log(&id, "line", Some(2)).await.ok();
            let progress = side
                .queue
                .update_progress(&id, &serde_json::json!(arg))
                .await
                .is_ok();
            format!("{log:?} {progress}")
        }
        13 => {
            // A held job moving itself (step jobs): back to wait, or to waiting-children when
            // it has pending children. At most one job is moved to waiting-children at a time:
            // that set is scored by the time of the move, which two backends do not share.
            if side.held.is_empty() {
                return "none held".into();
            }
            let at = (arg as usize) % side.held.len();
            let (id, token) = (side.held[at].id.clone(), side.held[at].token.clone());
            let token = if arg2 % 7 == 0 {
                format!("{token}x")
            } else {
                token
            };
            let outcome = if arg2 % 2 == 0 {
                let outcome = side.worker.move_to_wait(&id, &token).await.expect("move");
                let moved = matches!(outcome, crate::MoveToWaitOutcome::Moved { .. });
                (format!("{outcome:?}"), moved)
            } else {
                let busy = side
                    .queue
                    .get_counts(&[JobState::WaitingChildren])
                    .await
                    .expect("counts")[0]
                    > 0;
                if busy {
                    return "waiting-children busy".into();
                }
                if arg % 3 != 0 {
                    // As a step job does: a child first, then wait for it.
                    let child = NewJob::new("step-child", "{}", "{}", ts)
                        .with_parent(side.parent_link(&id));
                    side.queue.add(&child).await.expect("add child");
                }
                let outcome = side
                    .worker
                    .move_to_waiting_children(&id, &token, None)
                    .await
                    .expect("move");
                let moved = outcome == crate::WaitingChildrenOutcome::Moved;
                (format!("{outcome:?}"), moved)
            };
            if outcome.1 {
                side.held.remove(at);
            }
            outcome.0
        }
        14 => {
            // A finish with someone else's token: refused, the job stays held.
            let Some(job) = side.held.get((arg as usize) % side.held.len().max(1)) else {
                return "none held".into();
            };
            let finish = Finish {
                job_id: job.id.clone(),
                token: format!("{}x", job.token),
                action: FinishAction::Complete {
                    returnvalue: "0".into(),
                    keep: Retention::KEEP_ALL,
                },
                receipt: job.receipt,
            };
            let reply = side
                .worker
                .finish_batch(&[finish], None)
                .await
                .expect("finish");
            format!("{:?}", reply.codes)
        }
        15 => {
            let jobs: Vec<NewJob> = (0..3)
                .map(|i| {
                    let opts = if (arg + i) % 2 == 0 {
                        "{}"
                    } else {
                        r#"{"priority":3}"#
                    };
                    NewJob::new(format!("bulk{i}"), "{}", opts, ts)
                })
                .collect();
            format!("{:?}", side.queue.add_bulk(&jobs).await.expect("bulk"))
        }
        16 => {
            let id = (arg % 25 + 1).to_string();
            let state = side.queue.get_state(&id).await.expect("state");
            let end = side.queue.job_end(&id).await.expect("job end");
            let logs = side
                .queue
                .get_job_logs(&id, 0, -1, arg2 % 2 == 0)
                .await
                .expect("logs");
            format!("{state:?} {end:?} {logs:?}")
        }
        17 => {
            // A child of a random job (missing parents are refused).
            let parent = (arg % 25 + 1).to_string();
            let job = NewJob::new("child", "{}", "{}", ts).with_parent(side.parent_link(&parent));
            format!("{:?}", side.queue.add(&job).await.expect("add child"))
        }
        18 if arg % 8 == 0 => {
            side.queue.pause().await.expect("pause");
            let mut steps = Vec::new();
            loop {
                let step = side
                    .queue
                    .obliterate_batch(5, arg2 % 2 == 0)
                    .await
                    .expect("obliterate");
                steps.push(step);
                if step != crate::ObliterateStep::More || steps.len() > 100 {
                    break;
                }
            }
            if steps.last() == Some(&crate::ObliterateStep::Done) {
                side.held.clear();
            }
            format!("{steps:?}")
        }
        _ => {
            let jobs: Vec<(String, String)> = side
                .held
                .iter()
                .map(|j| (j.id.clone(), j.token.clone()))
                .collect();
            let lost = side
                .worker
                .extend_locks(&jobs, Duration::from_secs(600))
                .await
                .expect("extend");
            format!("{lost:?}")
        }
    }
}

/// Runs `steps` pseudo-random operations for each seed in `seeds` on `reference` and on
/// `candidate` (each seed on a fresh queue named after `queue`), and panics at the first step
/// where they disagree, with the operations so far. `reference` is the backend whose
/// behaviour is right (the Redis backend).
pub async fn backends_agree(
    reference: Arc<dyn Backend>,
    candidate: Arc<dyn Backend>,
    queue: &str,
    seeds: std::ops::RangeInclusive<u64>,
    steps: u32,
) {
    for seed in seeds {
        let name = format!("{queue}-seed{seed}");
        let mut a = Side::open(&reference, &name).await;
        let mut b = Side::open(&candidate, &name).await;
        let mut rng = Rng::new(seed);
        let mut history = Vec::new();
        for n in 0..steps {
            let (op, arg, arg2) = (rng.below(19), rng.below(1000), rng.below(1000));
            let expected = step(&mut a, op, arg, arg2).await;
            let got = step(&mut b, op, arg, arg2).await;
            history.push(format!("{n}: op {op} ({arg}, {arg2}) -> {expected}"));
            let context = || format!("seed {seed}, step {n}:\n{}", history.join("\n"));
            assert_eq!(got, expected, "outcome differs at {}", context());
            let (sa, sb) = (snapshot(&a).await, snapshot(&b).await);
            assert_eq!(sb.counts, sa.counts, "counts differ at {}", context());
            assert_eq!(sb.ranges, sa.ranges, "ranges differ at {}", context());
            assert_eq!(sb.events, sa.events, "events differ at {}", context());
            assert_eq!(sb.jobs, sa.jobs, "job records differ at {}", context());
        }
        a.close().await;
        b.close().await;
    }
}
