//! Connection configuration and client construction.

use std::fmt;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use fred::interfaces::ClientInterface;
use fred::prelude::{Builder, Client, ClientLike, Config, EventInterface, ServerConfig};
use fred::types::config::{ClusterDiscoveryPolicy, ReconnectError, Server};
use fred::types::ClientUnblockFlag;

use crate::error::{RedisError, Result};

mod primary_watch;
mod reconnect;
mod replica;
mod sentinel_node;
mod tls;
mod topology;
mod url;

pub use reconnect::{Reconnect, DEFAULT_UNRESPONSIVE_TIMEOUT};
pub use tls::TlsOptions;
pub use topology::{Node, Topology};

/// URL schemes [`ConnectionConfig::from_url`] accepts, under Redis' and Valkey's names: one
/// server, a cluster (`-cluster`) or a primary behind Sentinel (`-sentinel`); the TLS ones have
/// `s` after the name (`rediss`, `valkeys`).
pub const ACCEPTED_SCHEMES: [&str; 12] = [
    "redis://",
    "rediss://",
    "redis-cluster://",
    "rediss-cluster://",
    "redis-sentinel://",
    "rediss-sentinel://",
    "valkey://",
    "valkeys://",
    "valkey-cluster://",
    "valkeys-cluster://",
    "valkey-sentinel://",
    "valkeys-sentinel://",
];

/// How long closing one connection may take: a `QUIT` sent while the client is reconnecting
/// waits for a connection that may never come.
const QUIT_TIMEOUT: Duration = Duration::from_secs(2);

/// Where and how to connect to Redis.
///
/// Built from a URL (see [`ConnectionConfig::from_url`] for every form) or from
/// [`ConnectionConfig::default`] with the builder methods ([`ConnectionConfig::cluster`],
/// [`ConnectionConfig::sentinel`], [`ConnectionConfig::tls_ca_file`], ...) or field by field.
///
/// ```
/// use bullmq_redis::{ConnectionConfig, Node, Topology};
/// let config = ConnectionConfig::from_url("redis://127.0.0.1:6379/2").unwrap();
/// assert_eq!(config.db, 2);
///
/// let cluster = ConnectionConfig::default().cluster([("10.0.0.1", 7000), ("10.0.0.2", 7000)]);
/// assert_eq!(
///     cluster.topology,
///     Topology::Cluster { nodes: vec![Node::new("10.0.0.1", 7000), Node::new("10.0.0.2", 7000)] }
/// );
///
/// let tls = ConnectionConfig::default().tls_ca_file("/etc/redis/ca.pem");
/// assert!(tls.tls);
/// ```
#[derive(Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ConnectionConfig {
    /// Host name or IP (default `127.0.0.1`). With a cluster or Sentinel topology, the first
    /// node's (the nodes are in [`ConnectionConfig::topology`]).
    pub host: String,
    /// TCP port (default 6379). With a cluster or Sentinel topology, the first node's.
    pub port: u16,
    /// Database index (default 0; a cluster has database 0 only).
    pub db: u8,
    /// ACL user name (of the data servers; Sentinel nodes have their own in [`Topology`]).
    pub username: Option<String>,
    /// Password (of the data servers).
    pub password: Option<String>,
    /// Connect with TLS (`rediss://` and the other TLS schemes); how is in
    /// [`ConnectionConfig::tls_options`].
    pub tls: bool,
    /// CA, client certificate, server name and verification of TLS connections (used only when
    /// [`ConnectionConfig::tls`] is on).
    pub tls_options: TlsOptions,
    /// One server, a cluster, or Sentinel (default one server).
    pub topology: Topology,
    /// How long the first connection may take before [`RedisError::Connect`] (default 5 s).
    pub connect_timeout: Duration,
    /// Timeout of a single command, `Duration::ZERO` for none (default none: blocking commands
    /// carry their own timeouts).
    pub command_timeout: Duration,
    /// How the client reconnects after losing its connection (default: exponential from
    /// 100 ms to 2 s with up to 100 ms of jitter, forever).
    pub reconnect: Reconnect,
    /// How long a non-blocking command may wait for its reply before its connection is taken
    /// for dead and reconnected, the commands in flight retried on the new one (default
    /// [`DEFAULT_UNRESPONSIVE_TIMEOUT`], 30 s; `None` waits forever). Catches the server that
    /// hangs without closing the connection, which no reconnect policy would notice.
    pub unresponsive_timeout: Option<Duration>,
    /// Send the queue store's read-only getters (jobs, counts, ranges, states, logs, meta,
    /// metrics, dependencies, schedulers) to a healthy replica the Sentinels list, writes
    /// staying on the primary (default off; `replica_reads=true` in a Sentinel URL). Sentinel
    /// topology only. A getter may then see a slightly older state (replication is
    /// asynchronous); when the replica cannot answer, the primary does. See the builder
    /// [`ConnectionConfig::replica_reads()`].
    pub replica_reads: bool,
}

