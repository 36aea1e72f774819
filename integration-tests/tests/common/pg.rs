//! PostgreSQL fixtures of the interop tests: the server's URL, a loud skip when none answers,
//! fresh schemas migrated by Node BullMQ 6.7.0's own migrator and dropped again, and the Node
//! and Python oracles run against such a schema.
//!
//! Everything goes through `psql` and the oracle scripts (no Rust PostgreSQL client here: that
//! comes with `crates/bullmq-postgres`). Every schema a test makes is a [`FreshSchema`], dropped
//! (`DROP SCHEMA … CASCADE`, which also removes the per-queue `bullmq_jid_*` id sequences: Node
//! creates them inside the schema) when it goes out of scope, panics included.

use std::path::PathBuf;
use std::process::Command;
use std::sync::{Mutex, OnceLock};

use anyhow::{bail, Context, Result};
use serde_json::{json, Value as Json};

use super::{node_available, run_node, unique_queue};

/// The PostgreSQL every PG test talks to: `PG_URL`, default
/// `postgres://postgres@127.0.0.1:5432/test`.
pub fn pg_url() -> String {
    match std::env::var("PG_URL") {
        Ok(url) if !url.is_empty() => url,
        _ => "postgres://postgres@127.0.0.1:5432/test".to_string(),
    }
}

/// The ledger version Node BullMQ 6.7.0's migrator leaves (`MAX(version)` of `migration`).
pub const NODE_LEDGER_VERSION: i64 = 11;

/// A `psql` command on [`pg_url`]: no psqlrc, unaligned tuples only, stop at the first error,
/// give up connecting after 5 s.
fn psql_command() -> Command {
    let mut cmd = Command::new("psql");
    cmd.args(["-X", "-q", "-A", "-t", "-v", "ON_ERROR_STOP=1", "-d"])
        .arg(pg_url())
        .env("PGCONNECT_TIMEOUT", "5");
    cmd
}

/// Runs `sql` (one or more statements) with `psql` and returns what it printed, trimmed: rows
/// one a line, columns separated by `|`. Blocking: for fixtures and assertions only.
pub fn psql(sql: &str) -> Result<String> {
    let output = psql_command()
        .arg("-c")
        .arg(sql)
        .output()
        .context("could not start `psql`")?;
    if !output.status.success() {
        bail!(
            "`psql -c {sql}` failed ({}): {}",
            output.status,
            String::from_utf8_lossy(&output.stderr)
        );
    }
    Ok(String::from_utf8_lossy(&output.stdout).trim().to_string())
}

/// Whether a PostgreSQL answers at [`pg_url`] (and `psql`, which the fixtures need, is there).
/// When not, prints a loud message so a test that returns early because of it is visible.
/// Probed once per test binary.
pub fn pg_available() -> bool {
    static PROBE: OnceLock<std::result::Result<(), String>> = OnceLock::new();
    let probe = PROBE.get_or_init(|| match psql_command().arg("-c").arg("SELECT 1").output() {
        Ok(out) if out.status.success() => Ok(()),
        Ok(out) => Err(format!(
            "no PostgreSQL answers at {}: {}",
            pg_url(),
            String::from_utf8_lossy(&out.stderr).trim()
        )),
        Err(e) => Err(format!("`psql` could not start ({e})")),
    });
    match probe {
        Ok(()) => true,
        Err(reason) => {
            eprintln!(
                "\n!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!\n\
                 !!! SKIPPING PostgreSQL test: {reason}\n\
                 !!! It needs PostgreSQL >= 13 at PG_URL (default\n\
                 !!! postgres://postgres@127.0.0.1:5432/test) and `psql` on PATH; .ci/run\n\
                 !!! starts a throw-away server when none answers.\n\
                 !!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!\n"
            );
            false
        }
    }
}

/// Both a PostgreSQL and the Node oracle (each skips loudly on its own).
pub fn pg_and_node_available() -> bool {
    pg_available() && node_available()
}

/// A schema name no other test (or earlier run) uses: `t_<hex>_<n>`, lowercase, valid for
/// Node's `^[A-Za-z_][A-Za-z0-9_$]*$` and well under 63 characters.
pub fn unique_schema() -> String {
    unique_queue("t").replace('-', "_")
}

/// Whether the schema `name` exists.
pub fn schema_exists(name: &str) -> Result<bool> {
    Ok(psql(&format!(
        "SELECT count(*) FROM pg_namespace WHERE nspname = '{}'",
        name.replace('\'', "''")
    ))? == "1")
}

