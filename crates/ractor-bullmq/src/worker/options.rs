//! [`WorkerOptions`]: Node BullMQ's worker options in Rust form.

use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use bullmq_protocol::keys::DEFAULT_PREFIX;
use bullmq_protocol::KeepJobs;

use bullmq_backend::{Backend, WorkerStoreOptions};

use super::errors::WorkerError;
use super::{Job, JobRunner};
use crate::store::{Store, StoreResult, Traced};

/// A custom backoff strategy: given the attempts made so far (including the one that just
/// failed), the job, and the failure message, the delay before the next attempt, or `None` to
/// stop retrying (Node's strategy returning `-1`).
pub type BackoffStrategy = Arc<dyn Fn(u32, &Job, &str) -> Option<Duration> + Send + Sync>;

/// Worker rate limit: at most `max` jobs per `duration` across the queue (Node `limiter`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limiter {
    /// Jobs per window (Node `limiter.max`).
    pub max: u32,
    /// Window length (Node `limiter.duration`).
    pub duration: Duration,
}

/// Default of [`WorkerOptions::progress_timeout`]: six times the default `drain_delay`, and as
/// long as the Worker's own timeout of a single store call.
pub const DEFAULT_PROGRESS_TIMEOUT: Duration = Duration::from_secs(30);

/// Default of [`WorkerOptions::cancel_grace`].
pub const DEFAULT_CANCEL_GRACE: Duration = Duration::from_secs(5);

/// Options of a [`Worker`](super::Worker). Defaults are Node BullMQ's.
///
/// ```
/// use std::time::Duration;
/// use ractor_bullmq::worker::WorkerOptions;
/// let opts = WorkerOptions::new().concurrency(50).lock_duration(Duration::from_secs(60));
/// assert_eq!(opts.lock_renew_time(), Duration::from_secs(30));
/// ```
#[derive(Clone)]
#[non_exhaustive]
pub struct WorkerOptions {
    /// Jobs processed in parallel (Node `concurrency`, default 1).
    pub concurrency: usize,
    /// Lock time to live (Node `lockDuration`, default 30 s).
    pub lock_duration: Duration,
    /// Renew locks this often (Node `lockRenewTime`, default `lock_duration / 2`).
    pub lock_renew_time: Option<Duration>,
    /// Stalled check period (Node `stalledInterval`, default 30 s).
    pub stalled_interval: Duration,
    /// Times a job may stall before it fails (Node `maxStalledCount`, default 1).
    pub max_stalled_count: u32,
    /// How long an idle worker blocks waiting for jobs (Node `drainDelay`, default 5 s).
    pub drain_delay: Duration,
    /// Rate limit (Node `limiter`, default none).
    pub limiter: Option<Limiter>,
    /// Retention of completed jobs when the job does not set its own (Node
    /// `removeOnComplete`, default keep all).
    pub remove_on_complete: Option<KeepJobs>,
    /// Retention of failed jobs when the job does not set its own (Node `removeOnFail`).
    pub remove_on_fail: Option<KeepJobs>,
    /// Fail a job started more than this many times (Node `maxStartedAttempts`, default none).
    pub max_started_attempts: Option<u32>,
    /// Do not run stalled checks from this worker (Node `skipStalledCheck`, default false).
    pub skip_stalled_check: bool,
    /// Do not renew locks (Node `skipLockRenewal`, default false).
    pub skip_lock_renewal: bool,
    /// Start fetching as soon as spawned (Node `autorun`, default true).
    pub autorun: bool,
    /// Worker name: connection name suffix and the jobs' `pb` field (Node `name`).
    pub name: Option<String>,
    /// Key prefix (Node `prefix`, default `bull`).
    pub prefix: String,
    /// Keep Node-compatible per-minute metrics with this many points (Node
    /// `metrics.maxDataPoints`, default 0 = off).
    pub metrics_max_data_points: u32,
    /// Most finishes sent in one call (default 1000).
    pub max_finish_batch: usize,
    /// Custom backoff strategies by `backoff.type` name (Node `settings.backoffStrategy`).
    pub backoff_strategies: HashMap<String, BackoffStrategy>,
    /// How each in-flight job runs: a task the Worker supervises (default) or a linked actor.
    pub job_runner: JobRunner,
    /// Longest an attempt may run before its token is cancelled
    /// ([`CancelReason::TimedOut`](super::CancelReason::TimedOut)) and, if the processor has not
    /// returned after [`WorkerOptions::cancel_grace`], the attempt fails with `"job timed out
    /// after N ms"` (retried while attempts remain). Default none. Not in open-source Node
    /// BullMQ (a BullMQ Pro feature); [`WorkerOptions::job_timeouts`] overrides it per job name.
    pub job_timeout: Option<Duration>,
    /// Per job name timeouts, overriding [`WorkerOptions::job_timeout`] (default none).
    pub job_timeouts: HashMap<String, Duration>,
    /// After a requested cancellation (`WorkerHandle::cancel_job`) or a timeout, how long the
    /// processor may still run to return (e.g. to clean up) before the Worker drops it
    /// (default [`DEFAULT_CANCEL_GRACE`], 5 s). The attempt fails with the cancellation's
    /// reason either way. No Node equivalent (Node waits for the processor however long).
    pub cancel_grace: Duration,
    /// Progress watchdog: a Worker waiting on the store (a call or the marker wait in flight, or
    /// backing off after failures) without one successful answer for this long stops with
    /// [`WorkerError::NoProgress`], so that its supervisor restarts it on fresh connections
    /// instead of it staying "running" and idle after a failover (default
    /// [`DEFAULT_PROGRESS_TIMEOUT`], 30 s; `None` turns it off). Never less than twice
    /// [`WorkerOptions::drain_delay`] (see [`WorkerOptions::progress_bound`]): an idle Worker's
    /// marker wait lasts that long by design. A Worker idle by its own choice (paused, slots
    /// full, rate-limited) is not timed, nor one whose connection is known lost (its client is
    /// reconnecting by itself). No Node equivalent.
    pub progress_timeout: Option<Duration>,
}