// By hand, so that the password never lands in a log line.
impl fmt::Debug for ConnectionConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ConnectionConfig")
            .field("host", &self.host)
            .field("port", &self.port)
            .field("db", &self.db)
            .field("username", &self.username)
            .field("password", &self.password.as_ref().map(|_| "***"))
            .field("tls", &self.tls)
            .field("tls_options", &self.tls_options)
            .field("topology", &self.topology)
            .field("connect_timeout", &self.connect_timeout)
            .field("command_timeout", &self.command_timeout)
            .field("reconnect", &self.reconnect)
            .field("unresponsive_timeout", &self.unresponsive_timeout)
            .field("replica_reads", &self.replica_reads)
            .finish()
    }
}

impl Default for ConnectionConfig {
    fn default() -> Self {
        Self {
            host: "127.0.0.1".into(),
            port: 6379,
            db: 0,
            username: None,
            password: None,
            tls: false,
            tls_options: TlsOptions::default(),
            topology: Topology::Single,
            connect_timeout: Duration::from_secs(5),
            command_timeout: Duration::ZERO,
            reconnect: Reconnect::default(),
            unresponsive_timeout: Some(DEFAULT_UNRESPONSIVE_TIMEOUT),
            replica_reads: false,
        }
    }
}

impl ConnectionConfig {
    /// Parses a connection URL. The forms (the ones fred reads, plus our TLS parameters):
    ///
    /// ```text
    /// redis://[[user]:password@]host[:port][/db]                 one server (port 6379)
    /// rediss://...                                               the same over TLS
    /// redis-cluster://[[user]:password@]host:port[?node=host2:port2&node=...]
    ///                                                            a cluster, from seed nodes
    /// redis-sentinel://[[user]:password@]host[:port][/db]?sentinelServiceName=NAME
    ///     [&node=host2:port2...][&sentinelUsername=U][&sentinelPassword=P]
    ///     [&replica_reads=true]
    ///                                                            a primary behind Sentinel
    ///                                                            (host, port 26379, and the
    ///                                                            nodes are Sentinels)
    /// ```
    ///
    /// `rediss-cluster://` and `rediss-sentinel://` are the TLS forms, and `valkey` may replace
    /// `redis` in every scheme (see [`ACCEPTED_SCHEMES`]). TLS schemes take these query
    /// parameters (see [`TlsOptions`]):
    ///
    /// | parameter | meaning |
    /// |---|---|
    /// | `tls_ca=/path/ca.pem` | trust this CA (PEM) instead of the platform roots |
    /// | `tls_cert=/path/client.pem&tls_key=/path/client.key` | present a client certificate (mutual TLS) |
    /// | `tls_server_name=NAME` | SNI and certificate check against `NAME` instead of the host |
    /// | `tls_danger_accept_invalid_certs=true` | **insecure**: accept any server certificate |
    ///
    /// Sentinel schemes also take `replica_reads=true` (or `false`): getters read from a replica
    /// (see [`ConnectionConfig::replica_reads()`]).
    ///
    /// Percent-encode what a URL cannot hold as is (`/` in a path is fine).
    ///
    /// ```
    /// use bullmq_redis::{ConnectionConfig, RedisError, Topology};
    /// let error = ConnectionConfig::from_url("http://127.0.0.1:6379").unwrap_err();
    /// assert!(matches!(error, RedisError::UnsupportedScheme { .. }));
    /// assert!(error.to_string().contains("rediss://"));
    ///
    /// let sentinel = ConnectionConfig::from_url(
    ///     "redis-sentinel://10.0.0.5:26379/1?sentinelServiceName=mymaster&node=10.0.0.6:26379",
    /// )
    /// .unwrap();
    /// assert!(matches!(sentinel.topology, Topology::Sentinel { .. }));
    /// assert_eq!(sentinel.db, 1);
    /// ```
    ///
    /// # Errors
    ///
    /// [`RedisError::UnsupportedScheme`] when the URL does not start with one of
    /// [`ACCEPTED_SCHEMES`], [`RedisError::Config`] (naming the problem, never the password)
    /// when it is not a valid URL of its form: a bad host or port, `node=` on a single-server
    /// scheme, a Sentinel URL without `sentinelServiceName`, a database on a cluster, a TLS
    /// parameter on a plain scheme, `replica_reads` on a scheme that is not a Sentinel one, or
    /// an unknown query parameter. The TLS files are read at
    /// connect time (or by [`ConnectionConfig::check`]).
    pub fn from_url(url: &str) -> Result<Self> {
        url::parse(url)
    }

