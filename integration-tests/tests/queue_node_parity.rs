//! The raw Redis state our adds and admin calls leave, compared with what Node BullMQ 6.7.0
//! leaves for the same calls: every key, hash field, list order, zset score (priority and
//! delayed scores, markers), counter and event. Skipped (loudly) when `node` is missing.

mod common;

use std::collections::{BTreeMap, HashMap};

use anyhow::Result;
use bullmq_protocol::options::JobOptions;
use common::{
    cleanup, node_available, queue_keys, raw_client, read_events, run_node, unique_queue,
};
use fred::prelude::{Client, HashesInterface, KeysInterface, ListInterface, SortedSetsInterface};
use ractor_bullmq::{Queue, QueueOptions};
use serde_json::{json, Value as Json};

const TS: u64 = 1_760_000_000_000;

/// The jobs both sides add: (name, data, opts as Node takes them).
fn jobs() -> Vec<(&'static str, Json, Json)> {
    vec![
        ("std", json!({"i": 1}), json!({"timestamp": TS})),
        (
            "lifo",
            json!({"i": 2}),
            json!({"timestamp": TS, "lifo": true}),
        ),
        (
            "prio",
            json!({"i": 3}),
            json!({"timestamp": TS, "priority": 9}),
        ),
        (
            "prio",
            json!({"i": 4}),
            json!({"timestamp": TS, "priority": 2}),
        ),
        (
            "late",
            json!({"i": 5}),
            json!({"timestamp": TS, "delay": 4000}),
        ),
        (
            "late",
            json!({"i": 6}),
            json!({"timestamp": TS, "delay": 4000, "priority": 1}),
        ),
        (
            "soon",
            json!({"i": 7}),
            json!({"timestamp": TS, "delay": 1000}),
        ),
        (
            "custom",
            json!({"i": 8}),
            json!({"timestamp": TS, "jobId": "my-id"}),
        ),
        (
            "custom",
            json!({"i": 9}),
            json!({"timestamp": TS, "jobId": "my-id"}),
        ),
        (
            "dedup",
            json!({"i": 10}),
            json!({"timestamp": TS, "deduplication": {"id": "dd"}}),
        ),
        (
            "dedup",
            json!({"i": 11}),
            json!({"timestamp": TS, "deduplication": {"id": "dd"}}),
        ),
        (
            "retry",
            json!({"i": 12}),
            json!({"timestamp": TS, "attempts": 3, "backoff": {"type": "exponential", "delay": 100}, "removeOnComplete": 10}),
        ),
    ]
}

/// Key suffix -> comparable content; JSON hash fields are parsed (key order may differ).
async fn snapshot(raw: &Client, queue: &str) -> Result<BTreeMap<String, Json>> {
    let base = format!("bull:{queue}:");
    let mut out = BTreeMap::new();
    for key in queue_keys(queue).await? {
        let kind: String = raw.r#type(&key).await?;
        let content = match kind.as_str() {
            "hash" => {
                let hash: HashMap<String, String> = raw.hgetall(&key).await?;
                let fields: serde_json::Map<String, Json> = hash
                    .into_iter()
                    .map(|(k, v)| {
                        let parsed = match k.as_str() {
                            "data" | "opts" | "parent" => {
                                serde_json::from_str(&v).unwrap_or(Json::String(v))
                            }
                            _ => Json::String(v),
                        };
                        (k, parsed)
                    })
                    .collect();
                Json::Object(fields)
            }
            "list" => json!(raw.lrange::<Vec<String>, _>(&key, 0, -1).await?),
            "zset" => {
                let v: Vec<(String, f64)> =
                    raw.zrange(&key, 0, -1, None, false, None, true).await?;
                json!(v)
            }
            "string" => json!(raw.get::<String, _>(&key).await?),
            "stream" => {
                let events = read_events(queue).await?;
                json!(events
                    .iter()
                    .map(|e| (e.event.clone(), e.fields.clone()))
                    .collect::<Vec<_>>())
            }
            other => json!(other),
        };
        out.insert(key.trim_start_matches(&base).to_string(), content);
    }
    Ok(out)
}

fn options(opts: &Json) -> JobOptions {
    serde_json::from_value(opts.clone()).expect("valid options")
}

