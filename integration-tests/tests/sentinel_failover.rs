//! Failover behind Sentinel while everything runs: one primary, one replica and three
//! Sentinels (quorum 2); a producer (our `Queue`) adding jobs continuously, our `Worker` and a
//! `QueueEvents` reader, all connected through the Sentinels. Then, mid-run:
//!
//! * (a) `SENTINEL FAILOVER mymaster`, the operator's switch, done as the production guide
//!   says: writes paused on the old primary (`CLIENT PAUSE WRITE`) so that nothing it accepts
//!   is lost when it turns into a replica. Every job is completed exactly once.
//! * (b) the primary `SIGKILL`ed: the Sentinels promote the replica. The producer stops
//!   between two adds until the replica has them all (an add that never reached the replica
//!   would die with the primary: asynchronous replication), the Worker and the reader keep
//!   going through the kill. Jobs active at the kill may run again (stalled recovery,
//!   at-least-once) but none is lost.
//!
//! A switch without the pause is not tested lossless because it is not: the old primary keeps
//! accepting writes until it notices its replica left, and even `min-replicas-to-write 1` only
//! narrows that window (a CI run lost one job that way; see the production guide).
//!
//! In both, the three clients find the new primary by themselves, and the reader neither
//! repeats nor skips an event of the new primary's stream (its position survives).
//!
//! Ports 7100-7104 for (a), 7110-7114 for (b). Every process is killed by its PID when the
//! deployment drops, also on failure. Skipped with a message without `redis-server`.

mod common;
mod sentinel_deployment;
mod worker_common;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{bail, ensure, Context as _, Result};
use common::eventually;
use ractor_bullmq::protocol::events::Event;
use ractor_bullmq::protocol::keys::{QueueKey, QueueKeys};
use ractor_bullmq::protocol::options::JobOptions;
use ractor_bullmq::{
    ConnectionConfig, Queue, QueueEventsHandle, QueueEventsOptions, QueueOptions, Worker,
    WorkerArgs, WorkerCallbacks, WorkerOptions,
};
use sentinel_deployment::{cli, DeploymentSpec, SentinelDeployment};
use serde_json::json;

const JOBS: usize = 300;
const CONCURRENCY: usize = 4;

#[derive(Clone, Copy, PartialEq)]
enum Disruption {
    /// `SENTINEL FAILOVER` with writes paused on the old primary.
    ManualFailover,
    /// `SIGKILL` of the primary.
    KillPrimary,
}

fn spec(base: u16) -> DeploymentSpec {
    DeploymentSpec {
        data_ports: vec![base, base + 1],
        sentinel_ports: vec![base + 2, base + 3, base + 4],
        quorum: 2,
        sentinel_password: None,
        down_after: Duration::from_millis(1_000),
        failover_timeout: Duration::from_millis(5_000),
    }
}

/// Lets the test stop the producer between two adds: `held` asks, `parked` answers that no
/// add is in flight.
#[derive(Default)]
struct Hold {
    held: AtomicBool,
    parked: AtomicBool,
}

