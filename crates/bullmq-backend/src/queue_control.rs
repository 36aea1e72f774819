//! Queue control on the seam ([`QueueControl`]): the global concurrency and global rate limit
//! kept in the queue's meta, the rate limiter key, the events stream's length, deduplication
//! keys and per-priority counts — what Node BullMQ's `Queue` offers beside adding and admin.
//!
//! The values live where Node keeps them, so workers of any language honour them: `concurrency`
//! and `max` / `duration` fields of `meta`, the `limiter` string (a counter with an expiry), the
//! `de:{id}` strings. Every method is one atomic step.

use std::time::Duration;

use async_trait::async_trait;

use crate::capability::{unsupported, BackendName, Capability};
use crate::error::BackendResult;

/// A queue-wide rate limit (Node `setGlobalRateLimit(max, duration)`): at most `max` jobs start
/// per `duration`, across every worker of the queue.
///
/// ```
/// use std::time::Duration;
/// use bullmq_backend::GlobalRateLimit;
/// let limit = GlobalRateLimit::new(10, Duration::from_secs(1));
/// assert_eq!((limit.max, limit.duration.as_millis()), (10, 1000));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct GlobalRateLimit {
    /// Jobs allowed per window (meta `max`).
    pub max: u64,
    /// The window (meta `duration`, stored in whole milliseconds).
    pub duration: Duration,
}

impl GlobalRateLimit {
    /// At most `max` jobs per `duration`.
    pub const fn new(max: u64, duration: Duration) -> Self {
        Self { max, duration }
    }

    /// The window in whole milliseconds, as stored (sub-millisecond parts are dropped).
    pub fn duration_ms(&self) -> u64 {
        u64::try_from(self.duration.as_millis()).unwrap_or(u64::MAX)
    }

    /// Reads the meta fields `max` and `duration` as Node's `getGlobalRateLimit` does: `None`
    /// unless both are present and non-empty. A value that is not a non-negative integer also
    /// reads as `None` (Node would return `NaN`).
    pub fn from_meta(max: Option<&str>, duration: Option<&str>) -> Option<Self> {
        let max = max.filter(|v| !v.is_empty())?.trim().parse::<u64>().ok()?;
        let duration = duration
            .filter(|v| !v.is_empty())?
            .trim()
            .parse::<u64>()
            .ok()?;
        Some(Self::new(max, Duration::from_millis(duration)))
    }
}

/// Reads meta `concurrency` as Node's `getGlobalConcurrency`: `None` when absent or empty, or
/// (where Node would return `NaN`) not a non-negative integer.
///
/// ```
/// use bullmq_backend::queue_control::concurrency_from_meta;
/// assert_eq!(concurrency_from_meta(Some("4")), Some(4));
/// assert_eq!(concurrency_from_meta(Some("0")), Some(0));
/// assert_eq!(concurrency_from_meta(None), None);
/// assert_eq!(concurrency_from_meta(Some("x")), None);
/// ```
pub fn concurrency_from_meta(value: Option<&str>) -> Option<u64> {
    value.filter(|v| !v.is_empty())?.trim().parse().ok()
}

/// The value Node's `queue.rateLimit(ms)` stores in `limiter` (`Number.MAX_SAFE_INTEGER`): a
/// count no `max` reaches, so every worker sees the queue rate limited until the key expires.
pub const RATE_LIMIT_SATURATED: u64 = 9_007_199_254_740_991;

/// Controlling a queue's limits and bookkeeping keys (Node `Queue`'s `setGlobalConcurrency`,
/// `setGlobalRateLimit`, `rateLimit`, `getRateLimitTtl`, `isMaxed`, `trimEvents`,
/// `getDeduplicationJobId`, `removeDeduplicationKey`, `getCountsPerPriority`).
#[async_trait]
#[allow(unused_variables)] // the default bodies decline without reading their arguments
pub trait QueueControl: BackendName {
    /// Sets meta `concurrency`: at most that many jobs of the queue active at once.
    async fn set_global_concurrency(&self, concurrency: u64) -> BackendResult<()> {
        unsupported(self, Capability::QueueControl)
    }

    /// Meta `concurrency`, read by [`concurrency_from_meta`].
    async fn get_global_concurrency(&self) -> BackendResult<Option<u64>> {
        unsupported(self, Capability::QueueControl)
    }

    /// Deletes meta `concurrency`; `true` when it was set.
    async fn remove_global_concurrency(&self) -> BackendResult<bool> {
        unsupported(self, Capability::QueueControl)
    }

    /// Sets meta `max` and `duration` (ms).
    async fn set_global_rate_limit(&self, limit: GlobalRateLimit) -> BackendResult<()> {
        unsupported(self, Capability::QueueControl)
    }

    /// Meta `max` and `duration`, read by [`GlobalRateLimit::from_meta`].
    async fn get_global_rate_limit(&self) -> BackendResult<Option<GlobalRateLimit>> {
        unsupported(self, Capability::QueueControl)
    }

    /// Deletes meta `max` and `duration`; returns how many of the two fields existed.
    async fn remove_global_rate_limit(&self) -> BackendResult<u64> {
        unsupported(self, Capability::QueueControl)
    }