impl Default for WorkerOptions {
    fn default() -> Self {
        Self {
            concurrency: 1,
            lock_duration: Duration::from_secs(30),
            lock_renew_time: None,
            stalled_interval: Duration::from_secs(30),
            max_stalled_count: 1,
            drain_delay: Duration::from_secs(5),
            limiter: None,
            remove_on_complete: None,
            remove_on_fail: None,
            max_started_attempts: None,
            skip_stalled_check: false,
            skip_lock_renewal: false,
            autorun: true,
            name: None,
            prefix: DEFAULT_PREFIX.to_string(),
            metrics_max_data_points: 0,
            max_finish_batch: 1000,
            backoff_strategies: HashMap::new(),
            job_runner: JobRunner::default(),
            job_timeout: None,
            job_timeouts: HashMap::new(),
            cancel_grace: DEFAULT_CANCEL_GRACE,
            progress_timeout: Some(DEFAULT_PROGRESS_TIMEOUT),
        }
    }
}

impl fmt::Debug for WorkerOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("WorkerOptions")
            .field("concurrency", &self.concurrency)
            .field("lock_duration", &self.lock_duration)
            .field("lock_renew_time", &self.lock_renew_time())
            .field("stalled_interval", &self.stalled_interval)
            .field("max_stalled_count", &self.max_stalled_count)
            .field("drain_delay", &self.drain_delay)
            .field("limiter", &self.limiter)
            .field("remove_on_complete", &self.remove_on_complete)
            .field("remove_on_fail", &self.remove_on_fail)
            .field("max_started_attempts", &self.max_started_attempts)
            .field("skip_stalled_check", &self.skip_stalled_check)
            .field("skip_lock_renewal", &self.skip_lock_renewal)
            .field("autorun", &self.autorun)
            .field("name", &self.name)
            .field("prefix", &self.prefix)
            .field("metrics_max_data_points", &self.metrics_max_data_points)
            .field("max_finish_batch", &self.max_finish_batch)
            .field(
                "backoff_strategies",
                &self.backoff_strategies.keys().collect::<Vec<_>>(),
            )
            .field("job_runner", &self.job_runner)
            .field("job_timeout", &self.job_timeout)
            .field("job_timeouts", &self.job_timeouts)
            .field("cancel_grace", &self.cancel_grace)
            .field("progress_timeout", &self.progress_timeout)
            .finish()
    }
}

