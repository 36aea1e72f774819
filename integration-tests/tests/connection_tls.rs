//! TLS connections against real `redis-server --tls-port` processes: a private CA (given in the
//! URL), mutual TLS, a wrong CA refused in bounded time, the server-name check, the explicitly
//! insecure mode, and typed errors for bad PEM files.
//!
//! The certificates are made in the test with the `openssl` command (a CA, a server certificate
//! for `127.0.0.1` / `localhost`, a client certificate, and a second, unrelated CA). Each test
//! runs its own server on a fixed port of 6500-6599 (plain port off), stopped by its PID when
//! the guard drops, also on failure. Skipped with a message when `redis-server` or `openssl`
//! is missing.

mod common;
mod tls_pki;
mod worker_common;

use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use anyhow::{Context as _, Result};
use bullmq_redis::RedisError;
use common::eventually;
use fred::prelude::{Client, ClientLike};
use ractor_bullmq::{ConnectionConfig, Queue, QueueOptions, Worker, WorkerArgs, WorkerOptions};
use serde_json::json;
use tls_pki::Pki;
use tokio::process::{Child, Command};

/// The connect timeout of the tests that expect a refusal: short, so that "within the
/// timeout" is checked for real, and ample for a loopback handshake.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(3);
/// What a refusal may take beyond the connect timeout on a loaded machine.
const SLACK: Duration = Duration::from_secs(5);

/// A `redis-server` speaking TLS only, on `port`; killed (by its PID) when dropped.
struct TlsRedis {
    port: u16,
    child: Child,
}

impl TlsRedis {
    async fn start(pki: &Pki, port: u16, require_client_cert: bool) -> Result<Self> {
        let dir = pki.path(&format!("redis-{port}"));
        std::fs::create_dir_all(&dir)?;
        let child = Command::new("redis-server")
            .args(["--port", "0", "--tls-port", &port.to_string()])
            .args(["--bind", "127.0.0.1", "--save", "", "--appendonly", "no"])
            .arg("--tls-cert-file")
            .arg(pki.path("server.pem"))
            .arg("--tls-key-file")
            .arg(pki.path("server.key"))
            .arg("--tls-ca-cert-file")
            .arg(pki.ca())
            .args([
                "--tls-auth-clients",
                if require_client_cert { "yes" } else { "no" },
            ])
            .arg("--dir")
            .arg(&dir)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .context("starting redis-server")?;
        let server = Self { port, child };
        eventually(
            "the TLS redis-server listens",
            Duration::from_secs(15),
            move || async move {
                tokio::net::TcpStream::connect(("127.0.0.1", port))
                    .await
                    .is_ok()
            },
        )
        .await?;
        Ok(server)
    }

    fn url(&self, query: &str) -> String {
        format!("rediss://127.0.0.1:{}{query}", self.port)
    }

    async fn stop(mut self) {
        let _ = self.child.kill().await;
    }
}

/// Whether the tools are there; prints why a test is skipped otherwise.
async fn tools_available(test: &str) -> bool {
    for (tool, version) in [("redis-server", "--version"), ("openssl", "version")] {
        if Command::new(tool).arg(version).output().await.is_err() {
            eprintln!("SKIPPING {test}: no `{tool}` binary");
            return false;
        }
    }
    true
}

/// Connects and answers a `PING`.
async fn ping(config: &ConnectionConfig) -> Result<Client> {
    let client = config.connect(None).await?;
    let pong: String = client.ping(None).await?;
    assert_eq!(pong, "PONG");
    Ok(client)
}

