//! Node → Rust: jobs written by Node BullMQ 6.7.0 are read back by our `Queue` exactly as Node
//! itself reads them, and our counts and listings agree with Node's after a mix of operations.

mod common;

use common::*;
use ractor_bullmq::protocol::state::JobState;
use serde_json::{json, Value as Json};

/// Every add variant the issue names, as Node `queue.add(name, data, opts)` arguments.
fn variants() -> Json {
    json!([
        {"name": "standard", "data": {"to": "a@b.c", "nested": {"list": [1, 2.5, "x", null], "ok": true}}},
        {"name": "delayed", "data": {"n": 1}, "opts": {"delay": 60_000}},
        {"name": "prioritized", "data": {"n": 2}, "opts": {"priority": 7}},
        {"name": "lifo", "data": {"n": 3}, "opts": {"lifo": true}},
        {"name": "custom-id", "data": {"n": 4}, "opts": {"jobId": "order-17"}},
        {"name": "retries", "data": {"n": 5},
         "opts": {"attempts": 3, "backoff": {"type": "exponential", "delay": 250}}},
        {"name": "fixed-backoff", "data": {"n": 6},
         "opts": {"attempts": 2, "backoff": {"type": "fixed", "delay": 1000, "jitter": 0.5}}},
        {"name": "remove-true", "data": {}, "opts": {"removeOnComplete": true, "removeOnFail": false}},
        {"name": "remove-count", "data": {}, "opts": {"removeOnComplete": 10, "removeOnFail": 3}},
        {"name": "remove-policy", "data": {},
         "opts": {"removeOnComplete": {"age": 3600, "count": 5}, "removeOnFail": {"age": 60}}},
        {"name": "keep-logs", "data": "a plain string", "opts": {"keepLogs": 5, "stackTraceLimit": 3}},
        {"name": "everything", "data": [1, 2, 3],
         "opts": {"delay": 5_000, "priority": 3, "attempts": 4, "backoff": {"type": "fixed", "delay": 10},
                  "removeOnComplete": 1, "jobId": "all-in"}},
    ])
}

fn as_u64(value: &Json) -> u64 {
    value
        .as_u64()
        .unwrap_or_else(|| panic!("expected an integer, got {value}"))
}

#[tokio::test]
async fn node_jobs_read_back_identically() -> anyhow::Result<()> {
    if !node_available() {
        return Ok(());
    }
    let name = unique_queue("node-producer");
    let queue = open_queue(&name).await?;

    for bulk in [false, true] {
        let added = run_node(
            "add_jobs.js",
            &json!({"queue": name, "jobs": variants(), "bulk": bulk}),
        )
        .await?;
        let ids: Vec<String> = added["ids"]
            .as_array()
            .expect("ids")
            .iter()
            .map(|id| id.as_str().expect("string id").to_string())
            .collect();
        let node = run_node("read_jobs.js", &json!({"queue": name, "ids": ids})).await?;

        for (id, theirs) in ids.iter().zip(node["jobs"].as_array().expect("jobs")) {
            let ours = queue
                .get_job(id)
                .await?
                .unwrap_or_else(|| panic!("our get_job does not find Node's job {id}"));
            let what = format!("job {id} ({}, bulk={bulk})", theirs["name"]);
            assert_eq!(ours.id(), id, "{what}: id");
            assert_eq!(ours.name(), theirs["name"], "{what}: name");
            assert_eq!(ours.data_value(), &theirs["data"], "{what}: data");
            assert_eq!(
                ours.data_raw(),
                theirs["raw"]["data"],
                "{what}: data as stored"
            );
            // Options: what we decode must re-encode to exactly what Node stored.
            assert_eq!(
                serde_json::to_value(ours.opts())?,
                parse_json_field(&theirs["raw"], "opts"),
                "{what}: opts"
            );
            assert_eq!(
                ours.timestamp(),
                as_u64(&theirs["timestamp"]),
                "{what}: timestamp"
            );
            assert_eq!(
                ours.delay().as_millis() as u64,
                as_u64(&theirs["delay"]),
                "{what}: delay"
            );
            assert_eq!(
                u64::from(ours.priority()),
                as_u64(&theirs["priority"]),
                "{what}: priority"
            );
            assert_eq!(ours.progress(), &theirs["progress"], "{what}: progress");
            assert_eq!(
                u64::from(ours.attempts_made()),
                as_u64(&theirs["attemptsMade"]),
                "{what}"
            );
            assert_eq!(
                queue.get_job_state(id).await?.as_str(),
                theirs["state"],
                "{what}: state"
            );
        }
    }
    cleanup(&name).await?;
    Ok(())
}

