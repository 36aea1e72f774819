//! Flows added by Node's FlowProducer, children processed by our Worker: a completed child is
//! recorded in its parent's `processed` hash and the parent is released when its last child
//! completes; a child failing with `failParentOnFailure` fails the parent.

mod common;
mod worker_common;

use std::collections::HashMap;
use std::time::Duration;

use common::*;
use fred::prelude::{ClientLike, HashesInterface};
use ractor_bullmq::{WorkerCallbacks, WorkerOptions};
use serde_json::{json, Value};
use worker_common::*;

async fn add_flow(parent_queue: &str, children: Value) -> anyhow::Result<Value> {
    let script = format!(
        "const {{ FlowProducer }} = require('bullmq'); const {{ connectionOptions }} = require('./lib');\
         const fp = new FlowProducer({{ connection: connectionOptions() }});\
         fp.add({{ name: 'parent', queueName: {parent_queue:?}, data: {{}}, children: {children} }})\
           .then(t => {{ process.stdout.write(JSON.stringify({{ parent: t.job.id, children: t.children.map(c => c.job.id) }}));\
                         return fp.close(); }})\
           .then(() => process.exit(0), e => {{ console.error(e); process.exit(1); }});"
    );
    node_eval(&script).await
}

async fn state_of(queue: &str, id: &str) -> anyhow::Result<Value> {
    let read = run_node("read_jobs.js", &json!({"queue": queue, "ids": [id]})).await?;
    Ok(read["jobs"][0].clone())
}

#[tokio::test]
async fn children_completed_by_our_worker_release_and_feed_the_parent() -> anyhow::Result<()> {
    if !node_available() {
        return Ok(());
    }
    let (parents, kids) = (unique_queue("w-flow-p"), unique_queue("w-flow-c"));
    let flow = add_flow(
        &parents,
        json!([
            {"name": "c1", "queueName": kids, "data": {"returnValue": 1}},
            {"name": "c2", "queueName": kids, "data": {"returnValue": {"two": 2}}},
        ]),
    )
    .await?;
    let parent_id = flow["parent"].as_str().unwrap_or_default().to_string();
    assert_eq!(
        state_of(&parents, &parent_id).await?["state"],
        "waiting-children"
    );

    let worker = spawn_worker(
        &kids,
        WorkerOptions::new().concurrency(2),
        WorkerCallbacks::new(),
    )
    .await?;
    wait_finished(&kids, 2, Duration::from_secs(20)).await?;
    worker.close().await?;

    assert_eq!(state_of(&parents, &parent_id).await?["state"], "waiting");
    let client = raw_client().await?;
    let processed: HashMap<String, String> = client
        .hgetall(format!("{PREFIX}:{parents}:{parent_id}:processed"))
        .await?;
    let mut values: Vec<&str> = processed.values().map(String::as_str).collect();
    values.sort_unstable();
    assert_eq!(values, ["1", r#"{"two":2}"#]);
    let events = read_events(&parents).await?;
    assert!(events.iter().any(|e| e.event == "waiting"
        && e.fields
            .contains(&("prev".to_string(), "waiting-children".to_string()))));
    client.quit().await?;
    cleanup(&parents).await?;
    cleanup(&kids).await
}

#[tokio::test]
async fn a_child_failing_with_fail_parent_on_failure_fails_the_parent() -> anyhow::Result<()> {
    if !node_available() {
        return Ok(());
    }
    let (parents, kids) = (unique_queue("w-flow-fp"), unique_queue("w-flow-fc"));
    let flow = add_flow(
        &parents,
        json!([
            {"name": "ok", "queueName": kids, "data": {}},
            {"name": "bad", "queueName": kids, "data": {"fail": "nope"}, "opts": {"failParentOnFailure": true}},
        ]),
    )
    .await?;
    let parent_id = flow["parent"].as_str().unwrap_or_default().to_string();
    let worker = spawn_worker(&kids, WorkerOptions::new(), WorkerCallbacks::new()).await?;
    wait_finished(&kids, 2, Duration::from_secs(20)).await?;
    worker.close().await?;
    // The parent was released with a deferred failure; a worker on its queue fails it.
    let parent_worker =
        spawn_worker(&parents, WorkerOptions::new(), WorkerCallbacks::new()).await?;
    wait_finished(&parents, 1, Duration::from_secs(20)).await?;
    parent_worker.close().await?;

    let parent = state_of(&parents, &parent_id).await?;
    assert_eq!(parent["state"], "failed");
    // Children are listed in the order they were given: "bad" is the second.
    let bad_id = flow["children"][1].as_str().unwrap_or_default();
    assert_eq!(
        parent["failedReason"],
        format!("child {PREFIX}:{kids}:{bad_id} failed")
    );
    cleanup(&parents).await?;
    cleanup(&kids).await
}
