//! The mutating `bullmq` commands against the Redis at `REDIS_URL`, on queues filled and
//! processed by Node BullMQ 6.7.0 (`integration-tests/node/*.js`): what each command changes is
//! read back through Node (`read_jobs.js`, `counts.js`) or seen in what a Node Worker does next,
//! and the exit statuses say what happened (3 no such job, 4 wrong state or not confirmed).
//!
//! Each test uses a prefix of its own, so tests run in parallel on a shared Redis.

mod common;

use common::*;

use std::process::{Command, Output, Stdio};

use bullmq_redis::fred::prelude::{ClientLike, KeysInterface, SortedSetsInterface};
use bullmq_redis::fred::types::{ClusterHash, CustomCommand};
use serde_json::{json, Value};

/// A queue under a prefix of its own, driven through Node and the `bullmq` binary.
struct Fixture {
    prefix: String,
    queue: &'static str,
}

impl Fixture {
    fn new(test: &str) -> Self {
        Self {
            prefix: unique_prefix(test),
            queue: "jobs",
        }
    }

    /// Adds `jobs` (`[{name, data, opts}]`) through Node; returns their ids.
    fn add(&self, jobs: Value) -> Vec<String> {
        let added = node(
            "add_jobs.js",
            &json!({"queue": self.queue, "prefix": self.prefix, "jobs": jobs}),
        );
        added["ids"]
            .as_array()
            .unwrap()
            .iter()
            .map(|id| id.as_str().unwrap().to_owned())
            .collect()
    }

    /// Runs a Node Worker until `count` attempts ended; returns its report.
    fn work(&self, count: usize) -> Value {
        let report = node(
            "run_worker.js",
            &json!({"queue": self.queue, "prefix": self.prefix, "stopAfter": count,
                    "timeoutMs": 60_000}),
        );
        assert_eq!(report["stoppedBy"], "count", "{report}");
        report
    }

    /// Node's view of jobs: fields and state, `null` for a job it cannot find.
    fn read(&self, ids: &[&str]) -> Vec<Value> {
        let read = node(
            "read_jobs.js",
            &json!({"queue": self.queue, "prefix": self.prefix, "ids": ids}),
        );
        read["jobs"].as_array().unwrap().clone()
    }

    /// Node's state names of `ids`, `"missing"` for a job it cannot find.
    fn states(&self, ids: &[&str]) -> Vec<String> {
        self.read(ids)
            .iter()
            .map(|job| job["state"].as_str().unwrap_or("missing").to_owned())
            .collect()
    }

    /// Node's `getJobCounts()` and paused flag.
    fn counts(&self) -> Value {
        node(
            "counts.js",
            &json!({"queue": self.queue, "prefix": self.prefix, "states": []}),
        )
    }

    /// Runs `bullmq --prefix … <args>` with stdin closed (not a terminal).
    fn bullmq(&self, args: &[&str]) -> Output {
        Command::new(env!("CARGO_BIN_EXE_bullmq"))
            .arg("--prefix")
            .arg(&self.prefix)
            .args(args)
            .env("REDIS_URL", redis_url())
            .env_remove("RUST_LOG")
            .stdin(Stdio::null())
            .output()
            .expect("the bullmq binary runs")
    }

    /// Runs `bullmq`, expects success, returns stdout.
    fn ok(&self, args: &[&str]) -> String {
        let out = self.bullmq(args);
        assert!(
            out.status.success(),
            "bullmq {args:?} failed ({}): {}",
            out.status,
            text(&out.stderr)
        );
        text(&out.stdout)
    }

    /// Runs `bullmq --json`, expects success, returns the JSON.
    fn json(&self, args: &[&str]) -> Value {
        let mut all = vec!["--json"];
        all.extend_from_slice(args);
        serde_json::from_str(&self.ok(&all)).expect("--json prints JSON")
    }

    /// Runs `bullmq`, expects exit `code` and an error line mentioning `mentions`.
    fn fails(&self, args: &[&str], code: i32, mentions: &str) -> Output {
        let out = self.bullmq(args);
        let stderr = text(&out.stderr);
        assert_eq!(
            out.status.code(),
            Some(code),
            "bullmq {args:?}: stdout {} stderr {stderr}",
            text(&out.stdout)
        );
        assert!(
            stderr.contains(mentions),
            "bullmq {args:?}: {stderr:?} lacks {mentions:?}"
        );
        out
    }