#[tokio::test]
async fn adds_leave_the_same_redis_state_as_node() -> Result<()> {
    if !node_available() {
        return Ok(());
    }
    let ours = unique_queue("qp-rust");
    let theirs = unique_queue("qp-node");
    let queue = Queue::new(&ours, QueueOptions::from_env()?).await?;
    for (name, data, opts) in jobs() {
        queue.add_job(name, data, options(&opts)).await?;
    }
    let node_jobs: Vec<Json> = jobs()
        .into_iter()
        .map(|(name, data, opts)| json!({"name": name, "data": data, "opts": opts}))
        .collect();
    run_node("add_jobs.js", &json!({"queue": theirs, "jobs": node_jobs})).await?;

    let raw = raw_client().await?;
    let (mine, node) = (snapshot(&raw, &ours).await?, snapshot(&raw, &theirs).await?);
    for key in [
        "wait",
        "prioritized",
        "delayed",
        "marker",
        "pc",
        "id",
        "meta",
        "events",
        "de:dd",
        "my-id",
    ] {
        assert!(node.contains_key(key), "Node left no `{key}`: {node:?}");
    }
    assert_eq!(
        mine.keys().collect::<Vec<_>>(),
        node.keys().collect::<Vec<_>>()
    );
    for (key, value) in &node {
        assert_eq!(&mine[key], value, "key `{key}` differs");
    }
    queue.close().await?;
    cleanup(&ours).await?;
    cleanup(&theirs).await?;
    Ok(())
}

#[tokio::test]
async fn bulk_adds_leave_the_same_redis_state_as_node_add_bulk() -> Result<()> {
    if !node_available() {
        return Ok(());
    }
    let ours = unique_queue("qp-rust-bulk");
    let theirs = unique_queue("qp-node-bulk");
    let queue = Queue::new(&ours, QueueOptions::from_env()?).await?;
    queue
        .add_bulk(
            jobs()
                .into_iter()
                .map(|(name, data, opts)| (name, data, options(&opts))),
        )
        .await?;
    let node_jobs: Vec<Json> = jobs()
        .into_iter()
        .map(|(name, data, opts)| json!({"name": name, "data": data, "opts": opts}))
        .collect();
    run_node(
        "add_jobs.js",
        &json!({"queue": theirs, "bulk": true, "jobs": node_jobs}),
    )
    .await?;

    let raw = raw_client().await?;
    let (mine, node) = (snapshot(&raw, &ours).await?, snapshot(&raw, &theirs).await?);
    assert_eq!(mine, node);
    queue.close().await?;
    cleanup(&ours).await?;
    cleanup(&theirs).await?;
    Ok(())
}

/// One admin step, replayed through our `Queue` and through Node's.
async fn both(queue: &Queue, node_queue: &str, op: Json) -> Result<()> {
    let mut node_args = op.clone();
    node_args["queue"] = json!(node_queue);
    run_node("admin.js", &node_args).await?;
    let id = op["id"].as_str().unwrap_or_default();
    match op["op"].as_str().unwrap_or_default() {
        "pause" => queue.pause().await?,
        "resume" => queue.resume().await?,
        "remove" => {
            queue.remove(id).await?;
        }
        "updateProgress" => queue.update_progress(id, &op["progress"]).await?,
        "log" => {
            let keep = op["keepLogs"].as_u64();
            queue
                .add_job_log(id, op["row"].as_str().unwrap_or_default(), keep)
                .await?;
        }
        "updateData" => queue.update_data(id, &op["data"]).await?,
        "clean" => {
            let state = op["type"].as_str().unwrap_or("completed").parse()?;
            let grace = std::time::Duration::from_millis(op["grace"].as_u64().unwrap_or(0));
            queue
                .clean(
                    ractor_bullmq::CleanOptions::new(grace)
                        .limit(op["limit"].as_u64().unwrap_or(0))
                        .state(state),
                )
                .await?;
        }
        "drain" => {
            queue
                .drain(op["delayed"].as_bool().unwrap_or(false))
                .await?;
        }
        "obliterate" => {
            queue
                .obliterate(op["force"].as_bool().unwrap_or(false))
                .await?
        }
        other => panic!("no such step {other}"),
    }
    Ok(())
}

