//! Fault handling of our Worker: lock loss, stalled recovery, corrupted job hashes, panics.

mod common;
mod worker_common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::*;
use fred::prelude::{ClientLike, HashesInterface, KeysInterface, ListInterface, SetsInterface};
use ractor_bullmq::worker::{CancelReason, Job, JobContext};
use ractor_bullmq::{Worker, WorkerArgs, WorkerCallbacks, WorkerOptions};
use serde_json::{json, Value};
use worker_common::*;

async fn read_one(queue: &str, id: &str) -> anyhow::Result<Value> {
    let read = run_node("read_jobs.js", &json!({"queue": queue, "ids": [id]})).await?;
    Ok(read["jobs"][0].clone())
}

#[tokio::test]
async fn lost_lock_cancels_the_job_which_stalled_recovery_brings_back_once() -> anyhow::Result<()> {
    if !node_available() {
        return Ok(());
    }
    let queue = unique_queue("w-locklost");
    let ids = add_with_node(&queue, json!([{"name": "long", "data": {}}])).await?;
    let id = ids[0].clone();

    let runs = Arc::new(AtomicUsize::new(0));
    let contexts = Arc::new(Mutex::new(Vec::<JobContext>::new()));
    let lost = Arc::new(Mutex::new(Vec::<String>::new()));
    let processor = {
        let (runs, contexts) = (runs.clone(), contexts.clone());
        move |_job: Job, ctx: JobContext| {
            let (runs, contexts) = (runs.clone(), contexts.clone());
            async move {
                contexts.lock().unwrap().push(ctx.clone());
                if runs.fetch_add(1, Ordering::SeqCst) == 0 {
                    // First run: hang until the test deletes the lock; the worker cancels the
                    // token and drops this future, so the value below is never recorded.
                    tokio::time::sleep(Duration::from_secs(30)).await;
                    return Ok(json!("first run"));
                }
                Ok(json!("second run"))
            }
        }
    };
    let callbacks = WorkerCallbacks::new().on_lock_renewal_failed({
        let lost = lost.clone();
        move |ids| lost.lock().unwrap().extend_from_slice(ids)
    });
    let options = WorkerOptions::new()
        .lock_duration(Duration::from_millis(1000))
        .stalled_interval(Duration::from_millis(700));
    let args = WorkerArgs::connect(&config(), &queue, processor, options)
        .await?
        .callbacks(callbacks);
    let worker = Worker::spawn(args).await?;

    eventually("processor started", Duration::from_secs(10), || {
        let runs = runs.clone();
        async move { runs.load(Ordering::SeqCst) == 1 }
    })
    .await?;
    let client = raw_client().await?;
    let _: i64 = client.del(format!("{PREFIX}:{queue}:{id}:lock")).await?;

    eventually(
        "lock renewal failure reported",
        Duration::from_secs(10),
        || {
            let lost = lost.clone();
            async move { !lost.lock().unwrap().is_empty() }
        },
    )
    .await?;
    assert_eq!(lost.lock().unwrap().clone(), vec![id.clone()]);
    wait_finished(&queue, 1, Duration::from_secs(20)).await?;
    worker.close().await?;

    assert_eq!(runs.load(Ordering::SeqCst), 2);
    let reasons: Vec<Option<CancelReason>> = contexts
        .lock()
        .unwrap()
        .iter()
        .map(JobContext::cancel_reason)
        .collect();
    assert_eq!(reasons, vec![Some(CancelReason::LockLost), None]);
    let job = read_one(&queue, &id).await?;
    assert_eq!(job["state"], "completed");
    assert_eq!(job["returnvalue"], "second run");
    assert_eq!(job["stalledCounter"], 1);
    assert_eq!(job["attemptsMade"], 1);
    let events = read_events(&queue).await?;
    let completed = events.iter().filter(|e| e.event == "completed").count();
    let stalled = events.iter().filter(|e| e.event == "stalled").count();
    assert_eq!((completed, stalled), (1, 1));
    client.quit().await?;
    cleanup(&queue).await
}

