//! One queue's whole state, laid out as the Redis backend lays it out (a `wait` list, an
//! `active` list, `prioritized`/`delayed`/finished sorted sets, job hashes, locks, counters,
//! the meta hash, the event log) so each operation can follow its Lua script step by step.

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::Arc;

use bullmq_protocol::score::{delayed_score, priority_score, DELAYED_SCORE_MULTIPLIER};
use tokio::sync::Notify;

use super::events::EventLog;
use super::schedulers::Schedulers;
use super::sets::ZSet;

/// Meta value of `version`, as Node writes it.
pub(crate) const META_VERSION: &str = "bullmq:6.7.0";
/// `opts.maxLenEvents` when a queue's meta does not set it.
pub(crate) const DEFAULT_MAX_EVENTS: u64 = 10_000;

/// A job hash: field name → text value, exactly what the Redis backend stores.
pub(crate) type JobHash = HashMap<String, String>;

/// Wake-ups of one queue, kept outside [`QueueState`] so they survive an obliterate and can be
/// awaited without the backend's lock.
#[derive(Debug, Default)]
pub(crate) struct Signals {
    /// An entry was appended to the event log.
    pub(crate) events: Notify,
    /// Work may be ready (the Redis marker was set), or a delayed job's due time changed.
    pub(crate) work: Notify,
}

/// A lock: its token and when it expires (ms since the epoch).
#[derive(Debug, Clone)]
pub(crate) struct Lock {
    pub(crate) token: String,
    pub(crate) expires_at: u64,
}

/// A key with an optional expiry, as `SET ... PX` stores it.
#[derive(Debug, Clone)]
pub(crate) struct Expiring<T> {
    pub(crate) value: T,
    pub(crate) expires_at: Option<u64>,
}

impl<T> Expiring<T> {
    pub(crate) fn live(&self, now: u64) -> bool {
        self.expires_at.is_none_or(|at| at > now)
    }
}

/// The per-minute metrics of one kind (`metrics:completed` hash and its `:data` list).
#[derive(Debug, Default, Clone)]
pub(crate) struct MetricsStore {
    pub(crate) count: Option<u64>,
    pub(crate) prev_ts: Option<u64>,
    pub(crate) prev_count: Option<u64>,
    /// Newest first.
    pub(crate) data: VecDeque<u64>,
}

/// A duplicate kept while its deduplication owner is active (`dn:{id}`, keepLastIfActive).
#[derive(Debug, Clone)]
pub(crate) struct KeptDuplicate {
    pub(crate) job_id: String,
    pub(crate) name: String,
    pub(crate) data: String,
    pub(crate) opts: String,
    pub(crate) parent_key: Option<String>,
    pub(crate) parent_json: Option<String>,
    pub(crate) dependencies_key: Option<String>,
    pub(crate) repeat_job_key: Option<String>,
}

/// One queue.
#[derive(Debug)]
pub(crate) struct QueueState {
    /// `{prefix}:{name}:`, the base of every job key of the queue.
    pub(crate) base: String,
    pub(crate) signals: Arc<Signals>,
    pub(crate) jobs: HashMap<String, JobHash>,
    /// Left end first: FIFO adds push at the front, workers take from the back.
    pub(crate) wait: VecDeque<String>,
    /// Left end first, as the Redis `active` list.
    pub(crate) active: VecDeque<String>,
    pub(crate) prioritized: ZSet,
    pub(crate) delayed: ZSet,
    pub(crate) completed: ZSet,
    pub(crate) failed: ZSet,
    pub(crate) waiting_children: ZSet,
    /// Active jobs marked by the last stalled check.
    pub(crate) stalled: HashSet<String>,
    pub(crate) locks: HashMap<String, Lock>,
    pub(crate) logs: HashMap<String, VecDeque<String>>,
    /// Parent id → child job keys still pending (`:dependencies`).
    pub(crate) dependencies: HashMap<String, HashSet<String>>,
    /// Parent id → child job key → return value JSON (`:processed`).
    pub(crate) processed: HashMap<String, HashMap<String, String>>,
    /// Parent id → child job key → failure reason of ignored / continued failures (`:failed`).
    pub(crate) failed_children: HashMap<String, HashMap<String, String>>,
    /// Parent id → child job keys whose failure fails the parent (`:unsuccessful`).
    pub(crate) unsuccessful: HashMap<String, HashSet<String>>,
    pub(crate) meta: HashMap<String, String>,
    /// `id`: the job counter.
    pub(crate) id_counter: u64,
    /// `pc`: the priority counter.
    pub(crate) priority_counter: u64,
    /// `limiter`: jobs counted in the current window.
    pub(crate) limiter: Option<Expiring<u64>>,
    /// `stalled-check`: until when the next stalled check is skipped.
    pub(crate) stalled_check_until: u64,
    /// `de:{id}` → owner job id.
    pub(crate) dedup: HashMap<String, Expiring<String>>,
    /// `dn:{id}`.
    pub(crate) kept_duplicates: HashMap<String, KeptDuplicate>,
    /// The Redis marker's "jobs are ready" member.
    pub(crate) marker_ready: bool,
    pub(crate) events: EventLog,
    pub(crate) metrics_completed: MetricsStore,
    pub(crate) metrics_failed: MetricsStore,
    /// The job schedulers (`repeat` and the `repeat:{id}` hashes).
    pub(crate) schedulers: Schedulers,
}

