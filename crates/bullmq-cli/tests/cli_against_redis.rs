//! The `bullmq` binary against the Redis at `REDIS_URL`: `add` writes what the flags say, `stats`
//! reports it, `scheduler upsert` / `schedulers` / `scheduler remove` manage job schedulers, bad
//! input fails with a readable message and writes nothing.

mod common;

use common::*;

use std::process::{Command, Output};

use bullmq_redis::fred::prelude::ClientLike;
use bullmq_redis::ConnectionConfig;
use serde_json::Value;

async fn connect_named(name: Option<String>) -> bullmq_redis::fred::prelude::Client {
    ConnectionConfig::from_url(&redis_url())
        .unwrap()
        .connect(name)
        .await
        .unwrap()
}

#[tokio::test]
async fn add_then_stats() {
    let prefix = format!("cli-test-{}", std::process::id());
    let added = json_of(&bullmq(&[
        "--prefix",
        &prefix,
        "--json",
        "add",
        "mail",
        "welcome",
        "--data",
        r#"{"to":"a@b.c"}"#,
        "--priority",
        "4",
        "--attempts",
        "3",
        "--backoff",
        "fixed:250",
    ]));
    assert_eq!(added["id"], "1");
    assert_eq!(added["state"], "prioritized");
    let delayed = json_of(&bullmq(&[
        "--prefix", &prefix, "--json", "add", "mail", "later", "--delay", "60000", "--job-id",
        "later-1",
    ]));
    assert_eq!(delayed["id"], "later-1");
    assert_eq!(delayed["state"], "delayed");

    let stats = json_of(&bullmq(&["--prefix", &prefix, "--json", "stats", "mail"]));
    assert_eq!(stats["counts"]["prioritized"], 1);
    assert_eq!(stats["counts"]["delayed"], 1);
    assert_eq!(stats["counts"]["waiting"], 0);
    assert_eq!(stats["paused"], false);
    assert_eq!(stats["workers"], 0);

    let text = bullmq(&["--prefix", &prefix, "stats", "mail"]);
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(text.contains("prioritized       1"), "{text}");

    // Refused before anything is written: an integer custom id.
    let keys_before = keys_under(&prefix).await;
    let bad = bullmq(&["--prefix", &prefix, "add", "mail", "x", "--job-id", "12"]);
    assert!(!bad.status.success());
    assert!(String::from_utf8_lossy(&bad.stderr).contains("Custom Id cannot be integers"));
    assert_eq!(keys_under(&prefix).await, keys_before);

    assert!(!keys_under(&prefix).await.is_empty());
    delete_under(&prefix).await;
}

#[test]
fn stats_on_an_unreachable_redis_fails_clearly() {
    let out = Command::new(env!("CARGO_BIN_EXE_bullmq"))
        .args(["--redis-url", "redis://127.0.0.1:1", "stats", "q"])
        .output()
        .expect("runs");
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.starts_with("error: cannot open queue \"q\" on Redis at 127.0.0.1:1"),
        "{stderr}"
    );
}

#[tokio::test]
async fn stats_does_not_create_keys() {
    // A queue that does not exist is "not found" (exit 3), and reading it creates nothing.
    let prefix = format!("cli-test-ro-{}", std::process::id());
    let out = bullmq(&["--prefix", &prefix, "--json", "stats", "nothing"]);
    assert_eq!(out.status.code(), Some(3), "{}", text(&out.stdout));
    assert_eq!(keys_under(&prefix).await, Vec::<String>::new());
}

#[tokio::test]
async fn stats_counts_connections_named_like_node_workers() {
    let prefix = format!("cli-test-w-{}", std::process::id());
    let keys = bullmq_protocol::keys::QueueKeys::new(prefix.clone(), "jobs");
    let named = connect_named(Some(keys.worker_client_name(Some("w-1")))).await;
    let unnamed = connect_named(Some(keys.worker_client_name(None))).await;
    let other = connect_named(Some(format!("{prefix}:b3RoZXI=:w:x"))).await;
    // The queue exists once it has a key.
    assert!(bullmq(&["--prefix", &prefix, "add", "jobs", "j"])
        .status
        .success());
    let stats = json_of(&bullmq(&["--prefix", &prefix, "--json", "stats", "jobs"]));
    assert_eq!(stats["workers"], 2, "{stats}");
    let names: Vec<&str> = stats["workerConnections"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| w["workerName"].as_str().unwrap_or("<none>"))
        .collect();
    assert!(
        names.contains(&"w-1") && names.contains(&"<none>"),
        "{names:?}"
    );
    for client in [named, unnamed, other] {
        client.quit().await.unwrap();
    }
    delete_under(&prefix).await;
}

