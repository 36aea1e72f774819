//! Interop on BullMQ's PostgreSQL protocol, with the real clients, on schemas Node BullMQ
//! 6.7.0's migrator made: a Node producer feeds our supervised Worker while Node's QueueEvents
//! listens; our producer feeds Node's Worker; a Python (PyPI bullmq) producer feeds ours; and a
//! mixed fleet (our Worker and Node's on one queue, global concurrency set by Node) completes
//! every job exactly once without ever exceeding the limit. Skips loudly without PostgreSQL or
//! Node.

mod common;
mod worker_common;

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use bullmq_backend::Backend;
use common::pg::*;
use ractor_bullmq::protocol::JobOptions;
use ractor_bullmq::{Queue, QueueEventsProducer, QueueOptions, Worker, WorkerArgs, WorkerOptions};
use serde_json::{json, Value as Json};

fn finished_sql(schema: &str, queue: &str) -> String {
    format!(
        "SELECT count(*) FROM \"{schema}\".job WHERE queue = '{queue}' \
           AND state IN ('completed', 'failed')"
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn node_producer_feeds_our_worker_and_node_queue_events_hears_it() -> Result<()> {
    if !pg_and_node_available() {
        return Ok(());
    }
    let schema = FreshSchema::migrated_by_node().await?;
    let queue = common::unique_queue("pg-node-producer");
    let backend = pg_backend(&schema.name).await?;

    // Node's QueueEvents reads from the first event, until our producer's `test-end`.
    let listener = {
        let (schema, queue) = (schema.name.clone(), queue.clone());
        tokio::spawn(async move {
            run_node_pg(
                "listen_events.js",
                &schema,
                &json!({"queue": queue, "timeoutMs": 90_000}),
            )
            .await
        })
    };

    let jobs = json!([
        {"name": "plain", "data": {"n": 1}},
        {"name": "progress", "data": {"progress": [10, {"step": 2}], "log": "a line"}},
        {"name": "retried", "data": {"failAttempts": 1}, "opts": {"attempts": 2}},
        {"name": "failing", "data": {"fail": "no luck"}},
        {"name": "prioritized", "data": {"n": 2}, "opts": {"priority": 3}},
        {"name": "delayed", "data": {"n": 3}, "opts": {"delay": 300}},
        {"name": "custom", "data": {"returnValue": [1, "two"]}, "opts": {"jobId": "custom-1"}},
    ]);
    let added = run_node_pg(
        "add_jobs.js",
        &schema.name,
        &json!({"queue": queue, "jobs": jobs}),
    )
    .await?;
    let ids: Vec<String> = added["ids"]
        .as_array()
        .context("ids")?
        .iter()
        .map(|v| v.as_str().unwrap_or_default().to_string())
        .collect();
    assert_eq!(ids.len(), 7);

    let args = WorkerArgs::open(
        backend.as_ref(),
        &queue,
        worker_common::scripted,
        WorkerOptions::new().concurrency(4).name("rust-pg"),
    )
    .await?;
    let worker = Worker::spawn(args).await?;
    until_count(
        &finished_sql(&schema.name, &queue),
        7,
        Duration::from_secs(60),
    )
    .await?;

    // Node reads back what our Worker wrote.
    let read = run_node_pg(
        "read_jobs.js",
        &schema.name,
        &json!({"queue": queue, "ids": ids}),
    )
    .await?;
    let by_name: BTreeMap<String, Json> = read["jobs"]
        .as_array()
        .context("jobs")?
        .iter()
        .map(|j| {
            (
                j["name"].as_str().unwrap_or_default().to_string(),
                j.clone(),
            )
        })
        .collect();
    assert_eq!(by_name["plain"]["state"], "completed");
    assert_eq!(
        by_name["plain"]["returnvalue"],
        json!({"processedBy": "rust"})
    );
    assert_eq!(by_name["custom"]["returnvalue"], json!([1, "two"]));
    assert_eq!(by_name["retried"]["state"], "completed");
    assert_eq!(by_name["retried"]["attemptsMade"], 2);
    assert_eq!(by_name["failing"]["state"], "failed");
    assert_eq!(by_name["failing"]["failedReason"], "no luck");
    assert_eq!(by_name["progress"]["progress"], json!({"step": 2}));
    assert_eq!(by_name["plain"]["processedBy"], "rust-pg");

    // Our QueueEventsProducer ends Node's listener.
    let producer = QueueEventsProducer::with_backend(&queue, backend.as_ref(), None).await?;
    producer
        .publish_event("test-end", [("by", "rust")], 10_000)
        .await?;
    let heard = listener.await??;

    // The stored log is complete: each job's events from `added` to its end.
    let stored: Vec<(i64, String, String)> = psql(&format!(
        "SELECT id, event, COALESCE(data->>'jobId', '') FROM \"{}\".event \
          WHERE queue = '{queue}' ORDER BY id",
        schema.name
    ))?
    .lines()
    .map(|l| {
        let mut parts = l.splitn(3, '|');
        let id = parts.next().unwrap_or("0").parse().unwrap_or(0);
        let event = parts.next().unwrap_or("").to_string();
        let job = parts.next().unwrap_or("").to_string();
        (id, event, job)
    })
    .collect();
    let mut events: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for (_, event, job) in &stored {
        if !job.is_empty() {
            events.entry(job.clone()).or_default().push(event.clone());
        }
    }
    for id in &ids {
        let names = &events[id];
        assert_eq!(
            names.first().map(String::as_str),
            Some("added"),
            "{id}: {names:?}"
        );
        let last = names.last().map(String::as_str);
        assert!(
            matches!(
                last,
                Some("completed") | Some("failed") | Some("retries-exhausted")
            ),
            "{id} ends finished: {names:?}"
        );
        assert!(names.contains(&"active".to_string()), "{id}: {names:?}");
    }
    let progress = &events[&ids[1]];
    assert_eq!(
        progress.iter().filter(|n| *n == "progress").count(),
        2,
        "{progress:?}"
    );
    let retried = &events[&ids[2]];
    assert_eq!(
        retried.iter().filter(|n| *n == "active").count(),
        2,
        "two attempts: {retried:?}"
    );

    // Node's QueueEvents delivered stored events only, each once, in id order. It may miss
    // some: it reads "ids above the last one seen", so an event whose transaction commits
    // after a higher id was read is skipped (Node 6.7's reader; /work/shared notes and
    // docs/guides/postgres.md). Ours, below, hears them all.
    let stored_ids: Vec<i64> = stored.iter().map(|(id, _, _)| *id).collect();
    let node_ids: Vec<i64> = heard["events"]
        .as_array()
        .context("events")?
        .iter()
        .filter_map(|e| e["id"].as_str().and_then(|id| id.parse().ok()))
        .collect();
    assert!(
        node_ids.windows(2).all(|w| w[0] < w[1]),
        "Node's in id order"
    );
    assert!(
        node_ids.iter().all(|id| stored_ids.contains(id)),
        "Node's are stored"
    );
    let ours = backend
        .event_stream(&ractor_bullmq::protocol::QueueId::new("bull", &queue))
        .await?;
    let mut seen = Vec::new();
    let mut cursor = "0".to_string();
    while seen.len() < stored_ids.len() {
        let batch = ours.read(&cursor, Duration::from_secs(2), 100).await?;
        if batch.is_empty() {
            break;
        }
        for entry in batch {
            cursor = entry.id.clone();
            seen.push(entry.id.parse::<i64>()?);
        }
    }
    ours.close().await;
    assert_eq!(
        seen, stored_ids,
        "our reader hears every stored event, in order"
    );
    eprintln!(
        "Node's QueueEvents heard {} of {} events, ours {}",
        node_ids.len(),
        stored_ids.len(),
        seen.len()
    );
    worker.close().await?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn our_producer_feeds_nodes_worker() -> Result<()> {
    if !pg_and_node_available() {
        return Ok(());
    }
    let schema = FreshSchema::migrated_by_node().await?;
    let name = common::unique_queue("pg-rust-producer");
    let backend = pg_backend(&schema.name).await?;
    let queue = Queue::with_backend(&name, backend.as_ref(), QueueOptions::default()).await?;
    let mut ids = Vec::new();
    for i in 0..5 {
        let job = queue
            .add("ours", json!({"i": i, "returnValue": {"i": i}}))
            .await?;
        ids.push(job.id().to_string());
    }
    let bulk = queue
        .add_bulk((0..3).map(|i| ("bulk", json!({"b": i}), JobOptions::default())))
        .await?;
    ids.extend(bulk.iter().map(|j| j.id().to_string()));
    let ran = run_node_pg(
        "run_worker.js",
        &schema.name,
        &json!({"queue": name, "stopAfter": 8, "timeoutMs": 60_000}),
    )
    .await?;
    let completed: BTreeSet<String> = ran["completed"]
        .as_array()
        .context("completed")?
        .iter()
        .map(|c| c["id"].as_str().unwrap_or_default().to_string())
        .collect();
    assert_eq!(completed, ids.iter().cloned().collect::<BTreeSet<_>>());
    for (i, id) in ids.iter().take(5).enumerate() {
        let job = queue.get_job(id).await?.context("kept")?;
        assert_eq!(job.returnvalue(), Some(&json!({"i": i})));
    }
    queue.close().await?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_producer_feeds_our_worker() -> Result<()> {
    if !pg_and_node_available() {
        return Ok(());
    }
    let Some(python) = python_pg() else {
        return Ok(());
    };
    let schema = FreshSchema::migrated_by_node().await?;
    let queue = common::unique_queue("pg-python");
    let added = python_pg_add(
        &python,
        &schema.name,
        &queue,
        &json!([
            {"name": "py", "data": {"from": "python"}},
            {"name": "py2", "data": {"returnValue": "ok"}, "opts": {"attempts": 2}},
        ]),
    )
    .await?;
    let backend = pg_backend(&schema.name).await?;
    let args = WorkerArgs::open(
        backend.as_ref(),
        &queue,
        worker_common::scripted,
        WorkerOptions::new(),
    )
    .await?;
    let worker = Worker::spawn(args).await?;
    until_count(
        &finished_sql(&schema.name, &queue),
        2,
        Duration::from_secs(30),
    )
    .await?;
    let states = psql(&format!(
        "SELECT string_agg(state::text || ':' || COALESCE(return_value::text, ''), ',' ORDER BY id) \
           FROM \"{}\".job WHERE queue = '{queue}'",
        schema.name
    ))?;
    assert_eq!(
        states, "completed:{\"processedBy\": \"rust\"},completed:\"ok\"",
        "{added:?}"
    );
    worker.close().await?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_mixed_fleet_under_nodes_global_concurrency_completes_each_job_once() -> Result<()> {
    if !pg_and_node_available() {
        return Ok(());
    }
    const JOBS: usize = 60;
    const LIMIT: i64 = 3;
    for run in 0..3 {
        let schema = FreshSchema::migrated_by_node().await?;
        let queue = common::unique_queue("pg-fleet");
        run_node_pg(
            "admin.js",
            &schema.name,
            &json!({"queue": queue, "op": "setGlobalConcurrency", "concurrency": LIMIT}),
        )
        .await?;
        let jobs: Vec<Json> = (0..JOBS)
            .map(|i| json!({"name": "j", "data": {"i": i, "sleepMs": 60}}))
            .collect();
        run_node_pg(
            "add_jobs.js",
            &schema.name,
            &json!({"queue": queue, "jobs": jobs, "bulk": true}),
        )
        .await?;

        // Sample the active count while both fleets run.
        let sampler = {
            let sql = format!(
                "SELECT count(*) FROM \"{}\".job WHERE queue = '{queue}' AND state = 'active'",
                schema.name
            );
            let done = finished_sql(&schema.name, &queue);
            tokio::task::spawn_blocking(move || -> Result<i64> {
                let mut max = 0;
                let start = Instant::now();
                while start.elapsed() < Duration::from_secs(90) {
                    max = max.max(psql(&sql)?.parse::<i64>().unwrap_or(0));
                    if psql(&done)?.parse::<usize>().unwrap_or(0) >= JOBS {
                        break;
                    }
                }
                Ok(max)
            })
        };
        // Node's Worker first (its process takes a moment to start), then ours. Each may hold 2
        // of the 3 slots, so both must take part (a worker that finishes and claims in one
        // transaction keeps its slots otherwise).
        let node = {
            let (schema, queue) = (schema.name.clone(), queue.clone());
            tokio::spawn(async move {
                run_node_pg(
                    "run_worker.js",
                    &schema,
                    &json!({"queue": queue, "concurrency": 2, "idleMs": 3000,
                            "timeoutMs": 90_000, "name": "node"}),
                )
                .await
            })
        };
        until_count(
            &format!(
                "SELECT count(*) FROM pg_stat_activity WHERE application_name = '{queue}:w:node'"
            ),
            1,
            Duration::from_secs(30),
        )
        .await?;
        let backend = pg_backend(&schema.name).await?;
        let args = WorkerArgs::open(
            backend.as_ref(),
            &queue,
            worker_common::scripted,
            WorkerOptions::new().concurrency(2).name("rust"),
        )
        .await?;
        let ours = Worker::spawn(args).await?;
        until_count(
            &finished_sql(&schema.name, &queue),
            JOBS as i64,
            Duration::from_secs(90),
        )
        .await?;
        let max_active = sampler.await??;
        ours.close().await?;
        let node = node.await??;
        assert!(
            max_active <= LIMIT,
            "run {run}: {max_active} active against a limit of {LIMIT}"
        );
        // Exactly once: one `completed` event per job, and every job completed.
        let completions = psql(&format!(
            "SELECT count(*), count(DISTINCT data->>'jobId') FROM \"{}\".event \
              WHERE queue = '{queue}' AND event = 'completed'",
            schema.name
        ))?;
        assert_eq!(completions, format!("{JOBS}|{JOBS}"), "run {run}");
        let by_node = node["completed"].as_array().map_or(0, Vec::len);
        let by_us: i64 = psql(&format!(
            "SELECT count(*) FROM \"{}\".job WHERE queue = '{queue}' AND processed_by = 'rust'",
            schema.name
        ))?
        .parse()?;
        eprintln!(
            "run {run}: Node completed {by_node}, we completed {by_us}, max active {max_active}"
        );
        assert!(by_node > 0 && by_us > 0, "run {run}: both fleets took part");
        assert_eq!(by_node + usize::try_from(by_us)?, JOBS, "run {run}");
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn get_workers_on_either_side_lists_both_fleets() -> Result<()> {
    if !pg_and_node_available() {
        return Ok(());
    }
    let schema = FreshSchema::migrated_by_node().await?;
    let queue = common::unique_queue("pg-workers");
    let backend = pg_backend(&schema.name).await?;
    // Node's Worker idles (nothing to do) for a while; ours joins it.
    let node = {
        let (schema, queue) = (schema.name.clone(), queue.clone());
        tokio::spawn(async move {
            run_node_pg(
                "run_worker.js",
                &schema,
                &json!({"queue": queue, "idleMs": 8000, "timeoutMs": 30_000, "name": "node"}),
            )
            .await
        })
    };
    until_count(
        &format!("SELECT count(*) FROM pg_stat_activity WHERE application_name = '{queue}:w:node'"),
        1,
        Duration::from_secs(30),
    )
    .await?;
    let args = WorkerArgs::open(
        backend.as_ref(),
        &queue,
        worker_common::scripted,
        WorkerOptions::new().name("rust"),
    )
    .await?;
    let ours = Worker::spawn(args).await?;
    let expected = vec![format!("{queue}:w:node"), format!("{queue}:w:rust")];
    let theirs = run_node_pg(
        "admin.js",
        &schema.name,
        &json!({"queue": queue, "op": "getWorkers"}),
    )
    .await?;
    assert_eq!(
        theirs["result"],
        json!(expected),
        "Node's getWorkers: {theirs}"
    );
    let queue_handle =
        Queue::with_backend(&queue, backend.as_ref(), QueueOptions::default()).await?;
    let mut listed: Vec<String> = queue_handle
        .get_workers()
        .await?
        .into_iter()
        .map(|w| w.raw_name)
        .collect();
    listed.sort();
    assert_eq!(listed, expected, "our get_workers");
    ours.close().await?;
    node.await??;
    queue_handle.close().await?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deduplication_made_by_one_side_is_honoured_by_the_other() -> Result<()> {
    if !pg_and_node_available() {
        return Ok(());
    }
    let schema = FreshSchema::migrated_by_node().await?;
    let name = common::unique_queue("pg-dedup");
    let backend = pg_backend(&schema.name).await?;
    let queue = Queue::with_backend(&name, backend.as_ref(), QueueOptions::default()).await?;
    let dedup =
        |id: &str| JobOptions::new().deduplication(ractor_bullmq::protocol::Deduplication::new(id));

    // Node first, then us: our add is deduplicated into Node's job.
    let theirs = run_node_pg(
        "add_jobs.js",
        &schema.name,
        &json!({"queue": name, "jobs": [{"name": "n", "data": {}, "opts": {"deduplication": {"id": "from-node"}}}]}),
    )
    .await?;
    let node_id = theirs["ids"][0].as_str().context("id")?.to_string();
    let ours = queue.add("r", json!({})).opts(dedup("from-node")).await?;
    assert_eq!(ours.id(), node_id, "deduplicated into Node's job");

    // Us first, then Node: Node's add returns our job's id.
    let first = queue.add("r", json!({})).opts(dedup("from-rust")).await?;
    let theirs = run_node_pg(
        "add_jobs.js",
        &schema.name,
        &json!({"queue": name, "jobs": [{"name": "n", "data": {}, "opts": {"deduplication": {"id": "from-rust"}}}]}),
    )
    .await?;
    assert_eq!(
        theirs["ids"][0],
        json!(first.id()),
        "Node deduplicated into ours"
    );
    assert_eq!(
        queue
            .get_deduplication_job_id("from-rust")
            .await?
            .as_deref(),
        Some(first.id())
    );

    let counts = psql(&format!(
        "SELECT count(*) FROM \"{}\".job WHERE queue = '{name}'",
        schema.name
    ))?;
    assert_eq!(counts, "2", "one job per deduplication id");
    let deduplicated = psql(&format!(
        "SELECT count(*) FROM \"{}\".event WHERE queue = '{name}' AND event = 'deduplicated'",
        schema.name
    ))?;
    assert_eq!(deduplicated, "2");
    queue.close().await?;
    Ok(())
}
