//! Checks the test harness and the Node oracle scripts themselves, without our Queue: if these
//! fail, every other interop test would fail for a reason that has nothing to do with our code.

mod common;

use std::time::Duration;

use common::*;
use serde_json::json;

#[tokio::test]
async fn oracle_adds_reads_and_counts_jobs() -> anyhow::Result<()> {
    if !node_available() {
        return Ok(());
    }
    let queue = unique_queue("selftest");
    let added = run_node(
        "add_jobs.js",
        &json!({"queue": queue, "jobs": [
            {"name": "plain", "data": {"n": 1}},
            {"name": "later", "data": {"n": 2}, "opts": {"delay": 60_000}},
            {"name": "urgent", "data": {"n": 3}, "opts": {"priority": 2, "jobId": "my-id"}},
        ]}),
    )
    .await?;
    assert_eq!(added["ids"], json!(["1", "2", "my-id"]));

    let read = run_node(
        "read_jobs.js",
        &json!({"queue": queue, "ids": ["1", "2", "my-id", "404"]}),
    )
    .await?;
    let jobs = read["jobs"].as_array().expect("jobs array");
    assert_eq!(jobs[0]["state"], "waiting");
    assert_eq!(jobs[1]["state"], "delayed");
    assert_eq!(jobs[2]["state"], "prioritized");
    assert_eq!(jobs[3], json!(null));
    assert_eq!(parse_json_field(&jobs[0]["raw"], "data"), json!({"n": 1}));

    let counts = run_node("counts.js", &json!({"queue": queue})).await?;
    assert_eq!(counts["counts"]["waiting"], 1);
    assert_eq!(counts["counts"]["delayed"], 1);
    assert_eq!(counts["counts"]["prioritized"], 1);
    assert_eq!(counts["paused"], false);
    assert_eq!(counts["meta"]["version"], "bullmq:6.7.0");

    let events = read_events(&queue).await?;
    let names: Vec<&str> = events.iter().map(|e| e.event.as_str()).collect();
    assert_eq!(
        names,
        ["added", "waiting", "added", "delayed", "added", "waiting"]
    );
    let from_node =
        events_from_node(&run_node("collect_events.js", &json!({"queue": queue})).await?)?;
    assert_eq!(
        from_node, events,
        "XRANGE through Node and through fred agree"
    );

    assert!(count_keys(&queue).await? > 0);
    cleanup(&queue).await?;
    assert_eq!(count_keys(&queue).await?, 0);
    Ok(())
}

#[tokio::test]
async fn oracle_worker_processes_in_bullmq_order() -> anyhow::Result<()> {
    if !node_available() {
        return Ok(());
    }
    let queue = unique_queue("selftest-worker");
    run_node(
        "add_jobs.js",
        &json!({"queue": queue, "jobs": [
            {"name": "a", "data": {}},
            {"name": "b", "data": {"fail": "nope"}},
            {"name": "c", "data": {}, "opts": {"lifo": true}},
        ]}),
    )
    .await?;
    let out = run_node(
        "run_worker.js",
        &json!({"queue": queue, "stopAfter": 3, "timeoutMs": 20_000}),
    )
    .await?;
    assert_eq!(out["stoppedBy"], "count");
    let order: Vec<&str> = out["processed"]
        .as_array()
        .expect("processed")
        .iter()
        .map(|j| j["name"].as_str().unwrap_or_default())
        .collect();
    assert_eq!(order, ["c", "a", "b"]);
    assert_eq!(out["failed"][0]["failedReason"], "nope");

    eventually(
        "the failed job is in the failed set",
        Duration::from_secs(5),
        || {
            let queue = queue.clone();
            async move {
                let counts = run_node("counts.js", &json!({"queue": queue})).await;
                counts.map(|c| c["counts"]["failed"] == 1).unwrap_or(false)
            }
        },
    )
    .await?;
    cleanup(&queue).await?;
    Ok(())
}

#[tokio::test]
async fn oracle_output_larger_than_a_pipe_buffer_arrives_whole() -> anyhow::Result<()> {
    if !node_available() {
        return Ok(());
    }
    let queue = unique_queue("selftest-big");
    let big = "x".repeat(200_000);
    run_node(
        "add_jobs.js",
        &json!({"queue": queue, "jobs": [{"name": "big", "data": {"big": big}}]}),
    )
    .await?;
    let read = run_node("read_jobs.js", &json!({"queue": queue, "ids": ["1"]})).await?;
    assert_eq!(
        read["jobs"][0]["data"]["big"].as_str().map(str::len),
        Some(200_000)
    );
    cleanup(&queue).await?;
    Ok(())
}
