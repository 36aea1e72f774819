//! Benchmarks of ractor-bullmq, side by side with Node BullMQ 6.7.0 and the official Rust port
//! (`bullmq-official` 1.4.4) on the same Redis.
//!
//! ```text
//! cargo run --release -p bullmq-bench -- producer --jobs 100000
//! cargo run --release -p bullmq-bench -- worker --jobs 50000 --concurrency 100 --workers 1 --job-ms 0
//! cargo run --release -p bullmq-bench -- latency --rate 1000 --seconds 10
//! cargo run --release -p bullmq-bench -- memory --inflight 10000
//! cargo run --release -p bullmq-bench -- redis-limit --jobs 100000
//! cargo run --release -p bullmq-bench -- flow --children 10000
//! cargo run --release -p bullmq-bench -- postgres       # ours and Node's PostgreSQL backend
//! cargo run --release -p bullmq-bench -- all            # everything; writes docs/benchmarks.md
//! ```
//!
//! Each scenario prints one JSON line while running; a markdown table comparing us with Node and
//! the official port closes the run. These are measurements, not tests: nothing here fails on a slow machine
//! (a scenario fails only when jobs go missing or Node cannot read back what we completed).

// Both Rust sides (this binary and benches/official) use jemalloc: glibc's malloc and free
// took about a quarter of our worker's client CPU. The official side gets the same allocator
// (and, in the memory scenario, the same settings: memory.rs), so the comparison stays on
// equal terms. Applications embedding ractor-bullmq choose their own allocator
// (docs/guides/production.md).
#[global_allocator]
static GLOBAL: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

mod all;
mod cluster;
mod fanout;
mod flow;
mod latency;
mod memory;
mod node;
mod official;
mod pg_report;
mod pg_server;
mod postgres;
mod process_cpu;
mod producer;
mod redis_limit;
mod redis_stats;
mod report;
mod sides;
mod worker;
mod worker_report;

use anyhow::{Context, Result};
use clap::{Parser, Subcommand};
use ractor_bullmq::ConnectionConfig;

/// Throughput benchmarks, ours next to Node BullMQ's and the official Rust port's.
#[derive(Debug, Parser)]
#[command(name = "bullmq-bench", version, about)]
struct Cli {
    /// Redis to benchmark against.
    #[arg(
        long,
        env = "REDIS_URL",
        default_value = "redis://127.0.0.1:6379",
        global = true
    )]
    redis_url: String,
    /// PostgreSQL to benchmark against (the `postgres` group).
    #[arg(
        long,
        env = "PG_URL",
        default_value = "postgres://postgres@127.0.0.1:5432/test",
        global = true
    )]
    pg_url: String,
    /// Skip the Node BullMQ side (it needs `npm ci` in integration-tests/node).
    #[arg(long, global = true)]
    skip_node: bool,
    /// Skip the official Rust port's side (`benches/official`, built on first use).
    #[arg(long, global = true)]
    skip_official: bool,
    /// Run our side on a single-threaded Tokio runtime (like Node's one event loop) instead of
    /// the multi-threaded default.
    #[arg(long, global = true)]
    current_thread: bool,
    #[command(subcommand)]
    benchmark: Benchmark,
}

