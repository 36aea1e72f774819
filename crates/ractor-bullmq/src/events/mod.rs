//! Queue events: watch what happens to a queue's jobs, from any BullMQ client.
//!
//! Every BullMQ client (Node, Python, Elixir, this crate) appends job state changes to the
//! queue's `events` stream. A [`QueueEvents`] actor reads that stream with `XREAD BLOCK` on its
//! own connection and fans typed [`StreamEvent`](crate::protocol::events::StreamEvent)s out to:
//!
//! - ractor actors ([`QueueEventsHandle::subscribe`], or [`QueueEventsMsg::Subscribe`] with
//!   [`Subscriber::actor`]): each receives `M::from(QueueEvent)`;
//! - plain async code ([`QueueEventsHandle::subscribe_stream`]): an `mpsc::Receiver` of
//!   `Arc<StreamEvent>`;
//! - one [`QueueEventsHandler`], the structured pattern with state threaded through events.
//!
//! [`QueueEventsProducer`] publishes custom events that Node's `QueueEvents` receives.
//!
//! Every subscriber receives the same allocation of an event (an `Arc`), so the cost of one
//! more subscriber is a reference count and a send per event, never a copy.
//!
//! # Buffering policy
//!
//! Each subscriber has a buffer of `subscriber_buffer` events (default 1 024). The reader never
//! waits for a subscriber: when a subscriber's buffer is full it is **disconnected** and a
//! warning is logged (a channel receiver yields what it had buffered, then ends; an actor stops
//! receiving). An actor subscriber's buffer counts the [`QueueEvent`] messages it has not
//! dropped yet. A stopped actor or a dropped receiver is removed at the next event.
//!
//! # Delivery guarantees
//!
//! Events arrive in stream order. The position advances only after an event was handed to the
//! handler and every subscriber, so a reconnect (connection lost, Redis restarted) or a
//! restart of the actor under a supervisor resumes after the last delivered id: no event is
//! skipped, none is delivered twice. Events trimmed from the stream (`MAXLEN`) while nobody
//! read are gone, as with Node.
//!
//! # Connection errors
//!
//! Starting ([`QueueEventsHandle::start`], [`Runtime::start_queue_events`]) connects once
//! first, so an unreachable server fails the start with
//! [`RedisError::Connect`](bullmq_redis::RedisError::Connect), as [`Queue::new`] and a
//! Worker's start do. Once running, the reader retries failed reads with backoff and reports
//! each outage once: a [`ConnectionEvent`] to the callback of
//! [`QueueEventsArgs::on_connection`], and the `bullmq.connection.lost` /
//! `bullmq.connection.restored` telemetry events.
//!
//! [`Runtime::start_queue_events`]: crate::runtime::Runtime::start_queue_events
//! [`Queue::new`]: crate::Queue::new

mod connection;
mod error;
mod handler;
mod options;
mod producer;
mod queue_events;
mod reader;
mod shared;
mod subscribers;

pub use bullmq_redis::events::DEFAULT_MAX_EVENTS;
pub use connection::ConnectionEvent;
pub use error::QueueEventsError;
pub use handler::QueueEventsHandler;
pub use options::{QueueEventsOptions, DEFAULT_SUBSCRIBER_BUFFER};
pub use producer::QueueEventsProducer;
pub(crate) use queue_events::probe_connection;
pub use queue_events::{
    QueueEvents, QueueEventsHandle, QueueEventsMsg, QueueEventsState, ReadBatch,
};
pub use shared::{QueueEventsArgs, QueueEventsShared};
pub use subscribers::{QueueEvent, Subscriber, SubscriptionId};
