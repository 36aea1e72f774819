//! A queue that does not exist (issue 22 §4): every command that reads or acts on a named
//! queue exits 3 with `no queue "X" under prefix "P"` and the closest existing names, writes
//! nothing, and says so as one JSON object with `--json`; `pause`, `resume` and `limits` create
//! a queue only with `--create`; `pause --all` / `resume --all` act on every queue.

mod common;

use common::*;

use serde_json::{json, Value};

/// Runs `bullmq --prefix PREFIX ARGS…`.
fn under(prefix: &str, args: &[&str]) -> std::process::Output {
    let mut all = vec!["--prefix", prefix];
    all.extend_from_slice(args);
    bullmq(&all)
}

/// Every command that names a queue it must find, with `Q` standing for the queue.
const COMMANDS: &[&[&str]] = &[
    &["stats", "Q"],
    &["jobs", "Q", "--state", "failed"],
    &["job", "Q", "1"],
    &["workers", "Q"],
    &["schedulers", "Q"],
    &["scheduler", "remove", "Q", "s"],
    &["metrics", "Q"],
    &["events", "Q", "--no-follow"],
    &["events", "Q", "--count", "1"],
    &["limits", "Q"],
    &["limits", "Q", "--concurrency", "3"],
    &["retry", "Q", "--all"],
    &["retry", "Q", "1"],
    &["promote", "Q", "--all"],
    &["remove", "Q", "--all", "--state", "failed"],
    &["change-priority", "Q", "--priority", "2", "--all"],
    &["change-delay", "Q", "--delay", "1m", "--all"],
    &["clean", "Q", "--state", "completed", "--grace", "0"],
    &["drain", "Q"],
    &["pause", "Q"],
    &["resume", "Q"],
    &["obliterate", "Q", "--yes"],
];

/// `args` with `Q` replaced by `queue`.
fn with_queue<'a>(args: &[&'a str], queue: &'a str) -> Vec<&'a str> {
    args.iter()
        .map(|a| if *a == "Q" { queue } else { a })
        .collect()
}

#[tokio::test]
async fn a_mistyped_queue_exits_3_naming_the_close_one_and_writes_nothing() {
    let prefix = unique_prefix("typo");
    let made = under(&prefix, &["add", "emails", "welcome"]);
    assert!(made.status.success(), "{}", text(&made.stderr));
    let before = keys_under(&prefix).await;

    for args in COMMANDS {
        let args = with_queue(args, "emials");
        let run = under(&prefix, &args);
        assert_eq!(
            run.status.code(),
            Some(3),
            "{args:?}: {}{}",
            text(&run.stdout),
            text(&run.stderr)
        );
        assert_eq!(
            text(&run.stderr).trim_end(),
            format!(
                "error: no queue \"emials\" under prefix \"{prefix}\" (did you mean \"emails\"?)"
            ),
            "{args:?}"
        );
        assert!(run.stdout.is_empty(), "{args:?}: {}", text(&run.stdout));

        // --json: one object, same exit status.
        let mut json_args = vec!["--json"];
        json_args.extend_from_slice(&args);
        let run = under(&prefix, &json_args);
        assert_eq!(run.status.code(), Some(3), "{json_args:?}");
        let error: Value = serde_json::from_slice(&run.stdout).expect("one JSON object");
        assert_eq!(error["kind"], "not-found", "{error}");
        assert_eq!(error["exit"], 3, "{error}");
        assert!(
            error["error"]
                .as_str()
                .unwrap()
                .contains("did you mean \"emails\"?"),
            "{error}"
        );
    }
    // Nothing was created for the typo, nothing else changed.
    assert_eq!(keys_under(&prefix).await, before);

    // Far from every name: the queues there are listed instead.
    let run = under(&prefix, &["stats", "zzzzzzzz"]);
    assert_eq!(run.status.code(), Some(3));
    assert!(
        text(&run.stderr).contains("(its queues: \"emails\")"),
        "{}",
        text(&run.stderr)
    );
    // No queue at all under a prefix: said so.
    let empty = unique_prefix("none");
    let run = under(&empty, &["stats", "emails"]);
    assert_eq!(run.status.code(), Some(3));
    assert!(
        text(&run.stderr).contains("there are no queues under that prefix"),
        "{}",
        text(&run.stderr)
    );
    delete_under(&prefix).await;
}

