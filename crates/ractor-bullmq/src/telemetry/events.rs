//! The catalogue's events: each function emits one `tracing` event (target `bullmq`, a stable
//! `event` field) and updates the matching metrics, so call sites stay one line.

use std::fmt;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use tracing::Level;

use super::names::{event_names as ev, TARGET};
use super::recorder::{self, Status};
use crate::job::Job;

/// Who a per-job event is about: the fields every job event and the process span carry.
///
/// Cheap to build (borrows only) at each call site, usually with [`JobTelemetry::from_job`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct JobTelemetry<'a> {
    /// Queue name (field `queue`, metric label `queue`).
    pub queue: &'a str,
    /// Job id (field `job.id`).
    pub job_id: &'a str,
    /// Job name (field `job.name`, metric label `job_name`).
    pub job_name: &'a str,
    /// 1-based number of the current attempt (field `attempt`); 1 for producer-side events.
    pub attempt: u32,
    /// Name of the worker processing the job (field `worker`); empty on the producer side.
    pub worker: &'a str,
    /// The job's `opts.tm` (producer's trace context), unless the job set `opts.omc`.
    /// [`process_span`](super::process_span) continues that trace with the `otel` feature.
    pub trace_metadata: Option<&'a str>,
}

impl<'a> JobTelemetry<'a> {
    /// Telemetry identity of job `job_id` named `job_name` in `queue`, attempt 1, no worker.
    pub fn new(queue: &'a str, job_id: &'a str, job_name: &'a str) -> Self {
        Self {
            queue,
            job_id,
            job_name,
            attempt: 1,
            worker: "",
            trace_metadata: None,
        }
    }

    /// The identity of a job a worker is about to process: attempt = `attemptsMade + 1`,
    /// trace metadata from `opts.tm` unless `opts.omc` is set.
    pub fn from_job(job: &'a Job, worker: &'a str) -> Self {
        let opts = job.opts();
        let trace_metadata = if opts.omit_context == Some(true) {
            None
        } else {
            opts.telemetry_metadata.as_deref()
        };
        Self {
            queue: job.queue_name(),
            job_id: job.id(),
            job_name: job.name(),
            attempt: job.attempts_made().saturating_add(1),
            worker,
            trace_metadata,
        }
    }

    /// Sets the 1-based attempt number.
    pub fn attempt(mut self, attempt: u32) -> Self {
        self.attempt = attempt;
        self
    }

    /// Sets the worker name.
    pub fn worker(mut self, worker: &'a str) -> Self {
        self.worker = worker;
        self
    }

    /// Sets the producer's trace context (`opts.tm`).
    pub fn trace_metadata(mut self, tm: Option<&'a str>) -> Self {
        self.trace_metadata = tm;
        self
    }
}

