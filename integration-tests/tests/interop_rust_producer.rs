//! Rust → Node: jobs added by our `Queue` look to Node BullMQ 6.7.0 exactly like jobs Node adds
//! itself, Node's views of the queue agree with ours, and a Node `Worker` processes our jobs in
//! BullMQ's order with their data intact.

mod common;

use std::time::Duration;

use common::*;
use ractor_bullmq::protocol::options::JobOptions;
use ractor_bullmq::protocol::state::JobState;
use serde_json::{json, Value as Json};

/// `(name, data, Node-style opts)` of every add variant.
fn variants() -> Vec<(&'static str, Json, Json)> {
    vec![
        (
            "standard",
            json!({"to": "a@b.c", "deep": {"list": [1, 2.5, "x", null]}}),
            json!({}),
        ),
        ("delayed", json!({"n": 1}), json!({"delay": 45_000})),
        ("prioritized", json!({"n": 2}), json!({"priority": 9})),
        ("lifo", json!({"n": 3}), json!({"lifo": true})),
        ("custom-id", json!({"n": 4}), json!({"jobId": "invoice-9"})),
        (
            "retries",
            json!({"n": 5}),
            json!({"attempts": 5, "backoff": {"type": "exponential", "delay": 100}}),
        ),
        (
            "remove-true",
            json!({}),
            json!({"removeOnComplete": true, "removeOnFail": true}),
        ),
        ("remove-count", json!({}), json!({"removeOnComplete": 50})),
        (
            "remove-policy",
            json!({}),
            json!({"removeOnComplete": {"age": 10, "count": 2}}),
        ),
        ("string-data", json!("just text"), json!({"keepLogs": 2})),
    ]
}

fn options(opts: &Json) -> JobOptions {
    serde_json::from_value(opts.clone()).expect("test options are valid BullMQ options")
}

/// Fields of a Node `getJob` read that must be identical whoever added the job (everything but
/// the creation time, which comes from two different clocks).
fn comparable(job: &Json) -> Json {
    let mut job = job.clone();
    let map = job.as_object_mut().expect("job object");
    map.remove("timestamp");
    let raw = map.remove("raw").unwrap_or_default();
    // The stored JSON strings may order keys differently; compare them parsed.
    map.insert("rawOpts".into(), parse_json_field(&raw, "opts"));
    map.insert("rawData".into(), parse_json_field(&raw, "data"));
    let mut fields: Vec<&String> = raw.as_object().expect("raw hash").keys().collect();
    fields.sort();
    map.insert("rawFields".into(), json!(fields));
    job
}

#[tokio::test]
async fn node_reads_our_jobs_as_it_reads_its_own() -> anyhow::Result<()> {
    if !node_available() {
        return Ok(());
    }
    let ours_name = unique_queue("rust-producer");
    let node_name = unique_queue("rust-producer-ref");
    let queue = open_queue(&ours_name).await?;

    let before = now_ms();
    let mut ids = Vec::new();
    for (name, data, opts) in variants() {
        let job = queue.add(name, &data).opts(options(&opts)).await?;
        ids.push(job.id().to_string());
    }
    let after = now_ms();
    let node_jobs: Vec<Json> = variants()
        .into_iter()
        .map(|(name, data, opts)| json!({"name": name, "data": data, "opts": opts}))
        .collect();
    let reference = run_node(
        "add_jobs.js",
        &json!({"queue": node_name, "jobs": node_jobs}),
    )
    .await?;
    assert_eq!(reference["ids"], json!(ids), "same ids as Node generates");

    let ours = run_node("read_jobs.js", &json!({"queue": ours_name, "ids": ids})).await?;
    let theirs = run_node("read_jobs.js", &json!({"queue": node_name, "ids": ids})).await?;
    for (i, (ours, theirs)) in ours["jobs"]
        .as_array()
        .expect("jobs")
        .iter()
        .zip(theirs["jobs"].as_array().expect("jobs"))
        .enumerate()
    {
        assert!(!ours.is_null(), "Node cannot find our job {}", ids[i]);
        let ts = ours["timestamp"].as_u64().expect("timestamp");
        assert!(
            (before..=after).contains(&ts),
            "timestamp {ts} is the add time"
        );
        assert_eq!(comparable(ours), comparable(theirs), "job {}", ids[i]);
    }
    cleanup(&ours_name).await?;
    cleanup(&node_name).await?;
    Ok(())
}

#[tokio::test]
async fn node_views_agree_with_ours() -> anyhow::Result<()> {
    if !node_available() {
        return Ok(());
    }
    let name = unique_queue("rust-views");
    let queue = open_queue(&name).await?;
    for (job_name, data, opts) in variants() {
        queue.add(job_name, &data).opts(options(&opts)).await?;
    }
    queue.remove("invoice-9").await?;

    for paused in [false, true] {
        if paused {
            queue.pause().await?;
            queue.add("while-paused", json!({})).await?;
        }
        let node = run_node("counts.js", &json!({"queue": name})).await?;
        let ours = queue.get_job_counts().await?;
        for state in [
            JobState::Active,
            JobState::Completed,
            JobState::Delayed,
            JobState::Failed,
            JobState::Paused,
            JobState::Prioritized,
            JobState::Waiting,
            JobState::WaitingChildren,
        ] {
            let key = state.as_str();
            assert_eq!(
                Some(ours.get(state)),
                node["counts"][key].as_u64(),
                "count of {key}"
            );
            let listed: Vec<Json> = queue
                .get_jobs(&[state], 0, -1, false)
                .await?
                .iter()
                .map(|job| json!(job.id()))
                .collect();
            assert_eq!(json!(listed), node["jobs"][key], "ids in {key}");
        }
        assert_eq!(queue.is_paused().await?, paused);
        assert_eq!(node["paused"], paused, "Node's isPaused");
        assert_eq!(node["meta"]["version"], "bullmq:6.7.0");
    }
    cleanup(&name).await?;
    Ok(())
}

