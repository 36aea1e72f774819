//! `postgres`: ours (`bullmq-postgres` under the runtime's Queue and Worker) next to Node BullMQ
//! 6.7.0's PostgreSQL backend on the same server in one run, with the server's commit-rate
//! floor measured in the same run as the limit.
//!
//! - the commit floor: `pgbench`-style loops (1 and 10 sessions committing a one-row `INSERT`,
//!   with and without `pg_notify`), before and after the scenarios;
//! - adds: one at a time, 100 in flight, `add_bulk` in batches of 50 / 200 / 1000;
//! - workers: a pre-filled queue drained by one worker at concurrency 1 and 50 (no-op jobs);
//! - latency: add → active and add → completed at fixed rates (200 jobs/s by default).
//!
//! Every scenario of each side runs on a fresh schema made by Node's migrator and dropped
//! afterwards. Around each one the server's counters (commits, WAL fsyncs, CPU of every server
//! process) are read once every idle session has published its statistics. Node runs
//! `benches/node/pg_producer.js` / `pg_worker.js`; after our worker scenarios Node reads back a
//! sample of the jobs we completed.

use std::future::Future;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, ensure, Context, Result};
use bullmq_postgres::{PgConfig, PostgresBackend};
use ractor_bullmq::worker::{Job, JobContext, Worker, WorkerArgs, WorkerCallbacks};
use ractor_bullmq::{Queue, QueueOptions};
use serde_json::{json, Value};
use tokio::sync::Notify;

use crate::latency::Clocks;
use crate::pg_report::{self, PgMeasurement};
use crate::pg_server::{FloorMeasurement, Server};
use crate::producer::{self, Scenario};
use crate::report::{print_json_line, quantile};
use crate::worker::{fill, peak, rss_mb, worker_options};
use crate::{node, process_cpu};

/// The queue every scenario uses (each has a schema of its own).
const QUEUE: &str = "bench";

/// The heading of the section this group writes into `docs/benchmarks.md`.
pub(crate) const HEADING: &str = "## PostgreSQL";

/// What the group runs.
#[derive(Debug, Clone)]
pub(crate) struct PgBenchConfig {
    /// The server.
    pub(crate) url: String,
    /// Whether Node's side runs.
    pub(crate) node: bool,
    /// Factor on every job count.
    pub(crate) scale: f64,
    /// Jobs/s of the latency scenarios.
    pub(crate) rates: Vec<u64>,
    /// Seconds each latency scenario adds for.
    pub(crate) latency_seconds: u64,
    /// Worker concurrency in the latency scenarios.
    pub(crate) latency_concurrency: usize,
    /// Seconds of each commit-floor loop before and after the scenarios.
    pub(crate) floor_seconds: f64,
    /// Seconds of the floor loop measured right before each side's scenario.
    pub(crate) scenario_floor_seconds: f64,
    /// The document whose PostgreSQL section is replaced (`None`: print only).
    pub(crate) output: Option<PathBuf>,
    /// The command line, for the report.
    pub(crate) command: String,
}

/// The commit-floor loops: (sessions, with `pg_notify`).
const FLOORS: [(usize, bool); 4] = [(1, false), (1, true), (10, false), (10, true)];

fn scaled(jobs: u64, scale: f64) -> u64 {
    ((jobs as f64 * scale).round() as u64).max(50)
}

