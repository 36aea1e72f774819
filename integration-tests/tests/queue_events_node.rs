//! Our QueueEvents against Node BullMQ: it receives, typed, what a Node producer and a Node
//! Worker write; Node's QueueEvents receives what our QueueEventsProducer publishes.

mod common;
mod queue_events_support;

use std::time::Duration;

use common::*;
use queue_events_support::*;
use ractor_bullmq::protocol::events::{Event, StreamEvent};
use ractor_bullmq::QueueEventsHandle;
use serde_json::json;

#[tokio::test]
async fn receives_node_worker_events_typed_and_in_stream_order() -> anyhow::Result<()> {
    if !node_available() {
        return Ok(());
    }
    let queue = unique_queue("qe-node");
    let events = QueueEventsHandle::start(options(&queue, "0")).await?;
    let mut rx = events.subscribe_stream();

    run_node(
        "add_jobs.js",
        &json!({"queue": queue, "jobs": [
            {"name": "ok", "data": {"progress": [40, {"step": 2}], "returnValue": {"sum": 3}}},
            {"name": "bad", "data": {"fail": "boom"}},
            {"name": "later", "data": {}, "opts": {"delay": 600_000}},
        ]}),
    )
    .await?;
    let worker = run_node(
        "run_worker.js",
        &json!({"queue": queue, "stopAfter": 2, "timeoutMs": 30_000}),
    )
    .await?;
    assert_eq!(worker["stoppedBy"], "count", "{worker}");

    // Everything the stream holds now must reach us, in order, once.
    let stored = read_events(&queue).await?;
    let received = recv_n(&mut rx, stored.len(), Duration::from_secs(20)).await?;
    assert_matches_stream(&received, &stored);

    let find = |pred: &dyn Fn(&Event) -> bool| received.iter().any(|e| pred(&e.event));
    assert!(find(
        &|e| matches!(e, Event::Added { job_id, name } if job_id == "1" && name == "ok")
    ));
    assert!(find(
        &|e| matches!(e, Event::Waiting { job_id, .. } if job_id == "1")
    ));
    assert!(find(
        &|e| matches!(e, Event::Active { job_id, prev } if job_id == "1" && prev.as_deref() == Some("waiting"))
    ));
    assert!(find(
        &|e| matches!(e, Event::Progress { job_id, data } if job_id == "1" && *data == json!(40))
    ));
    assert!(find(
        &|e| matches!(e, Event::Progress { job_id, data } if job_id == "1" && *data == json!({"step": 2}))
    ));
    assert!(find(
        &|e| matches!(e, Event::Completed { job_id, returnvalue, prev }
        if job_id == "1" && *returnvalue == json!({"sum": 3}) && prev.as_deref() == Some("active"))
    ));
    assert!(find(
        &|e| matches!(e, Event::Failed { job_id, failed_reason, .. }
        if job_id == "2" && failed_reason == "boom")
    ));
    let now = now_ms();
    assert!(find(
        &|e| matches!(e, Event::Delayed { job_id, delay } if job_id == "3" && *delay > now)
    ));
    assert!(find(
        &|e| matches!(e, Event::RetriesExhausted { job_id, attempts_made }
        if job_id == "2" && *attempts_made == 1)
    ));

    assert_eq!(
        events.last_event_id(),
        stored.last().map(|e| e.id.clone()).unwrap_or_default()
    );
    events.close().await;
    assert!(rx.recv().await.is_none(), "close ends the subscription");
    cleanup(&queue).await?;
    Ok(())
}

/// The typed events received equal the stored stream: same ids in the same order, each event
/// re-encoding to exactly the stored fields, none left untyped.
fn assert_matches_stream(received: &[std::sync::Arc<StreamEvent>], stored: &[common::StreamEvent]) {
    let received_ids: Vec<&str> = received.iter().map(|e| e.id.as_str()).collect();
    let stored_ids: Vec<&str> = stored.iter().map(|e| e.id.as_str()).collect();
    assert_eq!(received_ids, stored_ids);
    for (ours, raw) in received.iter().zip(stored) {
        let mut expected = vec![("event".to_owned(), raw.event.clone())];
        expected.extend(raw.fields.iter().cloned());
        assert_eq!(ours.event.to_fields(), expected, "event {}", ours.id);
        assert!(
            !matches!(ours.event, Event::Custom { .. }),
            "untyped: {ours:?}"
        );
    }
}

