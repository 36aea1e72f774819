//! QueueEvents started through the Runtime, against a real Redis: a crashed reader is
//! restarted by the QueueEventsSupervisor and resumes after the last delivered event — the
//! subscriber sees every event once, across the crash.

mod common;

use std::time::Duration;

use common::*;
use ractor_bullmq::runtime::{Runtime, RuntimeOptions};
use ractor_bullmq::supervision::RuntimeEvent;
use ractor_bullmq::{ConnectionConfig, QueueEventsOptions};
use serde_json::json;

const LONG: Duration = Duration::from_secs(60);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn crashed_queue_events_is_restarted_and_resumes_without_gaps_or_repeats(
) -> anyhow::Result<()> {
    let name = unique_queue("rt-events");
    let queue = open_queue(&name).await?;
    let connection = ConnectionConfig::from_url(&redis_url())?;
    let runtime = Runtime::start(RuntimeOptions::default().connection(connection.clone())).await?;
    let mut tree = runtime.subscribe();
    let events = runtime
        .start_queue_events(QueueEventsOptions::new(name.clone(), connection).last_event_id("0"))
        .await?;
    let mut stream = events.subscribe_stream();

    for i in 0..5 {
        queue.add("a", json!({ "i": i })).send().await?;
    }
    let mut seen = Vec::new();
    while seen.len() < 10 {
        let e = tokio::time::timeout(LONG, stream.recv())
            .await?
            .expect("stream open");
        seen.push(e.id.clone());
    }

    let old = events.actor().expect("reader running");
    old.stop(Some("injected queue events fault".to_owned()));
    let restarted = loop {
        match tokio::time::timeout(LONG, tree.recv()).await?? {
            event @ RuntimeEvent::ChildRestarted { .. } => break event,
            _ => continue,
        }
    };
    assert!(
        matches!(restarted, RuntimeEvent::ChildRestarted { ref reason, .. } if reason.contains("injected"))
    );

    for i in 5..10 {
        queue.add("b", json!({ "i": i })).send().await?;
    }
    while seen.len() < 20 {
        let e = tokio::time::timeout(LONG, stream.recv())
            .await?
            .expect("stream open");
        seen.push(e.id.clone());
    }
    // Exactly the stream's entries, in order, each once.
    let stored: Vec<String> = read_events(&name)
        .await?
        .into_iter()
        .map(|e| e.id)
        .collect();
    assert_eq!(seen, stored);
    assert!(events.actor().is_some_and(|a| a.get_id() != old.get_id()));

    runtime.shutdown(Duration::from_secs(30)).await?;
    queue.close().await?;
    cleanup(&name).await
}
