//! [`ManualWorker`]: a worker without a processor, driven by the caller.
//!
//! Every method is one store call (a blocking [`ManualWorker::get_next_job`] adds a wait on the
//! queue's marker and a second fetch). The lock token is the caller's, as in Node's
//! `getNextJob(token)`: the job's `:lock` holds exactly that value, so the caller can hand the
//! job to another process (or a Node worker) that knows the token. What to record for a failure
//! (retry at once, retry after backoff, fail for good) is decided by the same code as the
//! [`Worker`](crate::worker::Worker)'s.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::Value;
use tokio::task::JoinHandle;

use super::error::ManualError;
use super::job::ManualJob;
use crate::store::{
    now_ms, FetchRequest, Fetched, Finish, FinishAction, Receipt, StalledReport, Store,
};
use crate::telemetry::{self, JobTelemetry};
use crate::worker::callbacks::WorkerCallbacks;
use crate::worker::errors::check_lock_duration;
use crate::worker::fetched::read_fetched;
use crate::worker::options::WorkerOptions;
use crate::worker::outcome::{decide, failure, JobOutcome, Verdict};
use crate::worker::scheduling::advance_scheduler;
use crate::ConnectionConfig;
use bullmq_backend::Backend;
use bullmq_redis::RedisBackend;

/// How many jobs one `get_next_job` takes from the queue at most while it skips jobs it cannot
/// hand out (corrupted records, which it fails, and ids without a job): a bound, so a queue
/// full of broken jobs does not keep one call busy.
const MAX_SKIPPED: usize = 32;

/// A worker without a processor (Node's `new Worker(name, null)`): hands out jobs locked with
/// the caller's token and records how they ended. Opened like the
/// [`Worker`](crate::worker::Worker), with the same [`WorkerOptions`] (`lock_duration`,
/// `name`, `prefix`, `limiter`, `drain_delay`, retention, `max_started_attempts`, backoff
/// strategies, `stalled_interval`, `max_stalled_count`); `concurrency`, `autorun`,
/// `lock_renew_time` and the job runner do not apply.
///
/// Its connections are released by [`ManualWorker::close`], or when it is dropped.
///
/// Nothing runs in the background unless asked: no lock renewal (call
/// [`ManualWorker::extend_lock`]) and no stalled check (start it with
/// [`ManualWorker::start_stalled_check_timer`], or call [`ManualWorker::check_stalled`]), as in
/// Node, where a worker without a processor starts neither.
///
/// # Examples
///
/// ```no_run
/// use std::time::Duration;
/// use ractor_bullmq::worker::{ManualWorker, WorkerOptions};
/// use ractor_bullmq::ConnectionConfig;
///
/// # async fn demo() -> anyhow::Result<()> {
/// let config = ConnectionConfig::from_env()?;
/// let worker = ManualWorker::connect(&config, "emails", WorkerOptions::new()).await?;
/// let mut next = worker.get_next_job("my-token").await?;
/// while let Some(job) = next {
///     worker.extend_lock(&job, Duration::from_secs(30)).await?;
///     let value = serde_json::json!({ "sent": job.job().id() });
///     next = worker.move_to_completed(&job, value, true).await?;
/// }
/// worker.close().await;
/// # Ok(()) }
/// ```
pub struct ManualWorker {
    store: Arc<dyn Store>,
    opts: WorkerOptions,
    /// The worker's name in telemetry: its `name` option, else `manual`.
    label: Arc<str>,
    closed: AtomicBool,
    /// The stalled-check timer, when started.
    stalled_timer: Mutex<Option<JoinHandle<()>>>,
    /// `meta` fields already reported as holding garbage (once each).
    invalid_meta_reported: Mutex<std::collections::HashSet<String>>,
}

impl std::fmt::Debug for ManualWorker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ManualWorker")
            .field("queue", &self.store.queue_name())
            .field("options", &self.opts)
            .finish_non_exhaustive()
    }
}

impl ManualWorker {
    /// A manual worker on `store` (traced or not: wrap it in [`Traced`](crate::store::Traced) for the
    /// `bullmq.store.*` spans).
    ///
    /// # Errors
    ///
    /// [`ManualError::Worker`] for bad options.
    pub fn new(store: Arc<dyn Store>, options: WorkerOptions) -> Result<Self, ManualError> {
        options.validate()?;
        let label: Arc<str> = options.name.as_deref().unwrap_or("manual").into();
        Ok(Self {
            store,
            opts: options,
            label,
            closed: AtomicBool::new(false),
            stalled_timer: Mutex::new(None),
            invalid_meta_reported: Mutex::new(std::collections::HashSet::new()),
        })
    }

