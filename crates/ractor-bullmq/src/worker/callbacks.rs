//! [`WorkerCallbacks`]: hooks fired by the Worker (Node's worker events).
//!
//! Callbacks run on the worker's actor (or, for progress, on the job's task): keep them short
//! and never block; hand heavy work to a channel or a spawned task.

use std::fmt;
use std::sync::Arc;

use serde_json::Value;

use super::errors::WorkerError;
use super::Job;

type Cb<T> = Option<Arc<T>>;

/// A job failed (it may be retried).
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct FailedJob {
    /// The job's id.
    pub id: String,
    /// The job, when its hash could be decoded.
    pub job: Option<Job>,
    /// `failedReason` of this attempt.
    pub reason: String,
    /// Whether another attempt was scheduled (to wait or delayed).
    pub will_retry: bool,
}

/// The hooks of one worker; all optional.
///
/// ```
/// use ractor_bullmq::worker::WorkerCallbacks;
/// let callbacks = WorkerCallbacks::new()
///     .on_completed(|job, value| tracing::info!(id = %job.id(), %value, "done"))
///     .on_failed(|failed| tracing::warn!(id = %failed.id, reason = %failed.reason, "failed"));
/// # drop(callbacks);
/// ```
#[derive(Clone, Default)]
#[allow(clippy::type_complexity)]
pub struct WorkerCallbacks {
    active: Cb<dyn Fn(&Job) + Send + Sync>,
    progress: Cb<dyn Fn(&str, &Value) + Send + Sync>,
    completed: Cb<dyn Fn(&Job, &Value) + Send + Sync>,
    failed: Cb<dyn Fn(&FailedJob) + Send + Sync>,
    error: Cb<dyn Fn(&WorkerError) + Send + Sync>,
    stalled: Cb<dyn Fn(&str) + Send + Sync>,
    lock_renewal_failed: Cb<dyn Fn(&[String]) + Send + Sync>,
    locks_renewed: Cb<dyn Fn(&[String]) + Send + Sync>,
    drained: Cb<dyn Fn() + Send + Sync>,
    ready: Cb<dyn Fn() + Send + Sync>,
    paused: Cb<dyn Fn() + Send + Sync>,
    resumed: Cb<dyn Fn() + Send + Sync>,
    closing: Cb<dyn Fn() + Send + Sync>,
    closed: Cb<dyn Fn() + Send + Sync>,
}

impl fmt::Debug for WorkerCallbacks {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("WorkerCallbacks").finish_non_exhaustive()
    }
}

impl WorkerCallbacks {
    /// No callbacks.
    pub fn new() -> Self {
        Self::default()
    }

    /// A job started (Node `active`).
    #[must_use]
    pub fn on_active(mut self, f: impl Fn(&Job) + Send + Sync + 'static) -> Self {
        self.active = Some(Arc::new(f));
        self
    }

    /// A processor reported progress (Node `progress`): job id and progress.
    #[must_use]
    pub fn on_progress(mut self, f: impl Fn(&str, &Value) + Send + Sync + 'static) -> Self {
        self.progress = Some(Arc::new(f));
        self
    }

    /// A job completed and was recorded (Node `completed`): the job and its return value.
    #[must_use]
    pub fn on_completed(mut self, f: impl Fn(&Job, &Value) + Send + Sync + 'static) -> Self {
        self.completed = Some(Arc::new(f));
        self
    }

    /// A job attempt failed and was recorded (Node `failed`).
    #[must_use]
    pub fn on_failed(mut self, f: impl Fn(&FailedJob) + Send + Sync + 'static) -> Self {
        self.failed = Some(Arc::new(f));
        self
    }

    /// The worker hit an error it recovers from by itself (Node `error`), e.g. Redis down.
    /// Store trouble is reported once per outage (a dropped connection or the first failed
    /// call), not once per retry; the next report comes after a success.
    #[must_use]
    pub fn on_error(mut self, f: impl Fn(&WorkerError) + Send + Sync + 'static) -> Self {
        self.error = Some(Arc::new(f));
        self
    }

    /// This worker's stalled check moved a job back to wait (Node `stalled`).
    #[must_use]
    pub fn on_stalled(mut self, f: impl Fn(&str) + Send + Sync + 'static) -> Self {
        self.stalled = Some(Arc::new(f));
        self
    }

