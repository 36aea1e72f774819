//! `bullmq_redis::queue::get_metrics` (behind `Queue::get_metrics`) reads the per-minute metrics a Node BullMQ worker keeps in Redis
//! exactly as Node's `queue.getMetrics` returns them.

mod telemetry_support;

use bullmq_redis::fred::prelude::{Client, ClientLike, KeysInterface};
use bullmq_redis::queue::get_metrics;
use ractor_bullmq::protocol::keys::QueueKeys;
use ractor_bullmq::telemetry::{Metrics, MetricsKind};
use ractor_bullmq::ConnectionConfig;

use telemetry_support::{node_dir, node_eval, unique_queue};

async fn client() -> Client {
    ConnectionConfig::from_env()
        .expect("REDIS_URL")
        .connect(None)
        .await
        .expect("connect")
}

async fn delete_queue_keys(client: &Client, keys: &QueueKeys) {
    let pattern = format!("{}*", keys.base());
    let found: Vec<String> = {
        let mut cursor = "0".to_owned();
        let mut all = Vec::new();
        loop {
            let (next, batch): (String, Vec<String>) = client
                .custom(
                    bullmq_redis::fred::types::CustomCommand::new_static("SCAN", None, false),
                    vec![
                        cursor.clone(),
                        "MATCH".into(),
                        pattern.clone(),
                        "COUNT".into(),
                        "500".into(),
                    ],
                )
                .await
                .expect("scan");
            all.extend(batch);
            if next == "0" {
                break all;
            }
            cursor = next;
        }
    };
    if !found.is_empty() {
        let _: i64 = client.del(found).await.expect("del");
    }
}

fn as_json(metrics: &Metrics) -> serde_json::Value {
    serde_json::to_value(metrics).expect("serialise")
}

#[tokio::test]
async fn get_metrics_of_a_missing_queue_is_all_zeros() {
    let client = client().await;
    let keys = QueueKeys::new("bull", unique_queue("metrics-none"));
    for kind in [MetricsKind::Completed, MetricsKind::Failed] {
        let metrics = get_metrics(&client, &keys, kind, 0, -1)
            .await
            .expect("read");
        assert_eq!(metrics, Metrics::default());
    }
    client.quit().await.expect("quit");
}

#[tokio::test]
async fn get_metrics_equals_node_get_metrics_after_a_node_worker_ran() {
    if node_dir().is_none() {
        return;
    }
    let queue = unique_queue("metrics-node");
    let node = node_eval(
        r#"
        const name = process.env.QUEUE;
        const connection = connectionOptions();
        const q = new Queue(name, { connection });
        let finished = 0;
        const worker = new Worker(name, async job => {
          if (job.data.fail) throw new Error('failed on purpose');
          return 1;
        }, { connection, metrics: { maxDataPoints: 60 } });
        worker.on('completed', () => finished++);
        worker.on('failed', () => finished++);
        const waitFor = async n => {
          const start = Date.now();
          while (finished < n) {
            if (Date.now() - start > 30000) throw new Error('worker too slow');
            await sleep(20);
          }
        };
        await q.add('ok', {}); await q.add('ok', {}); await q.add('bad', { fail: true });
        await waitFor(3);
        // Age the newest data point by three minutes so the next finishes write points.
        const raw = rawClient();
        const base = `bull:${name}:metrics:`;
        const ago = Date.now() - 3 * 60000;
        await raw.hset(base + 'completed', 'prevTS', ago);
        await raw.hset(base + 'failed', 'prevTS', ago);
        await raw.quit();
        await q.add('ok', {}); await q.add('bad', { fail: true }); await q.add('ok', {});
        await waitFor(6);
        await worker.close();
        const out = {
          completed: await q.getMetrics('completed'),
          failed: await q.getMetrics('failed'),
          window: await q.getMetrics('completed', 1, 2),
          beyond: await q.getMetrics('failed', 10, 20),
        };
        await q.close();
        return out;
        "#,
        &[("QUEUE", &queue)],
    );

    let client = client().await;
    let keys = QueueKeys::new("bull", &queue);
    let read = |kind, start, end| {
        let client = &client;
        let keys = &keys;
        async move {
            get_metrics(client, keys, kind, start, end)
                .await
                .expect("get_metrics")
        }
    };
    let completed = read(MetricsKind::Completed, 0, -1).await;
    let failed = read(MetricsKind::Failed, 0, -1).await;
    let window = read(MetricsKind::Completed, 1, 2).await;
    let beyond = read(MetricsKind::Failed, 10, 20).await;

    // The scenario really produced data points, so the comparison covers the list too.
    assert_eq!(completed.meta.count, 4);
    assert_eq!(failed.meta.count, 2);
    assert!(completed.count >= 3, "{completed:?}");
    assert_eq!(
        completed.data.iter().sum::<u64>(),
        completed.meta.prev_count
    );

    assert_eq!(as_json(&completed), node["completed"]);
    assert_eq!(as_json(&failed), node["failed"]);
    assert_eq!(as_json(&window), node["window"]);
    assert_eq!(as_json(&beyond), node["beyond"]);

    delete_queue_keys(&client, &keys).await;
    client.quit().await.expect("quit");
}

