//! Results of the `postgres` group: one JSON line per scenario while running, then the
//! "PostgreSQL" section of `docs/benchmarks.md` (commit floor, ours next to Node with the
//! ratios, latency percentiles), which replaces the previous one in the file.

use std::fmt::Write as _;

use serde::Serialize;

use crate::pg_server::{Delta, FloorMeasurement};

/// What one PostgreSQL scenario measured for one implementation.
#[derive(Debug, Clone, Default, Serialize)]
pub(crate) struct PgMeasurement {
    /// `rust` or `node`.
    #[serde(rename = "impl")]
    pub(crate) implementation: &'static str,
    /// Scenario name, the same for both (`add`, `worker_1x50`, `latency_200_per_s`, …).
    pub(crate) scenario: String,
    /// Jobs added or processed.
    pub(crate) jobs: u64,
    /// Wall-clock seconds (first add to last reply; worker start to last completion).
    pub(crate) seconds: f64,
    /// `jobs / seconds`.
    pub(crate) jobs_per_s: f64,
    /// Committed transactions per job, server-wide for the database (read-only ones too).
    pub(crate) commits_per_job: Option<f64>,
    /// WAL fsyncs per job, server-wide.
    pub(crate) wal_syncs_per_job: Option<f64>,
    /// WAL bytes per job, server-wide.
    pub(crate) wal_bytes_per_job: Option<f64>,
    /// PostgreSQL CPU (every server process) per job, µs.
    pub(crate) server_cpu_us_per_job: Option<f64>,
    /// Client CPU seconds over the scenario.
    pub(crate) client_cpu_s: Option<f64>,
    /// Peak RSS of the client process, MB (worker and latency scenarios).
    pub(crate) rss_mb: Option<f64>,
    /// Median `add` call, ms (one-by-one and concurrent adds).
    pub(crate) add_p50_ms: Option<f64>,
    /// 99th percentile `add` call, ms.
    pub(crate) add_p99_ms: Option<f64>,
    /// add → processor started: p50, p99, p99.9 in ms (latency scenarios).
    pub(crate) active_ms: [Option<f64>; 3],
    /// add → completed (the finish committed): p50, p99, p99.9 in ms.
    pub(crate) completed_ms: [Option<f64>; 3],
    /// Jobs our worker completed that Node read back as completed with `{ok: true}` / checked.
    pub(crate) compat_checked: Option<String>,
    /// The commit-floor loop bounding the scenario (`insert_notify ×1`, …), measured right
    /// before this side's scenario.
    pub(crate) floor_loop: Option<String>,
    /// Its commits/s.
    pub(crate) floor_commits_per_s: Option<f64>,
}

impl PgMeasurement {
    /// `jobs` in `seconds`, rate filled in.
    pub(crate) fn new(
        implementation: &'static str,
        scenario: impl Into<String>,
        jobs: u64,
        seconds: f64,
    ) -> Self {
        Self {
            implementation,
            scenario: scenario.into(),
            jobs,
            seconds,
            jobs_per_s: if seconds > 0.0 {
                jobs as f64 / seconds
            } else {
                0.0
            },
            ..Self::default()
        }
    }

    /// The server's work over the scenario, per job.
    pub(crate) fn server(mut self, delta: &Delta) -> Self {
        let jobs = self.jobs.max(1) as f64;
        self.commits_per_job = Some(delta.commits as f64 / jobs);
        self.wal_syncs_per_job = delta.wal_syncs.map(|n| n as f64 / jobs);
        self.wal_bytes_per_job = delta.wal_bytes.map(|b| b / jobs);
        self.server_cpu_us_per_job = delta.cpu_s.map(|s| s * 1e6 / jobs);
        self
    }

    /// The floor measured right before the scenario.
    pub(crate) fn floor(mut self, floor: Option<&FloorMeasurement>) -> Self {
        self.floor_loop = floor.map(FloorMeasurement::label);
        self.floor_commits_per_s = floor.map(|f| f.commits_per_s);
        self
    }

    /// jobs/s over the floor's commits/s.
    fn of_floor(&self) -> Option<f64> {
        self.floor_commits_per_s
            .filter(|f| *f > 0.0)
            .map(|f| self.jobs_per_s / f)
    }

