//! `bullmq top` against the Redis at `REDIS_URL`: the plain table and JSON lines list queues
//! Node filled with the right counts, and in a real pseudo-terminal the full-screen view shows
//! the queues, `p` pauses the selected one, `r` retries its failed jobs and `q` quits with the
//! terminal restored.

mod common;

use common::*;

use std::io::{Read, Write};
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bullmq_redis::fred::prelude::ClientLike;
use bullmq_redis::ConnectionConfig;
use portable_pty::{native_pty_system, CommandBuilder, PtySize};
use ractor_bullmq::{Queue, QueueOptions};
use serde_json::{json, Value};

/// What a test waits at most for something that should take a moment.
const PATIENCE: Duration = Duration::from_secs(30);

/// Switching to / from the alternate screen (xterm's private mode 1049).
const ENTER_ALTERNATE_SCREEN: &str = "\x1b[?1049h";
const LEAVE_ALTERNATE_SCREEN: &str = "\x1b[?1049l";

async fn open(prefix: &str, name: &str) -> Queue {
    let config = ConnectionConfig::from_url(&redis_url()).unwrap();
    Queue::new(name, QueueOptions::new(config).prefix(prefix))
        .await
        .unwrap()
}

/// Fills two queues with Node: `emails` with one job completed, one failed and one delayed;
/// `resize` with two waiting jobs.
fn fill_two_queues(prefix: &str) {
    node_add(
        prefix,
        "emails",
        json!([
            {"name": "welcome", "data": {}},
            {"name": "bounce", "data": {"fail": "mailbox full"}},
            {"name": "later", "data": {}, "opts": {"delay": 3_600_000}},
        ]),
    );
    node_work(prefix, "emails", 2, json!({}));
    node_add(
        prefix,
        "resize",
        json!([{"name": "thumb", "data": {}}, {"name": "thumb", "data": {}}]),
    );
}

#[tokio::test]
async fn plain_mode_lists_node_queues_with_their_counts() {
    if !node_available() {
        return;
    }
    let prefix = unique_prefix("plain");
    fill_two_queues(&prefix);
    // A connection named as Node names a worker's, as `getWorkers()` finds workers.
    let keys = bullmq_protocol::keys::QueueKeys::new(prefix.clone(), "emails");
    let worker = ConnectionConfig::from_url(&redis_url())
        .unwrap()
        .connect(Some(keys.worker_client_name(Some("w1"))))
        .await
        .unwrap();

    let output = bullmq(&["--prefix", &prefix, "top", "--iterations", "1"]);
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let text = String::from_utf8(output.stdout).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(
        lines.len(),
        4,
        "a heading, the header and two queues: {text}"
    );
    assert!(lines[0].contains(&format!("prefix {prefix}")), "{text}");
    let header: Vec<&str> = lines[1].split_whitespace().collect();
    assert_eq!(
        header,
        [
            "QUEUE",
            "WAITING",
            "ACTIVE",
            "DELAYED",
            "PRIORITIZED",
            "COMPLETED",
            "FAILED",
            "WAITING-CHILDREN",
            "PAUSED",
            "WORKERS",
            "COMPLETED/S",
            "FAILED/S"
        ]
    );
    let emails: Vec<&str> = lines[2].split_whitespace().collect();
    assert_eq!(
        emails[..10],
        ["emails", "0", "0", "1", "0", "1", "1", "0", "no", "1"],
        "{text}"
    );
    let resize: Vec<&str> = lines[3].split_whitespace().collect();
    assert_eq!(
        resize[..9],
        ["resize", "2", "0", "0", "0", "0", "0", "0", "no"],
        "{text}"
    );

    // JSON lines: one document per refresh; rates exist from the second on.
    let output = bullmq(&[
        "--prefix",
        &prefix,
        "--json",
        "top",
        "--iterations",
        "2",
        "--interval",
        "200ms",
    ]);
    assert!(output.status.success());
    let text = String::from_utf8(output.stdout).unwrap();
    let docs: Vec<Value> = text
        .lines()
        .map(|line| serde_json::from_str(line).expect("each line is one JSON document"))
        .collect();
    assert_eq!(docs.len(), 2, "{text}");
    let emails = &docs[1]["queues"][0];
    assert_eq!(emails["queue"], "emails");
    assert_eq!(
        emails["counts"],
        json!({"waiting": 0, "active": 0, "delayed": 1, "prioritized": 0,
               "completed": 1, "failed": 1, "waiting-children": 0})
    );
    assert_eq!(emails["paused"], false);
    assert_eq!(emails["workers"], 1);
    assert_eq!(docs[0]["queues"][0]["completedPerSec"], Value::Null);
    assert_eq!(emails["completedPerSec"], 0.0, "nothing finished meanwhile");
    assert_eq!(docs[1]["queues"][1]["counts"]["waiting"], 2);
    assert_eq!(docs[1]["prefix"], prefix.as_str());

    worker.quit().await.unwrap();
    delete_under(&prefix).await;
}

