//! The Redis store's calls one by one: fetch (lock, `ats`, `pb`, `active` event), lock
//! renewal (own token renewed and unmarked as stalled, a foreign token reported),
//! move-to-delayed, and the moves of a locked job that is no longer active (code -3).

mod common;

use std::time::Duration;

use common::*;
use fred::prelude::{ClientLike, KeysInterface, ListInterface, SetsInterface};
use ractor_bullmq::store::{
    FetchRequest, FinishCode, MoveToWaitOutcome, RedisStore, Store, WaitingChildrenOutcome,
};
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

#[tokio::test]
async fn moves_of_a_locked_job_no_longer_active_are_refused_not_active() -> anyhow::Result<()> {
    let queue = unique_queue("w-store-not-active");
    let config = ConnectionConfig::from_url(&redis_url())?;
    let q = open_queue(&queue).await?;
    q.add("a", json!({})).await?;
    let store = RedisStore::connect(&config, PREFIX, &queue, Some("store-test")).await?;
    let fetched = store
        .fetch_batch(&FetchRequest::new(1, "tok", Duration::from_secs(30)))
        .await?;
    let job = &fetched.jobs[0];
    // A pending child, so that waiting for children gets as far as the `active` check.
    let parent =
        bullmq_protocol::options::ParentRef::new(job.id.clone(), format!("{PREFIX}:{queue}"));
    q.add_job(
        "child",
        json!({}),
        bullmq_protocol::options::JobOptions::new().parent(parent),
    )
    .await?;
    // Another client takes it out of `active`; its lock stays.
    let client = raw_client().await?;
    let _: i64 = client
        .lrem(format!("{PREFIX}:{queue}:active"), 1, job.id.as_str())
        .await?;
    assert_eq!(
        store.move_to_wait(&job.id, &job.token).await?,
        MoveToWaitOutcome::Refused(FinishCode::NotActive)
    );
    assert_eq!(
        store
            .move_to_waiting_children(&job.id, &job.token, None)
            .await?,
        WaitingChildrenOutcome::Refused(FinishCode::NotActive)
    );
    // Nothing written: the lock is still there, no event after `active`.
    let lock: Option<String> = client
        .get(format!("{PREFIX}:{queue}:{}:lock", job.id))
        .await?;
    assert_eq!(lock.as_deref(), Some(job.token.as_str()));
    let events = read_events(&queue).await?;
    let of_job: Vec<&str> = events
        .iter()
        .filter(|e| e.fields.iter().any(|(k, v)| k == "jobId" && *v == job.id))
        .map(|e| e.event.as_str())
        .collect();
    assert_eq!(of_job, ["added", "waiting", "active"]);
    store.close().await;
    client.quit().await?;
    q.close().await?;
    cleanup(&queue).await
}
