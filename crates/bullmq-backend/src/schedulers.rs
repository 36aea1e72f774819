//! Job schedulers on the seam: store a scheduler with its pending iteration, create the next
//! iteration when a worker starts one, read and remove schedulers ([`JobSchedulers`]).
//!
//! What to write is planned without I/O by [`bullmq_protocol::scheduler`]; a backend writes it
//! atomically and decides the `every` slot itself (from the stored previous run), so two
//! clients racing on one scheduler cannot create the same iteration twice.

use async_trait::async_trait;
use bullmq_protocol::scheduler::{JobSchedulerRecord, NextIterationPlan, UpsertPlan};

use crate::capability::{unsupported, BackendName, Capability};
use crate::error::BackendResult;

/// Outcome of [`JobSchedulers::upsert_job_scheduler`]. Exhaustive: every caller handles each.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum UpsertOutcome {
    /// The scheduler is stored and its pending iteration exists.
    Added {
        /// Id of the pending iteration (`repeat:{id}:{millis}`).
        job_id: String,
        /// Its delay from the upsert, ms (0: it is waiting).
        delay: u64,
    },
    /// A cron iteration with that id already exists in a state it cannot be replaced in
    /// (Node -10); nothing was written.
    IdCollision,
    /// Every `every` slot scanned already holds a job (Node -11); nothing was written.
    SlotsBusy,
}

/// Outcome of [`JobSchedulers::create_next_iteration`]. Exhaustive.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NextIteration {
    /// The next iteration was created.
    Created(String),
    /// The next iteration already exists (another worker created it); a `duplicated` event was
    /// emitted, as Node does.
    Duplicated(String),
    /// The started job is not the scheduler's current iteration (a stalled or retried
    /// iteration, or a scheduler that was removed or replaced): nothing was written.
    NotCurrent,
    /// The key is a BullMQ 5 repeatable-job key, not a job scheduler: nothing was written.
    Legacy,
    /// The started iteration was the last: its count reached the `limit` or the end date
    /// passed. Nothing was written.
    Ended,
}

/// A queue's job schedulers (Node `upsertJobScheduler` and its getters).
#[async_trait]
#[allow(unused_variables)] // the default bodies decline without reading their arguments
pub trait JobSchedulers: BackendName {
    /// Stores the scheduler of `plan` and its pending iteration, replacing an existing one of
    /// the same id and its pending iteration if that has not started (Node
    /// `addJobScheduler`).
    async fn upsert_job_scheduler(&self, plan: &UpsertPlan) -> BackendResult<UpsertOutcome> {
        unsupported(self, Capability::Schedulers)
    }

    /// Creates the iteration after the started job `plan.producer_id`, if that job is the
    /// scheduler's current iteration (Node `updateJobScheduler`).
    async fn create_next_iteration(
        &self,
        plan: &NextIterationPlan,
    ) -> BackendResult<NextIteration> {
        unsupported(self, Capability::Schedulers)
    }

    /// The scheduler `id`, `None` when there is none.
    async fn get_job_scheduler(&self, id: &str) -> BackendResult<Option<JobSchedulerRecord>> {
        unsupported(self, Capability::Schedulers)
    }

    /// Schedulers by next run, ranks `start..=end` (negative from the end), soonest first
    /// when `asc`. A scheduler whose hash is gone is removed and skipped, as Node does.
    async fn get_job_schedulers(
        &self,
        start: i64,
        end: i64,
        asc: bool,
    ) -> BackendResult<Vec<JobSchedulerRecord>> {
        unsupported(self, Capability::Schedulers)
    }

    /// Number of schedulers.
    async fn get_job_schedulers_count(&self) -> BackendResult<u64> {
        unsupported(self, Capability::Schedulers)
    }

    /// Removes the scheduler `id` and its pending iteration if that is delayed; `false` when
    /// there was no such scheduler.
    async fn remove_job_scheduler(&self, id: &str) -> BackendResult<bool> {
        unsupported(self, Capability::Schedulers)
    }
}

#[async_trait]
impl<T: JobSchedulers + ?Sized> JobSchedulers for std::sync::Arc<T> {
    async fn upsert_job_scheduler(&self, plan: &UpsertPlan) -> BackendResult<UpsertOutcome> {
        (**self).upsert_job_scheduler(plan).await
    }

    async fn create_next_iteration(
        &self,
        plan: &NextIterationPlan,
    ) -> BackendResult<NextIteration> {
        (**self).create_next_iteration(plan).await
    }

    async fn get_job_scheduler(&self, id: &str) -> BackendResult<Option<JobSchedulerRecord>> {
        (**self).get_job_scheduler(id).await
    }

    async fn get_job_schedulers(
        &self,
        start: i64,
        end: i64,
        asc: bool,
    ) -> BackendResult<Vec<JobSchedulerRecord>> {
        (**self).get_job_schedulers(start, end, asc).await
    }

    async fn get_job_schedulers_count(&self) -> BackendResult<u64> {
        (**self).get_job_schedulers_count().await
    }

    async fn remove_job_scheduler(&self, id: &str) -> BackendResult<bool> {
        (**self).remove_job_scheduler(id).await
    }
}