/// How long a job waited between becoming ready and being started, for
/// [`job_started`]: from `timestamp + delay` to `processedOn` (or now when unset).
///
/// `None` for retries and stalled re-runs, whose ready time the job hash does not record.
pub fn wait_time(job: &Job) -> Option<Duration> {
    if job.attempts_made() > 0 || job.stalled_counter() > 0 {
        return None;
    }
    let ready_ms = job
        .timestamp()
        .saturating_add(u64::try_from(job.delay().as_millis()).unwrap_or(u64::MAX));
    let started_ms = job.processed_on().unwrap_or_else(now_ms);
    Some(Duration::from_millis(started_ms.saturating_sub(ready_ms)))
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
        .unwrap_or(0)
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// A job was added (`bullmq.job.added`, counter `bullmq_jobs_added_total`).
///
/// Call once per job actually written (not for a deduplicated add that returned an existing
/// job).
pub fn job_added(queue: &str, job_id: &str, job_name: &str) {
    tracing::event!(target: TARGET, Level::DEBUG, event = ev::JOB_ADDED, queue,
        job.id = job_id, job.name = job_name, "job added");
    recorder::added(queue, job_name);
}

/// Keeps `bullmq_worker_active_jobs` raised while an attempt runs; returned by
/// [`job_started`]. Dropping it lowers the gauge, whatever way the attempt ended.
#[derive(Debug)]
#[must_use = "the active-jobs gauge goes back down when this guard is dropped"]
pub struct ActiveJob {
    queue: String,
    started: Instant,
}

impl ActiveJob {
    /// Time since the attempt started: the `duration` to pass to [`job_completed`],
    /// [`job_failed`] or [`job_retried`].
    pub fn elapsed(&self) -> Duration {
        self.started.elapsed()
    }
}

impl Drop for ActiveJob {
    fn drop(&mut self) {
        recorder::active_jobs(&self.queue, -1.0);
    }
}

/// A worker started an attempt (`bullmq.job.started` with `wait_ms`; histogram
/// `bullmq_job_wait_seconds` when `wait` is known; gauge `bullmq_worker_active_jobs` +1 until
/// the returned guard is dropped). [`wait_time`] computes `wait` from the job.
pub fn job_started(job: &JobTelemetry<'_>, wait: Option<Duration>) -> ActiveJob {
    let wait_ms = wait.map(millis);
    tracing::event!(target: TARGET, Level::DEBUG, event = ev::JOB_STARTED, queue = job.queue,
        job.id = job.job_id, job.name = job.job_name, attempt = job.attempt,
        worker = job.worker, wait_ms, "job started");
    if let Some(wait) = wait {
        recorder::waited(job.queue, job.job_name, wait);
    }
    recorder::active_jobs(job.queue, 1.0);
    ActiveJob {
        queue: job.queue.to_owned(),
        started: Instant::now(),
    }
}

/// A job completed (`bullmq.job.completed` with `duration_ms`; counter
/// `bullmq_jobs_completed_total`; histogram `bullmq_job_duration_seconds{status="completed"}`).
pub fn job_completed(job: &JobTelemetry<'_>, duration: Duration) {
    tracing::event!(target: TARGET, Level::DEBUG, event = ev::JOB_COMPLETED, queue = job.queue,
        job.id = job.job_id, job.name = job.job_name, attempt = job.attempt,
        worker = job.worker, duration_ms = millis(duration), "job completed");
    recorder::finished(job.queue, job.job_name, Status::Completed, duration);
}

/// Where a processor moved its own job ([`job_moved`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum MovedTo {
    /// To `waiting-children`, until its children are done.
    WaitingChildren,
    /// Back to `wait`.
    Wait,
}

impl MovedTo {
    /// The state's name, as BullMQ names it (the event's `to` field).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::WaitingChildren => "waiting-children",
            Self::Wait => "wait",
        }
    }
}

/// A processor moved its own job (step jobs: `JobContext::move_to_waiting_children` or
/// `move_to_wait`), ending the attempt without a finish (`bullmq.job.moved` with
/// `duration_ms` and `to` = `waiting-children` | `wait`; no metric: the job is neither
/// completed nor failed).
pub fn job_moved(job: &JobTelemetry<'_>, to: MovedTo, duration: Duration) {
    tracing::event!(target: TARGET, Level::DEBUG, event = ev::JOB_MOVED, queue = job.queue,
        job.id = job.job_id, job.name = job.job_name, attempt = job.attempt,
        worker = job.worker, duration_ms = millis(duration), to = to.as_str(), "job moved");
}

/// A job failed for good: attempts exhausted, unrecoverable error, or lost for good
/// (`bullmq.job.failed` with `duration_ms` and `error`; counter `bullmq_jobs_failed_total`;
/// histogram `bullmq_job_duration_seconds{status="failed"}`).
pub fn job_failed(job: &JobTelemetry<'_>, duration: Duration, error: &dyn fmt::Display) {
    tracing::event!(target: TARGET, Level::WARN, event = ev::JOB_FAILED, queue = job.queue,
        job.id = job.job_id, job.name = job.job_name, attempt = job.attempt,
        worker = job.worker, duration_ms = millis(duration), error = %error, "job failed");
    recorder::finished(job.queue, job.job_name, Status::Failed, duration);
}