/// A schema of its own for one test, migrated by Node BullMQ's migrator
/// (`node/pg_migrate.js`, i.e. `runMigrations`), dropped with `DROP SCHEMA … CASCADE` when
/// dropped (a blocking `psql` call, so it also runs when the test panics; a failure to drop is
/// printed, never a panic) or earlier with [`FreshSchema::drop_now`].
#[derive(Debug)]
pub struct FreshSchema {
    pub name: String,
    dropped: bool,
}

impl FreshSchema {
    /// A new schema migrated by Node (ledger version [`NODE_LEDGER_VERSION`]).
    pub async fn migrated_by_node() -> Result<Self> {
        let mut schemas = Self::many_migrated_by_node(1).await?;
        Ok(schemas.pop().expect("one schema"))
    }

    /// `n` new schemas migrated by one Node process (about 70 ms a schema instead of 0.3 s).
    pub async fn many_migrated_by_node(n: usize) -> Result<Vec<Self>> {
        // Owned from the start, so the schemas made before a failure are dropped too.
        let schemas: Vec<Self> = (0..n)
            .map(|_| Self {
                name: unique_schema(),
                dropped: false,
            })
            .collect();
        let names: Vec<&str> = schemas.iter().map(|s| s.name.as_str()).collect();
        let out = run_node("pg_migrate.js", &json!({"url": pg_url(), "schemas": names})).await?;
        if out["migrated"].as_array().map(Vec::len) != Some(n) {
            bail!("pg_migrate.js did not migrate every schema: {out}");
        }
        if out["version"] != json!(NODE_LEDGER_VERSION) {
            bail!(
                "pg_migrate.js left ledger version {}, expected {NODE_LEDGER_VERSION}: {out}",
                out["version"]
            );
        }
        Ok(schemas)
    }

    /// The schema name double-quoted, for SQL text.
    pub fn quoted(&self) -> String {
        format!("\"{}\"", self.name)
    }

    /// Drops the schema now (`DROP SCHEMA IF EXISTS … CASCADE`); the later drop does nothing.
    pub fn drop_now(&mut self) -> Result<()> {
        self.dropped = true;
        psql(&format!("DROP SCHEMA IF EXISTS {} CASCADE", self.quoted())).map(|_| ())
    }
}

impl Drop for FreshSchema {
    fn drop(&mut self) {
        if !self.dropped {
            if let Err(e) = self.drop_now() {
                eprintln!("could not drop test schema {}: {e:#}", self.name);
            }
        }
    }
}

/// `arg` (a JSON object) with the PostgreSQL backend selected for the Node oracle scripts:
/// `backend: "postgres"`, `pgUrl`, `schema` (see `node/lib.js`).
pub fn pg_args(schema: &str, arg: &Json) -> Json {
    let mut arg = arg.clone();
    let object = arg
        .as_object_mut()
        .expect("the argument of a Node oracle script is a JSON object");
    object.insert("backend".into(), json!("postgres"));
    object.insert("pgUrl".into(), json!(pg_url()));
    object.insert("schema".into(), json!(schema));
    arg
}

/// Runs `integration-tests/node/{script}` on Node's PostgreSQL backend in `schema` (see
/// [`pg_args`]); its JSON output.
pub async fn run_node_pg(script: &str, schema: &str, arg: &Json) -> Result<Json> {
    run_node(script, &pg_args(schema, arg)).await
}

/// Every queue table of `schema` as `node/pg_dump_tables.js` prints it:
/// `{schema, tables: {job: [row...], job_dependency, event, meta, dedup, dedup_next, scheduler,
/// rate_limit, metrics, job_log}}`, rows in primary-key order, enums as text. `queues` (when
/// given) keeps only those queues' rows.
pub async fn dump_tables(schema: &str, queues: Option<&[&str]>) -> Result<Json> {
    let mut arg = json!({"pgUrl": pg_url(), "schema": schema});
    if let Some(queues) = queues {
        arg["queues"] = json!(queues);
    }
    run_node("pg_dump_tables.js", &arg).await
}

/// Directory of the Python oracle scripts (`integration-tests/python`).
pub fn python_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("python")
}