/// Polls `get_metrics` until `kind`'s count reaches `count` (the worker finished that many).
async fn wait_for_count(client: &Client, keys: &QueueKeys, kind: MetricsKind, count: u64) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        let metrics = get_metrics(client, keys, kind, 0, -1).await.expect("read");
        if metrics.meta.count >= count {
            return;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "{kind:?} stuck at {}",
            metrics.meta.count
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
}

/// Our Worker with `metrics_max_data_points` keeps the same structures a Node worker does:
/// Node's `getMetrics` reads them, and the per-minute points add up as Node's would.
#[tokio::test]
async fn our_worker_keeps_node_compatible_metrics() {
    use ractor_bullmq::protocol::options::JobOptions;
    use ractor_bullmq::worker::{Job, JobContext, Worker, WorkerArgs, WorkerOptions};
    use ractor_bullmq::{Queue, QueueOptions};

    let name = unique_queue("metrics-rust-worker");
    let config = ConnectionConfig::from_env().expect("REDIS_URL");
    let queue = Queue::new(&name, QueueOptions::from_env().expect("env"))
        .await
        .expect("queue");
    let processor = |job: Job, _ctx: JobContext| async move {
        if job.data_value()["fail"] == serde_json::json!(true) {
            anyhow::bail!("failed on purpose");
        }
        Ok(serde_json::json!(1))
    };
    let args = WorkerArgs::connect(
        &config,
        &name,
        processor,
        WorkerOptions::new().metrics_max_data_points(60),
    )
    .await
    .expect("worker args");
    let worker = Worker::spawn(args).await.expect("worker");
    let client = client().await;
    let keys = QueueKeys::new("bull", &name);
    let add = |fail: bool| {
        queue.add_job(
            "m",
            serde_json::json!({ "fail": fail }),
            JobOptions::default(),
        )
    };

    for fail in [false, false, true] {
        add(fail).await.expect("add");
    }
    wait_for_count(&client, &keys, MetricsKind::Completed, 2).await;
    wait_for_count(&client, &keys, MetricsKind::Failed, 1).await;
    // Age the newest data point by three minutes so the next finishes write points.
    let ago = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("clock")
        .as_millis() as u64
        - 3 * 60_000;
    for kind in [MetricsKind::Completed, MetricsKind::Failed] {
        let _: i64 = bullmq_redis::fred::prelude::HashesInterface::hset(
            &client,
            bullmq_redis::queue::metrics_key(&keys, kind),
            ("prevTS", ago.to_string()),
        )
        .await
        .expect("hset");
    }
    for fail in [false, true, false] {
        add(fail).await.expect("add");
    }
    wait_for_count(&client, &keys, MetricsKind::Completed, 4).await;
    wait_for_count(&client, &keys, MetricsKind::Failed, 2).await;
    worker.close().await.expect("close worker");

    let completed = get_metrics(&client, &keys, MetricsKind::Completed, 0, -1)
        .await
        .expect("read");
    let failed = get_metrics(&client, &keys, MetricsKind::Failed, 0, -1)
        .await
        .expect("read");
    // Three minutes without a point → at least three points (delta, then zeros), and the
    // points telescope to `prevCount`, as Node's collector guarantees.
    for metrics in [&completed, &failed] {
        assert!(metrics.count >= 3, "{metrics:?}");
        assert_eq!(metrics.data.len() as u64, metrics.count);
        assert_eq!(metrics.data.iter().sum::<u64>(), metrics.meta.prev_count);
        assert!(metrics.meta.prev_ts >= ago + 3 * 60_000, "{metrics:?}");
    }
    assert_eq!(completed.meta.count, 4);
    assert_eq!(failed.meta.count, 2);

    if node_dir().is_some() {
        let node = node_eval(
            r#"
            const q = new Queue(process.env.QUEUE, { connection: connectionOptions() });
            const out = { completed: await q.getMetrics('completed'), failed: await q.getMetrics('failed') };
            await q.close();
            return out;
            "#,
            &[("QUEUE", &name)],
        );
        assert_eq!(as_json(&completed), node["completed"]);
        assert_eq!(as_json(&failed), node["failed"]);
    }

    queue.obliterate(true).await.expect("obliterate");
    delete_queue_keys(&client, &keys).await;
    queue.close().await.expect("close queue");
    client.quit().await.expect("quit");
}
