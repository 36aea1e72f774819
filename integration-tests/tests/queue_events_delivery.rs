//! Delivery semantics of QueueEvents: replay, start positions, autorun, many subscribers, dead
//! and slow subscribers, the handler with threaded state.

mod common;
mod queue_events_support;

use std::time::Duration;

use common::*;
use queue_events_support::*;
use ractor_bullmq::events::Subscriber;
use ractor_bullmq::protocol::events::StreamEvent;
use ractor_bullmq::{QueueEventsError, QueueEventsHandle, QueueEventsHandler, QueueEventsMsg};
use tokio::sync::mpsc;

const WAIT: Duration = Duration::from_secs(15);

#[tokio::test]
async fn replay_from_zero_delivers_history_in_order_then_live_events() -> anyhow::Result<()> {
    let queue = unique_queue("qe-replay");
    let producer = producer(&queue).await?;
    let history = publish_ticks(&producer, 0, 25).await?;

    let events = QueueEventsHandle::start(options(&queue, "0").autorun(false)).await?;
    let mut rx = events.subscribe_stream();
    events.run().await?;
    let got = recv_n(&mut rx, 25, WAIT).await?;
    assert_eq!(
        got.iter().map(|e| e.id.clone()).collect::<Vec<_>>(),
        history
    );
    assert_eq!(
        got.iter().map(|e| tick_n(e)).collect::<Vec<_>>(),
        (0..25).map(Some).collect::<Vec<_>>()
    );

    let live = publish_ticks(&producer, 25, 5).await?;
    let got = recv_n(&mut rx, 5, WAIT).await?;
    assert_eq!(got.iter().map(|e| e.id.clone()).collect::<Vec<_>>(), live);

    events.close().await;
    producer.close().await;
    cleanup(&queue).await?;
    Ok(())
}

#[tokio::test]
async fn start_after_an_id_and_from_now() -> anyhow::Result<()> {
    let queue = unique_queue("qe-from");
    let producer = producer(&queue).await?;
    let ids = publish_ticks(&producer, 0, 10).await?;

    // From an id: what follows it.
    let after = QueueEventsHandle::start(options(&queue, &ids[6]).autorun(false)).await?;
    let mut rx_after = after.subscribe_stream();
    after.run().await?;
    let got = recv_n(&mut rx_after, 3, WAIT).await?;
    assert_eq!(
        got.iter().map(|e| e.id.clone()).collect::<Vec<_>>(),
        ids[7..].to_vec()
    );

    // From `$`: only new events. The start is pinned to the newest id once reading began.
    let now = QueueEventsHandle::start(options(&queue, "$")).await?;
    let mut rx_now = now.subscribe_stream();
    eventually("`$` pinned", WAIT, || {
        let id = now.last_event_id();
        async move { id != "$" }
    })
    .await?;
    assert_eq!(now.last_event_id(), ids[9]);
    let new = publish_ticks(&producer, 10, 2).await?;
    let got = recv_n(&mut rx_now, 2, WAIT).await?;
    assert_eq!(got.iter().map(|e| e.id.clone()).collect::<Vec<_>>(), new);

    after.close().await;
    now.close().await;
    producer.close().await;
    cleanup(&queue).await?;
    Ok(())
}

#[tokio::test]
async fn autorun_false_reads_nothing_until_run() -> anyhow::Result<()> {
    let queue = unique_queue("qe-autorun");
    let producer = producer(&queue).await?;
    publish_ticks(&producer, 0, 3).await?;

    let events = QueueEventsHandle::start(options(&queue, "0").autorun(false)).await?;
    let mut rx = events.subscribe_stream();
    // Several block timeouts long: a running reader would have delivered by then.
    let early = tokio::time::timeout(Duration::from_millis(1_500), rx.recv()).await;
    assert!(early.is_err(), "received before run: {early:?}");
    assert_eq!(events.last_event_id(), "0");

    events.run().await?;
    assert!(matches!(
        events.run().await,
        Err(QueueEventsError::AlreadyRunning)
    ));
    let got = recv_n(&mut rx, 3, WAIT).await?;
    assert_eq!(
        got.iter().map(|e| tick_n(e)).collect::<Vec<_>>(),
        vec![Some(0), Some(1), Some(2)]
    );

    events.close().await;
    assert!(matches!(
        events.run().await,
        Err(QueueEventsError::NotRunning)
    ));
    // Subscribing after close gets an already-ended subscription, not a silent one.
    assert!(events.subscribe_stream().recv().await.is_none());
    producer.close().await;
    cleanup(&queue).await?;
    Ok(())
}

