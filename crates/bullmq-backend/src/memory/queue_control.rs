//! Queue control on the memory backend, following the Redis backend's commands: meta fields
//! (`HSET` / `HGET` / `HDEL`), the `limiter` string (`SET … PX`, `PTTL`, `DEL`), the events
//! stream trim, `de:{id}` strings, and the per-priority counts of `get_counts_per_priority.lua`.

use async_trait::async_trait;
use bullmq_protocol::score::PRIORITY_SCORE_MULTIPLIER;

use super::queue_state::{Expiring, QueueState};
use super::stores::MemoryQueueStore;
use crate::error::BackendResult;
use crate::queue_control::{
    concurrency_from_meta, GlobalRateLimit, QueueControl, RATE_LIMIT_SATURATED,
};

/// `PTTL limiter`: remaining ms, -2 when missing (or expired), -1 without expiry.
pub(super) fn limiter_pttl(q: &mut QueueState, now: u64) -> i64 {
    match &q.limiter {
        Some(l) if !l.live(now) => {
            q.limiter = None;
            -2
        }
        Some(Expiring {
            expires_at: Some(at),
            ..
        }) => i64::try_from(at.saturating_sub(now)).unwrap_or(i64::MAX),
        Some(_) => -1,
        None => -2,
    }
}

/// `get_rate_limit_ttl.lua`: the remaining window when the limiter's count reached `max`.
/// A `max` that is not a number never limits (the script's `tonumber` gives nil).
fn limited_ttl(q: &mut QueueState, max: Option<f64>, now: u64) -> i64 {
    let count = q
        .limiter
        .as_ref()
        .filter(|l| l.live(now))
        .map_or(0, |l| l.value);
    if max.is_none_or(|max| max > count as f64) {
        return 0;
    }
    limiter_pttl(q, now).max(0)
}

#[async_trait]
impl QueueControl for MemoryQueueStore {
    async fn set_global_concurrency(&self, concurrency: u64) -> BackendResult<()> {
        self.queue(|q, _| {
            q.meta.insert("concurrency".into(), concurrency.to_string());
            Ok(())
        })
    }

    async fn get_global_concurrency(&self) -> BackendResult<Option<u64>> {
        self.queue(|q, _| {
            Ok(concurrency_from_meta(
                q.meta.get("concurrency").map(String::as_str),
            ))
        })
    }

    async fn remove_global_concurrency(&self) -> BackendResult<bool> {
        self.queue(|q, _| Ok(q.meta.remove("concurrency").is_some()))
    }

    async fn set_global_rate_limit(&self, limit: GlobalRateLimit) -> BackendResult<()> {
        self.queue(|q, _| {
            q.meta.insert("max".into(), limit.max.to_string());
            q.meta
                .insert("duration".into(), limit.duration_ms().to_string());
            Ok(())
        })
    }

    async fn get_global_rate_limit(&self) -> BackendResult<Option<GlobalRateLimit>> {
        self.queue(|q, _| {
            Ok(GlobalRateLimit::from_meta(
                q.meta.get("max").map(String::as_str),
                q.meta.get("duration").map(String::as_str),
            ))
        })
    }

    async fn remove_global_rate_limit(&self) -> BackendResult<u64> {
        self.queue(|q, _| {
            let max = q.meta.remove("max").is_some();
            let duration = q.meta.remove("duration").is_some();
            Ok(u64::from(max) + u64::from(duration))
        })
    }

    async fn set_rate_limit(&self, ttl_ms: u64) -> BackendResult<()> {
        self.queue(|q, now| {
            q.limiter = Some(Expiring {
                value: RATE_LIMIT_SATURATED,
                expires_at: Some(now.saturating_add(ttl_ms.max(1))),
            });
            Ok(())
        })
    }

    async fn get_rate_limit_ttl(&self, max_jobs: Option<u64>) -> BackendResult<i64> {
        self.queue(|q, now| {
            // As the script: an explicit 0 means "not given".
            if let Some(max) = max_jobs.filter(|m| *m > 0) {
                return Ok(limited_ttl(q, Some(max as f64), now));
            }
            match q.meta.get("max").map(|v| v.trim().parse::<f64>().ok()) {
                Some(max) => Ok(limited_ttl(q, max, now)),
                None => Ok(limiter_pttl(q, now)),
            }
        })
    }

    async fn remove_rate_limit_key(&self) -> BackendResult<bool> {
        self.queue(|q, now| {
            let live = q.limiter.as_ref().is_some_and(|l| l.live(now));
            q.limiter = None;
            Ok(live)
        })
    }

    async fn is_maxed(&self) -> BackendResult<bool> {
        self.queue(|q, _| {
            let concurrency = q
                .meta
                .get("concurrency")
                .and_then(|v| v.trim().parse::<f64>().ok());
            Ok(concurrency.is_some_and(|c| q.active.len() as f64 >= c))
        })
    }

    async fn trim_events(&self, max_length: u64) -> BackendResult<u64> {
        // Exact, where Redis's `~` may keep more: callers must not rely on either.
        self.queue(|q, _| Ok(q.events.trim(max_length)))
    }

    async fn get_deduplication_job_id(&self, dedup_id: &str) -> BackendResult<Option<String>> {
        self.queue(|q, now| {
            Ok(q.dedup
                .get(dedup_id)
                .filter(|e| e.live(now))
                .map(|e| e.value.clone()))
        })
    }

    async fn remove_deduplication_key(&self, dedup_id: &str) -> BackendResult<bool> {
        self.queue(|q, now| Ok(q.dedup.remove(dedup_id).is_some_and(|e| e.live(now))))
    }

    async fn get_counts_per_priority(&self, priorities: &[u32]) -> BackendResult<Vec<u64>> {
        self.queue(|q, _| {
            Ok(priorities
                .iter()
                .map(|&p| {
                    if p == 0 {
                        q.wait.len() as u64
                    } else {
                        let min = u64::from(p) * PRIORITY_SCORE_MULTIPLIER;
                        let max = min + (PRIORITY_SCORE_MULTIPLIER - 1);
                        q.prioritized.range_by_score(min, max).len() as u64
                    }
                })
                .collect())
        })
    }
}