    /// The keys of this test, sorted.
    async fn keys(&self) -> Vec<String> {
        let client = connect().await;
        let mut keys: Vec<String> = client
            .custom(
                CustomCommand::new_static("KEYS", ClusterHash::Random, false),
                vec![format!("{}:*", self.prefix)],
            )
            .await
            .unwrap();
        client.quit().await.unwrap();
        keys.sort();
        keys
    }

    /// Deletes the keys of this test.
    async fn cleanup(&self) {
        let keys = self.keys().await;
        if !keys.is_empty() {
            let client = connect().await;
            let _: i64 = client.del(keys).await.unwrap();
            client.quit().await.unwrap();
        }
    }
}

#[tokio::test]
async fn retry_all_sends_failed_jobs_back_and_a_node_worker_completes_them() {
    if !node_available() {
        return;
    }
    let q = Fixture::new("retry-all");
    // Three jobs fail their first (and only) attempt; a retry keeps attemptsMade, so the
    // second run completes them. One completes at once and must be left alone.
    let ids = q.add(json!([
        {"name": "a", "data": {"failAttempts": 1}},
        {"name": "b", "data": {"failAttempts": 1}},
        {"name": "c", "data": {}},
        {"name": "d", "data": {"failAttempts": 1}},
    ]));
    let first = q.work(4);
    assert_eq!(first["failed"].as_array().unwrap().len(), 3, "{first}");

    let retried = q.json(&["retry", q.queue, "--all"]);
    // `changed` lists the ids (the failed ones, oldest first) and `count` counts them.
    assert_eq!(retried["count"], 3, "{retried}");
    let mut changed: Vec<&str> = retried["changed"]
        .as_array()
        .unwrap()
        .iter()
        .map(|id| id.as_str().unwrap())
        .collect();
    changed.sort_unstable();
    let mut failed = vec![ids[0].as_str(), ids[1].as_str(), ids[3].as_str()];
    failed.sort_unstable();
    assert_eq!(changed, failed, "{retried}");
    assert_eq!(retried["skipped"], json!([]), "{retried}");
    assert_eq!(retried["operation"], "retry");
    assert_eq!(retried["states"], json!(["failed"]));
    let ids: Vec<&str> = ids.iter().map(String::as_str).collect();
    assert_eq!(
        q.states(&ids),
        ["waiting", "waiting", "completed", "waiting"]
    );
    let second = q.work(3);
    let completed: Vec<&str> = second["completed"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["id"].as_str().unwrap())
        .collect();
    // Retried oldest first, so a single Node worker takes them in their failing order.
    assert_eq!(completed, [ids[0], ids[1], ids[3]], "{second}");
    let counts = q.counts();
    assert_eq!(counts["counts"]["completed"], 4, "{counts}");
    assert_eq!(counts["counts"]["failed"], 0, "{counts}");

    // Nothing left to retry; and from completed, on request.
    assert_eq!(
        q.ok(&["retry", q.queue, "--all"]),
        "retried 0 failed jobs on queue jobs\n"
    );
    assert_eq!(
        q.ok(&["retry", q.queue, "--all", "--state", "completed"]),
        "retried 4 completed jobs on queue jobs\n"
    );
    assert_eq!(q.counts()["counts"]["waiting"], 4);
    q.cleanup().await;
}

