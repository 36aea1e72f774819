//! What outlives one QueueEvents actor: the position, the subscribers, the handler.
//!
//! A supervisor restarting a crashed QueueEvents passes the same [`QueueEventsArgs`] (which
//! hold a [`QueueEventsShared`]) to the new actor, so it resumes after the last delivered id,
//! keeps delivering to the same subscribers and re-`init`s the same handler.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use ractor::{Actor, ActorRef};

use crate::supervision::{ChildSpec, Restart};

use super::connection::{ConnectionCallback, ConnectionEvent};
use super::error::QueueEventsError;
use super::handler::{DynHandler, QueueEventsHandler, Threaded};
use super::options::QueueEventsOptions;
use super::queue_events::{QueueEvents, QueueEventsMsg};
use super::subscribers::{Subscriber, SubscriberSet, SubscriptionId};

/// Arguments of the [`QueueEvents`](super::QueueEvents) actor. Cheap to clone; every clone
/// shares one [`QueueEventsShared`], which is what lets a restarted actor resume.
#[derive(Clone)]
pub struct QueueEventsArgs {
    pub(crate) options: QueueEventsOptions,
    pub(crate) shared: QueueEventsShared,
}

impl QueueEventsArgs {
    /// Arguments for a QueueEvents without handler.
    ///
    /// # Errors
    ///
    /// [`QueueEventsError::InvalidOption`] when the options do not validate.
    pub fn new(options: QueueEventsOptions) -> Result<Self, QueueEventsError> {
        options.validate()?;
        let shared = QueueEventsShared::new(&options, None);
        Ok(Self { options, shared })
    }

    /// Arguments for a QueueEvents that feeds `handler` (see
    /// [`QueueEventsHandler`]) before its subscribers.
    ///
    /// # Errors
    ///
    /// [`QueueEventsError::InvalidOption`] when the options do not validate.
    pub fn with_handler<H: QueueEventsHandler>(
        options: QueueEventsOptions,
        handler: H,
    ) -> Result<Self, QueueEventsError> {
        options.validate()?;
        let shared = QueueEventsShared::new(&options, Some(Box::new(Threaded::new(handler))));
        Ok(Self { options, shared })
    }

    /// A child spec for a supervisor (such as the [`Runtime`](crate::runtime::Runtime)'s
    /// QueueEventsSupervisor): every (re)start spawns a [`QueueEvents`] from these arguments, so
    /// a restarted actor resumes after the last delivered id with the same subscribers and
    /// handler. The policy is [`Restart::Transient`]: a crash restarts it, `close()` does not.
    pub fn child_spec(&self, id: impl Into<String>) -> ChildSpec {
        let args = self.clone();
        ChildSpec::new(id, move |supervisor| {
            let args = args.clone();
            async move {
                let name = args.options.name.clone();
                let (actor, _) = Actor::spawn_linked(name, QueueEvents, args, supervisor).await?;
                Ok(actor.get_cell())
            }
        })
        .restart(Restart::Transient)
    }

    /// Calls `callback` with every [`ConnectionEvent`] of the running reader: once when an
    /// outage starts (reads fail; the reader retries with backoff) and once when it ends. It
    /// runs on the reader task: keep it short. Replaces an earlier callback; kept across
    /// restarts.
    #[must_use]
    pub fn on_connection(
        self,
        callback: impl Fn(&ConnectionEvent) + Send + Sync + 'static,
    ) -> Self {
        *lock(&self.shared.inner.on_connection) = Some(Arc::new(callback));
        self
    }

    /// The options.
    pub fn options(&self) -> &QueueEventsOptions {
        &self.options
    }

    /// The state shared by every actor started from these arguments.
    pub fn shared(&self) -> &QueueEventsShared {
        &self.shared
    }
}

impl std::fmt::Debug for QueueEventsArgs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("QueueEventsArgs")
            .field("options", &self.options)
            .field("last_event_id", &self.shared.last_event_id())
            .finish()
    }
}

/// The position, subscribers and handler of a QueueEvents, shared by its successive actors.
#[derive(Clone)]
pub struct QueueEventsShared {
    inner: Arc<Inner>,
}

struct Inner {
    cursor: Cursor,
    subscribers: Mutex<SubscriberSet>,
    subscriber_buffer: usize,
    handler: tokio::sync::Mutex<Option<Box<dyn DynHandler>>>,
    has_handler: bool,
    /// `run` was requested (or autorun): a restarted actor reads again by itself.
    running: AtomicBool,
    /// `close` was called: nothing may start reading again.
    closed: AtomicBool,
    actor: Mutex<Option<ActorRef<QueueEventsMsg>>>,
    on_connection: Mutex<Option<ConnectionCallback>>,
}

