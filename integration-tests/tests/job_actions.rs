//! Acting on a `Job` read from a queue (issue 22 §3 and the Job part of §2), differential
//! against Node BullMQ 6.7.0: two queues are prepared identically by Node (`node/manual.js`,
//! `node/flows.js`), then Node calls its `Job` methods (`node/admin.js`) on one and we call
//! ours — on the `Job` that `Queue::get_job` returned, or the `Queue`-by-id method of the same
//! name — on the other. Both must return the same values and leave the same raw Redis state and
//! the same events per job. A `Job` built by hand refuses every action, writing nothing.

mod common;
mod node_steps;
mod raw_state;

use std::time::Duration;

use anyhow::{Context, Result};
use common::*;
use fred::prelude::KeysInterface;
use node_steps::{add, node_admin, prepare};
use ractor_bullmq::protocol::state::JobState;
use ractor_bullmq::{Job, QueueError};
use raw_state::{assert_same_state, per_job_events, snapshot};
use serde_json::{json, Value};

/// Node's `job[action](...args)` on job `id` of `queue`.
async fn node_job(queue: &str, id: &str, action: &str, args: Value) -> Result<Value> {
    node_admin(
        queue,
        "jobAction",
        json!({"id": id, "action": action, "args": args}),
    )
    .await
}

/// Adds, through Node's FlowProducer, `flow` with every `queueName` set to `queue`.
async fn add_flow(queue: &str, flow: &Value) -> Result<()> {
    fn place(node: &mut Value, queue: &str) {
        node["queueName"] = json!(queue);
        if let Some(children) = node["children"].as_array_mut() {
            for child in children {
                place(child, queue);
            }
        }
    }
    let mut flow = flow.clone();
    place(&mut flow, queue);
    let out = run_node("flows.js", &json!({"op": "add", "flow": flow})).await?;
    assert!(out.get("error").is_none(), "flow not added: {out}");
    Ok(())
}

/// A flow node `id` with `children`.
fn node(id: &str, children: Value) -> Value {
    json!({"name": id, "data": {"id": id}, "opts": {"jobId": id}, "children": children})
}

/// Both queues' raw state and events per job, each with its own name replaced, must match.
async fn assert_same_as_node(ours: &str, theirs: &str, what: &str) -> Result<()> {
    let our_state = snapshot(ours, &[(ours, "<q>")]).await?;
    let their_state = snapshot(theirs, &[(theirs, "<q>")]).await?;
    assert_same_state(&our_state, &their_state, what);
    assert_eq!(
        per_job_events(ours, &[(ours, "<q>")]).await?,
        per_job_events(theirs, &[(theirs, "<q>")]).await?,
        "{what}: the same events per job"
    );
    Ok(())
}

/// Reads job `id` through our queue; it must exist.
async fn job(queue: &ractor_bullmq::Queue, id: &str) -> Result<Job> {
    queue
        .get_job(id)
        .await?
        .with_context(|| format!("job {id} missing"))
}

