//! The FlowProducer on the in-memory backend, no Redis running: a flow is added and read back,
//! a refused flow writes nothing, and the calls open their `bullmq.flow.*` and
//! `bullmq.store.*` spans.

use std::sync::Arc;

use bullmq_backend::memory::MemoryBackend;
use bullmq_backend::Backend;
use ractor_bullmq::flow::{FlowError, FlowJob, FlowProducer, FlowProducerOptions, GetFlowOptions};
use ractor_bullmq::protocol::{JobOptions, JobState};
use ractor_bullmq::telemetry::span_names;
use ractor_bullmq::telemetry::testing::CapturedEvents;
use ractor_bullmq::{Queue, QueueOptions};
use serde_json::json;

#[tokio::test]
async fn a_flow_is_added_read_back_and_traced_on_the_memory_backend() {
    let events = CapturedEvents::new();
    let _t = events.set_default();
    let backend: Arc<dyn Backend> = Arc::new(MemoryBackend::new());
    let flows = FlowProducer::with_backend(backend.as_ref(), FlowProducerOptions::default())
        .await
        .expect("producer");
    let tree = FlowJob::new("root", "reports")
        .opts(JobOptions::new().job_id("r"))
        .child(FlowJob::new("page", "pages").data(json!({ "n": 1 })))
        .child(
            FlowJob::new("section", "pages")
                .opts(JobOptions::new().job_id("s"))
                .child(FlowJob::new("page", "pages").data(json!({ "n": 2 }))),
        );
    let added = flows.add(tree).await.expect("add");
    assert_eq!(added.job.id(), "r");
    assert_eq!(added.children.len(), 2);
    assert_eq!(added.children[0].job.id().len(), 36, "a UUID");
    assert_eq!(added.children[1].children.len(), 1);

    let reports = Queue::with_backend("reports", backend.as_ref(), QueueOptions::default())
        .await
        .expect("queue");
    let pages = Queue::with_backend("pages", backend.as_ref(), QueueOptions::default())
        .await
        .expect("queue");
    assert_eq!(
        reports.get_job_state("r").await.unwrap(),
        JobState::WaitingChildren
    );
    assert_eq!(
        pages.get_job_state("s").await.unwrap(),
        JobState::WaitingChildren
    );
    let leaf = added.children[0].job.id();
    assert_eq!(pages.get_job_state(leaf).await.unwrap(), JobState::Waiting);

    let read = flows
        .get_flow(GetFlowOptions::new("r", "reports"))
        .await
        .expect("get_flow")
        .expect("exists");
    assert_eq!(read.job.id(), "r");
    let mut ids: Vec<&str> = read.children.iter().map(|c| c.job.id()).collect();
    ids.sort_unstable();
    let mut expected = vec!["s", leaf];
    expected.sort_unstable();
    assert_eq!(ids, expected);
    let one_level = flows
        .get_flow(GetFlowOptions::new("r", "reports").depth(1))
        .await
        .unwrap()
        .unwrap();
    assert!(one_level.children.is_empty());

    let add = &events.spans_named(span_names::FLOW_ADD)[0];
    assert_eq!(add.field("queue"), Some("reports"));
    assert_eq!(add.field("job.id"), Some("r"));
    assert_eq!(add.field("count"), Some("4"));
    assert!(!events.spans_named("bullmq.store.add_flow").is_empty());
    assert!(!events.spans_named(span_names::FLOW_GET).is_empty());
    flows.close().await.unwrap();
    assert!(matches!(
        flows.add(FlowJob::new("x", "reports")).await,
        Err(FlowError::Closed)
    ));
}

#[tokio::test]
async fn a_refused_flow_writes_nothing_on_the_memory_backend() {
    // Under a capture too: a thread that first reaches the flow spans with no subscriber can
    // leave tracing's per-callsite interest cached as "never" while the other test of this
    // binary is capturing them.
    let events = CapturedEvents::new();
    let _t = events.set_default();
    let backend = MemoryBackend::new();
    let flows = FlowProducer::with_backend(&backend, FlowProducerOptions::default())
        .await
        .expect("producer");
    let err = flows
        .add(FlowJob::new("root", "q").child(FlowJob::new("", "q")))
        .await
        .unwrap_err();
    assert!(matches!(err, FlowError::Invalid(_)), "{err:?}");
    assert!(
        backend.queue_names().is_empty(),
        "{:?}",
        backend.queue_names()
    );
}
