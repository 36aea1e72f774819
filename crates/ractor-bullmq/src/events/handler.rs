//! The structured way to consume events: a handler with state threaded through events.
//!
//! A [`QueueEventsHandler`] is given to
//! [`QueueEventsHandle::start_with_handler`](super::QueueEventsHandle::start_with_handler) (or
//! to [`QueueEventsArgs::with_handler`](super::QueueEventsArgs::with_handler) when the actor
//! is spawned by a supervisor). The QueueEvents actor calls [`init`](QueueEventsHandler::init)
//! when it starts and [`handle_event`](QueueEventsHandler::handle_event) for every event, in
//! stream order, before the event goes to the subscribers.
//!
//! # Failure
//!
//! An error from `init` fails the start of the actor. An error from `handle_event` fails the
//! actor (its supervisor sees `ActorFailed`); the event it failed on is not marked delivered,
//! so a restarted actor calls `init` again and hands that event to the handler again (at least
//! once for the handler) before the subscribers see it (exactly once for them).

use std::future::Future;
use std::pin::Pin;

use bullmq_protocol::events::StreamEvent;

/// Consumes the events of one queue with a state value threaded from event to event.
///
/// ```
/// use ractor_bullmq::events::QueueEventsHandler;
/// use ractor_bullmq::protocol::events::{Event, StreamEvent};
///
/// /// Counts completed jobs.
/// struct CountCompleted;
///
/// impl QueueEventsHandler for CountCompleted {
///     type State = u64;
///
///     async fn init(&mut self) -> anyhow::Result<u64> {
///         Ok(0)
///     }
///
///     async fn handle_event(&mut self, event: StreamEvent, count: u64) -> anyhow::Result<u64> {
///         Ok(if matches!(event.event, Event::Completed { .. }) { count + 1 } else { count })
///     }
/// }
/// ```
pub trait QueueEventsHandler: Send + 'static {
    /// The state threaded through [`handle_event`](Self::handle_event).
    type State: Send + 'static;

    /// Builds the initial state; called each time the QueueEvents actor starts (also after a
    /// supervisor restarted it).
    ///
    /// # Errors
    ///
    /// Any error fails the start of the actor.
    fn init(&mut self) -> impl Future<Output = anyhow::Result<Self::State>> + Send;

    /// Handles one event and returns the next state.
    ///
    /// # Errors
    ///
    /// Any error fails the actor (see the module docs for what is delivered again).
    fn handle_event(
        &mut self,
        event: StreamEvent,
        state: Self::State,
    ) -> impl Future<Output = anyhow::Result<Self::State>> + Send;
}

type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// A handler with its state, behind a trait object the actor can hold.
pub(crate) trait DynHandler: Send {
    /// Drops any state and builds a fresh one.
    fn init(&mut self) -> BoxFuture<'_, anyhow::Result<()>>;
    /// Threads the state through one event.
    fn handle(&mut self, event: StreamEvent) -> BoxFuture<'_, anyhow::Result<()>>;
}

/// `H` and the state between two events (`None` before `init` or after a failure).
pub(crate) struct Threaded<H: QueueEventsHandler> {
    handler: H,
    state: Option<H::State>,
}

impl<H: QueueEventsHandler> Threaded<H> {
    pub(crate) fn new(handler: H) -> Self {
        Self {
            handler,
            state: None,
        }
    }
}

impl<H: QueueEventsHandler> DynHandler for Threaded<H> {
    fn init(&mut self) -> BoxFuture<'_, anyhow::Result<()>> {
        Box::pin(async move {
            self.state = None;
            self.state = Some(self.handler.init().await?);
            Ok(())
        })
    }

    fn handle(&mut self, event: StreamEvent) -> BoxFuture<'_, anyhow::Result<()>> {
        Box::pin(async move {
            // The state is moved into the handler; after an error it is gone and the next
            // event (after a restart) starts from a fresh `init`.
            let state = match self.state.take() {
                Some(state) => state,
                None => self.handler.init().await?,
            };
            self.state = Some(self.handler.handle_event(event, state).await?);
            Ok(())
        })
    }
}
