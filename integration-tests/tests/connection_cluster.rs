//! A `redis-cluster://` URL connects to a real 3-node Redis Cluster (ports 6520-6522, bus
//! 6530-6532, created with `redis-cli --cluster create`), and `rediss-cluster://` with the CA
//! in the URL to a TLS-only one (6540-6542, bus 6550-6552); the client reaches keys of every
//! node: fred reads the slot map from the seed node and routes each command. Only the
//! connection is checked here; running queues on a cluster is other work.
//!
//! The nodes are stopped by their PIDs when the guard drops, also on failure. Skipped with a
//! message when `redis-server`, `redis-cli` (or, for TLS, `openssl`) is missing.

mod common;
mod tls_pki;

use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use anyhow::{bail, Context as _, Result};
use bullmq_redis::{Node, RedisError, Topology};
use common::eventually;
use fred::interfaces::ClusterInterface;
use fred::prelude::Client;
use fred::prelude::{ClientLike, KeysInterface};
use ractor_bullmq::ConnectionConfig;
use tls_pki::Pki;
use tokio::process::{Child, Command};

const PORTS: [u16; 3] = [6520, 6521, 6522];
const TLS_PORTS: [u16; 3] = [6540, 6541, 6542];
/// A node's cluster bus port: ours, within the test's range (Redis' default is port + 10000).
const BUS_OFFSET: u16 = 10;

/// Three cluster nodes in a fresh directory; killed and removed when dropped.
struct Cluster {
    dir: PathBuf,
    nodes: Vec<Child>,
}