fn control_steps() -> Value {
    let get = json!({"op": "get", "token": "tok", "block": false});
    let fail = json!({"op": "fail", "message": "boom", "fetchNext": false});
    json!([
        add("f1", json!({"attempts": 1})),
        get,
        fail,
        add("w1", json!({"keepLogs": 1})),
        add("d1", json!({"delay": 60_000})),
        add("d2", json!({"delay": 60_000})),
        add("r1", json!({})),
    ])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn job_methods_leave_the_same_state_as_nodes() -> Result<()> {
    if !node_available() {
        return Ok(());
    }
    let node_q = unique_queue("jobact-node");
    let our_q = unique_queue("jobact-rust");
    prepare(&node_q, control_steps()).await?;
    prepare(&our_q, control_steps()).await?;

    node_job(&node_q, "f1", "retry", json!([])).await?;
    node_job(&node_q, "d1", "promote", json!([])).await?;
    node_job(&node_q, "d2", "changeDelay", json!([5_000])).await?;
    node_job(&node_q, "w1", "changePriority", json!([{"priority": 4}])).await?;
    node_job(&node_q, "w1", "updateData", json!([{"x": 1}])).await?;
    node_job(&node_q, "w1", "updateProgress", json!([50])).await?;
    let node_logs = [
        node_job(&node_q, "w1", "log", json!(["one"])).await?,
        node_job(&node_q, "w1", "log", json!(["two"])).await?,
    ];
    node_job(&node_q, "r1", "remove", json!([])).await?;
    let node_states = json!({
        "f1": node_job(&node_q, "f1", "getState", json!([])).await?,
        "w1": node_job(&node_q, "w1", "getState", json!([])).await?,
        "d2": node_job(&node_q, "d2", "isDelayed", json!([])).await?,
        "f1_failed": node_job(&node_q, "f1", "isFailed", json!([])).await?,
        "f1_waiting": node_job(&node_q, "f1", "isWaiting", json!([])).await?,
        "d1_waiting": node_job(&node_q, "d1", "isWaiting", json!([])).await?,
        "w1_active": node_job(&node_q, "w1", "isActive", json!([])).await?,
        "w1_completed": node_job(&node_q, "w1", "isCompleted", json!([])).await?,
        "w1_waiting_children": node_job(&node_q, "w1", "isWaitingChildren", json!([])).await?,
    });
    node_job(&node_q, "w1", "clearLogs", json!([0])).await?;

    let q = open_queue(&our_q).await?;
    job(&q, "f1").await?.retry().await?;
    job(&q, "d1").await?.promote().await?;
    job(&q, "d2")
        .await?
        .change_delay(Duration::from_secs(5))
        .await?;
    let w1 = job(&q, "w1").await?;
    w1.change_priority(4, false).await?;
    w1.update_data(json!({"x": 1})).await?;
    w1.update_progress(50).await?;
    // `keepLogs: 1` from the job's own options: the second line replaces the first.
    let our_logs = [w1.log("one").await?, w1.log("two").await?];
    assert_eq!(json!(our_logs), json!(node_logs));
    assert!(job(&q, "r1").await?.remove().await?);
    let our_states = json!({
        "f1": job(&q, "f1").await?.get_state().await?.as_str(),
        "w1": w1.get_state().await?.as_str(),
        "d2": job(&q, "d2").await?.is_delayed().await?,
        "f1_failed": job(&q, "f1").await?.is_failed().await?,
        "f1_waiting": job(&q, "f1").await?.is_waiting().await?,
        "d1_waiting": job(&q, "d1").await?.is_waiting().await?,
        "w1_active": w1.is_active().await?,
        "w1_completed": w1.is_completed().await?,
        "w1_waiting_children": w1.is_waiting_children().await?,
    });
    w1.clear_logs(0).await?;
    assert_eq!(our_states, node_states);
    assert_eq!(w1.get_state().await?, JobState::Prioritized);
    // The snapshot is the job as read: still the old data until read again.
    assert_eq!(w1.data_value(), &json!({"id": "w1"}));
    assert_eq!(job(&q, "w1").await?.data_value(), &json!({"x": 1}));
    assert_eq!(w1.prefix(), Some(PREFIX));
    q.close().await?;

    assert_same_as_node(&our_q, &node_q, "after the Job methods").await?;
    cleanup(&node_q).await?;
    cleanup(&our_q).await?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_built_by_hand_refuses_to_act_and_writes_nothing() -> Result<()> {
    let queue = unique_queue("jobact-detached");
    let q = open_queue(&queue).await?;
    let added = q.add("mail", json!({"to": "a"})).await?;
    assert!(added.queue().is_some(), "an added job keeps its queue");
    let before = snapshot(&queue, &[]).await?;
    let detached = Job::from_record(queue.as_str(), added.into_record());
    assert_eq!(detached.prefix(), None);
    let refusals = [
        detached.promote().await.err(),
        detached.remove().await.err(),
        detached.update_data(json!({})).await.err(),
        detached.log("x").await.err(),
        detached.get_state().await.err(),
        detached.remove_deduplication_key().await.err(),
        detached.get_dependencies().await.err(),
    ];
    for refused in refusals {
        assert!(
            matches!(&refused, Some(QueueError::Detached { job_id }) if job_id == "1"),
            "{refused:?}"
        );
    }
    let message = detached.promote().await.err().map(|e| e.to_string());
    assert_eq!(
        message.as_deref(),
        Some("job 1 was not read through a queue, so it cannot act on it (read it with Queue::get_job)")
    );
    assert_same_state(&snapshot(&queue, &[]).await?, &before, "after the refusals");
    q.close().await?;
    cleanup(&queue).await?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn remove_child_dependency_leaves_the_same_state_as_node() -> Result<()> {
    if !node_available() {
        return Ok(());
    }
    let node_q = unique_queue("childdep-node");
    let our_q = unique_queue("childdep-rust");
    let flow = node("p", json!([node("c1", json!([])), node("c2", json!([]))]));
    for queue in [&node_q, &our_q] {
        add_flow(queue, &flow).await?;
        prepare(queue, json!([add("solo", json!({}))])).await?;
    }
    let node_first = node_admin(&node_q, "removeChildDependency", json!({"id": "c1"})).await?;
    // The last pending child: the parent moves to wait.
    let node_last = node_admin(&node_q, "removeChildDependency", json!({"id": "c2"})).await?;

    let q = open_queue(&our_q).await?;
    let c1 = job(&q, "c1").await?;
    assert!(c1.parent_key().is_some());
    let ours_first = c1.remove_child_dependency().await?;
    assert!(
        !q.remove_child_dependency("c1").await?,
        "no longer a child: nothing to remove"
    );
    assert!(
        !q.remove_child_dependency("solo").await?,
        "a job without a parent"
    );
    let missing = q
        .remove_child_dependency("nope")
        .await
        .expect_err("missing");
    assert!(
        matches!(&missing, QueueError::JobNotFound { job_id } if job_id == "nope"),
        "{missing:?}"
    );
    let ours_last = q.remove_child_dependency("c2").await?;
    assert_eq!(
        (json!(ours_first), json!(ours_last)),
        (node_first, node_last)
    );
    assert_eq!(q.get_job_state("p").await?, JobState::Waiting);
    assert_eq!(job(&q, "c1").await?.parent_key(), None);
    q.close().await?;

    assert_same_as_node(&our_q, &node_q, "after removeChildDependency").await?;
    cleanup(&node_q).await?;
    cleanup(&our_q).await?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn remove_unprocessed_children_leaves_the_same_state_as_node() -> Result<()> {
    if !node_available() {
        return Ok(());
    }
    let node_q = unique_queue("unproc-node");
    let our_q = unique_queue("unproc-rust");
    // `c1` is held by a worker (a lock), `c2` has a child of its own, `c3` is plain.
    let flow = node(
        "p",
        json!([
            node("c1", json!([])),
            node("c2", json!([node("g1", json!([]))])),
            node("c3", json!([])),
        ]),
    );
    let client = raw_client().await?;
    for queue in [&node_q, &our_q] {
        add_flow(queue, &flow).await?;
        let _: () = client
            .set(
                format!("{PREFIX}:{queue}:c1:lock"),
                "tok",
                Some(fred::types::Expiration::EX(300)),
                None,
                false,
            )
            .await?;
    }
    node_admin(&node_q, "removeUnprocessedChildren", json!({"id": "p"})).await?;
    let q = open_queue(&our_q).await?;
    job(&q, "p").await?.remove_unprocessed_children().await?;
    for gone in ["c2", "g1", "c3"] {
        assert_eq!(q.get_job_state(gone).await?, JobState::Unknown, "{gone}");
    }
    assert_eq!(q.get_job_state("c1").await?, JobState::Waiting);
    assert_eq!(q.get_job_state("p").await?, JobState::WaitingChildren);
    q.close().await?;

    assert_same_as_node(&our_q, &node_q, "after removeUnprocessedChildren").await?;
    cleanup(&node_q).await?;
    cleanup(&our_q).await?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn remove_deduplication_key_of_a_job_leaves_the_same_state_as_node() -> Result<()> {
    if !node_available() {
        return Ok(());
    }
    let node_q = unique_queue("jobdedup-node");
    let our_q = unique_queue("jobdedup-rust");
    let client = raw_client().await?;
    for queue in [&node_q, &our_q] {
        prepare(
            queue,
            json!([
                add("j1", json!({"deduplication": {"id": "d1"}})),
                add("j2", json!({})),
                add("j3", json!({"deduplication": {"id": "d3"}})),
            ]),
        )
        .await?;
        // `d3` now names another job: j3 no longer owns it.
        let _: () = client
            .set(
                format!("{PREFIX}:{queue}:de:d3"),
                "other",
                None,
                None,
                false,
            )
            .await?;
    }
    let mut node_results = Vec::new();
    for id in ["j1", "j1", "j2", "j3"] {
        node_results
            .push(node_admin(&node_q, "removeJobDeduplicationKey", json!({"id": id})).await?);
    }

    let q = open_queue(&our_q).await?;
    let ours = vec![
        job(&q, "j1").await?.remove_deduplication_key().await?,
        q.remove_job_deduplication_key("j1").await?,
        job(&q, "j2").await?.remove_deduplication_key().await?,
        q.remove_job_deduplication_key("j3").await?,
    ];
    assert_eq!(json!(ours), json!(node_results));
    assert_eq!(ours, [true, false, false, false]);
    assert!(!q.remove_job_deduplication_key("missing").await?);
    assert_eq!(
        q.get_deduplication_job_id("d3").await?.as_deref(),
        Some("other")
    );
    q.close().await?;

    assert_same_as_node(&our_q, &node_q, "after removeDeduplicationKey").await?;
    cleanup(&node_q).await?;
    cleanup(&our_q).await?;
    Ok(())
}
