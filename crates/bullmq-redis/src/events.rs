//! The queue's `events` stream: blocking reads (`XREAD BLOCK`) and publishing (`XADD`).
//!
//! Every state change of a job is appended by the scripts to `{prefix}:{queue}:events`, a Redis
//! stream trimmed to about `meta.opts.maxLenEvents` entries. This module only moves raw
//! entries (`id` + ordered field/value pairs); typing them is the protocol crate's job
//! (`bullmq_protocol::events`). The runtime's `QueueEvents` actor drives the read loop.
//!
//! Reads are meant to run on a dedicated connection (see [`queue_events_client_name`]): a
//! blocked `XREAD` holds its connection until an entry arrives or the block times out.

use std::time::Duration;

use bullmq_protocol::keys::QueueKeys;
use fred::prelude::{Client, ClientInterface, ClientLike, StreamsInterface};
use fred::types::Value;

use crate::error::{RedisError, Result};

/// Suffix Node BullMQ appends to `{prefix}:{base64(queue)}` when it names a QueueEvents
/// connection (`QUEUE_EVENT_SUFFIX`).
pub const QUEUE_EVENTS_CLIENT_SUFFIX: &str = ":qe";

/// Default `MAXLEN ~` of [`publish_event`], as Node's `publishEvent(args, maxEvents = 1000)`.
pub const DEFAULT_MAX_EVENTS: u64 = 1_000;

/// The `CLIENT SETNAME` of a QueueEvents connection: `{prefix}:{base64(queue)}:qe`, the name Node
/// gives its own QueueEvents connections (`Queue.getQueueEvents()` lists clients by it).
///
/// ```
/// use bullmq_protocol::keys::QueueKeys;
/// use bullmq_redis::events::queue_events_client_name;
/// let keys = QueueKeys::new("bull", "emails");
/// assert_eq!(queue_events_client_name(&keys), "bull:ZW1haWxz:qe");
/// ```
pub fn queue_events_client_name(keys: &QueueKeys) -> String {
    format!(
        "{}{QUEUE_EVENTS_CLIENT_SUFFIX}",
        keys.worker_client_name(None)
    )
}

/// One entry of the events stream, untyped: its id and its fields in stream order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RawStreamEntry {
    /// Stream id, `{ms}-{seq}`.
    pub id: String,
    /// Field/value pairs in the order they were appended (`event` first for BullMQ events).
    pub fields: Vec<(String, String)>,
}

/// Reads the entries of `key` after `after_id` (exclusive), waiting up to `block` for the first
/// one when there are none yet. `after_id` may be `$` (only entries appended from now on), `0`
/// (the whole stream) or any stream id.
///
/// Returns an empty vector when the block timed out. `count` caps the entries of one reply
/// (`None`: everything available).
///
/// # Errors
///
/// [`RedisError::Command`] when the command fails or the connection is lost, and
/// [`RedisError::UnexpectedReply`] when the reply is not a stream reply.
///
/// # Cancel safety
///
/// Dropping the future abandons the read on the client side only: the server keeps the
/// connection blocked until the block times out, so close or reconnect the client to free it.
pub async fn read_events(
    client: &Client,
    key: &str,
    after_id: &str,
    block: Option<Duration>,
    count: Option<u64>,
) -> Result<Vec<RawStreamEntry>> {
    // `BLOCK 0` would mean "forever": clamp to at least one millisecond.
    let block_ms = block.map(|b| u64::try_from(b.as_millis()).unwrap_or(u64::MAX).max(1));
    let reply: Value = client
        .xread(count, block_ms, key, after_id.to_owned())
        .await?;
    parse_xread_reply(reply)
}

/// The id of the newest entry of `key`, `None` when the stream is empty or missing.
///
/// Used to pin `$` ("from now on") to a concrete id before the first read, so a reconnect that
/// happens before any event arrived does not skip the events appended meanwhile.
///
/// # Errors
///
/// [`RedisError::Command`] when the command fails.
pub async fn newest_event_id(client: &Client, key: &str) -> Result<Option<String>> {
    let reply: Value = client.xrevrange(key, "+", "-", Some(1)).await?;
    let entries = parse_entries(reply, "XREVRANGE")?;
    Ok(entries.into_iter().next().map(|entry| entry.id))
}