    /// `REDIS_URL` from the environment, or `redis://127.0.0.1:6379`.
    ///
    /// # Errors
    ///
    /// [`RedisError::Config`] when `REDIS_URL` is set but not a valid URL.
    pub fn from_env() -> Result<Self> {
        match std::env::var("REDIS_URL") {
            Ok(url) if !url.is_empty() => Self::from_url(&url),
            _ => Ok(Self::default()),
        }
    }

    /// A cluster reached through `nodes` (seed nodes: one reachable member is enough).
    /// [`ConnectionConfig::host`] and [`ConnectionConfig::port`] become the first node's.
    #[must_use]
    pub fn cluster<N: Into<Node>>(mut self, nodes: impl IntoIterator<Item = N>) -> Self {
        let nodes: Vec<Node> = nodes.into_iter().map(Into::into).collect();
        self.set_first_node(&nodes);
        self.topology = Topology::Cluster { nodes };
        self
    }

    /// The primary the Sentinel `nodes` know as `service_name`. The Sentinels have no
    /// credentials unless [`ConnectionConfig::sentinel_credentials`] gives some.
    #[must_use]
    pub fn sentinel<N: Into<Node>>(
        mut self,
        service_name: impl Into<String>,
        nodes: impl IntoIterator<Item = N>,
    ) -> Self {
        let nodes: Vec<Node> = nodes.into_iter().map(Into::into).collect();
        self.set_first_node(&nodes);
        self.topology = Topology::Sentinel {
            service_name: service_name.into(),
            nodes,
            username: None,
            password: None,
        };
        self
    }

    /// User name and password of the Sentinel nodes (not of the primary: those are
    /// [`ConnectionConfig::username`] and [`ConnectionConfig::password`]). Does nothing unless
    /// the topology is Sentinel.
    #[must_use]
    pub fn sentinel_credentials(
        mut self,
        username: Option<String>,
        password: Option<String>,
    ) -> Self {
        if let Topology::Sentinel {
            username: u,
            password: p,
            ..
        } = &mut self.topology
        {
            *u = username;
            *p = password;
        }
        self
    }

    /// The reconnect policy (see [`Reconnect`]).
    #[must_use]
    pub fn reconnect(mut self, reconnect: Reconnect) -> Self {
        self.reconnect = reconnect;
        self
    }

    /// The unresponsive-connection bound (see [`ConnectionConfig::unresponsive_timeout`]);
    /// `None` turns the check off.
    #[must_use]
    pub fn unresponsive_timeout(mut self, timeout: Option<Duration>) -> Self {
        self.unresponsive_timeout = timeout;
        self
    }

