//! The `bullmq` binary on PostgreSQL at `PG_URL` (default
//! `postgres://postgres@127.0.0.1:5432/test`), each test on a fresh schema made by Node
//! BullMQ's own migrator (`integration-tests/node/pg_migrate.js`) and dropped again at its
//! end, panics included; queues filled and processed by Node (the oracle scripts on Node's
//! PostgreSQL backend) and by the CLI itself. Skipped loudly when `node` or PostgreSQL (with
//! `psql`) is missing.

mod common;

use std::process::{Child, Command, Output};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use common::{json_of, node, node_available, node_dir, redis_url, spawn_node, text};
use serde_json::{json, Value};

/// `PG_URL`, or the local default.
fn pg_url() -> String {
    std::env::var("PG_URL")
        .ok()
        .filter(|u| !u.is_empty())
        .unwrap_or_else(|| "postgres://postgres@127.0.0.1:5432/test".into())
}

/// [`pg_url`] with `?schema=` (or `&schema=`) set to `schema`.
fn url_of(schema: &str) -> String {
    let base = pg_url();
    let glue = if base.contains('?') { '&' } else { '?' };
    format!("{base}{glue}schema={schema}")
}

/// `psql` on [`pg_url`]: no psqlrc, unaligned tuples only, stop at the first error.
fn psql(sql: &str) -> Result<String, String> {
    let out = Command::new("psql")
        .args(["-X", "-q", "-A", "-t", "-v", "ON_ERROR_STOP=1", "-d"])
        .arg(pg_url())
        .arg("-c")
        .arg(sql)
        .env("PGCONNECT_TIMEOUT", "5")
        .output()
        .map_err(|e| format!("`psql` could not start ({e})"))?;
    if out.status.success() {
        Ok(text(&out.stdout).trim().to_owned())
    } else {
        Err(text(&out.stderr).trim().to_owned())
    }
}

/// Whether PostgreSQL answers at [`pg_url`] (through `psql`, which the fixtures need) and the
/// Node oracle can run; a loud note when not.
fn available() -> bool {
    static PROBE: OnceLock<Result<(), String>> = OnceLock::new();
    let probe = PROBE.get_or_init(|| {
        psql("SELECT 1")
            .map(drop)
            .map_err(|e| format!("no PostgreSQL answers at {}: {e}", pg_url()))
    });
    if let Err(reason) = probe {
        eprintln!(
            "\n!!! SKIPPING the CLI's PostgreSQL tests: {reason}; they need PostgreSQL >= 13 at \
             PG_URL (default postgres://postgres@127.0.0.1:5432/test) and `psql` on PATH !!!\n"
        );
        return false;
    }
    node_available()
}

