//! [`Traced`]: a worker's (or a flow producer's) store wrapper that opens one `bullmq.store.*`
//! span per call. The Queue's store has its generated twin in `traced_queue.rs`.

use std::future::Future;
use std::time::Duration;

use async_trait::async_trait;
use bullmq_backend::{BackendName, FlowAdded, FlowNodeInsert, FlowNodeRead, FlowStore};
use bullmq_protocol::QueueId;
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
pub(super) async fn in_span<T>(
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

impl<S: BackendName> BackendName for Traced<S> {
    fn backend_name(&self) -> &'static str {
        self.0.backend_name()
    }
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
            "bullmq.store.get_dependencies_page",
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
        queue: &QueueId,
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
