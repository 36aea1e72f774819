//! The per-minute job metrics BullMQ workers keep (Node `queue.getMetrics`), as values.
//!
//! A worker started with `metrics.maxDataPoints` counts every job that reaches `completed` or
//! `failed` (final failures only): a total, the time and total of the newest data point, and one
//! data point per minute, newest first. Values are decoded as Node does: missing ones read as 0,
//! data points that are not numbers read as 0.

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

/// What [`QueueAdmin::get_metrics`](crate::QueueAdmin::get_metrics) returns; serialises to the same JSON as Node's `getMetrics`.
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
}
