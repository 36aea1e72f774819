//! What an upsert writes and what the next iteration is: Node 6.7.0's `JobScheduler` logic,
//! pure, so every backend writes the same thing and it is tested without Redis.
//!
//! Two moments create an iteration:
//! - [`plan_upsert`]: `Queue::upsert_job_scheduler` creates (or replaces) the scheduler and its
//!   pending iteration;
//! - [`plan_next_iteration`]: a Worker that starts an iteration creates the next one, from the
//!   options stored on the job it started (Node's Worker does this before it runs the job).
//!
//! The backend then writes atomically: for `every` it computes the slot itself from the
//! stored previous run ([`super::every_next_millis`]), for cron it takes the time computed here.

use serde_json::{Map, Value};

use super::cron::{CronError, CronSchedule};
use super::repeat::Repeat;
use crate::options::JobOptions;

/// What a job scheduler creates: the name, data and options of every iteration (Node's
/// `{ name, data, opts }` job template, with `JobSchedulerTemplateOptions`).
///
/// ```
/// use bullmq_protocol::scheduler::SchedulerTemplate;
/// use bullmq_protocol::JobOptions;
///
/// let template = SchedulerTemplate::new("report")
///     .data(serde_json::json!({ "kind": "daily" }))
///     .opts(JobOptions::new().attempts(3));
/// assert_eq!(template.name.as_deref(), Some("report"));
/// ```
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
#[non_exhaustive]
pub struct SchedulerTemplate {
    /// Job name of every iteration; the scheduler id when absent (as Node).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Data of every iteration (`{}` when absent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data: Option<Value>,
    /// Options of every iteration. `jobId`, `delay`, `repeat`, `deduplication` and `parent` are
    /// the scheduler's to decide and are refused.
    #[serde(default)]
    pub opts: JobOptions,
    /// Why the data given to [`SchedulerTemplate::data`] could not be turned into JSON; the
    /// upsert is refused with it.
    #[serde(skip)]
    data_error: Option<String>,
}

impl SchedulerTemplate {
    /// Iterations named `name`.
    #[must_use]
    pub fn new(name: impl Into<String>) -> Self {
        Self {
            name: Some(name.into()),
            ..Self::default()
        }
    }

    /// Iterations carry `data`, any `Serialize` value (a `serde_json::Value` as it is). Data
    /// that cannot be written as JSON is kept as the reason of
    /// [`SchedulerTemplate::data_error`], and the upsert is refused with it, nothing written.
    #[must_use]
    pub fn data(mut self, data: impl serde::Serialize) -> Self {
        match serde_json::to_value(data) {
            Ok(value) => {
                self.data = Some(value);
                self.data_error = None;
            }
            Err(error) => self.data_error = Some(error.to_string()),
        }
        self
    }

    /// Why the data given to [`SchedulerTemplate::data`] could not be serialised, if it could
    /// not.
    pub fn data_error(&self) -> Option<&str> {
        self.data_error.as_deref()
    }

    /// Iterations are created with `opts`.
    #[must_use]
    pub fn opts(mut self, opts: JobOptions) -> Self {
        self.opts = opts;
        self
    }
}