impl QueueEventsShared {
    fn new(options: &QueueEventsOptions, handler: Option<Box<dyn DynHandler>>) -> Self {
        Self {
            inner: Arc::new(Inner {
                cursor: Cursor::new(options.last_event_id.clone()),
                subscribers: Mutex::new(SubscriberSet::default()),
                subscriber_buffer: options.subscriber_buffer,
                has_handler: handler.is_some(),
                handler: tokio::sync::Mutex::new(handler),
                running: AtomicBool::new(false),
                closed: AtomicBool::new(false),
                actor: Mutex::new(None),
                on_connection: Mutex::new(None),
            }),
        }
    }

    /// The id of the last event delivered to the handler and the subscribers; before the first
    /// one, the start position (`$` until the reader pinned it to the stream's newest id, `0`,
    /// or the configured id). A restarted actor reads what follows it.
    pub fn last_event_id(&self) -> String {
        self.inner.cursor.get()
    }

    /// The actor currently serving these arguments, if one is alive.
    pub fn actor(&self) -> Option<ActorRef<QueueEventsMsg>> {
        lock(&self.inner.actor).clone().filter(|actor| {
            !matches!(
                actor.get_status(),
                ractor::ActorStatus::Stopping | ractor::ActorStatus::Stopped
            )
        })
    }

    /// Whether `close` was called.
    pub fn is_closed(&self) -> bool {
        self.inner.closed.load(Ordering::Acquire)
    }

    pub(crate) fn cursor(&self) -> &Cursor {
        &self.inner.cursor
    }

    /// Adds a subscriber; after `close` it is dropped at once instead (a channel receiver
    /// then ends immediately rather than waiting forever).
    pub(crate) fn subscribe(&self, subscriber: Subscriber) -> SubscriptionId {
        let mut subscribers = self.subscribers();
        let id = subscribers.insert(subscriber);
        if self.is_closed() {
            subscribers.remove(id);
        }
        id
    }

    pub(crate) fn subscribers(&self) -> MutexGuard<'_, SubscriberSet> {
        lock(&self.inner.subscribers)
    }

    pub(crate) fn subscriber_buffer(&self) -> usize {
        self.inner.subscriber_buffer
    }

    pub(crate) fn has_handler(&self) -> bool {
        self.inner.has_handler
    }

    pub(crate) fn handler(&self) -> &tokio::sync::Mutex<Option<Box<dyn DynHandler>>> {
        &self.inner.handler
    }

    /// Hands `event` to the [`QueueEventsArgs::on_connection`] callback, if any.
    pub(crate) fn notify_connection(&self, event: &ConnectionEvent) {
        let callback = lock(&self.inner.on_connection).clone();
        if let Some(callback) = callback {
            callback(event);
        }
    }

    pub(crate) fn set_running(&self) {
        self.inner.running.store(true, Ordering::Release);
    }

    pub(crate) fn is_running(&self) -> bool {
        self.inner.running.load(Ordering::Acquire)
    }

    pub(crate) fn set_closed(&self) {
        self.inner.closed.store(true, Ordering::Release);
    }

    pub(crate) fn set_actor(&self, actor: ActorRef<QueueEventsMsg>) {
        *lock(&self.inner.actor) = Some(actor);
    }

    /// Forgets `actor`, unless a successor already replaced it.
    pub(crate) fn clear_actor(&self, actor: &ActorRef<QueueEventsMsg>) {
        let mut current = lock(&self.inner.actor);
        if current.as_ref().map(|a| a.get_id()) == Some(actor.get_id()) {
            *current = None;
        }
    }
}

/// The last delivered id (or the start position before the first event).
#[derive(Clone)]
pub(crate) struct Cursor(Arc<Mutex<String>>);

impl Cursor {
    fn new(start: String) -> Self {
        Self(Arc::new(Mutex::new(start)))
    }

    pub(crate) fn get(&self) -> String {
        lock(&self.0).clone()
    }

    pub(crate) fn advance(&self, id: &str) {
        id.clone_into(&mut lock(&self.0));
    }

    /// Replaces a `$` start with the concrete id it stood for (no-op once anything else is set).
    pub(crate) fn pin_start(&self, id: &str) {
        let mut current = lock(&self.0);
        if *current == "$" {
            id.clone_into(&mut current);
        }
    }
}

/// Locks a std mutex; these guard plain data, so a poisoned one is still consistent.
fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    match mutex.lock() {
        Ok(guard) => guard,
        Err(poisoned) => poisoned.into_inner(),
    }
}