/// Adds `JOBS` jobs with the ids `job-0`.. one after the other; an add that fails (the primary
/// is switching) is retried with the same id, which makes the retry harmless if the first
/// attempt did reach Redis. Waits between two adds while `hold` is held. Returns the ids added.
async fn produce(queue: Queue, hold: Arc<Hold>) -> Result<BTreeSet<String>> {
    let mut added = BTreeSet::new();
    for i in 0..JOBS {
        while hold.held.load(Ordering::SeqCst) {
            hold.parked.store(true, Ordering::SeqCst);
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        hold.parked.store(false, Ordering::SeqCst);
        let id = format!("job-{i}");
        let deadline = tokio::time::Instant::now() + Duration::from_secs(90);
        loop {
            let outcome = queue
                .add_job(
                    "job",
                    json!({"sleepMs": 20, "returnValue": i}),
                    JobOptions::new().job_id(id.clone()),
                )
                .await;
            match outcome {
                Ok(job) => {
                    ensure!(job.id() == id, "added as {}", job.id());
                    break;
                }
                Err(error) if tokio::time::Instant::now() < deadline => {
                    tracing::debug!(%error, "add failed, retrying");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
                Err(error) => return Err(error).context("adding across the failover"),
            }
        }
        added.insert(id);
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    Ok(added)
}

async fn scenario(base: u16, disruption: Disruption) -> Result<()> {
    // `RUST_LOG=fred=debug,ractor_bullmq=debug` shows the clients finding the new primary.
    let _ = tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_test_writer()
        .try_init();
    let mut deployment = SentinelDeployment::start(spec(base)).await?;
    let old_primary = deployment.primary_port().await?;
    ensure!(
        old_primary == base,
        "the first server starts as the primary"
    );
    let mut config = ConnectionConfig::from_url(&deployment.url(0))?;
    config.connect_timeout = Duration::from_secs(5);
    let queue_name = common::unique_queue("failover");

    let completions = Arc::new(Mutex::new(BTreeMap::<String, usize>::new()));
    let completed_total = Arc::new(AtomicUsize::new(0));
    let worker_errors = Arc::new(Mutex::new(Vec::<String>::new()));
    let callbacks = WorkerCallbacks::new()
        .on_error({
            let errors = worker_errors.clone();
            move |error| errors.lock().expect("errors").push(error.to_string())
        })
        .on_completed({
            let (completions, total) = (completions.clone(), completed_total.clone());
            move |job, _| {
                *completions
                    .lock()
                    .expect("completions")
                    .entry(job.id().to_string())
                    .or_default() += 1;
                total.fetch_add(1, Ordering::SeqCst);
            }
        });
    let options = WorkerOptions::new()
        .concurrency(CONCURRENCY)
        .lock_duration(Duration::from_secs(5))
        .stalled_interval(Duration::from_secs(2));
    let worker = Worker::spawn(
        WorkerArgs::connect(&config, &queue_name, worker_common::scripted, options)
            .await?
            .callbacks(callbacks),
    )
    .await?;

    let events = QueueEventsHandle::start(
        QueueEventsOptions::new(&queue_name, config.clone())
            .last_event_id("0")
            .block_timeout(Duration::from_millis(500)),
    )
    .await?;
    let mut stream = events.subscribe_stream();
    let received = Arc::new(Mutex::new(Vec::<(String, Event)>::new()));
    let collector = tokio::spawn({
        let received = received.clone();
        async move {
            while let Some(event) = stream.recv().await {
                received
                    .lock()
                    .expect("received")
                    .push((event.id.clone(), event.event.clone()));
            }
        }
    });

    let queue = Queue::new(&queue_name, QueueOptions::new(config.clone())).await?;
    let hold = Arc::new(Hold::default());
    let producer = tokio::spawn(produce(queue.clone(), hold.clone()));

    // Mid-run: a third of the jobs done, the producer still adding.
    eventually(
        "a third of the jobs completed",
        Duration::from_secs(60),
        || {
            let total = completed_total.clone();
            async move { total.load(Ordering::SeqCst) >= JOBS / 3 }
        },
    )
    .await?;
    let before = completed_total.load(Ordering::SeqCst);
    ensure!(before < JOBS, "the disruption comes mid-run");
    match disruption {
        Disruption::ManualFailover => {
            // Held, not refused: the clients' writes wait on the old primary until the
            // Sentinels name the new one; then every client moves there (the primary watch)
            // and the held commands are sent again on the new connection.
            cli(old_primary, None, &["CLIENT", "PAUSE", "5000", "WRITE"]).await?;
            let reply = deployment
                .sentinel_command(&["SENTINEL", "FAILOVER", sentinel_deployment::SERVICE])
                .await?;
            ensure!(reply.trim() == "OK", "SENTINEL FAILOVER: {reply}");
        }
        Disruption::KillPrimary => {
            // Replication is asynchronous: an add the replica never got dies with the primary
            // (acknowledged or not; Redis makes no promise there). The adds are what may not be
            // lost, so the producer stops between two adds until the replica has everything
            // written so far; the Worker and the reader go on, and one of the Worker's writes
            // lost only runs a job again (stalled recovery).
            hold.held.store(true, Ordering::SeqCst);
            eventually(
                "the producer stops between two adds",
                Duration::from_secs(60),
                || {
                    let (hold, finished) = (hold.clone(), producer.is_finished());
                    async move { finished || hold.parked.load(Ordering::SeqCst) }
                },
            )
            .await?;
            let written = primary_offset(old_primary).await?;
            eventually(
                "the replica has every add",
                Duration::from_secs(30),
                || async move { replica_reached(old_primary, written).await },
            )
            .await?;
            deployment.kill_data(old_primary).await?;
            hold.held.store(false, Ordering::SeqCst);
        }
    }
    let new_primary = deployment
        .wait_for_new_primary(old_primary, Duration::from_secs(60))
        .await?;
    if disruption == Disruption::ManualFailover {
        eventually(
            "the old primary is a replica of the new one",
            Duration::from_secs(60),
            || async move {
                cli(old_primary, None, &["ROLE"])
                    .await
                    .is_ok_and(|role| role.starts_with("slave"))
            },
        )
        .await?;
        cli(old_primary, None, &["CLIENT", "UNPAUSE"]).await?;
    }

    // Everything resumes on the new primary by itself.
    let added = tokio::time::timeout(Duration::from_secs(180), producer)
        .await
        .context("the producer finishes")???;
    ensure!(added.len() == JOBS);
    let all_done = eventually(
        "every job completed after the failover",
        Duration::from_secs(180),
        || {
            let completions = completions.clone();
            async move { completions.lock().expect("completions").len() >= JOBS }
        },
    )
    .await;
    if let Err(error) = all_done {
        let done = completions.lock().expect("completions").len();
        let errors = worker_errors.lock().expect("errors").clone();
        let state = cli(
            new_primary,
            None,
            &["EVAL", "local p='bull:'..ARGV[1]..':' return {redis.call('llen',p..'wait'),               redis.call('llen',p..'active'),redis.call('zcard',p..'completed'),               redis.call('zcard',p..'failed'),redis.call('zcard',p..'delayed')}", "0",
              &queue_name],
        )
        .await
        .unwrap_or_default();
        // Where the first missing jobs are on the new primary: hash exists, lock exists, and
        // their place in wait / active / delayed / completed / failed.
        let missing: Vec<String> = {
            let completions = completions.lock().expect("completions");
            added
                .iter()
                .filter(|id| !completions.contains_key(*id))
                .take(5)
                .cloned()
                .collect()
        };
        let mut whereabouts = Vec::new();
        for id in &missing {
            let reply = cli(
                new_primary,
                None,
                &["EVAL", "local p='bull:'..ARGV[1]..':' local j=ARGV[2] \
                   return {redis.call('exists',p..j), redis.call('exists',p..j..':lock'), \
                   tostring(redis.call('lpos',p..'wait',j)), tostring(redis.call('lpos',p..'active',j)), \
                   tostring(redis.call('zscore',p..'delayed',j)), tostring(redis.call('zscore',p..'completed',j)), \
                   tostring(redis.call('zscore',p..'failed',j))}",
                  "0", &queue_name, id],
            )
            .await
            .unwrap_or_else(|e| e.to_string());
            whereabouts.push(format!("{id}: {}", reply.replace('\n', " ")));
        }
        bail!(
            "{error}: {done} of {JOBS} completed; wait/active/completed/failed/delayed on the \
             new primary: {state:?}; missing (hash, lock, wait, active, delayed, completed, \
             failed): {whereabouts:?}; {} worker errors, last: {:?}",
            errors.len(),
            errors.iter().rev().take(5).collect::<Vec<_>>()
        );
    }
    ensure!(
        completed_total.load(Ordering::SeqCst) > before,
        "the worker completed jobs after the failover"
    );
    let data = ConnectionConfig::from_url(&format!("redis://127.0.0.1:{new_primary}"))?;
    let keys = QueueKeys::new("bull", queue_name.clone());
    let last_entry = {
        let client = data.connect(None).await?;
        use fred::prelude::{ClientLike as _, StreamsInterface as _};
        let entries: Vec<(String, std::collections::HashMap<String, String>)> = client
            .xrevrange(keys.key(QueueKey::Events), "+", "-", Some(1))
            .await?;
        client.quit().await?;
        entries.into_iter().next().map(|(id, _)| id)
    };
    // The reader caught up with the new primary's stream.
    if let Some(last) = last_entry.clone() {
        eventually(
            "the reader reaches the end of the new primary's stream",
            Duration::from_secs(60),
            || {
                let (received, last) = (received.clone(), last.clone());
                async move {
                    received
                        .lock()
                        .expect("received")
                        .iter()
                        .any(|(id, _)| *id == last)
                }
            },
        )
        .await?;
    }
    let first_sentinel = base + 2;
    let sentinel_clients = cli(first_sentinel, None, &["CLIENT", "LIST"]).await?;
    ensure!(
        sentinel_clients.contains("get-master-addr-by-name"),
        "the primary watch asks the first Sentinel: {sentinel_clients}"
    );
    worker.close().await?;
    events.close().await;
    queue.close().await?;
    collector.abort();

    // With its last client closed, the primary watch closes its Sentinel connection too (the
    // one whose last command asked for the primary).
    eventually(
        "no connection of ours left on the Sentinel",
        Duration::from_secs(30),
        || async move {
            cli(first_sentinel, None, &["CLIENT", "LIST"])
                .await
                .is_ok_and(|list| !list.contains("get-master-addr-by-name"))
        },
    )
    .await?;

    // Counted by job id: none lost; exactly once unless the job was active at the kill.
    let completions = completions.lock().expect("completions").clone();
    let completed_ids: BTreeSet<String> = completions.keys().cloned().collect();
    ensure!(completed_ids == added, "completed ids are the added ids");
    let repeated: Vec<_> = completions.iter().filter(|(_, n)| **n > 1).collect();
    match disruption {
        Disruption::ManualFailover => {
            ensure!(repeated.is_empty(), "completed twice: {repeated:?}")
        }
        Disruption::KillPrimary => ensure!(
            repeated.len() <= 2 * CONCURRENCY,
            "more repeats than jobs that can be in flight at the kill: {repeated:?}"
        ),
    }

    // The new primary holds every job completed, nothing failed or left behind.
    let client = data.connect(None).await?;
    {
        use fred::prelude::{ClientLike as _, ListInterface as _, SortedSetsInterface as _};
        let completed: i64 = client.zcard(keys.key(QueueKey::Completed)).await?;
        let failed: i64 = client.zcard(keys.key(QueueKey::Failed)).await?;
        let waiting: i64 = client.llen(keys.key(QueueKey::Wait)).await?;
        let active: i64 = client.llen(keys.key(QueueKey::Active)).await?;
        ensure!(
            (completed, failed, waiting, active) == (JOBS as i64, 0, 0, 0),
            "completed/failed/wait/active on the new primary: {completed}/{failed}/{waiting}/{active}"
        );
        client.quit().await?;
    }

    // The reader's position survived: it never went back (ids strictly increase, nothing
    // twice), and every `completed` entry the new primary's stream holds reached it.
    let received = received.lock().expect("received").clone();
    for pair in received.windows(2) {
        if stream_id(&pair[0].0) >= stream_id(&pair[1].0) {
            bail!("the reader went back: {} then {}", pair[0].0, pair[1].0);
        }
    }
    let seen: BTreeSet<&str> = received.iter().map(|(id, _)| id.as_str()).collect();
    let client = data.connect(None).await?;
    {
        use fred::prelude::{ClientLike as _, StreamsInterface as _};
        let entries: Vec<(String, std::collections::HashMap<String, String>)> = client
            .xrange(keys.key(QueueKey::Events), "-", "+", None)
            .await?;
        let missed: Vec<&String> = entries
            .iter()
            .map(|(id, _)| id)
            .filter(|id| !seen.contains(id.as_str()))
            .collect();
        ensure!(missed.is_empty(), "events the reader never saw: {missed:?}");
        client.quit().await?;
    }
    let completed_events: BTreeSet<&str> = received
        .iter()
        .filter_map(|(_, event)| match event {
            Event::Completed { job_id, .. } => Some(job_id.as_str()),
            _ => None,
        })
        .collect();
    if disruption != Disruption::KillPrimary {
        ensure!(
            completed_events.len() == JOBS,
            "a completed event per job: {}",
            completed_events.len()
        );
    }
    drop(deployment);
    Ok(())
}

/// How far the primary on `port` has written its replication stream.
async fn primary_offset(port: u16) -> Result<u64> {
    let info = cli(port, None, &["INFO", "replication"]).await?;
    common::primary_repl_offset(&info).context("master_repl_offset in INFO replication")
}

/// Whether every replica of the primary on `port` has its stream up to `offset`.
async fn replica_reached(port: u16, offset: u64) -> bool {
    cli(port, None, &["INFO", "replication"])
        .await
        .is_ok_and(|info| common::replicas_reached(&info, offset))
}

/// `ms-seq` as a pair, for ordering stream ids.
fn stream_id(id: &str) -> (u64, u64) {
    let (ms, seq) = id.split_once('-').unwrap_or((id, "0"));
    (ms.parse().unwrap_or(0), seq.parse().unwrap_or(0))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_manual_failover_mid_run_loses_and_repeats_nothing() -> Result<()> {
    if !sentinel_deployment::available().await {
        eprintln!("SKIPPING a_manual_failover_mid_run_loses_and_repeats_nothing: no redis-server");
        return Ok(());
    }
    scenario(7100, Disruption::ManualFailover).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_primary_mid_run_loses_no_job() -> Result<()> {
    if !sentinel_deployment::available().await {
        eprintln!("SKIPPING a_killed_primary_mid_run_loses_no_job: no redis-server");
        return Ok(());
    }
    scenario(7110, Disruption::KillPrimary).await
}
