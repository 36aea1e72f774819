//! The Worker's bookkeeping: slots, the one in-flight fetch-or-finish call, the blocking wait,
//! rate-limit and error back-off, starting job actors and recording finished jobs.

use std::time::{Duration, Instant};

use ractor::{Actor, ActorProcessingErr, ActorRef, RpcReplyPort};

use super::callbacks::FailedJob;
use super::context::JobContext;
use super::errors::WorkerError;
use super::job_actor::{JobActor, JobActorArgs};
use super::job_runner::{spawn_task, JobRunner};
use super::lock_manager::LockManagerMsg;
use super::outcome::{classify, record, CancelReason, Ended, JobOutcome};
use super::worker::{
    internal, CloseReport, InternalMsg, Pending, RunningJob, WorkerMsg, WorkerState,
};
use super::Job;
use crate::store::{
    now_ms, CorruptedJob, FetchRequest, Fetched, FetchedJob, Finish, FinishAction, FinishCode,
    FinishReply, Receipt, StoreError,
};
use crate::telemetry::{self, JobTelemetry};

/// Longest pause after repeated Redis errors.
const MAX_ERROR_BACKOFF: Duration = Duration::from_secs(5);

/// At most this many store calls in flight: a finish batch may go out while other calls are
/// still running, so Redis and the worker overlap instead of waiting for each other.
const MAX_INFLIGHT: usize = 3;

/// The third call in flight only carries at least this many finishes. Every call has a fixed
/// Redis cost (~300k instructions: script dispatch, meta reads, reply building) that small
/// batches do not amortise: a third call measured +12 % jobs/s at concurrency 100 and +30 % at
/// 1000, but -10 % at concurrency 10 when its batches were small.
const THIRD_CALL_MIN_BATCH: usize = 25;

/// How long a forced close waits for store calls already in flight (and for the finishes of
/// jobs that ended before it) before the Worker stops anyway: with Redis unreachable a call
/// would otherwise hold the close for [`CALL_TIMEOUT`]. What is still unconfirmed then is left
/// to stalled recovery and listed in the close report.
pub(super) const FORCE_CLOSE_GRACE: Duration = Duration::from_secs(3);

/// A store call that has not answered after this long is treated as failed, so a connection
/// that died silently cannot stall the worker forever (the call is retried).
const CALL_TIMEOUT: Duration = Duration::from_secs(30);

async fn guarded<T>(
    limit: Duration,
    call: impl std::future::Future<Output = crate::store::StoreResult<T>>,
) -> crate::store::StoreResult<T> {
    match tokio::time::timeout(limit, call).await {
        Ok(result) => result,
        Err(_) => Err(StoreError::Timeout {
            operation: "store call",
            after: limit,
        }),
    }
}

impl WorkerState {
    pub(super) fn free_slots(&self) -> usize {
        self.opts
            .concurrency
            .saturating_sub(self.running.len() + self.reserved)
    }

    fn may_fetch(&self) -> bool {
        self.started && !self.paused && self.closing.is_none()
    }

    fn fetch_request(&mut self, count: usize) -> FetchRequest {
        let mut request = FetchRequest::new(
            u32::try_from(count).unwrap_or(u32::MAX),
            self.token_prefix.clone(),
            self.opts.lock_duration,
        );
        request.worker_name = self.opts.name.clone();
        request.limiter = self.opts.limiter.map(|l| (l.max, l.duration));
        request
    }

    fn schedule_pump(&self, myself: &ActorRef<WorkerMsg>, after: Duration) {
        // A detached timer: dropping its handle does not cancel it.
        drop(myself.send_after(after, || internal(InternalMsg::Pump)));
    }

