//! A queue's workers, found as Node's `Queue.getWorkers()` finds them: by the names their
//! Redis connections were given with `CLIENT SETNAME`, read from `CLIENT LIST` (of every
//! primary on a cluster). Behind [`QueueStore::list_workers`](bullmq_backend::QueueStore) of
//! the Redis backend.

use std::collections::BTreeMap;
use std::time::Duration;

use bullmq_backend::WorkerInfo;
use bullmq_protocol::keys::QueueKeys;
use fred::prelude::Client;

use crate::error::Result;

/// Picks the worker connections of `keys`' queue out of a `CLIENT LIST` reply.
///
/// A connection belongs to a worker of the queue when its name is exactly
/// `{prefix}:{base64(queue)}` (a worker without a name) or starts with that followed by
/// `:w:` — Node BullMQ's rule (a `QueueEvents` connection, `…:qe`, is not a worker).
///
/// ```
/// use bullmq_protocol::keys::QueueKeys;
/// use bullmq_redis::queue::parse_client_list;
/// let keys = QueueKeys::new("bull", "emails"); // base64("emails") = ZW1haWxz
/// let list = "id=7 addr=127.0.0.1:5000 name=bull:ZW1haWxz:w:node-1 age=12 idle=0\n\
///             id=8 addr=127.0.0.1:5001 name=bull:ZW1haWxz:qe age=3 idle=1\n";
/// let workers = parse_client_list(list, &keys);
/// assert_eq!(workers.len(), 1);
/// assert_eq!(workers[0].worker_name.as_deref(), Some("node-1"));
/// assert_eq!(workers[0].fields["name"], "emails");
/// ```
pub fn parse_client_list(list: &str, keys: &QueueKeys) -> Vec<WorkerInfo> {
    let unnamed = keys.worker_client_name(None);
    let named_prefix = format!("{unnamed}:w:");
    parse_clients(list, keys, |raw_name| {
        if raw_name == unnamed {
            Some(None)
        } else {
            Some(Some(raw_name.strip_prefix(&named_prefix)?.to_owned()))
        }
    })
}

/// Picks the worker connections of `keys`' queue out of several `CLIENT LIST` replies, one per
/// node of a cluster: those of the node listing the most, as Node's `getWorkers` does. A worker
/// has a connection to every primary of a cluster (named on each), so one node's listing holds
/// each worker once, where the sum would count it once per primary.
///
/// ```
/// use bullmq_protocol::keys::QueueKeys;
/// use bullmq_redis::queue::parse_client_lists;
/// let keys = QueueKeys::new("{bull}", "emails");
/// let a = "id=7 addr=127.0.0.1:5000 name={bull}:ZW1haWxz:w:a age=1 idle=0\n".to_owned();
/// let b = format!("{a}id=8 addr=127.0.0.1:5001 name={{bull}}:ZW1haWxz:w:b age=1 idle=0\n");
/// assert_eq!(parse_client_lists(&[a, b], &keys).len(), 2);
/// ```
pub fn parse_client_lists(lists: &[String], keys: &QueueKeys) -> Vec<WorkerInfo> {
    lists
        .iter()
        .map(|list| parse_client_list(list, keys))
        .max_by_key(Vec::len)
        .unwrap_or_default()
}

/// The QueueEvents connections of `keys`' queue in `CLIENT LIST` replies (one per node):
/// named exactly `{prefix}:{base64(queue)}:qe`, those of the node listing the most, each with
/// [`WorkerInfo::worker_name`] `None` (Node's deprecated `getQueueEvents()`).
pub fn parse_queue_events_lists(lists: &[String], keys: &QueueKeys) -> Vec<WorkerInfo> {
    let name = crate::events::queue_events_client_name(keys);
    lists
        .iter()
        .map(|list| parse_clients(list, keys, |raw| (raw == name).then_some(None)))
        .max_by_key(Vec::len)
        .unwrap_or_default()
}

