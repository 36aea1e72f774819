//! Flows and job schedulers on BullMQ's PostgreSQL protocol, with the real clients, on schemas
//! Node BullMQ 6.7.0's migrator made: a flow across two queues added by Node's FlowProducer is
//! completed by our Workers (each parent after its children) and read back by Node; a flow
//! added by our FlowProducer is completed by Node's Workers and read back by both sides; job
//! schedulers upserted by Node (every and cron) have their iterations run and continued by our
//! Worker, and one upserted by us is continued by Node's Worker. Skips loudly without
//! PostgreSQL or Node.

mod common;
mod worker_common;

use std::collections::BTreeMap;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use bullmq_postgres::PostgresBackend;
use common::pg::*;
use ractor_bullmq::flow::{FlowJob, FlowProducer, FlowProducerOptions, GetFlowOptions, JobNode};
use ractor_bullmq::protocol::JobOptions;
use ractor_bullmq::{
    Queue, QueueOptions, Repeat, SchedulerTemplate, Worker, WorkerArgs, WorkerHandle, WorkerOptions,
};
use serde_json::{json, Value as Json};

/// One job row as psql reads it.
#[derive(Debug)]
struct Row {
    state: String,
    started: i64,
    finished: i64,
}

/// Every job of `queues` by `<queue>:<id>`: state, start and finish times (0 when unset).
fn rows(schema: &str, queues: &[&str]) -> Result<BTreeMap<String, Row>> {
    let list = queues
        .iter()
        .map(|q| format!("'{q}'"))
        .collect::<Vec<_>>()
        .join(", ");
    let out = psql(&format!(
        "SELECT queue || ':' || id, state, COALESCE(processed_at_ms, 0), \
                COALESCE(finished_at_ms, 0) \
           FROM \"{schema}\".job WHERE queue IN ({list})"
    ))?;
    let mut jobs = BTreeMap::new();
    for line in out.lines() {
        let cols: Vec<&str> = line.split('|').collect();
        let [key, state, started, finished] = cols.as_slice() else {
            bail!("unexpected psql line {line:?}");
        };
        jobs.insert(
            (*key).to_string(),
            Row {
                state: (*state).to_string(),
                started: started.parse()?,
                finished: finished.parse()?,
            },
        );
    }
    Ok(jobs)
}

/// Asserts that the job `parent` started only after each of `children` finished.
fn after_children(jobs: &BTreeMap<String, Row>, parent: &str, children: &[String]) {
    let p = &jobs[parent];
    for child in children {
        let c = &jobs[child];
        assert_eq!(c.state, "completed", "{child}: {c:?}");
        assert!(
            p.started >= c.finished,
            "{parent} started at {} before its child {child} finished at {}",
            p.started,
            c.finished
        );
    }
}

fn id_of(node: &Json) -> String {
    node["id"].as_str().unwrap_or_default().to_string()
}

/// The child of `node` named `name`.
fn child<'a>(node: &'a Json, name: &str) -> &'a Json {
    node["children"]
        .as_array()
        .and_then(|c| c.iter().find(|c| c["name"] == name))
        .unwrap_or_else(|| panic!("no child {name} in {node}"))
}

/// Node's `getDependencies` / `getDependenciesCount` / `getState` of a job.
async fn node_dependencies(schema: &str, queue: &str, id: &str) -> Result<Json> {
    run_node_pg(
        "flows.js",
        schema,
        &json!({"op": "getDependencies", "queueName": queue, "id": id}),
    )
    .await
}

