//! `ractor_bullmq::testing`: processors run without Redis and their outcomes are classified as
//! the Worker classifies them.

use std::time::Duration;

use anyhow::Context as _;
use ractor_bullmq::testing::{run_processor, JobOptions, JobOutcome, TestJob};
use ractor_bullmq::worker::{Job, JobContext};
use ractor_bullmq::{DelayedError, RateLimitError, UnrecoverableError};
use serde_json::{json, Value};

#[tokio::test]
async fn completed_with_the_returned_value_and_sees_the_job() {
    let job = TestJob::new("double", json!({ "n": 21 }))
        .id("job-7")
        .queue("maths")
        .attempts_made(2)
        .opts(JobOptions::new().attempts(5));
    let run = run_processor(
        |job: Job, ctx: JobContext| async move {
            let n = job.data_value()["n"].as_i64().unwrap_or_default();
            Ok(json!({
                "double": n * 2,
                "id": job.id(),
                "queue": job.queue_name(),
                "attempt": ctx.attempt(),
                "attempts": job.opts().attempts,
                "started": job.attempts_started(),
            }))
        },
        job,
    )
    .await;
    assert_eq!(
        run.outcome,
        JobOutcome::Completed(json!({
            "double": 42,
            "id": "job-7",
            "queue": "maths",
            "attempt": 3,
            "attempts": 5,
            "started": 3,
        }))
    );
    assert!(run.progress.is_empty());
    assert!(run.logs.is_empty());
    assert!(run.data_updates.is_empty());
}

#[tokio::test]
async fn an_error_fails_with_its_message_and_cause_chain() {
    let run = run_processor(
        |_job: Job, _ctx: JobContext| async move {
            Err::<Value, _>(anyhow::anyhow!("disk full")).context("writing the invoice")
        },
        TestJob::new("invoice", json!({})),
    )
    .await;
    match run.outcome {
        JobOutcome::Failed { reason, trace } => {
            assert_eq!(reason, "writing the invoice");
            assert!(trace.contains("caused by: disk full"), "trace: {trace}");
        }
        other => panic!("expected Failed, got {other:?}"),
    }
}

#[tokio::test]
async fn unrecoverable_delayed_and_rate_limited_errors_are_classified() {
    let unrecoverable = run_processor(
        |_job: Job, _ctx: JobContext| async move {
            Err::<Value, _>(UnrecoverableError::new("bad address").into())
        },
        TestJob::new("t", json!(null)),
    )
    .await;
    assert!(
        matches!(&unrecoverable.outcome, JobOutcome::Unrecoverable { reason, .. } if reason == "bad address"),
        "{:?}",
        unrecoverable.outcome
    );

    let delayed = run_processor(
        |_job: Job, _ctx: JobContext| async move {
            Err::<Value, _>(DelayedError::new(Duration::from_secs(30)).into())
        },
        TestJob::new("t", json!(null)),
    )
    .await;
    assert_eq!(
        delayed.outcome,
        JobOutcome::Delayed(Duration::from_secs(30))
    );

    let limited = run_processor(
        |_job: Job, _ctx: JobContext| async move {
            Err::<Value, _>(RateLimitError::new(Duration::from_millis(1500)).into())
        },
        TestJob::new("t", json!(null)),
    )
    .await;
    assert_eq!(
        limited.outcome,
        JobOutcome::RateLimited(Duration::from_millis(1500))
    );
}

#[tokio::test]
async fn a_panic_is_caught_with_its_message_and_keeps_what_was_recorded() {
    let run = run_processor(
        |job: Job, ctx: JobContext| async move {
            ctx.log("about to fail").await?;
            if job.name() == "explode" {
                panic!("kaboom {}", job.id());
            }
            Ok(Value::Null)
        },
        TestJob::new("explode", json!({})).id("9"),
    )
    .await;
    assert_eq!(
        run.outcome,
        JobOutcome::Panicked {
            message: "kaboom 9".to_string()
        }
    );
    assert_eq!(run.logs, ["about to fail"]);
}

#[tokio::test]
async fn progress_logs_and_data_updates_are_recorded_in_order() {
    let run = run_processor(
        |_job: Job, ctx: JobContext| async move {
            ctx.update_progress(10).await?;
            let kept = ctx.log("step 1").await?;
            ctx.update_progress(json!({ "step": 2 })).await?;
            let kept_after = ctx.log("step 2").await?;
            ctx.update_data(json!({ "checkpoint": 2 })).await?;
            Ok(json!([kept, kept_after]))
        },
        // keepLogs 1: the returned count is what Redis would keep; all lines are recorded.
        TestJob::new("steps", json!({})).opts(JobOptions::new().keep_logs(1)),
    )
    .await;
    assert_eq!(run.outcome, JobOutcome::Completed(json!([1, 1])));
    assert_eq!(run.progress, [json!(10), json!({ "step": 2 })]);
    assert_eq!(run.logs, ["step 1", "step 2"]);
    assert_eq!(run.data_updates, [json!({ "checkpoint": 2 })]);
}

/// A processor written as a `Processor` impl (not a closure) runs the same way.
struct Echo;

impl ractor_bullmq::worker::Processor for Echo {
    fn process(
        &self,
        job: Job,
        _context: JobContext,
    ) -> futures::future::BoxFuture<'static, anyhow::Result<Value>> {
        Box::pin(async move { Ok(job.data_value().clone()) })
    }
}

#[tokio::test]
async fn a_processor_trait_impl_runs_too() {
    let run = run_processor(Echo, TestJob::new("echo", json!({ "hi": 1 }))).await;
    assert_eq!(run.outcome, JobOutcome::Completed(json!({ "hi": 1 })));
}