/// Adds the same jobs through us and through Node on two queues, drains each with a Node worker
/// (concurrency 1) and returns both processing orders by job name.
async fn processing_orders(
    jobs: &[(&'static str, Json, Json)],
) -> anyhow::Result<(Vec<String>, Vec<String>)> {
    let ours_name = unique_queue("rust-order");
    let node_name = unique_queue("rust-order-ref");
    let queue = open_queue(&ours_name).await?;
    for (name, data, opts) in jobs {
        queue.add(*name, data).opts(options(opts)).await?;
    }
    let node_jobs: Vec<Json> = jobs
        .iter()
        .map(|(name, data, opts)| json!({"name": name, "data": data, "opts": opts}))
        .collect();
    run_node(
        "add_jobs.js",
        &json!({"queue": node_name, "jobs": node_jobs}),
    )
    .await?;

    let mut orders = Vec::new();
    for name in [&ours_name, &node_name] {
        let out = run_node(
            "run_worker.js",
            &json!({"queue": name, "stopAfter": jobs.len(), "timeoutMs": 30_000}),
        )
        .await?;
        assert_eq!(
            out["stoppedBy"], "count",
            "the Node worker finished every job: {out}"
        );
        for processed in out["processed"].as_array().expect("processed") {
            let name = processed["name"].as_str().expect("name");
            let (_, data, _) = jobs.iter().find(|(n, _, _)| *n == name).expect("known job");
            assert_eq!(&processed["data"], data, "data of {name} intact");
        }
        orders.push(
            out["processed"]
                .as_array()
                .expect("processed")
                .iter()
                .map(|p| p["name"].as_str().unwrap_or_default().to_string())
                .collect(),
        );
        cleanup(name).await?;
    }
    let node_order = orders.pop().unwrap_or_default();
    let our_order = orders.pop().unwrap_or_default();
    Ok((our_order, node_order))
}

#[tokio::test]
async fn node_worker_processes_our_jobs_in_bullmq_order() -> anyhow::Result<()> {
    if !node_available() {
        return Ok(());
    }
    let jobs = vec![
        ("fifo-1", json!({"i": 1}), json!({})),
        ("prio-5", json!({"i": 2}), json!({"priority": 5})),
        ("prio-1", json!({"i": 3}), json!({"priority": 1})),
        ("fifo-2", json!({"i": 4}), json!({})),
        ("lifo", json!({"i": 5}), json!({"lifo": true})),
        ("prio-1-later", json!({"i": 6}), json!({"priority": 1})),
        ("prio-3", json!({"i": 7}), json!({"priority": 3})),
    ];
    let (ours, node) = processing_orders(&jobs).await?;
    // BullMQ: the wait list first (LIFO jobs at its head), then by priority, FIFO within one.
    assert_eq!(
        ours,
        [
            "lifo",
            "fifo-1",
            "fifo-2",
            "prio-1",
            "prio-1-later",
            "prio-3",
            "prio-5"
        ]
    );
    assert_eq!(ours, node, "same order as jobs Node added");
    Ok(())
}

#[tokio::test]
async fn node_worker_runs_our_delayed_job_only_after_its_delay() -> anyhow::Result<()> {
    if !node_available() {
        return Ok(());
    }
    let name = unique_queue("rust-delayed");
    let queue = open_queue(&name).await?;
    let delayed = queue
        .add("later", json!({"when": "later"}))
        .delay(Duration::from_millis(1_500))
        .await?;
    queue.add("now", json!({"when": "now"})).await?;
    let due = delayed.timestamp() + 1_500;

    let out = run_node(
        "run_worker.js",
        &json!({"queue": name, "stopAfter": 2, "timeoutMs": 30_000}),
    )
    .await?;
    assert_eq!(out["stoppedBy"], "count", "{out}");
    let processed = out["processed"].as_array().expect("processed");
    assert_eq!(processed[0]["name"], "now");
    assert_eq!(processed[1]["name"], "later");
    assert_eq!(processed[1]["data"], json!({"when": "later"}));
    let started = processed[1]["startedAt"].as_u64().expect("startedAt");
    assert!(
        started >= due,
        "delayed job started at {started}, before it was due at {due}"
    );
    cleanup(&name).await?;
    Ok(())
}

#[tokio::test]
async fn node_worker_respects_our_pause() -> anyhow::Result<()> {
    if !node_available() {
        return Ok(());
    }
    let name = unique_queue("rust-paused");
    let queue = open_queue(&name).await?;
    queue.pause().await?;
    queue.add("held", json!({})).await?;
    let out = run_node(
        "run_worker.js",
        &json!({"queue": name, "idleMs": 1_500, "timeoutMs": 10_000}),
    )
    .await?;
    assert_eq!(
        out["processed"],
        json!([]),
        "a paused queue gives no jobs: {out}"
    );

    queue.resume().await?;
    let out = run_node(
        "run_worker.js",
        &json!({"queue": name, "stopAfter": 1, "timeoutMs": 30_000}),
    )
    .await?;
    assert_eq!(out["processed"][0]["name"], "held", "{out}");
    assert_eq!(queue.get_job_counts().await?.completed, 1);
    cleanup(&name).await?;
    Ok(())
}
