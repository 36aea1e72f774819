//! [`Listener`]: one dedicated session that LISTENs on the protocol's channels for one queue,
//! named as Node names its sessions, and turns notifications into generation counters.
//!
//! Waiters compare generations instead of waiting for "the next notification", which closes
//! the notify-before-listen race: a waiter remembers the generation it saw before its last
//! claim, and any notification handled since (or any reconnect, which bumps every generation
//! because notifications may have been missed while the session was down) wakes it at once.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use bullmq_backend::ConnectionChange;
use futures::future::poll_fn;
use tokio::sync::{broadcast, watch};
use tokio::task::JoinHandle;
use tokio_postgres::AsyncMessage;

use crate::db::Db;

/// Channel of "a job may be ready in queue <payload>".
pub(crate) const JOBS_CHANNEL: &str = "bullmq_jobs";
/// Channel of "queue <payload> has new events".
pub(crate) const EVENTS_CHANNEL: &str = "bullmq_events";

/// How often an idle session proves it is alive (TCP keepalive also runs underneath).
const PING_EVERY: Duration = Duration::from_secs(60);
/// Backoff between reconnect attempts.
const RECONNECT_MIN: Duration = Duration::from_millis(100);
const RECONNECT_MAX: Duration = Duration::from_secs(5);

/// The generations a listener publishes.
#[derive(Debug)]
pub(crate) struct Signals {
    /// Bumped on every `bullmq_jobs` notification for the queue, and on every (re)connect.
    pub(crate) jobs: watch::Sender<u64>,
    /// Bumped on every `bullmq_events` notification for the queue, and on every (re)connect.
    pub(crate) events: watch::Sender<u64>,
    /// Whether the session is up.
    pub(crate) up: watch::Sender<bool>,
    /// Outages and recoveries, for the Worker's connection reports.
    pub(crate) changes: broadcast::Sender<ConnectionChange>,
}

impl Signals {
    fn bump_all(&self) {
        self.jobs.send_modify(|g| *g = g.wrapping_add(1));
        self.events.send_modify(|g| *g = g.wrapping_add(1));
    }
}

/// A running LISTEN session for one queue.
#[derive(Debug)]
pub(crate) struct Listener {
    pub(crate) signals: Arc<Signals>,
    stop: watch::Sender<bool>,
    task: Mutex<Option<JoinHandle<()>>>,
}

impl Listener {
    /// Starts the session named `application_name`, listening for `queue`. Returns once the
    /// first LISTEN is acknowledged, or with the first connect's error (later outages are
    /// retried in the background).
    pub(crate) async fn start(
        db: Db,
        queue: String,
        application_name: String,
    ) -> crate::error::PgResult<Self> {
        let signals = Arc::new(Signals {
            jobs: watch::channel(0).0,
            events: watch::channel(0).0,
            up: watch::channel(false).0,
            changes: broadcast::channel(16).0,
        });
        let (stop, stop_rx) = watch::channel(false);
        // The first session is made here so that a wrong URL or a down server is reported
        // to the caller once, typed, instead of being retried forever.
        let first = db.session(&application_name).await?;
        let (ready_tx, ready_rx) = tokio::sync::oneshot::channel();
        let task = tokio::spawn(run(
            db,
            queue,
            application_name,
            signals.clone(),
            stop_rx,
            first,
            ready_tx,
        ));
        let _ = ready_rx.await;
        Ok(Self {
            signals,
            stop,
            task: Mutex::new(Some(task)),
        })
    }

    /// Stops the session and waits (bounded) for its task to end; idempotent.
    pub(crate) async fn close(&self) {
        let _ = self.stop.send(true);
        let task = self.task.lock().ok().and_then(|mut t| t.take());
        if let Some(task) = task {
            let abort = task.abort_handle();
            if tokio::time::timeout(Duration::from_secs(2), task)
                .await
                .is_err()
            {
                abort.abort();
            }
        }
    }
}

