//! Batch isolation: corrupted job hashes mixed among thousands of good jobs. Redis keeps the
//! writes of a script that raises, so one bad hash must never make a batched script raise
//! half-way: every corrupted job ends in `failed` with a reason naming the field, every good
//! job of the same batches completes, and no job is left in no state. The same input runs
//! through Node BullMQ 6.7.0's worker, and we must keep at least every job Node keeps.

mod common;
mod worker_common;

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::Result;
use bullmq_protocol::options::JobOptions;
use common::*;
use fred::prelude::{
    Client, ClientLike, HashesInterface, KeysInterface, ListInterface, SortedSetsInterface,
};
use ractor_bullmq::worker::{Job, JobContext, WorkerError};
use ractor_bullmq::{Worker, WorkerArgs, WorkerCallbacks, WorkerOptions};
use serde_json::{json, Value};
use worker_common::*;

/// One kind of corruption, applied to the job hash `key` (the job is waiting).
#[derive(Clone, Copy, Debug)]
enum Damage {
    /// `HSET field value`.
    Set(&'static str, &'static str),
    /// `HSET field <bytes that are not UTF-8>`.
    Binary(&'static str),
    /// `HDEL field`.
    Remove(&'static str),
    /// `DEL` the whole hash (the id stays in wait).
    DropHash,
}

/// Every corruption and what the `failedReason` must contain (`None`: the job hash is gone,
/// so there is no job to fail).
const CASES: [(Damage, Option<&str>); 16] = [
    (
        Damage::Set("atm", "abc"),
        Some(r#"atm is "abc", not an integer"#),
    ),
    (
        Damage::Set("ats", "abc"),
        Some(r#"ats is "abc", not an integer"#),
    ),
    (
        Damage::Set("stc", "abc"),
        Some(r#"stc is "abc", not an integer"#),
    ),
    (Damage::Set("priority", "abc"), Some(r#"priority is "abc""#)),
    (Damage::Set("delay", "abc"), Some(r#"delay is "abc""#)),
    (
        Damage::Set("timestamp", "abc"),
        Some(r#"timestamp is "abc""#),
    ),
    (
        Damage::Set("opts", "{not json"),
        Some("opts holds invalid JSON"),
    ),
    (
        Damage::Set("opts", "[1,2]"),
        Some("opts holds invalid JSON"),
    ),
    (
        Damage::Set("data", "{not json"),
        Some("data holds invalid JSON"),
    ),
    (
        Damage::Set("parent", "{not json"),
        Some(r#"parent is "{not json""#),
    ),
    (Damage::Set("parent", "[]"), Some(r#"parent is "[]""#)),
    (Damage::Binary("data"), Some("data is not valid UTF-8")),
    (Damage::Remove("name"), Some("name is missing")),
    (Damage::Remove("opts"), Some("opts is missing")),
    (
        Damage::Set("atm", "1e400"),
        Some(r#"atm is "1e400", not an integer"#),
    ),
    (Damage::DropHash, None),
];

/// A waiting job whose id is not valid UTF-8 (pushed to wait by hand, with a plausible hash).
const BAD_ID: &[u8] = b"bad-id-\xff\xfe";

struct Seeded {
    good: Vec<String>,
    /// Corrupted job id -> expected reason fragment (`None`: hash dropped).
    bad: Vec<(String, Option<&'static str>)>,
    /// A good job with 20 MB of data.
    big: String,
}

/// Adds `good` plain jobs plus one 20 MB job, then corrupts one job per case, spread over the
/// queue so every batch mixes them with good ones, and pushes a job with a non-UTF-8 id.
async fn seed(queue_name: &str, good: usize) -> Result<Seeded> {
    let queue = open_queue(queue_name).await?;
    let added = queue
        .add_bulk((0..good).map(|i| ("job", json!({"i": i}), JobOptions::default())))
        .await?;
    let blob = "x".repeat(20 * 1024 * 1024);
    let big = queue
        .add("big", json!({"blob": blob}))
        .await?
        .id()
        .to_string();
    queue.close().await?;
    let mut ids: Vec<String> = added.iter().map(|j| j.id().to_string()).collect();
    let client = raw_client().await?;
    let base = format!("{PREFIX}:{queue_name}");
    let step = ids.len() / (CASES.len() + 1);
    let mut bad = Vec::new();
    for (k, (damage, reason)) in CASES.iter().enumerate() {
        let id = ids[(k + 1) * step].clone();
        let key = format!("{base}:{id}");
        match *damage {
            Damage::Set(field, value) => {
                let _: i64 = client.hset(&key, (field, value)).await?;
            }
            Damage::Binary(field) => {
                let bytes: &[u8] = b"\xff\xfe{}";
                let _: i64 = client.hset(&key, (field, bytes)).await?;
            }
            Damage::Remove(field) => {
                let _: i64 = client.hdel(&key, field).await?;
            }
            Damage::DropHash => {
                let _: i64 = client.del(&key).await?;
            }
        }
        bad.push((id, *reason));
    }
    let bad_ids: HashSet<&String> = bad.iter().map(|(id, _)| id).collect();
    ids.retain(|id| !bad_ids.contains(id));
    let mut bad_key = format!("{base}:").into_bytes();
    bad_key.extend_from_slice(BAD_ID);
    let _: i64 = client
        .hset(
            bad_key.as_slice(),
            [
                ("name", "job"),
                ("data", "{}"),
                ("opts", "{}"),
                ("timestamp", "1"),
                ("delay", "0"),
                ("priority", "0"),
            ],
        )
        .await?;
    let _: i64 = client.lpush(format!("{base}:wait"), BAD_ID).await?;
    client.quit().await?;
    Ok(Seeded {
        good: ids,
        bad,
        big,
    })
}

/// Where each job of `queue` is: its finished set and failedReason, or nothing.
async fn states(client: &Client, queue: &str, ids: &[String]) -> Result<HashMap<String, String>> {
    let base = format!("{PREFIX}:{queue}");
    let mut out = HashMap::new();
    for id in ids {
        let completed: Option<f64> = client.zscore(format!("{base}:completed"), id).await?;
        let failed: Option<f64> = client.zscore(format!("{base}:failed"), id).await?;
        let state = match (completed, failed) {
            (Some(_), None) => "completed".to_string(),
            (None, Some(_)) => {
                let reason: Option<String> =
                    client.hget(format!("{base}:{id}"), "failedReason").await?;
                format!("failed: {}", reason.unwrap_or_default())
            }
            (None, None) => "none".to_string(),
            (Some(_), Some(_)) => "completed and failed".to_string(),
        };
        out.insert(id.clone(), state);
    }
    Ok(out)
}

/// Whether the raw non-UTF-8 id is in `failed` (it cannot be named as a Rust `String`).
async fn bad_id_failed(client: &Client, queue: &str) -> Result<Option<String>> {
    let base = format!("{PREFIX}:{queue}");
    let score: Option<f64> = client.zscore(format!("{base}:failed"), BAD_ID).await?;
    if score.is_none() {
        return Ok(None);
    }
    let mut key = format!("{base}:").into_bytes();
    key.extend_from_slice(BAD_ID);
    let reason: Option<String> = client.hget(key.as_slice(), "failedReason").await?;
    Ok(Some(reason.unwrap_or_default()))
}

/// Deletes the keys under the non-UTF-8 id, which the text-based `cleanup` cannot list.
async fn cleanup_bad_id(queue: &str) -> Result<()> {
    let client = raw_client().await?;
    for suffix in [&b""[..], b":lock", b":logs"] {
        let mut key = format!("{PREFIX}:{queue}:").into_bytes();
        key.extend_from_slice(BAD_ID);
        key.extend_from_slice(suffix);
        let _: i64 = client.del(key.as_slice()).await?;
    }
    client.quit().await?;
    cleanup(queue).await
}

/// Runs the scenario through our Worker at `concurrency`; returns how each job ended.
async fn run_ours(concurrency: usize, good: usize) -> Result<()> {
    let queue = unique_queue("w-badinput");
    let seeded = seed(&queue, good).await?;
    let failed = Arc::new(Mutex::new(HashMap::<String, String>::new()));
    let errors = Arc::new(Mutex::new(Vec::<String>::new()));
    let callbacks = WorkerCallbacks::new()
        .on_failed({
            let failed = failed.clone();
            move |job| {
                failed
                    .lock()
                    .unwrap()
                    .insert(job.id.clone(), job.reason.clone());
            }
        })
        .on_error({
            let errors = errors.clone();
            move |error| {
                if let WorkerError::JobHashMissing { job_id } = error {
                    errors.lock().unwrap().push(job_id.clone());
                }
            }
        });
    let worker = spawn_worker(
        &queue,
        WorkerOptions::new().concurrency(concurrency),
        callbacks,
    )
    .await?;
    // Everything but the dropped hash ends in completed or failed (+1 big job, +1 bad id).
    let expected = (seeded.good.len() + 1 + seeded.bad.len() - 1 + 1) as i64;
    wait_finished(&queue, expected, Duration::from_secs(180)).await?;
    worker.close().await?;

    let client = raw_client().await?;
    let mut all = seeded.good.clone();
    all.push(seeded.big.clone());
    let good_states = states(&client, &queue, &all).await?;
    let lost: Vec<_> = good_states
        .iter()
        .filter(|(_, state)| *state != "completed")
        .collect();
    assert!(lost.is_empty(), "good jobs not completed: {lost:?}");

    let bad_ids: Vec<String> = seeded.bad.iter().map(|(id, _)| id.clone()).collect();
    let bad_states = states(&client, &queue, &bad_ids).await?;
    for (id, reason) in &seeded.bad {
        let state = &bad_states[id];
        match reason {
            Some(fragment) => {
                assert!(
                    state.starts_with("failed: corrupted job hash: ") && state.contains(fragment),
                    "job {id}: {state} should name {fragment}"
                );
                let reported = failed.lock().unwrap().get(id).cloned();
                assert!(
                    reported.as_deref().is_some_and(|r| r.contains(fragment)),
                    "on_failed for {id}: {reported:?}"
                );
            }
            None => {
                assert_eq!(state, "none", "the dropped hash {id} is in no set");
                assert!(
                    errors.lock().unwrap().contains(id),
                    "on_error reports the id {id} without a hash"
                );
            }
        }
    }
    let bad_id = bad_id_failed(&client, &queue).await?;
    assert!(
        bad_id
            .as_deref()
            .is_some_and(|r| r.contains("not valid UTF-8")),
        "the non-UTF-8 id is failed naming the problem: {bad_id:?}"
    );
    for list in ["wait", "active", "prioritized", "delayed", "paused"] {
        let n = count(&queue, list).await?;
        assert_eq!(n, 0, "{list} is empty");
    }
    // No key was created under a lossily decoded id.
    let lossy = String::from_utf8_lossy(BAD_ID).into_owned();
    for suffix in ["", ":lock"] {
        let key = format!("{PREFIX}:{queue}:{lossy}{suffix}");
        let exists: i64 = client.exists(&key).await?;
        assert_eq!(exists, 0, "no key under the lossy id: {key}");
    }
    client.quit().await?;

    // Node's worker on the same input: every good job Node completes, we completed too (above,
    // all of them); print what Node loses for the record.
    if node_available() {
        let node_queue = unique_queue("w-badinput-node");
        let node_seeded = seed(&node_queue, good).await?;
        let out = run_node(
            "run_worker.js",
            &json!({"queue": node_queue, "concurrency": concurrency, "idleMs": 5000,
                    "timeoutMs": 120000}),
        )
        .await?;
        let client = raw_client().await?;
        let mut node_all = node_seeded.good.clone();
        node_all.push(node_seeded.big.clone());
        let node_states = states(&client, &node_queue, &node_all).await?;
        let node_lost_good = node_states.values().filter(|s| *s != "completed").count();
        let node_bad_ids: Vec<String> = node_seeded.bad.iter().map(|(id, _)| id.clone()).collect();
        let node_bad = states(&client, &node_queue, &node_bad_ids).await?;
        let node_bad_lost = node_bad.values().filter(|s| *s == "none").count();
        let node_active = count(&node_queue, "active").await?;
        for ((damage, _), (id, _)) in CASES.iter().zip(&node_seeded.bad) {
            println!("Node, {damage:?}: {}", node_bad[id]);
        }
        println!(
            "concurrency {concurrency}: Node left {node_lost_good} of {} good jobs not \
             completed, {node_bad_lost} of {} corrupted jobs in no finished set, {node_active} \
             active (stopped by {}); we completed every good job and failed every corrupted one",
            node_all.len(),
            node_bad_ids.len(),
            out["stoppedBy"]
        );
        client.quit().await?;
        cleanup_bad_id(&node_queue).await?;
    }
    cleanup_bad_id(&queue).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn corrupted_jobs_fail_alone_at_concurrency_100() -> Result<()> {
    run_ours(100, 2000).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn corrupted_jobs_fail_alone_at_concurrency_500_with_large_fetches() -> Result<()> {
    run_ours(500, 3000).await
}

/// A processor that corrupts its own job hash before it returns, so the corruption meets the
/// finish script (not the fetch): `{"corrupt": [field, value], "fail": true}`.
async fn corrupting(job: Job, ctx: JobContext) -> Result<Value> {
    if let Some([field, value]) = job
        .data_value()
        .get("corrupt")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
    {
        let client = raw_client().await?;
        let key = format!("{PREFIX}:{}:{}", job.queue_name(), job.id());
        let _: i64 = client
            .hset(
                key,
                (field.as_str().unwrap_or(""), value.as_str().unwrap_or("")),
            )
            .await?;
        client.quit().await?;
    }
    scripted(job, ctx).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hash_corrupted_while_active_fails_alone_in_its_finish_batch() -> Result<()> {
    let queue_name = unique_queue("w-badfinish");
    let queue = open_queue(&queue_name).await?;
    let retry = JobOptions::new().attempts(3);
    let mut jobs = Vec::new();
    for i in 0..200 {
        let data = match i {
            // A retry of a job whose priority became unreadable: the finish script must not
            // raise on it (it reads the priority to put the job back).
            50 => json!({"corrupt": ["priority", "abc"], "fail": true}),
            // An attempt count overwritten while the job runs: the worker knows the count
            // from the fetch and writes it back, so the job runs its three attempts.
            120 => json!({"corrupt": ["atm", "abc"], "fail": true}),
            _ => json!({"i": i}),
        };
        jobs.push(("job", data, retry.clone()));
    }
    let added = queue.add_bulk(jobs).await?;
    queue.close().await?;
    let ids: Vec<String> = added.iter().map(|j| j.id().to_string()).collect();

    let args = WorkerArgs::connect(
        &config(),
        &queue_name,
        corrupting,
        WorkerOptions::new().concurrency(50),
    )
    .await?;
    let worker = Worker::spawn(args).await?;
    wait_finished(&queue_name, 200, Duration::from_secs(60)).await?;
    worker.close().await?;

    let client = raw_client().await?;
    let got = states(&client, &queue_name, &ids).await?;
    for (i, id) in ids.iter().enumerate() {
        let state = &got[id];
        match i {
            50 => assert!(state.contains(r#"priority is "abc""#), "{state}"),
            120 => assert_eq!(state, "failed: failed on purpose"),
            _ => assert_eq!(state, "completed", "job {id}"),
        }
    }
    for list in ["wait", "active", "prioritized", "delayed"] {
        let n = count(&queue_name, list).await?;
        assert_eq!(n, 0, "{list} is empty");
    }
    client.quit().await?;
    cleanup(&queue_name).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn corrupted_queue_counters_never_stop_the_worker() -> Result<()> {
    let queue_name = unique_queue("w-badcounters");
    let base = format!("{PREFIX}:{queue_name}");
    let queue = open_queue(&queue_name).await?;
    let mut jobs = Vec::new();
    for i in 0..60u32 {
        // Delayed prioritized jobs: their promotion counts with `pc`.
        let opts = JobOptions::new()
            .priority(1 + i % 3)
            .delay(Duration::from_millis(300));
        jobs.push(("job", json!({ "i": i }), opts));
    }
    let client = raw_client().await?;
    // A bulk add of prioritized jobs counts with `pc` too: it must not raise half-way.
    let _: () = client
        .set(format!("{base}:pc"), "not a counter", None, None, false)
        .await?;
    let added = queue.add_bulk(jobs).await?;
    queue.close().await?;
    let _: () = client
        .set(format!("{base}:pc"), "not a counter", None, None, false)
        .await?;
    let _: () = client
        .set(
            format!("{base}:limiter"),
            "not a counter",
            None,
            None,
            false,
        )
        .await?;
    let _: i64 = client
        .hset(format!("{base}:meta"), ("concurrency", "lots"))
        .await?;
    let _: i64 = client
        .hset(
            format!("{base}:metrics:completed"),
            [("count", "x"), ("prevTS", "y"), ("prevCount", "z")],
        )
        .await?;
    let worker = spawn_worker(
        &queue_name,
        WorkerOptions::new()
            .concurrency(10)
            .limiter(1000, Duration::from_secs(1))
            .metrics_max_data_points(10),
        WorkerCallbacks::new(),
    )
    .await?;
    wait_finished(&queue_name, 60, Duration::from_secs(60)).await?;
    worker.close().await?;
    let ids: Vec<String> = added.iter().map(|j| j.id().to_string()).collect();
    let got = states(&client, &queue_name, &ids).await?;
    assert!(
        got.values().all(|s| s == "completed"),
        "every job completed: {got:?}"
    );
    let count: Option<String> = client
        .hget(format!("{base}:metrics:completed"), "count")
        .await?;
    assert!(
        count
            .as_deref()
            .and_then(|c| c.parse::<u64>().ok())
            .is_some(),
        "metrics counted afresh: {count:?}"
    );
    client.quit().await?;
    cleanup(&queue_name).await
}

#[tokio::test]
async fn a_corrupted_job_releases_its_deduplication_window() -> Result<()> {
    use bullmq_protocol::options::Deduplication;
    let queue_name = unique_queue("w-baddedup");
    let base = format!("{PREFIX}:{queue_name}");
    let queue = open_queue(&queue_name).await?;
    let dedup = || JobOptions::new().deduplication(Deduplication::new("once"));
    let first = queue.add_job("job", json!({}), dedup()).await?;
    let client = raw_client().await?;
    let _: i64 = client
        .hset(format!("{base}:{}", first.id()), ("atm", "abc"))
        .await?;
    let worker = spawn_worker(&queue_name, WorkerOptions::new(), WorkerCallbacks::new()).await?;
    wait_finished(&queue_name, 1, Duration::from_secs(20)).await?;
    let window: i64 = client.exists(format!("{base}:de:once")).await?;
    assert_eq!(
        window, 0,
        "the failed owner released the window, as a failed job does"
    );
    let second = queue.add_job("job", json!({}), dedup()).await?;
    assert_ne!(second.id(), first.id(), "a later add creates a new job");
    wait_finished(&queue_name, 2, Duration::from_secs(20)).await?;
    worker.close().await?;
    queue.close().await?;
    let got = states(&client, &queue_name, &[second.id().to_string()]).await?;
    assert_eq!(got[second.id()], "completed");
    client.quit().await?;
    cleanup(&queue_name).await
}
