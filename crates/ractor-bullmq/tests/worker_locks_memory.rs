//! Node's Worker methods `isPaused`, `extendJobLocks` and the `locksRenewed` event (issue 22
//! §2) on the in-memory backend, no Redis running: `is_paused` through pause, resume, run and
//! close; `extend_job_locks` on a `WorkerHandle` and a `ManualWorker` (own, wrong and missing
//! tokens, a zero duration refused); `on_locks_renewed` reporting the renewed ids in fetch
//! order. A lost lock left out of `on_locks_renewed` is checked on Redis, where another client
//! can take a lock. The Redis and Node-parity
//! side is in `integration-tests/tests/worker_node_methods.rs`.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use ractor_bullmq::worker::{
    Job, JobContext, ManualError, ManualWorker, WorkerCallbacks, WorkerError, WorkerHandle,
};
use ractor_bullmq::{Worker, WorkerArgs, WorkerOptions};
use serde_json::{json, Value};
use tokio::sync::{mpsc, Semaphore};

mod memory_queue;
use memory_queue::Fixture;

const LONG: Duration = Duration::from_secs(20);

async fn spawn(
    f: &Fixture,
    processor: impl ractor_bullmq::worker::Processor,
    options: WorkerOptions,
    callbacks: WorkerCallbacks,
) -> WorkerHandle {
    let args = WorkerArgs::open(&f.backend, f.keys.name(), processor, options)
        .await
        .unwrap()
        .callbacks(callbacks);
    Worker::spawn(args).await.unwrap()
}

/// Waits for the next message on `rx`, failing after [`LONG`].
async fn next<T>(rx: &mut mpsc::UnboundedReceiver<T>) -> T {
    tokio::time::timeout(LONG, rx.recv())
        .await
        .expect("timed out")
        .expect("channel closed")
}

/// A processor that reports `(id, token)` when it starts and returns once `gate` lets it.
fn gated(
    started: mpsc::UnboundedSender<(String, String)>,
    gate: Arc<Semaphore>,
) -> impl ractor_bullmq::worker::Processor {
    move |job: Job, ctx: JobContext| {
        let started = started.clone();
        let gate = gate.clone();
        async move {
            started
                .send((job.id().to_string(), ctx.token().to_string()))
                .unwrap();
            gate.acquire().await?.forget();
            Ok::<Value, anyhow::Error>(json!(1))
        }
    }
}

