//! Queue control on [`Queue`]: global concurrency and global rate limit (kept in the queue's
//! `meta`, honoured by every worker of any language), a manual rate limit of the whole queue,
//! the limiter's remaining time, whether the queue is maxed, trimming the events stream,
//! deduplication keys, and counts per priority or per chosen state — Node BullMQ's `Queue`
//! methods of the same names, with the same Redis effects.

use std::collections::BTreeMap;
use std::time::Duration;

use bullmq_backend::GlobalRateLimit;
use bullmq_protocol::state::JobState;

use crate::error::{QueueError, Result};
use crate::queue::Queue;

/// What [`Queue::get_rate_limit_ttl`] found (Node's number: a positive ms count, 0, -1 or -2).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum RateLimitTtl {
    /// The queue is rate limited for this long still.
    Limited(Duration),
    /// Not rate limited (Node 0).
    NotLimited,
    /// Asked without a max and with no global rate limit: no `limiter` key (Node -2).
    NoKey,
    /// Asked without a max and with no global rate limit: the key has no expiry (Node -1).
    NoExpiry,
}

impl RateLimitTtl {
    /// Reads Node's number.
    ///
    /// ```
    /// use std::time::Duration;
    /// use ractor_bullmq::queue::RateLimitTtl;
    /// assert_eq!(RateLimitTtl::from_millis(250), RateLimitTtl::Limited(Duration::from_millis(250)));
    /// assert_eq!(RateLimitTtl::from_millis(-2).as_millis(), -2);
    /// ```
    pub fn from_millis(ms: i64) -> Self {
        match ms {
            -2 => Self::NoKey,
            -1 => Self::NoExpiry,
            ms if ms > 0 => Self::Limited(Duration::from_millis(ms.unsigned_abs())),
            _ => Self::NotLimited,
        }
    }

    /// Node's number for this value.
    pub fn as_millis(&self) -> i64 {
        match self {
            Self::Limited(d) => i64::try_from(d.as_millis()).unwrap_or(i64::MAX),
            Self::NotLimited => 0,
            Self::NoKey => -2,
            Self::NoExpiry => -1,
        }
    }
}

impl Queue {
    /// Sets the queue's global concurrency (Node `setGlobalConcurrency`): at most
    /// `concurrency` jobs of this queue active at once across every worker (meta
    /// `concurrency`). 0 stops every worker from taking jobs, as in Node.
    ///
    /// # Errors
    ///
    /// [`QueueError::Redis`] when Redis fails (another backend: [`QueueError::Backend`]).
    ///
    /// # Cancel safety
    ///
    /// One command: it happened or it did not.
    pub async fn set_global_concurrency(&self, concurrency: u64) -> Result<()> {
        Ok(self.store().set_global_concurrency(concurrency).await?)
    }

    /// The global concurrency, `None` when unset (Node `getGlobalConcurrency`, which returns
    /// `null`).
    ///
    /// # Errors
    ///
    /// As [`Queue::set_global_concurrency`].
    ///
    /// # Cancel safety
    ///
    /// Read-only.
    pub async fn get_global_concurrency(&self) -> Result<Option<u64>> {
        Ok(self.store().get_global_concurrency().await?)
    }

    /// Removes the global concurrency (Node `removeGlobalConcurrency`); `true` when one was set.
    ///
    /// # Errors
    ///
    /// As [`Queue::set_global_concurrency`].
    ///
    /// # Cancel safety
    ///
    /// One command.
    pub async fn remove_global_concurrency(&self) -> Result<bool> {
        Ok(self.store().remove_global_concurrency().await?)
    }