impl QueueState {
    pub(crate) fn new(base: String, signals: Arc<Signals>) -> Self {
        Self {
            base,
            signals,
            jobs: HashMap::new(),
            wait: VecDeque::new(),
            active: VecDeque::new(),
            prioritized: ZSet::default(),
            delayed: ZSet::default(),
            completed: ZSet::default(),
            failed: ZSet::default(),
            waiting_children: ZSet::default(),
            stalled: HashSet::new(),
            locks: HashMap::new(),
            logs: HashMap::new(),
            dependencies: HashMap::new(),
            processed: HashMap::new(),
            failed_children: HashMap::new(),
            unsuccessful: HashMap::new(),
            meta: HashMap::new(),
            id_counter: 0,
            priority_counter: 0,
            limiter: None,
            stalled_check_until: 0,
            dedup: HashMap::new(),
            kept_duplicates: HashMap::new(),
            marker_ready: false,
            events: EventLog::default(),
            metrics_completed: MetricsStore::default(),
            metrics_failed: MetricsStore::default(),
            schedulers: Schedulers::default(),
        }
    }

    /// The job key of `job_id`.
    pub(crate) fn job_key(&self, job_id: &str) -> String {
        format!("{}{job_id}", self.base)
    }

    /// A job hash field.
    pub(crate) fn field(&self, job_id: &str, field: &str) -> Option<&str> {
        self.jobs.get(job_id)?.get(field).map(String::as_str)
    }

    /// `HSET` on an existing job (no-op when the job is gone).
    pub(crate) fn set_field(&mut self, job_id: &str, field: &str, value: impl Into<String>) {
        if let Some(hash) = self.jobs.get_mut(job_id) {
            hash.insert(field.to_owned(), value.into());
        }
    }

    /// An integer field read as the scripts read it (`tonumber(...) or 0`).
    pub(crate) fn int_field(&self, job_id: &str, field: &str) -> u64 {
        self.field(job_id, field).map_or(0, lua_number)
    }

    /// The live lock of a job.
    pub(crate) fn lock(&self, job_id: &str, now: u64) -> Option<&Lock> {
        self.locks.get(job_id).filter(|l| l.expires_at > now)
    }

    /// `opts.maxLenEvents` as the queue-side scripts read it: a queue with no meta value gets
    /// the default stored, with `version` when `with_version` (the add/admin scripts do that,
    /// the worker scripts only store the length).
    pub(crate) fn max_events(&mut self, with_version: bool) -> u64 {
        if let Some(configured) = self.meta.get("opts.maxLenEvents") {
            return configured.trim().parse().unwrap_or(DEFAULT_MAX_EVENTS);
        }
        self.meta
            .insert("opts.maxLenEvents".into(), DEFAULT_MAX_EVENTS.to_string());
        if with_version {
            self.meta
                .entry("version".into())
                .or_insert_with(|| META_VERSION.into());
        }
        DEFAULT_MAX_EVENTS
    }

    /// Appends an event (`event` = `name`, then `fields`) and trims the log to
    /// `opts.maxLenEvents`.
    pub(crate) fn emit(&mut self, now: u64, name: &str, fields: &[(&str, String)]) -> String {
        let max = self.max_events(false);
        self.emit_capped(now, name, fields, max)
    }

