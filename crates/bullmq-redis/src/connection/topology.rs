//! Which servers a connection goes to: one server, a Redis Cluster, or a primary found through
//! Sentinel.

use std::fmt;

/// One `host:port` of a cluster seed list or a Sentinel list.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Node {
    /// Host name or IP.
    pub host: String,
    /// TCP port.
    pub port: u16,
}

impl Node {
    /// The node at `host:port`.
    pub fn new(host: impl Into<String>, port: u16) -> Self {
        Self {
            host: host.into(),
            port,
        }
    }
}

impl fmt::Display for Node {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.host, self.port)
    }
}

impl<H: Into<String>> From<(H, u16)> for Node {
    fn from((host, port): (H, u16)) -> Self {
        Self::new(host, port)
    }
}

/// The shape of the deployment [`ConnectionConfig`](super::ConnectionConfig) connects to.
///
/// Only the connection is configured here: which keys a script touches, and failover while
/// running, are the business of the layers above.
#[derive(Clone, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum Topology {
    /// One server, at [`ConnectionConfig::host`](super::ConnectionConfig::host) and
    /// [`ConnectionConfig::port`](super::ConnectionConfig::port).
    #[default]
    Single,
    /// A Redis Cluster. The seed nodes only need to hold one reachable member: the client reads
    /// the rest of the cluster from it (`CLUSTER SLOTS`) and follows redirections.
    Cluster {
        /// Seed nodes, tried in order.
        nodes: Vec<Node>,
    },
    /// A primary whose address the Sentinel nodes give. Database, user name and password of the
    /// [`ConnectionConfig`](super::ConnectionConfig) are those of the primary; the Sentinel
    /// nodes may have credentials of their own.
    Sentinel {
        /// The name the Sentinels monitor the primary under (`sentinel monitor NAME ...`).
        service_name: String,
        /// Sentinel nodes (not the primary).
        nodes: Vec<Node>,
        /// ACL user name for the Sentinel nodes.
        username: Option<String>,
        /// Password for the Sentinel nodes.
        password: Option<String>,
    },
}

// By hand, so that a Sentinel password never lands in a log line.
impl fmt::Debug for Topology {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Single => f.write_str("Single"),
            Self::Cluster { nodes } => f.debug_struct("Cluster").field("nodes", nodes).finish(),
            Self::Sentinel {
                service_name,
                nodes,
                username,
                password,
            } => f
                .debug_struct("Sentinel")
                .field("service_name", service_name)
                .field("nodes", nodes)
                .field("username", username)
                .field("password", &password.as_ref().map(|_| "***"))
                .finish(),
        }
    }
}

/// `a:1,b:2`, for messages.
pub(super) fn node_list(nodes: &[Node]) -> String {
    nodes
        .iter()
        .map(Node::to_string)
        .collect::<Vec<_>>()
        .join(",")
}
