//! Publishing custom events on a queue's events stream, as Node's `QueueEventsProducer` does.

use bullmq_protocol::keys::{QueueKeys, DEFAULT_PREFIX};
use bullmq_protocol::QueueId;
use std::sync::Arc;

use bullmq_backend::{Backend, EventPublisher};
use bullmq_redis::fred::prelude::Client;
use bullmq_redis::{ConnectionConfig, RedisBackend, RedisEventPublisher};

use super::error::QueueEventsError;

/// Publishes custom events that every QueueEvents of the queue (Node's or ours) receives.
///
/// The entry is written exactly as Node's `publishEvent({eventName, ...fields}, maxEvents)`:
/// `XADD {prefix}:{queue}:events MAXLEN ~ {max_events} * event {eventName} {field} {value} …`.
///
/// ```no_run
/// use ractor_bullmq::{ConnectionConfig, QueueEventsProducer};
/// # async fn demo() -> anyhow::Result<()> {
/// let producer = QueueEventsProducer::connect("emails", &ConnectionConfig::from_env()?, None).await?;
/// producer
///     .publish_event("example", [("custom", "value")], ractor_bullmq::events::DEFAULT_MAX_EVENTS)
///     .await?;
/// producer.close().await;
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct QueueEventsProducer {
    publisher: Arc<dyn EventPublisher>,
    key: String,
}

impl QueueEventsProducer {
    /// Connects a producer for `queue` (prefix default `bull`).
    ///
    /// # Errors
    ///
    /// [`QueueEventsError::Redis`] when Redis cannot be reached.
    pub async fn connect(
        queue: &str,
        connection: &ConnectionConfig,
        prefix: Option<&str>,
    ) -> Result<Self, QueueEventsError> {
        Self::with_backend(queue, &RedisBackend::new(connection.clone()), prefix).await
    }

    /// Opens a producer for `queue` on `backend` (prefix default `bull`).
    ///
    /// # Errors
    ///
    /// [`QueueEventsError::Redis`] / [`QueueEventsError::Backend`] when the backend cannot be
    /// reached.
    pub async fn with_backend(
        queue: &str,
        backend: &dyn Backend,
        prefix: Option<&str>,
    ) -> Result<Self, QueueEventsError> {
        let keys = QueueKeys::new(prefix.unwrap_or(DEFAULT_PREFIX), queue);
        Ok(Self {
            publisher: backend.event_publisher(&QueueId::from(&keys)).await?,
            key: format!("{}events", keys.base()),
        })
    }

    /// A producer on an existing Redis client (shared with other users of the client).
    pub fn from_client(client: Client, keys: &QueueKeys) -> Self {
        Self {
            publisher: Arc::new(RedisEventPublisher::with_client(client, keys)),
            key: format!("{}events", keys.base()),
        }
    }

    /// Appends the event `event_name` with `fields` (in order) and trims the stream to about
    /// `max_events` entries (Node's default: 1 000, see
    /// [`DEFAULT_MAX_EVENTS`](crate::events::DEFAULT_MAX_EVENTS)). Returns the entry's id.
    ///
    /// A field named `event` replaces the name in place, as it does in Node (`Object.assign`).
    ///
    /// # Errors
    ///
    /// [`QueueEventsError::Redis`] when the `XADD` fails.
    pub async fn publish_event<K, V>(
        &self,
        event_name: &str,
        fields: impl IntoIterator<Item = (K, V)>,
        max_events: u64,
    ) -> Result<String, QueueEventsError>
    where
        K: Into<String>,
        V: Into<String>,
    {
        let entry = event_fields(event_name, fields);
        Ok(self.publisher.publish(entry, max_events).await?)
    }

    /// Closes the connection (also a client given to [`QueueEventsProducer::from_client`]).
    pub async fn close(self) {
        if let Err(error) = self.publisher.close().await {
            tracing::debug!(%error, "closing the QueueEventsProducer failed");
        }
    }
}

impl std::fmt::Debug for QueueEventsProducer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("QueueEventsProducer")
            .field("key", &self.key)
            .finish()
    }
}

/// `event` first, then the fields; a later `event` overwrites the first value in place and a
/// repeated field keeps its first position with the last value (JS object semantics).
fn event_fields<K, V>(
    event_name: &str,
    fields: impl IntoIterator<Item = (K, V)>,
) -> Vec<(String, String)>
where
    K: Into<String>,
    V: Into<String>,
{
    let mut out: Vec<(String, String)> = vec![("event".to_owned(), event_name.to_owned())];
    for (k, v) in fields {
        let (k, v) = (k.into(), v.into());
        match out.iter_mut().find(|(existing, _)| *existing == k) {
            Some(slot) => slot.1 = v,
            None => out.push((k, v)),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_follow_object_assign_order() {
        let f = event_fields(
            "custom",
            [("a", "1"), ("b", "2"), ("a", "3"), ("event", "x")],
        );
        assert_eq!(
            f,
            vec![
                ("event".to_owned(), "x".to_owned()),
                ("a".to_owned(), "3".to_owned()),
                ("b".to_owned(), "2".to_owned()),
            ]
        );
    }
}