    /// [`QueueState::emit`] for the queue-side scripts, which also stamp `version` on a fresh
    /// meta.
    pub(crate) fn emit_queue(&mut self, now: u64, name: &str, fields: &[(&str, String)]) -> String {
        let max = self.max_events(true);
        self.emit_capped(now, name, fields, max)
    }

    /// Appends an event trimmed to `max` entries.
    pub(crate) fn emit_capped(
        &mut self,
        now: u64,
        name: &str,
        fields: &[(&str, String)],
        max: u64,
    ) -> String {
        let mut all = Vec::with_capacity(fields.len() + 1);
        all.push(("event".to_owned(), name.to_owned()));
        all.extend(fields.iter().map(|(k, v)| ((*k).to_owned(), v.clone())));
        let id = self.events.append(now, all, max);
        self.signals.events.notify_waiters();
        id
    }

    /// Whether the queue is paused (meta `paused`).
    pub(crate) fn is_paused(&self) -> bool {
        self.meta.contains_key("paused")
    }

    /// Global concurrency from meta (`concurrency`), ignored when not a number.
    pub(crate) fn global_concurrency(&self) -> Option<u64> {
        self.meta
            .get("concurrency")
            .and_then(|c| c.trim().parse().ok())
    }

    /// Puts a job just taken out of `active` back in line without counting an attempt (a
    /// rate-limited job, a step job's `move_to_wait`): into `prioritized` with counter 0,
    /// ahead of every job of its priority (no marker, as Node's script), or at the end of
    /// `wait` (signalled unless the queue is paused or maxed); emits `waiting` (prev `active`).
    pub(crate) fn back_to_wait_from_active(&mut self, id: &str, now: u64) {
        let priority = self.int_field(id, "priority");
        if priority > 0 {
            self.prioritized.add(
                bullmq_protocol::score::priority_score(
                    u32::try_from(priority).unwrap_or(u32::MAX),
                    0,
                ),
                id,
            );
        } else {
            let gated = self.paused_or_maxed();
            self.wait.push_back(id.to_owned());
            if !gated {
                self.signal_ready();
            }
        }
        self.emit(
            now,
            "waiting",
            &[("jobId", id.to_owned()), ("prev", "active".into())],
        );
    }

    /// Paused, or at its global concurrency: no worker is woken for a new job.
    pub(crate) fn paused_or_maxed(&self) -> bool {
        self.is_paused()
            || self
                .global_concurrency()
                .is_some_and(|c| self.active.len() as u64 >= c)
    }

    /// Sets the "ready" marker and wakes idle workers.
    pub(crate) fn signal_ready(&mut self) {
        self.marker_ready = true;
        self.signals.work.notify_waiters();
    }

    /// The delayed set changed: idle workers recompute when to wake.
    pub(crate) fn signal_delayed(&mut self) {
        self.signals.work.notify_waiters();
    }

    /// Ready time (ms) of the earliest delayed job.
    pub(crate) fn next_delayed_at(&self) -> Option<u64> {
        self.delayed
            .first()
            .map(|(score, _)| score / DELAYED_SCORE_MULTIPLIER)
    }

    /// The next priority score for `priority` (`INCR pc`).
    pub(crate) fn next_priority_score(&mut self, priority: u64) -> u64 {
        self.priority_counter += 1;
        priority_score(
            u32::try_from(priority).unwrap_or(u32::MAX),
            self.priority_counter,
        )
    }

    /// The delayed score for a job ready at `ready_at`: one more than the highest score of that
    /// millisecond, capped at its last.
    pub(crate) fn next_delayed_score(&self, ready_at: u64) -> u64 {
        let lowest = delayed_score(ready_at, 0);
        let highest = lowest + (DELAYED_SCORE_MULTIPLIER - 1);
        match self.delayed.max_score_in(lowest, highest) {
            Some(used) if used >= highest => highest,
            Some(used) => used + 1,
            None => lowest,
        }
    }

    /// Puts a job due at `ready_at` into `delayed` and emits `delayed`.
    pub(crate) fn push_delayed(&mut self, now: u64, job_id: &str, ready_at: u64, queue_side: bool) {
        let score = self.next_delayed_score(ready_at);
        self.delayed.add(score, job_id);
        let fields = [
            ("jobId", job_id.to_owned()),
            ("delay", ready_at.to_string()),
        ];
        if queue_side {
            self.emit_queue(now, "delayed", &fields);
        } else {
            self.emit(now, "delayed", &fields);
        }
        self.signal_delayed();
    }

