//! Reading the per-minute job metrics BullMQ keeps in Redis (Node `queue.getMetrics`).
//!
//! A worker started with `metrics.maxDataPoints` (ours: `WorkerOptions::metrics_max_data_points`)
//! counts every job that reaches `completed` or `failed` (final failures only, not retried
//! attempts) in two structures per kind:
//!
//! - the hash `{prefix}:{queue}:metrics:{kind}` with `count` (jobs ever counted), `prevTS`
//!   (ms timestamp of the last data point) and `prevCount` (`count` at that point);
//! - the list `{prefix}:{queue}:metrics:{kind}:data`, one entry per minute, newest first
//!   (index 0), each the number of jobs finished in that minute, trimmed to `maxDataPoints`.
//!
//! [`get_metrics`] reads both with plain commands in one `MULTI` (atomic, as Node's script),
//! and decodes them exactly as Node does: missing hash fields read as 0, data points that are
//! not numbers read as 0.
//!
//! ```no_run
//! use ractor_bullmq::protocol::keys::QueueKeys;
//! use ractor_bullmq::telemetry::{get_metrics, MetricsKind};
//!
//! # async fn demo(client: &bullmq_redis::fred::prelude::Client) -> Result<(), bullmq_redis::RedisError> {
//! let keys = QueueKeys::new("bull", "emails");
//! let last_hour = get_metrics(client, &keys, MetricsKind::Completed, 0, 59).await?;
//! println!("{} jobs completed in all, {} minutes recorded", last_hour.meta.count, last_hour.count);
//! # Ok(()) }
//! ```

use bullmq_protocol::keys::{QueueKey, QueueKeys};
use bullmq_redis::fred::prelude::{Client, HashesInterface, ListInterface, TransactionInterface};
use bullmq_redis::RedisError;
use serde::{Deserialize, Serialize};

/// Which finished jobs to read metrics of.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum MetricsKind {
    /// `metrics:completed`.
    Completed,
    /// `metrics:failed`.
    Failed,
}

impl MetricsKind {
    /// Node's name of the kind (`'completed'` / `'failed'`).
    pub const fn as_str(self) -> &'static str {
        match self {
            MetricsKind::Completed => "completed",
            MetricsKind::Failed => "failed",
        }
    }

    /// The hash key of this kind's metrics.
    pub fn key(self, keys: &QueueKeys) -> String {
        keys.key(match self {
            MetricsKind::Completed => QueueKey::MetricsCompleted,
            MetricsKind::Failed => QueueKey::MetricsFailed,
        })
    }

    /// The list key of this kind's per-minute data points (`…:data`).
    pub fn data_key(self, keys: &QueueKeys) -> String {
        format!("{}:data", self.key(keys))
    }
}

/// The metrics hash (Node's `meta`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct MetricsMeta {
    /// Jobs counted since metrics were first collected (`count`).
    pub count: u64,
    /// Timestamp of the newest data point, ms since the Unix epoch (`prevTS`).
    #[serde(rename = "prevTS")]
    pub prev_ts: u64,
    /// `count` when the newest data point was written (`prevCount`).
    #[serde(rename = "prevCount")]
    pub prev_count: u64,
}

/// What [`get_metrics`] returns; serialises to the same JSON as Node's `getMetrics`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Metrics {
    /// The metrics hash.
    pub meta: MetricsMeta,
    /// The requested range of per-minute counts, newest first.
    pub data: Vec<u64>,
    /// How many data points exist in all (the list's length), whatever range was requested.
    pub count: u64,
}

impl Metrics {
    /// Decodes the raw reply: the `count`, `prevTS`, `prevCount` fields (`None` when missing),
    /// the data points, and the list length. Values are read as Node's `parseInt` /
    /// unary `+` do, with anything unreadable (or negative) as 0.
    pub fn from_reply<S: AsRef<str>>(meta: &[Option<S>], data: &[S], data_points: u64) -> Self {
        let field = |i: usize| {
            meta.get(i)
                .and_then(Option::as_ref)
                .map_or(0, |v| parse_int_prefix(v.as_ref()))
        };
        Self {
            meta: MetricsMeta {
                count: field(0),
                prev_ts: field(1),
                prev_count: field(2),
            },
            data: data.iter().map(|p| parse_number(p.as_ref())).collect(),
            count: data_points,
        }
    }
}

