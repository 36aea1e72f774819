//! [`Traced`]: a store wrapper that opens one `bullmq.store.*` span per call.

use std::future::Future;
use std::time::Duration;

use async_trait::async_trait;
use bullmq_backend::{
    ControlOutcome, FlowAdded, FlowNodeInsert, FlowNodeRead, FlowStore, GlobalRateLimit,
    JobControl, LockOutcome, QueueControl, QueueStore, RetryFrom, RetryReset,
};
use bullmq_protocol::keys::QueueKeys;
use tracing::{Instrument, Span};

use super::{
    ChildRef, ConnectionChange, Dependencies, DependencyCounts, DependencyKind, DependencyPage,
    FetchRequest, Fetched, Finish, FinishReply, JobFlows, JobUpdates, MoveToWaitOutcome,
    NextIteration, NextIterationPlan, StalledReport, Store, StoreResult, WaitingChildrenOutcome,
};

/// Wraps a store and instruments every call (see the [module docs](super) for the spans).
#[derive(Debug, Clone)]
pub struct Traced<S>(pub S);

/// Runs `call` inside `span`, then records on it what `record` reads from a success and the
/// error of a failure (the span declares the fields, as `Empty`). The one instrumentation
/// helper of every seam call.
async fn in_span<T>(
    span: Span,
    call: impl Future<Output = StoreResult<T>>,
    record: impl FnOnce(&Span, &T),
) -> StoreResult<T> {
    async {
        let result = call.await;
        let current = Span::current();
        match &result {
            Ok(value) => record(&current, value),
            Err(error) => {
                current.record("error", tracing::field::display(error));
            }
        }
        result
    }
    .instrument(span)
    .await
}

/// Declares the span of a store call: its name, the queue, the given fields, and `error`.
macro_rules! store_span {
    ($level:ident, $name:literal, $queue:expr $(, $($field:tt)*)?) => {
        tracing::$level!(
            $name,
            queue = $queue,
            $($($field)*,)?
            error = tracing::field::Empty
        )
    };
}

#[async_trait]
impl<S: Store> Store for Traced<S> {
    fn queue_name(&self) -> &str {
        self.0.queue_name()
    }

    async fn fetch_batch(&self, request: &FetchRequest) -> StoreResult<Fetched> {
        let span = store_span!(
            debug_span,
            "bullmq.store.fetch_batch",
            self.queue_name(),
            requested = request.count,
            fetched = tracing::field::Empty
        );
        in_span(span, self.0.fetch_batch(request), |span, fetched| {
            span.record("fetched", fetched.jobs.len());
        })
        .await
    }

    async fn finish_batch(
        &self,
        finishes: &[Finish],
        fetch: Option<&FetchRequest>,
    ) -> StoreResult<FinishReply> {
        let span = store_span!(
            debug_span,
            "bullmq.store.finish_batch",
            self.queue_name(),
            finished = finishes.len(),
            requested = fetch.map_or(0, |f| f.count),
            fetched = tracing::field::Empty
        );
        in_span(span, self.0.finish_batch(finishes, fetch), |span, reply| {
            span.record("fetched", reply.fetched.jobs.len());
        })
        .await
    }

    async fn extend_locks(
        &self,
        jobs: &[(String, String)],
        lock_duration: Duration,
    ) -> StoreResult<Vec<String>> {
        let span = store_span!(
            debug_span,
            "bullmq.store.extend_locks",
            self.queue_name(),
            jobs = jobs.len(),
            lost = tracing::field::Empty
        );
        in_span(
            span,
            self.0.extend_locks(jobs, lock_duration),
            |span, lost| {
                span.record("lost", lost.len());
            },
        )
        .await
    }

    async fn check_stalled(
        &self,
        max_stalled_count: u32,
        interval: Duration,
    ) -> StoreResult<StalledReport> {
        let span = store_span!(
            debug_span,
            "bullmq.store.check_stalled",
            self.queue_name(),
            recovered = tracing::field::Empty
        );
        in_span(
            span,
            self.0.check_stalled(max_stalled_count, interval),
            |span, report| {
                span.record("recovered", report.recovered.len());
            },
        )
        .await
    }

    async fn wait_for_job(&self, timeout: Duration) -> StoreResult<bool> {
        let span = store_span!(trace_span, "bullmq.store.wait_for_job", self.queue_name());
        in_span(span, self.0.wait_for_job(timeout), |_, _| {}).await
    }

    fn connection_changes(&self) -> Option<tokio::sync::broadcast::Receiver<ConnectionChange>> {
        self.0.connection_changes()
    }

