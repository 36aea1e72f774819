//! The `bullmq` binary against the Redis at `REDIS_URL`: `add` writes what the flags say, `stats`
//! reports it, bad input fails with a readable message and writes nothing.

use std::process::{Command, Output};

use bullmq_redis::fred::prelude::{ClientLike, KeysInterface};
use bullmq_redis::fred::types::{ClusterHash, CustomCommand};
use bullmq_redis::ConnectionConfig;
use serde_json::Value;

fn redis_url() -> String {
    std::env::var("REDIS_URL")
        .ok()
        .filter(|u| !u.is_empty())
        .unwrap_or_else(|| "redis://127.0.0.1:6379".into())
}

fn bullmq(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_bullmq"))
        .args(args)
        .env("REDIS_URL", redis_url())
        .env_remove("RUST_LOG")
        .output()
        .expect("the bullmq binary runs")
}

fn json_of(output: &Output) -> Value {
    assert!(
        output.status.success(),
        "bullmq failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice(&output.stdout).expect("--json prints JSON")
}

/// Keys under `prefix`, sorted (each test uses a prefix of its own).
async fn keys_under(prefix: &str) -> Vec<String> {
    let client = connect(None).await;
    let mut keys: Vec<String> = client
        .custom(
            CustomCommand::new_static("KEYS", ClusterHash::Random, false),
            vec![format!("{prefix}:*")],
        )
        .await
        .unwrap();
    client.quit().await.unwrap();
    keys.sort();
    keys
}

/// Deletes every key under `prefix`.
async fn delete_under(prefix: &str) {
    let keys = keys_under(prefix).await;
    if !keys.is_empty() {
        let client = connect(None).await;
        let _: i64 = client.del(keys).await.unwrap();
        client.quit().await.unwrap();
    }
}

async fn connect(name: Option<String>) -> bullmq_redis::fred::prelude::Client {
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
    let prefix = format!("cli-test-ro-{}", std::process::id());
    let out = bullmq(&["--prefix", &prefix, "--json", "stats", "nothing"]);
    assert_eq!(json_of(&out)["counts"]["waiting"], 0);
    assert_eq!(keys_under(&prefix).await, Vec::<String>::new());
}

#[tokio::test]
async fn stats_counts_connections_named_like_node_workers() {
    let prefix = format!("cli-test-w-{}", std::process::id());
    let keys = bullmq_protocol::keys::QueueKeys::new(prefix.clone(), "jobs");
    let named = connect(Some(keys.worker_client_name(Some("w-1")))).await;
    let unnamed = connect(Some(keys.worker_client_name(None))).await;
    let other = connect(Some(format!("{prefix}:b3RoZXI=:w:x"))).await;
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
}
