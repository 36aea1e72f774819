//! What this backend declines, as typed errors that name the capability.

use bullmq_backend::BackendError;

use crate::error::PgError;

/// A refusal of `what` on PostgreSQL in this release.
pub(crate) fn unsupported(what: &'static str) -> BackendError {
    BackendError::backend(PgError::Reply {
        operation: what,
        detail: "not available on PostgreSQL in this release".into(),
    })
}

use async_trait::async_trait;
use bullmq_backend::{BackendResult, JobSchedulers, NextIteration, UpsertOutcome};
use bullmq_protocol::scheduler::{JobSchedulerRecord, NextIterationPlan, UpsertPlan};

use crate::queue_store::PgQueueStore;

#[async_trait]
impl JobSchedulers for PgQueueStore {
    async fn upsert_job_scheduler(&self, _plan: &UpsertPlan) -> BackendResult<UpsertOutcome> {
        Err(unsupported("job schedulers"))
    }

    async fn create_next_iteration(
        &self,
        _plan: &NextIterationPlan,
    ) -> BackendResult<NextIteration> {
        Err(unsupported("job schedulers"))
    }

    async fn get_job_scheduler(&self, _id: &str) -> BackendResult<Option<JobSchedulerRecord>> {
        Err(unsupported("job schedulers"))
    }

    async fn get_job_schedulers(
        &self,
        _start: i64,
        _end: i64,
        _asc: bool,
    ) -> BackendResult<Vec<JobSchedulerRecord>> {
        Err(unsupported("job schedulers"))
    }

    async fn get_job_schedulers_count(&self) -> BackendResult<u64> {
        Err(unsupported("job schedulers"))
    }

    async fn remove_job_scheduler(&self, _id: &str) -> BackendResult<bool> {
        Err(unsupported("job schedulers"))
    }
}
