//! Job states, named as Node BullMQ's `getState` and `getJobCounts` name them.
//!
//! ```
//! use bullmq_protocol::state::JobState;
//!
//! let s: JobState = "waiting-children".parse().unwrap();
//! assert_eq!(s, JobState::WaitingChildren);
//! assert_eq!(s.as_str(), "waiting-children");
//! ```

use std::fmt;
use std::str::FromStr;

use crate::error::ParseJobStateError;

/// Where a job is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum JobState {
    /// In the `wait` list.
    Waiting,
    /// In the `active` list (a worker holds it).
    Active,
    /// In the `delayed` zset.
    Delayed,
    /// In the `prioritized` zset.
    Prioritized,
    /// In the `completed` zset.
    Completed,
    /// In the `failed` zset.
    Failed,
    /// In the `waiting-children` zset (a flow parent).
    WaitingChildren,
    /// In the legacy `paused` list.
    Paused,
    /// Not found in any set (removed, or the id never existed).
    Unknown,
}

impl JobState {
    /// States `getJobCounts` reports when called without types, in Node's order.
    pub const ALL_COUNTABLE: [JobState; 7] = [
        JobState::Active,
        JobState::Completed,
        JobState::Delayed,
        JobState::Failed,
        JobState::Prioritized,
        JobState::Waiting,
        JobState::WaitingChildren,
    ];

    /// Node's name of the state.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Waiting => "waiting",
            Self::Active => "active",
            Self::Delayed => "delayed",
            Self::Prioritized => "prioritized",
            Self::Completed => "completed",
            Self::Failed => "failed",
            Self::WaitingChildren => "waiting-children",
            Self::Paused => "paused",
            Self::Unknown => "unknown",
        }
    }

    /// Suffix of the queue key holding jobs in this state (`wait` for waiting), or `None` for
    /// [`JobState::Unknown`].
    #[must_use]
    pub fn key_suffix(self) -> Option<&'static str> {
        match self {
            Self::Waiting => Some("wait"),
            Self::Unknown => None,
            other => Some(other.as_str()),
        }
    }

    /// Whether the job is done (completed or failed).
    #[must_use]
    pub fn is_finished(self) -> bool {
        matches!(self, Self::Completed | Self::Failed)
    }
}

impl fmt::Display for JobState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for JobState {
    type Err = ParseJobStateError;

    /// Parses Node's names; `wait` (the key name, which `getJobCounts` also accepts) is read as
    /// [`JobState::Waiting`].
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Ok(match s {
            "waiting" | "wait" => Self::Waiting,
            "active" => Self::Active,
            "delayed" => Self::Delayed,
            "prioritized" => Self::Prioritized,
            "completed" => Self::Completed,
            "failed" => Self::Failed,
            "waiting-children" => Self::WaitingChildren,
            "paused" => Self::Paused,
            "unknown" => Self::Unknown,
            other => return Err(ParseJobStateError(other.to_owned())),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ALL: [JobState; 9] = [
        JobState::Waiting,
        JobState::Active,
        JobState::Delayed,
        JobState::Prioritized,
        JobState::Completed,
        JobState::Failed,
        JobState::WaitingChildren,
        JobState::Paused,
        JobState::Unknown,
    ];

    #[test]
    fn names_round_trip() {
        for s in ALL {
            assert_eq!(s.as_str().parse::<JobState>(), Ok(s));
            assert_eq!(s.to_string(), s.as_str());
        }
        assert_eq!("wait".parse::<JobState>(), Ok(JobState::Waiting));
        assert_eq!(
            "stalled".parse::<JobState>(),
            Err(ParseJobStateError("stalled".into()))
        );
    }

    #[test]
    fn countable_matches_node_default_types() {
        let names: Vec<_> = JobState::ALL_COUNTABLE.iter().map(|s| s.as_str()).collect();
        assert_eq!(
            names,
            [
                "active",
                "completed",
                "delayed",
                "failed",
                "prioritized",
                "waiting",
                "waiting-children"
            ]
        );
    }

    #[test]
    fn key_suffixes() {
        assert_eq!(JobState::Waiting.key_suffix(), Some("wait"));
        assert_eq!(
            JobState::WaitingChildren.key_suffix(),
            Some("waiting-children")
        );
        assert_eq!(JobState::Unknown.key_suffix(), None);
        assert!(JobState::Failed.is_finished());
        assert!(!JobState::Active.is_finished());
    }
}
