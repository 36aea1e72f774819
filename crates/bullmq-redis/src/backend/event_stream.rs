//! [`RedisEventStream`] and [`RedisEventPublisher`]: a queue's events stream on Redis.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use bullmq_backend::{BackendResult, ConnectionChange, EventEntry, EventPublisher, EventStream};
use bullmq_protocol::keys::{QueueKey, QueueKeys};
use fred::prelude::{Client, ClientLike, EventInterface};
use tokio::sync::broadcast;

use crate::events::{
    close_blocked_client, newest_event_id, publish_event, queue_events_client_name, read_events,
};
use crate::{ConnectionConfig, Connections};

/// A reader of one queue's events stream on a dedicated connection named
/// `{prefix}:{base64(queue)}:qe`, as Node's `QueueEvents` names its own.
///
/// The connection closes on [`EventStream::close`] (interrupting an `XREAD BLOCK` in flight) or
/// when the stream is dropped.
#[derive(Debug)]
pub struct RedisEventStream {
    client: Client,
    key: String,
    changes: broadcast::Sender<ConnectionChange>,
    closed: Mutex<bool>,
}

impl RedisEventStream {
    /// Connects a reader of `keys`' stream.
    ///
    /// # Errors
    ///
    /// [`crate::RedisError::Connect`] when Redis cannot be reached;
    /// [`crate::RedisError::CrossSlot`] on a cluster when the queue's keys would not share a
    /// slot.
    pub async fn connect(config: &ConnectionConfig, keys: &QueueKeys) -> crate::Result<Self> {
        config.check_queue_keys(keys.prefix(), keys.name())?;
        let client = config.connect(Some(queue_events_client_name(keys))).await?;
        let (changes, _) = broadcast::channel(16);
        let lost = changes.clone();
        client.on_error(move |(error, _server)| {
            // No receiver is fine: nobody to tell.
            let _ = lost.send(ConnectionChange::Lost(Arc::new(error)));
            async { Ok(()) }
        });
        let restored = changes.clone();
        client.on_reconnect(move |_server| {
            let _ = restored.send(ConnectionChange::Restored);
            async { Ok(()) }
        });
        Ok(Self {
            client,
            key: keys.key(QueueKey::Events),
            changes,
            closed: Mutex::new(false),
        })
    }

    /// Marks the stream closed; `true` for the first caller only.
    fn mark_closed(&self) -> bool {
        let mut closed = match self.closed.lock() {
            Ok(closed) => closed,
            Err(poisoned) => poisoned.into_inner(),
        };
        !std::mem::replace(&mut *closed, true)
    }
}

#[async_trait]
impl EventStream for RedisEventStream {
    async fn newest_id(&self) -> BackendResult<Option<String>> {
        Ok(newest_event_id(&self.client, &self.key).await?)
    }

    async fn read(
        &self,
        after: &str,
        block: Duration,
        count: u64,
    ) -> BackendResult<Vec<EventEntry>> {
        let entries = read_events(&self.client, &self.key, after, Some(block), Some(count)).await?;
        Ok(entries
            .into_iter()
            .map(|entry| EventEntry {
                id: entry.id,
                fields: entry.fields,
            })
            .collect())
    }

    async fn reconnect(&self) -> BackendResult<()> {
        self.client
            .force_reconnection()
            .await
            .map_err(crate::RedisError::from)?;
        Ok(())
    }

    fn connection_changes(&self) -> Option<broadcast::Receiver<ConnectionChange>> {
        Some(self.changes.subscribe())
    }

    async fn close(&self) {
        if self.mark_closed() {
            if let Err(error) = close_blocked_client(&self.client).await {
                tracing::debug!(%error, "closing the QueueEvents connection failed");
            }
        }
    }
}

impl Drop for RedisEventStream {
    fn drop(&mut self) {
        if self.mark_closed() {
            let client = self.client.clone();
            if let Ok(runtime) = tokio::runtime::Handle::try_current() {
                runtime.spawn(async move {
                    let _ = close_blocked_client(&client).await;
                });
            }
        }
    }
}

/// A publisher into one queue's events stream (Node's `QueueEventsProducer`).
#[derive(Debug, Clone)]
pub struct RedisEventPublisher {
    client: Client,
    key: String,
    owned: Option<Arc<Connections>>,
}

impl RedisEventPublisher {
    /// Connects a publisher for `keys`' stream on a connection of its own.
    ///
    /// # Errors
    ///
    /// [`crate::RedisError::Connect`] when Redis cannot be reached;
    /// [`crate::RedisError::CrossSlot`] on a cluster when the queue's keys would not share a
    /// slot.
    pub async fn connect(config: &ConnectionConfig, keys: &QueueKeys) -> crate::Result<Self> {
        config.check_queue_keys(keys.prefix(), keys.name())?;
        let client = config.connect(None).await?;
        let owned = Connections::new(vec![client.clone()], Vec::new());
        let mut publisher = Self::with_client(client, keys);
        publisher.owned = Some(Arc::new(owned));
        Ok(publisher)
    }

    /// A publisher on an existing client; [`EventPublisher::close`] quits that client too.
    pub fn with_client(client: Client, keys: &QueueKeys) -> Self {
        Self {
            client,
            key: keys.key(QueueKey::Events),
            owned: None,
        }
    }
}

#[async_trait]
impl EventPublisher for RedisEventPublisher {
    async fn publish(
        &self,
        fields: Vec<(String, String)>,
        max_events: u64,
    ) -> BackendResult<String> {
        Ok(publish_event(&self.client, &self.key, fields, max_events).await?)
    }

    async fn close(&self) -> BackendResult<()> {
        if let Some(owned) = &self.owned {
            owned.close().await;
        } else if let Err(error) = self.client.quit().await {
            tracing::debug!(%error, "closing the QueueEventsProducer connection failed");
        }
        Ok(())
    }
}