fn options() -> WorkerOptions {
    WorkerOptions::new().drain_delay(Duration::from_millis(100))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn is_paused_follows_pause_resume_and_run_and_is_false_once_closed() {
    let f = Fixture::new("is-paused").await;
    let processor =
        |_job: Job, _ctx: JobContext| async move { Ok::<Value, anyhow::Error>(json!(1)) };
    let worker = spawn(
        &f,
        processor,
        options().autorun(false),
        WorkerCallbacks::new(),
    )
    .await;
    assert!(!worker.is_paused().await, "created, not paused");
    worker.pause().unwrap();
    assert!(worker.is_paused().await, "paused before run");
    worker.run().unwrap();
    assert!(worker.is_paused().await, "run keeps a pause asked before");
    assert!(!worker.is_running().await);
    worker.resume().unwrap();
    assert!(!worker.is_paused().await);
    assert!(worker.is_running().await);
    worker.pause().unwrap();
    assert!(worker.is_paused().await);
    worker.close().await.unwrap();
    assert!(!worker.is_paused().await, "a stopped worker is not paused");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn extend_job_locks_renews_own_tokens_and_returns_the_others_in_order() {
    let f = Fixture::new("extend-job-locks").await;
    let (started_tx, mut started) = mpsc::unbounded_channel();
    let gate = Arc::new(Semaphore::new(0));
    // Renewal by the LockManager is off, so only the calls below touch the locks.
    let opts = options()
        .concurrency(2)
        .lock_duration(Duration::from_millis(300))
        .skip_lock_renewal(true);
    let worker = spawn(
        &f,
        gated(started_tx, gate.clone()),
        opts,
        WorkerCallbacks::new(),
    )
    .await;
    let a = f.add("{}").await;
    let b = f.add("{}").await;
    let (id1, token1) = next(&mut started).await;
    let (id2, token2) = next(&mut started).await;
    let mut ids = [id1.clone(), id2.clone()];
    ids.sort();
    let mut added = [a, b];
    added.sort();
    assert_eq!(ids, added);

    let asked = [
        ("missing".to_string(), "whatever".to_string()),
        (id1.clone(), token1.clone()),
        (id2.clone(), "not-the-token".to_string()),
    ];
    let failed = worker
        .extend_job_locks(&asked, Duration::from_secs(30))
        .await
        .unwrap();
    assert_eq!(failed, vec!["missing".to_string(), id2.clone()]);
    assert!(worker.extend_job_locks(&[], LONG).await.unwrap().is_empty());
    let refused = worker
        .extend_job_locks(&asked, Duration::ZERO)
        .await
        .unwrap_err();
    assert!(
        matches!(
            refused,
            WorkerError::InvalidArgument {
                argument: "duration",
                ..
            }
        ),
        "{refused:?}"
    );

    // Past the 300 ms lock: job 1's lock lives on (renewed to 30 s), job 2's expired.
    tokio::time::sleep(Duration::from_millis(600)).await;
    let again = [(id1.clone(), token1), (id2.clone(), token2)];
    let failed = worker
        .extend_job_locks(&again, Duration::from_secs(30))
        .await
        .unwrap();
    assert_eq!(failed, vec![id2]);
    gate.add_permits(2);
    worker.close().await.unwrap();
    assert!(matches!(
        worker.extend_job_locks(&again, LONG).await,
        Err(WorkerError::NotRunning)
    ));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_manual_worker_extends_job_locks_in_one_call() {
    let f = Fixture::new("manual-extend-job-locks").await;
    let options = WorkerOptions::new().lock_duration(Duration::from_millis(300));
    let manual = ManualWorker::open(&f.backend, f.keys.name(), options)
        .await
        .unwrap();
    f.add("{}").await;
    f.add("{}").await;
    let first = manual.try_get_next_job("t1").await.unwrap().unwrap();
    let second = manual.try_get_next_job("t2").await.unwrap().unwrap();
    let asked = [
        (first.id().to_string(), "t1".to_string()),
        (second.id().to_string(), "t1".to_string()),
    ];
    let failed = manual
        .extend_job_locks(&asked, Duration::from_secs(30))
        .await
        .unwrap();
    assert_eq!(failed, vec![second.id().to_string()]);
    assert!(matches!(
        manual.extend_job_locks(&asked, Duration::ZERO).await,
        Err(ManualError::Worker(WorkerError::InvalidArgument { .. }))
    ));
    manual.close().await;
    assert!(matches!(
        manual.extend_job_locks(&asked, LONG).await,
        Err(ManualError::Closed)
    ));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn locks_renewed_reports_the_renewed_ids_in_fetch_order() {
    let f = Fixture::new("locks-renewed").await;
    let renewed = Arc::new(Mutex::new(Vec::<Vec<String>>::new()));
    let (failed_tx, mut failed) = mpsc::unbounded_channel();
    let callbacks = {
        let renewed = renewed.clone();
        WorkerCallbacks::new()
            .on_locks_renewed(move |ids| renewed.lock().unwrap().push(ids.to_vec()))
            .on_lock_renewal_failed(move |ids| failed_tx.send(ids.to_vec()).unwrap())
    };
    let (started_tx, mut started) = mpsc::unbounded_channel();
    let gate = Arc::new(Semaphore::new(0));
    let opts = options()
        .concurrency(3)
        .lock_duration(Duration::from_millis(2_000))
        .with_lock_renew_time(Duration::from_millis(200));
    let added = [f.add("{}").await, f.add("{}").await, f.add("{}").await];
    let worker = spawn(&f, gated(started_tx, gate.clone()), opts, callbacks).await;
    for _ in 0..3 {
        next(&mut started).await;
    }
    let all: Vec<String> = added.to_vec();
    let deadline = tokio::time::Instant::now() + LONG;
    while !renewed.lock().unwrap().contains(&all) {
        assert!(
            tokio::time::Instant::now() < deadline,
            "never renewed all three in one tick"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }

    // A few more ticks, then every report is in fetch order.
    let before = renewed.lock().unwrap().len();
    let deadline = tokio::time::Instant::now() + LONG;
    while renewed.lock().unwrap().len() < before + 2 {
        assert!(tokio::time::Instant::now() < deadline, "renewals stopped");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    for ids in renewed.lock().unwrap().iter() {
        let mut in_order: Vec<&String> = all.iter().filter(|id| ids.contains(id)).collect();
        in_order.dedup();
        assert_eq!(ids.iter().collect::<Vec<_>>(), in_order, "fetch order");
    }
    assert!(failed.try_recv().is_err(), "no lock was lost");
    gate.add_permits(3);
    worker.close().await.unwrap();
}