/// Runs `bullmq` expecting a refusal: exit 1 and one `error:` line naming `mentions`.
fn assert_refused(output: &Output, mentions: &str) {
    let stderr = text(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "stderr: {stderr}");
    assert!(stderr.starts_with("error: "), "{stderr}");
    assert!(stderr.contains(mentions), "{stderr} lacks {mentions:?}");
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
}

#[tokio::test]
async fn schedulers_are_upserted_listed_and_removed() {
    let prefix = format!("cli-test-sched-{}", std::process::id());
    let p = |args: &[&str]| {
        let mut all = vec!["--prefix", prefix.as_str()];
        all.extend_from_slice(args);
        bullmq(&all)
    };

    // An `every` scheduler with data: JSON names the pending iteration and the record.
    let every = json_of(&p(&[
        "--json",
        "scheduler",
        "upsert",
        "pings",
        "beat",
        "--every",
        "5s",
        "--name",
        "ping",
        "--data",
        r#"{"host":"db"}"#,
        "--opts",
        r#"{"attempts":2}"#,
    ]));
    assert!(
        every["jobId"].as_str().unwrap().starts_with("repeat:beat:"),
        "{every}"
    );
    assert!(every["delay"].as_u64().unwrap() <= 5_000, "{every}");
    assert_eq!(every["scheduler"]["key"], "beat");
    assert_eq!(every["scheduler"]["name"], "ping");
    assert_eq!(every["scheduler"]["every"], 5_000);
    assert_eq!(every["scheduler"]["iterationCount"], 1);
    assert_eq!(every["scheduler"]["template"]["data"]["host"], "db");
    assert_eq!(every["scheduler"]["template"]["opts"]["attempts"], 2);

    // A cron scheduler read in Berlin: 09:00 there is 08:00 or 07:00 UTC (summer time).
    let cron = json_of(&p(&[
        "--json",
        "scheduler",
        "upsert",
        "pings",
        "report",
        "--cron",
        "0 9 * * 1-5",
        "--tz",
        "Europe/Berlin",
        "--limit",
        "5",
        "--end",
        "2099-01-01T00:00:00Z",
    ]));
    let next = cron["scheduler"]["next"].as_u64().unwrap();
    let hour_utc = next % 86_400_000 / 3_600_000;
    assert!(hour_utc == 8 || hour_utc == 7, "{cron}");
    assert!(cron["delay"].as_u64().unwrap() > 0, "{cron}");
    assert_eq!(cron["scheduler"]["pattern"], "0 9 * * 1-5");
    assert_eq!(cron["scheduler"]["tz"], "Europe/Berlin");
    assert_eq!(cron["scheduler"]["limit"], 5);
    assert_eq!(cron["scheduler"]["endDate"], 4_070_908_800_000_u64);

    // Text for people: the iteration, its state and when it runs.
    let fast = p(&[
        "scheduler",
        "upsert",
        "pings",
        "fast",
        "--every",
        "500ms",
        "--offset",
        "100ms",
    ]);
    assert!(fast.status.success(), "{}", text(&fast.stderr));
    let fast = text(&fast.stdout);
    assert!(
        fast.starts_with("upserted job scheduler fast on pings\n"),
        "{fast}"
    );
    assert!(fast.contains("next iteration: job repeat:fast:"), "{fast}");
    assert!(
        fast.contains("(delayed)") || fast.contains("(waiting)"),
        "{fast}"
    );

    // The table: a header, one row a scheduler, soonest first.
    let listed = p(&["schedulers", "pings"]);
    assert!(listed.status.success(), "{}", text(&listed.stderr));
    let table = text(&listed.stdout);
    let lines: Vec<&str> = table.lines().collect();
    assert_eq!(lines.len(), 4, "{table}");
    assert!(lines[0].starts_with("ID "), "{table}");
    for column in ["SCHEDULE", "TZ", "NEXT RUN", "ITERATIONS", "LIMIT", "END"] {
        assert!(lines[0].contains(column), "{table}");
    }
    assert!(table.contains("every 5s"), "{table}");
    assert!(table.contains("every 500ms (+100ms offset)"), "{table}");
    let report = lines.iter().find(|l| l.starts_with("report ")).unwrap();
    assert!(report.contains("0 9 * * 1-5"), "{table}");
    assert!(report.contains("Europe/Berlin"), "{table}");
    assert!(report.contains("(in "), "{table}");
    assert!(
        lines[3].starts_with("report "),
        "the cron run is the latest: {table}"
    );

    // JSON: Node's JobSchedulerJson records, soonest first.
    let records = json_of(&p(&["--json", "schedulers", "pings"]));
    let records = records.as_array().unwrap();
    assert_eq!(records.len(), 3);
    let nexts: Vec<u64> = records
        .iter()
        .map(|r| r["next"].as_u64().unwrap())
        .collect();
    assert!(nexts.windows(2).all(|w| w[0] <= w[1]), "{nexts:?}");
    let report = records.iter().find(|r| r["key"] == "report").unwrap();
    for field in [
        "key",
        "name",
        "next",
        "iterationCount",
        "limit",
        "endDate",
        "tz",
        "pattern",
    ] {
        assert!(report.get(field).is_some(), "{report} lacks {field}");
    }
    let fast = records.iter().find(|r| r["key"] == "fast").unwrap();
    assert_eq!(fast["every"], 500);
    assert_eq!(fast["offset"], 100);

    // Refusals: Node's messages (or the flag at fault), exit 1, nothing written.
    let keys_before = keys_under(&prefix).await;
    assert_refused(
        &p(&[
            "scheduler",
            "upsert",
            "pings",
            "bad",
            "--every",
            "5s",
            "--cron",
            "* * * * *",
        ]),
        "Both .pattern and .every options are defined for this repeatable job",
    );
    assert_refused(
        &p(&["scheduler", "upsert", "pings", "bad"]),
        "Either .pattern or .every options must be defined",
    );
    assert_refused(
        &p(&[
            "scheduler",
            "upsert",
            "pings",
            "bad",
            "--every",
            "5s",
            "--end",
            "2001-01-01T00:00:00Z",
        ]),
        "End date must be greater than current timestamp",
    );
    assert_refused(
        &p(&[
            "scheduler",
            "upsert",
            "pings",
            "bad",
            "--every",
            "5s",
            "--data",
            "{oops",
        ]),
        "--data is not JSON",
    );
    assert_refused(
        &p(&[
            "scheduler",
            "upsert",
            "pings",
            "bad",
            "--cron",
            "0 * * * *",
            "--tz",
            "Mars/Olympus",
        ]),
        "unknown time zone \"Mars/Olympus\"",
    );
    assert_refused(
        &p(&[
            "scheduler",
            "upsert",
            "pings",
            "bad",
            "--every",
            "5s",
            "--opts",
            r#"{"jobId":"x"}"#,
        ]),
        "`jobId` is not allowed",
    );
    assert_eq!(keys_under(&prefix).await, keys_before);
    // A duration the parser cannot read is a usage error, as for `add --backoff`.
    let typo = p(&["scheduler", "upsert", "pings", "bad", "--every", "5 sec"]);
    assert_eq!(typo.status.code(), Some(2), "{}", text(&typo.stderr));
    assert!(
        text(&typo.stderr).contains("500ms, 5s"),
        "{}",
        text(&typo.stderr)
    );

    // Removal: a message, then "not found" is exit 1; --json says which.
    let removed = p(&["scheduler", "remove", "pings", "beat"]);
    assert!(removed.status.success(), "{}", text(&removed.stderr));
    assert_eq!(
        text(&removed.stdout),
        "removed job scheduler beat from pings\n"
    );
    let again = p(&["scheduler", "remove", "pings", "beat"]);
    assert_refused(&again, "no job scheduler \"beat\" on queue \"pings\"");
    assert!(again.stdout.is_empty());
    let missing = p(&["--json", "scheduler", "remove", "pings", "beat"]);
    assert_eq!(missing.status.code(), Some(1));
    // One object: the report and the error.
    let missing: Value = serde_json::from_slice(&missing.stdout).unwrap();
    assert_eq!(
        missing,
        serde_json::json!({"removed": false, "error": "no job scheduler \"beat\" on queue \"pings\"",
                           "kind": "failed", "exit": 1})
    );
    assert_eq!(
        json_of(&p(&["--json", "scheduler", "remove", "pings", "fast"])),
        serde_json::json!({"removed": true})
    );
    let left = json_of(&p(&["--json", "schedulers", "pings"]));
    assert_eq!(left.as_array().unwrap().len(), 1, "{left}");
    assert_eq!(left[0]["key"], "report");

    delete_under(&prefix).await;
}

#[tokio::test]
async fn an_empty_scheduler_list_says_so_and_writes_nothing() {
    let prefix = format!("cli-test-sched-none-{}", std::process::id());
    assert!(bullmq(&["--prefix", &prefix, "add", "quiet", "j"])
        .status
        .success());
    let before = keys_under(&prefix).await;
    let out = bullmq(&["--prefix", &prefix, "schedulers", "quiet"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout), "no job schedulers on queue quiet\n");
    let json = json_of(&bullmq(&[
        "--prefix",
        &prefix,
        "--json",
        "schedulers",
        "quiet",
    ]));
    assert_eq!(json, serde_json::json!([]));
    assert_eq!(keys_under(&prefix).await, before);
    delete_under(&prefix).await;
}
