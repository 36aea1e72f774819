//! End to end OpenTelemetry propagation through a real Worker (feature `otel`): a trace started
//! by a producer — Node BullMQ 6.7.0 with a tracer plugged into its `telemetry` option, or our
//! own `Queue::add_job` — continues on the `bullmq.worker.process` span our `Worker` opens for
//! the job, and the processor runs inside that span.
//!
//! Each test runs on the default current-thread runtime with the OpenTelemetry subscriber set
//! as the thread's default, so the Worker, its job actors and the processor all report to the
//! exporter of their own test; the tests therefore never share a global subscriber.
#![cfg(feature = "otel")]

mod otel_support;
mod telemetry_support;

use std::sync::{Arc, Mutex};

use opentelemetry::trace::{SpanId, SpanKind, TraceContextExt, TraceId};
use ractor_bullmq::protocol::options::JobOptions;
use ractor_bullmq::telemetry::span_names;
use ractor_bullmq::worker::{Job, JobContext, Worker, WorkerArgs, WorkerHandle, WorkerOptions};
use ractor_bullmq::{ConnectionConfig, Queue, QueueOptions};
use tracing::Instrument;
use tracing_opentelemetry::OpenTelemetrySpanExt;

use otel_support::Otel;
use telemetry_support::{node_eval, unique_queue};

/// The OpenTelemetry trace and span the processor saw as its current span.
type Seen = Arc<Mutex<Option<(TraceId, SpanId)>>>;

/// Starts our Worker on `queue` with a processor recording what [`Seen`] holds.
async fn traced_worker(config: &ConnectionConfig, queue: &str, seen: &Seen) -> WorkerHandle {
    let seen = seen.clone();
    let processor = move |_job: Job, _ctx: JobContext| {
        let seen = seen.clone();
        async move {
            let context = tracing::Span::current().context();
            let current = context.span().span_context().clone();
            *seen.lock().expect("seen lock") = Some((current.trace_id(), current.span_id()));
            Ok(serde_json::json!({ "ok": true }))
        }
    };
    let options = WorkerOptions::new().name("otel-worker");
    let args = WorkerArgs::connect(config, queue, processor, options)
        .await
        .expect("connect worker");
    Worker::spawn(args).await.expect("spawn worker")
}

/// A minimal tracer for Node BullMQ's pluggable `telemetry` option (the interface
/// `bullmq-otel` implements), so a real Node `Queue.add` opens its producer span and writes
/// that span's W3C trace context as the job's `tm`. Node starts the trace with a root span of
/// its own and adds the job inside it; the script returns the spans it made.
const NODE_TRACED_ADD: &str = r#"
    const { SpanKind } = require('bullmq');
    const hex = n => require('crypto').randomBytes(n).toString('hex');
    const spans = [];
    class Span {
      constructor(name, kind, parent) {
        this.name = name;
        this.kind = kind;
        this.traceId = parent ? parent.traceId : hex(16);
        this.spanId = hex(8);
        this.parentId = parent ? parent.spanId : null;
        this.ended = false;
        spans.push(this);
      }
      setSpanOnContext(ctx) { return Object.assign({}, ctx, { span: this }); }
      setAttribute() {}
      setAttributes() {}
      addEvent() {}
      recordException() {}
      end() { this.ended = true; }
    }
    let active = {};
    const contextManager = {
      active() { return active; },
      with(ctx, fn) {
        const previous = active;
        active = ctx;
        const result = fn();
        return Promise.resolve(result).finally(() => { active = previous; });
      },
      getMetadata(ctx) {
        const s = ctx && ctx.span;
        return s ? JSON.stringify({ traceparent: `00-${s.traceId}-${s.spanId}-01` }) : '';
      },
      fromMetadata(ctx) { return ctx; },
    };
    const tracer = {
      startSpan(name, options, ctx) {
        const parent = (ctx || active).span;
        return new Span(name, options && options.kind, parent);
      },
    };
    const q = new Queue(process.env.QUEUE, {
      connection: connectionOptions(),
      telemetry: { tracer, contextManager },
    });
    const root = tracer.startSpan('node-request', { kind: SpanKind.INTERNAL });
    const job = await contextManager.with(root.setSpanOnContext({}), () =>
      q.add('traced', { n: 1 }));
    root.end();
    await q.close();
    const add = spans.find(s => s.kind === SpanKind.PRODUCER);
    return {
      id: job.id,
      tm: job.opts.telemetry && job.opts.telemetry.metadata,
      root: { trace: root.traceId, span: root.spanId },
      add: { trace: add.traceId, span: add.spanId, parent: add.parentId, ended: add.ended },
    };