#[tokio::test]
async fn retry_by_id_names_missing_jobs_and_wrong_states() {
    if !node_available() {
        return;
    }
    let q = Fixture::new("retry-ids");
    let ids = q.add(json!([
        {"name": "bad", "data": {"fail": "boom"}},
        {"name": "good", "data": {}},
    ]));
    let (failed, done) = (ids[0].as_str(), ids[1].as_str());
    q.work(2);
    let before = q.read(&[failed, done]);

    // A completed job is not retried from failed: exit 4, the state named, nothing changed.
    q.fails(
        &["retry", q.queue, done],
        4,
        &format!("job {done} is not failed, it is completed"),
    );
    q.fails(
        &["retry", q.queue, "no-such-job"],
        3,
        "job no-such-job does not exist on queue jobs",
    );
    assert_eq!(q.read(&[failed, done]), before);

    assert_eq!(
        q.ok(&["retry", q.queue, failed]),
        "retried 1 job on queue jobs\n"
    );
    let job = &q.read(&[failed])[0];
    assert_eq!(job["state"], "waiting", "{job}");
    assert_eq!(job["failedReason"], Value::Null, "{job}");
    assert_eq!(
        q.ok(&["retry", q.queue, done, "--state", "completed"]),
        "retried 1 job on queue jobs\n"
    );

    // Several ids: each is tried, the first failure sets the status, JSON says which is which.
    // With --json the report and the error are one object on stdout.
    let out = q.bullmq(&["--json", "retry", q.queue, failed, "77"]);
    assert_eq!(out.status.code(), Some(4), "{}", text(&out.stdout));
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        report["error"],
        format!("job {failed} is not failed, it is waiting; job 77 does not exist on queue jobs")
    );
    assert_eq!(
        (&report["kind"], &report["exit"]),
        (&json!("refused"), &json!(4))
    );
    assert_eq!(report["count"], 0);
    assert_eq!(report["changed"], json!([]));
    assert_eq!(report["notFound"], json!(["77"]));
    assert_eq!(report["refused"][0]["id"], failed);
    q.fails(
        &["retry", q.queue, "77", failed],
        3,
        "job 77 does not exist",
    );
    q.cleanup().await;
}

#[tokio::test]
async fn promote_and_change_delay_change_what_node_reads() {
    if !node_available() {
        return;
    }
    let q = Fixture::new("delay");
    let hour = 3_600_000;
    let ids = q.add(json!([
        {"name": "d1", "data": {}, "opts": {"delay": hour}},
        {"name": "d2", "data": {}, "opts": {"delay": hour}},
        {"name": "d3", "data": {}, "opts": {"delay": hour}},
        {"name": "now", "data": {}},
    ]));
    let ids: Vec<&str> = ids.iter().map(String::as_str).collect();

    q.ok(&["promote", q.queue, ids[0]]);
    let promoted = &q.read(&[ids[0]])[0];
    assert_eq!(promoted["state"], "waiting", "{promoted}");
    assert_eq!(promoted["delay"], 0, "{promoted}");
    q.fails(
        &["promote", q.queue, ids[3]],
        4,
        &format!("job {} is not delayed, it is waiting", ids[3]),
    );
    q.fails(&["promote", q.queue, "404"], 3, "job 404 does not exist");

    // Due two hours from now: Node reads the new delay, the score says when.
    let before = now_ms();
    assert_eq!(
        q.ok(&["change-delay", q.queue, "--delay", "2h", ids[1]]),
        "rescheduled 1 job on queue jobs\n"
    );
    let job = &q.read(&[ids[1]])[0];
    assert_eq!(job["state"], "delayed", "{job}");
    assert_eq!(job["delay"], 2 * hour, "{job}");
    let client = connect().await;
    let score: f64 = client
        .zscore(format!("{}:jobs:delayed", q.prefix), ids[1])
        .await
        .unwrap();
    client.quit().await.unwrap();
    let due = (score as u64) >> 12;
    assert!(
        due >= before + 2 * hour && due <= now_ms() + 2 * hour,
        "due at {due}, asked at {before}"
    );
    q.fails(
        &["change-delay", q.queue, "--delay", "1m", ids[3]],
        4,
        "is not delayed, it is waiting",
    );

    let all = q.json(&["change-delay", q.queue, "--delay", "5m", "--all"]);
    assert_eq!(all["count"], 2, "{all}");
    let mut changed: Vec<&str> = all["changed"]
        .as_array()
        .unwrap()
        .iter()
        .map(|id| id.as_str().unwrap())
        .collect();
    changed.sort_unstable();
    let mut delayed = vec![ids[1], ids[2]];
    delayed.sort_unstable();
    assert_eq!(changed, delayed, "{all}");
    assert_eq!(all["states"], json!(["delayed"]));
    for job in q.read(&[ids[1], ids[2]]) {
        assert_eq!(job["delay"], 300_000, "{job}");
        assert_eq!(job["state"], "delayed", "{job}");
    }
    assert_eq!(
        q.ok(&["promote", q.queue, "--all"]),
        "promoted 2 delayed jobs on queue jobs\n"
    );
    assert_eq!(q.states(&ids), ["waiting"; 4]);
    // Node's worker takes them in the order they were queued: the one never delayed, the one
    // promoted first, then the two promoted by --all (due within the same millisecond maybe,
    // so in either order).
    let report = q.work(4);
    let mut order: Vec<&str> = report["processed"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["id"].as_str().unwrap())
        .collect();
    assert_eq!(order[..2], [ids[3], ids[0]], "{report}");
    order[2..].sort_unstable();
    let mut rest = [ids[1], ids[2]];
    rest.sort_unstable();
    assert_eq!(order[2..], rest, "{report}");
    q.cleanup().await;
}