macro_rules! setter {
    ($(#[$doc:meta])* $name:ident: $ty:ty) => {
        $(#[$doc])*
        #[must_use]
        pub fn $name(mut self, value: $ty) -> Self {
            self.$name = value;
            self
        }
    };
}

impl WorkerOptions {
    /// Node's defaults.
    pub fn new() -> Self {
        Self::default()
    }

    setter!(/// Sets [`WorkerOptions::concurrency`].
        concurrency: usize);
    setter!(/// Sets [`WorkerOptions::lock_duration`].
        lock_duration: Duration);
    setter!(/// Sets [`WorkerOptions::stalled_interval`].
        stalled_interval: Duration);
    setter!(/// Sets [`WorkerOptions::max_stalled_count`].
        max_stalled_count: u32);
    setter!(/// Sets [`WorkerOptions::drain_delay`].
        drain_delay: Duration);
    setter!(/// Sets [`WorkerOptions::skip_stalled_check`].
        skip_stalled_check: bool);
    setter!(/// Sets [`WorkerOptions::skip_lock_renewal`].
        skip_lock_renewal: bool);
    setter!(/// Sets [`WorkerOptions::autorun`].
        autorun: bool);
    setter!(/// Sets [`WorkerOptions::metrics_max_data_points`].
        metrics_max_data_points: u32);
    setter!(/// Sets [`WorkerOptions::max_finish_batch`].
        max_finish_batch: usize);
    setter!(/// Sets [`WorkerOptions::job_runner`].
        job_runner: JobRunner);

    setter!(/// Sets [`WorkerOptions::cancel_grace`].
        cancel_grace: Duration);
    setter!(/// Sets [`WorkerOptions::progress_timeout`] (`None` turns the watchdog off).
        progress_timeout: Option<Duration>);

    /// The progress watchdog's effective bound: [`WorkerOptions::progress_timeout`], raised to
    /// twice [`WorkerOptions::drain_delay`]; `None` when the watchdog is off.
    ///
    /// ```
    /// use std::time::Duration;
    /// use ractor_bullmq::worker::WorkerOptions;
    /// let opts = WorkerOptions::new().progress_timeout(Some(Duration::from_secs(3)));
    /// assert_eq!(opts.progress_bound(), Some(Duration::from_secs(10)), "2 x drain_delay");
    /// let opts = opts.drain_delay(Duration::from_secs(1));
    /// assert_eq!(opts.progress_bound(), Some(Duration::from_secs(3)));
    /// assert_eq!(opts.progress_timeout(None).progress_bound(), None);
    /// ```
    pub fn progress_bound(&self) -> Option<Duration> {
        self.progress_timeout
            .map(|timeout| timeout.max(self.drain_delay.saturating_mul(2)))
    }

    /// Sets [`WorkerOptions::job_timeout`].
    ///
    /// ```
    /// use std::time::Duration;
    /// use ractor_bullmq::worker::WorkerOptions;
    /// let opts = WorkerOptions::new()
    ///     .job_timeout(Duration::from_secs(30))
    ///     .job_timeout_for("video", Duration::from_secs(600));
    /// assert_eq!(opts.timeout_for("email"), Some(Duration::from_secs(30)));
    /// assert_eq!(opts.timeout_for("video"), Some(Duration::from_secs(600)));
    /// ```
    #[must_use]
    pub fn job_timeout(mut self, timeout: Duration) -> Self {
        self.job_timeout = Some(timeout);
        self
    }

    /// Sets the timeout of jobs named `name` ([`WorkerOptions::job_timeouts`]).
    #[must_use]
    pub fn job_timeout_for(mut self, name: impl Into<String>, timeout: Duration) -> Self {
        self.job_timeouts.insert(name.into(), timeout);
        self
    }

    /// The timeout of a job named `name`: its per-name timeout, else
    /// [`WorkerOptions::job_timeout`].
    pub fn timeout_for(&self, name: &str) -> Option<Duration> {
        self.job_timeouts.get(name).copied().or(self.job_timeout)
    }

    /// Sets [`WorkerOptions::lock_renew_time`].
    #[must_use]
    pub fn with_lock_renew_time(mut self, value: Duration) -> Self {
        self.lock_renew_time = Some(value);
        self
    }

    /// Sets [`WorkerOptions::limiter`].
    #[must_use]
    pub fn limiter(mut self, max: u32, duration: Duration) -> Self {
        self.limiter = Some(Limiter { max, duration });
        self
    }

    /// Sets [`WorkerOptions::remove_on_complete`].
    #[must_use]
    pub fn remove_on_complete(mut self, keep: KeepJobs) -> Self {
        self.remove_on_complete = Some(keep);
        self
    }

    /// Sets [`WorkerOptions::remove_on_fail`].
    #[must_use]
    pub fn remove_on_fail(mut self, keep: KeepJobs) -> Self {
        self.remove_on_fail = Some(keep);
        self
    }

    /// Sets [`WorkerOptions::max_started_attempts`].
    #[must_use]
    pub fn max_started_attempts(mut self, value: u32) -> Self {
        self.max_started_attempts = Some(value);
        self
    }

    /// Sets [`WorkerOptions::name`].
    #[must_use]
    pub fn name(mut self, name: impl Into<String>) -> Self {
        self.name = Some(name.into());
        self
    }

    /// Sets [`WorkerOptions::prefix`].
    #[must_use]
    pub fn prefix(mut self, prefix: impl Into<String>) -> Self {
        self.prefix = prefix.into();
        self
    }

    /// Registers a custom backoff strategy used by jobs whose `backoff.type` is `name`.
    #[must_use]
    pub fn backoff_strategy<F>(mut self, name: impl Into<String>, strategy: F) -> Self
    where
        F: Fn(u32, &Job, &str) -> Option<Duration> + Send + Sync + 'static,
    {
        self.backoff_strategies
            .insert(name.into(), Arc::new(strategy));
        self
    }

    /// The effective lock renewal period.
    pub fn lock_renew_time(&self) -> Duration {
        self.lock_renew_time.unwrap_or(self.lock_duration / 2)
    }

    /// Opens the traced store a worker of `queue` with these options uses: named and
    /// sampling metrics as the options say (shared by the actor and the manual worker).
    pub(crate) async fn open_store(
        &self,
        backend: &dyn Backend,
        queue: &str,
    ) -> StoreResult<Arc<dyn Store>> {
        let mut store_options = WorkerStoreOptions::default();
        store_options.worker_name = self.name.clone();
        store_options.metrics_max_points = self.metrics_max_data_points;
        let queue = bullmq_protocol::QueueId::new(self.prefix.clone(), queue);
        let store = backend.worker_store(&queue, &store_options).await?;
        Ok(Arc::new(Traced(store)))
    }

    /// Checks ranges.
    ///
    /// # Errors
    ///
    /// [`WorkerError::InvalidOption`] naming the first bad option.
    pub fn validate(&self) -> Result<(), WorkerError> {
        let bad = |option: &'static str, reason: &str| {
            Err(WorkerError::InvalidOption {
                option,
                reason: reason.to_string(),
            })
        };
        if self.concurrency == 0 {
            return bad("concurrency", "must be at least 1");
        }
        if self.lock_duration < Duration::from_millis(1) {
            return bad("lock_duration", "must be at least 1 ms");
        }
        if self.lock_renew_time() < Duration::from_millis(1) {
            return bad("lock_renew_time", "must be at least 1 ms");
        }
        if self.stalled_interval < Duration::from_millis(1) {
            return bad("stalled_interval", "must be at least 1 ms");
        }
        if let Some(limiter) = self.limiter {
            if limiter.max == 0 || limiter.duration.is_zero() {
                return bad("limiter", "max and duration must be positive");
            }
        }
        if self.max_finish_batch == 0 {
            return bad("max_finish_batch", "must be at least 1");
        }
        if self.prefix.is_empty() {
            return bad("prefix", "must not be empty");
        }
        let too_short = |d: &Duration| *d < Duration::from_millis(1);
        if self.job_timeout.as_ref().is_some_and(too_short) {
            return bad("job_timeout", "must be at least 1 ms");
        }
        if self.progress_timeout.as_ref().is_some_and(too_short) {
            return bad(
                "progress_timeout",
                "must be at least 1 ms (None turns it off)",
            );
        }
        if let Some(name) = self.job_timeouts.iter().find(|(_, d)| too_short(d)) {
            return bad(
                "job_timeouts",
                &format!("timeout of `{}` must be at least 1 ms", name.0),
            );
        }
        Ok(())
    }
}
