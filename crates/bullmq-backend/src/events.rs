//! The events side of the seam: read a queue's event log from a cursor ([`EventStream`]) and
//! publish custom events into it ([`EventPublisher`]).

use std::time::Duration;

use async_trait::async_trait;
use tokio::sync::broadcast;

use crate::error::BackendResult;
use crate::ConnectionChange;

/// One entry of a queue's event log, untyped: its id and its fields in order (the first is
/// `("event", name)`). Ids are `{ms}-{seq}`, ordered as Redis stream ids.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EventEntry {
    /// The entry id.
    pub id: String,
    /// The fields, in order.
    pub fields: Vec<(String, String)>,
}

/// A reader of one queue's event log, on a connection of its own (reads block).
#[async_trait]
pub trait EventStream: Send + Sync + 'static {
    /// The id of the newest entry, `None` when the log is empty.
    async fn newest_id(&self) -> BackendResult<Option<String>>;

    /// Up to `count` entries after `after` (exclusive; `"0-0"` for all), waiting up to `block`
    /// for the first one; empty when none came in time.
    async fn read(
        &self,
        after: &str,
        block: Duration,
        count: u64,
    ) -> BackendResult<Vec<EventEntry>>;

    /// Drops and re-establishes the connection (after a read that did not return in time).
    async fn reconnect(&self) -> BackendResult<()>;

    /// Changes of the connection, to report an outage while a read waits for the reconnect.
    fn connection_changes(&self) -> Option<broadcast::Receiver<ConnectionChange>> {
        None
    }

    /// Interrupts a read in flight and releases the connection; idempotent.
    async fn close(&self);
}

/// Publishes events into a queue's event log (Node's `QueueEventsProducer`).
#[async_trait]
pub trait EventPublisher: Send + Sync + 'static {
    /// Appends one entry (`fields` start with `("event", name)`), trimming the log to about
    /// `max_events` entries; returns the new entry's id.
    async fn publish(
        &self,
        fields: Vec<(String, String)>,
        max_events: u64,
    ) -> BackendResult<String>;

    /// Releases the connection when this publisher owns it; idempotent.
    async fn close(&self) -> BackendResult<()>;
}
