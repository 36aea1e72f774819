//! Queue control against Node BullMQ 6.7.0: global concurrency and rate limit, the manual rate
//! limit, deduplication keys and the events trim applied by Node to one queue and by us to
//! another with the same starting state leave the same raw Redis state; each side's getters
//! read what the other wrote (both directions); our Prometheus text equals Node's
//! `exportPrometheusMetrics` on the same queue. Skipped (loudly) when `node` is missing.

mod common;
mod raw_state;
mod worker_common;

use std::time::Duration;

use anyhow::Result;
use bullmq_protocol::options::{Deduplication, JobOptions};
use bullmq_protocol::state::JobState;
use common::{
    cleanup, node_available, node_eval, open_queue, raw_client, read_events, unique_queue, PREFIX,
};
use fred::prelude::{ClientLike, KeysInterface};
use ractor_bullmq::{GlobalRateLimit, Queue, RateLimitTtl, WorkerCallbacks, WorkerOptions};
use raw_state::{assert_same_state, snapshot};
use serde_json::{json, Value as Json};

const TS: u64 = 1_760_000_000_000;

/// Runs `body` in Node with `q` a `Queue` on `queue`; `body` fills the object `out`, printed
/// as JSON.
async fn node(queue: &str, body: &str) -> Result<Json> {
    let script = format!(
        "const {{ Queue }} = require('bullmq'); const {{ connectionOptions }} = require('./lib');\
         const q = new Queue({queue:?}, {{ connection: connectionOptions() }});\
         (async () => {{ const out = {{}}; {body};\
           process.stdout.write(JSON.stringify(out)); await q.close(); }})()\
           .then(() => process.exit(0), e => {{ console.error(e); process.exit(1); }});"
    );
    node_eval(&script).await
}

/// The same starting state in a queue: a plain job, two of priority 3, one of priority 7,
/// and a job holding deduplication id `d1`.
async fn seed(queue: &Queue) -> Result<()> {
    let opts = || JobOptions::default().timestamp_ms(TS);
    queue.add_job("plain", json!({"i": 1}), opts()).await?;
    queue
        .add_job("p3", json!({"i": 2}), opts().priority(3))
        .await?;
    queue
        .add_job("p3", json!({"i": 3}), opts().priority(3))
        .await?;
    queue
        .add_job("p7", json!({"i": 4}), opts().priority(7))
        .await?;
    queue
        .add_job(
            "dedup",
            json!({"i": 5}),
            opts().deduplication(Deduplication::new("d1")),
        )
        .await?;
    Ok(())
}

/// Two seeded queues, ours and Node's, with our handles on both.
async fn pair(tag: &str) -> Result<(String, String, Queue, Queue)> {
    let ours = unique_queue(&format!("qctl-{tag}-rs"));
    let theirs = unique_queue(&format!("qctl-{tag}-node"));
    let our_q = open_queue(&ours).await?;
    let their_q = open_queue(&theirs).await?;
    seed(&our_q).await?;
    seed(&their_q).await?;
    Ok((ours, theirs, our_q, their_q))
}

