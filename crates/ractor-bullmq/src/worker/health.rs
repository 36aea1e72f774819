//! How the Worker reports store trouble: once per outage, not once per retry.
//!
//! Two sources feed one [`Outage`]: failed store calls (retried with backoff by the dispatch
//! code) and the store's own [`ConnectionChange`]s. The second matters because a Redis client
//! queues commands while it reconnects: during a short outage no call fails, the calls just
//! wait, and without it the user would hear nothing. The first failure of an outage fires
//! `on_error` and the `bullmq.connection.lost` telemetry event; later failures are logged at
//! debug; the first success after it emits `bullmq.connection.restored`.

use std::time::Instant;

use ractor::ActorRef;
use tokio::sync::broadcast::error::RecvError;
use tokio::task::JoinHandle;

use super::errors::WorkerError;
use super::worker::{internal, InternalMsg, WorkerMsg, WorkerState};
use crate::store::{ConnectionChange, Store, StoreError};
use crate::telemetry;

/// Forwards the store's connection changes to the Worker; `None` when the store has none.
/// The task ends with the store's channel or the Worker (its sends fail); the Worker aborts
/// it when it stops.
pub(super) fn watch_store(
    store: &dyn Store,
    worker: ActorRef<WorkerMsg>,
) -> Option<JoinHandle<()>> {
    let mut changes = store.connection_changes()?;
    Some(tokio::spawn(async move {
        loop {
            let change = match changes.recv().await {
                Ok(change) => change,
                // Missed some while the Worker was busy: the latest state comes next anyway.
                Err(RecvError::Lagged(_)) => continue,
                Err(RecvError::Closed) => return,
            };
            if worker
                .cast(internal(InternalMsg::Connection(change)))
                .is_err()
            {
                return;
            }
        }
    }))
}

impl WorkerState {
    /// A store call failed (it is retried with backoff): `on_error` and telemetry when this
    /// starts an outage, a debug log during one.
    pub(super) fn report_store_error(&mut self, error: StoreError) {
        if self.outage.failed(Instant::now()) {
            telemetry::connection_lost(self.store.queue_name(), "worker", &error);
            self.callbacks.error(&WorkerError::Store(error));
        } else {
            tracing::debug!(queue = self.store.queue_name(), worker = %self.label, %error,
                "store call failed again during an outage");
        }
    }

    /// A store call succeeded: ends an outage, if one was going on.
    pub(super) fn store_recovered(&mut self) {
        if let Some(downtime) = self.outage.succeeded(Instant::now()) {
            telemetry::connection_restored(self.store.queue_name(), "worker", downtime);
        }
    }

    /// The store's connection dropped or came back.
    pub(super) fn on_connection_change(&mut self, change: ConnectionChange) {
        match change {
            ConnectionChange::Lost(error) => {
                self.connection_down = true;
                self.report_store_error(StoreError::ConnectionLost(error));
            }
            ConnectionChange::Restored => {
                self.connection_down = false;
                // The progress watchdog measures from here: calls queued during the outage
                // get the whole bound to go through on the new connection.
                self.made_progress();
                self.store_recovered();
            }
            // A change this version does not know: nothing to report.
            _ => {}
        }
    }
}
