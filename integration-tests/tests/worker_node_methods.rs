//! Node's Worker methods of issue 22 §2 against Node BullMQ 6.7.0 (`node/worker_methods.js`):
//!
//! - `worker.extendJobLocks(jobIds, tokens, duration)`: the same locks and `stalled` set
//!   prepared in two queues (and a third), Node's call on one, ours on the others (through a
//!   `WorkerHandle` and a `ManualWorker`): the same reply (ids not renewed, in order), the same
//!   lock values, lock TTLs within a second of each other, the same `stalled` set.
//! - the `locksRenewed` event: three jobs held by Node's Worker and by ours; both report every
//!   job renewed, in fetch order; after another token takes job 2's lock, both report job 2 to
//!   `lockRenewalFailed` and renew only jobs 1 and 3 from then on.
//! - `worker.isPaused()` (with `isRunning()`) through pause, run and resume.
//!
//! Memory-backend tests of the same methods are in
//! `crates/ractor-bullmq/tests/worker_locks_memory.rs`.

mod common;
mod worker_common;

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::Result;
use common::*;
use fred::prelude::{ClientLike, Expiration, KeysInterface, SetsInterface};
use ractor_bullmq::worker::{Job, JobContext, ManualWorker, WorkerHandle};
use ractor_bullmq::{Worker, WorkerArgs, WorkerCallbacks, WorkerOptions};
use serde_json::{json, Value};
use tokio::sync::Semaphore;
use worker_common::{add_with_node, config};

const LONG: Duration = Duration::from_secs(30);

/// The locks and `stalled` set every side starts from: job 1 locked with `tok-1`, job 2 with
/// another token, job 3 without a lock; all three in `stalled`.
async fn prepare_locks(queue: &str) -> Result<()> {
    let client = raw_client().await?;
    let lock = |id: &str| format!("{PREFIX}:{queue}:{id}:lock");
    let ttl = Some(Expiration::PX(10_000));
    let _: () = client
        .set(lock("1"), "tok-1", ttl.clone(), None, false)
        .await?;
    let _: () = client.set(lock("2"), "other", ttl, None, false).await?;
    let _: i64 = client
        .sadd(format!("{PREFIX}:{queue}:stalled"), vec!["1", "2", "3"])
        .await?;
    client.quit().await?;
    Ok(())
}

/// Per job 1..=3: the lock's value and PTTL (-2: no lock); and the `stalled` set, sorted.
async fn lock_state(queue: &str) -> Result<(Vec<(Option<String>, i64)>, BTreeSet<String>)> {
    let client = raw_client().await?;
    let mut locks = Vec::new();
    for id in ["1", "2", "3"] {
        let key = format!("{PREFIX}:{queue}:{id}:lock");
        let value: Option<String> = client.get(&key).await?;
        let ttl: i64 = client.pttl(&key).await?;
        locks.push((value, ttl));
    }
    let stalled: BTreeSet<String> = client.smembers(format!("{PREFIX}:{queue}:stalled")).await?;
    client.quit().await?;
    Ok((locks, stalled))
}

/// The pairs every side asks for: job 1 with its token, job 2 with a wrong one, job 3 (no
/// lock), an unknown job, and job 1 again.
fn asked() -> (Vec<String>, Vec<String>) {
    let ids = ["1", "2", "3", "missing", "1"];
    let tokens = ["tok-1", "tok-2", "tok-3", "x", "tok-1"];
    (
        ids.iter().map(|s| s.to_string()).collect(),
        tokens.iter().map(|s| s.to_string()).collect(),
    )
}

