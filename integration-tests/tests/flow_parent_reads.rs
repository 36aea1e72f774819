//! A flow parent's view of its children (issue 13, item 2), compared with Node: for a flow
//! added by Node's FlowProducer whose children our Worker processed (completed, failed with
//! `ignoreDependencyOnFailure`, failed with `failParentOnFailure`, still pending), our
//! `get_children_values`, `get_ignored_children_failures`, `get_dependencies` and
//! `get_dependencies_count` — from the Queue, from a `Job` it read and from a processor's
//! `JobContext` — agree with
//! Node's `getChildrenValues`, `getIgnoredChildrenFailures`, `getDependencies` and
//! `getDependenciesCount` on the same parents; and they agree too when Node's Worker processed
//! the children.

mod common;
mod worker_common;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::Result;
use common::*;
use ractor_bullmq::store::DependencyKind;
use ractor_bullmq::worker::{Job, JobContext};
use ractor_bullmq::{Worker, WorkerArgs, WorkerCallbacks, WorkerOptions};
use serde_json::{json, Value};
use worker_common::*;

async fn add_flow(parent_queue: &str, name: &str, children: Value) -> Result<String> {
    let script = format!(
        "const {{ FlowProducer }} = require('bullmq'); const {{ connectionOptions }} = require('./lib');\
         const fp = new FlowProducer({{ connection: connectionOptions() }});\
         fp.add({{ name: {name:?}, queueName: {parent_queue:?}, data: {{}}, children: {children} }})\
           .then(t => {{ process.stdout.write(JSON.stringify({{ parent: t.job.id }})); return fp.close(); }})\
           .then(() => process.exit(0), e => {{ console.error(e); process.exit(1); }});"
    );
    let out = node_eval(&script).await?;
    Ok(out["parent"].as_str().unwrap_or_default().to_owned())
}

/// Node's reads of parent `id`.
async fn node_reads(queue: &str, id: &str) -> Result<Value> {
    let script = format!(
        "const {{ Queue }} = require('bullmq'); const {{ connectionOptions }} = require('./lib');\
         const q = new Queue({queue:?}, {{ connection: connectionOptions() }});\
         (async () => {{ const job = await q.getJob({id:?});\
           const deps = await job.getDependencies();\
           const out = {{ values: await job.getChildrenValues(), ignored: await job.getIgnoredChildrenFailures(),\
             failedValues: await job.getFailedChildrenValues(),\
             deps: {{ processed: deps.processed, unprocessed: (deps.unprocessed || []).sort(),\
                      ignored: deps.ignored, failed: deps.failed }},\
             counts: await job.getDependenciesCount() }};\
           process.stdout.write(JSON.stringify(out)); await q.close(); }})()\
           .then(() => process.exit(0), e => {{ console.error(e); process.exit(1); }});"
    );
    node_eval(&script).await
}

/// Ours, in the same shape.
async fn our_reads(queue: &ractor_bullmq::Queue, id: &str) -> Result<Value> {
    let values: BTreeMap<String, Value> = queue.get_children_values(id).await?;
    let deps = queue.get_dependencies(id).await?;
    let counts = queue.get_dependencies_count(id).await?;
    let processed: BTreeMap<String, Value> = deps
        .processed
        .iter()
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    let reads = json!({
        "values": values,
        "ignored": queue.get_ignored_children_failures(id).await?,
        "failedValues": queue.get_failed_children_values(id).await?,
        "deps": {"processed": processed, "unprocessed": deps.unprocessed,
                 "ignored": deps.ignored, "failed": deps.failed},
        "counts": {"processed": counts.processed, "unprocessed": counts.unprocessed,
                   "ignored": counts.ignored, "failed": counts.failed},
    });
    // The same reads on the `Job` the queue returns (Node has them on its Job).
    let job = queue
        .get_job(id)
        .await?
        .ok_or_else(|| anyhow::anyhow!("parent {id} missing"))?;
    let job_values: BTreeMap<String, Value> = job.get_children_values().await?;
    assert_eq!(
        json!(job_values),
        reads["values"],
        "Job::get_children_values"
    );
    assert_eq!(
        json!(job.get_ignored_children_failures().await?),
        reads["ignored"]
    );
    assert_eq!(
        json!(job.get_failed_children_values().await?),
        reads["failedValues"]
    );
    assert_eq!(job.get_dependencies().await?, deps);
    assert_eq!(job.get_dependencies_count().await?, counts);
    for kind in [DependencyKind::Processed, DependencyKind::Unprocessed] {
        assert_eq!(
            job.get_dependencies_page(kind, 0, 100).await?,
            queue.get_dependencies_page(id, kind, 0, 100).await?
        );
    }
    Ok(reads)
}

