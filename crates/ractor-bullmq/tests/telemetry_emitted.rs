//! The telemetry catalogue (`docs/telemetry.md`) says exactly what is emitted: every span and
//! metric it lists is emitted by some operation, and every `bullmq.*` span and `bullmq_*`
//! metric emitted is listed. On the in-memory backend: every method of a Queue's store (the
//! traced store every `Queue` opens) and of a Worker's traced store is called once, a Queue,
//! a FlowProducer, a real Worker and a ManualWorker do their part, and the spans and metrics
//! seen are compared with the catalogue's tables. A binary of its own: tracing's per-callsite
//! interest cache is shared by every thread, so a capture installed on one test's thread can
//! miss spans while other tests run.

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bullmq_backend::memory::MemoryBackend;
use bullmq_backend::{
    Backend, DependencyKind, FetchRequest, GlobalRateLimit, JobEnd, MetricsKind, NewJob, RetryFrom,
    RetryReset, WorkerStoreOptions,
};
use bullmq_protocol::scheduler::plan_next_iteration;
use ractor_bullmq::flow::{FlowJob, FlowProducer, FlowProducerOptions, GetFlowOptions};
use ractor_bullmq::protocol::{JobOptions, JobState};
use ractor_bullmq::scheduler::{Repeat, SchedulerTemplate};
use ractor_bullmq::store::Traced;
use ractor_bullmq::telemetry::testing::{CapturedEvents, CapturedMetrics};
use ractor_bullmq::worker::{Job, JobContext, ManualWorker, RateLimitError};
use ractor_bullmq::{Queue, QueueOptions, Worker, WorkerArgs, WorkerOptions};
use serde_json::{json, Value};

const LONG: Duration = Duration::from_secs(20);

/// The names in the first column of the tables of section `## {section}` of
/// `docs/telemetry.md` that start with `prefix` (a cell may list several, each in backticks).
fn catalogue(section: &str, prefix: &str) -> BTreeSet<String> {
    let doc = include_str!("../../../docs/telemetry.md");
    let heading = format!("## {section}\n");
    let start = doc.find(&heading).expect("section") + heading.len();
    let body = &doc[start..];
    let body = &body[..body.find("\n## ").unwrap_or(body.len())];
    let mut names = BTreeSet::new();
    for row in body.lines().filter(|l| l.starts_with('|')) {
        let first = row.split('|').nth(1).unwrap_or_default();
        for (i, piece) in first.split('`').enumerate() {
            if i % 2 == 1 && piece.starts_with(prefix) {
                names.insert(piece.to_owned());
            }
        }
    }
    assert!(!names.is_empty(), "no {prefix}* names under ## {section}");
    names
}

