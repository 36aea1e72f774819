//! The QueueEvents actor: reads one queue's events stream and fans the events out.
//!
//! Role: a dedicated connection (named `{prefix}:{base64(queue)}:qe`, as Node names its
//! QueueEvents connection) blocks in `XREAD BLOCK` in a reader task; each batch it reads comes
//! to this actor as [`QueueEventsMsg::Batch`], which hands every event, in stream order, to the
//! optional [`QueueEventsHandler`](super::QueueEventsHandler) and then to every subscriber, and
//! advances the shared position. The mailbox is never blocked by the read.
//!
//! Messages: [`QueueEventsMsg`] (`Run`, `Subscribe`, `Unsubscribe`, `LastEventId`, `Close`, and
//! the reader's `Batch`).
//!
//! # Supervision
//!
//! When the actor crashes (a handler error or a panic) its reader task is aborted and its
//! connection closed. Started again with the same [`QueueEventsArgs`] (a supervisor's spawn
//! closure clones them), the new actor resumes after the last delivered id, with the same
//! subscribers, and re-`init`s the handler: no event is skipped and subscribers see none twice.
//! `close()` ends it for good (subscriptions end too).

use std::sync::Arc;

use ractor::{Actor, ActorProcessingErr, ActorRef, RpcReplyPort};
use tokio::sync::mpsc;

use bullmq_protocol::events::StreamEvent;

use super::error::QueueEventsError;
use super::handler::QueueEventsHandler;
use super::options::QueueEventsOptions;
use super::reader::{spawn_reader, ReaderGuard, ReaderSettings};
use super::shared::{QueueEventsArgs, QueueEventsShared};
use super::subscribers::{QueueEvent, Subscriber, SubscriptionId};

/// Messages of the [`QueueEvents`] actor.
#[derive(Debug)]
pub enum QueueEventsMsg {
    /// Starts reading (when started with `autorun: false`); replies
    /// [`QueueEventsError::AlreadyRunning`] if it already reads.
    Run(RpcReplyPort<Result<(), QueueEventsError>>),
    /// Adds a subscriber; replies its id.
    Subscribe(Subscriber, RpcReplyPort<SubscriptionId>),
    /// Removes a subscriber (a channel subscriber's receiver then ends).
    Unsubscribe(SubscriptionId),
    /// Replies the last delivered id (see [`QueueEventsShared::last_event_id`]).
    LastEventId(RpcReplyPort<String>),
    /// Stops reading, closes the connection, ends every subscription, stops the actor.
    Close(RpcReplyPort<()>),
    /// Events read by the reader task (only the reader can build a [`ReadBatch`]).
    Batch(ReadBatch, RpcReplyPort<()>),
}

/// A batch of events from the reader task.
#[derive(Debug)]
pub struct ReadBatch {
    pub(crate) events: Vec<StreamEvent>,
}

/// State of a running [`QueueEvents`] actor.
pub struct QueueEventsState {
    args: QueueEventsArgs,
    reader: Option<ReaderGuard>,
}

/// The QueueEvents actor. Spawn it with [`QueueEventsArgs`], or use [`QueueEventsHandle`].
#[derive(Debug, Clone, Copy, Default)]
pub struct QueueEvents;

impl Actor for QueueEvents {
    type Msg = QueueEventsMsg;
    type State = QueueEventsState;
    type Arguments = QueueEventsArgs;

    async fn pre_start(
        &self,
        myself: ActorRef<Self::Msg>,
        args: QueueEventsArgs,
    ) -> Result<QueueEventsState, ActorProcessingErr> {
        args.options.validate()?;
        if args.shared.is_closed() {
            return Err(Box::new(QueueEventsError::NotRunning));
        }
        if args.shared.has_handler() {
            let mut slot = args.shared.handler().lock().await;
            if let Some(handler) = slot.as_mut() {
                handler
                    .init()
                    .await
                    .map_err(QueueEventsError::HandlerInit)?;
            }
        }
        args.shared.set_actor(myself);
        Ok(QueueEventsState { args, reader: None })
    }

    async fn post_start(
        &self,
        myself: ActorRef<Self::Msg>,
        state: &mut QueueEventsState,
    ) -> Result<(), ActorProcessingErr> {
        if state.args.options.autorun || state.args.shared.is_running() {
            start_reading(&myself, state);
        }
        Ok(())
    }

    async fn handle(
        &self,
        myself: ActorRef<Self::Msg>,
        message: QueueEventsMsg,
        state: &mut QueueEventsState,
    ) -> Result<(), ActorProcessingErr> {
        match message {
            QueueEventsMsg::Batch(batch, reply) => {
                deliver(state, batch.events).await?;
                let _ = reply.send(());
            }
            QueueEventsMsg::Run(reply) => {
                let outcome = if state.reader.is_some() {
                    Err(QueueEventsError::AlreadyRunning)
                } else {
                    start_reading(&myself, state);
                    Ok(())
                };
                let _ = reply.send(outcome);
            }
            QueueEventsMsg::Subscribe(subscriber, reply) => {
                let id = state.args.shared.subscribe(subscriber);
                let _ = reply.send(id);
            }
            QueueEventsMsg::Unsubscribe(id) => {
                state.args.shared.subscribers().remove(id);
            }
            QueueEventsMsg::LastEventId(reply) => {
                let _ = reply.send(state.args.shared.last_event_id());
            }
            QueueEventsMsg::Close(reply) => {
                state.args.shared.set_closed();
                if let Some(reader) = state.reader.take() {
                    reader.shutdown().await;
                }
                state.args.shared.subscribers().clear();
                let _ = reply.send(());
                // A "shutdown:" reason is a normal exit: a Transient child is not restarted.
                myself.stop(Some("shutdown: closed".into()));
            }
        }
        Ok(())
    }