/// An attempt failed and the job will run again after `delay` (zero: at once)
/// (`bullmq.job.retried` with `duration_ms`, `delay_ms`, `error`; counter
/// `bullmq_jobs_retried_total`; histogram `bullmq_job_duration_seconds{status="retried"}`).
/// `attempt` is the number of the attempt that failed.
pub fn job_retried(
    job: &JobTelemetry<'_>,
    duration: Duration,
    delay: Duration,
    error: &dyn fmt::Display,
) {
    tracing::event!(target: TARGET, Level::INFO, event = ev::JOB_RETRIED, queue = job.queue,
        job.id = job.job_id, job.name = job.job_name, attempt = job.attempt,
        worker = job.worker, duration_ms = millis(duration), delay_ms = millis(delay),
        error = %error, "job will be retried");
    recorder::finished(job.queue, job.job_name, Status::Retried, duration);
}

/// A processor reported progress (`bullmq.job.progress` with `progress` as JSON text).
/// Emitted at TRACE: progress can be frequent.
pub fn job_progress(job: &JobTelemetry<'_>, progress: &serde_json::Value) {
    tracing::event!(target: TARGET, Level::TRACE, event = ev::JOB_PROGRESS, queue = job.queue,
        job.id = job.job_id, job.name = job.job_name, attempt = job.attempt,
        worker = job.worker, progress = %progress, "job progress");
}

/// A running job's token was cancelled: `cause` is `requested` (`WorkerHandle::cancel_job` /
/// `cancel_all_jobs`) or `timed_out` (its timeout), `reason` the `failedReason` the attempt
/// fails with (`bullmq.job.cancelled`, INFO).
pub fn job_cancelled(job: &JobTelemetry<'_>, cause: &str, reason: &str) {
    tracing::event!(target: TARGET, Level::INFO, event = ev::JOB_CANCELLED, queue = job.queue,
        job.id = job.job_id, job.name = job.job_name, attempt = job.attempt,
        worker = job.worker, cause, reason, "job cancelled");
}

/// A worker's concurrency was set to `concurrency` at run time
/// (`bullmq.worker.concurrency_changed`, INFO).
pub fn worker_concurrency_changed(queue: &str, worker: &str, concurrency: usize) {
    tracing::event!(target: TARGET, Level::INFO, event = ev::WORKER_CONCURRENCY_CHANGED, queue,
        worker, concurrency, "worker concurrency changed");
}

/// A worker started consuming `queue` with `concurrency` slots (`bullmq.worker.started`;
/// gauge `bullmq_workers` +1). Pair it with [`worker_stopped`].
pub fn worker_started(queue: &str, worker: &str, concurrency: usize) {
    tracing::event!(target: TARGET, Level::INFO, event = ev::WORKER_STARTED, queue, worker,
        concurrency, "worker started");
    recorder::workers(queue, 1.0);
}

/// A worker stopped after running for `uptime` (`bullmq.worker.stopped` with `uptime_s`;
/// gauge `bullmq_workers` −1).
pub fn worker_stopped(queue: &str, worker: &str, uptime: Duration) {
    tracing::event!(target: TARGET, Level::INFO, event = ev::WORKER_STOPPED, queue, worker,
        uptime_s = uptime.as_secs_f64(), "worker stopped");
    recorder::workers(queue, -1.0);
}

/// A stalled-jobs check ran: `recovered` jobs went back to wait, `failed` exceeded
/// `maxStalledCount` (`bullmq.worker.stalled_check`, WARN when either is non-zero; counter
/// `bullmq_jobs_stalled_total{outcome}`).
pub fn stalled_check(queue: &str, worker: &str, recovered: u64, failed: u64) {
    if recovered > 0 || failed > 0 {
        tracing::event!(target: TARGET, Level::WARN, event = ev::STALLED_CHECK, queue, worker,
            recovered, failed, "stalled jobs found");
    } else {
        tracing::event!(target: TARGET, Level::DEBUG, event = ev::STALLED_CHECK, queue, worker,
            recovered, failed, "stalled check");
    }
    recorder::stalled(queue, recovered, failed);
}

