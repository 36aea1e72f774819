//! Manual processing (issue 13, item 4): the same program — `getNextJob(token)`,
//! `extendLock`, `moveToCompleted` / `moveToFailed` with and without fetch-next — run by a Node
//! BullMQ Worker without a processor (`node/manual.js`) and by our `ManualWorker` on the same
//! jobs leaves the same per-job states, the same raw job hashes (timestamps and stack traces
//! aside), the same lock values and the same events; refusals (wrong token, expired lock, a
//! job finished twice) carry Node's message on the same state; a job fetched by one side is
//! finished by the other; and the worker's connections close after `close` and after a drop.

mod common;

use std::collections::BTreeMap;
use std::time::Duration;

use anyhow::{bail, Result};
use common::*;
use fred::prelude::{
    ClientLike, HashesInterface, KeysInterface, ListInterface, SortedSetsInterface,
};
use ractor_bullmq::worker::{ManualError, ManualJob, ManualWorker, UnrecoverableError};
use ractor_bullmq::{ConnectionConfig, WorkerOptions};
use serde_json::{json, Value as Json};

/// Hash fields that differ between two runs by nature: times, and the stack traces (Node's hold
/// JavaScript frames; only their number is compared).
const VOLATILE: [&str; 4] = ["timestamp", "processedOn", "finishedOn", "stacktrace"];

fn config() -> ConnectionConfig {
    ConnectionConfig::from_url(&redis_url()).expect("REDIS_URL")
}

/// Our side of `node/manual.js`: the same steps, the same result shapes.
async fn run_ours(queue: &str, lock_ms: u64, steps: &Json) -> Result<Json> {
    let options = WorkerOptions::new()
        .name("manual")
        .lock_duration(Duration::from_millis(lock_ms))
        .drain_delay(Duration::from_millis(100));
    let worker = ManualWorker::connect(&config(), queue, options).await?;
    let reader = open_queue(queue).await?;
    let mut results = Vec::new();
    let mut current: Option<ManualJob> = None;
    for step in steps.as_array().expect("steps") {
        let token = step["token"].as_str();
        // A step's token replaces the current job's (to present a wrong one).
        let held = current.as_ref().map(|job| match token {
            Some(token) => ManualJob::new(job.job().clone(), token),
            None => job.clone(),
        });
        let fetch_next = step["fetchNext"].as_bool().unwrap_or(false);
        let outcome: Result<Option<ManualJob>, ManualError> = match step["op"].as_str() {
            Some("get") => {
                let token = token.expect("get needs a token");
                let got = if step["block"].as_bool().unwrap_or(false) {
                    worker.get_next_job(token).await
                } else {
                    worker.try_get_next_job(token).await
                };
                let got = got?;
                current = got;
                results.push(json!({"id": current.as_ref().map(|j| j.id().to_owned())}));
                continue;
            }
            Some("load") => {
                let id = step["id"].as_str().expect("load needs an id");
                let job = reader.get_job(id).await?.expect("job to load");
                current = Some(ManualJob::new(job, token.expect("load needs a token")));
                results.push(json!({"id": id}));
                continue;
            }
            Some("sleep") => {
                tokio::time::sleep(Duration::from_millis(step["ms"].as_u64().unwrap_or(0))).await;
                results.push(json!({}));
                continue;
            }
            Some("add") => {
                // Node adds for both runs: what is compared is the manual side.
                let mut opts = step["opts"].clone();
                if let Some(parent) = opts.get_mut("parent") {
                    parent["queue"] = json!(format!("{PREFIX}:{queue}"));
                }
                let added = run_node(
                    "add_jobs.js",
                    &json!({"queue": queue, "jobs": [{"name": step["name"], "data": {}, "opts": opts}]}),
                )
                .await?;
                results.push(json!({"added": added["ids"][0]}));
                continue;
            }
            Some("lock") => {
                let client = raw_client().await?;
                let key = format!("{PREFIX}:{queue}:{}:lock", step["id"].as_str().expect("id"));
                let ms = step["ms"].as_i64().expect("ms");
                let _: () = client
                    .set(
                        key,
                        token.expect("token"),
                        Some(fred::types::Expiration::PX(ms)),
                        None,
                        false,
                    )
                    .await?;
                client.quit().await?;
                results.push(json!({}));
                continue;
            }
            Some("extend") => {
                let job = held.expect("a current job");
                let ms = step["ms"].as_u64().unwrap_or(30_000);
                let extended = match worker.extend_lock(&job, Duration::from_millis(ms)).await {
                    Ok(()) => true,
                    Err(ManualError::LockNotExtended { .. }) => false,
                    Err(other) => return Err(other.into()),
                };
                results.push(json!({"extended": extended}));
                continue;
            }
            Some("delay") => {
                let job = held.expect("a current job");
                let ms = step["ms"].as_u64().expect("ms");
                match worker
                    .move_to_delayed(&job, Duration::from_millis(ms))
                    .await
                {
                    Ok(()) => results.push(json!({"delayed": true})),
                    Err(error @ ManualError::Store(_)) => return Err(error.into()),
                    Err(error) => results.push(json!({"error": error.to_string()})),
                }
                continue;
            }
            Some("complete") => {
                let job = held.expect("a current job");
                worker
                    .move_to_completed(&job, step["value"].clone(), fetch_next)
                    .await
            }
            Some("fail") => {
                let job = held.expect("a current job");
                let message = step["message"].as_str().unwrap_or("failed").to_owned();
                if step["unrecoverable"].as_bool().unwrap_or(false) {
                    worker
                        .move_to_failed(&job, UnrecoverableError::new(message), fetch_next)
                        .await
                } else {
                    worker
                        .move_to_failed(&job, anyhow::anyhow!(message), fetch_next)
                        .await
                }
            }
            other => bail!("unknown step {other:?}"),
        };
        match outcome {
            Ok(next) => {
                // Fetched with the presented token, as Node's; without a next job the finished
                // one stays current.
                results.push(json!({"id": next.as_ref().map(|j| j.id().to_owned())}));
                if next.is_some() {
                    current = next;
                }
            }
            Err(error @ ManualError::Store(_)) => return Err(error.into()),
            Err(error) => {
                assert!(
                    error.job_id().is_some(),
                    "a refusal names its job: {error:?}"
                );
                results.push(json!({"error": error.to_string()}));
            }
        }
    }
    worker.close().await;
    reader.close().await?;
    Ok(json!({ "results": results }))
}

