//! Options of a [`QueueEvents`](super::QueueEvents) actor.

use std::time::Duration;

use bullmq_protocol::keys::DEFAULT_PREFIX;
use std::sync::Arc;

use bullmq_backend::Backend;
use bullmq_protocol::keys::QueueKeys;
use bullmq_redis::{ConnectionConfig, RedisBackend};

use super::error::QueueEventsError;

/// Default capacity of each subscriber's buffer, in events.
pub const DEFAULT_SUBSCRIBER_BUFFER: usize = 1_024;

/// How a [`QueueEvents`](super::QueueEvents) reads a queue's events stream.
///
/// ```
/// use std::time::Duration;
/// use ractor_bullmq::{ConnectionConfig, QueueEventsOptions};
///
/// let options = QueueEventsOptions::new("emails", ConnectionConfig::default())
///     .last_event_id("0") // replay the whole stream first
///     .block_timeout(Duration::from_secs(2))
///     .autorun(false);
/// assert!(options.validate().is_ok());
/// ```
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct QueueEventsOptions {
    /// Queue name (Node: the `name` constructor argument).
    pub queue: String,
    /// Redis to read from. QueueEvents always opens its own connection, named
    /// `{prefix}:{base64(queue)}:qe` like Node's.
    pub connection: ConnectionConfig,
    /// Key prefix (Node `prefix`, default `bull`).
    pub prefix: String,
    /// Where reading starts (Node `lastEventId`, default `$`): `$` for events appended from now
    /// on, `0` to replay the whole stream, or a stream id (`{ms}-{seq}` or `{ms}`) to read what
    /// follows it.
    pub last_event_id: String,
    /// How long one `XREAD BLOCK` waits (Node `blockingTimeout`; default here 5 s). Also bounds
    /// how stale a half-dead connection can get before it is replaced.
    pub block_timeout: Duration,
    /// Start reading as soon as the actor starts (Node `autorun`, default true); when false
    /// nothing is read until [`run`](super::QueueEventsHandle::run).
    pub autorun: bool,
    /// Name the actor is registered under in ractor's registry (default none).
    pub name: Option<String>,
    /// Events buffered per subscriber before it is disconnected as too slow (default
    /// [`DEFAULT_SUBSCRIBER_BUFFER`]). See the module docs for the policy.
    pub subscriber_buffer: usize,
    /// The backend to read from; `None` (the default) reads Redis at
    /// [`connection`](Self::connection).
    pub backend: Option<Arc<dyn Backend>>,
}

impl QueueEventsOptions {
    /// Options for `queue` on `connection`, everything else at its default.
    pub fn new(queue: impl Into<String>, connection: ConnectionConfig) -> Self {
        Self {
            queue: queue.into(),
            connection,
            prefix: DEFAULT_PREFIX.to_owned(),
            last_event_id: "$".to_owned(),
            block_timeout: Duration::from_millis(5_000),
            autorun: true,
            name: None,
            subscriber_buffer: DEFAULT_SUBSCRIBER_BUFFER,
            backend: None,
        }
    }

    /// Options for `queue` on `backend` (its [`connection`](Self::connection) is not used).
    pub fn with_backend(queue: impl Into<String>, backend: Arc<dyn Backend>) -> Self {
        let mut options = Self::new(queue, ConnectionConfig::default());
        options.backend = Some(backend);
        options
    }

    /// The backend to read from: [`backend`](Self::backend), or Redis at
    /// [`connection`](Self::connection).
    pub fn open_backend(&self) -> Arc<dyn Backend> {
        match &self.backend {
            Some(backend) => Arc::clone(backend),
            None => Arc::new(RedisBackend::new(self.connection.clone())),
        }
    }

    /// The queue's Redis keys (prefix and name), for Redis-only tools.
    pub fn keys(&self) -> QueueKeys {
        QueueKeys::new(self.prefix.clone(), self.queue.clone())
    }

    /// The queue read, as the backend seam names it (namespace = [`prefix`](Self::prefix)).
    pub fn id(&self) -> bullmq_protocol::QueueId {
        bullmq_protocol::QueueId::new(self.prefix.clone(), self.queue.clone())
    }