#[tokio::test]
async fn admin_operations_leave_the_same_redis_state_as_node() -> Result<()> {
    if !node_available() {
        return Ok(());
    }
    let ours = unique_queue("qp-rust-admin");
    let theirs = unique_queue("qp-node-admin");
    let queue = Queue::new(&ours, QueueOptions::from_env()?).await?;
    let (q, t) = (&queue, theirs.as_str());
    let add = move |name: &'static str, opts: Json| async move {
        q.add_job(name, json!({}), options(&opts)).await?;
        let job = json!({"name": name, "data": {}, "opts": opts});
        run_node("add_jobs.js", &json!({"queue": t, "jobs": [job]})).await?;
        anyhow::Ok(())
    };
    for (name, _, opts) in jobs() {
        add(name, opts).await?;
    }
    both(&queue, &theirs, json!({"op": "pause"})).await?;
    add("while-paused", json!({"timestamp": TS})).await?;
    both(&queue, &theirs, json!({"op": "resume"})).await?;
    both(&queue, &theirs, json!({"op": "remove", "id": "2"})).await?;
    both(&queue, &theirs, json!({"op": "remove", "id": "5"})).await?;
    both(
        &queue,
        &theirs,
        json!({"op": "updateProgress", "id": "1", "progress": {"pct": 50}}),
    )
    .await?;
    for row in ["a", "b", "c"] {
        both(
            &queue,
            &theirs,
            json!({"op": "log", "id": "1", "row": row, "keepLogs": 2}),
        )
        .await?;
    }
    both(
        &queue,
        &theirs,
        json!({"op": "updateData", "id": "1", "data": {"i": 100}}),
    )
    .await?;

    let raw = raw_client().await?;
    let (mine, node) = (snapshot(&raw, &ours).await?, snapshot(&raw, &theirs).await?);
    assert!(
        node.contains_key("1:logs") && !node.contains_key("2"),
        "{node:?}"
    );
    assert_eq!(
        mine, node,
        "after pause/add/resume/remove/progress/log/data"
    );

    both(
        &queue,
        &theirs,
        json!({"op": "clean", "grace": 0, "limit": 2, "type": "wait"}),
    )
    .await?;
    both(
        &queue,
        &theirs,
        json!({"op": "clean", "grace": 0, "limit": 1, "type": "prioritized"}),
    )
    .await?;
    both(&queue, &theirs, json!({"op": "drain", "delayed": false})).await?;
    let (mine, node) = (snapshot(&raw, &ours).await?, snapshot(&raw, &theirs).await?);
    assert!(node.contains_key("delayed"), "{node:?}");
    assert_eq!(mine, node, "after clean/drain");

    both(&queue, &theirs, json!({"op": "obliterate", "force": true})).await?;
    assert!(snapshot(&raw, &theirs).await?.is_empty());
    assert!(snapshot(&raw, &ours).await?.is_empty());
    queue.close().await?;
    cleanup(&ours).await?;
    cleanup(&theirs).await?;
    Ok(())
}

#[tokio::test]
async fn deduplication_modes_leave_the_same_redis_state_as_node() -> Result<()> {
    if !node_available() {
        return Ok(());
    }
    let ours = unique_queue("qp-rust-dedup");
    let theirs = unique_queue("qp-node-dedup");
    let queue = Queue::new(&ours, QueueOptions::from_env()?).await?;
    let replace = json!({"id": "rep", "ttl": 100_000, "replace": true});
    let extend = json!({"id": "ext", "ttl": 100_000, "extend": true});
    let reschedule = json!({"id": "res", "reschedule": true});
    let cases = vec![
        (
            "r",
            json!({"timestamp": TS, "delay": 5000, "deduplication": replace}),
        ),
        (
            "r",
            json!({"timestamp": TS + 1, "delay": 6000, "deduplication": replace}),
        ),
        ("x", json!({"timestamp": TS, "deduplication": extend})),
        ("x", json!({"timestamp": TS, "deduplication": extend})),
        (
            "s",
            json!({"timestamp": TS, "delay": 5000, "deduplication": reschedule}),
        ),
        (
            "s",
            json!({"timestamp": TS + 2, "delay": 9000, "deduplication": reschedule}),
        ),
    ];
    let mut node_jobs = Vec::new();
    for (i, (name, opts)) in cases.into_iter().enumerate() {
        queue
            .add_job(name, json!({ "i": i }), options(&opts))
            .await?;
        node_jobs.push(json!({"name": name, "data": {"i": i}, "opts": opts}));
    }
    run_node("add_jobs.js", &json!({"queue": theirs, "jobs": node_jobs})).await?;

    let raw = raw_client().await?;
    let (mine, node) = (snapshot(&raw, &ours).await?, snapshot(&raw, &theirs).await?);
    let events = node["events"].to_string();
    assert!(
        events.contains("removed") && events.contains("deduplicated"),
        "{events}"
    );
    assert_eq!(mine, node);
    queue.close().await?;
    cleanup(&ours).await?;
    cleanup(&theirs).await?;
    Ok(())
}