    /// Whether the queue store sends its read-only getters to a replica the Sentinels list
    /// (what is read where, and the fallback to the primary, are on the field of the same
    /// name). Needs a Sentinel topology: [`ConnectionConfig::check`] and
    /// [`ConnectionConfig::connect`] refuse it on any other.
    ///
    /// ```
    /// use bullmq_redis::ConnectionConfig;
    /// let config = ConnectionConfig::default()
    ///     .sentinel("mymaster", [("10.0.0.5", 26379)])
    ///     .replica_reads(true);
    /// assert!(config.replica_reads);
    /// assert!(config.check().is_ok());
    /// assert!(ConnectionConfig::default().replica_reads(true).check().is_err());
    /// ```
    #[must_use]
    pub fn replica_reads(mut self, on: bool) -> Self {
        self.replica_reads = on;
        self
    }

    /// Turns TLS on and trusts the CA certificate(s) in the PEM file `path` instead of the
    /// platform roots.
    #[must_use]
    pub fn tls_ca_file(mut self, path: impl Into<PathBuf>) -> Self {
        self.tls = true;
        self.tls_options.ca_file = Some(path.into());
        self
    }

    /// Turns TLS on and presents the client certificate (chain) in PEM file `cert` with the
    /// private key in PEM file `key` (mutual TLS).
    #[must_use]
    pub fn tls_client_cert(mut self, cert: impl Into<PathBuf>, key: impl Into<PathBuf>) -> Self {
        self.tls = true;
        self.tls_options.cert_file = Some(cert.into());
        self.tls_options.key_file = Some(key.into());
        self
    }

    /// Turns TLS on and checks the server's certificate against `name` (also sent as SNI)
    /// instead of the host connected to.
    #[must_use]
    pub fn tls_server_name(mut self, name: impl Into<String>) -> Self {
        self.tls = true;
        self.tls_options.server_name = Some(name.into());
        self
    }

    /// **Insecure.** Turns TLS on and accepts any server certificate: the traffic is
    /// encrypted, but whoever answers is trusted. For test setups only.
    #[must_use]
    pub fn danger_accept_invalid_certs(mut self) -> Self {
        self.tls = true;
        self.tls_options.danger_accept_invalid_certs = true;
        self
    }

    /// Where the connection goes, for messages: `host:port` for one server,
    /// `cluster a:1,b:2` or `sentinel NAME at a:1,b:2` otherwise.
    pub fn target(&self) -> String {
        match &self.topology {
            Topology::Single => format!("{}:{}", self.host, self.port),
            Topology::Cluster { nodes } => format!("cluster {}", topology::node_list(nodes)),
            Topology::Sentinel {
                service_name,
                nodes,
                ..
            } => format!(
                "sentinel service `{service_name}` at {}",
                topology::node_list(nodes)
            ),
        }
    }

    /// Checks the configuration without connecting: the topology is complete and the TLS files
    /// can be read and parsed.
    ///
    /// # Errors
    ///
    /// [`RedisError::Config`] or [`RedisError::TlsFile`], as [`ConnectionConfig::connect`]
    /// would return them.
    pub fn check(&self) -> Result<()> {
        self.fred_config().map(|_| ())
    }

    fn set_first_node(&mut self, nodes: &[Node]) {
        if let Some(first) = nodes.first() {
            self.host = first.host.clone();
            self.port = first.port;
        }
    }