/// A schema name no other test (or earlier run) uses, valid for Node's migrator.
fn unique_schema() -> String {
    static N: AtomicU32 = AtomicU32::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    format!(
        "cli_{}_{nanos}_{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    )
}

/// A schema of one test, migrated by Node's migrator, dropped (`DROP SCHEMA … CASCADE`) when
/// it goes out of scope, also when the test panics.
struct FreshSchema {
    name: String,
}

impl FreshSchema {
    fn migrated_by_node() -> Self {
        let schema = Self {
            name: unique_schema(),
        };
        let arg = json!({"url": pg_url(), "schemas": [schema.name]});
        let out = Command::new("node")
            .arg("pg_migrate.js")
            .arg(arg.to_string())
            .current_dir(node_dir())
            .output()
            .expect("node runs pg_migrate.js");
        assert!(
            out.status.success(),
            "pg_migrate.js failed: {}",
            text(&out.stderr)
        );
        let report: Value = serde_json::from_slice(&out.stdout).expect("pg_migrate.js prints JSON");
        assert_eq!(report["migrated"], json!([schema.name]), "{report}");
        schema
    }

    fn url(&self) -> String {
        url_of(&self.name)
    }

    /// The common arguments of the Node oracle scripts on this schema.
    fn node_args(&self, queue: &str, extra: Value) -> Value {
        let mut arg =
            json!({"queue": queue, "backend": "postgres", "pgUrl": pg_url(), "schema": self.name});
        if let (Value::Object(arg), Value::Object(extra)) = (&mut arg, extra) {
            arg.extend(extra);
        }
        arg
    }

    /// Adds `jobs` (`[{name, data, opts}]`) to `queue` with Node; their ids.
    fn node_add(&self, queue: &str, jobs: Value) -> Vec<String> {
        let out = node("add_jobs.js", &self.node_args(queue, json!({"jobs": jobs})));
        out["ids"]
            .as_array()
            .expect("ids")
            .iter()
            .map(|id| id.as_str().expect("a string id").to_owned())
            .collect()
    }

    /// A Node worker processes `count` attempts of `queue` and stops.
    fn node_work(&self, queue: &str, count: usize) -> Value {
        let arg = self.node_args(queue, json!({"stopAfter": count, "timeoutMs": 60_000}));
        let out = node("run_worker.js", &arg);
        assert_eq!(
            out["stoppedBy"], "count",
            "the Node worker ran out of time: {out}"
        );
        out
    }

    /// Runs `bullmq --url <this schema> ARGS…`.
    fn bullmq(&self, args: &[&str]) -> Output {
        bullmq_with(&["--url", &self.url()], args, &[])
    }

    /// As [`FreshSchema::bullmq`], the JSON of a successful `--json` run.
    fn json(&self, args: &[&str]) -> Value {
        let mut all = vec!["--json"];
        all.extend_from_slice(args);
        json_of(&self.bullmq(&all))
    }
}

impl Drop for FreshSchema {
    fn drop(&mut self) {
        let sql = format!(
            "SET client_min_messages = warning; DROP SCHEMA IF EXISTS \"{}\" CASCADE",
            self.name
        );
        if let Err(error) = psql(&sql) {
            eprintln!("could not drop test schema {}: {error}", self.name);
        }
    }
}

/// Runs `bullmq FIRST… ARGS…` with no URL variable set but those of `env`.
fn bullmq_with(first: &[&str], args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut command = Command::new(env!("CARGO_BIN_EXE_bullmq"));
    command
        .args(first)
        .args(args)
        .env_remove("BULLMQ_URL")
        .env_remove("REDIS_URL")
        .env_remove("RUST_LOG");
    for (key, value) in env {
        command.env(key, value);
    }
    command.output().expect("the bullmq binary runs")
}

/// Stderr of a run that failed with `code`, which must be one line.
fn failure(out: &Output, code: i32) -> String {
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(code), "stderr: {stderr}");
    let lines: Vec<&str> = stderr.lines().filter(|l| !l.trim().is_empty()).collect();
    assert_eq!(lines.len(), 1, "one line expected: {stderr}");
    assert!(lines[0].starts_with("error: "), "{stderr}");
    lines[0].to_owned()
}

fn ids(jobs: &Value) -> Vec<String> {
    let mut ids: Vec<String> = jobs
        .as_array()
        .expect("jobs")
        .iter()
        .map(|job| job["id"].as_str().expect("id").to_owned())
        .collect();
    ids.sort();
    ids
}