#[test]
fn plain_mode_says_when_there_are_no_queues() {
    let prefix = unique_prefix("none");
    let output = bullmq(&["--prefix", &prefix, "top", "--iterations", "1"]);
    assert!(output.status.success());
    let text = String::from_utf8(output.stdout).unwrap();
    assert!(
        text.contains(&format!("no queues under prefix {prefix:?}")),
        "{text}"
    );
}

#[test]
fn a_bad_interval_is_a_usage_error() {
    let output = bullmq(&["top", "--interval", "5ms"]);
    assert_eq!(output.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&output.stderr).contains("at least 100ms"));
}

/// `bullmq top` running in a pseudo-terminal of 80x24, with everything it printed so far.
struct InPty {
    child: Box<dyn portable_pty::Child + Send + Sync>,
    keys: Box<dyn Write + Send>,
    screen: Arc<Mutex<Vec<u8>>>,
}

impl InPty {
    fn start(prefix: &str) -> Self {
        Self::start_on(&redis_url(), prefix)
    }

    fn start_on(redis_url: &str, prefix: &str) -> Self {
        Self::start_sized(redis_url, prefix, 24, 80)
    }

    fn start_sized(redis_url: &str, prefix: &str, rows: u16, cols: u16) -> Self {
        let pty = native_pty_system()
            .openpty(PtySize {
                rows,
                cols,
                pixel_width: 0,
                pixel_height: 0,
            })
            .expect("a pseudo-terminal opens");
        let mut command = CommandBuilder::new(env!("CARGO_BIN_EXE_bullmq"));
        command.args(["--prefix", prefix, "top", "--interval", "200ms"]);
        command.env("REDIS_URL", redis_url);
        command.env("TERM", "xterm-256color");
        command.env_remove("RUST_LOG");
        let child = pty.slave.spawn_command(command).expect("bullmq starts");
        // Only the child holds the terminal's other end now, so reads end when it exits.
        drop(pty.slave);
        let mut reader = pty.master.try_clone_reader().unwrap();
        let keys = pty.master.take_writer().unwrap();
        let screen = Arc::new(Mutex::new(Vec::new()));
        let sink = Arc::clone(&screen);
        std::thread::spawn(move || {
            // The master must stay open while the child runs, or it gets SIGHUP.
            let _master = pty.master;
            let mut chunk = [0u8; 4096];
            while let Ok(n) = reader.read(&mut chunk) {
                if n == 0 {
                    break;
                }
                sink.lock().unwrap().extend_from_slice(&chunk[..n]);
            }
        });
        Self {
            child,
            keys,
            screen,
        }
    }

    fn output(&self) -> String {
        String::from_utf8_lossy(&self.screen.lock().unwrap()).into_owned()
    }

