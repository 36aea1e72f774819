//! `bullmq demo`: a self-contained tour of the runtime.
//!
//! 1. Uses the Redis of `--url` / `REDIS_URL` when it answers `PING` within a second;
//!    otherwise starts a throwaway `redis-server` on a free loopback port
//!    ([`LocalRedis`]), stopped again on every way out. With a `postgres://` URL it runs on
//!    that PostgreSQL schema (which Node's migrator must have made: a missing one fails with
//!    the sentence saying how to make it), never starting a server.
//! 2. Adds a few thousand jobs to a fresh queue with a mix of outcomes: most complete, some
//!    fail once and succeed on a retry with backoff, some always fail, some report progress, a
//!    few are delayed, a few prioritized.
//! 3. Processes them with Workers supervised by a [`Runtime`], while a supervised
//!    `QueueEvents` follows the queue's event stream live (progress bar on a terminal).
//! 4. Prints a summary table (or JSON with `--json`) and obliterates the demo queue.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context as _, Result};
use bullmq_backend::Backend;
use bullmq_protocol::events::{Event, StreamEvent};
use bullmq_protocol::options::{Backoff, JobOptions};
use clap::Args;
use indicatif::{ProgressBar, ProgressStyle};
use ractor_bullmq::{
    ConnectionConfig, Job, JobContext, Queue, QueueEventsHandle, QueueOptions, Runtime,
    RuntimeOptions, WorkerCallbacks, WorkerOptions,
};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use super::Context;
use crate::local_redis::{self, LocalRedis};
use crate::output::{print_json, two_columns};
use crate::target::Target;

/// Arguments of `bullmq demo`.
#[derive(Debug, Clone, Args)]
pub(crate) struct DemoArgs {
    /// How many jobs to add.
    #[arg(long, default_value_t = 3000)]
    jobs: u32,
    /// How many supervised Workers process them.
    #[arg(long, default_value_t = 2)]
    workers: u32,
    /// Concurrency of each Worker.
    #[arg(long, default_value_t = 50)]
    concurrency: usize,
    /// The `redis-server` binary to start when no Redis answers.
    #[arg(long, value_name = "PATH", default_value = "redis-server")]
    redis_server: String,
    /// Give up waiting for the jobs after this many seconds.
    #[arg(long, value_name = "SECS", default_value_t = 300)]
    timeout: u64,
}

/// How long the Redis of `--redis-url` has to answer before a local one is started.
const PROBE_TIMEOUT: Duration = Duration::from_secs(1);
/// Jobs per `add_bulk` call.
const ADD_CHUNK: usize = 500;
/// How long the Workers may take to finish their jobs when the demo stops.
const SHUTDOWN_TIMEOUT: Duration = Duration::from_secs(10);

