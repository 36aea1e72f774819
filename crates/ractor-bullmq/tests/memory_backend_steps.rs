//! Step jobs on the real Worker with the in-memory backend, no Redis: a parent adds children
//! from its processor, waits for them (`move_to_waiting_children`), reads their values, goes
//! back to wait (`move_to_wait`) and completes; the Worker records nothing for the moved
//! attempts (no `completed` / `failed` for them, no failure callback) and reports each move
//! as `bullmq.job.moved`. Also `testing::run_processor` on a processor that moves its job.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use bullmq_backend::memory::MemoryBackend;
use bullmq_backend::{Backend, EventStream, JobEnd};
use bullmq_protocol::QueueId;
use ractor::ActorRef;
use ractor_bullmq::telemetry::event_names as ev;
use ractor_bullmq::telemetry::testing::CapturedEvents;
use ractor_bullmq::worker::{FailedJob, Job, JobContext, WorkerMsg};
use ractor_bullmq::{
    Queue, QueueOptions, WaitingChildrenError, WaitingError, Worker, WorkerArgs, WorkerCallbacks,
    WorkerOptions,
};
use serde_json::{json, Value};

const LONG: Duration = Duration::from_secs(20);

async fn process(queue: Queue, job: Job, ctx: JobContext) -> anyhow::Result<Value> {
    if job.name() == "child" {
        return Ok(json!({ "value": job.data_value()["n"].as_i64().unwrap_or_default() }));
    }
    let step = job.data_value()["step"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    match step.as_str() {
        "start" => {
            for n in 1..=3 {
                queue
                    .add("child", json!({ "n": n }))
                    .parent(ctx.parent_ref())
                    .await?;
            }
            ctx.update_data(json!({ "step": "wait" })).await?;
            assert!(
                ctx.move_to_waiting_children().await?,
                "three children pending"
            );
            Err(WaitingChildrenError.into())
        }
        "wait" => {
            assert!(!ctx.move_to_waiting_children().await?, "children done");
            let values = ctx.get_children_values::<Value>().await?;
            let total: i64 = values.values().filter_map(|v| v["value"].as_i64()).sum();
            ctx.update_data(json!({ "step": "finish", "total": total }))
                .await?;
            ctx.move_to_wait().await?;
            Err(WaitingError.into())
        }
        _ => Ok(json!({ "total": job.data_value()["total"] })),
    }
}

async fn end(queue: &Queue, id: &str) -> JobEnd {
    let deadline = tokio::time::Instant::now() + LONG;
    loop {
        let state = queue.get_job_state(id).await.unwrap();
        if matches!(
            state,
            bullmq_protocol::state::JobState::Completed | bullmq_protocol::state::JobState::Failed
        ) {
            let job = queue.get_job(id).await.unwrap().expect("job");
            return JobEnd::Completed(job.returnvalue().map(Value::to_string));
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "job {id} never finished ({state:?})"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

// On the current thread, so the telemetry capture (a thread-local subscriber) sees the Worker.
#[tokio::test]
async fn a_step_job_waits_for_its_children_and_completes_with_their_values() {
    let telemetry = CapturedEvents::new();
    let _t = telemetry.set_default();
    let backend = MemoryBackend::new();
    let keys = QueueId::new("bull", "steps");
    let queue = Queue::with_backend("steps", &backend, QueueOptions::default())
        .await
        .unwrap();
    let events: Arc<dyn EventStream> = backend.event_stream(&keys).await.unwrap();
    let parent = queue
        .add("report", json!({ "step": "start" }))
        .await
        .unwrap();

    let failures: Arc<Mutex<Vec<String>>> = Arc::default();
    let seen = failures.clone();
    let callbacks = WorkerCallbacks::new().on_failed(move |job: &FailedJob| {
        seen.lock().unwrap().push(job.id.clone());
    });
    let producer = queue.clone();
    let processor = move |job: Job, ctx: JobContext| process(producer.clone(), job, ctx);
    let options = WorkerOptions::new()
        .concurrency(2)
        .drain_delay(Duration::from_millis(100));
    let args = WorkerArgs::open(&backend, "steps", processor, options)
        .await
        .unwrap()
        .callbacks(callbacks);
    let (worker, _join): (ActorRef<WorkerMsg>, _) =
        ractor::Actor::spawn(None, Worker, args).await.unwrap();

    assert_eq!(
        end(&queue, parent.id()).await,
        JobEnd::Completed(Some(r#"{"total":6}"#.into()))
    );
    let _ = ractor::call!(worker, |reply| WorkerMsg::Close {
        force: false,
        reply
    });
    assert!(failures.lock().unwrap().is_empty(), "{failures:?}");
    let stored = queue.get_job(parent.id()).await.unwrap().unwrap();
    assert_eq!(stored.attempts_made(), 1, "only the completion counts");
    assert_eq!(stored.attempts_started(), 3);

    let parent_events: Vec<String> = events
        .read("0-0", Duration::from_millis(10), 100_000)
        .await
        .unwrap()
        .into_iter()
        .filter(|e| {
            e.fields
                .iter()
                .any(|(k, v)| k == "jobId" && v == parent.id())
        })
        .map(|e| {
            let prev = e
                .fields
                .iter()
                .find(|(k, _)| k == "prev")
                .map(|(_, v)| v.as_str());
            format!("{}:{}", e.fields[0].1, prev.unwrap_or(""))
        })
        .collect();
    assert_eq!(
        parent_events,
        [
            "added:",
            "waiting:",
            "active:waiting",
            "waiting-children:active",
            "waiting:waiting-children",
            "active:waiting",
            "waiting:active",
            "active:waiting",
            "completed:active",
        ]
    );
    let moves: Vec<_> = telemetry
        .named(ev::JOB_MOVED)
        .iter()
        .map(|e| {
            (
                e.field("job.id").unwrap_or_default().to_owned(),
                e.field("to").unwrap_or_default().to_owned(),
            )
        })
        .collect();
    let id = parent.id().to_owned();
    assert_eq!(
        moves,
        [(id.clone(), "waiting-children".into()), (id, "wait".into())]
    );
    assert_eq!(
        telemetry.named(ev::JOB_COMPLETED).len(),
        4,
        "3 children and the parent"
    );
    assert!(telemetry.named(ev::JOB_FAILED).is_empty());
    assert!(telemetry.named(ev::JOB_RETRIED).is_empty());
    queue.close().await.unwrap();
}

#[tokio::test]
async fn run_processor_reports_a_move_to_wait_and_no_children_to_wait_for() {
    use ractor_bullmq::testing::{run_processor, JobOutcome, TestJob};

    let waits = |_job: Job, ctx: JobContext| async move {
        assert!(
            !ctx.move_to_waiting_children().await?,
            "a test job has no children"
        );
        assert_eq!(ctx.token(), "test-token");
        assert_eq!(ctx.parent_ref().job_key(), "bull:test:1");
        ctx.move_to_wait().await?;
        Err::<Value, _>(WaitingError.into())
    };
    let run = run_processor(waits, TestJob::new("step", json!({}))).await;
    assert_eq!(run.outcome, JobOutcome::MovedToWait);
}