#[tokio::test]
async fn receives_node_admin_dedup_and_stalled_events_typed() -> anyhow::Result<()> {
    if !node_available() {
        return Ok(());
    }
    let queue = unique_queue("qe-catalogue");
    let events = QueueEventsHandle::start(options(&queue, "0")).await?;
    let mut rx = events.subscribe_stream();

    run_node(
        "add_jobs.js",
        &json!({"queue": queue, "jobs": [
            {"name": "a", "data": {}, "opts": {"jobId": "dup"}},
            {"name": "a", "data": {}, "opts": {"jobId": "dup"}},
            {"name": "d", "data": {}, "opts": {"deduplication": {"id": "k"}}},
            {"name": "d", "data": {}, "opts": {"deduplication": {"id": "k"}}},
        ]}),
    )
    .await?;
    for op in [
        json!({"op": "pause"}),
        json!({"op": "resume"}),
        json!({"op": "remove", "id": "dup"}),
    ] {
        let mut arg = op;
        arg["queue"] = json!(queue);
        run_node("admin.js", &arg).await?;
    }
    // A short stalledInterval: each worker's stalled check sets the `stalled-check` guard for
    // that long, which would delay the stalled scenario below.
    run_node(
        "run_worker.js",
        &json!({"queue": queue, "stopAfter": 1, "stalledInterval": 300}),
    )
    .await?;
    run_node(
        "admin.js",
        &json!({"queue": queue, "op": "clean", "grace": 0, "limit": 10, "type": "completed"}),
    )
    .await?;

    // Stalled: a Node worker dies (SIGKILL) holding a job; another one's stalled check
    // recovers it once the lock expired.
    let added = run_node(
        "add_jobs.js",
        &json!({"queue": queue, "jobs": [{"name": "s", "data": {"sleepMs": 1_500}}]}),
    )
    .await?;
    let stalled_id = added["ids"][0].as_str().unwrap_or_default().to_owned();
    let mut doomed = tokio::process::Command::new("node")
        .arg("run_worker.js")
        .arg(
            json!({"queue": queue, "lockDuration": 1_000, "timeoutMs": 60_000,
                // Its stalled checks set the `stalled-check` guard for this long; keep it
                // short so the rescuer's check runs soon after the kill.
                "stalledInterval": 300})
            .to_string(),
        )
        .current_dir(node_dir())
        .env("REDIS_URL", redis_url())
        .stdout(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()?;
    let mut seen = Vec::new();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    while !seen.iter().any(
        |e: &std::sync::Arc<StreamEvent>| matches!(&e.event, Event::Active { job_id, .. } if *job_id == stalled_id),
    ) {
        match tokio::time::timeout_at(deadline, rx.recv()).await {
            Ok(Some(event)) => seen.push(event),
            _ => anyhow::bail!("job {stalled_id} never became active: {seen:?}"),
        }
    }
    doomed.kill().await?;
    let rescuer = run_node(
        "run_worker.js",
        &json!({"queue": queue, "stopAfter": 1, "stalledInterval": 300, "lockDuration": 1_000,
                "timeoutMs": 30_000}),
    )
    .await?;
    assert_eq!(rescuer["stoppedBy"], "count", "{rescuer}");

    let stored = read_events(&queue).await?;
    let rest = recv_n(&mut rx, stored.len() - seen.len(), Duration::from_secs(20)).await?;
    seen.extend(rest);
    assert_matches_stream(&seen, &stored);

    let has = |pred: &dyn Fn(&Event) -> bool| seen.iter().any(|e| pred(&e.event));
    assert!(has(
        &|e| matches!(e, Event::Duplicated { job_id } if job_id == "dup")
    ));
    assert!(has(
        &|e| matches!(e, Event::Deduplicated { deduplication_id, .. } if deduplication_id == "k")
    ));
    assert!(has(&|e| matches!(e, Event::Paused)));
    assert!(has(&|e| matches!(e, Event::Resumed)));
    assert!(has(
        &|e| matches!(e, Event::Removed { job_id, prev } if job_id == "dup" && prev.as_deref() == Some("wait"))
    ));
    assert!(has(&|e| matches!(e, Event::Drained)));
    assert!(has(&|e| matches!(e, Event::Cleaned { count: 1 })));
    assert!(has(
        &|e| matches!(e, Event::Stalled { job_id } if *job_id == stalled_id)
    ));

    events.close().await;
    cleanup(&queue).await?;
    Ok(())
}

#[tokio::test]
async fn node_queue_events_receives_our_custom_event() -> anyhow::Result<()> {
    if !node_available() {
        return Ok(());
    }
    let queue = unique_queue("qe-producer");
    let producer = producer(&queue).await?;
    let id = producer
        .publish_event("example", [("custom", "value"), ("jobId", "42")], 1_000)
        .await?;

    let heard = run_node(
        "collect_events.js",
        &json!({"queue": queue, "mode": "listen", "count": 1, "durationMs": 10_000}),
    )
    .await?;
    let heard = heard["events"].as_array().cloned().unwrap_or_default();
    assert_eq!(heard.len(), 1, "{heard:?}");
    assert_eq!(heard[0]["event"], "example");
    assert_eq!(heard[0]["id"], id.as_str());
    assert_eq!(heard[0]["args"], json!({"custom": "value", "jobId": "42"}));

    // The stored layout is Node's: `event` first, then the fields in order.
    let stored = read_events(&queue).await?;
    assert_eq!(stored.len(), 1);
    assert_eq!(stored[0].event, "example");
    assert_eq!(
        stored[0].fields,
        vec![
            ("custom".to_owned(), "value".to_owned()),
            ("jobId".to_owned(), "42".to_owned())
        ]
    );

    // And our QueueEvents sees it as a custom event carrying its raw fields.
    let events = QueueEventsHandle::start(options(&queue, "0").autorun(false)).await?;
    let mut rx = events.subscribe_stream();
    events.run().await?;
    let got = recv_n(&mut rx, 1, Duration::from_secs(10)).await?;
    assert_eq!(got[0].id, id);
    assert!(matches!(&got[0].event, Event::Custom { name, fields }
        if name == "example" && fields.len() == 2 && got[0].event.job_id() == Some("42")));
    events.close().await;
    producer.close().await;
    cleanup(&queue).await?;
    Ok(())
}

#[tokio::test]
async fn node_get_queue_events_lists_our_connection() -> anyhow::Result<()> {
    if !node_available() {
        return Ok(());
    }
    let queue = unique_queue("qe-listed");
    let events = QueueEventsHandle::start(options(&queue, "$")).await?;
    eventually("reading started", Duration::from_secs(15), || {
        let id = events.last_event_id();
        async move { id != "$" }
    })
    .await?;
    // Node finds QueueEvents connections by their CLIENT SETNAME (`getQueueEvents`).
    let script = r#"
        const { Queue } = require('bullmq');
        const { connectionOptions } = require('./lib');
        (async () => {
          const queue = new Queue(process.argv[1], { connection: connectionOptions() });
          const clients = await queue.getQueueEvents();
          console.log(JSON.stringify({ names: clients.map(c => c.name) }));
          await queue.close();
        })().catch(e => { console.error(e); process.exit(1); });
    "#;
    let output = tokio::process::Command::new("node")
        .arg("-e")
        .arg(script)
        .arg(&queue)
        .current_dir(node_dir())
        .env("REDIS_URL", redis_url())
        .output()
        .await?;
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let listed: serde_json::Value = serde_json::from_slice(&output.stdout)?;
    // Node matches `{prefix}:{base64(queue)}:qe` and reports the queue name for each match.
    assert_eq!(listed["names"], json!([queue]));
    // Ours reads the same connections (Node's `getQueueEvents`).
    let q = ractor_bullmq::Queue::new(&queue, ractor_bullmq::QueueOptions::from_env()?).await?;
    let ours: Vec<String> = q
        .get_queue_events()
        .await?
        .into_iter()
        .map(|c| c.fields["name"].clone())
        .collect();
    assert_eq!(json!(ours), listed["names"]);
    q.close().await?;
    events.close().await;
    cleanup(&queue).await?;
    Ok(())
}