/// Runs the group; returns the markdown section (also written into `config.output`).
pub(crate) async fn run(config: &PgBenchConfig) -> Result<String> {
    let started = Instant::now();
    let load_start = loadavg();
    let server = Server::open(&config.url).await?;
    let description = server.describe().await?;
    let floor_time = Duration::from_secs_f64(config.floor_seconds.max(0.5));
    let floors_before = floors(&server, floor_time).await?;

    let mut results: Vec<PgMeasurement> = Vec::new();
    let mut push = |m: PgMeasurement| {
        m.print_json_line();
        results.push(m);
    };
    let scenario_floor = Duration::from_secs_f64(config.scenario_floor_seconds.max(0.2));
    // The disk's flush time drifts over minutes on a shared machine, so each side's scenario
    // is set against the floor measured right before it.
    let floor_now = |scenario: String| {
        let server = &server;
        async move {
            match pg_report::floor_of(&scenario) {
                Some((name, clients)) => server
                    .commit_floor(clients, name == "insert_notify", scenario_floor, false)
                    .await
                    .map(Some),
                None => Ok(None),
            }
        }
    };
    let adds = [
        (Scenario::Sequential, 1_500),
        (Scenario::Concurrent(100), 4_000),
        (Scenario::Bulk(50), 10_000),
        (Scenario::Bulk(200), 20_000),
        (Scenario::Bulk(1000), 20_000),
    ];
    for (scenario, jobs) in adds {
        let jobs = scaled(jobs, config.scale);
        let label = scenario.name();
        let floor = floor_now(label.clone()).await?;
        push(
            on_fresh_schema(&server, &format!("{label}_rust"), |schema| {
                ours_add(&server, schema, scenario, jobs)
            })
            .await?
            .floor(floor.as_ref()),
        );
        if config.node {
            let floor = floor_now(label.clone()).await?;
            push(
                on_fresh_schema(&server, &format!("{label}_node"), |schema| {
                    node_add(&server, schema, scenario, jobs)
                })
                .await?
                .floor(floor.as_ref()),
            );
        }
    }
    for (concurrency, jobs) in [(1, 1_500), (50, 6_000)] {
        let jobs = scaled(jobs, config.scale);
        let label = format!("worker_1x{concurrency}");
        let floor = floor_now(label.clone()).await?;
        push(
            on_fresh_schema(&server, &format!("{label}_rust"), |schema| {
                ours_worker(&server, schema, concurrency, jobs, config.node)
            })
            .await?
            .floor(floor.as_ref()),
        );
        if config.node {
            let floor = floor_now(label.clone()).await?;
            push(
                on_fresh_schema(&server, &format!("{label}_node"), |schema| {
                    node_worker(&server, schema, concurrency, jobs)
                })
                .await?
                .floor(floor.as_ref()),
            );
        }
    }
    for &rate in &config.rates {
        let shape = (rate, config.latency_seconds, config.latency_concurrency);
        push(
            on_fresh_schema(&server, &format!("latency_{rate}_rust"), |schema| {
                ours_latency(&server, schema, shape, config.node)
            })
            .await?,
        );
        if config.node {
            push(
                on_fresh_schema(&server, &format!("latency_{rate}_node"), |schema| {
                    node_latency(&server, schema, shape)
                })
                .await?,
            );
        }
    }
    let floors_after = floors(&server, floor_time).await?;

    let section = render(
        config,
        &description,
        (&load_start, &loadavg()),
        started.elapsed().as_secs_f64(),
        (&floors_before, &floors_after),
        &results,
    );
    if let Some(path) = &config.output {
        let doc = std::fs::read_to_string(path).unwrap_or_else(|_| "# Benchmarks\n".to_string());
        std::fs::write(path, pg_report::replace_section(&doc, HEADING, &section))
            .with_context(|| format!("writing {}", path.display()))?;
        eprintln!(
            "wrote the PostgreSQL section of {} ({:.0} s)",
            path.display(),
            started.elapsed().as_secs_f64()
        );
    }
    Ok(section)
}

/// Every commit-floor loop once.
async fn floors(server: &Server, duration: Duration) -> Result<Vec<FloorMeasurement>> {
    let mut out = Vec::new();
    for (clients, notify) in FLOORS {
        let m = server.commit_floor(clients, notify, duration, true).await?;
        print_json_line(&m);
        out.push(m);
    }
    Ok(out)
}

