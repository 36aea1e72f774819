//! Exposes the telemetry catalogue's metrics in the Prometheus text format.
//!
//!     cargo run -p ractor-bullmq --example telemetry_prometheus
//!
//! Installs `metrics-exporter-prometheus` as the `metrics` recorder (in a service you would use
//! its HTTP listener, `PrometheusBuilder::new().with_http_listener(addr).install()`, or serve
//! `handle.render()` from your own `/metrics` route), plus a `tracing` subscriber printing the
//! catalogue events (`RUST_LOG=bullmq=debug` shows the per-job ones). It then plays what a
//! producer and a worker report for a few jobs, by calling the same functions the runtime
//! calls, prints the exposition text and exits. No Redis needed.

use std::time::Duration;

use metrics_exporter_prometheus::{Matcher, PrometheusBuilder};
use ractor_bullmq::telemetry::{self, JobTelemetry};
use tracing_subscriber::EnvFilter;

/// How one attempt ends: `Ok` completes the job, `Err` fails the attempt with that message.
type Attempt = Result<(), &'static str>;

fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(
            EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("bullmq=info")),
        )
        .with_writer(std::io::stderr)
        .init();

    // Histograms as Prometheus histograms (buckets) rather than summaries.
    let handle = PrometheusBuilder::new()
        .set_buckets_for_metric(
            Matcher::Suffix("_seconds".to_owned()),
            &[0.005, 0.025, 0.1, 0.5, 1.0, 5.0, 30.0, 120.0],
        )?
        .install_recorder()?;
    telemetry::describe_metrics();

    let queue = "emails";
    let worker = "emails#1";
    telemetry::worker_started(queue, worker, 4);

    // (job id, job name, how each attempt ends): Ok = completed, Err = failed.
    let jobs: [(&str, &str, &[Attempt]); 4] = [
        ("1", "welcome", &[Ok(())]),
        ("2", "welcome", &[Ok(())]),
        ("3", "digest", &[Err("SMTP timeout"), Err("SMTP timeout")]),
        ("4", "digest", &[Err("SMTP timeout"), Ok(())]),
    ];
    let max_attempts = 2;
    for (id, name, attempts) in jobs {
        telemetry::job_added(queue, id, name);
        for (n, outcome) in (1..).zip(attempts.iter()) {
            let job = JobTelemetry::new(queue, id, name).attempt(n).worker(worker);
            let span = telemetry::process_span(&job);
            let _entered = span.enter();
            let active = telemetry::job_started(&job, Some(Duration::from_millis(40)));
            let took = Duration::from_millis(120 * u64::from(n));
            match outcome {
                Ok(()) => telemetry::job_completed(&job, took),
                Err(error) if n < max_attempts => {
                    telemetry::job_retried(&job, took, Duration::from_secs(2), error)
                }
                Err(error) => telemetry::job_failed(&job, took, error),
            }
            drop(active);
        }
    }
    telemetry::rate_limit_hit(queue, worker, Duration::from_millis(500));
    telemetry::stalled_check(queue, worker, 1, 0);
    telemetry::queue_drained(queue);
    telemetry::worker_stopped(queue, worker, Duration::from_secs(3));

    print!("{}", handle.render());
    Ok(())
}