    fn fred_config(&self) -> Result<Config> {
        replica::check_replica_reads(self)?;
        let server_name = self
            .tls
            .then(|| self.tls_options.server_name.clone())
            .flatten();
        let server =
            |node: &Node| Server::new_with_tls(node.host.clone(), node.port, server_name.clone());
        let server = match &self.topology {
            Topology::Single => ServerConfig::Centralized {
                server: server(&Node::new(self.host.clone(), self.port)),
            },
            Topology::Cluster { nodes } => {
                if nodes.is_empty() {
                    return Err(RedisError::Config(
                        "a cluster needs at least one node".into(),
                    ));
                }
                if self.db != 0 {
                    return Err(RedisError::Config(format!(
                        "a Redis Cluster has database 0 only, not {}",
                        self.db
                    )));
                }
                ServerConfig::Clustered {
                    hosts: nodes.iter().map(server).collect(),
                    policy: ClusterDiscoveryPolicy::default(),
                }
            }
            Topology::Sentinel {
                service_name,
                nodes,
                username,
                password,
            } => {
                if nodes.is_empty() {
                    return Err(RedisError::Config(
                        "Sentinel needs at least one Sentinel node".into(),
                    ));
                }
                if service_name.is_empty() {
                    return Err(RedisError::Config(
                        "Sentinel needs the service name of the primary".into(),
                    ));
                }
                ServerConfig::Sentinel {
                    hosts: nodes.iter().map(server).collect(),
                    service_name: service_name.clone(),
                    username: username.clone(),
                    password: password.clone(),
                }
            }
        };
        let tls = if self.tls {
            Some(self.tls_options.fred_tls()?)
        } else {
            None
        };
        Ok(Config {
            server,
            database: (self.db != 0).then_some(self.db),
            username: self.username.clone(),
            password: self.password.clone(),
            fail_fast: true,
            tls,
            ..Config::default()
        })
    }

    /// Checks that queue `queue` under `prefix` can run on this topology: on a Redis Cluster
    /// all its keys must share one slot (a hash tag in the prefix or the queue name, see
    /// [`bullmq_protocol::cluster_slot`]); any queue runs on the other topologies.
    ///
    /// # Errors
    ///
    /// [`RedisError::CrossSlot`], whose message names the fix.
    pub fn check_queue_keys(&self, prefix: &str, queue: &str) -> Result<()> {
        if matches!(self.topology, Topology::Cluster { .. }) {
            bullmq_protocol::cluster_slot::check_queue_slot(prefix, queue)?;
        }
        Ok(())
    }

    /// Checks that every queue under `prefix` shares one slot on a Redis Cluster (the prefix
    /// holds a hash tag), as flows spanning queues need; always passes on other topologies.
    ///
    /// # Errors
    ///
    /// [`RedisError::CrossSlot`], whose message names the fix.
    pub fn check_prefix_keys(&self, prefix: &str) -> Result<()> {
        if matches!(self.topology, Topology::Cluster { .. }) {
            bullmq_protocol::cluster_slot::check_prefix_slot(prefix)?;
        }
        Ok(())
    }

    /// The error replies after which the client drops its connection, reconnects (through the
    /// Sentinels when there are some) and retries the command, instead of handing the error to
    /// the caller.
    ///
    /// Behind Sentinel a failover turns the old primary into a replica, possibly while our
    /// connection to it stays open: its writes then answer `READONLY` (scripts included), a
    /// replica cut off from its primary `MASTERDOWN`, a primary that lost its replicas under
    /// `min-replicas-to-write` `NOREPLICAS`, a replica still loading its copy `LOADING`. Each
    /// means "this is not (or not yet) the primary": asking the Sentinels again is the fix,
    /// and retrying is safe because the refused command wrote nothing.
    fn reconnect_errors(&self) -> Vec<ReconnectError> {
        match self.topology {
            Topology::Sentinel { .. } => vec![
                ReconnectError::ReadOnly,
                ReconnectError::MasterDown,
                ReconnectError::NoReplicas,
                ReconnectError::Loading,
            ],
            // One server or a cluster: reconnecting reaches the same node, so the error goes
            // to the caller (a cluster's CLUSTERDOWN and MOVED are handled by fred itself).
            _ => Vec::new(),
        }
    }