fn assert_same_locks(
    side: &str,
    node: &(Vec<(Option<String>, i64)>, BTreeSet<String>),
    ours: &(Vec<(Option<String>, i64)>, BTreeSet<String>),
) {
    assert_eq!(node.1, ours.1, "{side}: stalled set");
    // A lock left alone keeps its first TTL (10 s, counting down: the runs are seconds
    // apart); a renewed one has about the new 45 s on both sides.
    let class = |ttl: i64| match ttl {
        -2 => "no lock",
        t if t <= 10_000 => "kept",
        _ => "renewed",
    };
    for (i, (n, o)) in node.0.iter().zip(&ours.0).enumerate() {
        let job = i + 1;
        assert_eq!(n.0, o.0, "{side}: lock value of job {job}");
        assert_eq!(
            class(n.1),
            class(o.1),
            "{side}: lock TTL of job {job}: Node {} ms, ours {} ms",
            n.1,
            o.1
        );
        if class(n.1) == "renewed" {
            assert!(
                (n.1 - o.1).abs() < 2_000,
                "{side}: renewed lock TTL of job {job}: Node {} ms, ours {} ms",
                n.1,
                o.1
            );
        }
    }
}

#[tokio::test]
async fn extend_job_locks_gives_nodes_reply_lock_ttls_and_stalled_set() -> Result<()> {
    if !node_available() {
        return Ok(());
    }
    let (ids, tokens) = asked();
    let pairs: Vec<(String, String)> = ids.iter().cloned().zip(tokens.iter().cloned()).collect();
    let duration = Duration::from_millis(45_000);

    let node_queue = unique_queue("extend-locks-node");
    prepare_locks(&node_queue).await?;
    let out = run_node(
        "worker_methods.js",
        &json!({"queue": node_queue, "op": "extend", "jobIds": ids, "tokens": tokens,
                "duration": 45_000}),
    )
    .await?;
    let node_failed: Vec<String> = serde_json::from_value(out["failed"].clone())?;
    let node_state = lock_state(&node_queue).await?;
    assert_eq!(node_failed, vec!["2", "3", "missing"], "Node's reply");
    assert!(
        node_state.0[0].1 > 40_000,
        "Node renewed job 1: {node_state:?}"
    );

    // Through a Worker's handle (not running, so nothing else touches the locks).
    let handle_queue = unique_queue("extend-locks-handle");
    prepare_locks(&handle_queue).await?;
    let processor =
        |_job: Job, _ctx: JobContext| async move { Ok::<Value, anyhow::Error>(json!(1)) };
    let options = WorkerOptions::new().autorun(false).skip_stalled_check(true);
    let args = WorkerArgs::connect(&config(), &handle_queue, processor, options).await?;
    let worker: WorkerHandle = Worker::spawn(args).await?;
    let failed = worker.extend_job_locks(&pairs, duration).await?;
    let handle_state = lock_state(&handle_queue).await?;
    assert!(worker.extend_job_locks(&[], duration).await?.is_empty());
    worker.close().await?;
    assert_eq!(failed, node_failed, "WorkerHandle's reply");
    assert_same_locks("WorkerHandle", &node_state, &handle_state);

    // Through a ManualWorker.
    let manual_queue = unique_queue("extend-locks-manual");
    prepare_locks(&manual_queue).await?;
    let manual = ManualWorker::connect(&config(), &manual_queue, WorkerOptions::new()).await?;
    let failed = manual.extend_job_locks(&pairs, duration).await?;
    let manual_state = lock_state(&manual_queue).await?;
    manual.close().await;
    assert_eq!(failed, node_failed, "ManualWorker's reply");
    assert_same_locks("ManualWorker", &node_state, &manual_state);

    // An empty call: Node answers an empty list, as we do without a round trip.
    let out = run_node(
        "worker_methods.js",
        &json!({"queue": node_queue, "op": "extend", "jobIds": [], "tokens": [], "duration": 1000}),
    )
    .await?;
    assert_eq!(out["failed"], json!([]));

    for queue in [&node_queue, &handle_queue, &manual_queue] {
        cleanup(queue).await?;
    }
    Ok(())
}

/// What a worker reported: `locksRenewed` ids per event before and after the first
/// `lockRenewalFailed`, and the failures.
#[derive(Debug, Default)]
struct Renewals {
    renewed: Vec<Vec<String>>,
    failed: Vec<Vec<String>>,
    renewed_after: Vec<Vec<String>>,
}