#[test]
fn inspecting_queues_node_filled_and_processed() {
    if !available() {
        return;
    }
    let schema = FreshSchema::migrated_by_node();
    let jobs = json!([
        {"name": "ok-1", "data": {"returnValue": {"sent": 1}}},
        {"name": "ok-2", "data": {}},
        {"name": "ok-3", "data": {}},
        {"name": "bad-1", "data": {"fail": "smtp down"}, "opts": {"attempts": 1}},
        {"name": "bad-2", "data": {"fail": "smtp down"}, "opts": {"attempts": 1}},
    ]);
    let added = schema.node_add("mail", jobs);
    schema.node_work("mail", 5);
    schema.node_add(
        "mail",
        json!([{"name": "later", "data": {}, "opts": {"delay": 600000}}]),
    );

    let stats = schema.json(&["stats", "mail"]);
    assert_eq!(stats["counts"]["completed"], 3, "{stats}");
    assert_eq!(stats["counts"]["failed"], 2, "{stats}");
    assert_eq!(stats["counts"]["delayed"], 1, "{stats}");
    assert_eq!(stats["counts"]["waiting"], 0, "{stats}");
    assert_eq!(stats["paused"], false, "{stats}");
    assert_eq!(stats["workers"], 0, "{stats}");
    let stats_text = text(&schema.bullmq(&["stats", "mail"]).stdout);
    assert!(
        stats_text.starts_with(&format!(
            "queue             mail (schema {})\n",
            schema.name
        )),
        "{stats_text}"
    );
    assert!(stats_text.contains("completed         3\n"), "{stats_text}");

    // The CLI's own queue next to Node's.
    assert!(schema
        .bullmq(&["add", "reports", "r1", "--priority", "3"])
        .status
        .success());
    let queues = schema.json(&["queues"]);
    assert_eq!(queues["schema"], schema.name.as_str(), "{queues}");
    assert_eq!(queues["server"]["postgres"]["migration"], 11, "{queues}");
    assert_eq!(queues["server"]["postgres"]["schema"], schema.name.as_str());
    let listed: Vec<&str> = queues["queues"]
        .as_array()
        .unwrap()
        .iter()
        .map(|q| q["queue"].as_str().unwrap())
        .collect();
    assert_eq!(listed, ["mail", "reports"], "{queues}");
    assert_eq!(queues["queues"][0]["counts"]["failed"], 2, "{queues}");
    assert_eq!(queues["queues"][1]["counts"]["prioritized"], 1, "{queues}");
    let table = text(&schema.bullmq(&["queues"]).stdout);
    assert!(table.starts_with("PostgreSQL "), "{table}");
    assert!(table.contains(&format!(
        "schema \"{}\" at BullMQ migration 11",
        schema.name
    )));

    // One refresh of the live view: the same queues, the server's facts from the ledger.
    let top = schema.json(&["top", "--once"]);
    assert_eq!(top["server"]["postgres"]["migration"], 11, "{top}");
    let watched: Vec<&str> = top["queues"]
        .as_array()
        .unwrap()
        .iter()
        .map(|q| q["queue"].as_str().unwrap())
        .collect();
    assert_eq!(watched, ["mail", "reports"], "{top}");
    assert_eq!(top["queues"][0]["counts"]["failed"], 2, "{top}");

    let failed = schema.json(&["jobs", "mail", "--state", "failed"]);
    assert_eq!(failed["total"], 2, "{failed}");
    assert_eq!(ids(&failed["jobs"]), {
        let mut bad = vec![added[3].clone(), added[4].clone()];
        bad.sort();
        bad
    });
    for job in failed["jobs"].as_array().unwrap() {
        assert_eq!(job["failedReason"], "smtp down", "{job}");
    }
    let completed = schema.json(&["jobs", "mail", "--state", "completed"]);
    assert_eq!(completed["total"], 3, "{completed}");

    let job = schema.json(&["job", "mail", &added[3]]);
    assert_eq!(job["name"], "bad-1", "{job}");
    assert_eq!(job["state"], "failed", "{job}");
    assert_eq!(job["failedReason"], "smtp down", "{job}");
    assert_eq!(job["data"]["fail"], "smtp down", "{job}");
    let done = schema.json(&["job", "mail", &added[0]]);
    assert_eq!(done["state"], "completed", "{done}");
    assert_eq!(done["returnvalue"], json!({"sent": 1}), "{done}");
    let missing_job = schema.bullmq(&["job", "mail", "no-such-job"]);
    assert_eq!(
        missing_job.status.code(),
        Some(3),
        "{}",
        text(&missing_job.stderr)
    );
}

#[test]
fn operating_retry_pause_resume_drain_clean() {
    if !available() {
        return;
    }
    let schema = FreshSchema::migrated_by_node();
    schema.node_add(
        "mail",
        json!([
            {"name": "ok", "data": {}},
            {"name": "bad-1", "data": {"fail": true}, "opts": {"attempts": 1}},
            {"name": "bad-2", "data": {"fail": true}, "opts": {"attempts": 1}},
        ]),
    );
    schema.node_work("mail", 3);

    let retried = schema.json(&["retry", "mail", "--all"]);
    assert_eq!(retried["count"], 2, "{retried}");
    assert_eq!(retried["operation"], "retry", "{retried}");
    let stats = schema.json(&["stats", "mail"]);
    assert_eq!(stats["counts"]["failed"], 0, "{stats}");
    assert_eq!(stats["counts"]["waiting"], 2, "{stats}");

    let paused = schema.json(&["pause", "mail"]);
    assert_eq!(paused, json!({"queue": "mail", "paused": true}));
    assert_eq!(schema.json(&["stats", "mail"])["paused"], true);
    assert_eq!(schema.json(&["resume", "mail"])["paused"], false);
    assert_eq!(schema.json(&["stats", "mail"])["paused"], false);
    let all = schema.json(&["pause", "--all"]);
    assert_eq!(all["queues"], json!(["mail"]), "{all}");
    let text_all = text(&schema.bullmq(&["resume", "--all"]).stdout);
    assert_eq!(
        text_all.trim(),
        format!("resumed 1 queue in schema {}", schema.name)
    );

    // Drain: the two retried jobs go; with --delayed the delayed one too.
    assert!(schema
        .bullmq(&["add", "mail", "later", "--delay", "600000"])
        .status
        .success());
    let drained = schema.bullmq(&["drain", "mail"]);
    assert!(drained.status.success(), "{}", text(&drained.stderr));
    let after = schema.json(&["stats", "mail"]);
    assert_eq!(after["counts"]["waiting"], 0, "{after}");
    assert_eq!(after["counts"]["delayed"], 1, "{after}");
    assert!(schema
        .bullmq(&["drain", "mail", "--delayed"])
        .status
        .success());
    assert_eq!(schema.json(&["stats", "mail"])["counts"]["delayed"], 0);

    let cleaned = schema.json(&["clean", "mail", "--state", "completed", "--grace", "0"]);
    assert_eq!(
        cleaned["removed"].as_array().map(Vec::len),
        Some(1),
        "{cleaned}"
    );
    assert_eq!(schema.json(&["stats", "mail"])["counts"]["completed"], 0);
}

