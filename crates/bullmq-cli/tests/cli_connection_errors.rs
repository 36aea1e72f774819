//! The `bullmq` binary when Redis cannot be used (issue 10, item 6): every command exits
//! non-zero with exactly one line on stderr, without colour (stderr is a pipe here), well
//! within a generous 20 s guard, for an unreachable port, a plain server behind `rediss://`
//! and a bad URL scheme; and `events --no-follow` replays the stream and exits, with `--count`
//! counting what was replayed.

use std::io::Read;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use bullmq_redis::fred::prelude::{ClientLike, KeysInterface, StreamsInterface};
use bullmq_redis::ConnectionConfig;

const GUARD: Duration = Duration::from_secs(20);

fn redis_url() -> String {
    std::env::var("REDIS_URL")
        .ok()
        .filter(|u| !u.is_empty())
        .unwrap_or_else(|| "redis://127.0.0.1:6379".into())
}

/// What one run of the binary produced.
struct Run {
    code: Option<i32>,
    stdout: String,
    stderr: String,
    took: Duration,
}

/// Runs `bullmq` with `args`, killing it (its own child, by handle) after [`GUARD`].
fn bullmq(redis: &str, args: &[&str]) -> Run {
    bullmq_logging(redis, args, None)
}

/// As [`bullmq`], with `RUST_LOG` set to `log` when given.
fn bullmq_logging(redis: &str, args: &[&str], log: Option<&str>) -> Run {
    let started = Instant::now();
    let mut command = Command::new(env!("CARGO_BIN_EXE_bullmq"));
    command.env_remove("RUST_LOG");
    if let Some(log) = log {
        command.env("RUST_LOG", log);
    }
    let mut child = command
        .args(args)
        .env("REDIS_URL", redis)
        .env_remove("NO_COLOR")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the bullmq binary runs");
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait") {
            break Some(status);
        }
        if started.elapsed() > GUARD {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let took = started.elapsed();
    let mut stdout = String::new();
    let mut stderr = String::new();
    child
        .stdout
        .take()
        .unwrap()
        .read_to_string(&mut stdout)
        .unwrap();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut stderr)
        .unwrap();
    assert!(
        status.is_some(),
        "bullmq {args:?} ran past {GUARD:?}; stderr: {stderr}"
    );
    Run {
        code: status.and_then(|s| s.code()),
        stdout,
        stderr,
        took,
    }
}

/// A loopback port nobody listens on.
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Every command that talks to Redis (the demo starts its own server when none answers).
const COMMANDS: [&[&str]; 8] = [
    &["stats", "q"],
    &["add", "q", "job"],
    &["schedulers", "q"],
    &["scheduler", "upsert", "q", "s", "--every", "1s"],
    &["scheduler", "remove", "q", "s"],
    &["events", "q"],
    &["events", "q", "--no-follow"],
    &["events", "q", "--follow", "--count", "1"],
];

fn assert_one_clear_line(what: &str, run: &Run, mentions: &str) {
    assert_one_clear_line_with(what, run, mentions, 1);
}

fn assert_one_clear_line_with(what: &str, run: &Run, mentions: &str, code: i32) {
    assert_eq!(
        run.code,
        Some(code),
        "{what}: exit code; stderr: {}",
        run.stderr
    );
    let lines: Vec<&str> = run
        .stderr
        .lines()
        .filter(|l| !l.trim().is_empty())
        .collect();
    assert_eq!(lines.len(), 1, "{what}: one line expected, got {lines:?}");
    assert!(lines[0].starts_with("error: "), "{what}: {}", lines[0]);
    assert!(
        lines[0].contains(mentions),
        "{what}: {} lacks {mentions:?}",
        lines[0]
    );
    assert!(
        !run.stderr.contains('\u{1b}'),
        "{what}: colour escape in a pipe: {:?}",
        run.stderr
    );
    assert!(run.stdout.is_empty(), "{what}: stdout {:?}", run.stdout);
    // A sentence, never a Rust `Debug` rendering such as `Os { code: 111, kind: … }`.
    for debug in ["Os {", "kind:", "Custom {", "Kind("] {
        assert!(
            !run.stderr.contains(debug),
            "{what}: Debug text: {}",
            run.stderr
        );
    }
    assert!(run.took < GUARD / 2, "{what}: took {:?}", run.took);
}

#[test]
fn every_command_fails_with_one_line_on_an_unreachable_port() {
    let url = format!("redis://127.0.0.1:{}", free_port());
    for args in COMMANDS {
        let run = bullmq(&url, args);
        assert_one_clear_line(&format!("{args:?}"), &run, "could not connect to Redis");
    }
}

#[test]
fn log_lines_carry_no_colour_in_a_pipe() {
    // Verbose logging on, stderr a pipe: many log lines, not one escape code.
    let url = format!("redis://127.0.0.1:{}", free_port());
    let run = bullmq_logging(&url, &["stats", "q"], Some("trace"));
    assert_eq!(run.code, Some(1), "{}", run.stderr);
    assert!(
        run.stderr.lines().count() > 1,
        "expected log lines: {}",
        run.stderr
    );
    assert!(
        !run.stderr.contains('\u{1b}'),
        "colour in a pipe: {:?}",
        run.stderr
    );
}

#[test]
fn a_plain_server_behind_rediss_fails_within_the_connect_timeout() {
    let plain = ConnectionConfig::from_url(&redis_url()).unwrap();
    let url = format!("rediss://{}", plain.target());
    for args in [
        &["stats", "q"][..],
        &["events", "q"],
        &["events", "q", "--no-follow"],
    ] {
        let run = bullmq(&url, args);
        assert_one_clear_line(&format!("{args:?}"), &run, "could not connect to Redis");
    }
}

