//! Helpers of the `queue_events_*` tests: options, a forwarding subscriber actor, receiving
//! with timeouts, publishing raw events.
#![allow(dead_code, unreachable_pub)]

use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Result};
use ractor::{Actor, ActorProcessingErr, ActorRef};
use ractor_bullmq::protocol::events::StreamEvent;
use ractor_bullmq::{ConnectionConfig, QueueEvent, QueueEventsOptions, QueueEventsProducer};
use tokio::sync::mpsc;

use crate::common::redis_url;

/// Options for `queue` on the test Redis, reading from `from`, with a short block so the tests
/// also exercise empty reads.
pub fn options(queue: &str, from: &str) -> QueueEventsOptions {
    QueueEventsOptions::new(queue, connection())
        .last_event_id(from)
        .block_timeout(Duration::from_millis(500))
}

/// The test Redis.
pub fn connection() -> ConnectionConfig {
    ConnectionConfig::from_url(&redis_url()).expect("REDIS_URL")
}

/// A producer on the test Redis.
pub async fn producer(queue: &str) -> Result<QueueEventsProducer> {
    Ok(QueueEventsProducer::connect(queue, &connection(), None).await?)
}

/// Publishes `n` custom events `tick` with field `n` = 0..n; returns their ids.
pub async fn publish_ticks(
    producer: &QueueEventsProducer,
    from: usize,
    n: usize,
) -> Result<Vec<String>> {
    let mut ids = Vec::with_capacity(n);
    for i in from..from + n {
        ids.push(
            producer
                .publish_event("tick", [("n", i.to_string())], 10_000)
                .await?,
        );
    }
    Ok(ids)
}

/// Receives exactly `n` events (shared with the other subscribers), failing after `timeout`.
pub async fn recv_n(
    rx: &mut mpsc::Receiver<Arc<StreamEvent>>,
    n: usize,
    timeout: Duration,
) -> Result<Vec<Arc<StreamEvent>>> {
    let mut out = Vec::with_capacity(n);
    let deadline = tokio::time::Instant::now() + timeout;
    while out.len() < n {
        match tokio::time::timeout_at(deadline, rx.recv()).await {
            Ok(Some(event)) => out.push(event),
            Ok(None) => bail!("subscription ended after {} of {n} events", out.len()),
            Err(_) => bail!("timed out after {} of {n} events: {out:?}", out.len()),
        }
    }
    Ok(out)
}

/// Same for an unbounded receiver (the forwarding actor's output).
pub async fn recv_n_unbounded(
    rx: &mut mpsc::UnboundedReceiver<Arc<StreamEvent>>,
    n: usize,
    timeout: Duration,
) -> Result<Vec<Arc<StreamEvent>>> {
    let mut out = Vec::with_capacity(n);
    let deadline = tokio::time::Instant::now() + timeout;
    while out.len() < n {
        match tokio::time::timeout_at(deadline, rx.recv()).await {
            Ok(Some(event)) => out.push(event),
            Ok(None) => bail!("forwarder ended after {} of {n} events", out.len()),
            Err(_) => bail!("timed out after {} of {n} events", out.len()),
        }
    }
    Ok(out)
}

/// The `n` field of a `tick` event.
pub fn tick_n(event: &StreamEvent) -> Option<usize> {
    match &event.event {
        ractor_bullmq::protocol::events::Event::Custom { name, fields } if name == "tick" => fields
            .iter()
            .find(|(k, _)| k == "n")
            .and_then(|(_, v)| v.parse().ok()),
        _ => None,
    }
}

/// Message of [`Forwarder`].
pub enum ForwardMsg {
    /// An event from QueueEvents.
    Event(QueueEvent),
}

impl From<QueueEvent> for ForwardMsg {
    fn from(event: QueueEvent) -> Self {
        ForwardMsg::Event(event)
    }
}

/// A subscriber actor that forwards every event to a channel.
pub struct Forwarder;

impl Actor for Forwarder {
    type Msg = ForwardMsg;
    type State = mpsc::UnboundedSender<Arc<StreamEvent>>;
    type Arguments = mpsc::UnboundedSender<Arc<StreamEvent>>;

    async fn pre_start(
        &self,
        _myself: ActorRef<ForwardMsg>,
        tx: Self::Arguments,
    ) -> Result<Self::State, ActorProcessingErr> {
        Ok(tx)
    }

    async fn handle(
        &self,
        _myself: ActorRef<ForwardMsg>,
        message: ForwardMsg,
        tx: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        let ForwardMsg::Event(event) = message;
        let _ = tx.send(event.into_shared());
        Ok(())
    }
}

/// Spawns a [`Forwarder`] and returns it with its output.
pub async fn forwarder() -> Result<(
    ActorRef<ForwardMsg>,
    mpsc::UnboundedReceiver<Arc<StreamEvent>>,
)> {
    let (tx, rx) = mpsc::unbounded_channel();
    let (actor, _) = Actor::spawn(None, Forwarder, tx).await?;
    Ok((actor, rx))
}
