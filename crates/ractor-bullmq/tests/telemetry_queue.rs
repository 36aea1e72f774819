//! The Queue reports its part of the catalogue: add / add_bulk spans, `bullmq.job.added`,
//! paused / resumed / drained, with the metrics.

mod telemetry_support;

use ractor_bullmq::protocol::options::JobOptions;
use ractor_bullmq::telemetry::testing::{CapturedEvents, CapturedMetrics};
use ractor_bullmq::telemetry::{event_names as ev, metric_names as m, span_names};
use ractor_bullmq::{Queue, QueueOptions};

use telemetry_support::unique_queue;

#[tokio::test]
async fn queue_operations_emit_their_catalogue_entries() {
    let events = CapturedEvents::new();
    let metrics = CapturedMetrics::new();
    let _t = events.set_default();
    let _m = metrics.set_default();

    let name = unique_queue("queue-wiring");
    let queue = Queue::new(&name, QueueOptions::from_env().expect("env"))
        .await
        .expect("queue");
    let job = queue
        .add_job("single", serde_json::json!({}), JobOptions::default())
        .await
        .expect("add");
    queue
        .add_bulk(vec![
            ("bulk", serde_json::json!({ "n": 1 }), JobOptions::default()),
            ("bulk", serde_json::json!({ "n": 2 }), JobOptions::default()),
        ])
        .await
        .expect("add bulk");
    queue.pause().await.expect("pause");
    queue.resume().await.expect("resume");
    queue.drain(true).await.expect("drain");

    let add = &events.spans_named(span_names::QUEUE_ADD)[0];
    assert_eq!(add.field("queue"), Some(name.as_str()));
    assert_eq!(add.field("job.name"), Some("single"));
    assert_eq!(add.field("job.id"), Some(job.id()));
    let bulk = &events.spans_named(span_names::QUEUE_ADD_BULK)[0];
    assert_eq!(bulk.field("count"), Some("2"));

    let added = events.named(ev::JOB_ADDED);
    assert_eq!(added.len(), 3);
    assert_eq!(added[0].field("job.id"), Some(job.id()));
    assert_eq!(added[0].spans, vec![span_names::QUEUE_ADD]);
    assert_eq!(added[1].field("job.name"), Some("bulk"));
    assert_eq!(added[2].spans, vec![span_names::QUEUE_ADD_BULK]);
    for event in [ev::QUEUE_PAUSED, ev::QUEUE_RESUMED, ev::QUEUE_DRAINED] {
        let seen = events
            .first(event)
            .unwrap_or_else(|| panic!("{event} missing"));
        assert_eq!(seen.field("queue"), Some(name.as_str()));
    }

    assert_eq!(
        metrics.counter(m::JOBS_ADDED, &[("queue", &name), ("job_name", "single")]),
        Some(1)
    );
    assert_eq!(
        metrics.counter(m::JOBS_ADDED, &[("queue", &name), ("job_name", "bulk")]),
        Some(2)
    );

    queue.obliterate(true).await.expect("obliterate");
    queue.close().await.expect("close");
}
