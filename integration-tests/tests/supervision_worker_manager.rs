//! WorkerManager under the Runtime against a real Redis: scaling by message (Node's
//! `getWorkers` sees the workers), graceful and forced scale-down with jobs in flight, and an
//! autoscaling policy following the queue's length within its bounds.

mod common;

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::*;
use ractor_bullmq::manager::{Autoscale, WorkerManagerOptions};
use ractor_bullmq::protocol::options::JobOptions;
use ractor_bullmq::runtime::{Runtime, RuntimeOptions};
use ractor_bullmq::worker::{Job, JobContext};
use ractor_bullmq::{ConnectionConfig, Queue, WorkerCallbacks, WorkerOptions};
use serde_json::{json, Value};

const LONG: Duration = Duration::from_secs(120);

async fn start_runtime() -> anyhow::Result<Runtime> {
    let options = RuntimeOptions::default()
        .connection(ConnectionConfig::from_url(&redis_url())?)
        .worker_shutdown(Duration::from_secs(30));
    Ok(Runtime::start(options).await?)
}

/// The Worker supervisor's children: (child id, actor id).
async fn supervised_workers(
    runtime: &Runtime,
) -> anyhow::Result<Vec<(String, Option<ractor::ActorId>)>> {
    Ok(runtime
        .worker_supervisor()?
        .which_children()
        .await?
        .into_iter()
        .map(|c| (c.id, c.cell.map(|x| x.get_id())))
        .collect())
}

async fn add_jobs(queue: &Queue, n: usize) -> anyhow::Result<()> {
    queue
        .add_bulk((0..n).map(|i| ("job", json!({ "i": i }), JobOptions::default())))
        .await?;
    Ok(())
}

/// A processor sleeping `ms` and counting how many jobs run at once.
#[derive(Clone, Default)]
struct Probe {
    running: Arc<AtomicUsize>,
    started: Arc<AtomicUsize>,
    completed: Arc<Mutex<HashMap<String, u32>>>,
}

impl Probe {
    fn processor(
        &self,
        ms: u64,
    ) -> impl Fn(Job, JobContext) -> futures::future::BoxFuture<'static, anyhow::Result<Value>>
           + Send
           + Sync
           + 'static {
        let probe = self.clone();
        move |_job: Job, _ctx: JobContext| {
            let probe = probe.clone();
            Box::pin(async move {
                probe.running.fetch_add(1, Ordering::SeqCst);
                probe.started.fetch_add(1, Ordering::SeqCst);
                tokio::time::sleep(Duration::from_millis(ms)).await;
                probe.running.fetch_sub(1, Ordering::SeqCst);
                Ok(json!("ok"))
            })
        }
    }

    fn callbacks(&self) -> WorkerCallbacks {
        let map = self.completed.clone();
        WorkerCallbacks::new().on_completed(move |job: &Job, _: &Value| {
            *map.lock().unwrap().entry(job.id().to_owned()).or_default() += 1;
        })
    }

    fn completed_twice(&self) -> usize {
        self.completed
            .lock()
            .unwrap()
            .values()
            .filter(|n| **n > 1)
            .count()
    }
}

