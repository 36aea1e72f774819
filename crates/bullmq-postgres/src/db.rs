//! [`Db`]: the connections of one backend — a pool for short calls, and named sessions of their
//! own for LISTEN (one per worker or event reader, named as Node names its sessions so that
//! `getWorkers` on either side lists both).

use std::sync::Arc;
use std::time::Duration;

use deadpool_postgres::{Manager, ManagerConfig, Object, Pool, RecyclingMethod, Runtime};
use tokio_postgres::tls::MakeTlsConnect;
use tokio_postgres::{Client, Connection, Socket};
use tokio_postgres_rustls::MakeRustlsConnect;

use crate::config::PgConfig;
use crate::error::{PgError, PgResult};
use crate::tls;

/// The stream type of a session (plain TCP or rustls).
pub(crate) type TlsStream = <MakeRustlsConnect as MakeTlsConnect<Socket>>::Stream;

/// A session and the future that drives it.
pub(crate) type Session = (Client, Connection<Socket, TlsStream>);

/// How long a call waits for a free pooled connection before it fails (the pool is full of
/// calls that themselves wait on the server, so this is a server outage or an undersized pool).
const POOL_WAIT: Duration = Duration::from_secs(30);

/// The connections of one backend.
#[derive(Clone)]
pub(crate) struct Db {
    config: Arc<PgConfig>,
    tls: MakeRustlsConnect,
    pool: Pool,
}

impl std::fmt::Debug for Db {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Db")
            .field("target", &self.config.display_target())
            .field("pool", &self.pool.status())
            .finish()
    }
}

impl Db {
    /// The pool (nothing is connected until the first call).
    pub(crate) fn new(config: PgConfig) -> PgResult<Self> {
        let tls = tls::connector(&config)?;
        let manager = Manager::from_config(
            config.session(""),
            tls.clone(),
            ManagerConfig {
                // The session state we rely on (search_path) is fixed at startup, so a cheap
                // "is it closed" check is the whole recycling.
                recycling_method: RecyclingMethod::Fast,
            },
        );
        let pool = Pool::builder(manager)
            .max_size(config.pool_size)
            .runtime(Runtime::Tokio1)
            .wait_timeout(Some(POOL_WAIT))
            .create_timeout(Some(config.connect_timeout))
            .recycle_timeout(Some(config.connect_timeout))
            .build()
            .map_err(|e| PgError::Pool {
                operation: "building the pool",
                reason: e.to_string(),
            })?;
        Ok(Self {
            config: Arc::new(config),
            tls,
            pool,
        })
    }

    /// The settings.
    pub(crate) fn config(&self) -> &PgConfig {
        &self.config
    }

    /// The schema.
    pub(crate) fn schema(&self) -> &str {
        self.config.schema()
    }

    /// A pooled connection for `operation`.
    pub(crate) async fn client(&self, operation: &'static str) -> PgResult<Object> {
        self.pool
            .get()
            .await
            .map_err(|e| self.pool_error(operation, e))
    }

    fn pool_error(&self, operation: &'static str, error: deadpool_postgres::PoolError) -> PgError {
        use deadpool_postgres::PoolError;
        match error {
            PoolError::Backend(source) if crate::error::is_connection_error(&source) => {
                PgError::Connect {
                    target: self.config.display_target(),
                    source,
                }
            }
            PoolError::Backend(source) => PgError::Sql { operation, source },
            PoolError::Timeout(deadpool_postgres::TimeoutType::Create) => PgError::ConnectTimeout {
                target: self.config.display_target(),
                after: self.config.connect_timeout,
            },
            other => PgError::Pool {
                operation,
                reason: other.to_string(),
            },
        }
    }

    /// A session of its own named `application_name`, outside the pool, connected within the
    /// connect timeout. The caller drives the returned connection.
    pub(crate) async fn session(&self, application_name: &str) -> PgResult<Session> {
        let config = self.config.session(application_name);
        let timeout = self.config.connect_timeout;
        match tokio::time::timeout(timeout, config.connect(self.tls.clone())).await {
            Ok(Ok(session)) => Ok(session),
            Ok(Err(source)) => Err(PgError::Connect {
                target: self.config.display_target(),
                source,
            }),
            Err(_) => Err(PgError::ConnectTimeout {
                target: self.config.display_target(),
                after: timeout,
            }),
        }
    }

    /// Closes the pool: idle connections are dropped, later calls fail.
    pub(crate) fn close(&self) {
        self.pool.close();
    }
}
