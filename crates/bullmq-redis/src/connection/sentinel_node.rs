//! A connection to one Sentinel itself (not to the primary it names), for the commands we send
//! to the Sentinels: `SENTINEL get-master-addr-by-name` (the primary watch) and
//! `SENTINEL REPLICAS` (replica reads).

use super::{ConnectionConfig, Node, Topology};

impl ConnectionConfig {
    /// The configuration of a client to the Sentinel at `node`: one server, the Sentinels' own
    /// credentials, no database (a Sentinel has none), this configuration's TLS and timeouts,
    /// and a command timeout (the configured one, or the connect timeout) so that a silent
    /// Sentinel turns into an error instead of a wait. `None` unless the topology is Sentinel.
    pub(super) fn sentinel_node(&self, node: &Node) -> Option<ConnectionConfig> {
        let Topology::Sentinel {
            username, password, ..
        } = &self.topology
        else {
            return None;
        };
        let mut sentinel = self.clone();
        sentinel.host = node.host.clone();
        sentinel.port = node.port;
        sentinel.topology = Topology::Single;
        sentinel.replica_reads = false;
        sentinel.db = 0;
        sentinel.username = username.clone();
        sentinel.password = password.clone();
        if sentinel.command_timeout.is_zero() {
            sentinel.command_timeout = sentinel.connect_timeout;
        }
        Some(sentinel)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sentinel_node_is_one_server_with_the_sentinel_credentials() {
        let config = ConnectionConfig::from_url(
            "redis-sentinel://:data-pass@10.0.0.5:26379/3?sentinelServiceName=m&sentinelPassword=s-pass",
        )
        .unwrap();
        let node = config.sentinel_node(&Node::new("10.0.0.6", 26380)).unwrap();
        assert_eq!(node.topology, Topology::Single);
        assert_eq!(
            (node.host.as_str(), node.port, node.db),
            ("10.0.0.6", 26380, 0)
        );
        assert_eq!(node.password.as_deref(), Some("s-pass"));
        assert_eq!(node.command_timeout, config.connect_timeout);
        assert!(ConnectionConfig::default()
            .sentinel_node(&Node::new("h", 1))
            .is_none());
    }
}