    async fn close(&self) {
        self.0.close().await;
    }

    async fn schedule_next_iteration(
        &self,
        plan: &NextIterationPlan,
    ) -> StoreResult<NextIteration> {
        let span = store_span!(
            debug_span,
            "bullmq.store.schedule_next_iteration",
            self.queue_name(),
            job_id = plan.producer_id.as_str()
        );
        in_span(span, self.0.schedule_next_iteration(plan), |_, _| {}).await
    }

    async fn move_to_waiting_children(
        &self,
        job_id: &str,
        token: &str,
        child: Option<&ChildRef>,
    ) -> StoreResult<WaitingChildrenOutcome> {
        let span = store_span!(
            debug_span,
            "bullmq.store.move_to_waiting_children",
            self.queue_name(),
            job_id
        );
        let call = self.0.move_to_waiting_children(job_id, token, child);
        in_span(span, call, |_, _| {}).await
    }

    async fn move_to_wait(&self, job_id: &str, token: &str) -> StoreResult<MoveToWaitOutcome> {
        let span = store_span!(
            debug_span,
            "bullmq.store.move_to_wait",
            self.queue_name(),
            job_id
        );
        in_span(span, self.0.move_to_wait(job_id, token), |_, _| {}).await
    }
}

#[async_trait]
impl<S: Store> JobFlows for Traced<S> {
    async fn get_dependencies(&self, job_id: &str) -> StoreResult<Dependencies> {
        let span = store_span!(
            debug_span,
            "bullmq.store.get_dependencies",
            self.queue_name(),
            job_id
        );
        in_span(span, self.0.get_dependencies(job_id), |_, _| {}).await
    }

    async fn get_dependency_counts(&self, job_id: &str) -> StoreResult<DependencyCounts> {
        let span = store_span!(
            debug_span,
            "bullmq.store.get_dependency_counts",
            self.queue_name(),
            job_id
        );
        in_span(span, self.0.get_dependency_counts(job_id), |_, _| {}).await
    }

    async fn get_dependencies_page(
        &self,
        job_id: &str,
        kind: DependencyKind,
        cursor: u64,
        count: u64,
    ) -> StoreResult<DependencyPage> {
        let span = store_span!(
            debug_span,
            "bullmq.store.get_dependencies",
            self.queue_name(),
            job_id
        );
        in_span(
            span,
            self.0.get_dependencies_page(job_id, kind, cursor, count),
            |_, _| {},
        )
        .await
    }
}

#[async_trait]
impl<S: Store> JobUpdates for Traced<S> {
    async fn update_progress(
        &self,
        job_id: &str,
        progress: &serde_json::Value,
    ) -> StoreResult<bool> {
        let span = store_span!(
            debug_span,
            "bullmq.store.update_progress",
            self.queue_name(),
            job_id
        );
        in_span(span, self.0.update_progress(job_id, progress), |_, _| {}).await
    }

    async fn add_log(
        &self,
        job_id: &str,
        line: &str,
        keep_logs: Option<u64>,
    ) -> StoreResult<Option<u64>> {
        let span = store_span!(
            debug_span,
            "bullmq.store.add_log",
            self.queue_name(),
            job_id
        );
        in_span(span, self.0.add_log(job_id, line, keep_logs), |_, _| {}).await
    }

    async fn update_data(&self, job_id: &str, data: &serde_json::Value) -> StoreResult<bool> {
        let span = store_span!(
            debug_span,
            "bullmq.store.update_data",
            self.queue_name(),
            job_id
        );
        in_span(span, self.0.update_data(job_id, data), |_, _| {}).await
    }
}

#[async_trait]
impl<S: FlowStore> FlowStore for Traced<S> {
    async fn add_flow(&self, nodes: &[FlowNodeInsert]) -> StoreResult<FlowAdded> {
        let queue = nodes.first().map_or("", |n| n.queue.name());
        let span = store_span!(
            debug_span,
            "bullmq.store.add_flow",
            queue,
            jobs = nodes.len()
        );
        in_span(span, self.0.add_flow(nodes), |_, _| {}).await
    }

    async fn read_node(
        &self,
        queue: &QueueKeys,
        job_id: &str,
        max_children: u64,
    ) -> StoreResult<Option<FlowNodeRead>> {
        let span = store_span!(
            debug_span,
            "bullmq.store.read_flow_node",
            queue.name(),
            job_id
        );
        in_span(
            span,
            self.0.read_node(queue, job_id, max_children),
            |_, _| {},
        )
        .await
    }

