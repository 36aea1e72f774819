//! What a Node BullMQ `QueueEvents` hears from our Worker equals what it hears from a Node
//! Worker (issue 4 "Node's QueueEvents receives the same from our Worker", issue 6 "a Node
//! QueueEvents listening to our Worker receives the same event sequence per job").
//!
//! Each scenario runs twice: on queue A with Node workers, on queue B with ours. A Node
//! QueueEvents (`node/listen_events.js`) listens live to each queue from before the first job
//! until a stop event, and the per-job sequences of (event, arguments as Node's QueueEvents
//! emitted them) must be equal, absolute times aside. The catalogue covered: added, waiting,
//! delayed, active, progress, completed (return values parsed), failed, retries-exhausted,
//! stalled, drained. Our QueueEvents listens alongside and must receive, typed, exactly what
//! Node's received from both workers. (The admin, deduplication and stalled events written by
//! Node and received by our QueueEvents are in `queue_events_node.rs`.)

mod common;
mod queue_events_support;
mod scale_common;
mod worker_common;

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use common::*;
use ractor_bullmq::protocol::events::{Event, StreamEvent};
use ractor_bullmq::{QueueEventsHandle, WorkerCallbacks, WorkerOptions};
use scale_common::*;
use serde_json::{json, Value};
use worker_common::*;

const STOP_EVENT: &str = "test-end";

/// Starts a Node QueueEvents on `queue` (from the stream's start) in the background.
fn listen(queue: &str) -> tokio::task::JoinHandle<anyhow::Result<Value>> {
    let arg = json!({"queue": queue, "stopEvent": STOP_EVENT, "timeoutMs": 100_000});
    tokio::spawn(async move { run_node("listen_events.js", &arg).await })
}

/// Ends a listener: publishes the stop event after everything else, then collects what it heard.
async fn stop_listening(
    queue: &str,
    listener: tokio::task::JoinHandle<anyhow::Result<Value>>,
) -> anyhow::Result<Vec<Value>> {
    let producer = queue_events_support::producer(queue).await?;
    producer
        .publish_event(STOP_EVENT, [("by", "test")], 100_000)
        .await?;
    producer.close().await;
    let heard = listener.await??;
    assert_eq!(heard["stoppedBy"], "event", "{queue}: listener timed out");
    Ok(heard["events"].as_array().cloned().unwrap_or_default())
}

/// Waits until `queue`'s stream holds a `drained` event.
async fn wait_drained(queue: &str) -> anyhow::Result<()> {
    let queue = queue.to_owned();
    eventually("a drained event", Duration::from_secs(30), move || {
        let queue = queue.clone();
        async move {
            read_events(&queue)
                .await
                .map(|events| events.iter().any(|e| e.event == "drained"))
                .unwrap_or(false)
        }
    })
    .await
}

/// Per job id, the events Node's QueueEvents emitted, as `name {args}` with absolute times
/// (the `delay` of `delayed`, a timestamp) replaced.
fn per_job(heard: &[Value]) -> BTreeMap<String, Vec<String>> {
    let mut map: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for event in heard {
        let mut args = event["args"].clone();
        let Some(job_id) = args["jobId"].as_str().map(str::to_owned) else {
            continue;
        };
        if args.get("delay").is_some() {
            args["delay"] = json!("<time>");
        }
        let name = event["event"].as_str().unwrap_or_default();
        map.entry(job_id)
            .or_default()
            .push(format!("{name} {args}"));
    }
    map
}

/// Our QueueEvents, reading `queue` from its start, with a subscription taken before reading.
async fn our_listener(
    queue: &str,
) -> anyhow::Result<(
    QueueEventsHandle,
    tokio::sync::mpsc::Receiver<std::sync::Arc<StreamEvent>>,
)> {
    let events = QueueEventsHandle::start(
        queue_events_support::options(queue, "0")
            .autorun(false)
            .subscriber_buffer(100_000),
    )
    .await?;
    let rx = events.subscribe_stream();
    events.run().await?;
    Ok((events, rx))
}

/// Everything our QueueEvents received up to the stop event.
async fn our_events_until_stop(
    events: QueueEventsHandle,
    mut rx: tokio::sync::mpsc::Receiver<std::sync::Arc<StreamEvent>>,
) -> anyhow::Result<Vec<StreamEvent>> {
    let mut out = Vec::new();
    loop {
        let event = tokio::time::timeout(Duration::from_secs(30), rx.recv())
            .await
            .map_err(|_| anyhow::anyhow!("no stop event after {} events", out.len()))?
            .ok_or_else(|| anyhow::anyhow!("subscription ended after {} events", out.len()))?;
        if matches!(&event.event, Event::Custom { name, .. } if name == STOP_EVENT) {
            break;
        }
        // Our only subscriber: usually the sole reference by now, so no copy is made.
        out.push(std::sync::Arc::unwrap_or_clone(event));
    }
    events.close().await;
    Ok(out)
}