#[test]
fn events_replay_and_follow() {
    if !available() {
        return;
    }
    let schema = FreshSchema::migrated_by_node();
    for name in ["a", "b", "c"] {
        assert!(schema.bullmq(&["add", "ev", name]).status.success());
    }
    let all = schema.bullmq(&["events", "ev", "--no-follow"]);
    assert!(all.status.success(), "{}", text(&all.stderr));
    let lines: Vec<String> = text(&all.stdout).lines().map(str::to_owned).collect();
    // One `added` and one `waiting` per job.
    assert_eq!(lines.len(), 6, "{lines:?}");
    assert_eq!(
        lines.iter().filter(|l| l.contains(" added ")).count(),
        3,
        "{lines:?}"
    );
    assert!(lines[0].contains("added jobId=1 name=a"), "{lines:?}");
    let two = schema.bullmq(&["--json", "events", "ev", "--no-follow", "--count", "2"]);
    let two: Vec<Value> = text(&two.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).expect("a JSON line"))
        .collect();
    assert_eq!(two.len(), 2);
    assert_eq!(two[0]["event"], "added");
    assert_eq!(two[0]["jobId"], "1");
    // After an id: what follows it.
    let second = lines[1].split(' ').next().unwrap();
    let rest = schema.bullmq(&["events", "ev", "--no-follow", "--from", second]);
    assert_eq!(
        text(&rest.stdout).lines().count(),
        4,
        "{}",
        text(&rest.stdout)
    );

    // Following from the start with --count replays and exits.
    let followed = schema.bullmq(&["events", "ev", "--from", "0", "--count", "3"]);
    assert!(followed.status.success(), "{}", text(&followed.stderr));
    assert_eq!(text(&followed.stdout).lines().count(), 3);
    // Following from now: an event added meanwhile arrives. A queue of its own, whose
    // QueueEvents session (named `<queue>:qe` as Node names it) shows when the reader is up.
    let live = format!("ev-live-{}", std::process::id());
    assert!(schema.bullmq(&["add", &live, "first"]).status.success());
    let mut follow = Command::new(env!("CARGO_BIN_EXE_bullmq"))
        .args(["--url", &schema.url(), "events", &live, "--count", "1"])
        .env_remove("BULLMQ_URL")
        .env_remove("REDIS_URL")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("bullmq events runs");
    let deadline = Instant::now() + Duration::from_secs(20);
    let session =
        format!("SELECT count(*) FROM pg_stat_activity WHERE application_name = '{live}:qe'");
    while psql(&session).unwrap() == "0" && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    // The reader pins "now" right after its session starts.
    std::thread::sleep(Duration::from_millis(500));
    assert!(schema.bullmq(&["add", &live, "second"]).status.success());
    while follow.try_wait().unwrap().is_none() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    if follow.try_wait().unwrap().is_none() {
        let _ = follow.kill();
    }
    let out = follow.wait_with_output().unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        text(&out.stdout).contains("added jobId=2 name=second"),
        "{}",
        text(&out.stdout)
    );
}

