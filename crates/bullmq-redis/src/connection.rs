//! Connection configuration and client construction.

use std::time::Duration;

use fred::interfaces::ClientInterface;
use fred::prelude::{
    Builder, Client, ClientLike, Config, EventInterface, ReconnectPolicy, ServerConfig, TlsConfig,
};

use crate::error::{RedisError, Result};

/// Where and how to connect to Redis.
///
/// Built from a URL (`redis://[user:pass@]host:port/db`, `rediss://` for TLS) or field by field.
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
    /// Parses a `redis://` or `rediss://` URL.
    ///
    /// # Errors
    ///
    /// [`RedisError::Config`] when the URL is not a Redis URL.
    pub fn from_url(url: &str) -> Result<Self> {
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
            tls: url.starts_with("rediss://"),
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
    /// [`ConnectionConfig::connect_timeout`].
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
                format!("no connection within {connect_timeout:?}"),
            )),
        };
        if let Err(source) = outcome {
            let _ = client.quit().await;
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