    /// Opens a traced store for `queue` on `backend` (prefix, worker name and metrics from
    /// `options`), as [`WorkerArgs::open`](crate::worker::WorkerArgs::open) does.
    ///
    /// # Errors
    ///
    /// [`ManualError::Worker`] for bad options, [`ManualError::Store`] when the backend cannot
    /// be reached.
    pub async fn open(
        backend: &dyn Backend,
        queue: &str,
        options: WorkerOptions,
    ) -> Result<Self, ManualError> {
        options.validate()?;
        let store = options.open_store(backend, queue).await?;
        Self::new(store, options)
    }

    /// Connects a traced Redis store for `queue`: [`ManualWorker::open`] on a
    /// [`RedisBackend`].
    ///
    /// # Errors
    ///
    /// As [`ManualWorker::open`].
    pub async fn connect(
        config: &ConnectionConfig,
        queue: &str,
        options: WorkerOptions,
    ) -> Result<Self, ManualError> {
        Self::open(&RedisBackend::new(config.clone()), queue, options).await
    }

    /// The queue's name.
    pub fn queue_name(&self) -> &str {
        self.store.queue_name()
    }

    /// The options the worker was opened with.
    pub fn options(&self) -> &WorkerOptions {
        &self.opts
    }

    /// Moves the next ready job to active, locked with `token` for `lock_duration`, and
    /// returns it (Node's `worker.getNextJob(token)`): emits `active`, stamps `processedOn`,
    /// `ats` and `pb` (the worker's name). When the queue is empty it blocks up to
    /// `drain_delay` (Node's `drainDelay`, default 5 s; less when a delayed job is due sooner)
    /// on the queue's marker, then tries once more; `None` when nothing came, or while the
    /// queue is rate limited. A job of a job scheduler gets its next iteration, as in Node.
    ///
    /// Jobs whose record cannot be read are failed for good (their `failedReason` names the
    /// field) and skipped, as the Worker does.
    ///
    /// # Errors
    ///
    /// [`ManualError::EmptyToken`], [`ManualError::Closed`], [`ManualError::Store`].
    ///
    /// # Cancel safety
    ///
    /// Not cancel safe: a job moved to active by a fetch whose future is dropped stays locked
    /// with `token` until the lock expires, then returns through stalled recovery.
    pub async fn get_next_job(&self, token: &str) -> Result<Option<ManualJob>, ManualError> {
        self.next_job(token, true).await
    }

    /// [`ManualWorker::get_next_job`] without blocking (Node's `getNextJob(token, { block:
    /// false })`): `None` at once when no job is ready.
    ///
    /// # Errors
    ///
    /// As [`ManualWorker::get_next_job`].
    ///
    /// # Cancel safety
    ///
    /// As [`ManualWorker::get_next_job`].
    pub async fn try_get_next_job(&self, token: &str) -> Result<Option<ManualJob>, ManualError> {
        self.next_job(token, false).await
    }

    /// Renews `job`'s lock for `duration` (Node's `job.extendLock(token, duration)`), which
    /// also takes the job off the stalled candidates.
    ///
    /// # Errors
    ///
    /// [`ManualError::LockNotExtended`] when the lock is gone or held by another token,
    /// [`ManualError::Closed`], [`ManualError::Store`].
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: renewing twice is harmless.
    pub async fn extend_lock(
        &self,
        job: &ManualJob,
        duration: Duration,
    ) -> Result<(), ManualError> {
        self.ensure_open()?;
        let pair = [(job.id().to_owned(), job.token().to_owned())];
        let lost = self.store.extend_locks(&pair, duration).await?;
        if lost.is_empty() {
            Ok(())
        } else {
            Err(ManualError::LockNotExtended {
                job_id: job.id().to_owned(),
            })
        }
    }

    /// Renews the locks of `(job id, lock token)` pairs to `duration` in one call (Node
    /// `worker.extendJobLocks(jobIds, tokens, duration)`): a lock is renewed only while it
    /// still holds its token, and a renewed job leaves the `stalled` set. Returns the ids whose
    /// lock is missing or held by another token, in the order given; empty when all were
    /// renewed.
    ///
    /// # Errors
    ///
    /// [`ManualError::Worker`] ([`WorkerError::InvalidArgument`](crate::worker::WorkerError::InvalidArgument))
    /// for a `duration` under 1 ms (nothing sent), [`ManualError::Closed`],
    /// [`ManualError::Store`].
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: renewing twice is harmless.
    pub async fn extend_job_locks(
        &self,
        jobs: &[(String, String)],
        duration: Duration,
    ) -> Result<Vec<String>, ManualError> {
        self.ensure_open()?;
        check_lock_duration("duration", duration)?;
        if jobs.is_empty() {
            return Ok(Vec::new());
        }
        Ok(self.store.extend_locks(jobs, duration).await?)
    }