impl Drop for Cluster {
    fn drop(&mut self) {
        for node in &mut self.nodes {
            let _ = node.start_kill();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

impl Cluster {
    /// Starts nodes on `ports` and joins them into a cluster; TLS-only (plain ports off, bus
    /// over TLS too) with `pki`'s server certificate when given.
    async fn start(ports: [u16; 3], pki: Option<&Pki>) -> Result<Self> {
        let dir =
            std::env::temp_dir().join(format!("bullmq-cluster-{}", common::unique_queue("c")));
        std::fs::create_dir_all(&dir)?;
        let mut cluster = Self {
            dir,
            nodes: Vec::new(),
        };
        // redis-cli's TLS arguments, for `--cluster create` and `cluster info`.
        let cli_tls: Vec<String> = match pki {
            Some(pki) => vec![
                "--tls".into(),
                "--cacert".into(),
                pki.ca().display().to_string(),
            ],
            None => Vec::new(),
        };
        for port in ports {
            let node_dir = cluster.dir.join(port.to_string());
            std::fs::create_dir_all(&node_dir)?;
            let mut command = Command::new("redis-server");
            match pki {
                Some(pki) => {
                    command
                        .args(["--port", "0", "--tls-port", &port.to_string()])
                        .args(["--tls-cluster", "yes", "--tls-auth-clients", "no"])
                        .arg("--tls-cert-file")
                        .arg(pki.path("server.pem"))
                        .arg("--tls-key-file")
                        .arg(pki.path("server.key"))
                        .arg("--tls-ca-cert-file")
                        .arg(pki.ca());
                }
                None => {
                    command.args(["--port", &port.to_string()]);
                }
            }
            let child = command
                .args(["--bind", "127.0.0.1"])
                .args(["--cluster-port", &(port + BUS_OFFSET).to_string()])
                .args(["--cluster-enabled", "yes", "--cluster-config-file"])
                .arg(node_dir.join("nodes.conf"))
                .args(["--save", "", "--appendonly", "no", "--dir"])
                .arg(&node_dir)
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .kill_on_drop(true)
                .spawn()
                .context("starting redis-server")?;
            cluster.nodes.push(child);
        }
        for port in ports {
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
        create.args(&cli_tls).arg("--cluster").arg("create");
        for port in ports {
            create.arg(format!("127.0.0.1:{port}"));
        }
        // `--cluster create` waits for the nodes to meet without a limit of its own.
        let output = tokio::time::timeout(
            Duration::from_secs(60),
            create
                .args(["--cluster-replicas", "0", "--cluster-yes"])
                .stdin(Stdio::null())
                .kill_on_drop(true)
                .output(),
        )
        .await
        .context("redis-cli --cluster create did not finish in 60 s")??;
        if !output.status.success() {
            bail!(
                "redis-cli --cluster create: {}",
                String::from_utf8_lossy(&output.stdout)
            );
        }
        for port in ports {
            let cli_tls = cli_tls.clone();
            eventually(
                "every node sees the cluster ok",
                Duration::from_secs(30),
                move || {
                    let cli_tls = cli_tls.clone();
                    async move {
                        Command::new("redis-cli")
                            .args(&cli_tls)
                            .args(["-p", &port.to_string(), "cluster", "info"])
                            .output()
                            .await
                            .is_ok_and(|o| {
                                String::from_utf8_lossy(&o.stdout).contains("cluster_state:ok")
                            })
                    }
                },
            )
            .await?;
        }
        Ok(cluster)
    }
}

async fn tools_available(tools: &[(&str, &str)]) -> bool {
    for (tool, version) in tools {
        if Command::new(tool).arg(version).output().await.is_err() {
            eprintln!("SKIPPING the cluster connection test: no `{tool}` binary");
            return false;
        }
    }
    true
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cluster_url_reaches_keys_on_every_node() -> Result<()> {
    if !tools_available(&[("redis-server", "--version"), ("redis-cli", "--version")]).await {
        return Ok(());
    }
    let cluster = Cluster::start(PORTS, None).await?;

    // One seed is enough: the other two nodes are discovered.
    let config = ConnectionConfig::from_url(&format!("redis-cluster://127.0.0.1:{}", PORTS[0]))?;
    assert!(matches!(config.topology, Topology::Cluster { .. }));
    let client = config.connect(Some("bullmq-cluster-test".into())).await?;
    keys_on_every_node(&client).await?;
    client.quit().await?;

    // From code, with an unreachable seed listed first: the next one is used.
    let seeds = ConnectionConfig::default().cluster([
        Node::new("127.0.0.1", 6529),
        Node::new("127.0.0.1", PORTS[1]),
    ]);
    let client = seeds.connect(None).await?;
    let _: () = client
        .set("bullmq-cluster-test:seed", 1, None, None, false)
        .await?;
    let _: i64 = client.del("bullmq-cluster-test:seed").await?;
    client.quit().await?;

    // A cluster URL on a server that is not in cluster mode fails to connect, typed.
    let mut single = ConnectionConfig::from_url(&format!(
        "redis-cluster://{}",
        ConnectionConfig::from_url(&common::redis_url())?.target()
    ))?;
    single.connect_timeout = Duration::from_secs(3);
    match single.connect(None).await {
        Err(RedisError::Connect { target, .. }) => {
            assert!(target.starts_with("cluster "), "{target}")
        }
        other => panic!("expected a Connect error, got {:?}", other.map(|_| ())),
    }
    drop(cluster);
    Ok(())
}

/// Writes, reads and deletes keys spread over the slots, hence over all three nodes (a
/// single-node client would get MOVED for two thirds of them); checks that every node holds
/// some of the slots the client knows.
async fn keys_on_every_node(client: &Client) -> Result<()> {
    for i in 0..30 {
        let key = format!("bullmq-cluster-test:{i}");
        let _: () = client.set(&key, i, None, None, false).await?;
        let back: i64 = client.get(&key).await?;
        assert_eq!(back, i);
        let _: i64 = client.del(&key).await?;
    }
    let primaries = client
        .cached_cluster_state()
        .context("the client has a cluster slot map")?
        .unique_primary_nodes();
    assert_eq!(primaries.len(), 3, "{primaries:?}");
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tls_cluster_url_with_the_ca_reaches_keys_on_every_node() -> Result<()> {
    let tools = [
        ("redis-server", "--version"),
        ("redis-cli", "--version"),
        ("openssl", "version"),
    ];
    if !tools_available(&tools).await {
        return Ok(());
    }
    let pki = Pki::make("cluster")?;
    let cluster = Cluster::start(TLS_PORTS, Some(&pki)).await?;

    let url = format!(
        "rediss-cluster://127.0.0.1:{}?node=127.0.0.1:{}&tls_ca={}",
        TLS_PORTS[0],
        TLS_PORTS[1],
        pki.ca().display()
    );
    let config = ConnectionConfig::from_url(&url)?;
    assert!(config.tls);
    let client = config.connect(None).await?;
    keys_on_every_node(&client).await?;
    client.quit().await?;

    // The CA is needed for the discovered nodes as much as for the seed.
    let mut wrong_ca = ConnectionConfig::from_url(&format!(
        "rediss-cluster://127.0.0.1:{}?tls_ca={}",
        TLS_PORTS[0],
        pki.other_ca().display()
    ))?;
    wrong_ca.connect_timeout = Duration::from_secs(3);
    match wrong_ca.connect(None).await {
        Err(RedisError::Connect { source, .. }) => {
            assert!(
                source.to_string().contains("not signed by a trusted CA"),
                "{source}"
            )
        }
        other => panic!("expected a Connect error, got {:?}", other.map(|_| ())),
    }
    drop(cluster);
    Ok(())
}