impl Drop for Listener {
    fn drop(&mut self) {
        let _ = self.stop.send(true);
        if let Some(task) = self.task.get_mut().ok().and_then(Option::take) {
            task.abort();
        }
    }
}

async fn run(
    db: Db,
    queue: String,
    name: String,
    signals: Arc<Signals>,
    mut stop: watch::Receiver<bool>,
    first: crate::db::Session,
    ready: tokio::sync::oneshot::Sender<()>,
) {
    let mut ready = Some(ready);
    let mut session = Some(first);
    let mut backoff = RECONNECT_MIN;
    let mut was_down = false;
    loop {
        if *stop.borrow() {
            break;
        }
        let (client, mut connection) = match session.take() {
            Some(s) => s,
            None => match db.session(&name).await {
                Ok(s) => s,
                Err(error) => {
                    tracing::debug!(%error, queue, "LISTEN session: reconnect failed");
                    let _ = signals
                        .changes
                        .send(ConnectionChange::Lost(Arc::new(error)));
                    tokio::select! {
                        _ = tokio::time::sleep(backoff) => {}
                        _ = stop.changed() => break,
                    }
                    backoff = (backoff * 2).min(RECONNECT_MAX);
                    continue;
                }
            },
        };
        // Drive the connection (which delivers notifications) while the client LISTENs and
        // pings on the same session.
        let driver = async {
            loop {
                match poll_fn(|cx| connection.poll_message(cx)).await {
                    Some(Ok(AsyncMessage::Notification(n))) => {
                        if n.payload() == queue {
                            match n.channel() {
                                JOBS_CHANNEL => signals.jobs.send_modify(|g| *g += 1),
                                EVENTS_CHANNEL => signals.events.send_modify(|g| *g += 1),
                                _ => {}
                            }
                        }
                    }
                    Some(Ok(_)) => {}
                    Some(Err(error)) => return Some(error),
                    None => return None,
                }
            }
        };
        let listen = listen_and_ping(&client, || {
            let _ = signals.up.send(true);
            // Anything may have been notified while no session listened.
            signals.bump_all();
            if was_down {
                let _ = signals.changes.send(ConnectionChange::Restored);
            }
            if let Some(ready) = ready.take() {
                let _ = ready.send(());
            }
        });
        let error: Option<String> = tokio::select! {
            e = driver => Some(e.map_or_else(|| "the server closed the session".to_string(), |e| e.to_string())),
            e = listen => Some(e.to_string()),
            _ = stop.changed() => break,
        };
        let _ = signals.up.send(false);
        signals.bump_all();
        was_down = true;
        let reason = error.unwrap_or_else(|| "the session ended".into());
        tracing::warn!(
            queue,
            session = name,
            reason,
            "LISTEN session lost; reconnecting"
        );
        let _ = signals
            .changes
            .send(ConnectionChange::Lost(Arc::new(std::io::Error::other(
                reason,
            ))));
        // A session that worked resets the backoff; the first retry is quick.
        backoff = RECONNECT_MIN;
        tokio::select! {
            _ = tokio::time::sleep(backoff) => {}
            _ = stop.changed() => break,
        }
    }
    let _ = signals.up.send(false);
    if let Some(ready) = ready.take() {
        let _ = ready.send(());
    }
}

/// LISTENs on both channels, calls `on_listening` once that is acknowledged, then pings the
/// idle session until it fails; returns the error that ended it.
async fn listen_and_ping(
    client: &tokio_postgres::Client,
    on_listening: impl FnOnce(),
) -> tokio_postgres::Error {
    let listen = format!("LISTEN {JOBS_CHANNEL}; LISTEN {EVENTS_CHANNEL}");
    if let Err(error) = client.batch_execute(&listen).await {
        return error;
    }
    on_listening();
    loop {
        tokio::time::sleep(PING_EVERY).await;
        if let Err(error) = client.simple_query("SELECT 1").await {
            return error;
        }
    }
}