#[tokio::test]
async fn stalled_jobs_return_to_wait_and_fail_past_max_stalled_count() -> anyhow::Result<()> {
    if !node_available() {
        return Ok(());
    }
    let queue = unique_queue("w-stalled");
    let ids = add_with_node(
        &queue,
        json!([{"name": "once", "data": {}}, {"name": "too-often", "data": {}}]),
    )
    .await?;
    // Simulate a worker that died holding both jobs: active, no lock, marked by a previous
    // stalled check; "too-often" already stalled once before.
    let client = raw_client().await?;
    let base = format!("{PREFIX}:{queue}");
    for id in &ids {
        let _: i64 = client.lrem(format!("{base}:wait"), 0, id.as_str()).await?;
        let _: i64 = client.lpush(format!("{base}:active"), id.as_str()).await?;
        let _: i64 = client.sadd(format!("{base}:stalled"), id.as_str()).await?;
    }
    let _: i64 = client
        .hset(format!("{base}:{}", ids[1]), ("stc", "1"))
        .await?;

    let stalled = Arc::new(Mutex::new(Vec::<String>::new()));
    let callbacks = WorkerCallbacks::new().on_stalled({
        let stalled = stalled.clone();
        move |id| stalled.lock().unwrap().push(id.to_string())
    });
    let worker = spawn_worker(
        &queue,
        WorkerOptions::new().stalled_interval(Duration::from_millis(500)),
        callbacks,
    )
    .await?;
    wait_finished(&queue, 2, Duration::from_secs(20)).await?;
    worker.close().await?;

    let mut seen = stalled.lock().unwrap().clone();
    seen.sort();
    let mut expected = ids.clone();
    expected.sort();
    assert_eq!(seen, expected);
    let once = read_one(&queue, &ids[0]).await?;
    assert_eq!(
        (once["state"].as_str(), once["stalledCounter"].as_u64()),
        (Some("completed"), Some(1))
    );
    let too_often = read_one(&queue, &ids[1]).await?;
    assert_eq!(too_often["state"], "failed");
    assert_eq!(
        too_often["failedReason"],
        "job stalled more than allowable limit"
    );
    assert_eq!(too_often["stalledCounter"], 2);
    assert!(
        too_often["raw"].get("defa").is_none(),
        "defa is cleared on failure"
    );
    client.quit().await?;
    cleanup(&queue).await
}

#[tokio::test]
async fn corrupted_job_hash_fails_naming_the_field_and_the_worker_continues() -> anyhow::Result<()>
{
    if !node_available() {
        return Ok(());
    }
    let queue = unique_queue("w-corrupt");
    let ids = add_with_node(
        &queue,
        json!([{"name": "bad-data", "data": {}}, {"name": "bad-opts", "data": {}}, {"name": "fine", "data": {}}]),
    )
    .await?;
    let client = raw_client().await?;
    let base = format!("{PREFIX}:{queue}");
    let _: i64 = client
        .hset(format!("{base}:{}", ids[0]), ("data", "{not json"))
        .await?;
    let _: i64 = client
        .hset(format!("{base}:{}", ids[1]), ("opts", "[1,"))
        .await?;

    let worker = spawn_worker(&queue, WorkerOptions::new(), WorkerCallbacks::new()).await?;
    wait_finished(&queue, 3, Duration::from_secs(20)).await?;
    worker.close().await?;

    for (id, field) in [(&ids[0], "data"), (&ids[1], "opts")] {
        let raw: std::collections::HashMap<String, String> =
            client.hgetall(format!("{base}:{id}")).await?;
        let reason = raw.get("failedReason").cloned().unwrap_or_default();
        assert!(
            reason.starts_with(&format!("corrupted job hash: {field} holds invalid JSON")),
            "reason {reason:?} names {field}"
        );
        let failed: Option<f64> = fred::prelude::SortedSetsInterface::zscore(
            &client,
            format!("{base}:failed"),
            id.as_str(),
        )
        .await?;
        assert!(failed.is_some(), "job {id} is in failed");
    }
    let fine = read_one(&queue, &ids[2]).await?;
    assert_eq!(fine["state"], "completed");
    client.quit().await?;
    cleanup(&queue).await
}

#[tokio::test]
async fn node_get_workers_lists_our_worker() -> anyhow::Result<()> {
    if !node_available() {
        return Ok(());
    }
    let queue = unique_queue("w-list");
    let worker = spawn_worker(
        &queue,
        WorkerOptions::new().name("rusty-lister"),
        WorkerCallbacks::new(),
    )
    .await?;
    let counts = run_node("counts.js", &json!({"queue": queue})).await?;
    let workers: Vec<String> = counts["workers"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|w| w.as_str().map(str::to_string))
        .collect();
    worker.close().await?;
    assert_eq!(workers.len(), 1, "{counts}");
    assert!(workers[0].ends_with(":w:rusty-lister"), "{workers:?}");
    cleanup(&queue).await
}