    /// Whether the pending finishes should go out now. With nothing in flight they go on the
    /// worker's next turn (after the finishes already in its mailbox joined them); a second
    /// call in flight waits for a quarter of the slots' worth of finishes, so batches stay
    /// large under load, and a third for [`THIRD_CALL_MIN_BATCH`]; closing, or with no job
    /// left running, they go at once (within those limits).
    fn finish_batch_due(&mut self, myself: &ActorRef<WorkerMsg>) -> bool {
        let flush_now = std::mem::take(&mut self.flush_now);
        if self.pending.is_empty() || self.inflight >= MAX_INFLIGHT {
            return false;
        }
        if self.inflight >= 2 && self.pending.len() < THIRD_CALL_MIN_BATCH {
            // Goes out with the next pump after a call returned.
            return false;
        }
        if self.closing.is_some() || self.running.is_empty() {
            return true;
        }
        if self.inflight > 0 {
            return self.pending.len() >= (self.opts.concurrency / 4).max(1);
        }
        if flush_now {
            return true;
        }
        if !self.flush_queued && myself.cast(internal(InternalMsg::Flush)).is_ok() {
            self.flush_queued = true;
            return false;
        }
        // The flush is already queued, or the mailbox is gone (stopping): nothing to wait for.
        !self.flush_queued
    }

    /// Starts the next Redis call: a finish batch (fetching for the free slots in the same
    /// call) when [`Self::finish_batch_due`], else — with nothing in flight — a fetch, or a
    /// blocking wait when the queue looked empty.
    pub(super) fn pump(&mut self, myself: &ActorRef<WorkerMsg>) {
        if let Some(until) = self.cooldown_until {
            if until > Instant::now() {
                return;
            }
            self.cooldown_until = None;
        }
        let now = Instant::now();
        let limited = self.limited_until.is_some_and(|until| until > now);
        let free = self.free_slots();
        if self.finish_batch_due(myself) {
            let take = self.pending.len().min(self.opts.max_finish_batch);
            let batch: Vec<Pending> = self.pending.drain(..take).collect();
            // Like Node's moveToFinished, always look for more work in the same round trip:
            // it also refreshes the next delayed timestamp. Even while rate-limited: the
            // script checks the limiter itself, and asking is what keeps it from writing a
            // `drained` Node would not write (Node's worker asks too).
            let fetch_count = if self.may_fetch() { free } else { 0 };
            let fetch = (fetch_count > 0).then(|| self.fetch_request(fetch_count));
            self.inflight += 1;
            self.reserved += fetch_count;
            let store = self.store.clone();
            let me = myself.clone();
            tokio::spawn(async move {
                let finishes: Vec<Finish> = batch.iter().map(|p| p.finish.clone()).collect();
                let result =
                    guarded(CALL_TIMEOUT, store.finish_batch(&finishes, fetch.as_ref())).await;
                let requested = fetch.map_or(0, |f| f.count);
                let _ = me.cast(internal(InternalMsg::Finished {
                    result: Box::new(result),
                    batch,
                    requested,
                }));
            });
            return;
        }
        if self.flush_queued {
            // The finish batch of the next turn fetches for the free slots too.
            return;
        }
        if self.inflight > 0 || !self.may_fetch() || free == 0 {
            return;
        }
        if let Some(until) = self.limited_until.filter(|_| limited) {
            // Look again when the limit window closes (one timer per window).
            if self.limit_timer_for != Some(until) {
                self.limit_timer_for = Some(until);
                self.schedule_pump(myself, until - now);
            }
            return;
        }
        let delayed_due = self.next_delayed_at.is_some_and(|at| at <= now_ms());
        if self.idle && !delayed_due {
            self.start_waiting(myself);
            return;
        }
        self.spawn_fetch(myself, free, None);
    }

    pub(super) fn spawn_fetch(
        &mut self,
        myself: &ActorRef<WorkerMsg>,
        count: usize,
        reply: Option<RpcReplyPort<Option<String>>>,
    ) {
        let request = self.fetch_request(count);
        self.inflight += 1;
        self.reserved += count;
        let store = self.store.clone();
        let me = myself.clone();
        tokio::spawn(async move {
            let result = guarded(CALL_TIMEOUT, store.fetch_batch(&request)).await;
            let _ = me.cast(internal(InternalMsg::Fetched {
                result: Box::new(result),
                requested: request.count,
                reply,
            }));
        });
    }

