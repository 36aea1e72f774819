//! TLS to PostgreSQL with libpq's `sslmode`s and a CA file, against a private server that
//! serves a certificate of a test CA: `verify-full` and `verify-ca` trust it through
//! `sslrootcert`, refuse it with another CA (promptly, with the reason), `require` encrypts
//! without a CA, `disable` does not encrypt. The server's own `pg_stat_ssl` says which.

mod common;
mod tls_pki;
mod worker_common;

use std::time::{Duration, Instant};

use anyhow::Result;
use bullmq_postgres::{PgConfig, PostgresBackend};
use common::pg_server::PgServer;
use ractor_bullmq::{Worker, WorkerArgs, WorkerOptions};
use serde_json::json;

fn psql_at(url: &str, sql: &str) -> String {
    let out = std::process::Command::new("psql")
        .args(["-X", "-q", "-A", "-t", "-d", url, "-c", sql])
        .output()
        .expect("psql");
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// Opens the backend with `query` appended to the server's URL and runs a named worker, then
/// reports whether the server sees that worker's session encrypted.
async fn session_is_encrypted(server: &PgServer, query: &str, name: &str) -> Result<bool> {
    let url = format!("{}?schema=bullmq&{query}", server.url());
    let backend = PostgresBackend::open(PgConfig::from_url(&url)?).await?;
    let args = WorkerArgs::open(
        &backend,
        "tls",
        worker_common::scripted,
        WorkerOptions::new().name(name),
    )
    .await?;
    let worker = Worker::spawn(args).await?;
    let sql = format!(
        "SELECT s.ssl FROM pg_stat_ssl s JOIN pg_stat_activity a USING (pid) \
          WHERE a.application_name = 'tls:w:{name}'"
    );
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut seen = psql_at(&server.url(), &sql);
    while seen.is_empty() && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(100)).await;
        seen = psql_at(&server.url(), &sql);
    }
    worker.close().await?;
    Ok(seen == "t")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sslmodes_and_a_ca_file_behave_as_libpq_says() -> Result<()> {
    if !common::node_available() {
        return Ok(());
    }
    let pki = tls_pki::Pki::make("pg")?;
    let Some(server) =
        PgServer::start_with_tls(Some((&pki.path("server.pem"), &pki.path("server.key"))))?
    else {
        return Ok(());
    };
    common::run_node(
        "pg_migrate.js",
        &json!({"url": server.url(), "schemas": ["bullmq"]}),
    )
    .await?;
    let ca = pki.ca().display().to_string();
    let other = pki.other_ca().display().to_string();

    assert!(
        session_is_encrypted(
            &server,
            &format!("sslmode=verify-full&sslrootcert={ca}"),
            "full"
        )
        .await?
    );
    assert!(
        session_is_encrypted(
            &server,
            &format!("sslmode=verify-ca&sslrootcert={ca}"),
            "ca"
        )
        .await?
    );
    assert!(session_is_encrypted(&server, "sslmode=require", "require").await?);
    assert!(!session_is_encrypted(&server, "sslmode=disable", "plain").await?);

    for mode in ["verify-full", "verify-ca"] {
        let url = format!(
            "{}?schema=bullmq&sslmode={mode}&sslrootcert={other}&connect_timeout=5",
            server.url()
        );
        let started = Instant::now();
        let error = PostgresBackend::open(PgConfig::from_url(&url)?)
            .await
            .expect_err("a server of another CA is refused");
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "refused promptly"
        );
        let text = format!("{error:#}");
        assert!(
            text.contains("cannot connect") && text.to_lowercase().contains("certificate"),
            "{mode}: {text}"
        );
    }
    Ok(())
}