#[tokio::test]
async fn a_queue_with_only_some_keys_exists() {
    // A queue is any key of it: here only its event stream (a Node QueueEvents reader's view
    // of a queue whose jobs were all removed) or only a failed set.
    let prefix = unique_prefix("partial");
    let client = connect().await;
    use bullmq_redis::fred::prelude::{ClientLike, SortedSetsInterface, StreamsInterface};
    let _: String = client
        .xadd(
            format!("{prefix}:streamonly:events"),
            false,
            None,
            "*",
            vec![("event", "drained")],
        )
        .await
        .unwrap();
    let _: i64 = client
        .zadd(
            format!("{prefix}:failedonly:failed"),
            None,
            None,
            false,
            false,
            (1.0, "7"),
        )
        .await
        .unwrap();
    client.quit().await.unwrap();
    let events = under(&prefix, &["events", "streamonly", "--no-follow"]);
    assert!(events.status.success(), "{}", text(&events.stderr));
    assert!(text(&events.stdout).contains("drained"));
    let stats = json_of(&under(&prefix, &["--json", "stats", "failedonly"]));
    assert_eq!(stats["counts"]["failed"], 1, "{stats}");
    delete_under(&prefix).await;
}

#[tokio::test]
async fn pause_resume_and_limits_create_a_queue_only_when_asked() {
    let prefix = unique_prefix("create");
    for args in [
        &["pause", "fresh"][..],
        &["resume", "fresh"],
        &["limits", "fresh", "--concurrency", "2"],
    ] {
        let run = under(&prefix, args);
        assert_eq!(run.status.code(), Some(3), "{args:?}");
    }
    assert_eq!(keys_under(&prefix).await, Vec::<String>::new());

    let paused = json_of(&under(&prefix, &["--json", "pause", "fresh", "--create"]));
    assert_eq!(paused, json!({"queue": "fresh", "paused": true}));
    let listed = json_of(&under(&prefix, &["--json", "queues"]));
    assert_eq!(listed["queues"][0]["queue"], "fresh", "{listed}");
    assert_eq!(listed["queues"][0]["paused"], true, "{listed}");
    let resumed = json_of(&under(&prefix, &["--json", "resume", "fresh"]));
    assert_eq!(resumed, json!({"queue": "fresh", "paused": false}));

    let limited = json_of(&under(
        &prefix,
        &[
            "--json",
            "limits",
            "other",
            "--create",
            "--concurrency",
            "2",
        ],
    ));
    assert_eq!(limited["concurrency"], 2, "{limited}");
    // --create goes with one named queue only.
    let run = under(&prefix, &["pause", "--all", "--create"]);
    assert_eq!(run.status.code(), Some(2));
    delete_under(&prefix).await;
}

#[tokio::test]
async fn pause_all_and_resume_all_act_on_every_queue() {
    let prefix = unique_prefix("pauseall");
    for queue in ["a", "b", "c"] {
        assert!(under(&prefix, &["add", queue, "job"]).status.success());
    }
    let paused = json_of(&under(&prefix, &["--json", "pause", "--all"]));
    assert_eq!(
        paused,
        json!({"queues": ["a", "b", "c"], "count": 3, "paused": true})
    );
    let listed = json_of(&under(&prefix, &["--json", "queues"]));
    for queue in listed["queues"].as_array().unwrap() {
        assert_eq!(queue["paused"], true, "{queue}");
    }
    let text_out = under(&prefix, &["resume", "--all"]);
    assert!(text_out.status.success());
    assert_eq!(
        text(&text_out.stdout),
        format!("resumed 3 queues under prefix {prefix}\n")
    );
    let listed = json_of(&under(&prefix, &["--json", "queues"]));
    for queue in listed["queues"].as_array().unwrap() {
        assert_eq!(queue["paused"], false, "{queue}");
    }
    delete_under(&prefix).await;
}
