//! Options of the queue's bulk operations, with Node's defaults: [`RetryJobsOptions`]
//! (Node `retryJobs({state, count, timestamp})`), [`PromoteJobsOptions`] (Node
//! `promoteJobs({count})`) and [`CleanOptions`] (Node `clean(grace, limit, type)`).
//!
//! ```
//! use std::time::Duration;
//! use ractor_bullmq::{CleanOptions, PromoteJobsOptions, RetryFrom, RetryJobsOptions};
//! use ractor_bullmq::protocol::state::JobState;
//!
//! let retry = RetryJobsOptions::new();
//! assert_eq!((retry.state, retry.count, retry.timestamp), (RetryFrom::Failed, 1000, None));
//! assert_eq!(PromoteJobsOptions::new().count, 1000);
//! let clean = CleanOptions::new(Duration::from_secs(3600)).state(JobState::Failed);
//! assert_eq!((clean.limit, clean.state), (0, JobState::Failed));
//! ```

use std::time::{Duration, SystemTime};

use bullmq_backend::RetryFrom;
use bullmq_protocol::state::JobState;

/// Jobs moved per call when the count is not set (Node's default `count` of `retryJobs` and
/// `promoteJobs`).
const DEFAULT_BATCH: u32 = 1000;

/// How [`Queue::retry_jobs`](crate::Queue::retry_jobs) moves finished jobs back to `wait`
/// (Node `queue.retryJobs(opts)`); [`RetryJobsOptions::new`] has Node's defaults.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct RetryJobsOptions {
    /// Which finished jobs to retry (Node `state`, default failed).
    pub state: RetryFrom,
    /// Jobs moved per call, at least 1 (Node `count`, default 1000).
    pub count: u32,
    /// Retry only jobs finished at or before this time (Node `timestamp`, ms; default `None`:
    /// now, read again for each batch as Node does).
    pub timestamp: Option<SystemTime>,
}

impl Default for RetryJobsOptions {
    fn default() -> Self {
        Self {
            state: RetryFrom::Failed,
            count: DEFAULT_BATCH,
            timestamp: None,
        }
    }
}

impl RetryJobsOptions {
    /// Node's defaults: failed jobs, 1000 per call, finished up to now.
    pub fn new() -> Self {
        Self::default()
    }

    /// Which finished jobs to retry (Node `state`).
    #[must_use]
    pub fn state(mut self, state: RetryFrom) -> Self {
        self.state = state;
        self
    }

    /// Jobs moved per call (Node `count`).
    #[must_use]
    pub fn count(mut self, count: u32) -> Self {
        self.count = count;
        self
    }

    /// Only jobs finished at or before `timestamp` (Node `timestamp`).
    #[must_use]
    pub fn timestamp(mut self, timestamp: SystemTime) -> Self {
        self.timestamp = Some(timestamp);
        self
    }
}

/// How [`Queue::promote_jobs`](crate::Queue::promote_jobs) moves delayed jobs to `wait` (Node
/// `queue.promoteJobs(opts)`); [`PromoteJobsOptions::new`] has Node's default.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct PromoteJobsOptions {
    /// Jobs moved per call, at least 1 (Node `count`, default 1000).
    pub count: u32,
}

impl Default for PromoteJobsOptions {
    fn default() -> Self {
        Self {
            count: DEFAULT_BATCH,
        }
    }
}

impl PromoteJobsOptions {
    /// Node's default: 1000 jobs per call.
    pub fn new() -> Self {
        Self::default()
    }

    /// Jobs moved per call (Node `count`).
    #[must_use]
    pub fn count(mut self, count: u32) -> Self {
        self.count = count;
        self
    }
}

/// Which jobs [`Queue::clean`](crate::Queue::clean) removes (Node `queue.clean(grace, limit,
/// type)`): those of `state` older than `grace`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct CleanOptions {
    /// Keep jobs younger than this, by `finishedOn`, `processedOn` or `timestamp` (Node
    /// `grace`, ms; no default).
    pub grace: Duration,
    /// Remove at most this many jobs, 0 for all (Node `limit`, default 0 here).
    pub limit: u64,
    /// The state to clean (Node `type`, default completed).
    pub state: JobState,
}

impl CleanOptions {
    /// Jobs older than `grace`, all of them, of the completed state (Node's default type).
    pub fn new(grace: Duration) -> Self {
        Self {
            grace,
            limit: 0,
            state: JobState::Completed,
        }
    }

    /// Remove at most `limit` jobs (0: all) (Node `limit`).
    #[must_use]
    pub fn limit(mut self, limit: u64) -> Self {
        self.limit = limit;
        self
    }

    /// The state to clean (Node `type`).
    #[must_use]
    pub fn state(mut self, state: JobState) -> Self {
        self.state = state;
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retry_jobs_defaults_are_nodes() {
        let opts = RetryJobsOptions::new();
        assert_eq!(opts.state, RetryFrom::Failed);
        assert_eq!(opts.count, 1000);
        assert_eq!(opts.timestamp, None);
        let at = SystemTime::UNIX_EPOCH + Duration::from_secs(5);
        let set = opts.state(RetryFrom::Completed).count(10).timestamp(at);
        assert_eq!(
            (set.state, set.count, set.timestamp),
            (RetryFrom::Completed, 10, Some(at))
        );
    }

    #[test]
    fn promote_jobs_default_is_nodes() {
        assert_eq!(PromoteJobsOptions::new().count, 1000);
        assert_eq!(PromoteJobsOptions::new().count(7).count, 7);
    }

    #[test]
    fn clean_defaults_to_every_completed_job() {
        let opts = CleanOptions::new(Duration::from_secs(1));
        assert_eq!(opts.grace, Duration::from_secs(1));
        assert_eq!(opts.limit, 0);
        assert_eq!(opts.state, JobState::Completed);
        let set = opts.limit(3).state(JobState::Failed);
        assert_eq!((set.limit, set.state), (3, JobState::Failed));
    }
}
