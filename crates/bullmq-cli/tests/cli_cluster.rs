//! The CLI on a Redis Cluster (`--redis-url redis-cluster://…`): `queues` finds a queue whose
//! keys sit on one of three primaries, `stats --workers` and `workers` list a worker whose
//! connections are on every primary, `jobs` lists its jobs, and an untagged prefix is refused
//! with the hash-tag advice, and `bullmq demo` runs its producer, supervised Workers and
//! QueueEvents there. The cluster (ports 7010-7012, bus 7070-7072) is started for this
//! test and stopped by PID when it ends, also on failure; skipped without `redis-server` or
//! `redis-cli`.

#[path = "../../../integration-tests/tests/test_cluster/mod.rs"]
mod test_cluster;

use std::process::{Command, Output};
use std::time::Duration;

use anyhow::{ensure, Context as _, Result};
use ractor_bullmq::worker::{Job, JobContext};
use ractor_bullmq::{ConnectionConfig, Queue, QueueOptions, Worker, WorkerArgs, WorkerOptions};
use serde_json::json;
use test_cluster::{tools_available, ClusterSpec, TestCluster};

const PORTS: [u16; 3] = [7010, 7011, 7012];
const BUS_OFFSET: u16 = 60;

fn url() -> String {
    format!("redis-cluster://127.0.0.1:{}", PORTS[0])
}

/// Runs `bullmq --redis-url <cluster> --prefix PREFIX ARGS…`.
fn bullmq(prefix: &str, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_bullmq"))
        .args(["--redis-url", &url(), "--prefix", prefix])
        .args(args)
        .env_remove("RUST_LOG")
        .output()
        .expect("the bullmq binary runs")
}

fn stdout_of(output: &Output) -> Result<String> {
    ensure!(
        output.status.success(),
        "bullmq failed ({}): {}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    Ok(String::from_utf8_lossy(&output.stdout).into_owned())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cli_inspects_queues_on_a_redis_cluster() -> Result<()> {
    if !tools_available(&[("redis-server", "--version"), ("redis-cli", "--version")]).await {
        return Ok(());
    }
    let cluster = TestCluster::start(ClusterSpec {
        ports: &PORTS,
        bus_offset: BUS_OFFSET,
        replicas: 0,
        node_timeout_ms: 5_000,
        tls: None,
    })
    .await?;
    let config = ConnectionConfig::from_url(&url())?;
    let name = format!("cli-cluster-{}", std::process::id());
    let queue = Queue::new(&name, QueueOptions::new(config.clone()).prefix("{bull}")).await?;
    for i in 0..3 {
        queue.add("cli-job", json!({ "i": i })).await?;
    }
    let processor = |_job: Job, _ctx: JobContext| async move { Ok(json!("ok")) };
    let args = WorkerArgs::connect(
        &config,
        &name,
        processor,
        WorkerOptions::new().prefix("{bull}").name("cli-w"),
    )
    .await?;
    let worker = Worker::spawn(args).await?;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    while queue.get_job_counts().await?.completed < 3 {
        ensure!(
            tokio::time::Instant::now() < deadline,
            "jobs not completed in 30 s"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    let queues = stdout_of(&bullmq("{bull}", &["queues"]))?;
    ensure!(queues.contains(&name), "queues:\n{queues}");
    let stats = stdout_of(&bullmq("{bull}", &["stats", &name, "--workers"]))?;
    ensure!(stats.contains("cli-w"), "stats:\n{stats}");
    let workers = stdout_of(&bullmq("{bull}", &["--json", "workers", &name]))?;
    let listed: serde_json::Value = serde_json::from_str(&workers).context("workers --json")?;
    ensure!(
        listed["workers"].as_array().is_some_and(|w| w.len() == 1),
        "one worker, once (not once per primary): {workers}"
    );
    let jobs = stdout_of(&bullmq("{bull}", &["jobs", &name, "--state", "completed"]))?;
    ensure!(jobs.matches("cli-job").count() == 3, "jobs:\n{jobs}");

    // Without a hash tag the queue's keys would spread over slots: refused, with the fix.
    let refused = bullmq("bull", &["stats", &name]);
    ensure!(!refused.status.success(), "an untagged prefix was accepted");
    let error = String::from_utf8_lossy(&refused.stderr);
    ensure!(
        error.contains("hash tag") && error.contains("`{bull}`"),
        "{error}"
    );

    // The demo: a producer, two supervised Workers and a QueueEvents reader on the cluster,
    // every job accounted for and the demo queue removed afterwards.
    let demo = stdout_of(&bullmq(
        "{bull}",
        &[
            "--json",
            "demo",
            "--jobs",
            "200",
            "--workers",
            "2",
            "--concurrency",
            "10",
            "--timeout",
            "120",
        ],
    ))?;
    let summary: serde_json::Value = serde_json::from_str(demo.trim()).context("demo --json")?;
    let (completed, failed) = (
        summary["completed"].as_u64().unwrap_or_default(),
        summary["failed"].as_u64().unwrap_or_default(),
    );
    ensure!(
        completed + failed == 200 && completed > 0 && summary["cleaned"] == json!(true),
        "demo summary: {summary}"
    );

    worker.close().await?;
    queue.obliterate(true).await?;
    queue.close().await?;
    drop(cluster);
    Ok(())
}
