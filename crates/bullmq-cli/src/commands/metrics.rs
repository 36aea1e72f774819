//! `bullmq metrics <queue>`: jobs completed and failed per minute, from the metrics keys
//! workers keep when started with the metrics option (`{prefix}:{queue}:metrics:completed`
//! and `:failed`, Node's layout), with a one-line chart of each.

use anyhow::{Context as _, Result};
use chrono::{Local, TimeZone as _};
use clap::Args;
use ractor_bullmq::{Metrics, MetricsKind};
use serde_json::{json, Value};

use super::Context;
use crate::output::{print_json, stdout_is_terminal, two_columns, Paint};
use crate::sparkline::sparkline;
use crate::time_text::now_ms;

/// Arguments of `bullmq metrics`.
#[derive(Debug, Clone, Args)]
pub(crate) struct MetricsArgs {
    /// Queue name.
    queue: String,
    /// How many minutes to show, ending with the current one.
    #[arg(long, default_value_t = 60, value_parser = clap::value_parser!(u64).range(1..=10_080))]
    minutes: u64,
}

/// Milliseconds in the metrics' fixed granularity.
const MINUTE_MS: u64 = 60_000;

/// One kind of metrics and its counts over the window.
#[derive(Debug, Clone)]
struct Series {
    kind: MetricsKind,
    metrics: Metrics,
    /// Jobs per minute of the window, oldest first.
    per_minute: Vec<u64>,
}

/// Runs `bullmq metrics`.
pub(crate) async fn run(ctx: &Context, args: MetricsArgs) -> Result<()> {
    // Reading must not create anything, so the queue's `meta` is left alone.
    let queue = super::open_queue(ctx, &args.queue, super::Access::Existing).await?;
    let now = now_ms();
    let last_index = i64::try_from(args.minutes).unwrap_or(i64::MAX) - 1;
    let mut series = Vec::new();
    for kind in [MetricsKind::Completed, MetricsKind::Failed] {
        let metrics = queue
            .get_metrics(kind, 0, last_index)
            .await
            .with_context(|| format!("reading the {} metrics", kind.as_str()))?;
        let per_minute = per_minute(&metrics, now, args.minutes);
        series.push(Series {
            kind,
            metrics,
            per_minute,
        });
    }
    let qualified = queue.keys().qualified_name().to_owned();
    queue.close().await?;
    let window_start = window_start(now, args.minutes);
    if ctx.json {
        print_json(&as_json(&args.queue, args.minutes, window_start, &series));
    } else {
        print!(
            "{}",
            as_text(
                &qualified,
                window_start,
                &series,
                stdout_is_terminal(),
                Paint::stdout()
            )
        );
    }
    Ok(())
}

/// Start (ms since the epoch) of the oldest minute of a window of `minutes` ending now.
fn window_start(now: u64, minutes: u64) -> u64 {
    (now / MINUTE_MS).saturating_sub(minutes - 1) * MINUTE_MS
}

/// Jobs per minute over the `minutes` minutes ending with the current one, oldest first.
///
/// How a worker records them (Node's `collectMetrics`, which ours follows): each finished job
/// bumps `count`; the first job of a new minute pushes onto the head of the data list the
/// count of the minute of `prevTS` (`count - prevCount` then) and a zero for each minute
/// without jobs since, then moves `prevTS` / `prevCount` to itself. So `data[i]` is minute
/// `minute(prevTS) - 1 - i`, and the minute of `prevTS` itself, not pushed yet, holds
/// `count - prevCount` jobs. Minutes after it had no job finish.
fn per_minute(metrics: &Metrics, now: u64, minutes: u64) -> Vec<u64> {
    let meta = &metrics.meta;
    let recorded = meta.prev_ts > 0 || meta.count > 0;
    let newest = meta.prev_ts / MINUTE_MS;
    // A worker whose clock runs ahead must not push its minute out of the window.
    let current = (now / MINUTE_MS).max(if recorded { newest } else { 0 });
    let first = current.saturating_sub(minutes - 1);
    (first..=current)
        .map(|minute| {
            if !recorded || minute > newest {
                0
            } else if minute == newest {
                meta.count.saturating_sub(meta.prev_count)
            } else {
                usize::try_from(newest - 1 - minute)
                    .ok()
                    .and_then(|i| metrics.data.get(i).copied())
                    .unwrap_or(0)
            }
        })
        .collect()
}

fn as_json(queue: &str, minutes: u64, window_start: u64, series: &[Series]) -> Value {
    let mut value = json!({
        "queue": queue,
        "minutes": minutes,
        "windowStart": window_start,
    });
    for s in series {
        // Node's getMetrics object, plus the window's counts aligned to the clock.
        let mut kind = serde_json::to_value(&s.metrics).unwrap_or(Value::Null);
        if let Value::Object(fields) = &mut kind {
            fields.insert("perMinute".into(), json!(s.per_minute));
        }
        value[s.kind.as_str()] = kind;
    }
    value
}

