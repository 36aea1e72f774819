//! Publishing custom events on a queue's events stream, as Node's `QueueEventsProducer` does.

use bullmq_protocol::keys::{QueueKeys, DEFAULT_PREFIX};
use bullmq_redis::events::publish_event;
use bullmq_redis::fred::prelude::{Client, ClientLike};
use bullmq_redis::ConnectionConfig;

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
    client: Client,
    key: String,
    /// The connection [`QueueEventsProducer::connect`] opened, closed by `close` or when the
    /// last clone is dropped.
    owned: Option<std::sync::Arc<bullmq_redis::Connections>>,
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
        let client = connection.connect(None).await?;
        let owned = bullmq_redis::Connections::new(vec![client.clone()], Vec::new());
        let mut producer = Self::from_client(
            client,
            &QueueKeys::new(prefix.unwrap_or(DEFAULT_PREFIX), queue),
        );
        producer.owned = Some(std::sync::Arc::new(owned));
        Ok(producer)
    }

    /// A producer on an existing client (shared with other users of the client).
    pub fn from_client(client: Client, keys: &QueueKeys) -> Self {
        Self {
            client,
            key: format!("{}events", keys.base()),
            owned: None,
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
        Ok(publish_event(&self.client, &self.key, entry, max_events).await?)
    }

    /// Closes the connection (also a client given to [`QueueEventsProducer::from_client`]).
    pub async fn close(self) {
        if let Some(owned) = &self.owned {
            owned.close().await;
        } else if let Err(error) = self.client.quit().await {
            tracing::debug!(%error, "closing the QueueEventsProducer connection failed");
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