    /// Connects a new client. When `client_name` is given the connection is named with
    /// `CLIENT SETNAME` (again after every reconnect), as Node BullMQ names its connections.
    ///
    /// The client reconnects by itself by [`ConnectionConfig::reconnect`] (by default forever,
    /// exponential from 100 ms to 2 s with jitter), so an outage is survived without the caller
    /// doing anything.
    ///
    /// # Errors
    ///
    /// [`RedisError::Connect`] when the first connection does not succeed within
    /// [`ConnectionConfig::connect_timeout`]: the bound covers the TCP connect, the TLS
    /// handshake (a plain server behind `rediss://` never completes it), authentication and the
    /// first command, so an unreachable or wrong server fails in bounded time.
    pub async fn connect(&self, client_name: Option<String>) -> Result<Client> {
        let connect_timeout = self.connect_timeout;
        let command_timeout = self.command_timeout;
        let unresponsive = self.unresponsive_timeout;
        let reconnect_errors = self.reconnect_errors();
        let client = Builder::from_config(self.fred_config()?)
            .with_connection_config(|c| {
                c.connection_timeout = connect_timeout;
                c.internal_command_timeout = connect_timeout;
                c.max_command_attempts = 3;
                c.unresponsive.max_timeout = unresponsive;
                if let Some(bound) = unresponsive {
                    // Checked a few times per bound, never busier than every 100 ms.
                    c.unresponsive.interval =
                        (bound / 4).clamp(Duration::from_millis(100), c.unresponsive.interval);
                }
                c.reconnect_errors = reconnect_errors;
            })
            .with_performance_config(|p| p.default_command_timeout = command_timeout)
            .set_policy(self.reconnect.policy())
            .build()
            .map_err(|e| RedisError::Config(e.to_string()))?;

        let connect = async {
            let connection = client.init().await?;
            if let Some(name) = &client_name {
                // Every primary of a cluster: a blocking command runs on the node owning its
                // key, and `getWorkers` must find the name there.
                crate::cluster::set_name(&client, name)
                    .await
                    .map_err(into_fred_error)?;
            }
            Ok::<_, fred::error::Error>(connection)
        };
        let outcome = match tokio::time::timeout(connect_timeout, connect).await {
            Ok(outcome) => outcome,
            Err(_) => Err(fred::error::Error::new(
                fred::error::ErrorKind::Timeout,
                if self.tls {
                    // The usual cause: a plain server, which never completes the handshake.
                    format!(
                        "no TLS connection within {connect_timeout:?} (rediss:// needs a \
                         server that speaks TLS; use redis:// for a plain one)"
                    )
                } else {
                    format!("no connection within {connect_timeout:?}")
                },
            )),
        };
        let connection = match outcome {
            Ok(connection) => connection,
            Err(source) => {
                // Shut the half-connected client down (it would keep reconnecting) in the
                // background, so the caller gets its error when the connect timeout says so.
                let abandoned = client.clone();
                tokio::spawn(async move { quit_within(&abandoned, QUIT_TIMEOUT).await });
                let source = if self.tls {
                    explain_tls_failure(source)
                } else {
                    source
                };
                return Err(RedisError::Connect {
                    target: self.target(),
                    source,
                });
            }
        };
        // Behind Sentinel: onto a new primary as soon as the Sentinels name it.
        primary_watch::follow(self, client.clone(), connection);
        if let Some(name) = client_name {
            let renamer = client.clone();
            // The name lives on the connection; a reconnect loses it, so set it again.
            client.on_reconnect(move |server| {
                let renamer = renamer.clone();
                let name = name.clone();
                async move {
                    if let Err(error) =
                        crate::cluster::set_name_on(&renamer, &server, name.as_str()).await
                    {
                        tracing::warn!(%error, "could not name the connection again after reconnecting");
                    }
                    Ok(())
                }
            });
        }
        Ok(client)
    }
}

/// Back to fred's error, for the connect sequence (which reports fred errors).
fn into_fred_error(error: RedisError) -> fred::error::Error {
    match error {
        RedisError::Command(error) | RedisError::Connect { source: error, .. } => error,
        other => fred::error::Error::new(fred::error::ErrorKind::Unknown, other.to_string()),
    }
}

