//! The read loop of a QueueEvents actor, in its own task so the actor's mailbox stays free.
//!
//! The task owns the dedicated connection. It blocks in `XREAD BLOCK` after the current
//! position, hands every non-empty batch to the actor with a call (so at most one batch is in
//! flight: a slow actor slows the reads instead of piling batches up) and advances its position
//! only once the actor has delivered the batch. Errors (connection lost, Redis restarting) are
//! retried with exponential backoff from the same position, so nothing is skipped and nothing
//! is read twice; fred reconnects the client underneath. Each outage is reported once (see
//! [`ConnectionReporter`]), not once per retry.
//!
//! The task ends when the actor is gone (its call fails) or when its [`ReaderGuard`] is shut
//! down or dropped. Stopping is a cancellation, not an abort, so a connection still being
//! established is closed by the task itself instead of leaking a reconnecting client.

use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use bullmq_backend::{Backend, ConnectionChange, EventStream};
use bullmq_protocol::events::StreamEvent;
use bullmq_protocol::QueueId;
use ractor::rpc::CallResult;
use ractor::ActorRef;
use tokio::sync::broadcast::error::RecvError;
use tokio_util::sync::CancellationToken;

use super::connection::ConnectionReporter;
use super::queue_events::{QueueEventsMsg, ReadBatch};
use super::shared::{Cursor, QueueEventsShared};

/// Most entries asked for per `XREAD` (`COUNT`); a replay of a long stream comes in batches.
/// Capped further by the subscriber buffer, so one batch alone never overflows a subscriber
/// that had caught up.
const MAX_READ_COUNT: u64 = 1_000;
/// First and largest pause between two failed attempts.
const BACKOFF_MIN: Duration = Duration::from_millis(100);
const BACKOFF_MAX: Duration = Duration::from_secs(5);
/// Extra time a blocked read may take past its block timeout before the connection is
/// considered stuck (a reset connection can leave a read that never answers).
const READ_GRACE: Duration = Duration::from_secs(2);

/// What the read loop needs to know.
#[derive(Debug, Clone)]
pub(crate) struct ReaderSettings {
    pub(crate) backend: Arc<dyn Backend>,
    pub(crate) queue_id: QueueId,
    pub(crate) block_timeout: Duration,
    pub(crate) subscriber_buffer: usize,
    /// The queue's name, for reports.
    pub(crate) queue: String,
}

/// The connection of the read task, once it is established; `None` before, and after
/// whoever stops the reader took it to close it.
type ClientSlot = Arc<Mutex<Option<Arc<dyn EventStream>>>>;

/// How long [`ReaderGuard::shutdown`] waits for the connection to close.
const CLOSE_WAIT: Duration = Duration::from_secs(1);

/// Controls the read task; stopping it interrupts a blocked read at once.
pub(crate) struct ReaderGuard {
    cancel: CancellationToken,
    client: ClientSlot,
}

impl ReaderGuard {
    /// Stops the read loop and closes its connection (interrupting a blocked `XREAD`), waiting
    /// at most [`CLOSE_WAIT`] for the close: with Redis unresponsive the `CLIENT UNBLOCK` and
    /// `QUIT` would hang, so the close goes on in the background and the caller goes on.
    pub(crate) async fn shutdown(self) {
        self.cancel.cancel();
        let client = lock(&self.client).take();
        if let Some(client) = client {
            let closing = tokio::spawn(async move { client.close().await });
            // On timeout the task is detached, not aborted: the connection is still released
            // when the server answers again.
            if tokio::time::timeout(CLOSE_WAIT, closing).await.is_err() {
                tracing::debug!(
                    "QueueEvents connection still closing; finishing in the background"
                );
            }
        }
    }
}

impl Drop for ReaderGuard {
    fn drop(&mut self) {
        // Also reached when the actor dies without `post_stop` (panic, kill): the task must not
        // outlive it, and the connection must not leak.
        self.cancel.cancel();
        let client = lock(&self.client).take();
        if let Some(client) = client {
            if let Ok(runtime) = tokio::runtime::Handle::try_current() {
                runtime.spawn(async move { client.close().await });
            }
        }
    }
}

fn lock(slot: &ClientSlot) -> MutexGuard<'_, Option<Arc<dyn EventStream>>> {
    match slot.lock() {
        Ok(guard) => guard,
        Err(poisoned) => poisoned.into_inner(),
    }
}

/// Starts the read loop for `actor` from the position in `cursor`.
pub(crate) fn spawn_reader(
    settings: ReaderSettings,
    shared: QueueEventsShared,
    actor: ActorRef<QueueEventsMsg>,
) -> ReaderGuard {
    let cancel = CancellationToken::new();
    let client: ClientSlot = Arc::new(Mutex::new(None));
    let cursor = shared.cursor().clone();
    let reporter = ConnectionReporter::new(settings.queue.clone(), shared);
    tokio::spawn(read_loop(
        settings,
        cursor,
        actor,
        Arc::clone(&client),
        cancel.clone(),
        reporter,
    ));
    ReaderGuard { cancel, client }
}

/// Doubling pause between attempts, reset after a success.
struct Backoff(Duration);

impl Backoff {
    fn new() -> Self {
        Self(BACKOFF_MIN)
    }

    /// Waits the current pause; false when cancelled meanwhile.
    async fn wait(&mut self, cancel: &CancellationToken) -> bool {
        let pause = self.0;
        self.0 = (self.0 * 2).min(BACKOFF_MAX);
        tokio::select! {
            () = cancel.cancelled() => false,
            () = tokio::time::sleep(pause) => true,
        }
    }

