//! Plain values the queue's getters return: counts per state, meta, logs.

use std::collections::HashMap;

use bullmq_protocol::state::JobState;

/// Number of jobs in each state (Node `getJobCounts`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct JobCounts {
    /// Jobs in `wait`, plus any an old client left in the legacy `paused` list.
    pub waiting: u64,
    /// Jobs a worker holds.
    pub active: u64,
    /// Jobs scheduled for later.
    pub delayed: u64,
    /// Jobs waiting with a priority.
    pub prioritized: u64,
    /// Finished successfully (still kept).
    pub completed: u64,
    /// Failed for good (still kept).
    pub failed: u64,
    /// Parents waiting for their children (flows).
    pub waiting_children: u64,
    /// Jobs in the legacy `paused` list (already included in `waiting`); BullMQ 5+ keeps the
    /// jobs of a paused queue in `wait`.
    pub paused: u64,
}

impl JobCounts {
    /// The states counted, in the order of [`JobCounts::from_counts`].
    pub(crate) const STATES: [JobState; 8] = [
        JobState::Waiting,
        JobState::Active,
        JobState::Delayed,
        JobState::Prioritized,
        JobState::Completed,
        JobState::Failed,
        JobState::WaitingChildren,
        JobState::Paused,
    ];

    pub(crate) fn from_counts(counts: &[u64]) -> Self {
        let at = |i: usize| counts.get(i).copied().unwrap_or(0);
        Self {
            waiting: at(0),
            active: at(1),
            delayed: at(2),
            prioritized: at(3),
            completed: at(4),
            failed: at(5),
            waiting_children: at(6),
            paused: at(7),
        }
    }

    /// The count of one state (`Unknown` is 0).
    pub fn get(&self, state: JobState) -> u64 {
        match state {
            JobState::Waiting => self.waiting,
            JobState::Active => self.active,
            JobState::Delayed => self.delayed,
            JobState::Prioritized => self.prioritized,
            JobState::Completed => self.completed,
            JobState::Failed => self.failed,
            JobState::WaitingChildren => self.waiting_children,
            JobState::Paused => self.paused,
            _ => 0,
        }
    }

    /// Jobs not yet processed: waiting, delayed, prioritized and waiting-children (Node
    /// `Queue.count`).
    pub fn pending(&self) -> u64 {
        self.waiting + self.delayed + self.prioritized + self.waiting_children
    }
}

/// The queue's `meta` hash, decoded.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct QueueMeta {
    /// Whether the queue is paused.
    pub paused: bool,
    /// Library that last created a handle, e.g. `bullmq:6.7.0`.
    pub version: Option<String>,
    /// Approximate events stream length (`opts.maxLenEvents`).
    pub max_len_events: Option<u64>,
    /// Global concurrency, when set.
    pub concurrency: Option<u64>,
    /// Every field as stored.
    pub raw: HashMap<String, String>,
}

impl QueueMeta {
    pub(crate) fn from_raw(raw: HashMap<String, String>) -> Self {
        let number = |field: &str| raw.get(field).and_then(|v| v.parse().ok());
        Self {
            paused: raw.contains_key("paused"),
            version: raw.get("version").cloned(),
            max_len_events: number("opts.maxLenEvents"),
            concurrency: number("concurrency"),
            raw,
        }
    }
}

/// Log lines of a job and the total number kept (Node `getJobLogs`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct JobLogs {
    /// The requested lines.
    pub logs: Vec<String>,
    /// How many lines the job has in total.
    pub count: u64,
}