/// The workers of `keys`' queue, any language: `CLIENT LIST` of the server (of every primary
/// on a cluster), read by [`parse_client_lists`].
///
/// # Errors
///
/// [`crate::RedisError::Command`] when a node refuses `CLIENT LIST` (some hosted services
/// disable it; Node returns a placeholder entry there) or cannot be reached.
pub async fn list_workers(client: &Client, keys: &QueueKeys) -> Result<Vec<WorkerInfo>> {
    let lists = crate::cluster::client_lists(client).await?;
    Ok(parse_client_lists(&lists, keys))
}

/// The QueueEvents readers of `keys`' queue, any language ([`parse_queue_events_lists`]).
///
/// # Errors
///
/// As [`list_workers`].
pub async fn list_queue_events(client: &Client, keys: &QueueKeys) -> Result<Vec<WorkerInfo>> {
    let lists = crate::cluster::client_lists(client).await?;
    Ok(parse_queue_events_lists(&lists, keys))
}

/// The connections of a `CLIENT LIST` reply that `pick` accepts (it maps a connection's raw
/// name to the [`WorkerInfo::worker_name`] to report, or `None` to skip it), each with its
/// fields as Node reports them (`name` replaced by the queue's name, `rawname` kept).
fn parse_clients(
    list: &str,
    keys: &QueueKeys,
    pick: impl Fn(&str) -> Option<Option<String>>,
) -> Vec<WorkerInfo> {
    list.lines()
        .filter_map(|line| {
            // As Node: split on spaces, then each pair at its first `=`.
            let mut fields: BTreeMap<String, String> = line
                .split(' ')
                .filter(|kv| !kv.is_empty())
                .map(|kv| match kv.split_once('=') {
                    Some((k, v)) => (k.to_owned(), v.to_owned()),
                    None => (String::new(), kv.to_owned()),
                })
                .collect();
            let raw_name = fields.get("name")?.clone();
            let worker_name = pick(&raw_name)?;
            fields.insert("name".into(), keys.name().to_owned());
            fields.insert("rawname".into(), raw_name.clone());
            let secs = |key: &str| {
                Duration::from_secs(fields.get(key).and_then(|v| v.parse().ok()).unwrap_or(0))
            };
            let info = WorkerInfo::new(
                raw_name,
                worker_name,
                fields.get("id").cloned().unwrap_or_default(),
                fields.get("addr").cloned().unwrap_or_default(),
                secs("age"),
                secs("idle"),
            );
            Some(info.with_fields(fields))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_node_worker_names_only() {
        let keys = QueueKeys::new("bull", "emails");
        let list = "id=1 addr=127.0.0.1:5000 name=bull:ZW1haWxz:w:node-1 age=12 idle=0 db=0\n\
                    id=2 addr=127.0.0.1:5001 name=bull:ZW1haWxz age=3 idle=1 db=0\n\
                    id=3 addr=127.0.0.1:5002 name=bull:ZW1haWxz:qe age=3 idle=1 db=0\n\
                    id=4 addr=127.0.0.1:5003 name=bull:b3RoZXI=:w:x age=3 idle=1 db=0\n\
                    id=5 addr=127.0.0.1:5004 name= age=3 idle=1 db=0\n";
        let workers = parse_client_list(list, &keys);
        assert_eq!(workers.len(), 2);
        assert_eq!(workers[0].worker_name.as_deref(), Some("node-1"));
        assert_eq!(workers[0].addr, "127.0.0.1:5000");
        assert_eq!(workers[0].age, Duration::from_secs(12));
        assert_eq!(workers[0].fields["rawname"], "bull:ZW1haWxz:w:node-1");
        assert_eq!(workers[0].fields["db"], "0");
        assert_eq!(workers[1].worker_name, None);
        assert_eq!(workers[1].raw_name, "bull:ZW1haWxz");
        assert_eq!(workers[1].id, "2");
        let events = parse_queue_events_lists(&[list.to_owned()], &keys);
        assert_eq!(events.len(), 1);
        assert_eq!(events[0].id, "3");
        assert_eq!(events[0].worker_name, None);
    }
}
