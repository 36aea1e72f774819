//! A throwaway Redis Cluster for one test binary: `redis-server` nodes in cluster mode on
//! given loopback ports (bus port = port + a chosen offset, inside the test's port range),
//! joined with `redis-cli --cluster create`, optionally with one replica per primary and TLS.
//! Every node is stopped by its PID when the guard drops, also when the test fails.
//!
//! Self-contained (no `common` module), so the CLI's tests include it by path too.

#![allow(dead_code, unreachable_pub)] // each test binary uses its own part of this module

use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use anyhow::{bail, Context as _, Result};
use tokio::process::{Child, Command};

/// TLS files of a TLS-only cluster (plain ports off, bus over TLS too).
pub struct ClusterTls {
    /// Server certificate (PEM).
    pub cert: PathBuf,
    /// Its key (PEM).
    pub key: PathBuf,
    /// The CA that signed it.
    pub ca: PathBuf,
}

/// What to start.
pub struct ClusterSpec<'a> {
    /// Client ports of the nodes: primaries first, then replicas (redis-cli pairs them).
    pub ports: &'a [u16],
    /// Added to a node's port for its cluster bus port.
    pub bus_offset: u16,
    /// Replicas per primary (`--cluster-replicas`).
    pub replicas: u8,
    /// `cluster-node-timeout` in ms: how soon a dead primary's replica takes over.
    pub node_timeout_ms: u32,
    /// TLS-only nodes with these files.
    pub tls: Option<ClusterTls>,
}

/// One node: its port and process.
struct ClusterNode {
    port: u16,
    child: Option<Child>,
}

/// The running cluster; its nodes are killed and its directory removed when dropped.
pub struct TestCluster {
    dir: PathBuf,
    nodes: Vec<ClusterNode>,
    cli_tls: Vec<String>,
}

