//! The producer benchmark: how fast jobs get into a queue, ours next to Node BullMQ's and the
//! official Rust port's.
//!
//! Scenarios (the same names for both implementations):
//! - `add`: one job at a time, each awaited before the next;
//! - `add_concurrent_100`: 100 adds in flight on one connection;
//! - `add_bulk_50` / `add_bulk_1000`: `add_bulk` / Node `addBulk` in batches.
//!
//! The other implementations run as subprocesses (`benches/node/producer.js`,
//! `bullmq-bench-official`) that time themselves from their connected queue to the last add.
//!
//! Every scenario uses a fresh queue that is deleted afterwards, and the same small payload.

use std::time::Instant;

use anyhow::{Context, Result};
use bullmq_redis::fred::prelude::Client;
use futures::{StreamExt, TryStreamExt};
use ractor_bullmq::protocol::options::JobOptions;
use ractor_bullmq::{ConnectionConfig, Queue, QueueOptions};
use serde_json::{json, Value};

use crate::report::{quantile, Measurement};
use crate::sides::{Other, Sides};
use crate::{process_cpu, redis_stats};

/// What the producer benchmark runs.
#[derive(Debug, Clone)]
pub(crate) struct ProducerConfig {
    /// Jobs per scenario.
    pub(crate) jobs: u64,
    /// Redis URL.
    pub(crate) redis_url: String,
    /// Which other implementations run.
    pub(crate) sides: Sides,
}

/// One scenario of the producer benchmark (also the PostgreSQL group's).
#[derive(Debug, Clone, Copy)]
pub(crate) enum Scenario {
    /// One `add` at a time.
    Sequential,
    /// This many `add`s in flight.
    Concurrent(usize),
    /// `add_bulk` in batches of this size.
    Bulk(usize),
}

impl Scenario {
    const ALL: [Scenario; 4] = [
        Scenario::Sequential,
        Scenario::Concurrent(100),
        Scenario::Bulk(50),
        Scenario::Bulk(1000),
    ];

    /// The scenario's name in the JSON lines and tables.
    pub(crate) fn name(self) -> String {
        match self {
            Scenario::Sequential => "add".into(),
            Scenario::Concurrent(n) => format!("add_concurrent_{n}"),
            Scenario::Bulk(n) => format!("add_bulk_{n}"),
        }
    }

    /// Arguments of `benches/node/producer.js` (and the official binary) for the scenario.
    pub(crate) fn node_args(self, queue: &str, jobs: u64) -> Value {
        match self {
            Scenario::Sequential => json!({"queue": queue, "jobs": jobs, "mode": "add"}),
            Scenario::Concurrent(n) => {
                json!({"queue": queue, "jobs": jobs, "mode": "add-concurrent", "concurrency": n})
            }
            Scenario::Bulk(n) => {
                json!({"queue": queue, "jobs": jobs, "mode": "addBulk", "batch": n})
            }
        }
    }
}

/// The payload every benchmark job carries (the Node script builds the same one).
fn payload(i: u64) -> Value {
    json!({"index": i, "email": format!("user{i}@example.com"), "template": "welcome"})
}

/// Runs every scenario for us, then for Node and the official port, printing a JSON line per scenario; returns all
/// measurements.
pub(crate) async fn run(config: &ProducerConfig) -> Result<Vec<Measurement>> {
    let connection = ConnectionConfig::from_url(&config.redis_url)?;
    let admin = connection
        .connect(None)
        .await
        .context("connecting for INFO and cleanup")?;
    let run_id = std::process::id();
    let mut results = Vec::new();

    for scenario in Scenario::ALL {
        let queue_name = format!("bench-producer-rust-{run_id}-{}", scenario.name());
        let queue = Queue::new(queue_name.clone(), QueueOptions::new(connection.clone())).await?;
        let cpu_before = redis_stats::server_cpu_seconds(&admin).await?;
        let client_before = process_cpu::cpu_seconds();
        let started = Instant::now();
        let mut latencies = add_jobs(&queue, scenario, config.jobs).await?;
        let seconds = started.elapsed().as_secs_f64();
        let client_cpu_ms = process_cpu::cpu_seconds()
            .zip(client_before)
            .map(|(after, before)| (after - before) * 1000.0);
        let redis_cpu = redis_stats::server_cpu_seconds(&admin).await? - cpu_before;
        let counts = queue.get_job_counts().await?;
        anyhow::ensure!(
            counts.waiting == config.jobs,
            "{}: expected {} waiting jobs, found {}",
            scenario.name(),
            config.jobs,
            counts.waiting
        );
        queue.close().await?;
        let mut m = measurement(
            scenario,
            "rust",
            config.jobs,
            seconds,
            redis_cpu,
            client_cpu_ms,
        );
        m.add_p50_ms = quantile(&mut latencies, 0.5);
        m.add_p99_ms = quantile(&mut latencies, 0.99);
        m.print_json_line();
        results.push(m);
        redis_stats::delete_queue(&admin, "bull", &queue_name).await?;
    }

    for other in config.sides.others() {
        for scenario in Scenario::ALL {
            let m = run_other_scenario(other, &admin, config, scenario, run_id).await?;
            m.print_json_line();
            results.push(m);
        }
    }
    let _ = bullmq_redis::fred::prelude::ClientLike::quit(&admin).await;
    Ok(results)
}