async fn assert_same(ours: &str, theirs: &str, what: &str) -> Result<()> {
    let a = snapshot(ours, &[(ours, "<q>")]).await?;
    let b = snapshot(theirs, &[(theirs, "<q>")]).await?;
    assert_same_state(&a, &b, what);
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn setting_limits_leaves_nodes_state_and_each_side_reads_the_other() -> Result<()> {
    if !node_available() {
        eprintln!("SKIPPED: node is not available");
        return Ok(());
    }
    let (ours, theirs, our_q, their_q) = pair("set").await?;

    our_q.set_global_concurrency(3).await?;
    our_q
        .set_global_rate_limit(5, Duration::from_secs(2))
        .await?;
    our_q.rate_limit(Duration::from_secs(120)).await?;
    node(
        &theirs,
        "await q.setGlobalConcurrency(3); await q.setGlobalRateLimit(5, 2000);\
         await q.rateLimit(120000)",
    )
    .await?;
    assert_same(&ours, &theirs, "after setting limits").await?;

    // Node reads what we wrote, and we read what Node wrote: the same answers.
    let read = "out.concurrency = await q.getGlobalConcurrency();\
        out.rateLimit = await q.getGlobalRateLimit();\
        out.ttl = await q.getRateLimitTtl(); out.ttl1 = await q.getRateLimitTtl(1);\
        out.maxed = await q.isMaxed();\
        out.dedup = await q.getDeduplicationJobId('d1');\
        out.missing = await q.getDeduplicationJobId('nope');\
        out.perPriority = await q.getCountsPerPriority([0, 3, 7, 9, 3]);\
        out.counts = await q.getJobCounts('prioritized', 'waiting', 'prioritized')";
    // Node reads the queue we controlled while we read the one Node controlled, then swapped.
    for (node_reads, q) in [(&ours, &their_q), (&theirs, &our_q)] {
        let node_view = node(node_reads, read).await?;
        assert_eq!(node_view["concurrency"], json!(3), "{node_view}");
        assert_eq!(node_view["rateLimit"], json!({"max": 5, "duration": 2000}));
        let node_ttl = node_view["ttl"].as_i64().unwrap_or_default();
        assert!(node_ttl > 0 && node_ttl <= 120_000, "{node_view}");
        assert_eq!(node_view["maxed"], json!(false));
        assert_eq!(node_view["dedup"], json!("5"));
        assert_eq!(node_view["missing"], Json::Null);
        assert_eq!(
            node_view["perPriority"],
            json!({"0": 2, "3": 2, "7": 1, "9": 0})
        );
        assert_eq!(node_view["counts"], json!({"prioritized": 3, "waiting": 2}));

        // Our reads.
        assert_eq!(q.get_global_concurrency().await?, Some(3));
        assert_eq!(
            q.get_global_rate_limit().await?,
            Some(GlobalRateLimit::new(5, Duration::from_secs(2)))
        );
        match q.get_rate_limit_ttl(None).await? {
            RateLimitTtl::Limited(left) => assert!(left <= Duration::from_secs(120)),
            other => panic!("expected a rate limit, got {other:?}"),
        }
        assert!(matches!(
            q.get_rate_limit_ttl(Some(1)).await?,
            RateLimitTtl::Limited(_)
        ));
        assert!(!q.is_maxed().await?);
        assert_eq!(
            q.get_deduplication_job_id("d1").await?.as_deref(),
            Some("5")
        );
        assert_eq!(q.get_deduplication_job_id("nope").await?, None);
        let per: Vec<(u32, u64)> = q
            .get_counts_per_priority(&[0, 3, 7, 9, 3])
            .await?
            .into_iter()
            .collect();
        assert_eq!(per, vec![(0, 2), (3, 2), (7, 1), (9, 0)]);
        assert_eq!(
            q.get_job_counts_of(&[
                JobState::Prioritized,
                JobState::Waiting,
                JobState::Prioritized
            ])
            .await?,
            vec![(JobState::Prioritized, 3), (JobState::Waiting, 2)]
        );
    }

    // A concurrency of 0 is reached with no job active, on both sides.
    our_q.set_global_concurrency(0).await?;
    assert!(our_q.is_maxed().await?);
    assert_eq!(
        node(&ours, "out.maxed = await q.isMaxed()").await?["maxed"],
        json!(true)
    );

    for (name, q) in [(&ours, our_q), (&theirs, their_q)] {
        q.close().await?;
        cleanup(name).await?;
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn removing_limits_and_keys_leaves_nodes_state() -> Result<()> {
    if !node_available() {
        eprintln!("SKIPPED: node is not available");
        return Ok(());
    }
    let (ours, theirs, our_q, their_q) = pair("remove").await?;
    for q in [&our_q, &their_q] {
        q.set_global_concurrency(2).await?;
        q.set_global_rate_limit(1, Duration::from_secs(1)).await?;
        q.rate_limit(Duration::from_secs(60)).await?;
    }

    assert!(our_q.remove_global_concurrency().await?);
    assert!(our_q.remove_global_rate_limit().await?);
    assert!(our_q.remove_rate_limit_key().await?);
    assert!(our_q.remove_deduplication_key("d1").await?);
    let ours_trimmed = our_q.trim_events(0).await?;
    let out = node(
        &theirs,
        "out.c = await q.removeGlobalConcurrency(); out.r = await q.removeGlobalRateLimit();\
         out.l = await q.removeRateLimitKey(); out.d = await q.removeDeduplicationKey('d1');\
         out.t = await q.trimEvents(0)",
    )
    .await?;
    assert_eq!(
        out,
        json!({"c": 1, "r": 2, "l": 1, "d": 1, "t": ours_trimmed})
    );
    assert_same(&ours, &theirs, "after removing limits").await?;
    assert_eq!(
        read_events(&ours).await?.len(),
        read_events(&theirs).await?.len(),
        "the trimmed streams"
    );

    // Removing again finds nothing, on both sides.
    assert!(!our_q.remove_global_concurrency().await?);
    assert!(!our_q.remove_global_rate_limit().await?);
    assert!(!our_q.remove_rate_limit_key().await?);
    assert!(!our_q.remove_deduplication_key("d1").await?);
    assert_eq!(our_q.get_global_concurrency().await?, None);
    assert_eq!(our_q.get_global_rate_limit().await?, None);
    assert_eq!(our_q.get_rate_limit_ttl(None).await?, RateLimitTtl::NoKey);
    let again = node(
        &theirs,
        "out.c = await q.getGlobalConcurrency(); out.r = await q.getGlobalRateLimit();\
         out.ttl = await q.getRateLimitTtl(); out.d = await q.getDeduplicationJobId('d1')",
    )
    .await?;
    assert_eq!(again, json!({"c": null, "r": null, "ttl": -2, "d": null}));

    // Bad input is refused before anything is written.
    assert!(our_q.rate_limit(Duration::ZERO).await.is_err());
    assert!(our_q
        .set_global_rate_limit(1, Duration::from_micros(10))
        .await
        .is_err());
    assert_eq!(our_q.get_rate_limit_ttl(None).await?, RateLimitTtl::NoKey);
    assert_eq!(our_q.get_global_rate_limit().await?, None);

    // A limiter key without expiry (another client's SET): PTTL -1 on both sides.
    let raw = raw_client().await?;
    for name in [&ours, &theirs] {
        let _: () = raw
            .set(format!("{PREFIX}:{name}:limiter"), "3", None, None, false)
            .await?;
    }
    assert_eq!(
        our_q.get_rate_limit_ttl(None).await?,
        RateLimitTtl::NoExpiry
    );
    let no_expiry = node(&theirs, "out.ttl = await q.getRateLimitTtl()").await?;
    assert_eq!(no_expiry, json!({"ttl": -1}));
    raw.quit().await?;

    for (name, q) in [(&ours, our_q), (&theirs, their_q)] {
        q.close().await?;
        cleanup(name).await?;
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prometheus_text_equals_nodes() -> Result<()> {
    if !node_available() {
        eprintln!("SKIPPED: node is not available");
        return Ok(());
    }
    let queue = unique_queue("qctl-prom");
    let q = open_queue(&queue).await?;
    seed(&q).await?;
    let labels = [("env", "prod"), ("region", "eu\"1")];
    let ours = q.export_prometheus_metrics(&labels).await?;
    let theirs = node(
        &queue,
        "out.text = await q.exportPrometheusMetrics({ env: 'prod', region: 'eu\"1' });\
         out.bare = await q.exportPrometheusMetrics()",
    )
    .await?;
    assert_eq!(theirs["text"], json!(ours));
    assert_eq!(
        theirs["bare"],
        json!(q.export_prometheus_metrics(&[]).await?)
    );
    q.close().await?;
    cleanup(&queue).await?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn get_workers_lists_a_node_worker() -> Result<()> {
    if !node_available() {
        eprintln!("SKIPPED: node is not available");
        return Ok(());
    }
    let queue = unique_queue("qctl-workers");
    let q = open_queue(&queue).await?;
    // A Node worker named `w1`, connected for a few seconds: Node lists it, and so do we.
    let script = format!(
        "const {{ Queue, Worker }} = require('bullmq'); const {{ connectionOptions }} = require('./lib');\
         const q = new Queue({queue:?}, {{ connection: connectionOptions() }});\
         const w = new Worker({queue:?}, async () => {{}}, {{ connection: connectionOptions(), name: 'w1' }});\
         (async () => {{ await w.waitUntilReady(); await new Promise(r => setTimeout(r, 200));\
           const workers = await q.getWorkers();\
           process.stdout.write(JSON.stringify({{ names: workers.map(x => x.rawname), count: await q.getWorkersCount() }}));\
           await new Promise(r => setTimeout(r, 3000)); await w.close(); await q.close(); }})()\
           .then(() => process.exit(0), e => {{ console.error(e); process.exit(1); }});"
    );
    let node_task = tokio::spawn(async move { node_eval(&script).await });
    let mut ours = std::collections::BTreeSet::new();
    common::eventually(
        "our get_workers sees the Node worker",
        Duration::from_secs(30),
        || {
            let q = q.clone();
            async move { q.get_workers_count().await.map(|n| n >= 1).unwrap_or(false) }
        },
    )
    .await?;
    for w in q.get_workers().await? {
        ours.insert(w.raw_name.clone());
        assert_eq!(w.fields["name"], queue);
    }
    let theirs = node_task.await??;
    // A worker's connections share its name: compare the names, not how many connections
    // each side caught at its moment.
    let their_names: std::collections::BTreeSet<String> =
        serde_json::from_value(theirs["names"].clone())?;
    assert_eq!(ours, their_names, "{theirs}");
    assert!(ours.iter().any(|n| n.ends_with(":w:w1")), "{ours:?}");
    q.close().await?;
    cleanup(&queue).await?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn our_worker_honours_a_global_concurrency_set_by_our_queue() -> Result<()> {
    let queue = unique_queue("qctl-conc");
    let q = open_queue(&queue).await?;
    q.set_global_concurrency(1).await?;
    for i in 0..4 {
        q.add_job(
            "slow",
            json!({"i": i, "sleepMs": 200}),
            JobOptions::default(),
        )
        .await?;
    }
    let worker = worker_common::spawn_worker(
        &queue,
        WorkerOptions::new().concurrency(4),
        WorkerCallbacks::new(),
    )
    .await?;
    // Sample the active count until all four are done: with the global gate it never
    // exceeds 1 (an upper bound, so sampling cannot make it flaky).
    let most = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
    common::eventually("four jobs completed", Duration::from_secs(60), || {
        let q = q.clone();
        let most = most.clone();
        async move {
            let counts = q.get_job_counts().await.unwrap_or_default();
            most.fetch_max(counts.active, std::sync::atomic::Ordering::Relaxed);
            counts.completed == 4
        }
    })
    .await?;
    let most = most.load(std::sync::atomic::Ordering::Relaxed);
    assert!(most <= 1, "at most one job active at once, saw {most}");
    worker.close().await?;
    q.close().await?;
    cleanup(&queue).await?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn our_worker_honours_a_global_rate_limit_set_by_our_queue() -> Result<()> {
    let queue = unique_queue("qctl-rate");
    let q = open_queue(&queue).await?;
    q.set_global_rate_limit(1, Duration::from_secs(15)).await?;
    for i in 0..2 {
        q.add_job("job", json!({"i": i}), JobOptions::default())
            .await?;
    }
    let worker = worker_common::spawn_worker(
        &queue,
        WorkerOptions::new().concurrency(2),
        WorkerCallbacks::new(),
    )
    .await?;
    worker_common::wait_finished(&queue, 1, Duration::from_secs(60)).await?;
    // The window of 1 job per 15 s is closed: the second job waits (a rate-limited worker
    // sleeps out the window, as Node's does, so removing the key would not wake it).
    assert!(matches!(
        q.get_rate_limit_ttl(None).await?,
        RateLimitTtl::Limited(_)
    ));
    assert_eq!(q.get_job_counts().await?.waiting, 1);
    worker_common::wait_finished(&queue, 2, Duration::from_secs(120)).await?;
    worker.close().await?;
    q.close().await?;
    cleanup(&queue).await?;
    Ok(())
}
