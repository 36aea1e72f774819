//! Capabilities: a backend does what [`Backend::capabilities`] says — an offered capability
//! works, a declined one answers [`BackendError::Unsupported`] naming it and the backend — and
//! the listings behind worker listing and queue discovery find what they should.

use std::sync::Arc;
use std::time::Duration;

use crate::{Backend, BackendError, BackendName, Capability, WorkerStoreOptions};

use super::Ctx;

/// Whether `result` is the typed refusal of `capability` by `backend`.
fn is_declined<T>(result: &Result<T, BackendError>, capability: Capability, backend: &str) -> bool {
    matches!(
        result,
        Err(BackendError::Unsupported { capability: c, backend: b })
            if *c == capability && *b == backend
    )
}

/// One call of each optional capability (one whose refusal is easy to tell from a working
/// call) answers as the backend's capabilities say: declined with
/// [`BackendError::Unsupported`] exactly when not offered, its message naming both.
pub async fn declined_capabilities_answer_unsupported(backend: Arc<dyn Backend>, queue: &str) {
    let caps = backend.capabilities();
    let ctx = Ctx::new(backend.clone(), queue).await;
    let name = ctx.queue.backend_name();
    assert!(!name.is_empty(), "a backend has a name");
    assert_eq!(name, backend.backend_name(), "a store names its backend");
    assert_eq!(
        name,
        ctx.worker.backend_name(),
        "a worker store names its backend"
    );
    let checks: Vec<(Capability, bool)> = vec![
        (Capability::Flows, {
            let r = ctx.queue.get_dependency_counts("1").await;
            is_declined(&r, Capability::Flows, name)
        }),
        (Capability::Schedulers, {
            let r = ctx.queue.get_job_schedulers_count().await;
            is_declined(&r, Capability::Schedulers, name)
        }),
        (Capability::JobControl, {
            let r = ctx.queue.promote_jobs(1).await;
            is_declined(&r, Capability::JobControl, name)
        }),
        (Capability::QueueControl, {
            let r = ctx.queue.get_global_concurrency().await;
            is_declined(&r, Capability::QueueControl, name)
        }),
        (Capability::Maintenance, {
            let r = ctx.queue.get_delayed_count_before(0).await;
            is_declined(&r, Capability::Maintenance, name)
        }),
        (Capability::Logs, {
            let r = ctx.queue.get_job_logs("1", 0, -1, true).await;
            is_declined(&r, Capability::Logs, name)
        }),
        (Capability::Metrics, {
            let r = ctx
                .queue
                .get_metrics(crate::MetricsKind::Completed, 0, -1)
                .await;
            is_declined(&r, Capability::Metrics, name)
        }),
        (Capability::Cleanup, {
            let r = ctx.queue.drain(false).await;
            is_declined(&r, Capability::Cleanup, name)
        }),
        (Capability::Steps, {
            let r = ctx.worker.move_to_wait("1", "no-token").await;
            is_declined(&r, Capability::Steps, name)
        }),
        (Capability::EventTrimming, {
            let r = ctx.queue.trim_events(1_000).await;
            is_declined(&r, Capability::EventTrimming, name)
        }),
        (Capability::WorkerListing, {
            let r = ctx.queue.list_workers().await;
            is_declined(&r, Capability::WorkerListing, name)
        }),
        (Capability::QueueDiscovery, {
            let r = backend.list_queues("bull").await;
            is_declined(&r, Capability::QueueDiscovery, name)
        }),
    ];
    assert_eq!(
        checks.len(),
        Capability::ALL.len(),
        "one check per capability"
    );
    for (capability, declined) in checks {
        assert_eq!(
            declined,
            !caps.supports(capability),
            "{capability}: declined {declined}, offered {}",
            caps.supports(capability)
        );
    }
    let message = BackendError::Unsupported {
        capability: Capability::WorkerListing,
        backend: name,
    }
    .to_string();
    assert_eq!(
        message,
        format!("the {name} backend does not support worker listing")
    );
    ctx.close().await;
}

/// With worker listing, a queue's open worker store is listed (by its worker name and its
/// Node-style connection name) and a closed one is not; another queue's never is.
pub async fn list_workers_finds_open_worker_stores(backend: Arc<dyn Backend>, queue: &str) {
    if !backend.capabilities().supports(Capability::WorkerListing) {
        return;
    }
    // A short name: PostgreSQL cuts session names at 63 bytes, so a long queue name would
    // leave no room for the worker's.
    let short = format!("lw-{:x}", fnv(queue));
    let ctx = Ctx::new(backend.clone(), &short).await;
    let options = WorkerStoreOptions {
        worker_name: Some("conformance-lister".into()),
        ..WorkerStoreOptions::default()
    };
    let named = backend
        .worker_store(&ctx.id, &options)
        .await
        .expect("open a named worker store");
    let listed = ctx.queue.list_workers().await.expect("list workers");
    // The connection name is each protocol's (Redis `{prefix}:{base64(queue)}:w:{name}`,
    // PostgreSQL `{queue}:w:{name}`); the worker's own name is what they share.
    let is_named = |w: &crate::WorkerInfo| w.worker_name.as_deref() == Some("conformance-lister");
    let found: Vec<_> = listed.iter().filter(|w| is_named(w)).collect();
    assert_eq!(
        found.len(),
        1,
        "the named worker is listed once: {listed:?}"
    );
    if super::profile().redis_connection_names {
        // Redis (and the memory backend that copies it): Node's connection name.
        let raw = ctx.keys.worker_client_name(Some("conformance-lister"));
        assert_eq!(found[0].raw_name, raw);
    }
    assert!(
        listed.len() >= 2,
        "the case's unnamed worker store is listed too: {listed:?}"
    );
    let other = super::unique_queue_name("list-workers-other");
    let other = backend
        .queue_store(&crate::QueueId::new("bull", other))
        .await
        .expect("open another queue");
    assert!(
        other.list_workers().await.expect("list").is_empty(),
        "another queue has no workers"
    );
    let _ = other.close().await;
    named.close().await;
    // A closed connection can take a moment to leave the server's list.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    loop {
        let listed = ctx.queue.list_workers().await.expect("list workers");
        if !listed.iter().any(is_named) {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "a closed worker store is not listed: {listed:?}"
        );
        super::sleep_ms(50).await;
    }
    ctx.close().await;
}

/// With queue discovery, a queue holding a job is listed under its namespace, and not under
/// another one.
pub async fn list_queues_finds_a_queue_with_jobs(backend: Arc<dyn Backend>, queue: &str) {
    if !backend.capabilities().supports(Capability::QueueDiscovery) {
        return;
    }
    let ctx = Ctx::new(backend.clone(), queue).await;
    ctx.add("discovered", "{}").await;
    let names = backend.list_queues("bull").await.expect("list queues");
    assert!(
        names
            .iter()
            .any(|n| n.name() == queue && n.namespace() == "bull"),
        "{queue} is listed under bull: {names:?}"
    );
    let sorted = {
        let mut sorted = names.clone();
        sorted.sort();
        sorted
    };
    assert_eq!(names, sorted, "the names are sorted");
    let elsewhere = backend
        .list_queues("conformance-no-such-namespace")
        .await
        .expect("list queues");
    assert!(
        !elsewhere.iter().any(|n| n.name() == queue),
        "not listed under another namespace: {elsewhere:?}"
    );
    ctx.close().await;
}

/// A short stable hash of a name (FNV-1a), for a unique name that fits a session name.
fn fnv(name: &str) -> u64 {
    name.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}
