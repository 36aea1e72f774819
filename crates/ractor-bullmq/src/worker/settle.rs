//! Recording finished jobs: how a job ended becomes a [`Verdict`] for the next finish batch,
//! and the store's answer for each finish becomes callbacks and telemetry, read from that
//! same verdict.

use std::time::Duration;

use super::callbacks::FailedJob;
use super::dispatcher::Event;
use super::errors::WorkerError;
use super::fetched::Lease;
use super::fetched::Unreadable;
use super::lock_manager::LockManagerMsg;
use super::outcome::{classify, decide, Ended, JobOutcome, Verdict};
use super::worker::{Pending, WorkerState};
use super::Job;
use crate::store::{CorruptedJob, Fetched, FinishCode, FinishReply};
use crate::telemetry::{self, AttemptEnd, JobTelemetry};

impl WorkerState {
    /// A fetched job that cannot run: failed for good, without running, with the reason.
    pub(super) fn record_unreadable(&mut self, unreadable: Unreadable) {
        let Unreadable {
            id,
            token,
            reason,
            receipt,
        } = unreadable;
        tracing::warn!(job_id = %id, %reason, "failing a job that cannot be decoded");
        self.dispatch(Event::Record(Pending {
            job_id: id,
            lease: Lease { token, receipt },
            verdict: Verdict::unreadable(reason),
            job: None,
            duration: Duration::ZERO,
        }));
    }

    /// A running job ended: classify how, and record the outcome. With `token`, only the
    /// attempt holding that token is ended: the report of an earlier attempt of a job fetched
    /// again since (its new attempt took over the slot) is dropped.
    pub(super) fn job_ended(&mut self, job_id: String, token: Option<&str>, ended: Ended) {
        let current = self.running.get(&job_id).map(|r| r.lease.token.as_str());
        if current.is_none() || token.is_some_and(|t| Some(t) != current) {
            tracing::trace!(job_id = %job_id, "end of an attempt no longer running here");
            return;
        }
        let Some(running) = self.running.remove(&job_id) else {
            return;
        };
        self.dispatch(Event::JobEnded);
        let moved = running.context.moved();
        if moved.is_some() && !matches!(ended, Ended::Returned(Err(_))) {
            // Moved, then returned a value (or panicked): the move stands, the value is lost.
            tracing::warn!(job_id = %job_id, ?moved, "processor moved its job and did not return WaitingChildrenError / WaitingError");
        }
        let cancellation = running.context.cancellation();
        let outcome = classify(ended, cancellation.as_ref(), moved);
        let duration = running.active.elapsed();
        // Dropping the guard ends the attempt in `bullmq_worker_active_jobs`.
        drop(running.active);
        self.record_outcome(running.job, running.lease, outcome, duration);
    }