/// Why an upsert or a next iteration was refused. The messages are Node's where Node has one.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SchedulerError {
    /// `end_date` is already past (Node's wording).
    #[error("End date must be greater than current timestamp")]
    EndDateInPast,
    /// Both a pattern and an interval (Node's wording).
    #[error("Both .pattern and .every options are defined for this repeatable job")]
    PatternAndEvery,
    /// Neither a pattern nor an interval (Node's wording; `every: 0` counts as none).
    #[error("Either .pattern or .every options must be defined for this repeatable job")]
    NoPatternOrEvery,
    /// `immediately` with a start date (Node's wording).
    #[error("Both .immediately and .startDate options are defined for this repeatable job")]
    ImmediatelyAndStartDate,
    /// The template sets `debounce` (Node's wording).
    #[error("Debounce option has been removed. Use deduplication option instead")]
    Debounce,
    /// The template sets an option the scheduler decides.
    #[error("job scheduler template option `{0}` is not allowed: the scheduler sets it for every iteration")]
    TemplateOption(&'static str),
    /// The scheduler id is empty.
    #[error("job scheduler id must not be empty")]
    EmptyId,
    /// The cron pattern or time zone is invalid.
    #[error(transparent)]
    Cron(#[from] CronError),
    /// The job's `opts.repeat` is missing or unreadable (a next iteration cannot be planned).
    #[error("job {job_id} has no readable repeat options: {reason}")]
    JobRepeat {
        /// The job.
        job_id: String,
        /// What is wrong.
        reason: String,
    },
}

/// Scheduler fields as the backend stores them in the `repeat:{id}` hash (Node's
/// `storeJobScheduler`); `offset` is the user's `every` offset only.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct SchedulerFields {
    /// Job name of every iteration.
    pub name: String,
    /// IANA time zone.
    pub tz: Option<String>,
    /// Cron pattern.
    pub pattern: Option<String>,
    /// Interval, ms.
    pub every: Option<u64>,
    /// Maximum number of iterations.
    pub limit: Option<u64>,
    /// `every` offset given by the user, ms.
    pub offset: Option<u64>,
    /// First allowed run, ms.
    pub start_date: Option<u64>,
    /// Last allowed run, ms.
    pub end_date: Option<u64>,
}

/// Everything a backend needs to create or replace a scheduler and its pending iteration.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct UpsertPlan {
    /// Scheduler id.
    pub id: String,
    /// Next run of a cron scheduler; `None` for `every`, whose slot the backend computes.
    pub next_millis: Option<u64>,
    /// The scheduler hash fields.
    pub fields: SchedulerFields,
    /// Template data JSON (`{}` when none).
    pub template_data: String,
    /// Template options JSON with short keys (`{}` when none).
    pub template_opts: String,
    /// Options of the iteration to create, as a JSON object; the backend sets `jobId` and
    /// `delay` once it knows the slot.
    pub iteration_opts: Map<String, Value>,
    /// Time of the upsert, ms (the iteration's `timestamp`).
    pub now_ms: u64,
}

/// What a worker asks the backend to create when it starts a scheduler's iteration.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct NextIterationPlan {
    /// Scheduler id (the job's `rjk`).
    pub scheduler_id: String,
    /// Id of the started job; the backend creates the next iteration only when this is the
    /// scheduler's current one, so a stalled or retried iteration creates nothing.
    pub producer_id: String,
    /// Next run of a cron scheduler; `None` for `every`.
    pub next_millis: Option<u64>,
    /// Options of the next iteration (JSON object); the backend sets `jobId` and `delay`.
    pub iteration_opts: Map<String, Value>,
    /// Whether the key has the shape of a BullMQ 5 repeatable-job key: the backend then
    /// checks it is a job scheduler before iterating (Node's `isJobScheduler`).
    pub legacy_key_shape: bool,
    /// Time of the start, ms.
    pub now_ms: u64,
}

/// Checks an upsert the way Node's `Queue.upsertJobScheduler` and `JobScheduler` do, before
/// anything is written.
///
/// # Errors
///
/// The [`SchedulerError`] Node would throw, or [`SchedulerError::Cron`] for a pattern or zone
/// that does not parse.
pub fn validate_upsert(
    id: &str,
    repeat: &Repeat,
    template: &SchedulerTemplate,
    now_ms: u64,
) -> Result<(), SchedulerError> {
    if id.is_empty() {
        return Err(SchedulerError::EmptyId);
    }
    if repeat.end_date.is_some_and(|end| end < now_ms) {
        return Err(SchedulerError::EndDateInPast);
    }
    one_schedule(repeat)?;
    if repeat.immediately == Some(true) && repeat.start_date.is_some() {
        return Err(SchedulerError::ImmediatelyAndStartDate);
    }
    if template.opts.extra.contains_key("debounce") {
        return Err(SchedulerError::Debounce);
    }
    let opts = &template.opts;
    let decided = [
        ("jobId", opts.job_id.is_some()),
        ("delay", opts.delay.is_some()),
        ("repeat", opts.repeat.is_some()),
        ("deduplication", opts.deduplication.is_some()),
        ("parent", opts.parent.is_some()),
    ];
    if let Some((name, _)) = decided.into_iter().find(|(_, set)| *set) {
        return Err(SchedulerError::TemplateOption(name));
    }
    if let Some(pattern) = &repeat.pattern {
        CronSchedule::parse(pattern, repeat.tz.as_deref())?;
    } else if let Some(tz) = &repeat.tz {
        super::cron::validate_time_zone(tz)?;
    }
    Ok(())
}