fn union(events: &[Vec<String>]) -> BTreeSet<String> {
    events.iter().flatten().cloned().collect()
}

/// Every event lists its ids in fetch order (ids `1`, `2`, `3` were added in that order).
fn assert_fetch_order(side: &str, events: &[Vec<String>]) {
    for ids in events {
        let mut sorted = ids.clone();
        sorted.sort_by_key(|id| id.parse::<u64>().unwrap_or(u64::MAX));
        assert_eq!(*ids, sorted, "{side}: ids of one locksRenewed event");
    }
}

async fn our_renewals(queue: &str) -> Result<Renewals> {
    let seen = Arc::new(Mutex::new(Renewals::default()));
    let callbacks = {
        let (renewed, failed) = (seen.clone(), seen.clone());
        WorkerCallbacks::new()
            .on_locks_renewed(move |ids| {
                let mut seen = renewed.lock().unwrap();
                if seen.failed.is_empty() {
                    seen.renewed.push(ids.to_vec());
                } else {
                    seen.renewed_after.push(ids.to_vec());
                }
            })
            .on_lock_renewal_failed(move |ids| failed.lock().unwrap().failed.push(ids.to_vec()))
    };
    let gate = Arc::new(Semaphore::new(0));
    let started = Arc::new(Mutex::new(0usize));
    let processor = {
        let (gate, started) = (gate.clone(), started.clone());
        move |_job: Job, _ctx: JobContext| {
            let (gate, started) = (gate.clone(), started.clone());
            async move {
                *started.lock().unwrap() += 1;
                gate.acquire().await?.forget();
                Ok::<Value, anyhow::Error>(json!(1))
            }
        }
    };
    let options = WorkerOptions::new()
        .concurrency(3)
        .lock_duration(Duration::from_millis(4_000))
        .with_lock_renew_time(Duration::from_millis(400))
        .drain_delay(Duration::from_millis(100));
    let args = WorkerArgs::connect(&config(), queue, processor, options)
        .await?
        .callbacks(callbacks);
    let worker = Worker::spawn(args).await?;
    eventually("every job started", LONG, || {
        let n = *started.lock().unwrap();
        async move { n == 3 }
    })
    .await?;
    eventually("every lock renewed", LONG, || {
        let n = union(&seen.lock().unwrap().renewed).len();
        async move { n == 3 }
    })
    .await?;
    let client = raw_client().await?;
    let _: () = client
        .set(
            format!("{PREFIX}:{queue}:2:lock"),
            "thief",
            Some(Expiration::PX(60_000)),
            None,
            false,
        )
        .await?;
    client.quit().await?;
    eventually("the stolen lock reported", LONG, || {
        let n = seen.lock().unwrap().failed.len();
        async move { n > 0 }
    })
    .await?;
    eventually("the other locks renewed again", LONG, || {
        let n = union(&seen.lock().unwrap().renewed_after).len();
        async move { n >= 2 }
    })
    .await?;
    gate.add_permits(3);
    worker.close().await?;
    let seen = std::mem::take(&mut *seen.lock().unwrap());
    Ok(seen)
}

