//! Connection configuration and client construction.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use fred::interfaces::ClientInterface;
use fred::prelude::{
    Builder, Client, ClientLike, Config, EventInterface, ReconnectPolicy, ServerConfig, TlsConfig,
};
use fred::types::ClientUnblockFlag;

use crate::error::{RedisError, Result};

/// URL schemes [`ConnectionConfig::from_url`] accepts: plain and TLS, under Redis' and Valkey's
/// names (the TLS ones end in `s`).
pub const ACCEPTED_SCHEMES: [&str; 4] = ["redis://", "rediss://", "valkey://", "valkeys://"];

/// How long closing one connection may take: a `QUIT` sent while the client is reconnecting
/// waits for a connection that may never come.
const QUIT_TIMEOUT: Duration = Duration::from_secs(2);

/// Where and how to connect to Redis.
///
/// Built from a URL (`redis://[user:pass@]host:port/db`, `rediss://` for TLS; see
/// [`ACCEPTED_SCHEMES`]) or field by field.
///
/// ```
/// use bullmq_redis::ConnectionConfig;
/// let config = ConnectionConfig::from_url("redis://127.0.0.1:6379/2").unwrap();
/// assert_eq!(config.db, 2);
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ConnectionConfig {
    /// Host name or IP (default `127.0.0.1`).
    pub host: String,
    /// TCP port (default 6379).
    pub port: u16,
    /// Database index (default 0).
    pub db: u8,
    /// ACL user name.
    pub username: Option<String>,
    /// Password.
    pub password: Option<String>,
    /// Connect with TLS (`rediss://`).
    pub tls: bool,
    /// How long the first connection may take before [`RedisError::Connect`] (default 5 s).
    pub connect_timeout: Duration,
    /// Timeout of a single command, `Duration::ZERO` for none (default none: blocking commands
    /// carry their own timeouts).
    pub command_timeout: Duration,
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
            connect_timeout: Duration::from_secs(5),
            command_timeout: Duration::ZERO,
        }
    }
}

impl ConnectionConfig {
    /// Parses a `redis://` or `rediss://` URL (or Valkey's `valkey://` / `valkeys://`).
    ///
    /// ```
    /// use bullmq_redis::{ConnectionConfig, RedisError};
    /// let error = ConnectionConfig::from_url("http://127.0.0.1:6379").unwrap_err();
    /// assert!(matches!(error, RedisError::UnsupportedScheme { .. }));
    /// assert!(error.to_string().contains("rediss://"));
    /// ```
    ///
    /// # Errors
    ///
    /// [`RedisError::UnsupportedScheme`] when the URL does not start with one of
    /// [`ACCEPTED_SCHEMES`], [`RedisError::Config`] when it is not a valid single-server URL.
    pub fn from_url(url: &str) -> Result<Self> {
        let scheme = url.split_once("://").map(|(scheme, _)| scheme);
        let tls = match scheme.map(str::to_ascii_lowercase).as_deref() {
            Some("redis" | "valkey") => false,
            Some("rediss" | "valkeys") => true,
            _ => {
                // Only the scheme is quoted: the rest of the URL may hold a password.
                let scheme = scheme.unwrap_or("").to_owned();
                return Err(RedisError::UnsupportedScheme { scheme });
            }
        };
        let parsed =
            Config::from_url(url).map_err(|e| RedisError::Config(format!("{url}: {e}")))?;
        let (host, port) = match &parsed.server {
            ServerConfig::Centralized { server } => (server.host.to_string(), server.port),
            _ => {
                return Err(RedisError::Config(format!(
                    "{url}: only a single server URL is supported"
                )))
            }
        };
        Ok(Self {
            host,
            port,
            db: parsed.database.unwrap_or(0),
            username: parsed.username.clone(),
            password: parsed.password.clone(),
            tls,
            ..Self::default()
        })
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

    /// `host:port`, for messages.
    pub fn target(&self) -> String {
        format!("{}:{}", self.host, self.port)
    }

    fn fred_config(&self) -> Result<Config> {
        let mut config = Config {
            server: ServerConfig::new_centralized(self.host.clone(), self.port),
            database: (self.db != 0).then_some(self.db),
            username: self.username.clone(),
            password: self.password.clone(),
            fail_fast: true,
            ..Config::default()
        };
        if self.tls {
            let connector = fred::types::config::TlsConnector::default_rustls()
                .map_err(|e| RedisError::Config(format!("TLS: {e}")))?;
            config.tls = Some(TlsConfig::from(connector));
        }
        Ok(config)
    }

    /// Connects a new client. When `client_name` is given the connection is named with
    /// `CLIENT SETNAME` (again after every reconnect), as Node BullMQ names its connections.
    ///
    /// The client reconnects by itself forever with exponential backoff (100 ms .. 2 s), so an
    /// outage is survived without the caller doing anything.
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
        let client = Builder::from_config(self.fred_config()?)
            .with_connection_config(|c| {
                c.connection_timeout = connect_timeout;
                c.internal_command_timeout = connect_timeout;
                c.max_command_attempts = 3;
            })
            .with_performance_config(|p| p.default_command_timeout = command_timeout)
            .set_policy(ReconnectPolicy::new_exponential(0, 100, 2_000, 2))
            .build()
            .map_err(|e| RedisError::Config(e.to_string()))?;

        let connect = async {
            client.init().await?;
            if let Some(name) = &client_name {
                client.client_setname(name.as_str()).await?;
            }
            Ok::<_, fred::error::Error>(())
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
        if let Err(source) = outcome {
            // Shut the half-connected client down (it would keep reconnecting) in the
            // background, so the caller gets its error when the connect timeout says so.
            let abandoned = client.clone();
            tokio::spawn(async move { quit_within(&abandoned, QUIT_TIMEOUT).await });
            return Err(RedisError::Connect {
                target: self.target(),
                source,
            });
        }
        if let Some(name) = client_name {
            let renamer = client.clone();
            // The name lives on the connection; a reconnect loses it, so set it again.
            client.on_reconnect(move |_server| {
                let renamer = renamer.clone();
                let name = name.clone();
                async move {
                    if let Err(error) = renamer.client_setname(name.as_str()).await {
                        tracing::warn!(%error, "could not name the connection again after reconnecting");
                    }
                    Ok(())
                }
            });
        }
        Ok(client)
    }
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
