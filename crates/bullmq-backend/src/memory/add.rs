//! Adding jobs (`add_job.lua` / `add_jobs_bulk.lua` and `includes/add_job_core.lua`) and the
//! deduplication option at add time (`includes/deduplicate.lua`).

use serde_json::{Map, Value};

use super::queue_state::{split_job_key, Expiring, JobHash, KeptDuplicate, QueueState};
use super::Queues;
use crate::error::{BackendError, BackendResult};
use crate::queue::{AddResult, NewJob, ParentLink};

/// Decodes a job's options as the add script does (before anything is written).
pub(crate) fn decode_opts(opts: &str) -> BackendResult<Map<String, Value>> {
    match serde_json::from_str::<Value>(opts) {
        Ok(Value::Object(map)) => Ok(map),
        Ok(_) => Err(BackendError::backend(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            "job options must be a JSON object",
        ))),
        Err(error) => Err(BackendError::backend(error)),
    }
}

/// `tonumber(opts[name])`: a JSON number or numeric string; JSON null is absent.
pub(crate) fn opt_number(opts: &Map<String, Value>, name: &str) -> Option<f64> {
    match opts.get(name)? {
        Value::Number(n) => n.as_f64(),
        Value::String(s) => s.trim().parse().ok(),
        _ => None,
    }
}

/// `opts[name] == true`.
pub(crate) fn opt_true(opts: &Map<String, Value>, name: &str) -> bool {
    opts.get(name) == Some(&Value::Bool(true))
}

/// A Lua number as Redis stores it: integers without a fraction.
pub(crate) fn number_text(n: f64) -> String {
    if n.fract() == 0.0 && n.abs() < 9.007_199_254_740_992e15 {
        format!("{}", n as i64)
    } else {
        format!("{n}")
    }
}

/// Adds jobs in order, atomically, as the bulk script does (one add is a bulk of one).
pub(crate) fn add_jobs(
    queues: &mut Queues,
    base: &str,
    jobs: &[NewJob],
    now: u64,
) -> BackendResult<Vec<AddResult>> {
    // Every job's options are decoded first: a malformed one fails the call with nothing
    // written.
    let decoded = jobs
        .iter()
        .map(|job| decode_opts(&job.opts))
        .collect::<BackendResult<Vec<_>>>()?;
    let mut results = Vec::with_capacity(jobs.len());
    for (job, opts) in jobs.iter().zip(&decoded) {
        results.push(add_one(queues, base, job, opts, now));
    }
    Ok(results)
}

pub(crate) fn add_one(
    queues: &mut Queues,
    base: &str,
    job: &NewJob,
    opts: &Map<String, Value>,
    now: u64,
) -> AddResult {
    if let Some(parent) = &job.parent {
        if !queues.job_exists(&parent.parent_key()) {
            return AddResult::ParentMissing {
                parent: parent.parent.clone(),
            };
        }
    }
    let q = queues.queue(base);
    q.id_counter += 1;
    let job_id = match &job.custom_id {
        Some(id) if !id.is_empty() => id.clone(),
        _ => q.id_counter.to_string(),
    };
    if job.custom_id.as_deref().is_some_and(|id| !id.is_empty()) && q.jobs.contains_key(&job_id) {
        q.emit_queue(now, "duplicated", &[("jobId", job_id.clone())]);
        return AddResult::Id(job_id);
    }

    let delay = opt_number(opts, "delay").unwrap_or(0.0);
    let priority = opt_number(opts, "priority").unwrap_or(0.0);
    let mut deduplication_id = None;
    if let Some(Value::Object(de)) = opts.get("de") {
        if let Some(owner) = deduplicate(q, de, &job_id, job, now, delay) {
            return AddResult::Id(owner);
        }
        deduplication_id = dedup_id(de);
    }

    let mut hash = JobHash::new();
    hash.insert("name".into(), job.name.clone());
    hash.insert("data".into(), job.data.clone());
    hash.insert("opts".into(), job.opts.clone());
    hash.insert("timestamp".into(), job.timestamp_ms.to_string());
    hash.insert("delay".into(), number_text(delay));
    hash.insert("priority".into(), number_text(priority));
    if let Some(parent) = &job.parent {
        hash.insert("parentKey".into(), parent.parent_key());
        hash.insert("parent".into(), parent.parent_json());
    }
    if let Some(rjk) = job.repeat_job_key.as_ref().filter(|k| !k.is_empty()) {
        hash.insert("rjk".into(), rjk.clone());
    }
    if let Some(id) = &deduplication_id {
        hash.insert("deid".into(), id.clone());
    }
    q.jobs.insert(job_id.clone(), hash);
    q.emit_queue(
        now,
        "added",
        &[("jobId", job_id.clone()), ("name", job.name.clone())],
    );
    place_new_job(
        q,
        &job_id,
        job.timestamp_ms,
        delay,
        priority,
        opt_true(opts, "lifo"),
        now,
    );

    let job_key = q.job_key(&job_id);
    if let Some(deps) = job.parent.as_ref().and_then(dependencies_key) {
        register_dependency(queues, &deps, job_key);
    }
    AddResult::Id(job_id)
}

