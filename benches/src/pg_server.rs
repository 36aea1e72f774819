//! The PostgreSQL server side of the `postgres` group: an admin session, fresh schemas migrated
//! by Node BullMQ's own migrator (and dropped again), the server's counters around a scenario
//! (CPU, commits, WAL syncs) and the commit-rate floor (a `pgbench`-style loop).

use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use futures::StreamExt;
use serde::Serialize;
use serde_json::json;
use tokio_postgres::{AsyncMessage, Client, NoTls};

use crate::node;

/// The URL with the settings only bullmq-postgres knows (`schema`, `pool_size`, …) removed, for
/// tokio-postgres' own parser.
fn plain_url(url: &str) -> Result<String> {
    let mut parsed = url::Url::parse(url).with_context(|| format!("--pg-url {url}"))?;
    let rest: Vec<(String, String)> = parsed
        .query_pairs()
        .filter(|(k, _)| !matches!(k.as_ref(), "schema" | "pool_size" | "sslrootcert"))
        .map(|(k, v)| (k.into_owned(), v.into_owned()))
        .collect();
    if rest.is_empty() {
        parsed.set_query(None);
    } else {
        parsed.query_pairs_mut().clear().extend_pairs(rest);
    }
    Ok(parsed.to_string())
}

/// One plain session (no TLS: the benchmark runs on loopback), its driver spawned.
async fn connect(url: &str) -> Result<Client> {
    let (client, connection) = tokio_postgres::connect(url, NoTls)
        .await
        .with_context(|| format!("connecting to {url}"))?;
    tokio::spawn(async move {
        if let Err(error) = connection.await {
            eprintln!("postgres session ended: {error}");
        }
    });
    Ok(client)
}

/// The server's cumulative counters at one moment (see [`Server::counters`]).
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Counters {
    /// CPU seconds of the whole server (every backend, live or exited, and the background
    /// processes), when its processes are visible in this machine's `/proc`.
    pub(crate) cpu_s: Option<f64>,
    /// `pg_stat_database.xact_commit` of the benchmark's database.
    pub(crate) commits: i64,
    /// `pg_stat_wal.wal_sync` (fsyncs of the WAL; PostgreSQL ≥ 14).
    pub(crate) wal_syncs: Option<i64>,
    /// `pg_stat_wal.wal_bytes`.
    pub(crate) wal_bytes: Option<f64>,
}

/// What the server did between two [`Counters`].
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub(crate) struct Delta {
    /// Server CPU seconds.
    pub(crate) cpu_s: Option<f64>,
    /// Committed transactions (read-only ones included).
    pub(crate) commits: i64,
    /// WAL fsyncs.
    pub(crate) wal_syncs: Option<i64>,
    /// WAL bytes written.
    pub(crate) wal_bytes: Option<f64>,
}

impl Counters {
    /// `self - before`.
    pub(crate) fn since(&self, before: &Counters) -> Delta {
        Delta {
            cpu_s: self.cpu_s.zip(before.cpu_s).map(|(a, b)| a - b),
            commits: self.commits - before.commits,
            wal_syncs: self.wal_syncs.zip(before.wal_syncs).map(|(a, b)| a - b),
            wal_bytes: self.wal_bytes.zip(before.wal_bytes).map(|(a, b)| a - b),
        }
    }
}

/// The benchmark's handle on the server: the URL, an admin session and the postmaster's PID
/// (for CPU), when visible.
pub(crate) struct Server {
    /// The URL as given (for our backend and Node's).
    pub(crate) url: String,
    plain: String,
    admin: Client,
    postmaster: Option<u32>,
    run_id: String,
    made: std::sync::atomic::AtomicU32,
}

/// How long an idle backend may keep its statistics before PostgreSQL (≥ 15) publishes them
/// (`PGSTAT_MIN_INTERVAL`, 1 s), with a margin: read the counters only after waiting this long.
pub(crate) const STATS_SETTLE: Duration = Duration::from_millis(1300);

