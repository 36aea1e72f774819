//! Fan-out of events to subscribers: ractor actors and plain channels.
//!
//! Every subscriber has a bounded buffer of `subscriber_buffer` events. A channel subscriber's
//! buffer is its `mpsc` channel; an actor subscriber's buffer counts the [`QueueEvent`]s cast
//! to it that it has not dropped yet (ractor mailboxes are unbounded, so the count is kept
//! here). When a buffer is full the subscriber is **disconnected** with a logged warning: a
//! channel receiver then yields what it had buffered and ends, an actor simply stops receiving.
//! The reader never waits for a subscriber, so one slow consumer cannot stall the others.
//!
//! A subscriber that is gone (actor stopped, receiver dropped) is removed at the next event.
//!
//! Every subscriber receives the same [`Arc<StreamEvent>`]: an event is allocated once,
//! however many subscribers there are, and handing it to one more subscriber costs a reference
//! count increment (a deep copy per subscriber made 100 subscribers fall behind a busy worker).

use std::fmt;
use std::ops::Deref;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;

use bullmq_protocol::events::StreamEvent;
use ractor::{ActorCell, ActorRef, ActorStatus, Message};
use tokio::sync::mpsc;

/// Identifies one subscription, for [`unsubscribe`](super::QueueEventsHandle::unsubscribe).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct SubscriptionId(u64);

/// An event as an actor subscriber receives it.
///
/// It holds one slot of the subscriber's buffer until dropped (or turned into the bare event
/// with [`into_event`](Self::into_event)), which is how the buffering policy sees a slow actor.
/// Dereferences to the [`StreamEvent`], which every subscriber shares (see the module docs).
pub struct QueueEvent {
    event: Arc<StreamEvent>,
    _slot: BufferSlot,
}

impl QueueEvent {
    /// The event and its stream id.
    pub fn event(&self) -> &StreamEvent {
        &self.event
    }

    /// The shared event; frees the buffer slot. Cheap: no copy is made.
    pub fn into_shared(self) -> Arc<StreamEvent> {
        self.event
    }

    /// The event as an owned value; frees the buffer slot. Copies the event unless this
    /// subscriber holds the only reference, so prefer [`into_shared`](Self::into_shared) when
    /// a shared reference will do.
    pub fn into_event(self) -> StreamEvent {
        Arc::unwrap_or_clone(self.event)
    }
}

impl Deref for QueueEvent {
    type Target = StreamEvent;

    fn deref(&self) -> &StreamEvent {
        &self.event
    }
}

impl fmt::Debug for QueueEvent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("QueueEvent").field(&self.event).finish()
    }
}

/// One in-flight event of an actor subscriber; frees itself when dropped.
struct BufferSlot(Arc<AtomicUsize>);

impl Drop for BufferSlot {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

/// Something that receives events. Build one with [`Subscriber::actor`] or
/// [`Subscriber::channel`] and hand it to `QueueEventsMsg::Subscribe`; the
/// [`QueueEventsHandle`](super::QueueEventsHandle) methods do this for you.
pub struct Subscriber {
    sink: Sink,
}

enum Sink {
    Channel(mpsc::Sender<Arc<StreamEvent>>),
    Actor {
        cell: ActorCell,
        cast: Box<dyn Fn(QueueEvent) -> bool + Send>,
        in_flight: Arc<AtomicUsize>,
    },
}

impl Subscriber {
    /// An actor subscriber: every event is cast to `actor` as `M::from(QueueEvent)`.
    pub fn actor<M>(actor: ActorRef<M>) -> Self
    where
        M: Message + From<QueueEvent>,
    {
        let cell = actor.get_cell();
        let cast = Box::new(move |event: QueueEvent| actor.cast(M::from(event)).is_ok());
        Self {
            sink: Sink::Actor {
                cell,
                cast,
                in_flight: Arc::new(AtomicUsize::new(0)),
            },
        }
    }

    /// A channel subscriber with room for `buffer` events, and its receiver. The events are
    /// shared with the other subscribers (`Arc`), so receiving one copies nothing.
    pub fn channel(buffer: usize) -> (Self, mpsc::Receiver<Arc<StreamEvent>>) {
        let (tx, rx) = mpsc::channel(buffer.max(1));
        (
            Self {
                sink: Sink::Channel(tx),
            },
            rx,
        )
    }

    fn is_gone(&self) -> bool {
        match &self.sink {
            Sink::Channel(tx) => tx.is_closed(),
            Sink::Actor { cell, .. } => {
                matches!(
                    cell.get_status(),
                    ActorStatus::Stopping | ActorStatus::Stopped
                )
            }
        }
    }

    fn describe(&self) -> String {
        match &self.sink {
            Sink::Channel(_) => "channel".to_owned(),
            Sink::Actor { cell, .. } => match cell.get_name() {
                Some(name) => format!("actor {name} ({})", cell.get_id()),
                None => format!("actor {}", cell.get_id()),
            },
        }
    }
}

impl fmt::Debug for Subscriber {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.describe())
    }
}

/// What happened to one subscriber for one event.
enum Delivery {
    Delivered,
    Gone,
    Overflow,
}

/// The subscribers of one QueueEvents.
#[derive(Default)]
pub(crate) struct SubscriberSet {
    next_id: AtomicU64,
    entries: Vec<(SubscriptionId, Subscriber)>,
}

impl SubscriberSet {
    pub(crate) fn insert(&mut self, subscriber: Subscriber) -> SubscriptionId {
        let id = SubscriptionId(self.next_id.fetch_add(1, Ordering::Relaxed));
        self.entries.push((id, subscriber));
        id
    }

