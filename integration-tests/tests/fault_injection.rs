//! Fault injection into Workers running under the Runtime, against a real Redis: processor
//! panics, a killed LockManager, a killed Worker, and a Worker that keeps crashing until its
//! supervisor gives up. Every test checks the queue's final state (nothing lost, nothing
//! completed twice) and what the supervision tree reported.

mod common;

use std::collections::HashMap;
use std::sync::{Arc, Mutex, Once};
use std::time::Duration;

use common::*;
use ractor::{ActorCell, ActorId};
use ractor_bullmq::protocol::options::JobOptions;
use ractor_bullmq::runtime::{Runtime, RuntimeOptions, SupervisedWorker};
use ractor_bullmq::supervision::{RuntimeEvent, SupervisorOptions};
use ractor_bullmq::worker::{Job, JobContext, JobRunner, LockManagerMsg};
use ractor_bullmq::{ConnectionConfig, Queue, WorkerCallbacks, WorkerOptions};
use serde_json::{json, Value};
use tokio::sync::broadcast;

const LONG: Duration = Duration::from_secs(180);

/// Keeps the 1 000 injected panics out of the test output; any other panic is printed.
fn quiet_injected_panics() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let default = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            let payload = info
                .payload()
                .downcast_ref::<String>()
                .map(String::as_str)
                .or_else(|| info.payload().downcast_ref::<&str>().copied())
                .unwrap_or("");
            if !payload.contains("injected") {
                default(info);
            }
        }));
    });
}

async fn start_runtime(workers: SupervisorOptions) -> anyhow::Result<Runtime> {
    let options = RuntimeOptions::default()
        .connection(ConnectionConfig::from_url(&redis_url())?)
        .worker_supervisor(workers)
        .worker_shutdown(Duration::from_secs(10));
    Ok(Runtime::start(options).await?)
}

/// Adds `n` jobs with data `{"i": i}`, in bulk batches.
async fn add_jobs(queue: &Queue, n: usize) -> anyhow::Result<()> {
    let items: Vec<usize> = (0..n).collect();
    for chunk in items.chunks(1000) {
        queue
            .add_bulk(
                chunk
                    .iter()
                    .map(|i| ("job", json!({ "i": i }), JobOptions::default())),
            )
            .await?;
    }
    Ok(())
}

/// Records every completion the Worker reported (after Redis accepted it), per job id.
#[derive(Clone, Default)]
struct Completions(Arc<Mutex<HashMap<String, u32>>>);

impl Completions {
    fn callbacks(&self) -> WorkerCallbacks {
        let map = self.0.clone();
        WorkerCallbacks::new().on_completed(move |job: &Job, _value: &Value| {
            *map.lock().unwrap().entry(job.id().to_owned()).or_default() += 1;
        })
    }

    fn distinct(&self) -> usize {
        self.0.lock().unwrap().len()
    }

    fn twice(&self) -> Vec<(String, u32)> {
        self.0
            .lock()
            .unwrap()
            .iter()
            .filter(|(_, n)| **n > 1)
            .map(|(id, n)| (id.clone(), *n))
            .collect()
    }
}

/// A processor that sleeps `ms` per job.
fn sleeper(
    ms: u64,
) -> impl Fn(Job, JobContext) -> futures::future::BoxFuture<'static, anyhow::Result<Value>>
       + Send
       + Sync
       + 'static {
    move |job: Job, _ctx: JobContext| {
        Box::pin(async move {
            tokio::time::sleep(Duration::from_millis(ms)).await;
            Ok(json!({ "done": job.data_value()["i"] }))
        })
    }
}

async fn current_cell(worker: &SupervisedWorker) -> Option<ActorCell> {
    worker.actor().await.map(|a| a.get_cell())
}

fn lock_manager_of(worker: &ActorCell) -> Option<ActorCell> {
    worker
        .get_children()
        .into_iter()
        .find(|c| c.is_message_type_of::<LockManagerMsg>() == Some(true))
}