/// A failed TLS handshake reaches us as an I/O error around rustls' reason
/// (`InvalidCertificate(UnknownIssuer)`); say what it means and which setting fixes it, and
/// keep the original text for the details.
fn explain_tls_failure(error: fred::error::Error) -> fred::error::Error {
    let detail = error.details();
    let hint = if detail.contains("UnknownIssuer") || detail.contains("BadSignature") {
        "the server's certificate is not signed by a trusted CA (give its CA with tls_ca / \
         TlsOptions::ca_file)"
    } else if detail.contains("NotValidForName") {
        "the server's certificate does not name the host connected to (connect by a name it \
         holds, or set tls_server_name / TlsOptions::server_name)"
    } else if detail.contains("CertificateRequired") {
        "the server requires a client certificate (set tls_cert and tls_key / \
         TlsOptions::cert_file and key_file)"
    } else if detail.contains("Expired") || detail.contains("NotValidYet") {
        "the server's certificate is outside its validity period"
    } else if detail.contains("InvalidCertificate") || detail.contains("AlertReceived") {
        "the TLS handshake was refused"
    } else {
        return error;
    };
    fred::error::Error::new(
        fred::error::ErrorKind::Tls,
        format!("TLS handshake failed: {hint}: {detail}"),
    )
}

/// Sends `QUIT` but gives up after `timeout` (a client still connecting or reconnecting would
/// hold it back indefinitely).
async fn quit_within(client: &Client, timeout: Duration) {
    match tokio::time::timeout(timeout, client.quit()).await {
        Ok(Ok(())) => {}
        Ok(Err(error)) => tracing::debug!(%error, "QUIT failed"),
        Err(_) => tracing::debug!(?timeout, "QUIT did not complete in time"),
    }
}

/// The connections one handle opened, closed exactly once: by [`Connections::close`], or,
/// failing that, when the last clone of the owner drops it.
///
/// fred clients do not close when dropped (their connection task keeps a reference and keeps
/// reconnecting), so whatever owns connections must close them explicitly. An actor cannot
/// rely on `post_stop` for that (ractor skips it after a handler error or a kill); keeping the
/// connections in this guard, inside the actor's state, closes them however the actor ends.
#[derive(Debug)]
pub struct Connections {
    /// Command connections: closed with `QUIT`.
    clients: Vec<Client>,
    /// Connections that may be inside a blocking command (`BZPOPMIN`, `XREAD BLOCK`): unblocked
    /// first, since a `QUIT` queued behind a blocked command waits for its timeout.
    blocking: Vec<Client>,
    closed: AtomicBool,
}

impl Connections {
    /// Guards `clients` (plain) and `blocking` (may be blocked when closed).
    pub fn new(clients: Vec<Client>, blocking: Vec<Client>) -> Self {
        Self {
            clients,
            blocking,
            closed: AtomicBool::new(false),
        }
    }

    /// Whether [`Connections::close`] ran (or the guard was dropped).
    pub fn is_closed(&self) -> bool {
        self.closed.load(Ordering::SeqCst)
    }

    /// Closes every connection (interrupting a blocked command first). Idempotent: later
    /// calls return at once. Each `QUIT` is bounded, so this never hangs on a dead server.
    pub async fn close(&self) {
        if self.closed.swap(true, Ordering::SeqCst) {
            return;
        }
        close_all(self.clients.clone(), self.blocking.clone()).await;
    }
}

impl Drop for Connections {
    fn drop(&mut self) {
        if self.closed.swap(true, Ordering::SeqCst) {
            return;
        }
        let clients = std::mem::take(&mut self.clients);
        let blocking = std::mem::take(&mut self.blocking);
        // Outside a runtime (process exit) the sockets close with the process anyway.
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(close_all(clients, blocking));
        }
    }
}

async fn close_all(clients: Vec<Client>, blocking: Vec<Client>) {
    for client in &blocking {
        // Through fred's side connection; an error only means nothing was blocked.
        let unblock = client.unblock_self(Some(ClientUnblockFlag::Timeout));
        let _ = tokio::time::timeout(QUIT_TIMEOUT, unblock).await;
    }
    for client in blocking.iter().chain(&clients) {
        quit_within(client, QUIT_TIMEOUT).await;
    }
}