    /// Blocks on the marker until jobs may be ready, the next delayed job is due, or
    /// `drain_delay` passes.
    fn start_waiting(&mut self, myself: &ActorRef<WorkerMsg>) {
        if self.waiting.is_some() {
            return;
        }
        let mut timeout = self.opts.drain_delay;
        if let Some(at) = self.next_delayed_at {
            let until = Duration::from_millis(at.saturating_sub(now_ms()));
            timeout = timeout.min(until.max(Duration::from_millis(1)));
        }
        tracing::trace!(?timeout, "worker idle, waiting for jobs");
        let store = self.store.clone();
        let me = myself.clone();
        self.waiting = Some(tokio::spawn(async move {
            let result = guarded(timeout + CALL_TIMEOUT, store.wait_for_job(timeout)).await;
            let _ = me.cast(internal(InternalMsg::Woken(result)));
        }));
    }

    fn call_returned(&mut self, requested: u32) {
        self.inflight = self.inflight.saturating_sub(1);
        self.reserved = self.reserved.saturating_sub(requested as usize);
    }

    fn on_store_error(&mut self, myself: &ActorRef<WorkerMsg>, error: StoreError) {
        self.error_streak = self.error_streak.saturating_add(1);
        let backoff = Duration::from_millis(100u64.saturating_mul(1 << self.error_streak.min(6)))
            .min(MAX_ERROR_BACKOFF);
        self.cooldown_until = Some(Instant::now() + backoff);
        self.schedule_pump(myself, backoff);
        self.report_store_error(error);
    }

    pub(super) async fn handle_internal(
        &mut self,
        myself: &ActorRef<WorkerMsg>,
        msg: InternalMsg,
    ) -> Result<(), ActorProcessingErr> {
        match msg {
            InternalMsg::Pump => {}
            InternalMsg::CloseDeadline => {
                self.abandon_inflight = true;
                // Nothing more is sent: what has not been confirmed is left behind.
                let pending = std::mem::take(&mut self.pending);
                self.left_behind
                    .extend(pending.into_iter().map(|p| p.finish.job_id));
                let running: Vec<String> = self.running.drain().map(|(id, _)| id).collect();
                self.left_behind.extend(running);
            }
            InternalMsg::Flush => {
                self.flush_queued = false;
                self.flush_now = true;
            }
            InternalMsg::Fetched {
                result,
                requested,
                reply,
            } => {
                self.call_returned(requested);
                match *result {
                    Ok(fetched) => {
                        self.error_streak = 0;
                        self.store_recovered();
                        let ids = self.accept_fetched(myself, fetched, requested).await;
                        if let Some(reply) = reply {
                            let _ = reply.send(ids.into_iter().next());
                        }
                    }
                    Err(error) => {
                        if let Some(reply) = reply {
                            let _ = reply.send(None);
                        }
                        self.on_store_error(myself, error);
                    }
                }
            }
            InternalMsg::Finished {
                result,
                batch,
                requested,
            } => {
                self.call_returned(requested);
                match *result {
                    Ok(reply) => {
                        self.error_streak = 0;
                        self.store_recovered();
                        let fetched = self.settle_batch(batch, reply);
                        if requested > 0 {
                            self.accept_fetched(myself, fetched, requested).await;
                        }
                    }
                    Err(error) if self.closing.is_some() => {
                        // Closing with Redis unreachable: give up; the jobs' locks expire and
                        // stalled recovery brings them back.
                        self.left_behind
                            .extend(batch.into_iter().map(|p| p.finish.job_id));
                        self.callbacks.error(&WorkerError::Store(error));
                    }
                    Err(error) => {
                        // Retry the batch; a finish already applied reports a missing lock then.
                        let mut batch = batch;
                        batch.append(&mut self.pending);
                        self.pending = batch;
                        self.on_store_error(myself, error);
                    }
                }
            }
            InternalMsg::JobEnded { job_id, ended } => self.job_ended(job_id, ended),
            InternalMsg::LocksLost(ids) => {
                let mut lost = Vec::new();
                for id in ids {
                    if let Some(running) = self.running.get(&id) {
                        running.context.cancel(CancelReason::LockLost);
                        lost.push(id);
                    }
                }
                if !lost.is_empty() {
                    self.callbacks.lock_renewal_failed(&lost);
                }
            }
            InternalMsg::StoreError(error) => self.report_store_error(error),
            InternalMsg::Connection(change) => self.on_connection_change(change),
            InternalMsg::Woken(result) => {
                tracing::trace!(?result, "woken");
                self.waiting = None;
                // Whatever woke us (a signal, the timeout, an error), look again.
                self.idle = false;
                if let Err(error) = result {
                    self.on_store_error(myself, error);
                }
            }
            InternalMsg::StalledTick => {
                if !self.stalled_busy && self.closing.is_none() {
                    self.stalled_busy = true;
                    let store = self.store.clone();
                    let me = myself.clone();
                    let (max, interval) = (self.opts.max_stalled_count, self.opts.stalled_interval);
                    tokio::spawn(async move {
                        let result =
                            guarded(CALL_TIMEOUT, store.check_stalled(max, interval)).await;
                        let _ = me.cast(internal(InternalMsg::StalledDone(Box::new(result))));
                    });
                }
            }
            InternalMsg::StalledDone(result) => {
                self.stalled_busy = false;
                match *result {
                    Ok(report) => {
                        telemetry::stalled_check(
                            self.store.queue_name(),
                            &self.label,
                            report.recovered.len() as u64,
                            report.corrupted.len() as u64,
                        );
                        for id in &report.recovered {
                            tracing::info!(job_id = %id, "stalled job moved back to wait");
                            self.callbacks.stalled(id);
                        }
                        self.report_failed_by_store(&report.corrupted, &report.dropped);
                    }
                    Err(error) => self.callbacks.error(&WorkerError::Store(error)),
                }
            }
        }
        Ok(())
    }