/// Waits for a running incarnation whose id differs from `old`.
async fn wait_new_incarnation(
    worker: &SupervisedWorker,
    old: ActorId,
) -> anyhow::Result<ActorCell> {
    let deadline = tokio::time::Instant::now() + LONG;
    loop {
        if let Some(cell) = current_cell(worker).await {
            if cell.get_id() != old && lock_manager_of(&cell).is_some() {
                return Ok(cell);
            }
        }
        anyhow::ensure!(
            tokio::time::Instant::now() < deadline,
            "timed out waiting for the worker to be restarted"
        );
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
}

/// How many `completed` events the queue's stream holds per job id (Redis's own record: one
/// per job means no job was completed twice, whatever the workers' callbacks saw).
async fn completed_events(queue: &str) -> anyhow::Result<HashMap<String, u32>> {
    let mut per_job = HashMap::new();
    for event in read_events(queue).await? {
        if event.event != "completed" {
            continue;
        }
        if let Some((_, id)) = event.fields.iter().find(|(k, _)| k == "jobId") {
            *per_job.entry(id.clone()).or_default() += 1;
        }
    }
    Ok(per_job)
}

async fn assert_each_completed_once(queue: &str, total: usize) -> anyhow::Result<()> {
    let per_job = completed_events(queue).await?;
    assert_eq!(per_job.len(), total, "jobs with a completed event");
    let twice: Vec<_> = per_job.iter().filter(|(_, n)| **n > 1).collect();
    assert!(twice.is_empty(), "completed twice in Redis: {twice:?}");
    Ok(())
}

fn drain_events(rx: &mut broadcast::Receiver<RuntimeEvent>) -> Vec<RuntimeEvent> {
    let mut out = Vec::new();
    while let Ok(event) = rx.try_recv() {
        out.push(event);
    }
    out
}

async fn wait_all_done(queue: &Queue, total: u64) -> anyhow::Result<()> {
    eventually("every job to be completed or failed", LONG, || async {
        match queue.get_job_counts().await {
            Ok(c) => c.completed + c.failed >= total && c.active == 0,
            Err(_) => false,
        }
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn panic_in_processor_fails_the_job_and_never_restarts_the_worker() -> anyhow::Result<()> {
    panics_fail_jobs(JobRunner::Task).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn panic_in_a_job_actor_fails_the_job_and_never_restarts_the_worker() -> anyhow::Result<()> {
    panics_fail_jobs(JobRunner::Actor).await
}

/// 10 000 jobs, every tenth panics: 1 000 failed with the panic message, 9 000 completed, and
/// the same Worker actor throughout (no restart, no supervision event).
async fn panics_fail_jobs(runner: JobRunner) -> anyhow::Result<()> {
    quiet_injected_panics();
    let name = unique_queue("fault-panic");
    let queue = open_queue(&name).await?;
    add_jobs(&queue, 10_000).await?;
    let runtime = start_runtime(SupervisorOptions::default()).await?;
    let mut events = runtime.subscribe();
    let processor = |job: Job, _ctx: JobContext| async move {
        let i = job.data_value()["i"].as_u64().unwrap_or_default();
        if i.is_multiple_of(10) {
            panic!("injected panic for job {i}");
        }
        Ok(json!(i))
    };
    let worker = runtime
        .start_worker(
            &name,
            processor,
            WorkerOptions::new().concurrency(50).job_runner(runner),
        )
        .await?;
    let first = current_cell(&worker)
        .await
        .expect("worker running")
        .get_id();

    wait_all_done(&queue, 10_000).await?;
    let counts = queue.get_job_counts().await?;
    assert_eq!(
        (counts.completed, counts.failed),
        (9_000, 1_000),
        "{counts:?}"
    );
    let failed = queue.get_job("1").await?.expect("job 1 exists");
    assert!(
        failed
            .failed_reason()
            .unwrap_or_default()
            .contains("injected panic"),
        "{:?}",
        failed.failed_reason()
    );

    assert_eq!(current_cell(&worker).await.map(|c| c.get_id()), Some(first));
    assert_eq!(worker.restarts().await?, Some(0));
    let restarts: Vec<_> = drain_events(&mut events)
        .into_iter()
        .filter(|e| !matches!(e, RuntimeEvent::ChildStarted { .. }))
        .collect();
    assert!(
        restarts.is_empty(),
        "unexpected supervision events: {restarts:?}"
    );

    runtime.shutdown(Duration::from_secs(30)).await?;
    queue.close().await?;
    cleanup(&name).await
}

/// Short locks and stalled checks so jobs held by a dead Worker come back within seconds.
fn fast_recovery_options(concurrency: usize) -> WorkerOptions {
    WorkerOptions::new()
        .concurrency(concurrency)
        .lock_duration(Duration::from_secs(2))
        .stalled_interval(Duration::from_millis(500))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lock_manager_crash_restarts_worker_with_a_new_lock_manager() -> anyhow::Result<()> {
    let name = unique_queue("fault-lm");
    let queue = open_queue(&name).await?;
    let total = 400;
    add_jobs(&queue, total).await?;
    let runtime = start_runtime(SupervisorOptions::default()).await?;
    let mut events = runtime.subscribe();
    let completions = Completions::default();
    let spec = runtime
        .worker_spec(&name, sleeper(20), fast_recovery_options(10))
        .callbacks(completions.callbacks());
    let worker = runtime.start_worker_spec(format!("{name}#1"), spec).await?;
    let first = current_cell(&worker).await.expect("worker running");
    let first_lm = lock_manager_of(&first).expect("worker has a lock manager");

    eventually("a third of the jobs to complete", LONG, || async {
        completions.distinct() >= total / 3
    })
    .await?;
    // The fault: the LockManager stops with an error (as if its Redis calls had panicked).
    first_lm.stop(Some("injected lock manager fault".to_owned()));

    let second = wait_new_incarnation(&worker, first.get_id()).await?;
    let second_lm = lock_manager_of(&second).expect("restarted worker has a lock manager");
    assert_ne!(second_lm.get_id(), first_lm.get_id());

    wait_all_done(&queue, total as u64).await?;
    let counts = queue.get_job_counts().await?;
    assert_eq!(
        (counts.completed, counts.failed),
        (total as u64, 0),
        "{counts:?}"
    );
    // A finish batch in flight when the Worker died is recorded by Redis without its callbacks
    // running, so the callback count may be a little short, never doubled.
    assert!(completions.distinct() <= total);
    assert!(
        completions.twice().is_empty(),
        "completed twice: {:?}",
        completions.twice()
    );
    assert_each_completed_once(&name, total).await?;

    let restarted: Vec<_> = drain_events(&mut events)
        .into_iter()
        .filter(|e| matches!(e, RuntimeEvent::ChildRestarted { .. }))
        .collect();
    assert_eq!(restarted.len(), 1, "{restarted:?}");
    match &restarted[0] {
        RuntimeEvent::ChildRestarted { child, reason, .. } => {
            assert_eq!(child, &format!("{name}#1"));
            assert!(reason.contains("lock manager"), "{reason}");
        }
        other => panic!("unexpected {other:?}"),
    }
    assert_eq!(worker.restarts().await?, Some(1));

    runtime.shutdown(Duration::from_secs(30)).await?;
    queue.close().await?;
    cleanup(&name).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn worker_crash_restarts_it_and_stalled_recovery_returns_its_jobs() -> anyhow::Result<()> {
    let name = unique_queue("fault-worker");
    let queue = open_queue(&name).await?;
    let total = 200;
    add_jobs(&queue, total).await?;
    let runtime = start_runtime(SupervisorOptions::default()).await?;
    let completions = Completions::default();
    // Jobs long enough that the crash surely catches some in flight.
    let spec = runtime
        .worker_spec(&name, sleeper(100), fast_recovery_options(10))
        .callbacks(completions.callbacks());
    let worker = runtime.start_worker_spec(format!("{name}#1"), spec).await?;
    let first = current_cell(&worker).await.expect("worker running");

    eventually("a quarter of the jobs to complete", LONG, || async {
        completions.distinct() >= total / 4
    })
    .await?;
    let in_flight = queue
        .get_job_ids(
            &[ractor_bullmq::protocol::state::JobState::Active],
            0,
            -1,
            true,
        )
        .await?;
    assert!(
        !in_flight.is_empty(),
        "the crash should catch jobs in flight"
    );
    first.stop(Some("injected worker crash".to_owned()));

    wait_new_incarnation(&worker, first.get_id()).await?;
    wait_all_done(&queue, total as u64).await?;
    let counts = queue.get_job_counts().await?;
    assert_eq!(
        (counts.completed, counts.failed),
        (total as u64, 0),
        "{counts:?}"
    );
    assert!(
        completions.twice().is_empty(),
        "completed twice: {:?}",
        completions.twice()
    );
    assert_each_completed_once(&name, total).await?;

    // The jobs the crashed Worker held went through stalled recovery.
    let stalled: Vec<String> = read_events(&name)
        .await?
        .into_iter()
        .filter(|e| e.event == "stalled")
        .filter_map(|e| {
            e.fields
                .iter()
                .find(|(k, _)| k == "jobId")
                .map(|(_, v)| v.clone())
        })
        .collect();
    for id in &in_flight {
        let job = queue.get_job(id).await?.expect("job exists");
        assert!(job.finished_on().is_some(), "job {id} not finished");
    }
    assert!(
        in_flight.iter().any(|id| stalled.contains(id)),
        "in flight at the crash: {in_flight:?}; stalled events: {stalled:?}"
    );
    assert_eq!(worker.restarts().await?, Some(1));

    runtime.shutdown(Duration::from_secs(30)).await?;
    // The crashed incarnation's connections were closed too, not leaked.
    eventually("every connection of ours to be closed", LONG, || async {
        named_clients(&name).await.is_ok_and(|c| c.is_empty())
    })
    .await?;
    queue.close().await?;
    cleanup(&name).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn worker_crashing_beyond_max_restarts_makes_the_supervisor_give_up() -> anyhow::Result<()> {
    let name = unique_queue("fault-giveup");
    let queue = open_queue(&name).await?;
    add_jobs(&queue, 50).await?;
    let runtime = start_runtime(
        SupervisorOptions::default()
            .max_restarts(2)
            .period(Duration::from_secs(60)),
    )
    .await?;
    let mut events = runtime.subscribe();
    let spec = runtime.worker_spec(&name, sleeper(50), fast_recovery_options(2));
    let worker = runtime.start_worker_spec(format!("{name}#1"), spec).await?;

    // Two LockManager crashes are restarted; the third exceeds 2 restarts in 60 s.
    for round in 0..3 {
        let cell = current_cell(&worker).await;
        let cell = match cell {
            Some(cell) => cell,
            None => {
                eventually("the worker to run", LONG, || async {
                    current_cell(&worker).await.is_some()
                })
                .await?;
                current_cell(&worker).await.expect("running")
            }
        };
        lock_manager_of(&cell)
            .expect("worker has a lock manager")
            .stop(Some(format!("injected lock manager fault {round}")));
        if round < 2 {
            wait_new_incarnation(&worker, cell.get_id()).await?;
        }
    }

    let workers_sup = format!("{}.workers", runtime.name());
    let mut gave_up = None;
    let deadline = tokio::time::Instant::now() + LONG;
    while gave_up.is_none() && tokio::time::Instant::now() < deadline {
        match tokio::time::timeout(Duration::from_secs(1), events.recv()).await {
            Ok(Ok(event @ RuntimeEvent::SupervisorGaveUp { .. })) => gave_up = Some(event),
            Ok(Ok(_)) | Err(_) => {}
            Ok(Err(e)) => anyhow::bail!("event stream: {e}"),
        }
    }
    match gave_up {
        Some(RuntimeEvent::SupervisorGaveUp {
            supervisor,
            child,
            max_restarts,
            ..
        }) => {
            assert_eq!(supervisor, workers_sup);
            assert_eq!(child, format!("{name}#1"));
            assert_eq!(max_restarts, 2);
        }
        other => panic!("expected SupervisorGaveUp, got {other:?}"),
    }
    // The root restarts the WorkerSupervisor empty: the Worker is gone until started again.
    eventually("the worker supervisor to be back, empty", LONG, || async {
        match runtime.worker_supervisor() {
            Ok(sup) => sup.which_children().await.is_ok_and(|c| c.is_empty()),
            Err(_) => false,
        }
    })
    .await?;
    assert!(worker.actor().await.is_none());
    assert!(runtime.is_running());

    runtime.shutdown(Duration::from_secs(30)).await?;
    queue.close().await?;
    cleanup(&name).await
}
