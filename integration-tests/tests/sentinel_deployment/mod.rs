//! A throw-away Sentinel deployment on loopback ports the test chooses: one primary, its
//! replicas (`--replicaof`) and Sentinels monitoring it as `mymaster`. Every process is a child
//! of the test, killed by its own handle (so by PID) when the deployment drops, also when a
//! test fails; its directory is removed then too.
#![allow(dead_code, unreachable_pub)]

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use anyhow::{bail, Context as _, Result};
use tokio::process::{Child, Command};

use crate::common::{eventually, unique_queue};

/// The name the Sentinels know the primary by.
pub const SERVICE: &str = "mymaster";

/// What to start.
pub struct DeploymentSpec {
    /// The primary's port, then one port per replica.
    pub data_ports: Vec<u16>,
    /// One port per Sentinel.
    pub sentinel_ports: Vec<u16>,
    /// Sentinels that must agree the primary is down before a failover.
    pub quorum: usize,
    /// A password of the Sentinels' own (`requirepass` on them), if any.
    pub sentinel_password: Option<String>,
    /// `down-after-milliseconds`: how long a silent primary takes to be declared down.
    pub down_after: Duration,
    /// `failover-timeout`.
    pub failover_timeout: Duration,
}

impl DeploymentSpec {
    /// One primary on `primary` and one Sentinel on `sentinel`, quorum 1.
    pub fn single(primary: u16, sentinel: u16) -> Self {
        Self {
            data_ports: vec![primary],
            sentinel_ports: vec![sentinel],
            quorum: 1,
            sentinel_password: None,
            down_after: Duration::from_secs(30),
            failover_timeout: Duration::from_secs(180),
        }
    }
}

/// The running processes.
pub struct SentinelDeployment {
    dir: PathBuf,
    /// `(port, child)` of the data servers; `None` once killed.
    data: Vec<(u16, Option<Child>)>,
    sentinels: Vec<(u16, Child)>,
    spec_sentinel_password: Option<String>,
}

