//! Replica reads behind Sentinel (`replica_reads=true`): one primary (7120), one replica
//! (7121) and three Sentinels (7122-7124), quorum 2. In order, on one deployment:
//!
//! * without replica reads, a `Queue` opens no connection to the replica and no getter
//!   reaches it;
//! * with replica reads, the `Queue` has exactly one connection there, its getters are served
//!   by the replica (`INFO commandstats` on the replica counts the scripts and `HGETALL`s) and
//!   return what was added, a write is never refused there (`READONLY` in `INFO errorstats`),
//!   and closing the `Queue` leaves no connection of ours on the replica;
//! * with the replica `SIGKILL`ed, every getter still answers, from the primary, quickly;
//! * a `Queue` opened while the Sentinels list no healthy replica reads from the primary.
//!
//! Every process is killed by its PID when the deployment drops, also on failure. Skipped
//! with a message without `redis-server`.

mod common;
mod sentinel_deployment;

use std::time::{Duration, Instant};

use anyhow::{ensure, Context as _, Result};
use common::eventually;
use ractor_bullmq::protocol::state::JobState;
use ractor_bullmq::{ConnectionConfig, MetricsKind, Queue, QueueOptions};
use sentinel_deployment::{cli, DeploymentSpec, SentinelDeployment};
use serde_json::json;

const PRIMARY: u16 = 7120;
const REPLICA: u16 = 7121;
const JOBS: usize = 5;

fn spec() -> DeploymentSpec {
    DeploymentSpec {
        data_ports: vec![PRIMARY, REPLICA],
        sentinel_ports: vec![7122, 7123, 7124],
        quorum: 2,
        sentinel_password: None,
        // Nothing here should make the Sentinels fail over.
        down_after: Duration::from_secs(30),
        failover_timeout: Duration::from_secs(180),
    }
}

/// Connections on `port` that are ours: not a Sentinel's (`sentinel-…` names), not the
/// replication link (flag `M`), not the `redis-cli` asking.
async fn our_connections(port: u16) -> Result<usize> {
    let list = cli(port, None, &["CLIENT", "LIST"]).await?;
    Ok(list
        .lines()
        .filter(|line| !line.trim().is_empty())
        .filter(|line| {
            let field = |name: &str| {
                line.split_whitespace()
                    .find_map(|pair| pair.strip_prefix(&format!("{name}=")))
                    .unwrap_or("")
                    .to_owned()
            };
            !field("name").starts_with("sentinel-")
                && !field("flags").contains('M')
                && field("cmd") != "client|list"
        })
        .count())
}

