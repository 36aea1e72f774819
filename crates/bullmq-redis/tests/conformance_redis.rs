//! The backend conformance suite against [`RedisBackend`] on `REDIS_URL` (default
//! `redis://127.0.0.1:6379`), and the differential run comparing the memory backend with it.

use std::sync::Arc;

use bullmq_backend::memory::MemoryBackend;
use bullmq_backend::Backend;
use bullmq_redis::{ConnectionConfig, RedisBackend};

async fn redis() -> Arc<RedisBackend> {
    let url = std::env::var("REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379".to_owned());
    Arc::new(RedisBackend::new(
        ConnectionConfig::from_url(&url).expect("REDIS_URL"),
    ))
}

bullmq_backend::conformance_tests!(redis());

/// The memory backend does what Redis does, step by step, over pseudo-random operations.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn memory_backend_agrees_with_redis() {
    let reference: Arc<dyn Backend> = redis().await;
    let candidate: Arc<dyn Backend> = Arc::new(MemoryBackend::new());
    let queue = bullmq_backend::conformance::unique_queue_name("differential");
    bullmq_backend::conformance::differential::backends_agree(
        reference,
        candidate,
        &queue,
        1..=12,
        150,
    )
    .await;
}
