//! [`WorkerHandle`]: control of a spawned Worker.

use std::sync::Arc;
use std::time::Duration;

use ractor::{ActorRef, ActorStatus};
use tokio::sync::Mutex;
use tokio::task::JoinHandle;

use super::close::{close_in_two_steps, CloseOutcome};
use super::errors::{check_lock_duration, WorkerError};
use super::worker::{CloseReport, WorkerMsg};

/// The part of a [`WorkerHandle::close_timeout`] kept for the forced close that ends it: at most
/// this, and at most half of the timeout.
const FORCED_RESERVE: Duration = Duration::from_secs(2);

/// What a bounded close may overrun its timeout by: scheduling, and the actor's last turn.
const CLOSE_SLACK: Duration = Duration::from_millis(500);

/// Controls one Worker. Cheap to clone; every clone talks to the same actor.
#[derive(Debug, Clone)]
pub struct WorkerHandle {
    actor: ActorRef<WorkerMsg>,
    join: Arc<Mutex<Option<JoinHandle<()>>>>,
}

impl WorkerHandle {
    pub(crate) fn new(actor: ActorRef<WorkerMsg>, join: JoinHandle<()>) -> Self {
        Self {
            actor,
            join: Arc::new(Mutex::new(Some(join))),
        }
    }

    /// The Worker actor, e.g. to link or monitor it.
    pub fn actor(&self) -> &ActorRef<WorkerMsg> {
        &self.actor
    }

    fn send(&self, msg: WorkerMsg) -> Result<(), WorkerError> {
        self.actor.cast(msg).map_err(|_| WorkerError::NotRunning)
    }

    /// Stops fetching new jobs; running jobs continue (Node `worker.pause(true)`).
    ///
    /// # Errors
    ///
    /// [`WorkerError::NotRunning`] when the worker has stopped.
    pub fn pause(&self) -> Result<(), WorkerError> {
        self.send(WorkerMsg::Pause)
    }

    /// Fetches again after [`WorkerHandle::pause`].
    ///
    /// # Errors
    ///
    /// [`WorkerError::NotRunning`] when the worker has stopped.
    pub fn resume(&self) -> Result<(), WorkerError> {
        self.send(WorkerMsg::Resume)
    }

    /// Starts fetching, for a worker spawned with `autorun = false` (Node `worker.run()`).
    ///
    /// # Errors
    ///
    /// [`WorkerError::NotRunning`] when the worker has stopped.
    pub fn run(&self) -> Result<(), WorkerError> {
        self.send(WorkerMsg::Run)
    }

    /// Fetches one job now (when a slot is free and no other fetch is in flight) and starts
    /// processing it; returns its id, or `None` when nothing was ready.
    ///
    /// # Errors
    ///
    /// [`WorkerError::NotRunning`] when the worker has stopped.
    pub async fn get_next_job(&self) -> Result<Option<String>, WorkerError> {
        ractor::call!(self.actor, WorkerMsg::GetNextJob).map_err(|_| WorkerError::NotRunning)
    }

    /// Jobs running now.
    ///
    /// # Errors
    ///
    /// [`WorkerError::NotRunning`] when the worker has stopped.
    pub async fn active_count(&self) -> Result<usize, WorkerError> {
        ractor::call!(self.actor, WorkerMsg::ActiveCount).map_err(|_| WorkerError::NotRunning)
    }

    /// Cancels the running job `job_id` (Node `worker.cancelJob(id, reason)`): its processor's
    /// cancellation token fires ([`CancelReason::Requested`](super::CancelReason::Requested)),
    /// the processor has the worker's `cancel_grace` to return, and the attempt fails with
    /// `failedReason` = `reason` (default `"job cancelled"`), retried while attempts remain,
    /// whatever the processor returned. Returns whether the job was running here and not
    /// cancelled already (a second cancellation keeps the first reason).
    ///
    /// Node's `cancelJob` only aborts the signal and records whatever the processor then
    /// does; a Node processor that honours the signal rejects with the reason, which is what
    /// is recorded here in every case.
    ///
    /// # Errors
    ///
    /// [`WorkerError::NotRunning`] when the worker has stopped.
    pub async fn cancel_job(
        &self,
        job_id: &str,
        reason: Option<&str>,
    ) -> Result<bool, WorkerError> {
        ractor::call!(self.actor, |reply| WorkerMsg::CancelJob {
            job_id: job_id.to_string(),
            reason: reason.map(str::to_string),
            reply,
        })
        .map_err(|_| WorkerError::NotRunning)
    }