/// Runs `scenario` on a fresh Node-migrated schema and drops the schema afterwards, also when
/// the scenario failed.
async fn on_fresh_schema<F, Fut>(server: &Server, label: &str, scenario: F) -> Result<PgMeasurement>
where
    F: FnOnce(String) -> Fut,
    Fut: Future<Output = Result<PgMeasurement>>,
{
    let schema = server.fresh_schema(label).await?;
    let result = scenario(schema.clone()).await;
    let dropped = server.drop_schema(&schema).await;
    let m = result.with_context(|| format!("scenario on schema {schema}"))?;
    dropped?;
    Ok(m)
}

async fn open_backend(server: &Server, schema: &str) -> Result<Arc<PostgresBackend>> {
    let config = PgConfig::from_url(&server.url)?.with_schema(schema)?;
    Ok(Arc::new(PostgresBackend::open(config).await?))
}

fn client_cpu_since(before: Option<f64>) -> Option<f64> {
    process_cpu::cpu_seconds()
        .zip(before)
        .map(|(after, before)| after - before)
}

/// Node's JSON arguments with the server and schema.
fn with_pg(mut args: Value, server: &Server, schema: &str) -> Value {
    args["pgUrl"] = json!(server.url);
    args["schema"] = json!(schema);
    args
}

async fn ours_add(
    server: &Server,
    schema: String,
    scenario: Scenario,
    jobs: u64,
) -> Result<PgMeasurement> {
    let backend = open_backend(server, &schema).await?;
    let queue = Queue::with_backend(QUEUE, backend.as_ref(), QueueOptions::default()).await?;
    let before = server.settled_counters().await?;
    let client_before = process_cpu::cpu_seconds();
    let started = Instant::now();
    let mut latencies = producer::add_jobs(&queue, scenario, jobs).await?;
    let seconds = started.elapsed().as_secs_f64();
    let client_cpu_s = client_cpu_since(client_before);
    queue.close().await?;
    backend.close();
    let delta = server.settled_counters().await?.since(&before);
    let waiting = server.count(&schema, QUEUE, "waiting").await?;
    ensure!(
        waiting == jobs,
        "{}: expected {jobs} waiting jobs, found {waiting}",
        scenario.name()
    );
    let mut m = PgMeasurement::new("rust", scenario.name(), jobs, seconds).server(&delta);
    m.client_cpu_s = client_cpu_s;
    m.add_p50_ms = quantile(&mut latencies, 0.5);
    m.add_p99_ms = quantile(&mut latencies, 0.99);
    Ok(m)
}

async fn node_add(
    server: &Server,
    schema: String,
    scenario: Scenario,
    jobs: u64,
) -> Result<PgMeasurement> {
    let args = with_pg(scenario.node_args(QUEUE, jobs), server, &schema);
    let before = server.settled_counters().await?;
    let out = node::run("pg_producer.js", &args, "").await?;
    let delta = server.settled_counters().await?.since(&before);
    let seconds = out["seconds"].as_f64().context("pg_producer.js: seconds")?;
    let waiting = server.count(&schema, QUEUE, "waiting").await?;
    ensure!(
        waiting == jobs,
        "node {}: expected {jobs} waiting jobs, found {waiting}",
        scenario.name()
    );
    let mut m = PgMeasurement::new("node", scenario.name(), jobs, seconds).server(&delta);
    m.client_cpu_s = out["clientCpuMs"].as_f64().map(|ms| ms / 1000.0);
    m.add_p50_ms = out["addP50Ms"].as_f64();
    m.add_p99_ms = out["addP99Ms"].as_f64();
    Ok(m)
}

/// A queue of `jobs` no-op jobs in `schema`, filled by our `add_bulk` (the same for both sides).
async fn filled(server: &Server, schema: &str, jobs: u64) -> Result<(Arc<PostgresBackend>, Queue)> {
    let backend = open_backend(server, schema).await?;
    let queue = Queue::with_backend(QUEUE, backend.as_ref(), QueueOptions::default()).await?;
    fill(&queue, jobs).await?;
    Ok((backend, queue))
}