    /// Prints the measurement as one JSON line on stdout.
    pub(crate) fn print_json_line(&self) {
        crate::report::print_json_line(self);
    }
}

fn num(value: Option<f64>, decimals: usize) -> String {
    value.map_or("–".to_string(), |v| format!("{v:.decimals$}"))
}

/// The commit-floor loop a scenario is bounded by: `(loop, sessions)`. An add is one commit
/// that always notifies (`bullmq_jobs`), so adds are bounded by `insert_notify`; a worker's
/// finish (fused with the next claim) notifies only when no other commit of the queue is
/// notifying at that moment (Node's SQL takes a per-queue try-lock around `pg_notify`), so
/// concurrent finishes are bounded by plain `insert`. 100 adds in flight and 50 slots share a
/// pool of 10 connections (ours and Node's `pg.Pool` default). Bulk adds commit once per batch.
pub(crate) fn floor_of(scenario: &str) -> Option<(&'static str, usize)> {
    match scenario {
        "add" => Some(("insert_notify", 1)),
        s if s.starts_with("add_concurrent") => Some(("insert_notify", 10)),
        "worker_1x1" => Some(("insert", 1)),
        "worker_1x50" => Some(("insert", 10)),
        _ => None,
    }
}

fn find_floor<'a>(
    floors: &'a [FloorMeasurement],
    (name, clients): (&str, usize),
) -> Option<&'a FloorMeasurement> {
    floors
        .iter()
        .find(|f| f.loop_name == name && f.clients == clients)
}

/// The commit-floor table: each loop measured before and after the scenarios.
pub(crate) fn floor_table(before: &[FloorMeasurement], after: &[FloorMeasurement]) -> String {
    let mut out = String::from(
        "| loop | sessions | commits/s before | commits/s after | PG CPU µs/commit | WAL fsyncs/commit |\n\
         |---|---:|---:|---:|---:|---:|\n",
    );
    for f in before {
        let later = find_floor(after, (f.loop_name, f.clients));
        let _ = writeln!(
            out,
            "| `{}` | {} | {:.0} | {} | {} | {} |",
            f.loop_name,
            f.clients,
            f.commits_per_s,
            num(later.map(|l| l.commits_per_s), 0),
            num(f.server_cpu_us_per_commit, 0),
            num(f.wal_syncs_per_commit, 2),
        );
    }
    out
}

fn pair(
    ours: Option<&PgMeasurement>,
    node: Option<&PgMeasurement>,
    field: fn(&PgMeasurement) -> Option<f64>,
    decimals: usize,
) -> String {
    format!(
        "{} / {}",
        num(ours.and_then(field), decimals),
        num(node.and_then(field), decimals)
    )
}

fn ratio(ours: Option<&PgMeasurement>, node: Option<&PgMeasurement>) -> Option<f64> {
    match (ours, node) {
        (Some(o), Some(n)) if n.jobs_per_s > 0.0 => Some(o.jobs_per_s / n.jobs_per_s),
        _ => None,
    }
}

fn scenarios(results: &[PgMeasurement], latency: bool) -> Vec<&str> {
    let mut out: Vec<&str> = Vec::new();
    for m in results {
        if m.scenario.starts_with("latency") == latency && !out.contains(&m.scenario.as_str()) {
            out.push(&m.scenario);
        }
    }
    out
}

fn find<'a>(results: &'a [PgMeasurement], scenario: &str, imp: &str) -> Option<&'a PgMeasurement> {
    results
        .iter()
        .find(|m| m.scenario == scenario && m.implementation == imp)
}