    /// Waits until the output contains `text`.
    fn wait_for(&self, text: &str) {
        let start = Instant::now();
        while !self.output().contains(text) {
            assert!(
                start.elapsed() < PATIENCE,
                "{text:?} never appeared; the terminal got: {:?}",
                self.output()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Sends `signal` (`TERM`, `HUP`, `INT`) to the child, by its pid, with `kill`.
    fn signal(&self, signal: &str) {
        let pid = self.child.process_id().expect("the child has a pid");
        let status = Command::new("kill")
            .args([format!("-{signal}"), pid.to_string()])
            .status()
            .expect("kill runs");
        assert!(status.success(), "kill -{signal} {pid}");
    }

    /// Closes the terminal's input (the writer sends the terminal's EOF as it closes).
    fn close_input(&mut self) {
        self.keys = Box::new(std::io::sink());
    }

    /// Asserts the view ended by leaving the alternate screen it entered.
    fn assert_restored(&self) {
        // Let the reader take the last bytes the child wrote before it exited.
        std::thread::sleep(Duration::from_millis(200));
        let output = self.output();
        let entered = output
            .rfind(ENTER_ALTERNATE_SCREEN)
            .expect("the view uses the alternate screen");
        assert!(
            output[entered..].contains(LEAVE_ALTERNATE_SCREEN),
            "the alternate screen was left: {output:?}"
        );
    }

    fn press(&mut self, key: &str) {
        self.keys.write_all(key.as_bytes()).unwrap();
        self.keys.flush().unwrap();
    }

    /// Waits for the exit, killing the child if it does not come.
    fn wait_exit(&mut self) -> portable_pty::ExitStatus {
        let start = Instant::now();
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status;
            }
            if start.elapsed() > PATIENCE {
                let _ = self.child.kill();
                panic!(
                    "bullmq top did not exit; the terminal got: {:?}",
                    self.output()
                );
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for InPty {
    fn drop(&mut self) {
        // A failed assertion must not leave the binary running.
        if matches!(self.child.try_wait(), Ok(None)) {
            let _ = self.child.kill();
        }
    }
}

/// Waits until `check` holds.
async fn eventually<F, Fut>(what: &str, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let start = Instant::now();
    while !check().await {
        assert!(start.elapsed() < PATIENCE, "never happened: {what}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn in_a_terminal_p_pauses_and_q_quits_restoring_the_terminal() {
    let prefix = unique_prefix("pty");
    let queue = open(&prefix, "pty-mail").await;
    queue.add("welcome", json!({})).send().await.unwrap();

    let mut top = InPty::start(&prefix);
    top.wait_for("pty-mail");
    top.wait_for("running");
    top.press("p");
    eventually("the queue is paused", || async {
        queue.is_paused().await.unwrap()
    })
    .await;
    top.wait_for("paused pty-mail");
    top.press("p");
    eventually("the queue runs again", || async {
        !queue.is_paused().await.unwrap()
    })
    .await;
    top.wait_for("resumed pty-mail");

    top.press("q");
    let status = top.wait_exit();
    assert!(status.success(), "exit {status:?}: {:?}", top.output());
    // Let the reader take the last bytes the child wrote before it exited.
    std::thread::sleep(Duration::from_millis(200));
    let output = top.output();
    let entered = output
        .rfind(ENTER_ALTERNATE_SCREEN)
        .expect("the view uses the alternate screen");
    assert!(
        output[entered..].contains(LEAVE_ALTERNATE_SCREEN),
        "the alternate screen was left: {output:?}"
    );

    queue.close().await.unwrap();
    delete_under(&prefix).await;
}

#[tokio::test]
async fn in_a_terminal_r_retries_the_failed_jobs_of_the_selected_queue() {
    if !node_available() {
        return;
    }
    let prefix = unique_prefix("retry");
    node_add(
        &prefix,
        "flaky",
        json!([
            {"name": "a", "data": {"fail": "boom a"}},
            {"name": "b", "data": {"fail": "boom b"}},
        ]),
    );
    node_work(&prefix, "flaky", 2, json!({}));
    let queue = open(&prefix, "flaky").await;
    assert_eq!(queue.get_job_counts().await.unwrap().failed, 2);

    let mut top = InPty::start(&prefix);
    top.wait_for("flaky");
    top.wait_for("boom b");
    top.press("r");
    top.wait_for("retried 2 failed jobs of flaky");
    let counts = queue.get_job_counts().await.unwrap();
    assert_eq!((counts.failed, counts.waiting), (0, 2));
    top.press("\x1b");
    assert!(top.wait_exit().success(), "{:?}", top.output());

    queue.close().await.unwrap();
    delete_under(&prefix).await;
}

#[tokio::test]
async fn in_a_terminal_ctrl_c_quits_too() {
    let prefix = unique_prefix("ctrl-c");
    let queue = open(&prefix, "pty-ctrl-c").await;
    queue.add("welcome", json!({})).send().await.unwrap();

    let mut top = InPty::start(&prefix);
    top.wait_for("pty-ctrl-c");
    // Raw mode: Ctrl-C arrives as a key, not as SIGINT.
    top.press("\x03");
    let status = top.wait_exit();
    assert!(status.success(), "exit {status:?}: {:?}", top.output());
    std::thread::sleep(Duration::from_millis(200));
    assert!(top.output().contains(LEAVE_ALTERNATE_SCREEN));

    queue.close().await.unwrap();
    delete_under(&prefix).await;
}

/// A redis-server of the test's own on `port`, stopped (by its pid) when dropped.
struct OwnRedis(std::process::Child);

impl OwnRedis {
    fn start(port: u16) -> Self {
        let child = Command::new("redis-server")
            .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
            .args(["--save", "", "--appendonly", "no"])
            .stdout(std::process::Stdio::null())
            .spawn()
            .expect("redis-server runs (it is on PATH wherever these tests run)");
        let start = Instant::now();
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(
                start.elapsed() < PATIENCE,
                "redis-server on {port} never answered"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        Self(child)
    }

    fn stop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

impl Drop for OwnRedis {
    fn drop(&mut self) {
        self.stop();
    }
}

#[tokio::test]
async fn in_a_terminal_redis_going_away_is_shown_and_q_still_quits() {
    // A port of this test's own (6440-6449 are kept for this suite's servers).
    let port = 6441;
    let mut redis = OwnRedis::start(port);
    let url = format!("redis://127.0.0.1:{port}");
    let config = ConnectionConfig::from_url(&url).unwrap();
    let queue = Queue::new("doomed", QueueOptions::new(config).prefix("gone"))
        .await
        .unwrap();
    queue.add("welcome", json!({})).send().await.unwrap();
    queue.close().await.unwrap();

    let mut top = InPty::start_on(&url, "gone");
    top.wait_for("doomed");
    redis.stop();
    top.wait_for("refresh failed");
    top.press("q");
    let status = top.wait_exit();
    assert!(status.success(), "exit {status:?}: {:?}", top.output());
    std::thread::sleep(Duration::from_millis(200));
    let output = top.output();
    let entered = output.rfind(ENTER_ALTERNATE_SCREEN).unwrap();
    assert!(
        output[entered..].contains(LEAVE_ALTERNATE_SCREEN),
        "{output:?}"
    );
}

#[tokio::test]
async fn in_a_terminal_sigterm_sighup_and_sigint_restore_the_terminal() {
    let prefix = unique_prefix("signals");
    let queue = open(&prefix, "pty-signals").await;
    queue.add("welcome", json!({})).send().await.unwrap();
    for signal in ["TERM", "HUP", "INT"] {
        let mut top = InPty::start(&prefix);
        top.wait_for("pty-signals");
        top.signal(signal);
        let status = top.wait_exit();
        assert!(
            status.success(),
            "SIG{signal}: exit {status:?}: {:?}",
            top.output()
        );
        top.assert_restored();
    }
    queue.close().await.unwrap();
    delete_under(&prefix).await;
}

#[tokio::test]
async fn in_a_terminal_closing_the_input_ends_the_view() {
    let prefix = unique_prefix("eof");
    let queue = open(&prefix, "pty-eof").await;
    queue.add("welcome", json!({})).send().await.unwrap();
    let mut top = InPty::start(&prefix);
    top.wait_for("pty-eof");
    top.close_input();
    let status = top.wait_exit();
    assert!(status.success(), "exit {status:?}: {:?}", top.output());
    top.assert_restored();
    queue.close().await.unwrap();
    delete_under(&prefix).await;
}

#[tokio::test]
async fn in_a_terminal_too_small_it_says_why_and_q_quits() {
    let prefix = unique_prefix("small");
    let queue = open(&prefix, "pty-small").await;
    queue.add("welcome", json!({})).send().await.unwrap();
    let mut top = InPty::start_sized(&redis_url(), &prefix, 10, 40);
    // Wrapped over the 40 columns, and drawn word by word (the cursor jumps over blanks).
    for word in ["terminal", "small", "(40x10):", "60x14;", "--once`"] {
        top.wait_for(word);
    }
    assert!(!top.output().contains("pty-small"), "{:?}", top.output());
    top.press("q");
    assert!(top.wait_exit().success(), "{:?}", top.output());
    top.assert_restored();
    queue.close().await.unwrap();
    delete_under(&prefix).await;
}

#[tokio::test]
async fn once_prints_one_snapshot_with_the_server_facts() {
    let prefix = unique_prefix("once");
    let queue = open(&prefix, "snap").await;
    queue.add("welcome", json!({})).send().await.unwrap();

    let output = bullmq(&["--prefix", &prefix, "top", "--once"]);
    assert!(output.status.success(), "{}", text(&output.stderr));
    let shown = text(&output.stdout);
    let lines: Vec<&str> = shown.lines().collect();
    assert_eq!(
        lines.len(),
        3,
        "a heading, the header and one queue: {shown}"
    );
    assert!(
        lines[0].contains("Redis 7") || lines[0].contains("Redis "),
        "{shown}"
    );
    assert!(lines[0].contains(" clients, "), "{shown}");
    assert!(lines[2].starts_with("snap "), "{shown}");

    let output = bullmq(&["--prefix", &prefix, "--json", "top", "--once"]);
    assert!(output.status.success());
    let docs: Vec<Value> = text(&output.stdout)
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    assert_eq!(docs.len(), 1);
    let server = &docs[0]["server"];
    assert!(server["version"].is_string(), "{server}");
    assert!(
        server["connectedClients"].as_u64().unwrap() >= 1,
        "{server}"
    );
    assert!(server["usedMemoryBytes"].as_u64().unwrap() > 0, "{server}");
    assert!(server["opsPerSec"].is_u64(), "{server}");
    assert_eq!(docs[0]["queues"][0]["counts"]["waiting"], 1);

    queue.close().await.unwrap();
    delete_under(&prefix).await;
}