async fn ours_worker(
    server: &Server,
    schema: String,
    concurrency: usize,
    jobs: u64,
    check_with_node: bool,
) -> Result<PgMeasurement> {
    let scenario = format!("worker_1x{concurrency}");
    let (backend, queue) = filled(server, &schema, jobs).await?;
    let done = Arc::new(AtomicU64::new(0));
    let all_done = Arc::new(Notify::new());
    let callbacks = {
        let (done, all_done) = (done.clone(), all_done.clone());
        WorkerCallbacks::new().on_completed(move |_job, _value| {
            if done.fetch_add(1, Ordering::Relaxed) + 1 == jobs {
                all_done.notify_one();
            }
        })
    };
    let processor = |_job: Job, _ctx: JobContext| async { Ok(json!({"ok": true})) };
    let before = server.settled_counters().await?;
    let client_before = process_cpu::cpu_seconds();
    let started = Instant::now();
    let args = WorkerArgs::open(
        backend.as_ref(),
        QUEUE,
        processor,
        worker_options(concurrency),
    )
    .await?
    .callbacks(callbacks);
    let worker = Worker::spawn(args).await?;
    let mut peak_rss = rss_mb();
    let deadline = Instant::now() + Duration::from_secs(600);
    loop {
        tokio::select! {
            () = all_done.notified() => break,
            () = tokio::time::sleep(Duration::from_millis(50)) => {
                peak_rss = peak(peak_rss, rss_mb());
                if done.load(Ordering::Relaxed) >= jobs { break; }
                ensure!(Instant::now() < deadline, "{scenario}: timed out at {} of {jobs} jobs",
                    done.load(Ordering::Relaxed));
            }
        }
    }
    let seconds = started.elapsed().as_secs_f64();
    let client_cpu_s = client_cpu_since(client_before);
    peak_rss = peak(peak_rss, rss_mb());
    worker.close().await?;
    let delta = server.settled_counters().await?.since(&before);
    let completed = server.count(&schema, QUEUE, "completed").await?;
    ensure!(
        completed == jobs,
        "{scenario}: {completed} of {jobs} jobs completed"
    );
    let mut m = PgMeasurement::new("rust", scenario, jobs, seconds).server(&delta);
    m.client_cpu_s = client_cpu_s;
    m.rss_mb = peak_rss;
    if check_with_node {
        m.compat_checked = Some(read_back_by_node(server, &schema).await?);
    }
    queue.close().await?;
    backend.close();
    Ok(m)
}

async fn node_worker(
    server: &Server,
    schema: String,
    concurrency: usize,
    jobs: u64,
) -> Result<PgMeasurement> {
    let scenario = format!("worker_1x{concurrency}");
    let (backend, queue) = filled(server, &schema, jobs).await?;
    queue.close().await?;
    backend.close();
    let args = with_pg(
        json!({"mode": "throughput", "queue": QUEUE, "jobs": jobs, "concurrency": concurrency}),
        server,
        &schema,
    );
    let before = server.settled_counters().await?;
    let out = node::run("pg_worker.js", &args, "").await?;
    let delta = server.settled_counters().await?.since(&before);
    let seconds = out["seconds"].as_f64().context("pg_worker.js: seconds")?;
    let completed = server.count(&schema, QUEUE, "completed").await?;
    ensure!(
        completed == jobs,
        "node {scenario}: {completed} of {jobs} jobs completed"
    );
    let mut m = PgMeasurement::new("node", scenario, jobs, seconds).server(&delta);
    m.client_cpu_s = out["clientCpuS"].as_f64();
    m.rss_mb = out["rssMb"].as_f64();
    Ok(m)
}

