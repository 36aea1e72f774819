//! Replica reads behind Sentinel: finding a healthy replica of the primary
//! (`SENTINEL REPLICAS <name>`) and connecting one client to it.
//!
//! fred's Sentinel support connects to the primary only (its `replicas` feature is for cluster
//! replicas), so the replica is found here, once, when a store opens.

use std::collections::HashMap;

use fred::prelude::{Client, ClientLike, Value};
use fred::types::CustomCommand;

use super::{quit_within, ConnectionConfig, Node, Topology, QUIT_TIMEOUT};
use crate::error::{RedisError, Result};

/// Refuses [`ConnectionConfig::replica_reads`] on a topology without Sentinels, which lists no
/// replicas to read from.
pub(super) fn check_replica_reads(config: &ConnectionConfig) -> Result<()> {
    if config.replica_reads && !matches!(config.topology, Topology::Sentinel { .. }) {
        return Err(RedisError::Config(
            "replica reads need Sentinel (a redis-sentinel:// URL or ConnectionConfig::sentinel): \
             only the Sentinels list the replicas of a primary"
                .into(),
        ));
    }
    Ok(())
}

/// One replica as a Sentinel describes it (the fields of `SENTINEL REPLICAS` we use).
#[derive(Debug, Clone, PartialEq, Eq)]
struct ReplicaEntry {
    /// Where it listens (as announced to the Sentinels).
    node: Node,
    /// `flags`: `slave`, plus `s_down`, `o_down`, `disconnected`, ... when in trouble.
    flags: String,
    /// `master-link-status`: `ok` when its replication link to the primary is up.
    master_link_status: String,
    /// `slave-repl-offset`: how far it has replicated (higher is fresher).
    repl_offset: u64,
}

impl ReplicaEntry {
    /// Reads one entry of a `SENTINEL REPLICAS` reply (field/value pairs); `None` when it lacks
    /// an address.
    fn from_fields(fields: &HashMap<String, String>) -> Option<Self> {
        let host = fields.get("ip")?.clone();
        let port = fields.get("port")?.parse().ok()?;
        Some(Self {
            node: Node::new(host, port),
            flags: fields.get("flags").cloned().unwrap_or_default(),
            master_link_status: fields
                .get("master-link-status")
                .cloned()
                .unwrap_or_default(),
            repl_offset: fields
                .get("slave-repl-offset")
                .and_then(|offset| offset.parse().ok())
                .unwrap_or(0),
        })
    }

    /// Whether reads can go there: not down in anyone's view, connected to the Sentinel, and
    /// replicating from the primary.
    fn is_healthy(&self) -> bool {
        let troubled = self
            .flags
            .split(',')
            .any(|flag| matches!(flag, "s_down" | "o_down" | "disconnected"));
        !troubled && self.master_link_status == "ok"
    }
}

/// The healthy replica to read from: the freshest (highest replication offset) of the healthy
/// entries, the first listed on a tie.
fn pick_replica(entries: &[ReplicaEntry]) -> Option<&ReplicaEntry> {
    entries.iter().filter(|entry| entry.is_healthy()).fold(
        None,
        |best: Option<&ReplicaEntry>, entry| match best {
            Some(best) if best.repl_offset >= entry.repl_offset => Some(best),
            _ => Some(entry),
        },
    )
}

/// The entries of a `SENTINEL REPLICAS` reply (RESP2 flat arrays or RESP3 maps).
fn parse_replicas(reply: Value) -> Vec<ReplicaEntry> {
    reply
        .into_array()
        .into_iter()
        .filter_map(|entry| entry.into_map().ok())
        .map(|map| {
            map.inner()
                .into_iter()
                .filter_map(|(key, value)| Some((key.as_str()?.to_owned(), value.as_string()?)))
                .collect::<HashMap<_, _>>()
        })
        .filter_map(|fields| ReplicaEntry::from_fields(&fields))
        .collect()
}

impl ConnectionConfig {
    /// Connects one client to a healthy replica of the Sentinel primary, for
    /// [`ConnectionConfig::replica_reads`]; `None` when it is off, no Sentinel answers, none
    /// lists a healthy replica, or the replica cannot be reached (reads then stay on the
    /// primary, which is never an error).
    ///
    /// The client is a plain one-server client on the replica's address, with the data
    /// servers' credentials, database and TLS settings, and a command timeout (the configured
    /// one, or [`ConnectionConfig::connect_timeout`] when there is none) so that a replica
    /// that goes silent turns into an error the caller can answer from the primary instead of
    /// a getter waiting for the reconnect.
    pub(crate) async fn connect_replica(&self) -> Option<Client> {
        let Topology::Sentinel { .. } = &self.topology else {
            return None;
        };
        if !self.replica_reads {
            return None;
        }
        let entries = self.list_replicas().await?;
        let Some(replica) = pick_replica(&entries) else {
            tracing::debug!(
                target = %self.target(),
                listed = ?entries,
                "no healthy replica listed: getters read from the primary"
            );
            return None;
        };
        let config = self.replica_config(&replica.node);
        match config.connect(None).await {
            Ok(client) => {
                tracing::debug!(replica = %replica.node, "getters read from this replica");
                Some(client)
            }
            Err(error) => {
                tracing::debug!(
                    replica = %replica.node,
                    %error,
                    "the replica cannot be reached: getters read from the primary"
                );
                None
            }
        }
    }