impl Server {
    /// Connects the admin session and finds the server's processes.
    pub(crate) async fn open(url: &str) -> Result<Self> {
        let plain = plain_url(url)?;
        let admin = connect(&plain).await?;
        let pid: i32 = admin
            .query_one("SELECT pg_backend_pid()", &[])
            .await?
            .get(0);
        let postmaster = u32::try_from(pid)
            .ok()
            .and_then(parent_pid)
            .filter(|ppid| is_postgres(*ppid));
        if postmaster.is_none() {
            eprintln!(
                "the server's processes are not visible here: PostgreSQL CPU is not measured"
            );
        }
        let run_id = format!("{:x}", std::process::id());
        Ok(Self {
            url: url.to_string(),
            plain,
            admin,
            postmaster,
            run_id,
            made: std::sync::atomic::AtomicU32::new(0),
        })
    }

    /// `version()`'s first words and the settings that bound a commit.
    pub(crate) async fn describe(&self) -> Result<String> {
        let version: String = self
            .admin
            .query_one("SHOW server_version", &[])
            .await?
            .get(0);
        let mut settings = Vec::new();
        for name in [
            "fsync",
            "synchronous_commit",
            "wal_sync_method",
            "commit_delay",
            "shared_buffers",
        ] {
            let value: String = self
                .admin
                .query_one(&format!("SHOW {name}"), &[])
                .await?
                .get(0);
            settings.push(format!("{name}={value}"));
        }
        Ok(format!("PostgreSQL {version} ({})", settings.join(", ")))
    }

    /// The server's counters now.
    pub(crate) async fn counters(&self) -> Result<Counters> {
        let commits: i64 = self
            .admin
            .query_one(
                "SELECT xact_commit FROM pg_stat_database WHERE datname = current_database()",
                &[],
            )
            .await?
            .get(0);
        let (wal_syncs, wal_bytes) = match self
            .admin
            .query_one("SELECT wal_sync, wal_bytes::float8 FROM pg_stat_wal", &[])
            .await
        {
            Ok(row) => (Some(row.get::<_, i64>(0)), Some(row.get::<_, f64>(1))),
            Err(_) => (None, None),
        };
        Ok(Counters {
            cpu_s: self.postmaster.and_then(server_cpu_seconds),
            commits,
            wal_syncs,
            wal_bytes,
        })
    }

    /// Counters once every idle session has published its statistics.
    pub(crate) async fn settled_counters(&self) -> Result<Counters> {
        tokio::time::sleep(STATS_SETTLE).await;
        self.counters().await
    }

    /// A new schema name of this run: `bench_<pid>_<n>_<label>`.
    fn schema_name(&self, label: &str) -> String {
        let n = self.made.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let label: String = label
            .chars()
            .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
            .take(30)
            .collect();
        format!("bench_{}_{n}_{label}", self.run_id).to_ascii_lowercase()
    }

    /// A fresh schema migrated by Node BullMQ 6.7.0's migrator
    /// (`integration-tests/node/pg_migrate.js`); drop it with [`Server::drop_schema`].
    pub(crate) async fn fresh_schema(&self, label: &str) -> Result<String> {
        let name = self.schema_name(label);
        let reply = node::run_oracle(
            "pg_migrate.js",
            &json!({"url": self.url, "schemas": [name]}),
        )
        .await;
        match reply {
            Ok(out) if out["migrated"].as_array().map(Vec::len) == Some(1) => Ok(name),
            Ok(out) => {
                self.drop_schema(&name).await.ok();
                bail!("pg_migrate.js did not migrate {name}: {out}")
            }
            Err(error) => {
                self.drop_schema(&name).await.ok();
                Err(error)
            }
        }
    }

    /// `DROP SCHEMA IF EXISTS … CASCADE` (the per-queue id sequences live in it too).
    pub(crate) async fn drop_schema(&self, name: &str) -> Result<()> {
        self.admin
            .batch_execute(&format!("DROP SCHEMA IF EXISTS \"{name}\" CASCADE"))
            .await
            .with_context(|| format!("dropping schema {name}"))
    }

    /// Jobs of `queue` in `schema` by state.
    pub(crate) async fn count(&self, schema: &str, queue: &str, state: &str) -> Result<u64> {
        let n: i64 = self
            .admin
            .query_one(
                &format!(
                    "SELECT count(*) FROM \"{schema}\".job WHERE queue = $1 AND state::text = $2"
                ),
                &[&queue, &state],
            )
            .await?
            .get(0);
        Ok(u64::try_from(n).unwrap_or(0))
    }

