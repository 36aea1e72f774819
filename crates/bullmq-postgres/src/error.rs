//! [`PgError`]: why the PostgreSQL backend failed, one typed variant per reason, each a sentence.

use std::path::PathBuf;
use std::time::Duration;

use bullmq_backend::BackendError;
use tokio_postgres::error::SqlState;

use crate::config::PgConfigError;

/// The SQLSTATE the protocol's functions raise for BullMQ's own refusals; its DETAIL carries
/// BullMQ's shared error code (-1 missing job, -2 missing lock, …).
const BULLMQ_SQLSTATE: &str = "BM001";

/// Why a PostgreSQL backend call failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PgError {
    /// The URL or a setting is wrong.
    #[error(transparent)]
    Config(#[from] PgConfigError),
    /// The server could not be reached or refused the session (the message carries every
    /// cause: a TLS handshake error says what was wrong with the certificate).
    #[error("cannot connect to PostgreSQL at {target}: {}", causes(source))]
    Connect {
        /// `host:port/db schema s`.
        target: String,
        /// The client's error.
        #[source]
        source: tokio_postgres::Error,
    },
    /// Connecting took longer than the connect timeout.
    #[error("connecting to PostgreSQL at {target} did not complete within {after:?}")]
    ConnectTimeout {
        /// `host:port/db schema s`.
        target: String,
        /// The timeout.
        after: Duration,
    },
    /// The TLS settings could not be turned into a client configuration.
    #[error("TLS setup failed: {0}")]
    Tls(String),
    /// The CA file of `sslrootcert` is unusable.
    #[error("sslrootcert {path}: {problem}")]
    TlsFile {
        /// The file.
        path: PathBuf,
        /// What is wrong with it.
        problem: String,
    },
    /// The schema has no migration ledger: nobody installed BullMQ's protocol in it.
    #[error("schema `{schema}` has no BullMQ migration ledger; create it with Node's migrator first (new Queue(name, {{ connection: {{ connectionString, schema: '{schema}', migrate: true }} }}, createPostgresBackend), see docs/guides/postgres.md)")]
    SchemaNotMigrated {
        /// The schema.
        schema: String,
    },
    /// The ledger is at a version this release was not tested on.
    #[error("schema `{schema}` is at BullMQ migration {found}, but this release was tested on migration {tested} (Node BullMQ 6.7); {hint}")]
    SchemaVersionUntested {
        /// The schema.
        schema: String,
        /// `MAX(version)` of its ledger.
        found: i64,
        /// The version tested.
        tested: i64,
        /// What to do about it.
        hint: &'static str,
    },
    /// The ledger demands a newer client than BullMQ 6.
    #[error("schema `{schema}` requires BullMQ clients of major version {required} or newer; this release speaks version {supported}")]
    SchemaNeedsNewerClient {
        /// The schema.
        schema: String,
        /// `MAX(min_client_version)`.
        required: i64,
        /// The major version spoken here.
        supported: i64,
    },
    /// The server is older than BullMQ's minimum.
    #[error("PostgreSQL {found} is too old: BullMQ needs {minimum} or newer")]
    ServerTooOld {
        /// `server_version_num / 10000`.
        found: i64,
        /// The minimum.
        minimum: i64,
    },
    /// The ledger says the protocol is installed, but a function this backend calls is not.
    #[error("schema `{schema}` lacks the function {signature} although its ledger says it is migrated; rerun Node's migrator on a fresh schema")]
    MissingFunction {
        /// The schema.
        schema: String,
        /// `name(argument types)`.
        signature: String,
    },
    /// A statement failed.
    #[error("{operation} failed: {source}")]
    Sql {
        /// What was being done.
        operation: &'static str,
        /// The client's error (with the server's message, code and detail).
        #[source]
        source: tokio_postgres::Error,
    },
    /// No pooled connection became free in time, or the pool is closed.
    #[error("{operation}: no PostgreSQL connection available: {reason}")]
    Pool {
        /// What was being done.
        operation: &'static str,
        /// Why.
        reason: String,
    },
    /// A job with this id already exists as the child of another parent that still exists
    /// (BullMQ's -7): it cannot be added under a new parent.
    #[error("job {job_key} already belongs to parent {existing_parent_key}; its parent cannot be replaced")]
    ParentCannotBeReplaced {
        /// The existing job's key (`{prefix}:{queue}:{id}`).
        job_key: String,
        /// The parent it already has (`{prefix}:{queue}:{id}`; empty when it could not be
        /// read back).
        existing_parent_key: String,
    },
    /// A reply had a shape the protocol does not give.
    #[error("{operation}: unexpected reply: {detail}")]
    Reply {
        /// What was being done.
        operation: &'static str,
        /// What was wrong.
        detail: String,
    },
}

impl PgError {
    /// A failed statement of `operation`.
    pub(crate) fn sql(operation: &'static str) -> impl FnOnce(tokio_postgres::Error) -> Self {
        move |source| Self::Sql { operation, source }
    }

    /// BullMQ's error code when this is one of the protocol's refusals (`BM001`).
    pub fn bullmq_code(&self) -> Option<i64> {
        match self {
            Self::Sql { source, .. } => bullmq_code(source),
            _ => None,
        }
    }

    /// True when the connection broke (the server went away), as opposed to a refused
    /// statement.
    pub fn is_connection(&self) -> bool {
        match self {
            Self::Connect { .. } | Self::ConnectTimeout { .. } | Self::Pool { .. } => true,
            Self::Sql { source, .. } => is_connection_error(source),
            _ => false,
        }
    }
}

/// `error` and its sources, `: `-separated (tokio-postgres keeps the reason of a failed TLS
/// handshake or connect in the source, not in its own message).
fn causes(error: &tokio_postgres::Error) -> String {
    let mut text = error.to_string();
    let mut source = std::error::Error::source(error);
    while let Some(cause) = source {
        let cause_text = cause.to_string();
        if !text.contains(&cause_text) {
            text.push_str(": ");
            text.push_str(&cause_text);
        }
        source = cause.source();
    }
    text
}

/// BullMQ's code carried by a `BM001` error, if `error` is one.
pub(crate) fn bullmq_code(error: &tokio_postgres::Error) -> Option<i64> {
    let db = error.as_db_error()?;
    if db.code() != &SqlState::from_code(BULLMQ_SQLSTATE) {
        return None;
    }
    db.detail()?.trim().parse().ok()
}

/// Whether `error` means the session is gone (closed socket, server shutting down, admin
/// termination), so the call may succeed on a new connection.
pub(crate) fn is_connection_error(error: &tokio_postgres::Error) -> bool {
    if error.is_closed() {
        return true;
    }
    match error.as_db_error() {
        Some(db) => matches!(
            db.code().code(),
            // admin_shutdown, crash_shutdown, cannot_connect_now, connection_failure, …
            "57P01" | "57P02" | "57P03" | "08000" | "08003" | "08006" | "08001" | "08004"
        ),
        // No server error: an I/O error of the socket.
        None => error.code().is_none(),
    }
}

impl From<PgError> for BackendError {
    fn from(error: PgError) -> Self {
        match error {
            PgError::Connect { .. } | PgError::ConnectTimeout { .. } => {
                BackendError::Connect(Box::new(error))
            }
            e if e.is_connection() => BackendError::ConnectionLost(std::sync::Arc::new(e)),
            e => BackendError::backend(e),
        }
    }
}

/// Result alias of this crate.
pub type PgResult<T> = Result<T, PgError>;