/// Waits until job `id` of `queue` is finished.
async fn finished(queue: &Queue, id: &str) {
    let deadline = tokio::time::Instant::now() + LONG;
    while queue.store().job_end(id).await.unwrap() == JobEnd::Unfinished {
        assert!(
            tokio::time::Instant::now() < deadline,
            "job {id} never finished"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Calls every method of the Queue's store once (results do not matter: a failed call has
/// its span too).
async fn every_queue_store_call(queue: &Queue) {
    let store = queue.store();
    let job = NewJob::new("direct", "{}", "{}", bullmq_backend::now_ms());
    let _ = store.add(&job).await;
    let _ = store.add_bulk(&[job]).await;
    let _ = store.set_meta(10_000).await;
    let _ = store.get_meta().await;
    let _ = store.get_counts(&[JobState::Waiting]).await;
    let _ = store.get_ranges(&[JobState::Waiting], 0, -1, true).await;
    let _ = store.get_state("1").await;
    let _ = store.get_job("1").await;
    let _ = store.job_end("1").await;
    let _ = store.get_job_logs("1", 0, -1, true).await;
    let _ = store.pause().await;
    let _ = store.is_paused().await;
    let _ = store.resume().await;
    let _ = store.update_progress("1", &json!(1)).await;
    let _ = store.add_log("1", "line", None).await;
    let _ = store.update_data("1", &json!({})).await;
    let _ = store.get_dependencies("1").await;
    let _ = store.get_dependency_counts("1").await;
    let _ = store
        .get_dependencies_page("1", DependencyKind::Processed, 0, 10)
        .await;
    let _ = store.get_job_scheduler("every-minute").await;
    let _ = store.get_job_schedulers(0, -1, true).await;
    let _ = store.get_job_schedulers_count().await;
    let _ = store.set_global_concurrency(4).await;
    let _ = store.get_global_concurrency().await;
    let _ = store.remove_global_concurrency().await;
    let limit = GlobalRateLimit::new(10, Duration::from_secs(1));
    let _ = store.set_global_rate_limit(limit).await;
    let _ = store.get_global_rate_limit().await;
    let _ = store.remove_global_rate_limit().await;
    let _ = store.set_rate_limit(10).await;
    let _ = store.get_rate_limit_ttl(None).await;
    let _ = store.remove_rate_limit_key().await;
    let _ = store.is_maxed().await;
    let _ = store.trim_events(1_000).await;
    let _ = store.get_deduplication_job_id("d").await;
    let _ = store.remove_deduplication_key("d").await;
    let _ = store.get_counts_per_priority(&[0, 1]).await;
    let _ = store
        .retry_job("1", RetryFrom::Failed, RetryReset::default())
        .await;
    let _ = store.promote_job("1").await;
    let _ = store.change_priority("1", 2, false).await;
    let _ = store.change_delay("1", Duration::from_secs(1)).await;
    let _ = store.clear_logs("1", 0).await;
    let _ = store.retry_jobs(RetryFrom::Failed, 10, u64::MAX).await;
    let _ = store.promote_jobs(10).await;
    let _ = store
        .extend_lock("1", "token", Duration::from_secs(1))
        .await;
    let _ = store.get_metrics(MetricsKind::Completed, 0, -1).await;
    let _ = store
        .get_delayed_count_before(bullmq_backend::now_ms())
        .await;
    let _ = store.remove_deprecated_priority_key().await;
    let _ = store.is_job_scheduler("every-minute").await;
    let _ = store.remove_owned_deduplication_key("d", "1").await;
    let _ = store.remove_child_dependency("1").await;
    let _ = store.remove_unprocessed_children("1").await;
    let _ = store.remove_orphaned_jobs(1_000, 0).await;
    let _ = store.list_workers().await;
    let _ = store.clean(JobState::Completed, 0, 0).await;
    let _ = store.drain(true).await;
    let _ = store.remove_job("1", false).await;
    // Refused (the queue is not paused), so the queue stays.
    let _ = store.obliterate_batch(10, false).await;
}

/// A scheduler: `upsert_job_scheduler` and `remove_job_scheduler` through the Queue, and
/// both ways of creating an iteration after its first one (the queue's store, and a worker's
/// traced store as a Worker does when it starts the iteration).
async fn scheduler_calls(
    queue: &Queue,
    worker_store: &Traced<Arc<dyn bullmq_backend::WorkerStore>>,
) {
    let first = queue
        .upsert_job_scheduler(
            "every-minute",
            Repeat::every(Duration::from_secs(60)),
            SchedulerTemplate::new("tick"),
        )
        .await
        .expect("upsert")
        .expect("first iteration");
    let plan = plan_next_iteration(
        first.id(),
        "every-minute",
        first.opts(),
        bullmq_backend::now_ms(),
    )
    .expect("plan")
    .expect("an every scheduler has a next iteration");
    let _ = queue.store().create_next_iteration(&plan).await;
    let _ = ractor_bullmq::store::Store::schedule_next_iteration(worker_store, &plan).await;
    queue
        .remove_job_scheduler("every-minute")
        .await
        .expect("remove");
}

/// Calls every method of a Worker's traced store once.
async fn every_worker_store_call(store: &Traced<Arc<dyn bullmq_backend::WorkerStore>>) {
    use ractor_bullmq::store::{JobFlows, JobUpdates, Store};
    let fetch = FetchRequest::new(1, "direct", Duration::from_millis(100));
    let _ = store.fetch_batch(&fetch).await;
    let _ = store.finish_batch(&[], Some(&fetch)).await;
    let _ = store
        .extend_locks(&[("1".into(), "t".into())], Duration::from_secs(1))
        .await;
    let _ = store.check_stalled(1, Duration::from_millis(1)).await;
    let _ = store.wait_for_job(Duration::from_millis(10)).await;
    let _ = store.move_to_waiting_children("1", "t", None).await;
    let _ = store.move_to_wait("1", "t").await;
    let _ = store.update_progress("1", &json!(1)).await;
    let _ = store.add_log("1", "line", None).await;
    let _ = store.update_data("1", &json!({})).await;
    let _ = store.get_dependencies("1").await;
    let _ = store.get_dependency_counts("1").await;
    let _ = store
        .get_dependencies_page("1", DependencyKind::Processed, 0, 10)
        .await;
    Store::close(store).await;
}

/// A real Worker on jobs that complete, fail, are retried and hit the rate limit: the
/// process span and the worker's metrics.
async fn worker_run(backend: &MemoryBackend, queue: &Queue) {
    let limited = Arc::new(AtomicBool::new(false));
    let processor = move |job: Job, _ctx: JobContext| {
        let limited = limited.clone();
        async move {
            match job.name() {
                "fail" => anyhow::bail!("no"),
                "retry" if job.attempts_made() == 0 => anyhow::bail!("once more"),
                "limit" if !limited.swap(true, Ordering::SeqCst) => {
                    Err(RateLimitError::new(Duration::from_millis(50)).into())
                }
                _ => Ok(Value::Null),
            }
        }
    };
    let args = WorkerArgs::open(
        backend,
        queue.name(),
        processor,
        WorkerOptions::new().drain_delay(Duration::from_millis(50)),
    )
    .await
    .expect("worker args");
    let worker = Worker::spawn(args).await.expect("worker");
    let mut ids = Vec::new();
    for (name, opts) in [
        ("ok", JobOptions::default()),
        ("fail", JobOptions::default()),
        ("retry", JobOptions::new().attempts(2)),
        ("limit", JobOptions::default()),
    ] {
        let job = queue.add_job(name, json!({}), opts).await.expect("add");
        ids.push(job.id().to_owned());
    }
    for id in &ids {
        finished(queue, id).await;
    }
    worker.close().await.expect("close");
}

/// A ManualWorker whose job's lock expires: its stalled check recovers the job
/// (`bullmq_jobs_stalled_total`).
async fn stalled_run(backend: &MemoryBackend, queue: &Queue) {
    queue
        .add_job("stalls", json!({}), JobOptions::default())
        .await
        .expect("add");
    let options = WorkerOptions::new()
        .lock_duration(Duration::from_millis(50))
        .stalled_interval(Duration::from_millis(20))
        .drain_delay(Duration::from_millis(50));
    let worker = ManualWorker::open(backend, queue.name(), options)
        .await
        .expect("manual worker");
    let job = worker.try_get_next_job("t").await.expect("fetch");
    assert!(job.is_some(), "the job was fetched");
    let deadline = tokio::time::Instant::now() + LONG;
    loop {
        tokio::time::sleep(Duration::from_millis(60)).await;
        let report = worker.check_stalled().await.expect("check");
        if !report.recovered.is_empty() {
            break;
        }
        assert!(tokio::time::Instant::now() < deadline, "never recovered");
    }
    worker.close().await;
}

#[tokio::test]
async fn the_catalogue_lists_exactly_the_spans_and_metrics_emitted() {
    let events = CapturedEvents::new();
    let metrics = CapturedMetrics::new();
    let _t = events.set_default();
    let _m = metrics.set_default();

    let backend = MemoryBackend::new();
    let queue = Queue::with_backend("catalogue", &backend, QueueOptions::default())
        .await
        .expect("queue");
    let keys = queue.id();
    let worker_store = Traced(
        backend
            .worker_store(&keys, &WorkerStoreOptions::default())
            .await
            .expect("worker store"),
    );

    every_queue_store_call(&queue).await;
    scheduler_calls(&queue, &worker_store).await;
    every_worker_store_call(&worker_store).await;

    // The Queue's and the FlowProducer's own spans.
    queue.add("one", json!({})).await.expect("add");
    queue
        .add_bulk(vec![("bulk", json!({}), JobOptions::default())])
        .await
        .expect("add bulk");
    let flows = FlowProducer::with_backend(&backend, FlowProducerOptions::default())
        .await
        .expect("flow producer");
    let tree =
        || FlowJob::new("root", "catalogue-flow").child(FlowJob::new("leaf", "catalogue-flow"));
    let root = flows.add(tree()).await.expect("flow add");
    flows.add_bulk(vec![tree()]).await.expect("flow add bulk");
    flows
        .get_flow(GetFlowOptions::new(root.job.id(), "catalogue-flow"))
        .await
        .expect("get flow");
    queue
        .record_job_counts_metric(&[JobState::Waiting])
        .await
        .expect("job counts metric");
    queue.drain(true).await.expect("drain");

    // Stalled first: a Worker's own check on start holds the queue's check off for its
    // `stalled_interval` (30 s by default).
    stalled_run(&backend, &queue).await;
    worker_run(&backend, &queue).await;

    let emitted_spans: BTreeSet<String> = events
        .spans()
        .into_iter()
        .map(|s| s.name.to_owned())
        .filter(|n| n.starts_with("bullmq."))
        .collect();
    let catalogued_spans = catalogue("Spans", "bullmq.");
    let missing: Vec<_> = catalogued_spans.difference(&emitted_spans).collect();
    let unlisted: Vec<_> = emitted_spans.difference(&catalogued_spans).collect();
    assert!(
        missing.is_empty(),
        "catalogued but never emitted: {missing:?}"
    );
    assert!(
        unlisted.is_empty(),
        "emitted but not catalogued: {unlisted:?}"
    );

    let emitted_metrics: BTreeSet<String> = metrics
        .names()
        .into_iter()
        .filter(|n| n.starts_with("bullmq_"))
        .collect();
    let catalogued_metrics = catalogue("Metrics", "bullmq_");
    assert_eq!(
        catalogued_metrics, emitted_metrics,
        "catalogue vs emitted metrics"
    );
}

/// The events table lists exactly the catalogue's event names (`telemetry_catalogue.rs`
/// emits each of those); it emits nothing itself, so it cannot disturb the capture above.
#[test]
fn the_catalogue_lists_exactly_the_event_names() {
    let listed = catalogue("Events", "bullmq.");
    let named: BTreeSet<String> = ractor_bullmq::telemetry::event_names::ALL
        .iter()
        .map(|n| (*n).to_owned())
        .collect();
    assert_eq!(listed, named);
}
