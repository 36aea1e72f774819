//! [`Queue::export_prometheus_metrics`]: the queue's job counts and finished totals in the
//! Prometheus text format, with Node BullMQ's metric names, labels and line order
//! (`exportPrometheusMetrics`), so one scrape config and one dashboard serve both.

use bullmq_protocol::state::JobState;

use crate::error::Result;
use crate::queue::Queue;
use crate::telemetry::MetricsKind;

/// Escapes a label value as Node does: backslash, double quote and newline.
fn escape_label(value: &str) -> String {
    value
        .replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

/// Renders Node's exposition text: a `bullmq_job_count` gauge per state (in the order
/// given), then the `bullmq_job_completed_total` and `bullmq_job_failed_total` counters; every
/// sample labelled with `queue` then `labels` (Node's `globalVariables`). Lines are joined
/// with `\n` and, as in Node, the text has no trailing newline.
///
/// ```
/// use bullmq_protocol::state::JobState;
/// use ractor_bullmq::queue::prometheus_text;
/// let text = prometheus_text("mails", &[(JobState::Waiting, 2)], 5, 1, &[("env", "prod")]);
/// assert!(text.contains(r#"bullmq_job_count{queue="mails", state="waiting", env="prod"} 2"#));
/// assert!(text.ends_with(r#"bullmq_job_failed_total{queue="mails", env="prod"} 1"#));
/// ```
pub fn prometheus_text(
    queue: &str,
    counts: &[(JobState, u64)],
    completed_total: u64,
    failed_total: u64,
    labels: &[(&str, &str)],
) -> String {
    let queue = escape_label(queue);
    let extra: String = labels
        .iter()
        .map(|(k, v)| format!(", {k}=\"{}\"", escape_label(v)))
        .collect();
    let mut lines = vec![
        "# HELP bullmq_job_count Number of jobs in the queue by state".to_owned(),
        "# TYPE bullmq_job_count gauge".to_owned(),
    ];
    for (state, count) in counts {
        lines.push(format!(
            "bullmq_job_count{{queue=\"{queue}\", state=\"{}\"{extra}}} {count}",
            state.as_str()
        ));
    }
    lines.push("# HELP bullmq_job_completed_total Total number of completed jobs".to_owned());
    lines.push("# TYPE bullmq_job_completed_total counter".to_owned());
    lines.push(format!(
        "bullmq_job_completed_total{{queue=\"{queue}\"{extra}}} {completed_total}"
    ));
    lines.push("# HELP bullmq_job_failed_total Total number of failed jobs".to_owned());
    lines.push("# TYPE bullmq_job_failed_total counter".to_owned());
    lines.push(format!(
        "bullmq_job_failed_total{{queue=\"{queue}\"{extra}}} {failed_total}"
    ));
    lines.join("\n")
}

impl Queue {
    /// The queue's metrics in the Prometheus text format, as Node's
    /// `queue.exportPrometheusMetrics(globalVariables)`: the job count of every state
    /// ([`JobState::ALL_COUNTABLE`], Node's order), and the completed / failed totals workers
    /// record when metrics are enabled (0 otherwise). `labels` are added to every sample
    /// after `queue` (Node's `globalVariables`). Serve it from your HTTP endpoint with content
    /// type `text/plain; version=0.0.4`.
    ///
    /// # Errors
    ///
    /// [`QueueError::Redis`](crate::QueueError::Redis) when Redis fails (another backend:
    /// [`QueueError::Backend`](crate::QueueError::Backend)).
    ///
    /// # Cancel safety
    ///
    /// Read-only.
    pub async fn export_prometheus_metrics(&self, labels: &[(&str, &str)]) -> Result<String> {
        let counts = self.get_job_counts_of(&[]).await?;
        let completed = self.get_metrics(MetricsKind::Completed, 0, -1).await?;
        let failed = self.get_metrics(MetricsKind::Failed, 0, -1).await?;
        Ok(prometheus_text(
            self.name(),
            &counts,
            completed.meta.count,
            failed.meta.count,
            labels,
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_node_lines_in_order() {
        let text = prometheus_text(
            "a\"b",
            &[(JobState::Active, 1), (JobState::WaitingChildren, 0)],
            3,
            0,
            &[],
        );
        let expected = "# HELP bullmq_job_count Number of jobs in the queue by state\n\
# TYPE bullmq_job_count gauge\n\
bullmq_job_count{queue=\"a\\\"b\", state=\"active\"} 1\n\
bullmq_job_count{queue=\"a\\\"b\", state=\"waiting-children\"} 0\n\
# HELP bullmq_job_completed_total Total number of completed jobs\n\
# TYPE bullmq_job_completed_total counter\n\
bullmq_job_completed_total{queue=\"a\\\"b\"} 3\n\
# HELP bullmq_job_failed_total Total number of failed jobs\n\
# TYPE bullmq_job_failed_total counter\n\
bullmq_job_failed_total{queue=\"a\\\"b\"} 0";
        assert_eq!(text, expected);
    }

    #[test]
    fn escapes_label_values() {
        assert_eq!(escape_label("a\\b\n\"c\""), "a\\\\b\\n\\\"c\\\"");
    }
}