/// Queues a freshly stored job by its options: delayed, prioritized or wait.
pub(crate) fn place_new_job(
    q: &mut QueueState,
    job_id: &str,
    timestamp: u64,
    delay: f64,
    priority: f64,
    lifo: bool,
    now: u64,
) {
    if delay > 0.0 {
        let ready_at = timestamp.saturating_add(delay.floor() as u64);
        q.push_delayed(now, job_id, ready_at, true);
        return;
    }
    let gated = q.paused_or_maxed();
    if priority > 0.0 {
        let score = q.next_priority_score(priority.floor() as u64);
        q.prioritized.add(score, job_id);
    } else if lifo {
        q.wait.push_back(job_id.to_owned());
    } else {
        q.wait.push_front(job_id.to_owned());
    }
    if !gated {
        q.signal_ready();
    }
    q.emit_queue(now, "waiting", &[("jobId", job_id.to_owned())]);
}

/// `{parent key}:dependencies`, the set a child registers in, when `link` registers it.
pub(crate) fn dependencies_key(link: &ParentLink) -> Option<String> {
    link.register
        .then(|| format!("{}:dependencies", link.parent_key()))
}

/// `SADD {parent}:dependencies {child key}`, in whichever queue the parent lives.
pub(crate) fn register_dependency(queues: &mut Queues, dependencies_key: &str, child_key: String) {
    let Some(parent_key) = dependencies_key.strip_suffix(":dependencies") else {
        return;
    };
    if let Some((parent_base, parent_id)) = split_job_key(parent_key) {
        queues
            .queue(parent_base)
            .dependencies
            .entry(parent_id.to_owned())
            .or_default()
            .insert(child_key);
    }
}

/// The deduplication id of a `de` option, when it is a string or a number.
pub(crate) fn dedup_id(de: &Map<String, Value>) -> Option<String> {
    match de.get("id")? {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        _ => None,
    }
}