    /// Takes in fetched jobs; returns their ids.
    async fn accept_fetched(
        &mut self,
        myself: &ActorRef<WorkerMsg>,
        fetched: Fetched,
        requested: u32,
    ) -> Vec<String> {
        if !fetched.rate_limited_for.is_zero() {
            let was_limited = self
                .limited_until
                .is_some_and(|until| until > Instant::now());
            self.limited_until = Some(Instant::now() + fetched.rate_limited_for);
            if !was_limited {
                let queue = self.store.queue_name();
                telemetry::rate_limit_hit(queue, &self.label, fetched.rate_limited_for);
            }
        }
        tracing::trace!(requested, fetched = fetched.jobs.len(), next_delayed_at = ?fetched.next_delayed_at,
            rate_limited_for = ?fetched.rate_limited_for, "fetched");
        self.next_delayed_at = fetched.next_delayed_at;
        self.report_failed_by_store(&fetched.corrupted, &fetched.dropped);
        // Corrupted and dropped ids were taken from the queue too: the queue is not idle
        // because of them.
        let taken = fetched.jobs.len() + fetched.corrupted.len() + fetched.dropped.len();
        self.idle = (taken as u64) < u64::from(requested);
        if taken == 0 {
            if !self.drained {
                self.drained = true;
                self.callbacks.drained();
                telemetry::queue_drained(self.store.queue_name());
            }
        } else {
            self.drained = false;
        }
        let mut ids = Vec::with_capacity(fetched.jobs.len());
        let mut locks = Vec::with_capacity(fetched.jobs.len());
        for job in fetched.jobs {
            ids.push(job.id.clone());
            if let Some(lock) = self.start_job(myself, job).await {
                locks.push(lock);
            }
        }
        // One message for the whole batch rather than one per job.
        if let (Some(lm), false) = (&self.lock_manager, locks.is_empty()) {
            let _ = lm.cast(LockManagerMsg::Track(locks));
        }
        ids
    }

