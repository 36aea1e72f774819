//! A throwaway `redis-server` for `bullmq demo` when no Redis answers.
//!
//! It listens on a free loopback port, persists nothing (`--save "" --appendonly no`) and
//! keeps its files in a fresh temporary directory. The [`LocalRedis`] guard owns the process:
//! dropping it (normal exit, an error path, Ctrl-C unwinding the demo) kills the server and
//! removes the directory.

use std::net::{Ipv4Addr, TcpListener};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context as _, Result};
use bullmq_redis::fred::prelude::ClientLike;
use ractor_bullmq::ConnectionConfig;

/// How long a started server may take to answer `PING`.
const START_TIMEOUT: Duration = Duration::from_secs(10);

/// Whether a Redis at `url` answers `PING` within `timeout`.
pub(crate) async fn answers(url: &str, timeout: Duration) -> bool {
    let Ok(mut config) = ConnectionConfig::from_url(url) else {
        return false;
    };
    config.connect_timeout = timeout;
    let probe = async {
        let client = config.connect(None).await.ok()?;
        let pong: Option<String> = client.ping(None).await.ok();
        let _ = client.quit().await;
        pong
    };
    matches!(tokio::time::timeout(timeout, probe).await, Ok(Some(_)))
}

/// A running `redis-server` child; killed when dropped.
#[derive(Debug)]
pub(crate) struct LocalRedis {
    child: Child,
    dir: PathBuf,
    url: String,
}

impl LocalRedis {
    /// Starts `binary` (normally `redis-server` from `PATH`) on a free loopback port and waits
    /// until it answers.
    ///
    /// # Errors
    ///
    /// A clear message when the binary does not exist, or when the server exits or does not
    /// answer in time (with the end of its log).
    pub(crate) async fn start(binary: &str) -> Result<Self> {
        let port = free_port()?;
        let dir =
            std::env::temp_dir().join(format!("bullmq-demo-redis-{}-{port}", std::process::id()));
        std::fs::create_dir_all(&dir)
            .with_context(|| format!("cannot create {}", dir.display()))?;
        let log = dir.join("redis.log");
        let spawned = Command::new(binary)
            .args(["--port", &port.to_string()])
            .args(["--bind", "127.0.0.1"])
            .args(["--save", ""])
            .args(["--appendonly", "no"])
            .args(["--daemonize", "no"])
            .arg("--dir")
            .arg(&dir)
            .arg("--logfile")
            .arg(&log)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn();
        let child = match spawned {
            Ok(child) => child,
            Err(error) => {
                let _ = std::fs::remove_dir_all(&dir);
                if error.kind() == std::io::ErrorKind::NotFound {
                    bail!(
                        "no Redis answers and `{binary}` was not found to start one: install \
                         Redis (e.g. `apt-get install redis-server` or `brew install redis`), \
                         or point --url (or --redis-url, REDIS_URL) at a running Redis"
                    );
                }
                return Err(error).with_context(|| format!("cannot start `{binary}`"));
            }
        };
        // From here on the guard owns the process: any early return kills it.
        let mut redis = Self {
            child,
            dir,
            url: format!("redis://127.0.0.1:{port}"),
        };
        redis.wait_ready(&log).await?;
        Ok(redis)
    }

    /// The URL of the server.
    pub(crate) fn url(&self) -> &str {
        &self.url
    }

    /// The server's process id.
    pub(crate) fn pid(&self) -> u32 {
        self.child.id()
    }

    async fn wait_ready(&mut self, log: &Path) -> Result<()> {
        let deadline = Instant::now() + START_TIMEOUT;
        loop {
            if let Some(status) = self.child.try_wait()? {
                bail!(
                    "redis-server exited at start ({status}):\n{}",
                    log_tail(log)
                );
            }
            if answers(&self.url, Duration::from_millis(500)).await {
                return Ok(());
            }
            if Instant::now() >= deadline {
                bail!(
                    "redis-server did not answer within {START_TIMEOUT:?}:\n{}",
                    log_tail(log)
                );
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

impl Drop for LocalRedis {
    fn drop(&mut self) {
        // SIGKILL is enough: it persists nothing, and its directory goes away with it.
        if let Err(error) = self.child.kill() {
            tracing::debug!(%error, "redis-server already gone");
        }
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A loopback port nobody listens on right now.
fn free_port() -> Result<u16> {
    let listener =
        TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).context("cannot find a free loopback port")?;
    Ok(listener.local_addr()?.port())
}

/// The last lines of the server's log, for error messages.
fn log_tail(log: &Path) -> String {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(10)..].join("\n")
}