/// The benchmarks; each lives in its own module.
#[derive(Debug, Subcommand)]
enum Benchmark {
    /// Adding jobs: one by one, 100 in flight, and in bulk batches of 50 and 1000.
    Producer {
        /// Jobs per scenario.
        #[arg(long, default_value_t = 100_000)]
        jobs: u64,
    },
    /// The same N queues (each hash-tagged on its own slot) on one server (`--redis-url`) and
    /// on a Redis Cluster (`--cluster-url redis-cluster://…`), filled and drained in one run.
    Cluster {
        /// The cluster to compare with (`redis-cluster://host:port?node=…`).
        #[arg(long, env = "BENCH_CLUSTER_URL")]
        cluster_url: String,
        /// Queues, one Worker each.
        #[arg(long, default_value_t = 6)]
        queues: usize,
        /// Jobs over all queues.
        #[arg(long, default_value_t = 60_000)]
        jobs: u64,
    },
    /// Draining a filled queue with `workers` workers of `concurrency` slots in one process.
    Worker {
        /// Jobs to process.
        #[arg(long, default_value_t = 50_000)]
        jobs: u64,
        /// Slots per worker.
        #[arg(long, default_value_t = 100)]
        concurrency: usize,
        /// Workers in the process.
        #[arg(long, default_value_t = 1)]
        workers: usize,
        /// Processor time per job in ms (0: no-op).
        #[arg(long, default_value_t = 0)]
        job_ms: u64,
    },
    /// add → active / add → completed percentiles at a steady add rate.
    Latency {
        /// Jobs added per second.
        #[arg(long, default_value_t = 1000)]
        rate: u64,
        /// Seconds the producer runs.
        #[arg(long, default_value_t = 10)]
        seconds: u64,
        /// Worker concurrency.
        #[arg(long, default_value_t = 100)]
        concurrency: usize,
    },
    /// RSS of an idle worker and of one worker with `inflight` sleeping jobs.
    Memory {
        /// Jobs in flight at once.
        #[arg(long, default_value_t = 10_000)]
        inflight: u64,
        /// Internal: run the measurement in this process on this (filled) queue.
        #[arg(long, hide = true)]
        inner_queue: Option<String>,
    },
    /// The minimal lifecycle done by a batched Lua loop: the ceiling for any worker.
    RedisLimit {
        /// Jobs to run through the loop.
        #[arg(long, default_value_t = 100_000)]
        jobs: u64,
    },
    /// QueueEvents fan-out: events/s to 1 and 100 subscribers, replaying a filled stream and
    /// following a worker at full speed.
    Fanout {
        /// Events in the stream for the replay cases.
        #[arg(long, default_value_t = 200_000)]
        events: u64,
        /// Jobs the worker drains in the live cases.
        #[arg(long, default_value_t = 50_000)]
        jobs: u64,
    },
    /// One flow: a parent with `children` children added in one call, then drained by one
    /// Worker; add time, Redis memory, processing time, parent completions.
    Flow {
        /// Children under the parent.
        #[arg(long, default_value_t = 10_000)]
        children: u64,
    },
    /// Ours and Node BullMQ's PostgreSQL backend on the same server (`--pg-url`), next to the
    /// server's commit-rate floor; replaces the "PostgreSQL" section of `docs/benchmarks.md`.
    Postgres {
        /// Scale every job count by this factor (0.1 for a quick smoke run).
        #[arg(long, default_value_t = 1.0)]
        scale: f64,
        /// Jobs/s of the latency scenarios (comma-separated, one scenario each).
        #[arg(long, value_delimiter = ',', default_value = "50,200")]
        rates: Vec<u64>,
        /// Seconds each latency scenario adds for.
        #[arg(long, default_value_t = 10)]
        latency_seconds: u64,
        /// Worker concurrency in the latency scenarios.
        #[arg(long, default_value_t = 50)]
        latency_concurrency: usize,
        /// Seconds of each commit-floor loop before and after the scenarios.
        #[arg(long, default_value_t = 3.0)]
        floor_seconds: f64,
        /// Seconds of the floor loop run right before each side's add and worker scenario.
        #[arg(long, default_value_t = 1.5)]
        scenario_floor_seconds: f64,
        /// The document whose "PostgreSQL" section is replaced (appended when it has none).
        #[arg(long, default_value = "docs/benchmarks.md")]
        output: std::path::PathBuf,
        /// Print the section only; write nothing.
        #[arg(long)]
        no_write: bool,
    },
    /// Every scenario, ours and Node's; writes `docs/benchmarks.md`.
    All {
        /// Where to write the report.
        #[arg(long, default_value = "docs/benchmarks.md")]
        output: std::path::PathBuf,
        /// Scale every job count by this factor (0.1 for a quick smoke run).
        #[arg(long, default_value_t = 1.0)]
        scale: f64,
    },
}

fn main() -> Result<()> {
    let cli = Cli::parse();
    let runtime = if cli.current_thread {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?
    } else {
        tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build()?
    };
    runtime.block_on(run(cli))
}