impl Drop for SentinelDeployment {
    fn drop(&mut self) {
        for (_, child) in &mut self.data {
            if let Some(child) = child.as_mut() {
                let _ = child.start_kill();
            }
        }
        for (_, child) in &mut self.sentinels {
            let _ = child.start_kill();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Whether `redis-server` is installed (tests skip with a message otherwise).
pub async fn available() -> bool {
    Command::new("redis-server")
        .arg("--version")
        .output()
        .await
        .is_ok()
        && Command::new("redis-cli")
            .arg("--version")
            .output()
            .await
            .is_ok()
}

fn data_server(port: u16, extra: &[String], dir: &Path) -> Result<Child> {
    let data_dir = dir.join(format!("data-{port}"));
    std::fs::create_dir_all(&data_dir)?;
    Command::new("redis-server")
        .args(["--port", &port.to_string()])
        .args(extra)
        .args([
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--appendonly",
            "no",
            "--dir",
        ])
        .arg(&data_dir)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .context("starting redis-server")
}

async fn listening(port: u16) -> Result<()> {
    eventually(
        "a server listens",
        Duration::from_secs(15),
        move || async move {
            tokio::net::TcpStream::connect(("127.0.0.1", port))
                .await
                .is_ok()
        },
    )
    .await
}

impl SentinelDeployment {
    /// Starts the servers, then the Sentinels, and waits until they listen. With more than one
    /// data server or Sentinel it also waits until every Sentinel knows every replica and every
    /// other Sentinel, so that a failover can happen right away.
    pub async fn start(spec: DeploymentSpec) -> Result<Self> {
        let dir = std::env::temp_dir().join(format!("bullmq-sentinel-{}", unique_queue("s")));
        std::fs::create_dir_all(&dir)?;
        let mut deployment = Self {
            dir: dir.clone(),
            data: Vec::new(),
            sentinels: Vec::new(),
            spec_sentinel_password: spec.sentinel_password.clone(),
        };
        let primary = spec.data_ports[0];
        for (i, &port) in spec.data_ports.iter().enumerate() {
            let extra = if i == 0 {
                Vec::new()
            } else {
                vec![
                    "--replicaof".into(),
                    "127.0.0.1".into(),
                    primary.to_string(),
                ]
            };
            deployment
                .data
                .push((port, Some(data_server(port, &extra, &dir)?)));
        }
        for &port in &spec.sentinel_ports {
            // A Sentinel rewrites its configuration file, so each gets one of its own.
            let config = dir.join(format!("sentinel-{port}.conf"));
            let mut text = format!(
                "port {port}\nbind 127.0.0.1\n\
                 sentinel monitor {SERVICE} 127.0.0.1 {primary} {}\n\
                 sentinel down-after-milliseconds {SERVICE} {}\n\
                 sentinel failover-timeout {SERVICE} {}\n\
                 sentinel parallel-syncs {SERVICE} 1\n",
                spec.quorum,
                spec.down_after.as_millis(),
                spec.failover_timeout.as_millis(),
            );
            if let Some(password) = &spec.sentinel_password {
                // The Sentinels talk to each other with the same password.
                text.push_str(&format!(
                    "requirepass {password}\nsentinel sentinel-pass {password}\n"
                ));
            }
            std::fs::write(&config, text)?;
            let child = Command::new("redis-server")
                .arg(&config)
                .args(["--sentinel", "--dir"])
                .arg(&dir)
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .kill_on_drop(true)
                .spawn()
                .context("starting redis-server --sentinel")?;
            deployment.sentinels.push((port, child));
        }
        for port in spec.data_ports.iter().chain(&spec.sentinel_ports) {
            listening(*port).await?;
        }
        let replicas = spec.data_ports.len() - 1;
        let others = spec.sentinel_ports.len() - 1;
        if replicas > 0 {
            let primary_port = primary;
            eventually(
                "the replicas are in sync",
                Duration::from_secs(30),
                move || async move {
                    cli(primary_port, None, &["INFO", "replication"])
                        .await
                        .map(|info| info.matches(",state=online,").count() == replicas)
                        .unwrap_or(false)
                },
            )
            .await?;
        }
        if replicas > 0 || others > 0 {
            for &port in &spec.sentinel_ports {
                let password = spec.sentinel_password.clone();
                eventually(
                    "every Sentinel knows the replicas and the other Sentinels",
                    Duration::from_secs(60),
                    move || {
                        let password = password.clone();
                        async move {
                            let Ok(master) =
                                cli(port, password.as_deref(), &["SENTINEL", "MASTER", SERVICE])
                                    .await
                            else {
                                return false;
                            };
                            field(&master, "num-slaves") == Some(replicas.to_string())
                                && field(&master, "num-other-sentinels") == Some(others.to_string())
                        }
                    },
                )
                .await?;
            }
        }
        Ok(deployment)
    }

    /// `redis-sentinel://` URL of every Sentinel, database `db`.
    pub fn url(&self, db: u8) -> String {
        let mut sentinels = self.sentinels.iter().map(|(port, _)| port);
        let first = sentinels.next().expect("a Sentinel");
        let mut url =
            format!("redis-sentinel://127.0.0.1:{first}/{db}?sentinelServiceName={SERVICE}");
        for port in sentinels {
            url.push_str(&format!("&node=127.0.0.1:{port}"));
        }
        if let Some(password) = &self.spec_sentinel_password {
            url.push_str(&format!("&sentinelPassword={password}"));
        }
        url
    }

    /// The port the Sentinels (the first that answers) name as the primary now.
    pub async fn primary_port(&self) -> Result<u16> {
        let password = self.spec_sentinel_password.as_deref();
        for (port, _) in &self.sentinels {
            if let Ok(reply) = cli(
                *port,
                password,
                &["SENTINEL", "GET-MASTER-ADDR-BY-NAME", SERVICE],
            )
            .await
            {
                if let Some(p) = reply.lines().nth(1).and_then(|p| p.trim().parse().ok()) {
                    return Ok(p);
                }
            }
        }
        bail!("no Sentinel names a primary")
    }

    /// Waits until every Sentinel names a primary other than `old`, and that server says it
    /// is a primary; returns its port.
    pub async fn wait_for_new_primary(&self, old: u16, timeout: Duration) -> Result<u16> {
        let ports: Vec<u16> = self.sentinels.iter().map(|(p, _)| *p).collect();
        let password = self.spec_sentinel_password.clone();
        let found = std::sync::Arc::new(std::sync::Mutex::new(None));
        let slot = found.clone();
        eventually("the Sentinels name a new primary", timeout, move || {
            let (ports, password, slot) = (ports.clone(), password.clone(), slot.clone());
            async move {
                let mut named = None;
                for port in ports {
                    let Ok(reply) = cli(
                        port,
                        password.as_deref(),
                        &["SENTINEL", "GET-MASTER-ADDR-BY-NAME", SERVICE],
                    )
                    .await
                    else {
                        return false;
                    };
                    let Some(p) = reply
                        .lines()
                        .nth(1)
                        .and_then(|p| p.trim().parse::<u16>().ok())
                    else {
                        return false;
                    };
                    if p == old || named.is_some_and(|n| n != p) {
                        return false;
                    }
                    named = Some(p);
                }
                let Some(p) = named else { return false };
                let is_primary = cli(p, None, &["ROLE"])
                    .await
                    .is_ok_and(|role| role.starts_with("master"));
                if is_primary {
                    *slot.lock().expect("slot") = Some(p);
                }
                is_primary
            }
        })
        .await?;
        let port = found.lock().expect("slot").expect("set when found");
        Ok(port)
    }

    /// Runs a command on the first Sentinel.
    pub async fn sentinel_command(&self, args: &[&str]) -> Result<String> {
        let (port, _) = self.sentinels.first().context("a Sentinel")?;
        cli(*port, self.spec_sentinel_password.as_deref(), args).await
    }

    /// `SIGKILL`s the data server on `port` (our own child, by its handle) and waits until it
    /// has exited: its connections drop as in a crash.
    pub async fn kill_data(&mut self, port: u16) -> Result<()> {
        let (_, child) = self
            .data
            .iter_mut()
            .find(|(p, _)| *p == port)
            .context("no data server on that port")?;
        if let Some(mut child) = child.take() {
            child.kill().await?;
        }
        Ok(())
    }
}

/// One `redis-cli` command against `port`; its output, or an error when it fails.
pub async fn cli(port: u16, password: Option<&str>, args: &[&str]) -> Result<String> {
    let mut command = Command::new("redis-cli");
    command.args(["-h", "127.0.0.1", "-p", &port.to_string()]);
    if let Some(password) = password {
        command.args(["--no-auth-warning", "-a", password]);
    }
    let output = tokio::time::timeout(
        Duration::from_secs(5),
        command
            .args(args)
            .stdin(Stdio::null())
            .kill_on_drop(true)
            .output(),
    )
    .await
    .context("redis-cli answers")??;
    let text = String::from_utf8_lossy(&output.stdout).into_owned();
    if !output.status.success() || text.starts_with("Could not connect") || text.starts_with("ERR")
    {
        bail!("redis-cli {args:?} on {port}: {text}");
    }
    Ok(text)
}

/// The value after `name` in a flat `name\nvalue\n...` reply.
fn field(reply: &str, name: &str) -> Option<String> {
    let mut lines = reply.lines();
    while let Some(line) = lines.next() {
        if line.trim() == name {
            return lines.next().map(|v| v.trim().to_string());
        }
    }
    None
}
