//! Queues, workers and events on a real Redis Cluster: 3 primaries with one replica each
//! (ports 7000-7005, bus ports 7060-7065, `cluster-node-timeout` 2 s), started once for this
//! binary and stopped by PID when the test ends, also on failure. Every scenario runs under
//! the hash-tagged prefix `{bull}`, so each queue's keys (and a flow's, across queues) share
//! one slot; a prefix without a tag is refused before anything connects. The failover scenario
//! kills the slot's primary mid-run, with slow jobs waiting and active.
//!
//! One test function runs the scenarios in turn on the one cluster (a cluster per test would
//! cost six servers each); each step's error names the scenario. Skipped with a message when
//! `redis-server` or `redis-cli` is missing; the Node step when Node is.

mod common;
mod test_cluster;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{ensure, Context as _, Result};
use bullmq_redis::RedisError;
use common::{eventually, node_available, run_node, unique_queue};
use ractor_bullmq::worker::{Job, JobContext};
use ractor_bullmq::{
    ConnectionConfig, FlowProducer, FlowProducerOptions, ManualWorker, Queue, QueueError,
    QueueEventsHandle, QueueEventsOptions, QueueOptions, Worker, WorkerArgs, WorkerOptions,
};
use serde_json::{json, Value};
use test_cluster::{tools_available, ClusterSpec, TestCluster};

/// Primaries first, then their replicas (redis-cli pairs them).
const PORTS: [u16; 6] = [7000, 7001, 7002, 7003, 7004, 7005];
/// Bus port = port + 60: 7060-7065, inside this test's range.
const BUS_OFFSET: u16 = 60;
/// The hash-tagged prefix every scenario uses.
const PREFIX: &str = "{bull}";