/// Kills a Node worker (our own child, by its handle) when the test ends.
struct Running(Child);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn workers_lists_a_running_node_worker() {
    if !available() {
        return;
    }
    let schema = FreshSchema::migrated_by_node();
    assert!(schema.bullmq(&["add", "crew", "x"]).status.success());
    let arg = schema.node_args(
        "crew",
        json!({"name": "node-w", "stopAfter": 1000, "idleMs": 60_000, "timeoutMs": 60_000}),
    );
    let _worker = Running(spawn_node("run_worker.js", &arg));
    let deadline = Instant::now() + Duration::from_secs(30);
    let listed = loop {
        let workers = schema.json(&["workers", "crew"]);
        if !workers["workers"].as_array().unwrap().is_empty() {
            break workers;
        }
        assert!(
            Instant::now() < deadline,
            "the Node worker never showed: {workers}"
        );
        std::thread::sleep(Duration::from_millis(200));
    };
    let names: Vec<&str> = listed["workers"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|w| w["workerName"].as_str())
        .collect();
    assert!(names.contains(&"node-w"), "{listed}");
    let stats = schema.json(&["stats", "crew"]);
    assert!(stats["workers"].as_u64().unwrap() >= 1, "{stats}");
    let table = text(&schema.bullmq(&["workers", "crew"]).stdout);
    assert!(table.starts_with("NAME"), "{table}");
    assert!(table.contains("node-w"), "{table}");
}

#[test]
fn demo_runs_on_a_node_migrated_schema_and_removes_its_queue() {
    if !available() {
        return;
    }
    let schema = FreshSchema::migrated_by_node();
    let out = schema.bullmq(&["--json", "demo", "--jobs", "100", "--timeout", "120"]);
    assert!(
        out.status.success(),
        "demo failed: {}\n{}",
        text(&out.stdout),
        text(&out.stderr)
    );
    let summary: Value = serde_json::from_slice(&out.stdout).expect("the summary is JSON");
    // Per hundred: 5 flaky (fail once), 2 broken (fail both attempts), 10 with 4 progress
    // events each.
    assert_eq!(summary["backend"], "postgres", "{summary}");
    assert_eq!(summary["completed"], 98, "{summary}");
    assert_eq!(summary["failed"], 2, "{summary}");
    assert_eq!(summary["retried"], 7, "{summary}");
    assert_eq!(summary["progressEvents"], 40, "{summary}");
    assert_eq!(summary["cleaned"], true, "{summary}");
    assert!(summary["redis"].is_null(), "{summary}");
    assert!(summary["localRedisPid"].is_null(), "{summary}");
    let queue = summary["queue"].as_str().unwrap();
    let left = psql(&format!(
        "SELECT count(*) FROM \"{}\".job WHERE queue = '{queue}'",
        schema.name
    ))
    .unwrap();
    assert_eq!(left, "0", "the demo queue {queue} was obliterated");
}

#[test]
fn a_schema_not_migrated_says_how_to_migrate_it() {
    if !available() {
        return;
    }
    let url = url_of(&unique_schema());
    for args in [
        &["stats", "q"][..],
        &["queues"],
        &["events", "q", "--no-follow"],
        &["demo", "--jobs", "10"],
    ] {
        let out = bullmq_with(&["--url", &url], args, &[]);
        let line = failure(&out, 6);
        assert!(
            line.contains("has no BullMQ migration ledger"),
            "{args:?}: {line}"
        );
        assert!(line.contains("Node's migrator"), "{args:?}: {line}");
    }
    let out = bullmq_with(&["--url", &url, "--json"], &["stats", "q"], &[]);
    assert_eq!(out.status.code(), Some(6));
    let error: Value = serde_json::from_slice(&out.stdout).expect("one JSON error");
    assert_eq!(error["kind"], "schema", "{error}");
    assert_eq!(error["exit"], 6, "{error}");
}

#[test]
fn a_typo_in_a_queue_name_suggests_the_close_one() {
    if !available() {
        return;
    }
    let schema = FreshSchema::migrated_by_node();
    assert!(schema
        .bullmq(&["add", "emails", "welcome"])
        .status
        .success());
    for args in [
        &["stats", "emials"][..],
        &["jobs", "emials", "--state", "waiting"],
        &["events", "emials", "--no-follow"],
        &["pause", "emials"],
    ] {
        let line = failure(&schema.bullmq(args), 3);
        assert_eq!(
            line,
            format!(
                "error: no queue \"emials\" in schema \"{}\" (did you mean \"emails\"?)",
                schema.name
            ),
            "{args:?}"
        );
    }
    // Nothing was made by looking.
    let queues = schema.json(&["queues"]);
    assert_eq!(queues["queues"].as_array().unwrap().len(), 1, "{queues}");
}

