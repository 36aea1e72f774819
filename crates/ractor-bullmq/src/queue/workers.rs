//! [`Queue::get_workers`]: the workers of a queue, found as Node's `Queue.getWorkers()` finds
//! them — by the names their Redis connections were given with `CLIENT SETNAME`. Redis-only:
//! the connections are Redis's to list.

use std::collections::BTreeMap;
use std::time::Duration;

use bullmq_protocol::keys::QueueKeys;

use crate::error::{QueueError, Result};
use crate::queue::Queue;

/// One worker connection of a queue, from `CLIENT LIST` (one entry of Node's `getWorkers()`).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct WorkerInfo {
    /// The raw connection name, `{prefix}:{base64(queue)}[:w:{worker name}]` (Node `rawname`).
    pub raw_name: String,
    /// The worker's own name, the part after `:w:` (`None` for a worker without a name).
    pub worker_name: Option<String>,
    /// Redis's client id (`id`).
    pub id: String,
    /// Client address as Redis reports it (`addr`).
    pub addr: String,
    /// Time since the connection was opened (`age`, whole seconds).
    pub age: Duration,
    /// Time since the connection's last command (`idle`, whole seconds).
    pub idle: Duration,
    /// Every field of the `CLIENT LIST` line, as text (Node's entry: all of them, `name`
    /// replaced by the queue's name and the original kept as `rawname`).
    pub fields: BTreeMap<String, String>,
}

/// Picks the worker connections of `keys`' queue out of a `CLIENT LIST` reply.
///
/// A connection belongs to a worker of the queue when its name is exactly
/// `{prefix}:{base64(queue)}` (a worker without a name) or starts with that followed by
/// `:w:` — Node BullMQ's rule (a `QueueEvents` connection, `…:qe`, is not a worker).
///
/// ```
/// use bullmq_protocol::keys::QueueKeys;
/// use ractor_bullmq::queue::parse_client_list;
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
            Some(WorkerInfo {
                worker_name,
                id: fields.get("id").cloned().unwrap_or_default(),
                addr: fields.get("addr").cloned().unwrap_or_default(),
                age: secs("age"),
                idle: secs("idle"),
                raw_name,
                fields,
            })
        })
        .collect()
}

/// Picks the worker connections of `keys`' queue out of several `CLIENT LIST` replies, one per
/// node of a cluster: those of the node listing the most, as Node's `getWorkers` does. A worker
/// has a connection to every primary of a cluster (named on each), so one node's listing holds
/// each worker once, where the sum would count it once per primary.
///
/// ```
/// use bullmq_protocol::keys::QueueKeys;
/// use ractor_bullmq::queue::parse_client_lists;
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

impl Queue {
    /// The workers of this queue, any language, read from `CLIENT LIST` as Node's
    /// `queue.getWorkers()`: connections named `{prefix}:{base64(queue)}` or
    /// `…:w:{worker name}`.
    ///
    /// Redis-only, and only as good as the server's `CLIENT LIST`: some hosted services
    /// disable it (Node returns a placeholder entry there; this returns the error).
    ///
    /// # Errors
    ///
    /// [`QueueError::RedisOnly`] on another backend; [`QueueError::Redis`] when the command
    /// fails.
    ///
    /// # Cancel safety
    ///
    /// Read-only: cancelling loses nothing.
    pub async fn get_workers(&self) -> Result<Vec<WorkerInfo>> {
        let client = self.redis_client().ok_or(QueueError::RedisOnly {
            operation: "get_workers",
        })?;
        // Every primary of a cluster: a worker's connection is listed by the node it is on.
        let lists = bullmq_redis::cluster::client_lists(client).await?;
        Ok(parse_client_lists(&lists, self.keys()))
    }

    /// How many workers [`Queue::get_workers`] finds (Node `getWorkersCount`).
    ///
    /// # Errors
    ///
    /// As [`Queue::get_workers`].
    ///
    /// # Cancel safety
    ///
    /// Read-only: cancelling loses nothing.
    pub async fn get_workers_count(&self) -> Result<usize> {
        Ok(self.get_workers().await?.len())
    }

    /// The QueueEvents readers of this queue, any language, read from `CLIENT LIST` as Node's
    /// (deprecated) `queue.getQueueEvents()`: connections named exactly
    /// `{prefix}:{base64(queue)}:qe`, of the node listing the most on a cluster. Each entry's
    /// [`WorkerInfo::worker_name`] is `None`.
    ///
    /// # Errors
    ///
    /// As [`Queue::get_workers`].
    ///
    /// # Cancel safety
    ///
    /// Read-only: cancelling loses nothing.
    pub async fn get_queue_events(&self) -> Result<Vec<WorkerInfo>> {
        let client = self.redis_client().ok_or(QueueError::RedisOnly {
            operation: "get_queue_events",
        })?;
        let lists = bullmq_redis::cluster::client_lists(client).await?;
        let name = bullmq_redis::events::queue_events_client_name(self.keys());
        let keys = self.keys();
        Ok(lists
            .iter()
            .map(|list| parse_clients(list, keys, |raw| (raw == name).then_some(None)))
            .max_by_key(Vec::len)
            .unwrap_or_default())
    }
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
    }
}
