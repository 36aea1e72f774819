//! A finish the store refuses is never dropped silently: for every code the finish script can
//! return, the Worker reports a typed `WorkerError::FinishRefused` (Node's message) to
//! `on_error` and does what Node 6.7.0's Worker does next. A completion refused because the
//! job still has pending children fails the job with the refusal as its reason (checked side
//! by side with Node's worker); a job whose lock was lost or taken, that was moved or removed,
//! is left to its new owner or to stalled recovery.

mod common;
mod worker_common;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::Result;
use common::*;
use fred::prelude::{ClientLike, HashesInterface, KeysInterface, ListInterface};
use ractor_bullmq::store::FinishCode;
use ractor_bullmq::worker::{Job, JobContext, WorkerError};
use ractor_bullmq::{Worker, WorkerArgs, WorkerCallbacks, WorkerOptions};
use serde_json::json;
use worker_common::*;

/// Adds, with Node's FlowProducer, a parent in `parents` with one child in `parents` that
/// fails with `continueParentOnFailure` and one child in `idle` (a queue nobody works on), so
/// the parent is released while a dependency is still pending. Returns the parent id.
async fn add_flow(parents: &str, idle: &str) -> Result<String> {
    let children = json!([
        {"name": "fails", "queueName": parents, "data": {"unrecoverable": "child broke"},
         "opts": {"continueParentOnFailure": true}},
        {"name": "pending", "queueName": idle, "data": {}},
    ]);
    let script = format!(
        "const {{ FlowProducer }} = require('bullmq'); const {{ connectionOptions }} = require('./lib');\
         const fp = new FlowProducer({{ connection: connectionOptions() }});\
         fp.add({{ name: 'parent', queueName: {parents:?}, data: {{}}, children: {children} }})\
           .then(t => {{ process.stdout.write(JSON.stringify({{ parent: t.job.id }})); return fp.close(); }})\
           .then(() => process.exit(0), e => {{ console.error(e); process.exit(1); }});"
    );
    let out = node_eval(&script).await?;
    Ok(out["parent"].as_str().unwrap_or_default().to_string())
}

async fn failed_reason(queue: &str, id: &str) -> Result<Option<String>> {
    let client = raw_client().await?;
    let reason: Option<String> = client
        .hget(format!("{PREFIX}:{queue}:{id}"), "failedReason")
        .await?;
    client.quit().await?;
    Ok(reason)
}

type Errors = Arc<Mutex<Vec<(String, FinishCode, String)>>>;

fn recording() -> (WorkerCallbacks, Errors) {
    let errors: Errors = Arc::default();
    let callbacks = WorkerCallbacks::new().on_error({
        let errors = errors.clone();
        move |error| {
            if let WorkerError::FinishRefused { job_id, code, .. } = error {
                errors
                    .lock()
                    .unwrap()
                    .push((job_id.clone(), *code, error.to_string()));
            }
        }
    });
    (callbacks, errors)
}

#[tokio::test]
async fn a_parent_completed_with_pending_children_fails_as_with_node() -> Result<()> {
    if !node_available() {
        return Ok(());
    }
    // Node's worker on one flow.
    let (node_parents, node_idle) = (unique_queue("w-refuse-np"), unique_queue("w-refuse-ni"));
    let node_parent = add_flow(&node_parents, &node_idle).await?;
    run_node(
        "run_worker.js",
        &json!({"queue": node_parents, "stopAfter": 2, "idleMs": 5000}),
    )
    .await?;
    let node_reason = failed_reason(&node_parents, &node_parent).await?;

    // Ours on the same flow.
    let (parents, idle) = (unique_queue("w-refuse-p"), unique_queue("w-refuse-i"));
    let parent = add_flow(&parents, &idle).await?;
    let (callbacks, errors) = recording();
    let worker = spawn_worker(&parents, WorkerOptions::new(), callbacks).await?;
    wait_finished(&parents, 2, Duration::from_secs(30)).await?;
    worker.close().await?;
    let reason = failed_reason(&parents, &parent).await?;

    let expected = |id: &str| format!("Job {id} has pending dependencies. moveToFinished");
    assert_eq!(node_reason, Some(expected(&node_parent)), "Node's parent");
    assert_eq!(reason, Some(expected(&parent)), "our parent, as Node's");
    let errors = errors.lock().unwrap().clone();
    assert_eq!(
        errors,
        vec![(
            parent.clone(),
            FinishCode::PendingChildren,
            expected(&parent)
        )],
        "one typed error for the refused completion"
    );
    let client = raw_client().await?;
    let active: i64 = client.llen(format!("{PREFIX}:{parents}:active")).await?;
    assert_eq!(active, 0, "nothing left active");
    client.quit().await?;
    for q in [&node_parents, &node_idle, &parents, &idle] {
        cleanup(q).await?;
    }
    Ok(())
}

#[tokio::test]
async fn every_refusal_code_reaches_on_error_typed_with_nodes_message() -> Result<()> {
    let queue_name = unique_queue("w-refuse-codes");
    let queue = open_queue(&queue_name).await?;
    let cases = [
        (
            "lock-lost",
            FinishCode::MissingLock,
            "Missing lock for job {id}. moveToFinished",
        ),
        (
            "lock-taken",
            FinishCode::LockNotOwned,
            "Lock mismatch for job {id}. Cmd moveToFinished from active",
        ),
        (
            "removed",
            FinishCode::MissingJob,
            "Missing key for job {id}. moveToFinished",
        ),
        (
            "moved",
            FinishCode::NotActive,
            "Job {id} is not in the active state. moveToFinished",
        ),
    ];
    let mut ids = Vec::new();
    for (sabotage, _, _) in &cases {
        let job = queue.add("job", json!({ "sabotage": sabotage })).await?;
        ids.push(job.id().to_string());
    }
    queue.close().await?;
    let (callbacks, errors) = recording();
    let processor = |job: Job, _ctx: JobContext| async move {
        // Do to the job what `sabotage` says, then complete it: the finish meets the refusal.
        let key = format!("{PREFIX}:{}:{}", job.queue_name(), job.id());
        let client = raw_client().await?;
        match job.data_value()["sabotage"].as_str() {
            Some("lock-lost") => {
                let _: i64 = client.del(format!("{key}:lock")).await?;
            }
            Some("lock-taken") => {
                let _: () = client
                    .set(format!("{key}:lock"), "someone-else", None, None, false)
                    .await?;
            }
            Some("removed") => {
                let _: i64 = client.del(format!("{key}:lock")).await?;
                let _: i64 = client.del(&key).await?;
            }
            Some("moved") => {
                let active = format!("{PREFIX}:{}:active", job.queue_name());
                let _: i64 = client.lrem(active, 1, job.id()).await?;
            }
            _ => {}
        }
        client.quit().await?;
        anyhow::Ok(json!("done"))
    };
    let args = WorkerArgs::connect(&config(), &queue_name, processor, WorkerOptions::new())
        .await?
        .callbacks(callbacks);
    let worker = Worker::spawn(args).await?;
    eventually("every refusal reported", Duration::from_secs(30), || {
        let errors = errors.clone();
        async move { errors.lock().unwrap().len() >= 4 }
    })
    .await?;
    worker.close().await?;
    let mut got = errors.lock().unwrap().clone();
    got.sort_by_key(|(id, _, _)| ids.iter().position(|i| i == id));
    let want: Vec<_> = ids
        .iter()
        .zip(&cases)
        .map(|(id, (_, code, message))| (id.clone(), *code, message.replace("{id}", id)))
        .collect();
    assert_eq!(got, want);
    cleanup(&queue_name).await
}
