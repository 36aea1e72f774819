//! What `bullmq top` shows, as plain data: one sample of every queue per refresh, and the
//! history its sparklines draw (jobs completed / failed between two refreshes). Nothing here
//! touches Redis or the terminal, so the drawing and the plain table are tested on made-up
//! models.

use std::collections::{HashMap, VecDeque};
use std::time::Duration;

use bullmq_protocol::state::JobState;
use ractor_bullmq::JobCounts;

/// The states shown per queue, in the order of the plain table's columns (Node's
/// `getJobCounts()` states; the legacy `paused` list is already inside `waiting`).
pub(crate) const STATES: [JobState; 7] = [
    JobState::Waiting,
    JobState::Active,
    JobState::Delayed,
    JobState::Prioritized,
    JobState::Completed,
    JobState::Failed,
    JobState::WaitingChildren,
];

/// How many refreshes of history a queue keeps: more than a full-width sparkline needs.
pub(crate) const HISTORY: usize = 160;

/// A running total of finished jobs, and where it was read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Total {
    /// Jobs finished so far.
    pub(crate) value: u64,
    /// Read from the queue's metrics hash (a counter workers only ever increase), not from
    /// the size of the `completed` / `failed` set (which shrinks when jobs are removed).
    pub(crate) from_metrics: bool,
}

impl Total {
    /// The total of `metrics_count` (the metrics hash's `count`) when workers keep metrics,
    /// else the number of jobs kept in the state's set.
    pub(crate) fn pick(metrics_count: u64, kept: u64) -> Self {
        if metrics_count > 0 {
            Self {
                value: metrics_count,
                from_metrics: true,
            }
        } else {
            Self {
                value: kept,
                from_metrics: false,
            }
        }
    }

    /// Jobs finished since `before`; 0 when the two were read from different sources or the
    /// total went down (jobs removed, a queue recreated), as no honest delta exists then.
    fn since(self, before: Self) -> u64 {
        if self.from_metrics == before.from_metrics {
            self.value.saturating_sub(before.value)
        } else {
            0
        }
    }
}

/// One queue as read in one refresh.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct QueueSample {
    /// Queue name (without the prefix).
    pub(crate) name: String,
    /// Jobs per state.
    pub(crate) counts: JobCounts,
    /// Whether the queue is paused.
    pub(crate) paused: bool,
    /// Worker connections found in `CLIENT LIST`.
    pub(crate) workers: usize,
    /// Completed jobs so far, for the throughput sparkline.
    pub(crate) completed: Total,
    /// Failed jobs so far, for the failure sparkline.
    pub(crate) failed: Total,
}

/// One failed job of the selected queue.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Failure {
    /// Job id.
    pub(crate) id: String,
    /// Job name.
    pub(crate) name: String,
    /// `failedReason` (empty when the job has none).
    pub(crate) reason: String,
}

/// A queue with its latest sample and its history.
#[derive(Debug, Clone)]
pub(crate) struct QueueView {
    /// The latest sample.
    pub(crate) sample: QueueSample,
    /// Jobs completed between consecutive refreshes, oldest first.
    pub(crate) completed_history: VecDeque<u64>,
    /// Jobs failed between consecutive refreshes, oldest first.
    pub(crate) failed_history: VecDeque<u64>,
    /// Completed per second over the last refresh (`None` before the second sample).
    pub(crate) completed_rate: Option<f64>,
    /// Failed per second over the last refresh (`None` before the second sample).
    pub(crate) failed_rate: Option<f64>,
}

impl QueueView {
    fn new(sample: QueueSample) -> Self {
        Self {
            sample,
            completed_history: VecDeque::new(),
            failed_history: VecDeque::new(),
            completed_rate: None,
            failed_rate: None,
        }
    }

    /// Takes `sample` as the newest, `elapsed` after the previous one.
    fn advance(&mut self, sample: QueueSample, elapsed: Duration) {
        let completed = sample.completed.since(self.sample.completed);
        let failed = sample.failed.since(self.sample.failed);
        push_bounded(&mut self.completed_history, completed);
        push_bounded(&mut self.failed_history, failed);
        let secs = elapsed.as_secs_f64();
        if secs > 0.0 {
            self.completed_rate = Some(completed as f64 / secs);
            self.failed_rate = Some(failed as f64 / secs);
        }
        self.sample = sample;
    }

    /// Share of the jobs finished over the last refresh that failed, in percent.
    pub(crate) fn failure_percent(&self) -> Option<f64> {
        let completed = *self.completed_history.back()?;
        let failed = *self.failed_history.back()?;
        let finished = completed + failed;
        (finished > 0).then(|| failed as f64 * 100.0 / finished as f64)
    }
}

fn push_bounded(history: &mut VecDeque<u64>, value: u64) {
    if history.len() == HISTORY {
        history.pop_front();
    }
    history.push_back(value);
}

/// Everything on the screen (or in one plain table).
#[derive(Debug, Clone)]
pub(crate) struct Model {
    /// The key prefix watched.
    pub(crate) prefix: String,
    /// Time between refreshes.
    pub(crate) interval: Duration,
    /// The queues, by name.
    pub(crate) queues: Vec<QueueView>,
    /// Index of the selected queue in `queues` (0 when there are none).
    pub(crate) selected: usize,
    /// The latest failures of the selected queue, newest first.
    pub(crate) failures: Vec<Failure>,
    /// The outcome of the last key action (pause, retry), shown until the next one.
    pub(crate) status: Option<String>,
    /// Why the last refresh failed, while it keeps failing (e.g. Redis went away).
    pub(crate) error: Option<String>,
    /// When the last good refresh was taken (Unix ms).
    pub(crate) refreshed_at_ms: u64,
    /// The Redis server's facts at the last refresh (`None`: not read, or INFO refused).
    pub(crate) server: Option<crate::commands::server_facts::ServerFacts>,
}

