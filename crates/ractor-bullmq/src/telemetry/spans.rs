//! Span constructors of the catalogue: the caller enters or instruments with the returned span.

use tracing::field::Empty;
use tracing::Span;

use super::events::JobTelemetry;

/// The `bullmq.queue.add` span (PRODUCER with OpenTelemetry) around adding one job; `job.id`
/// is empty until [`record_job_id`] (ids are often assigned by Redis).
///
/// Producer wiring: open this span, read [`propagation_metadata`] from it into the job's
/// `opts.tm` (unless the caller set `tm` or `omc`), write the job, record its id.
pub fn add_span(queue: &str, job_name: &str) -> Span {
    tracing::info_span!(target: "bullmq", "bullmq.queue.add", queue, job.id = Empty,
        job.name = job_name, otel.kind = "producer")
}

/// The `bullmq.queue.add_bulk` span around adding `count` jobs in one call.
pub fn add_bulk_span(queue: &str, count: usize) -> Span {
    tracing::info_span!(target: "bullmq", "bullmq.queue.add_bulk", queue, count,
        otel.kind = "producer")
}

/// The `bullmq.flow.add` span (PRODUCER with OpenTelemetry) around adding one flow of `count`
/// jobs whose root is `job_name` in `queue`; `job.id` (the root's) is recorded once known.
pub fn flow_add_span(queue: &str, job_name: &str, count: usize) -> Span {
    tracing::info_span!(target: "bullmq", "bullmq.flow.add", queue, job.id = Empty,
        job.name = job_name, count, otel.kind = "producer")
}

/// The `bullmq.flow.add_bulk` span around adding `count` flows of `jobs` jobs in all.
pub fn flow_add_bulk_span(count: usize, jobs: usize) -> Span {
    tracing::info_span!(target: "bullmq", "bullmq.flow.add_bulk", count, jobs,
        otel.kind = "producer")
}

/// The `bullmq.flow.get_flow` span around reading the flow rooted at `job_id` of `queue`.
pub fn flow_get_span(queue: &str, job_id: &str) -> Span {
    tracing::debug_span!(target: "bullmq", "bullmq.flow.get_flow", queue, job.id = job_id)
}

/// Records the job id on a span from [`add_span`] once the job is written.
pub fn record_job_id(span: &Span, job_id: &str) {
    span.record("job.id", job_id);
}

/// The `bullmq.worker.process` span (CONSUMER with OpenTelemetry) around one attempt of one
/// job. With the `otel` feature and `job.trace_metadata` set (the job's `opts.tm`), the span's
/// OpenTelemetry parent is the producer's context, so a trace started by a Node (or Rust)
/// producer continues here.
pub fn process_span(job: &JobTelemetry<'_>) -> Span {
    let span = tracing::info_span!(target: "bullmq", "bullmq.worker.process", queue = job.queue,
        job.id = job.job_id, job.name = job.job_name, attempt = job.attempt,
        worker = job.worker, otel.kind = "consumer");
    #[cfg(feature = "otel")]
    if let Some(tm) = job.trace_metadata {
        super::otel::set_parent(&span, tm);
    }
    span
}

/// The value to store in a new job's `opts.tm`: the trace context of `span` (normally the
/// [`add_span`]) serialised as Node's `bullmq-otel` does. `None` without the `otel` feature,
/// without an OpenTelemetry layer, or when the span is not sampled into a valid trace.
pub fn propagation_metadata(span: &Span) -> Option<String> {
    #[cfg(feature = "otel")]
    {
        super::otel::inject_span(span)
    }
    #[cfg(not(feature = "otel"))]
    {
        let _ = span;
        None
    }
}