fn config() -> Result<ConnectionConfig> {
    Ok(ConnectionConfig::from_url(&format!(
        "redis-cluster://127.0.0.1:{}?node=127.0.0.1:{}",
        PORTS[0], PORTS[1]
    ))?)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn queues_workers_and_events_run_on_a_redis_cluster() -> Result<()> {
    if !tools_available(&[("redis-server", "--version"), ("redis-cli", "--version")]).await {
        return Ok(());
    }
    let mut cluster = TestCluster::start(ClusterSpec {
        ports: &PORTS,
        bus_offset: BUS_OFFSET,
        replicas: 1,
        node_timeout_ms: 2_000,
        tls: None,
    })
    .await?;

    an_unsafe_prefix_is_refused_with_the_fix()
        .await
        .context("scenario: unsafe prefix refused")?;
    our_producer_worker_and_events_complete_every_job(&cluster)
        .await
        .context("scenario: our producer, Worker and QueueEvents")?;
    queue_control_flows_and_schedulers_run_in_the_slot()
        .await
        .context("scenario: queue operations, flows and schedulers")?;
    if node_available() {
        node_and_our_worker_share_one_queue()
            .await
            .context("scenario: Node worker over an ioredis Cluster and ours")?;
    }
    // Last: it moves the slot and kills a primary.
    a_reshard_and_a_failover_lose_nothing(&mut cluster)
        .await
        .context("scenario: reshard, then primary killed")?;
    drop(cluster);
    Ok(())
}

/// A cluster refuses a queue whose keys have no hash tag, before connecting, with the text
/// that says how to fix it; the same queue name works with `{bull}` or with a tagged name.
async fn an_unsafe_prefix_is_refused_with_the_fix() -> Result<()> {
    let queue = unique_queue("cl-unsafe");
    let bare = || QueueOptions::new(config().expect("config")).prefix("bull");

    let error = Queue::new(&queue, bare()).await.unwrap_err();
    let QueueError::Redis(RedisError::CrossSlot(cross)) = &error else {
        panic!("expected a CrossSlot error, got {error:?}");
    };
    assert_eq!(cross.queue.as_deref(), Some(queue.as_str()));
    let text = error.to_string();
    ensure!(text.contains("hash tag"), "{text}");
    ensure!(text.contains("`{bull}`"), "{text}");
    ensure!(text.contains(&format!("`{{{queue}}}`")), "{text}");

    let processor = |_job: Job, _ctx: JobContext| async move { Ok(Value::Null) };
    let worker = WorkerArgs::connect(
        &config()?,
        &queue,
        processor,
        WorkerOptions::new().prefix("bull"),
    )
    .await;
    let text = format!(
        "{:#}",
        anyhow::Error::from(worker.err().context("worker refused")?)
    );
    ensure!(text.contains("`{bull}`"), "worker: {text}");

    let manual =
        ManualWorker::connect(&config()?, &queue, WorkerOptions::new().prefix("bull")).await;
    let text = manual.err().context("ManualWorker refused")?.to_string();
    ensure!(text.contains("`{bull}`"), "ManualWorker: {text}");

    let events =
        QueueEventsHandle::start(QueueEventsOptions::new(&queue, config()?).prefix("bull")).await;
    let text = events.err().context("QueueEvents refused")?.to_string();
    ensure!(text.contains("`{bull}`"), "QueueEvents: {text}");

    let flows = FlowProducer::new(FlowProducerOptions::new(config()?).prefix("bull")).await;
    let text = flows.err().context("FlowProducer refused")?.to_string();
    ensure!(text.contains("`{bull}`"), "FlowProducer: {text}");

    // The fixes work: a tagged prefix, or a tagged queue name under the default prefix.
    let tagged = Queue::new(&queue, QueueOptions::new(config()?).prefix(PREFIX)).await?;
    tagged.obliterate(true).await?;
    tagged.close().await?;
    let by_name = Queue::new(format!("{{{queue}}}"), QueueOptions::new(config()?)).await?;
    by_name.add("x", json!({})).await?;
    by_name.obliterate(true).await?;
    by_name.close().await?;
    Ok(())
}

/// Our producer adds N jobs, our Worker completes them, our QueueEvents sees every job's
/// `added`, `waiting`, `active` and `completed`; `get_workers` lists the worker (named on
/// the node its blocking read runs on) and queue discovery finds the queue.
async fn our_producer_worker_and_events_complete_every_job(cluster: &TestCluster) -> Result<()> {
    const N: usize = 30;
    let queue_name = unique_queue("cl-jobs");
    let queue = Queue::new(&queue_name, QueueOptions::new(config()?).prefix(PREFIX)).await?;
    let events = QueueEventsHandle::start(
        QueueEventsOptions::new(&queue_name, config()?)
            .prefix(PREFIX)
            .last_event_id("0"),
    )
    .await?;
    let mut stream = events.subscribe_stream();

    let processor = |job: Job, _ctx: JobContext| async move {
        Ok(json!({ "double": job.data_value()["i"].as_u64().unwrap_or(0) * 2 }))
    };
    let args = WorkerArgs::connect(
        &config()?,
        &queue_name,
        processor,
        WorkerOptions::new()
            .prefix(PREFIX)
            .name("rust-c")
            .concurrency(4),
    )
    .await?;
    let worker = Worker::spawn(args).await?;

    let mut ids = BTreeSet::new();
    for i in 0..N {
        ids.insert(queue.add("job", json!({ "i": i })).await?.id().to_owned());
    }

    // Every job's four events, whatever the order across jobs.
    let wanted = ["added", "waiting", "active", "completed"];
    let mut seen: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let all_seen = |seen: &BTreeMap<String, BTreeSet<String>>| {
        ids.iter().all(|id| {
            seen.get(id)
                .is_some_and(|names| wanted.iter().all(|w| names.contains(*w)))
        })
    };
    tokio::time::timeout(Duration::from_secs(60), async {
        while !all_seen(&seen) {
            let Some(event) = stream.recv().await else {
                break;
            };
            if let Some(id) = event.event.job_id() {
                seen.entry(id.to_owned())
                    .or_default()
                    .insert(event.event.name().to_owned());
            }
        }
    })
    .await
    .context("every job's events within 60 s")?;
    ensure!(all_seen(&seen), "events seen: {seen:?}");

    let counts = queue.get_job_counts().await?;
    ensure!(counts.completed == N as u64, "{counts:?}");
    let done = queue.get_job(ids.iter().next().context("a job")?).await?;
    ensure!(
        done.is_some_and(|job| job.returnvalue().is_some()),
        "a completed job has its return value"
    );

    // The worker's blocking connection is named on every primary, so the node holding the
    // queue's slot lists it, as Node's getWorkers reads it.
    let workers = queue.get_workers().await?;
    ensure!(
        workers.len() == 1 && workers[0].worker_name.as_deref() == Some("rust-c"),
        "{workers:?}"
    );
    let slot_owner = cluster
        .primary_of(&queue.keys().key(bullmq_protocol::keys::QueueKey::Marker))
        .await?;
    let listing = cluster.cli(slot_owner, &["client", "list"]).await?;
    ensure!(listing.contains(":w:rust-c"), "{listing}");

    let client = queue.redis_client().context("a Redis queue")?;
    let found = bullmq_redis::queue::discover_queues(client, PREFIX).await?;
    ensure!(found.contains(&queue_name), "{found:?}");

    worker.close().await?;
    events.close().await;
    queue.obliterate(true).await?;
    queue.close().await?;
    Ok(())
}

/// The rest of the queue API on a cluster: every call is a script or command on the queue's
/// slot (a script call without keys or across slots would be refused before sending, see
/// `Script::run`), so each one succeeding with the expected effect shows it is routed right.
/// A flow spans two queues of the `{bull}` prefix, one slot.
async fn queue_control_flows_and_schedulers_run_in_the_slot() -> Result<()> {
    use bullmq_protocol::JobState;
    use ractor_bullmq::scheduler::{Repeat, SchedulerTemplate};
    use ractor_bullmq::{FlowJob, RetryFrom, RetryReset};

    let name = unique_queue("cl-ops");
    let queue = Queue::new(&name, QueueOptions::new(config()?).prefix(PREFIX)).await?;
    let delayed = queue
        .add("later", json!({}))
        .delay(Duration::from_secs(3600))
        .await?;
    let urgent = queue.add("urgent", json!({})).priority(3).await?;
    let plain = queue.add("plain", json!({})).await?;
    queue.change_priority(urgent.id(), 1, false).await?;
    queue
        .change_delay(delayed.id(), Duration::from_secs(7200))
        .await?;
    queue.promote_job(delayed.id()).await?;
    queue.update_progress(plain.id(), json!(40)).await?;
    ensure!(queue.add_job_log(plain.id(), "row", None).await? == 1);
    queue.pause().await?;
    ensure!(queue.is_paused().await?);
    queue.resume().await?;
    queue.set_global_concurrency(2).await?;
    ensure!(queue.get_global_concurrency().await? == Some(2));
    let counts = queue.get_job_counts().await?;
    ensure!(counts.waiting == 2 && counts.prioritized == 1, "{counts:?}");
    let jobs = queue
        .get_jobs(&[JobState::Waiting, JobState::Prioritized], 0, -1, true)
        .await?;
    ensure!(jobs.len() == 3, "{jobs:?}");

    // A job that fails, is retried and then completes; clean and remove afterwards.
    let failing = queue.add("flaky", json!({ "fail": true })).await?;
    let processor = |job: Job, _ctx: JobContext| async move {
        if job.data_value()["fail"] == json!(true) && job.attempts_made() == 0 {
            anyhow::bail!("first attempt fails");
        }
        Ok(json!("ok"))
    };
    let args = WorkerArgs::connect(
        &config()?,
        &name,
        processor,
        WorkerOptions::new().prefix(PREFIX),
    )
    .await?;
    let worker = Worker::spawn(args).await?;
    eventually("the flaky job failed", Duration::from_secs(30), || async {
        queue.is_failed(failing.id()).await.unwrap_or(false)
    })
    .await?;
    queue
        .retry_job(failing.id(), RetryFrom::Failed, RetryReset::default())
        .await?;
    eventually("every job completed", Duration::from_secs(30), || async {
        queue
            .get_job_counts()
            .await
            .is_ok_and(|counts| counts.completed == 4)
    })
    .await?;
    ensure!(queue.remove(plain.id()).await?);
    let cleaned = queue
        .clean(
            ractor_bullmq::CleanOptions::new(Duration::ZERO)
                .limit(10)
                .state(JobState::Completed),
        )
        .await?;
    ensure!(cleaned.len() == 3, "{cleaned:?}");

    // A flow across two queues of the prefix: the child completes, then the parent.
    let children_queue = unique_queue("cl-ops-children");
    let flows = FlowProducer::new(FlowProducerOptions::new(config()?).prefix(PREFIX)).await?;
    let tree = flows
        .add(FlowJob::new("parent", &name).child(FlowJob::new("child", &children_queue)))
        .await?;
    let args = WorkerArgs::connect(
        &config()?,
        &children_queue,
        |_job: Job, _ctx: JobContext| async move { Ok(json!("child done")) },
        WorkerOptions::new().prefix(PREFIX),
    )
    .await?;
    let child_worker = Worker::spawn(args).await?;
    let parent_id = tree.job.id().to_owned();
    eventually(
        "the flow's parent completed",
        Duration::from_secs(30),
        || async { queue.is_completed(&parent_id).await.unwrap_or(false) },
    )
    .await?;

    // A job scheduler produces its first job.
    queue
        .upsert_job_scheduler(
            "beat",
            Repeat::every(Duration::from_secs(3600)),
            SchedulerTemplate::new("beat"),
        )
        .await?;
    ensure!(queue.get_job_schedulers_count().await? == 1);
    queue.remove_job_scheduler("beat").await?;
    ensure!(queue.drain(true).await? <= 1);

    child_worker.close().await?;
    worker.close().await?;
    flows.close().await?;
    let children = Queue::new(&children_queue, QueueOptions::new(config()?).prefix(PREFIX)).await?;
    children.obliterate(true).await?;
    children.close().await?;
    queue.obliterate(true).await?;
    queue.close().await?;
    Ok(())
}

/// Node BullMQ over `new IORedis.Cluster([...])` adds jobs and works the queue alongside our
/// Worker: every job completes exactly once, by one of the two.
async fn node_and_our_worker_share_one_queue() -> Result<()> {
    const N: usize = 40;
    let queue_name = unique_queue("cl-mixed");
    let queue = Queue::new(&queue_name, QueueOptions::new(config()?).prefix(PREFIX)).await?;
    let ours = Arc::new(Mutex::new(Vec::<String>::new()));
    let recorder = Arc::clone(&ours);
    let processor = move |job: Job, _ctx: JobContext| {
        let recorder = Arc::clone(&recorder);
        async move {
            // Slow enough that the Node worker, once started, takes its share.
            tokio::time::sleep(Duration::from_millis(100)).await;
            recorder.lock().expect("recorder").push(job.id().to_owned());
            Ok(json!({ "processedBy": "rust" }))
        }
    };
    let args = WorkerArgs::connect(
        &config()?,
        &queue_name,
        processor,
        WorkerOptions::new().prefix(PREFIX).name("rust-mixed"),
    )
    .await?;
    let worker = Worker::spawn(args).await?;

    let nodes: Vec<Value> = PORTS[..3]
        .iter()
        .map(|port| json!({ "host": "127.0.0.1", "port": port }))
        .collect();
    let node = run_node(
        "cluster_worker.js",
        &json!({ "nodes": nodes, "queue": queue_name, "prefix": PREFIX, "add": N,
                 "sleepMs": 50, "idleMs": 3000, "timeoutMs": 90000 }),
    )
    .await?;
    let added: BTreeSet<String> = strings(&node["added"]);
    ensure!(added.len() == N, "Node added {added:?}");
    eventually("every job completed", Duration::from_secs(60), || async {
        queue
            .get_job_counts()
            .await
            .is_ok_and(|counts| counts.completed == N as u64)
    })
    .await?;
    worker.close().await?;

    let by_node: Vec<String> = node["completed"]
        .as_array()
        .context("Node's completed ids")?
        .iter()
        .filter_map(|id| id.as_str().map(str::to_owned))
        .collect();
    let by_us = ours.lock().expect("recorder").clone();
    let mut all: Vec<String> = by_node.iter().chain(&by_us).cloned().collect();
    all.sort();
    let unique: BTreeSet<String> = all.iter().cloned().collect();
    ensure!(
        all.len() == unique.len(),
        "a job ran twice: node {by_node:?} ours {by_us:?}"
    );
    ensure!(
        unique == added,
        "node {by_node:?} ours {by_us:?} added {added:?}"
    );
    let counts = queue.get_job_counts().await?;
    ensure!(counts.failed == 0 && counts.active == 0, "{counts:?}");
    eprintln!(
        "cluster mixed: Node completed {}, ours {}",
        by_node.len(),
        by_us.len()
    );

    queue.obliterate(true).await?;
    queue.close().await?;
    Ok(())
}

/// An idle Worker blocked on `BZPOPMIN marker` and a QueueEvents blocked on `XREAD BLOCK`
/// follow the queue's slot when it moves to another primary (the node answers `MOVED`, the
/// client re-reads the slot map), and then when that primary is killed and its replica takes
/// over: every job added in each phase completes, every completion is seen as an event, and
/// nothing completed before is lost.
async fn a_reshard_and_a_failover_lose_nothing(cluster: &mut TestCluster) -> Result<()> {
    const BATCH: usize = 5;
    // 30 jobs of 100 ms on one slot: about 3 s of work to kill the primary under.
    const MID_RUN: usize = 30;
    let queue_name = unique_queue("cl-move");
    let queue = Queue::new(&queue_name, QueueOptions::new(config()?).prefix(PREFIX)).await?;
    let events = QueueEventsHandle::start(
        QueueEventsOptions::new(&queue_name, config()?)
            .prefix(PREFIX)
            .last_event_id("0"),
    )
    .await?;
    let mut stream = events.subscribe_stream();
    // `sleepMs` makes the mid-run batch slow enough to be killed under; a job active at the
    // kill is recovered within seconds (short lock, frequent stalled check).
    let processor = |job: Job, _ctx: JobContext| async move {
        let data: Value = job.data()?;
        if let Some(ms) = data["sleepMs"].as_u64() {
            tokio::time::sleep(Duration::from_millis(ms)).await;
        }
        Ok(json!("done"))
    };
    let args = WorkerArgs::connect(
        &config()?,
        &queue_name,
        processor,
        WorkerOptions::new()
            .prefix(PREFIX)
            .name("rust-move")
            .lock_duration(Duration::from_secs(5))
            .stalled_interval(Duration::from_secs(2)),
    )
    .await?;
    let worker = Worker::spawn(args).await?;
    let marker = queue.keys().key(bullmq_protocol::keys::QueueKey::Marker);

    let mut ids = BTreeSet::new();
    let mut completed_seen = BTreeSet::new();
    for phase in ["before", "after the reshard", "after the failover"] {
        match phase {
            "after the reshard" => {
                let from = cluster.primary_of(&marker).await?;
                let to = cluster.move_slot_of(&marker).await?;
                eprintln!("cluster: moved the {{bull}} slot from :{from} to :{to}");
            }
            "after the failover" => {
                // Killed mid-run: a batch of slow jobs is being worked on when the slot's
                // primary dies.
                let dead = cluster.primary_of(&marker).await?;
                let done_before = queue.get_job_counts().await?.completed;
                for i in 0..MID_RUN {
                    let data = json!({ "phase": "mid-run", "i": i, "sleepMs": 100 });
                    ids.insert(add_retrying(&queue, data).await?);
                }
                // Replication is asynchronous: an add its replica never got dies with the
                // primary (and the replica would hand out its job id again). The adds are what
                // may not be lost, so wait until the replica has everything written up to the
                // last of them; the Worker's writes go on meanwhile, and losing one of those
                // only runs a job again (stalled recovery).
                let written = primary_offset(cluster, dead).await?;
                eventually(
                    "the replica has every add",
                    Duration::from_secs(30),
                    || async { replica_reached(cluster, dead, written).await },
                )
                .await?;
                eventually(
                    "the Worker is part way through the batch",
                    Duration::from_secs(30),
                    || async {
                        queue
                            .get_job_counts()
                            .await
                            .is_ok_and(|counts| counts.completed > done_before)
                    },
                )
                .await?;
                let left = queue.get_job_counts().await?;
                eprintln!(
                    "cluster: killing the primary with {} waiting and {} active",
                    left.waiting, left.active
                );
                cluster.kill(dead).await?;
                eventually(
                    "a replica takes over the slot",
                    Duration::from_secs(60),
                    || async { cluster.primary_of(&marker).await.is_ok_and(|p| p != dead) },
                )
                .await?;
                eprintln!(
                    "cluster: killed :{dead}; :{} took over",
                    cluster.primary_of(&marker).await?
                );
            }
            _ => {}
        }
        // Adds retry through the failover window (the client is re-reading the slot map).
        for i in 0..BATCH {
            let job = add_retrying(&queue, json!({ "phase": phase, "i": i })).await?;
            ids.insert(job);
        }
        tokio::time::timeout(Duration::from_secs(90), async {
            while !ids.is_subset(&completed_seen) {
                let Some(event) = stream.recv().await else {
                    break;
                };
                if event.event.name() == "completed" {
                    if let Some(id) = event.event.job_id() {
                        completed_seen.insert(id.to_owned());
                    }
                }
            }
        })
        .await
        .with_context(|| format!("every job completed {phase} within 90 s"))?;
        ensure!(
            ids.is_subset(&completed_seen),
            "{phase}: {completed_seen:?} of {ids:?}"
        );
    }
    let counts = queue.get_job_counts().await?;
    ensure!(
        counts.completed == ids.len() as u64 && counts.failed == 0 && counts.waiting == 0,
        "{counts:?}"
    );
    worker.close().await?;
    events.close().await;
    queue.obliterate(true).await?;
    queue.close().await?;
    Ok(())
}

/// How far the primary on `port` has written its replication stream.
async fn primary_offset(cluster: &TestCluster, port: u16) -> Result<u64> {
    let info = cluster.cli(port, &["INFO", "replication"]).await?;
    common::primary_repl_offset(&info).context("master_repl_offset in INFO replication")
}

/// Whether every replica of the primary on `port` has its stream up to `offset`.
async fn replica_reached(cluster: &TestCluster, port: u16, offset: u64) -> bool {
    cluster
        .cli(port, &["INFO", "replication"])
        .await
        .is_ok_and(|info| common::replicas_reached(&info, offset))
}

/// `Queue::add`, retried for up to 30 s while the cluster fails over (a write sent to the
/// dead primary fails until the client has the new slot map).
async fn add_retrying(queue: &Queue, data: Value) -> Result<String> {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        match queue.add("job", data.clone()).await {
            Ok(job) => return Ok(job.id().to_owned()),
            Err(error) if tokio::time::Instant::now() < deadline => {
                eprintln!("add failed during the failover, retrying: {error}");
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
            Err(error) => return Err(error.into()),
        }
    }
}

fn strings(value: &Value) -> BTreeSet<String> {
    value
        .as_array()
        .map(|items| {
            items
                .iter()
                .filter_map(|item| item.as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}
