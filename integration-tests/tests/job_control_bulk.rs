//! Job control in bulk and the calls around it (`Queue::retry_jobs`, `promote_jobs`,
//! `extend_lock`, `obliterate_with`, `remove_with`), differential against Node BullMQ 6.7.0:
//! two queues are prepared identically by Node (`node/manual.js`, `node/flows.js`), then Node
//! applies `queue.retryJobs` / `queue.promoteJobs` / `job.extendLock` / `queue.obliterate` /
//! `queue.remove` (`node/admin.js`) to one and we apply ours to the other. Both must leave the
//! same raw Redis state and the same events per job; Node reads our queue as it reads its own
//! and we read Node's; our refusals are typed and write nothing.

mod common;
mod node_steps;
mod raw_state;

use std::time::{Duration, UNIX_EPOCH};

use anyhow::{Context, Result};
use common::*;
use fred::prelude::{HashesInterface, KeysInterface, SetsInterface, SortedSetsInterface};
use node_steps::{add, node_admin, prepare};
use ractor_bullmq::protocol::state::JobState;
use ractor_bullmq::{ObliterateOptions, QueueError, RemoveOptions, RetryFrom};
use raw_state::{assert_same_state, per_job_events, snapshot};
use serde_json::{json, Value};

/// Whether `queue`'s wake-up marker holds the "jobs are ready" member (`0`); the snapshot
/// leaves the marker out, but no worker runs in these tests, so it must match Node's.
async fn ready_marker(queue: &str) -> Result<bool> {
    let client = raw_client().await?;
    let score: Option<f64> = client
        .zscore(format!("{PREFIX}:{queue}:marker"), "0")
        .await?;
    Ok(score.is_some())
}

/// The raw state of both queues, each with its own name replaced, compared (the ready marker
/// too); then the events of each job compared.
async fn assert_same_as_node(ours: &str, theirs: &str, what: &str) -> Result<()> {
    let our_state = snapshot(ours, &[(ours, "<q>")]).await?;
    let their_state = snapshot(theirs, &[(theirs, "<q>")]).await?;
    assert_same_state(&our_state, &their_state, what);
    assert_eq!(
        ready_marker(ours).await?,
        ready_marker(theirs).await?,
        "{what}: the same ready marker"
    );
    assert_eq!(
        per_job_events(ours, &[(ours, "<q>")]).await?,
        per_job_events(theirs, &[(theirs, "<q>")]).await?,
        "{what}: the same events per job"
    );
    Ok(())
}

/// What Node reads of `queue`: the state of each of `ids`, the counts, and the order of
/// `wait` as `getWaiting` lists it.
async fn node_reads(queue: &str, ids: &[&str]) -> Result<Value> {
    let script = format!(
        "const {{ Queue }} = require('bullmq'); const {{ connectionOptions }} = require('./lib');\
         (async () => {{\
           const q = new Queue({queue:?}, {{ connection: connectionOptions() }});\
           const states = {{}};\
           for (const id of {ids}) states[id] = await q.getJobState(id);\
           const counts = await q.getJobCounts();\
           const waiting = (await q.getWaiting()).map(j => j.id);\
           await q.close();\
           process.stdout.write(JSON.stringify({{ states, counts, waiting }}));\
         }})().then(() => process.exit(0), e => {{ console.error(e); process.exit(1); }});",
        ids = serde_json::to_string(ids)?
    );
    node_eval(&script).await
}

/// What we read of `queue`: the state of each of `ids` and the order of `wait`.
async fn our_reads(queue: &str, ids: &[&str]) -> Result<(Vec<JobState>, Vec<String>)> {
    let q = open_queue(queue).await?;
    let mut states = Vec::with_capacity(ids.len());
    for id in ids {
        states.push(q.get_job_state(id).await?);
    }
    let waiting = q.get_job_ids(&[JobState::Waiting], 0, -1, true).await?;
    q.close().await?;
    Ok((states, waiting))
}

/// The `finishedOn` of job `id` of `queue`, read raw.
async fn finished_on(queue: &str, id: &str) -> Result<u64> {
    let client = raw_client().await?;
    let value: Option<String> = client
        .hget(format!("{PREFIX}:{queue}:{id}"), "finishedOn")
        .await?;
    value
        .context("finishedOn is set")?
        .parse()
        .context("finishedOn is a number")
}

