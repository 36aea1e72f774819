//! Benchmarks of ractor-bullmq, side by side with Node BullMQ 6.7.0 on the same Redis.
//!
//! ```text
//! cargo run --release -p bullmq-bench -- producer --jobs 100000
//! ```
//!
//! Each scenario prints one JSON line while running; a markdown table comparing us with Node
//! closes the run. These are measurements, not tests: nothing here fails on a slow machine.

mod node;
mod process_cpu;
mod producer;
mod redis_stats;
mod report;

use anyhow::Result;
use clap::{Parser, Subcommand};

/// Throughput benchmarks, ours next to Node BullMQ's.
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
    /// Skip the Node BullMQ side (it needs `npm ci` in integration-tests/node).
    #[arg(long, global = true)]
    skip_node: bool,
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
}

#[tokio::main]
async fn main() -> Result<()> {
    let cli = Cli::parse();
    let with_node = !cli.skip_node && node::available();
    if !cli.skip_node && !with_node {
        eprintln!("node or the oracle package is missing (npm ci in integration-tests/node): Node side skipped");
    }
    let results = match cli.benchmark {
        Benchmark::Producer { jobs } => {
            let config = producer::ProducerConfig {
                jobs,
                redis_url: cli.redis_url.clone(),
                with_node,
            };
            producer::run(&config).await?
        }
    };
    println!();
    print!("{}", report::markdown_table(&results));
    Ok(())
}
