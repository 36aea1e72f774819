//! Errors of the Redis layer.

/// What went wrong talking to Redis or running one of our scripts.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RedisError {
    /// The connection URL or configuration is not valid.
    #[error("invalid Redis configuration: {0}")]
    Config(String),
    /// The URL's scheme is not one of [`ACCEPTED_SCHEMES`](crate::connection::ACCEPTED_SCHEMES)
    /// (e.g. `http://`).
    #[error("{}", unsupported_scheme(scheme))]
    UnsupportedScheme {
        /// The scheme found (empty when the URL has none).
        scheme: String,
    },
    /// A TLS file of [`TlsOptions`](crate::TlsOptions) (CA, client certificate or key) cannot
    /// be read or holds no usable PEM data. Found before any connection is attempted.
    #[error("TLS {what} file {}: {problem}", path.display())]
    TlsFile {
        /// Which file: `CA`, `client certificate` or `client key`.
        what: &'static str,
        /// The file's path as configured.
        path: std::path::PathBuf,
        /// What is wrong with it.
        problem: String,
    },
    /// Redis could not be reached within the configured timeout.
    #[error("could not connect to Redis at {target}: {source}")]
    Connect {
        /// Where we tried to connect.
        target: String,
        /// The underlying client error.
        #[source]
        source: fred::error::Error,
    },
    /// The topology is a Redis Cluster and the queue's keys (or, for flows, the prefix's)
    /// would not share one slot; refused before connecting, since every script of a queue
    /// touches several of its keys at once.
    #[error(transparent)]
    CrossSlot(#[from] bullmq_protocol::cluster_slot::CrossSlotError),
    /// A script call's keys cannot be routed on a Redis Cluster: none given, or not all in one
    /// slot. Found before sending; a bug of the caller (every queue script passes its keys).
    #[error("script `{script}` cannot run on a Redis Cluster: {detail}")]
    ScriptKeys {
        /// The script's name.
        script: &'static str,
        /// Which keys are at fault.
        detail: String,
    },
    /// A command or script failed.
    #[error("Redis command failed: {0}")]
    Command(#[from] fred::error::Error),
    /// A script returned a reply we do not understand (a bug or a foreign script version).
    #[error("script `{script}` returned an unexpected reply: {detail}")]
    UnexpectedReply {
        /// The script's name.
        script: &'static str,
        /// What was wrong with the reply.
        detail: String,
    },
}

fn unsupported_scheme(scheme: &str) -> String {
    let found = if scheme.is_empty() {
        "the Redis URL has no scheme".to_owned()
    } else {
        format!("unsupported Redis URL scheme `{scheme}://`")
    };
    format!(
        "{found}: use redis://host:port (plain) or rediss://host:port (TLS), \
         redis-cluster://host:port?node=host2:port2 (a cluster) or \
         redis-sentinel://host:port?sentinelServiceName=NAME (Sentinel), with rediss- for TLS; \
         valkey may replace redis in each"
    )
}

/// Result alias of this crate.
pub type Result<T, E = RedisError> = std::result::Result<T, E>;