/// Appends one event to `key` as `XADD key MAXLEN ~ max_events * field value …`, the layout of
/// Node's `QueueEventsProducer.publishEvent`: the caller puts `("event", name)` first.
///
/// Returns the new entry's id.
///
/// # Errors
///
/// [`RedisError::Command`] when the command fails, [`RedisError::UnexpectedReply`] when Redis
/// does not answer with an id.
pub async fn publish_event(
    client: &Client,
    key: &str,
    fields: Vec<(String, String)>,
    max_events: u64,
) -> Result<String> {
    let max_events = i64::try_from(max_events).unwrap_or(i64::MAX);
    let reply: Value = client
        .xadd(key, false, ("MAXLEN", "~", max_events), "*", fields)
        .await?;
    reply
        .into_string()
        .ok_or_else(|| RedisError::UnexpectedReply {
            script: "XADD",
            detail: "no entry id in the reply".into(),
        })
}

/// Closes a client that may be blocked in [`read_events`]: the blocked command is interrupted
/// with `CLIENT UNBLOCK` (sent by fred on its backchannel connection, since the blocked
/// connection cannot take commands), then the client quits. Without the unblock, `QUIT` would
/// wait behind the `XREAD` for up to its block timeout.
///
/// # Errors
///
/// [`RedisError::Command`] when `QUIT` fails (the unblock failing is only logged: there may
/// have been nothing to unblock).
pub async fn close_blocked_client(client: &Client) -> Result<()> {
    if let Err(error) = client.unblock_self(None).await {
        tracing::debug!(%error, "CLIENT UNBLOCK before closing failed");
    }
    client.quit().await?;
    Ok(())
}

/// Decodes an `XREAD` reply for a single stream (RESP2 array or RESP3 map; nil on timeout).
///
/// # Errors
///
/// [`RedisError::UnexpectedReply`] when the shape is not the one of `XREAD`.
pub fn parse_xread_reply(reply: Value) -> Result<Vec<RawStreamEntry>> {
    match reply {
        Value::Null => Ok(Vec::new()),
        // RESP2: [[key, [entry, …]], …]
        Value::Array(streams) => {
            let mut out = Vec::new();
            for stream in streams {
                let Value::Array(mut pair) = stream else {
                    return Err(unexpected("XREAD", "a stream is not a [key, entries] pair"));
                };
                if pair.len() != 2 {
                    return Err(unexpected("XREAD", "a stream is not a [key, entries] pair"));
                }
                let entries = pair.pop().unwrap_or(Value::Null);
                out.extend(parse_entries(entries, "XREAD")?);
            }
            Ok(out)
        }
        // RESP3: {key: [entry, …]}
        Value::Map(map) => {
            let mut out = Vec::new();
            for (_key, entries) in map.inner() {
                out.extend(parse_entries(entries, "XREAD")?);
            }
            Ok(out)
        }
        other => Err(unexpected(
            "XREAD",
            &format!("expected an array, got {}", other.kind()),
        )),
    }
}

