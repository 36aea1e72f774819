//! A `redis-cluster://` URL connects to a real 3-node Redis Cluster (ports 6520-6522, bus
//! 6530-6532, created with `redis-cli --cluster create`), and `rediss-cluster://` with the CA
//! in the URL to a TLS-only one (6540-6542, bus 6550-6552); the client reaches keys of every
//! node: fred reads the slot map from the seed node and routes each command. Only the
//! connection is checked here; running queues on a cluster is other work.
//!
//! The nodes are stopped by their PIDs when the guard drops, also on failure. Skipped with a
//! message when `redis-server`, `redis-cli` (or, for TLS, `openssl`) is missing.

mod common;
mod test_cluster;
mod tls_pki;

use std::time::Duration;

use anyhow::{Context as _, Result};
use bullmq_redis::{Node, RedisError, Topology};
use fred::interfaces::ClusterInterface;
use fred::prelude::Client;
use fred::prelude::{ClientLike, KeysInterface};
use ractor_bullmq::ConnectionConfig;
use test_cluster::{tools_available, ClusterSpec, ClusterTls, TestCluster};
use tls_pki::Pki;

const PORTS: [u16; 3] = [6520, 6521, 6522];
const TLS_PORTS: [u16; 3] = [6540, 6541, 6542];
/// A node's cluster bus port: ours, within the test's range (Redis' default is port + 10000).
const BUS_OFFSET: u16 = 10;

/// Three primaries, no replicas, on `ports`; TLS-only with `pki`'s server certificate.
async fn start_cluster(ports: &[u16], pki: Option<&Pki>) -> Result<TestCluster> {
    TestCluster::start(ClusterSpec {
        ports,
        bus_offset: BUS_OFFSET,
        replicas: 0,
        node_timeout_ms: 15_000,
        tls: pki.map(|pki| ClusterTls {
            cert: pki.path("server.pem"),
            key: pki.path("server.key"),
            ca: pki.ca(),
        }),
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cluster_url_reaches_keys_on_every_node() -> Result<()> {
    if !tools_available(&[("redis-server", "--version"), ("redis-cli", "--version")]).await {
        return Ok(());
    }
    let cluster = start_cluster(&PORTS, None).await?;

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
    let cluster = start_cluster(&TLS_PORTS, Some(&pki)).await?;

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