async fn worker(backend: &PostgresBackend, queue: &str) -> Result<WorkerHandle> {
    let args = WorkerArgs::open(
        backend,
        queue,
        worker_common::scripted,
        WorkerOptions::new().concurrency(2).name("rust-pg"),
    )
    .await?;
    Ok(Worker::spawn(args).await?)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn node_flow_across_two_queues_is_completed_by_our_workers() -> Result<()> {
    if !pg_and_node_available() {
        return Ok(());
    }
    let schema = FreshSchema::migrated_by_node().await?;
    let (qa, qb) = (
        common::unique_queue("pg-flow-a"),
        common::unique_queue("pg-flow-b"),
    );
    // root (a) <- mid (b, custom id) <- leaf (a); root <- side (b).
    let flow = json!({
        "name": "root", "queueName": qa, "data": {"returnValue": "root-done"},
        "children": [
            {"name": "mid", "queueName": qb, "data": {"returnValue": {"mid": 1}},
             "opts": {"jobId": "mid"},
             "children": [{"name": "leaf", "queueName": qa, "data": {"returnValue": "leaf"}}]},
            {"name": "side", "queueName": qb, "data": {"returnValue": 2}},
        ]
    });
    let added = run_node_pg(
        "flows.js",
        &schema.name,
        &json!({"op": "add", "flow": flow}),
    )
    .await?;
    let tree = &added["tree"];
    let root = id_of(tree);
    let side = id_of(child(tree, "side"));
    let leaf = id_of(child(child(tree, "mid"), "leaf"));
    assert!(
        !root.is_empty() && !side.is_empty() && !leaf.is_empty(),
        "{added}"
    );

    let backend = pg_backend(&schema.name).await?;
    let wa = worker(&backend, &qa).await?;
    let wb = worker(&backend, &qb).await?;
    until_count(
        &format!(
            "SELECT count(*) FROM \"{}\".job WHERE queue = '{qa}' AND id = '{root}' \
               AND state = 'completed'",
            schema.name
        ),
        1,
        Duration::from_secs(60),
    )
    .await?;
    wa.close().await?;
    wb.close().await?;

    // Each parent ran only after its children had finished.
    let jobs = rows(&schema.name, &[&qa, &qb])?;
    assert_eq!(jobs.len(), 4, "{jobs:?}");
    let key = |q: &str, id: &str| format!("{q}:{id}");
    after_children(&jobs, &key(&qb, "mid"), &[key(&qa, &leaf)]);
    after_children(&jobs, &key(&qa, &root), &[key(&qb, "mid"), key(&qb, &side)]);

    // Node sees the finished flow: getFlow walks it, getDependencies shows the values.
    let read = run_node_pg(
        "flows.js",
        &schema.name,
        &json!({"op": "getFlow", "id": root, "queueName": qa}),
    )
    .await?;
    let read = &read["tree"];
    assert_eq!(read["name"], "root");
    let mid = child(read, "mid");
    assert_eq!(mid["parentKey"], json!(key(&qa, &root)));
    assert_eq!(child(mid, "leaf")["parentKey"], json!(key(&qb, "mid")));
    assert_eq!(child(read, "side")["queueName"], json!(qb));

    let deps = node_dependencies(&schema.name, &qa, &root).await?;
    assert_eq!(deps["state"], "completed");
    assert_eq!(
        deps["dependencies"]["processed"],
        json!({ key(&qb, "mid"): {"mid": 1}, key(&qb, &side): 2 })
    );
    assert_eq!(deps["dependencies"]["unprocessed"], json!([]));
    assert_eq!(
        deps["counts"],
        json!({"processed": 2, "unprocessed": 0, "ignored": 0, "failed": 0})
    );
    let mid_deps = node_dependencies(&schema.name, &qb, "mid").await?;
    assert_eq!(
        mid_deps["dependencies"]["processed"],
        json!({ key(&qa, &leaf): "leaf" })
    );

    // Our reads name the same children with the seam's prefix.
    let queue = Queue::with_backend(&qa, backend.as_ref(), QueueOptions::default()).await?;
    let ours = queue.get_dependencies(&root).await?;
    let processed: BTreeMap<String, Json> = ours.processed.clone().into_iter().collect();
    assert_eq!(
        processed,
        BTreeMap::from([
            (format!("bull:{qb}:mid"), json!({"mid": 1})),
            (format!("bull:{qb}:{side}"), json!(2)),
        ])
    );
    let job = queue.get_job(&root).await?.context("root kept")?;
    assert_eq!(job.returnvalue(), Some(&json!("root-done")));
    queue.close().await?;
    Ok(())
}

/// Names and ids of a [`JobNode`] tree, each node's children sorted by name.
fn shape(node: &JobNode) -> Json {
    let mut children: Vec<Json> = node.children.iter().map(shape).collect();
    children.sort_by_key(|c| c["name"].as_str().unwrap_or_default().to_string());
    json!({
        "id": node.job.id(),
        "name": node.job.name(),
        "parentKey": node.job.parent_key(),
        "children": children,
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn our_flow_is_completed_by_nodes_workers() -> Result<()> {
    if !pg_and_node_available() {
        return Ok(());
    }
    let schema = FreshSchema::migrated_by_node().await?;
    let (qa, qb) = (
        common::unique_queue("pg-ourflow-a"),
        common::unique_queue("pg-ourflow-b"),
    );
    let backend = pg_backend(&schema.name).await?;
    let producer =
        FlowProducer::with_backend(backend.as_ref(), FlowProducerOptions::default()).await?;
    let flow = FlowJob::new("root", qa.as_str())
        .data(json!({"returnValue": {"root": true}}))
        .children([
            FlowJob::new("far", qb.as_str())
                .data(json!({"returnValue": "far"}))
                .opts(JobOptions::new().job_id("far-1")),
            FlowJob::new("near", qa.as_str()).data(json!({"returnValue": 7})),
        ]);
    let added = producer.add(flow).await?;
    let root = added.job.id().to_string();
    let near = added
        .children
        .iter()
        .find(|c| c.job.name() == "near")
        .context("near")?
        .job
        .id()
        .to_string();

    // Node sees the parent waiting for both children, named as Node names them.
    let deps = node_dependencies(&schema.name, &qa, &root).await?;
    assert_eq!(deps["state"], "waiting-children");
    let mut pending: Vec<String> =
        serde_json::from_value(deps["dependencies"]["unprocessed"].clone())?;
    pending.sort();
    let mut expected = vec![format!("{qa}:{near}"), format!("{qb}:far-1")];
    expected.sort();
    assert_eq!(pending, expected);

    // Node's Workers: queue b's child first, then queue a's child and the root it releases.
    let ran_b = run_node_pg(
        "run_worker.js",
        &schema.name,
        &json!({"queue": qb, "stopAfter": 1, "timeoutMs": 30_000}),
    )
    .await?;
    assert_eq!(ran_b["completed"][0]["id"], "far-1", "{ran_b}");
    let ran_a = run_node_pg(
        "run_worker.js",
        &schema.name,
        &json!({"queue": qa, "stopAfter": 2, "timeoutMs": 30_000}),
    )
    .await?;
    let order: Vec<String> = ran_a["processed"]
        .as_array()
        .context("processed")?
        .iter()
        .map(|p| p["id"].as_str().unwrap_or_default().to_string())
        .collect();
    assert_eq!(order, [near.clone(), root.clone()], "{ran_a}");
    let root_done = ran_a["completed"]
        .as_array()
        .and_then(|c| c.iter().find(|c| c["id"] == json!(root)))
        .context("root completed by Node")?;
    assert_eq!(root_done["returnvalue"], json!({"root": true}));

    // Both sides read the finished flow.
    let deps = node_dependencies(&schema.name, &qa, &root).await?;
    assert_eq!(deps["state"], "completed");
    assert_eq!(
        deps["dependencies"]["processed"],
        json!({ format!("{qa}:{near}"): 7, format!("{qb}:far-1"): "far" })
    );
    let read = producer
        .get_flow(GetFlowOptions::new(root.clone(), qa.as_str()))
        .await?
        .context("flow read back")?;
    assert_eq!(
        shape(&read),
        json!({
            "id": root, "name": "root", "parentKey": null,
            "children": [
                {"id": "far-1", "name": "far", "parentKey": format!("bull:{qa}:{root}"), "children": []},
                {"id": near, "name": "near", "parentKey": format!("bull:{qa}:{root}"), "children": []},
            ]
        })
    );
    let queue = Queue::with_backend(&qa, backend.as_ref(), QueueOptions::default()).await?;
    let counts = queue.get_dependencies_count(&root).await?;
    assert_eq!((counts.processed, counts.unprocessed), (2, 0));
    queue.close().await?;
    producer.close().await?;
    Ok(())
}

/// Iterations of scheduler `id` of `queue` by state: `(completed, others)`.
fn iterations(schema: &str, queue: &str, id: &str) -> Result<(Vec<u64>, Vec<String>)> {
    let out = psql(&format!(
        "SELECT id, state FROM \"{schema}\".job WHERE queue = '{queue}' AND scheduler_id = '{id}' \
          ORDER BY id"
    ))?;
    let mut completed = Vec::new();
    let mut others = Vec::new();
    for line in out.lines() {
        let (job, state) = line.split_once('|').context("id|state")?;
        let millis: u64 = job
            .rsplit(':')
            .next()
            .and_then(|m| m.parse().ok())
            .with_context(|| format!("iteration id {job}"))?;
        if state == "completed" {
            completed.push(millis);
        } else {
            others.push(format!("{job} {state}"));
        }
    }
    completed.sort_unstable();
    Ok((completed, others))
}

/// Asserts that `runs` (sorted) are distinct runs of a schedule of period `step`: each gap a
/// whole number of periods.
fn on_grid(runs: &[u64], step: u64, id: &str) {
    for pair in runs.windows(2) {
        let gap = pair[1] - pair[0];
        assert!(gap > 0 && gap % step == 0, "{id}: runs {runs:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn node_schedulers_are_run_and_continued_by_our_worker() -> Result<()> {
    if !pg_and_node_available() {
        return Ok(());
    }
    let schema = FreshSchema::migrated_by_node().await?;
    let queue = common::unique_queue("pg-sched-node");
    for (id, repeat) in [
        ("every", json!({"every": 1000})),
        ("cron", json!({"pattern": "* * * * * *"})),
    ] {
        let out = run_node_pg(
            "schedulers.js",
            &schema.name,
            &json!({"queue": queue, "op": "upsert", "id": id, "repeat": repeat,
                    "template": {"name": id, "data": {"returnValue": id}}}),
        )
        .await?;
        assert!(out["result"]["id"].is_string(), "{out}");
    }
    let backend = pg_backend(&schema.name).await?;
    let w = worker(&backend, &queue).await?;
    let done = |id: &str| {
        format!(
            "SELECT count(*) FROM \"{}\".job WHERE queue = '{queue}' AND scheduler_id = '{id}' \
               AND state = 'completed'",
            schema.name
        )
    };
    until_count(&done("every"), 3, Duration::from_secs(30)).await?;
    until_count(&done("cron"), 3, Duration::from_secs(30)).await?;
    w.close().await?;

    for (id, step) in [("every", 1000), ("cron", 1000)] {
        let (completed, pending) = iterations(&schema.name, &queue, id)?;
        // Runs on the schedule's grid, none twice (a run found overdue when its predecessor
        // starts is skipped, not replayed), and exactly one iteration still to come.
        on_grid(&completed, step, id);
        assert_eq!(pending.len(), 1, "{id}: {pending:?}");
        let got = run_node_pg(
            "schedulers.js",
            &schema.name,
            &json!({"queue": queue, "op": "get", "id": id}),
        )
        .await?;
        let record = &got["result"];
        let count = record["iterationCount"]
            .as_u64()
            .context("iterationCount")?;
        assert!(
            count > completed.len() as u64,
            "{id}: iteration count {count} after {} runs: {record}",
            completed.len()
        );
        let next = record["next"].as_u64().context("next")?;
        assert!(next > *completed.last().context("a run")?, "{record}");
        assert_eq!(record["template"]["data"], json!({"returnValue": id}));
    }
    let job_id = format!(
        "repeat:every:{}",
        iterations(&schema.name, &queue, "every")?.0[0]
    );
    let q = Queue::with_backend(&queue, backend.as_ref(), QueueOptions::default()).await?;
    let first = q.get_job(&job_id).await?.context("first every run kept")?;
    assert_eq!(first.returnvalue(), Some(&json!("every")));
    assert_eq!(q.get_job_schedulers_count().await?, 2);
    q.close().await?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn our_scheduler_is_continued_by_nodes_worker() -> Result<()> {
    if !pg_and_node_available() {
        return Ok(());
    }
    let schema = FreshSchema::migrated_by_node().await?;
    let name = common::unique_queue("pg-sched-ours");
    let backend = pg_backend(&schema.name).await?;
    let queue = Queue::with_backend(&name, backend.as_ref(), QueueOptions::default()).await?;
    let first = queue
        .upsert_job_scheduler(
            "ours",
            Repeat::every(Duration::from_millis(1000)),
            SchedulerTemplate::new("ours")
                .data(json!({"returnValue": "ran"}))
                .opts(JobOptions::new().attempts(2)),
        )
        .await?
        .context("first iteration")?;
    assert!(first.id().starts_with("repeat:ours:"), "{}", first.id());

    let ran = run_node_pg(
        "run_worker.js",
        &schema.name,
        &json!({"queue": name, "stopAfter": 3, "timeoutMs": 30_000}),
    )
    .await?;
    let completed = ran["completed"].as_array().context("completed")?;
    assert_eq!(completed.len(), 3, "{ran}");
    assert_eq!(completed[0]["id"], json!(first.id()));
    assert!(completed.iter().all(|c| c["returnvalue"] == "ran"), "{ran}");
    let (runs, pending) = iterations(&schema.name, &name, "ours")?;
    on_grid(&runs, 1000, "ours");
    assert_eq!(pending.len(), 1, "{pending:?}");

    // Node's iterations carry our template; our reads see Node's progress.
    let record = queue
        .get_job_scheduler("ours")
        .await?
        .context("scheduler")?;
    assert!(record.iteration_count.unwrap_or(0) >= 4, "{record:?}");
    assert_eq!(record.every, Some(1000));
    let template = record.template.context("template")?;
    assert_eq!(template.data, Some(json!({"returnValue": "ran"})));
    assert_eq!(template.opts.and_then(|o| o.attempts), Some(2));
    let last = format!("repeat:ours:{}", runs.last().context("a run")?);
    let job = queue
        .get_job(&last)
        .await?
        .context("a Node-made iteration")?;
    assert_eq!(job.opts().attempts, Some(2));
    assert_eq!(job.repeat_job_key(), Some("ours"));
    assert!(queue.remove_job_scheduler("ours").await?);
    queue.close().await?;
    Ok(())
}
