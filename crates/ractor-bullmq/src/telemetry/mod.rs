//! Telemetry: the one catalogue of every `bullmq.*` span, event and metric.
//!
//! Everything the runtime reports goes through the plain functions of this module, so the
//! names below are the only ones a dashboard, an alert or a test needs to know. Nothing needs
//! global setup: the tracing side reaches whatever `tracing` subscriber the application
//! installed (none: the calls cost a few atomic loads), the metrics side reaches whatever
//! [`metrics`] recorder is installed (Prometheus, StatsD, OpenTelemetry, …; none: no-ops).
//! [`describe_metrics`] registers units and help texts and is optional.
//!
//! `docs/telemetry.md` mirrors this catalogue for humans; the names are stable: renaming one
//! is a breaking change.
//!
//! # Spans
//!
//! | name | level | fields | opened by |
//! |---|---|---|---|
//! | `bullmq.queue.add` | INFO | `queue`, `job.id` (recorded once known), `job.name` | [`add_span`] |
//! | `bullmq.queue.add_bulk` | INFO | `queue`, `count` | [`add_bulk_span`] |
//! | `bullmq.flow.add` | INFO | `queue` (the root's), `job.id` (the root's, once known), `job.name`, `count` (jobs) | [`flow_add_span`] |
//! | `bullmq.flow.add_bulk` | INFO | `count` (flows), `jobs` | [`flow_add_bulk_span`] |
//! | `bullmq.flow.get_flow` | DEBUG | `queue`, `job.id` | [`flow_get_span`] |
//! | `bullmq.worker.process` | INFO | `queue`, `job.id`, `job.name`, `attempt`, `worker`, `otel.kind` = `consumer` | [`process_span`] |
//! | `bullmq.store.fetch_batch` | DEBUG | `queue`, `requested`, `fetched` | the traced `Store` |
//! | `bullmq.store.finish_batch` | DEBUG | `queue`, `finished`, `requested`, `fetched` | the traced `Store` |
//! | `bullmq.store.extend_locks` | DEBUG | `queue`, `jobs`, `lost` | the traced `Store` |
//! | `bullmq.store.check_stalled` | DEBUG | `queue`, `recovered` | the traced `Store` |
//! | `bullmq.store.wait_for_job` | TRACE | `queue` | the traced `Store` |
//! | `bullmq.store.update_progress`, `.add_log`, `.update_data` | DEBUG | `queue`, `job_id` | the traced `Store` |
//! | `bullmq.store.get_dependencies`, `.get_dependency_counts`, `.get_dependencies_page` | DEBUG | `queue`, `job_id` | the traced `Store`, a Queue's store |
//! | `bullmq.store.schedule_next_iteration` | DEBUG | `queue`, `job_id` | the traced `Store` |
//! | `bullmq.store.move_to_waiting_children`, `.move_to_wait` | DEBUG | `queue`, `job_id` | the traced `Store` |
//! | `bullmq.store.retry_job`, `.promote_job`, `.change_priority`, `.change_delay`, `.clear_logs` | DEBUG | `queue`, `job_id`, `from` (retry), `priority`, `delay_ms`, `keep` (clear_logs), `outcome` | a Queue's store |
//! | `bullmq.store.retry_jobs`, `.promote_jobs` | DEBUG | `queue`, `from` (retry), `count`, `finished_by_ms` (retry), `moved` | a Queue's store |
//! | `bullmq.store.extend_lock` | DEBUG | `queue`, `job_id`, `duration_ms`, `outcome` | a Queue's store |
//! | `bullmq.store.add`, `.add_bulk`, `.set_meta`, `.get_meta`, `.get_counts`, `.get_ranges`, `.get_state`, `.get_job`, `.job_end`, `.get_job_logs`, `.pause`, `.resume`, `.is_paused`, `.drain`, `.clean`, `.obliterate_batch`, `.remove_job`, `.get_metrics` | DEBUG | `queue` and the call's scalar arguments (`job_id`, `count`, `states` = their number, `start`/`end`, …); `removed` (drain), `outcome` (remove_job) | a Queue's store |
//! | `bullmq.store.upsert_job_scheduler`, `.get_job_scheduler`, `.get_job_schedulers`, `.get_job_schedulers_count`, `.remove_job_scheduler`, `.create_next_iteration` | DEBUG | `queue`, `scheduler` (its id) or `job_id` | a Queue's store |
//! | `bullmq.store.get_delayed_count_before`, `.remove_deprecated_priority_key`, `.is_job_scheduler`, `.remove_owned_deduplication_key`, `.remove_child_dependency`, `.remove_unprocessed_children`, `.remove_orphaned_jobs` | DEBUG | `queue` and the call's argument (`timestamp_ms`, `scheduler`, `job_id`, `dedup_id`, `count`/`limit`); `outcome` (child dependency), `removed` (unprocessed children, orphans) | a Queue's store |
//! | `bullmq.store.list_workers` | DEBUG | `queue`, `workers` (how many) | a Queue's store |
//! | `bullmq.store.add_flow` | DEBUG | `queue` (the first node's), `jobs` | the traced `FlowStore` |
//! | `bullmq.store.read_flow_node` | DEBUG | `queue`, `job_id` | the traced `FlowStore` |
//! | `bullmq.store.set_global_concurrency`, `.get_global_concurrency`, `.remove_global_concurrency`, `.set_global_rate_limit`, `.get_global_rate_limit`, `.remove_global_rate_limit`, `.set_rate_limit`, `.get_rate_limit_ttl`, `.remove_rate_limit_key`, `.is_maxed`, `.trim_events`, `.get_deduplication_job_id`, `.remove_deduplication_key`, `.get_counts_per_priority` | DEBUG | `queue` and the call's argument (`concurrency`, `max`/`duration_ms`, `ttl_ms`, `max_jobs`, `max_length`, `dedup_id`, `priorities` = their number) | a Queue's store |
//!
//! A Queue's store is every `Queue`'s [`QueueStore`](bullmq_backend::QueueStore) wrapped with one
//! span per seam method, `bullmq.store.<method>` (generated, one line per method, in
//! `store/traced_queue.rs`). `docs/telemetry.md` lists each name in full;
//! `tests/telemetry_emitted.rs` checks that its span and metric tables are exactly what is
//! emitted.
//!
//! Every `bullmq.store.*` span also has an `error` field recorded when the call fails. The
//! `bullmq.queue.add` span carries `otel.kind` = `producer`, so with `tracing-opentelemetry`
//! it becomes a PRODUCER span, as Node BullMQ's `add` span is.
//!
//! # Events
//!
//! Events are `tracing` events with target `bullmq` and a stable `event` field (the name
//! below); `queue` is always present. Per-job events also carry `job.id` and `job.name`, and,
//! from a worker, `attempt` (1-based number of the attempt) and `worker`.
//!
//! | `event` | level | extra fields | emitted by | metrics |
//! |---|---|---|---|---|
//! | `bullmq.job.added` | DEBUG | `job.id`, `job.name` | [`job_added`] | `bullmq_jobs_added_total` |
//! | `bullmq.job.started` | DEBUG | job fields, `wait_ms` | [`job_started`] | `bullmq_job_wait_seconds`, `bullmq_worker_active_jobs` +1 |
//! | `bullmq.job.completed` | DEBUG | job fields, `duration_ms` | [`job_completed`] | `bullmq_jobs_completed_total`, `bullmq_job_duration_seconds{status="completed"}` |
//! | `bullmq.job.failed` | WARN | job fields, `duration_ms`, `error` | [`job_failed`] | `bullmq_jobs_failed_total`, `bullmq_job_duration_seconds{status="failed"}` |
//! | `bullmq.job.retried` | INFO | job fields, `duration_ms`, `delay_ms`, `error` | [`job_retried`] | `bullmq_jobs_retried_total`, `bullmq_job_duration_seconds{status="retried"}` |
//! | `bullmq.job.progress` | TRACE | job fields, `progress` (JSON) | [`job_progress`] | — |
//! | `bullmq.job.moved` | DEBUG | job fields, `duration_ms`, `to` (`waiting-children` \| `wait`) | [`job_moved`] (a processor moved its own job: step jobs) | — |
//! | `bullmq.job.cancelled` | INFO | job fields, `cause` (`requested` \| `timed_out`), `reason` | [`job_cancelled`] (`WorkerHandle::cancel_job`, a job's timeout) | — |
//! | `bullmq.worker.started` | INFO | `worker`, `concurrency` | [`worker_started`] | `bullmq_workers` +1 |
//! | `bullmq.worker.stopped` | INFO | `worker`, `uptime_s` | [`worker_stopped`] | `bullmq_workers` −1 |
//! | `bullmq.worker.concurrency_changed` | INFO | `worker`, `concurrency` | [`worker_concurrency_changed`] (`WorkerHandle::set_concurrency`) | — |
//! | `bullmq.worker.stalled_check` | DEBUG, WARN when it found jobs | `worker`, `recovered`, `failed` | [`stalled_check`] | `bullmq_jobs_stalled_total{outcome}` |
//! | `bullmq.queue.paused` | INFO | — | [`queue_paused`] | — |
//! | `bullmq.queue.resumed` | INFO | — | [`queue_resumed`] | — |
//! | `bullmq.worker.queue_empty` | DEBUG | `worker` | [`worker_queue_empty`] | — |
//! | `bullmq.queue.drained` | DEBUG | — | [`queue_drained`] (`Queue::drain`) | — |
//! | `bullmq.rate_limit.hit` | INFO | `delay_ms`, `worker` | [`rate_limit_hit`] | `bullmq_rate_limit_hits_total` |
//! | `bullmq.job.finish_refused` | WARN | `worker`, `job.id`, `error` | [`finish_refused`] | — |
//! | `bullmq.connection.lost` | WARN | `component` (`worker` \| `queue_events`), `error` | [`connection_lost`], once per outage | — |
//! | `bullmq.connection.restored` | INFO | `component`, `downtime_ms` | [`connection_restored`] | — |
//! | `bullmq.worker.stuck` | ERROR | `worker`, `stalled_for_ms` | [`worker_stuck`]: the progress watchdog stops the Worker | — |
//!
//! A Worker's finish path can report completed / failed / retried / rate-limited in one call
//! with [`job_finished`], from the [`AttemptEnd`] it decided. A `ManualWorker` reports its
//! finishes the same way, plus [`finish_refused`] and [`stalled_check`] (`worker`: its name,
//! else `manual`); it emits no `bullmq.job.started` or `bullmq.worker.started` / `stopped`.
//!
//! `bullmq_worker_active_jobs` goes back down when the [`ActiveJob`] guard returned by
//! [`job_started`] is dropped, whatever way the attempt ended (completed, failed, lock lost,
//! panicked), so the gauge cannot drift.
//!
//! # Metrics
//!
//! Names follow Prometheus conventions; labels are bounded: `queue`, and `job_name` where the
//! application chooses job names from a fixed set (they are in Node BullMQ's model).
//!
//! | metric | kind | labels | unit |
//! |---|---|---|---|
//! | `bullmq_jobs_added_total` | counter | `queue`, `job_name` | jobs |
//! | `bullmq_jobs_completed_total` | counter | `queue`, `job_name` | jobs |
//! | `bullmq_jobs_failed_total` | counter | `queue`, `job_name` | jobs (final failures) |
//! | `bullmq_jobs_retried_total` | counter | `queue`, `job_name` | attempts that failed and will run again |
//! | `bullmq_jobs_stalled_total` | counter | `queue`, `outcome` = `recovered` \| `failed` | jobs |
//! | `bullmq_rate_limit_hits_total` | counter | `queue` | hits |
//! | `bullmq_job_duration_seconds` | histogram | `queue`, `job_name`, `status` = `completed` \| `failed` \| `retried` | seconds |
//! | `bullmq_job_wait_seconds` | histogram | `queue`, `job_name` | seconds from added (or ready, when delayed) to started |
//! | `bullmq_worker_active_jobs` | gauge | `queue` | jobs being processed in this process |
//! | `bullmq_workers` | gauge | `queue` | running workers in this process |
//! | `bullmq_queue_jobs` | gauge | `queue`, `state` | jobs of the queue in that state, when `Queue::record_job_counts_metric` last counted |
//!
//! The per-minute completed/failed counts that Node keeps in Redis
//! (`metrics:completed|failed`) are read with [`Queue::get_metrics`](crate::Queue::get_metrics) (see [`Metrics`]).
//!
//! # OpenTelemetry
//!
//! With the `otel` cargo feature, `telemetry::otel` propagates the trace context through the
//! job's `opts.tm`, exactly as Node's `bullmq-otel` does: [`add_span`] +
//! [`propagation_metadata`] on the producer side, [`process_span`] parents itself on the job's
//! `tm` on the worker side.
//! Without the feature [`propagation_metadata`] returns `None` and `tm` is ignored.
//!
//! # Examples
//!
//! ```
//! use std::time::Duration;
//! use ractor_bullmq::telemetry::{self, JobTelemetry};
//!
//! let job = JobTelemetry::new("emails", "42", "welcome").attempt(1).worker("emails#1");
//! let span = telemetry::process_span(&job);
//! let _entered = span.enter();
//! let active = telemetry::job_started(&job, Some(Duration::from_millis(12)));
//! // ... run the processor ...
//! telemetry::job_completed(&job, active.elapsed());
//! drop(active);
//! ```