/// Where each job is, its hash without the volatile fields (and the number of stack-trace
/// entries), and its lock's value.
async fn snapshot(queue: &str, ids: &[String]) -> Result<BTreeMap<String, Json>> {
    let client = raw_client().await?;
    let key = |suffix: &str| format!("{PREFIX}:{queue}:{suffix}");
    let mut out = BTreeMap::new();
    let wait: Vec<String> = client.lrange(key("wait"), 0, -1).await?;
    let active: Vec<String> = client.lrange(key("active"), 0, -1).await?;
    for id in ids {
        let mut places = Vec::new();
        if wait.contains(id) {
            places.push("wait".to_owned());
        }
        if active.contains(id) {
            places.push("active".to_owned());
        }
        for set in ["delayed", "completed", "failed", "prioritized"] {
            let score: Option<f64> = client.zscore(key(set), id.as_str()).await?;
            if score.is_some() {
                places.push(set.to_owned());
            }
        }
        let mut hash: BTreeMap<String, String> = client.hgetall(key(id)).await?;
        let traces = hash
            .remove("stacktrace")
            .map(|s| serde_json::from_str::<Vec<String>>(&s).map_or(0, |v| v.len()));
        hash.retain(|field, _| !VOLATILE.contains(&field.as_str()));
        // Node computes a manual delay from a timestamp (`moveToDelayed(Date.now() + ms)`),
        // which can lose a millisecond: compared in seconds.
        if let Some(delay) = hash.get_mut("delay") {
            if let Ok(ms) = delay.parse::<u64>() {
                *delay = format!("{}s", (ms + 500) / 1000);
            }
        }
        // Parent links name the queue, which differs between the two runs.
        for value in hash.values_mut() {
            *value = value.replace(queue, "<queue>");
        }
        let lock: Option<String> = client.get(key(&format!("{id}:lock"))).await?;
        out.insert(
            id.clone(),
            json!({"in": places, "hash": hash, "stacktraces": traces, "lock": lock}),
        );
    }
    client.quit().await?;
    Ok(out)
}