/// Our QueueEvents received the events Node's did, in the same order, every one typed, with
/// field values equal to the arguments Node's QueueEvents emitted (which parses progress data,
/// return values and delays; we compare those parsed).
fn assert_ours_match_node(ours: &[StreamEvent], node: &[Value]) {
    let our_ids: Vec<&str> = ours.iter().map(|e| e.id.as_str()).collect();
    let node_ids: Vec<&str> = node.iter().filter_map(|e| e["id"].as_str()).collect();
    assert_eq!(our_ids, node_ids, "same events in the same order");
    for (our, theirs) in ours.iter().zip(node) {
        assert!(
            !matches!(our.event, Event::Custom { .. }),
            "untyped: {our:?}"
        );
        let fields = our.event.to_fields();
        assert_eq!(fields[0].1, theirs["event"], "event {}", our.id);
        for (key, value) in &fields[1..] {
            let expected = &theirs["args"][key.as_str()];
            // The fields Node's QueueEvents parses (JSON.parse / Number) before emitting.
            let parsed = matches!(
                (fields[0].1.as_str(), key.as_str()),
                ("progress", "data") | ("completed", "returnvalue") | ("delayed", "delay")
            );
            let same = if parsed {
                serde_json::from_str::<Value>(value).ok().as_ref() == Some(expected)
            } else {
                expected.as_str() == Some(value.as_str())
            };
            assert!(
                same,
                "event {} field {key}: ours {value:?}, Node {expected}",
                our.id
            );
        }
        if let Some(args) = theirs["args"].as_object() {
            assert_eq!(args.len(), fields.len() - 1, "event {} field count", our.id);
        }
    }
}

fn names(heard: &[Value]) -> BTreeSet<String> {
    heard
        .iter()
        .filter_map(|e| e["event"].as_str().map(str::to_owned))
        .collect()
}