#[tokio::test]
async fn change_priority_reorders_what_a_node_worker_takes() {
    if !node_available() {
        return;
    }
    let q = Fixture::new("priority");
    let ids = q.add(json!([
        {"name": "p1", "data": {}, "opts": {"priority": 5}},
        {"name": "p2", "data": {}, "opts": {"priority": 5}},
        {"name": "p3", "data": {}, "opts": {"priority": 5}},
        {"name": "plain", "data": {}},
    ]));
    let ids: Vec<&str> = ids.iter().map(String::as_str).collect();

    q.ok(&["change-priority", q.queue, "--priority", "1", ids[2]]);
    let job = &q.read(&[ids[2]])[0];
    assert_eq!(job["priority"], 1, "{job}");
    assert_eq!(job["state"], "prioritized", "{job}");
    q.fails(
        &["change-priority", q.queue, "--priority", "1", "nope"],
        3,
        "job nope does not exist",
    );

    // --all: the prioritized jobs (highest first) then the waiting one, all to priority 2, so
    // they keep that order within the new priority.
    let all = q.json(&["change-priority", q.queue, "--priority", "2", "--all"]);
    assert_eq!(all["count"], 4, "{all}");
    assert_eq!(all["states"], json!(["prioritized", "waiting"]));
    for job in q.read(&ids) {
        assert_eq!(job["priority"], 2, "{job}");
        assert_eq!(job["state"], "prioritized", "{job}");
    }
    // --lifo: ahead of the jobs of its priority.
    q.ok(&[
        "change-priority",
        q.queue,
        "--priority",
        "2",
        "--lifo",
        ids[1],
    ]);
    let report = q.work(4);
    let order: Vec<&str> = report["processed"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["id"].as_str().unwrap())
        .collect();
    assert_eq!(order, [ids[1], ids[2], ids[0], ids[3]], "{report}");
    q.cleanup().await;
}

#[tokio::test]
async fn remove_by_id_and_by_state() {
    if !node_available() {
        return;
    }
    let q = Fixture::new("remove");
    let ids = q.add(json!([
        {"name": "d1", "data": {}, "opts": {"delay": 3_600_000}},
        {"name": "d2", "data": {}, "opts": {"delay": 3_600_000}},
        {"name": "w1", "data": {}},
        {"name": "w2", "data": {}},
    ]));
    let ids: Vec<&str> = ids.iter().map(String::as_str).collect();

    assert_eq!(
        q.ok(&["remove", q.queue, ids[0]]),
        "removed 1 job on queue jobs\n"
    );
    assert_eq!(q.read(&[ids[0]]), [Value::Null]);
    q.fails(
        &["remove", q.queue, ids[0]],
        3,
        &format!("job {} does not exist", ids[0]),
    );
    // --state only goes with --all, and --all needs it.
    q.fails(
        &["remove", q.queue, ids[1], "--state", "delayed"],
        2,
        "cannot be used",
    );
    q.fails(&["remove", q.queue, "--all"], 2, "--state");

    let delayed = q.json(&["remove", q.queue, "--all", "--state", "delayed"]);
    assert_eq!(delayed["count"], 1, "{delayed}");
    assert_eq!(
        q.ok(&["remove", q.queue, "--all", "--state", "wait"]),
        "removed 2 waiting jobs on queue jobs\n"
    );
    assert_eq!(
        q.read(&ids),
        [Value::Null, Value::Null, Value::Null, Value::Null]
    );
    let counts = q.counts();
    for state in ["waiting", "delayed", "prioritized"] {
        assert_eq!(counts["counts"][state], 0, "{counts}");
    }
    q.cleanup().await;
}

