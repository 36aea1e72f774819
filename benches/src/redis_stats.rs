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

/// Calls `each` with every batch of keys under `{prefix}:{queue}:` that SCAN returns
/// (100k-job queues are too big for one `KEYS`).
pub(crate) async fn for_each_queue_key_batch<F, Fut>(
    client: &Client,
    prefix: &str,
    queue: &str,
    mut each: F,
) -> Result<()>
where
    F: FnMut(Vec<String>) -> Fut,
    Fut: std::future::Future<Output = Result<()>>,
{
    let pattern = format!("{prefix}:{queue}:*");
    let mut cursor = "0".to_string();
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
                each(keys).await?;
            }
        }
        if cursor == "0" {
            return Ok(());
        }
    }
}

/// Deletes every key under `{prefix}:{queue}:` with SCAN + UNLINK.
pub(crate) async fn delete_queue(client: &Client, prefix: &str, queue: &str) -> Result<u64> {
    let deleted = std::cell::Cell::new(0);
    for_each_queue_key_batch(client, prefix, queue, |keys| {
        let deleted = &deleted;
        async move {
            let n: u64 = client.unlink(keys).await.context("UNLINK")?;
            deleted.set(deleted.get() + n);
            Ok(())
        }
    })
    .await?;
    Ok(deleted.get())
}

/// The bytes `MEMORY USAGE` reports for every key under `{prefix}:{queue}:` (one call per key).
pub(crate) async fn queue_bytes(client: &Client, prefix: &str, queue: &str) -> Result<u64> {
    let bytes = std::cell::Cell::new(0);
    for_each_queue_key_batch(client, prefix, queue, |keys| {
        let bytes = &bytes;
        async move {
            for key in keys {
                let used: Option<u64> = client
                    .custom(
                        CustomCommand::new_static("MEMORY", ClusterHash::Random, false),
                        vec!["USAGE".into(), key, "SAMPLES".into(), "0".into()],
                    )
                    .await
                    .context("MEMORY USAGE")?;
                bytes.set(bytes.get() + used.unwrap_or(0));
            }
            Ok(())
        }
    })
    .await?;
    Ok(bytes.get())
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