fn assert_same_per_job(node: &[Value], rust: &[Value]) {
    let node_jobs = per_job(node);
    let rust_jobs = per_job(rust);
    assert_eq!(
        node_jobs.keys().collect::<Vec<_>>(),
        rust_jobs.keys().collect::<Vec<_>>(),
        "the same jobs have events"
    );
    for (id, node_seq) in &node_jobs {
        assert_eq!(
            rust_jobs.get(id),
            Some(node_seq),
            "job {id}: Node's QueueEvents heard different events from our worker"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn node_queue_events_hear_the_same_from_our_worker_as_from_a_node_worker(
) -> anyhow::Result<()> {
    if !node_available() {
        return Ok(());
    }
    let jobs = mixed_jobs(150);

    // A: Node workers.
    let node_queue = unique_queue("qe-cat-node");
    let listener = listen(&node_queue);
    let (ours_on_node, ours_rx_on_node) = our_listener(&node_queue).await?;
    run_node(
        "add_jobs.js",
        &json!({"queue": node_queue, "bulk": true, "jobs": jobs}),
    )
    .await?;
    let report = run_node(
        "run_worker.js",
        &json!({"queue": node_queue, "concurrency": 5, "idleMs": 2500, "timeoutMs": 60_000}),
    )
    .await?;
    assert_eq!(report["stoppedBy"], "idle", "{report}");
    wait_drained(&node_queue).await?;
    let from_node = stop_listening(&node_queue, listener).await?;
    let ours_from_node = our_events_until_stop(ours_on_node, ours_rx_on_node).await?;

    // B: ours.
    let rust_queue = unique_queue("qe-cat-rust");
    let listener = listen(&rust_queue);
    let (ours_on_rust, ours_rx_on_rust) = our_listener(&rust_queue).await?;
    run_node(
        "add_jobs.js",
        &json!({"queue": rust_queue, "bulk": true, "jobs": jobs}),
    )
    .await?;
    let worker = spawn_worker(
        &rust_queue,
        WorkerOptions::new().concurrency(5),
        WorkerCallbacks::new(),
    )
    .await?;
    wait_finished(&rust_queue, jobs.len() as i64, Duration::from_secs(60)).await?;
    wait_drained(&rust_queue).await?;
    worker.close().await?;
    let from_rust = stop_listening(&rust_queue, listener).await?;
    let ours_from_rust = our_events_until_stop(ours_on_rust, ours_rx_on_rust).await?;

    assert_same_per_job(&from_node, &from_rust);
    // Our QueueEvents heard exactly what Node's did, from either worker.
    assert_ours_match_node(&ours_from_node, &from_node);
    assert_ours_match_node(&ours_from_rust, &from_rust);
    let catalogue = [
        "added",
        "waiting",
        "delayed",
        "active",
        "progress",
        "completed",
        "failed",
        "retries-exhausted",
        "drained",
    ];
    for heard in [&from_node, &from_rust] {
        let names = names(heard);
        for name in catalogue {
            assert!(names.contains(name), "no {name} event among {names:?}");
        }
    }
    // Return values arrive parsed, as Node's QueueEvents parses them.
    assert!(from_rust
        .iter()
        .any(|e| e["event"] == "completed" && e["args"]["returnvalue"] == json!({"i": 1})));
    assert!(from_rust
        .iter()
        .any(|e| e["event"] == "completed" && e["args"]["returnvalue"] == json!("text 3")));

    cleanup(&node_queue).await?;
    cleanup(&rust_queue).await
}

/// A Node worker takes a job and is killed with SIGKILL; once its lock expired, a rescuer's
/// stalled check moves the job back to wait (`stalled`) and the rescuer completes it.
async fn stalled_scenario(queue: &str, rescue_with_rust: bool) -> anyhow::Result<Vec<Value>> {
    let listener = listen(queue);
    let added = run_node(
        "add_jobs.js",
        &json!({"queue": queue, "jobs": [{"name": "s", "data": {"sleepMs": 1_500, "returnValue": {"rescued": true}}}]}),
    )
    .await?;
    let id = added["ids"][0].as_str().unwrap_or_default().to_owned();
    let mut doomed = tokio::process::Command::new("node")
        .arg("run_worker.js")
        .arg(
            // A short stalledInterval keeps the `stalled-check` guard it sets short.
            json!({"queue": queue, "lockDuration": 1_000, "stalledInterval": 300,
                   "timeoutMs": 60_000})
            .to_string(),
        )
        .current_dir(node_dir())
        .env("REDIS_URL", redis_url())
        .stdout(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()?;
    let key = format!("{PREFIX}:{queue}:{id}:lock");
    eventually(
        "the doomed worker holds the job",
        Duration::from_secs(30),
        || {
            let key = key.clone();
            async move {
                use fred::prelude::{ClientLike, KeysInterface};
                let Ok(client) = raw_client().await else {
                    return false;
                };
                let exists: i64 = client.exists(&key).await.unwrap_or(0);
                let _ = client.quit().await;
                exists == 1
            }
        },
    )
    .await?;
    doomed.kill().await?;

    if rescue_with_rust {
        let worker = spawn_worker(
            queue,
            WorkerOptions::new()
                .lock_duration(Duration::from_millis(1_000))
                .stalled_interval(Duration::from_millis(300)),
            WorkerCallbacks::new(),
        )
        .await?;
        wait_finished(queue, 1, Duration::from_secs(30)).await?;
        wait_completed_event(queue).await?;
        worker.close().await?;
    } else {
        let rescuer = run_node(
            "run_worker.js",
            &json!({"queue": queue, "stopAfter": 1, "stalledInterval": 300,
                    "lockDuration": 1_000, "timeoutMs": 30_000}),
        )
        .await?;
        assert_eq!(rescuer["stoppedBy"], "count", "{rescuer}");
    }
    let heard = stop_listening(queue, listener).await?;
    assert!(
        heard
            .iter()
            .any(|e| e["event"] == "stalled" && e["args"]["jobId"] == id.as_str()),
        "no stalled event for {id}: {heard:?}"
    );
    Ok(heard)
}

/// Our rescuer's `completed` is written in a finish batch; give the stream a moment to hold it.
async fn wait_completed_event(queue: &str) -> anyhow::Result<()> {
    let queue = queue.to_owned();
    eventually("the completed event", Duration::from_secs(30), move || {
        let queue = queue.clone();
        async move {
            read_events(&queue)
                .await
                .map(|events| events.iter().any(|e| e.event == "completed"))
                .unwrap_or(false)
        }
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn node_queue_events_hear_our_stalled_recovery_as_a_node_one() -> anyhow::Result<()> {
    if !node_available() {
        return Ok(());
    }
    let node_queue = unique_queue("qe-cat-stall-node");
    let rust_queue = unique_queue("qe-cat-stall-rust");
    let from_node = stalled_scenario(&node_queue, false).await?;
    let from_rust = stalled_scenario(&rust_queue, true).await?;
    assert_same_per_job(&from_node, &from_rust);
    cleanup(&node_queue).await?;
    cleanup(&rust_queue).await
}
