//! Checks the PostgreSQL test plumbing itself, without any Rust backend: fresh schemas migrated
//! by Node BullMQ 6.7.0's migrator (`common::pg::FreshSchema`), the Node oracle scripts on
//! Node's PostgreSQL backend, the Python producer on PyPI bullmq's, the table dump, and the
//! schema's removal. If these fail, every PostgreSQL interop test would fail for a reason that
//! has nothing to do with our code. Skips loudly without PostgreSQL, Node or (for the Python
//! test) a venv.

mod common;

use std::collections::BTreeSet;

use anyhow::Result;
use common::pg::*;
use serde_json::{json, Value as Json};

fn ids(value: &Json) -> Vec<String> {
    value
        .as_array()
        .unwrap_or_else(|| panic!("not an array: {value}"))
        .iter()
        .map(|v| {
            v.as_str()
                .unwrap_or_else(|| panic!("not a string: {v}"))
                .to_string()
        })
        .collect()
}

fn completed_ids(worker_output: &Json) -> BTreeSet<String> {
    worker_output["completed"]
        .as_array()
        .unwrap_or_else(|| panic!("no completed list: {worker_output}"))
        .iter()
        .map(|c| c["id"].as_str().expect("a job id").to_string())
        .collect()
}

#[tokio::test]
async fn node_migrates_fresh_schemas_to_ledger_11_and_the_fixture_drops_them() -> Result<()> {
    if !pg_and_node_available() {
        return Ok(());
    }
    let schemas = FreshSchema::many_migrated_by_node(2).await?;
    let names: Vec<String> = schemas.iter().map(|s| s.name.clone()).collect();
    assert_ne!(names[0], names[1]);
    for schema in &schemas {
        assert!(schema.name.starts_with("t_"), "{}", schema.name);
        let ledger = psql(&format!(
            "SELECT MAX(version), MAX(min_client_version), count(*) FROM {}.migration",
            schema.quoted()
        ))?;
        assert_eq!(ledger, "11|6|11", "ledger of {}", schema.name);
    }
    // A job id sequence is created on a queue's first add, inside the schema.
    run_node_pg(
        "add_jobs.js",
        &names[0],
        &json!({"queue": "seq", "jobs": [{"name": "a", "data": {}}]}),
    )
    .await?;
    let sequences = psql(&format!(
        "SELECT count(*) FROM pg_sequences WHERE schemaname = '{}' AND sequencename LIKE 'bullmq_jid_%'",
        names[0]
    ))?;
    assert_eq!(sequences, "1");
    drop(schemas);
    for name in &names {
        assert!(
            !schema_exists(name)?,
            "{name} still exists after the fixture dropped"
        );
    }
    let left = psql(&format!(
        "SELECT count(*) FROM pg_sequences WHERE schemaname IN ('{}', '{}')",
        names[0], names[1]
    ))?;
    assert_eq!(left, "0");
    Ok(())
}