    /// Sets the queue's global rate limit (Node `setGlobalRateLimit(max, duration)`): at most
    /// `max` jobs start per `duration` across every worker (meta `max`, `duration` in ms).
    ///
    /// # Errors
    ///
    /// [`QueueError::InvalidArgument`] when `duration` is under 1 ms (nothing written); else
    /// as [`Queue::set_global_concurrency`].
    ///
    /// # Cancel safety
    ///
    /// One command.
    pub async fn set_global_rate_limit(&self, max: u64, duration: Duration) -> Result<()> {
        let limit = GlobalRateLimit::new(max, duration);
        if limit.duration_ms() == 0 {
            return Err(QueueError::InvalidArgument {
                argument: "duration",
                reason: "must be at least 1 ms",
            });
        }
        Ok(self.store().set_global_rate_limit(limit).await?)
    }

    /// The global rate limit, `None` unless both `max` and `duration` are set (Node
    /// `getGlobalRateLimit`).
    ///
    /// # Errors
    ///
    /// As [`Queue::set_global_concurrency`].
    ///
    /// # Cancel safety
    ///
    /// Read-only.
    pub async fn get_global_rate_limit(&self) -> Result<Option<GlobalRateLimit>> {
        Ok(self.store().get_global_rate_limit().await?)
    }

    /// Removes the global rate limit (Node `removeGlobalRateLimit`); `true` when either field
    /// was set.
    ///
    /// # Errors
    ///
    /// As [`Queue::set_global_concurrency`].
    ///
    /// # Cancel safety
    ///
    /// One command.
    pub async fn remove_global_rate_limit(&self) -> Result<bool> {
        Ok(self.store().remove_global_rate_limit().await? > 0)
    }

    /// Rate limits the whole queue for `ttl` (Node `queue.rateLimit(ms)`): the `limiter` key is
    /// saturated until it expires, so workers with a rate limit (their own or the global one)
    /// take no job meanwhile. Replaces the current window.
    ///
    /// # Errors
    ///
    /// [`QueueError::InvalidArgument`] when `ttl` is under 1 ms (nothing written); else as
    /// [`Queue::set_global_concurrency`].
    ///
    /// # Cancel safety
    ///
    /// One command.
    pub async fn rate_limit(&self, ttl: Duration) -> Result<()> {
        let ms = u64::try_from(ttl.as_millis()).unwrap_or(u64::MAX);
        if ms == 0 {
            return Err(QueueError::InvalidArgument {
                argument: "ttl",
                reason: "must be at least 1 ms",
            });
        }
        Ok(self.store().set_rate_limit(ms).await?)
    }

    /// How long the queue stays rate limited (Node `getRateLimitTtl(maxJobs)`): with
    /// `max_jobs` (or else the global rate limit's `max`), the limiter's remaining time when
    /// that many jobs were counted in its window; with neither, the limiter key's own TTL.
    ///
    /// # Errors
    ///
    /// As [`Queue::set_global_concurrency`].
    ///
    /// # Cancel safety
    ///
    /// Read-only (an already expiring limiter may be deleted, as Node's script does).
    pub async fn get_rate_limit_ttl(&self, max_jobs: Option<u64>) -> Result<RateLimitTtl> {
        let ms = self.store().get_rate_limit_ttl(max_jobs).await?;
        Ok(RateLimitTtl::from_millis(ms))
    }

    /// Deletes the `limiter` key, ending the current rate-limit window (Node
    /// `removeRateLimitKey`); `true` when it existed.
    ///
    /// # Errors
    ///
    /// As [`Queue::set_global_concurrency`].
    ///
    /// # Cancel safety
    ///
    /// One command.
    pub async fn remove_rate_limit_key(&self) -> Result<bool> {
        Ok(self.store().remove_rate_limit_key().await?)
    }

    /// Whether the global concurrency is reached: as many jobs active as meta `concurrency`
    /// (Node `isMaxed`). `false` without a global concurrency.
    ///
    /// # Errors
    ///
    /// As [`Queue::set_global_concurrency`].
    ///
    /// # Cancel safety
    ///
    /// Read-only.
    pub async fn is_maxed(&self) -> Result<bool> {
        Ok(self.store().is_maxed().await?)
    }

