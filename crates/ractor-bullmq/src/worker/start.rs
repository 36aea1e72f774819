//! Starting fetched jobs: read each one ([`read_fetched`]), refuse those that must not run,
//! build its context, open its telemetry and launch it on a task or a linked job actor.

use std::time::{Duration, Instant};

use ractor::{Actor, ActorRef};

use super::context::{AttemptLimits, JobContext};
use super::dispatcher::{Event, FetchSummary};
use super::fetched::read_fetched;
use super::job_actor::{JobActor, JobActorArgs};
use super::job_runner::{spawn_task, JobRunner, JobTask};
use super::lock_manager::LockManagerMsg;
use super::outcome::JobOutcome;
use super::worker::{RunningJob, WorkerMsg, WorkerState};
use super::Job;
use crate::store::{now_ms, Fetched, FetchedJob};
use crate::telemetry::{self, JobTelemetry};

impl WorkerState {
    /// Takes in what a fetch (alone or in a finish call asked for `requested` jobs) brought:
    /// tells the dispatcher, reports what the store failed or dropped itself, and starts the
    /// jobs. Returns their ids.
    pub(super) async fn accept_fetched(
        &mut self,
        myself: &ActorRef<WorkerMsg>,
        fetched: Fetched,
        requested: u32,
    ) -> Vec<String> {
        tracing::trace!(requested, fetched = fetched.jobs.len(), next_delayed_at = ?fetched.next_delayed_at,
            rate_limited_for = ?fetched.rate_limited_for, "fetched");
        // Corrupted and dropped ids were taken from the queue too: the queue is not empty
        // because of them.
        let summary = FetchSummary {
            requested,
            taken: fetched.jobs.len() + fetched.corrupted.len() + fetched.dropped.len(),
            rate_limited_for: fetched.rate_limited_for,
            next_delayed_in: fetched
                .next_delayed_at
                .map(|at| Duration::from_millis(at.saturating_sub(now_ms()))),
        };
        self.dispatch(Event::Fetched(summary));
        self.run_commands(myself).await;
        self.report_failed_by_store(&fetched.corrupted, &fetched.dropped);
        self.report_invalid_meta(&fetched.invalid_settings);
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
        if !self.dispatcher.lifecycle().starts_jobs() {
            // Force-closing: do not start anything new.
            self.left_behind.push(fetched.id);
            return None;
        }
        let (job, lease, next_iteration) = match read_fetched(self.store.queue_name(), fetched) {
            Ok(runnable) => runnable,
            Err(unreadable) => {
                self.record_unreadable(unreadable);
                return None;
            }
        };
        // Before anything else, as Node's Worker: a refused iteration still moves its
        // scheduler on.
        self.schedule_next_iteration(&job, next_iteration);
        if let Some(reason) = self.refusal(&job) {
            self.record_outcome(
                job,
                lease,
                JobOutcome::unrecoverable(reason),
                Duration::ZERO,
            );
            return None;
        }
        let context = self.context_for(&job, &lease.token);
        let jt = JobTelemetry::from_job(&job, &self.label);
        let span = telemetry::process_span(&jt);
        let active = telemetry::job_started(&jt, telemetry::wait_time(&job));
        self.callbacks.active(&job);
        let task = match self.launch(myself, &job, &context, span).await {
            Ok(task) => task,
            Err(message) => {
                let duration = active.elapsed();
                self.record_outcome(job, lease, JobOutcome::Panicked { message }, duration);
                return None;
            }
        };
        let id = job.id().to_string();
        let token = lease.token.clone();
        let running = RunningJob {
            job,
            lease,
            context,
            active,
            _task: task,
        };
        // Fetched again while an attempt whose lock was lost still runs here: the new attempt
        // replaces it (dropping its task) and takes over its slot.
        if self.running.insert(id.clone(), running).is_none() {
            self.dispatcher.handle(Event::JobStarted, Instant::now());
        }
        Some((id, token))
    }

    /// Why `job` must fail without running: a deferred failure (stalled too often), or
    /// started more often than `max_started_attempts` allows.
    fn refusal(&self, job: &Job) -> Option<String> {
        job.record().deferred_failure.clone().or_else(|| {
            self.opts
                .max_started_attempts
                .filter(|max| *max < job.attempts_started())
                .map(|_| "job started more than allowable limit".to_string())
        })
    }

    /// The context handed to the processor for this attempt.
    fn context_for(&self, job: &Job, token: &str) -> JobContext {
        JobContext::new(
            job,
            token.to_string(),
            format!("{}:{}", self.opts.prefix, self.store.queue_name()),
            self.store.clone(),
            self.callbacks.clone(),
            self.label.clone(),
            AttemptLimits {
                timeout: self.opts.timeout_for(job.name()),
                grace: self.opts.cancel_grace,
            },
        )
    }

    /// Runs `job` as the options say: on a task (returned, so dropping it aborts the job) or
    /// on a job actor linked to the Worker. `Err`: the actor could not be started.
    async fn launch(
        &mut self,
        myself: &ActorRef<WorkerMsg>,
        job: &Job,
        context: &JobContext,
        span: tracing::Span,
    ) -> Result<Option<JobTask>, String> {
        match self.opts.job_runner {
            JobRunner::Task => Ok(Some(spawn_task(
                job.clone(),
                context.clone(),
                self.processor.clone(),
                myself.clone(),
                span,
            ))),
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
                        self.job_actors.insert(actor.get_id(), job.id().to_string());
                        Ok(None)
                    }
                    Err(error) => Err(format!("could not start the job actor: {error}")),
                }
            }
        }
    }
}