    /// Rate limits the whole queue for `ttl_ms` (> 0): `limiter` set to
    /// [`RATE_LIMIT_SATURATED`] expiring in `ttl_ms`, replacing any current window.
    async fn set_rate_limit(&self, ttl_ms: u64) -> BackendResult<()> {
        unsupported(self, Capability::QueueControl)
    }

    /// Node's `getRateLimitTtl(maxJobs)`, in ms: with `max_jobs` (or else meta `max`), the
    /// limiter's remaining time when its count reached that many, 0 otherwise; with neither,
    /// the limiter's raw `PTTL` (-2 when it does not exist, -1 when it has no expiry).
    async fn get_rate_limit_ttl(&self, max_jobs: Option<u64>) -> BackendResult<i64> {
        unsupported(self, Capability::QueueControl)
    }

    /// Deletes the `limiter` key; `true` when it existed.
    async fn remove_rate_limit_key(&self) -> BackendResult<bool> {
        unsupported(self, Capability::QueueControl)
    }

    /// Whether the queue's global concurrency is reached (active jobs ≥ meta `concurrency`);
    /// `false` when none is set (or it is not a number).
    async fn is_maxed(&self) -> BackendResult<bool> {
        unsupported(self, Capability::QueueControl)
    }

    /// Trims the events stream to about `max_length` entries (`XTRIM MAXLEN ~`: Redis trims
    /// whole internal nodes only, so it may keep more); returns how many were removed.
    async fn trim_events(&self, max_length: u64) -> BackendResult<u64> {
        unsupported(self, Capability::EventTrimming)
    }

    /// The job id holding deduplication id `dedup_id` (`de:{id}`), `None` when none does.
    async fn get_deduplication_job_id(&self, dedup_id: &str) -> BackendResult<Option<String>> {
        unsupported(self, Capability::QueueControl)
    }

    /// Deletes `de:{dedup_id}`, so the next job with that id is added; `true` when it existed.
    async fn remove_deduplication_key(&self, dedup_id: &str) -> BackendResult<bool> {
        unsupported(self, Capability::QueueControl)
    }

    /// Jobs waiting per priority, in the order given (read in one atomic step): priority 0
    /// counts the `wait` list, any other the `prioritized` jobs of exactly that priority.
    async fn get_counts_per_priority(&self, priorities: &[u32]) -> BackendResult<Vec<u64>> {
        unsupported(self, Capability::QueueControl)
    }
}

#[async_trait]
impl<T: QueueControl + ?Sized> QueueControl for std::sync::Arc<T> {
    async fn set_global_concurrency(&self, concurrency: u64) -> BackendResult<()> {
        (**self).set_global_concurrency(concurrency).await
    }

    async fn get_global_concurrency(&self) -> BackendResult<Option<u64>> {
        (**self).get_global_concurrency().await
    }

    async fn remove_global_concurrency(&self) -> BackendResult<bool> {
        (**self).remove_global_concurrency().await
    }

    async fn set_global_rate_limit(&self, limit: GlobalRateLimit) -> BackendResult<()> {
        (**self).set_global_rate_limit(limit).await
    }

    async fn get_global_rate_limit(&self) -> BackendResult<Option<GlobalRateLimit>> {
        (**self).get_global_rate_limit().await
    }

    async fn remove_global_rate_limit(&self) -> BackendResult<u64> {
        (**self).remove_global_rate_limit().await
    }

    async fn set_rate_limit(&self, ttl_ms: u64) -> BackendResult<()> {
        (**self).set_rate_limit(ttl_ms).await
    }

    async fn get_rate_limit_ttl(&self, max_jobs: Option<u64>) -> BackendResult<i64> {
        (**self).get_rate_limit_ttl(max_jobs).await
    }

    async fn remove_rate_limit_key(&self) -> BackendResult<bool> {
        (**self).remove_rate_limit_key().await
    }

    async fn is_maxed(&self) -> BackendResult<bool> {
        (**self).is_maxed().await
    }

    async fn trim_events(&self, max_length: u64) -> BackendResult<u64> {
        (**self).trim_events(max_length).await
    }

    async fn get_deduplication_job_id(&self, dedup_id: &str) -> BackendResult<Option<String>> {
        (**self).get_deduplication_job_id(dedup_id).await
    }

    async fn remove_deduplication_key(&self, dedup_id: &str) -> BackendResult<bool> {
        (**self).remove_deduplication_key(dedup_id).await
    }

    async fn get_counts_per_priority(&self, priorities: &[u32]) -> BackendResult<Vec<u64>> {
        (**self).get_counts_per_priority(priorities).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn global_rate_limit_needs_both_fields() {
        assert_eq!(
            GlobalRateLimit::from_meta(Some("5"), Some("1000")),
            Some(GlobalRateLimit::new(5, Duration::from_secs(1)))
        );
        assert_eq!(GlobalRateLimit::from_meta(Some("5"), None), None);
        assert_eq!(GlobalRateLimit::from_meta(None, Some("1000")), None);
        assert_eq!(GlobalRateLimit::from_meta(Some(""), Some("1000")), None);
        assert_eq!(GlobalRateLimit::from_meta(Some("x"), Some("1000")), None);
    }

    #[test]
    fn duration_is_stored_in_whole_milliseconds() {
        let limit = GlobalRateLimit::new(1, Duration::from_micros(2_500));
        assert_eq!(limit.duration_ms(), 2);
    }
}