fn ran_ok(cmd: &mut Command) -> std::result::Result<(), String> {
    match cmd.output() {
        Ok(out) if out.status.success() => Ok(()),
        Ok(out) => Err(format!(
            "{cmd:?} failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        )),
        Err(e) => Err(format!("{cmd:?} could not start: {e}")),
    }
}

/// Creates (if needed) `python/.venv` with `python/requirements.txt` (PyPI bullmq 3.4.4 and its
/// `postgres` extra); its python, or why it cannot be had.
fn setup_python_pg() -> std::result::Result<PathBuf, String> {
    let venv = python_dir().join(".venv");
    let python = venv.join("bin").join("python");
    let importable = |python: &PathBuf| {
        ran_ok(Command::new(python).args([
            "-c",
            "import bullmq, psycopg, importlib.metadata as m; \
             assert m.version('bullmq') == '3.4.4', m.version('bullmq')",
        ]))
    };
    if importable(&python).is_ok() {
        return Ok(python);
    }
    if !python.exists() {
        ran_ok(Command::new("python3").args(["-m", "venv"]).arg(&venv))?;
    }
    ran_ok(
        Command::new(&python)
            .args([
                "-m",
                "pip",
                "install",
                "--quiet",
                "--disable-pip-version-check",
                "-r",
            ])
            .arg(python_dir().join("requirements.txt")),
    )?;
    importable(&python)?;
    Ok(python)
}

/// The venv's python with PyPI bullmq's PostgreSQL backend, set up once per test binary;
/// `None` (after a loud message) when it cannot be.
pub fn python_pg() -> Option<PathBuf> {
    static SETUP: Mutex<Option<std::result::Result<PathBuf, String>>> = Mutex::new(None);
    let mut setup = SETUP.lock().unwrap_or_else(|e| e.into_inner());
    match setup.get_or_insert_with(setup_python_pg).clone() {
        Ok(python) => Some(python),
        Err(reason) => {
            eprintln!(
                "\n!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!\n\
                 !!! SKIPPING Python BullMQ PostgreSQL test: {reason}\n\
                 !!! It needs python3 with venv and pip access to PyPI (bullmq[postgres], see\n\
                 !!! integration-tests/python/requirements.txt).\n\
                 !!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!\n"
            );
            None
        }
    }
}

/// Adds `jobs` (`[{name, data, opts}]`) to `queue` in `schema` with Python BullMQ's PostgreSQL
/// backend (`python/pg_producer.py`); the ids it returned, in order.
pub async fn python_pg_add(
    python: &PathBuf,
    schema: &str,
    queue: &str,
    jobs: &Json,
) -> Result<Vec<String>> {
    use tokio::io::AsyncWriteExt;

    let arg = json!({"url": pg_url(), "schema": schema, "queue": queue, "jobs": jobs});
    let mut child = tokio::process::Command::new(python)
        .arg("pg_producer.py")
        .current_dir(python_dir())
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .context("could not start python")?;
    let mut stdin = child.stdin.take().context("python's stdin")?;
    stdin.write_all(arg.to_string().as_bytes()).await?;
    stdin.shutdown().await?;
    drop(stdin);
    let out = child.wait_with_output().await?;
    if !out.status.success() {
        bail!(
            "pg_producer.py {arg} failed ({}):\n{}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let printed: Json = serde_json::from_slice(&out.stdout).with_context(|| {
        format!(
            "pg_producer.py printed no JSON: {}",
            String::from_utf8_lossy(&out.stdout)
        )
    })?;
    printed["ids"]
        .as_array()
        .context("pg_producer.py printed no ids")?
        .iter()
        .map(|id| {
            id.as_str()
                .map(str::to_string)
                .context("a job id is not a string")
        })
        .collect()
}

/// A backend on `schema` of [`pg_url`].
pub async fn pg_backend(schema: &str) -> Result<std::sync::Arc<bullmq_postgres::PostgresBackend>> {
    let config = bullmq_postgres::PgConfig::from_url(&pg_url())?.with_schema(schema)?;
    Ok(std::sync::Arc::new(
        bullmq_postgres::PostgresBackend::open(config).await?,
    ))
}

/// Polls [`psql`] until `sql` (a count) reaches `n`, or fails after `timeout`.
pub async fn until_count(sql: &str, n: i64, timeout: std::time::Duration) -> Result<()> {
    let start = std::time::Instant::now();
    loop {
        let got: i64 = psql(sql)?.parse().unwrap_or(-1);
        if got >= n {
            return Ok(());
        }
        if start.elapsed() > timeout {
            bail!("`{sql}` is {got} after {timeout:?}, expected {n}");
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
}
