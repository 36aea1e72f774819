//! The step-job pattern (issue 13, item 3; https://docs.bullmq.io/patterns/process-step-jobs):
//! the same program — add children, wait for them, read their values, go back to wait, take a
//! delay, finish — run once by a Node BullMQ Worker (`node/step_jobs.js`) and once by ours on
//! the same input ends with the same job hashes (timestamps aside) and the same event sequence
//! per job. It covers the waiting-children path, the "no pending children" path (a parent
//! without children, and every parent once its children are done), `move_to_wait`, a delayed
//! step, data updates between steps and the final completion with the children's values.
//! Then what only our side has: a move refused because the lock was lost or taken is a typed
//! error, and a `WaitingChildrenError` returned without a move fails the attempt.

mod common;
mod worker_common;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::Result;
use common::*;
use fred::prelude::{ClientLike, HashesInterface, KeysInterface};
use ractor_bullmq::protocol::ParentRef;
use ractor_bullmq::store::FinishCode;
use ractor_bullmq::worker::{Job, JobContext, WorkerError};
use ractor_bullmq::{
    DelayedError, Queue, WaitingChildrenError, WaitingError, Worker, WorkerArgs, WorkerOptions,
};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use worker_common::*;

const DELAY: Duration = Duration::from_millis(300);

/// The parents of the scenario: two with children, one without, one waiting for its first
/// child only (Node's `opts.child`).
fn parents() -> Value {
    json!([
        {"name": "flow-a", "data": {"step": "start", "children": 2}, "opts": {}},
        {"name": "flow-b", "data": {"step": "start", "children": 0}, "opts": {}},
        {"name": "flow-c", "data": {"step": "start", "children": 3}, "opts": {"priority": 2}},
        {"name": "flow-d", "data": {"step": "start", "children": 2, "waitForFirst": true}, "opts": {}},
    ])
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
enum Step {
    Start,
    Wait,
    Requeue,
    Delay,
    Finish,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
struct Flow {
    step: Step,
    children: u32,
    #[serde(
        default,
        rename = "waitForFirst",
        skip_serializing_if = "std::ops::Not::not"
    )]
    wait_for_first: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    first: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    total: Option<i64>,
}

/// Our version of `node/step_jobs.js`'s processor, step for step.
async fn step_processor(queue: Queue, job: Job, ctx: JobContext) -> Result<Value> {
    if job.name() == "child" {
        let n = job.data_value()["n"].as_i64().unwrap_or_default();
        return Ok(json!({ "value": n * 10 }));
    }
    let mut flow: Flow = job.data()?;
    loop {
        match flow.step {
            Step::Start => {
                let mut first = None;
                for n in 1..=flow.children {
                    let child = queue
                        .add("child", json!({ "n": n }))
                        .parent(ctx.parent_ref())
                        .await?;
                    first.get_or_insert_with(|| child.id().to_string());
                }
                flow.step = Step::Wait;
                if flow.wait_for_first {
                    flow.first = first;
                }
                ctx.update_data(serde_json::to_value(&flow)?).await?;
            }
            Step::Wait => {
                let moved = match &flow.first {
                    Some(first) => {
                        let child = ParentRef::new(first.clone(), ctx.parent_ref().queue);
                        ctx.move_to_waiting_children_for(&child).await?
                    }
                    None => ctx.move_to_waiting_children().await?,
                };
                if moved {
                    return Err(WaitingChildrenError.into());
                }
                let values = ctx.get_children_values::<Value>().await?;
                let total = values.values().filter_map(|v| v["value"].as_i64()).sum();
                flow.step = Step::Requeue;
                flow.total = Some(total);
                ctx.update_data(serde_json::to_value(&flow)?).await?;
            }
            Step::Requeue => {
                flow.step = Step::Delay;
                ctx.update_data(serde_json::to_value(&flow)?).await?;
                ctx.move_to_wait().await?;
                return Err(WaitingError.into());
            }
            Step::Delay => {
                flow.step = Step::Finish;
                ctx.update_data(serde_json::to_value(&flow)?).await?;
                return Err(DelayedError::new(DELAY).into());
            }
            Step::Finish => return Ok(json!({ "total": flow.total })),
        }
    }
}