/// The retry case: `c1`, `c2` (priority 2) and `c3` (lifo) completed; `f1` failed, then, a few
/// ms later, `fc` (a child of the delayed parent `p1`) and `f2` failed; `a1` active, `w1`
/// waiting.
fn retry_steps() -> Value {
    let get = json!({"op": "get", "token": "tok", "block": false});
    let complete = json!({"op": "complete", "value": "ret", "fetchNext": false});
    let fail = json!({"op": "fail", "message": "boom", "fetchNext": false});
    json!([
        add("c1", json!({})),
        get,
        complete,
        add("c2", json!({"priority": 2})),
        get,
        complete,
        add("c3", json!({"lifo": true})),
        get,
        complete,
        add("f1", json!({"attempts": 1})),
        get,
        fail,
        {"op": "sleep", "ms": 5},
        add("p1", json!({"delay": 60000})),
        add("fc", json!({"parent": {"id": "p1"}})),
        get,
        fail,
        add("f2", json!({})),
        get,
        fail,
        add("a1", json!({})),
        get,
        add("w1", json!({})),
    ])
}

const RETRY_IDS: &[&str] = &["c1", "c2", "c3", "f1", "fc", "f2", "p1", "a1", "w1"];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retry_jobs_leaves_the_same_state_as_node() -> Result<()> {
    if !node_available() {
        return Ok(());
    }
    let node_q = unique_queue("bulkretry-node");
    let our_q = unique_queue("bulkretry-rust");
    prepare(&node_q, retry_steps()).await?;
    prepare(&our_q, retry_steps()).await?;
    assert_same_as_node(&our_q, &node_q, "prepared alike").await?;

    // Completed jobs in batches of 2; failed ones up to f1's finish time, then the rest in
    // batches of 1 (Node's default state and timestamp).
    // No ready marker before: the one after comes from the retries.
    let client = raw_client().await?;
    for queue in [&node_q, &our_q] {
        let _: i64 = client.del(format!("{PREFIX}:{queue}:marker")).await?;
    }
    let node_f1 = finished_on(&node_q, "f1").await?;
    node_admin(
        &node_q,
        "retryJobs",
        json!({"state": "completed", "count": 2}),
    )
    .await?;
    node_admin(
        &node_q,
        "retryJobs",
        json!({"state": "failed", "count": 1000, "timestamp": node_f1}),
    )
    .await?;
    node_admin(&node_q, "retryJobs", json!({"count": 1})).await?;

    let q = open_queue(&our_q).await?;
    let untouched = snapshot(&our_q, &[(our_q.as_str(), "<q>")]).await?;
    let refused = q
        .retry_jobs(
            ractor_bullmq::RetryJobsOptions::new()
                .state(RetryFrom::Failed)
                .count(0),
        )
        .await
        .expect_err("a batch of 0 is refused");
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
    assert_eq!(
        q.retry_jobs(
            ractor_bullmq::RetryJobsOptions::new()
                .state(RetryFrom::Failed)
                .count(10)
                .timestamp(UNIX_EPOCH + Duration::from_millis(1))
        )
        .await?,
        0,
        "nothing failed that early"
    );
    assert_same_state(
        &snapshot(&our_q, &[(our_q.as_str(), "<q>")]).await?,
        &untouched,
        "after the refusal and the empty retry",
    );
    assert_eq!(
        q.retry_jobs(
            ractor_bullmq::RetryJobsOptions::new()
                .state(RetryFrom::Completed)
                .count(2)
        )
        .await?,
        3
    );
    let our_f1 = finished_on(&our_q, "f1").await?;
    let by_f1 = UNIX_EPOCH + Duration::from_millis(our_f1);
    assert_eq!(
        q.retry_jobs(
            ractor_bullmq::RetryJobsOptions::new()
                .state(RetryFrom::Failed)
                .count(1000)
                .timestamp(by_f1)
        )
        .await?,
        1,
        "only f1 failed by then"
    );
    assert_eq!(
        q.retry_jobs(
            ractor_bullmq::RetryJobsOptions::new()
                .state(RetryFrom::Failed)
                .count(1)
        )
        .await?,
        2
    );
    q.close().await?;

    assert_same_as_node(&our_q, &node_q, "after retryJobs").await?;
    assert!(
        ready_marker(&our_q).await?,
        "the retried jobs wake a worker"
    );

    // Node reads our queue as its own (every retried job in wait, oldest first, whatever its
    // priority or lifo; fc pending for p1 again); we read Node's as ours.
    let node_on_ours = node_reads(&our_q, RETRY_IDS).await?;
    assert_eq!(node_on_ours, node_reads(&node_q, RETRY_IDS).await?);
    assert_eq!(
        node_on_ours["waiting"],
        json!(["w1", "c1", "c2", "c3", "f1", "fc", "f2"])
    );
    assert_eq!(
        our_reads(&node_q, RETRY_IDS).await?,
        our_reads(&our_q, RETRY_IDS).await?
    );
    let client = raw_client().await?;
    let pending: Vec<String> = client
        .smembers(format!("{PREFIX}:{our_q}:p1:dependencies"))
        .await?;
    assert_eq!(pending, [format!("{PREFIX}:{our_q}:fc")]);

    cleanup(&node_q).await?;
    cleanup(&our_q).await?;
    Ok(())
}