async fn ours_latency(
    server: &Server,
    schema: String,
    (rate, seconds, concurrency): (u64, u64, usize),
    check_with_node: bool,
) -> Result<PgMeasurement> {
    let total = rate * seconds;
    let backend = open_backend(server, &schema).await?;
    let queue = Queue::with_backend(QUEUE, backend.as_ref(), QueueOptions::default()).await?;
    let clocks = Clocks::new(total);
    let args = WorkerArgs::open(
        backend.as_ref(),
        QUEUE,
        clocks.processor(),
        worker_options(concurrency),
    )
    .await?
    .callbacks(clocks.callbacks());
    let worker = Worker::spawn(args).await?;
    // The settling wait also lets the worker reach its LISTEN wait before the first add.
    let before = server.settled_counters().await?;
    let client_before = process_cpu::cpu_seconds();
    let (elapsed, peak_rss) = clocks
        .pace_adds_and_wait(&queue, rate, total, Duration::from_secs(120))
        .await?;
    let client_cpu_s = client_cpu_since(client_before);
    worker.close().await?;
    let delta = server.settled_counters().await?.since(&before);
    let mut m =
        PgMeasurement::new("rust", format!("latency_{rate}_per_s"), total, elapsed).server(&delta);
    m.client_cpu_s = client_cpu_s;
    m.rss_mb = peak_rss;
    (m.active_ms, m.completed_ms) = clocks.percentiles();
    if check_with_node {
        m.compat_checked = Some(read_back_by_node(server, &schema).await?);
    }
    queue.close().await?;
    backend.close();
    Ok(m)
}

async fn node_latency(
    server: &Server,
    schema: String,
    (rate, seconds, concurrency): (u64, u64, usize),
) -> Result<PgMeasurement> {
    let args = with_pg(
        json!({"mode": "latency", "queue": QUEUE, "rate": rate, "seconds": seconds,
               "concurrency": concurrency}),
        server,
        &schema,
    );
    let before = server.settled_counters().await?;
    let out = node::run("pg_worker.js", &args, "").await?;
    let delta = server.settled_counters().await?.since(&before);
    let jobs = out["jobs"].as_u64().context("pg_worker.js: jobs")?;
    let elapsed = out["seconds"].as_f64().context("pg_worker.js: seconds")?;
    let mut m =
        PgMeasurement::new("node", format!("latency_{rate}_per_s"), jobs, elapsed).server(&delta);
    m.client_cpu_s = out["clientCpuS"].as_f64();
    m.rss_mb = out["rssMb"].as_f64();
    let three = |v: &Value| ["p50", "p99", "p999"].map(|k| v[k].as_f64());
    m.active_ms = three(&out["activeMs"]);
    m.completed_ms = three(&out["completedMs"]);
    Ok(m)
}

/// Node BullMQ (`integration-tests/node/read_jobs.js` on its PostgreSQL backend) reads back up
/// to 100 jobs our worker completed, spread over the run; each must be `completed` with our
/// return value and a `finishedOn`. Returns "ok/checked ✓".
async fn read_back_by_node(server: &Server, schema: &str) -> Result<String> {
    let ids = server.completed_sample(schema, QUEUE, 100).await?;
    ensure!(!ids.is_empty(), "no completed jobs to read back");
    let reply = node::run_oracle(
        "read_jobs.js",
        &json!({"backend": "postgres", "pgUrl": server.url, "schema": schema,
                "queue": QUEUE, "ids": ids}),
    )
    .await?;
    let jobs = reply["jobs"].as_array().context("read_jobs.js: jobs")?;
    let good = |j: &Value| {
        j["state"] == "completed"
            && j["returnvalue"] == json!({"ok": true})
            && j["finishedOn"].is_number()
    };
    let ok = jobs.iter().filter(|j| good(j)).count();
    if ok != ids.len() {
        let bad: Vec<&Value> = jobs.iter().filter(|j| !good(j)).take(3).collect();
        bail!(
            "Node BullMQ found {ok} of {} jobs completed with our return value: {bad:?}",
            ids.len()
        );
    }
    Ok(format!("{ok}/{} ✓", ids.len()))
}

fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .unwrap_or_default()
        .split_whitespace()
        .take(3)
        .collect::<Vec<_>>()
        .join(" ")
}