#[tokio::test]
async fn clean_and_drain_remove_what_they_say() {
    if !node_available() {
        return;
    }
    let q = Fixture::new("clean");
    let done = q.add(json!([
        {"name": "c1", "data": {}}, {"name": "c2", "data": {}}, {"name": "c3", "data": {}},
    ]));
    q.work(3);
    // Finished just now: inside an hour's grace, nothing goes.
    assert_eq!(
        q.ok(&["clean", q.queue, "--state", "completed", "--grace", "1h"]),
        "removed 0 completed jobs older than 1h from queue jobs\n"
    );
    let limited = q.json(&[
        "clean",
        q.queue,
        "--state",
        "completed",
        "--grace",
        "0",
        "--limit",
        "2",
    ]);
    // The ids removed, as Node's `clean` returns them, and their count.
    assert_eq!(limited["count"], 2, "{limited}");
    assert_eq!(limited["removed"].as_array().unwrap().len(), 2, "{limited}");
    assert_eq!(
        (&limited["queue"], &limited["state"], &limited["graceMs"]),
        (&json!("jobs"), &json!("completed"), &json!(0))
    );
    let left = q.counts();
    assert_eq!(left["counts"]["completed"], 1, "{left}");
    q.ok(&["clean", q.queue, "--state", "completed", "--grace", "0s"]);
    let done: Vec<&str> = done.iter().map(String::as_str).collect();
    assert_eq!(q.read(&done), [Value::Null, Value::Null, Value::Null]);
    q.fails(
        &["clean", q.queue, "--state", "unknown", "--grace", "0"],
        2,
        "expected a job state",
    );

    q.add(json!([
        {"name": "w", "data": {}}, {"name": "w", "data": {}},
        {"name": "p", "data": {}, "opts": {"priority": 3}},
        {"name": "d", "data": {}, "opts": {"delay": 3_600_000}},
    ]));
    assert_eq!(
        q.ok(&["drain", q.queue]),
        "drained queue jobs: removed 3 waiting and prioritized jobs\n"
    );
    let counts = q.counts();
    assert_eq!(counts["counts"]["waiting"], 0, "{counts}");
    assert_eq!(counts["counts"]["prioritized"], 0, "{counts}");
    assert_eq!(counts["counts"]["delayed"], 1, "{counts}");
    let drained = q.json(&["drain", q.queue, "--delayed"]);
    assert_eq!(
        drained,
        json!({"queue": "jobs", "delayed": true, "count": 1})
    );
    assert_eq!(q.counts()["counts"]["delayed"], 0);
    q.cleanup().await;
}

#[tokio::test]
async fn pause_stops_a_node_worker_and_resume_lets_it_go_on() {
    if !node_available() {
        return;
    }
    let q = Fixture::new("pause");
    // A queue that does not exist yet is paused only with --create.
    q.fails(&["pause", q.queue], 3, "no queue \"jobs\"");
    assert_eq!(q.ok(&["pause", q.queue, "--create"]), "paused queue jobs\n");
    assert_eq!(q.counts()["paused"], true);
    let ids = q.add(json!([{"name": "held", "data": {}}]));
    // A paused queue gives a worker nothing, however long it waits.
    let idle = node(
        "run_worker.js",
        &json!({"queue": q.queue, "prefix": q.prefix, "idleMs": 3_000}),
    );
    assert_eq!(idle["processed"], json!([]), "{idle}");
    assert_eq!(q.states(&[&ids[0]]), ["waiting"]);

    assert_eq!(
        q.json(&["resume", q.queue]),
        json!({"queue": "jobs", "paused": false})
    );
    assert_eq!(q.counts()["paused"], false);
    let report = q.work(1);
    assert_eq!(report["completed"][0]["id"], ids[0].as_str(), "{report}");
    q.cleanup().await;
}

#[tokio::test]
async fn obliterate_needs_a_confirmation_and_then_deletes_every_key() {
    if !node_available() {
        return;
    }
    let q = Fixture::new("obliterate");
    q.add(json!([
        {"name": "w", "data": {}},
        {"name": "d", "data": {}, "opts": {"delay": 3_600_000}},
    ]));
    let keys = q.keys().await;
    assert!(keys.len() > 3, "{keys:?}");

    // Not a terminal and no --yes: refused before Redis is touched.
    let out = q.fails(&["obliterate", q.queue], 4, "pass --yes to confirm");
    assert!(out.stdout.is_empty());
    assert_eq!(q.keys().await, keys);

    assert_eq!(
        q.ok(&["obliterate", q.queue, "--yes"]),
        "obliterated queue jobs\n"
    );
    assert_eq!(q.keys().await, Vec::<String>::new());
    q.cleanup().await;
}

