//! A flow parent's children on Redis: the parent's `:processed`, `:dependencies`, `:failed`
//! hashes/sets and `:unsuccessful` zset, read in one pipeline.

use std::collections::{BTreeMap, HashMap};

use bullmq_backend::{Dependencies, DependencyCounts};
use bullmq_protocol::keys::QueueKeys;
use fred::prelude::{Client, HashesInterface, SetsInterface, SortedSetsInterface};

use crate::error::Result;

/// `:processed`, `:dependencies`, `:failed`, `:unsuccessful` as read.
type Replies = (
    HashMap<String, String>,
    Vec<String>,
    HashMap<String, String>,
    Vec<String>,
);

/// The children of `job_id` by outcome (Node's `getDependencies` without paging).
///
/// # Errors
///
/// [`crate::RedisError::Command`] when a command fails.
pub async fn get_dependencies(
    client: &Client,
    keys: &QueueKeys,
    job_id: &str,
) -> Result<Dependencies> {
    let job = keys.job(job_id);
    let pipeline = client.pipeline();
    let _: () = pipeline.hgetall(format!("{job}:processed")).await?;
    let _: () = pipeline.smembers(format!("{job}:dependencies")).await?;
    let _: () = pipeline.hgetall(format!("{job}:failed")).await?;
    let _: () = pipeline
        .zrange(
            format!("{job}:unsuccessful"),
            0,
            -1,
            None,
            false,
            None,
            false,
        )
        .await?;
    let (processed, mut unprocessed, ignored, failed): Replies = pipeline.all().await?;
    unprocessed.sort();
    Ok(Dependencies::new(
        processed.into_iter().collect::<BTreeMap<_, _>>(),
        unprocessed,
        ignored.into_iter().collect(),
        failed,
    ))
}

/// How many children of `job_id` there are by outcome.
///
/// # Errors
///
/// [`crate::RedisError::Command`] when a command fails.
pub async fn get_dependency_counts(
    client: &Client,
    keys: &QueueKeys,
    job_id: &str,
) -> Result<DependencyCounts> {
    let job = keys.job(job_id);
    let pipeline = client.pipeline();
    let _: () = pipeline.hlen(format!("{job}:processed")).await?;
    let _: () = pipeline.scard(format!("{job}:dependencies")).await?;
    let _: () = pipeline.hlen(format!("{job}:failed")).await?;
    let _: () = pipeline.zcard(format!("{job}:unsuccessful")).await?;
    let (processed, unprocessed, ignored, failed): (u64, u64, u64, u64) = pipeline.all().await?;
    Ok(DependencyCounts::new(
        processed,
        unprocessed,
        ignored,
        failed,
    ))
}