impl Drop for TestCluster {
    fn drop(&mut self) {
        for node in &mut self.nodes {
            if let Some(child) = node.child.as_mut() {
                let _ = child.start_kill();
            }
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Whether every tool is installed (`(binary, version flag)`); says why when not.
pub async fn tools_available(tools: &[(&str, &str)]) -> bool {
    for (tool, version) in tools {
        if Command::new(tool).arg(version).output().await.is_err() {
            eprintln!("SKIPPING the cluster test: no `{tool}` binary");
            return false;
        }
    }
    true
}

impl TestCluster {
    /// Starts the nodes of `spec` and joins them into a cluster whose every node reports
    /// `cluster_state:ok`.
    pub async fn start(spec: ClusterSpec<'_>) -> Result<Self> {
        let stamp = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default()
            .as_nanos();
        let dir =
            std::env::temp_dir().join(format!("bullmq-cluster-{}-{stamp}", std::process::id()));
        std::fs::create_dir_all(&dir)?;
        let cli_tls: Vec<String> = match &spec.tls {
            Some(tls) => vec![
                "--tls".into(),
                "--cacert".into(),
                tls.ca.display().to_string(),
            ],
            None => Vec::new(),
        };
        let mut cluster = Self {
            dir,
            nodes: Vec::new(),
            cli_tls,
        };
        for &port in spec.ports {
            let node_dir = cluster.dir.join(port.to_string());
            std::fs::create_dir_all(&node_dir)?;
            let mut command = Command::new("redis-server");
            match &spec.tls {
                Some(tls) => {
                    command
                        .args(["--port", "0", "--tls-port", &port.to_string()])
                        .args(["--tls-cluster", "yes", "--tls-auth-clients", "no"])
                        .arg("--tls-cert-file")
                        .arg(&tls.cert)
                        .arg("--tls-key-file")
                        .arg(&tls.key)
                        .arg("--tls-ca-cert-file")
                        .arg(&tls.ca);
                }
                None => {
                    command.args(["--port", &port.to_string()]);
                }
            }
            let child = command
                .args(["--bind", "127.0.0.1"])
                .args(["--cluster-port", &(port + spec.bus_offset).to_string()])
                .args(["--cluster-enabled", "yes", "--cluster-config-file"])
                .arg(node_dir.join("nodes.conf"))
                .args(["--cluster-node-timeout", &spec.node_timeout_ms.to_string()])
                .args(["--save", "", "--appendonly", "no", "--dir"])
                .arg(&node_dir)
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .kill_on_drop(true)
                .spawn()
                .context("starting redis-server")?;
            cluster.nodes.push(ClusterNode {
                port,
                child: Some(child),
            });
        }
        for &port in spec.ports {
            eventually(
                "a cluster node listens",
                Duration::from_secs(15),
                move || async move {
                    tokio::net::TcpStream::connect(("127.0.0.1", port))
                        .await
                        .is_ok()
                },
            )
            .await?;
        }
        let mut create = Command::new("redis-cli");
        create.args(&cluster.cli_tls).arg("--cluster").arg("create");
        for port in spec.ports {
            create.arg(format!("127.0.0.1:{port}"));
        }
        // `--cluster create` waits for the nodes to meet without a limit of its own.
        let output = tokio::time::timeout(
            Duration::from_secs(90),
            create
                .args(["--cluster-replicas", &spec.replicas.to_string()])
                .arg("--cluster-yes")
                .stdin(Stdio::null())
                .kill_on_drop(true)
                .output(),
        )
        .await
        .context("redis-cli --cluster create did not finish in 90 s")??;
        if !output.status.success() {
            bail!(
                "redis-cli --cluster create: {}",
                String::from_utf8_lossy(&output.stdout)
            );
        }
        for &port in spec.ports {
            let cli_tls = cluster.cli_tls.clone();
            eventually(
                "every node sees the cluster ok",
                Duration::from_secs(60),
                move || {
                    let cli_tls = cli_tls.clone();
                    async move {
                        cluster_info(&cli_tls, port)
                            .await
                            .contains("cluster_state:ok")
                    }
                },
            )
            .await?;
        }
        Ok(cluster)
    }

    /// The client ports of the nodes, in start order.
    pub fn ports(&self) -> Vec<u16> {
        self.nodes.iter().map(|node| node.port).collect()
    }

    /// Runs `redis-cli -p port args…` and returns its output.
    pub async fn cli(&self, port: u16, args: &[&str]) -> Result<String> {
        let output = Command::new("redis-cli")
            .args(&self.cli_tls)
            .args(["-p", &port.to_string()])
            .args(args)
            .stdin(Stdio::null())
            .output()
            .await
            .context("running redis-cli")?;
        Ok(String::from_utf8_lossy(&output.stdout).into_owned())
    }

    /// The port of the primary that serves `key`'s slot now.
    pub async fn primary_of(&self, key: &str) -> Result<u16> {
        let alive = self.alive_port().context("no node alive")?;
        let slot: u16 = self
            .cli(alive, &["cluster", "keyslot", key])
            .await?
            .trim()
            .parse()
            .context("CLUSTER KEYSLOT")?;
        let nodes = self.cli(alive, &["cluster", "nodes"]).await?;
        for line in nodes.lines() {
            let fields: Vec<&str> = line.split(' ').collect();
            if fields.len() < 9 || !fields[2].contains("master") || fields[2].contains("fail") {
                continue;
            }
            let owns = fields[8..].iter().any(|range| match range.split_once('-') {
                Some((a, b)) => {
                    a.parse::<u16>().is_ok_and(|a| a <= slot)
                        && b.parse::<u16>().is_ok_and(|b| slot <= b)
                }
                None => range.parse::<u16>().is_ok_and(|s| s == slot),
            });
            if owns {
                let addr = fields[1].split('@').next().unwrap_or_default();
                let port = addr.rsplit(':').next().unwrap_or_default();
                return port.parse().context("a node address");
            }
        }
        bail!("no primary owns slot {slot}: {nodes}")
    }

    /// The ports of the primaries that are up now.
    pub async fn primaries(&self) -> Result<Vec<u16>> {
        let alive = self.alive_port().context("no node alive")?;
        let nodes = self.cli(alive, &["cluster", "nodes"]).await?;
        let mut ports = Vec::new();
        for line in nodes.lines() {
            let fields: Vec<&str> = line.split(' ').collect();
            if fields.len() < 3 || !fields[2].contains("master") || fields[2].contains("fail") {
                continue;
            }
            let addr = fields[1].split('@').next().unwrap_or_default();
            ports.push(addr.rsplit(':').next().unwrap_or_default().parse()?);
        }
        Ok(ports)
    }

    /// Moves `key`'s slot, with every key in it, to another primary, as `redis-cli --cluster
    /// reshard` does for one slot: IMPORTING / MIGRATING, `MIGRATE` in batches, then the new
    /// owner announced to every primary. Returns the new owner's port.
    pub async fn move_slot_of(&self, key: &str) -> Result<u16> {
        let source = self.primary_of(key).await?;
        let target = *self
            .primaries()
            .await?
            .iter()
            .find(|&&port| port != source)
            .context("another primary")?;
        let slot = self.cli(source, &["cluster", "keyslot", key]).await?;
        let slot = slot.trim();
        let source_id = self.cli(source, &["cluster", "myid"]).await?;
        let target_id = self.cli(target, &["cluster", "myid"]).await?;
        let (source_id, target_id) = (source_id.trim(), target_id.trim());
        self.cli(
            target,
            &["cluster", "setslot", slot, "importing", source_id],
        )
        .await?;
        self.cli(
            source,
            &["cluster", "setslot", slot, "migrating", target_id],
        )
        .await?;
        loop {
            let keys = self
                .cli(source, &["cluster", "getkeysinslot", slot, "100"])
                .await?;
            let keys: Vec<&str> = keys.lines().filter(|k| !k.is_empty()).collect();
            if keys.is_empty() {
                break;
            }
            let port = target.to_string();
            let mut args = vec!["migrate", "127.0.0.1", &port, "", "0", "5000", "KEYS"];
            args.extend(keys);
            let reply = self.cli(source, &args).await?;
            if !reply.contains("OK") {
                bail!("MIGRATE: {reply}");
            }
        }
        for port in self.primaries().await? {
            self.cli(port, &["cluster", "setslot", slot, "node", target_id])
                .await?;
        }
        Ok(target)
    }

    /// Kills the node on `port` (as a crash would) and waits for it to exit.
    pub async fn kill(&mut self, port: u16) -> Result<()> {
        let node = self
            .nodes
            .iter_mut()
            .find(|node| node.port == port)
            .context("no such node")?;
        if let Some(mut child) = node.child.take() {
            child.start_kill()?;
            child.wait().await?;
        }
        Ok(())
    }

    fn alive_port(&self) -> Option<u16> {
        self.nodes
            .iter()
            .find(|node| node.child.is_some())
            .map(|node| node.port)
    }
}

async fn cluster_info(cli_tls: &[String], port: u16) -> String {
    Command::new("redis-cli")
        .args(cli_tls)
        .args(["-p", &port.to_string(), "cluster", "info"])
        .output()
        .await
        .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
        .unwrap_or_default()
}

/// Polls `condition` every 25 ms until it holds or `timeout` passes.
async fn eventually<F, Fut>(what: &str, timeout: Duration, mut condition: F) -> Result<()>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        if condition().await {
            return Ok(());
        }
        if tokio::time::Instant::now() >= deadline {
            bail!("timed out after {timeout:?} waiting for: {what}");
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
}