    /// Completes `job` with `value` as its `returnvalue` (Node's `job.moveToCompleted(value,
    /// token, fetchNext)`): checks the token, emits `completed`, applies `removeOnComplete`
    /// (the job's, else the worker's), and with `fetch_next` takes the next job, locked with the
    /// same token, in the same round trip.
    ///
    /// # Errors
    ///
    /// A refusal naming the job ([`ManualError::LockMismatch`], [`ManualError::LockMissing`],
    /// [`ManualError::NotActive`], [`ManualError::JobMissing`],
    /// [`ManualError::PendingChildren`], [`ManualError::FailedChildren`]), after which the job
    /// is unchanged; [`ManualError::Closed`], [`ManualError::Store`].
    ///
    /// # Cancel safety
    ///
    /// Not cancel safe: the job may be completed (and a next job fetched) when the future is
    /// dropped.
    pub async fn move_to_completed(
        &self,
        job: &ManualJob,
        value: Value,
        fetch_next: bool,
    ) -> Result<Option<ManualJob>, ManualError> {
        self.finish(job, JobOutcome::Completed(value), fetch_next)
            .await
    }

    /// Records a failed attempt of `job` (Node's `job.moveToFailed(err, token, fetchNext)`):
    /// with attempts left (the job's `attempts`) it is retried, at once (back to wait) or after
    /// its `backoff` (to delayed); otherwise, or for an
    /// [`UnrecoverableError`](crate::worker::UnrecoverableError), it fails for good with
    /// `failedReason` = the error's message, `retries-exhausted` when attempts ran out, and
    /// `removeOnFail`. With `fetch_next` the next job is taken in the same round trip, except
    /// after a retry at once, for which Node fetches nothing either.
    ///
    /// # Errors
    ///
    /// As [`ManualWorker::move_to_completed`].
    ///
    /// # Cancel safety
    ///
    /// As [`ManualWorker::move_to_completed`].
    pub async fn move_to_failed(
        &self,
        job: &ManualJob,
        error: impl Into<anyhow::Error>,
        fetch_next: bool,
    ) -> Result<Option<ManualJob>, ManualError> {
        let error = error.into();
        self.finish(job, failure(&error), fetch_next).await
    }

    /// Moves `job` to `delayed` for `delay` without counting an attempt (Node's
    /// `job.moveToDelayed(timestamp, token)`): emits `delayed`; the job is ready again after
    /// `delay`, and the next fetch locks it anew.
    ///
    /// # Errors
    ///
    /// As [`ManualWorker::move_to_completed`] (command `moveToDelayed`).
    ///
    /// # Cancel safety
    ///
    /// Not cancel safe: the job may be delayed when the future is dropped.
    pub async fn move_to_delayed(
        &self,
        job: &ManualJob,
        delay: Duration,
    ) -> Result<(), ManualError> {
        self.ensure_open()?;
        let code = self
            .store
            .move_to_delayed(job.id(), job.token(), delay)
            .await?;
        match ManualError::refusal(job.id(), code, "moveToDelayed", None) {
            Some(error) => {
                telemetry::finish_refused(self.queue_name(), &self.label, job.id(), &error);
                Err(error)
            }
            None => Ok(()),
        }
    }

    /// Runs one stalled check now (what Node's stalled-check timer runs each
    /// `stalled_interval`): at most once per `stalled_interval` across every worker of the
    /// queue, active jobs without a lock go back to wait (`stalled`), and those stalled more
    /// than `max_stalled_count` times fail.
    ///
    /// # Errors
    ///
    /// [`ManualError::Closed`], [`ManualError::Store`].
    ///
    /// # Cancel safety
    ///
    /// Cancel safe in effect: a check cut short is completed by the next one.
    pub async fn check_stalled(&self) -> Result<StalledReport, ManualError> {
        self.ensure_open()?;
        let report = run_stalled_check(&*self.store, &self.opts, &self.label).await?;
        Ok(report)
    }

