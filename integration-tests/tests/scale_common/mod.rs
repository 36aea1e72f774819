//! Helpers of the full-scale worker checks (`worker_scale_*`, `queue_events_catalogue`): the
//! mixed job scenario both implementations run, and per-job outcomes read back through Node.
#![allow(dead_code, unreachable_pub)]

use anyhow::Result;
use serde_json::{json, Value};

/// `n` jobs mixing priorities, LIFO, delays, attempts with fixed / exponential backoff,
/// failures by design (retried then successful, failing every attempt, unrecoverable) and
/// progress, driven by the data contract of `node/run_worker.js` and `worker_common::scripted`.
pub fn mixed_jobs(n: usize) -> Vec<Value> {
    (0..n)
        .map(|i| {
            let mut data = json!({"returnValue": {"i": i}});
            let mut opts = json!({});
            if i % 5 == 0 {
                opts["priority"] = json!(i % 3 + 1);
            }
            if i % 7 == 0 {
                opts["lifo"] = json!(true);
            }
            if i % 11 == 0 {
                opts["delay"] = json!(100 + (i % 3) * 50);
            }
            if i % 4 == 0 {
                data["failAttempts"] = json!(1);
                opts["attempts"] = json!(2);
                opts["backoff"] = json!({"type": "fixed", "delay": 30});
            }
            if i % 9 == 0 {
                data["failAttempts"] = json!(2);
                opts["attempts"] = json!(3);
                opts["backoff"] = json!({"type": "exponential", "delay": 10});
            }
            if i % 13 == 0 {
                data["fail"] = json!("bad input");
                opts["attempts"] = json!(2);
                opts["backoff"] = json!({"type": "exponential", "delay": 20});
            }
            if i % 17 == 0 {
                data["unrecoverable"] = json!("cannot ever work");
                opts["attempts"] = json!(3);
            }
            if i % 6 == 0 {
                data["progress"] = json!([10, {"step": "half"}]);
            }
            if i % 10 == 3 {
                data["returnValue"] = json!(format!("text {i}"));
            }
            json!({"name": format!("job-{i}"), "data": data, "opts": opts})
        })
        .collect()
}

/// What must be equal between two runs of the same job, timestamps aside (only whether
/// `processedOn` / `finishedOn` are set is kept).
pub fn outcome(job: &Value) -> Value {
    json!({
        "id": job["id"],
        "name": job["name"],
        "state": job["state"],
        "returnvalue": job["returnvalue"],
        "failedReason": job["failedReason"],
        "attemptsMade": job["attemptsMade"],
        "attemptsStarted": job["attemptsStarted"],
        "stalledCounter": job["stalledCounter"],
        "progress": job["progress"],
        "priority": job["priority"],
        "hasProcessedOn": !job["processedOn"].is_null(),
        "hasFinishedOn": !job["finishedOn"].is_null(),
        "stacktraceLen": job["stacktrace"].as_array().map(Vec::len),
    })
}

/// Every job of `ids` read back by Node (`read_jobs.js`), as [`outcome`]s, in order.
pub async fn node_outcomes(queue: &str, ids: &[Value]) -> Result<Vec<Value>> {
    let mut out = Vec::with_capacity(ids.len());
    for chunk in ids.chunks(1000) {
        let read =
            super::common::run_node("read_jobs.js", &json!({"queue": queue, "ids": chunk})).await?;
        out.extend(read["jobs"].as_array().into_iter().flatten().map(outcome));
    }
    Ok(out)
}

/// The ids printed by `add_jobs.js`.
pub fn ids_of(added: &Value) -> Vec<Value> {
    added["ids"].as_array().cloned().unwrap_or_default()
}
