//! A throw-away `redis-server` on a free loopback port, for tests that stop and restart the
//! server (an outage) or freeze it (`SIGSTOP`: commands hang instead of failing) without
//! disturbing the shared Redis on 6379. Signalled and stopped by its PID (the child handle),
//! never by name; dropping it resumes a frozen server and kills it, also when a test fails.

#![allow(dead_code)]

use std::process::Stdio;
use std::time::Duration;

use tokio::process::{Child, Command};

/// A `redis-server` child process on `port` (no persistence: an outage test needs none).
pub struct TestRedis {
    port: u16,
    child: Option<Child>,
    /// Frozen with `SIGSTOP` and not resumed yet.
    paused: bool,
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
        Self::start_on(port).await
    }

    /// Starts a server on `port` (a test given a port range picks from it) and waits until it
    /// accepts connections.
    pub async fn start_on(port: u16) -> anyhow::Result<Self> {
        let mut redis = Self {
            port,
            child: None,
            paused: false,
        };
        redis.spawn().await?;
        Ok(redis)
    }

    /// Freezes the server with `SIGSTOP`: connections stay open and new ones are accepted by
    /// the kernel, but nothing is answered (a hung server, a network partition).
    pub fn pause(&mut self) -> anyhow::Result<()> {
        self.signal("-STOP")?;
        self.paused = true;
        Ok(())
    }

    /// Resumes a frozen server with `SIGCONT`.
    pub fn resume(&mut self) -> anyhow::Result<()> {
        if self.paused {
            self.signal("-CONT")?;
            self.paused = false;
        }
        Ok(())
    }

    fn signal(&self, signal: &str) -> anyhow::Result<()> {
        let pid =
            self.child.as_ref().and_then(Child::id).ok_or_else(|| {
                anyhow::anyhow!("test redis on port {} is not running", self.port)
            })?;
        let status = std::process::Command::new("kill")
            .args([signal, &pid.to_string()])
            .status()?;
        anyhow::ensure!(status.success(), "kill {signal} {pid} failed");
        Ok(())
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
        self.resume()?;
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

impl Drop for TestRedis {
    /// A failed test must not leave a frozen server behind: resume it (by PID), then the
    /// child's `kill_on_drop` kills it.
    fn drop(&mut self) {
        let _ = self.resume();
        if let Some(child) = self.child.as_mut() {
            let _ = child.start_kill();
        }
    }
}