/// Node's `parseInt(v, 10)` for what the metrics scripts write: optional sign, then leading
/// digits; anything else (or a negative value) is 0.
fn parse_int_prefix(value: &str) -> u64 {
    let trimmed = value.trim_start();
    let (negative, rest) = match trimmed.as_bytes().first() {
        Some(b'-') => (true, &trimmed[1..]),
        Some(b'+') => (false, &trimmed[1..]),
        _ => (false, trimmed),
    };
    let digits_end = rest
        .bytes()
        .position(|b| !b.is_ascii_digit())
        .unwrap_or(rest.len());
    if negative || digits_end == 0 {
        return 0;
    }
    rest[..digits_end].parse().unwrap_or(u64::MAX)
}

/// Node's `+point || 0` for one data point: the whole string must be a number; fractions are
/// truncated (the scripts only write integers), negatives and non-numbers are 0.
fn parse_number(value: &str) -> u64 {
    let trimmed = value.trim();
    if let Ok(n) = trimmed.parse::<u64>() {
        return n;
    }
    match trimmed.parse::<f64>() {
        // `as` saturates; NaN and negatives become 0, which is what we want here.
        Ok(n) if n.is_finite() && n > 0.0 => n as u64,
        _ => 0,
    }
}

/// Reads the `kind` metrics of a queue: the hash and the data points `start..=end` (list
/// indexes, 0 = newest minute, negative from the end, as `LRANGE`; Node's defaults are 0 and
/// -1), in one `MULTI` of `HMGET` + `LRANGE` + `LLEN`.
///
/// A queue without metrics returns all zeros and no data, as in Node.
///
/// # Errors
///
/// [`RedisError::Command`] when Redis fails or replies with something that is not strings.
///
/// # Cancel safety
///
/// Read-only: cancelling loses nothing.
pub async fn get_metrics(
    client: &Client,
    keys: &QueueKeys,
    kind: MetricsKind,
    start: i64,
    end: i64,
) -> Result<Metrics, RedisError> {
    let key = kind.key(keys);
    let data_key = kind.data_key(keys);
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes_like_node() {
        let m = Metrics::from_reply(
            &[Some("12"), Some("1700000000000"), Some("7")],
            &["3", "0", "x", "2.0"],
            9,
        );
        assert_eq!(
            m,
            Metrics {
                meta: MetricsMeta {
                    count: 12,
                    prev_ts: 1_700_000_000_000,
                    prev_count: 7
                },
                data: vec![3, 0, 0, 2],
                count: 9,
            }
        );
    }

    #[test]
    fn missing_hash_reads_as_zeros() {
        let m = Metrics::from_reply::<&str>(&[None, None, None], &[], 0);
        assert_eq!(m, Metrics::default());
        let short = Metrics::from_reply::<&str>(&[], &[], 0);
        assert_eq!(short, Metrics::default());
    }

    #[test]
    fn parse_int_takes_the_leading_digits() {
        assert_eq!(parse_int_prefix("42abc"), 42);
        assert_eq!(parse_int_prefix(" 7"), 7);
        assert_eq!(parse_int_prefix("+5"), 5);
        assert_eq!(parse_int_prefix("-5"), 0);
        assert_eq!(parse_int_prefix("abc"), 0);
        assert_eq!(parse_int_prefix("1.9"), 1);
    }

    #[test]
    fn json_matches_node_shape() {
        let m = Metrics {
            meta: MetricsMeta {
                count: 2,
                prev_ts: 10,
                prev_count: 1,
            },
            data: vec![1],
            count: 1,
        };
        assert_eq!(
            serde_json::to_value(&m).unwrap(),
            serde_json::json!({"meta": {"count": 2, "prevTS": 10, "prevCount": 1}, "data": [1], "count": 1})
        );
    }

    #[test]
    fn keys_follow_bullmq_layout() {
        let keys = QueueKeys::new("bull", "q");
        assert_eq!(
            MetricsKind::Completed.key(&keys),
            "bull:q:metrics:completed"
        );
        assert_eq!(
            MetricsKind::Failed.data_key(&keys),
            "bull:q:metrics:failed:data"
        );
    }
}