"#;

/// A job added by Node inside a Node-started trace is processed by our Worker on a
/// `bullmq.worker.process` span of that trace, child of Node's `add` span, and the processor's
/// current span carries the same trace.
#[tokio::test]
async fn node_started_trace_continues_in_our_workers_process_span() {
    let Some(_) = telemetry_support::node_dir() else {
        return;
    };
    let otel = Otel::install();
    let config = ConnectionConfig::from_env().expect("env");
    let queue_name = unique_queue("otel-node-to-worker");

    let added = node_eval(NODE_TRACED_ADD, &[("QUEUE", &queue_name)]);
    let node_trace = added["root"]["trace"]
        .as_str()
        .expect("root trace")
        .to_owned();
    let node_root = added["root"]["span"].as_str().expect("root span");
    let node_add = added["add"]["span"].as_str().expect("add span").to_owned();
    // Node's own bookkeeping: its add span is a child of its root span and wrote `tm`.
    assert_eq!(added["add"]["trace"].as_str(), Some(node_trace.as_str()));
    assert_eq!(added["add"]["parent"].as_str(), Some(node_root));
    assert_eq!(added["add"]["ended"], serde_json::Value::Bool(true));
    assert_eq!(
        added["tm"].as_str(),
        Some(format!(r#"{{"traceparent":"00-{node_trace}-{node_add}-01"}}"#).as_str())
    );

    let seen: Seen = Arc::default();
    let worker = traced_worker(&config, &queue_name, &seen).await;
    let span = otel.wait_for_one(span_names::WORKER_PROCESS).await;

    assert_eq!(span.span_context.trace_id().to_string(), node_trace);
    assert_eq!(span.parent_span_id.to_string(), node_add);
    assert!(span.parent_span_is_remote);
    assert_eq!(span.span_kind, SpanKind::Consumer);
    let (seen_trace, seen_span) = seen.lock().expect("seen lock").expect("processor ran");
    assert_eq!(seen_trace.to_string(), node_trace);
    assert_eq!(seen_span, span.span_context.span_id());

    worker.close().await.expect("close worker");
    let queue = Queue::new(&queue_name, QueueOptions::new(config))
        .await
        .expect("queue");
    let job = queue
        .get_job(added["id"].as_str().expect("job id"))
        .await
        .expect("read")
        .expect("job kept");
    assert_eq!(job.returnvalue(), Some(&serde_json::json!({ "ok": true })));
    queue.obliterate(true).await.expect("obliterate");
    queue.close().await.expect("close");
}

/// The reverse direction in one process: a job added with our `Queue::add_job` inside an
/// application span is processed by our Worker on a span of the application's trace, child of
/// the `bullmq.queue.add` span.
#[tokio::test]
async fn our_queue_add_trace_continues_in_our_workers_process_span() {
    let otel = Otel::install();
    let config = ConnectionConfig::from_env().expect("env");
    let queue_name = unique_queue("otel-rust-to-worker");
    let queue = Queue::new(&queue_name, QueueOptions::new(config.clone()))
        .await
        .expect("queue");

    let request = tracing::info_span!("request");
    let request_trace = request.context().span().span_context().trace_id();
    assert_ne!(
        request_trace,
        TraceId::INVALID,
        "the layer gives spans a trace"
    );
    let job = queue
        .add_job("traced", serde_json::json!({}), JobOptions::default())
        .instrument(request.clone())
        .await
        .expect("add");
    drop(request);
    let add = otel.wait_for_one(span_names::QUEUE_ADD).await;
    assert_eq!(add.span_context.trace_id(), request_trace);

    let seen: Seen = Arc::default();
    let worker = traced_worker(&config, &queue_name, &seen).await;
    let span = otel.wait_for_one(span_names::WORKER_PROCESS).await;

    assert_eq!(span.span_context.trace_id(), request_trace);
    assert_eq!(span.parent_span_id, add.span_context.span_id());
    assert_eq!(span.span_kind, SpanKind::Consumer);
    let (seen_trace, seen_span) = seen.lock().expect("seen lock").expect("processor ran");
    assert_eq!(seen_trace, request_trace);
    assert_eq!(seen_span, span.span_context.span_id());

    worker.close().await.expect("close worker");
    let stored = queue
        .get_job(job.id())
        .await
        .expect("read")
        .expect("job kept");
    assert_eq!(
        stored.returnvalue(),
        Some(&serde_json::json!({ "ok": true }))
    );
    queue.obliterate(true).await.expect("obliterate");
    queue.close().await.expect("close");
}