    async fn close(&self) -> StoreResult<()> {
        self.0.close().await
    }
}

/// Queue control: one DEBUG span per call, `queue` and the call's scalar argument.
#[async_trait]
impl<S: QueueStore> QueueControl for Traced<S> {
    async fn set_global_concurrency(&self, concurrency: u64) -> StoreResult<()> {
        let span = store_span!(
            debug_span,
            "bullmq.store.set_global_concurrency",
            QueueStore::queue_name(&self.0),
            concurrency
        );
        in_span(span, self.0.set_global_concurrency(concurrency), |_, _| {}).await
    }

    async fn get_global_concurrency(&self) -> StoreResult<Option<u64>> {
        let span = store_span!(
            debug_span,
            "bullmq.store.get_global_concurrency",
            QueueStore::queue_name(&self.0)
        );
        in_span(span, self.0.get_global_concurrency(), |_, _| {}).await
    }

    async fn remove_global_concurrency(&self) -> StoreResult<bool> {
        let span = store_span!(
            debug_span,
            "bullmq.store.remove_global_concurrency",
            QueueStore::queue_name(&self.0)
        );
        in_span(span, self.0.remove_global_concurrency(), |_, _| {}).await
    }

    async fn set_global_rate_limit(&self, limit: GlobalRateLimit) -> StoreResult<()> {
        let span = store_span!(
            debug_span,
            "bullmq.store.set_global_rate_limit",
            QueueStore::queue_name(&self.0),
            max = limit.max,
            duration_ms = limit.duration_ms()
        );
        in_span(span, self.0.set_global_rate_limit(limit), |_, _| {}).await
    }

    async fn get_global_rate_limit(&self) -> StoreResult<Option<GlobalRateLimit>> {
        let span = store_span!(
            debug_span,
            "bullmq.store.get_global_rate_limit",
            QueueStore::queue_name(&self.0)
        );
        in_span(span, self.0.get_global_rate_limit(), |_, _| {}).await
    }

    async fn remove_global_rate_limit(&self) -> StoreResult<u64> {
        let span = store_span!(
            debug_span,
            "bullmq.store.remove_global_rate_limit",
            QueueStore::queue_name(&self.0)
        );
        in_span(span, self.0.remove_global_rate_limit(), |_, _| {}).await
    }

    async fn set_rate_limit(&self, ttl_ms: u64) -> StoreResult<()> {
        let span = store_span!(
            debug_span,
            "bullmq.store.set_rate_limit",
            QueueStore::queue_name(&self.0),
            ttl_ms
        );
        in_span(span, self.0.set_rate_limit(ttl_ms), |_, _| {}).await
    }

    async fn get_rate_limit_ttl(&self, max_jobs: Option<u64>) -> StoreResult<i64> {
        let span = store_span!(
            debug_span,
            "bullmq.store.get_rate_limit_ttl",
            QueueStore::queue_name(&self.0),
            max_jobs = tracing::field::debug(max_jobs)
        );
        in_span(span, self.0.get_rate_limit_ttl(max_jobs), |_, _| {}).await
    }

    async fn remove_rate_limit_key(&self) -> StoreResult<bool> {
        let span = store_span!(
            debug_span,
            "bullmq.store.remove_rate_limit_key",
            QueueStore::queue_name(&self.0)
        );
        in_span(span, self.0.remove_rate_limit_key(), |_, _| {}).await
    }

    async fn is_maxed(&self) -> StoreResult<bool> {
        let span = store_span!(
            debug_span,
            "bullmq.store.is_maxed",
            QueueStore::queue_name(&self.0)
        );
        in_span(span, self.0.is_maxed(), |_, _| {}).await
    }

    async fn trim_events(&self, max_length: u64) -> StoreResult<u64> {
        let span = store_span!(
            debug_span,
            "bullmq.store.trim_events",
            QueueStore::queue_name(&self.0),
            max_length
        );
        in_span(span, self.0.trim_events(max_length), |_, _| {}).await
    }

    async fn get_deduplication_job_id(&self, dedup_id: &str) -> StoreResult<Option<String>> {
        let span = store_span!(
            debug_span,
            "bullmq.store.get_deduplication_job_id",
            QueueStore::queue_name(&self.0),
            dedup_id
        );
        in_span(span, self.0.get_deduplication_job_id(dedup_id), |_, _| {}).await
    }

    async fn remove_deduplication_key(&self, dedup_id: &str) -> StoreResult<bool> {
        let span = store_span!(
            debug_span,
            "bullmq.store.remove_deduplication_key",
            QueueStore::queue_name(&self.0),
            dedup_id
        );
        in_span(span, self.0.remove_deduplication_key(dedup_id), |_, _| {}).await
    }