/// Connects with `config`, expecting a refusal within the connect timeout (plus slack).
async fn refused(config: &ConnectionConfig) -> String {
    let started = Instant::now();
    let outcome = tokio::time::timeout(Duration::from_secs(30), config.connect(None))
        .await
        .expect("connect returns");
    let took = started.elapsed();
    let error = match outcome {
        Ok(_) => panic!("connecting to {} succeeded", config.target()),
        Err(error) => error,
    };
    assert!(
        matches!(error, RedisError::Connect { .. }),
        "a Connect error, got {error:?}"
    );
    assert!(
        took < config.connect_timeout + SLACK,
        "refused after {took:?}, connect timeout {:?}",
        config.connect_timeout
    );
    eprintln!("refused as expected after {took:?}: {error}");
    error.to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_queue_and_a_worker_run_over_tls_with_a_private_ca() -> Result<()> {
    if !tools_available("a_queue_and_a_worker_run_over_tls_with_a_private_ca").await {
        return Ok(());
    }
    let pki = Pki::make("queue")?;
    let redis = TlsRedis::start(&pki, 6501, false).await?;
    // The CA comes in the URL, as it would from --redis-url or REDIS_URL.
    let url = redis.url(&format!("?tls_ca={}", pki.ca().display()));
    let config = ConnectionConfig::from_url(&url)?;
    assert!(config.tls);

    let name = common::unique_queue("tls");
    let queue = Queue::new(&name, QueueOptions::new(config.clone())).await?;
    let added = queue.add("over-tls", json!({"returnValue": 42})).await?;
    let args = WorkerArgs::connect(
        &config,
        &name,
        worker_common::scripted,
        WorkerOptions::new(),
    )
    .await?;
    let worker = Worker::spawn(args).await?;
    eventually(
        "the job completed over TLS",
        Duration::from_secs(30),
        || {
            let queue = queue.clone();
            async move {
                queue
                    .get_job_counts()
                    .await
                    .is_ok_and(|counts| counts.completed == 1)
            }
        },
    )
    .await?;
    let job = queue.get_job(added.id()).await?.context("the job")?;
    assert_eq!(job.returnvalue(), Some(&json!(42)));
    worker.close().await?;
    queue.close().await?;
    redis.stop().await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mutual_tls_connects_with_the_client_certificate_and_is_refused_without() -> Result<()> {
    if !tools_available("mutual_tls").await {
        return Ok(());
    }
    let pki = Pki::make("mtls")?;
    let redis = TlsRedis::start(&pki, 6502, true).await?;

    let with_cert = ConnectionConfig::from_url(&redis.url(""))?
        .tls_ca_file(pki.ca())
        .tls_client_cert(pki.client_cert(), pki.client_key());
    ping(&with_cert).await?.quit().await?;
    // The same through the URL parameters.
    let url = redis.url(&format!(
        "?tls_ca={}&tls_cert={}&tls_key={}",
        pki.ca().display(),
        pki.client_cert().display(),
        pki.client_key().display()
    ));
    ping(&ConnectionConfig::from_url(&url)?)
        .await?
        .quit()
        .await?;

    let mut without_cert = ConnectionConfig::from_url(&redis.url(""))?.tls_ca_file(pki.ca());
    without_cert.connect_timeout = CONNECT_TIMEOUT;
    let message = refused(&without_cert).await;
    assert!(message.contains("127.0.0.1:6502"), "{message}");
    assert!(
        message.contains("requires a client certificate"),
        "{message}"
    );
    redis.stop().await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wrong_ca_is_refused_within_the_connect_timeout() -> Result<()> {
    if !tools_available("a_wrong_ca_is_refused_within_the_connect_timeout").await {
        return Ok(());
    }
    let pki = Pki::make("wrongca")?;
    let redis = TlsRedis::start(&pki, 6503, false).await?;

    let mut wrong_ca = ConnectionConfig::from_url(&redis.url(""))?.tls_ca_file(pki.other_ca());
    wrong_ca.connect_timeout = CONNECT_TIMEOUT;
    let message = refused(&wrong_ca).await;
    assert!(
        message.contains("not signed by a trusted CA"),
        "the error says it is the CA: {message}"
    );
    // The platform roots do not know the test CA either.
    let mut platform = ConnectionConfig::from_url(&redis.url(""))?;
    platform.connect_timeout = CONNECT_TIMEOUT;
    let message = refused(&platform).await;
    assert!(message.contains("not signed by a trusted CA"), "{message}");
    redis.stop().await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_server_name_is_checked_against_the_certificate() -> Result<()> {
    if !tools_available("the_server_name_is_checked_against_the_certificate").await {
        return Ok(());
    }
    let pki = Pki::make("name")?;
    let redis = TlsRedis::start(&pki, 6504, false).await?;

    // Connected by IP, checked as `localhost`: the certificate names both.
    let url = redis.url(&format!(
        "?tls_ca={}&tls_server_name=localhost",
        pki.ca().display()
    ));
    ping(&ConnectionConfig::from_url(&url)?)
        .await?
        .quit()
        .await?;

    let mut other_name = ConnectionConfig::from_url(&redis.url(""))?
        .tls_ca_file(pki.ca())
        .tls_server_name("redis.example.com");
    other_name.connect_timeout = CONNECT_TIMEOUT;
    let message = refused(&other_name).await;
    assert!(message.contains("does not name the host"), "{message}");
    redis.stop().await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_the_insecure_option_accepts_a_server_of_an_unknown_ca() -> Result<()> {
    if !tools_available("only_the_insecure_option_accepts_a_server_of_an_unknown_ca").await {
        return Ok(());
    }
    let pki = Pki::make("insecure")?;
    let redis = TlsRedis::start(&pki, 6505, false).await?;

    let url = redis.url("?tls_danger_accept_invalid_certs=true");
    ping(&ConnectionConfig::from_url(&url)?)
        .await?
        .quit()
        .await?;
    // Also when a wrong CA is configured: the option, not the CA, decides.
    let insecure = ConnectionConfig::from_url(&redis.url(""))?
        .tls_ca_file(pki.other_ca())
        .danger_accept_invalid_certs();
    ping(&insecure).await?.quit().await?;

    let mut checked = ConnectionConfig::from_url(&redis.url(""))?.tls_ca_file(pki.other_ca());
    checked.connect_timeout = CONNECT_TIMEOUT;
    refused(&checked).await;
    redis.stop().await;
    Ok(())
}

#[tokio::test]
async fn bad_pem_files_are_typed_errors_before_any_connection() -> Result<()> {
    if !tools_available("bad_pem_files_are_typed_errors_before_any_connection").await {
        return Ok(());
    }
    let pki = Pki::make("badpem")?;
    let garbage = pki.path("garbage.pem");
    std::fs::write(&garbage, "this is not PEM\n")?;
    let missing = pki.path("missing.pem");
    // Nobody listens there: any error must come from the configuration, not the network.
    let base = ConnectionConfig::from_url("rediss://127.0.0.1:6599")?;

    let cases: Vec<(ConnectionConfig, &str, &Path)> = vec![
        (base.clone().tls_ca_file(&missing), "CA", &missing),
        (base.clone().tls_ca_file(&garbage), "CA", &garbage),
        (
            base.clone()
                .tls_ca_file(pki.ca())
                .tls_client_cert(&garbage, pki.client_key()),
            "client certificate",
            &garbage,
        ),
        (
            base.clone()
                .tls_ca_file(pki.ca())
                .tls_client_cert(pki.client_cert(), &garbage),
            "client key",
            &garbage,
        ),
    ];
    for (config, what, path) in cases {
        for error in [
            config.check().unwrap_err(),
            config.connect(None).await.unwrap_err(),
        ] {
            match &error {
                RedisError::TlsFile {
                    what: found,
                    path: at,
                    ..
                } => {
                    assert_eq!((*found, at.as_path()), (what, path), "{error}");
                }
                other => panic!("expected TlsFile for the {what} file, got {other:?}"),
            }
            assert!(error.to_string().contains(&path.display().to_string()));
        }
    }

    // A key that is not the certificate's, and a certificate without its key.
    let mut half = base.clone().tls_ca_file(pki.ca());
    half.tls_options.cert_file = Some(pki.client_cert());
    let mismatched = base
        .clone()
        .tls_ca_file(pki.ca())
        .tls_client_cert(pki.client_cert(), pki.path("server.key"));
    for (config, expected) in [(half, "tls_key"), (mismatched, "do not go together")] {
        match config.check() {
            Err(RedisError::Config(message)) => {
                assert!(message.contains(expected), "{message}")
            }
            other => panic!("expected Config ({expected}), got {other:?}"),
        }
    }
    Ok(())
}