/// The queue was paused (`bullmq.queue.paused`).
pub fn queue_paused(queue: &str) {
    tracing::event!(target: TARGET, Level::INFO, event = ev::QUEUE_PAUSED, queue,
        "queue paused");
}

/// The queue was resumed (`bullmq.queue.resumed`).
pub fn queue_resumed(queue: &str) {
    tracing::event!(target: TARGET, Level::INFO, event = ev::QUEUE_RESUMED, queue,
        "queue resumed");
}

/// An admin drained the queue (`bullmq.queue.drained`, from `Queue::drain`).
pub fn queue_drained(queue: &str) {
    tracing::event!(target: TARGET, Level::DEBUG, event = ev::QUEUE_DRAINED, queue,
        "queue drained");
}

/// Worker `worker` found no job to run in `queue` (`bullmq.worker.queue_empty`; the moment
/// Node's Worker emits `drained`). Reported once until a fetch finds jobs again.
pub fn worker_queue_empty(queue: &str, worker: &str) {
    tracing::event!(target: TARGET, Level::DEBUG, event = ev::WORKER_QUEUE_EMPTY, queue, worker,
        "queue empty");
}

/// The store refused to record how job `job_id` ended (`bullmq.job.finish_refused` with
/// `error`, Node's message for the refusal code): its lock was lost or taken, it was moved or
/// removed, or it still has children. WARN: the job was not finished as the worker meant.
pub fn finish_refused(queue: &str, worker: &str, job_id: &str, error: &dyn fmt::Display) {
    tracing::event!(target: TARGET, Level::WARN, event = ev::JOB_FINISH_REFUSED, queue, worker,
        job.id = job_id, error = %error, "finish refused");
}

/// The queue's rate limit was reached; fetching resumes after `delay`
/// (`bullmq.rate_limit.hit` with `delay_ms`; counter `bullmq_rate_limit_hits_total`).
/// `worker` is empty when not reported by a worker.
pub fn rate_limit_hit(queue: &str, worker: &str, delay: Duration) {
    tracing::event!(target: TARGET, Level::INFO, event = ev::RATE_LIMIT_HIT, queue, worker,
        delay_ms = millis(delay), "rate limit hit");
    recorder::rate_limited(queue);
}

/// `component` (`worker`, `queue_events`) of `queue` lost its connection to the backend and
/// retries with backoff (`bullmq.connection.lost` with `component`, `error`). Reported once per
/// outage, however many retries fail during it.
pub fn connection_lost(queue: &str, component: &str, error: &dyn std::fmt::Display) {
    tracing::event!(target: TARGET, Level::WARN, event = ev::CONNECTION_LOST, queue, component,
        error = %error, "connection lost; retrying with backoff");
}

/// A Worker of `queue` made no store progress for `stalled_for` (more than its
/// `progress_timeout`) and stops with an error, for its supervisor to restart it
/// (`bullmq.worker.stuck` with `worker`, `stalled_for_ms`).
pub fn worker_stuck(queue: &str, worker: &str, stalled_for: Duration) {
    tracing::event!(target: TARGET, Level::ERROR, event = ev::WORKER_STUCK, queue, worker,
        stalled_for_ms = millis(stalled_for), "worker made no progress; stopping it for a restart");
}

/// `component` of `queue` works again after an outage of `downtime`
/// (`bullmq.connection.restored` with `component`, `downtime_ms`).
pub fn connection_restored(queue: &str, component: &str, downtime: Duration) {
    tracing::event!(target: TARGET, Level::INFO, event = ev::CONNECTION_RESTORED, queue,
        component, downtime_ms = millis(downtime), "connection restored");
}