#[test]
fn a_bad_scheme_is_a_usage_error_naming_the_accepted_ones() {
    for args in COMMANDS {
        let run = bullmq("http://127.0.0.1:6379", args);
        assert_one_clear_line_with(&format!("{args:?}"), &run, "rediss://", 2);
    }
}

/// The one JSON object a `--json` run that failed printed on stdout (nothing on stderr).
fn json_error(run: &Run) -> serde_json::Value {
    assert!(run.stderr.trim().is_empty(), "stderr: {}", run.stderr);
    let lines: Vec<&str> = run.stdout.lines().collect();
    assert_eq!(lines.len(), 1, "one JSON line expected: {:?}", run.stdout);
    let value: serde_json::Value = serde_json::from_str(lines[0]).expect("a JSON object");
    let mut keys: Vec<&String> = value.as_object().expect("an object").keys().collect();
    keys.sort();
    assert_eq!(keys, ["error", "exit", "kind"], "{value}");
    assert_eq!(
        value["exit"].as_i64(),
        run.code.map(i64::from),
        "the same exit status as the process: {value}"
    );
    value
}

#[test]
fn with_json_an_error_is_one_object_with_the_same_exit_status() {
    // Unreachable: exit 1, kind connection, a sentence.
    let url = format!("redis://127.0.0.1:{}", free_port());
    for args in [
        &["--json", "stats", "q"][..],
        &["--json", "queues"],
        &["--json", "events", "q", "--no-follow"],
    ] {
        let run = bullmq(&url, args);
        assert_eq!(run.code, Some(1), "{args:?}: {}", run.stdout);
        let error = json_error(&run);
        assert_eq!(error["kind"], "connection", "{args:?}: {error}");
        let message = error["error"].as_str().unwrap();
        assert!(message.contains("could not connect to Redis"), "{message}");
        assert!(!message.contains("Os {"), "{message}");
    }
    // A malformed URL: a usage error, exit 2, with or without --json.
    for url in ["http://127.0.0.1:6379", "redis://a:b:c"] {
        let plain = bullmq(url, &["stats", "q"]);
        assert_eq!(plain.code, Some(2), "{url}: {}", plain.stderr);
        let run = bullmq(url, &["--json", "stats", "q"]);
        assert_eq!(run.code, Some(2), "{url}: {}", run.stdout);
        let error = json_error(&run);
        assert_eq!(error["kind"], "usage", "{error}");
        assert!(
            error["error"]
                .as_str()
                .unwrap()
                .starts_with("bad --redis-url"),
            "{error}"
        );
    }
    // What clap refuses (a missing argument) is the same usage object.
    let run = bullmq(&url, &["--json", "stats"]);
    assert_eq!(run.code, Some(2));
    let error = json_error(&run);
    assert_eq!(error["kind"], "usage", "{error}");
    assert!(
        error["error"].as_str().unwrap().contains("<QUEUE>"),
        "{error}"
    );
}

#[tokio::test]
async fn no_follow_replays_the_stream_and_exits_and_count_counts_the_replay() {
    let queue = format!("cli-replay-{}", std::process::id());
    let key = format!("bull:{queue}:events");
    let client = ConnectionConfig::from_url(&redis_url())
        .unwrap()
        .connect(None)
        .await
        .unwrap();
    for i in 0..5 {
        let _: String = client
            .xadd(
                &key,
                false,
                None,
                "*",
                vec![("event", "tick"), ("n", &i.to_string())],
            )
            .await
            .unwrap();
    }
    let url = redis_url();

    let all = bullmq(&url, &["events", &queue, "--no-follow"]);
    assert_eq!(all.code, Some(0), "{}", all.stderr);
    assert_eq!(all.stdout.lines().count(), 5, "{}", all.stdout);
    assert!(
        all.stdout.lines().all(|l| l.contains(" tick n=")),
        "{}",
        all.stdout
    );

    // --count below the stream's length stops early; above it, at the end of the replay.
    let two = bullmq(&url, &["events", &queue, "--no-follow", "--count", "2"]);
    assert_eq!(two.code, Some(0), "{}", two.stderr);
    assert_eq!(two.stdout.lines().count(), 2, "{}", two.stdout);
    let many = bullmq(
        &url,
        &["--json", "events", &queue, "--no-follow", "--count", "50"],
    );
    assert_eq!(many.code, Some(0), "{}", many.stderr);
    assert_eq!(many.stdout.lines().count(), 5, "{}", many.stdout);

    // Replay from an id: what follows it.
    let second = all
        .stdout
        .lines()
        .nth(1)
        .unwrap()
        .split(' ')
        .next()
        .unwrap();
    let after = bullmq(&url, &["events", &queue, "--no-follow", "--from", second]);
    assert_eq!(after.stdout.lines().count(), 3, "{}", after.stdout);

    // A queue that does not exist is said to be missing (exit 3), not an empty replay.
    let missing = bullmq(&url, &["events", &format!("{queue}-none"), "--no-follow"]);
    assert_eq!(missing.code, Some(3), "{}", missing.stderr);
    assert!(
        missing
            .stderr
            .contains(&format!("no queue \"{queue}-none\" under prefix \"bull\"")),
        "{}",
        missing.stderr
    );
    assert!(missing.stdout.is_empty());

    // Following with --from 0 and --count replays and exits too.
    let follow = bullmq(
        &url,
        &["events", &queue, "--follow", "--from", "0", "--count", "3"],
    );
    assert_eq!(follow.code, Some(0), "{}", follow.stderr);
    assert_eq!(follow.stdout.lines().count(), 3, "{}", follow.stdout);

    let _: i64 = client.del(&key).await.unwrap();
    client.quit().await.unwrap();
}