/// The promote case: `d1`, `d2` (priority 3), `d3` delayed at different times, `w1` waiting.
fn promote_steps() -> Value {
    json!([
        add("w1", json!({})),
        add("d1", json!({"delay": 60000})),
        add("d2", json!({"delay": 30000, "priority": 3})),
        add("d3", json!({"delay": 90000})),
    ])
}

const PROMOTE_IDS: &[&str] = &["w1", "d1", "d2", "d3"];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn promote_jobs_leaves_the_same_state_as_node() -> Result<()> {
    if !node_available() {
        return Ok(());
    }
    let node_q = unique_queue("bulkpromote-node");
    let our_q = unique_queue("bulkpromote-rust");
    prepare(&node_q, promote_steps()).await?;
    prepare(&our_q, promote_steps()).await?;

    // Paused: the jobs move, but no worker is woken (no ready marker on either side).
    let client = raw_client().await?;
    for queue in [&node_q, &our_q] {
        let _: i64 = client.del(format!("{PREFIX}:{queue}:marker")).await?;
    }
    node_admin(&node_q, "pause", json!({})).await?;
    node_admin(&node_q, "promoteJobs", json!({"count": 2})).await?;
    node_admin(&node_q, "promoteJobs", json!({})).await?;

    let q = open_queue(&our_q).await?;
    q.pause().await?;
    let refused = q
        .promote_jobs(ractor_bullmq::PromoteJobsOptions::new().count(0))
        .await
        .expect_err("a batch of 0 is refused");
    assert!(
        matches!(refused, QueueError::InvalidArgument { .. }),
        "{refused:?}"
    );
    assert_eq!(
        q.get_job_counts().await?.delayed,
        3,
        "the refusal moved nothing"
    );
    assert_eq!(
        q.promote_jobs(ractor_bullmq::PromoteJobsOptions::new().count(2))
            .await?,
        3
    );
    assert_eq!(
        q.promote_jobs(ractor_bullmq::PromoteJobsOptions::new().count(1000))
            .await?,
        0,
        "nothing left to promote"
    );
    q.close().await?;

    assert_same_as_node(&our_q, &node_q, "after promoteJobs").await?;
    assert!(
        !ready_marker(&our_q).await?,
        "a paused queue wakes no worker"
    );
    let node_on_ours = node_reads(&our_q, PROMOTE_IDS).await?;
    assert_eq!(node_on_ours, node_reads(&node_q, PROMOTE_IDS).await?);
    assert_eq!(node_on_ours["waiting"], json!(["w1", "d2", "d1", "d3"]));
    assert_eq!(
        our_reads(&node_q, PROMOTE_IDS).await?,
        our_reads(&our_q, PROMOTE_IDS).await?
    );
    cleanup(&node_q).await?;
    cleanup(&our_q).await?;
    Ok(())
}

/// The lock case: `a1` active (locked with `tok` for 30 s) and marked as a stalled candidate,
/// `w1` waiting.
async fn prepare_lock(queue: &str) -> Result<()> {
    let get = json!({"op": "get", "token": "tok", "block": false});
    prepare(
        queue,
        json!([add("a1", json!({})), get, add("w1", json!({}))]),
    )
    .await?;
    let client = raw_client().await?;
    let _: i64 = client
        .sadd(format!("{PREFIX}:{queue}:stalled"), "a1")
        .await?;
    Ok(())
}

