//! Queue control: global concurrency and rate limit in meta, the manual rate limit and its
//! TTL, deduplication keys, per-priority counts, the events trim — and fetches honouring the
//! limits set through [`QueueControl`](crate::QueueControl).

use std::sync::Arc;
use std::time::Duration;

use super::Ctx;
use crate::{Backend, GlobalRateLimit};

/// Limits set through the seam read back, gate fetches, and are removed.
pub async fn queue_control_limits_gate_fetches(backend: Arc<dyn Backend>, queue: &str) {
    let c = Ctx::new(backend, queue).await;
    let q = &c.queue;
    assert_eq!(q.get_global_concurrency().await.unwrap(), None);
    assert_eq!(q.get_global_rate_limit().await.unwrap(), None);
    assert_eq!(
        q.get_rate_limit_ttl(None).await.unwrap(),
        -2,
        "no limiter key"
    );
    for _ in 0..3 {
        c.add("j", "{}").await;
    }

    q.set_global_concurrency(1).await.unwrap();
    assert_eq!(q.get_global_concurrency().await.unwrap(), Some(1));
    assert!(!q.is_maxed().await.unwrap());
    assert_eq!(c.fetch(3).await.jobs.len(), 1, "global concurrency 1");
    assert!(q.is_maxed().await.unwrap());
    assert!(q.remove_global_concurrency().await.unwrap());
    assert!(!q.remove_global_concurrency().await.unwrap());
    assert!(!q.is_maxed().await.unwrap());

    let limit = GlobalRateLimit::new(1, Duration::from_secs(60));
    q.set_global_rate_limit(limit).await.unwrap();
    assert_eq!(q.get_global_rate_limit().await.unwrap(), Some(limit));
    let fetched = c.fetch(3).await;
    assert_eq!(fetched.jobs.len(), 1, "global rate limit 1 per minute");
    let ttl = q.get_rate_limit_ttl(None).await.unwrap();
    assert!(ttl > 0 && ttl <= 60_000, "limited by meta max: {ttl}");
    assert_eq!(
        q.get_rate_limit_ttl(Some(5)).await.unwrap(),
        0,
        "5 not reached"
    );
    assert!(c.fetch(3).await.jobs.is_empty(), "the window is closed");
    assert!(q.remove_rate_limit_key().await.unwrap());
    assert_eq!(
        c.fetch(3).await.jobs.len(),
        1,
        "a removed limiter opens the window"
    );

    // A manual rate limit saturates the limiter for its ttl.
    c.add("k", "{}").await;
    q.set_rate_limit(30_000).await.unwrap();
    let ttl = q.get_rate_limit_ttl(Some(1)).await.unwrap();
    assert!(ttl > 0 && ttl <= 30_000, "manual limit: {ttl}");
    assert!(c.fetch(3).await.jobs.is_empty(), "rate limited by hand");
    assert_eq!(q.remove_global_rate_limit().await.unwrap(), 2);
    assert_eq!(q.remove_global_rate_limit().await.unwrap(), 0);
    assert_eq!(q.get_global_rate_limit().await.unwrap(), None);
    c.close().await;
}

/// Deduplication keys, per-priority counts and the events trim.
pub async fn queue_control_keys_and_counts(backend: Arc<dyn Backend>, queue: &str) {
    let c = Ctx::new(backend, queue).await;
    let q = &c.queue;
    c.add("plain", "{}").await;
    c.add("p2", r#"{"priority":2}"#).await;
    c.add("p2", r#"{"priority":2}"#).await;
    c.add("p5", r#"{"priority":5}"#).await;
    let owner = c.add("d", r#"{"de":{"id":"d1"}}"#).await;
    assert_eq!(
        q.get_counts_per_priority(&[0, 2, 5, 9]).await.unwrap(),
        vec![2, 2, 1, 0]
    );
    assert_eq!(q.get_deduplication_job_id("d1").await.unwrap(), Some(owner));
    assert_eq!(q.get_deduplication_job_id("d2").await.unwrap(), None);
    assert!(q.remove_deduplication_key("d1").await.unwrap());
    assert!(!q.remove_deduplication_key("d1").await.unwrap());
    assert_eq!(q.get_deduplication_job_id("d1").await.unwrap(), None);

    let before = c.all_events().await.len() as u64;
    assert!(before >= 5);
    assert_eq!(
        q.trim_events(before + 10).await.unwrap(),
        0,
        "nothing to trim"
    );
    assert_eq!(
        q.trim_events(0).await.unwrap(),
        before,
        "trim to 0 empties it"
    );
    assert!(c.all_events().await.is_empty());
    c.close().await;
}