    /// The configuration of the replica client: one server at `node`, the rest as here.
    fn replica_config(&self, node: &Node) -> ConnectionConfig {
        let mut config = self.clone();
        config.host = node.host.clone();
        config.port = node.port;
        config.topology = Topology::Single;
        config.replica_reads = false;
        if config.command_timeout.is_zero() {
            config.command_timeout = config.connect_timeout;
        }
        config
    }

    /// `SENTINEL REPLICAS <name>` from the first Sentinel that answers, `None` when none does.
    async fn list_replicas(&self) -> Option<Vec<ReplicaEntry>> {
        let Topology::Sentinel {
            service_name,
            nodes,
            ..
        } = &self.topology
        else {
            return None;
        };
        for node in nodes {
            let sentinel = self.sentinel_node(node)?;
            let client = match sentinel.connect(None).await {
                Ok(client) => client,
                Err(error) => {
                    tracing::debug!(sentinel = %node, %error, "Sentinel unreachable for SENTINEL REPLICAS");
                    continue;
                }
            };
            let reply: std::result::Result<Value, _> = client
                .custom(
                    CustomCommand::new_static("SENTINEL", None, false),
                    vec![Value::from("REPLICAS"), Value::from(service_name.as_str())],
                )
                .await;
            quit_within(&client, QUIT_TIMEOUT).await;
            match reply {
                Ok(reply) => return Some(parse_replicas(reply)),
                Err(error) => {
                    tracing::debug!(sentinel = %node, %error, "SENTINEL REPLICAS failed");
                }
            }
        }
        tracing::debug!(target = %self.target(), "no Sentinel listed the replicas: getters read from the primary");
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(port: u16, flags: &str, link: &str, offset: u64) -> ReplicaEntry {
        ReplicaEntry {
            node: Node::new("10.0.0.9", port),
            flags: flags.into(),
            master_link_status: link.into(),
            repl_offset: offset,
        }
    }

    #[test]
    fn troubled_replicas_are_skipped() {
        assert!(entry(1, "slave", "ok", 0).is_healthy());
        assert!(!entry(1, "s_down,slave", "ok", 0).is_healthy());
        assert!(!entry(1, "o_down,slave", "ok", 0).is_healthy());
        assert!(!entry(1, "slave,disconnected", "ok", 0).is_healthy());
        assert!(!entry(1, "slave", "err", 0).is_healthy());
        assert!(!entry(1, "slave", "", 0).is_healthy());
    }

    #[test]
    fn the_freshest_healthy_replica_is_picked() {
        let entries = [
            entry(1, "s_down,slave", "ok", 900),
            entry(2, "slave", "ok", 100),
            entry(3, "slave", "ok", 300),
            entry(4, "slave", "ok", 300),
            entry(5, "slave", "err", 999),
        ];
        assert_eq!(pick_replica(&entries).map(|e| e.node.port), Some(3));
        assert_eq!(pick_replica(&entries[..1]), None);
        assert_eq!(pick_replica(&[]), None);
    }

    #[test]
    fn a_resp2_reply_is_read_field_by_field() {
        let pairs = |pairs: &[(&str, &str)]| {
            Value::Array(
                pairs
                    .iter()
                    .flat_map(|(k, v)| [Value::from(*k), Value::from(*v)])
                    .collect(),
            )
        };
        let reply = Value::Array(vec![
            pairs(&[
                ("name", "127.0.0.1:7121"),
                ("ip", "127.0.0.1"),
                ("port", "7121"),
                ("flags", "slave"),
                ("master-link-status", "ok"),
                ("slave-repl-offset", "4242"),
            ]),
            pairs(&[("name", "no address")]),
        ]);
        assert_eq!(
            parse_replicas(reply),
            vec![entry(7121, "slave", "ok", 4242)]
                .into_iter()
                .map(|mut e| {
                    e.node.host = "127.0.0.1".into();
                    e
                })
                .collect::<Vec<_>>()
        );
    }

    #[test]
    fn replica_reads_need_sentinel() {
        let single = ConnectionConfig::default().replica_reads(true);
        let error = check_replica_reads(&single).unwrap_err().to_string();
        assert!(error.contains("replica reads need Sentinel"), "{error}");
        let cluster = ConnectionConfig::default()
            .cluster([("h", 7000)])
            .replica_reads(true);
        assert!(cluster.check().is_err());
        let sentinel = ConnectionConfig::default()
            .sentinel("m", [("s", 26379)])
            .replica_reads(true);
        assert!(sentinel.check().is_ok());
        assert!(ConnectionConfig::default().check().is_ok());
    }

    #[test]
    fn the_replica_client_is_one_server_with_a_command_bound() {
        let config = ConnectionConfig::default()
            .sentinel("m", [("s", 26379)])
            .replica_reads(true);
        let replica = config.replica_config(&Node::new("10.0.0.7", 6380));
        assert_eq!(replica.topology, Topology::Single);
        assert_eq!((replica.host.as_str(), replica.port), ("10.0.0.7", 6380));
        assert!(!replica.replica_reads);
        assert_eq!(replica.command_timeout, config.connect_timeout);
        assert!(replica.check().is_ok());
    }
}
