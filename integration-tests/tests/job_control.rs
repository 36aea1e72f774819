//! Job control from code (`Queue::retry_job`, `promote_job`, `is_*`), differential against
//! Node BullMQ 6.7.0: two queues are prepared identically by Node (`node/manual.js`: finished,
//! active, waiting and delayed jobs with fixed ids), then Node applies `job.retry()` /
//! `job.promote()` to one and we apply ours to the other. Both must leave the same raw Redis
//! state and the same events; Node reads our queue as it reads its own, we read Node's; and our
//! refusals (an active job retried, a waiting job promoted, a missing job) are typed and write
//! nothing.

mod common;
mod raw_state;

use std::collections::BTreeMap;

use anyhow::Result;
use common::*;
use ractor_bullmq::protocol::state::JobState;
use ractor_bullmq::{QueueError, RetryFrom, RetryReset};
use raw_state::{assert_same_state, snapshot};
use serde_json::{json, Value};

/// The starting state: `c1` and `lf` (lifo) completed, `f1` and `fp` (priority 2) failed,
/// `a1` active, `w1` waiting, `d1` and `dp` (priority 3) delayed.
async fn prepare(queue: &str) -> Result<()> {
    let add = |id: &str, opts: Value| {
        let mut opts = opts;
        opts["jobId"] = json!(id);
        json!({"op": "add", "name": id, "data": {"id": id}, "opts": opts})
    };
    let get = json!({"op": "get", "token": "tok", "block": false});
    let complete = json!({"op": "complete", "value": "ret", "fetchNext": false});
    let fail = json!({"op": "fail", "message": "boom", "fetchNext": false});
    let steps = json!([
        add("c1", json!({})),
        get,
        complete,
        add("f1", json!({"attempts": 1})),
        get,
        fail,
        add("fp", json!({"priority": 2})),
        get,
        fail,
        add("lf", json!({"lifo": true})),
        get,
        complete,
        add("a1", json!({})),
        get,
        add("w1", json!({})),
        add("d1", json!({"delay": 60000})),
        add("dp", json!({"delay": 60000, "priority": 3})),
    ]);
    let report = run_node("manual.js", &json!({"queue": queue, "steps": steps})).await?;
    let results = report["results"].as_array().cloned().unwrap_or_default();
    assert!(
        results.iter().all(|r| r.get("error").is_none()),
        "preparation failed: {report}"
    );
    Ok(())
}

/// Node's side: the same operations with `job.retry` / `job.promote`; returns the messages of
/// the refused ones.
async fn node_controls(queue: &str) -> Result<Value> {
    let script = format!(
        "const {{ Queue, Job }} = require('bullmq'); const {{ connectionOptions }} = require('./lib');\
         (async () => {{\
           const q = new Queue({queue:?}, {{ connection: connectionOptions() }});\
           const job = id => Job.fromId(q, id);\
           await (await job('c1')).retry('completed');\
           await (await job('f1')).retry('failed', {{ resetAttemptsMade: true, resetAttemptsStarted: true }});\
           await (await job('fp')).retry('failed');\
           await (await job('lf')).retry('completed');\
           await (await job('d1')).promote();\
           await (await job('dp')).promote();\
           const refusals = [];\
           for (const f of [() => job('a1').then(j => j.retry('failed')), () => job('w1').then(j => j.promote())]) {{\
             try {{ await f(); refusals.push(null); }} catch (e) {{ refusals.push(e.message); }}\
           }}\
           await q.close();\
           process.stdout.write(JSON.stringify({{ refusals }}));\
         }})().then(() => process.exit(0), e => {{ console.error(e); process.exit(1); }});"
    );
    node_eval(&script).await
}

/// Our side: the same operations through the `Queue`, and the same refusals, typed.
async fn our_controls(queue: &str) -> Result<()> {
    let q = open_queue(queue).await?;
    let reset_both = RetryReset::none()
        .attempts_made(true)
        .attempts_started(true);
    q.retry_job("c1", RetryFrom::Completed, RetryReset::none())
        .await?;
    q.retry_job("f1", RetryFrom::Failed, reset_both).await?;
    q.retry_job("fp", RetryFrom::Failed, RetryReset::none())
        .await?;
    q.retry_job("lf", RetryFrom::Completed, RetryReset::none())
        .await?;
    q.promote_job("d1").await?;
    q.promote_job("dp").await?;

    let refused = q
        .retry_job("a1", RetryFrom::Failed, RetryReset::none())
        .await
        .expect_err("an active job is not retried");
    assert!(
        matches!(&refused, QueueError::JobNotInState { job_id, expected: "failed", actual: JobState::Active } if job_id == "a1"),
        "{refused:?}"
    );
    assert_eq!(refused.to_string(), "job a1 is not failed, it is active");
    let refused = q
        .promote_job("w1")
        .await
        .expect_err("a waiting job is not promoted");
    assert!(
        matches!(
            &refused,
            QueueError::JobNotInState {
                expected: "delayed",
                actual: JobState::Waiting,
                ..
            }
        ),
        "{refused:?}"
    );
    for refused in [
        q.retry_job("missing", RetryFrom::Failed, RetryReset::none())
            .await
            .expect_err("missing"),
        q.promote_job("missing").await.expect_err("missing"),
    ] {
        assert!(
            matches!(&refused, QueueError::JobNotFound { job_id } if job_id == "missing"),
            "{refused:?}"
        );
    }
    q.close().await?;
    Ok(())
}

