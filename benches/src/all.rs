//! `all`: every scenario, ours, Node's and the official Rust port's on the same Redis in one
//! run, then
//! `docs/benchmarks.md` (tables, the command, the machine). Job counts are chosen so the whole
//! run stays well under 15 minutes on a 2-core machine.

use std::fmt::Write as _;
use std::path::Path;

use anyhow::{Context, Result};
use bullmq_redis::fred::prelude::{Client, ClientLike};
use ractor_bullmq::ConnectionConfig;

use crate::latency::LatencyScenario;
use crate::report::Measurement;
use crate::sides::Sides;
use crate::worker::WorkerScenario;
use crate::worker_report::WorkerMeasurement;
use crate::{latency, memory, producer, redis_limit, report, worker};

/// The `## ` sections `render` writes; every other section of the file is kept.
const GENERATED_SECTIONS: &[&str] = &["Targets", "Workers, latency, memory", "Producer"];

fn scaled(jobs: u64, scale: f64) -> u64 {
    ((jobs as f64 * scale).round() as u64).max(100)
}

/// Runs everything and writes the report; returns the markdown it wrote.
pub(crate) async fn run(
    connection: &ConnectionConfig,
    admin: &Client,
    sides: Sides,
    redis_url: &str,
    output: &Path,
    scale: f64,
) -> Result<String> {
    let started = std::time::Instant::now();
    let producer_results = producer::run(&producer::ProducerConfig {
        jobs: scaled(20_000, scale),
        redis_url: redis_url.to_string(),
        sides,
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
        results.extend(worker::run(connection, admin, scenario, sides, redis_url).await?);
    }
    let latency_scenario = LatencyScenario {
        rate: 1000,
        seconds: ((10.0 * scale).round() as u64).max(2),
        concurrency: 100,
    };
    results.extend(latency::run(connection, admin, latency_scenario, sides, redis_url).await?);
    results.extend(memory::run(connection, admin, 10_000, sides, redis_url).await?);

    let elapsed = started.elapsed().as_secs_f64();
    let markdown = render(
        &report::markdown_table(&producer_results),
        &crate::worker_report::markdown_table(&results),
        &targets(&results, &producer_results),
        admin,
        (scale, redis_url, sides),
        elapsed,
    )
    .await?;
    // Sections `all` does not make (the `postgres` group's, hand-written ones such as Flow)
    // stay, after the generated ones.
    let mut markdown = markdown;
    let existing = std::fs::read_to_string(output).unwrap_or_default();
    for section in crate::pg_report::other_sections(&existing, GENERATED_SECTIONS) {
        markdown.push('\n');
        markdown.push_str(&section);
    }
    if let Some(dir) = output.parent() {
        std::fs::create_dir_all(dir).ok();
    }
    std::fs::write(output, &markdown).with_context(|| format!("writing {}", output.display()))?;
    eprintln!("wrote {} ({elapsed:.0} s)", output.display());
    Ok(markdown)
}

/// The best `add_bulk` rate of one implementation (over the batch sizes), if it ran.
fn best_bulk(producer: &[Measurement], implementation: &str) -> Option<f64> {
    producer
        .iter()
        .filter(|m| m.implementation == implementation && m.scenario.starts_with("add_bulk"))
        .map(|m| m.jobs_per_sec)
        .reduce(f64::max)
}

/// One row of the targets table; `bound` is the threshold the measured `value` must reach
/// (`at_least`) or stay under.
fn target_row(
    metric: &str,
    wanted: &str,
    value: Option<f64>,
    bound: f64,
    at_least: bool,
) -> String {
    match value {
        Some(v) => {
            let holds = if at_least { v >= bound } else { v <= bound };
            format!(
                "| {metric} | {wanted} | {v:.2} | {} |\n",
                if holds { "yes" } else { "no" }
            )
        }
        None => format!("| {metric} | {wanted} | – | – |\n"),
    }
}

/// A target relative to the official port: `factor` × its figure measured in this run, or
/// × the issue's figure for it (`issue`) when the official side did not run.
fn relative_target(factor: f64, measured: Option<f64>, issue: f64, unit: &str) -> (f64, String) {
    let op = if factor >= 1.0 { "≥" } else { "≤" };
    // Rates read best as whole jobs/s, µs with one decimal.
    let d = if unit.is_empty() { 0 } else { 1 };
    match measured {
        Some(official) => (
            factor * official,
            format!(
                "{op} {factor}× official (measured {official:.d$}{unit} → {:.d$}{unit})",
                factor * official
            ),
        ),
        None => (
            factor * issue,
            format!(
                "{op} {:.d$}{unit} ({factor}× the issue's official ≈ {issue:.0}{unit}; official not run)",
                factor * issue
            ),
        ),
    }
}

/// The issue's targets next to what this run measured; the ones stated relative to the official
/// Rust port use its figures from this same run.
fn targets(results: &[WorkerMeasurement], producer: &[Measurement]) -> String {
    let find = |scenario: &str, implementation: &str| {
        results
            .iter()
            .find(|m| m.scenario == scenario && m.implementation == implementation)
    };
    let c100 = find("worker_1x100", "rust");
    let official_c100 = find("worker_1x100", "official");
    let limit = results.iter().find(|m| m.implementation == "redis-lua");
    let latency = results
        .iter()
        .find(|m| m.implementation == "rust" && m.scenario.starts_with("latency"));
    let memory = results
        .iter()
        .find(|m| m.implementation == "rust" && m.scenario.ends_with("_inflight"));
    let mut out = String::from(
        "| target (from the issue) | wanted | measured | holds |\n|---|---|---:|---|\n",
    );
    let (bound, wanted) = relative_target(2.0, official_c100.map(|m| m.jobs_per_s), 24_000.0, "");
    out.push_str(&target_row(
        "worker no-op, 1 worker × 100, jobs/s",
        &wanted,
        c100.map(|m| m.jobs_per_s),
        bound,
        true,
    ));
    let (bound, wanted) = relative_target(
        0.5,
        official_c100.and_then(|m| m.redis_cpu_us_per_job),
        38.0,
        " µs",
    );
    out.push_str(&target_row(
        "Redis CPU µs per processed job (1 × 100)",
        &wanted,
        c100.and_then(|m| m.redis_cpu_us_per_job),
        bound,
        false,
    ));
    let (bound, wanted) = relative_target(2.0, best_bulk(producer, "official"), 35_000.0, "");
    out.push_str(&target_row(
        "add_bulk jobs/s (best batch size of each)",
        &wanted,
        best_bulk(producer, "rust"),
        bound,
        true,
    ));
    out.push_str(&target_row(
        "fraction of the Redis limit (1 × 100)",
        "≥ 0.6",
        c100.zip(limit)
            .map(|(o, l)| o.jobs_per_s / l.jobs_per_s.max(1.0)),
        0.6,
        true,
    ));
    out.push_str(&target_row(
        "p99 add→completed ms at 1 000 jobs/s",
        "≤ 5 ms",
        latency.and_then(|m| m.completed_p99_ms),
        5.0,
        false,
    ));
    out.push_str(&target_row(
        "RSS MB with 10 000 in-flight sleeping jobs",
        "≤ 64 MB",
        memory.and_then(|m| m.rss_mb),
        64.0,
        false,
    ));
    out
}

async fn render(
    producer_table: &str,
    worker_table: &str,
    targets_table: &str,
    admin: &Client,
    (scale, redis_url, sides): (f64, &str, Sides),
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
    if !sides.node {
        command.push_str(" --skip-node");
    }
    if !sides.official {
        command.push_str(" --skip-official");
    }
    command.push_str(" all");
    if (scale - 1.0).abs() >= f64::EPSILON {
        command.push_str(&format!(" --scale {scale}"));
    }
    let mut out = String::new();
    let _ = writeln!(out, "# Benchmarks\n");
    let _ = writeln!(
        out,
        "Generated by `{command}` (took {elapsed:.0} s). Ours, Node BullMQ 6.7.0 and the \
         official Rust port (`bullmq-official` 1.4.4) ran against the same Redis in the same \
         run; see `benches/README.md` for what each scenario does and how it is measured.\n"
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
    if sides.official {
        let _ = writeln!(
            out,
            "\nTargets stated relative to the official Rust port use its figures measured in \
             this run (same Redis, same scenario).\n"
        );
    } else {
        let _ = writeln!(
            out,
            "\nThe official Rust port was not part of this run; its figures are the issue's.\n"
        );
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    fn bulk(implementation: &'static str, scenario: &str, rate: f64) -> Measurement {
        Measurement {
            scenario: scenario.into(),
            implementation,
            jobs: 1000,
            seconds: 1000.0 / rate,
            jobs_per_sec: rate,
            redis_cpu_us_per_job: 10.0,
            client_cpu_ms: None,
            add_p50_ms: None,
            add_p99_ms: None,
        }
    }

    #[test]
    fn targets_use_the_official_figures_of_the_same_run() {
        let ours = WorkerMeasurement::new("rust", "worker_1x100", 1000, (1, 100, 0), 0.02)
            .redis_cpu(0.014);
        let official = WorkerMeasurement::new("official", "worker_1x100", 1000, (1, 100, 0), 0.04)
            .redis_cpu(0.030);
        let producer = [
            bulk("rust", "add_bulk_50", 70_000.0),
            bulk("rust", "add_bulk_1000", 60_000.0),
            bulk("official", "add_bulk_50", 30_000.0),
            bulk("official", "add_bulk_1000", 40_000.0),
            bulk("official", "add", 90_000.0),
        ];
        let table = targets(&[ours, official], &producer);
        // 50 000 jobs/s against 2 × 25 000.
        assert!(
            table.contains("| ≥ 2× official (measured 25000 → 50000) | 50000.00 | yes |"),
            "{table}"
        );
        // 14 µs against 0.5 × 30 µs.
        assert!(
            table.contains("| ≤ 0.5× official (measured 30.0 µs → 15.0 µs) | 14.00 | yes |"),
            "{table}"
        );
        // Best bulk 70 000 against 2 × the official's best bulk (40 000), not its `add`.
        assert!(
            table.contains("| ≥ 2× official (measured 40000 → 80000) | 70000.00 | no |"),
            "{table}"
        );
    }

    #[test]
    fn targets_fall_back_to_the_issue_figures_without_the_official_side() {
        let ours = WorkerMeasurement::new("rust", "worker_1x100", 1000, (1, 100, 0), 0.02);
        let table = targets(&[ours], &[bulk("rust", "add_bulk_50", 70_000.0)]);
        assert!(table.contains("official not run"), "{table}");
        assert!(table.contains("≥ 48000 (2× the issue's"), "{table}");
    }
}