/// Plans `upsert_job_scheduler(id, repeat, template)` at `now_ms` (after [`validate_upsert`]).
/// `None` when Node creates nothing: the `limit` is reached, the `end_date` passed, or the cron
/// pattern has no run left before its end date.
///
/// # Errors
///
/// [`SchedulerError`] when validation fails (it is run again here).
pub fn plan_upsert(
    id: &str,
    repeat: &Repeat,
    template: &SchedulerTemplate,
    now_ms: u64,
) -> Result<Option<UpsertPlan>, SchedulerError> {
    validate_upsert(id, repeat, template, now_ms)?;
    let iteration = repeat.count.map_or(1, |c| c + 1);
    if repeat.limit.is_some_and(|limit| iteration > limit) {
        return Ok(None);
    }
    let now = now_ms.max(template.opts.prev_millis.unwrap_or(0));
    let next_millis = match &repeat.pattern {
        Some(pattern) => match cron_next(pattern, repeat, now)? {
            Some(next) => Some(next),
            None => return Ok(None),
        },
        None => None,
    };
    let every = repeat.every.filter(|_| repeat.pattern.is_none());
    let offset = every.and(repeat.offset).filter(|o| *o > 0);
    let name = template.name.clone().unwrap_or_else(|| id.to_owned());
    let template_opts = template.opts.to_json();
    let mut iteration_opts = object_of(&template.opts);
    set_iteration_fields(
        &mut iteration_opts,
        id,
        repeat,
        iteration,
        offset,
        next_millis,
        now_ms,
    );
    Ok(Some(UpsertPlan {
        id: id.to_owned(),
        next_millis,
        fields: SchedulerFields {
            name,
            tz: repeat.tz.clone(),
            pattern: repeat.pattern.clone(),
            every,
            limit: repeat.limit,
            offset,
            start_date: repeat.start_date,
            end_date: repeat.end_date,
        },
        template_data: template
            .data
            .as_ref()
            .map_or_else(|| String::from("{}"), Value::to_string),
        template_opts,
        iteration_opts,
        now_ms,
    }))
}

/// Plans the iteration that follows the started job `job_id` of scheduler `scheduler_id`, from
/// the job's stored options, at `now_ms`. `Ok(None)` when Node creates none: the job's
/// iteration count reached the `limit`, the `end_date` passed, or the pattern has no run left.
///
/// # Errors
///
/// [`SchedulerError`] when the job's `opts.repeat` is unusable (absent, both or neither of
/// pattern and every, a pattern that does not parse).
pub fn plan_next_iteration(
    job_id: &str,
    scheduler_id: &str,
    opts: &JobOptions,
    now_ms: u64,
) -> Result<Option<NextIterationPlan>, SchedulerError> {
    let repeat: Repeat = match &opts.repeat {
        Some(value) => {
            serde_json::from_value(value.clone()).map_err(|e| SchedulerError::JobRepeat {
                job_id: job_id.to_owned(),
                reason: e.to_string(),
            })?
        }
        None => {
            return Err(SchedulerError::JobRepeat {
                job_id: job_id.to_owned(),
                reason: String::from("`opts.repeat` is absent"),
            })
        }
    };
    let every = one_schedule(&repeat)?;
    let iteration = repeat.count.map_or(1, |c| c + 1);
    if repeat.limit.is_some_and(|limit| iteration > limit) {
        return Ok(None);
    }
    if repeat.end_date.is_some_and(|end| now_ms > end) {
        return Ok(None);
    }
    let now = now_ms.max(opts.prev_millis.unwrap_or(0));
    let next_millis = match &repeat.pattern {
        Some(pattern) => match cron_next(pattern, &repeat, now)? {
            Some(next) => Some(next),
            None => return Ok(None),
        },
        None => None,
    };
    let offset = every.and(repeat.offset).filter(|o| *o > 0);
    let mut iteration_opts = object_of(opts);
    set_iteration_fields(
        &mut iteration_opts,
        scheduler_id,
        &repeat,
        iteration,
        offset,
        next_millis,
        now_ms,
    );
    Ok(Some(NextIterationPlan {
        scheduler_id: scheduler_id.to_owned(),
        producer_id: job_id.to_owned(),
        next_millis,
        iteration_opts,
        legacy_key_shape: has_legacy_repeat_key_shape(scheduler_id),
        now_ms,
    }))
}

