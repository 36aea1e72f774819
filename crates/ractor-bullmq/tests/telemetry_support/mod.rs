//! Helpers shared by the telemetry tests: unique queue names and a Node BullMQ runner.
#![allow(dead_code, unreachable_pub)]

use std::path::PathBuf;
use std::process::Command;

/// A queue name no other test uses.
pub fn unique_queue(what: &str) -> String {
    format!("telemetry-{what}-{:016x}", rand::random::<u64>())
}

/// The pinned Node BullMQ oracle's folder, or `None` (said loudly) when Node or the package
/// is missing, in which case the calling test returns early.
pub fn node_dir() -> Option<PathBuf> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../integration-tests/node");
    let has_node = Command::new("node")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !has_node || !dir.join("node_modules/bullmq").is_dir() {
        eprintln!(
            "!!! Node or integration-tests/node/node_modules missing: skipping a Node interop test"
        );
        return None;
    }
    Some(dir)
}

/// Runs `body` (the inside of an async function with `Queue`, `Worker`, `connectionOptions`,
/// `rawClient` and `sleep` in scope) with Node BullMQ and returns what it returned, as JSON.
/// Panics with Node's stderr when the script fails.
pub fn node_eval(body: &str, env: &[(&str, &str)]) -> serde_json::Value {
    let dir = node_dir().expect("Node BullMQ available");
    let script = format!(
        "const {{ Queue, Worker }} = require('bullmq');\n\
         const {{ connectionOptions, rawClient }} = require('./lib');\n\
         const sleep = ms => new Promise(r => setTimeout(r, ms));\n\
         (async () => {{ {body} }})().then(\n\
           r => {{ process.stdout.write(JSON.stringify(r === undefined ? null : r)); process.exit(0); }},\n\
           e => {{ console.error(e); process.exit(1); }});"
    );
    let mut command = Command::new("node");
    command.current_dir(&dir).arg("-e").arg(script);
    for (key, value) in env {
        command.env(key, value);
    }
    let output = command.output().expect("run node");
    assert!(
        output.status.success(),
        "node failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice(&output.stdout).unwrap_or_else(|e| {
        panic!(
            "node printed no JSON ({e}): {}",
            String::from_utf8_lossy(&output.stdout)
        )
    })
}