/// Our counts, paused flag and per-state listings next to Node's for the same queue.
async fn assert_views_agree(queue: &ractor_bullmq::Queue, name: &str) -> anyhow::Result<()> {
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
        assert_eq!(
            ours.get(state),
            as_u64(&node["counts"][state.as_str()]),
            "count of {}",
            state.as_str()
        );
        let listed: Vec<String> = queue
            .get_jobs(&[state], 0, -1, false)
            .await?
            .iter()
            .map(|job| job.id().to_string())
            .collect();
        let theirs: Vec<String> = node["jobs"][state.as_str()]
            .as_array()
            .expect("ids")
            .iter()
            .map(|id| id.as_str().unwrap_or_default().to_string())
            .collect();
        assert_eq!(
            listed,
            theirs,
            "get_jobs([{}]) in Node's order",
            state.as_str()
        );
    }
    assert_eq!(queue.is_paused().await?, node["paused"], "is_paused");
    Ok(())
}

#[tokio::test]
async fn counts_and_listings_agree_after_a_mix_of_operations() -> anyhow::Result<()> {
    if !node_available() {
        return Ok(());
    }
    let name = unique_queue("node-counts");
    let queue = open_queue(&name).await?;

    let jobs = json!([
        {"name": "ok-1", "data": {}},
        {"name": "fails", "data": {"fail": "on purpose"}},
        {"name": "ok-2", "data": {"returnValue": {"sum": 3}}},
        {"name": "ok-3", "data": {}},
    ]);
    run_node("add_jobs.js", &json!({"queue": name, "jobs": jobs})).await?;
    // A Node worker completes three and fails one.
    let worked = run_node(
        "run_worker.js",
        &json!({"queue": name, "stopAfter": 4, "timeoutMs": 30_000}),
    )
    .await?;
    assert_eq!(worked["stoppedBy"], "count", "{worked}");

    // Then jobs in every other state, including a removed one and a paused queue.
    run_node(
        "add_jobs.js",
        &json!({"queue": name, "bulk": true, "jobs": [
            {"name": "w-1", "data": {}},
            {"name": "w-2", "data": {}, "opts": {"lifo": true}},
            {"name": "p-5", "data": {}, "opts": {"priority": 5}},
            {"name": "p-1", "data": {}, "opts": {"priority": 1}},
            {"name": "p-1b", "data": {}, "opts": {"priority": 1}},
            {"name": "d-1", "data": {}, "opts": {"delay": 120_000}},
            {"name": "d-2", "data": {}, "opts": {"delay": 60_000}},
            {"name": "gone", "data": {}, "opts": {"jobId": "to-remove"}},
        ]}),
    )
    .await?;
    run_node(
        "admin.js",
        &json!({"queue": name, "op": "remove", "id": "to-remove"}),
    )
    .await?;
    assert_views_agree(&queue, &name).await?;

    run_node("admin.js", &json!({"queue": name, "op": "pause"})).await?;
    run_node(
        "add_jobs.js",
        &json!({"queue": name, "jobs": [{"name": "while-paused", "data": {}}]}),
    )
    .await?;
    assert_views_agree(&queue, &name).await?;

    run_node("admin.js", &json!({"queue": name, "op": "resume"})).await?;
    run_node(
        "admin.js",
        &json!({"queue": name, "op": "clean", "type": "completed", "grace": 0, "limit": 1}),
    )
    .await?;
    assert_views_agree(&queue, &name).await?;

    cleanup(&name).await?;
    Ok(())
}