/// The queue's events, normalized (times out, ids kept: both queues number jobs alike).
async fn events(queue: &str) -> Result<Vec<String>> {
    Ok(normalize_events(&read_events(queue).await?, &|id| {
        id.to_owned()
    }))
}

/// Adds `jobs` with Node to a fresh queue named after `case`; returns the queue and the ids.
async fn fresh_queue(case: &str, jobs: &Json) -> Result<(String, Vec<String>)> {
    let queue = unique_queue(case);
    let added = run_node("add_jobs.js", &json!({"queue": queue, "jobs": jobs})).await?;
    let ids = added["ids"]
        .as_array()
        .expect("ids")
        .iter()
        .map(|id| id.as_str().expect("id").to_owned())
        .collect();
    Ok((queue, ids))
}

/// Runs `steps` with Node on one queue and with ours on another, both holding `jobs`; returns
/// both outputs, snapshots and event lists after checking they are equal.
async fn differential(case: &str, jobs: &Json, lock_ms: u64, steps: &Json) -> Result<Json> {
    let (node_queue, ids) = fresh_queue(&format!("{case}-node"), jobs).await?;
    let node = run_node(
        "manual.js",
        &json!({"queue": node_queue, "lockDuration": lock_ms, "steps": steps}),
    )
    .await?;
    let (rust_queue, rust_ids) = fresh_queue(&format!("{case}-rust"), jobs).await?;
    assert_eq!(ids, rust_ids);
    let ours = run_ours(&rust_queue, lock_ms, steps).await?;
    assert_eq!(ours, node, "step results differ (left ours, right Node)");
    // Jobs the steps added are compared too.
    let mut ids = ids;
    ids.extend(
        node["results"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|r| r["added"].as_str().map(str::to_owned)),
    );
    let (node_state, rust_state) = (
        snapshot(&node_queue, &ids).await?,
        snapshot(&rust_queue, &ids).await?,
    );
    assert_eq!(
        rust_state, node_state,
        "job states and hashes differ (left ours, right Node)"
    );
    let (node_events, rust_events) = (events(&node_queue).await?, events(&rust_queue).await?);
    assert_eq!(
        rust_events, node_events,
        "events differ (left ours, right Node)"
    );
    cleanup(&node_queue).await?;
    cleanup(&rust_queue).await?;
    Ok(json!({"results": node["results"], "state": node_state}))
}