/// Page entries as Node's paged `getDependencies` returns them: key → value (parsed for
/// return values).
fn entries_map(entries: &[(String, Option<String>)], parse: bool) -> Value {
    entries
        .iter()
        .map(|(key, value)| {
            let value = value.clone().unwrap_or_default();
            let value = if parse {
                serde_json::from_str(&value).unwrap_or(Value::Null)
            } else {
                Value::String(value)
            };
            (key.clone(), value)
        })
        .collect::<serde_json::Map<_, _>>()
        .into()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn parent_reads_agree_with_node_for_every_child_outcome() -> Result<()> {
    if !node_available() {
        return Ok(());
    }
    parent_reads_agree_with_node(false).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn parent_reads_agree_with_node_for_children_processed_by_node() -> Result<()> {
    if !node_available() {
        return Ok(());
    }
    parent_reads_agree_with_node(true).await
}

/// Our reads and Node's of the same parents agree, the children processed by Node's Worker
/// (`children_by_node`) or by ours.
async fn parent_reads_agree_with_node(children_by_node: bool) -> Result<()> {
    let (parents, kids, later) = (
        unique_queue("fpr-p"),
        unique_queue("fpr-c"),
        unique_queue("fpr-later"),
    );
    // One parent whose children complete, fail ignored, and one still pending (in a queue
    // nobody consumes); one whose child fails it.
    let mixed = add_flow(
        &parents,
        "mixed",
        json!([
            {"name": "one", "queueName": kids, "data": {"returnValue": 1}},
            {"name": "obj", "queueName": kids, "data": {"returnValue": {"two": [2]}}},
            {"name": "ignored", "queueName": kids, "data": {"fail": "ignore me"},
             "opts": {"ignoreDependencyOnFailure": true}},
            {"name": "pending", "queueName": later, "data": {}},
        ]),
    )
    .await?;
    let failing = add_flow(
        &parents,
        "failing",
        json!([{"name": "bad", "queueName": kids, "data": {"fail": "fails the parent"},
                "opts": {"failParentOnFailure": true}}]),
    )
    .await?;
    if children_by_node {
        let report = run_node(
            "run_worker.js",
            &json!({"queue": kids, "stopAfter": 4, "idleMs": 5000, "timeoutMs": 60000}),
        )
        .await?;
        assert_eq!(report["stoppedBy"], "count", "{report}");
    } else {
        let worker = spawn_worker(&kids, WorkerOptions::new(), WorkerCallbacks::new()).await?;
        wait_finished(&kids, 4, Duration::from_secs(30)).await?;
        worker.close().await?;
    }

    let queue = open_queue(&parents).await?;
    for parent in [&mixed, &failing] {
        let theirs = node_reads(&parents, parent).await?;
        let ours = our_reads(&queue, parent).await?;
        assert_eq!(ours, theirs, "parent {parent}");
    }
    // Paged: one page of 100 of each kind holds them all, as Node's paged read does.
    let script = format!(
        "const {{ Queue }} = require('bullmq'); const {{ connectionOptions }} = require('./lib');\
         const q = new Queue({parents:?}, {{ connection: connectionOptions() }});\
         (async () => {{ const job = await q.getJob({mixed:?});\
           const d = await job.getDependencies({{ processed: {{ count: 100 }}, unprocessed: {{ count: 100 }},\
             ignored: {{ count: 100 }}, failed: {{ count: 100 }} }});\
           process.stdout.write(JSON.stringify(d)); await q.close(); }})()\
           .then(() => process.exit(0), e => {{ console.error(e); process.exit(1); }});"
    );
    let node_paged = node_eval(&script).await?;
    let page = |kind| queue.get_dependencies_page(&mixed, kind, 0, 100);
    let processed = page(DependencyKind::Processed).await?;
    assert_eq!(
        entries_map(&processed.entries, true),
        node_paged["processed"]
    );
    assert_eq!(
        json!(processed.next_cursor),
        node_paged["nextProcessedCursor"]
    );
    let ignored = page(DependencyKind::Ignored).await?;
    assert_eq!(entries_map(&ignored.entries, false), node_paged["ignored"]);
    let unprocessed = page(DependencyKind::Unprocessed).await?;
    let keys: Vec<Value> = unprocessed.entries.iter().map(|(k, _)| json!(k)).collect();
    assert_eq!(json!(keys), node_paged["unprocessed"]);
    assert_eq!(
        json!(unprocessed.next_cursor),
        node_paged["nextUnprocessedCursor"]
    );

    let ours = our_reads(&queue, &mixed).await?;
    assert_eq!(
        ours["counts"],
        json!({"processed": 2, "unprocessed": 1, "ignored": 1, "failed": 0})
    );
    assert_eq!(ours["ignored"].as_object().map(|o| o.len()), Some(1));
    let failed = our_reads(&queue, &failing).await?;
    assert_eq!(failed["counts"]["failed"], json!(1));

    // Typed values.
    #[derive(serde::Deserialize, Debug, PartialEq)]
    #[serde(untagged)]
    enum Returned {
        Number(u64),
        Object { two: Vec<u64> },
    }
    let typed: BTreeMap<String, Returned> = queue.get_children_values(&mixed).await?;
    let mut values: Vec<&Returned> = typed.values().collect();
    values.sort_by_key(|v| matches!(v, Returned::Object { .. }));
    assert_eq!(
        values,
        [&Returned::Number(1), &Returned::Object { two: vec![2] }]
    );
    // A Job built by hand has no queue handle: its reads are refused before anything is read.
    let parent_job = queue.get_job(&mixed).await?.expect("the parent");
    let detached = ractor_bullmq::Job::from_record(parents.as_str(), parent_job.into_record());
    let refused = detached.get_dependencies_count().await;
    assert!(
        matches!(&refused, Err(ractor_bullmq::QueueError::Detached { job_id }) if *job_id == mixed),
        "{refused:?}"
    );
    queue.close().await?;
    for q in [&parents, &kids, &later] {
        cleanup(q).await?;
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_parent_processor_reads_its_children_through_its_context() -> Result<()> {
    if !node_available() {
        return Ok(());
    }
    let (parents, kids) = (unique_queue("fpr-ctx-p"), unique_queue("fpr-ctx-c"));
    let parent = add_flow(
        &parents,
        "sum",
        json!([
            {"name": "a", "queueName": kids, "data": {"returnValue": 20}},
            {"name": "b", "queueName": kids, "data": {"returnValue": 22}},
        ]),
    )
    .await?;
    let children = spawn_worker(&kids, WorkerOptions::new(), WorkerCallbacks::new()).await?;
    wait_finished(&kids, 2, Duration::from_secs(30)).await?;
    children.close().await?;

    let seen: Arc<Mutex<Option<(u64, u64)>>> = Arc::default();
    let record = seen.clone();
    let processor = move |_job: Job, ctx: JobContext| {
        let record = record.clone();
        async move {
            let values = ctx.get_children_values::<u64>().await?;
            let counts = ctx.get_dependencies_count().await?;
            let sum: u64 = values.values().sum();
            *record.lock().unwrap() = Some((sum, counts.processed));
            Ok(json!(sum))
        }
    };
    let worker = Worker::spawn(
        WorkerArgs::connect(&config(), &parents, processor, WorkerOptions::new()).await?,
    )
    .await?;
    wait_finished(&parents, 1, Duration::from_secs(30)).await?;
    worker.close().await?;
    assert_eq!(*seen.lock().unwrap(), Some((42, 2)));
    let read = run_node("read_jobs.js", &json!({"queue": parents, "ids": [parent]})).await?;
    assert_eq!(read["jobs"][0]["returnvalue"], json!(42));
    for q in [&parents, &kids] {
        cleanup(q).await?;
    }
    Ok(())
}