/// Throughput scenarios: ours, Node, the ratio, the commit floor that bounds the scenario
/// (measured right before each side ran) and each side's fraction of it, and the server's work
/// per job.
pub(crate) fn throughput_table(results: &[PgMeasurement]) -> String {
    let mut out = String::from(
        "| scenario | ours jobs/s | Node jobs/s | ours / Node | commit floor commits/s before ours / Node (loop) | ours / floor | Node / floor | commits/job ours / Node | WAL fsyncs/job ours / Node | PG CPU µs/job ours / Node | client CPU s ours / Node | add p50 / p99 ms ours | same, Node | compat |\n\
         |---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|\n",
    );
    for scenario in scenarios(results, false) {
        let ours = find(results, scenario, "rust");
        let node = find(results, scenario, "node");
        let of_floor = |m: Option<&PgMeasurement>| num(m.and_then(PgMeasurement::of_floor), 2);
        let floor = match ours.or(node).and_then(|m| m.floor_loop.clone()) {
            Some(label) => format!(
                "{} (`{label}`)",
                pair(ours, node, |m| m.floor_commits_per_s, 0)
            ),
            None => "–".to_string(),
        };
        let add = |m: Option<&PgMeasurement>| match m.and_then(|m| m.add_p50_ms.zip(m.add_p99_ms)) {
            Some((p50, p99)) => format!("{p50:.1} / {p99:.1}"),
            None => "–".to_string(),
        };
        let _ = writeln!(
            out,
            "| {scenario} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
            num(ours.map(|m| m.jobs_per_s), 0),
            num(node.map(|m| m.jobs_per_s), 0),
            ratio(ours, node).map_or("–".to_string(), |r| format!("{r:.2}×")),
            floor,
            of_floor(ours),
            of_floor(node),
            pair(ours, node, |m| m.commits_per_job, 2),
            pair(ours, node, |m| m.wal_syncs_per_job, 2),
            pair(ours, node, |m| m.server_cpu_us_per_job, 0),
            pair(ours, node, |m| m.client_cpu_s, 2),
            add(ours),
            add(node),
            ours.and_then(|m| m.compat_checked.clone())
                .unwrap_or_else(|| "–".to_string()),
        );
    }
    out
}

/// Latency scenarios: add → completed and add → active percentiles of both sides.
pub(crate) fn latency_table(results: &[PgMeasurement]) -> String {
    let mut out = String::from(
        "| scenario | jobs ours / Node | add→completed p50 / p99 / p99.9 ms ours | same, Node | add→active p50 / p99 / p99.9 ms ours | same, Node | commits/job ours / Node | PG CPU µs/job ours / Node | client CPU s ours / Node | compat |\n\
         |---|---:|---:|---:|---:|---:|---:|---:|---:|---|\n",
    );
    let three = |m: Option<&PgMeasurement>, f: fn(&PgMeasurement) -> [Option<f64>; 3]| match m {
        Some(m) => f(m).map(|v| num(v, 1)).join(" / "),
        None => "–".to_string(),
    };
    for scenario in scenarios(results, true) {
        let ours = find(results, scenario, "rust");
        let node = find(results, scenario, "node");
        let _ = writeln!(
            out,
            "| {scenario} | {} / {} | {} | {} | {} | {} | {} | {} | {} | {} |",
            ours.map_or("–".to_string(), |m| m.jobs.to_string()),
            node.map_or("–".to_string(), |m| m.jobs.to_string()),
            three(ours, |m| m.completed_ms),
            three(node, |m| m.completed_ms),
            three(ours, |m| m.active_ms),
            three(node, |m| m.active_ms),
            pair(ours, node, |m| m.commits_per_job, 2),
            pair(ours, node, |m| m.server_cpu_us_per_job, 0),
            pair(ours, node, |m| m.client_cpu_s, 2),
            ours.and_then(|m| m.compat_checked.clone())
                .unwrap_or_else(|| "–".to_string()),
        );
    }
    out
}

/// The best `add_bulk` rate of one side and its batch size.
fn best_bulk(results: &[PgMeasurement], imp: &str) -> Option<(f64, String)> {
    results
        .iter()
        .filter(|m| m.implementation == imp && m.scenario.starts_with("add_bulk_"))
        .map(|m| {
            (
                m.jobs_per_s,
                m.scenario.trim_start_matches("add_bulk_").to_string(),
            )
        })
        .reduce(|a, b| if b.0 > a.0 { b } else { a })
}

/// One sentence on the best bulk rates, when both sides ran.
pub(crate) fn best_bulk_line(results: &[PgMeasurement]) -> Option<String> {
    let (ours, ours_batch) = best_bulk(results, "rust")?;
    let (node, node_batch) = best_bulk(results, "node")?;
    Some(format!(
        "Best `add_bulk` of each: ours {ours:.0} jobs/s (batches of {ours_batch}), Node {node:.0} \
         jobs/s (batches of {node_batch}): {:.2}×.",
        ours / node.max(1e-9)
    ))
}