    /// Cancels every job running now, as [`WorkerHandle::cancel_job`] (Node
    /// `worker.cancelAllJobs(reason)`); the worker goes on fetching. Returns how many jobs were
    /// cancelled.
    ///
    /// # Errors
    ///
    /// [`WorkerError::NotRunning`] when the worker has stopped.
    pub async fn cancel_all_jobs(&self, reason: Option<&str>) -> Result<usize, WorkerError> {
        ractor::call!(self.actor, |reply| WorkerMsg::CancelAllJobs {
            reason: reason.map(str::to_string),
            reply,
        })
        .map_err(|_| WorkerError::NotRunning)
    }

    /// Changes how many jobs run at once (Node `worker.concurrency = n`). Raised, the worker
    /// fetches for the new slots at once; lowered, running jobs go on and no job is fetched
    /// until fewer than `concurrency` run.
    ///
    /// # Errors
    ///
    /// [`WorkerError::InvalidOption`] for 0 (Node: "concurrency must be a finite number greater
    /// than 0"), [`WorkerError::NotRunning`] when the worker has stopped.
    pub fn set_concurrency(&self, concurrency: usize) -> Result<(), WorkerError> {
        if concurrency == 0 {
            return Err(WorkerError::InvalidOption {
                option: "concurrency",
                reason: "must be at least 1".to_string(),
            });
        }
        self.send(WorkerMsg::SetConcurrency(concurrency))
    }

    /// How many jobs may run at once now (Node `worker.concurrency`).
    ///
    /// # Errors
    ///
    /// [`WorkerError::NotRunning`] when the worker has stopped.
    pub async fn concurrency(&self) -> Result<usize, WorkerError> {
        ractor::call!(self.actor, WorkerMsg::Concurrency).map_err(|_| WorkerError::NotRunning)
    }

    /// Whether the worker is fetching jobs (started, not paused, not closing).
    pub async fn is_running(&self) -> bool {
        if !matches!(
            self.actor.get_status(),
            ActorStatus::Running | ActorStatus::Starting | ActorStatus::Upgrading
        ) {
            return false;
        }
        ractor::call!(self.actor, WorkerMsg::IsRunning).unwrap_or(false)
    }

    /// Whether the worker is paused (Node `worker.isPaused()`): `true` from
    /// [`WorkerHandle::pause`] (also asked before [`WorkerHandle::run`]) until
    /// [`WorkerHandle::resume`]. A closing or stopped worker is not paused (Node keeps the flag
    /// through its close; [`WorkerHandle::is_running`] is `false` there on both sides).
    pub async fn is_paused(&self) -> bool {
        ractor::call!(self.actor, WorkerMsg::IsPaused).unwrap_or(false)
    }

    /// Renews the locks of `(job id, lock token)` pairs to `duration` in one store call (Node
    /// `worker.extendJobLocks(jobIds, tokens, duration)`, its batch `extendLocks` script): a
    /// lock is renewed only while it still holds its token, and a renewed job leaves the
    /// `stalled` set. Returns the ids whose lock is missing or held by another token, in the
    /// order given (Node's reply); empty when all were renewed. Any job of the queue may be
    /// named, not only this worker's, and the LockManager's own renewals go on as before.
    ///
    /// # Errors
    ///
    /// [`WorkerError::InvalidArgument`] for a `duration` under 1 ms (nothing sent; Redis would
    /// refuse it), [`WorkerError::Store`] when the store fails, [`WorkerError::NotRunning`]
    /// when the worker has stopped.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: renewing twice is harmless.
    pub async fn extend_job_locks(
        &self,
        jobs: &[(String, String)],
        duration: Duration,
    ) -> Result<Vec<String>, WorkerError> {
        check_lock_duration("duration", duration)?;
        if jobs.is_empty() {
            return Ok(Vec::new());
        }
        let reply = ractor::call!(self.actor, |reply| WorkerMsg::ExtendJobLocks {
            jobs: jobs.to_vec(),
            duration,
            reply,
        })
        .map_err(|_| WorkerError::NotRunning)?;
        Ok(reply?)
    }

