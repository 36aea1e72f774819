//! `bullmq demo` end to end: the built binary against the test Redis, against a dead URL (it
//! starts and then stops its own redis-server), and without a redis-server to start.

use std::net::{Ipv4Addr, TcpListener, TcpStream};
use std::process::{Command, Output};
use std::time::Duration;

use bullmq_redis::fred::prelude::{ClientLike, KeysInterface};
use serde_json::{json, Value};

fn redis_url() -> String {
    match std::env::var("REDIS_URL") {
        Ok(url) if !url.is_empty() => url,
        _ => "redis://127.0.0.1:6379".to_string(),
    }
}

/// A loopback port with no listener.
fn dead_port() -> u16 {
    let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
    listener.local_addr().unwrap().port()
}

fn demo(redis_url: &str, extra: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_bullmq"))
        .args(["demo", "--jobs", "200", "--json"])
        .args(extra)
        .env("REDIS_URL", redis_url)
        .env_remove("RUST_LOG")
        .output()
        .expect("run bullmq demo")
}

fn summary(output: &Output) -> Value {
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "demo failed ({}):\nstdout:\n{stdout}\nstderr:\n{}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_str(stdout.trim()).unwrap_or_else(|e| panic!("not JSON ({e}): {stdout}"))
}

/// The outcome mix of 200 demo jobs is deterministic: per hundred, 5 flaky (fail once, then
/// complete), 2 broken (fail both attempts) and 10 reporting progress 4 times.
fn assert_mix(summary: &Value) {
    assert_eq!(summary["jobs"], 200, "{summary}");
    assert_eq!(summary["completed"], 196, "{summary}");
    assert_eq!(summary["failed"], 4, "{summary}");
    assert_eq!(summary["retried"], 14, "{summary}");
    assert_eq!(summary["progressEvents"], 80, "{summary}");
    assert_eq!(summary["cleaned"], true, "{summary}");
}

#[tokio::test]
async fn demo_runs_on_the_configured_redis_and_removes_its_queue() {
    let url = redis_url();
    let output = demo(&url, &[]);
    // Output goes to pipes here: no colour, no progress-bar escape codes.
    assert!(
        !output.stdout.contains(&0x1b) && !output.stderr.contains(&0x1b),
        "escape codes in a pipe: {:?}",
        String::from_utf8_lossy(&output.stderr)
    );
    let summary = summary(&output);
    assert_mix(&summary);
    assert_eq!(summary["redis"], url.as_str());
    assert!(summary["localRedisPid"].is_null(), "{summary}");

    let queue = summary["queue"].as_str().unwrap();
    let config = bullmq_redis::ConnectionConfig::from_url(&url).unwrap();
    let client = config.connect(None).await.unwrap();
    let suffixes = [
        "meta",
        "id",
        "events",
        "wait",
        "completed",
        "failed",
        "metrics:completed",
    ];
    let keys: Vec<String> = suffixes
        .iter()
        .map(|s| format!("bull:{queue}:{s}"))
        .collect();
    let remaining: i64 = client.exists(keys).await.unwrap();
    assert_eq!(remaining, 0, "the demo queue {queue} was obliterated");
    client.quit().await.unwrap();
}

#[test]
fn demo_starts_and_stops_its_own_redis_when_none_answers() {
    let summary = summary(&demo(&format!("redis://127.0.0.1:{}", dead_port()), &[]));
    assert_mix(&summary);
    let pid = summary["localRedisPid"]
        .as_u64()
        .unwrap_or_else(|| panic!("no local redis in {summary}"));
    // The demo reaped its child before exiting: the process no longer exists.
    assert!(
        !cfg!(target_os = "linux") || !std::path::Path::new(&format!("/proc/{pid}")).exists(),
        "redis-server {pid} is still running"
    );
    let url = summary["redis"].as_str().unwrap();
    let addr = url.trim_start_matches("redis://");
    assert!(
        TcpStream::connect_timeout(&addr.parse().unwrap(), Duration::from_millis(500)).is_err(),
        "something still listens on {addr}"
    );
}

#[test]
fn demo_explains_a_missing_redis_server() {
    let output = demo(
        &format!("redis://127.0.0.1:{}", dead_port()),
        &["--redis-server", "/nonexistent/redis-server"],
    );
    assert_eq!(output.status.code(), Some(1));
    // With --json the error is one JSON object on stdout.
    let error: Value = serde_json::from_slice(&output.stdout).expect("one JSON error object");
    let message = error["error"].as_str().unwrap();
    assert!(message.contains("was not found"), "{error}");
    assert!(message.contains("--redis-url"), "{error}");
    assert_eq!(
        (&error["kind"], &error["exit"]),
        (&json!("failed"), &json!(1))
    );
}

#[test]
fn ctrl_c_stops_the_demo_and_its_redis() {
    use std::io::{BufRead, BufReader};
    use std::process::Stdio;

    let mut child = Command::new(env!("CARGO_BIN_EXE_bullmq"))
        .args(["demo", "--jobs", "20000", "--concurrency", "5", "--json"])
        .env("REDIS_URL", format!("redis://127.0.0.1:{}", dead_port()))
        .env_remove("RUST_LOG")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run bullmq demo");
    let stderr = BufReader::new(child.stderr.take().unwrap());
    let mut redis_pid = None;
    let mut seen = Vec::new();
    for line in stderr.lines() {
        let line = line.unwrap();
        if let Some(rest) = line.strip_prefix("Local redis-server (pid ") {
            redis_pid = rest.split(')').next().and_then(|p| p.parse::<u32>().ok());
        }
        let added = line.starts_with("Added ");
        seen.push(line);
        if added {
            break; // the workers are processing now
        }
    }
    let redis_pid = redis_pid.unwrap_or_else(|| panic!("no local redis announced: {seen:?}"));
    let sent = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(sent.success());
    let output = child.wait_with_output().unwrap();
    assert!(
        !output.status.success(),
        "an interrupted demo reports failure"
    );
    assert!(
        !cfg!(target_os = "linux") || !std::path::Path::new(&format!("/proc/{redis_pid}")).exists(),
        "redis-server {redis_pid} is still running after Ctrl-C"
    );
}