impl Model {
    /// A model with no queues yet.
    pub(crate) fn new(prefix: impl Into<String>, interval: Duration) -> Self {
        Self {
            prefix: prefix.into(),
            interval,
            queues: Vec::new(),
            selected: 0,
            failures: Vec::new(),
            status: None,
            error: None,
            refreshed_at_ms: 0,
            server: None,
        }
    }

    /// Takes the samples of one refresh, `elapsed` after the previous one: known queues keep
    /// their history, new ones start without, vanished ones go; the selection stays on the
    /// queue it was on while that queue exists.
    pub(crate) fn apply(&mut self, samples: Vec<QueueSample>, elapsed: Duration, now_ms: u64) {
        let selected = self.selected_name().map(str::to_owned);
        let mut previous: HashMap<String, QueueView> = self
            .queues
            .drain(..)
            .map(|view| (view.sample.name.clone(), view))
            .collect();
        let mut queues: Vec<QueueView> = samples
            .into_iter()
            .map(|sample| match previous.remove(&sample.name) {
                Some(mut view) => {
                    view.advance(sample, elapsed);
                    view
                }
                None => QueueView::new(sample),
            })
            .collect();
        queues.sort_by(|a, b| a.sample.name.cmp(&b.sample.name));
        self.queues = queues;
        self.selected = selected
            .and_then(|name| self.queues.iter().position(|q| q.sample.name == name))
            .unwrap_or(0)
            .min(self.queues.len().saturating_sub(1));
        self.error = None;
        self.refreshed_at_ms = now_ms;
    }

    /// The selected queue.
    pub(crate) fn selected_queue(&self) -> Option<&QueueView> {
        self.queues.get(self.selected)
    }

    /// The selected queue's name.
    pub(crate) fn selected_name(&self) -> Option<&str> {
        self.selected_queue().map(|q| q.sample.name.as_str())
    }

    /// Moves the selection one queue down (stops at the last).
    pub(crate) fn select_next(&mut self) {
        if self.selected + 1 < self.queues.len() {
            self.selected += 1;
            self.failures.clear();
        }
    }

    /// Moves the selection one queue up (stops at the first).
    pub(crate) fn select_previous(&mut self) {
        if self.selected > 0 {
            self.selected -= 1;
            self.failures.clear();
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A sample of queue `name` with `completed` and `failed` kept jobs (no metrics).
    pub(crate) fn sample(name: &str, completed: u64, failed: u64) -> QueueSample {
        let mut counts = JobCounts::default();
        counts.completed = completed;
        counts.failed = failed;
        QueueSample {
            name: name.into(),
            counts,
            paused: false,
            workers: 0,
            completed: Total::pick(0, completed),
            failed: Total::pick(0, failed),
        }
    }

    #[test]
    fn rates_come_from_deltas_between_refreshes() {
        let mut model = Model::new("bull", Duration::from_secs(1));
        model.apply(
            vec![sample("b", 10, 1), sample("a", 0, 0)],
            Duration::ZERO,
            1,
        );
        assert_eq!(model.queues[0].sample.name, "a", "sorted by name");
        assert_eq!(model.queues[1].completed_rate, None);
        model.apply(
            vec![sample("a", 0, 0), sample("b", 30, 6)],
            Duration::from_secs(2),
            2,
        );
        let b = &model.queues[1];
        assert_eq!(b.completed_history, [20]);
        assert_eq!(b.failed_history, [5]);
        assert_eq!(b.completed_rate, Some(10.0));
        assert_eq!(b.failed_rate, Some(2.5));
        assert_eq!(b.failure_percent(), Some(20.0));
    }

    #[test]
    fn a_shrinking_or_switched_total_is_no_negative_delta() {
        let mut model = Model::new("bull", Duration::from_secs(1));
        model.apply(vec![sample("a", 10, 0)], Duration::ZERO, 1);
        model.apply(vec![sample("a", 3, 0)], Duration::from_secs(1), 2);
        assert_eq!(model.queues[0].completed_history, [0]);
        let mut from_metrics = sample("a", 3, 0);
        from_metrics.completed = Total::pick(500, 3);
        model.apply(vec![from_metrics.clone()], Duration::from_secs(1), 3);
        assert_eq!(model.queues[0].completed_history, [0, 0]);
        from_metrics.completed = Total::pick(520, 3);
        model.apply(vec![from_metrics], Duration::from_secs(1), 4);
        assert_eq!(model.queues[0].completed_history, [0, 0, 20]);
    }

    #[test]
    fn the_selection_follows_its_queue_and_stays_in_range() {
        let mut model = Model::new("bull", Duration::from_secs(1));
        model.apply(
            vec![sample("a", 0, 0), sample("b", 0, 0)],
            Duration::ZERO,
            1,
        );
        model.select_next();
        model.select_next();
        assert_eq!(model.selected_name(), Some("b"));
        model.apply(
            vec![sample("0", 0, 0), sample("a", 0, 0), sample("b", 0, 0)],
            Duration::from_secs(1),
            2,
        );
        assert_eq!(
            model.selected_name(),
            Some("b"),
            "a new queue sorted before it"
        );
        model.apply(vec![sample("a", 0, 0)], Duration::from_secs(1), 3);
        assert_eq!(model.selected_name(), Some("a"), "its queue vanished");
        model.select_previous();
        assert_eq!(model.selected, 0);
        model.apply(Vec::new(), Duration::from_secs(1), 4);
        assert_eq!(model.selected_queue().map(|q| q.sample.name.clone()), None);
    }
}
