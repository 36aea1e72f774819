//! `Queue::add` / `add_bulk` / `get_job` against a real Redis: what each add variant stores,
//! bulk == singles, validation before any write, corrupted hashes, unreachable Redis.

mod common;

use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

use anyhow::Result;
use bullmq_protocol::keys::QueueKey;
use bullmq_protocol::options::{Deduplication, JobOptions, ParentRef};
use bullmq_protocol::state::JobState;
use common::{cleanup, count_keys, queue_keys, raw_client, read_events, unique_queue};
use fred::prelude::{
    Client, HashesInterface, KeysInterface, ListInterface, SetsInterface, SortedSetsInterface,
};
use fred::types::Value;
use ractor_bullmq::{ConnectionConfig, Queue, QueueError, QueueOptions};
use serde::{Deserialize, Serialize};

async fn open(name: &str) -> Result<Queue> {
    Ok(Queue::new(name, QueueOptions::from_env()?).await?)
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Email {
    to: String,
    n: u32,
}

#[tokio::test]
async fn builder_add_stores_the_job_and_get_job_reads_it_back() -> Result<()> {
    let name = unique_queue("qa-builder");
    let queue = open(&name).await?;
    let email = Email {
        to: "a@b.c".into(),
        n: 1,
    };

    let job = queue.add("welcome", &email).attempts(3).await?;
    assert_eq!(job.id(), "1");
    assert_eq!(job.name(), "welcome");
    assert_eq!(job.data::<Email>()?, email);

    let read = queue.get_job("1").await?.expect("job exists");
    assert_eq!(read.data::<Email>()?, email);
    assert_eq!(read.opts().attempts, Some(3));
    assert_eq!(read.timestamp(), job.timestamp());
    assert_eq!(read.delay(), Duration::ZERO);
    assert_eq!(read.priority(), 0);
    assert_eq!(read.attempts_made(), 0);
    assert_eq!(read.progress(), &serde_json::json!(0));
    assert_eq!(queue.get_job_state("1").await?, JobState::Waiting);
    assert!(queue.get_job("nope").await?.is_none());

    let delayed = queue
        .add("later", &email)
        .delay(Duration::from_secs(60))
        .await?;
    assert_eq!(queue.get_job_state(delayed.id()).await?, JobState::Delayed);
    let prioritized = queue.add("urgent", &email).priority(2).await?;
    assert_eq!(
        queue.get_job_state(prioritized.id()).await?,
        JobState::Prioritized
    );
    let plain = queue
        .add_job("plain", &email, JobOptions::new().lifo(true))
        .await?;
    let raw = raw_client().await?;
    let wait: Vec<String> = raw.lrange(queue.keys().key(QueueKey::Wait), 0, -1).await?;
    assert_eq!(
        wait,
        ["1".to_string(), plain.id().to_string()],
        "lifo job on the right"
    );

    let meta = queue.get_meta().await?;
    assert_eq!(meta.version.as_deref(), Some("bullmq:6.7.0"));
    assert_eq!(meta.max_len_events, Some(10_000));
    queue.close().await?;
    cleanup(&name).await?;
    Ok(())
}

#[tokio::test]
async fn default_job_options_merge_under_the_jobs_own() -> Result<()> {
    let name = unique_queue("qa-defaults");
    let options = QueueOptions::from_env()?.default_job_options(
        JobOptions::new()
            .attempts(5)
            .priority(7)
            .job_id("never-used"),
    );
    let queue = Queue::new(&name, options).await?;
    let job = queue.add("a", 1).priority(1).await?;
    assert_eq!(job.id(), "1", "the custom id never comes from the defaults");
    let read = queue.get_job(job.id()).await?.expect("exists");
    assert_eq!(read.opts().attempts, Some(5));
    assert_eq!(read.priority(), 1);
    queue.close().await?;
    cleanup(&name).await?;
    Ok(())
}

/// Everything stored under a queue, key suffix -> comparable content (scores included, TTLs
/// and stream ids left out).
async fn snapshot(raw: &Client, queue: &str) -> Result<BTreeMap<String, String>> {
    let base = format!("bull:{queue}:");
    let mut out = BTreeMap::new();
    for key in queue_keys(queue).await? {
        let kind: String = raw.r#type(&key).await?;
        let content = match kind.as_str() {
            "hash" => {
                let h: HashMap<String, String> = raw.hgetall(&key).await?;
                format!("{:?}", h.into_iter().collect::<BTreeMap<_, _>>())
            }
            "list" => format!("{:?}", raw.lrange::<Vec<String>, _>(&key, 0, -1).await?),
            "zset" => {
                let v: Value = raw.zrange(&key, 0, -1, None, false, None, true).await?;
                format!("{v:?}")
            }
            "string" => raw.get::<String, _>(&key).await?,
            "stream" => {
                let events = read_events(queue).await?;
                format!(
                    "{:?}",
                    events
                        .iter()
                        .map(|e| (&e.event, &e.fields))
                        .collect::<Vec<_>>()
                )
            }
            other => other.to_string(),
        };
        out.insert(
            key.trim_start_matches(&base).to_string(),
            format!("{kind}: {content}"),
        );
    }
    Ok(out)
}

#[tokio::test]
async fn bulk_add_leaves_the_same_state_as_single_adds() -> Result<()> {
    let bulk_name = unique_queue("qa-bulk");
    let single_name = unique_queue("qa-single");
    let bulk = open(&bulk_name).await?;
    let single = open(&single_name).await?;
    let ts = 1_750_000_000_000u64;
    let at = |opts: JobOptions| opts.timestamp_ms(ts);
    let jobs = vec![
        ("std", serde_json::json!({"i": 1}), at(JobOptions::new())),
        (
            "lifo",
            serde_json::json!({"i": 2}),
            at(JobOptions::new().lifo(true)),
        ),
        (
            "prio",
            serde_json::json!({"i": 3}),
            at(JobOptions::new().priority(4)),
        ),
        (
            "prio",
            serde_json::json!({"i": 4}),
            at(JobOptions::new().priority(4)),
        ),
        (
            "delayed",
            serde_json::json!({"i": 5}),
            at(JobOptions::new().delay(Duration::from_secs(30))),
        ),
        (
            "delayed",
            serde_json::json!({"i": 6}),
            at(JobOptions::new().delay(Duration::from_secs(30))),
        ),
        (
            "custom",
            serde_json::json!({"i": 7}),
            at(JobOptions::new().job_id("c-1")),
        ),
        (
            "custom",
            serde_json::json!({"i": 8}),
            at(JobOptions::new().job_id("c-1")),
        ),
        (
            "dedup",
            serde_json::json!({"i": 9}),
            at(JobOptions::new().deduplication(Deduplication::new("d"))),
        ),
        (
            "dedup",
            serde_json::json!({"i": 10}),
            at(JobOptions::new().deduplication(Deduplication::new("d"))),
        ),
    ];
    let bulk_jobs = bulk.add_bulk(jobs.clone()).await?;
    let mut single_ids = Vec::new();
    for (name, data, opts) in jobs {
        single_ids.push(single.add_job(name, data, opts).await?.id().to_string());
    }
    let bulk_ids: Vec<String> = bulk_jobs.iter().map(|j| j.id().to_string()).collect();
    assert_eq!(bulk_ids, single_ids);
    assert_eq!(
        bulk_ids,
        ["1", "2", "3", "4", "5", "6", "c-1", "c-1", "9", "9"]
    );

    let raw = raw_client().await?;
    let (a, b) = (
        snapshot(&raw, &bulk_name).await?,
        snapshot(&raw, &single_name).await?,
    );
    assert_eq!(a, b);
    assert!(a.contains_key("events") && a.contains_key("de:d") && a.contains_key("prioritized"));
    bulk.close().await?;
    single.close().await?;
    cleanup(&bulk_name).await?;
    cleanup(&single_name).await?;
    Ok(())
}

#[tokio::test]
async fn invalid_options_write_nothing() -> Result<()> {
    let name = unique_queue("qa-invalid");
    let queue = open(&name).await?;
    let before = count_keys(&name).await?;
    assert_eq!(before, 1, "only meta");

    let too_high = queue.add("a", 1).priority(3_000_000).await;
    assert!(
        matches!(too_high, Err(QueueError::Validation(_))),
        "{too_high:?}"
    );
    let integer_id = queue.add("a", 1).job_id("42").await;
    assert!(
        matches!(integer_id, Err(QueueError::Validation(_))),
        "{integer_id:?}"
    );
    let size = queue
        .add_job("a", "x".repeat(100), JobOptions::new().size_limit(10))
        .await;
    assert!(matches!(size, Err(QueueError::Validation(_))), "{size:?}");
    let bulk = queue
        .add_bulk(vec![
            ("ok", 1, JobOptions::new()),
            ("bad", 2, JobOptions::new().priority(u32::MAX)),
        ])
        .await;
    assert!(matches!(bulk, Err(QueueError::Validation(_))), "{bulk:?}");

    assert_eq!(count_keys(&name).await?, before);
    queue.close().await?;
    cleanup(&name).await?;
    Ok(())
}

#[tokio::test]
async fn missing_parent_is_a_typed_error_and_writes_nothing() -> Result<()> {
    let name = unique_queue("qa-parent");
    let queue = open(&name).await?;
    let parent = ParentRef::new("p1", format!("bull:{name}"));
    let result = queue
        .add_job("child", 1, JobOptions::new().parent(parent.clone()))
        .await;
    match result {
        Err(QueueError::ParentNotFound { parent_key }) => assert_eq!(parent_key, parent.job_key()),
        other => panic!("expected ParentNotFound, got {other:?}"),
    }
    assert_eq!(queue.get_job_counts().await?.pending(), 0);
    // The same refusal from the bulk script (its per-job -5).
    let bulk = queue
        .add_bulk([("child", 1, JobOptions::new().parent(parent.clone()))])
        .await;
    match bulk {
        Err(QueueError::ParentNotFound { parent_key }) => assert_eq!(parent_key, parent.job_key()),
        other => panic!("expected ParentNotFound from add_bulk, got {other:?}"),
    }
    assert_eq!(queue.get_job_counts().await?.pending(), 0);

    // With the parent present, the child links to it and registers as a dependency.
    let raw = raw_client().await?;
    let _: () = raw
        .hset(parent.job_key(), [("name", "parent"), ("data", "{}")])
        .await?;
    let child = queue
        .add_job(
            "child",
            1,
            JobOptions::new()
                .parent(parent.clone())
                .fail_parent_on_failure(true),
        )
        .await?;
    let stored = queue.get_job(child.id()).await?.expect("child");
    assert_eq!(stored.parent_key(), Some(parent.job_key().as_str()));
    let info = stored.parent().expect("parent info");
    assert_eq!(
        (info.id.as_str(), info.queue_key.as_str(), info.fpof),
        ("p1", parent.queue.as_str(), Some(true))
    );
    let deps: Vec<String> = raw
        .smembers(format!("{}:dependencies", parent.job_key()))
        .await?;
    assert_eq!(deps, [queue.keys().job(child.id())]);
    queue.close().await?;
    cleanup(&name).await?;
    Ok(())
}

#[tokio::test]
async fn corrupted_job_hash_is_a_decode_error_naming_the_field() -> Result<()> {
    let name = unique_queue("qa-corrupt");
    let queue = open(&name).await?;
    let job = queue.add("a", 1).await?;
    let raw = raw_client().await?;
    let _: () = raw
        .hset(queue.keys().job(job.id()), ("opts", "{not json"))
        .await?;
    match queue.get_job(job.id()).await {
        Err(QueueError::Decode { job_id, source }) => {
            assert_eq!(job_id, job.id());
            assert_eq!(source.field, "opts");
        }
        other => panic!("expected a decode error, got {other:?}"),
    }
    let listed = queue.get_jobs(&[JobState::Waiting], 0, -1, true).await;
    assert!(matches!(listed, Err(QueueError::Decode { .. })));
    queue.close().await?;
    cleanup(&name).await?;
    Ok(())
}

#[tokio::test]
async fn unreachable_redis_is_a_connect_error_within_the_timeout() -> Result<()> {
    let mut connection = ConnectionConfig::from_url("redis://127.0.0.1:1")?;
    connection.connect_timeout = Duration::from_secs(2);
    let outcome = tokio::time::timeout(
        Duration::from_secs(20),
        Queue::new("never", QueueOptions::new(connection)),
    )
    .await
    .expect("Queue::new must give up by itself");
    match outcome {
        Err(error) => assert!(error.is_connect(), "{error:?}"),
        Ok(_) => panic!("connected to port 1"),
    }
    Ok(())
}