#[tokio::test]
async fn locks_renewed_reports_the_ids_node_reports() -> Result<()> {
    if !node_available() {
        return Ok(());
    }
    let jobs =
        json!([{"name": "a", "data": {}}, {"name": "b", "data": {}}, {"name": "c", "data": {}}]);
    let node_queue = unique_queue("locks-renewed-node");
    assert_eq!(
        add_with_node(&node_queue, jobs.clone()).await?,
        ["1", "2", "3"]
    );
    let out = run_node(
        "worker_methods.js",
        &json!({"queue": node_queue, "op": "renewals", "count": 3, "lockDuration": 4000,
                "lockRenewTime": 400, "steal": "2"}),
    )
    .await?;
    let node = Renewals {
        renewed: serde_json::from_value(out["renewed"].clone())?,
        failed: serde_json::from_value(out["failed"].clone())?,
        renewed_after: serde_json::from_value(out["renewedAfter"].clone())?,
    };

    let our_queue = unique_queue("locks-renewed-ours");
    assert_eq!(add_with_node(&our_queue, jobs).await?, ["1", "2", "3"]);
    let ours = our_renewals(&our_queue).await?;

    let all: BTreeSet<String> = ["1", "2", "3"].map(String::from).into();
    let others: BTreeSet<String> = ["1", "3"].map(String::from).into();
    for (side, seen) in [("Node", &node), ("ours", &ours)] {
        assert_eq!(union(&seen.renewed), all, "{side}: {seen:?}");
        assert_eq!(
            seen.failed.first(),
            Some(&vec!["2".to_string()]),
            "{side}: {seen:?}"
        );
        assert_eq!(union(&seen.renewed_after), others, "{side}: {seen:?}");
        assert_fetch_order(side, &seen.renewed);
        assert_fetch_order(side, &seen.renewed_after);
    }
    // Node keeps a lost lock tracked and reports it again at every later tick; ours stops
    // renewing it (and cancels its job), so it is reported once.
    assert!(
        node.failed.iter().all(|ids| *ids == ["2"]),
        "Node: {node:?}"
    );
    assert_eq!(ours.failed, [["2"]], "ours: {ours:?}");
    cleanup(&node_queue).await?;
    cleanup(&our_queue).await?;
    Ok(())
}

#[tokio::test]
async fn is_paused_reads_as_nodes_through_pause_run_and_resume() -> Result<()> {
    if !node_available() {
        return Ok(());
    }
    let node_queue = unique_queue("is-paused-node");
    let out = run_node(
        "worker_methods.js",
        &json!({"queue": node_queue, "op": "paused"}),
    )
    .await?;
    let node_paused: Vec<bool> = serde_json::from_value(out["paused"].clone())?;
    let node_running: Vec<bool> = serde_json::from_value(out["running"].clone())?;

    let our_queue = unique_queue("is-paused-ours");
    let processor =
        |_job: Job, _ctx: JobContext| async move { Ok::<Value, anyhow::Error>(json!(1)) };
    let options = WorkerOptions::new()
        .autorun(false)
        .drain_delay(Duration::from_millis(100));
    let args = WorkerArgs::connect(&config(), &our_queue, processor, options).await?;
    let worker = Worker::spawn(args).await?;
    // (is_paused, is_running) before anything, then after each step.
    let mut seen = vec![(worker.is_paused().await, worker.is_running().await)];
    // Steps, as Node's script: pause, run, resume, pause, close.
    for step in ["pause", "run", "resume", "pause", "close"] {
        match step {
            "pause" => worker.pause()?,
            "run" => worker.run()?,
            "resume" => worker.resume()?,
            _ => drop(worker.close().await?),
        }
        seen.push((worker.is_paused().await, worker.is_running().await));
    }
    let (paused, running): (Vec<bool>, Vec<bool>) = seen.into_iter().unzip();

    // `isPaused` reads alike up to the close; after it, ours is neither paused nor running (a
    // stopped worker), where Node keeps the flag its last `pause` set. `isRunning` reads alike
    // but for a pause after a run: ours is not running while paused, Node's says whether its
    // main loop still turns (it does, until its blocking wait returns).
    assert_eq!(
        paused[..5],
        node_paused[..5],
        "isPaused: ours {paused:?}, Node {node_paused:?}"
    );
    assert!(!running[4], "ours is not running while paused");
    assert_eq!(
        running[..4],
        node_running[..4],
        "isRunning: ours {running:?}, Node {node_running:?}"
    );
    assert_eq!((paused[5], running[5]), (false, false));
    assert!(!node_running[5], "Node's closed worker is not running");
    cleanup(&node_queue).await?;
    cleanup(&our_queue).await?;
    Ok(())
}