async fn run(cli: Cli) -> Result<()> {
    let connection = ConnectionConfig::from_url(&cli.redis_url)?;
    if let Benchmark::Memory {
        inflight,
        inner_queue: Some(queue),
    } = &cli.benchmark
    {
        return memory::inner(&connection, queue, *inflight).await;
    }
    let with_node = !cli.skip_node && node::available();
    if !cli.skip_node && !with_node {
        eprintln!("node or the oracle package is missing (npm ci in integration-tests/node): Node side skipped");
    }
    // PostgreSQL only: no Redis, no official side (the port has no PostgreSQL backend).
    if let Benchmark::Postgres {
        scale,
        rates,
        latency_seconds,
        latency_concurrency,
        floor_seconds,
        scenario_floor_seconds,
        output,
        no_write,
    } = &cli.benchmark
    {
        let args: Vec<String> = std::env::args().skip(1).collect();
        let config = postgres::PgBenchConfig {
            url: cli.pg_url.clone(),
            node: with_node,
            scale: *scale,
            rates: rates.clone(),
            latency_seconds: *latency_seconds,
            latency_concurrency: *latency_concurrency,
            floor_seconds: *floor_seconds,
            scenario_floor_seconds: *scenario_floor_seconds,
            output: (!no_write).then(|| output.clone()),
            command: format!("cargo run --release -p bullmq-bench -- {}", args.join(" ")),
        };
        let section = postgres::run(&config).await?;
        println!();
        print!("{section}");
        return Ok(());
    }
    // Only these scenarios have an official side; the others need not wait for its build.
    let wants_official = !cli.skip_official
        && !matches!(
            cli.benchmark,
            Benchmark::RedisLimit { .. }
                | Benchmark::Fanout { .. }
                | Benchmark::Flow { .. }
                | Benchmark::Cluster { .. }
        );
    let with_official = wants_official && official::available();
    if wants_official && !with_official {
        eprintln!("benches/official could not be built: official side skipped");
    }
    let sides = sides::Sides {
        node: with_node,
        official: with_official,
    };
    let admin = connection
        .connect(None)
        .await
        .context("connecting for INFO and cleanup")?;
    let url = cli.redis_url.as_str();
    let table = match cli.benchmark {
        Benchmark::Producer { jobs } => {
            let config = producer::ProducerConfig {
                jobs,
                redis_url: cli.redis_url.clone(),
                sides,
            };
            report::markdown_table(&producer::run(&config).await?)
        }
        Benchmark::Worker {
            jobs,
            concurrency,
            workers,
            job_ms,
        } => {
            let scenario = worker::WorkerScenario {
                jobs,
                concurrency,
                workers,
                job_ms,
            };
            let results = worker::run(&connection, &admin, scenario, sides, url).await?;
            worker_report::markdown_table(&results)
        }
        Benchmark::Latency {
            rate,
            seconds,
            concurrency,
        } => {
            let scenario = latency::LatencyScenario {
                rate,
                seconds,
                concurrency,
            };
            let results = latency::run(&connection, &admin, scenario, sides, url).await?;
            worker_report::markdown_table(&results)
        }
        Benchmark::Memory { inflight, .. } => {
            let results = memory::run(&connection, &admin, inflight, sides, url).await?;
            worker_report::markdown_table(&results)
        }
        Benchmark::RedisLimit { jobs } => {
            let m = redis_limit::run(&connection, &admin, jobs).await?;
            worker_report::markdown_table(&[m])
        }
        Benchmark::Fanout { events, jobs } => fanout::markdown_table(
            &fanout::run(&connection, &admin, events, jobs, &[1, 100]).await?,
        ),
        Benchmark::Cluster {
            cluster_url,
            queues,
            jobs,
        } => {
            let cluster = ConnectionConfig::from_url(&cluster_url)?;
            cluster::markdown_table(&cluster::run(&connection, &cluster, queues, jobs).await?)
        }
        Benchmark::Flow { children } => {
            flow::markdown_table(&flow::run(&connection, &admin, children, sides.node, url).await?)
        }
        Benchmark::All { output, scale } => {
            all::run(&connection, &admin, sides, url, &output, scale).await?
        }
        Benchmark::Postgres { .. } => unreachable!("handled before connecting to Redis"),
    };
    println!();
    print!("{table}");
    Ok(())
}
