//! Multi-key reads that must be atomic: where a job stands for a waiter, and the metrics.

use bullmq_backend::{JobEnd, Metrics, MetricsKind};
use bullmq_protocol::keys::{QueueKey, QueueKeys};
use fred::prelude::TransactionInterface;
use fred::prelude::{Client, HashesInterface, KeysInterface, ListInterface, SortedSetsInterface};

use crate::error::Result;

/// The hash key of `kind`'s metrics (`{prefix}:{queue}:metrics:{kind}`).
pub fn metrics_key(keys: &QueueKeys, kind: MetricsKind) -> String {
    keys.key(match kind {
        MetricsKind::Completed => QueueKey::MetricsCompleted,
        MetricsKind::Failed => QueueKey::MetricsFailed,
    })
}

/// The list key of `kind`'s per-minute data points (`…:data`).
pub fn metrics_data_key(keys: &QueueKeys, kind: MetricsKind) -> String {
    format!("{}:data", metrics_key(keys, kind))
}

/// Reads the `kind` metrics of a queue: the hash and the data points `start..=end`, in one
/// `MULTI` of `HMGET` + `LRANGE` + `LLEN` (atomic, as Node's script).
///
/// # Errors
///
/// [`crate::RedisError::Command`] when Redis fails or replies with something that is not
/// strings.
pub async fn get_metrics(
    client: &Client,
    keys: &QueueKeys,
    kind: MetricsKind,
    start: i64,
    end: i64,
) -> Result<Metrics> {
    let key = metrics_key(keys, kind);
    let data_key = metrics_data_key(keys, kind);
    let trx = client.multi();
    // Each queued command replies QUEUED; the values come back from EXEC.
    let () = trx
        .hmget(&key, vec!["count", "prevTS", "prevCount"])
        .await?;
    let () = trx.lrange(&data_key, start, end).await?;
    let () = trx.llen(&data_key).await?;
    let (meta, data, data_points): (Vec<Option<String>>, Vec<String>, u64) = trx.exec(true).await?;
    Ok(Metrics::from_reply(&meta, &data, data_points))
}

/// Where a job stands for someone waiting for it to finish: whether it exists, whether it is
/// in `completed` or `failed`, and its `returnvalue` / `failedReason`, in one `MULTI`.
///
/// # Errors
///
/// [`crate::RedisError::Command`] when Redis fails.
pub async fn job_end(client: &Client, keys: &QueueKeys, job_id: &str) -> Result<JobEnd> {
    let job_key = keys.job(job_id);
    let trx = client.multi();
    let () = trx.exists(&job_key).await?;
    let () = trx.zscore(keys.key(QueueKey::Completed), job_id).await?;
    let () = trx.zscore(keys.key(QueueKey::Failed), job_id).await?;
    let () = trx
        .hmget(&job_key, vec!["returnvalue", "failedReason"])
        .await?;
    let (exists, completed, failed, mut fields): (
        u64,
        Option<f64>,
        Option<f64>,
        Vec<Option<String>>,
    ) = trx.exec(true).await?;
    fields.resize(2, None);
    let failed_reason = fields.pop().flatten();
    let returnvalue = fields.pop().flatten();
    Ok(if exists == 0 {
        JobEnd::Missing
    } else if completed.is_some() {
        JobEnd::Completed(returnvalue)
    } else if failed.is_some() {
        JobEnd::Failed(failed_reason)
    } else {
        JobEnd::Unfinished
    })
}