/// `ms` since the epoch as a local wall-clock `HH:MM`.
fn clock(ms: u64) -> String {
    i64::try_from(ms)
        .ok()
        .and_then(|ms| Local.timestamp_millis_opt(ms).single())
        .map_or_else(|| "?".to_owned(), |at| at.format("%H:%M").to_string())
}

fn as_text(
    qualified: &str,
    window_start: u64,
    series: &[Series],
    unicode: bool,
    paint: Paint,
) -> String {
    let minutes = series.first().map_or(0, |s| s.per_minute.len() as u64);
    let newest_minute = window_start + minutes.saturating_sub(1) * MINUTE_MS;
    let mut rows = vec![
        ("queue".to_owned(), qualified.to_owned()),
        (
            "window".to_owned(),
            format!(
                "{minutes} minutes, {} to {} local time, one column per minute, newest right",
                clock(window_start),
                clock(newest_minute)
            ),
        ),
    ];
    for s in series {
        let in_window: u64 = s.per_minute.iter().sum();
        let peak = s.per_minute.iter().copied().max().unwrap_or(0);
        let name = s.kind.as_str();
        let label = match s.kind {
            MetricsKind::Completed => paint.green(name),
            MetricsKind::Failed => paint.red(name),
        };
        rows.push((
            label,
            format!(
                "{in_window} in the window, peak {peak}/min; {} since metrics began",
                s.metrics.meta.count
            ),
        ));
        rows.push((String::new(), sparkline(&s.per_minute, unicode)));
    }
    let mut out = two_columns(&rows);
    if series.iter().all(|s| s.metrics.meta.prev_ts == 0) {
        out.push_str(
            "no metrics recorded: workers keep them only when started with the metrics option \
             (Node: `metrics: { maxDataPoints }`; ractor-bullmq: `metrics_max_data_points`)\n",
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use ractor_bullmq::telemetry::MetricsMeta;

    fn metrics(count: u64, prev_ts: u64, prev_count: u64, data: &[u64]) -> Metrics {
        Metrics {
            meta: MetricsMeta {
                count,
                prev_ts,
                prev_count,
            },
            data: data.to_vec(),
            count: data.len() as u64,
        }
    }

    /// 17:00:30 on some day, in ms.
    const NOW: u64 = 29_000_000 * MINUTE_MS + 30_000;

    #[test]
    fn the_current_minute_holds_what_was_not_pushed_yet() {
        // Jobs finished in the current minute only: no data point yet.
        let m = metrics(5, NOW - 10_000, 0, &[]);
        assert_eq!(per_minute(&m, NOW, 3), [0, 0, 5]);
    }

    #[test]
    fn data_points_are_the_minutes_before_prev_ts() {
        // prevTS in the current minute, 2 jobs since; the minute before had 4, then 0, then 7.
        let m = metrics(20, NOW, 18, &[4, 0, 7]);
        assert_eq!(per_minute(&m, NOW, 5), [0, 7, 0, 4, 2]);
    }

    #[test]
    fn minutes_after_the_last_job_are_zero() {
        // The last job finished two minutes ago: its minute holds count - prevCount.
        let m = metrics(9, NOW - 2 * MINUTE_MS, 6, &[1]);
        assert_eq!(per_minute(&m, NOW, 4), [1, 3, 0, 0]);
    }

    #[test]
    fn nothing_recorded_is_all_zeros() {
        assert_eq!(per_minute(&Metrics::default(), NOW, 3), [0, 0, 0]);
    }

    #[test]
    fn text_has_a_chart_per_kind_and_json_nodes_shape() {
        let series = vec![
            Series {
                kind: MetricsKind::Completed,
                metrics: metrics(20, NOW, 18, &[4, 0, 7]),
                per_minute: vec![0, 7, 0, 4, 2],
            },
            Series {
                kind: MetricsKind::Failed,
                metrics: Metrics::default(),
                per_minute: vec![0; 5],
            },
        ];
        let start = window_start(NOW, 5);
        let text = as_text("bull:q", start, &series, false, Paint::forced(false));
        assert!(
            text.contains("completed  13 in the window, peak 7/min; 20 since metrics began\n"),
            "{text}"
        );
        assert!(text.contains("\n           _#_=:\n"), "{text}");
        assert!(text.contains("\n           _____\n"), "{text}");
        assert!(!text.contains("no metrics recorded"), "{text}");
        let value = as_json("q", 5, start, &series);
        assert_eq!(value["completed"]["meta"]["prevTS"], NOW);
        assert_eq!(value["completed"]["data"], json!([4, 0, 7]));
        assert_eq!(value["completed"]["perMinute"], json!([0, 7, 0, 4, 2]));
        assert_eq!(value["failed"]["meta"]["count"], 0);
        assert_eq!(value["windowStart"], start);
    }
}