async fn node_workers(queue: &str) -> anyhow::Result<usize> {
    let counts = run_node("counts.js", &json!({ "queue": queue })).await?;
    Ok(counts["workers"].as_array().map_or(0, Vec::len))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scale_up_and_graceful_scale_down_let_active_jobs_finish() -> anyhow::Result<()> {
    let name = unique_queue("mgr-scale");
    let queue = open_queue(&name).await?;
    let runtime = start_runtime().await?;
    let probe = Probe::default();
    // The manager's spec carries the callbacks; the runtime's helper builds it.
    let spec = runtime
        .worker_spec(
            &name,
            probe.processor(1_500),
            WorkerOptions::new().concurrency(2).name("mgr"),
        )
        .callbacks(probe.callbacks());
    let manager = runtime
        .worker_manager_spec(spec, WorkerManagerOptions::new().workers(1))
        .await?;
    assert_eq!(manager.worker_count().await?, 1);
    assert_eq!(manager.scale_up(3).await?, 4);
    let ids: Vec<String> = manager
        .workers()
        .await?
        .iter()
        .map(|w| w.id().to_owned())
        .collect();
    assert_eq!(ids, [1, 2, 3, 4].map(|n| format!("{name}#{n}")));
    if node_available() {
        assert_eq!(node_workers(&name).await?, 4, "Node getWorkers");
    }

    // 8 slots, 8 jobs of 1.5 s: every worker is busy when two of them are stopped.
    add_jobs(&queue, 8).await?;
    eventually("all 8 jobs to be running", LONG, || async {
        probe.running.load(Ordering::SeqCst) == 8
    })
    .await?;
    assert_eq!(manager.scale_down(2).await?, 2);
    let ids: Vec<String> = manager
        .workers()
        .await?
        .iter()
        .map(|w| w.id().to_owned())
        .collect();
    assert_eq!(ids, [1, 2].map(|n| format!("{name}#{n}")));

    eventually("the 8 jobs to complete", LONG, || async {
        queue.get_job_counts().await.is_ok_and(|c| c.completed == 8)
    })
    .await?;
    let counts = queue.get_job_counts().await?;
    assert_eq!(
        (counts.failed, counts.active, counts.waiting),
        (0, 0, 0),
        "{counts:?}"
    );
    // Each job ran once: none was cancelled and re-run after stalled recovery.
    assert_eq!(probe.started.load(Ordering::SeqCst), 8);
    assert_eq!(probe.completed_twice(), 0);
    eventually(
        "the stopped workers to leave the supervisor",
        LONG,
        || async {
            runtime
                .worker_supervisor()
                .expect("running")
                .which_children()
                .await
                .is_ok_and(|c| c.len() == 2)
        },
    )
    .await?;
    if node_available() {
        assert_eq!(
            node_workers(&name).await?,
            2,
            "Node getWorkers after scale down"
        );
    }

    runtime.shutdown(Duration::from_secs(30)).await?;
    queue.close().await?;
    cleanup(&name).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forced_scale_down_leaves_jobs_to_stalled_recovery_and_none_is_lost() -> anyhow::Result<()>
{
    let name = unique_queue("mgr-force");
    let queue = open_queue(&name).await?;
    let runtime = start_runtime().await?;
    let probe = Probe::default();
    let options = WorkerOptions::new()
        .concurrency(2)
        .lock_duration(Duration::from_secs(2))
        .stalled_interval(Duration::from_millis(500));
    let spec_processor = probe.processor(1_000);
    let manager = runtime
        .worker_manager(
            &name,
            spec_processor,
            options,
            WorkerManagerOptions::new().workers(2),
        )
        .await?;
    add_jobs(&queue, 4).await?;
    eventually("all 4 jobs to be running", LONG, || async {
        probe.running.load(Ordering::SeqCst) == 4
    })
    .await?;
    assert_eq!(manager.scale_down_force(1).await?, 1);
    eventually("the 4 jobs to complete", LONG, || async {
        queue.get_job_counts().await.is_ok_and(|c| c.completed == 4)
    })
    .await?;
    let counts = queue.get_job_counts().await?;
    assert_eq!((counts.failed, counts.active), (0, 0), "{counts:?}");
    // The two cancelled jobs ran again on the remaining worker.
    assert_eq!(probe.started.load(Ordering::SeqCst), 6);

    runtime.shutdown(Duration::from_secs(30)).await?;
    queue.close().await?;
    cleanup(&name).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn autoscale_follows_queue_length_within_bounds() -> anyhow::Result<()> {
    let name = unique_queue("mgr-auto");
    let queue = open_queue(&name).await?;
    let runtime = start_runtime().await?;
    let probe = Probe::default();
    let max_seen = Arc::new(AtomicUsize::new(0));
    let seen = max_seen.clone();
    // One worker per 20 waiting jobs, between 1 and 4.
    let autoscale = Autoscale::new(Duration::from_millis(200), 1, 4, move |input| {
        seen.fetch_max(input.current_workers, Ordering::SeqCst);
        (input.waiting as usize).div_ceil(20)
    });
    let manager = runtime
        .worker_manager(
            &name,
            probe.processor(50),
            WorkerOptions::new().concurrency(1),
            WorkerManagerOptions::new().workers(3).autoscale(autoscale),
        )
        .await?;
    // Idle queue: scaled down to the minimum.
    eventually("an idle queue to be served by 1 worker", LONG, || async {
        manager.worker_count().await.is_ok_and(|n| n == 1)
    })
    .await?;

    add_jobs(&queue, 400).await?;
    eventually(
        "a long queue to be served by the maximum, 4",
        LONG,
        || async { manager.worker_count().await.is_ok_and(|n| n == 4) },
    )
    .await?;
    eventually("the queue to drain", LONG, || async {
        queue
            .get_job_counts()
            .await
            .is_ok_and(|c| c.completed == 400)
    })
    .await?;
    eventually("back to 1 worker once drained", LONG, || async {
        manager.worker_count().await.is_ok_and(|n| n == 1)
    })
    .await?;
    assert!(max_seen.load(Ordering::SeqCst) <= 4, "never above max");
    let counts = queue.get_job_counts().await?;
    assert_eq!(counts.failed, 0);

    runtime.shutdown(Duration::from_secs(30)).await?;
    queue.close().await?;
    cleanup(&name).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restarted_manager_adopts_its_running_workers() -> anyhow::Result<()> {
    let name = unique_queue("mgr-crash");
    let runtime = start_runtime().await?;
    let probe = Probe::default();
    let manager = runtime
        .worker_manager(
            &name,
            probe.processor(10),
            WorkerOptions::new(),
            WorkerManagerOptions::new().workers(3),
        )
        .await?;
    assert_eq!(manager.worker_count().await?, 3);
    let before = supervised_workers(&runtime).await?;

    // The fault: the manager actor stops with an error; the root restarts it.
    let old = manager.actor().await?;
    old.stop(Some("injected manager fault".to_owned()));
    eventually("a new manager incarnation", LONG, || async {
        manager
            .actor()
            .await
            .is_ok_and(|a| a.get_id() != old.get_id())
    })
    .await?;
    // It adopted the same three Workers (same ids, same actors) rather than starting more.
    assert_eq!(manager.worker_count().await?, 3);
    let after = supervised_workers(&runtime).await?;
    assert_eq!(before, after);
    // And numbering continues after them.
    assert_eq!(manager.scale_up(1).await?, 4);
    let ids: Vec<String> = manager
        .workers()
        .await?
        .iter()
        .map(|w| w.id().to_owned())
        .collect();
    assert_eq!(ids.last(), Some(&format!("{name}#4")));

    runtime.shutdown(Duration::from_secs(30)).await?;
    cleanup(&name).await
}