    fn reset(&mut self) {
        self.0 = BACKOFF_MIN;
    }
}

/// Connects, retrying with backoff; publishes the client in `slot` unless cancelled (then the
/// client is closed here and `None` returned).
async fn connect(
    settings: &ReaderSettings,
    slot: &ClientSlot,
    cancel: &CancellationToken,
    backoff: &mut Backoff,
    reporter: &mut ConnectionReporter,
) -> Option<Arc<dyn EventStream>> {
    loop {
        if cancel.is_cancelled() {
            return None;
        }
        // Not raced against the cancellation: dropping a half-initialised client would leave
        // its reconnect loop running. `connect` is bounded by the connect timeout.
        match settings.backend.event_stream(&settings.queue_id).await {
            Ok(client) => {
                let mut guard = lock(slot);
                if cancel.is_cancelled() {
                    // Checked under the lock the stopper takes: either it finds the client in
                    // the slot, or we see its cancellation here.
                    drop(guard);
                    client.close().await;
                    return None;
                }
                *guard = Some(client.clone());
                return Some(client);
            }
            Err(error) => {
                reporter.failed("QueueEvents cannot connect", &error);
                if !backoff.wait(cancel).await {
                    return None;
                }
            }
        }
    }
}

async fn read_loop(
    settings: ReaderSettings,
    cursor: Cursor,
    actor: ActorRef<QueueEventsMsg>,
    slot: ClientSlot,
    cancel: CancellationToken,
    mut reporter: ConnectionReporter,
) {
    let mut backoff = Backoff::new();
    let Some(client) = connect(&settings, &slot, &cancel, &mut backoff, &mut reporter).await else {
        return;
    };
    backoff.reset();
    reporter.succeeded();

    let mut errors = client.connection_changes();
    let mut errors_open = errors.is_some();
    let read_count = u64::try_from(settings.subscriber_buffer)
        .unwrap_or(MAX_READ_COUNT)
        .clamp(1, MAX_READ_COUNT);
    let mut position = cursor.get();
    while !cancel.is_cancelled() {
        if position == "$" {
            // Pin "from now on" to a concrete id, so a reconnect before the first event does
            // not skip what was appended meanwhile. No entry: everything that comes is new.
            match client.newest_id().await {
                Ok(newest) => {
                    position = newest.unwrap_or_else(|| "0-0".to_owned());
                    cursor.pin_start(&position);
                }
                Err(error) => {
                    reporter.failed("QueueEvents cannot read the stream", &error);
                    if !backoff.wait(&cancel).await {
                        return;
                    }
                    continue;
                }
            }
        }
        let read = {
            let read = tokio::time::timeout(
                settings.block_timeout.saturating_add(READ_GRACE),
                client.read(&position, settings.block_timeout, read_count),
            );
            tokio::pin!(read);
            // The client queues a read while it reconnects, so a dropped connection shows as its
            // error events first, long before the read gives up: report the outage from those.
            loop {
                tokio::select! {
                    () = cancel.cancelled() => return,
                    read = &mut read => break read,
                    change = next_change(&mut errors), if errors_open => match change {
                        Ok(ConnectionChange::Lost(error)) => {
                            reporter.failed("QueueEvents connection lost", &error);
                        }
                        Ok(_) | Err(RecvError::Lagged(_)) => {}
                        Err(RecvError::Closed) => errors_open = false,
                    },
                }
            }
        };
        let entries = match read {
            Ok(Ok(entries)) => entries,
            Ok(Err(error)) => {
                if cancel.is_cancelled() {
                    return; // the stopper closed the connection under the read
                }
                reporter.failed("QueueEvents read failed", &error);
                if !backoff.wait(&cancel).await {
                    return;
                }
                continue;
            }
            Err(_) => {
                reporter.failed(
                    "QueueEvents read did not return in time; reconnecting",
                    &format_args!("no reply within {:?}", settings.block_timeout + READ_GRACE),
                );
                if let Err(error) = client.reconnect().await {
                    tracing::warn!(%error, "QueueEvents reconnect failed");
                }
                if !backoff.wait(&cancel).await {
                    return;
                }
                continue;
            }
        };
        backoff.reset();
        reporter.succeeded();
        let Some(last) = entries.last().map(|entry| entry.id.clone()) else {
            continue; // block timed out
        };
        let events: Vec<StreamEvent> = entries
            .into_iter()
            .map(|entry| StreamEvent::decode(entry.id, entry.fields))
            .collect();
        let delivered = actor.call(
            |reply| QueueEventsMsg::Batch(ReadBatch { events }, reply),
            None,
        );
        let delivered = tokio::select! {
            () = cancel.cancelled() => return,
            delivered = delivered => delivered,
        };
        match delivered {
            Ok(CallResult::Success(())) => position = last,
            // The actor stopped or failed: a successor starts its own reader from the cursor.
            _ => return,
        }
    }
}

/// The next connection change (never resolves without a change channel; the caller's guard
/// keeps it from being polled then).
async fn next_change(
    changes: &mut Option<tokio::sync::broadcast::Receiver<ConnectionChange>>,
) -> Result<ConnectionChange, RecvError> {
    match changes {
        Some(changes) => changes.recv().await,
        None => std::future::pending().await,
    }
}