/// The id of the iteration of scheduler `id` that runs at `millis` (`repeat:{id}:{millis}`).
#[must_use]
pub fn iteration_job_id(id: &str, millis: u64) -> String {
    format!("repeat:{id}:{millis}")
}

/// Whether `key` looks like a BullMQ 5 repeatable-job key, `name:id:endDate:tz:suffix` with an
/// empty or numeric end date and a cron (has a space) or numeric suffix. Such jobs are not
/// job schedulers unless the scheduler hash says so.
#[must_use]
pub fn has_legacy_repeat_key_shape(key: &str) -> bool {
    let parts: Vec<&str> = key.splitn(5, ':').collect();
    let [_, _, end_date, _, suffix] = parts.as_slice() else {
        return false;
    };
    let numeric = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    if !end_date.is_empty() && !numeric(end_date) {
        return false;
    }
    !suffix.is_empty() && (suffix.contains(' ') || numeric(suffix))
}

/// Exactly one of a pattern and a non-zero interval; the interval when it is one.
fn one_schedule(repeat: &Repeat) -> Result<Option<u64>, SchedulerError> {
    let every = repeat.every.filter(|e| *e > 0);
    match (&repeat.pattern, every) {
        (Some(_), Some(_)) => Err(SchedulerError::PatternAndEvery),
        (None, None) => Err(SchedulerError::NoPatternOrEvery),
        _ => Ok(every),
    }
}

/// Node's `defaultRepeatStrategy`: the first cron run after `max(now, start_date)`, or now
/// with `immediately`; never before `now`.
fn cron_next(pattern: &str, repeat: &Repeat, now: u64) -> Result<Option<u64>, SchedulerError> {
    let schedule = CronSchedule::parse(pattern, repeat.tz.as_deref())?;
    if repeat.immediately == Some(true) {
        return Ok(Some(now));
    }
    let from = repeat.start_date.map_or(now, |start| start.max(now));
    Ok(schedule
        .next_after(from, repeat.end_date)
        .map(|next| next.max(now)))
}

fn object_of(opts: &JobOptions) -> Map<String, Value> {
    match serde_json::to_value(opts) {
        Ok(Value::Object(map)) => map,
        _ => Map::new(),
    }
}

/// Node's `getNextJobOpts`: the iteration's `repeat` (the schedule without `immediately`, with
/// its count and the user's `every` offset), `timestamp`, `prevMillis` (cron only: `every`
/// leaves it undefined) and `repeatJobKey`.
fn set_iteration_fields(
    opts: &mut Map<String, Value>,
    id: &str,
    repeat: &Repeat,
    iteration: u64,
    offset: Option<u64>,
    next_millis: Option<u64>,
    now_ms: u64,
) {
    let mut schedule = repeat.clone();
    schedule.immediately = None;
    schedule.offset = offset;
    schedule.count = Some(iteration);
    let schedule = serde_json::to_value(&schedule).unwrap_or_else(|_| Value::Object(Map::new()));
    opts.insert("repeat".into(), schedule);
    opts.insert("timestamp".into(), now_ms.into());
    match next_millis {
        Some(next) => opts.insert("prevMillis".into(), next.into()),
        None => opts.remove("prevMillis"),
    };
    opts.insert("repeatJobKey".into(), id.into());
    // Decided by the backend once the slot is known.
    opts.remove("jobId");
    opts.remove("delay");
}

#[cfg(test)]
mod tests;
