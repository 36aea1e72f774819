//! Redis-side measurements and housekeeping for the benchmarks: server CPU time from
//! `INFO cpu`, and deleting a benchmark queue's keys afterwards.

use anyhow::{Context, Result};
use bullmq_redis::fred::prelude::{Client, ClientLike, KeysInterface};
use bullmq_redis::fred::types::{ClusterHash, CustomCommand, Value};

/// CPU seconds (user + system) the Redis server has used since it started.
pub(crate) async fn server_cpu_seconds(client: &Client) -> Result<f64> {
    let info: String = client.info(None).await.context("INFO")?;
    let mut total = 0.0;
    for line in info.lines() {
        if let Some((key, value)) = line.trim().split_once(':') {
            if key == "used_cpu_sys" || key == "used_cpu_user" {
                total += value.parse::<f64>().unwrap_or(0.0);
            }
        }
    }
    Ok(total)
}

/// Deletes every key under `{prefix}:{queue}:` with SCAN + UNLINK (100k-job queues are too big
/// for one `KEYS`).
pub(crate) async fn delete_queue(client: &Client, prefix: &str, queue: &str) -> Result<u64> {
    let pattern = format!("{prefix}:{queue}:*");
    let mut cursor = "0".to_string();
    let mut deleted = 0;
    loop {
        let reply: Value = client
            .custom(
                CustomCommand::new_static("SCAN", ClusterHash::Random, false),
                vec![
                    cursor.clone(),
                    "MATCH".into(),
                    pattern.clone(),
                    "COUNT".into(),
                    "2000".into(),
                ],
            )
            .await
            .context("SCAN")?;
        let Value::Array(mut parts) = reply else {
            anyhow::bail!("unexpected SCAN reply");
        };
        let keys = parts.pop().unwrap_or(Value::Null);
        cursor = parts
            .pop()
            .and_then(|c| c.as_string())
            .unwrap_or_else(|| "0".to_string());
        if let Value::Array(keys) = keys {
            let keys: Vec<String> = keys.into_iter().filter_map(|k| k.as_string()).collect();
            if !keys.is_empty() {
                let n: u64 = client.unlink(keys).await.context("UNLINK")?;
                deleted += n;
            }
        }
        if cursor == "0" {
            return Ok(deleted);
        }
    }
}

/// Jobs in `{prefix}:{queue}:wait`, to check a producer scenario added everything.
pub(crate) async fn waiting_count(client: &Client, prefix: &str, queue: &str) -> Result<u64> {
    client
        .custom(
            CustomCommand::new_static("LLEN", ClusterHash::FirstKey, false),
            vec![format!("{prefix}:{queue}:wait")],
        )
        .await
        .context("LLEN")
}
