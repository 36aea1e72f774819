//! Keeping job schedulers alive: when the Worker starts an iteration of a job scheduler (a job
//! with `rjk`), it creates the next iteration, as Node's Worker does when it starts one.
//!
//! Whoever created the scheduler (Node, Python, this crate), the next iteration is planned
//! from the started job's own options ([`plan_next_iteration`]) and written by the backend only
//! if the started job is still the scheduler's current iteration, so a stalled or retried
//! iteration, or a second worker racing for the same one, creates nothing.
//!
//! A backend may do it in the fetch's own round trip (the Redis backend does for `every`
//! schedulers) and say so in [`FetchedJob::next_iteration`](crate::store::FetchedJob); the
//! others (cron runs need the tz database, which the scripts do not have) get a call of their
//! own, on a task next to the job's start rather than in front of it: the job does not wait a
//! round trip for it, and a worker that dies in between leaves the iteration to be created by
//! whoever restarts the stalled job.

use std::sync::Arc;
use std::time::Duration;

use bullmq_protocol::scheduler::{plan_next_iteration, NextIterationPlan};

use super::callbacks::WorkerCallbacks;
use super::errors::WorkerError;
use super::worker::WorkerState;
use super::Job;
use crate::store::{now_ms, NextIteration, Store, StoreError};

/// Tries of one next-iteration call when the backend is unreachable, with this pause between.
const TRIES: u32 = 5;
const RETRY_PAUSE: Duration = Duration::from_millis(500);

impl WorkerState {
    /// Creates the next iteration of `job`'s scheduler, if it has one and the fetch has not
    /// (`done`: what the fetch did).
    pub(super) fn schedule_next_iteration(&self, job: &Job, done: Option<NextIteration>) {
        advance_scheduler(&self.store, &self.callbacks, job, done);
    }
}

/// [`WorkerState::schedule_next_iteration`] for any holder of a store (the Worker, the
/// [`ManualWorker`](super::ManualWorker)): creates the next iteration of `job`'s scheduler on a
/// task, unless the fetch did (`done`), and reports what happened through `callbacks`.
pub(super) fn advance_scheduler(
    store: &Arc<dyn Store>,
    callbacks: &WorkerCallbacks,
    job: &Job,
    done: Option<NextIteration>,
) {
    let Some(scheduler_id) = job.repeat_job_key().filter(|id| !id.is_empty()) else {
        return;
    };
    if let Some(outcome) = done {
        report_outcome(callbacks, job.id(), scheduler_id, Ok(outcome));
        return;
    }
    match plan_next_iteration(job.id(), scheduler_id, job.opts(), now_ms()) {
        Ok(Some(plan)) => {
            tokio::spawn(create_next(store.clone(), callbacks.clone(), plan));
        }
        // The limit is reached or the end date passed: the series ends here.
        Ok(None) => report_outcome(callbacks, job.id(), scheduler_id, Ok(NextIteration::Ended)),
        Err(error) => report(callbacks, job.id(), scheduler_id, error.to_string()),
    }
}

async fn create_next(store: Arc<dyn Store>, callbacks: WorkerCallbacks, plan: NextIterationPlan) {
    let mut tries = 0;
    let outcome = loop {
        tries += 1;
        match store.schedule_next_iteration(&plan).await {
            Err(error) if tries < TRIES && retryable(&error) => {
                tokio::time::sleep(RETRY_PAUSE).await;
            }
            other => break other,
        }
    };
    report_outcome(&callbacks, &plan.producer_id, &plan.scheduler_id, outcome);
}

fn report_outcome(
    callbacks: &WorkerCallbacks,
    job_id: &str,
    scheduler_id: &str,
    outcome: Result<NextIteration, StoreError>,
) {
    match outcome {
        Ok(NextIteration::Created(next)) => {
            tracing::debug!(job_id, scheduler_id, next, "next iteration created");
        }
        Ok(NextIteration::Duplicated(next)) => {
            tracing::debug!(job_id, scheduler_id, next, "next iteration already exists");
        }
        Ok(NextIteration::NotCurrent) => {
            tracing::debug!(
                job_id,
                scheduler_id,
                "not the current iteration: none created"
            );
        }
        Ok(NextIteration::Ended) => {
            tracing::debug!(job_id, scheduler_id, "job scheduler ended");
        }
        Ok(NextIteration::Legacy) => report(
            callbacks,
            job_id,
            scheduler_id,
            bullmq_protocol::scheduler::LegacyRepeatableJob(scheduler_id.to_owned()).to_string(),
        ),
        Err(error) => report(callbacks, job_id, scheduler_id, error.to_string()),
    }
}

fn retryable(error: &StoreError) -> bool {
    matches!(
        error,
        StoreError::ConnectionLost(_) | StoreError::Timeout { .. } | StoreError::Connect(_)
    )
}

fn report(callbacks: &WorkerCallbacks, job_id: &str, scheduler_id: &str, reason: String) {
    let error = WorkerError::NextIteration {
        job_id: job_id.to_owned(),
        scheduler_id: scheduler_id.to_owned(),
        reason,
    };
    tracing::warn!(job_id, scheduler_id, %error, "job scheduler not advanced");
    callbacks.error(&error);
}