    pub(crate) fn remove(&mut self, id: SubscriptionId) -> bool {
        let before = self.entries.len();
        self.entries.retain(|(sid, _)| *sid != id);
        before != self.entries.len()
    }

    /// Drops every subscriber: channel receivers end after their buffered events.
    pub(crate) fn clear(&mut self) {
        self.entries.clear();
    }

    /// Live subscribers (prunes the dead ones first).
    pub(crate) fn len(&mut self) -> usize {
        self.entries.retain(|(_, s)| !s.is_gone());
        self.entries.len()
    }

    /// Hands `events`, in order, to every subscriber, removing the gone and the overflowing
    /// ones. Each subscriber gets a reference to the same allocation of each event.
    pub(crate) fn deliver(&mut self, events: &[Arc<StreamEvent>], capacity: usize) {
        if events.is_empty() {
            return;
        }
        self.entries.retain(|(id, subscriber)| {
            for event in events {
                match deliver_one(subscriber, event, capacity) {
                    Delivery::Delivered => {}
                    Delivery::Gone => {
                        tracing::debug!(subscription = ?id, subscriber = %subscriber.describe(), "QueueEvents subscriber is gone; removed");
                        return false;
                    }
                    Delivery::Overflow => {
                        tracing::warn!(
                            subscription = ?id,
                            subscriber = %subscriber.describe(),
                            buffer = capacity,
                            event_id = %event.id,
                            "QueueEvents subscriber is too slow (buffer full); disconnected"
                        );
                        return false;
                    }
                }
            }
            true
        });
    }
}

fn deliver_one(subscriber: &Subscriber, event: &Arc<StreamEvent>, capacity: usize) -> Delivery {
    match &subscriber.sink {
        Sink::Channel(tx) => match tx.try_send(Arc::clone(event)) {
            Ok(()) => Delivery::Delivered,
            Err(mpsc::error::TrySendError::Full(_)) => Delivery::Overflow,
            Err(mpsc::error::TrySendError::Closed(_)) => Delivery::Gone,
        },
        Sink::Actor {
            cell,
            cast,
            in_flight,
        } => {
            if matches!(
                cell.get_status(),
                ActorStatus::Stopping | ActorStatus::Stopped
            ) {
                return Delivery::Gone;
            }
            if in_flight.fetch_add(1, Ordering::AcqRel) >= capacity {
                in_flight.fetch_sub(1, Ordering::AcqRel);
                return Delivery::Overflow;
            }
            let message = QueueEvent {
                event: Arc::clone(event),
                _slot: BufferSlot(Arc::clone(in_flight)),
            };
            // A failed cast drops the message, which frees its slot.
            if cast(message) {
                Delivery::Delivered
            } else {
                Delivery::Gone
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bullmq_protocol::events::Event;

    fn ev(n: u32) -> Arc<StreamEvent> {
        Arc::new(StreamEvent {
            id: format!("{n}-0"),
            event: Event::Drained,
        })
    }

    #[test]
    fn channel_subscribers_get_every_event_in_order() {
        let mut set = SubscriberSet::default();
        let (a, mut rx_a) = Subscriber::channel(8);
        let (b, mut rx_b) = Subscriber::channel(8);
        set.insert(a);
        set.insert(b);
        for n in 0..3 {
            set.deliver(&[ev(n)], 8);
        }
        for rx in [&mut rx_a, &mut rx_b] {
            for n in 0..3 {
                assert_eq!(rx.try_recv().unwrap().id, format!("{n}-0"));
            }
        }
    }

    #[test]
    fn subscribers_share_one_allocation_per_event() {
        let mut set = SubscriberSet::default();
        let (a, mut rx_a) = Subscriber::channel(8);
        let (b, mut rx_b) = Subscriber::channel(8);
        set.insert(a);
        set.insert(b);
        let event = ev(7);
        set.deliver(std::slice::from_ref(&event), 8);
        let got_a = rx_a.try_recv().unwrap();
        let got_b = rx_b.try_recv().unwrap();
        assert!(Arc::ptr_eq(&got_a, &event));
        assert!(Arc::ptr_eq(&got_b, &event));
    }

    #[test]
    fn dropped_receiver_is_removed_and_others_continue() {
        let mut set = SubscriberSet::default();
        let (a, rx_a) = Subscriber::channel(8);
        let (b, mut rx_b) = Subscriber::channel(8);
        set.insert(a);
        set.insert(b);
        drop(rx_a);
        set.deliver(&[ev(1)], 8);
        assert_eq!(set.len(), 1);
        assert_eq!(rx_b.try_recv().unwrap().id, "1-0");
    }

    #[test]
    fn overflow_disconnects_only_the_slow_subscriber() {
        let mut set = SubscriberSet::default();
        let (slow, mut rx_slow) = Subscriber::channel(2);
        let (fast, mut rx_fast) = Subscriber::channel(8);
        set.insert(slow);
        set.insert(fast);
        for n in 0..3 {
            set.deliver(&[ev(n)], 2);
            assert_eq!(rx_fast.try_recv().unwrap().id, format!("{n}-0"));
        }
        assert_eq!(set.len(), 1);
        // The slow one keeps what it had buffered, then ends.
        assert_eq!(rx_slow.try_recv().unwrap().id, "0-0");
        assert_eq!(rx_slow.try_recv().unwrap().id, "1-0");
        assert!(matches!(
            rx_slow.try_recv(),
            Err(mpsc::error::TryRecvError::Disconnected)
        ));
    }

    #[test]
    fn unsubscribe_removes() {
        let mut set = SubscriberSet::default();
        let (a, _rx) = Subscriber::channel(1);
        let id = set.insert(a);
        assert!(set.remove(id));
        assert!(!set.remove(id));
        assert_eq!(set.len(), 0);
    }
}
