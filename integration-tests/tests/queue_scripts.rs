//! The producer/admin scripts through the typed `bullmq_redis::queue` layer, checked against
//! the raw Redis state they must leave (keys, hash fields, scores, events).

mod common;

use std::collections::HashMap;

use anyhow::Result;
use bullmq_protocol::keys::{QueueKey, QueueKeys};
use bullmq_protocol::state::JobState;
use bullmq_redis::queue::{self, AddResult, NewJob, RemoveOutcome};
use common::{cleanup, raw_client, read_events, unique_queue, PREFIX};
use fred::prelude::{Client, HashesInterface, KeysInterface, ListInterface, SortedSetsInterface};

async fn connect() -> Result<Client> {
    Ok(bullmq_redis::ConnectionConfig::from_env()?
        .connect(None)
        .await?)
}

fn id(result: AddResult) -> String {
    match result {
        AddResult::Id(id) => id,
        other => panic!("expected an id, got {other:?}"),
    }
}

fn events_of(events: &[common::StreamEvent]) -> Vec<String> {
    events
        .iter()
        .map(|e| {
            let fields: Vec<String> = e.fields.iter().map(|(k, v)| format!("{k}={v}")).collect();
            format!("{} {}", e.event, fields.join(" "))
                .trim_end()
                .to_string()
        })
        .collect()
}