#[test]
fn redis_url_and_its_variable_still_take_any_url() {
    if !available() {
        return;
    }
    let schema = FreshSchema::migrated_by_node();
    assert!(schema.bullmq(&["add", "q", "j"]).status.success());
    let waiting = |out: &Output| json_of(out)["counts"]["waiting"].clone();
    let url = schema.url();
    // --redis-url and REDIS_URL take a PostgreSQL URL too.
    let flag = bullmq_with(&["--redis-url", &url, "--json"], &["stats", "q"], &[]);
    assert_eq!(waiting(&flag), 1);
    let env = bullmq_with(&["--json"], &["stats", "q"], &[("REDIS_URL", &url)]);
    assert_eq!(waiting(&env), 1);
    // BULLMQ_URL beats REDIS_URL.
    let redis = redis_url();
    let both = bullmq_with(
        &["--json"],
        &["stats", "q"],
        &[("BULLMQ_URL", &url), ("REDIS_URL", &redis)],
    );
    assert_eq!(waiting(&both), 1);
    // A typed --redis-url beats BULLMQ_URL: Redis answers, where this queue does not exist.
    let typed = bullmq_with(
        &["--redis-url", &redis],
        &["stats", "q"],
        &[("BULLMQ_URL", &url)],
    );
    let line = failure(&typed, 3);
    assert!(line.contains("under prefix \"bull\""), "{line}");
    // Both flags typed: a usage error.
    let clash = bullmq_with(
        &["--url", &url, "--redis-url", &redis],
        &["stats", "q"],
        &[],
    );
    let line = failure(&clash, 2);
    assert!(line.contains("not both"), "{line}");
}

#[test]
fn schedulers_work_and_a_foreign_prefix_is_refused_in_one_sentence() {
    if !available() {
        return;
    }
    let schema = FreshSchema::migrated_by_node();
    assert!(schema.bullmq(&["add", "q", "j"]).status.success());
    let upsert = schema.bullmq(&["scheduler", "upsert", "q", "s", "--every", "60s"]);
    assert!(upsert.status.success(), "{}", text(&upsert.stderr));
    let listed = schema.bullmq(&["--json", "schedulers", "q"]);
    assert!(listed.status.success(), "{}", text(&listed.stderr));
    assert!(
        text(&listed.stdout).contains("\"s\""),
        "{}",
        text(&listed.stdout)
    );
    let removed = schema.bullmq(&["scheduler", "remove", "q", "s"]);
    assert!(removed.status.success(), "{}", text(&removed.stderr));
    // The schema is the namespace: another --prefix means nothing here.
    let line = failure(&schema.bullmq(&["--prefix", "other", "stats", "q"]), 2);
    assert!(line.contains("has no meaning on PostgreSQL"), "{line}");
}

#[test]
fn an_unreachable_server_fails_like_an_unreachable_redis() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let url = format!("postgres://postgres@127.0.0.1:{port}/test");
    let started = Instant::now();
    for args in [
        &["stats", "q"][..],
        &["queues"],
        &["events", "q", "--no-follow"],
    ] {
        let line = failure(&bullmq_with(&["--url", &url], args, &[]), 1);
        assert!(
            line.contains("cannot connect to PostgreSQL at 127.0.0.1:"),
            "{line}"
        );
        assert!(!line.contains("Os {") && !line.contains("kind:"), "{line}");
    }
    let out = bullmq_with(&["--url", &url, "--json"], &["stats", "q"], &[]);
    let error: Value = serde_json::from_slice(&out.stdout).expect("one JSON error");
    assert_eq!(
        (&error["kind"], &error["exit"]),
        (&json!("connection"), &json!(1))
    );
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "{:?}",
        started.elapsed()
    );
    // A malformed URL is a usage error naming the flag.
    let bad = bullmq_with(
        &["--url", "postgres://h/db?schema=1bad"],
        &["stats", "q"],
        &[],
    );
    let line = failure(&bad, 2);
    assert!(
        line.starts_with("error: bad --url postgres://h/db?schema=1bad: "),
        "{line}"
    );
}
