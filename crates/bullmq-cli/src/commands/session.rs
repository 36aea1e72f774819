//! Many queues of one target opened together (`queues`, `pause --all`, `top`): found with the
//! seam's queue discovery and opened read-only; on Redis on one shared connection (not one
//! each), elsewhere on the shared backend's stores.

use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context as _, Result};
use bullmq_backend::Backend;
use bullmq_postgres::LedgerState;
use bullmq_redis::fred::prelude::{Client, ClientLike as _};
use ractor_bullmq::{ConnectionConfig, Queue, QueueOptions};

use super::server_facts::ServerFacts;
use super::{Context, Scope};
use crate::target::Target;

/// The connection (Redis) or backend (PostgreSQL) every queue of a command is opened on.
pub(crate) struct Session {
    target: Target,
    scope: Scope,
    prefix: String,
    backend: Arc<dyn Backend>,
    ledger: Option<LedgerState>,
    /// Redis: the configuration and the one connection the queues share.
    redis: Option<(ConnectionConfig, Client)>,
}

impl Session {
    /// Connects to the target of `ctx`; on Redis each command may take at most
    /// `command_timeout` when given (a live view must say Redis stopped answering rather than
    /// freeze waiting for it).
    ///
    /// # Errors
    ///
    /// A bad URL, the server not answering, or (PostgreSQL) a schema it cannot use.
    pub(crate) async fn connect(ctx: &Context, command_timeout: Option<Duration>) -> Result<Self> {
        let target = ctx.target()?;
        let scope = ctx.scope(&target);
        let prefix = ctx.prefix.clone();
        if let Target::Redis(config) = &target {
            let mut config = config.clone();
            if let Some(timeout) = command_timeout {
                config.command_timeout = timeout;
            }
            let client = config
                .connect(None)
                .await
                .with_context(|| format!("cannot connect to Redis at {}", config.target()))?;
            let backend: Arc<dyn Backend> =
                Arc::new(bullmq_redis::RedisBackend::new(config.clone()));
            return Ok(Self {
                target,
                scope,
                prefix,
                backend,
                ledger: None,
                redis: Some((config, client)),
            });
        }
        let opened = ctx
            .opened()
            .await
            .with_context(|| format!("cannot connect to {}", target.describe()))?
            .clone();
        Ok(Self {
            target,
            scope,
            prefix,
            backend: opened.backend,
            ledger: opened.ledger,
            redis: None,
        })
    }

    /// What the session is connected to.
    pub(crate) fn target(&self) -> &Target {
        &self.target
    }

    /// Where the queues are, for messages (`under prefix "bull"`, `in schema "jobs"`).
    pub(crate) fn scope(&self) -> &Scope {
        &self.scope
    }

    /// The shared Redis connection, on Redis.
    pub(crate) fn redis_client(&self) -> Option<&Client> {
        self.redis.as_ref().map(|(_, client)| client)
    }

    /// The queues under the prefix (the seam's queue discovery), sorted.
    ///
    /// # Errors
    ///
    /// The store failed.
    pub(crate) async fn list_queues(&self) -> Result<Vec<String>> {
        super::queue_lookup::queue_names(self.backend.as_ref(), &self.prefix)
            .await
            .with_context(|| format!("listing the queues {}", self.scope))
    }

    /// Opens queue `name` read-only (its `meta` is left as its owner wrote it).
    ///
    /// # Errors
    ///
    /// Opening failed (on a cluster: the queue's keys would not share a slot).
    pub(crate) async fn open(&self, name: &str) -> Result<Queue> {
        let opened = match &self.redis {
            Some((config, client)) => {
                let options = QueueOptions::new(config.clone())
                    .prefix(self.prefix.clone())
                    .skip_meta_update(true);
                Queue::with_client(name, client.clone(), options).await
            }
            None => {
                let options = QueueOptions::default()
                    .prefix(self.prefix.clone())
                    .skip_meta_update(true);
                Queue::with_backend(name, self.backend.as_ref(), options).await
            }
        };
        opened.with_context(|| format!("opening queue {name:?}"))
    }

    /// What the server says about itself: Redis' `INFO`; on PostgreSQL the server's major
    /// version and the schema's migration (read when the backend was opened).
    ///
    /// # Errors
    ///
    /// Redis failed or refused `INFO` (some hosted services rename it).
    pub(crate) async fn server_facts(&self) -> Result<ServerFacts> {
        match (&self.redis, self.ledger, self.target.schema()) {
            (Some((_, client)), _, _) => super::server_facts::read(client).await,
            (None, Some(ledger), Some(schema)) => Ok(ServerFacts::postgres(ledger, schema)),
            _ => Err(crate::exit::Exit::unsupported(format!(
                "{} has no server facts to show",
                self.target.describe()
            ))),
        }
    }

    /// Closes the shared Redis connection (the PostgreSQL pool closes with the process).
    pub(crate) async fn close(&self) {
        if let Some((_, client)) = &self.redis {
            // Quitting a connection that already broke has nothing left to tell anyone.
            let _ = client.quit().await;
        }
    }
}