#[tokio::test]
async fn standard_add_writes_hash_wait_marker_and_events() -> Result<()> {
    let name = unique_queue("qs-standard");
    let keys = QueueKeys::new(PREFIX, &name);
    let client = connect().await?;
    let raw = raw_client().await?;

    let ts = 1_700_000_000_000;
    let first = id(queue::add_job(
        &client,
        &keys,
        &NewJob::new("email", r#"{"a":1}"#, r#"{"attempts":0}"#, ts),
    )
    .await?);
    let second = id(queue::add_job(&client, &keys, &NewJob::new("email", "{}", "{}", ts)).await?);
    assert_eq!((first.as_str(), second.as_str()), ("1", "2"));

    let hash: HashMap<String, String> = raw.hgetall(keys.job("1")).await?;
    let expected: HashMap<String, String> = [
        ("name", "email"),
        ("data", r#"{"a":1}"#),
        ("opts", r#"{"attempts":0}"#),
        ("timestamp", "1700000000000"),
        ("delay", "0"),
        ("priority", "0"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect();
    assert_eq!(hash, expected);

    // FIFO: LPUSH, so the oldest job is on the right where workers take from.
    let wait: Vec<String> = raw.lrange(keys.key(QueueKey::Wait), 0, -1).await?;
    assert_eq!(wait, ["2", "1"]);
    let marker: Vec<(String, f64)> = raw
        .zrange(keys.key(QueueKey::Marker), 0, -1, None, false, None, true)
        .await?;
    assert_eq!(marker, [("0".to_string(), 0.0)]);
    let meta: HashMap<String, String> = raw.hgetall(keys.key(QueueKey::Meta)).await?;
    assert_eq!(
        meta.get("opts.maxLenEvents").map(String::as_str),
        Some("10000")
    );
    assert_eq!(
        meta.get("version").map(String::as_str),
        Some("bullmq:6.7.0")
    );

    assert_eq!(
        events_of(&read_events(&name).await?),
        [
            "added jobId=1 name=email",
            "waiting jobId=1",
            "added jobId=2 name=email",
            "waiting jobId=2"
        ]
    );
    cleanup(&name).await?;
    Ok(())
}

#[tokio::test]
async fn lifo_prioritized_and_delayed_adds_place_jobs_by_options() -> Result<()> {
    let name = unique_queue("qs-variants");
    let keys = QueueKeys::new(PREFIX, &name);
    let client = connect().await?;
    let raw = raw_client().await?;
    let ts = 1_700_000_000_000u64;

    queue::add_job(&client, &keys, &NewJob::new("a", "{}", "{}", ts)).await?;
    queue::add_job(
        &client,
        &keys,
        &NewJob::new("b", "{}", r#"{"lifo":true}"#, ts),
    )
    .await?;
    let wait: Vec<String> = raw.lrange(keys.key(QueueKey::Wait), 0, -1).await?;
    assert_eq!(
        wait,
        ["1", "2"],
        "LIFO job goes to the right end, taken first"
    );

    let p = id(queue::add_job(
        &client,
        &keys,
        &NewJob::new("p", "{}", r#"{"priority":5}"#, ts),
    )
    .await?);
    let p2 = id(queue::add_job(
        &client,
        &keys,
        &NewJob::new("p", "{}", r#"{"priority":5}"#, ts),
    )
    .await?);
    let score: f64 = raw.zscore(keys.key(QueueKey::Prioritized), &p).await?;
    let score2: f64 = raw.zscore(keys.key(QueueKey::Prioritized), &p2).await?;
    assert_eq!(score, (5u64 * (1 << 32) + 1) as f64);
    assert_eq!(score2, (5u64 * (1 << 32) + 2) as f64);
    let hash: HashMap<String, String> = raw.hgetall(keys.job(&p)).await?;
    assert_eq!(hash["priority"], "5");

    let d1 = id(queue::add_job(
        &client,
        &keys,
        &NewJob::new("d", "{}", r#"{"delay":5000}"#, ts),
    )
    .await?);
    let d2 = id(queue::add_job(
        &client,
        &keys,
        &NewJob::new("d", "{}", r#"{"delay":5000,"priority":3}"#, ts),
    )
    .await?);
    let s1: f64 = raw.zscore(keys.key(QueueKey::Delayed), &d1).await?;
    let s2: f64 = raw.zscore(keys.key(QueueKey::Delayed), &d2).await?;
    assert_eq!(s1, ((ts + 5000) * 0x1000) as f64);
    assert_eq!(
        s2,
        ((ts + 5000) * 0x1000 + 1) as f64,
        "same ms: next sequence"
    );
    let hash: HashMap<String, String> = raw.hgetall(keys.job(&d2)).await?;
    assert_eq!(
        (hash["delay"].as_str(), hash["priority"].as_str()),
        ("5000", "3")
    );
    let delay_marker: Option<f64> = raw.zscore(keys.key(QueueKey::Marker), "1").await?;
    assert_eq!(delay_marker, Some((ts + 5000) as f64));

    let events = events_of(&read_events(&name).await?);
    assert_eq!(
        events[events.len() - 4..],
        [
            format!("added jobId={d1} name=d"),
            format!("delayed jobId={d1} delay={}", ts + 5000),
            format!("added jobId={d2} name=d"),
            format!("delayed jobId={d2} delay={}", ts + 5000),
        ]
    );
    let counts = queue::get_counts(&client, &keys, &JobState::ALL_COUNTABLE).await?;
    // active, completed, delayed, failed, prioritized, waiting, waiting-children
    assert_eq!(counts, [0, 0, 2, 0, 2, 2, 0]);
    cleanup(&name).await?;
    Ok(())
}

#[tokio::test]
async fn custom_id_duplicate_is_not_overwritten() -> Result<()> {
    let name = unique_queue("qs-dup");
    let keys = QueueKeys::new(PREFIX, &name);
    let client = connect().await?;
    let raw = raw_client().await?;
    let job = NewJob::new("a", r#"{"v":1}"#, r#"{"jobId":"x"}"#, 1).with_custom_id("x");
    assert_eq!(id(queue::add_job(&client, &keys, &job).await?), "x");
    let again = NewJob::new("a", r#"{"v":2}"#, r#"{"jobId":"x"}"#, 2).with_custom_id("x");
    assert_eq!(id(queue::add_job(&client, &keys, &again).await?), "x");
    let data: String = raw.hget(keys.job("x"), "data").await?;
    assert_eq!(data, r#"{"v":1}"#);
    let wait: Vec<String> = raw.lrange(keys.key(QueueKey::Wait), 0, -1).await?;
    assert_eq!(wait, ["x"]);
    let counter: String = raw.get(keys.key(QueueKey::Id)).await?;
    assert_eq!(
        counter, "2",
        "the id counter moves on every add, as in BullMQ"
    );
    assert_eq!(
        events_of(&read_events(&name).await?),
        [
            "added jobId=x name=a",
            "waiting jobId=x",
            "duplicated jobId=x"
        ]
    );
    cleanup(&name).await?;
    Ok(())
}

#[tokio::test]
async fn deduplication_keeps_the_first_job_and_reports_the_dropped_one() -> Result<()> {
    let name = unique_queue("qs-dedup");
    let keys = QueueKeys::new(PREFIX, &name);
    let client = connect().await?;
    let raw = raw_client().await?;
    let opts = r#"{"de":{"id":"d1","ttl":60000}}"#;
    let first = id(queue::add_job(&client, &keys, &NewJob::new("a", "{}", opts, 1)).await?);
    let second = id(queue::add_job(&client, &keys, &NewJob::new("a", "{}", opts, 2)).await?);
    assert_eq!((first.as_str(), second.as_str()), ("1", "1"));
    let owner: String = raw.get(keys.deduplication("d1")).await?;
    assert_eq!(owner, "1");
    let ttl: i64 = raw.pttl(keys.deduplication("d1")).await?;
    assert!(ttl > 0 && ttl <= 60_000, "ttl {ttl}");
    let deid: String = raw.hget(keys.job("1"), "deid").await?;
    assert_eq!(deid, "d1");
    let exists: bool = raw.exists(keys.job("2")).await?;
    assert!(!exists);
    assert_eq!(
        events_of(&read_events(&name).await?),
        [
            "added jobId=1 name=a",
            "waiting jobId=1",
            "deduplicated jobId=1 deduplicationId=d1 deduplicatedJobId=2"
        ]
    );
    // Removing the owner releases the deduplication window.
    assert_eq!(
        queue::remove_job(&client, &keys, "1", true).await?,
        RemoveOutcome::Removed
    );
    let released: bool = raw.exists(keys.deduplication("d1")).await?;
    assert!(!released);
    cleanup(&name).await?;
    Ok(())
}
