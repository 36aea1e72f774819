//! Worker control on the in-memory backend, no Redis running: `cancel_job` /
//! `cancel_all_jobs` with processors that honour and that ignore the token, per-job timeouts,
//! concurrency changed at run time (counted with gates, no timing), and the lifecycle
//! callbacks (issue 14, item 3). The Redis and Node-parity side is in
//! `integration-tests/tests/worker_control.rs`.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bullmq_backend::JobEnd;
use ractor_bullmq::worker::{CancelReason, Job, JobContext, WorkerCallbacks, WorkerHandle};
use ractor_bullmq::{Worker, WorkerArgs, WorkerOptions};
use serde_json::{json, Value};
use tokio::sync::{mpsc, Semaphore};

mod memory_queue;
use memory_queue::Fixture;

const LONG: Duration = Duration::from_secs(20);

impl Fixture {
    async fn spawn(
        &self,
        processor: impl ractor_bullmq::worker::Processor,
        options: WorkerOptions,
        callbacks: WorkerCallbacks,
    ) -> WorkerHandle {
        let args = WorkerArgs::open(&self.backend, self.keys.name(), processor, options)
            .await
            .unwrap()
            .callbacks(callbacks);
        Worker::spawn(args).await.unwrap()
    }

    /// Waits until the job is finished.
    async fn end(&self, id: &str) -> JobEnd {
        let deadline = tokio::time::Instant::now() + LONG;
        loop {
            match self.queue.job_end(id).await.unwrap() {
                JobEnd::Unfinished => {}
                end => return end,
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "job {id} never finished"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

fn options() -> WorkerOptions {
    WorkerOptions::new().drain_delay(Duration::from_millis(100))
}

/// Waits for the next message on `rx`, failing after [`LONG`].
async fn next<T>(rx: &mut mpsc::UnboundedReceiver<T>) -> T {
    tokio::time::timeout(LONG, rx.recv())
        .await
        .expect("timed out")
        .expect("channel closed")
}

/// What a processor saw of its cancellation: the reason and the message.
type Seen = Arc<Mutex<Vec<(Option<CancelReason>, Option<String>)>>>;

/// A processor that says it started, then returns an error once its token fires, with the
/// cancel reason and message it saw.
fn honouring(
    started: mpsc::UnboundedSender<String>,
    seen: Seen,
) -> impl ractor_bullmq::worker::Processor {
    move |job: Job, ctx: JobContext| {
        let started = started.clone();
        let seen = seen.clone();
        async move {
            started.send(job.id().to_string()).unwrap();
            ctx.cancellation_token().cancelled().await;
            seen.lock()
                .unwrap()
                .push((ctx.cancel_reason(), ctx.cancel_message()));
            Err::<Value, _>(anyhow::anyhow!("aborted by the processor"))
        }
    }
}

/// A processor that says it started and then ignores its token: it sleeps for a minute on
/// its first attempt, and completes at once on the next ones.
fn ignoring(started: mpsc::UnboundedSender<String>) -> impl ractor_bullmq::worker::Processor {
    move |job: Job, _ctx: JobContext| {
        let started = started.clone();
        async move {
            started.send(job.id().to_string()).unwrap();
            if job.attempts_made() == 0 {
                tokio::time::sleep(Duration::from_secs(60)).await;
            }
            Ok::<Value, anyhow::Error>(json!("done"))
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancel_job_fails_the_attempt_with_the_reason_when_the_processor_honours_the_token() {
    let f = Fixture::new("cancel-honour").await;
    let id = f.add("{}").await;
    let (tx, mut started) = mpsc::unbounded_channel();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let worker = f
        .spawn(
            honouring(tx, seen.clone()),
            options(),
            WorkerCallbacks::new(),
        )
        .await;
    assert_eq!(next(&mut started).await, id);
    assert!(worker.cancel_job(&id, Some("user stop")).await.unwrap());
    assert_eq!(
        f.end(&id).await,
        JobEnd::Failed(Some("user stop".into())),
        "the cancellation's reason wins over the processor's error"
    );
    assert_eq!(
        *seen.lock().unwrap(),
        vec![(Some(CancelReason::Requested), Some("user stop".to_string()))]
    );
    // Not running any more: nothing to cancel.
    assert!(!worker.cancel_job(&id, None).await.unwrap());
    assert!(!worker.cancel_job("no-such-job", None).await.unwrap());
    assert_eq!(worker.active_count().await.unwrap(), 0);
    let record = f.queue.get_job(&id).await.unwrap().unwrap();
    assert_eq!(record.attempts_made, 1);
    worker.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancel_job_retries_per_attempts_and_drops_a_processor_that_ignores_the_token() {
    let f = Fixture::new("cancel-ignore").await;
    let id = f.add(r#"{"attempts":2}"#).await;
    let (tx, mut started) = mpsc::unbounded_channel();
    let worker = f
        .spawn(
            ignoring(tx),
            options().cancel_grace(Duration::from_millis(100)),
            WorkerCallbacks::new(),
        )
        .await;
    assert_eq!(next(&mut started).await, id);
    assert!(worker.cancel_job(&id, None).await.unwrap());
    // Dropped after the grace, retried at once, and the second attempt completes.
    assert_eq!(next(&mut started).await, id);
    assert_eq!(
        f.end(&id).await,
        JobEnd::Completed(Some(r#""done""#.into()))
    );
    let record = f.queue.get_job(&id).await.unwrap().unwrap();
    assert_eq!(
        record.attempts_made, 2,
        "a failed attempt, then the completed one"
    );
    assert_eq!(record.failed_reason.as_deref(), Some("job cancelled"));
    worker.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancel_all_jobs_cancels_every_running_job_and_the_worker_goes_on() {
    let f = Fixture::new("cancel-all").await;
    let mut ids = Vec::new();
    for _ in 0..3 {
        ids.push(f.add("{}").await);
    }
    let (tx, mut started) = mpsc::unbounded_channel();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let worker = f
        .spawn(
            honouring(tx, seen.clone()),
            options().concurrency(3),
            WorkerCallbacks::new(),
        )
        .await;
    for _ in 0..3 {
        next(&mut started).await;
    }
    assert_eq!(
        worker.cancel_all_jobs(Some("maintenance")).await.unwrap(),
        3
    );
    for id in &ids {
        assert_eq!(f.end(id).await, JobEnd::Failed(Some("maintenance".into())));
    }
    // Still fetching: a new job runs.
    let later = f.add("{}").await;
    assert_eq!(next(&mut started).await, later);
    assert!(worker.is_running().await);
    assert_eq!(worker.cancel_all_jobs(None).await.unwrap(), 1);
    assert_eq!(
        f.end(&later).await,
        JobEnd::Failed(Some("job cancelled".into()))
    );
    worker.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_outrunning_its_timeout_fails_with_a_clear_reason_and_others_are_not_timed() {
    let f = Fixture::new("timeout").await;
    let slow = f.add_named("slow", "{}").await;
    let (tx, mut started) = mpsc::unbounded_channel();
    let gate = Arc::new(Semaphore::new(0));
    let g = gate.clone();
    let processor = move |job: Job, ctx: JobContext| {
        let tx = tx.clone();
        let gate = g.clone();
        async move {
            tx.send(job.id().to_string()).unwrap();
            if job.name() == "slow" {
                // Ignores the token: dropped after the grace.
                tokio::time::sleep(Duration::from_secs(60)).await;
            } else {
                // Untimed: holds until the test opens the gate, long after the slow one's
                // timeout and grace.
                let _permit = gate.acquire().await.unwrap();
                assert!(!ctx.is_cancelled());
            }
            Ok::<Value, anyhow::Error>(json!("done"))
        }
    };
    let worker = f
        .spawn(
            processor,
            options()
                .concurrency(2)
                .job_timeout_for("slow", Duration::from_millis(200))
                .cancel_grace(Duration::from_millis(100)),
            WorkerCallbacks::new(),
        )
        .await;
    assert_eq!(next(&mut started).await, slow);
    let fast = f.add_named("fast", "{}").await;
    assert_eq!(next(&mut started).await, fast);
    assert_eq!(
        f.end(&slow).await,
        JobEnd::Failed(Some("job timed out after 200 ms".into()))
    );
    gate.add_permits(1);
    assert_eq!(
        f.end(&fast).await,
        JobEnd::Completed(Some(r#""done""#.into()))
    );
    worker.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_timeout_token_reaches_a_processor_that_honours_it_with_the_reason() {
    let f = Fixture::new("timeout-honour").await;
    let id = f.add(r#"{"attempts":2}"#).await;
    let (tx, mut started) = mpsc::unbounded_channel();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let worker = f
        .spawn(
            honouring(tx, seen.clone()),
            options().job_timeout(Duration::from_millis(100)),
            WorkerCallbacks::new(),
        )
        .await;
    next(&mut started).await;
    next(&mut started).await;
    assert_eq!(
        f.end(&id).await,
        JobEnd::Failed(Some("job timed out after 100 ms".into()))
    );
    let record = f.queue.get_job(&id).await.unwrap().unwrap();
    assert_eq!(
        record.attempts_made, 2,
        "retried once, then failed for good"
    );
    let reason = (
        Some(CancelReason::TimedOut),
        Some("job timed out after 100 ms".to_string()),
    );
    assert_eq!(*seen.lock().unwrap(), vec![reason.clone(), reason]);
    worker.close().await.unwrap();
}

/// How many jobs run now, and the most that ran at once when each job started.
#[derive(Default)]
struct Gauge {
    running: AtomicUsize,
    at_start: Mutex<Vec<usize>>,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrency_raised_and_lowered_at_run_time_changes_how_many_jobs_run_at_once() {
    let f = Fixture::new("concurrency").await;
    let mut ids = Vec::new();
    for _ in 0..6 {
        ids.push(f.add("{}").await);
    }
    let gauge = Arc::new(Gauge::default());
    let gate = Arc::new(Semaphore::new(0));
    let (tx, mut started) = mpsc::unbounded_channel();
    let (g, gt) = (gauge.clone(), gate.clone());
    let processor = move |job: Job, _ctx: JobContext| {
        let (gauge, gate, tx) = (g.clone(), gt.clone(), tx.clone());
        async move {
            let now = gauge.running.fetch_add(1, Ordering::SeqCst) + 1;
            gauge.at_start.lock().unwrap().push(now);
            tx.send(job.id().to_string()).unwrap();
            gate.acquire().await.unwrap().forget();
            gauge.running.fetch_sub(1, Ordering::SeqCst);
            Ok::<Value, anyhow::Error>(json!(null))
        }
    };
    let worker = f
        .spawn(processor, options().concurrency(1), WorkerCallbacks::new())
        .await;
    next(&mut started).await;
    assert_eq!(worker.active_count().await.unwrap(), 1);
    assert!(
        worker.set_concurrency(0).is_err(),
        "0 is refused, as Node refuses it"
    );

    worker.set_concurrency(3).unwrap();
    assert_eq!(worker.concurrency().await.unwrap(), 3);
    next(&mut started).await;
    next(&mut started).await;
    assert_eq!(worker.active_count().await.unwrap(), 3);
    assert_eq!(*gauge.at_start.lock().unwrap(), vec![1, 2, 3]);

    // Lowered with three running: they go on; the next job starts only once all three ended,
    // and from then on one runs at a time.
    worker.set_concurrency(1).unwrap();
    gate.add_permits(3);
    for id in &ids[..3] {
        assert!(matches!(f.end(id).await, JobEnd::Completed(_)));
    }
    for _ in 3..6 {
        next(&mut started).await;
        assert_eq!(worker.active_count().await.unwrap(), 1);
        gate.add_permits(1);
    }
    for id in &ids {
        assert!(matches!(f.end(id).await, JobEnd::Completed(_)));
    }
    assert_eq!(&gauge.at_start.lock().unwrap()[3..], &[1, 1, 1]);
    worker.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lifecycle_callbacks_fire_once_each_in_order() {
    let f = Fixture::new("lifecycle").await;
    let log = Arc::new(Mutex::new(Vec::<&'static str>::new()));
    let cb = |name: &'static str| {
        let log = log.clone();
        move || log.lock().unwrap().push(name)
    };
    let callbacks = WorkerCallbacks::new()
        .on_ready(cb("ready"))
        .on_paused(cb("paused"))
        .on_resumed(cb("resumed"))
        .on_closing(cb("closing"))
        .on_closed(cb("closed"));
    let processor =
        |_job: Job, _ctx: JobContext| async move { Ok::<Value, anyhow::Error>(json!(1)) };
    let worker = f.spawn(processor, options(), callbacks).await;
    worker.pause().unwrap();
    worker.pause().unwrap();
    assert!(!worker.is_running().await);
    worker.resume().unwrap();
    worker.resume().unwrap();
    assert!(worker.is_running().await);
    let (a, b) = tokio::join!(worker.close(), worker.close());
    assert!(a.is_ok() || b.is_ok());
    assert_eq!(
        *log.lock().unwrap(),
        vec!["ready", "paused", "resumed", "closing", "closed"]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_forced_close_during_the_grace_drops_the_processor_at_once_and_records_nothing() {
    let f = Fixture::new("cancel-then-force").await;
    let id = f.add("{}").await;
    let (tx, mut started) = mpsc::unbounded_channel();
    let worker = f
        .spawn(
            ignoring(tx),
            // A grace far longer than the test's patience: only the hard cancel can end it.
            options().cancel_grace(Duration::from_secs(3600)),
            WorkerCallbacks::new(),
        )
        .await;
    assert_eq!(next(&mut started).await, id);
    assert!(worker.cancel_job(&id, Some("soft")).await.unwrap());
    let report = tokio::time::timeout(LONG, worker.close_force())
        .await
        .expect("the forced close did not wait for the grace")
        .unwrap();
    assert_eq!(report.left_for_stalled_recovery, vec![id.clone()]);
    assert_eq!(
        f.queue.job_end(&id).await.unwrap(),
        JobEnd::Unfinished,
        "left to stalled recovery, not failed with the soft reason"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancellation_and_timeouts_behave_the_same_on_job_actors() {
    use ractor_bullmq::worker::JobRunner;
    let f = Fixture::new("cancel-actor").await;
    let cancelled = f.add("{}").await;
    let timed = f.add_named("slow", "{}").await;
    let (tx, mut started) = mpsc::unbounded_channel();
    let worker = f
        .spawn(
            ignoring(tx),
            options()
                .concurrency(2)
                .job_runner(JobRunner::Actor)
                .job_timeout_for("slow", Duration::from_millis(200))
                .cancel_grace(Duration::from_millis(100)),
            WorkerCallbacks::new(),
        )
        .await;
    next(&mut started).await;
    next(&mut started).await;
    assert!(worker.cancel_job(&cancelled, Some("stop")).await.unwrap());
    assert_eq!(f.end(&cancelled).await, JobEnd::Failed(Some("stop".into())));
    assert_eq!(
        f.end(&timed).await,
        JobEnd::Failed(Some("job timed out after 200 ms".into()))
    );
    assert_eq!(worker.active_count().await.unwrap(), 0);
    worker.close().await.unwrap();
}