    async fn post_stop(
        &self,
        myself: ActorRef<Self::Msg>,
        state: &mut QueueEventsState,
    ) -> Result<(), ActorProcessingErr> {
        if let Some(reader) = state.reader.take() {
            reader.shutdown().await;
        }
        state.args.shared.clear_actor(&myself);
        Ok(())
    }
}

// ---------------------------------------------------------------------------------------------
// Helpers of the actor
// ---------------------------------------------------------------------------------------------

/// Connects once and closes again: an unreachable server fails a start with
/// [`RedisError::Connect`](bullmq_redis::RedisError::Connect), as `Queue::new` and a Worker's
/// start do, instead of a reader retrying in the background from the first attempt. The
/// reader opens its own connection (it must be able to reconnect on its own anyway).
pub(crate) async fn probe_connection(options: &QueueEventsOptions) -> Result<(), QueueEventsError> {
    let stream = options.open_backend().event_stream(&options.id()).await?;
    stream.close().await;
    Ok(())
}

fn start_reading(myself: &ActorRef<QueueEventsMsg>, state: &mut QueueEventsState) {
    let options = &state.args.options;
    let settings = ReaderSettings {
        backend: options.open_backend(),
        queue_id: options.id(),
        block_timeout: options.block_timeout,
        subscriber_buffer: options.subscriber_buffer,
        queue: options.queue.clone(),
    };
    state.args.shared.set_running();
    state.reader = Some(spawn_reader(
        settings,
        state.args.shared.clone(),
        myself.clone(),
    ));
}

