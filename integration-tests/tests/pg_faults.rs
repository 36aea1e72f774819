//! Faults on PostgreSQL: the Worker's LISTEN session terminated by the server, the server
//! restarted under load, a Node worker killed with SIGKILL mid-job, and `close` with the server
//! stopped. Nothing is lost, nothing completes twice, workers resume by themselves. The tests
//! that stop the server run their own (`common::pg_server`); the others use `PG_URL`.

mod common;
mod worker_common;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{bail, Result};
use bullmq_postgres::{PgConfig, PostgresBackend};
use common::pg::*;
use common::pg_server::PgServer;
use ractor_bullmq::protocol::JobOptions;
use ractor_bullmq::worker::{Job, JobContext};
use ractor_bullmq::{Queue, QueueOptions, Worker, WorkerArgs, WorkerOptions};
use serde_json::{json, Value as Json};

async fn open(url: &str, schema: &str) -> Result<Arc<PostgresBackend>> {
    let config = PgConfig::from_url(url)?
        .with_schema(schema)?
        .with_connect_timeout(Duration::from_secs(3));
    Ok(Arc::new(PostgresBackend::open(config).await?))
}

fn psql_at(url: &str, sql: &str) -> Result<String> {
    let out = std::process::Command::new("psql")
        .args(["-X", "-q", "-A", "-t", "-d", url, "-c", sql])
        .output()?;
    if !out.status.success() {
        bail!("psql {sql}: {}", String::from_utf8_lossy(&out.stderr));
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
}

async fn eventually_at(url: &str, sql: &str, want: &str, timeout: Duration) -> Result<()> {
    let start = Instant::now();
    loop {
        let got = psql_at(url, sql).unwrap_or_default();
        if got == want {
            return Ok(());
        }
        if start.elapsed() > timeout {
            bail!("`{sql}` gave `{got}` after {timeout:?}, expected `{want}`");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Counts how often each job id ran, and completes it.
fn counting(
    runs: Arc<Mutex<HashMap<String, u32>>>,
    sleep: Duration,
) -> impl ractor_bullmq::worker::Processor {
    move |job: Job, _ctx: JobContext| {
        let runs = runs.clone();
        async move {
            *runs
                .lock()
                .unwrap()
                .entry(job.id().to_string())
                .or_default() += 1;
            tokio::time::sleep(sleep).await;
            Ok::<Json, anyhow::Error>(json!({"ok": true}))
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_terminated_listen_session_comes_back_and_the_worker_takes_new_jobs() -> Result<()> {
    if !pg_and_node_available() {
        return Ok(());
    }
    let schema = FreshSchema::migrated_by_node().await?;
    let name = common::unique_queue("pg-terminate");
    let backend = open(&pg_url(), &schema.name).await?;
    let args = WorkerArgs::open(
        backend.as_ref(),
        &name,
        worker_common::scripted,
        WorkerOptions::new()
            .name("faulty")
            .drain_delay(Duration::from_secs(30)),
    )
    .await?;
    let worker = Worker::spawn(args).await?;
    let session =
        format!("SELECT count(*) FROM pg_stat_activity WHERE application_name = '{name}:w:faulty'");
    eventually_at(&pg_url(), &session, "1", Duration::from_secs(10)).await?;
    let pid = psql_at(
        &pg_url(),
        &format!("SELECT pid FROM pg_stat_activity WHERE application_name = '{name}:w:faulty'"),
    )?;
    psql_at(&pg_url(), &format!("SELECT pg_terminate_backend({pid})"))?;
    // A job added while the session is down is still taken: the reconnect re-checks for
    // work (the drain delay of 30 s would otherwise be the wait).
    let queue = Queue::with_backend(&name, backend.as_ref(), QueueOptions::default()).await?;
    let job = queue.add("after", json!({})).await?;
    eventually_at(
        &pg_url(),
        &format!(
            "SELECT state FROM \"{}\".job WHERE queue = '{name}' AND id = '{}'",
            schema.name,
            job.id()
        ),
        "completed",
        Duration::from_secs(15),
    )
    .await?;
    // The session is back under the same name, a new backend process.
    eventually_at(&pg_url(), &session, "1", Duration::from_secs(10)).await?;
    let new_pid = psql_at(
        &pg_url(),
        &format!("SELECT pid FROM pg_stat_activity WHERE application_name = '{name}:w:faulty'"),
    )?;
    assert_ne!(pid, new_pid);
    // And it is woken by a NOTIFY again, not by the drain delay.
    let started = Instant::now();
    let second = queue.add("second", json!({})).await?;
    eventually_at(
        &pg_url(),
        &format!(
            "SELECT state FROM \"{}\".job WHERE queue = '{name}' AND id = '{}'",
            schema.name,
            second.id()
        ),
        "completed",
        Duration::from_secs(15),
    )
    .await?;
    assert!(started.elapsed() < Duration::from_secs(15));
    worker.close().await?;
    queue.close().await?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restart_under_load_loses_nothing_and_completes_nothing_twice() -> Result<()> {
    if !common::node_available() {
        return Ok(());
    }
    let Some(server) = PgServer::start()? else {
        return Ok(());
    };
    let url = server.url();
    common::run_node("pg_migrate.js", &json!({"url": url, "schemas": ["bullmq"]})).await?;
    let name = common::unique_queue("pg-restart");
    let backend = open(&url, "bullmq").await?;
    let runs = Arc::new(Mutex::new(HashMap::new()));
    let args = WorkerArgs::open(
        backend.as_ref(),
        &name,
        counting(runs.clone(), Duration::from_millis(5)),
        WorkerOptions::new()
            .concurrency(8)
            .stalled_interval(Duration::from_secs(2))
            .lock_duration(Duration::from_secs(4)),
    )
    .await?;
    let worker = Worker::spawn(args).await?;
    let queue = Queue::with_backend(&name, backend.as_ref(), QueueOptions::default()).await?;

    // Adds keep coming through the restart; an add that fails is retried, so every job the
    // producer was told about must complete exactly once.
    let server = Arc::new(server);
    let mut added = Vec::new();
    let mut failed_adds = 0;
    let mut restart = None;
    while added.len() < 300 {
        match queue.add("load", json!({"n": added.len()})).await {
            Ok(job) => added.push(job.id().to_string()),
            Err(_) => {
                failed_adds += 1;
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
        if added.len() == 100 && restart.is_none() {
            // In the background: adds and the Worker keep going while the server restarts.
            let server = server.clone();
            restart = Some(std::thread::spawn(move || server.restart()));
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    restart
        .expect("restarted")
        .join()
        .expect("restart thread")?;
    let total = added.len();
    // An add whose reply was lost in the restart may still have committed: such a job is
    // extra, never missing. Every job we were told about completes.
    let ids = added
        .iter()
        .map(|id| format!("'{id}'"))
        .collect::<Vec<_>>()
        .join(",");
    eventually_at(
        &url,
        &format!(
            "SELECT count(*) FROM bullmq.job WHERE queue = '{name}' AND state = 'completed' \
               AND id IN ({ids})"
        ),
        &total.to_string(),
        Duration::from_secs(90),
    )
    .await?;
    eventually_at(
        &url,
        &format!("SELECT count(*) FROM bullmq.job WHERE queue = '{name}' AND state <> 'completed'"),
        "0",
        Duration::from_secs(30),
    )
    .await?;
    let completions = psql_at(
        &url,
        &format!(
            "SELECT count(*) = count(DISTINCT data->>'jobId') FROM bullmq.event \
              WHERE queue = '{name}' AND event = 'completed'"
        ),
    )?;
    assert_eq!(completions, "t", "one completion per job");
    let runs = runs.lock().unwrap().clone();
    assert!(runs.len() >= total, "every job ran");
    let rerun: Vec<_> = runs.iter().filter(|(_, n)| **n > 1).collect();
    eprintln!(
        "restart: {failed_adds} adds retried, {} jobs ran twice (stalled and recovered)",
        rerun.len()
    );
    assert!(failed_adds > 0, "some adds met the restart");
    worker.close().await?;
    queue.close().await?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_worker_killed_mid_job_is_recovered_by_ours() -> Result<()> {
    if !pg_and_node_available() {
        return Ok(());
    }
    let schema = FreshSchema::migrated_by_node().await?;
    let name = common::unique_queue("pg-kill9");
    let backend = open(&pg_url(), &schema.name).await?;
    let queue = Queue::with_backend(&name, backend.as_ref(), QueueOptions::default()).await?;
    let job = queue.add("slow", json!({"sleepMs": 60_000})).await?;
    // Node takes it, then dies without a word.
    let arg = pg_args(
        &schema.name,
        &json!({"queue": name, "lockDuration": 2000, "timeoutMs": 60_000}),
    );
    let mut node = tokio::process::Command::new("node")
        .arg("run_worker.js")
        .arg(arg.to_string())
        .current_dir(common::node_dir())
        .kill_on_drop(true)
        .spawn()?;
    let active = format!(
        "SELECT state FROM \"{}\".job WHERE queue = '{name}' AND id = '{}'",
        schema.name,
        job.id()
    );
    eventually_at(&pg_url(), &active, "active", Duration::from_secs(20)).await?;
    node.kill().await?;

    // Our Worker's stalled check takes it back (mark, then sweep) and runs it.
    let args = WorkerArgs::open(
        backend.as_ref(),
        &name,
        |_job: Job, _ctx: JobContext| async move { Ok::<Json, anyhow::Error>(json!("recovered")) },
        WorkerOptions::new().stalled_interval(Duration::from_secs(1)),
    )
    .await?;
    let stalled = Arc::new(Mutex::new(Vec::new()));
    let seen = stalled.clone();
    let worker = Worker::spawn(
        args.callbacks(
            ractor_bullmq::WorkerCallbacks::default()
                .on_stalled(move |id| seen.lock().unwrap().push(id.to_string())),
        ),
    )
    .await?;
    eventually_at(
        &pg_url(),
        &active.replace("state", "state::text"),
        "completed",
        Duration::from_secs(20),
    )
    .await?;
    let record = queue.get_job(job.id()).await?.expect("kept");
    assert_eq!(record.returnvalue(), Some(&json!("recovered")));
    assert_eq!(record.stalled_counter(), 1);
    assert_eq!(stalled.lock().unwrap().as_slice(), [job.id().to_string()]);
    worker.close().await?;
    queue.close().await?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn close_returns_within_its_bound_with_the_server_stopped() -> Result<()> {
    if !common::node_available() {
        return Ok(());
    }
    let Some(server) = PgServer::start()? else {
        return Ok(());
    };
    let url = server.url();
    common::run_node("pg_migrate.js", &json!({"url": url, "schemas": ["bullmq"]})).await?;
    let name = common::unique_queue("pg-close");
    let backend = open(&url, "bullmq").await?;
    let queue = Queue::with_backend(&name, backend.as_ref(), QueueOptions::default()).await?;
    queue
        .add_bulk((0..20).map(|i| ("j", json!({"sleepMs": 50, "i": i}), JobOptions::default())))
        .await?;
    let args = WorkerArgs::open(
        backend.as_ref(),
        &name,
        worker_common::scripted,
        WorkerOptions::new().concurrency(2),
    )
    .await?;
    let worker = Worker::spawn(args).await?;
    tokio::time::sleep(Duration::from_millis(300)).await;
    server.stop()?;
    let started = Instant::now();
    let closed = tokio::time::timeout(Duration::from_secs(45), worker.close()).await;
    assert!(closed.is_ok(), "close returned within 45 s");
    eprintln!("close with the server stopped took {:?}", started.elapsed());
    Ok(())
}
