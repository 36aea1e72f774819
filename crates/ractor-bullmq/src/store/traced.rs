//! [`Traced`]: a [`Store`] wrapper that opens one `bullmq.store.*` span per call.

use std::time::Duration;

use async_trait::async_trait;
use tracing::Instrument;

use super::{FetchRequest, Fetched, Finish, FinishReply, StalledReport, Store, StoreResult};

/// Wraps a store and instruments every call (see the [module docs](super) for the spans).
#[derive(Debug, Clone)]
pub struct Traced<S>(pub S);

fn record_err<T>(result: &StoreResult<T>) {
    if let Err(error) = result {
        tracing::Span::current().record("error", tracing::field::display(error));
    }
}

#[async_trait]
impl<S: Store> Store for Traced<S> {
    fn queue_name(&self) -> &str {
        self.0.queue_name()
    }

    async fn fetch_batch(&self, request: &FetchRequest) -> StoreResult<Fetched> {
        let span = tracing::debug_span!(
            "bullmq.store.fetch_batch",
            queue = self.queue_name(),
            requested = request.count,
            fetched = tracing::field::Empty,
            error = tracing::field::Empty
        );
        async {
            let result = self.0.fetch_batch(request).await;
            if let Ok(fetched) = &result {
                tracing::Span::current().record("fetched", fetched.jobs.len());
            }
            record_err(&result);
            result
        }
        .instrument(span)
        .await
    }

    async fn finish_batch(
        &self,
        finishes: &[Finish],
        fetch: Option<&FetchRequest>,
    ) -> StoreResult<FinishReply> {
        let span = tracing::debug_span!(
            "bullmq.store.finish_batch",
            queue = self.queue_name(),
            finished = finishes.len(),
            requested = fetch.map_or(0, |f| f.count),
            fetched = tracing::field::Empty,
            error = tracing::field::Empty
        );
        async {
            let result = self.0.finish_batch(finishes, fetch).await;
            if let Ok(reply) = &result {
                tracing::Span::current().record("fetched", reply.fetched.jobs.len());
            }
            record_err(&result);
            result
        }
        .instrument(span)
        .await
    }

    async fn extend_locks(
        &self,
        jobs: &[(String, String)],
        lock_duration: Duration,
    ) -> StoreResult<Vec<String>> {
        let span = tracing::debug_span!(
            "bullmq.store.extend_locks",
            queue = self.queue_name(),
            jobs = jobs.len(),
            lost = tracing::field::Empty,
            error = tracing::field::Empty
        );
        async {
            let result = self.0.extend_locks(jobs, lock_duration).await;
            if let Ok(lost) = &result {
                tracing::Span::current().record("lost", lost.len());
            }
            record_err(&result);
            result
        }
        .instrument(span)
        .await
    }

    async fn check_stalled(
        &self,
        max_stalled_count: u32,
        interval: Duration,
    ) -> StoreResult<StalledReport> {
        let span = tracing::debug_span!(
            "bullmq.store.check_stalled",
            queue = self.queue_name(),
            recovered = tracing::field::Empty,
            error = tracing::field::Empty
        );
        async {
            let result = self.0.check_stalled(max_stalled_count, interval).await;
            if let Ok(report) = &result {
                tracing::Span::current().record("recovered", report.recovered.len());
            }
            record_err(&result);
            result
        }
        .instrument(span)
        .await
    }

    async fn wait_for_job(&self, timeout: Duration) -> StoreResult<bool> {
        let span = tracing::trace_span!(
            "bullmq.store.wait_for_job",
            queue = self.queue_name(),
            error = tracing::field::Empty
        );
        async {
            let result = self.0.wait_for_job(timeout).await;
            record_err(&result);
            result
        }
        .instrument(span)
        .await
    }

    async fn update_progress(&self, job_id: &str, progress: &serde_json::Value) -> StoreResult<()> {
        let span = tracing::debug_span!(
            "bullmq.store.update_progress",
            queue = self.queue_name(),
            job_id,
            error = tracing::field::Empty
        );
        async {
            let result = self.0.update_progress(job_id, progress).await;
            record_err(&result);
            result
        }
        .instrument(span)
        .await
    }

    async fn add_log(&self, job_id: &str, line: &str, keep_logs: Option<u64>) -> StoreResult<u64> {
        let span = tracing::debug_span!(
            "bullmq.store.add_log",
            queue = self.queue_name(),
            job_id,
            error = tracing::field::Empty
        );
        async {
            let result = self.0.add_log(job_id, line, keep_logs).await;
            record_err(&result);
            result
        }
        .instrument(span)
        .await
    }

    async fn update_data(&self, job_id: &str, data: &serde_json::Value) -> StoreResult<()> {
        let span = tracing::debug_span!(
            "bullmq.store.update_data",
            queue = self.queue_name(),
            job_id,
            error = tracing::field::Empty
        );
        async {
            let result = self.0.update_data(job_id, data).await;
            record_err(&result);
            result
        }
        .instrument(span)
        .await
    }

    fn connection_changes(
        &self,
    ) -> Option<tokio::sync::broadcast::Receiver<super::ConnectionChange>> {
        self.0.connection_changes()
    }

    async fn close(&self) {
        self.0.close().await;
    }
}