/// Decodes `[[id, [field, value, …]], …]`.
fn parse_entries(entries: Value, command: &'static str) -> Result<Vec<RawStreamEntry>> {
    let entries = match entries {
        Value::Null => return Ok(Vec::new()),
        Value::Array(entries) => entries,
        other => {
            return Err(unexpected(
                command,
                &format!("expected entries, got {}", other.kind()),
            ))
        }
    };
    let mut out = Vec::with_capacity(entries.len());
    for entry in entries {
        let Value::Array(parts) = entry else {
            return Err(unexpected(command, "an entry is not an [id, fields] pair"));
        };
        let mut parts = parts.into_iter();
        let id = parts
            .next()
            .and_then(Value::into_string)
            .ok_or_else(|| unexpected(command, "an entry has no id"))?;
        let fields = match parts.next() {
            None | Some(Value::Null) => Vec::new(),
            Some(Value::Array(flat)) => pairs(flat, command)?,
            // RESP3 servers may answer fields as a map; order is then the map's.
            Some(Value::Map(map)) => map
                .inner()
                .into_iter()
                .map(|(k, v)| {
                    let key = k.as_str().map(str::to_owned).unwrap_or_default();
                    (key, v.into_string().unwrap_or_default())
                })
                .collect(),
            Some(other) => {
                return Err(unexpected(
                    command,
                    &format!("entry {id}: fields are {}", other.kind()),
                ))
            }
        };
        out.push(RawStreamEntry { id, fields });
    }
    Ok(out)
}

/// `[f1, v1, f2, v2, …]` → `[(f1, v1), (f2, v2), …]`.
fn pairs(flat: Vec<Value>, command: &'static str) -> Result<Vec<(String, String)>> {
    if flat.len() % 2 != 0 {
        return Err(unexpected(command, "odd number of field/value items"));
    }
    let mut out = Vec::with_capacity(flat.len() / 2);
    let mut items = flat.into_iter();
    while let (Some(field), Some(value)) = (items.next(), items.next()) {
        let field = field
            .into_string()
            .ok_or_else(|| unexpected(command, "a field name is not a string"))?;
        // Values are strings on the wire; a nil (never written by BullMQ) becomes "".
        out.push((field, value.into_string().unwrap_or_default()));
    }
    Ok(out)
}

fn unexpected(command: &'static str, detail: &str) -> RedisError {
    RedisError::UnexpectedReply {
        script: command,
        detail: detail.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(text: &str) -> Value {
        Value::String(text.into())
    }

    #[test]
    fn nil_reply_is_a_timeout() {
        assert_eq!(parse_xread_reply(Value::Null).unwrap(), Vec::new());
    }

    #[test]
    fn resp2_reply_keeps_field_order() {
        let reply = Value::Array(vec![Value::Array(vec![
            s("bull:q:events"),
            Value::Array(vec![
                Value::Array(vec![
                    s("1-0"),
                    Value::Array(vec![
                        s("event"),
                        s("added"),
                        s("jobId"),
                        s("1"),
                        s("name"),
                        s("n"),
                    ]),
                ]),
                Value::Array(vec![
                    s("1-1"),
                    Value::Array(vec![s("event"), s("waiting"), s("jobId"), s("1")]),
                ]),
            ]),
        ])]);
        let entries = parse_xread_reply(reply).unwrap();
        assert_eq!(entries.len(), 2);
        assert_eq!(entries[0].id, "1-0");
        assert_eq!(
            entries[0].fields,
            vec![
                ("event".to_owned(), "added".to_owned()),
                ("jobId".to_owned(), "1".to_owned()),
                ("name".to_owned(), "n".to_owned()),
            ]
        );
        assert_eq!(entries[1].id, "1-1");
    }

    #[test]
    fn malformed_replies_are_typed_errors() {
        assert!(parse_xread_reply(Value::Integer(3)).is_err());
        let odd = Value::Array(vec![Value::Array(vec![
            s("k"),
            Value::Array(vec![Value::Array(vec![
                s("1-0"),
                Value::Array(vec![s("event")]),
            ])]),
        ])]);
        assert!(parse_xread_reply(odd).is_err());
        let no_id = Value::Array(vec![Value::Array(vec![
            s("k"),
            Value::Array(vec![Value::Array(vec![])]),
        ])]);
        assert!(parse_xread_reply(no_id).is_err());
    }

    #[test]
    fn client_name_matches_node() {
        // Node: `${prefix}:${Buffer.from(name).toString('base64')}:qe`
        assert_eq!(
            queue_events_client_name(&QueueKeys::new("{b}", "a:b")),
            "{b}:YTpi:qe"
        );
    }
}
