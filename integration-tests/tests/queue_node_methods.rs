//! The Queue methods of Node BullMQ 6.7.0 that issue 22 §2 adds, differential against Node:
//! `getDelayedCount(timestamp?)`, `getVersion`, `removeDeprecatedPriorityKey`,
//! `recordJobCountsMetric`, `JobScheduler.isJobScheduler` and `removeOrphanedJobs(count,
//! limit)`. Reads are made by Node and by us on the same queue and must return the same values;
//! writes are made by Node on one of two identically prepared queues and by us on the other,
//! and must return the same values and leave the same raw Redis state.

mod common;
mod node_steps;
mod raw_state;

use std::time::{Duration, UNIX_EPOCH};

use anyhow::Result;
use common::*;
use fred::prelude::{HashesInterface, KeysInterface, ListInterface};
use node_steps::{add, node_admin, prepare};
use ractor_bullmq::protocol::state::JobState;
use ractor_bullmq::QueueError;
use raw_state::{assert_same_state, snapshot};
use serde_json::{json, Value};

/// Both queues' raw state, each with its own name replaced, must be equal.
async fn assert_same_as_node(ours: &str, theirs: &str, what: &str) -> Result<()> {
    let our_state = snapshot(ours, &[(ours, "<q>")]).await?;
    let their_state = snapshot(theirs, &[(theirs, "<q>")]).await?;
    assert_same_state(&our_state, &their_state, what);
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delayed_counts_version_and_job_counts_read_as_node_reads_them() -> Result<()> {
    if !node_available() {
        return Ok(());
    }
    let queue = unique_queue("qnm-reads");
    prepare(
        &queue,
        json!([
            add("w1", json!({})),
            add("d1", json!({"delay": 10_000})),
            add("d2", json!({"delay": 60_000})),
            add("d3", json!({"delay": 120_000})),
        ]),
    )
    .await?;
    let q = open_queue(&queue).await?;
    let d1_ready = {
        let job = q.get_job("d1").await?.expect("d1");
        job.timestamp() + 10_000
    };
    // No timestamp, before every job, at d1's due time (strictly before: not counted), just
    // after it, and after all.
    assert_eq!(
        json!(q.get_delayed_count().await?),
        node_admin(&queue, "getDelayedCount", json!({})).await?
    );
    for at in [0, d1_ready, d1_ready + 1, d1_ready + 600_000] {
        let ours = q
            .get_delayed_count_at(UNIX_EPOCH + Duration::from_millis(at))
            .await?;
        let node = node_admin(&queue, "getDelayedCount", json!({"timestamp": at})).await?;
        assert_eq!(json!(ours), node, "getDelayedCount({at})");
    }
    assert_eq!(
        q.get_delayed_count_at(UNIX_EPOCH + Duration::from_millis(d1_ready + 1))
            .await?,
        1
    );

    let version = q.get_version().await?;
    assert_eq!(
        json!(version),
        node_admin(&queue, "getVersion", json!({})).await?
    );
    assert_eq!(version.as_deref(), Some("bullmq:6.7.0"));

    // Node returns an object keyed by state; ours the same pairs in order.
    for types in [json!([]), json!(["delayed", "wait"]), json!(["completed"])] {
        let states: Vec<JobState> = types
            .as_array()
            .map(|t| {
                t.iter()
                    .map(|s| s.as_str().unwrap_or_default().parse())
                    .collect::<std::result::Result<_, _>>()
            })
            .transpose()?
            .unwrap_or_default();
        let ours = q.record_job_counts_metric(&states).await?;
        let node = node_admin(&queue, "recordJobCountsMetric", json!({"types": types})).await?;
        // Node keys its answer by the type as asked (`wait` or `waiting`).
        let node: std::collections::BTreeMap<String, Value> = node
            .as_object()
            .cloned()
            .unwrap_or_default()
            .into_iter()
            .map(|(k, v)| (if k == "wait" { "waiting".into() } else { k }, v))
            .collect();
        assert_eq!(ours.len(), node.len(), "{types}: {node:?}");
        for (state, count) in &ours {
            let key = state.as_str();
            assert_eq!(node.get(key), Some(&json!(count)), "{types}: {key}");
        }
    }
    q.close().await?;
    cleanup(&queue).await?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn is_job_scheduler_answers_as_node() -> Result<()> {
    if !node_available() {
        return Ok(());
    }
    let queue = unique_queue("qnm-sched");
    let q = open_queue(&queue).await?;
    q.upsert_job_scheduler(
        "every-minute",
        ractor_bullmq::scheduler::Repeat::every(Duration::from_secs(60)),
        ractor_bullmq::scheduler::SchedulerTemplate::new("tick"),
    )
    .await?;
    // A BullMQ 4 repeatable job's hash has no iteration count.
    let client = raw_client().await?;
    let _: i64 = client
        .hset(
            format!("{PREFIX}:{queue}:repeat:legacy"),
            [("name", "old"), ("every", "1000")],
        )
        .await?;
    for id in ["every-minute", "legacy", "missing"] {
        let ours = q.is_job_scheduler(id).await?;
        let node = node_admin(&queue, "isJobScheduler", json!({"id": id})).await?;
        assert_eq!(json!(ours), node, "isJobScheduler({id})");
    }
    assert!(q.is_job_scheduler("every-minute").await?);
    assert!(!q.is_job_scheduler("legacy").await?);
    q.close().await?;
    cleanup(&queue).await?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn remove_deprecated_priority_key_leaves_the_same_state_as_node() -> Result<()> {
    if !node_available() {
        return Ok(());
    }
    let node_q = unique_queue("qnm-prio-node");
    let our_q = unique_queue("qnm-prio-rust");
    let client = raw_client().await?;
    for queue in [&node_q, &our_q] {
        prepare(queue, json!([add("w1", json!({}))])).await?;
        let _: () = client
            .set(
                format!("{PREFIX}:{queue}:priority"),
                "legacy",
                None,
                None,
                false,
            )
            .await?;
    }
    let node_first = node_admin(&node_q, "removeDeprecatedPriorityKey", json!({})).await?;
    let node_again = node_admin(&node_q, "removeDeprecatedPriorityKey", json!({})).await?;
    let q = open_queue(&our_q).await?;
    assert!(q.remove_deprecated_priority_key().await?);
    assert!(!q.remove_deprecated_priority_key().await?);
    // Node returns DEL's count.
    assert_eq!((node_first, node_again), (json!(1), json!(0)));
    q.close().await?;
    assert_same_as_node(&our_q, &node_q, "after removeDeprecatedPriorityKey").await?;
    cleanup(&node_q).await?;
    cleanup(&our_q).await?;
    Ok(())
}

/// Jobs `a`..`e` waiting or delayed, then orphans made as BullMQ 5.66.6 left them: `a`'s and
/// `b`'s ids dropped from `wait` (hash and logs kept), a logs-only key for `z`; plus keys that
/// look like jobs but are not (a scheduler hash, a dedup key, a foreign sub-key).
async fn prepare_orphans(queue: &str) -> Result<()> {
    prepare(
        queue,
        json!([
            add("a", json!({})),
            add("b", json!({})),
            add("c", json!({})),
            add("d", json!({"delay": 60_000})),
            add("e", json!({"deduplication": {"id": "dd"}})),
        ]),
    )
    .await?;
    node_admin(queue, "log", json!({"id": "a", "row": "line"})).await?;
    let client = raw_client().await?;
    let base = format!("{PREFIX}:{queue}:");
    for id in ["a", "b"] {
        let _: i64 = client.lrem(format!("{base}wait"), 1, id).await?;
    }
    let _: i64 = client.rpush(format!("{base}z:logs"), "orphan log").await?;
    let _: i64 = client
        .hset(format!("{base}repeat:r1"), [("name", "r")])
        .await?;
    let _: () = client
        .set(format!("{base}c:custom"), "kept", None, None, false)
        .await?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn remove_orphaned_jobs_leaves_the_same_state_as_node() -> Result<()> {
    if !node_available() {
        return Ok(());
    }
    let node_q = unique_queue("qnm-orphans-node");
    let our_q = unique_queue("qnm-orphans-rust");
    prepare_orphans(&node_q).await?;
    prepare_orphans(&our_q).await?;

    let node_removed = node_admin(&node_q, "removeOrphanedJobs", json!({})).await?;
    let q = open_queue(&our_q).await?;
    let refused = q
        .remove_orphaned_jobs(0, 0)
        .await
        .expect_err("a scan step of 0 keys is refused");
    assert!(
        matches!(
            refused,
            QueueError::InvalidArgument {
                argument: "count",
                ..
            }
        ),
        "{refused:?}"
    );
    let ours = q.remove_orphaned_jobs(1000, 0).await?;
    assert_eq!(json!(ours), node_removed);
    assert_eq!(ours, 3, "a, b and z");
    assert_eq!(q.remove_orphaned_jobs(1000, 0).await?, 0, "none left");
    q.close().await?;
    assert_same_as_node(&our_q, &node_q, "after removeOrphanedJobs").await?;
    let client = raw_client().await?;
    let kept: bool = client.exists(format!("{PREFIX}:{our_q}:c")).await?;
    assert!(kept, "a referenced job stays");

    // With a limit: SCAN's steps walk the whole keyspace, so where a step ends depends on the
    // server's other keys and differs between two queues; each call stops after the step that
    // reached the limit. Called in a loop until nothing is left (as Node's docs advise), both
    // remove the same jobs in total and end in the same state.
    let node_q2 = unique_queue("qnm-orphans-limit-node");
    let our_q2 = unique_queue("qnm-orphans-limit-rust");
    prepare_orphans(&node_q2).await?;
    prepare_orphans(&our_q2).await?;
    let mut node_total = 0;
    loop {
        let step = node_admin(
            &node_q2,
            "removeOrphanedJobs",
            json!({"count": 10, "limit": 1}),
        )
        .await?
        .as_u64()
        .unwrap_or(0);
        if step == 0 {
            break;
        }
        node_total += step;
    }
    let q2 = open_queue(&our_q2).await?;
    let mut our_total = 0;
    loop {
        let step = q2.remove_orphaned_jobs(10, 1).await?;
        if step == 0 {
            break;
        }
        assert!(
            step <= 3,
            "one call removes what its last step found: {step}"
        );
        our_total += step;
    }
    assert_eq!((our_total, node_total), (3, 3));
    q2.close().await?;
    assert_same_as_node(&our_q2, &node_q2, "after removeOrphanedJobs with a limit").await?;
    for queue in [&node_q, &our_q, &node_q2, &our_q2] {
        cleanup(queue).await?;
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn state_getters_list_what_nodes_list_in_nodes_order() -> Result<()> {
    if !node_available() {
        return Ok(());
    }
    let queue = unique_queue("qnm-states");
    let get = json!({"op": "get", "token": "tok", "block": false});
    let complete = json!({"op": "complete", "value": 1, "fetchNext": false});
    let fail = json!({"op": "fail", "message": "boom", "fetchNext": false});
    let sleep = json!({"op": "sleep", "ms": 5});
    // Two of each finished state (newest first on both sides), an active one, two waiting,
    // two prioritized out of insertion order, two delayed due out of insertion order.
    prepare(
        &queue,
        json!([
            add("c1", json!({})),
            get,
            complete,
            sleep,
            add("c2", json!({})),
            get,
            complete,
            sleep,
            add("f1", json!({})),
            get,
            fail,
            sleep,
            add("f2", json!({})),
            get,
            fail,
            sleep,
            add("a1", json!({})),
            get,
            add("w1", json!({})),
            add("w2", json!({})),
            add("p1", json!({"priority": 5})),
            add("p2", json!({"priority": 1})),
            add("d1", json!({"delay": 120_000})),
            add("d2", json!({"delay": 60_000})),
        ]),
    )
    .await?;
    let q = open_queue(&queue).await?;
    let ids = |jobs: Vec<ractor_bullmq::Job>| -> Value {
        json!(jobs.iter().map(|j| j.id().to_owned()).collect::<Vec<_>>())
    };
    let ours = [
        ("getWaiting", ids(q.get_waiting().await?)),
        ("getWaitingChildren", ids(q.get_waiting_children().await?)),
        ("getActive", ids(q.get_active().await?)),
        ("getDelayed", ids(q.get_delayed().await?)),
        ("getPrioritized", ids(q.get_prioritized().await?)),
        ("getCompleted", ids(q.get_completed().await?)),
        ("getFailed", ids(q.get_failed().await?)),
    ];
    for (getter, ours) in ours {
        let node = node_admin(&queue, "stateJobIds", json!({"getter": getter})).await?;
        assert_eq!(ours, node, "{getter}");
    }
    assert_eq!(ids(q.get_completed().await?), json!(["c2", "c1"]));
    assert_eq!(ids(q.get_delayed().await?), json!(["d2", "d1"]));
    assert_eq!(ids(q.get_prioritized().await?), json!(["p2", "p1"]));
    q.close().await?;
    cleanup(&queue).await?;
    Ok(())
}
