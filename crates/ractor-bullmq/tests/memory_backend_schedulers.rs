//! The real Worker keeps job schedulers alive on the in-memory backend, no Redis running: each
//! started iteration creates the next one, a limit ends the series, removal stops it (issue 12).

use std::sync::{Arc, Mutex};
use std::time::Duration;

use bullmq_backend::memory::MemoryBackend;
use bullmq_backend::now_ms;
use ractor_bullmq::scheduler::{Repeat, SchedulerTemplate};
use ractor_bullmq::worker::{Job, JobContext};
use ractor_bullmq::{Queue, QueueOptions, Worker, WorkerArgs, WorkerOptions};
use serde_json::Value;

const EVERY: u64 = 150;
const LONG: Duration = Duration::from_secs(20);

/// Iteration ids and when they started, in start order.
type Runs = Arc<Mutex<Vec<(String, u64)>>>;

async fn start(
    backend: &MemoryBackend,
    queue: &str,
) -> (Runs, ractor::ActorRef<ractor_bullmq::worker::WorkerMsg>) {
    let runs: Runs = Arc::default();
    let seen = runs.clone();
    let processor = move |job: Job, _ctx: JobContext| {
        let seen = seen.clone();
        async move {
            seen.lock().unwrap().push((job.id().to_owned(), now_ms()));
            Ok(Value::Null)
        }
    };
    let args = WorkerArgs::open(
        backend,
        queue,
        processor,
        WorkerOptions::new().concurrency(2),
    )
    .await
    .unwrap();
    let (actor, _) = ractor::Actor::spawn(None, Worker, args).await.unwrap();
    (runs, actor)
}

async fn until(runs: &Runs, n: usize) {
    let deadline = tokio::time::Instant::now() + LONG;
    while runs.lock().unwrap().len() < n {
        assert!(
            tokio::time::Instant::now() < deadline,
            "only {:?}",
            runs.lock().unwrap()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn millis_of(id: &str) -> u64 {
    id.rsplit(':').next().unwrap().parse().unwrap()
}

#[tokio::test]
async fn an_every_scheduler_keeps_running_on_its_grid() {
    let backend = MemoryBackend::new();
    let queue = Queue::with_backend("sched", &backend, QueueOptions::default())
        .await
        .unwrap();
    queue
        .upsert_job_scheduler(
            "tick",
            Repeat::every(Duration::from_millis(EVERY)),
            SchedulerTemplate::new("tick"),
        )
        .await
        .unwrap()
        .expect("a first iteration");
    let (runs, worker) = start(&backend, "sched").await;
    until(&runs, 6).await;
    let runs = runs.lock().unwrap().clone();
    for pair in runs.windows(2) {
        let (a, b) = (millis_of(&pair[0].0), millis_of(&pair[1].0));
        assert!(b > a && (b - a) % EVERY == 0, "{runs:?}");
    }
    for (id, started) in &runs {
        assert!(
            *started >= millis_of(id),
            "{id} ran before its time: {runs:?}"
        );
    }
    let record = queue.get_job_scheduler("tick").await.unwrap().unwrap();
    assert!(record.iteration_count.unwrap() >= 6, "{record:?}");
    worker.stop(None);
}

#[tokio::test]
async fn a_limit_ends_the_series_and_removal_stops_it() {
    let backend = MemoryBackend::new();
    let queue = Queue::with_backend("sched", &backend, QueueOptions::default())
        .await
        .unwrap();
    let every = Repeat::every(Duration::from_millis(EVERY));
    queue
        .upsert_job_scheduler("three", every.clone().limit(3), SchedulerTemplate::new("t"))
        .await
        .unwrap();
    queue
        .upsert_job_scheduler("removed", every, SchedulerTemplate::new("r"))
        .await
        .unwrap();
    let (runs, worker) = start(&backend, "sched").await;
    until(&runs, 4).await;
    assert!(queue.remove_job_scheduler("removed").await.unwrap());
    assert!(!queue.remove_job_scheduler("removed").await.unwrap());
    tokio::time::sleep(Duration::from_millis(10 * EVERY)).await;
    let count = |prefix: &str| {
        let runs = runs.lock().unwrap();
        runs.iter().filter(|(id, _)| id.starts_with(prefix)).count()
    };
    assert_eq!(count("repeat:three:"), 3, "{:?}", runs.lock().unwrap());
    // Removal deleted the delayed pending iteration: nothing of it runs any more.
    let before = count("repeat:removed:");
    tokio::time::sleep(Duration::from_millis(4 * EVERY)).await;
    assert_eq!(
        before,
        count("repeat:removed:"),
        "{:?}",
        runs.lock().unwrap()
    );
    assert_eq!(queue.get_job_schedulers_count().await.unwrap(), 1);
    worker.stop(None);
}