    /// Queues the finish of a job that ended with `outcome` (or notes it is left behind).
    pub(super) fn record_outcome(
        &mut self,
        job: Job,
        lease: Lease,
        outcome: JobOutcome,
        duration: Duration,
    ) {
        match &outcome {
            JobOutcome::RateLimited(_) => self.dispatch(Event::RateLimited),
            JobOutcome::LockLost | JobOutcome::Cancelled => {
                tracing::debug!(job_id = %job.id(), ?outcome, "job left for stalled recovery");
            }
            JobOutcome::MovedToWaitingChildren | JobOutcome::MovedToWait => {
                // Already moved by the processor: nothing to record, nothing left behind; the
                // lock (released by the move) is no longer renewed.
                let to = if outcome == JobOutcome::MovedToWait {
                    telemetry::MovedTo::Wait
                } else {
                    telemetry::MovedTo::WaitingChildren
                };
                let jt = JobTelemetry::from_job(&job, &self.label);
                telemetry::job_moved(&jt, to, duration);
                self.untrack(vec![job.id().to_string()]);
                return;
            }
            _ => {}
        }
        match decide(&job, outcome, &self.opts) {
            Some(verdict) => self.dispatch(Event::Record(Pending {
                job_id: job.id().to_string(),
                lease,
                verdict,
                job: Some(job),
                duration,
            })),
            None => {
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
    pub(super) fn settle_batch(&mut self, batch: Vec<Pending>, reply: FinishReply) -> Fetched {
        let mut reasons = reply.corrupted.into_iter();
        let mut settled = Vec::with_capacity(batch.len());
        for (pending, code) in batch.into_iter().zip(reply.codes) {
            match code {
                FinishCode::Ok => settled.push(pending),
                FinishCode::Corrupted => {
                    let reason = reasons.next().map(|(_, reason)| reason).unwrap_or_default();
                    self.untrack(vec![pending.job_id.clone()]);
                    self.report_corrupted(&pending.job_id, pending.job, &reason, pending.duration);
                }
                code => self.refused(pending, code),
            }
        }
        // Locks are renewed until Redis confirmed the finish (a batch that waits out a Redis
        // outage keeps its jobs' locks alive).
        self.untrack(settled.iter().map(|p| p.job_id.clone()).collect());
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
            job_id,
            lease,
            verdict,
            job,
            duration,
            ..
        } = pending;
        let error = WorkerError::FinishRefused {
            job_id: job_id.clone(),
            code,
            command: verdict.command(),
        };
        let reason = error.to_string();
        telemetry::finish_refused(self.store.queue_name(), &self.label, &job_id, &reason);
        self.callbacks.error(&error);
        let children = matches!(
            code,
            FinishCode::PendingChildren | FinishCode::FailedChildren
        );
        match job {
            Some(job) if children && matches!(verdict, Verdict::Completed { .. }) => {
                let outcome = if code == FinishCode::FailedChildren {
                    JobOutcome::unrecoverable(reason)
                } else {
                    JobOutcome::failed(reason)
                };
                self.record_outcome(job, lease, outcome, duration);
            }
            _ => {
                self.untrack(vec![job_id.clone()]);
                if code == FinishCode::MissingLock {
                    // Still in active without a lock: a stalled check brings it back.
                    self.left_behind.push(job_id);
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
        telemetry::job_finished(&jt, AttemptEnd::Failed { reason }, duration);
        self.callbacks.failed(&FailedJob {
            id: id.to_string(),
            job,
            reason: reason.to_string(),
            will_retry: false,
        });
    }

    /// Reports what a fetch or a stalled check did on its own: corrupted jobs it failed and
    /// ids without a job hash it dropped.
    /// Reports each `meta` field another client stored garbage in, once per Worker.
    pub(super) fn report_invalid_meta(&mut self, invalid: &[(String, String)]) {
        for (field, value) in invalid {
            if !self.invalid_meta_reported.insert(field.clone()) {
                continue;
            }
            let error = WorkerError::InvalidQueueMeta {
                field: field.clone(),
                value: value.clone(),
            };
            tracing::warn!(queue = self.store.queue_name(), worker = %self.label, %field,
                %value, "{error}");
            self.callbacks.error(&error);
        }
    }

    pub(super) fn report_failed_by_store(&self, corrupted: &[CorruptedJob], dropped: &[String]) {
        for job in corrupted {
            self.report_corrupted(&job.id, None, &job.reason, Duration::ZERO);
        }
        for id in dropped {
            tracing::warn!(job_id = %id, "job id without a job hash removed from the queue");
            self.callbacks
                .error(&WorkerError::JobHashMissing { job_id: id.clone() });
        }
    }

    /// Fires telemetry and callbacks for jobs the store finished, from their verdicts.
    fn report_finished(&mut self, batch: Vec<Pending>) {
        for pending in batch {
            let Pending {
                job_id,
                verdict,
                job,
                duration,
                ..
            } = pending;
            let jt = match &job {
                Some(job) => JobTelemetry::from_job(job, &self.label),
                None => JobTelemetry::new(self.store.queue_name(), &job_id, "").worker(&self.label),
            };
            telemetry::job_finished(&jt, verdict.attempt_end(), duration);
            let (reason, will_retry) = match verdict {
                Verdict::Completed { value, .. } => {
                    if let Some(job) = &job {
                        self.callbacks.completed(job, &value);
                    }
                    continue;
                }
                Verdict::Failed { reason, .. } => (reason, false),
                Verdict::Retried { reason, .. } => (reason, true),
                Verdict::Delayed(_) | Verdict::RateLimited(_) => continue,
            };
            self.callbacks.failed(&FailedJob {
                id: job_id,
                job,
                reason,
                will_retry,
            });
        }
    }
}
