//! The seam between the Worker and its backend.
//!
//! The Worker, its LockManager and its job actors never call a Redis client: they call a
//! [`Store`], the worker side of the backend seam ([`bullmq_backend::WorkerStore`], re-exported
//! here under its short name with the values it exchanges). [`RedisStore`] implements it on
//! Redis, `bullmq_backend::memory` in memory; [`Traced`] wraps any store and opens one
//! `bullmq.store.*` tracing span per call, so implementations stay free of instrumentation.
//!
//! Telemetry spans: `bullmq.store.fetch_batch` (queue, requested, fetched),
//! `bullmq.store.finish_batch` (queue, finished, requested, fetched),
//! `bullmq.store.extend_locks` (queue, jobs, lost), `bullmq.store.check_stalled` (queue,
//! recovered), `bullmq.store.wait_for_job` (queue), `bullmq.store.update_progress`,
//! `bullmq.store.add_log`, `bullmq.store.update_data`, `bullmq.store.get_dependencies`,
//! `bullmq.store.get_dependency_counts`, `bullmq.store.schedule_next_iteration`,
//! `bullmq.store.move_to_waiting_children`, `bullmq.store.move_to_wait` (queue, job_id);
//! for a [`bullmq_backend::JobControl`] (a queue's store), `bullmq.store.retry_job` (queue,
//! job_id, from, outcome), `bullmq.store.promote_job` (queue, job_id, outcome),
//! `bullmq.store.change_priority` (queue, job_id, priority, outcome),
//! `bullmq.store.change_delay` (queue, job_id, delay_ms, outcome),
//! `bullmq.store.clear_logs` (queue, job_id, keep), `bullmq.store.retry_jobs` (queue, from,
//! count, finished_by_ms, moved), `bullmq.store.promote_jobs` (queue, count, moved) and
//! `bullmq.store.extend_lock` (queue, job_id, duration_ms, outcome);
//! for a [`bullmq_backend::FlowStore`], `bullmq.store.add_flow` (queue of the first node, jobs)
//! and `bullmq.store.read_flow_node` (queue, job_id).

mod traced;

pub use bullmq_backend::{
    BackendError as StoreError, BackendResult as StoreResult, ChildRef, ConnectionChange,
    CorruptedJob, Dependencies, DependencyCounts, DependencyKind, DependencyPage, FetchRequest,
    Fetched, FetchedJob, Finish, FinishAction, FinishCode, FinishReply, JobFlows, JobUpdates,
    MoveToWaitOutcome, NextIteration, Receipt, Retention, StalledReport, WaitingChildrenOutcome,
    WorkerStore as Store,
};
pub use bullmq_protocol::scheduler::NextIterationPlan;
pub use bullmq_redis::RedisWorkerStore as RedisStore;
pub use traced::Traced;

pub(crate) use bullmq_backend::now_ms;
