//! The flow benchmark: one parent with many children (10 000 by default), added in one
//! `FlowProducer` call, then drained by one Worker until the parent completed. Measured for us
//! and for Node BullMQ on the same Redis: the add call's time, the Redis memory the flow holds
//! once added (the sum of `MEMORY USAGE` over the queue's keys, read the same way for both
//! sides), the time to process every child and the parent, and how often the parent completed
//! (it must be exactly once). The official Rust port has no flow producer, so it has no side.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{ensure, Context, Result};
use bullmq_redis::fred::prelude::Client;
use ractor_bullmq::flow::{FlowJob, FlowProducer, FlowProducerOptions};
use ractor_bullmq::protocol::state::JobState;
use ractor_bullmq::worker::{Job, JobContext, Worker, WorkerArgs, WorkerCallbacks};
use ractor_bullmq::{ConnectionConfig, Queue, QueueOptions};
use serde::Serialize;
use serde_json::json;
use tokio::sync::Notify;

use crate::worker::{payload, queue_name, worker_options};
use crate::{redis_stats, report};

/// Worker slots while draining the flow.
const CONCURRENCY: usize = 100;

/// What one side measured.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct FlowMeasurement {
    /// `rust` or `node`.
    pub(crate) implementation: &'static str,
    /// Children under the parent.
    pub(crate) children: u64,
    /// Seconds of the one add call.
    pub(crate) add_seconds: f64,
    /// Bytes the queue's keys hold once the flow is added.
    pub(crate) redis_bytes: u64,
    /// Seconds from the Worker's start to the parent's completion.
    pub(crate) process_seconds: f64,
    /// How often the parent completed (1 is right).
    pub(crate) parent_completions: u64,
}

/// Runs the scenario for us, then for Node when asked.
pub(crate) async fn run(
    connection: &ConnectionConfig,
    admin: &Client,
    children: u64,
    with_node: bool,
    redis_url: &str,
) -> Result<Vec<FlowMeasurement>> {
    let mut results = vec![run_ours(connection, admin, children).await?];
    report::print_json_line(&results[0]);
    if with_node {
        let node = run_node(connection, admin, children, redis_url).await?;
        report::print_json_line(&node);
        results.push(node);
    }
    Ok(results)
}

async fn run_ours(
    connection: &ConnectionConfig,
    admin: &Client,
    children: u64,
) -> Result<FlowMeasurement> {
    let name = queue_name("flow", "rust", "parent");
    let producer = FlowProducer::new(FlowProducerOptions::new(connection.clone())).await?;
    let tree = FlowJob::new("parent", &name)
        .data(json!({ "children": children }))
        .children((0..children).map(|i| FlowJob::new("child", &name).data(payload(i))));
    let started = Instant::now();
    let added = producer.add(tree).await?;
    let add_seconds = started.elapsed().as_secs_f64();
    producer.close().await?;
    let parent_id = added.job.id().to_string();
    let redis_bytes = redis_stats::queue_bytes(admin, "bull", &name).await?;

    let done = Arc::new(AtomicU64::new(0));
    let parents = Arc::new(AtomicU64::new(0));
    let parent_done = Arc::new(Notify::new());
    let callbacks = {
        let (done, parents, parent_done) = (done.clone(), parents.clone(), parent_done.clone());
        WorkerCallbacks::new().on_completed(move |job: &Job, _value| {
            done.fetch_add(1, Ordering::Relaxed);
            if job.name() == "parent" {
                parents.fetch_add(1, Ordering::Relaxed);
                parent_done.notify_one();
            }
        })
    };
    let processor = |_job: Job, _ctx: JobContext| async move { Ok(json!({"ok": true})) };
    let started = Instant::now();
    let worker = Worker::spawn(
        WorkerArgs::connect(connection, &name, processor, worker_options(CONCURRENCY))
            .await?
            .callbacks(callbacks),
    )
    .await?;
    tokio::time::timeout(Duration::from_secs(600), parent_done.notified())
        .await
        .with_context(|| {
            format!(
                "flow: the parent did not complete ({} of {} jobs done)",
                done.load(Ordering::Relaxed),
                children + 1
            )
        })?;
    let process_seconds = started.elapsed().as_secs_f64();
    // A second completion of the parent would follow at once: give it a moment to show.
    tokio::time::sleep(Duration::from_millis(500)).await;
    worker.close().await?;

    let queue = Queue::new(name.clone(), QueueOptions::new(connection.clone())).await?;
    let state = queue.get_job_state(&parent_id).await?;
    ensure!(
        state == JobState::Completed,
        "flow: the parent ended {state:?}"
    );
    ensure!(
        done.load(Ordering::Relaxed) == children + 1,
        "flow: {} jobs completed, expected {}",
        done.load(Ordering::Relaxed),
        children + 1
    );
    queue.close().await?;
    redis_stats::delete_queue(admin, "bull", &name).await?;
    Ok(FlowMeasurement {
        implementation: "rust",
        children,
        add_seconds,
        redis_bytes,
        process_seconds,
        parent_completions: parents.load(Ordering::Relaxed),
    })
}

async fn run_node(
    connection: &ConnectionConfig,
    admin: &Client,
    children: u64,
    redis_url: &str,
) -> Result<FlowMeasurement> {
    let name = queue_name("flow", "node", "parent");
    let added = crate::node::run(
        "flow.js",
        &json!({"mode": "add", "queue": name, "children": children}),
        redis_url,
    )
    .await?;
    let redis_bytes = redis_stats::queue_bytes(admin, "bull", &name).await?;
    let processed = crate::node::run(
        "flow.js",
        &json!({"mode": "process", "queue": name, "jobs": children + 1, "concurrency": CONCURRENCY}),
        redis_url,
    )
    .await?;
    let parent_id = added["parentId"].as_str().unwrap_or_default().to_string();
    let queue = Queue::new(name.clone(), QueueOptions::new(connection.clone())).await?;
    let state = queue.get_job_state(&parent_id).await?;
    ensure!(
        state == JobState::Completed,
        "flow (node): the parent ended {state:?}"
    );
    queue.close().await?;
    redis_stats::delete_queue(admin, "bull", &name).await?;
    Ok(FlowMeasurement {
        implementation: "node",
        children,
        add_seconds: added["seconds"].as_f64().unwrap_or(f64::NAN),
        redis_bytes,
        process_seconds: processed["seconds"].as_f64().unwrap_or(f64::NAN),
        parent_completions: processed["parentCompletions"].as_u64().unwrap_or(0),
    })
}

/// A markdown table: one row per side.
pub(crate) fn markdown_table(results: &[FlowMeasurement]) -> String {
    let mut out = String::from(
        "| side | children | add s | children/s added | Redis bytes | bytes/child | process s | jobs/s processed | parent completions |\n\
         |---|---:|---:|---:|---:|---:|---:|---:|---:|\n",
    );
    for m in results {
        let per_child = m.redis_bytes as f64 / m.children.max(1) as f64;
        out.push_str(&format!(
            "| {} | {} | {:.3} | {:.0} | {} | {:.0} | {:.2} | {:.0} | {} |\n",
            m.implementation,
            m.children,
            m.add_seconds,
            m.children as f64 / m.add_seconds,
            m.redis_bytes,
            per_child,
            m.process_seconds,
            (m.children + 1) as f64 / m.process_seconds,
            m.parent_completions,
        ));
    }
    out
}