/// What a demo job is made to do (its `data`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
enum Kind {
    /// Completes.
    Ok,
    /// Reports progress four times, then completes.
    Progress,
    /// Fails its first attempt, completes on the retry.
    Flaky,
    /// Fails every attempt.
    Broken,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
struct DemoData {
    kind: Kind,
    n: u64,
    work_ms: u64,
}

/// The mix: per hundred jobs 5 flaky, 2 broken, 10 with progress, 1 delayed, 2 prioritized.
fn demo_job(i: u32) -> (String, DemoData, JobOptions) {
    let mut opts = JobOptions::new();
    let kind = match i % 100 {
        0..=4 => {
            opts.attempts = Some(3);
            opts.backoff = Some(Backoff::exponential(Duration::from_millis(100)));
            Kind::Flaky
        }
        5..=6 => {
            opts.attempts = Some(2);
            opts.backoff = Some(Backoff::fixed(Duration::from_millis(50)));
            Kind::Broken
        }
        7..=16 => Kind::Progress,
        17 => {
            opts.delay = Some(200 + u64::from(i % 7) * 100);
            Kind::Ok
        }
        18..=19 => {
            opts.priority = Some(1 + i % 5);
            Kind::Ok
        }
        _ => Kind::Ok,
    };
    let data = DemoData {
        kind,
        n: u64::from(i),
        work_ms: u64::from(i % 5),
    };
    (format!("demo-{kind:?}").to_lowercase(), data, opts)
}

/// The demo's processor.
async fn process(job: Job, ctx: JobContext) -> Result<Value> {
    let data: DemoData = job.data()?;
    if data.work_ms > 0 {
        tokio::time::sleep(Duration::from_millis(data.work_ms)).await;
    }
    match data.kind {
        Kind::Ok => {}
        Kind::Progress => {
            for percent in [25, 50, 75, 100] {
                ctx.update_progress(percent).await?;
            }
        }
        Kind::Flaky if job.attempts_made() == 0 => {
            bail!("transient error on the first attempt")
        }
        Kind::Flaky => {}
        Kind::Broken => bail!("this job always fails"),
    }
    Ok(json!({ "n": data.n, "square": data.n * data.n }))
}

/// What the run counted.
#[derive(Debug, Default)]
struct Tally {
    completed: u64,
    failed: u64,
    progress_events: u64,
    events: u64,
}

/// Everything the demo set up, torn down by [`run`] on every way out.
struct Setup {
    /// The URL shown in the summary (a Redis URL, or PostgreSQL's target without password).
    url: String,
    /// The redis-server started for the demo; dropping it kills the server.
    local: Option<LocalRedis>,
    /// Where it runs (the local redis-server's URL when one was started).
    target: Target,
    backend: Arc<dyn Backend>,
    queue: Queue,
    runtime: Runtime,
}

/// Runs `bullmq demo`.
pub(crate) async fn run(ctx: &Context, args: DemoArgs) -> Result<()> {
    // Installed first: from here on Ctrl-C / SIGTERM unwind through the guards instead of
    // killing the process (which would leave a started redis-server behind).
    let mut stop = StopSignal::install()?;
    let setup = tokio::select! {
        setup = set_up(ctx, &args) => setup?,
        () = stop.wait() => bail!("interrupted"),
    };
    let retried = Arc::new(AtomicU64::new(0));
    let outcome = tokio::select! {
        outcome = demo(ctx, &args, &setup, &retried) => outcome,
        () = stop.wait() => Err(anyhow::anyhow!("interrupted")),
    };
    // Clean up on every path (a second Ctrl-C skips it); a failure here must not hide the
    // demo's own outcome.
    let cleaned = tokio::select! {
        cleaned = tear_down(&setup) => cleaned,
        () = stop.wait() => false,
    };
    let Setup {
        url,
        local,
        queue,
        target,
        ..
    } = setup;
    let local_redis_pid = local.as_ref().map(LocalRedis::pid);
    // Stop the local Redis before reporting anything (also when the demo failed).
    drop(local);
    let (tally, elapsed) = outcome?;
    Summary {
        queue: queue.name().to_owned(),
        store: target.store_name(),
        backend: target.backend_name(),
        url,
        local_redis_pid,
        jobs: args.jobs,
        workers: args.workers,
        concurrency: args.concurrency,
        completed: tally.completed,
        failed: tally.failed,
        retried: retried.load(Ordering::Relaxed),
        progress_events: tally.progress_events,
        events: tally.events,
        elapsed,
        cleaned,
    }
    .print(ctx.json);
    Ok(())
}

/// Finds or starts Redis (or opens the PostgreSQL schema), opens the demo queue and starts
/// the supervision tree.
async fn set_up(ctx: &Context, args: &DemoArgs) -> Result<Setup> {
    let queue_name = format!(
        "demo-{}-{}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_millis())
            .unwrap_or_default()
    );
    let target = ctx.target()?;
    if let Target::Postgres(config) = &target {
        let backend = ctx
            .backend()
            .await
            .with_context(|| format!("cannot run the demo on {}", target.describe()))?;
        let queue = Queue::with_backend(
            &queue_name,
            backend.as_ref(),
            QueueOptions::default().prefix(ctx.prefix.clone()),
        )
        .await
        .with_context(|| format!("cannot open queue {queue_name} on {}", target.describe()))?;
        let runtime = Runtime::start(
            RuntimeOptions::default()
                .backend(Arc::clone(&backend))
                .worker_shutdown(SHUTDOWN_TIMEOUT),
        )
        .await
        .context("cannot start the supervision tree")?;
        return Ok(Setup {
            url: config.display_target(),
            local: None,
            target,
            backend,
            queue,
            runtime,
        });
    }
    let (url, local) = if local_redis::answers(&ctx.url, PROBE_TIMEOUT).await {
        (ctx.url.clone(), None)
    } else {
        eprintln!(
            "No Redis answers at {}; starting a local redis-server…",
            super::redact_password(&ctx.url)
        );
        let redis = LocalRedis::start(&args.redis_server).await?;
        eprintln!(
            "Local redis-server (pid {}) at {}; it stops when the demo ends.",
            redis.pid(),
            redis.url()
        );
        (redis.url().to_owned(), Some(redis))
    };
    let config =
        ConnectionConfig::from_url(&url).with_context(|| format!("bad Redis URL {url}"))?;
    let queue = Queue::new(
        &queue_name,
        QueueOptions::new(config.clone()).prefix(ctx.prefix.clone()),
    )
    .await
    .with_context(|| format!("cannot open queue {queue_name} on {url}"))?;
    let runtime = Runtime::start(
        RuntimeOptions::default()
            .connection(config.clone())
            .worker_shutdown(SHUTDOWN_TIMEOUT),
    )
    .await
    .context("cannot start the supervision tree")?;
    let backend: Arc<dyn Backend> = Arc::new(bullmq_redis::RedisBackend::new(config.clone()));
    Ok(Setup {
        url,
        local,
        target: Target::Redis(config),
        backend,
        queue,
        runtime,
    })
}

/// Stops the workers and removes the demo queue; whether the queue is gone.
async fn tear_down(setup: &Setup) -> bool {
    if let Err(error) = setup.runtime.shutdown(SHUTDOWN_TIMEOUT).await {
        tracing::warn!(%error, "the workers did not stop cleanly");
    }
    let cleaned = if setup.local.is_some() {
        // The whole server is thrown away.
        true
    } else {
        match setup.queue.obliterate(true).await {
            Ok(()) => true,
            Err(error) => {
                eprintln!(
                    "warning: could not remove demo queue {} from {}: {error}",
                    setup.queue.name(),
                    setup.target.store_name()
                );
                false
            }
        }
    };
    let _ = setup.queue.close().await;
    cleaned
}

/// Adds the jobs, runs the workers and follows the events until every job finished.
async fn demo(
    ctx: &Context,
    args: &DemoArgs,
    setup: &Setup,
    retried: &Arc<AtomicU64>,
) -> Result<(Tally, Duration)> {
    let Setup {
        queue,
        runtime,
        target,
        backend,
        ..
    } = setup;
    let total = u64::from(args.jobs);
    // Follow the events first, so none of the run's events is missed.
    let events = runtime
        .start_queue_events(
            super::queue_events_options(target, backend, queue.name(), &ctx.prefix)
                .block_timeout(Duration::from_millis(500))
                // A busy terminal must never make the reader drop this only subscriber.
                .subscriber_buffer(1_000_000),
        )
        .await
        .context("cannot start the QueueEvents")?;
    let mut rx = Some(events.subscribe_stream());
    wait_pinned(&events).await?;

    let added_at = Instant::now();
    let jobs: Vec<_> = (0..args.jobs).map(demo_job).collect();
    for chunk in jobs.chunks(ADD_CHUNK) {
        queue
            .add_bulk(chunk.iter().cloned())
            .await
            .context("cannot add the demo jobs")?;
    }
    eprintln!(
        "Added {total} jobs to {} in {} ms; processing with {} supervised workers × {} …",
        queue.name(),
        added_at.elapsed().as_millis(),
        args.workers,
        args.concurrency
    );

    let started = Instant::now();
    for i in 0..args.workers {
        let retried = Arc::clone(retried);
        let callbacks = WorkerCallbacks::new().on_failed(move |failed| {
            if failed.will_retry {
                retried.fetch_add(1, Ordering::Relaxed);
            }
        });
        let spec = runtime
            .worker_spec(
                queue.name(),
                process,
                WorkerOptions::new()
                    .concurrency(args.concurrency)
                    .name(format!("demo-{i}"))
                    .prefix(ctx.prefix.clone()),
            )
            .callbacks(callbacks);
        runtime
            .start_worker_spec(format!("demo/{i}"), spec)
            .await
            .context("cannot start a worker")?;
    }

    let bar = progress_bar(total);
    let mut tally = Tally::default();
    let mut poll = tokio::time::interval(Duration::from_millis(250));
    let deadline = tokio::time::Instant::now() + Duration::from_secs(args.timeout);
    loop {
        tokio::select! {
            event = next_event(&mut rx), if rx.is_some() => match event {
                Some(event) => tally_event(&mut tally, &event.event),
                // The reader dropped us (it never should with this buffer): the job counts
                // still finish the run.
                None => rx = None,
            },
            _ = poll.tick() => {
                let counts = queue.get_job_counts().await.context("cannot read job counts")?;
                let done = counts.completed + counts.failed;
                bar.set_position(done.min(total));
                bar.set_message(format!(
                    "completed {}  failed {}  retried {}  active {}",
                    counts.completed,
                    counts.failed,
                    retried.load(Ordering::Relaxed),
                    counts.active
                ));
                if done >= total {
                    tally.completed = counts.completed;
                    tally.failed = counts.failed;
                    break;
                }
            }
            () = tokio::time::sleep_until(deadline) => {
                bar.abandon();
                bail!("the jobs did not finish within {} s", args.timeout);
            }
        }
    }
    let elapsed = started.elapsed();
    bar.finish_and_clear();
    events.close().await;
    Ok((tally, elapsed))
}

/// Waits until the QueueEvents reads from a concrete stream position (its `$` start pinned).
async fn wait_pinned(events: &QueueEventsHandle) -> Result<()> {
    let deadline = Instant::now() + Duration::from_secs(10);
    while events.last_event_id() == "$" {
        if Instant::now() >= deadline {
            bail!("the QueueEvents did not start reading");
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    Ok(())
}

async fn next_event(
    rx: &mut Option<tokio::sync::mpsc::Receiver<std::sync::Arc<StreamEvent>>>,
) -> Option<std::sync::Arc<StreamEvent>> {
    match rx {
        Some(rx) => rx.recv().await,
        None => std::future::pending().await,
    }
}

fn tally_event(tally: &mut Tally, event: &Event) {
    tally.events += 1;
    if matches!(event, Event::Progress { .. }) {
        tally.progress_events += 1;
    }
}

fn progress_bar(total: u64) -> ProgressBar {
    let bar = ProgressBar::new(total);
    if let Ok(style) = ProgressStyle::with_template(
        "{elapsed_precise} [{bar:40.cyan/blue}] {pos}/{len} ({per_sec}) {msg}",
    ) {
        bar.set_style(style.progress_chars("=> "));
    }
    bar
}

/// Ctrl-C, and SIGTERM on Unix, registered when installed (not when first awaited), so a
/// signal during set-up is caught too.
struct StopSignal {
    #[cfg(unix)]
    interrupt: tokio::signal::unix::Signal,
    #[cfg(unix)]
    terminate: tokio::signal::unix::Signal,
}

impl StopSignal {
    fn install() -> Result<Self> {
        #[cfg(unix)]
        {
            use tokio::signal::unix::{signal, SignalKind};
            Ok(Self {
                interrupt: signal(SignalKind::interrupt()).context("cannot handle SIGINT")?,
                terminate: signal(SignalKind::terminate()).context("cannot handle SIGTERM")?,
            })
        }
        #[cfg(not(unix))]
        Ok(Self {})
    }

    /// Resolves at the next signal.
    async fn wait(&mut self) {
        #[cfg(unix)]
        tokio::select! {
            _ = self.interrupt.recv() => {}
            _ = self.terminate.recv() => {}
        }
        #[cfg(not(unix))]
        let _ = tokio::signal::ctrl_c().await;
    }
}

/// The final report.
struct Summary {
    queue: String,
    /// `Redis` or `PostgreSQL`.
    store: &'static str,
    /// `redis` or `postgres`.
    backend: &'static str,
    url: String,
    local_redis_pid: Option<u32>,
    jobs: u32,
    workers: u32,
    concurrency: usize,
    completed: u64,
    failed: u64,
    retried: u64,
    progress_events: u64,
    events: u64,
    elapsed: Duration,
    cleaned: bool,
}

impl Summary {
    fn jobs_per_sec(&self) -> f64 {
        let secs = self.elapsed.as_secs_f64();
        if secs > 0.0 {
            (self.completed + self.failed) as f64 / secs
        } else {
            0.0
        }
    }

    fn print(&self, json: bool) {
        if json {
            print_json(&json!({
                "queue": self.queue,
                "backend": self.backend,
                // The Redis URL on Redis (as before PostgreSQL), else null; `target` either.
                "redis": (self.backend == "redis").then_some(&self.url),
                "target": self.url,
                "localRedisPid": self.local_redis_pid,
                "jobs": self.jobs,
                "workers": self.workers,
                "concurrency": self.concurrency,
                "completed": self.completed,
                "failed": self.failed,
                "retried": self.retried,
                "progressEvents": self.progress_events,
                "events": self.events,
                "elapsedMs": self.elapsed.as_millis() as u64,
                "jobsPerSec": self.jobs_per_sec(),
                "cleaned": self.cleaned,
            }));
            return;
        }
        let rows = vec![
            ("jobs".to_owned(), self.jobs.to_string()),
            (
                "workers".to_owned(),
                format!("{} × concurrency {}", self.workers, self.concurrency),
            ),
            ("completed".to_owned(), self.completed.to_string()),
            ("failed".to_owned(), self.failed.to_string()),
            ("retried".to_owned(), self.retried.to_string()),
            (
                "progress events".to_owned(),
                self.progress_events.to_string(),
            ),
            ("events seen".to_owned(), self.events.to_string()),
            (
                "elapsed".to_owned(),
                format!("{:.2} s", self.elapsed.as_secs_f64()),
            ),
            ("jobs/s".to_owned(), format!("{:.0}", self.jobs_per_sec())),
            (
                self.backend.to_owned(),
                match self.local_redis_pid {
                    Some(pid) => format!("{} (local, pid {pid}, stopped)", self.url),
                    None => self.url.clone(),
                },
            ),
            (
                "queue".to_owned(),
                format!(
                    "{} ({})",
                    self.queue,
                    if self.cleaned {
                        "removed".to_owned()
                    } else {
                        format!("left in {}", self.store)
                    }
                ),
            ),
        ];
        print!("{}", two_columns(&rows));
    }
}