    /// Puts a job back where workers find it: `prioritized` by its priority, else `wait` at the
    /// front of the line (`lifo`) or its back; wakes a worker unless the queue is gated.
    pub(crate) fn enqueue_ready(&mut self, job_id: &str, lifo: bool) {
        let priority = self.int_field(job_id, "priority");
        if priority > 0 {
            let score = self.next_priority_score(priority);
            self.prioritized.add(score, job_id);
        } else if lifo {
            self.wait.push_back(job_id.to_owned());
        } else {
            self.wait.push_front(job_id.to_owned());
        }
        if !self.paused_or_maxed() {
            self.signal_ready();
        }
    }

    /// Removes the last occurrence of `job_id` from `active` (`LREM active -1 id`).
    pub(crate) fn remove_active(&mut self, job_id: &str) -> bool {
        match self.active.iter().rposition(|id| id == job_id) {
            Some(at) => {
                self.active.remove(at);
                true
            }
            None => false,
        }
    }

    /// Deletes a job's hash and every per-job key (logs, lock, flow sets); whether it existed.
    pub(crate) fn delete_job_keys(&mut self, job_id: &str) -> bool {
        let existed = self.jobs.remove(job_id).is_some();
        let logs = self.logs.remove(job_id).is_some();
        let lock = self.locks.remove(job_id).is_some();
        let deps = self.dependencies.remove(job_id).is_some();
        let processed = self.processed.remove(job_id).is_some();
        let failed = self.failed_children.remove(job_id).is_some();
        let unsuccessful = self.unsuccessful.remove(job_id).is_some();
        existed || logs || lock || deps || processed || failed || unsuccessful
    }

    /// Releases the deduplication window `job_id` owns (admin removals): `de:{id}` and the kept
    /// duplicate go when the window still names this job.
    pub(crate) fn release_dedup_of_removed(&mut self, job_id: &str, now: u64) {
        let Some(dedup_id) = self.field(job_id, "deid").map(str::to_owned) else {
            return;
        };
        let owns = self
            .dedup
            .get(&dedup_id)
            .is_some_and(|w| w.live(now) && w.value == job_id);
        if owns {
            self.dedup.remove(&dedup_id);
            self.kept_duplicates.remove(&dedup_id);
        }
    }

    /// The previous state's key name of a job removed from wherever it is.
    pub(crate) fn remove_from_any_state(&mut self, job_id: &str) -> &'static str {
        for (name, set) in [
            ("completed", &mut self.completed),
            ("waiting-children", &mut self.waiting_children),
            ("delayed", &mut self.delayed),
            ("failed", &mut self.failed),
            ("prioritized", &mut self.prioritized),
        ] {
            if set.remove(job_id) {
                return name;
            }
        }
        if let Some(at) = self.wait.iter().position(|id| id == job_id) {
            self.wait.remove(at);
            return "wait";
        }
        if let Some(at) = self.active.iter().position(|id| id == job_id) {
            self.active.remove(at);
            return "active";
        }
        "unknown"
    }
}

/// `tonumber(v) or 0` for the integer fields the scripts compute with, floored.
pub(crate) fn lua_number(value: &str) -> u64 {
    let value = value.trim();
    if let Ok(n) = value.parse::<u64>() {
        return n;
    }
    match value.parse::<f64>() {
        Ok(n) if n.is_finite() && n > 0.0 => n.floor() as u64,
        _ => 0,
    }
}

/// The job a job key `{prefix}:{queue}:{id}` names (this backend keys its jobs as Redis does):
/// the id after the last `:`, the queue before it, the prefix (which may hold `:`) the rest.
pub(crate) fn job_ref_of(job_key: &str) -> Option<bullmq_protocol::JobRef> {
    let (rest, id) = job_key.rsplit_once(':')?;
    let (prefix, queue) = rest.rsplit_once(':')?;
    Some(bullmq_protocol::JobRef::new(
        bullmq_protocol::QueueId::new(prefix, queue),
        id,
    ))
}

/// Splits a job key `{prefix}:{queue}:{id}` into the queue base (`{prefix}:{queue}:`) and id.
pub(crate) fn split_job_key(job_key: &str) -> Option<(&str, &str)> {
    let at = job_key.rfind(':')?;
    Some((&job_key[..=at], &job_key[at + 1..]))
}
