//! Facts about the Redis server itself (what bull-board shows above its queues): version,
//! memory used, connected clients and operations per second, from one `INFO` call. Shown by
//! `bullmq queues` and `bullmq top`.

use anyhow::{Context as _, Result};
use bullmq_redis::fred::prelude::{Client, ClientLike};
use bullmq_redis::fred::types::{ClusterHash, CustomCommand};
use serde::Serialize;

/// What `INFO` says about the server (on a cluster: the node that answered).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct ServerFacts {
    /// `redis_version` (Valkey reports the Redis version it is compatible with).
    pub(crate) version: Option<String>,
    /// `used_memory`, bytes.
    pub(crate) used_memory_bytes: Option<u64>,
    /// `used_memory_human` (`1.21M`).
    pub(crate) used_memory_human: Option<String>,
    /// `maxmemory`, bytes (0: no limit).
    pub(crate) max_memory_bytes: Option<u64>,
    /// `connected_clients`.
    pub(crate) connected_clients: Option<u64>,
    /// `instantaneous_ops_per_sec`.
    pub(crate) ops_per_sec: Option<u64>,
    /// `uptime_in_seconds`.
    pub(crate) uptime_secs: Option<u64>,
}

/// Reads the facts with one `INFO`.
///
/// # Errors
///
/// Redis failed or refused `INFO` (some hosted services rename it).
pub(crate) async fn read(client: &Client) -> Result<ServerFacts> {
    let text: String = client
        .custom(
            CustomCommand::new_static("INFO", ClusterHash::Random, false),
            Vec::<String>::new(),
        )
        .await
        .context("reading INFO")?;
    Ok(parse(&text))
}

/// The facts in `INFO`'s `field:value` lines; a missing field stays `None`.
pub(crate) fn parse(info: &str) -> ServerFacts {
    let mut facts = ServerFacts::default();
    for line in info.lines() {
        let Some((field, value)) = line.trim().split_once(':') else {
            continue;
        };
        let number = || value.parse::<u64>().ok();
        match field {
            "redis_version" => facts.version = Some(value.to_owned()),
            "used_memory" => facts.used_memory_bytes = number(),
            "used_memory_human" => facts.used_memory_human = Some(value.to_owned()),
            "maxmemory" => facts.max_memory_bytes = number(),
            "connected_clients" => facts.connected_clients = number(),
            "instantaneous_ops_per_sec" => facts.ops_per_sec = number(),
            "uptime_in_seconds" => facts.uptime_secs = number(),
            _ => {}
        }
    }
    facts
}

impl ServerFacts {
    /// `Redis 7.2.4, memory 1.21M, 5 clients, 12 ops/s` (a `?` for what INFO did not say).
    pub(crate) fn summary(&self) -> String {
        let or_unknown = |v: Option<String>| v.unwrap_or_else(|| "?".to_owned());
        format!(
            "Redis {}, memory {}, {} clients, {} ops/s",
            or_unknown(self.version.clone()),
            or_unknown(self.used_memory_human.clone()),
            or_unknown(self.connected_clients.map(|n| n.to_string())),
            or_unknown(self.ops_per_sec.map(|n| n.to_string())),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn info_fields_are_read() {
        let facts = parse(
            "# Server\r\nredis_version:7.2.4\r\nuptime_in_seconds:42\r\n# Clients\r\n\
             connected_clients:5\r\n# Memory\r\nused_memory:1268424\r\n\
             used_memory_human:1.21M\r\nmaxmemory:0\r\n# Stats\r\n\
             instantaneous_ops_per_sec:12\r\n",
        );
        assert_eq!(facts.version.as_deref(), Some("7.2.4"));
        assert_eq!(facts.used_memory_bytes, Some(1_268_424));
        assert_eq!(facts.connected_clients, Some(5));
        assert_eq!(facts.ops_per_sec, Some(12));
        assert_eq!(facts.uptime_secs, Some(42));
        assert_eq!(
            facts.summary(),
            "Redis 7.2.4, memory 1.21M, 5 clients, 12 ops/s"
        );
        assert_eq!(parse("").summary(), "Redis ?, memory ?, ? clients, ? ops/s");
    }
}
