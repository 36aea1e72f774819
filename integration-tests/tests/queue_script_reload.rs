//! Redis forgetting our scripts (`SCRIPT FLUSH`, a restart, a failover) must not be visible:
//! the next call loads the script again. One test in its own binary, because a flush while
//! other tests of the same binary run could hit them between their reload and their retry.

mod common;

use std::collections::HashMap;

use anyhow::Result;
use bullmq_protocol::keys::QueueKey;
use bullmq_protocol::options::JobOptions;
use bullmq_protocol::state::JobState;
use bullmq_redis::queue::{self as scripts, AddResult, NewJob};
use common::{cleanup, raw_client, unique_queue};
use fred::prelude::{HashesInterface, LuaInterface};
use ractor_bullmq::{Queue, QueueOptions};

#[tokio::test]
async fn script_flush_mid_test_reloads_scripts_transparently() -> Result<()> {
    let name = unique_queue("qsr-flush");
    let queue = Queue::new(&name, QueueOptions::from_env()?).await?;
    let raw = raw_client().await?;

    queue.add("a", 1).await?;
    let _: () = raw.script_flush(false).await?;
    queue.add("b", 2).await?;
    let _: () = raw.script_flush(false).await?;
    assert_eq!(queue.get_job_counts().await?.waiting, 2);
    let _: () = raw.script_flush(false).await?;
    queue
        .add_bulk(vec![
            ("c", 3, JobOptions::new()),
            ("d", 4, JobOptions::new()),
        ])
        .await?;
    let _: () = raw.script_flush(false).await?;
    // The typed layer directly, on the queue's own client.
    let added = scripts::add_job(
        queue.redis_client().expect("a Redis queue"),
        queue.keys(),
        &NewJob::new("e", "{}", "{}", 1),
    )
    .await?;
    assert_eq!(added, AddResult::Id("5".into()));
    assert_eq!(
        queue.get_job_ids(&[JobState::Waiting], 0, -1, true).await?,
        ["1", "2", "3", "4", "5"]
    );
    let meta: HashMap<String, String> = raw.hgetall(queue.keys().key(QueueKey::Meta)).await?;
    assert!(meta.contains_key("version"));
    queue.close().await?;
    cleanup(&name).await?;
    Ok(())
}