#[tokio::test]
async fn node_producer_worker_events_and_dump_on_postgres() -> Result<()> {
    if !pg_and_node_available() {
        return Ok(());
    }
    let schema = FreshSchema::migrated_by_node().await?;
    let s = schema.name.as_str();
    let added = run_node_pg(
        "add_jobs.js",
        s,
        &json!({"queue": "q", "jobs": [
            {"name": "plain", "data": {"n": 1}},
            {"name": "logged", "data": {"log": "row-1", "progress": 50}},
            {"name": "fails", "data": {"fail": "on purpose"}, "opts": {"attempts": 1}},
        ]}),
    )
    .await?;
    assert_eq!(ids(&added["ids"]), ["1", "2", "3"]);
    let bulk = run_node_pg(
        "add_jobs.js",
        s,
        &json!({"queue": "q", "bulk": true, "jobs": [{"name": "bulk", "data": {"n": 4}}]}),
    )
    .await?;
    assert_eq!(ids(&bulk["ids"]), ["4"]);

    let worked = run_node_pg(
        "run_worker.js",
        s,
        &json!({"queue": "q", "stopAfter": 4, "timeoutMs": 30000}),
    )
    .await?;
    assert_eq!(worked["stoppedBy"], "count", "{worked}");
    assert_eq!(
        completed_ids(&worked),
        ["1", "2", "4"].map(String::from).into(),
        "{worked}"
    );
    assert_eq!(worked["failed"][0]["id"], "3", "{worked}");
    assert_eq!(
        worked["failed"][0]["failedReason"], "on purpose",
        "{worked}"
    );

    let counts = run_node_pg("counts.js", s, &json!({"queue": "q"})).await?;
    assert_eq!(counts["counts"]["completed"], 3, "{counts}");
    assert_eq!(counts["counts"]["failed"], 1, "{counts}");

    let read = run_node_pg("read_jobs.js", s, &json!({"queue": "q", "ids": ["2", "9"]})).await?;
    assert_eq!(read["jobs"][0]["state"], "completed", "{read}");
    assert_eq!(read["jobs"][0]["progress"], 50, "{read}");
    assert_eq!(read["jobs"][0]["raw"]["state"], "completed", "{read}");
    assert_eq!(read["jobs"][1], Json::Null, "{read}");

    // The stored events, read as rows; then a QueueEvents from the first event delivers them
    // all (no writer is running, so none can be skipped), every job's end among them.
    let stored = run_node_pg("collect_events.js", s, &json!({"queue": "q"})).await?;
    let stored = stored["events"].as_array().expect("stored events").len();
    assert!(stored >= 12, "{stored} events stored");
    let events = run_node_pg(
        "collect_events.js",
        s,
        &json!({"queue": "q", "mode": "listen", "durationMs": 15000, "count": stored}),
    )
    .await?;
    let events = events["events"].as_array().expect("events");
    assert_eq!(events.len(), stored, "{events:?}");
    let finished: BTreeSet<String> = events
        .iter()
        .filter(|e| e["event"] == "completed" || e["event"] == "failed")
        .map(|e| e["args"]["jobId"].as_str().expect("jobId").to_string())
        .collect();
    assert_eq!(
        finished,
        ["1", "2", "3", "4"].map(String::from).into(),
        "{events:?}"
    );

    let flow = run_node_pg(
        "flows.js",
        s,
        &json!({"op": "add", "flow": {"name": "parent", "queueName": "fp", "data": {},
            "children": [{"name": "child", "queueName": "fc", "data": {}, "opts": {"jobId": "kid"}}]}}),
    )
    .await?;
    assert_eq!(flow["tree"]["children"][0]["id"], "kid", "{flow}");

    let dump = dump_tables(s, None).await?;
    let tables = &dump["tables"];
    assert_eq!(dump["schema"], s);
    let job_rows = tables["job"].as_array().expect("job rows");
    assert_eq!(job_rows.len(), 6, "{dump}");
    // Key order: (queue, id) as text, so fc:kid, fp:<uuid>, then q's ids.
    let keys: Vec<(String, String)> = job_rows
        .iter()
        .map(|r| {
            (
                r["queue"].as_str().unwrap().into(),
                r["id"].as_str().unwrap().into(),
            )
        })
        .collect();
    let mut sorted = keys.clone();
    sorted.sort();
    assert_eq!(keys, sorted);
    let states: Vec<&str> = job_rows
        .iter()
        .map(|r| r["state"].as_str().unwrap())
        .collect();
    assert!(states.contains(&"waiting-children"), "{states:?}");
    assert_eq!(tables["job_dependency"][0]["status"], "pending", "{dump}");
    assert_eq!(tables["job_log"][0]["row"], "row-1", "{dump}");
    assert!(!tables["event"].as_array().unwrap().is_empty());
    assert!(!tables["meta"].as_array().unwrap().is_empty());
    for table in ["dedup", "dedup_next", "scheduler", "rate_limit", "metrics"] {
        assert_eq!(tables[table], json!([]), "{table}");
    }
    let only_fc = dump_tables(s, Some(&["fc"])).await?;
    assert_eq!(only_fc["tables"]["job"].as_array().unwrap().len(), 1);
    Ok(())
}

#[tokio::test]
async fn python_producer_on_a_node_schema_feeds_a_node_worker() -> Result<()> {
    if !pg_and_node_available() {
        return Ok(());
    }
    let Some(python) = python_pg() else {
        return Ok(());
    };
    let schema = FreshSchema::migrated_by_node().await?;
    let s = schema.name.as_str();
    let added = python_pg_add(
        &python,
        s,
        "py",
        &json!([
            {"name": "from-python", "data": {"n": 1}},
            {"name": "from-python", "data": {"n": 2}, "opts": {"attempts": 2}},
        ]),
    )
    .await?;
    assert_eq!(added, ["1", "2"]);
    // Python's migrator ran at ready: a no-op on Node's ledger.
    let ledger = psql(&format!(
        "SELECT MAX(version), MAX(min_client_version), count(*) FROM {}.migration",
        schema.quoted()
    ))?;
    assert_eq!(ledger, "11|6|11");
    let worked = run_node_pg(
        "run_worker.js",
        s,
        &json!({"queue": "py", "stopAfter": 2, "timeoutMs": 30000}),
    )
    .await?;
    assert_eq!(
        completed_ids(&worked),
        ["1", "2"].map(String::from).into(),
        "{worked}"
    );
    assert_eq!(worked["processed"][1]["data"], json!({"n": 2}), "{worked}");
    Ok(())
}
