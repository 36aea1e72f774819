//! The Redis store's calls one by one: fetch (lock, `ats`, `pb`, `active` event), lock
//! renewal (own token renewed and unmarked as stalled, a foreign token reported), and
//! move-to-delayed.

mod common;

use std::time::Duration;

use common::*;
use fred::prelude::{ClientLike, KeysInterface, SetsInterface};
use ractor_bullmq::store::{FetchRequest, FinishCode, RedisStore, Store};
use ractor_bullmq::ConnectionConfig;
use serde_json::json;

#[tokio::test]
async fn fetch_renew_and_delay_through_the_redis_store() -> anyhow::Result<()> {
    if !node_available() {
        return Ok(());
    }
    let queue = unique_queue("w-store");
    run_node(
        "add_jobs.js",
        &json!({"queue": queue, "jobs": [{"name": "a", "data": {}}, {"name": "b", "data": {}}]}),
    )
    .await?;
    let config = ConnectionConfig::from_url(&redis_url())?;
    let store = RedisStore::connect(&config, PREFIX, &queue, Some("store-test")).await?;

    let mut request = FetchRequest::new(5, "tok", Duration::from_secs(30));
    request.worker_name = Some("store-test".into());
    let fetched = store.fetch_batch(&request).await?;
    assert_eq!(fetched.jobs.len(), 2);
    let (first, second) = (&fetched.jobs[0], &fetched.jobs[1]);
    assert_eq!((first.id.as_str(), first.token.as_str()), ("1", "tok:0"));
    assert_eq!(second.token, "tok:1");
    let record = first.job.as_ref().expect("a readable job");
    assert_eq!(record.attempts_started, 1);
    assert_eq!(record.processed_by.as_deref(), Some("store-test"));

    let client = raw_client().await?;
    let lock: Option<String> = client.get(format!("{PREFIX}:{queue}:1:lock")).await?;
    assert_eq!(lock.as_deref(), Some("tok:0"));
    let _: i64 = client
        .sadd(format!("{PREFIX}:{queue}:stalled"), vec!["1", "2"])
        .await?;

    let lost = store
        .extend_locks(
            &[
                ("1".into(), "tok:0".into()),
                ("2".into(), "someone-else".into()),
            ],
            Duration::from_secs(60),
        )
        .await?;
    assert_eq!(lost, ["2"]);
    let still_marked: Vec<String> = client.smembers(format!("{PREFIX}:{queue}:stalled")).await?;
    assert_eq!(still_marked, ["2"]);
    let ttl: i64 = client.pttl(format!("{PREFIX}:{queue}:1:lock")).await?;
    assert!(ttl > 30_000, "lock renewed to 60 s, pttl {ttl}");

    let code = store
        .move_to_delayed("1", "tok:0", Duration::from_secs(60))
        .await?;
    assert_eq!(code, FinishCode::Ok);
    assert_eq!(
        store
            .move_to_delayed("2", "wrong", Duration::from_secs(1))
            .await?,
        FinishCode::LockNotOwned
    );
    let read = run_node("read_jobs.js", &json!({"queue": queue, "ids": ["1"]})).await?;
    assert_eq!(read["jobs"][0]["state"], "delayed");
    assert_eq!(read["jobs"][0]["attemptsMade"], 0);
    let events = read_events(&queue).await?;
    let names: Vec<&str> = events.iter().map(|e| e.event.as_str()).collect();
    assert_eq!(
        names,
        ["added", "waiting", "added", "waiting", "active", "active", "delayed"]
    );

    store.close().await;
    client.quit().await?;
    cleanup(&queue).await
}
