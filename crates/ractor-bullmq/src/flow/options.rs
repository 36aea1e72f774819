//! Options of a [`FlowProducer`](super::FlowProducer).

use bullmq_protocol::keys::DEFAULT_PREFIX;
use bullmq_redis::ConnectionConfig;

/// How a [`FlowProducer`](super::FlowProducer) connects (Node's `FlowProducer` options).
///
/// ```
/// use ractor_bullmq::flow::FlowProducerOptions;
/// use ractor_bullmq::ConnectionConfig;
///
/// let options = FlowProducerOptions::new(ConnectionConfig::default()).prefix("{bull}");
/// assert_eq!(options.prefix, "{bull}");
/// ```
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct FlowProducerOptions {
    /// Where Redis is (Node `connection`; default `127.0.0.1:6379`).
    pub connection: ConnectionConfig,
    /// Key prefix of the nodes without a [`prefix`](super::FlowJob::prefix) of their own (Node
    /// `prefix`, default `bull`).
    pub prefix: String,
}

impl Default for FlowProducerOptions {
    fn default() -> Self {
        Self::new(ConnectionConfig::default())
    }
}

impl FlowProducerOptions {
    /// Defaults with the given connection.
    pub fn new(connection: ConnectionConfig) -> Self {
        Self {
            connection,
            prefix: DEFAULT_PREFIX.to_owned(),
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
}