fn job(name: &str, opts: Json) -> Json {
    json!({"name": name, "data": {"n": name}, "opts": opts})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn manual_program_matches_node_job_by_job() -> Result<()> {
    if !node_available() {
        return Ok(());
    }
    let jobs = json!([
        job("one", json!({})),
        job("two", json!({"attempts": 2})),
        job(
            "three",
            json!({"attempts": 3, "backoff": {"type": "fixed", "delay": 60000}})
        ),
        job("four", json!({"removeOnComplete": true})),
        job("five", json!({})),
        job("six", json!({"attempts": 5})),
        job("seven", json!({"attempts": 2})),
    ]);
    let steps = json!([
        {"op": "get", "token": "tok-1"},
        {"op": "extend", "ms": 30000},
        // Completed, and two fetched in the same call.
        {"op": "complete", "value": {"r": 1}, "fetchNext": true},
        // Retried at once: back to wait, nothing fetched (Node's retryJob).
        {"op": "fail", "message": "boom two", "fetchNext": true},
        {"op": "get", "token": "tok-2"},
        // Backoff: to delayed for 60 s, and four fetched with tok-2.
        {"op": "fail", "message": "boom three", "fetchNext": true},
        // removeOnComplete, no fetch.
        {"op": "complete", "value": "four", "fetchNext": false},
        {"op": "get", "token": "tok-3"},
        // Attempts used up (1): failed, then six fetched (two's retry went to the back).
        {"op": "fail", "message": "boom five", "fetchNext": true},
        // six: unrecoverable despite its attempts; seven fetched.
        {"op": "fail", "message": "never", "unrecoverable": true, "fetchNext": true},
        // seven completes; two's retry fetched.
        {"op": "complete", "value": null, "fetchNext": true},
        // two (held with tok-3): delayed by hand, no attempt counted; a wrong token is refused,
        // and so is delaying it twice.
        {"op": "delay", "ms": 120000, "token": "not-tok-4"},
        {"op": "delay", "ms": 120000},
        {"op": "delay", "ms": 120000},
        {"op": "get", "token": "tok-4"},
    ]);
    let out = differential("manual-parity", &jobs, 30_000, &steps).await?;
    let results = out["results"].as_array().expect("results");
    let ids: Vec<&Json> = results.iter().map(|r| &r["id"]).collect();
    assert_eq!(
        ids,
        [
            &json!("1"),
            &Json::Null,
            &json!("2"),
            &Json::Null,
            &json!("3"),
            &json!("4"),
            &Json::Null,
            &json!("5"),
            &json!("6"),
            &json!("7"),
            &json!("2"),
            &Json::Null,
            &Json::Null,
            &Json::Null,
            &Json::Null
        ],
        "{results:?}"
    );
    let state = &out["state"];
    assert_eq!(state["1"]["in"], json!(["completed"]));
    assert_eq!(state["2"]["in"], json!(["delayed"]));
    assert_eq!(
        state["2"]["hash"]["atm"],
        json!("1"),
        "the manual delay counts no attempt"
    );
    assert_eq!(state["3"]["in"], json!(["delayed"]));
    assert_eq!(state["4"]["in"], json!([]));
    assert_eq!(state["5"]["in"], json!(["failed"]));
    assert_eq!(state["6"]["in"], json!(["failed"]));
    assert_eq!(state["7"]["in"], json!(["completed"]));
    assert_eq!(
        results[11]["error"],
        json!("Lock mismatch for job 2. Cmd moveToDelayed from active")
    );
    assert_eq!(results[12], json!({"delayed": true}));
    assert!(results[13]["error"].is_string(), "{results:?}");
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refusals_match_nodes_errors_on_the_same_state() -> Result<()> {
    if !node_available() {
        return Ok(());
    }
    let jobs = json!([
        job("a", json!({})),
        job("b", json!({"attempts": 2})),
        job("c", json!({"removeOnComplete": true})),
        job("d", json!({})),
    ]);
    let steps = json!([
        {"op": "get", "token": "mine"},
        // Wrong token: lock mismatch, renewal refused; the job stays active.
        // Refused: nothing fetched even with fetchNext (job 2 stays waiting).
        {"op": "complete", "value": 1, "token": "theirs", "fetchNext": true},
        {"op": "fail", "message": "x", "token": "theirs", "fetchNext": false},
        {"op": "extend", "ms": 30000, "token": "theirs"},
        {"op": "complete", "value": 1, "fetchNext": false},
        // Finished twice.
        {"op": "complete", "value": 2, "fetchNext": true},
        {"op": "fail", "message": "again", "fetchNext": true},
        {"op": "extend", "ms": 30000},
        // An expired lock (400 ms): refused, still active.
        {"op": "get", "token": "short"},
        {"op": "sleep", "ms": 1500},
        {"op": "extend", "ms": 30000},
        {"op": "fail", "message": "too late", "fetchNext": false},
        {"op": "complete", "value": 3, "fetchNext": false},
        // A job removed on completion, finished again: its hash is gone.
        {"op": "get", "token": "gone"},
        {"op": "complete", "value": 4, "fetchNext": false},
        {"op": "complete", "value": 5, "fetchNext": false},
        // A waiting job presented with a token it was never locked with.
        {"op": "load", "id": "4", "token": "never"},
        {"op": "complete", "value": 6, "fetchNext": false},
        {"op": "extend", "ms": 30000},
        // The same job with a stray lock of that token: not active.
        {"op": "lock", "id": "4", "token": "never", "ms": 30000},
        {"op": "complete", "value": 7, "fetchNext": false},
        {"op": "fail", "message": "stray", "fetchNext": false},
    ]);
    let out = differential("manual-refusals", &jobs, 400, &steps).await?;
    let results = out["results"].as_array().expect("results");
    assert_eq!(
        results[1]["error"],
        json!("Lock mismatch for job 1. Cmd moveToFinished from active"),
        "{results:?}"
    );
    assert_eq!(results[3], json!({"extended": false}));
    assert!(results[5]["error"].is_string(), "{results:?}");
    assert_eq!(results[10], json!({"extended": false}));
    assert!(
        results[11]["error"]
            .as_str()
            .is_some_and(|e| e.contains("Missing lock for job 2")),
        "{results:?}"
    );
    assert_eq!(out["state"]["2"]["in"], json!(["active"]));
    assert_eq!(results[13], json!({"id": "3"}));
    assert_eq!(
        results[15]["error"],
        json!("Missing key for job 3. moveToFinished"),
        "{results:?}"
    );
    assert!(results[17]["error"].is_string(), "{results:?}");
    assert_eq!(
        results[20]["error"],
        json!("Job 4 is not in the active state. moveToFinished"),
        "{results:?}"
    );
    assert_eq!(out["state"]["4"]["in"], json!(["wait"]));
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_fetched_by_one_side_is_finished_by_the_other() -> Result<()> {
    if !node_available() {
        return Ok(());
    }
    let jobs = json!([
        job("a", json!({})),
        job("b", json!({})),
        job("c", json!({}))
    ]);
    let (queue, ids) = fresh_queue("manual-cross", &jobs).await?;
    // Ours fetches 1 with our token; Node completes it with that token and fetches 2.
    let worker =
        ManualWorker::connect(&config(), &queue, WorkerOptions::new().name("manual")).await?;
    let ours = worker.try_get_next_job("rust-token").await?.expect("job 1");
    assert_eq!(ours.id(), ids[0]);
    let node = run_node(
        "manual.js",
        &json!({"queue": queue, "steps": [
            {"op": "load", "id": ids[0], "token": "rust-token"},
            {"op": "extend", "ms": 30000},
            {"op": "complete", "value": "by node", "fetchNext": true},
        ]}),
    )
    .await?;
    assert_eq!(
        node["results"],
        json!([{"id": ids[0]}, {"extended": true}, {"id": ids[1]}])
    );
    // Node left 2 locked with our token: ours finishes it, and fetches 3.
    let client = raw_client().await?;
    let lock: Option<String> = client
        .get(format!("{PREFIX}:{queue}:{}:lock", ids[1]))
        .await?;
    assert_eq!(lock.as_deref(), Some("rust-token"));
    let reader = open_queue(&queue).await?;
    let two = ManualJob::new(reader.get_job(&ids[1]).await?.expect("job 2"), "rust-token");
    worker.extend_lock(&two, Duration::from_secs(30)).await?;
    let three = worker
        .move_to_completed(&two, json!("by rust"), true)
        .await?
        .expect("job 3");
    assert_eq!((three.id(), three.token()), (ids[2].as_str(), "rust-token"));
    // Node fetches nothing more; it fails 3 (held by our token) for us.
    let node = run_node(
        "manual.js",
        &json!({"queue": queue, "steps": [
            {"op": "get", "token": "node-token"},
            {"op": "load", "id": ids[2], "token": "rust-token"},
            {"op": "fail", "message": "by node", "fetchNext": false},
        ]}),
    )
    .await?;
    assert_eq!(
        node["results"],
        json!([{"id": null}, {"id": ids[2]}, {"id": null}])
    );
    for (id, returnvalue) in [(&ids[0], "\"by node\""), (&ids[1], "\"by rust\"")] {
        let value: Option<String> = client
            .hget(format!("{PREFIX}:{queue}:{id}"), "returnvalue")
            .await?;
        assert_eq!(value.as_deref(), Some(returnvalue));
    }
    assert_eq!(
        reader.get_job_state(&ids[2]).await?,
        ractor_bullmq::protocol::state::JobState::Failed
    );
    // A job Node fetched with its token: ours completes it with that token.
    let (queue2, ids2) = fresh_queue("manual-cross-2", &json!([job("d", json!({}))])).await?;
    let node = run_node(
        "manual.js",
        &json!({"queue": queue2, "steps": [{"op": "get", "token": "node-token"}]}),
    )
    .await?;
    assert_eq!(node["results"], json!([{"id": ids2[0]}]));
    let worker2 = ManualWorker::connect(&config(), &queue2, WorkerOptions::new()).await?;
    let reader2 = open_queue(&queue2).await?;
    let job = reader2.get_job(&ids2[0]).await?.expect("job d");
    let wrong = ManualJob::new(job.clone(), "rust-token");
    assert!(matches!(
        worker2.move_to_completed(&wrong, json!(1), false).await,
        Err(ManualError::LockMismatch { .. })
    ));
    let right = ManualJob::new(job, "node-token");
    assert!(worker2
        .move_to_completed(&right, json!(1), false)
        .await?
        .is_none());
    assert_eq!(
        reader2.get_job_state(&ids2[0]).await?,
        ractor_bullmq::protocol::state::JobState::Completed
    );
    worker.close().await;
    worker2.close().await;
    reader.close().await?;
    reader2.close().await?;
    client.quit().await?;
    cleanup(&queue).await?;
    cleanup(&queue2).await?;
    Ok(())
}

/// Waits until `queue` has `expected` named connections.
async fn clients_become(queue: &str, expected: usize) -> Result<Vec<String>> {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        let names = named_clients(queue).await?;
        if names.len() == expected {
            return Ok(names);
        }
        if tokio::time::Instant::now() >= deadline {
            bail!("{queue}: expected {expected} connections, found {names:?}");
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connections_close_after_close_and_after_drop() -> Result<()> {
    for dropped in [false, true] {
        let queue = unique_queue("manual-conns");
        let options = WorkerOptions::new().drain_delay(Duration::from_millis(200));
        let worker = ManualWorker::connect(&config(), &queue, options).await?;
        // A blocking fetch on an empty queue opens the blocking connection too.
        assert!(worker.get_next_job("t").await?.is_none());
        worker.start_stalled_check_timer()?;
        let open = named_clients(&queue).await?;
        assert_eq!(
            open.len(),
            2,
            "a command and a blocking connection, named: {open:?}"
        );
        if dropped {
            drop(worker);
        } else {
            worker.close().await;
            assert!(matches!(
                worker.try_get_next_job("t").await,
                Err(ManualError::Closed)
            ));
        }
        clients_become(&queue, 0).await?;
        cleanup(&queue).await?;
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_blocking_fetch_wakes_on_a_node_add() -> Result<()> {
    if !node_available() {
        return Ok(());
    }
    let queue = unique_queue("manual-block");
    let options = WorkerOptions::new().drain_delay(Duration::from_secs(20));
    let worker = ManualWorker::connect(&config(), &queue, options).await?;
    let adder = {
        let queue = queue.clone();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(300)).await;
            run_node(
                "add_jobs.js",
                &json!({"queue": queue, "jobs": [job("late", json!({}))]}),
            )
            .await
        })
    };
    let got = tokio::time::timeout(Duration::from_secs(60), worker.get_next_job("waiter"))
        .await??
        .expect("woken by the add, not by the 20 s timeout");
    assert_eq!((got.job().name(), got.token()), ("late", "waiter"));
    adder.await??;
    worker.move_to_completed(&got, json!(true), false).await?;
    worker.close().await;
    cleanup(&queue).await?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lock_left_to_expire_is_recovered_by_the_stalled_check() -> Result<()> {
    if !node_available() {
        return Ok(());
    }
    let (queue, ids) = fresh_queue("manual-stalled", &json!([job("a", json!({}))])).await?;
    let options = WorkerOptions::new()
        .lock_duration(Duration::from_millis(300))
        .stalled_interval(Duration::from_millis(200));
    let worker = ManualWorker::connect(&config(), &queue, options).await?;
    let job = worker.try_get_next_job("t").await?.expect("job");
    // The first check marks the lock-less job, a later one moves it back to wait.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    let mut recovered = Vec::new();
    while recovered.is_empty() {
        assert!(tokio::time::Instant::now() < deadline, "never recovered");
        tokio::time::sleep(Duration::from_millis(250)).await;
        recovered = worker.check_stalled().await?.recovered;
    }
    assert_eq!(recovered, ids);
    assert!(matches!(
        worker.move_to_completed(&job, json!(1), false).await,
        Err(ManualError::LockMissing { .. })
    ));
    let names: Vec<String> = read_events(&queue)
        .await?
        .into_iter()
        .map(|e| e.event)
        .collect();
    assert!(names.contains(&"stalled".to_owned()), "{names:?}");
    // Fetched again, by Node this time, with its own token.
    let node = run_node(
        "manual.js",
        &json!({"queue": queue, "steps": [
            {"op": "get", "token": "node"},
            {"op": "complete", "value": "second run", "fetchNext": false},
        ]}),
    )
    .await?;
    assert_eq!(node["results"], json!([{"id": ids[0]}, {"id": null}]));
    worker.close().await;
    cleanup(&queue).await?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_parent_with_pending_or_failed_children_is_refused_as_by_node() -> Result<()> {
    if !node_available() {
        return Ok(());
    }
    let jobs = json!([job("parent", json!({}))]);
    let steps = json!([
        {"op": "get", "token": "p"},
        // A child added under the active parent: the parent cannot complete yet.
        {"op": "add", "name": "child", "opts": {"parent": {"id": "1"}, "failParentOnFailure": true}},
        {"op": "complete", "value": 1, "fetchNext": false},
        {"op": "get", "token": "c"},
        {"op": "fail", "message": "child failed", "fetchNext": false},
        // The child failed: the parent cannot complete, but it can fail.
        {"op": "load", "id": "1", "token": "p"},
        {"op": "complete", "value": 2, "fetchNext": true},
        {"op": "fail", "message": "parent gives up", "fetchNext": false},
    ]);
    let out = differential("manual-children", &jobs, 30_000, &steps).await?;
    let results = out["results"].as_array().expect("results");
    assert_eq!(
        results[2]["error"],
        json!("Job 1 has pending dependencies. moveToFinished"),
        "{results:?}"
    );
    assert_eq!(
        results[6]["error"],
        json!("Cannot complete job 1 because it has at least one failed child. moveToFinished"),
        "{results:?}"
    );
    assert_eq!(out["state"]["1"]["in"], json!(["failed"]));
    assert_eq!(out["state"]["2"]["in"], json!(["failed"]));
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_corrupted_job_is_failed_and_skipped() -> Result<()> {
    if !node_available() {
        return Ok(());
    }
    let jobs = json!([
        job("broken", json!({})),
        job("fine", json!({})),
        job("also-fine", json!({}))
    ]);
    let (queue, ids) = fresh_queue("manual-corrupted", &jobs).await?;
    let client = raw_client().await?;
    // Another client's bad edit: the hash loses a field every client writes.
    for id in [&ids[0], &ids[2]] {
        let _: i64 = client
            .hdel(format!("{PREFIX}:{queue}:{id}"), "opts")
            .await?;
    }
    let worker = ManualWorker::connect(&config(), &queue, WorkerOptions::new()).await?;
    let got = worker
        .try_get_next_job("t")
        .await?
        .expect("the readable job");
    assert_eq!(got.id(), ids[1]);
    // The fetch-next of the completion skips the broken third job too.
    assert!(worker
        .move_to_completed(&got, json!(1), true)
        .await?
        .is_none());
    let reader = open_queue(&queue).await?;
    for id in [&ids[0], &ids[2]] {
        assert_eq!(
            reader.get_job_state(id).await?,
            ractor_bullmq::protocol::state::JobState::Failed
        );
        let reason: Option<String> = client
            .hget(format!("{PREFIX}:{queue}:{id}"), "failedReason")
            .await?;
        assert!(
            reason.as_deref().is_some_and(|r| r.contains("opts")),
            "{reason:?}"
        );
    }
    worker.close().await;
    reader.close().await?;
    client.quit().await?;
    cleanup(&queue).await?;
    Ok(())
}