/// The deduplication window at add time; `Some(owner)` when the new job is absorbed.
fn deduplicate(
    q: &mut QueueState,
    de: &Map<String, Value>,
    job_id: &str,
    job: &NewJob,
    now: u64,
    delay: f64,
) -> Option<String> {
    let id = dedup_id(de)?;
    let ttl = opt_number(de, "ttl").map(|t| t.floor() as i64);
    let extend = opt_true(de, "extend");
    let keep_last = opt_true(de, "keepLastIfActive");
    let owner_ttl = if keep_last { None } else { ttl };
    let mut window = Dedup {
        q,
        id: &id,
        job_id,
        now,
    };

    if opt_true(de, "replace") {
        let Some(owner) = window.owner() else {
            window.set_owner(job_id, owner_ttl);
            return None;
        };
        if window.q.delayed.remove(&owner) {
            window.q.delete_job_keys(&owner);
            window.q.emit_queue(
                now,
                "removed",
                &[("jobId", owner.clone()), ("prev", "delayed".into())],
            );
            window.q.emit_queue(
                now,
                "deduplicated",
                &[
                    ("jobId", job_id.to_owned()),
                    ("deduplicationId", id.clone()),
                    ("deduplicatedJobId", owner.clone()),
                ],
            );
            window.q.kept_duplicates.remove(&id);
            if !keep_last && !extend && ttl.is_some_and(|t| t > 0) {
                // KEEPTTL: the window keeps its expiry, with the new owner.
                if let Some(w) = window.q.dedup.get_mut(&id) {
                    w.value = job_id.to_owned();
                }
            } else {
                window.set_owner(job_id, owner_ttl);
            }
            return None;
        }
        if window.take_stale(&owner, owner_ttl) {
            return None;
        }
        if keep_last {
            window.keep_for_after_active(&owner, job);
        }
        return Some(owner);
    }

    let owner = if ttl.is_some_and(|t| t > 0) && extend {
        let Some(owner) = window.owner() else {
            window.set_owner(job_id, owner_ttl);
            return None;
        };
        if window.take_stale(&owner, owner_ttl) {
            return None;
        }
        if keep_last && window.keep_for_after_active(&owner, job) {
            return Some(owner);
        }
        window.set_owner(&owner, owner_ttl);
        owner
    } else {
        let Some(owner) = window.owner() else {
            window.set_owner(job_id, owner_ttl);
            return None;
        };
        if window.take_stale(&owner, owner_ttl) {
            return None;
        }
        if keep_last && window.keep_for_after_active(&owner, job) {
            return Some(owner);
        }
        owner
    };

    let q = window.q;
    q.emit_queue(
        now,
        "deduplicated",
        &[
            ("jobId", owner.clone()),
            ("deduplicationId", id.clone()),
            ("deduplicatedJobId", job_id.to_owned()),
        ],
    );
    if opt_true(de, "reschedule") && q.delayed.score(&owner).is_some() {
        let delay_ms = delay.max(0.0).floor() as u64;
        q.set_field(&owner, "delay", number_text(delay));
        q.push_delayed(now, &owner, job.timestamp_ms.saturating_add(delay_ms), true);
    }
    Some(owner)
}

/// One deduplication window (`de:{id}`) being looked at.
struct Dedup<'a> {
    q: &'a mut QueueState,
    id: &'a str,
    job_id: &'a str,
    now: u64,
}

impl Dedup<'_> {
    /// The live owner of the window.
    fn owner(&mut self) -> Option<String> {
        let now = self.now;
        match self.q.dedup.get(self.id) {
            Some(w) if w.live(now) => Some(w.value.clone()),
            Some(_) => {
                self.q.dedup.remove(self.id);
                None
            }
            None => None,
        }
    }

    fn set_owner(&mut self, owner: &str, ttl: Option<i64>) {
        let expires_at = ttl
            .filter(|t| *t > 0)
            .map(|t| self.now.saturating_add(t as u64));
        self.q.dedup.insert(
            self.id.to_owned(),
            Expiring {
                value: owner.to_owned(),
                expires_at,
            },
        );
    }

    /// An owner whose job vanished while the window has no expiry: the new job takes it.
    fn take_stale(&mut self, owner: &str, ttl: Option<i64>) -> bool {
        let persistent = self
            .q
            .dedup
            .get(self.id)
            .is_some_and(|w| w.expires_at.is_none());
        if persistent && !self.q.jobs.contains_key(owner) {
            self.q.kept_duplicates.remove(self.id);
            let job_id = self.job_id;
            self.set_owner(job_id, ttl);
            return true;
        }
        false
    }

    /// keepLastIfActive: keeps the duplicate while its owner runs. Whether it was kept.
    fn keep_for_after_active(&mut self, owner: &str, job: &NewJob) -> bool {
        if !self.q.active.iter().any(|id| id == owner) {
            return false;
        }
        let parent = job.parent.as_ref();
        self.q.kept_duplicates.insert(
            self.id.to_owned(),
            KeptDuplicate {
                job_id: self.job_id.to_owned(),
                name: job.name.clone(),
                data: job.data.clone(),
                opts: job.opts.clone(),
                parent_key: parent.map(ParentLink::parent_key),
                parent_json: parent.map(ParentLink::parent_json),
                dependencies_key: parent.and_then(dependencies_key),
                repeat_job_key: job.repeat_job_key.clone().filter(|k| !k.is_empty()),
            },
        );
        if let Some(w) = self.q.dedup.get_mut(self.id) {
            w.expires_at = None;
        }
        self.q.emit_queue(
            self.now,
            "deduplicated",
            &[
                ("jobId", owner.to_owned()),
                ("deduplicationId", self.id.to_owned()),
                ("deduplicatedJobId", self.job_id.to_owned()),
            ],
        );
        true
    }
}
