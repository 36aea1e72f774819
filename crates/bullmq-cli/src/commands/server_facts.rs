//! Facts about the server itself (what bull-board shows above its queues), shown by
//! `bullmq queues` and `bullmq top`: on Redis version, memory used, connected clients and
//! operations per second, from one `INFO` call; on PostgreSQL the server's major version and
//! the schema's BullMQ migration, as the backend's open-time checks read them.

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
    /// On PostgreSQL (instead of the Redis fields, all `None` then).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) postgres: Option<PostgresFacts>,
}

/// What PostgreSQL's open-time checks found.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct PostgresFacts {
    /// The server's major version (`server_version_num / 10000`).
    pub(crate) server_major: i64,
    /// The BullMQ schema.
    pub(crate) schema: String,
    /// `MAX(version)` of the schema's migration ledger.
    pub(crate) migration: i64,
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
    /// The facts of a PostgreSQL server from its backend's ledger check.
    pub(crate) fn postgres(ledger: bullmq_postgres::LedgerState, schema: &str) -> Self {
        Self {
            postgres: Some(PostgresFacts {
                server_major: ledger.server_major,
                schema: schema.to_owned(),
                migration: ledger.version,
            }),
            ..Self::default()
        }
    }

    /// `Redis 7.2.4, memory 1.21M, 5 clients, 12 ops/s` (a `?` for what INFO did not say);
    /// `PostgreSQL 15, schema "jobs" at BullMQ migration 11`.
    pub(crate) fn summary(&self) -> String {
        if let Some(pg) = &self.postgres {
            return format!(
                "PostgreSQL {}, schema {:?} at BullMQ migration {}",
                pg.server_major, pg.schema, pg.migration
            );
        }
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
        assert!(serde_json::to_value(&facts)
            .unwrap()
            .get("postgres")
            .is_none());
        let pg = ServerFacts::postgres(
            bullmq_postgres::LedgerState {
                version: 11,
                min_client_version: 6,
                server_major: 15,
            },
            "jobs",
        );
        assert_eq!(
            pg.summary(),
            r#"PostgreSQL 15, schema "jobs" at BullMQ migration 11"#
        );
        assert_eq!(
            serde_json::to_value(&pg).unwrap()["postgres"]["migration"],
            11
        );
    }
}
