//! The cluster benchmark: the same N queues on one server and on a Redis Cluster, in one run.
//!
//! Each queue's name carries its own hash tag (`{bench-cluster-…-i}`), so on a cluster the
//! queues land on different slots and so on different primaries (a `{bull}` prefix would put
//! them all on one). Each queue is filled with `jobs / N` jobs (`add_bulk` batches of 1000)
//! and drained by one Worker of its own; measured: the adds, the draining, jobs/s, and on how
//! many primaries the queues landed. On a 2-core machine running every node the ratio shows the
//! cluster's overhead (slot routing, more connections), not scaling: the primaries share the
//! same cores.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use anyhow::{ensure, Context, Result};
use bullmq_redis::fred::prelude::{ClientLike, ClusterInterface};
use bullmq_redis::fred::types::cluster::ClusterRouting;
use bullmq_redis::Topology;
use ractor_bullmq::worker::{Job, JobContext, Worker, WorkerArgs};
use ractor_bullmq::{ConnectionConfig, Queue, QueueOptions};
use serde::Serialize;
use serde_json::json;

use crate::report;
use crate::worker::{fill, worker_options};

/// Worker slots per queue.
const CONCURRENCY: usize = 50;

/// What one deployment measured.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct ClusterMeasurement {
    /// `single` or `cluster`.
    pub(crate) deployment: &'static str,
    /// Queues (one Worker each).
    pub(crate) queues: usize,
    /// Jobs over all queues.
    pub(crate) jobs: u64,
    /// Primaries the queues' slots are on (1 on one server).
    pub(crate) primaries_used: usize,
    /// Seconds to add every job.
    pub(crate) add_seconds: f64,
    /// Seconds from the Workers' start until every job completed.
    pub(crate) process_seconds: f64,
}

/// Runs the scenario on `single`, then on `cluster`.
pub(crate) async fn run(
    single: &ConnectionConfig,
    cluster: &ConnectionConfig,
    queues: usize,
    jobs: u64,
) -> Result<Vec<ClusterMeasurement>> {
    ensure!(queues > 0, "cluster: --queues must be at least 1");
    ensure!(
        matches!(cluster.topology, Topology::Cluster { .. }),
        "cluster: --cluster-url must be a redis-cluster:// URL"
    );
    let mut results = Vec::new();
    for (deployment, connection) in [("single", single), ("cluster", cluster)] {
        let measured = run_on(deployment, connection, queues, jobs).await?;
        report::print_json_line(&measured);
        results.push(measured);
    }
    Ok(results)
}

async fn run_on(
    deployment: &'static str,
    connection: &ConnectionConfig,
    queues: usize,
    jobs: u64,
) -> Result<ClusterMeasurement> {
    let run_id = format!("{}-{deployment}", std::process::id());
    let names: Vec<String> = (0..queues)
        .map(|i| format!("{{bench-cluster-{run_id}-{i}}}"))
        .collect();
    let per_queue = jobs / queues as u64;
    let mut opened = Vec::new();
    for name in &names {
        opened.push(Queue::new(name.clone(), QueueOptions::new(connection.clone())).await?);
    }
    let primaries_used = primaries_used(&opened).await?;

    let started = Instant::now();
    for queue in &opened {
        fill(queue, per_queue).await?;
    }
    let add_seconds = started.elapsed().as_secs_f64();

    let processor = |_job: Job, _ctx: JobContext| async move { Ok(json!({ "ok": true })) };
    let started = Instant::now();
    let mut workers = Vec::new();
    for name in &names {
        let args =
            WorkerArgs::connect(connection, name, processor, worker_options(CONCURRENCY)).await?;
        workers.push(Worker::spawn(args).await?);
    }
    let total = per_queue * queues as u64;
    tokio::time::timeout(Duration::from_secs(600), async {
        loop {
            let mut completed = 0;
            for queue in &opened {
                completed += queue.get_job_counts().await?.completed;
            }
            if completed >= total {
                return Ok::<_, anyhow::Error>(());
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await
    .with_context(|| format!("cluster ({deployment}): not every job completed in 600 s"))??;
    let process_seconds = started.elapsed().as_secs_f64();
    for worker in workers {
        worker.close().await?;
    }
    for queue in opened {
        queue.obliterate(true).await?;
        queue.close().await?;
    }
    Ok(ClusterMeasurement {
        deployment,
        queues,
        jobs: total,
        primaries_used,
        add_seconds,
        process_seconds,
    })
}

/// On how many primaries the queues' slots are: `CLUSTER SLOTS` against each queue's slot
/// (one server: 1).
async fn primaries_used(queues: &[Queue]) -> Result<usize> {
    let Some(client) = queues.first().and_then(Queue::redis_client) else {
        return Ok(1);
    };
    if !client.is_clustered() {
        return Ok(1);
    }
    client.sync_cluster().await?;
    let state = client
        .cached_cluster_state()
        .context("cluster: no slot map")?;
    let owners: BTreeSet<String> = queues
        .iter()
        .filter_map(|queue| {
            let slot = ClusterRouting::hash_key(queue.keys().base().as_bytes());
            state.get_server(slot)
        })
        .map(|server| server.to_string())
        .collect();
    Ok(owners.len())
}

/// The results as a markdown table, one row per deployment, with the cluster's ratio.
pub(crate) fn markdown_table(results: &[ClusterMeasurement]) -> String {
    let mut out = String::from(
        "| deployment | queues | primaries used | jobs | add s | jobs/s added | process s | jobs/s processed |\n\
         |---|---:|---:|---:|---:|---:|---:|---:|\n",
    );
    let rate = |jobs: u64, seconds: f64| jobs as f64 / seconds.max(1e-9);
    for m in results {
        out.push_str(&format!(
            "| {} | {} | {} | {} | {:.2} | {:.0} | {:.2} | {:.0} |\n",
            m.deployment,
            m.queues,
            m.primaries_used,
            m.jobs,
            m.add_seconds,
            rate(m.jobs, m.add_seconds),
            m.process_seconds,
            rate(m.jobs, m.process_seconds),
        ));
    }
    if let [single, cluster] = results {
        out.push_str(&format!(
            "\ncluster / single, processing: {:.2}x (every node on this machine's cores: overhead, not scaling)\n",
            single.process_seconds / cluster.process_seconds.max(1e-9)
        ));
    }
    out
}
