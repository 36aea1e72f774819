//! `all`: every scenario, ours and Node's on the same Redis in one run, then
//! `docs/benchmarks.md` (tables, the command, the machine). Job counts are chosen so the whole
//! run stays well under 15 minutes on a 2-core machine.

use std::fmt::Write as _;
use std::path::Path;

use anyhow::{Context, Result};
use bullmq_redis::fred::prelude::{Client, ClientLike};
use ractor_bullmq::ConnectionConfig;

use crate::latency::LatencyScenario;
use crate::worker::WorkerScenario;
use crate::worker_report::WorkerMeasurement;
use crate::{latency, memory, producer, redis_limit, report, worker};

fn scaled(jobs: u64, scale: f64) -> u64 {
    ((jobs as f64 * scale).round() as u64).max(100)
}

/// Runs everything and writes the report; returns the markdown it wrote.
pub(crate) async fn run(
    connection: &ConnectionConfig,
    admin: &Client,
    with_node: bool,
    redis_url: &str,
    output: &Path,
    scale: f64,
) -> Result<String> {
    let started = std::time::Instant::now();
    let producer_results = producer::run(&producer::ProducerConfig {
        jobs: scaled(20_000, scale),
        redis_url: redis_url.to_string(),
        with_node,
    })
    .await?;

    let mut results: Vec<WorkerMeasurement> = Vec::new();
    results.push(redis_limit::run(connection, admin, scaled(100_000, scale)).await?);
    let shapes: [(u64, usize, usize, u64); 9] = [
        (5_000, 1, 1, 0),
        (20_000, 10, 1, 0),
        (50_000, 100, 1, 0),
        (50_000, 500, 1, 0),
        (50_000, 1000, 1, 0),
        (50_000, 500, 2, 0),
        (50_000, 500, 5, 0),
        (50_000, 500, 10, 0),
        (50_000, 500, 10, 10),
    ];
    for (jobs, concurrency, workers, job_ms) in shapes {
        let scenario = WorkerScenario {
            jobs: scaled(jobs, scale),
            concurrency,
            workers,
            job_ms,
        };
        results.extend(worker::run(connection, admin, scenario, with_node, redis_url).await?);
    }
    let latency_scenario = LatencyScenario {
        rate: 1000,
        seconds: ((10.0 * scale).round() as u64).max(2),
        concurrency: 100,
    };
    results.extend(latency::run(connection, admin, latency_scenario, with_node, redis_url).await?);
    results.extend(memory::run(connection, admin, 10_000, with_node, redis_url).await?);

    let elapsed = started.elapsed().as_secs_f64();
    let best_bulk = producer_results
        .iter()
        .filter(|m| m.implementation == "rust" && m.scenario.starts_with("add_bulk"))
        .map(|m| m.jobs_per_sec)
        .fold(0.0, f64::max);
    let markdown = render(
        &report::markdown_table(&producer_results),
        &crate::worker_report::markdown_table(&results),
        &targets(&results, best_bulk),
        admin,
        (scale, redis_url),
        elapsed,
    )
    .await?;
    if let Some(dir) = output.parent() {
        std::fs::create_dir_all(dir).ok();
    }
    std::fs::write(output, &markdown).with_context(|| format!("writing {}", output.display()))?;
    eprintln!("wrote {} ({elapsed:.0} s)", output.display());
    Ok(markdown)
}

