//! Queue control on Redis: global concurrency and rate limit in `meta`, the `limiter` key, the
//! events stream trim, deduplication keys and per-priority counts — the keys and commands Node
//! BullMQ's `Queue` uses, so both read and honour what the other wrote.
//!
//! Single commands where one command is atomic on its own (`HSET`, `HDEL`, `SET … PX`, `DEL`,
//! `XTRIM`, `GET`); scripts where a read spans keys (`is_maxed.lua`, `get_rate_limit_ttl.lua`,
//! `get_counts_per_priority.lua`).

use bullmq_protocol::keys::{QueueKey, QueueKeys};
use fred::prelude::{Client, Expiration, HashesInterface, KeysInterface, StreamsInterface, Value};
use fred::types::streams::{XCapKind, XCapTrim};

use super::reply::{array, integer, unexpected};
use super::scripts::{GET_COUNTS_PER_PRIORITY, GET_RATE_LIMIT_TTL, IS_MAXED};
use crate::error::Result;

/// `HSET meta field value …`.
///
/// # Errors
///
/// [`crate::RedisError::Command`] when Redis fails.
pub async fn set_meta_fields(
    client: &Client,
    keys: &QueueKeys,
    fields: &[(&str, String)],
) -> Result<()> {
    let values: Vec<(String, String)> = fields
        .iter()
        .map(|(f, v)| ((*f).to_owned(), v.clone()))
        .collect();
    let _: i64 = client.hset(keys.key(QueueKey::Meta), values).await?;
    Ok(())
}

/// `HMGET meta fields…`, one value per field (`None` when absent).
///
/// # Errors
///
/// As [`set_meta_fields`].
pub async fn get_meta_fields(
    client: &Client,
    keys: &QueueKeys,
    fields: &[&str],
) -> Result<Vec<Option<String>>> {
    let names: Vec<String> = fields.iter().map(|f| (*f).to_owned()).collect();
    let values: Vec<Option<String>> = client.hmget(keys.key(QueueKey::Meta), names).await?;
    Ok(values)
}

/// `HDEL meta fields…`; how many existed.
///
/// # Errors
///
/// As [`set_meta_fields`].
pub async fn remove_meta_fields(client: &Client, keys: &QueueKeys, fields: &[&str]) -> Result<u64> {
    let names: Vec<String> = fields.iter().map(|f| (*f).to_owned()).collect();
    let removed: u64 = client.hdel(keys.key(QueueKey::Meta), names).await?;
    Ok(removed)
}

/// `SET limiter 9007199254740991 PX ttl_ms`, as Node's `queue.rateLimit(ttl)`.
///
/// # Errors
///
/// As [`set_meta_fields`]; Redis refuses a `ttl_ms` of 0.
pub async fn set_rate_limit(client: &Client, keys: &QueueKeys, ttl_ms: u64) -> Result<()> {
    let px = i64::try_from(ttl_ms).unwrap_or(i64::MAX);
    let _: Value = client
        .set(
            keys.key(QueueKey::Limiter),
            bullmq_backend::queue_control::RATE_LIMIT_SATURATED.to_string(),
            Some(Expiration::PX(px)),
            None,
            false,
        )
        .await?;
    Ok(())
}

/// Runs `get_rate_limit_ttl.lua` (`max_jobs` `None` or 0: not given).
///
/// # Errors
///
/// As [`set_meta_fields`]; [`crate::RedisError::UnexpectedReply`] on a non-integer reply.
pub async fn get_rate_limit_ttl(
    client: &Client,
    keys: &QueueKeys,
    max_jobs: Option<u64>,
) -> Result<i64> {
    let reply: Value = GET_RATE_LIMIT_TTL
        .run(
            client,
            vec![keys.key(QueueKey::Limiter), keys.key(QueueKey::Meta)],
            vec![Value::from(max_jobs.unwrap_or(0).to_string())],
        )
        .await?;
    integer(GET_RATE_LIMIT_TTL.name(), &reply)
}

/// `DEL key`; whether it existed.
///
/// # Errors
///
/// As [`set_meta_fields`].
pub async fn delete_key(client: &Client, key: String) -> Result<bool> {
    let removed: u64 = client.del(key).await?;
    Ok(removed > 0)
}

/// `GET key`.
///
/// # Errors
///
/// As [`set_meta_fields`].
pub async fn get_string(client: &Client, key: String) -> Result<Option<String>> {
    let value: Option<String> = client.get(key).await?;
    Ok(value)
}

/// Runs `is_maxed.lua`.
///
/// # Errors
///
/// As [`get_rate_limit_ttl`].
pub async fn is_maxed(client: &Client, keys: &QueueKeys) -> Result<bool> {
    let reply: Value = IS_MAXED
        .run(
            client,
            vec![keys.key(QueueKey::Meta), keys.key(QueueKey::Active)],
            Vec::new(),
        )
        .await?;
    Ok(integer(IS_MAXED.name(), &reply)? == 1)
}

/// `XTRIM events MAXLEN ~ max_length`; how many entries were removed.
///
/// # Errors
///
/// As [`set_meta_fields`].
pub async fn trim_events(client: &Client, keys: &QueueKeys, max_length: u64) -> Result<u64> {
    let max = i64::try_from(max_length).unwrap_or(i64::MAX);
    let removed: u64 = client
        .xtrim(
            keys.key(QueueKey::Events),
            (XCapKind::MaxLen, XCapTrim::AlmostExact, max),
        )
        .await?;
    Ok(removed)
}

/// Runs `get_counts_per_priority.lua`: one count per priority, in order.
///
/// # Errors
///
/// As [`get_rate_limit_ttl`].
pub async fn get_counts_per_priority(
    client: &Client,
    keys: &QueueKeys,
    priorities: &[u32],
) -> Result<Vec<u64>> {
    if priorities.is_empty() {
        return Ok(Vec::new());
    }
    let name = GET_COUNTS_PER_PRIORITY.name();
    let reply: Value = GET_COUNTS_PER_PRIORITY
        .run(
            client,
            vec![keys.key(QueueKey::Wait), keys.key(QueueKey::Prioritized)],
            priorities
                .iter()
                .map(|p| Value::from(p.to_string()))
                .collect(),
        )
        .await?;
    let counts = array(name, reply)?
        .iter()
        .map(|v| integer(name, v).map(|n| u64::try_from(n).unwrap_or(0)))
        .collect::<Result<Vec<_>>>()?;
    if counts.len() != priorities.len() {
        return Err(unexpected(name, "one count per priority expected"));
    }
    Ok(counts)
}
