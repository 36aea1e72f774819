//! The inspecting commands (`queues`, `jobs`, `job`, `workers`, `metrics`, `limits`) against
//! the Redis at `REDIS_URL`, on queues filled and processed by Node BullMQ (the oracle scripts
//! in `integration-tests/node`): what Node wrote is what the commands show, in text and JSON,
//! with meaningful exit codes and no colour codes in a pipe.
//!
//! Skipped (with a banner) when `node` is not installed; fails when it is but the oracle's
//! `node_modules` is missing (CI runs `npm ci` first).

mod common;

use common::*;

use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use bullmq_redis::fred::prelude::{ClientLike, HashesInterface};
use serde_json::{json, Value};

/// Runs `bullmq --prefix PREFIX ARGS…` with stdout and stderr piped.
fn bullmq(prefix: &str, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_bullmq"))
        .arg("--prefix")
        .arg(prefix)
        .args(args)
        .env("REDIS_URL", redis_url())
        .env_remove("RUST_LOG")
        .env_remove("NO_COLOR")
        .output()
        .expect("the bullmq binary runs")
}

/// The text a successful run printed, checked to carry no ANSI escape (stdout is a pipe).
fn text_of(output: &Output) -> String {
    assert!(
        output.status.success(),
        "bullmq failed ({}): {}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    let text = String::from_utf8(output.stdout.clone()).expect("UTF-8 output");
    assert!(
        !text.contains('\x1b'),
        "colour codes in piped output:\n{text:?}"
    );
    text
}

/// What `bullmq --prefix PREFIX ARGS` prints on a pseudo-terminal, through util-linux
/// `script`; `None` (with a note) where `script` cannot run it.
fn on_a_terminal(prefix: &str, args: &str, no_color: bool) -> Option<String> {
    let usable = Command::new("script")
        .args(["-qc", "true", "/dev/null"])
        .output()
        .is_ok_and(|out| out.status.success());
    if !usable {
        eprintln!("note: no util-linux `script`, the terminal colour check is skipped");
        return None;
    }
    let line = format!(
        "'{}' --prefix '{prefix}' {args}",
        env!("CARGO_BIN_EXE_bullmq")
    );
    let mut command = Command::new("script");
    command
        .args(["-qc", &line, "/dev/null"])
        .env("REDIS_URL", redis_url())
        .env_remove("RUST_LOG")
        .stdin(Stdio::null());
    if no_color {
        command.env("NO_COLOR", "1");
    } else {
        command.env_remove("NO_COLOR");
    }
    let out = command.output().expect("script runs");
    assert!(out.status.success(), "{out:?}");
    Some(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// The value of the `key` row of a two-column listing (`key   value`).
fn field<'t>(text: &'t str, key: &str) -> Option<&'t str> {
    text.lines().find_map(|line| {
        let rest = line.strip_prefix(key)?;
        rest.starts_with("  ").then(|| rest.trim())
    })
}

fn ids_of(jobs: &Value) -> Vec<String> {
    let mut ids: Vec<String> = jobs
        .as_array()
        .expect("jobs array")
        .iter()
        .map(|j| j["id"].as_str().expect("id").to_owned())
        .collect();
    ids.sort();
    ids
}

#[tokio::test]
async fn failed_jobs_and_a_job_in_full_as_node_left_them() {
    if !node_available() {
        return;
    }
    let prefix = unique_prefix("jobs");
    let ids = node_add(
        &prefix,
        "mail",
        json!([
            {"name": "send-a", "data": {"fail": "smtp down", "log": ["first line", "second line"]}, "opts": {"attempts": 1}},
            {"name": "send-b", "data": {"fail": "bad address"}, "opts": {}},
            {"name": "send-c", "data": {"returnValue": {"sent": 1}, "progress": 50}, "opts": {}},
        ]),
    );
    let (a, b, c) = (&ids[0], &ids[1], &ids[2]);
    node_work(&prefix, "mail", 3, json!({}));

    // `jobs --state failed`: both failures with their reasons, newest first.
    let failed = json_of(&bullmq(
        &prefix,
        &["--json", "jobs", "mail", "--state", "failed"],
    ));
    assert_eq!(failed["total"], 2, "{failed}");
    let mut expected = vec![a.clone(), b.clone()];
    expected.sort();
    assert_eq!(ids_of(&failed["jobs"]), expected, "{failed}");
    for job in failed["jobs"].as_array().unwrap() {
        let reason = if job["id"] == a.as_str() {
            "smtp down"
        } else {
            "bad address"
        };
        assert_eq!(job["failedReason"], reason, "{job}");
        assert_eq!(job["attemptsMade"], 1, "{job}");
    }
    let text = text_of(&bullmq(&prefix, &["jobs", "mail", "--state", "failed"]));
    let lines: Vec<&str> = text.lines().collect();
    assert!(
        lines[0].starts_with("ID")
            && lines[0].contains("ATTEMPTS")
            && lines[0].ends_with("FAILED REASON"),
        "{text}"
    );
    assert!(
        text.contains("send-a") && text.contains("smtp down"),
        "{text}"
    );
    assert!(
        text.contains("send-b") && text.contains("bad address"),
        "{text}"
    );

    // Paging and the name filter.
    let first = json_of(&bullmq(
        &prefix,
        &[
            "--json", "jobs", "mail", "--state", "failed", "--limit", "1",
        ],
    ));
    assert_eq!(first["jobs"].as_array().unwrap().len(), 1, "{first}");
    let second = json_of(&bullmq(
        &prefix,
        &[
            "--json", "jobs", "mail", "--state", "failed", "--limit", "1", "--offset", "1",
        ],
    ));
    let mut both = vec![
        first["jobs"][0]["id"].as_str().unwrap().to_owned(),
        second["jobs"][0]["id"].as_str().unwrap().to_owned(),
    ];
    both.sort();
    assert_eq!(both, expected);
    let paged = text_of(&bullmq(
        &prefix,
        &["jobs", "mail", "--state", "failed", "--limit", "1"],
    ));
    assert!(
        paged.contains("1-1 of 2 failed jobs; --offset 1 for more"),
        "{paged}"
    );
    let named = json_of(&bullmq(
        &prefix,
        &[
            "--json", "jobs", "mail", "--state", "failed", "--name", "send-b",
        ],
    ));
    assert_eq!(ids_of(&named["jobs"]), vec![b.clone()], "{named}");
    let completed = json_of(&bullmq(
        &prefix,
        &["--json", "jobs", "mail", "--state", "completed"],
    ));
    assert_eq!(ids_of(&completed["jobs"]), vec![c.clone()], "{completed}");
    assert_eq!(completed["jobs"][0]["returnvalue"], json!({"sent": 1}));
    let none = text_of(&bullmq(&prefix, &["jobs", "mail", "--state", "delayed"]));
    assert_eq!(none, "no delayed jobs in queue mail\n");

    // `job`: the stack trace Node stored, the logs, state and reason, in text and JSON.
    let text = text_of(&bullmq(&prefix, &["job", "mail", a]));
    let key = format!("{prefix}:mail:{a}");
    assert_eq!(field(&text, "job"), Some(key.as_str()), "{text}");
    assert_eq!(field(&text, "state"), Some("failed"), "{text}");
    assert_eq!(field(&text, "failed reason"), Some("smtp down"), "{text}");
    for expected in [
        "\nstack trace\n  Error: smtp down\n".to_owned(),
        "\nlogs (2)\n  first line\n  second line\n".to_owned(),
        "\ndata\n  {\n".to_owned(),
    ] {
        assert!(text.contains(&expected), "{expected:?} missing in:\n{text}");
    }
    assert!(
        text.contains("      at "),
        "the stack frames are shown:\n{text}"
    );
    let job = json_of(&bullmq(&prefix, &["--json", "job", "mail", a]));
    assert_eq!(job["id"], a.as_str());
    assert_eq!(job["name"], "send-a");
    assert_eq!(job["state"], "failed");
    assert_eq!(job["failedReason"], "smtp down");
    assert_eq!(job["logs"], json!(["first line", "second line"]));
    assert_eq!(job["logCount"], 2);
    assert_eq!(job["data"]["fail"], "smtp down");
    assert_eq!(job["opts"]["attempts"], 1);
    let trace = job["stacktrace"][0].as_str().expect("a stack trace");
    assert!(trace.starts_with("Error: smtp down\n    at "), "{trace}");
    assert!(job["finishedOn"].as_u64().is_some(), "{job}");
    let done = json_of(&bullmq(&prefix, &["--json", "job", "mail", c]));
    assert_eq!(done["state"], "completed");
    assert_eq!(done["returnvalue"], json!({"sent": 1}));
    assert_eq!(done["progress"], 50);
    assert_eq!(done["stacktrace"], json!([]));
    let done_text = text_of(&bullmq(&prefix, &["job", "mail", c]));
    assert!(
        done_text.contains("\nreturn value\n  {\n    \"sent\": 1\n  }\n"),
        "{done_text}"
    );

    // On a terminal (when `script` can provide one) the reason is red, unless NO_COLOR.
    if let Some(tty) = on_a_terminal(&prefix, "jobs mail --state failed", false) {
        assert!(tty.contains("\x1b[31msmtp down\x1b[0m"), "{tty:?}");
        let plain = on_a_terminal(&prefix, "jobs mail --state failed", true).unwrap();
        assert!(
            plain.contains("smtp down") && !plain.contains('\x1b'),
            "{plain:?}"
        );
    }

    // An unknown job: exit 3, a readable message, nothing on stdout.
    let unknown = bullmq(&prefix, &["job", "mail", "no-such-job"]);
    assert_eq!(unknown.status.code(), Some(3), "{unknown:?}");
    assert!(unknown.stdout.is_empty());
    let stderr = String::from_utf8_lossy(&unknown.stderr);
    assert!(
        stderr.starts_with("error: no job \"no-such-job\" in queue \"mail\""),
        "{stderr}"
    );
    delete_under(&prefix).await;
}

#[tokio::test]
async fn queues_lists_a_node_queue_and_ours_with_counts() {
    if !node_available() {
        return;
    }
    let prefix = unique_prefix("queues");
    // The server's facts come first, then the queues (none yet).
    let empty = text_of(&bullmq(&prefix, &["queues"]));
    let (facts, rest) = empty.split_once('\n').unwrap();
    assert!(facts.starts_with("Redis "), "{empty}");
    assert!(facts.contains(" ops/s at "), "{empty}");
    assert_eq!(rest, format!("no queues under prefix {prefix:?}\n"));
    node_add(
        &prefix,
        "from-node",
        json!([
            {"name": "n1", "data": {}, "opts": {}},
            {"name": "n2", "data": {}, "opts": {"delay": 600000}},
        ]),
    );
    node(
        "admin.js",
        &json!({"queue": "from-node", "prefix": prefix, "op": "pause"}),
    );
    let added = bullmq(&prefix, &["add", "from-rust", "r1", "--priority", "3"]);
    assert!(added.status.success(), "{added:?}");

    let value = json_of(&bullmq(&prefix, &["--json", "queues"]));
    assert_eq!(value["prefix"], prefix.as_str());
    assert!(value["server"]["version"].is_string(), "{value}");
    assert!(
        value["server"]["connectedClients"].as_u64().unwrap() >= 1,
        "{value}"
    );
    let queues = value["queues"].as_array().expect("queues");
    assert_eq!(queues.len(), 2, "{value}");
    let node_q = &queues[0];
    assert_eq!(node_q["queue"], "from-node");
    assert_eq!(node_q["counts"]["waiting"], 1, "{value}");
    assert_eq!(node_q["counts"]["delayed"], 1, "{value}");
    assert_eq!(node_q["paused"], true, "{value}");
    assert_eq!(node_q["workers"], 0, "{value}");
    let rust_q = &queues[1];
    assert_eq!(rust_q["queue"], "from-rust");
    assert_eq!(rust_q["counts"]["prioritized"], 1, "{value}");
    assert_eq!(rust_q["paused"], false, "{value}");

    let text = text_of(&bullmq(&prefix, &["queues"]));
    let lines: Vec<&str> = text.lines().skip(1).collect();
    assert_eq!(lines.len(), 3, "{text}");
    assert!(
        lines[0].starts_with("QUEUE      PAUSED  WORKERS  WAITING"),
        "{text}"
    );
    assert!(
        lines[1].starts_with("from-node  yes     0        1        0       1"),
        "{text}"
    );
    assert!(
        lines[2].starts_with("from-rust  no      0        0        0       0        1"),
        "{text}"
    );
    delete_under(&prefix).await;
}

#[tokio::test]
async fn limits_are_set_shown_read_by_node_and_removed() {
    if !node_available() {
        return;
    }
    let prefix = unique_prefix("limits");
    // Showing the limits of a queue that does not exist is "not found"; --create makes it.
    let missing = bullmq(&prefix, &["--json", "limits", "jobs"]);
    assert_eq!(missing.status.code(), Some(3));
    let shown = json_of(&bullmq(&prefix, &["--json", "limits", "jobs", "--create"]));
    assert_eq!(shown["concurrency"], Value::Null);
    assert_eq!(shown["rateLimit"], Value::Null);

    let set = json_of(&bullmq(
        &prefix,
        &[
            "--json",
            "limits",
            "jobs",
            "--concurrency",
            "3",
            "--rate-limit",
            "10/2s",
        ],
    ));
    assert_eq!(set["concurrency"], 3, "{set}");
    assert_eq!(
        set["rateLimit"],
        json!({"max": 10, "duration": 2000}),
        "{set}"
    );
    let text = text_of(&bullmq(&prefix, &["limits", "jobs"]));
    assert!(text.contains("global concurrency  3\n"), "{text}");
    assert!(
        text.contains("global rate limit   10 jobs per 2s\n"),
        "{text}"
    );
    assert!(text.contains("rate limited now    no\n"), "{text}");
    // Node reads what we set, from the same meta fields.
    let meta = node(
        "admin.js",
        &json!({"queue": "jobs", "prefix": prefix, "op": "getMeta"}),
    );
    assert_eq!(meta["result"]["concurrency"], 3, "{meta}");
    assert_eq!(meta["result"]["max"], 10, "{meta}");
    assert_eq!(meta["result"]["duration"], 2000, "{meta}");

    // A bad value is a usage error (exit 2) and writes nothing.
    let bad = bullmq(&prefix, &["limits", "jobs", "--rate-limit", "0/1s"]);
    assert_eq!(bad.status.code(), Some(2), "{bad:?}");
    assert!(String::from_utf8_lossy(&bad.stderr).contains("at least 1"));

    let removed = json_of(&bullmq(
        &prefix,
        &[
            "--json",
            "limits",
            "jobs",
            "--remove-concurrency",
            "--remove-rate-limit",
        ],
    ));
    assert_eq!(removed["concurrency"], Value::Null, "{removed}");
    assert_eq!(removed["rateLimit"], Value::Null, "{removed}");
    let client = connect().await;
    let fields: Vec<String> = client.hkeys(format!("{prefix}:jobs:meta")).await.unwrap();
    client.quit().await.unwrap();
    for gone in ["concurrency", "max", "duration"] {
        assert!(
            !fields.contains(&gone.to_owned()),
            "{gone} still in meta: {fields:?}"
        );
    }
    delete_under(&prefix).await;
}

#[tokio::test]
async fn metrics_recorded_by_a_node_worker() {
    if !node_available() {
        return;
    }
    let prefix = unique_prefix("metrics");
    node_add(
        &prefix,
        "busy",
        json!([
            {"name": "ok", "data": {}, "opts": {}},
            {"name": "ok", "data": {}, "opts": {}},
            {"name": "bad", "data": {"fail": true}, "opts": {}},
            {"name": "ok", "data": {}, "opts": {}},
            {"name": "bad", "data": {"fail": true}, "opts": {}},
        ]),
    );
    let before = text_of(&bullmq(&prefix, &["metrics", "busy"]));
    assert!(before.contains("no metrics recorded"), "{before}");
    node_work(
        &prefix,
        "busy",
        5,
        json!({"metrics": {"maxDataPoints": 120}}),
    );

    let value = json_of(&bullmq(&prefix, &["--json", "metrics", "busy"]));
    assert_eq!(value["minutes"], 60);
    for (kind, jobs) in [("completed", 3), ("failed", 2)] {
        let ours = &value[kind];
        assert_eq!(ours["meta"]["count"], jobs, "{value}");
        let per_minute = ours["perMinute"].as_array().expect("perMinute");
        assert_eq!(per_minute.len(), 60);
        let sum: u64 = per_minute.iter().map(|n| n.as_u64().unwrap()).sum();
        assert_eq!(sum, jobs, "every job is in the window: {value}");
        // The raw part is what Node's getMetrics returns for the same range.
        let node_view = node(
            "metrics.js",
            &json!({"queue": "busy", "prefix": prefix, "type": kind, "start": 0, "end": 59}),
        );
        assert_eq!(ours["meta"], node_view["metrics"]["meta"], "{kind}");
        assert_eq!(ours["data"], node_view["metrics"]["data"], "{kind}");
        assert_eq!(ours["count"], node_view["metrics"]["count"], "{kind}");
    }

    let text = text_of(&bullmq(&prefix, &["metrics", "busy"]));
    assert!(!text.contains("no metrics recorded"), "{text}");
    assert!(text.contains("completed  3 in the window, peak "), "{text}");
    assert!(text.contains("failed     2 in the window, peak "), "{text}");
    // Piped, the charts are ASCII: 60 columns, not all empty.
    let charts: Vec<&str> = text
        .lines()
        .filter(|line| line.starts_with("           "))
        .map(str::trim)
        .collect();
    assert_eq!(charts.len(), 2, "{text}");
    for chart in charts {
        assert_eq!(chart.len(), 60, "{chart:?}");
        assert!(chart.is_ascii(), "{chart:?}");
        assert!(chart.chars().any(|c| c != '_'), "{chart:?}");
    }
    delete_under(&prefix).await;
}

#[tokio::test]
async fn workers_lists_a_running_node_worker_by_name() {
    if !node_available() {
        return;
    }
    let prefix = unique_prefix("workers");
    // A job for later makes the queue's keys (a worker alone writes none), so `queues` finds it.
    node_add(
        &prefix,
        "live",
        json!([{"name": "later", "data": {}, "opts": {"delay": 600000}}]),
    );
    let none = text_of(&bullmq(&prefix, &["workers", "live"]));
    assert_eq!(none, "no workers connected to queue live\n");
    let worker = spawn_node(
        "run_worker.js",
        &json!({"queue": "live", "prefix": prefix, "name": "node-inspect-1", "stopAfter": 1, "timeoutMs": 60_000}),
    );
    // The worker names its connection when it starts; wait for it (generously: a cold Node).
    let deadline = Instant::now() + Duration::from_secs(30);
    let listed = loop {
        let value = json_of(&bullmq(&prefix, &["--json", "workers", "live"]));
        if !value["workers"].as_array().expect("workers").is_empty() || Instant::now() > deadline {
            break value;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    let workers = listed["workers"].as_array().expect("workers");
    assert_eq!(workers.len(), 1, "{listed}");
    assert_eq!(workers[0]["workerName"], "node-inspect-1", "{listed}");
    assert!(
        workers[0]["name"]
            .as_str()
            .unwrap()
            .ends_with(":w:node-inspect-1"),
        "{listed}"
    );
    let text = text_of(&bullmq(&prefix, &["workers", "live"]));
    let lines: Vec<&str> = text.lines().collect();
    assert!(lines[0].starts_with("NAME            ADDRESS  "), "{text}");
    assert!(lines[1].starts_with("node-inspect-1  "), "{text}");
    let queues = json_of(&bullmq(&prefix, &["--json", "queues"]));
    assert_eq!(queues["queues"][0]["workers"], 1, "{queues}");

    // One job lets the worker stop on its own.
    node_add(
        &prefix,
        "live",
        json!([{"name": "last", "data": {}, "opts": {}}]),
    );
    let out = node_result("run_worker.js", worker);
    assert_eq!(out["stoppedBy"], "count", "{out}");
    delete_under(&prefix).await;
}

#[tokio::test]
async fn a_flow_parent_shows_its_children_and_a_child_its_parent() {
    if !node_available() {
        return;
    }
    let prefix = unique_prefix("flow");
    // Two children: one runs now, one is delayed, so the parent keeps waiting for it.
    let added = node(
        "flows.js",
        &json!({"op": "add", "prefix": prefix, "flow": {
            "name": "report", "queueName": "parents", "data": {},
            "children": [
                {"name": "part", "queueName": "kids", "data": {"returnValue": 7}},
                {"name": "part", "queueName": "kids", "data": {}, "opts": {"delay": 600000}},
            ],
        }}),
    );
    let tree = &added["tree"];
    let parent = tree["id"].as_str().expect("parent id").to_owned();
    let child_ids: Vec<String> = tree["children"]
        .as_array()
        .expect("children")
        .iter()
        .map(|c| c["id"].as_str().unwrap().to_owned())
        .collect();
    node_work(&prefix, "kids", 1, json!({}));
    let done = node(
        "admin.js",
        &json!({"queue": "kids", "prefix": prefix, "op": "getJobState", "id": child_ids[0]}),
    );
    let (ran, later) = if done["result"] == "completed" {
        (&child_ids[0], &child_ids[1])
    } else {
        (&child_ids[1], &child_ids[0])
    };

    let waiting = json_of(&bullmq(
        &prefix,
        &["--json", "jobs", "parents", "--state", "waiting-children"],
    ));
    assert_eq!(ids_of(&waiting["jobs"]), vec![parent.clone()], "{waiting}");

    let value = json_of(&bullmq(&prefix, &["--json", "job", "parents", &parent]));
    assert_eq!(value["state"], "waiting-children", "{value}");
    let deps = &value["dependencies"];
    assert_eq!(
        deps["processed"][format!("{prefix}:kids:{ran}")],
        7,
        "{value}"
    );
    assert_eq!(
        deps["unprocessed"],
        json!([format!("{prefix}:kids:{later}")]),
        "{value}"
    );
    let text = text_of(&bullmq(&prefix, &["job", "parents", &parent]));
    assert_eq!(field(&text, "state"), Some("waiting-children"), "{text}");
    assert!(text.contains("\nchildren (2)\n"), "{text}");
    assert!(
        text.contains(&format!("processed  {prefix}:kids:{ran}")),
        "{text}"
    );
    assert!(
        text.contains(&format!("pending    {prefix}:kids:{later}")),
        "{text}"
    );

    let child = json_of(&bullmq(&prefix, &["--json", "job", "kids", ran]));
    assert_eq!(
        child["parentKey"],
        format!("{prefix}:parents:{parent}"),
        "{child}"
    );
    assert_eq!(child["parent"]["id"], parent.as_str(), "{child}");
    let child_text = text_of(&bullmq(&prefix, &["job", "kids", ran]));
    assert_eq!(
        field(&child_text, "parent"),
        Some(format!("{prefix}:parents:{parent}").as_str()),
        "{child_text}"
    );
    delete_under(&prefix).await;
}
