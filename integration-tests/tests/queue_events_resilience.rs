//! QueueEvents survives what happens to its connection and to itself: a killed connection, a
//! Redis restart, a crash under a supervisor. Nothing is skipped, nothing is delivered twice.
//! `close()` interrupts a blocked read.

mod common;
mod queue_events_support;
mod test_redis;

use std::process::Stdio;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use common::*;
use fred::prelude::ClientLike;
use fred::types::{ClusterHash, CustomCommand};
use queue_events_support::*;
use ractor_bullmq::protocol::events::StreamEvent;
use ractor_bullmq::protocol::keys::QueueKeys;
use ractor_bullmq::runtime::{Runtime, RuntimeOptions};
use ractor_bullmq::supervision::RuntimeEvent;
use ractor_bullmq::{
    ConnectionConfig, QueueEventsArgs, QueueEventsHandle, QueueEventsHandler, QueueEventsOptions,
    QueueEventsProducer,
};
use tokio::sync::mpsc;

const WAIT: Duration = Duration::from_secs(20);

fn ids(events: &[std::sync::Arc<StreamEvent>]) -> Vec<String> {
    events.iter().map(|e| e.id.clone()).collect()
}

/// Ids of the connections named `name` (only ours: the name holds a unique queue).
async fn connection_ids_named(name: &str) -> Result<Vec<String>> {
    let client = raw_client().await?;
    let list = client_list(&client).await?;
    client.quit().await?;
    Ok(list
        .lines()
        .filter(|line| line.split(' ').any(|kv| kv == format!("name={name}")))
        .filter_map(|line| {
            line.split(' ')
                .find_map(|kv| kv.strip_prefix("id="))
                .map(str::to_owned)
        })
        .collect())
}

/// `CLIENT KILL ID` of every connection named `name`; returns the ids killed.
async fn kill_connections_named(name: &str) -> Result<Vec<String>> {
    let ids = connection_ids_named(name).await?;
    let client = raw_client().await?;
    for id in &ids {
        let _: i64 = client
            .custom(
                CustomCommand::new_static("CLIENT", ClusterHash::Random, false),
                vec!["KILL".to_owned(), "ID".to_owned(), id.clone()],
            )
            .await?;
    }
    client.quit().await?;
    Ok(ids)
}

#[tokio::test]
async fn killed_connection_resumes_without_skipping_or_repeating() -> Result<()> {
    let queue = unique_queue("qe-kill");
    let keys = QueueKeys::new(PREFIX, queue.clone());
    let conn_name = bullmq_redis::events::queue_events_client_name(&keys);
    let producer = producer(&queue).await?;
    let events = QueueEventsHandle::start(options(&queue, "0")).await?;
    let mut rx = events.subscribe_stream();

    let mut expected = Vec::new();
    let mut received = Vec::new();
    for round in 0..4 {
        let published = publish_ticks(&producer, round * 10, 10).await?;
        expected.extend(published);
        received.extend(recv_n(&mut rx, 10, WAIT).await?);
        // The connection is named as Node names QueueEvents connections, which is how we find it.
        let killed = kill_connections_named(&conn_name).await?;
        assert_eq!(
            killed.len(),
            1,
            "one :qe connection, named as Node names it"
        );
        // Published while the reader is reconnecting: must still arrive, once.
        let during = publish_ticks(&producer, 1_000 + round * 10, 3).await?;
        expected.extend(during);
        received.extend(recv_n(&mut rx, 3, WAIT).await?);
        // It really reconnected: a new connection, with its name set again.
        eventually("a new, named :qe connection", WAIT, || {
            let (conn_name, killed) = (conn_name.clone(), killed.clone());
            async move {
                let now = connection_ids_named(&conn_name).await.unwrap_or_default();
                now.len() == 1 && now != killed
            }
        })
        .await?;
    }
    assert_eq!(ids(&received), expected);
    // Nothing else arrives (nothing twice).
    assert!(
        tokio::time::timeout(Duration::from_millis(1_500), rx.recv())
            .await
            .is_err()
    );
    assert_eq!(
        events.last_event_id(),
        expected.last().cloned().unwrap_or_default()
    );

    events.close().await;
    producer.close().await;
    cleanup(&queue).await?;
    Ok(())
}