/// What Node reads of `queue`: every job's state and the counts.
async fn node_reads(queue: &str) -> Result<Value> {
    let script = format!(
        "const {{ Queue }} = require('bullmq'); const {{ connectionOptions }} = require('./lib');\
         (async () => {{\
           const q = new Queue({queue:?}, {{ connection: connectionOptions() }});\
           const states = {{}};\
           for (const id of ['c1','f1','fp','lf','a1','w1','d1','dp']) states[id] = await q.getJobState(id);\
           const counts = await q.getJobCounts();\
           const f1 = await q.getJob('f1');\
           await q.close();\
           process.stdout.write(JSON.stringify({{ states, counts, f1: [f1.attemptsMade, f1.attemptsStarted, f1.failedReason ?? null] }}));\
         }})().then(() => process.exit(0), e => {{ console.error(e); process.exit(1); }});"
    );
    node_eval(&script).await
}

fn normalized_events(events: &[StreamEvent]) -> Vec<String> {
    normalize_events(events, &|id| id.to_string())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retry_and_promote_leave_the_same_state_as_node() -> Result<()> {
    if !node_available() {
        return Ok(());
    }
    let node_q = unique_queue("jobctl-node");
    let our_q = unique_queue("jobctl-rust");
    prepare(&node_q).await?;
    prepare(&our_q).await?;
    let before_node = read_events(&node_q).await?.len();
    let before_ours = read_events(&our_q).await?.len();
    let untouched = snapshot(&our_q, &[(our_q.as_str(), "<q>")]).await?;

    let node = node_controls(&node_q).await?;
    assert_eq!(
        node["refusals"],
        json!([
            "Job a1 is not in the failed state. reprocessJob",
            "Job w1 is not in the delayed state. promote"
        ]),
        "Node refuses the same operations"
    );
    our_controls(&our_q).await?;

    let theirs = snapshot(&node_q, &[(node_q.as_str(), "<q>")]).await?;
    let ours = snapshot(&our_q, &[(our_q.as_str(), "<q>")]).await?;
    assert_ne!(ours, untouched, "the operations changed the queue");
    assert_same_state(&ours, &theirs, "after retry and promote");

    let node_events = read_events(&node_q).await?;
    let our_events = read_events(&our_q).await?;
    assert_eq!(
        normalized_events(&our_events[before_ours..]),
        normalized_events(&node_events[before_node..]),
        "the same events"
    );
    assert_eq!(
        normalized_events(&our_events[before_ours..]).len(),
        6,
        "one waiting event per move, none for the refusals"
    );

    // Node reads our queue as its own; we read Node's as ours.
    let node_on_ours = node_reads(&our_q).await?;
    let node_on_node = node_reads(&node_q).await?;
    assert_eq!(node_on_ours, node_on_node);
    assert_eq!(node_on_ours["f1"], json!([0, 0, null]));
    let q = open_queue(&node_q).await?;
    let expected: BTreeMap<&str, JobState> = [
        ("c1", JobState::Waiting),
        ("f1", JobState::Waiting),
        ("fp", JobState::Prioritized),
        ("lf", JobState::Waiting),
        ("a1", JobState::Active),
        ("w1", JobState::Waiting),
        ("d1", JobState::Waiting),
        ("dp", JobState::Prioritized),
    ]
    .into_iter()
    .collect();
    for (id, state) in &expected {
        assert_eq!(q.get_job_state(id).await?, *state, "state of {id}");
        assert_eq!(q.is_waiting(id).await?, *state == JobState::Waiting, "{id}");
        assert_eq!(q.is_active(id).await?, *state == JobState::Active, "{id}");
        assert!(!q.is_delayed(id).await? && !q.is_completed(id).await? && !q.is_failed(id).await?);
    }
    q.close().await?;

    cleanup(&node_q).await?;
    cleanup(&our_q).await?;
    Ok(())
}

/// Refused operations write nothing: the raw state and the events are unchanged.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refusals_write_nothing() -> Result<()> {
    if !node_available() {
        return Ok(());
    }
    let queue = unique_queue("jobctl-refuse");
    prepare(&queue).await?;
    let q = open_queue(&queue).await?;
    let names = [(queue.as_str(), "<q>")];
    let before = snapshot(&queue, &names).await?;
    let events_before = read_events(&queue).await?.len();

    let attempts: Vec<Result<(), QueueError>> = vec![
        q.retry_job("a1", RetryFrom::Failed, RetryReset::none())
            .await,
        q.retry_job("c1", RetryFrom::Failed, RetryReset::none())
            .await,
        q.retry_job("f1", RetryFrom::Completed, RetryReset::none())
            .await,
        q.retry_job("d1", RetryFrom::Completed, RetryReset::none())
            .await,
        q.retry_job("nope", RetryFrom::Completed, RetryReset::none())
            .await,
        q.promote_job("w1").await,
        q.promote_job("c1").await,
        q.promote_job("nope").await,
    ];
    let actual: Vec<String> = attempts
        .iter()
        .map(|r| r.as_ref().expect_err("refused").to_string())
        .collect();
    assert_eq!(
        actual,
        [
            "job a1 is not failed, it is active",
            "job c1 is not failed, it is completed",
            "job f1 is not completed, it is failed",
            "job d1 is not completed, it is delayed",
            "job nope does not exist",
            "job w1 is not delayed, it is waiting",
            "job c1 is not delayed, it is completed",
            "job nope does not exist",
        ]
    );
    assert_same_state(&snapshot(&queue, &names).await?, &before, "after refusals");
    assert_eq!(read_events(&queue).await?.len(), events_before, "no event");
    q.close().await?;
    cleanup(&queue).await?;
    Ok(())
}