    /// Locks could not be renewed; those jobs were cancelled (Node `lockRenewalFailed`).
    #[must_use]
    pub fn on_lock_renewal_failed(mut self, f: impl Fn(&[String]) + Send + Sync + 'static) -> Self {
        self.lock_renewal_failed = Some(Arc::new(f));
        self
    }

    /// The LockManager renewed locks (Node `locksRenewed`, whose `{ count, jobIds }` are
    /// `ids.len()` and `ids`): called after each renewal tick that renewed at least one lock,
    /// with the ids renewed, in the order the jobs were fetched. Ids whose lock could not be
    /// renewed go to [`WorkerCallbacks::on_lock_renewal_failed`] instead.
    #[must_use]
    pub fn on_locks_renewed(mut self, f: impl Fn(&[String]) + Send + Sync + 'static) -> Self {
        self.locks_renewed = Some(Arc::new(f));
        self
    }

    /// The queue ran dry for this worker (Node `drained`).
    #[must_use]
    pub fn on_drained(mut self, f: impl Fn() + Send + Sync + 'static) -> Self {
        self.drained = Some(Arc::new(f));
        self
    }

    /// The worker started and is about to take messages (Node `ready`); once, first.
    #[must_use]
    pub fn on_ready(mut self, f: impl Fn() + Send + Sync + 'static) -> Self {
        self.ready = Some(Arc::new(f));
        self
    }

    /// The worker stopped fetching after `pause` (Node `paused`); once per pause that changed
    /// something.
    #[must_use]
    pub fn on_paused(mut self, f: impl Fn() + Send + Sync + 'static) -> Self {
        self.paused = Some(Arc::new(f));
        self
    }

    /// The worker fetches again after `resume` of a paused worker (Node `resumed`).
    #[must_use]
    pub fn on_resumed(mut self, f: impl Fn() + Send + Sync + 'static) -> Self {
        self.resumed = Some(Arc::new(f));
        self
    }

    /// A close began (Node `closing`); once, however many `close` calls follow.
    #[must_use]
    pub fn on_closing(mut self, f: impl Fn() + Send + Sync + 'static) -> Self {
        self.closing = Some(Arc::new(f));
        self
    }

    /// The worker stopped and released its connections (Node `closed`); once, last. Not called
    /// when the worker crashes (a handler error, e.g. its LockManager died, or a panic).
    #[must_use]
    pub fn on_closed(mut self, f: impl Fn() + Send + Sync + 'static) -> Self {
        self.closed = Some(Arc::new(f));
        self
    }

    pub(crate) fn ready(&self) {
        call0(self.ready.as_deref());
    }
    pub(crate) fn paused(&self) {
        call0(self.paused.as_deref());
    }
    pub(crate) fn resumed(&self) {
        call0(self.resumed.as_deref());
    }
    pub(crate) fn closing(&self) {
        call0(self.closing.as_deref());
    }
    pub(crate) fn closed(&self) {
        call0(self.closed.as_deref());
    }
    pub(crate) fn active(&self, job: &Job) {
        if let Some(f) = &self.active {
            f(job);
        }
    }
    pub(crate) fn progress(&self, id: &str, progress: &Value) {
        if let Some(f) = &self.progress {
            f(id, progress);
        }
    }
    pub(crate) fn completed(&self, job: &Job, value: &Value) {
        if let Some(f) = &self.completed {
            f(job, value);
        }
    }
    pub(crate) fn failed(&self, failed: &FailedJob) {
        if let Some(f) = &self.failed {
            f(failed);
        }
    }
    pub(crate) fn error(&self, error: &WorkerError) {
        tracing::warn!(%error, "worker error");
        if let Some(f) = &self.error {
            f(error);
        }
    }
    pub(crate) fn stalled(&self, id: &str) {
        if let Some(f) = &self.stalled {
            f(id);
        }
    }
    pub(crate) fn lock_renewal_failed(&self, ids: &[String]) {
        if let Some(f) = &self.lock_renewal_failed {
            f(ids);
        }
    }
    pub(crate) fn locks_renewed(&self, ids: &[String]) {
        if let Some(f) = &self.locks_renewed {
            f(ids);
        }
    }
    pub(crate) fn drained(&self) {
        if let Some(f) = &self.drained {
            f();
        }
    }
}

fn call0(f: Option<&(dyn Fn() + Send + Sync)>) {
    if let Some(f) = f {
        f();
    }
}