/// The remaining lifetime of `queue`'s lock on `id`, in ms.
async fn lock_ttl(queue: &str, id: &str) -> Result<i64> {
    let client = raw_client().await?;
    Ok(client.pttl(format!("{PREFIX}:{queue}:{id}:lock")).await?)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn extend_lock_leaves_the_same_lock_as_node() -> Result<()> {
    if !node_available() {
        return Ok(());
    }
    let node_q = unique_queue("extlock-node");
    let our_q = unique_queue("extlock-rust");
    prepare_lock(&node_q).await?;
    prepare_lock(&our_q).await?;

    let extend = |id: &str, token: &str| json!({"id": id, "token": token, "duration": 120000});
    let mut node_results = Vec::new();
    for (id, token) in [
        ("a1", "other"),
        ("w1", "tok"),
        ("nope", "tok"),
        ("a1", "tok"),
    ] {
        node_results.push(node_admin(&node_q, "extendLock", extend(id, token)).await?);
    }
    assert_eq!(node_results, [json!(0), json!(0), json!(0), json!(1)]);

    let q = open_queue(&our_q).await?;
    let long = Duration::from_secs(120);
    let refusals = [
        q.extend_lock("a1", "other", long).await,
        q.extend_lock("w1", "tok", long).await,
        q.extend_lock("nope", "tok", long).await,
        q.extend_lock("a1", "tok", Duration::ZERO).await,
    ];
    let names: Vec<String> = refusals
        .iter()
        .map(|r| r.as_ref().expect_err("refused").to_string())
        .collect();
    assert_eq!(
        names,
        [
            "job a1 is locked with another token",
            "job w1 has no lock to extend",
            "job nope has no lock to extend",
            "invalid argument `duration`: a lock must last at least 1 ms",
        ]
    );
    assert!(matches!(
        refusals[0],
        Err(QueueError::LockHeldByOther { .. })
    ));
    assert!(matches!(refusals[1], Err(QueueError::LockMissing { .. })));
    let refused_state = snapshot(&our_q, &[(our_q.as_str(), "<q>")]).await?;
    assert_eq!(
        refused_state.get("stalled"),
        Some(&json!({"set": ["a1"]})),
        "the refusals left the stalled mark"
    );
    assert!(
        lock_ttl(&our_q, "a1").await? <= 30_000,
        "nor renewed the lock"
    );
    q.extend_lock("a1", "tok", long).await?;

    assert_same_as_node(&our_q, &node_q, "after extendLock").await?;
    for queue in [&our_q, &node_q] {
        let ttl = lock_ttl(queue, "a1").await?;
        assert!(
            ttl > 60_000,
            "the lock was renewed for 120 s: {ttl} ms left"
        );
    }
    // Each side renews a lock the other wrote.
    q.close().await?;
    let on_node = open_queue(&node_q).await?;
    on_node.extend_lock("a1", "tok", long).await?;
    on_node.close().await?;
    assert_eq!(
        node_admin(&our_q, "extendLock", extend("a1", "tok")).await?,
        json!(1)
    );
    cleanup(&node_q).await?;
    cleanup(&our_q).await?;
    Ok(())
}

/// The obliterate case: completed, failed, delayed, prioritized and waiting jobs with logs,
/// and an active one.
fn obliterate_steps() -> Value {
    let get = json!({"op": "get", "token": "tok", "block": false});
    let complete = json!({"op": "complete", "value": "ret", "fetchNext": false});
    let fail = json!({"op": "fail", "message": "boom", "fetchNext": false});
    let mut steps = vec![
        add("c1", json!({})),
        get.clone(),
        complete,
        add("f1", json!({})),
        get.clone(),
        fail,
        add("d1", json!({"delay": 60000})),
        add("p1", json!({"priority": 4})),
    ];
    for n in 0..5 {
        steps.push(add(&format!("w{n}"), json!({})));
    }
    steps.push(get);
    Value::Array(steps)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn obliterate_with_a_count_leaves_the_same_state_as_node() -> Result<()> {
    if !node_available() {
        return Ok(());
    }
    let node_q = unique_queue("oblit-node");
    let our_q = unique_queue("oblit-rust");
    prepare(&node_q, obliterate_steps()).await?;
    prepare(&our_q, obliterate_steps()).await?;

    let q = open_queue(&our_q).await?;
    let before = snapshot(&our_q, &[(our_q.as_str(), "<q>")]).await?;
    let refused = q
        .obliterate_with(ObliterateOptions::new().count(0))
        .await
        .expect_err("a batch of 0 is refused");
    assert!(
        matches!(refused, QueueError::InvalidArgument { .. }),
        "{refused:?}"
    );
    assert_same_state(
        &snapshot(&our_q, &[(our_q.as_str(), "<q>")]).await?,
        &before,
        "a refused count writes nothing, not even the pause",
    );

    // Without force, both refuse the active job after pausing, and delete nothing.
    let node_refusal = run_node(
        "admin.js",
        &json!({"queue": node_q, "op": "obliterate", "count": 2}),
    )
    .await
    .expect_err("Node refuses");
    assert!(
        format!("{node_refusal:#}").contains("Cannot obliterate queue with active jobs"),
        "{node_refusal:#}"
    );
    let refused = q
        .obliterate_with(ObliterateOptions::new().count(2))
        .await
        .expect_err("active jobs without force");
    assert!(
        matches!(refused, QueueError::ActiveJobs { .. }),
        "{refused:?}"
    );
    assert_same_as_node(&our_q, &node_q, "after the refused obliterate").await?;

    node_admin(&node_q, "obliterate", json!({"force": true, "count": 2})).await?;
    q.obliterate_with(ObliterateOptions::new().force(true).count(2))
        .await?;
    q.close().await?;
    assert_eq!(count_keys(&node_q).await?, 0, "Node left nothing");
    assert_eq!(count_keys(&our_q).await?, 0, "we left nothing");
    cleanup(&node_q).await?;
    cleanup(&our_q).await?;
    Ok(())
}

/// The remove case, three flows in one queue: `p` with children `c1` (a stray lock on it, as
/// a worker elsewhere holds it) and `c2`; `q` with children `k1`, `k2`; `r` with one child
/// `rc`.
async fn prepare_flows(queue: &str) -> Result<()> {
    let child =
        |id: &str| json!({"name": id, "queueName": queue, "data": {}, "opts": {"jobId": id}});
    for (parent, children) in [
        ("p", vec![child("c1"), child("c2")]),
        ("q", vec![child("k1"), child("k2")]),
        ("r", vec![child("rc")]),
    ] {
        let flow = json!({"name": parent, "queueName": queue, "data": {}, "opts": {"jobId": parent},
                          "children": children});
        let report = run_node("flows.js", &json!({"op": "add", "flow": flow})).await?;
        assert!(report.get("error").is_none(), "flow {parent}: {report}");
    }
    prepare(
        queue,
        json!([{"op": "lock", "id": "c1", "token": "elsewhere", "ms": 60000}]),
    )
    .await
}

const FLOW_IDS: &[&str] = &["p", "c1", "c2", "q", "k1", "k2", "r", "rc"];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn remove_without_children_leaves_the_same_state_as_node() -> Result<()> {
    if !node_available() {
        return Ok(());
    }
    let node_q = unique_queue("rmkids-node");
    let our_q = unique_queue("rmkids-rust");
    prepare_flows(&node_q).await?;
    prepare_flows(&our_q).await?;

    let remove = |id: &str, children: bool| json!({"id": id, "removeChildren": children});
    let mut node_codes = Vec::new();
    for (id, children) in [("p", true), ("p", false), ("q", true), ("rc", false)] {
        node_codes.push(node_admin(&node_q, "remove", remove(id, children)).await?);
    }
    assert_eq!(
        node_codes,
        [json!(0), json!(1), json!(1), json!(1)],
        "p refused while its child is locked, then removed alone"
    );

    let q = open_queue(&our_q).await?;
    let before = snapshot(&our_q, &[(our_q.as_str(), "<q>")]).await?;
    let refused = q.remove("p").await.expect_err("a locked child");
    assert!(
        matches!(&refused, QueueError::JobLocked { job_id } if job_id == "p"),
        "{refused:?}"
    );
    assert!(
        !q.remove_with("nope", RemoveOptions::new()).await?,
        "no such job"
    );
    assert_same_state(
        &snapshot(&our_q, &[(our_q.as_str(), "<q>")]).await?,
        &before,
        "the refusal and the missing job wrote nothing",
    );
    let alone = RemoveOptions::new().remove_children(false);
    assert!(q.remove_with("p", alone).await?);
    assert!(q.remove_with("q", RemoveOptions::new()).await?);
    assert!(q.remove_with("rc", alone).await?);
    q.close().await?;

    assert_same_as_node(&our_q, &node_q, "after the removals").await?;
    let node_on_ours = node_reads(&our_q, FLOW_IDS).await?;
    assert_eq!(node_on_ours, node_reads(&node_q, FLOW_IDS).await?);
    assert_eq!(
        node_on_ours["states"],
        json!({"p": "unknown", "c1": "waiting", "c2": "waiting", "q": "unknown", "k1": "unknown",
               "k2": "unknown", "r": "waiting", "rc": "unknown"}),
        "p's children stay; r, left without children, is released"
    );
    assert_eq!(
        our_reads(&node_q, FLOW_IDS).await?,
        our_reads(&our_q, FLOW_IDS).await?
    );
    let client = raw_client().await?;
    let parent: Option<String> = client
        .hget(format!("{PREFIX}:{our_q}:c1"), "parentKey")
        .await?;
    assert_eq!(
        parent,
        Some(format!("{PREFIX}:{our_q}:p")),
        "a child left behind still names its removed parent, as in Node"
    );
    cleanup(&node_q).await?;
    cleanup(&our_q).await?;
    Ok(())
}
