//! Results of the worker, latency, memory and Redis-limit scenarios: one JSON line each while
//! running and a markdown table (ours next to Node and the official port, with the ratios) at
//! the end.

use serde::Serialize;

/// What one worker-side scenario measured for one implementation.
#[derive(Debug, Clone, Default, Serialize)]
pub(crate) struct WorkerMeasurement {
    /// `rust`, `node`, `official` or `redis-lua` (the Redis limit).
    #[serde(rename = "impl")]
    pub(crate) implementation: &'static str,
    /// Scenario name, the same for every implementation (`worker_c100`, `latency_1000`, ...).
    pub(crate) scenario: String,
    /// Jobs processed.
    pub(crate) jobs: u64,
    /// Workers in the process.
    pub(crate) workers: usize,
    /// Concurrency of each worker.
    pub(crate) concurrency: usize,
    /// Processor time per job in ms (0 = no-op).
    pub(crate) job_ms: u64,
    /// Wall-clock seconds from starting the workers to the last completion.
    pub(crate) seconds: f64,
    /// `jobs / seconds`.
    pub(crate) jobs_per_s: f64,
    /// Redis server CPU (user + system) per job in µs, from `INFO cpu` before and after.
    pub(crate) redis_cpu_us_per_job: Option<f64>,
    /// Client CPU seconds (user + system) over the scenario.
    pub(crate) client_cpu_s: Option<f64>,
    /// Peak resident set size of the client process during the scenario, MB.
    pub(crate) rss_mb: Option<f64>,
    /// `jobs_per_s` / (workers × concurrency / job time); `None` for no-op jobs.
    pub(crate) efficiency: Option<f64>,
    /// add → processor started, percentiles in ms (latency scenario).
    pub(crate) active_p50_ms: Option<f64>,
    /// 99th percentile of add → processor started, ms.
    pub(crate) active_p99_ms: Option<f64>,
    /// 99.9th percentile of add → processor started, ms.
    pub(crate) active_p999_ms: Option<f64>,
    /// add → completed (finish confirmed by Redis), median in ms.
    pub(crate) completed_p50_ms: Option<f64>,
    /// 99th percentile of add → completed, ms.
    pub(crate) completed_p99_ms: Option<f64>,
    /// 99.9th percentile of add → completed, ms.
    pub(crate) completed_p999_ms: Option<f64>,
    /// Jobs Node BullMQ read back as completed with a return value / jobs it checked.
    pub(crate) compat_checked: Option<String>,
}

impl WorkerMeasurement {
    /// A measurement of `jobs` jobs in `seconds` with throughput and efficiency filled in.
    pub(crate) fn new(
        implementation: &'static str,
        scenario: impl Into<String>,
        jobs: u64,
        (workers, concurrency, job_ms): (usize, usize, u64),
        seconds: f64,
    ) -> Self {
        let jobs_per_s = if seconds > 0.0 {
            jobs as f64 / seconds
        } else {
            0.0
        };
        let efficiency = (job_ms > 0).then(|| {
            let theoretical = (workers * concurrency) as f64 * 1000.0 / job_ms as f64;
            jobs_per_s / theoretical
        });
        Self {
            implementation,
            scenario: scenario.into(),
            jobs,
            workers,
            concurrency,
            job_ms,
            seconds,
            jobs_per_s,
            efficiency,
            ..Self::default()
        }
    }

    /// Sets the Redis CPU per job from a server CPU delta in seconds.
    pub(crate) fn redis_cpu(mut self, seconds: f64) -> Self {
        self.redis_cpu_us_per_job = Some(seconds * 1e6 / self.jobs.max(1) as f64);
        self
    }

    /// Prints the measurement as one JSON line on stdout.
    pub(crate) fn print_json_line(&self) {
        crate::report::print_json_line(self);
    }
}

fn num(value: Option<f64>, decimals: usize) -> String {
    value.map_or("–".to_string(), |v| format!("{v:.decimals$}"))
}