    /// Starts a fetched job; returns its `(id, token)` when its lock is to be renewed.
    async fn start_job(
        &mut self,
        myself: &ActorRef<WorkerMsg>,
        fetched: FetchedJob,
    ) -> Option<(String, String)> {
        let FetchedJob {
            id,
            token,
            job,
            receipt,
        } = fetched;
        if self.closing == Some(true) {
            // Force-closing: do not start anything new.
            self.left_behind.push(id);
            return None;
        }
        let job = match job {
            Ok(record) => Job::from_record(self.store.queue_name(), record),
            Err(reason) => {
                tracing::warn!(job_id = %id, %reason, "failing a job that cannot be decoded");
                let finish = Finish {
                    job_id: id,
                    token,
                    action: FinishAction::Fail {
                        reason: reason.clone(),
                        stacktrace: None,
                        attempts: 0,
                        keep: Default::default(),
                    },
                    receipt,
                };
                self.pending.push(Pending {
                    finish,
                    job: None,
                    outcome: JobOutcome::Unrecoverable {
                        trace: reason.clone(),
                        reason,
                    },
                    duration: Duration::ZERO,
                });
                return None;
            }
        };
        // Deferred failure (stalled too often) or started too often: fail without running.
        let refusal = job.record().deferred_failure.clone().or_else(|| {
            self.opts
                .max_started_attempts
                .filter(|max| *max < job.attempts_started())
                .map(|_| "job started more than allowable limit".to_string())
        });
        if let Some(reason) = refusal {
            let trace = format!("UnrecoverableError: {reason}");
            let outcome = JobOutcome::Unrecoverable { reason, trace };
            self.record_outcome(job, token, receipt, outcome, Duration::ZERO);
            return None;
        }
        let context = JobContext::new(
            id.clone(),
            job.name().to_string(),
            job.attempts_made() + 1,
            job.opts().keep_logs,
            self.store.clone(),
            self.callbacks.clone(),
            self.label.clone(),
        );
        let jt = JobTelemetry::from_job(&job, &self.label);
        let span = telemetry::process_span(&jt);
        let active = telemetry::job_started(&jt, telemetry::wait_time(&job));
        self.callbacks.active(&job);
        let runner = match self.opts.job_runner {
            JobRunner::Task => Some(spawn_task(
                job.clone(),
                context.clone(),
                self.processor.clone(),
                myself.clone(),
                span,
            )),
            JobRunner::Actor => {
                let args = JobActorArgs {
                    job: job.clone(),
                    context: context.clone(),
                    processor: self.processor.clone(),
                    worker: myself.clone(),
                    span,
                };
                match Actor::spawn_linked(None, JobActor, args, myself.get_cell()).await {
                    Ok((actor, _)) => {
                        self.job_actors.insert(actor.get_id(), id.clone());
                        None
                    }
                    Err(error) => {
                        let message = format!("could not start the job actor: {error}");
                        let duration = active.elapsed();
                        self.record_outcome(
                            job,
                            token,
                            receipt,
                            JobOutcome::Panicked { message },
                            duration,
                        );
                        return None;
                    }
                }
            }
        };
        self.running.insert(
            id.clone(),
            RunningJob {
                job,
                token: token.clone(),
                receipt,
                context,
                active,
                _task: runner,
            },
        );
        Some((id, token))
    }

    fn job_ended(&mut self, job_id: String, ended: Ended) {
        let Some(running) = self.running.remove(&job_id) else {
            return;
        };
        let outcome = classify(ended, running.context.cancel_reason());
        let duration = running.active.elapsed();
        // Dropping the guard ends the attempt in `bullmq_worker_active_jobs`.
        drop(running.active);
        self.record_outcome(
            running.job,
            running.token,
            running.receipt,
            outcome,
            duration,
        );
    }

