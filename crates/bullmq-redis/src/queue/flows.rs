//! A flow parent's children on Redis: the parent's `:processed`, `:dependencies`, `:failed`
//! hashes/sets and `:unsuccessful` zset, read in one pipeline.

use std::collections::{BTreeMap, HashMap};

use bullmq_backend::{DependencyCounts, DependencyKind};
use bullmq_protocol::keys::QueueKeys;
use fred::prelude::{Client, HashesInterface, SetsInterface, SortedSetsInterface, Value};

use super::reply::{array, string, unexpected};
use super::scripts::READ_DEPENDENCIES_PAGE;

use crate::error::Result;

/// `:processed`, `:dependencies`, `:failed`, `:unsuccessful` as read.
type Replies = (
    HashMap<String, String>,
    Vec<String>,
    HashMap<String, String>,
    Vec<String>,
);

/// A parent's children by outcome as Redis holds them: by child job key (the Redis backend
/// turns them into the seam's [`bullmq_backend::Dependencies`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DependencyKeys {
    /// `:processed`: child key → return value (JSON text).
    pub processed: BTreeMap<String, String>,
    /// `:dependencies`, sorted.
    pub unprocessed: Vec<String>,
    /// `:failed`: child key → failure reason.
    pub ignored: BTreeMap<String, String>,
    /// `:unsuccessful`, oldest first.
    pub failed: Vec<String>,
}

/// One page of a parent's children of one kind as Redis holds them (child keys, with the
/// stored value of a hash), and the `HSCAN` / `SSCAN` cursor (or rank) of the next page; 0 when
/// this was the last.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DependencyKeysPage {
    /// Child job keys, with the return value (processed) or failure reason (ignored).
    pub entries: Vec<(String, Option<String>)>,
    /// The cursor of the next page; 0 when this was the last.
    pub next_cursor: u64,
}

/// The children of `job_id` by outcome (Node's `getDependencies` without paging).
///
/// # Errors
///
/// [`crate::RedisError::Command`] when a command fails.
pub async fn get_dependencies(
    client: &Client,
    keys: &QueueKeys,
    job_id: &str,
) -> Result<DependencyKeys> {
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
    Ok(DependencyKeys {
        processed: processed.into_iter().collect(),
        unprocessed,
        ignored: ignored.into_iter().collect(),
        failed,
    })
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

/// One page of the children of `job_id` of `kind` (Node's paged `getDependencies`): `HSCAN` /
/// `SSCAN` with `COUNT`, or a rank range of `:unsuccessful`.
///
/// # Errors
///
/// [`crate::RedisError::Command`] when the call fails.
pub async fn get_dependencies_page(
    client: &Client,
    keys: &QueueKeys,
    job_id: &str,
    kind: DependencyKind,
    cursor: u64,
    count: u64,
) -> Result<DependencyKeysPage> {
    let job = keys.job(job_id);
    let (suffix, shape, pairs) = match kind {
        DependencyKind::Processed => ("processed", "hash", true),
        DependencyKind::Unprocessed => ("dependencies", "set", false),
        DependencyKind::Ignored => ("failed", "hash", true),
        DependencyKind::Failed => ("unsuccessful", "zset", false),
        _ => return Ok(DependencyKeysPage::default()),
    };
    let name = READ_DEPENDENCIES_PAGE.name();
    let reply: Value = READ_DEPENDENCIES_PAGE
        .run(
            client,
            vec![format!("{job}:{suffix}")],
            vec![
                Value::from(shape),
                Value::from(cursor.to_string()),
                Value::from(count.max(1).to_string()),
            ],
        )
        .await?;
    let mut parts = array(name, reply)?.into_iter();
    let (Some(next), Some(items)) = (parts.next(), parts.next()) else {
        return Err(unexpected(name, "expected {cursor, entries}"));
    };
    let next = string(name, next)?;
    let next = next
        .parse()
        .map_err(|_| unexpected(name, format!("cursor {next:?}")))?;
    let mut items = array(name, items)?.into_iter();
    let mut entries = Vec::new();
    while let Some(key) = items.next() {
        let value = if pairs {
            items.next().map(|v| string(name, v)).transpose()?
        } else {
            None
        };
        entries.push((string(name, key)?, value));
    }
    Ok(DependencyKeysPage {
        entries,
        next_cursor: next,
    })
}
