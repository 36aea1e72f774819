//! Preparing queues through Node and calling Node's admin operations, for the differential
//! tests that prepare two queues identically and act on one with Node, on the other with us
//! (`job_actions.rs`, `queue_node_methods.rs`, `job_control_bulk.rs`). Needs the test crate
//! to declare `mod common;` (for `run_node`).

use anyhow::Result;
use serde_json::{json, Value};

use crate::common::run_node;

/// A `node/manual.js` step adding job `id` (its name) with `opts`.
pub fn add(id: &str, opts: Value) -> Value {
    let mut opts = opts;
    opts["jobId"] = json!(id);
    json!({"op": "add", "name": id, "data": {"id": id}, "opts": opts})
}

/// Runs `steps` through `node/manual.js` on `queue` (fetching with the token each step
/// names); every step must succeed.
pub async fn prepare(queue: &str, steps: Value) -> Result<()> {
    let report = run_node("manual.js", &json!({"queue": queue, "steps": steps})).await?;
    let results = report["results"].as_array().cloned().unwrap_or_default();
    assert!(
        results.iter().all(|r| r.get("error").is_none()),
        "preparation failed: {report}"
    );
    Ok(())
}

/// One `node/admin.js` operation on `queue`; its `result`.
pub async fn node_admin(queue: &str, op: &str, args: Value) -> Result<Value> {
    let mut arg = args;
    arg["queue"] = json!(queue);
    arg["op"] = json!(op);
    Ok(run_node("admin.js", &arg).await?["result"].clone())
}