fn render(
    config: &PgBenchConfig,
    description: &str,
    (load_start, load_end): (&str, &str),
    elapsed: f64,
    (floors_before, floors_after): (&[FloorMeasurement], &[FloorMeasurement]),
    results: &[PgMeasurement],
) -> String {
    use std::fmt::Write as _;
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
    let host = url::Url::parse(&config.url)
        .ok()
        .and_then(|u| u.host_str().map(str::to_string))
        .unwrap_or_default();
    let mut out = String::new();
    let _ = writeln!(out, "{HEADING}\n");
    let _ = writeln!(
        out,
        "Generated by `{}` (took {elapsed:.0} s). Ours (`bullmq-postgres` under the runtime's \
         `Queue` and `Worker`) and Node BullMQ 6.7.0's PostgreSQL backend \
         (`createPostgresBackend`) ran against the same server in the same run, each scenario \
         of each side on a fresh schema made by Node's migrator and dropped afterwards; see \
         `benches/README.md` for what each scenario does. The official Rust port has no \
         PostgreSQL backend, so it has no side here.\n",
        config.command
    );
    let _ = writeln!(
        out,
        "Machine: {cpus} CPUs (`nproc`), {cpu_model}; {description} on {host}; load average at \
         the start {load_start}, at the end {load_end}.\n"
    );
    let _ = writeln!(out, "### Commit floor\n");
    let _ = writeln!(
        out,
        "What the server commits at most, measured in this run before and after the scenarios \
         ({} s a loop): `insert` = N sessions each committing a one-row `INSERT` \
         (autocommit), as fast as they can; `insert_notify` = the same statement also calls \
         `pg_notify` (one LISTEN session hears it), as every BullMQ add does. With `fsync` on, \
         a commit waits for its WAL flush; concurrent commits share a flush (group commit), \
         but a notifying commit holds PostgreSQL's global notify lock until it is flushed, \
         which serialises them. A finish notifies only when no other commit of its queue is \
         notifying (a per-queue try-lock in Node's SQL), so concurrent finishes can share \
         flushes.\n",
        config.floor_seconds
    );
    out.push_str(&pg_report::floor_table(floors_before, floors_after));
    let _ = writeln!(out, "\n### Adding and processing\n");
    let _ = writeln!(
        out,
        "`add` = one add at a time; `add_concurrent_100` = 100 in flight; `add_bulk_N` = \
         `add_bulk` / `addBulk` in batches of N; `worker_1xC` = a pre-filled queue drained by \
         one worker of C slots (no-op jobs, the clock stops at the last `completed`). \
         \"commit floor\" = the loop (sessions) that bounds the scenario, measured for {} s \
         right before each side's run (the disk's flush time drifts): an add is one notifying \
         commit, a finish (fused with the next claim) one commit, and both sides' pools have \
         10 connections; \"/ floor\" = jobs/s over that loop's commits/s. Commits, WAL fsyncs and \
         PG CPU are the server's deltas over the scenario (every server process; read-only \
         transactions count as commits; anything else on the server counts too), per job. \
         \"compat\" = jobs our worker completed that Node BullMQ read back as completed with \
         our return value.\n",
        config.scenario_floor_seconds
    );
    out.push_str(&pg_report::throughput_table(results));
    if let Some(line) = pg_report::best_bulk_line(results) {
        let _ = writeln!(out, "\n{line}");
    }
    let _ = writeln!(out, "\n### Latency at a fixed rate\n");
    let _ = writeln!(
        out,
        "One worker (concurrency {}) waits on an empty queue; a producer in the same process \
         adds at the rate for {} s (paced against the start, ids known before the add \
         returns); add → active (processor started) and add → completed (`completed`, after \
         the finish committed) from the client's monotonic clock.\n",
        config.latency_concurrency, config.latency_seconds
    );
    out.push_str(&pg_report::latency_table(results));
    let _ = writeln!(out, "\n### Where ours is slower than Node in this run\n");
    let slower = pg_report::slower_than_node(results);
    if slower.is_empty() {
        let _ = writeln!(
            out,
            "Nowhere: ours had the higher rate in every throughput scenario and no higher \
             add → completed percentile in the latency scenarios."
        );
    } else {
        for line in slower {
            let _ = writeln!(out, "- {line}");
        }
    }
    out
}