    /// Sets [`prefix`](Self::prefix).
    #[must_use]
    pub fn prefix(mut self, prefix: impl Into<String>) -> Self {
        self.prefix = prefix.into();
        self
    }

    /// Sets [`last_event_id`](Self::last_event_id).
    #[must_use]
    pub fn last_event_id(mut self, id: impl Into<String>) -> Self {
        self.last_event_id = id.into();
        self
    }

    /// Sets [`block_timeout`](Self::block_timeout).
    #[must_use]
    pub fn block_timeout(mut self, timeout: Duration) -> Self {
        self.block_timeout = timeout;
        self
    }

    /// Sets [`autorun`](Self::autorun).
    #[must_use]
    pub fn autorun(mut self, autorun: bool) -> Self {
        self.autorun = autorun;
        self
    }

    /// Sets [`name`](Self::name).
    #[must_use]
    pub fn name(mut self, name: impl Into<String>) -> Self {
        self.name = Some(name.into());
        self
    }

    /// Sets [`subscriber_buffer`](Self::subscriber_buffer).
    #[must_use]
    pub fn subscriber_buffer(mut self, events: usize) -> Self {
        self.subscriber_buffer = events;
        self
    }

    /// The events stream key, `{prefix}:{queue}:events`.
    pub fn events_key(&self) -> String {
        format!("{}:{}:events", self.prefix, self.queue)
    }

    /// Checks every option.
    ///
    /// # Errors
    ///
    /// [`QueueEventsError::InvalidOption`] naming the first bad option;
    /// [`QueueEventsError::Redis`] with [`bullmq_redis::RedisError::CrossSlot`] when
    /// [`connection`](Self::connection) is a Redis Cluster and the queue's keys would not share
    /// one slot.
    pub fn validate(&self) -> Result<(), QueueEventsError> {
        if self.queue.is_empty() {
            return Err(QueueEventsError::InvalidOption(
                "queue: the queue name is empty".into(),
            ));
        }
        if !is_start_id(&self.last_event_id) {
            return Err(QueueEventsError::InvalidOption(format!(
                "last_event_id: `{}` is not `$`, `0` or a stream id like `1700000000000-0`",
                self.last_event_id
            )));
        }
        if self.block_timeout.is_zero() {
            return Err(QueueEventsError::InvalidOption(
                "block_timeout: must be at least 1 ms (XREAD BLOCK 0 would never return)".into(),
            ));
        }
        if self.backend.is_none() {
            // On a Redis Cluster the stream must share its slot with the queue's other keys,
            // or the events of the queue's scripts land where this reader is not looking.
            self.connection
                .check_queue_keys(&self.prefix, &self.queue)
                .map_err(QueueEventsError::Redis)?;
        }
        if self.subscriber_buffer == 0 {
            return Err(QueueEventsError::InvalidOption(
                "subscriber_buffer: must hold at least one event".into(),
            ));
        }
        Ok(())
    }
}

/// `$`, or `{ms}` / `{ms}-{seq}` with decimal parts (`0` and `0-0` included).
pub(crate) fn is_start_id(id: &str) -> bool {
    if id == "$" {
        return true;
    }
    let mut parts = id.splitn(2, '-');
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    match (parts.next(), parts.next()) {
        (Some(ms), None) => digits(ms),
        (Some(ms), Some(seq)) => digits(ms) && digits(seq),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn start_ids() {
        for ok in ["$", "0", "0-0", "1700000000000-12", "17"] {
            assert!(is_start_id(ok), "{ok}");
        }
        for bad in ["", "-", "1-", "-1", "a-1", "1-2-3", ">", "+"] {
            assert!(!is_start_id(bad), "{bad}");
        }
    }

    #[test]
    fn defaults_match_node_where_node_has_one() {
        let o = QueueEventsOptions::new("q", ConnectionConfig::default());
        assert_eq!(o.prefix, "bull");
        assert_eq!(o.last_event_id, "$");
        assert!(o.autorun);
        assert_eq!(o.events_key(), "bull:q:events");
        assert!(o.validate().is_ok());
        assert!(o.clone().block_timeout(Duration::ZERO).validate().is_err());
        assert!(o.clone().last_event_id("x").validate().is_err());
        assert!(o.subscriber_buffer(0).validate().is_err());
    }
}
