//! The real Worker on the in-memory backend, no Redis running: retries, a final failure with
//! `retries-exhausted`, and stalled recovery, observed through the backend's queue store and
//! event log (issue 11, item 2).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bullmq_backend::{Backend, FetchRequest, JobEnd, WorkerStoreOptions};
use ractor::ActorRef;
use ractor_bullmq::worker::{Job, JobContext, WorkerMsg};
use ractor_bullmq::{Worker, WorkerArgs, WorkerOptions};
use serde_json::{json, Value};

mod memory_queue;
use memory_queue::Fixture;

const LONG: Duration = Duration::from_secs(20);

impl Fixture {
    async fn spawn(
        &self,
        processor: impl ractor_bullmq::worker::Processor,
        options: WorkerOptions,
    ) -> ActorRef<WorkerMsg> {
        let args = WorkerArgs::open(&self.backend, self.keys.name(), processor, options)
            .await
            .unwrap();
        let (actor, _join) = ractor::Actor::spawn(None, Worker, args).await.unwrap();
        actor
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

    async fn event_names(&self) -> Vec<String> {
        self.events
            .read("0-0", Duration::from_millis(10), 100_000)
            .await
            .unwrap()
            .into_iter()
            .map(|e| e.fields[0].1.clone())
            .collect()
    }
}

async fn close(actor: &ActorRef<WorkerMsg>) {
    let _ = ractor::call!(actor, |reply| WorkerMsg::Close {
        force: false,
        reply
    });
}

fn options() -> WorkerOptions {
    WorkerOptions::new().drain_delay(Duration::from_millis(100))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retries_then_completes() {
    let f = Fixture::new("retries").await;
    let id = f.add(r#"{"attempts":3}"#).await;
    let calls = Arc::new(AtomicUsize::new(0));
    let seen = calls.clone();
    let processor = move |job: Job, _ctx: JobContext| {
        let seen = seen.clone();
        async move {
            let call = seen.fetch_add(1, Ordering::SeqCst);
            assert_eq!(job.attempts_made() as usize, call, "attempts made so far");
            if call < 2 {
                anyhow::bail!("attempt {call} fails");
            }
            Ok::<Value, anyhow::Error>(json!({"done": call}))
        }
    };
    let worker = f.spawn(processor, options()).await;
    assert_eq!(
        f.end(&id).await,
        JobEnd::Completed(Some(r#"{"done":2}"#.into()))
    );
    assert_eq!(calls.load(Ordering::SeqCst), 3);
    let record = f.queue.get_job(&id).await.unwrap().unwrap();
    assert_eq!((record.attempts_made, record.attempts_started), (3, 3));
    assert_eq!(record.failed_reason.as_deref(), Some("attempt 1 fails"));
    let names = f.event_names().await;
    assert_eq!(
        names.iter().filter(|n| *n == "active").count(),
        3,
        "{names:?}"
    );
    assert!(names.contains(&"completed".to_owned()), "{names:?}");
    assert!(
        !names.contains(&"retries-exhausted".to_owned()),
        "{names:?}"
    );
    close(&worker).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fails_for_good_when_attempts_run_out() {
    let f = Fixture::new("exhausted").await;
    let id = f.add(r#"{"attempts":2}"#).await;
    let processor =
        |_job: Job, _ctx: JobContext| async move { Err::<Value, _>(anyhow::anyhow!("always")) };
    let worker = f.spawn(processor, options()).await;
    assert_eq!(f.end(&id).await, JobEnd::Failed(Some("always".into())));
    let record = f.queue.get_job(&id).await.unwrap().unwrap();
    assert_eq!(record.attempts_made, 2);
    let names = f.event_names().await;
    assert!(names.contains(&"failed".to_owned()), "{names:?}");
    assert!(names.contains(&"retries-exhausted".to_owned()), "{names:?}");
    close(&worker).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn recovers_a_job_whose_worker_died() {
    let f = Fixture::new("stalled").await;
    let id = f.add("{}").await;
    // A worker takes the job and dies: its lock expires unrenewed.
    let dead = f
        .backend
        .worker_store(&f.id, &WorkerStoreOptions::default())
        .await
        .unwrap();
    let taken = dead
        .fetch_batch(&FetchRequest::new(1, "dead", Duration::from_millis(200)))
        .await
        .unwrap();
    assert_eq!(taken.jobs.len(), 1);
    dead.close().await;

    let processor = |job: Job, _ctx: JobContext| async move {
        Ok::<Value, anyhow::Error>(json!({"stalled": job.stalled_counter()}))
    };
    let worker = f
        .spawn(
            processor,
            options()
                .stalled_interval(Duration::from_millis(300))
                .lock_duration(Duration::from_secs(5)),
        )
        .await;
    assert_eq!(
        f.end(&id).await,
        JobEnd::Completed(Some(r#"{"stalled":1}"#.into()))
    );
    let names = f.event_names().await;
    assert!(names.contains(&"stalled".to_owned()), "{names:?}");
    close(&worker).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn queue_and_queue_events_see_the_worker_finish() {
    use ractor_bullmq::protocol::JobOptions;
    use ractor_bullmq::{JobFinished, Queue, QueueEventsHandle, QueueEventsOptions, QueueOptions};

    let f = Fixture::new("handles").await;
    let backend: Arc<dyn Backend> = Arc::new(f.backend.clone());
    let queue = Queue::with_backend("handles", backend.as_ref(), QueueOptions::default())
        .await
        .unwrap();
    let events =
        QueueEventsHandle::start(QueueEventsOptions::with_backend("handles", backend.clone()))
            .await
            .unwrap();
    let processor = |job: Job, _ctx: JobContext| async move {
        if job.attempts_made() == 0 {
            anyhow::bail!("first attempt fails");
        }
        Ok::<Value, anyhow::Error>(json!({"ok": true}))
    };
    let worker = f.spawn(processor, options()).await;
    let job = queue
        .add_job("greet", json!({"to": "you"}), JobOptions::new().attempts(2))
        .await
        .unwrap();
    let finished = job.wait_until_finished(&events, LONG).await.unwrap();
    assert_eq!(finished, JobFinished::Completed(json!({"ok": true})));
    close(&worker).await;
    events.close().await;
    queue.close().await.unwrap();
}

/// `Queue::get_workers` goes through the seam: on the memory backend it lists a running
/// Worker by its name (and its Node-style connection name) until the Worker closes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn get_workers_lists_a_running_worker() {
    let f = Fixture::new("get-workers").await;
    let queue = ractor_bullmq::Queue::with_backend(
        f.keys.name(),
        &f.backend,
        ractor_bullmq::QueueOptions::default(),
    )
    .await
    .unwrap();
    assert_eq!(queue.get_workers_count().await.unwrap(), 0);
    let processor = |_job: Job, _ctx: JobContext| async move { Ok::<_, anyhow::Error>(json!(1)) };
    let actor = f.spawn(processor, options().name("lister")).await;
    let workers = queue.get_workers().await.unwrap();
    assert_eq!(workers.len(), 1, "{workers:?}");
    assert_eq!(workers[0].worker_name.as_deref(), Some("lister"));
    assert_eq!(
        workers[0].raw_name,
        f.keys.worker_client_name(Some("lister"))
    );
    assert_eq!(workers[0].fields["name"], "get-workers");
    close(&actor).await;
    let deadline = tokio::time::Instant::now() + LONG;
    while queue.get_workers_count().await.unwrap() != 0 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the closed worker stays listed"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    queue.close().await.unwrap();
}