    /// Up to `n` ids of `queue`'s completed jobs, spread evenly over the run.
    pub(crate) async fn completed_sample(
        &self,
        schema: &str,
        queue: &str,
        n: usize,
    ) -> Result<Vec<String>> {
        let rows = self
            .admin
            .query(
                &format!(
                    "SELECT id FROM \"{schema}\".job WHERE queue = $1 AND state = 'completed' \
                     ORDER BY seq"
                ),
                &[&queue],
            )
            .await?;
        let step = (rows.len() / n.max(1)).max(1);
        Ok(rows
            .iter()
            .step_by(step)
            .take(n)
            .map(|r| r.get::<_, String>(0))
            .collect())
    }

    /// The commit floor: `clients` sessions, each committing a one-row `INSERT` (with
    /// `notify`, the same statement also calls `pg_notify`, heard by one LISTEN session, as a
    /// BullMQ add or finish does) as fast as it can for `duration`.
    /// With `counters`, the server's CPU and WAL syncs per commit are measured too (waiting
    /// for the statistics to settle before and after).
    pub(crate) async fn commit_floor(
        &self,
        clients: usize,
        notify: bool,
        duration: Duration,
        counters: bool,
    ) -> Result<FloorMeasurement> {
        let schema = self.schema_name(if notify { "floor_notify" } else { "floor" });
        self.admin
            .batch_execute(&format!(
                "CREATE SCHEMA \"{schema}\"; \
                 CREATE TABLE \"{schema}\".t (id bigserial PRIMARY KEY, v int NOT NULL)"
            ))
            .await
            .context("creating the commit-floor table")?;
        let result = self
            .floor_loop(&schema, (clients, notify), duration, counters)
            .await;
        self.drop_schema(&schema).await?;
        result
    }

    async fn floor_loop(
        &self,
        schema: &str,
        (clients, notify): (usize, bool),
        duration: Duration,
        counters: bool,
    ) -> Result<FloorMeasurement> {
        let channel = format!("{schema}_ch");
        let listener = if notify {
            Some(Listener::start(&self.plain, &channel).await?)
        } else {
            None
        };
        let sql = if notify {
            format!(
                "WITH i AS (INSERT INTO \"{schema}\".t (v) VALUES ($1) RETURNING id) \
                 SELECT pg_notify('{channel}', id::text) FROM i"
            )
        } else {
            format!("INSERT INTO \"{schema}\".t (v) VALUES ($1)")
        };
        let mut sessions = Vec::with_capacity(clients);
        for _ in 0..clients {
            let client = connect(&self.plain).await?;
            let statement = client.prepare(&sql).await?;
            sessions.push((client, statement));
        }
        let before = if counters {
            self.settled_counters().await?
        } else {
            Counters::default()
        };
        let started = Instant::now();
        let deadline = started + duration;
        let tasks: Vec<_> = sessions
            .into_iter()
            .map(|(client, statement)| {
                tokio::spawn(async move {
                    let mut commits = 0u64;
                    while Instant::now() < deadline {
                        client.execute(&statement, &[&1i32]).await?;
                        commits += 1;
                    }
                    Ok::<_, tokio_postgres::Error>(commits)
                })
            })
            .collect();
        let mut commits = 0;
        for task in tasks {
            commits += task.await??;
        }
        let seconds = started.elapsed().as_secs_f64();
        let heard = match listener {
            Some(listener) => Some(listener.stop().await),
            None => None,
        };
        let delta = if counters {
            self.settled_counters().await?.since(&before)
        } else {
            Delta::default()
        };
        Ok(FloorMeasurement {
            loop_name: if notify { "insert_notify" } else { "insert" },
            clients,
            commits,
            seconds,
            commits_per_s: commits as f64 / seconds.max(1e-9),
            server_cpu_us_per_commit: delta.cpu_s.map(|s| s * 1e6 / commits.max(1) as f64),
            wal_syncs_per_commit: delta.wal_syncs.map(|n| n as f64 / commits.max(1) as f64),
            notifications_heard: heard,
        })
    }
}

/// A LISTEN session counting what it hears, as a worker's wait would.
struct Listener {
    client: Client,
    heard: tokio::task::JoinHandle<u64>,
}

impl Listener {
    async fn start(url: &str, channel: &str) -> Result<Self> {
        let (client, mut connection) = tokio_postgres::connect(url, NoTls).await?;
        let heard = tokio::spawn(async move {
            let mut messages = futures::stream::poll_fn(move |cx| connection.poll_message(cx));
            let mut heard = 0;
            while let Some(Ok(message)) = messages.next().await {
                if matches!(message, AsyncMessage::Notification(_)) {
                    heard += 1;
                }
            }
            heard
        });
        client
            .batch_execute(&format!("LISTEN \"{channel}\""))
            .await?;
        Ok(Self { client, heard })
    }