    /// Queues the Redis transition for a finished job (or notes it is left behind).
    fn record_outcome(
        &mut self,
        job: Job,
        token: String,
        receipt: Receipt,
        outcome: JobOutcome,
        duration: Duration,
    ) {
        if let JobOutcome::RateLimited(ttl) = outcome {
            self.limited_until = Some(Instant::now() + ttl);
        }
        match record(&job, &outcome, &self.opts) {
            Some(action) => self.pending.push(Pending {
                finish: Finish {
                    job_id: job.id().to_string(),
                    token,
                    action,
                    receipt,
                },
                job: Some(job),
                outcome,
                duration,
            }),
            None => {
                tracing::debug!(job_id = %job.id(), ?outcome, "job left for stalled recovery");
                self.untrack(vec![job.id().to_string()]);
                self.left_behind.push(job.id().to_string());
            }
        }
    }

    /// Stops renewing the locks of `job_ids`.
    fn untrack(&self, job_ids: Vec<String>) {
        if let (Some(lm), false) = (&self.lock_manager, job_ids.is_empty()) {
            let _ = lm.cast(LockManagerMsg::Untrack(job_ids));
        }
    }

    /// Settles a finish batch the store answered: reports each job by its code, does what
    /// Node's Worker does for each refusal, and stops renewing the locks of the jobs that are
    /// no longer ours. Returns the jobs fetched in the same call.
    fn settle_batch(&mut self, batch: Vec<Pending>, reply: FinishReply) -> Fetched {
        let mut reasons = reply.corrupted.into_iter();
        let mut settled = Vec::with_capacity(batch.len());
        for (pending, code) in batch.into_iter().zip(reply.codes) {
            match code {
                FinishCode::Ok => settled.push(pending),
                FinishCode::Corrupted => {
                    let reason = reasons.next().map(|(_, reason)| reason).unwrap_or_default();
                    let id = pending.finish.job_id.clone();
                    self.untrack(vec![id.clone()]);
                    self.report_corrupted(&id, pending.job, &reason, pending.duration);
                }
                code => self.refused(pending, code),
            }
        }
        // Locks are renewed until Redis confirmed the finish (a batch that waits out a Redis
        // outage keeps its jobs' locks alive).
        self.untrack(settled.iter().map(|p| p.finish.job_id.clone()).collect());
        self.report_finished(settled);
        reply.fetched
    }

    /// A finish the store refused with `code`: the typed error reaches `on_error` and
    /// telemetry once. A completion refused for pending or failed children is then recorded
    /// as a failure, as Node's Worker fails such a job with the refusal as its reason (retried
    /// while attempts remain for pending children; unrecoverable for failed ones): the lock is
    /// still ours, so it stays tracked. Any other code means the job is no longer ours (lock
    /// lost or taken, job moved or removed): it is left to its owner or to stalled recovery.
    fn refused(&mut self, pending: Pending, code: FinishCode) {
        let Pending {
            finish,
            job,
            duration,
            ..
        } = pending;
        let command = match finish.action {
            FinishAction::Retry { .. } => "retryJob",
            FinishAction::Delay { .. } => "moveToDelayed",
            FinishAction::RateLimit { .. } => "moveJobFromActiveToWait",
            _ => "moveToFinished",
        };
        let error = WorkerError::FinishRefused {
            job_id: finish.job_id.clone(),
            code,
            command,
        };
        let reason = error.to_string();
        telemetry::finish_refused(
            self.store.queue_name(),
            &self.label,
            &finish.job_id,
            &reason,
        );
        self.callbacks.error(&error);
        let children = matches!(
            code,
            FinishCode::PendingChildren | FinishCode::FailedChildren
        );
        match job {
            Some(job) if children && matches!(finish.action, FinishAction::Complete { .. }) => {
                let outcome = if code == FinishCode::FailedChildren {
                    JobOutcome::Unrecoverable {
                        trace: format!("UnrecoverableError: {reason}"),
                        reason,
                    }
                } else {
                    JobOutcome::Failed {
                        trace: format!("Error: {reason}"),
                        reason,
                    }
                };
                self.record_outcome(job, finish.token, finish.receipt, outcome, duration);
            }
            _ => {
                self.untrack(vec![finish.job_id.clone()]);
                if code == FinishCode::MissingLock {
                    // Still in active without a lock: a stalled check brings it back.
                    self.left_behind.push(finish.job_id);
                }
            }
        }
    }