mod events;
mod finish;
mod names;
mod recorder;
mod spans;

#[cfg(feature = "otel")]
pub mod otel;
#[cfg(feature = "test-util")]
pub mod testing;

pub use bullmq_backend::{Metrics, MetricsKind, MetricsMeta};
pub use events::{
    connection_lost, connection_restored, finish_refused, job_added, job_cancelled, job_completed,
    job_failed, job_moved, job_progress, job_retried, job_started, queue_drained, queue_paused,
    queue_resumed, rate_limit_hit, stalled_check, wait_time, worker_concurrency_changed,
    worker_queue_empty, worker_started, worker_stopped, worker_stuck, ActiveJob, JobTelemetry,
    MovedTo,
};
pub use finish::{job_finished, AttemptEnd};
pub use names::{event_names, metric_names, span_names, TARGET};
pub use recorder::describe_metrics;

/// Sets the gauge `bullmq_queue_jobs` of `queue` in `state` to `count`, as
/// [`Queue::record_job_counts_metric`](crate::Queue::record_job_counts_metric) does for each
/// state it counted.
pub fn queue_jobs_counted(queue: &str, state: bullmq_protocol::state::JobState, count: u64) {
    recorder::queue_jobs(queue, state.as_str(), count);
}
pub use spans::{
    add_bulk_span, add_span, flow_add_bulk_span, flow_add_span, flow_get_span, process_span,
    propagation_metadata, record_job_id,
};