    /// Lets the last notifications arrive, closes the session; what it heard.
    async fn stop(self) -> u64 {
        tokio::time::sleep(Duration::from_millis(200)).await;
        drop(self.client);
        self.heard.await.unwrap_or(0)
    }
}

/// One commit-floor loop.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct FloorMeasurement {
    /// `insert` or `insert_notify`.
    #[serde(rename = "floor")]
    pub(crate) loop_name: &'static str,
    /// Sessions committing at once.
    pub(crate) clients: usize,
    /// Transactions committed.
    pub(crate) commits: u64,
    /// Wall-clock seconds.
    pub(crate) seconds: f64,
    /// `commits / seconds`.
    pub(crate) commits_per_s: f64,
    /// Server CPU per commit, µs.
    pub(crate) server_cpu_us_per_commit: Option<f64>,
    /// WAL fsyncs per commit (below 1: group commit).
    pub(crate) wal_syncs_per_commit: Option<f64>,
    /// Notifications the LISTEN session received (`insert_notify`).
    pub(crate) notifications_heard: Option<u64>,
}

impl FloorMeasurement {
    /// `insert ×10` / `insert_notify ×1`.
    pub(crate) fn label(&self) -> String {
        format!("{} ×{}", self.loop_name, self.clients)
    }
}

/// `/proc/<pid>/stat` fields after the command name (field 3 is the first).
fn stat_fields(pid: u32) -> Option<Vec<String>> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let after_name = stat.get(stat.rfind(')')? + 2..)?;
    Some(after_name.split(' ').map(str::to_string).collect())
}

fn parent_pid(pid: u32) -> Option<u32> {
    stat_fields(pid)?.get(1)?.parse().ok()
}

fn is_postgres(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/comm"))
        .map(|c| c.trim().starts_with("postgres"))
        .unwrap_or(false)
}

/// Clock ticks per second of `/proc` times (as `process_cpu`).
const TICKS_PER_SEC: f64 = 100.0;

/// The whole server's CPU seconds: the postmaster's own and its reaped children's (exited
/// backends), plus every live child's.
fn server_cpu_seconds(postmaster: u32) -> Option<f64> {
    let ticks = |fields: &[String], range: std::ops::Range<usize>| -> f64 {
        fields
            .get(range)
            .unwrap_or_default()
            .iter()
            .filter_map(|f| f.parse::<f64>().ok())
            .sum()
    };
    // utime, stime, cutime, cstime are fields 14..=17, i.e. 11..15 after the name.
    let own = stat_fields(postmaster)?;
    let mut total = ticks(&own, 11..15);
    for entry in std::fs::read_dir("/proc").ok()?.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|s| s.parse::<u32>().ok())
        else {
            continue;
        };
        if let Some(fields) = stat_fields(pid) {
            if fields.get(1).and_then(|p| p.parse::<u32>().ok()) == Some(postmaster)
                && fields.len() > 14
            {
                total += ticks(&fields, 11..13);
            }
        }
    }
    Some(total / TICKS_PER_SEC)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_url_drops_the_settings_only_bullmq_postgres_reads() {
        assert_eq!(
            plain_url("postgres://postgres@127.0.0.1:5432/test?schema=x&pool_size=3").unwrap(),
            "postgres://postgres@127.0.0.1:5432/test"
        );
        assert_eq!(
            plain_url("postgres://u@h/db?schema=x&connect_timeout=5").unwrap(),
            "postgres://u@h/db?connect_timeout=5"
        );
    }

    #[test]
    fn deltas_subtract_what_both_sides_know() {
        let before = Counters {
            cpu_s: Some(1.0),
            commits: 10,
            wal_syncs: None,
            wal_bytes: Some(100.0),
        };
        let after = Counters {
            cpu_s: Some(3.5),
            commits: 25,
            wal_syncs: Some(4),
            wal_bytes: Some(400.0),
        };
        let d = after.since(&before);
        assert_eq!(d.cpu_s, Some(2.5));
        assert_eq!(d.commits, 15);
        assert_eq!(d.wal_syncs, None);
        assert_eq!(d.wal_bytes, Some(300.0));
    }
}
