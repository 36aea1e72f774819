//! Runs the official Rust port's side of a benchmark (`bullmq-official` 1.4.4, the separate
//! cargo project `benches/official`) and reads its JSON result, like `node.rs` does for Node.
//!
//! The project is not a workspace member (its redis + rustls and chrono-tz dependencies would
//! slow every CI build), so it is built here on first use with its own committed lock file.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use anyhow::{bail, Context, Result};
use serde_json::Value;

/// `benches/official/Cargo.toml`.
fn manifest() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("official/Cargo.toml")
}

/// The built binary, once `available` built it.
static BINARY: OnceLock<Option<PathBuf>> = OnceLock::new();

/// Whether the official side can run: builds `bullmq-bench-official` in release mode (once per
/// process; cargo makes later builds no-ops) and remembers where the binary is.
pub(crate) fn available() -> bool {
    BINARY
        .get_or_init(|| match build() {
            Ok(path) => Some(path),
            Err(error) => {
                eprintln!("building the official-port benchmark failed: {error:#}");
                None
            }
        })
        .is_some()
}

/// `cargo build --release` of `benches/official`; the binary's path comes from cargo's JSON
/// messages, so a `CARGO_TARGET_DIR` is honoured.
fn build() -> Result<PathBuf> {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    eprintln!("building benches/official (bullmq-official 1.4.4) ...");
    let output = std::process::Command::new(cargo)
        .args(["build", "--release", "--locked", "--message-format=json"])
        .arg("--manifest-path")
        .arg(manifest())
        .stderr(std::process::Stdio::inherit())
        .output()
        .context("could not start cargo")?;
    if !output.status.success() {
        bail!("cargo build failed ({})", output.status);
    }
    executable(&String::from_utf8_lossy(&output.stdout))
        .context("cargo reported no bullmq-bench-official executable")
}

/// The `executable` of the `bullmq-bench-official` artifact in cargo's JSON messages.
fn executable(messages: &str) -> Option<PathBuf> {
    messages
        .lines()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .filter(|m| m["reason"] == "compiler-artifact")
        .filter(|m| m["target"]["name"] == "bullmq-bench-official")
        .find_map(|m| m["executable"].as_str().map(PathBuf::from))
}

/// Runs the official side with `arg` (the JSON the Node scripts take) and parses its JSON reply.
pub(crate) async fn run(arg: &Value, redis_url: &str) -> Result<Value> {
    let Some(Some(binary)) = BINARY.get() else {
        bail!("the official-port benchmark was not built (official::available was not true)");
    };
    run_binary(binary, arg, redis_url).await
}

async fn run_binary(binary: &Path, arg: &Value, redis_url: &str) -> Result<Value> {
    let mode = arg["mode"].as_str().unwrap_or("?");
    let mut command = tokio::process::Command::new(binary);
    command.arg(arg.to_string()).env("REDIS_URL", redis_url);
    if mode == "memory" {
        let (name, value) = crate::memory::JEMALLOC_RETURN_FREED_PAGES;
        command.env(name, value);
    }
    let output = command
        .kill_on_drop(true)
        .output()
        .await
        .with_context(|| format!("could not start {}", binary.display()))?;
    if !output.status.success() {
        bail!(
            "bullmq-bench-official {mode} failed ({}): {}",
            output.status,
            String::from_utf8_lossy(&output.stderr)
        );
    }
    let stdout = String::from_utf8_lossy(&output.stdout);
    let line = stdout.lines().last().unwrap_or_default();
    serde_json::from_str(line)
        .with_context(|| format!("bullmq-bench-official {mode} did not print JSON: {stdout}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_the_executable_in_cargo_messages() {
        let messages = concat!(
            r#"{"reason":"compiler-artifact","target":{"name":"bullmq"},"executable":null}"#,
            "\n",
            r#"{"reason":"compiler-artifact","target":{"name":"bullmq-bench-official"},"executable":"/t/release/bullmq-bench-official"}"#,
            "\n",
            r#"{"reason":"build-finished","success":true}"#,
        );
        assert_eq!(
            executable(messages),
            Some(PathBuf::from("/t/release/bullmq-bench-official"))
        );
        assert_eq!(executable("not json"), None);
    }
}
