//! Finding the workers of a queue the way Node's `Queue.getWorkers()` does: by the names their
//! Redis connections were given with `CLIENT SETNAME`.

use anyhow::{Context as _, Result};
use bullmq_protocol::keys::QueueKeys;
use serde::Serialize;

/// One worker connection found in `CLIENT LIST`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct WorkerConnection {
    /// The raw connection name (`{prefix}:{base64(queue)}[:w:{worker name}]`).
    pub(crate) name: String,
    /// The worker's own name, when it has one (the part after `:w:`).
    pub(crate) worker_name: Option<String>,
    /// Client address as Redis reports it.
    pub(crate) addr: String,
    /// Seconds since the connection was opened.
    pub(crate) age_secs: u64,
    /// Seconds since the connection's last command.
    pub(crate) idle_secs: u64,
}

/// Picks the connections of `keys`' queue out of a `CLIENT LIST` reply.
///
/// A connection belongs to a worker of the queue when its name is exactly
/// `{prefix}:{base64(queue)}` (a worker without a name) or starts with that followed by `:w:`,
/// which is the rule Node BullMQ applies.
pub(crate) fn parse_client_list(list: &str, keys: &QueueKeys) -> Vec<WorkerConnection> {
    let unnamed = keys.worker_client_name(None);
    let named_prefix = format!("{unnamed}:w:");
    list.lines()
        .filter_map(|line| {
            let field = |key: &str| {
                line.split(' ')
                    .find_map(|kv| kv.strip_prefix(key).and_then(|rest| rest.strip_prefix('=')))
            };
            let name = field("name")?;
            let worker_name = if name == unnamed {
                None
            } else {
                Some(name.strip_prefix(&named_prefix)?.to_string())
            };
            Some(WorkerConnection {
                name: name.to_string(),
                worker_name,
                addr: field("addr").unwrap_or_default().to_string(),
                age_secs: field("age").and_then(|v| v.parse().ok()).unwrap_or(0),
                idle_secs: field("idle").and_then(|v| v.parse().ok()).unwrap_or(0),
            })
        })
        .collect()
}

/// The worker connections of a queue, read with `CLIENT LIST` on `client`.
pub(crate) async fn list_workers(
    client: &bullmq_redis::fred::prelude::Client,
    keys: &QueueKeys,
) -> Result<Vec<WorkerConnection>> {
    use bullmq_redis::fred::prelude::ClientInterface;
    let list: String = client
        .client_list::<String, String>(None, None)
        .await
        .context("CLIENT LIST failed (some hosted Redis services disable it)")?;
    Ok(parse_client_list(&list, keys))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_node_worker_names_only() {
        let keys = QueueKeys::new("bull", "emails");
        // base64("emails") = ZW1haWxz
        let list = "id=1 addr=127.0.0.1:5000 name=bull:ZW1haWxz:w:node-1 age=12 idle=0 db=0\n\
                    id=2 addr=127.0.0.1:5001 name=bull:ZW1haWxz age=3 idle=1 db=0\n\
                    id=3 addr=127.0.0.1:5002 name=bull:ZW1haWxz:qe age=3 idle=1 db=0\n\
                    id=4 addr=127.0.0.1:5003 name=bull:b3RoZXI=:w:x age=3 idle=1 db=0\n\
                    id=5 addr=127.0.0.1:5004 name= age=3 idle=1 db=0\n";
        let workers = parse_client_list(list, &keys);
        assert_eq!(workers.len(), 2);
        assert_eq!(workers[0].worker_name.as_deref(), Some("node-1"));
        assert_eq!(workers[0].addr, "127.0.0.1:5000");
        assert_eq!(workers[0].age_secs, 12);
        assert_eq!(workers[1].worker_name, None);
        assert_eq!(workers[1].name, "bull:ZW1haWxz");
    }
}