/// Every place this run found ours behind Node: lower jobs/s, or a higher latency percentile.
pub(crate) fn slower_than_node(results: &[PgMeasurement]) -> Vec<String> {
    let mut out = Vec::new();
    for scenario in scenarios(results, false) {
        let (ours, node) = (
            find(results, scenario, "rust"),
            find(results, scenario, "node"),
        );
        if let (Some(r), Some(o), Some(n)) = (ratio(ours, node), ours, node) {
            if r < 1.0 {
                out.push(format!(
                    "{scenario}: {:.0} vs {:.0} jobs/s ({r:.2}×)",
                    o.jobs_per_s, n.jobs_per_s
                ));
            }
        }
    }
    for scenario in scenarios(results, true) {
        let (Some(o), Some(n)) = (
            find(results, scenario, "rust"),
            find(results, scenario, "node"),
        ) else {
            continue;
        };
        for (i, label) in ["p50", "p99", "p99.9"].iter().enumerate() {
            if let (Some(a), Some(b)) = (o.completed_ms[i], n.completed_ms[i]) {
                if a > b {
                    out.push(format!(
                        "{scenario} add→completed {label}: {a:.1} vs {b:.1} ms"
                    ));
                }
            }
        }
    }
    out
}

/// Replaces the `heading` section of a markdown document (from its heading line to the next
/// heading of the same level, or the end) with `section`, or appends `section` when the document
/// has none.
pub(crate) fn replace_section(doc: &str, heading: &str, section: &str) -> String {
    let level = heading.split(' ').next().unwrap_or("##");
    let lines: Vec<&str> = doc.lines().collect();
    let headings = heading_lines(&lines);
    let Some(start) = headings
        .iter()
        .copied()
        .find(|&i| lines[i].trim_end() == heading)
    else {
        let mut out = doc.trim_end().to_string();
        out.push_str("\n\n");
        out.push_str(section.trim_end());
        out.push('\n');
        return out;
    };
    // The next heading of the same level or above.
    let end = headings
        .iter()
        .copied()
        .find(|&i| {
            i > start
                && lines[i]
                    .split(' ')
                    .next()
                    .is_some_and(|h| h.len() <= level.len())
        })
        .unwrap_or(lines.len());
    let mut out = lines[..start].join("\n");
    if !out.is_empty() {
        out.push('\n');
    }
    out.push_str(section.trim_end());
    out.push('\n');
    if end < lines.len() {
        out.push('\n');
        out.push_str(&lines[end..].join("\n"));
        out.push('\n');
    }
    out
}

/// Indices of the markdown heading lines (`#`…), fenced code blocks skipped.
fn heading_lines(lines: &[&str]) -> Vec<usize> {
    let mut fenced = false;
    let mut out = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        if line.starts_with("```") {
            fenced = !fenced;
        } else if !fenced && line.starts_with('#') {
            let hashes = line.chars().take_while(|c| *c == '#').count();
            if line[hashes..].starts_with(' ') {
                out.push(i);
            }
        }
    }
    out
}