    /// Trims the events stream to about `max_length` entries (Node `trimEvents`,
    /// `XTRIM MAXLEN ~`: Redis may keep more, trimming whole internal nodes only); returns how
    /// many entries were removed.
    ///
    /// # Errors
    ///
    /// As [`Queue::set_global_concurrency`].
    ///
    /// # Cancel safety
    ///
    /// One command.
    pub async fn trim_events(&self, max_length: u64) -> Result<u64> {
        Ok(self.store().trim_events(max_length).await?)
    }

    /// The id of the job holding deduplication id `dedup_id` (Node `getDeduplicationJobId`),
    /// `None` when no job holds it (never added, released, or its TTL passed).
    ///
    /// # Errors
    ///
    /// As [`Queue::set_global_concurrency`].
    ///
    /// # Cancel safety
    ///
    /// Read-only.
    pub async fn get_deduplication_job_id(&self, dedup_id: &str) -> Result<Option<String>> {
        Ok(self.store().get_deduplication_job_id(dedup_id).await?)
    }

    /// Releases deduplication id `dedup_id`, so the next job with it is added (Node
    /// `removeDeduplicationKey`); `true` when a job held it. The job itself is untouched.
    ///
    /// # Errors
    ///
    /// As [`Queue::set_global_concurrency`].
    ///
    /// # Cancel safety
    ///
    /// One command.
    pub async fn remove_deduplication_key(&self, dedup_id: &str) -> Result<bool> {
        Ok(self.store().remove_deduplication_key(dedup_id).await?)
    }

    /// Waiting jobs per priority (Node `getCountsPerPriority`), read atomically: priority 0
    /// counts the `wait` list (jobs without a priority), any other the prioritized jobs of
    /// exactly that priority. Duplicates are counted once.
    ///
    /// # Errors
    ///
    /// As [`Queue::set_global_concurrency`].
    ///
    /// # Cancel safety
    ///
    /// Read-only.
    pub async fn get_counts_per_priority(&self, priorities: &[u32]) -> Result<BTreeMap<u32, u64>> {
        let unique = unique(priorities);
        let counts = self.store().get_counts_per_priority(&unique).await?;
        Ok(unique.into_iter().zip(counts).collect())
    }

    /// The number of jobs in each of `states`, in the order given, duplicates dropped (Node
    /// `getJobCounts(...types)`; an empty slice counts Node's default states,
    /// [`JobState::ALL_COUNTABLE`]).
    ///
    /// # Errors
    ///
    /// As [`Queue::set_global_concurrency`]; [`JobState::Unknown`] has no key and fails.
    ///
    /// # Cancel safety
    ///
    /// Read-only.
    pub async fn get_job_counts_of(&self, states: &[JobState]) -> Result<Vec<(JobState, u64)>> {
        let states = if states.is_empty() {
            JobState::ALL_COUNTABLE.to_vec()
        } else {
            unique(states)
        };
        let counts = self.store().get_counts(&states).await?;
        Ok(states.into_iter().zip(counts).collect())
    }
}

/// The values in first-seen order, each once (Node's `[...new Set(values)]`).
fn unique<T: Copy + PartialEq>(values: &[T]) -> Vec<T> {
    let mut out = Vec::with_capacity(values.len());
    for v in values {
        if !out.contains(v) {
            out.push(*v);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rate_limit_ttl_reads_node_numbers() {
        for ms in [-2, -1, 0, 1, 1500] {
            assert_eq!(RateLimitTtl::from_millis(ms).as_millis(), ms);
        }
        assert_eq!(RateLimitTtl::from_millis(-7), RateLimitTtl::NotLimited);
    }

    #[test]
    fn unique_keeps_first_seen_order() {
        assert_eq!(unique(&[3, 1, 3, 0, 1]), vec![3, 1, 0]);
    }
}
