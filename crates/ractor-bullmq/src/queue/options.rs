//! Options of a [`Queue`](super::Queue) handle.

use bullmq_protocol::keys::DEFAULT_PREFIX;
use bullmq_protocol::options::JobOptions;
use bullmq_redis::queue::DEFAULT_MAX_LEN_EVENTS;
use bullmq_redis::ConnectionConfig;

/// How a [`Queue`](super::Queue) connects and what it applies to every job.
///
/// ```
/// use ractor_bullmq::{ConnectionConfig, QueueOptions};
/// use ractor_bullmq::protocol::JobOptions;
///
/// let options = QueueOptions::new(ConnectionConfig::default())
///     .prefix("{bull}")
///     .default_job_options(JobOptions::new().attempts(3))
///     .max_len_events(5_000);
/// assert_eq!(options.prefix, "{bull}");
/// ```
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct QueueOptions {
    /// Where Redis is (Node `connection`; default `127.0.0.1:6379`).
    pub connection: ConnectionConfig,
    /// Key prefix (Node `prefix`, default `bull`). Hash-tag it (`{bull}`) for Redis Cluster.
    pub prefix: String,
    /// Options merged under every job's own (Node `defaultJobOptions`; shallow, per option).
    pub default_job_options: JobOptions,
    /// Approximate maximum length of the events stream, written to meta
    /// `opts.maxLenEvents` (Node `streams.events.maxLen`, default 10 000).
    pub max_len_events: u64,
    /// Do not write `meta` (`version`, `opts.maxLenEvents`) on creation (Node
    /// `skipMetasUpdate`, default false), for read-only handles.
    pub skip_meta_update: bool,
}

impl Default for QueueOptions {
    fn default() -> Self {
        Self::new(ConnectionConfig::default())
    }
}

impl QueueOptions {
    /// Defaults with the given connection.
    pub fn new(connection: ConnectionConfig) -> Self {
        Self {
            connection,
            prefix: DEFAULT_PREFIX.to_owned(),
            default_job_options: JobOptions::new(),
            max_len_events: DEFAULT_MAX_LEN_EVENTS,
            skip_meta_update: false,
        }
    }

    /// Defaults with the connection from `REDIS_URL` (or `127.0.0.1:6379`).
    ///
    /// # Errors
    ///
    /// [`bullmq_redis::RedisError::Config`] when `REDIS_URL` is not a valid URL.
    pub fn from_env() -> bullmq_redis::Result<Self> {
        Ok(Self::new(ConnectionConfig::from_env()?))
    }

    /// Sets the key prefix.
    #[must_use]
    pub fn prefix(mut self, prefix: impl Into<String>) -> Self {
        self.prefix = prefix.into();
        self
    }

    /// Sets the default job options.
    #[must_use]
    pub fn default_job_options(mut self, opts: JobOptions) -> Self {
        self.default_job_options = opts;
        self
    }

    /// Sets the events stream's approximate maximum length.
    #[must_use]
    pub fn max_len_events(mut self, max_len: u64) -> Self {
        self.max_len_events = max_len;
        self
    }

    /// Sets whether creating the handle skips writing `meta`.
    #[must_use]
    pub fn skip_meta_update(mut self, skip: bool) -> Self {
        self.skip_meta_update = skip;
        self
    }
}
