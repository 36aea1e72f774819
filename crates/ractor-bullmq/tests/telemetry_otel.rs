//! OpenTelemetry propagation through `opts.tm` (feature `otel`): a trace started by a
//! producer, Node or Rust, continues on our `bullmq.worker.process` span, and Node reads the
//! `tm` we write as `bullmq-otel` would.
#![cfg(feature = "otel")]

mod otel_support;
mod telemetry_support;

use opentelemetry::trace::{SpanKind, TraceContextExt};
use ractor_bullmq::protocol::options::JobOptions;
use ractor_bullmq::telemetry::{self, otel, span_names, JobTelemetry};
use ractor_bullmq::{Queue, QueueOptions};
use tracing_opentelemetry::OpenTelemetrySpanExt;

use otel_support::Otel;
use telemetry_support::{node_eval, unique_queue};

const NODE_TRACE: &str = "0af7651916cd43dd8448eb211c80319c";
const NODE_SPAN: &str = "b7ad6b7169203331";

#[test]
fn process_span_continues_the_trace_in_tm() {
    let otel = Otel::install();
    let tm = format!(r#"{{"traceparent":"00-{NODE_TRACE}-{NODE_SPAN}-01"}}"#);
    let job = JobTelemetry::new("q", "1", "traced").trace_metadata(Some(&tm));
    drop(telemetry::process_span(&job));

    let span = otel.finished(span_names::WORKER_PROCESS);
    assert_eq!(span.span_context.trace_id().to_string(), NODE_TRACE);
    assert_eq!(span.parent_span_id.to_string(), NODE_SPAN);
    assert!(span.parent_span_is_remote);
    assert_eq!(span.span_kind, SpanKind::Consumer);
}

#[test]
fn without_tm_the_process_span_starts_its_own_trace() {
    let otel = Otel::install();
    drop(telemetry::process_span(&JobTelemetry::new(
        "q", "1", "plain",
    )));
    let span = otel.finished(span_names::WORKER_PROCESS);
    assert!(span.span_context.is_valid());
    assert_ne!(span.span_context.trace_id().to_string(), NODE_TRACE);
    assert_eq!(span.parent_span_id, opentelemetry::trace::SpanId::INVALID);
}

#[test]
fn rust_producer_to_rust_consumer() {
    let otel = Otel::install();
    let add = telemetry::add_span("q", "traced");
    let tm = telemetry::propagation_metadata(&add).expect("tm from the add span");
    let add_context = add.context().span().span_context().clone();
    drop(add);

    let job = JobTelemetry::new("q", "1", "traced").trace_metadata(Some(&tm));
    drop(telemetry::process_span(&job));

    let producer = otel.finished(span_names::QUEUE_ADD);
    let consumer = otel.finished(span_names::WORKER_PROCESS);
    assert_eq!(producer.span_kind, SpanKind::Producer);
    assert_eq!(producer.span_context, add_context);
    assert_eq!(
        consumer.span_context.trace_id(),
        producer.span_context.trace_id()
    );
    assert_eq!(consumer.parent_span_id, producer.span_context.span_id());
}

#[test]
fn no_tm_without_an_opentelemetry_layer() {
    // No subscriber with the OpenTelemetry layer on this thread: nothing to propagate.
    let add = telemetry::add_span("q", "traced");
    assert_eq!(telemetry::propagation_metadata(&add), None);
    assert!(!otel::set_parent(
        &add,
        &format!(r#"{{"traceparent":"00-{NODE_TRACE}-{NODE_SPAN}-01"}}"#)
    ));
}

/// A job added by a Node producer with its trace context in `opts.telemetry.metadata` (what
/// `bullmq-otel` stores there) is processed on a span of the same trace.
#[tokio::test]
async fn node_producer_trace_continues_in_our_process_span() {
    let Some(_) = telemetry_support::node_dir() else {
        return;
    };
    let otel = Otel::install();
    let queue_name = unique_queue("otel-node-to-rust");
    let tm = format!(r#"{{"traceparent":"00-{NODE_TRACE}-{NODE_SPAN}-01"}}"#);
    let added = node_eval(
        r#"
        const q = new Queue(process.env.QUEUE, { connection: connectionOptions() });
        const job = await q.add('traced', { n: 1 }, { telemetry: { metadata: process.env.TM } });
        await q.close();
        return { id: job.id };
        "#,
        &[("QUEUE", &queue_name), ("TM", &tm)],
    );
    let id = added["id"].as_str().expect("job id").to_owned();

    let queue = Queue::new(&queue_name, QueueOptions::from_env().expect("env"))
        .await
        .expect("queue");
    let job = queue.get_job(&id).await.expect("read").expect("job exists");
    assert_eq!(job.opts().telemetry_metadata.as_deref(), Some(tm.as_str()));

    let identity = JobTelemetry::from_job(&job, "rust-worker");
    drop(telemetry::process_span(&identity));
    let span = otel.finished(span_names::WORKER_PROCESS);
    assert_eq!(span.span_context.trace_id().to_string(), NODE_TRACE);
    assert_eq!(span.parent_span_id.to_string(), NODE_SPAN);

    queue.obliterate(true).await.expect("obliterate");
    queue.close().await.expect("close");
}

/// `Queue::add_job` stores the trace context of its `bullmq.queue.add` span as `tm`, in the
/// form Node's worker-side `fromMetadata` expects (a JSON object string with `traceparent`);
/// `omc` keeps it out.
#[tokio::test]
async fn rust_producer_tm_is_read_by_node() {
    let Some(_) = telemetry_support::node_dir() else {
        return;
    };
    let otel = Otel::install();
    let queue_name = unique_queue("otel-rust-to-node");
    let queue = Queue::new(&queue_name, QueueOptions::from_env().expect("env"))
        .await
        .expect("queue");

    let traced = queue
        .add_job("traced", serde_json::json!({}), JobOptions::default())
        .await
        .expect("add");
    let untraced = queue
        .add_job(
            "untraced",
            serde_json::json!({}),
            JobOptions::default().omit_context(true),
        )
        .await
        .expect("add");
    let add = otel.finished(span_names::QUEUE_ADD);
    assert_eq!(add.span_kind, SpanKind::Producer);

    let read = node_eval(
        r#"
        const q = new Queue(process.env.QUEUE, { connection: connectionOptions() });
        const traced = await q.getJob(process.env.TRACED);
        const untraced = await q.getJob(process.env.UNTRACED);
        await q.close();
        const tm = traced.opts.telemetry && traced.opts.telemetry.metadata;
        return {
          parsed: JSON.parse(tm),
          untraced: (untraced.opts.telemetry && untraced.opts.telemetry.metadata) || null,
        };
        "#,
        &[
            ("QUEUE", &queue_name),
            ("TRACED", traced.id()),
            ("UNTRACED", untraced.id()),
        ],
    );
    assert_eq!(
        read["parsed"],
        serde_json::json!({
            "traceparent": format!("00-{}-{}-01", add.span_context.trace_id(), add.span_context.span_id())
        })
    );
    assert_eq!(read["untraced"], serde_json::Value::Null);

    queue.obliterate(true).await.expect("obliterate");
    queue.close().await.expect("close");
}