/// The starting state of the priority and delay case: `w1` `w2` `w3` waiting, `p1` `p2`
/// prioritized (priority 1), `d1` delayed.
async fn prepare_priorities(queue: &str) -> Result<()> {
    let add = |id: &str, opts: Value| {
        let mut opts = opts;
        opts["jobId"] = json!(id);
        json!({"op": "add", "name": id, "data": {"id": id}, "opts": opts})
    };
    let steps = json!([
        add("w1", json!({})),
        add("w2", json!({})),
        add("w3", json!({})),
        add("p1", json!({"priority": 1})),
        add("p2", json!({"priority": 1})),
        add("d1", json!({"delay": 60000})),
    ]);
    let report = run_node("manual.js", &json!({"queue": queue, "steps": steps})).await?;
    assert!(
        report["results"]
            .as_array()
            .into_iter()
            .flatten()
            .all(|r| r.get("error").is_none()),
        "preparation failed: {report}"
    );
    Ok(())
}

/// The order Node's getters list `queue`'s waiting and prioritized jobs in (the snapshot
/// compares zset members, not their order).
async fn node_order(queue: &str) -> Result<Value> {
    let script = format!(
        "const {{ Queue }} = require('bullmq'); const {{ connectionOptions }} = require('./lib');\
         (async () => {{\
           const q = new Queue({queue:?}, {{ connection: connectionOptions() }});\
           const ids = jobs => jobs.map(j => j.id);\
           const out = {{ waiting: ids(await q.getWaiting()), prioritized: ids(await q.getPrioritized()),\
                          d1: (await q.getJob('d1')).priority }};\
           await q.close();\
           process.stdout.write(JSON.stringify(out));\
         }})().then(() => process.exit(0), e => {{ console.error(e); process.exit(1); }});"
    );
    node_eval(&script).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn change_priority_and_delay_leave_the_same_state_as_node() -> Result<()> {
    if !node_available() {
        return Ok(());
    }
    let node_q = unique_queue("jobctl-prio-node");
    let our_q = unique_queue("jobctl-prio-rust");
    prepare_priorities(&node_q).await?;
    prepare_priorities(&our_q).await?;
    let before_node = read_events(&node_q).await?.len();
    let before_ours = read_events(&our_q).await?.len();

    let script = format!(
        "const {{ Queue, Job }} = require('bullmq'); const {{ connectionOptions }} = require('./lib');\
         (async () => {{\
           const q = new Queue({node_q:?}, {{ connection: connectionOptions() }});\
           const job = id => Job.fromId(q, id);\
           await (await job('w2')).changePriority({{ priority: 3 }});\
           await (await job('p2')).changePriority({{ priority: 1, lifo: true }});\
           await (await job('p1')).changePriority({{ priority: 0 }});\
           await (await job('w3')).changePriority({{ priority: 0, lifo: true }});\
           await (await job('d1')).changePriority({{ priority: 7 }});\
           await (await job('d1')).changeDelay(5000);\
           let refusal = null;\
           try {{ await (await job('w1')).changeDelay(10); }} catch (e) {{ refusal = e.message; }}\
           await q.close();\
           process.stdout.write(JSON.stringify({{ refusal }}));\
         }})().then(() => process.exit(0), e => {{ console.error(e); process.exit(1); }});"
    );
    let node = node_eval(&script).await?;
    assert_eq!(
        node["refusal"],
        json!("Job w1 is not in the delayed state. changeDelay")
    );

    let q = open_queue(&our_q).await?;
    q.change_priority("w2", 3, false).await?;
    q.change_priority("p2", 1, true).await?;
    q.change_priority("p1", 0, false).await?;
    q.change_priority("w3", 0, true).await?;
    q.change_priority("d1", 7, false).await?;
    q.change_delay("d1", std::time::Duration::from_millis(5000))
        .await?;
    let refused = q
        .change_delay("w1", std::time::Duration::from_millis(10))
        .await
        .expect_err("a waiting job is not rescheduled");
    assert_eq!(refused.to_string(), "job w1 is not delayed, it is waiting");
    let refused = q
        .change_priority("w1", 3_000_000, false)
        .await
        .expect_err("priority out of range");
    assert!(matches!(refused, QueueError::Validation(_)), "{refused:?}");
    let refused = q
        .change_priority("missing", 1, false)
        .await
        .expect_err("missing job");
    assert!(
        matches!(refused, QueueError::JobNotFound { .. }),
        "{refused:?}"
    );
    q.close().await?;

    let theirs = snapshot(&node_q, &[(node_q.as_str(), "<q>")]).await?;
    let ours = snapshot(&our_q, &[(our_q.as_str(), "<q>")]).await?;
    assert_same_state(&ours, &theirs, "after change_priority and change_delay");
    let node_order_ours = node_order(&our_q).await?;
    assert_eq!(node_order_ours, node_order(&node_q).await?);
    assert_eq!(node_order_ours["prioritized"], json!(["p2", "w2"]));
    let node_events = read_events(&node_q).await?;
    let our_events = read_events(&our_q).await?;
    assert_eq!(
        normalized_events(&our_events[before_ours..]),
        normalized_events(&node_events[before_node..]),
        "the same events (one `delayed`)"
    );
    cleanup(&node_q).await?;
    cleanup(&our_q).await?;
    Ok(())
}

/// `clear_logs` keeps the same newest lines as Node's `job.clearLogs(keep)`, and deletes the
/// logs key for 0.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clear_logs_leaves_the_same_logs_as_node() -> Result<()> {
    if !node_available() {
        return Ok(());
    }
    let node_q = unique_queue("jobctl-logs-node");
    let our_q = unique_queue("jobctl-logs-rust");
    for queue in [&node_q, &our_q] {
        let script = format!(
            "const {{ Queue }} = require('bullmq'); const {{ connectionOptions }} = require('./lib');\
             (async () => {{\
               const q = new Queue({queue:?}, {{ connection: connectionOptions() }});\
               for (const id of ['k', 'z']) {{\
                 const job = await q.add(id, {{}}, {{ jobId: id }});\
                 for (const line of ['a', 'b', 'c', 'd']) await job.log(line);\
               }}\
               await q.close();\
               process.stdout.write('{{}}');\
             }})().then(() => process.exit(0), e => {{ console.error(e); process.exit(1); }});"
        );
        node_eval(&script).await?;
    }
    let script = format!(
        "const {{ Queue, Job }} = require('bullmq'); const {{ connectionOptions }} = require('./lib');\
         (async () => {{\
           const q = new Queue({node_q:?}, {{ connection: connectionOptions() }});\
           await (await Job.fromId(q, 'k')).clearLogs(2);\
           await (await Job.fromId(q, 'z')).clearLogs();\
           await q.close();\
           process.stdout.write('{{}}');\
         }})().then(() => process.exit(0), e => {{ console.error(e); process.exit(1); }});"
    );
    node_eval(&script).await?;
    let q = open_queue(&our_q).await?;
    q.clear_logs("k", 2).await?;
    q.clear_logs("z", 0).await?;
    q.close().await?;

    let theirs = snapshot(&node_q, &[(node_q.as_str(), "<q>")]).await?;
    let ours = snapshot(&our_q, &[(our_q.as_str(), "<q>")]).await?;
    assert_same_state(&ours, &theirs, "after clear_logs");
    assert_eq!(ours.get("k:logs"), Some(&json!({"list": ["c", "d"]})));
    assert!(!ours.contains_key("z:logs"));
    cleanup(&node_q).await?;
    cleanup(&our_q).await?;
    Ok(())
}