/// The targets next to what this run measured.
fn targets(results: &[WorkerMeasurement], best_bulk: f64) -> String {
    let find = |scenario: &str, implementation: &str| {
        results
            .iter()
            .find(|m| m.scenario == scenario && m.implementation == implementation)
    };
    let c100 = find("worker_1x100", "rust");
    let limit = results.iter().find(|m| m.implementation == "redis-lua");
    let latency = results
        .iter()
        .find(|m| m.implementation == "rust" && m.scenario.starts_with("latency"));
    let memory = results
        .iter()
        .find(|m| m.implementation == "rust" && m.scenario.ends_with("_inflight"));
    let row =
        |metric: &str, target: &str, value: Option<f64>, holds: fn(f64) -> bool, unit: &str| {
            match value {
                Some(v) => format!(
                    "| {metric} | {target} | {v:.2}{unit} | {} |\n",
                    if holds(v) { "yes" } else { "no" }
                ),
                None => format!("| {metric} | {target} | – | – |\n"),
            }
        };
    let mut out = String::from(
        "| target (from the issue) | wanted | measured | holds |\n|---|---|---:|---|\n",
    );
    out.push_str(&row(
        "worker no-op, 1 worker × 100, jobs/s",
        "≥ 48 000 (2× official ≈ 24k)",
        c100.map(|m| m.jobs_per_s),
        |v| v >= 48_000.0,
        "",
    ));
    out.push_str(&row(
        "Redis CPU per processed job (1 × 100)",
        "≤ 19 µs (0.5× official ≈ 38)",
        c100.and_then(|m| m.redis_cpu_us_per_job),
        |v| v <= 19.0,
        " µs",
    ));
    out.push_str(&row(
        "add_bulk jobs/s (best batch size)",
        "≥ 70 000 (2× official ≈ 35k)",
        Some(best_bulk),
        |v| v >= 70_000.0,
        "",
    ));
    out.push_str(&row(
        "fraction of the Redis limit (1 × 100)",
        "≥ 0.6",
        c100.zip(limit)
            .map(|(o, l)| o.jobs_per_s / l.jobs_per_s.max(1.0)),
        |v| v >= 0.6,
        "",
    ));
    out.push_str(&row(
        "p99 add→completed at 1 000 jobs/s",
        "≤ 5 ms",
        latency.and_then(|m| m.completed_p99_ms),
        |v| v <= 5.0,
        " ms",
    ));
    out.push_str(&row(
        "RSS with 10 000 in-flight sleeping jobs",
        "≤ 64 MB",
        memory.and_then(|m| m.rss_mb),
        |v| v <= 64.0,
        " MB",
    ));
    out
}

async fn render(
    producer_table: &str,
    worker_table: &str,
    targets_table: &str,
    admin: &Client,
    (scale, redis_url): (f64, &str),
    elapsed: f64,
) -> Result<String> {
    let cpu_model = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|info| {
            info.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split_once(':'))
                .map(|(_, v)| v.trim().to_string())
        })
        .unwrap_or_else(|| "unknown".into());
    let cpus = std::thread::available_parallelism().map_or(0, |n| n.get());
    let info: String = admin.info(None).await.context("INFO")?;
    let redis_version = info
        .lines()
        .find_map(|l| l.strip_prefix("redis_version:"))
        .unwrap_or("unknown")
        .trim()
        .to_string();
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    let mut command = "cargo run --release -p bullmq-bench --".to_string();
    if redis_url != "redis://127.0.0.1:6379" {
        command.push_str(&format!(" --redis-url {redis_url}"));
    }
    command.push_str(" all");
    if (scale - 1.0).abs() >= f64::EPSILON {
        command.push_str(&format!(" --scale {scale}"));
    }
    let mut out = String::new();
    let _ = writeln!(out, "# Benchmarks\n");
    let _ = writeln!(
        out,
        "Generated by `{command}` (took {elapsed:.0} s). Ours and Node BullMQ 6.7.0 ran against \
         the same Redis in the same run; see `benches/README.md` for what each scenario does \
         and how it is measured.\n"
    );
    let _ = writeln!(
        out,
        "Machine: {cpus} CPUs (`nproc`), {cpu_model}; Redis {redis_version} on loopback; \
         load average at the end: {}.\n",
        load.split_whitespace()
            .take(3)
            .collect::<Vec<_>>()
            .join(" ")
    );
    let _ = writeln!(out, "## Targets\n");
    out.push_str(targets_table);
    let _ = writeln!(
        out,
        "\nThe official Rust port was not part of this run; its figures are the issue's.\n"
    );
    let _ = writeln!(out, "## Workers, latency, memory\n");
    let _ = writeln!(
        out,
        "`worker_WxC` = W workers × concurrency C in one process, no-op jobs (`_10ms`: jobs \
         sleeping 10 ms). \"of Redis limit\" = our jobs/s over the `redis_limit` loop's. \
         Efficiency = jobs/s ÷ (workers × concurrency ÷ job time). \"compat\" = jobs our worker \
         completed that Node BullMQ read back as completed with a return value.\n"
    );
    out.push_str(worker_table);
    let _ = writeln!(out, "\n## Producer\n");
    out.push_str(producer_table);
    Ok(out)
}
