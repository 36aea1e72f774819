//! A `redis-sentinel://` URL connects to the primary a real Sentinel monitors (primary on
//! port 6560, Sentinel on 6561 with a password of its own): the client asks the Sentinel for
//! the address and talks to the primary. Only the connection is checked here; failover while
//! running is other work.
//!
//! Both processes are stopped by their PIDs when the guard drops, also on failure. Skipped
//! with a message when `redis-server` is missing.

mod common;

use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use anyhow::{Context as _, Result};
use bullmq_redis::{RedisError, Topology};
use common::eventually;
use fred::prelude::{ClientLike, KeysInterface};
use ractor_bullmq::ConnectionConfig;
use tokio::process::{Child, Command};

const PRIMARY: u16 = 6560;
const SENTINEL: u16 = 6561;
const SENTINEL_PASSWORD: &str = "sentinel-secret";

/// The primary and its Sentinel; killed and their directory removed when dropped.
struct Deployment {
    dir: PathBuf,
    children: Vec<Child>,
}

impl Drop for Deployment {
    fn drop(&mut self) {
        for child in &mut self.children {
            let _ = child.start_kill();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn server(args: &[&str], dir: &std::path::Path) -> Result<Child> {
    Command::new("redis-server")
        .args(args)
        .args([
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--appendonly",
            "no",
            "--dir",
        ])
        .arg(dir)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .context("starting redis-server")
}

impl Deployment {
    async fn start() -> Result<Self> {
        let dir =
            std::env::temp_dir().join(format!("bullmq-sentinel-{}", common::unique_queue("s")));
        std::fs::create_dir_all(&dir)?;
        let mut deployment = Self {
            dir: dir.clone(),
            children: Vec::new(),
        };
        deployment
            .children
            .push(server(&["--port", &PRIMARY.to_string()], &dir)?);
        // A Sentinel rewrites its configuration file, so it gets one of its own.
        let config = dir.join("sentinel.conf");
        std::fs::write(
            &config,
            format!(
                "port {SENTINEL}\nbind 127.0.0.1\nrequirepass {SENTINEL_PASSWORD}\n\
                 sentinel monitor mymaster 127.0.0.1 {PRIMARY} 1\n"
            ),
        )?;
        let sentinel = Command::new("redis-server")
            .arg(&config)
            .args(["--sentinel", "--dir"])
            .arg(&dir)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .context("starting redis-server --sentinel")?;
        deployment.children.push(sentinel);
        for port in [PRIMARY, SENTINEL] {
            eventually(
                "a server listens",
                Duration::from_secs(15),
                move || async move {
                    tokio::net::TcpStream::connect(("127.0.0.1", port))
                        .await
                        .is_ok()
                },
            )
            .await?;
        }
        Ok(deployment)
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sentinel_url_connects_to_the_monitored_primary() -> Result<()> {
    if Command::new("redis-server")
        .arg("--version")
        .output()
        .await
        .is_err()
    {
        eprintln!("SKIPPING a_sentinel_url_connects_to_the_monitored_primary: no redis-server");
        return Ok(());
    }
    let deployment = Deployment::start().await?;

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