    /// Graceful close: stops fetching, waits for running jobs, records them, then stops.
    ///
    /// # Errors
    ///
    /// [`WorkerError::NotRunning`] when the worker had already stopped.
    pub async fn close(&self) -> Result<CloseReport, WorkerError> {
        self.close_with(false).await
    }

    /// Forced close: cancels running jobs (their tokens fire with
    /// [`CancelReason::Shutdown`](super::CancelReason::Shutdown)) and leaves them to stalled
    /// recovery; jobs already finished are still recorded. It waits at most a few seconds
    /// (3 s) for store calls in flight, so it returns even while Redis is unreachable; what was
    /// not confirmed by then is listed in the report as left for stalled recovery.
    ///
    /// # Errors
    ///
    /// [`WorkerError::NotRunning`] when the worker had already stopped.
    pub async fn close_force(&self) -> Result<CloseReport, WorkerError> {
        self.close_with(true).await
    }

    /// Graceful close bounded by `timeout` (Oban's Watchman pattern): running jobs may finish
    /// until shortly before it (all but `min(timeout / 2, 2 s)`); then they are cancelled as by
    /// [`WorkerHandle::close_force`], and store calls in flight are waited for only as long as
    /// the timeout leaves. It returns within `timeout` (plus a fraction of a second), also with
    /// Redis unreachable or unresponsive: jobs whose end was not confirmed are listed in the
    /// report as left for stalled recovery, and the connections finish closing in the
    /// background (they are released when the server answers again).
    ///
    /// # Errors
    ///
    /// [`WorkerError::NotRunning`] when the worker had already stopped;
    /// [`WorkerError::CloseTimedOut`] when the actor did not answer in time (it is killed, which
    /// releases its connections; its jobs are left to stalled recovery).
    pub async fn close_timeout(&self, timeout: Duration) -> Result<CloseReport, WorkerError> {
        let deadline = tokio::time::Instant::now() + timeout;
        let graceful = timeout.saturating_sub((timeout / 2).min(FORCED_RESERVE));
        let grace = || deadline.saturating_duration_since(tokio::time::Instant::now());
        match close_in_two_steps(&self.actor, graceful, grace, CLOSE_SLACK).await {
            CloseOutcome::Closed(report) => self.stopped(report, deadline).await,
            CloseOutcome::TimedOut => {
                tracing::warn!(worker = %self.actor.get_id(), ?timeout, "worker did not close in time; killing it");
                self.actor.kill();
                let _ = tokio::time::timeout(CLOSE_SLACK, self.wait()).await;
                Err(WorkerError::CloseTimedOut { after: timeout })
            }
            CloseOutcome::NotRunning => Err(WorkerError::NotRunning),
        }
    }

    /// The actor answered its close: waits for it to stop (its last turn), within the
    /// deadline and the slack.
    async fn stopped(
        &self,
        report: CloseReport,
        deadline: tokio::time::Instant,
    ) -> Result<CloseReport, WorkerError> {
        if tokio::time::timeout_at(deadline + CLOSE_SLACK, self.wait())
            .await
            .is_err()
        {
            // It answered, so only its `post_stop` is left (bounded as well): not worth a kill.
            tracing::debug!(worker = %self.actor.get_id(), "worker still stopping after its close answered");
        }
        Ok(report)
    }

    async fn close_with(&self, force: bool) -> Result<CloseReport, WorkerError> {
        let report = ractor::call!(self.actor, |reply| WorkerMsg::Close { force, reply })
            .map_err(|_| WorkerError::NotRunning)?;
        self.wait().await;
        Ok(report)
    }

    /// Waits until the worker actor has stopped (closed, or crashed).
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: the actor's join handle is only released once the actor has stopped, so a
    /// `wait` dropped by a `select!` leaves later `wait`/`close` calls able to wait again.
    pub async fn wait(&self) {
        // The lock is held across the await on purpose: concurrent waiters queue behind the
        // first and then find the handle gone, i.e. the actor already stopped.
        let mut join = self.join.lock().await;
        if let Some(handle) = join.as_mut() {
            let _ = handle.await;
            *join = None;
        }
    }
}