/// A private `redis-server` on a free loopback port, stopped on drop.
struct PrivateRedis {
    port: u16,
    child: tokio::process::Child,
}

impl PrivateRedis {
    async fn start(port: u16) -> Result<Self> {
        let child = tokio::process::Command::new("redis-server")
            .args([
                "--port",
                &port.to_string(),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
            ])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .context("redis-server")?;
        let server = Self { port, child };
        eventually("private redis to answer", WAIT, || async move {
            redis_cli(port, &["ping"])
                .await
                .map(|out| out.trim() == "PONG")
                .unwrap_or(false)
        })
        .await?;
        Ok(server)
    }

    async fn stop(mut self) -> Result<()> {
        let _ = redis_cli(self.port, &["shutdown", "nosave"]).await;
        tokio::time::timeout(WAIT, self.child.wait()).await??;
        Ok(())
    }

    fn connection(&self) -> ConnectionConfig {
        ConnectionConfig::from_url(&format!("redis://127.0.0.1:{}", self.port)).expect("url")
    }
}

async fn redis_cli(port: u16, args: &[&str]) -> Result<String> {
    let out = tokio::process::Command::new("redis-cli")
        .arg("-p")
        .arg(port.to_string())
        .args(args)
        .output()
        .await?;
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// A loopback port nobody listens on (6390 + random, checked by binding it).
fn free_port() -> Result<u16> {
    // Tests of this file run in parallel: a counter keeps them off each other's ports.
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    let base = 6_390 + (now_ms() % 2_000) as usize + (std::process::id() % 100) as usize;
    for _ in 0..50 {
        let port = u16::try_from(base + 7 * NEXT.fetch_add(1, Ordering::Relaxed))?;
        if std::net::TcpListener::bind(("127.0.0.1", port)).is_ok() {
            return Ok(port);
        }
    }
    bail!("no free port found")
}

#[tokio::test]
async fn redis_restart_while_blocked_delivers_every_later_event_once() -> Result<()> {
    if std::process::Command::new("redis-server")
        .arg("--version")
        .output()
        .is_err()
    {
        eprintln!("SKIPPING: redis-server is not on PATH");
        return Ok(());
    }
    let port = free_port()?;
    let redis = PrivateRedis::start(port).await?;
    let connection = redis.connection();
    let queue = unique_queue("qe-restart");
    let options = QueueEventsOptions::new(&queue, connection.clone())
        .block_timeout(Duration::from_millis(500));
    let events = QueueEventsHandle::start(options).await?;
    let mut rx = events.subscribe_stream();
    eventually("`$` pinned", WAIT, || {
        let id = events.last_event_id();
        async move { id != "$" }
    })
    .await?;
    let producer = QueueEventsProducer::connect(&queue, &connection, None).await?;
    let before = publish_ticks(&producer, 0, 3).await?;
    assert_eq!(ids(&recv_n(&mut rx, 3, WAIT).await?), before);

    redis.stop().await?;
    let redis = PrivateRedis::start(port).await?;
    // The producer's client reconnects by itself; publish once it is back.
    let mut after = Vec::new();
    let deadline = tokio::time::Instant::now() + WAIT;
    for n in 3..6 {
        loop {
            match producer
                .publish_event("tick", [("n", n.to_string())], 1_000)
                .await
            {
                Ok(id) => break after.push(id),
                Err(error) if tokio::time::Instant::now() > deadline => return Err(error.into()),
                Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
            }
        }
    }
    let got = recv_n(&mut rx, 3, WAIT).await?;
    assert_eq!(ids(&got), after);
    assert_eq!(
        got.iter().map(|e| tick_n(e)).collect::<Vec<_>>(),
        vec![Some(3), Some(4), Some(5)]
    );
    assert!(
        tokio::time::timeout(Duration::from_millis(1_500), rx.recv())
            .await
            .is_err()
    );

    events.close().await;
    producer.close().await;
    redis.stop().await?;
    Ok(())
}

#[tokio::test]
async fn close_interrupts_a_blocked_read() -> Result<()> {
    let queue = unique_queue("qe-close");
    let options = options(&queue, "$").block_timeout(Duration::from_secs(60));
    let events = QueueEventsHandle::start(options).await?;
    let mut rx = events.subscribe_stream();
    let keys = QueueKeys::new(PREFIX, queue.clone());
    let conn_name = bullmq_redis::events::queue_events_client_name(&keys);
    eventually("reader blocked in XREAD", WAIT, || {
        let conn_name = conn_name.clone();
        async move { blocked_client_named(&conn_name).await.unwrap_or(false) }
    })
    .await?;
    // Far less than the 60 s block: close must not wait for the XREAD to time out.
    tokio::time::timeout(Duration::from_secs(10), events.close())
        .await
        .context("close() waited for the blocked read")?;
    assert!(rx.recv().await.is_none());
    eventually("the :qe connection to be gone", WAIT, || {
        let conn_name = conn_name.clone();
        async move { !client_named(&conn_name).await.unwrap_or(true) }
    })
    .await?;
    cleanup(&queue).await?;
    Ok(())
}

async fn client_list(client: &fred::prelude::Client) -> Result<String> {
    Ok(client
        .custom(
            CustomCommand::new_static("CLIENT", ClusterHash::Random, false),
            vec!["LIST".to_owned()],
        )
        .await?)
}

async fn client_line(name: &str) -> Result<Option<String>> {
    let client = raw_client().await?;
    let list = client_list(&client).await?;
    client.quit().await?;
    Ok(list
        .lines()
        .find(|line| line.split(' ').any(|kv| kv == format!("name={name}")))
        .map(str::to_owned))
}

async fn client_named(name: &str) -> Result<bool> {
    Ok(client_line(name).await?.is_some())
}

async fn blocked_client_named(name: &str) -> Result<bool> {
    Ok(client_line(name)
        .await?
        .is_some_and(|line| line.contains("cmd=xread") && line.contains("flags=b")))
}

// ---------------------------------------------------------------------------------------------
// Crash and restart under a supervisor
// ---------------------------------------------------------------------------------------------

/// Fails on the first `tick` with n = 5 it sees (once), counts inits and handled events.
struct FailOnce {
    failed: Arc<AtomicBool>,
    inits: Arc<AtomicUsize>,
    handled: mpsc::UnboundedSender<String>,
}

impl QueueEventsHandler for FailOnce {
    type State = ();

    async fn init(&mut self) -> anyhow::Result<()> {
        self.inits.fetch_add(1, Ordering::SeqCst);
        Ok(())
    }

    async fn handle_event(&mut self, event: StreamEvent, _: ()) -> anyhow::Result<()> {
        let _ = self.handled.send(event.id.clone());
        if tick_n(&event) == Some(5) && !self.failed.swap(true, Ordering::SeqCst) {
            bail!("failing on tick 5 on purpose");
        }
        Ok(())
    }
}

#[tokio::test]
async fn crash_under_a_supervisor_resumes_from_the_last_delivered_id() -> Result<()> {
    let queue = unique_queue("qe-crash");
    let producer = producer(&queue).await?;
    let failed = Arc::new(AtomicBool::new(false));
    let inits = Arc::new(AtomicUsize::new(0));
    let (handled_tx, mut handled) = mpsc::unbounded_channel();
    let handler = FailOnce {
        failed: failed.clone(),
        inits: inits.clone(),
        handled: handled_tx,
    };
    let args = QueueEventsArgs::with_handler(options(&queue, "0").autorun(false), handler)?;
    let runtime = Runtime::start(RuntimeOptions::default()).await?;
    let mut tree_events = runtime.subscribe();
    let events = QueueEventsHandle::start_supervised(&runtime, "qe-crash", args).await?;
    let mut rx = events.subscribe_stream();
    let first_actor = events.actor().context("started")?.get_id();
    events.run().await?;

    let published = publish_ticks(&producer, 0, 10).await?;
    let got = recv_n(&mut rx, 10, WAIT).await?;
    assert_eq!(
        ids(&got),
        published,
        "subscribers: every event once, in order"
    );
    let restarted = events.actor().context("restarted")?.get_id();
    assert_ne!(restarted, first_actor, "a new actor serves the same handle");
    let restart = tokio::time::timeout(WAIT, async {
        loop {
            match tree_events.recv().await {
                Ok(RuntimeEvent::ChildRestarted { child, reason, .. }) if child == "qe-crash" => {
                    break Ok(reason);
                }
                Ok(_) => continue,
                Err(error) => break Err(error),
            }
        }
    })
    .await??;
    assert!(restart.contains("failing on tick 5"), "{restart}");
    assert_eq!(
        inits.load(Ordering::SeqCst),
        2,
        "init again after the restart"
    );
    // The handler saw tick 5 twice (it failed on it the first time), the others once.
    let mut seen = Vec::new();
    while seen.len() < 11 {
        seen.push(
            tokio::time::timeout(WAIT, handled.recv())
                .await?
                .context("handler")?,
        );
    }
    let mut expected = published[..6].to_vec();
    expected.extend(published[5..].iter().cloned());
    assert_eq!(seen, expected);

    // Still alive and reading after the restart (autorun was false: `run` carried over).
    let more = publish_ticks(&producer, 10, 2).await?;
    assert_eq!(ids(&recv_n(&mut rx, 2, WAIT).await?), more);

    events.close().await;
    // Closed is a normal exit: the Transient child is not restarted.
    eventually("child removed after close", WAIT, || {
        let runtime = runtime.clone();
        async move {
            match runtime.queue_events_supervisor() {
                Ok(sup) => sup
                    .which_children()
                    .await
                    .map(|c| c.is_empty())
                    .unwrap_or(false),
                Err(_) => false,
            }
        }
    })
    .await?;
    assert!(events.actor().is_none());
    runtime.shutdown(Duration::from_secs(10)).await?;
    producer.close().await;
    cleanup(&queue).await?;
    Ok(())
}

#[tokio::test]
async fn unreachable_redis_fails_the_start() -> Result<()> {
    // Nothing listens on this port: the start says so, as Queue::new and a Worker's start do,
    // instead of a reader retrying in silence.
    let port = free_port()?;
    let connection = ConnectionConfig::from_url(&format!("redis://127.0.0.1:{port}"))?;
    let queue = unique_queue("qe-unreachable");
    let started = tokio::time::timeout(
        Duration::from_secs(20),
        QueueEventsHandle::start(QueueEventsOptions::new(&queue, connection)),
    )
    .await
    .context("start hung while Redis was unreachable")?;
    match started {
        Err(ractor_bullmq::QueueEventsError::Redis(bullmq_redis::RedisError::Connect {
            ..
        })) => {}
        other => bail!("expected a connect error, got {other:?}"),
    }
    Ok(())
}

#[tokio::test]
async fn redis_gone_while_running_is_retried_and_close_still_returns() -> Result<()> {
    // The server disappears under a running reader: it retries with backoff, the actor stays
    // up, and close() still returns.
    let mut redis = test_redis::TestRedis::start().await?;
    let connection = ConnectionConfig::from_url(&redis.url())?;
    let queue = unique_queue("qe-gone");
    let events = QueueEventsHandle::start(QueueEventsOptions::new(&queue, connection)).await?;
    let mut rx = events.subscribe_stream();
    redis.stop().await?;
    assert!(
        tokio::time::timeout(Duration::from_millis(800), rx.recv())
            .await
            .is_err(),
        "nothing to receive, and the subscription is still open"
    );
    assert!(
        events.actor().is_some(),
        "an outage does not stop the actor"
    );
    tokio::time::timeout(Duration::from_secs(10), events.close())
        .await
        .context("close() hung while Redis was unreachable")?;
    assert!(rx.recv().await.is_none());
    Ok(())
}