    /// Runs the stalled check every `stalled_interval` on a task, until the worker is closed
    /// or dropped (Node's `worker.startStalledCheckTimer()`, which a worker without a processor
    /// does not start on its own). Calling it again does nothing.
    ///
    /// # Errors
    ///
    /// [`ManualError::Closed`].
    pub fn start_stalled_check_timer(&self) -> Result<(), ManualError> {
        self.ensure_open()?;
        let mut timer = self
            .stalled_timer
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if timer.is_some() {
            return Ok(());
        }
        let store = self.store.clone();
        let opts = self.opts.clone();
        let label = self.label.clone();
        *timer = Some(tokio::spawn(async move {
            let mut tick = tokio::time::interval(opts.stalled_interval);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tick.tick().await;
                if let Err(error) = run_stalled_check(&*store, &opts, &label).await {
                    tracing::warn!(queue = store.queue_name(), %error, "stalled check failed");
                }
            }
        }));
        Ok(())
    }

    /// Stops the stalled-check timer and releases the worker's connections. Jobs it handed out
    /// and that are not finished stay active under their locks and return through stalled
    /// recovery once the locks expire. Idempotent.
    pub async fn close(&self) {
        if self.closed.swap(true, Ordering::SeqCst) {
            return;
        }
        self.stop_timer();
        self.store.close().await;
    }

    /// Whether [`ManualWorker::close`] was called.
    pub fn is_closed(&self) -> bool {
        self.closed.load(Ordering::SeqCst)
    }

    // ---- fetching ----

    async fn next_job(&self, token: &str, block: bool) -> Result<Option<ManualJob>, ManualError> {
        self.ensure_open()?;
        if token.is_empty() {
            return Err(ManualError::EmptyToken);
        }
        let request = self.request(token);
        let mut skipped = 0;
        let mut blocked = false;
        loop {
            let fetched = self.store.fetch_batch(&request).await?;
            let taken = fetched.jobs.len() + fetched.corrupted.len() + fetched.dropped.len();
            let (rate_limited, next_delayed_at) =
                (!fetched.rate_limited_for.is_zero(), fetched.next_delayed_at);
            if let Some(job) = self.accept(fetched).await? {
                return Ok(Some(job));
            }
            if taken > 0 {
                // Skipped broken jobs: the queue may hold more.
                skipped += taken;
                if skipped < MAX_SKIPPED {
                    continue;
                }
                return Ok(None);
            }
            // As Node: nothing is fetched while rate limited, and one wait per call.
            if !block || blocked || rate_limited {
                return Ok(None);
            }
            let mut timeout = self.opts.drain_delay;
            if let Some(at) = next_delayed_at {
                timeout = timeout.min(Duration::from_millis(at.saturating_sub(now_ms())));
            }
            if !timeout.is_zero() {
                self.store.wait_for_job(timeout).await?;
            }
            blocked = true;
        }
    }

    /// The fetch request of one job locked with the caller's token.
    fn request(&self, token: &str) -> FetchRequest {
        let mut request = FetchRequest::new(1, "manual", self.opts.lock_duration).with_token(token);
        request.worker_name = self.opts.name.clone();
        request.limiter = self.opts.limiter.map(|l| (l.max, l.duration));
        request
    }

    /// The first job of `fetched` to hand out. The others are failed for good (unreadable,
    /// or deferred by the store) and reported, as by the Worker; a fetch of one job has no
    /// others.
    async fn accept(&self, fetched: Fetched) -> Result<Option<ManualJob>, ManualError> {
        for corrupted in &fetched.corrupted {
            tracing::warn!(queue = self.queue_name(), job_id = %corrupted.id, reason = %corrupted.reason,
                "corrupted job failed by the store");
        }
        for id in &fetched.dropped {
            tracing::warn!(queue = self.queue_name(), job_id = %id, "job id without a job hash removed");
        }
        for (field, value) in &fetched.invalid_settings {
            let first = self
                .invalid_meta_reported
                .lock()
                .map(|mut reported| reported.insert(field.clone()))
                .unwrap_or(false);
            if first {
                let error = crate::worker::WorkerError::InvalidQueueMeta {
                    field: field.clone(),
                    value: value.clone(),
                };
                tracing::warn!(queue = self.queue_name(), %field, %value, "{error}");
            }
        }
        let mut first = None;
        for job in fetched.jobs {
            match read_fetched(self.queue_name(), job) {
                Ok((job, lease, next_iteration)) => {
                    advance_scheduler(
                        &self.store,
                        &WorkerCallbacks::default(),
                        &job,
                        next_iteration,
                    );
                    let manual = ManualJob::fetched(job, lease.token, lease.receipt);
                    if first.is_none() {
                        first = Some(manual);
                    } else {
                        // Not reached with one job per fetch; leave it to stalled recovery
                        // rather than hold a job nobody sees.
                        tracing::warn!(
                            job_id = manual.id(),
                            "extra job fetched; left to stalled recovery"
                        );
                    }
                }
                Err(unreadable) => {
                    self.fail_unreadable(
                        &unreadable.id,
                        &unreadable.token,
                        unreadable.reason,
                        unreadable.receipt,
                    )
                    .await?;
                }
            }
        }
        Ok(first)
    }

    /// Fails a fetched job whose record cannot be read, with the store's reason.
    async fn fail_unreadable(
        &self,
        id: &str,
        token: &str,
        reason: String,
        receipt: Receipt,
    ) -> Result<(), ManualError> {
        tracing::warn!(queue = self.queue_name(), job_id = id, %reason, "unreadable job failed");
        let finish = Finish {
            job_id: id.to_owned(),
            token: token.to_owned(),
            action: Verdict::unreadable(reason).action(),
            receipt,
        };
        self.store.finish_batch(&[finish], None).await?;
        Ok(())
    }

    // ---- finishing ----

    async fn finish(
        &self,
        job: &ManualJob,
        outcome: JobOutcome,
        fetch_next: bool,
    ) -> Result<Option<ManualJob>, ManualError> {
        self.ensure_open()?;
        // Completions and failures always have a verdict (only lost locks and cancellations,
        // which a caller cannot report, have none).
        let Some(verdict) = decide(job.job(), outcome, &self.opts) else {
            return Ok(None);
        };
        let action = verdict.action();
        // Node's retryJob fetches nothing.
        let fetch = fetch_next && !matches!(action, FinishAction::Retry { .. });
        // As Node's moveToFinished: nothing is fetched after a refusal.
        let request = fetch.then(|| self.request(job.token()).only_if_finished());
        let finish = Finish {
            job_id: job.id().to_owned(),
            token: job.token().to_owned(),
            action,
            receipt: job.receipt(),
        };
        let reply = self
            .store
            .finish_batch(std::slice::from_ref(&finish), request.as_ref())
            .await?;
        // A backend answers one code per finish; none is reported as an unknown code.
        let code = reply
            .codes
            .first()
            .copied()
            .unwrap_or(crate::store::FinishCode::Other(0));
        let corrupted = reply.corrupted.first().map(|(_, reason)| reason.clone());
        if let Some(error) = ManualError::refusal(job.id(), code, verdict.command(), corrupted) {
            telemetry::finish_refused(self.queue_name(), &self.label, job.id(), &error);
            // `only_if_finished`: the call fetched nothing.
            return Err(error);
        }
        let jt = JobTelemetry::from_job(job.job(), &self.label);
        let ran_for = job.job().processed_on().map_or(Duration::ZERO, |at| {
            Duration::from_millis(now_ms().saturating_sub(at))
        });
        telemetry::job_finished(&jt, verdict.attempt_end(), ran_for);
        let fetched = reply.fetched;
        let taken = fetched.jobs.len() + fetched.corrupted.len() + fetched.dropped.len();
        match self.accept(fetched).await? {
            Some(next) => Ok(Some(next)),
            // The fetched job could not be handed out (a corrupted record, failed): look on.
            None if taken > 0 => self.next_job(job.token(), false).await,
            None => Ok(None),
        }
    }

    fn ensure_open(&self) -> Result<(), ManualError> {
        if self.is_closed() {
            Err(ManualError::Closed)
        } else {
            Ok(())
        }
    }

    fn stop_timer(&self) {
        let mut timer = self
            .stalled_timer
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(timer) = timer.take() {
            timer.abort();
        }
    }
}

impl Drop for ManualWorker {
    /// A worker dropped without [`ManualWorker::close`] still releases its connections (on a
    /// task, when a runtime is there to run it) and stops its timer.
    fn drop(&mut self) {
        self.stop_timer();
        if !self.closed.swap(true, Ordering::SeqCst) {
            if let Ok(runtime) = tokio::runtime::Handle::try_current() {
                let store = self.store.clone();
                runtime.spawn(async move { store.close().await });
            }
        }
    }
}

/// One stalled check with the worker's options, reported as the Worker's are.
async fn run_stalled_check(
    store: &dyn Store,
    opts: &WorkerOptions,
    label: &str,
) -> Result<StalledReport, crate::store::StoreError> {
    let report = store
        .check_stalled(opts.max_stalled_count, opts.stalled_interval)
        .await?;
    telemetry::stalled_check(
        store.queue_name(),
        label,
        report.recovered.len() as u64,
        report.corrupted.len() as u64,
    );
    Ok(report)
}