/// Handler first, then subscribers, then the position. Events the handler accepted are fanned
/// out subscriber by subscriber (one wake-up per subscriber per batch, not per event); an event
/// the handler failed on is not delivered and the position stays before it, so the restarted
/// actor starts with it.
async fn deliver(
    state: &mut QueueEventsState,
    mut events: Vec<StreamEvent>,
) -> Result<(), ActorProcessingErr> {
    let shared = &state.args.shared;
    let mut failure = None;
    if shared.has_handler() {
        let mut slot = shared.handler().lock().await;
        if let Some(handler) = slot.as_mut() {
            for (index, event) in events.iter().enumerate() {
                if let Err(error) = handler.handle(event.clone()).await {
                    failure = Some(format!(
                        "QueueEventsHandler::handle_event failed on {} ({}): {error:#}",
                        event.id,
                        event.event.name()
                    ));
                    events.truncate(index);
                    break;
                }
            }
        }
    }
    // One allocation per event, shared by every subscriber (a reference count each, no copy).
    let events: Vec<Arc<StreamEvent>> = events.into_iter().map(Arc::new).collect();
    shared
        .subscribers()
        .deliver(&events, shared.subscriber_buffer());
    if let Some(last) = events.last() {
        shared.cursor().advance(&last.id);
    }
    if let Some(failure) = failure {
        return Err(failure.into());
    }
    // Let consumers on this thread drain their buffers before the next batch.
    tokio::task::yield_now().await;
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// QueueEventsHandle: the convenient API for plain async code
// ---------------------------------------------------------------------------------------------

/// A handle on a QueueEvents: start it, subscribe, run, close.
///
/// The handle follows the actor across restarts (it holds the [`QueueEventsShared`]), so it
/// stays valid when a supervisor replaces a crashed actor. Dropping the handle does not stop
/// the actor: call [`close`](Self::close).
///
/// ```no_run
/// use ractor_bullmq::{ConnectionConfig, QueueEventsHandle, QueueEventsOptions};
/// # async fn demo() -> anyhow::Result<()> {
/// let options = QueueEventsOptions::new("emails", ConnectionConfig::from_env()?);
/// let events = QueueEventsHandle::start(options).await?;
/// let mut rx = events.subscribe_stream();
/// while let Some(e) = rx.recv().await {
///     println!("{} {} {:?}", e.id, e.event.name(), e.event.job_id());
/// }
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct QueueEventsHandle {
    args: QueueEventsArgs,
}

impl QueueEventsHandle {
    /// Spawns a QueueEvents (unlinked) and returns its handle. Connects once first, so an
    /// unreachable server fails here rather than in the background.
    ///
    /// # Errors
    ///
    /// [`QueueEventsError::InvalidOption`] for bad options, [`QueueEventsError::Redis`] with
    /// [`RedisError::Connect`](bullmq_redis::RedisError::Connect) when Redis cannot be reached
    /// within the connect timeout (as [`Queue::new`](crate::Queue::new)),
    /// [`QueueEventsError::Spawn`] when the actor cannot start (e.g. its name is taken).
    pub async fn start(options: QueueEventsOptions) -> Result<Self, QueueEventsError> {
        Self::spawn(QueueEventsArgs::new(options)?).await
    }

    /// Spawns a QueueEvents that feeds `handler` (its `init` runs before this returns).
    ///
    /// # Errors
    ///
    /// As [`start`](Self::start), and [`QueueEventsError::Spawn`] when `init` fails.
    pub async fn start_with_handler<H: QueueEventsHandler>(
        options: QueueEventsOptions,
        handler: H,
    ) -> Result<Self, QueueEventsError> {
        Self::spawn(QueueEventsArgs::with_handler(options, handler)?).await
    }

    /// Spawns a QueueEvents from prepared arguments (connecting once first, as
    /// [`start`](Self::start)).
    ///
    /// # Errors
    ///
    /// [`QueueEventsError::Redis`] when Redis cannot be reached, [`QueueEventsError::Spawn`]
    /// when the actor cannot start.
    pub async fn spawn(args: QueueEventsArgs) -> Result<Self, QueueEventsError> {
        probe_connection(&args.options).await?;
        let name = args.options.name.clone();
        Actor::spawn(name, QueueEvents, args.clone())
            .await
            .map_err(QueueEventsError::Spawn)?;
        Ok(Self { args })
    }

    /// A handle on the QueueEvents started with `args` (by a supervisor, say).
    pub fn from_args(args: &QueueEventsArgs) -> Self {
        Self { args: args.clone() }
    }

    /// The actor serving this QueueEvents now, if alive.
    pub fn actor(&self) -> Option<ActorRef<QueueEventsMsg>> {
        self.args.shared.actor()
    }

    /// Starts reading when started with `autorun: false`.
    ///
    /// # Errors
    ///
    /// [`QueueEventsError::AlreadyRunning`] when it already reads, [`QueueEventsError::NotRunning`]
    /// when the actor is gone.
    pub async fn run(&self) -> Result<(), QueueEventsError> {
        let actor = self.actor().ok_or(QueueEventsError::NotRunning)?;
        match actor.call(QueueEventsMsg::Run, None).await {
            Ok(ractor::rpc::CallResult::Success(outcome)) => outcome,
            _ => Err(QueueEventsError::NotRunning),
        }
    }

    /// Subscribes `actor`: it receives every event as `M::from(QueueEvent)`. Dropped
    /// automatically when the actor stops, or when it falls `subscriber_buffer` events behind.
    pub fn subscribe<M>(&self, actor: ActorRef<M>) -> SubscriptionId
    where
        M: ractor::Message + From<QueueEvent>,
    {
        self.args.shared.subscribe(Subscriber::actor(actor))
    }

    /// Subscribes a channel of `subscriber_buffer` events and returns its receiver (wrap it in
    /// `tokio_stream::wrappers::ReceiverStream` for a `Stream`). Drop the receiver to
    /// unsubscribe. The receiver ends on `close`, or when it fell a full buffer behind. (For a
    /// channel subscription with an id, send `QueueEventsMsg::Subscribe` with
    /// [`Subscriber::channel`].)
    ///
    /// Every subscriber receives the same `Arc` of an event (read it through the `Arc`, or
    /// `Arc::unwrap_or_clone` it for an owned value).
    pub fn subscribe_stream(&self) -> mpsc::Receiver<Arc<StreamEvent>> {
        let (subscriber, rx) = Subscriber::channel(self.args.shared.subscriber_buffer());
        self.args.shared.subscribe(subscriber);
        rx
    }

    /// Removes a subscription; returns whether it existed.
    pub fn unsubscribe(&self, id: SubscriptionId) -> bool {
        self.args.shared.subscribers().remove(id)
    }

    /// Live subscribers.
    pub fn subscriber_count(&self) -> usize {
        self.args.shared.subscribers().len()
    }

    /// See [`QueueEventsShared::last_event_id`].
    pub fn last_event_id(&self) -> String {
        self.args.shared.last_event_id()
    }

    /// The arguments, e.g. to give a supervisor a spawn closure that resumes this QueueEvents.
    pub fn args(&self) -> &QueueEventsArgs {
        &self.args
    }

    /// The shared state.
    pub fn shared(&self) -> &QueueEventsShared {
        &self.args.shared
    }

    /// Stops reading (interrupting a blocked `XREAD`), closes the connection, ends every
    /// subscription and stops the actor. Idempotent.
    pub async fn close(&self) {
        if let Some(actor) = self.actor() {
            let _ = actor.call(QueueEventsMsg::Close, None).await;
        }
        // Also when the actor was already gone: no one may start reading again.
        self.args.shared.set_closed();
        self.args.shared.subscribers().clear();
    }
}

impl std::fmt::Debug for QueueEventsHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("QueueEventsHandle")
            .field("queue", &self.args.options.queue)
            .field("last_event_id", &self.last_event_id())
            .finish()
    }
}
