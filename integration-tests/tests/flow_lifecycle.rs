//! Flows added by our FlowProducer, run to the end: processed by our Worker and by Node's, the
//! parent is released once its children completed and reads the same children values (through
//! Node's `getChildrenValues` and our `get_children_values`); `get_flow` reads back the same
//! tree as Node's `getFlow` on the same flow.

mod common;
mod flow_common;
mod worker_common;

use std::collections::BTreeMap;
use std::time::Duration;

use anyhow::Result;
use common::*;
use flow_common::*;
use ractor_bullmq::flow::{FlowJob, GetFlowOptions, JobNode};
use ractor_bullmq::protocol::JobOptions;
use ractor_bullmq::{WorkerCallbacks, WorkerOptions};
use serde_json::{json, Value as Json};
use worker_common::*;

/// A parent in `parents` with three children in `kids`, returning `{"n": i}`.
fn tree(parents: &str, kids: &str) -> FlowJob {
    FlowJob::new("parent", parents).children(
        (1..=3).map(|i| FlowJob::new("kid", kids).data(json!({ "returnValue": { "n": i } }))),
    )
}

async fn node_children_values(queue: &str, id: &str) -> Result<Json> {
    let script = format!(
        "const {{ Queue }} = require('bullmq'); const {{ connectionOptions }} = require('./lib');\
         const q = new Queue({queue:?}, {{ connection: connectionOptions() }});\
         (async () => {{ const job = await q.getJob({id:?});\
           process.stdout.write(JSON.stringify({{ values: await job.getChildrenValues(),\
             state: await job.getState() }})); await q.close(); }})()\
           .then(() => process.exit(0), e => {{ console.error(e); process.exit(1); }});"
    );
    node_eval(&script).await
}

/// The children values of the parent, as ours and Node's readers see them, and the expected.
async fn check_parent(parents: &str, kids: &str, added: &JobNode) -> Result<()> {
    let id = added.job.id();
    let expected: BTreeMap<String, Json> = added
        .children
        .iter()
        .enumerate()
        .map(|(i, c)| (format!("bull:{kids}:{}", c.job.id()), json!({ "n": i + 1 })))
        .collect();
    let queue = open_queue(parents).await?;
    let ours: BTreeMap<String, Json> = queue.get_children_values(id).await?;
    queue.close().await?;
    assert_eq!(ours, expected, "our get_children_values");
    let node = node_children_values(parents, id).await?;
    assert_eq!(node["values"], json!(expected), "Node's getChildrenValues");
    Ok(())
}

#[tokio::test]
async fn a_flow_we_added_is_run_by_our_worker_to_the_parent() -> Result<()> {
    if !node_available() {
        return Ok(());
    }
    let (parents, kids) = (unique_queue("fl-our-p"), unique_queue("fl-our-c"));
    let producer = producer().await?;
    let added = producer.add(tree(&parents, &kids)).await?;
    producer.close().await?;
    let kid_worker =
        spawn_worker(&kids, WorkerOptions::default(), WorkerCallbacks::default()).await?;
    wait_finished(&kids, 3, Duration::from_secs(60)).await?;
    // Released once the last child completed, before any worker of its queue runs it.
    check_parent(&parents, &kids, &added).await?;
    let parent_worker = spawn_worker(
        &parents,
        WorkerOptions::default(),
        WorkerCallbacks::default(),
    )
    .await?;
    wait_finished(&parents, 1, Duration::from_secs(60)).await?;
    assert_eq!(
        node_children_values(&parents, added.job.id()).await?["state"],
        "completed"
    );
    kid_worker.close().await?;
    parent_worker.close().await?;
    cleanup(&parents).await?;
    cleanup(&kids).await?;
    Ok(())
}

#[tokio::test]
async fn a_flow_we_added_is_run_by_nodes_worker_to_the_parent() -> Result<()> {
    if !node_available() {
        return Ok(());
    }
    let (parents, kids) = (unique_queue("fl-node-p"), unique_queue("fl-node-c"));
    let producer = producer().await?;
    let added = producer.add(tree(&parents, &kids)).await?;
    producer.close().await?;
    let run = run_node(
        "run_worker.js",
        &json!({"queue": kids, "stopAfter": 3, "timeoutMs": 60000}),
    )
    .await?;
    assert_eq!(run["completed"].as_array().map(Vec::len), Some(3), "{run}");
    check_parent(&parents, &kids, &added).await?;
    let run = run_node(
        "run_worker.js",
        &json!({"queue": parents, "stopAfter": 1, "timeoutMs": 60000}),
    )
    .await?;
    assert_eq!(run["completed"][0]["id"], json!(added.job.id()), "{run}");
    cleanup(&parents).await?;
    cleanup(&kids).await?;
    Ok(())
}

/// A node of a read-back flow as flows.js prints it (`full`).
fn full_shape(node: &JobNode) -> Json {
    json!({
        "id": node.job.id(),
        "name": node.job.name(),
        "queueName": node.job.queue_name(),
        "data": node.job.data::<Json>().unwrap_or(Json::Null),
        "parentKey": node.job.parent_key(),
        "children": node.children.iter().map(full_shape).collect::<Vec<_>>(),
    })
}

fn without_opts(mut tree: Json) -> Json {
    if let Some(map) = tree.as_object_mut() {
        map.remove("opts");
        if let Some(children) = map.get_mut("children").and_then(Json::as_array_mut) {
            for child in children.iter_mut() {
                *child = without_opts(child.take());
            }
        }
    }
    tree
}

#[tokio::test]
async fn get_flow_reads_the_same_tree_as_nodes_get_flow() -> Result<()> {
    if !node_available() {
        return Ok(());
    }
    let queues = Queues::new("fl-get", &["A", "B"]);
    let (a, b) = (queues.name("A").to_owned(), queues.name("B").to_owned());
    let leaf = |id: &str, queue: &str| {
        FlowJob::new(id, queue)
            .data(json!({ "id": id }))
            .opts(JobOptions::new().job_id(id))
    };
    let flow = leaf("root", &a)
        .child(leaf("mid", &b).child(leaf("g1", &a)).child(leaf("g2", &b)))
        .child(leaf("done", &b))
        .child(leaf("c3", &a));
    let producer = producer().await?;
    producer.add(flow).await?;
    // One child completes, so the root has a processed child next to pending ones.
    let run = run_node(
        "run_worker.js",
        &json!({"queue": b, "stopAfter": 1, "timeoutMs": 60000}),
    )
    .await?;
    let _ = run;
    for (depth, max_children) in [(10, 20), (2, 20), (1, 20), (10, 1)] {
        let ours = producer
            .get_flow(
                GetFlowOptions::new("root", a.as_str())
                    .depth(depth)
                    .max_children(max_children),
            )
            .await?
            .expect("the root exists");
        let node = run_node(
            "flows.js",
            &json!({"op": "getFlow", "id": "root", "queueName": a, "depth": depth, "maxChildren": max_children}),
        )
        .await?;
        assert_eq!(
            full_shape(&ours),
            without_opts(node["tree"].clone()),
            "depth {depth}, maxChildren {max_children}"
        );
    }
    assert!(producer
        .get_flow(GetFlowOptions::new("nope", a.as_str()))
        .await?
        .is_none());
    producer.close().await?;
    queues.cleanup().await?;
    Ok(())
}
