//! The idle worker's wait: `BZPOPMIN marker timeout` on a dedicated connection.

use std::time::Duration;

use fred::interfaces::SortedSetsInterface;
use fred::prelude::{Client, Value};

use super::WorkerKeys;
use crate::error::Result;

/// Blocks on the queue's `marker` zset for at most `timeout` (clamped to 1 ms .. 10 s, as Node
/// does, so a silently dropped connection is noticed) and returns the popped marker's score: 0
/// means "jobs are ready", a timestamp means "a delayed job is due then". `None` on timeout.
///
/// Use a connection of its own: a blocked connection cannot serve other commands.
///
/// # Errors
///
/// [`crate::RedisError::Command`] when Redis fails or the connection drops.
///
/// # Cancel safety
///
/// Cancel safe in effect: a marker popped by a cancelled call is lost, which only delays the
/// worker to its next poll; markers carry no job data.
pub async fn wait_for_marker(
    client: &Client,
    keys: &WorkerKeys,
    timeout: Duration,
) -> Result<Option<f64>> {
    let secs = timeout.as_secs_f64().clamp(0.001, 10.0);
    let key = keys.queue().key(bullmq_protocol::keys::QueueKey::Marker);
    let reply: Value = match client.bzpopmin(key, secs).await {
        Ok(reply) => reply,
        // fred reports BZPOPMIN's nil reply (the timeout elapsed) as a Timeout error.
        Err(error) if *error.kind() == fred::error::ErrorKind::Timeout => return Ok(None),
        Err(error) => return Err(error.into()),
    };
    Ok(match reply {
        Value::Array(items) if items.len() == 3 => match &items[2] {
            Value::Double(d) => Some(*d),
            Value::Integer(i) => Some(*i as f64),
            Value::String(s) => s.parse().ok(),
            Value::Bytes(b) => String::from_utf8_lossy(b).parse().ok(),
            _ => Some(0.0),
        },
        _ => None,
    })
}
