//! BullMQ's PostgreSQL protocol for ractor-bullmq.
//!
//! Node BullMQ 6.7.0, PyPI `bullmq` 3.4 and the other ports share one PostgreSQL protocol: a
//! schema (default `bullmq`) made by Node's migrator, its tables, the SQL functions it
//! installed, two LISTEN channels and a migration ledger. [`PostgresBackend`] speaks it
//! through the storage seam of `bullmq-backend`, so ractor-bullmq's supervised Workers,
//! Queues and QueueEvents run on it next to Node's and Python's clients:
//!
//! - state changes call the installed functions, one autocommit statement each (their own
//!   advisory and row locks are the locking protocol every client follows); batches are
//!   pipelined on one connection, never joined in one transaction;
//! - reads are our own SELECTs on the shared tables;
//! - each Worker and each event reader has a LISTEN session of its own, named as Node names
//!   its sessions (`<queue>`, `<queue>:w:<name>`, `<queue>:qe`) so `getWorkers` on either side
//!   lists both; everything else uses a pool;
//! - the ledger is checked, never written: the schema belongs to Node's migrator.
//!
//! ```no_run
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! use bullmq_postgres::{PgConfig, PostgresBackend};
//! let config = PgConfig::from_url("postgres://postgres@127.0.0.1:5432/test?schema=bullmq")?;
//! let backend = PostgresBackend::open(config).await?;
//! # let _ = backend; Ok(()) }
//! ```

mod config;
mod control;
mod db;
mod discovery;
mod error;
mod events;
mod flows;
mod keys;
mod ledger;
mod listener;
mod opts;
mod queue_store;
mod range;
mod row;
mod schedulers;
mod tls;
mod worker_store;

use std::sync::Arc;

use async_trait::async_trait;
use bullmq_backend::{
    Backend, BackendError, BackendName, BackendResult, Capabilities, EventPublisher, EventStream,
    FlowStore, QueueStore, WorkerStore, WorkerStoreOptions,
};
use bullmq_protocol::ids::QueueId;
use bullmq_protocol::keys::QueueKeys;

pub use config::{PgConfig, PgConfigError, SslMode, DEFAULT_SCHEMA};
pub use error::{PgError, PgResult};
pub use events::{PgEventPublisher, PgEventStream};
pub use flows::PgFlowStore;
pub use ledger::{LedgerState, CLIENT_MAJOR, MINIMUM_SERVER, TESTED_VERSIONS};
pub use queue_store::PgQueueStore;
pub use worker_store::PgWorkerStore;

use db::Db;
use listener::Listener;

/// A BullMQ schema on a PostgreSQL server, opened after its ledger was checked.
#[derive(Debug, Clone)]
pub struct PostgresBackend {
    db: Db,
    ledger: LedgerState,
}

impl PostgresBackend {
    /// Connects, and checks that the server and the schema's migration ledger are ones this
    /// release was tested on (see [`PgError`] for each refusal).
    ///
    /// # Errors
    ///
    /// [`PgError::Connect`] / [`PgError::ConnectTimeout`] when the server cannot be reached
    /// within the connect timeout; [`PgError::SchemaNotMigrated`],
    /// [`PgError::SchemaVersionUntested`], [`PgError::SchemaNeedsNewerClient`],
    /// [`PgError::MissingFunction`] or [`PgError::ServerTooOld`] for a schema or server it
    /// will not use.
    pub async fn open(config: PgConfig) -> PgResult<Self> {
        let db = Db::new(config)?;
        let ledger = ledger::check(&db).await?;
        Ok(Self { db, ledger })
    }

    /// Parses `url` and [opens](Self::open) it.
    ///
    /// # Errors
    ///
    /// As [`PgConfig::from_url`] and [`PostgresBackend::open`].
    pub async fn connect(url: &str) -> PgResult<Self> {
        Self::open(PgConfig::from_url(url)?).await
    }

    /// What the open-time checks found.
    pub fn ledger(&self) -> LedgerState {
        self.ledger
    }

    /// The settings.
    pub fn config(&self) -> &PgConfig {
        self.db.config()
    }

    /// Closes the pool (LISTEN sessions close with their stores).
    pub fn close(&self) {
        self.db.close();
    }

    /// The queue a seam call names. The protocol has no key prefix (the schema is the
    /// namespace), so a prefix is accepted only when it is Node's default or the schema.
    fn queue_of(&self, keys: &QueueKeys) -> BackendResult<String> {
        keys::check_prefix(keys.prefix(), self.db.schema()).map_err(BackendError::backend)?;
        Ok(keys.name().to_string())
    }

    /// The producer/admin store of `keys`' queue, answering job keys with its prefix.
    fn store_of(&self, keys: &QueueKeys) -> BackendResult<PgQueueStore> {
        Ok(PgQueueStore::new(
            self.db.clone(),
            self.queue_of(keys)?,
            keys.prefix(),
        ))
    }
}

#[async_trait]
impl Backend for PostgresBackend {
    async fn queue_store(&self, queue: &QueueId) -> BackendResult<Arc<dyn QueueStore>> {
        Ok(Arc::new(self.store_of(&queue.keys())?))
    }

    async fn worker_store(
        &self,
        queue: &QueueId,
        options: &WorkerStoreOptions,
    ) -> BackendResult<Arc<dyn WorkerStore>> {
        let store = self.store_of(&queue.keys())?;
        let name = store.queue.clone();
        // Node's Worker names its LISTEN session `<queue>` or `<queue>:w:<name>`.
        let session = match &options.worker_name {
            Some(worker) => format!("{name}:w:{worker}"),
            None => name.clone(),
        };
        let listener = Listener::start(self.db.clone(), name.clone(), session).await?;
        Ok(worker_store::shared(PgWorkerStore::new(
            store,
            listener,
            options.worker_name.clone(),
            options.metrics_max_points,
        )))
    }

    async fn event_stream(&self, queue: &QueueId) -> BackendResult<Arc<dyn EventStream>> {
        let name = self.queue_of(&queue.keys())?;
        let listener = Listener::start(self.db.clone(), name.clone(), format!("{name}:qe")).await?;
        Ok(Arc::new(PgEventStream::new(
            self.db.clone(),
            name,
            listener,
        )))
    }

    async fn event_publisher(&self, queue: &QueueId) -> BackendResult<Arc<dyn EventPublisher>> {
        Ok(Arc::new(PgEventPublisher::new(
            self.db.clone(),
            self.queue_of(&queue.keys())?,
        )))
    }

    async fn flow_store(&self) -> BackendResult<Arc<dyn FlowStore>> {
        Ok(Arc::new(PgFlowStore::new(self.db.clone())))
    }

    /// The queues with jobs or meta in this schema (the namespace must be the default prefix
    /// or the schema's name).
    async fn list_queues(&self, namespace: &str) -> BackendResult<Vec<QueueId>> {
        if self.queue_of(&QueueKeys::new(namespace, "_")).is_err() {
            // No queue lives under another prefix here.
            return Ok(Vec::new());
        }
        let client = self.db.client("listing queues").await?;
        let rows = client
            .query(
                "SELECT queue FROM job UNION SELECT queue FROM meta ORDER BY 1",
                &[],
            )
            .await
            .map_err(PgError::sql("listing queues"))?;
        Ok(rows
            .iter()
            .map(|r| QueueId::new(namespace, r.get::<_, String>(0)))
            .collect())
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities::all()
    }
}

impl BackendName for PostgresBackend {
    fn backend_name(&self) -> &'static str {
        discovery::BACKEND_NAME
    }
}
