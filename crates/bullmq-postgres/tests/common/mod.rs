//! The schema the crate's tests run on: one per test process, migrated by Node BullMQ 6.7.0's
//! own migrator (`integration-tests/node/pg_migrate.js`), named `rs_test_<pid>`. Schemas of
//! earlier runs whose process is gone are dropped when the next run starts, so a crashed run
//! leaves nothing behind for long.
#![allow(dead_code, unreachable_pub)]

use std::path::PathBuf;
use std::process::Command;
use std::sync::Arc;

use bullmq_postgres::{PgConfig, PostgresBackend};
use tokio::sync::OnceCell;

/// `PG_URL`, default `postgres://postgres@127.0.0.1:5432/test`.
pub fn pg_url() -> String {
    match std::env::var("PG_URL") {
        Ok(url) if !url.is_empty() => url,
        _ => "postgres://postgres@127.0.0.1:5432/test".to_string(),
    }
}

fn node_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../integration-tests/node")
}

pub fn psql(sql: &str) -> String {
    let out = Command::new("psql")
        .args(["-X", "-q", "-A", "-t", "-v", "ON_ERROR_STOP=1", "-d"])
        .arg(pg_url())
        .arg("-c")
        .arg(sql)
        .output()
        .expect("psql (PostgreSQL's client) must be installed for these tests");
    assert!(
        out.status.success(),
        "psql -c {sql}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// Migrates `schemas` with Node's migrator.
pub fn node_migrate(schemas: &[&str]) {
    let arg = serde_json::json!({ "url": pg_url(), "schemas": schemas }).to_string();
    let out = Command::new("node")
        .arg("pg_migrate.js")
        .arg(arg)
        .current_dir(node_dir())
        .output()
        .expect("node must be installed (and `npm ci` run in integration-tests/node)");
    assert!(
        out.status.success(),
        "pg_migrate.js: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Drops the schemas of test processes that no longer run.
fn drop_stale_schemas() {
    let names = psql("SELECT nspname FROM pg_namespace WHERE nspname LIKE 'rs\\_test\\_%'");
    for name in names.lines() {
        let pid = name.trim_start_matches("rs_test_");
        let alive = pid
            .parse::<u32>()
            .is_ok_and(|pid| std::path::Path::new(&format!("/proc/{pid}")).exists());
        if !alive {
            psql(&format!("DROP SCHEMA IF EXISTS \"{name}\" CASCADE"));
        }
    }
}

/// This process's schema, migrated once.
pub async fn schema() -> &'static str {
    static SCHEMA: OnceCell<String> = OnceCell::const_new();
    SCHEMA
        .get_or_init(|| async {
            let name = format!("rs_test_{}", std::process::id());
            tokio::task::spawn_blocking(move || {
                drop_stale_schemas();
                node_migrate(&[&name]);
                name
            })
            .await
            .expect("migrating the test schema")
        })
        .await
}

/// A backend on this process's schema.
pub async fn backend() -> Arc<PostgresBackend> {
    let schema = schema().await;
    let config = PgConfig::from_url(&pg_url())
        .and_then(|c| c.with_schema(schema))
        .expect("PG_URL");
    Arc::new(
        PostgresBackend::open(config)
            .await
            .expect("open the test schema"),
    )
}
