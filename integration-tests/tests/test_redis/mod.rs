//! A throw-away `redis-server` on a free loopback port, for tests that stop and restart the
//! server (an outage) without disturbing the shared Redis on 6379. Stopped by its PID (the
//! child handle), never by name.

#![allow(dead_code)]

use std::process::Stdio;
use std::time::Duration;

use tokio::process::{Child, Command};

/// A `redis-server` child process on `port` (no persistence: an outage test needs none).
pub struct TestRedis {
    port: u16,
    child: Option<Child>,
}

impl TestRedis {
    /// Whether `redis-server` is installed (tests skip with a message otherwise).
    pub async fn available() -> bool {
        Command::new("redis-server")
            .arg("--version")
            .output()
            .await
            .is_ok()
    }

    /// Starts a server on a free port and waits until it accepts connections.
    pub async fn start() -> anyhow::Result<Self> {
        let port = std::net::TcpListener::bind("127.0.0.1:0")?
            .local_addr()?
            .port();
        let mut redis = Self { port, child: None };
        redis.spawn().await?;
        Ok(redis)
    }

    /// Starts the server again on the same port (after [`TestRedis::stop`]).
    pub async fn spawn(&mut self) -> anyhow::Result<()> {
        let child = Command::new("redis-server")
            .args([
                "--port",
                &self.port.to_string(),
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
            .spawn()?;
        self.child = Some(child);
        let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
        while tokio::net::TcpStream::connect(("127.0.0.1", self.port))
            .await
            .is_err()
        {
            if tokio::time::Instant::now() >= deadline {
                anyhow::bail!("test redis on port {} did not start", self.port);
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
        Ok(())
    }

    /// Kills the server (its own child process) and waits for it to exit: connections drop at
    /// once, as in a crash.
    pub async fn stop(&mut self) -> anyhow::Result<()> {
        if let Some(mut child) = self.child.take() {
            child.kill().await?;
        }
        Ok(())
    }

    /// `redis://127.0.0.1:<port>`.
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }
}