/// The markdown table: one row per scenario with ours, Node, the official port, our ratio to
/// each, our fraction of the Redis limit, and Redis µs/job, client CPU, RSS, latency and
/// efficiency of all three.
pub(crate) fn markdown_table(results: &[WorkerMeasurement]) -> String {
    let mut scenarios: Vec<&str> = Vec::new();
    for m in results {
        if m.implementation != "redis-lua" && !scenarios.contains(&m.scenario.as_str()) {
            scenarios.push(&m.scenario);
        }
    }
    let find = |scenario: &str, implementation: &str| {
        results
            .iter()
            .find(|m| m.scenario == scenario && m.implementation == implementation)
    };
    let limit = results
        .iter()
        .find(|m| m.implementation == "redis-lua")
        .map(|m| m.jobs_per_s);
    let mut out = String::from(
        "| scenario | ours jobs/s | Node jobs/s | official jobs/s | ours / Node | ours / official | of Redis limit | Redis µs/job ours / Node / official | client CPU s ours / Node / official | RSS MB ours / Node / official | p50 / p99 / p99.9 add→completed ms ours | same, Node | same, official | efficiency ours / Node / official | compat |\n\
         |---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|\n",
    );
    let lat = |m: Option<&WorkerMeasurement>| match m {
        Some(m) if m.completed_p50_ms.is_some() => format!(
            "{} / {} / {}",
            num(m.completed_p50_ms, 2),
            num(m.completed_p99_ms, 2),
            num(m.completed_p999_ms, 2)
        ),
        _ => "–".to_string(),
    };
    for scenario in scenarios {
        let ours = find(scenario, "rust");
        let node = find(scenario, "node");
        let official = find(scenario, "official");
        let all = [ours, node, official];
        let triple = |field: fn(&WorkerMeasurement) -> Option<f64>, d: usize| {
            all.map(|m| num(m.and_then(field), d)).join(" / ")
        };
        let memory = scenario.starts_with("memory");
        let rate = |m: Option<&WorkerMeasurement>| {
            if memory {
                "–".to_string()
            } else {
                num(m.map(|m| m.jobs_per_s), 0)
            }
        };
        let ratio = |other: Option<&WorkerMeasurement>| match (ours, other) {
            (Some(o), Some(n)) if n.jobs_per_s > 0.0 && !memory => {
                format!("{:.2}×", o.jobs_per_s / n.jobs_per_s)
            }
            _ => "–".to_string(),
        };
        let of_limit = match (ours, limit) {
            (Some(o), Some(l)) if l > 0.0 && !memory => format!("{:.2}", o.jobs_per_s / l),
            _ => "–".to_string(),
        };
        out.push_str(&format!(
            "| {scenario} | {} | {} | {} | {} | {} | {of_limit} | {} | {} | {} | {} | {} | {} | {} | {} |\n",
            rate(ours),
            rate(node),
            rate(official),
            ratio(node),
            ratio(official),
            triple(|m| m.redis_cpu_us_per_job, 1),
            triple(|m| m.client_cpu_s, 2),
            triple(|m| m.rss_mb, 1),
            lat(ours),
            lat(node),
            lat(official),
            triple(|m| m.efficiency, 3),
            ours.and_then(|m| m.compat_checked.clone())
                .unwrap_or_else(|| "–".to_string()),
        ));
    }
    if let Some(m) = results.iter().find(|m| m.implementation == "redis-lua") {
        out.push_str(&format!(
            "\nRedis limit (`{}`, minimal lifecycle in batched Lua, no client work): {:.0} jobs/s, {} Redis µs/job.\n",
            m.scenario,
            m.jobs_per_s,
            num(m.redis_cpu_us_per_job, 1)
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_pairs_ours_with_node_official_and_the_limit() {
        let ours =
            WorkerMeasurement::new("rust", "worker_c100", 1000, (1, 100, 0), 0.02).redis_cpu(0.01);
        let node = WorkerMeasurement::new("node", "worker_c100", 1000, (1, 100, 0), 0.05);
        let official = WorkerMeasurement::new("official", "worker_c100", 1000, (1, 100, 0), 0.04)
            .redis_cpu(0.03);
        let limit = WorkerMeasurement::new("redis-lua", "redis_limit", 1000, (1, 1, 0), 0.01);
        let table = markdown_table(&[ours, node, official, limit]);
        assert!(
            table.contains(
                "| worker_c100 | 50000 | 20000 | 25000 | 2.50× | 2.00× | 0.50 | 10.0 / – / 30.0 |"
            ),
            "{table}"
        );
        assert!(table.contains("100000 jobs/s"), "{table}");
    }

    #[test]
    fn efficiency_uses_workers_concurrency_and_job_time() {
        let m = WorkerMeasurement::new("rust", "w", 1000, (10, 500, 10), 1.0);
        // Theoretical 500 000 jobs/s.
        assert!((m.efficiency.unwrap_or_default() - 0.002).abs() < 1e-9);
    }
}