/// Every job hash of `queue` by id, comparable across runs: timestamps dropped, the queue
/// name replaced, JSON fields parsed, a delay only said to be there; plus the job's state.
async fn job_snapshot(queue: &str) -> Result<BTreeMap<String, BTreeMap<String, Value>>> {
    let q = open_queue(queue).await?;
    let client = raw_client().await?;
    let mut jobs = BTreeMap::new();
    for key in queue_keys(queue).await? {
        let Some(id) = key.strip_prefix(&format!("{PREFIX}:{queue}:")) else {
            continue;
        };
        let kind: String = client.r#type(&key).await?;
        if id.contains(':') || kind != "hash" || id == "meta" {
            continue;
        }
        let hash: BTreeMap<String, String> = client.hgetall(&key).await?;
        let mut fields = BTreeMap::new();
        for (field, value) in hash {
            if matches!(field.as_str(), "timestamp" | "processedOn" | "finishedOn") {
                continue;
            }
            let value = value.replace(queue, "<queue>");
            let value = match field.as_str() {
                "data" | "opts" | "returnvalue" | "parent" => serde_json::from_str(&value)?,
                "delay" if value != "0" => json!("<delay>"),
                _ => Value::String(value),
            };
            fields.insert(field, value);
        }
        let state = q.get_job_state(id).await?;
        fields.insert("<state>".into(), json!(format!("{state:?}")));
        jobs.insert(id.to_string(), fields);
    }
    client.quit().await?;
    q.close().await?;
    Ok(jobs)
}

/// Per job id, its events with timestamps and delays normalized, in stream order.
async fn per_job_events(queue: &str) -> Result<BTreeMap<String, Vec<String>>> {
    let events = read_events(queue).await?;
    let normalized = normalize_events(&events, &|id| id.to_string());
    let mut map: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for (event, line) in events.iter().zip(normalized) {
        if let Some((_, id)) = event.fields.iter().find(|(k, _)| k == "jobId") {
            map.entry(id.clone())
                .or_default()
                .push(line.replace(queue, "<queue>"));
        }
    }
    Ok(map)
}