#[tokio::test]
async fn every_subscriber_gets_every_event_and_a_dead_one_is_dropped() -> anyhow::Result<()> {
    let queue = unique_queue("qe-subs");
    let producer = producer(&queue).await?;
    let events = QueueEventsHandle::start(options(&queue, "0")).await?;
    let mut rx_a = events.subscribe_stream();
    let mut rx_b = events.subscribe_stream();
    let (actor, mut rx_actor) = forwarder().await?;
    events.subscribe(actor.clone());
    let (doomed, _rx_doomed) = forwarder().await?;
    events.subscribe(doomed.clone());
    let dropped_rx = events.subscribe_stream();
    assert_eq!(events.subscriber_count(), 5);

    let first = publish_ticks(&producer, 0, 10).await?;
    for got in [
        recv_n(&mut rx_a, 10, WAIT).await?,
        recv_n(&mut rx_b, 10, WAIT).await?,
        recv_n_unbounded(&mut rx_actor, 10, WAIT).await?,
    ] {
        assert_eq!(got.iter().map(|e| e.id.clone()).collect::<Vec<_>>(), first);
    }

    // Kill one actor subscriber and drop one receiver: both are removed, the rest carry on.
    doomed.kill();
    eventually("doomed actor stopped", WAIT, || {
        let status = doomed.get_status();
        async move { matches!(status, ractor::ActorStatus::Stopped) }
    })
    .await?;
    drop(dropped_rx);
    let second = publish_ticks(&producer, 10, 10).await?;
    for got in [
        recv_n(&mut rx_a, 10, WAIT).await?,
        recv_n(&mut rx_b, 10, WAIT).await?,
        recv_n_unbounded(&mut rx_actor, 10, WAIT).await?,
    ] {
        assert_eq!(got.iter().map(|e| e.id.clone()).collect::<Vec<_>>(), second);
    }
    assert_eq!(events.subscriber_count(), 3);

    // The same through the actor's messages, as another actor would do it.
    let queue_events = events.actor().expect("running");
    let (late, mut rx_late) = forwarder().await?;
    let late_id = queue_events
        .call(
            |reply| QueueEventsMsg::Subscribe(Subscriber::actor(late.clone()), reply),
            None,
        )
        .await?
        .success_or(anyhow::anyhow!("no reply"))?;
    let third = publish_ticks(&producer, 20, 2).await?;
    let got = recv_n_unbounded(&mut rx_late, 2, WAIT).await?;
    assert_eq!(got.iter().map(|e| e.id.clone()).collect::<Vec<_>>(), third);
    let last = queue_events
        .call(QueueEventsMsg::LastEventId, None)
        .await?
        .success_or(anyhow::anyhow!("no reply"))?;
    assert_eq!(Some(&last), third.last());
    queue_events.cast(QueueEventsMsg::Unsubscribe(late_id))?;
    eventually("unsubscribed", WAIT, || {
        let n = events.subscriber_count();
        async move { n == 3 }
    })
    .await?;

    // Unsubscribing a channel subscriber ends its receiver.
    let (channel, mut rx_c) = Subscriber::channel(16);
    let channel_id = queue_events
        .call(|reply| QueueEventsMsg::Subscribe(channel, reply), None)
        .await?
        .success_or(anyhow::anyhow!("no reply"))?;
    assert!(events.unsubscribe(channel_id));
    assert!(rx_c.recv().await.is_none());

    events.close().await;
    late.stop(None);
    actor.stop(None);
    producer.close().await;
    cleanup(&queue).await?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_subscriber_is_disconnected_without_stalling_others() -> anyhow::Result<()> {
    let queue = unique_queue("qe-slow");
    let producer = producer(&queue).await?;
    publish_ticks(&producer, 0, 40).await?;
    let events =
        QueueEventsHandle::start(options(&queue, "0").autorun(false).subscriber_buffer(8)).await?;
    let mut slow = events.subscribe_stream(); // never read until the end
    let (fast_tx, mut fast) = mpsc::channel::<std::sync::Arc<StreamEvent>>(64);
    // A fast consumer drains its own subscription continuously.
    let mut fast_sub = events.subscribe_stream();
    let pump = tokio::spawn(async move {
        while let Some(event) = fast_sub.recv().await {
            if fast_tx.send(event).await.is_err() {
                break;
            }
        }
    });
    events.run().await?;

    let got = recv_n(&mut fast, 40, WAIT).await?;
    assert_eq!(
        got.iter().map(|e| tick_n(e)).collect::<Vec<_>>(),
        (0..40).map(Some).collect::<Vec<_>>()
    );
    // The slow one got its buffer's worth, then was cut off.
    let mut kept = Vec::new();
    while let Some(event) = slow.recv().await {
        kept.push(tick_n(&event));
    }
    assert_eq!(kept, (0..8).map(Some).collect::<Vec<_>>());
    assert_eq!(events.subscriber_count(), 1);

    events.close().await;
    pump.await?;
    producer.close().await;
    cleanup(&queue).await?;
    Ok(())
}

/// Sums the `n` of `tick` events and reports each running total.
struct Summer {
    totals: mpsc::UnboundedSender<(String, usize)>,
    inits: std::sync::Arc<std::sync::atomic::AtomicUsize>,
}

impl QueueEventsHandler for Summer {
    type State = usize;

    async fn init(&mut self) -> anyhow::Result<usize> {
        self.inits.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        Ok(0)
    }

    async fn handle_event(&mut self, event: StreamEvent, sum: usize) -> anyhow::Result<usize> {
        let sum = sum + tick_n(&event).unwrap_or(0);
        let _ = self.totals.send((event.id, sum));
        Ok(sum)
    }
}

#[tokio::test]
async fn handler_threads_its_state_through_events() -> anyhow::Result<()> {
    let queue = unique_queue("qe-handler");
    let producer = producer(&queue).await?;
    let ids = publish_ticks(&producer, 1, 5).await?; // n = 1..=5
    let (tx, mut totals) = mpsc::unbounded_channel();
    let inits = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let handler = Summer {
        totals: tx,
        inits: inits.clone(),
    };
    let events = QueueEventsHandle::start_with_handler(options(&queue, "0"), handler).await?;
    assert_eq!(
        inits.load(std::sync::atomic::Ordering::SeqCst),
        1,
        "init ran at start"
    );

    let mut seen = Vec::new();
    while seen.len() < 5 {
        let next = tokio::time::timeout(WAIT, totals.recv()).await?;
        seen.push(next.expect("handler alive"));
    }
    let expected: Vec<(String, usize)> = ids.into_iter().zip([1, 3, 6, 10, 15]).collect();
    assert_eq!(seen, expected);

    events.close().await;
    producer.close().await;
    cleanup(&queue).await?;
    Ok(())
}