/// The sections of a markdown document whose `## ` heading is not in `generated`, in order:
/// what `all` keeps when it rewrites the file (the PostgreSQL group's section, hand-written
/// notes).
pub(crate) fn other_sections(doc: &str, generated: &[&str]) -> Vec<String> {
    let lines: Vec<&str> = doc.lines().collect();
    let headings = heading_lines(&lines);
    let mut out = Vec::new();
    for (n, &i) in headings.iter().enumerate() {
        let Some(title) = lines[i].strip_prefix("## ") else {
            continue;
        };
        if generated.contains(&title.trim_end()) {
            continue;
        }
        let end = headings[n + 1..]
            .iter()
            .copied()
            .find(|&j| lines[j].starts_with("# ") || lines[j].starts_with("## "))
            .unwrap_or(lines.len());
        out.push(lines[i..end].join("\n").trim_end().to_string() + "\n");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(imp: &'static str, scenario: &str, rate: f64) -> PgMeasurement {
        PgMeasurement::new(imp, scenario, 1000, 1000.0 / rate)
    }

    fn floor(loop_name: &'static str, clients: usize, rate: f64) -> FloorMeasurement {
        FloorMeasurement {
            loop_name,
            clients,
            commits: 100,
            seconds: 100.0 / rate,
            commits_per_s: rate,
            server_cpu_us_per_commit: Some(50.0),
            wal_syncs_per_commit: Some(1.0),
            notifications_heard: None,
        }
    }

    #[test]
    fn throughput_rows_pair_ours_with_node_and_the_floor() {
        let mut ours = m("rust", "add", 200.0).floor(Some(&floor("insert_notify", 1, 400.0)));
        ours.add_p50_ms = Some(4.0);
        ours.add_p99_ms = Some(9.0);
        let results = [
            ours,
            m("node", "add", 250.0).floor(Some(&floor("insert_notify", 1, 250.0))),
            m("rust", "add_bulk_50", 9000.0).floor(None),
        ];
        let table = throughput_table(&results);
        assert!(
            table.contains(
                "| add | 200 | 250 | 0.80× | 400 / 250 (`insert_notify ×1`) | 0.50 | 1.00 |"
            ),
            "{table}"
        );
        assert!(table.contains("| 4.0 / 9.0 | – |"), "{table}");
        assert!(
            table.contains("| add_bulk_50 | 9000 | – | – | – | – | – |"),
            "{table}"
        );
        assert_eq!(
            slower_than_node(&results),
            vec!["add: 200 vs 250 jobs/s (0.80×)".to_string()]
        );
    }

    #[test]
    fn latency_rows_and_slower_percentiles() {
        let mut ours = m("rust", "latency_200_per_s", 200.0);
        ours.completed_ms = [Some(5.0), Some(20.0), Some(40.0)];
        let mut node = m("node", "latency_200_per_s", 200.0);
        node.completed_ms = [Some(6.0), Some(15.0), Some(40.0)];
        let results = [ours, node];
        let table = latency_table(&results);
        assert!(
            table.contains(
                "| latency_200_per_s | 1000 / 1000 | 5.0 / 20.0 / 40.0 | 6.0 / 15.0 / 40.0 |"
            ),
            "{table}"
        );
        assert_eq!(
            slower_than_node(&results),
            vec!["latency_200_per_s add→completed p99: 20.0 vs 15.0 ms".to_string()]
        );
    }

    #[test]
    fn best_bulk_picks_each_sides_best_batch() {
        let results = [
            m("rust", "add_bulk_50", 8000.0),
            m("rust", "add_bulk_1000", 12000.0),
            m("node", "add_bulk_50", 6000.0),
            m("node", "add_bulk_1000", 5000.0),
        ];
        let line = best_bulk_line(&results).unwrap_or_default();
        assert!(
            line.contains("ours 12000 jobs/s (batches of 1000)"),
            "{line}"
        );
        assert!(
            line.contains("Node 6000 jobs/s (batches of 50): 2.00×"),
            "{line}"
        );
    }

    #[test]
    fn sections_are_replaced_in_place_or_appended() {
        let doc = "# Benchmarks\n\nintro\n\n## Producer\n\nold\n\n## PostgreSQL\n\nstale\n### sub\nx\n\n## Flow\n\nflow\n";
        let new = replace_section(doc, "## PostgreSQL", "## PostgreSQL\n\nfresh\n");
        assert_eq!(
            new,
            "# Benchmarks\n\nintro\n\n## Producer\n\nold\n\n## PostgreSQL\n\nfresh\n\n## Flow\n\nflow\n"
        );
        let appended = replace_section(
            "# B\n\n## Producer\n\nx\n",
            "## PostgreSQL",
            "## PostgreSQL\n\ny",
        );
        assert_eq!(appended, "# B\n\n## Producer\n\nx\n\n## PostgreSQL\n\ny\n");
        let at_end = replace_section(&new, "## Flow", "## Flow\n\nnew flow");
        assert!(at_end.ends_with("## Flow\n\nnew flow\n"), "{at_end}");
    }

    #[test]
    fn other_sections_keep_what_all_does_not_generate() {
        let doc = "# Benchmarks\n\nintro\n\n## Targets\n\nt\n\n## PostgreSQL\n\npg\n### sub\n\n## Producer\n\np\n\n## Flow\n\n```sh\n# a comment\n## not a heading\n```\nflow\n";
        assert_eq!(
            other_sections(doc, &["Targets", "Producer"]),
            vec![
                "## PostgreSQL\n\npg\n### sub\n".to_string(),
                "## Flow\n\n```sh\n# a comment\n## not a heading\n```\nflow\n".to_string()
            ]
        );
    }
}
