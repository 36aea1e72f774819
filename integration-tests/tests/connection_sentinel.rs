//! A `redis-sentinel://` URL connects to the primary a real Sentinel monitors (primary on
//! port 6560, Sentinel on 6561 with a password of its own): the client asks the Sentinel for
//! the address and talks to the primary. Only the connection is checked here; failover while
//! running is other work.
//!
//! Both processes are stopped by their PIDs when the guard drops, also on failure. Skipped
//! with a message when `redis-server` is missing.

mod common;
mod sentinel_deployment;

use std::time::Duration;

use anyhow::{Context as _, Result};
use bullmq_redis::{RedisError, Topology};
use fred::prelude::{ClientLike, KeysInterface};
use ractor_bullmq::ConnectionConfig;
use sentinel_deployment::{DeploymentSpec, SentinelDeployment};

const PRIMARY: u16 = 6560;
const SENTINEL: u16 = 6561;
const SENTINEL_PASSWORD: &str = "sentinel-secret";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sentinel_url_connects_to_the_monitored_primary() -> Result<()> {
    if !sentinel_deployment::available().await {
        eprintln!("SKIPPING a_sentinel_url_connects_to_the_monitored_primary: no redis-server");
        return Ok(());
    }
    let deployment = SentinelDeployment::start(DeploymentSpec {
        sentinel_password: Some(SENTINEL_PASSWORD.into()),
        ..DeploymentSpec::single(PRIMARY, SENTINEL)
    })
    .await?;

    let url = format!(
        "redis-sentinel://127.0.0.1:{SENTINEL}/3?sentinelServiceName=mymaster\
         &sentinelPassword={SENTINEL_PASSWORD}"
    );
    let config = ConnectionConfig::from_url(&url)?;
    assert!(matches!(config.topology, Topology::Sentinel { .. }));
    let client = config.connect(None).await?;
    let _: () = client
        .set("bullmq-sentinel-test", "via sentinel", None, None, false)
        .await?;
    client.quit().await?;

    // The write reached the primary, in database 3.
    let mut direct = ConnectionConfig::from_url(&format!("redis://127.0.0.1:{PRIMARY}/3"))?;
    direct.connect_timeout = Duration::from_secs(5);
    let primary = direct.connect(None).await?;
    let value: Option<String> = primary.get("bullmq-sentinel-test").await?;
    assert_eq!(value.as_deref(), Some("via sentinel"));
    primary.quit().await?;

    // A service name the Sentinel does not monitor, or no Sentinel password: typed refusals
    // within the connect timeout.
    for url in [
        format!(
            "redis-sentinel://127.0.0.1:{SENTINEL}?sentinelServiceName=other\
             &sentinelPassword={SENTINEL_PASSWORD}"
        ),
        format!("redis-sentinel://127.0.0.1:{SENTINEL}?sentinelServiceName=mymaster"),
    ] {
        let mut config = ConnectionConfig::from_url(&url)?;
        config.connect_timeout = Duration::from_secs(3);
        let outcome = tokio::time::timeout(Duration::from_secs(20), config.connect(None))
            .await
            .context("a refused Sentinel connect returns")?;
        match outcome {
            Err(RedisError::Connect { target, .. }) => {
                assert!(target.starts_with("sentinel service"), "{target}");
                assert!(!target.contains(SENTINEL_PASSWORD), "{target}");
            }
            other => panic!(
                "{url}: expected a Connect error, got {:?}",
                other.map(|_| ())
            ),
        }
    }
    drop(deployment);
    Ok(())
}