async fn spawn_step_worker(queue: &str) -> Result<ractor_bullmq::WorkerHandle> {
    let producer = open_queue(queue).await?;
    let processor = move |job: Job, ctx: JobContext| step_processor(producer.clone(), job, ctx);
    let args = WorkerArgs::connect(
        &config(),
        queue,
        processor,
        WorkerOptions::new().concurrency(1),
    )
    .await?;
    Ok(Worker::spawn(args).await?)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rust_step_jobs_match_node_step_jobs() -> Result<()> {
    if !node_available() {
        return Ok(());
    }
    let parents = parents();
    let parent_count = parents.as_array().map_or(0, Vec::len);
    // 4 parents + 7 children.
    let total_jobs = (parent_count + 7) as i64;

    let node_queue = unique_queue("steps-node");
    let node_ids = add_with_node(&node_queue, parents.clone()).await?;
    let report = run_node(
        "step_jobs.js",
        &json!({"queue": node_queue, "parents": parent_count, "delayMs": DELAY.as_millis() as u64, "timeoutMs": 90000}),
    )
    .await?;
    assert_eq!(report["stoppedBy"], "count", "{report}");
    assert_eq!(report["failed"], json!([]), "{report}");

    let rust_queue = unique_queue("steps-rust");
    let rust_ids = add_with_node(&rust_queue, parents).await?;
    assert_eq!(node_ids, rust_ids);
    let worker = spawn_step_worker(&rust_queue).await?;
    wait_finished(&rust_queue, total_jobs, Duration::from_secs(90)).await?;
    worker.close().await?;
    assert_eq!(count(&node_queue, "completed").await?, total_jobs);

    let node_jobs = job_snapshot(&node_queue).await?;
    let rust_jobs = job_snapshot(&rust_queue).await?;
    assert_eq!(node_jobs.len(), total_jobs as usize, "{node_jobs:#?}");
    // The values the children returned reached their parents.
    let totals: Vec<_> = node_ids
        .iter()
        .map(|id| node_jobs[id]["returnvalue"].clone())
        .collect();
    assert_eq!(
        totals,
        [
            json!({"total": 30}),
            json!({"total": 0}),
            json!({"total": 60}),
            json!({"total": 30}),
        ]
    );
    for (id, node) in &node_jobs {
        assert_eq!(rust_jobs.get(id), Some(node), "job {id} differs");
    }
    assert_eq!(rust_jobs.len(), node_jobs.len());

    let node_events = per_job_events(&node_queue).await?;
    let rust_events = per_job_events(&rust_queue).await?;
    // The walk of a parent with children, as Node's Worker leaves it.
    let a = &node_events[&node_ids[0]];
    assert!(
        a.iter()
            .any(|e| e == "waiting-children jobId=1 prev=active"),
        "{a:#?}"
    );
    assert!(a
        .iter()
        .any(|e| e == "waiting jobId=1 prev=waiting-children"));
    assert!(a.iter().any(|e| e == "waiting jobId=1 prev=active"));
    assert!(a.iter().any(|e| e.starts_with("delayed jobId=1")));
    for (id, node_seq) in &node_events {
        assert_eq!(rust_events.get(id), Some(node_seq), "events of job {id}");
    }
    assert_eq!(rust_events.len(), node_events.len());
    cleanup(&node_queue).await?;
    cleanup(&rust_queue).await
}

/// What a processor's move returned, reported to the test.
type Seen = Arc<Mutex<Vec<String>>>;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_move_after_the_lock_was_lost_or_taken_is_a_typed_refusal() -> Result<()> {
    let queue = unique_queue("steps-refused");
    let seen: Seen = Arc::default();
    let seen_in = seen.clone();
    let lock_prefix = format!("{PREFIX}:{queue}:");
    let producer = open_queue(&queue).await?;
    let processor = move |job: Job, ctx: JobContext| {
        let (seen, lock_key) = (seen_in.clone(), format!("{lock_prefix}{}:lock", job.id()));
        let producer = producer.clone();
        async move {
            if job.name() == "child" {
                return Ok(json!(null));
            }
            let client = raw_client().await?;
            if job.name() == "lost" {
                // A pending child first: without one there is nothing to wait for, which is
                // answered before the lock is looked at (as Node's script does).
                producer
                    .add("child", json!({}))
                    .parent(ctx.parent_ref())
                    .await?;
                let _: i64 = client.del(&lock_key).await?;
            } else {
                let _: () = client
                    .set(&lock_key, "another-worker", None, None, false)
                    .await?;
            }
            client.quit().await?;
            let step = if job.name() == "lost" {
                ctx.move_to_waiting_children().await.map(|_| ())
            } else {
                ctx.move_to_wait().await.map(|_| ())
            };
            let line = match step {
                Err(WorkerError::FinishRefused { code, command, .. }) => {
                    format!("{} {command} {code:?}", job.name())
                }
                other => format!("{} unexpected {other:?}", job.name()),
            };
            seen.lock().expect("seen").push(line);
            Ok(json!(null))
        }
    };
    let q = open_queue(&queue).await?;
    let lost = q.add("lost", json!({})).await?;
    let taken = q.add("taken", json!({})).await?;
    let args = WorkerArgs::connect(&config(), &queue, processor, WorkerOptions::new()).await?;
    let worker = Worker::spawn(args).await?;
    let s = seen.clone();
    eventually("both moves answered", Duration::from_secs(30), move || {
        let n = s.lock().map(|v| v.len()).unwrap_or(0);
        async move { n == 2 }
    })
    .await?;
    worker.close().await?;
    let mut lines = seen.lock().expect("seen").clone();
    lines.sort();
    assert_eq!(
        lines,
        [
            format!("lost moveToWaitingChildren {:?}", FinishCode::MissingLock),
            format!(
                "taken moveJobFromActiveToWait {:?}",
                FinishCode::LockNotOwned
            ),
        ]
    );
    // Nothing moved: neither is waiting for children nor back in wait.
    for id in [lost.id(), taken.id()] {
        let state = q.get_job_state(id).await?;
        assert_ne!(format!("{state:?}"), "WaitingChildren", "job {id}");
    }
    assert!(read_events(&queue)
        .await?
        .iter()
        .all(|e| e.event != "waiting-children"));
    q.close().await?;
    cleanup(&queue).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn waiting_children_error_without_a_move_fails_the_attempt() -> Result<()> {
    let queue = unique_queue("steps-unmoved");
    let processor =
        |_job: Job, _ctx: JobContext| async move { Err::<Value, _>(WaitingChildrenError.into()) };
    let q = open_queue(&queue).await?;
    let job = q.add("forgot", json!({})).await?;
    let args = WorkerArgs::connect(&config(), &queue, processor, WorkerOptions::new()).await?;
    let worker = Worker::spawn(args).await?;
    wait_finished(&queue, 1, Duration::from_secs(30)).await?;
    worker.close().await?;
    let stored = q.get_job(job.id()).await?.expect("job kept");
    let reason = stored.failed_reason().unwrap_or_default();
    assert!(
        reason.starts_with("WaitingChildrenError returned, but the job was not moved"),
        "{reason}"
    );
    q.close().await?;
    cleanup(&queue).await
}

/// Jobs that go back to wait again and again under a Worker with free slots: a job is often
/// fetched again by the same Worker before the end of its previous attempt was handled, and
/// that stale end must not end (or fail) the new attempt. Every job completes after its rounds,
/// with no attempt counted for the rounds.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn jobs_moved_back_to_wait_and_fetched_again_at_once_all_complete() -> Result<()> {
    const JOBS: usize = 20;
    const ROUNDS: i64 = 3;
    let queue = unique_queue("steps-rounds");
    let processor = |job: Job, ctx: JobContext| async move {
        let round = job.data_value()["round"].as_i64().unwrap_or_default();
        if round >= ROUNDS {
            return Ok(json!({ "rounds": round }));
        }
        ctx.update_data(json!({ "round": round + 1 })).await?;
        ctx.move_to_wait().await?;
        Err(WaitingError.into())
    };
    let q = open_queue(&queue).await?;
    let mut ids = Vec::new();
    for _ in 0..JOBS {
        ids.push(
            q.add("round", json!({ "round": 0 }))
                .await?
                .id()
                .to_string(),
        );
    }
    let options = WorkerOptions::new().concurrency(4);
    let args = WorkerArgs::connect(&config(), &queue, processor, options).await?;
    let worker = Worker::spawn(args).await?;
    wait_finished(&queue, JOBS as i64, Duration::from_secs(60)).await?;
    worker.close().await?;
    assert_eq!(count(&queue, "failed").await?, 0);
    for id in &ids {
        let job = q.get_job(id).await?.expect("kept");
        assert_eq!(
            job.returnvalue(),
            Some(&json!({ "rounds": ROUNDS })),
            "job {id}"
        );
        assert_eq!(
            job.attempts_made(),
            1,
            "job {id}: only the completion counts"
        );
        assert_eq!(job.attempts_started(), ROUNDS as u32 + 1, "job {id}");
    }
    q.close().await?;
    cleanup(&queue).await
}

/// A processor that moved its job back to wait and is still busy when the job is fetched again
/// by the same Worker (free slots, job actors): the earlier attempt's end, reported later, is
/// not the new attempt's, so the job completes on its second attempt instead of being failed
/// or cut short.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_late_end_of_a_moved_attempt_does_not_end_the_next_one() -> Result<()> {
    let queue = unique_queue("steps-late-end");
    let processor = |job: Job, ctx: JobContext| async move {
        if job.data_value()["round"] == json!(0) {
            ctx.update_data(json!({ "round": 1 })).await?;
            ctx.move_to_wait().await?;
            // Still running when the job is fetched again.
            tokio::time::sleep(Duration::from_millis(1500)).await;
            return Err(WaitingError.into());
        }
        tokio::time::sleep(Duration::from_millis(2500)).await;
        Ok(json!("second attempt"))
    };
    let q = open_queue(&queue).await?;
    let job = q.add("late", json!({ "round": 0 })).await?;
    let options = WorkerOptions::new()
        .concurrency(2)
        .job_runner(ractor_bullmq::worker::JobRunner::Actor);
    let args = WorkerArgs::connect(&config(), &queue, processor, options).await?;
    let worker = Worker::spawn(args).await?;
    wait_finished(&queue, 1, Duration::from_secs(30)).await?;
    worker.close().await?;
    let stored = q.get_job(job.id()).await?.expect("kept");
    assert_eq!(stored.returnvalue(), Some(&json!("second attempt")));
    assert_eq!(stored.attempts_started(), 2);
    q.close().await?;
    cleanup(&queue).await
}