    async fn get_counts_per_priority(&self, priorities: &[u32]) -> StoreResult<Vec<u64>> {
        let span = store_span!(
            debug_span,
            "bullmq.store.get_counts_per_priority",
            QueueStore::queue_name(&self.0),
            priorities = priorities.len()
        );
        in_span(span, self.0.get_counts_per_priority(priorities), |_, _| {}).await
    }
}

/// Job control: one DEBUG span per call, `queue`, `job_id` and the outcome.
#[async_trait]
impl<S: QueueStore> JobControl for Traced<S> {
    async fn retry_job(
        &self,
        job_id: &str,
        from: RetryFrom,
        reset: RetryReset,
    ) -> StoreResult<ControlOutcome> {
        let span = store_span!(
            debug_span,
            "bullmq.store.retry_job",
            self.0.queue_name(),
            job_id,
            from = from.as_str(),
            outcome = tracing::field::Empty
        );
        in_span(span, self.0.retry_job(job_id, from, reset), |span, o| {
            span.record("outcome", tracing::field::debug(o));
        })
        .await
    }

    async fn promote_job(&self, job_id: &str) -> StoreResult<ControlOutcome> {
        let span = store_span!(
            debug_span,
            "bullmq.store.promote_job",
            self.0.queue_name(),
            job_id,
            outcome = tracing::field::Empty
        );
        in_span(span, self.0.promote_job(job_id), |span, o| {
            span.record("outcome", tracing::field::debug(o));
        })
        .await
    }

    async fn change_priority(
        &self,
        job_id: &str,
        priority: u32,
        lifo: bool,
    ) -> StoreResult<ControlOutcome> {
        let span = store_span!(
            debug_span,
            "bullmq.store.change_priority",
            self.0.queue_name(),
            job_id,
            priority,
            outcome = tracing::field::Empty
        );
        in_span(
            span,
            self.0.change_priority(job_id, priority, lifo),
            |span, o| {
                span.record("outcome", tracing::field::debug(o));
            },
        )
        .await
    }

    async fn change_delay(&self, job_id: &str, delay: Duration) -> StoreResult<ControlOutcome> {
        let span = store_span!(
            debug_span,
            "bullmq.store.change_delay",
            self.0.queue_name(),
            job_id,
            delay_ms = u64::try_from(delay.as_millis()).unwrap_or(u64::MAX),
            outcome = tracing::field::Empty
        );
        in_span(span, self.0.change_delay(job_id, delay), |span, o| {
            span.record("outcome", tracing::field::debug(o));
        })
        .await
    }

    async fn clear_logs(&self, job_id: &str, keep: u64) -> StoreResult<()> {
        let span = store_span!(
            debug_span,
            "bullmq.store.clear_logs",
            self.0.queue_name(),
            job_id,
            keep
        );
        in_span(span, self.0.clear_logs(job_id, keep), |_, _| {}).await
    }

    async fn retry_jobs(
        &self,
        from: RetryFrom,
        count: u32,
        finished_by_ms: u64,
    ) -> StoreResult<u64> {
        let span = store_span!(
            debug_span,
            "bullmq.store.retry_jobs",
            self.0.queue_name(),
            from = from.as_str(),
            count,
            finished_by_ms,
            moved = tracing::field::Empty
        );
        in_span(
            span,
            self.0.retry_jobs(from, count, finished_by_ms),
            |span, moved| {
                span.record("moved", *moved);
            },
        )
        .await
    }

    async fn promote_jobs(&self, count: u32) -> StoreResult<u64> {
        let span = store_span!(
            debug_span,
            "bullmq.store.promote_jobs",
            self.0.queue_name(),
            count,
            moved = tracing::field::Empty
        );
        in_span(span, self.0.promote_jobs(count), |span, moved| {
            span.record("moved", *moved);
        })
        .await
    }

    async fn extend_lock(
        &self,
        job_id: &str,
        token: &str,
        duration: Duration,
    ) -> StoreResult<LockOutcome> {
        let span = store_span!(
            debug_span,
            "bullmq.store.extend_lock",
            self.0.queue_name(),
            job_id,
            duration_ms = u64::try_from(duration.as_millis()).unwrap_or(u64::MAX),
            outcome = tracing::field::Empty
        );
        in_span(
            span,
            self.0.extend_lock(job_id, token, duration),
            |span, o| {
                span.record("outcome", tracing::field::debug(o));
            },
        )
        .await
    }
}