    /// A job the store failed on its own because its hash is corrupted: `failed` callback and
    /// telemetry, as for any job that failed for good.
    fn report_corrupted(&self, id: &str, job: Option<Job>, reason: &str, duration: Duration) {
        tracing::warn!(job_id = %id, %reason, "corrupted job failed");
        let jt = match &job {
            Some(job) => JobTelemetry::from_job(job, &self.label),
            None => JobTelemetry::new(self.store.queue_name(), id, "").worker(&self.label),
        };
        telemetry::job_failed(&jt, duration, &reason);
        self.callbacks.failed(&FailedJob {
            id: id.to_string(),
            job,
            reason: reason.to_string(),
            will_retry: false,
        });
    }

    /// Reports what a fetch or a stalled check did on its own: corrupted jobs it failed and
    /// ids without a job hash it dropped.
    fn report_failed_by_store(&self, corrupted: &[CorruptedJob], dropped: &[String]) {
        for job in corrupted {
            self.report_corrupted(&job.id, None, &job.reason, Duration::ZERO);
        }
        for id in dropped {
            tracing::warn!(job_id = %id, "job id without a job hash removed from the queue");
            self.callbacks
                .error(&WorkerError::JobHashMissing { job_id: id.clone() });
        }
    }

    /// Fires callbacks for jobs the store finished.
    fn report_finished(&mut self, batch: Vec<Pending>) {
        for pending in batch {
            let id = pending.finish.job_id.clone();
            let jt = match &pending.job {
                Some(job) => JobTelemetry::from_job(job, &self.label),
                None => JobTelemetry::new(self.store.queue_name(), &id, "").worker(&self.label),
            };
            telemetry::job_finished(&jt, &pending.finish.action, pending.duration);
            match (&pending.finish.action, &pending.outcome) {
                (FinishAction::Complete { .. }, JobOutcome::Completed(value)) => {
                    if let Some(job) = &pending.job {
                        self.callbacks.completed(job, value);
                    }
                }
                (FinishAction::Fail { reason, .. }, _) => self.callbacks.failed(&FailedJob {
                    id,
                    job: pending.job,
                    reason: reason.clone(),
                    will_retry: false,
                }),
                (FinishAction::Retry { reason, .. }, _)
                | (
                    FinishAction::Delay {
                        reason: Some(reason),
                        ..
                    },
                    _,
                ) => self.callbacks.failed(&FailedJob {
                    id,
                    job: pending.job,
                    reason: reason.clone(),
                    will_retry: true,
                }),
                _ => {}
            }
        }
    }

    pub(super) fn begin_close(&mut self, myself: &ActorRef<WorkerMsg>, force: bool) {
        let force = force || self.closing == Some(true);
        if force && self.closing != Some(true) {
            // A detached timer: the Worker may stop before it fires.
            drop(myself.send_after(FORCE_CLOSE_GRACE, || internal(InternalMsg::CloseDeadline)));
        }
        self.closing = Some(force);
        if let Some(waiting) = self.waiting.take() {
            waiting.abort();
        }
        if force {
            for running in self.running.values() {
                running.context.cancel(CancelReason::Shutdown);
            }
        }
    }

    /// Stops the actor once closing and nothing is running, pending or in flight.
    pub(super) async fn maybe_stop(&mut self, myself: &ActorRef<WorkerMsg>) {
        if self.closing.is_none()
            || !self.running.is_empty()
            || !self.pending.is_empty()
            || (self.inflight > 0 && !self.abandon_inflight)
        {
            return;
        }
        if let Some(lm) = self.lock_manager.take() {
            lm.stop(None);
        }
        self.store.close().await;
        let report = CloseReport {
            left_for_stalled_recovery: std::mem::take(&mut self.left_behind),
        };
        for reply in self.close_replies.drain(..) {
            let _ = reply.send(report.clone());
        }
        myself.stop(None);
    }
}
