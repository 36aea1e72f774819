//! Redis restarted mid-run: the Worker's command and blocking connections reconnect by
//! themselves and every job still ends completed.
//!
//! Runs its own `redis-server` (AOF on, so the restart keeps the data) on a free loopback port;
//! skipped with a message when `redis-server` is not installed.

mod common;
mod worker_common;

use std::path::PathBuf;
use std::process::Stdio;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use common::eventually;
use fred::prelude::{ClientLike, SortedSetsInterface};
use ractor_bullmq::{
    ConnectionConfig, Queue, QueueOptions, Worker, WorkerArgs, WorkerCallbacks, WorkerOptions,
};
use serde_json::json;
use tokio::process::{Child, Command};

const JOBS: usize = 400;

struct TestRedis {
    port: u16,
    dir: PathBuf,
    child: Option<Child>,
}

impl TestRedis {
    async fn start(port: u16, dir: PathBuf) -> anyhow::Result<Self> {
        let mut redis = Self {
            port,
            dir,
            child: None,
        };
        redis.spawn().await?;
        Ok(redis)
    }

    async fn spawn(&mut self) -> anyhow::Result<()> {
        let child = Command::new("redis-server")
            .args([
                "--port",
                &self.port.to_string(),
                "--bind",
                "127.0.0.1",
                "--appendonly",
                "yes",
                "--appendfsync",
                "always",
                "--save",
                "",
                "--dir",
            ])
            .arg(&self.dir)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()?;
        self.child = Some(child);
        let port = self.port;
        eventually(
            "test redis answers",
            Duration::from_secs(10),
            move || async move {
                tokio::net::TcpStream::connect(("127.0.0.1", port))
                    .await
                    .is_ok()
            },
        )
        .await
    }

    /// `SHUTDOWN` (flushes the AOF) and waits for the process to exit.
    async fn stop(&mut self) -> anyhow::Result<()> {
        let _ = Command::new("redis-cli")
            .args(["-p", &self.port.to_string(), "shutdown"])
            .output()
            .await?;
        if let Some(mut child) = self.child.take() {
            child.wait().await?;
        }
        Ok(())
    }

    fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }
}

fn free_port() -> anyhow::Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn worker_survives_a_redis_restart() -> anyhow::Result<()> {
    if Command::new("redis-server")
        .arg("--version")
        .output()
        .await
        .is_err()
    {
        eprintln!("SKIPPING worker_survives_a_redis_restart: no redis-server binary");
        return Ok(());
    }
    let dir = std::env::temp_dir().join(format!("bullmq-restart-{}", common::unique_queue("r")));
    std::fs::create_dir_all(&dir)?;
    let mut redis = TestRedis::start(free_port()?, dir.clone()).await?;
    let config = ConnectionConfig::from_url(&redis.url())?;

    let queue_name = "restart";
    let queue = Queue::new(queue_name, QueueOptions::new(config.clone())).await?;
    let jobs = (0..JOBS).map(|i| {
        (
            "job",
            json!({"sleepMs": 10, "returnValue": i}),
            Default::default(),
        )
    });
    queue.add_bulk(jobs).await?;

    let errors = Arc::new(AtomicUsize::new(0));
    let callbacks = WorkerCallbacks::new().on_error({
        let errors = errors.clone();
        move |_| {
            errors.fetch_add(1, Ordering::SeqCst);
        }
    });
    let options = WorkerOptions::new()
        .concurrency(10)
        .lock_duration(Duration::from_secs(5))
        .stalled_interval(Duration::from_secs(2));
    let args = WorkerArgs::connect(&config, queue_name, worker_common::scripted, options)
        .await?
        .callbacks(callbacks);
    let worker = Worker::spawn(args).await?;

    let observer = ConnectionConfig::from_url(&redis.url())?;
    let completed = move || {
        let observer = observer.clone();
        async move {
            let Ok(client) = observer.connect(None).await else {
                return 0;
            };
            let n: i64 = client.zcard("bull:restart:completed").await.unwrap_or(0);
            let _ = client.quit().await;
            n
        }
    };
    eventually(
        "some jobs done before the restart",
        Duration::from_secs(30),
        || {
            let completed = completed.clone();
            async move { completed().await >= 50 }
        },
    )
    .await?;
    redis.stop().await?;
    let before = completed.clone();
    // Down for as long as it takes a fresh client to fail connecting, then back.
    assert_eq!(before().await, 0, "redis is down");
    redis.spawn().await?;

    eventually(
        "every job completed after the restart",
        Duration::from_secs(90),
        || {
            let completed = completed.clone();
            async move { completed().await >= JOBS as i64 }
        },
    )
    .await?;
    worker.close().await?;
    let client = ConnectionConfig::from_url(&redis.url())?
        .connect(None)
        .await?;
    let failed: i64 = client.zcard("bull:restart:failed").await?;
    assert_eq!(failed, 0);
    client.quit().await?;
    queue.close().await?;
    redis.stop().await?;
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}
