//! How a running QueueEvents tells its user about its connection: a [`ConnectionEvent`]
//! callback (set with [`QueueEventsArgs::on_connection`](super::QueueEventsArgs::on_connection))
//! and the `bullmq.connection.lost` / `bullmq.connection.restored` telemetry events, each once
//! per outage, while the reader retries with backoff underneath.

use std::sync::Arc;
use std::time::{Duration, Instant};

use super::shared::QueueEventsShared;
use crate::outage::Outage;
use crate::telemetry;

/// A change of a running QueueEvents' connection.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ConnectionEvent {
    /// Reading failed (connection lost, server unreachable or restarting); the reader retries
    /// with backoff (100 ms doubling to 5 s) from the same position, so nothing is skipped.
    /// Reported once per outage, with the first error.
    Lost {
        /// The first error of the outage, rendered.
        error: String,
    },
    /// Reading works again after an outage.
    Restored {
        /// How long the outage lasted.
        downtime: Duration,
    },
}

/// The user's callback for [`ConnectionEvent`]s. It runs on the reader task: keep it short.
pub(crate) type ConnectionCallback = Arc<dyn Fn(&ConnectionEvent) + Send + Sync>;

/// Turns the reader's failures and successes into one report per outage.
pub(crate) struct ConnectionReporter {
    queue: String,
    shared: QueueEventsShared,
    outage: Outage,
}

impl ConnectionReporter {
    pub(crate) fn new(queue: String, shared: QueueEventsShared) -> Self {
        Self {
            queue,
            shared,
            outage: Outage::default(),
        }
    }

    /// An attempt failed: reported when it starts an outage, logged at debug otherwise.
    pub(crate) fn failed(&mut self, what: &str, error: &dyn std::fmt::Display) {
        if self.outage.failed(Instant::now()) {
            telemetry::connection_lost(&self.queue, "queue_events", error);
            self.shared.notify_connection(&ConnectionEvent::Lost {
                error: format!("{what}: {error}"),
            });
        } else {
            tracing::debug!(queue = %self.queue, %error, "{what}; still retrying");
        }
    }

    /// An attempt succeeded: reported when it ends an outage.
    pub(crate) fn succeeded(&mut self) {
        if let Some(downtime) = self.outage.succeeded(Instant::now()) {
            telemetry::connection_restored(&self.queue, "queue_events", downtime);
            self.shared
                .notify_connection(&ConnectionEvent::Restored { downtime });
        }
    }
}