/// `calls=` of `cmdstat_<command>` in the server's `INFO commandstats` (0 when never called).
async fn calls(port: u16, command: &str) -> Result<u64> {
    let stats = cli(port, None, &["INFO", "commandstats"]).await?;
    let prefix = format!("cmdstat_{command}:calls=");
    Ok(stats
        .lines()
        .find_map(|line| line.trim().strip_prefix(&prefix))
        .and_then(|rest| rest.split(',').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or(0))
}

/// Script calls (`EVALSHA` and the `EVAL` after a `NOSCRIPT`) on `port`. A Redis 7 primary
/// replicates a script by its effects, so on a replica these are clients' calls only.
async fn script_calls(port: u16) -> Result<u64> {
    Ok(calls(port, "evalsha").await? + calls(port, "eval").await?)
}

/// Adds `JOBS` jobs `{tag}-0`.. and checks each is readable at once (a job just added may not
/// be on the replica yet: the primary has the last word on absence).
async fn add_jobs(queue: &Queue, tag: &str) -> Result<Vec<String>> {
    let mut ids = Vec::new();
    for i in 0..JOBS {
        let id = format!("{tag}-{i}");
        let job = queue
            .add("job", json!({ "n": i }))
            .job_id(id.clone())
            .await
            .with_context(|| format!("adding {id}"))?;
        ensure!(job.id() == id);
        let read = queue.get_job(&id).await?.context("a job just added")?;
        ensure!(read.data_value() == &json!({ "n": i }), "{id}: {read:?}");
        ids.push(id);
    }
    Ok(ids)
}

/// Waits until the replica has the log list `key` with its one line (the last write of a
/// phase: replication is asynchronous, and in order).
async fn replica_has_log(key: &str) -> Result<()> {
    let key = key.to_owned();
    eventually(
        "the replica has the last write",
        Duration::from_secs(10),
        move || {
            let key = key.clone();
            async move {
                cli(REPLICA, None, &["LLEN", &key])
                    .await
                    .is_ok_and(|n| n.trim() == "1")
            }
        },
    )
    .await
}

/// The getters answer what was written: counts, ids, states, jobs, logs, pause flag.
async fn check_getters(queue: &Queue, ids: &[String], log_line: &str) -> Result<()> {
    let counts = queue.get_job_counts().await?;
    ensure!(counts.waiting == JOBS as u64, "{counts:?}");
    let listed = queue.get_job_ids(&[JobState::Waiting], 0, -1, true).await?;
    ensure!(listed == ids, "ids {listed:?}, added {ids:?}");
    for id in ids {
        ensure!(queue.get_job_state(id).await? == JobState::Waiting, "{id}");
    }
    let jobs = queue.get_jobs(&[JobState::Waiting], 0, -1, true).await?;
    ensure!(jobs.len() == JOBS, "{} jobs", jobs.len());
    let logs = queue.get_job_logs(&ids[0], 0, -1, true).await?;
    ensure!(logs.logs == [log_line], "{logs:?}");
    ensure!(!queue.is_paused().await?);
    ensure!(queue.get_meta().await?.version.is_some());
    // The other read-only getters: schedulers, metrics, dependencies, queue control.
    ensure!(queue
        .get_job_schedulers(ractor_bullmq::JobSchedulersRange::new().asc(true))
        .await?
        .is_empty());
    ensure!(queue.get_job_schedulers_count().await? == 0);
    ensure!(queue.get_job_scheduler("none").await?.is_none());
    let metrics = queue.get_metrics(MetricsKind::Completed, 0, -1).await?;
    ensure!(metrics.count == 0 && metrics.data.is_empty(), "{metrics:?}");
    let dependencies = queue.get_dependencies_count(&ids[0]).await?;
    ensure!(
        dependencies.processed + dependencies.unprocessed + dependencies.failed == 0,
        "{dependencies:?}"
    );
    ensure!(queue.get_global_concurrency().await?.is_none());
    ensure!(queue.get_global_rate_limit().await?.is_none());
    ensure!(!queue.is_maxed().await?);
    ensure!(queue.get_deduplication_job_id("none").await?.is_none());
    let per_priority = queue.get_counts_per_priority(&[0]).await?;
    ensure!(
        per_priority.get(&0) == Some(&(JOBS as u64)),
        "{per_priority:?}"
    );
    Ok(())
}

async fn scenario() -> Result<()> {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_test_writer()
        .try_init();
    let mut deployment = SentinelDeployment::start(spec()).await?;
    ensure!(deployment.primary_port().await? == PRIMARY);
    // A Sentinel refreshes what it knows of a replica every 10 s: until then it may still
    // list the replica with the link state of its first look (before the initial sync), and
    // a store would rightly skip it.
    for port in spec().sentinel_ports {
        eventually(
            "every Sentinel lists the replica as healthy",
            Duration::from_secs(30),
            move || async move {
                cli(
                    port,
                    None,
                    &["SENTINEL", "REPLICAS", sentinel_deployment::SERVICE],
                )
                .await
                .is_ok_and(|reply| {
                    let lines: Vec<&str> = reply.lines().map(str::trim).collect();
                    lines
                        .windows(2)
                        .any(|w| w[0] == "master-link-status" && w[1] == "ok")
                        && !reply.contains("s_down")
                        && !reply.contains("disconnected")
                })
            },
        )
        .await?;
    }
    let mut plain = ConnectionConfig::from_url(&deployment.url(0))?;
    plain.connect_timeout = Duration::from_secs(2);
    let mut replica_reads =
        ConnectionConfig::from_url(&format!("{}&replica_reads=true", deployment.url(0)))?;
    replica_reads.connect_timeout = Duration::from_secs(2);
    ensure!(replica_reads.replica_reads && !plain.replica_reads);

    // Without replica reads: nothing of ours on the replica, no getter there.
    let _ = cli(REPLICA, None, &["CONFIG", "RESETSTAT"]).await?;
    let name = common::unique_queue("replica-off");
    let queue = Queue::new(&name, QueueOptions::new(plain.clone())).await?;
    let ids = add_jobs(&queue, "off").await?;
    queue.add_job_log(&ids[0], "line", None).await?;
    check_getters(&queue, &ids, "line").await?;
    ensure!(
        our_connections(REPLICA).await? == 0,
        "a Queue without replica reads connected to the replica"
    );
    ensure!(script_calls(REPLICA).await? == 0 && calls(REPLICA, "hgetall").await? == 0);
    queue.close().await?;

    // With replica reads: one connection there, the getters served by it.
    let name = common::unique_queue("replica-on");
    let queue = Queue::new(&name, QueueOptions::new(replica_reads.clone())).await?;
    ensure!(
        our_connections(REPLICA).await? == 1,
        "one connection to the replica expected"
    );
    let ids = add_jobs(&queue, "on").await?;
    queue.add_job_log(&ids[0], "on line", None).await?;
    // Replication is asynchronous: wait until the replica has the log line (the last write).
    replica_has_log(&format!("bull:{name}:{}:logs", ids[0])).await?;
    let _ = cli(REPLICA, None, &["CONFIG", "RESETSTAT"]).await?;
    let primary_scripts = script_calls(PRIMARY).await?;
    let primary_hgetall = calls(PRIMARY, "hgetall").await?;
    check_getters(&queue, &ids, "on line").await?;
    // get_job_counts, get_job_ids, get_jobs' ranges, one get_state per job, the scheduler
    // reads, is_maxed and the counts per priority are scripts; get_jobs reads JOBS hashes and
    // get_meta one.
    let scripts = script_calls(REPLICA).await?;
    ensure!(
        scripts >= 3 + JOBS as u64,
        "{scripts} script calls on the replica"
    );
    let hgetall = calls(REPLICA, "hgetall").await?;
    ensure!(hgetall > JOBS as u64, "{hgetall} HGETALL on the replica");
    ensure!(
        script_calls(PRIMARY).await? == primary_scripts
            && calls(PRIMARY, "hgetall").await? == primary_hgetall,
        "a getter went to the primary while the replica was up"
    );
    // Writes stay on the primary: pausing is seen on the replica a moment later, and the
    // replica never refused a write.
    queue.pause().await?;
    let paused = &queue;
    eventually(
        "the pause reaches the replica",
        Duration::from_secs(10),
        move || async move { paused.is_paused().await.unwrap_or(false) },
    )
    .await?;
    let errors = cli(REPLICA, None, &["INFO", "errorstats"]).await?;
    ensure!(
        !errors.contains("READONLY"),
        "a write reached the replica: {errors}"
    );
    queue.resume().await?;
    queue.close().await?;
    eventually(
        "closing the Queue closes its replica connection",
        Duration::from_secs(5),
        || async { our_connections(REPLICA).await.is_ok_and(|n| n == 0) },
    )
    .await?;

    // The replica SIGKILLed: the getters answer from the primary.
    let name = common::unique_queue("replica-dead");
    let queue = Queue::new(&name, QueueOptions::new(replica_reads.clone())).await?;
    ensure!(our_connections(REPLICA).await? == 1);
    let ids = add_jobs(&queue, "dead").await?;
    queue.add_job_log(&ids[0], "dead line", None).await?;
    replica_has_log(&format!("bull:{name}:{}:logs", ids[0])).await?;
    deployment.kill_data(REPLICA).await?;
    let primary_scripts = script_calls(PRIMARY).await?;
    let started = Instant::now();
    check_getters(&queue, &ids, "dead line").await?;
    let took = started.elapsed();
    // The first getter may find out on its own (at worst after the command timeout, the
    // connect timeout here); after that the replica is known to be reconnecting.
    ensure!(
        took < Duration::from_secs(5),
        "the getters took {took:?} with the replica dead"
    );
    ensure!(
        script_calls(PRIMARY).await? > primary_scripts,
        "the primary answered no getter"
    );
    // Still after a while (the replica client keeps reconnecting in the background).
    tokio::time::sleep(Duration::from_millis(500)).await;
    check_getters(&queue, &ids, "dead line").await?;
    let closing = Instant::now();
    queue.close().await?;
    ensure!(
        closing.elapsed() < Duration::from_secs(5),
        "closing took {:?} with the replica dead",
        closing.elapsed()
    );

    // Opened while the Sentinels list no healthy replica: everything on the primary.
    eventually(
        "the Sentinels see the replica disconnected",
        Duration::from_secs(15),
        || async {
            cli(
                7122,
                None,
                &["SENTINEL", "REPLICAS", sentinel_deployment::SERVICE],
            )
            .await
            .is_ok_and(|reply| reply.contains("disconnected") || reply.contains("s_down"))
        },
    )
    .await?;
    let name = common::unique_queue("replica-none");
    let opening = Instant::now();
    let queue = Queue::new(&name, QueueOptions::new(replica_reads.clone())).await?;
    ensure!(
        opening.elapsed() < Duration::from_secs(2),
        "opening took {:?} without a healthy replica",
        opening.elapsed()
    );
    let ids = add_jobs(&queue, "none").await?;
    queue.add_job_log(&ids[0], "none line", None).await?;
    let started = Instant::now();
    check_getters(&queue, &ids, "none line").await?;
    ensure!(
        started.elapsed() < Duration::from_secs(2),
        "the getters took {:?} without a replica",
        started.elapsed()
    );
    queue.close().await?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replica_reads_serve_getters_from_the_replica_and_fall_back_to_the_primary() -> Result<()> {
    if !sentinel_deployment::available().await {
        eprintln!(
            "SKIPPING replica_reads_serve_getters_from_the_replica_and_fall_back_to_the_primary: \
             no redis-server"
        );
        return Ok(());
    }
    scenario().await
}
