//! Helpers shared by the `worker_*` tests: a processor driven by job data (the same contract
//! as `node/run_worker.js`, so a scenario can run on either implementation) and worker spawning.
#![allow(dead_code, unreachable_pub)]

use std::time::Duration;

use anyhow::{anyhow, Result};
use ractor_bullmq::worker::{Job, JobContext, UnrecoverableError};
use ractor_bullmq::{
    ConnectionConfig, Worker, WorkerArgs, WorkerCallbacks, WorkerHandle, WorkerOptions,
};
use serde_json::{json, Value};

fn as_list(value: &Value) -> Vec<Value> {
    match value {
        Value::Array(items) => items.clone(),
        other => vec![other.clone()],
    }
}

/// The data-driven processor: `sleepMs`, `progress`, `log`, `panic`, `unrecoverable`, `fail`,
/// `failAttempts`, `returnValue` (default `{"processedBy": "rust"}`), as `run_worker.js`.
pub async fn scripted(job: Job, ctx: JobContext) -> Result<Value> {
    script(job, ctx, "rust").await
}

/// [`scripted`] whose default return value names `who` (`{"processedBy": who}`), so a run can
/// leave exactly what `run_worker.js` leaves.
pub fn scripted_as(
    who: &'static str,
) -> impl Fn(
    Job,
    JobContext,
) -> std::pin::Pin<Box<dyn std::future::Future<Output = Result<Value>> + Send>>
       + Send
       + Sync
       + 'static {
    move |job, ctx| Box::pin(script(job, ctx, who))
}

async fn script(job: Job, ctx: JobContext, who: &str) -> Result<Value> {
    let data = job.data_value().clone();
    if let Some(ms) = data.get("sleepMs").and_then(Value::as_u64) {
        tokio::time::sleep(Duration::from_millis(ms)).await;
    }
    if let Some(progress) = data.get("progress") {
        for value in as_list(progress) {
            ctx.update_progress(value).await?;
        }
    }
    if let Some(log) = data.get("log") {
        for row in as_list(log) {
            let row = row
                .as_str()
                .map(str::to_string)
                .unwrap_or_else(|| row.to_string());
            ctx.log(row).await?;
        }
    }
    if let Some(message) = data.get("panic").and_then(Value::as_str) {
        panic!("{}", message.to_string());
    }
    if let Some(message) = data.get("unrecoverable") {
        let message = message
            .as_str()
            .map(str::to_string)
            .unwrap_or_else(|| message.to_string());
        return Err(UnrecoverableError::new(message).into());
    }
    match data.get("fail") {
        Some(Value::Bool(true)) => return Err(anyhow!("failed on purpose")),
        Some(Value::String(message)) => return Err(anyhow!("{message}")),
        _ => {}
    }
    if let Some(n) = data.get("failAttempts").and_then(Value::as_u64) {
        if u64::from(job.attempts_made()) < n {
            return Err(anyhow!(
                "failing attempt {} on purpose",
                job.attempts_made() + 1
            ));
        }
    }
    Ok(data
        .get("returnValue")
        .cloned()
        .unwrap_or_else(|| json!({"processedBy": who})))
}

/// Connection config of the test Redis.
pub fn config() -> ConnectionConfig {
    ConnectionConfig::from_url(&super::common::redis_url()).expect("REDIS_URL")
}

/// Spawns a worker with the scripted processor.
pub async fn spawn_worker(
    queue: &str,
    options: WorkerOptions,
    callbacks: WorkerCallbacks,
) -> Result<WorkerHandle> {
    let args = WorkerArgs::connect(&config(), queue, scripted, options)
        .await?
        .callbacks(callbacks);
    Ok(Worker::spawn(args).await?)
}

/// Number of members of a zset / list key of `queue` (`completed`, `failed`, `wait`, ...).
pub async fn count(queue: &str, suffix: &str) -> Result<i64> {
    use fred::prelude::{ClientLike, KeysInterface, ListInterface, SortedSetsInterface};
    let client = super::common::raw_client().await?;
    let key = format!("{}:{queue}:{suffix}", super::common::PREFIX);
    let kind: String = client.r#type(&key).await?;
    let n: i64 = match kind.as_str() {
        "zset" => client.zcard(&key).await?,
        "list" => client.llen(&key).await?,
        _ => 0,
    };
    client.quit().await?;
    Ok(n)
}

/// Waits until `completed + failed` of `queue` reaches `n`.
pub async fn wait_finished(queue: &str, n: i64, timeout: Duration) -> Result<()> {
    let q = queue.to_string();
    super::common::eventually(
        &format!("{n} jobs finished in {queue}"),
        timeout,
        move || {
            let q = q.clone();
            async move {
                let done = count(&q, "completed").await.unwrap_or(0)
                    + count(&q, "failed").await.unwrap_or(0);
                done >= n
            }
        },
    )
    .await
}

/// Adds `jobs` (`[{name, data, opts}]`) with Node BullMQ (`node/add_jobs.js`); returns their ids.
pub async fn add_with_node(queue: &str, jobs: Value) -> Result<Vec<String>> {
    let added =
        super::common::run_node("add_jobs.js", &json!({"queue": queue, "jobs": jobs})).await?;
    Ok(added["ids"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|v| v.as_str().map(str::to_string))
        .collect())
}

/// Whether job `id` of `queue` is in `active` and holds a lock (a worker has it).
pub async fn active_and_locked(queue: &str, id: &str) -> bool {
    use super::common::PREFIX;
    use fred::prelude::{ClientLike, KeysInterface, ListInterface};
    let Ok(client) = super::common::raw_client().await else {
        return false;
    };
    let active: Vec<String> = client
        .lrange(format!("{PREFIX}:{queue}:active"), 0, -1)
        .await
        .unwrap_or_default();
    let locked: i64 = client
        .exists(format!("{PREFIX}:{queue}:{id}:lock"))
        .await
        .unwrap_or(0);
    let _ = client.quit().await;
    active.iter().any(|a| a == id) && locked == 1
}