/// Adds `jobs` jobs the scenario's way; returns the duration of each `add` call in ms for the
/// one-by-one and concurrent scenarios (empty for bulk).
pub(crate) async fn add_jobs(queue: &Queue, scenario: Scenario, jobs: u64) -> Result<Vec<f64>> {
    let mut latencies = Vec::new();
    match scenario {
        Scenario::Sequential => {
            latencies.reserve(jobs as usize);
            for i in 0..jobs {
                let started = Instant::now();
                queue.add("bench", payload(i)).await?;
                latencies.push(started.elapsed().as_secs_f64() * 1e3);
            }
        }
        Scenario::Concurrent(in_flight) => {
            latencies = futures::stream::iter(0..jobs)
                .map(|i| async move {
                    let started = Instant::now();
                    queue.add("bench", payload(i)).await?;
                    Ok::<_, ractor_bullmq::QueueError>(started.elapsed().as_secs_f64() * 1e3)
                })
                .buffer_unordered(in_flight)
                .try_collect()
                .await?;
        }
        Scenario::Bulk(batch) => {
            let mut start = 0;
            while start < jobs {
                let end = (start + batch as u64).min(jobs);
                queue
                    .add_bulk((start..end).map(|i| ("bench", payload(i), JobOptions::new())))
                    .await?;
                start = end;
            }
        }
    }
    Ok(latencies)
}

async fn run_other_scenario(
    other: Other,
    admin: &Client,
    config: &ProducerConfig,
    scenario: Scenario,
    run_id: u32,
) -> Result<Measurement> {
    let queue_name = format!(
        "bench-producer-{}-{run_id}-{}",
        other.name(),
        scenario.name()
    );
    let cpu_before = redis_stats::server_cpu_seconds(admin).await?;
    let out = other
        .run(
            "producer.js",
            &scenario.node_args(&queue_name, config.jobs),
            &config.redis_url,
        )
        .await?;
    // Their own timing excludes process start-up; Redis CPU includes the queue's opening, as
    // ours does.
    let redis_cpu = redis_stats::server_cpu_seconds(admin).await? - cpu_before;
    let seconds = out["seconds"]
        .as_f64()
        .with_context(|| format!("{} producer: seconds", other.name()))?;
    let client_cpu_ms = out["clientCpuMs"].as_f64();
    let waiting = redis_stats::waiting_count(admin, "bull", &queue_name).await?;
    anyhow::ensure!(
        waiting == config.jobs,
        "{} {}: expected {} waiting jobs, found {waiting}",
        other.name(),
        scenario.name(),
        config.jobs
    );
    redis_stats::delete_queue(admin, "bull", &queue_name).await?;
    let mut m = measurement(
        scenario,
        other.name(),
        config.jobs,
        seconds,
        redis_cpu,
        client_cpu_ms,
    );
    m.add_p50_ms = out["addP50Ms"].as_f64();
    m.add_p99_ms = out["addP99Ms"].as_f64();
    Ok(m)
}

fn measurement(
    scenario: Scenario,
    implementation: &'static str,
    jobs: u64,
    seconds: f64,
    redis_cpu_seconds: f64,
    client_cpu_ms: Option<f64>,
) -> Measurement {
    Measurement {
        scenario: scenario.name(),
        implementation,
        jobs,
        seconds,
        jobs_per_sec: if seconds > 0.0 {
            jobs as f64 / seconds
        } else {
            0.0
        },
        redis_cpu_us_per_job: redis_cpu_seconds * 1e6 / jobs.max(1) as f64,
        client_cpu_ms,
        add_p50_ms: None,
        add_p99_ms: None,
    }
}
