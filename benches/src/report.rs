//! Benchmark results: one JSON line per scenario while running, a markdown table at the end.

use serde::Serialize;

/// What one scenario measured.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Measurement {
    /// Scenario name, the same for every implementation (`add`, `add_bulk_50`, ...).
    pub(crate) scenario: String,
    /// `rust`, `node` or `official`.
    pub(crate) implementation: &'static str,
    /// Jobs added.
    pub(crate) jobs: u64,
    /// Wall-clock seconds from the first add to the last reply.
    pub(crate) seconds: f64,
    /// `jobs / seconds`.
    pub(crate) jobs_per_sec: f64,
    /// Redis server CPU (user + system) per job, in microseconds.
    pub(crate) redis_cpu_us_per_job: f64,
    /// Client CPU (user + system) in milliseconds, when known.
    pub(crate) client_cpu_ms: Option<f64>,
    /// Median time of one `add` call in ms (one-by-one and concurrent scenarios only).
    pub(crate) add_p50_ms: Option<f64>,
    /// 99th percentile time of one `add` call in ms (same scenarios).
    pub(crate) add_p99_ms: Option<f64>,
}

/// Prints any measurement as one JSON line on stdout.
pub(crate) fn print_json_line(measurement: &impl Serialize) {
    match serde_json::to_string(measurement) {
        Ok(line) => println!("{line}"),
        Err(error) => eprintln!("could not serialise a measurement: {error}"),
    }
}

/// The `q`-quantile (0..=1) of `samples`, sorted in place; `None` when empty.
pub(crate) fn quantile(samples: &mut [f64], q: f64) -> Option<f64> {
    if samples.is_empty() {
        return None;
    }
    samples.sort_by(f64::total_cmp);
    let rank = ((samples.len() - 1) as f64 * q).round() as usize;
    samples.get(rank).copied()
}

impl Measurement {
    /// Prints the measurement as one JSON line on stdout.
    pub(crate) fn print_json_line(&self) {
        print_json_line(self);
    }
}

/// A markdown table with one row per scenario: ours, Node's and the official port's jobs/s, our
/// ratio to each, Redis µs/job and the `add` call percentiles of all three.
pub(crate) fn markdown_table(results: &[Measurement]) -> String {
    let mut scenarios: Vec<&str> = Vec::new();
    for m in results {
        if !scenarios.contains(&m.scenario.as_str()) {
            scenarios.push(&m.scenario);
        }
    }
    let find = |scenario: &str, implementation: &str| {
        results
            .iter()
            .find(|m| m.scenario == scenario && m.implementation == implementation)
    };
    let mut out = String::from(
        "| scenario | ours jobs/s | Node jobs/s | official jobs/s | ours / Node | ours / official | Redis µs/job ours / Node / official | add p50/p99 ms ours | Node | official |\n\
         |---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n",
    );
    let rate =
        |m: Option<&Measurement>| m.map_or("–".to_string(), |m| format!("{:.0}", m.jobs_per_sec));
    let cpu = |m: Option<&Measurement>| {
        m.map_or("–".to_string(), |m| {
            format!("{:.1}", m.redis_cpu_us_per_job)
        })
    };
    let latency = |m: Option<&Measurement>| match m.and_then(|m| m.add_p50_ms.zip(m.add_p99_ms)) {
        Some((p50, p99)) => format!("{p50:.2} / {p99:.2}"),
        None => "–".to_string(),
    };
    let ratio = |o: Option<&Measurement>, other: Option<&Measurement>| match (o, other) {
        (Some(o), Some(n)) if n.jobs_per_sec > 0.0 => {
            format!("{:.2}×", o.jobs_per_sec / n.jobs_per_sec)
        }
        _ => "–".to_string(),
    };
    for scenario in scenarios {
        let ours = find(scenario, "rust");
        let node = find(scenario, "node");
        let official = find(scenario, "official");
        out.push_str(&format!(
            "| {scenario} | {} | {} | {} | {} | {} | {} / {} / {} | {} | {} | {} |\n",
            rate(ours),
            rate(node),
            rate(official),
            ratio(ours, node),
            ratio(ours, official),
            cpu(ours),
            cpu(node),
            cpu(official),
            latency(ours),
            latency(node),
            latency(official),
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(scenario: &str, implementation: &'static str, rate: f64) -> Measurement {
        Measurement {
            scenario: scenario.into(),
            implementation,
            jobs: 100,
            seconds: 100.0 / rate,
            jobs_per_sec: rate,
            redis_cpu_us_per_job: 10.0,
            client_cpu_ms: None,
            add_p50_ms: (implementation == "rust").then_some(0.5),
            add_p99_ms: (implementation == "rust").then_some(2.0),
        }
    }

    #[test]
    fn table_pairs_ours_with_node_and_official() {
        let table = markdown_table(&[
            m("add", "rust", 2000.0),
            m("add", "node", 1000.0),
            m("add", "official", 500.0),
            m("add_bulk_50", "rust", 5000.0),
        ]);
        assert!(
            table.contains(
                "| add | 2000 | 1000 | 500 | 2.00× | 4.00× | 10.0 / 10.0 / 10.0 | 0.50 / 2.00 | – | – |"
            ),
            "{table}"
        );
        assert!(
            table.contains(
                "| add_bulk_50 | 5000 | – | – | – | – | 10.0 / – / – | 0.50 / 2.00 | – | – |"
            ),
            "{table}"
        );
    }

    #[test]
    fn quantiles_pick_the_nearest_rank() {
        let mut samples = vec![5.0, 1.0, 3.0, 2.0, 4.0];
        assert_eq!(quantile(&mut samples, 0.5), Some(3.0));
        assert_eq!(quantile(&mut samples, 0.99), Some(5.0));
        assert_eq!(quantile(&mut [], 0.5), None);
    }
}
