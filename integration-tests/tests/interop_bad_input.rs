//! Bad input never reaches Redis: every invalid option is refused with a typed error and leaves
//! the keyspace untouched, and Node BullMQ 6.7.0 refuses the same options. An unreachable Redis
//! gives a clear connect error, not a hang.

mod common;

use std::time::{Duration, Instant};

use common::*;
use ractor_bullmq::protocol::options::JobOptions;
use ractor_bullmq::protocol::ValidationError;
use ractor_bullmq::{ConnectionConfig, Queue, QueueError, QueueOptions};
use serde_json::{json, Value as Json};

/// `(case, data, Node-style opts, does Node refuse it too)`.
fn invalid_cases() -> Vec<(&'static str, Json, Json, bool)> {
    vec![
        ("integer job id", json!({}), json!({"jobId": "42"}), true),
        ("zero job id", json!({}), json!({"jobId": "0"}), true),
        (
            "job id with one colon",
            json!({}),
            json!({"jobId": "a:b"}),
            true,
        ),
        (
            "priority above the limit",
            json!({}),
            json!({"priority": 2_097_153}),
            true,
        ),
        (
            "data over sizeLimit",
            json!({"text": "x".repeat(100)}),
            json!({"sizeLimit": 10}),
            true,
        ),
        (
            "two parent-failure policies",
            json!({}),
            json!({"failParentOnFailure": true, "continueParentOnFailure": true}),
            true,
        ),
        (
            "backoff jitter above 1",
            json!({}),
            json!({"attempts": 2, "backoff": {"type": "fixed", "delay": 10, "jitter": 1.5}}),
            false,
        ),
        // Our own check: the delayed score must stay exact in a Redis double.
        (
            "delay beyond the score range",
            json!({}),
            json!({"delay": 9_000_000_000_000_000u64}),
            false,
        ),
    ]
}

fn options(opts: &Json) -> JobOptions {
    serde_json::from_value(opts.clone()).expect("options parse (they are invalid, not malformed)")
}

#[tokio::test]
async fn every_invalid_option_is_a_typed_error_and_writes_nothing() -> anyhow::Result<()> {
    let name = unique_queue("bad-input");
    let queue = open_queue(&name).await?;
    let before = queue_keys(&name).await?;

    for (case, data, opts, _) in invalid_cases() {
        let err = queue
            .add("bad", &data)
            .opts(options(&opts))
            .await
            .expect_err(case);
        assert!(
            matches!(err, QueueError::Validation(_)),
            "{case}: expected QueueError::Validation, got {err:?}"
        );
        assert_eq!(queue_keys(&name).await?, before, "{case}: keys changed");

        // In a bulk add one bad job stops the whole batch before anything is written.
        let batch = vec![
            ("good", json!({}), JobOptions::new()),
            ("bad", data.clone(), options(&opts)),
        ];
        let err = queue.add_bulk(batch).await.expect_err(case);
        assert!(
            matches!(err, QueueError::Validation(_)),
            "{case} (bulk): {err:?}"
        );
        assert_eq!(
            queue_keys(&name).await?,
            before,
            "{case} (bulk): keys changed"
        );
    }
    assert_eq!(queue.get_job_counts().await?.pending(), 0);
    cleanup(&name).await?;
    Ok(())
}

#[tokio::test]
async fn the_error_kinds_name_the_problem() -> anyhow::Result<()> {
    let name = unique_queue("bad-input-kinds");
    let queue = open_queue(&name).await?;
    let err = queue
        .add("x", json!({}))
        .job_id("17")
        .await
        .expect_err("integer id");
    assert!(
        matches!(
            err,
            QueueError::Validation(ValidationError::JobIdInteger { .. })
        ),
        "{err:?}"
    );
    let err = queue
        .add("x", json!({}))
        .priority(3_000_000)
        .await
        .expect_err("priority");
    assert!(
        matches!(
            err,
            QueueError::Validation(ValidationError::PriorityOutOfRange { .. })
        ),
        "{err:?}"
    );
    let err = queue
        .add("x", json!({"big": "y".repeat(64)}))
        .opts(JobOptions::new().size_limit(8))
        .await
        .expect_err("size");
    assert!(
        matches!(
            err,
            QueueError::Validation(ValidationError::SizeLimitExceeded { .. })
        ),
        "{err:?}"
    );
    cleanup(&name).await?;
    Ok(())
}

#[tokio::test]
async fn node_refuses_the_same_options() -> anyhow::Result<()> {
    if !node_available() {
        return Ok(());
    }
    let name = unique_queue("bad-input-node");
    for (case, data, opts, node_refuses) in invalid_cases() {
        if !node_refuses {
            continue;
        }
        let outcome = run_node(
            "add_jobs.js",
            &json!({"queue": name, "jobs": [{"name": "bad", "data": data, "opts": opts}]}),
        )
        .await;
        assert!(
            outcome.is_err(),
            "Node accepted the {case} case: {outcome:?}"
        );
    }
    // Node opens the queue (meta) before refusing; nothing else may exist.
    let keys = queue_keys(&name).await?;
    assert!(
        keys.iter().all(|k| k.ends_with(":meta")),
        "Node wrote more than meta: {keys:?}"
    );
    cleanup(&name).await?;
    Ok(())
}

#[tokio::test]
async fn unreachable_redis_is_a_connect_error_within_the_timeout() -> anyhow::Result<()> {
    // Port 1 on loopback: nothing listens there, so the connection is refused or times out.
    let mut connection = ConnectionConfig::from_url("redis://127.0.0.1:1")?;
    connection.connect_timeout = Duration::from_millis(500);
    let started = Instant::now();
    let outcome = tokio::time::timeout(
        Duration::from_secs(30),
        Queue::new(unique_queue("unreachable"), QueueOptions::new(connection)),
    )
    .await
    .expect("Queue::new gave up instead of hanging");
    let err = outcome.expect_err("nothing listens on port 1");
    assert!(err.is_connect(), "expected a connect error, got {err:?}");
    assert!(
        err.to_string().contains("127.0.0.1:1"),
        "the message names the target: {err}"
    );
    eprintln!(
        "unreachable Redis reported after {:?}: {err}",
        started.elapsed()
    );
    Ok(())
}