/// Runs `bullmq` on a pseudo-terminal (util-linux `script`) typing `answer`; `None` when
/// `script` is not installed.
fn on_a_terminal(q: &Fixture, args: &str, answer: &str) -> Option<Output> {
    use std::io::Write as _;
    let command = format!(
        "{} --prefix {} {args}",
        env!("CARGO_BIN_EXE_bullmq"),
        q.prefix
    );
    let mut child = Command::new("script")
        .args(["-qec", &command, "/dev/null"])
        .env("REDIS_URL", redis_url())
        .env_remove("RUST_LOG")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .ok()?;
    child
        .stdin
        .take()
        .unwrap()
        .write_all(answer.as_bytes())
        .unwrap();
    Some(child.wait_with_output().unwrap())
}

#[tokio::test]
async fn obliterate_on_a_terminal_asks_for_the_queue_name() {
    if !node_available() {
        return;
    }
    let q = Fixture::new("obliterate-tty");
    q.add(json!([{"name": "w", "data": {}}]));
    let keys = q.keys().await;
    let Some(wrong) = on_a_terminal(&q, "obliterate jobs", "job\n") else {
        eprintln!("!!! SKIPPING the terminal half: util-linux `script` is not installed");
        q.cleanup().await;
        return;
    };
    // `script` merges the program's stdout and stderr into its own stdout.
    let shown = text(&wrong.stdout);
    assert_eq!(wrong.status.code(), Some(4), "{shown}");
    assert!(
        shown.contains("Type the queue name (jobs) to confirm"),
        "{shown}"
    );
    assert!(shown.contains("the name typed did not match"), "{shown}");
    assert_eq!(q.keys().await, keys);

    let right = on_a_terminal(&q, "obliterate jobs", "jobs\n").unwrap();
    let shown = text(&right.stdout);
    assert_eq!(right.status.code(), Some(0), "{shown}");
    assert!(shown.contains("obliterated queue"), "{shown}");
    assert_eq!(q.keys().await, Vec::<String>::new());
}

#[tokio::test]
async fn a_job_a_worker_holds_is_refused_skipped_and_kept_unless_forced() {
    if !node_available() {
        return;
    }
    let q = Fixture::new("locked");
    let ids = q.add(json!([{"name": "slow", "data": {"sleepMs": 60_000}}]));
    let id = ids[0].as_str();
    // A Node worker takes the job and holds its lock for the rest of the test.
    let worker = Command::new("node")
        .arg("run_worker.js")
        .arg(
            json!({"queue": q.queue, "prefix": q.prefix, "stopAfter": 1, "timeoutMs": 120_000})
                .to_string(),
        )
        .current_dir(node_dir())
        .env("REDIS_URL", redis_url())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("node runs");
    let _worker = StopOnDrop(worker);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while q.states(&[id]) != ["active"] {
        assert!(
            std::time::Instant::now() < deadline,
            "the Node worker never took job {id}"
        );
        std::thread::sleep(std::time::Duration::from_millis(100));
    }

    q.fails(
        &["remove", q.queue, id],
        4,
        &format!("job {id} is locked by a worker"),
    );
    let all = q.json(&["remove", q.queue, "--all", "--state", "active"]);
    assert_eq!(all["count"], 0, "{all}");
    assert_eq!(all["changed"], json!([]), "{all}");
    assert_eq!(all["skipped"], json!([id]), "{all}");
    assert_eq!(
        q.ok(&["remove", q.queue, "--all", "--state", "active"]),
        "removed 0 active jobs on queue jobs (1 skipped: moved, removed or locked meanwhile)\n"
    );
    q.fails(
        &["obliterate", q.queue, "--yes"],
        4,
        "has active jobs, not obliterated (it is left paused; --force",
    );
    assert_eq!(q.states(&[id]), ["active"]);
    q.ok(&["obliterate", q.queue, "--yes", "--force"]);
    assert_eq!(q.read(&[id]), [Value::Null]);
    q.cleanup().await;
}

/// A child process stopped (and reaped) when the test ends, passed or failed.
struct StopOnDrop(std::process::Child);

impl Drop for StopOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}
