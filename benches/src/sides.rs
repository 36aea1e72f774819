//! The implementations compared with ours in one run: Node BullMQ and the official Rust port.

use anyhow::Result;
use serde_json::Value;

use crate::{node, official};

/// Which of the other implementations run next to ours.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Sides {
    /// Node BullMQ 6.7.0 (`benches/node`).
    pub(crate) node: bool,
    /// The official Rust port `bullmq-official` 1.4.4 (`benches/official`).
    pub(crate) official: bool,
}

impl Sides {
    /// The other implementations to run, in table order.
    pub(crate) fn others(self) -> Vec<Other> {
        let mut others = Vec::new();
        if self.node {
            others.push(Other::Node);
        }
        if self.official {
            others.push(Other::Official);
        }
        others
    }
}

/// One implementation run as a subprocess that takes a JSON argument and prints a JSON result.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Other {
    /// `node benches/node/<script>`.
    Node,
    /// `bullmq-bench-official` (one binary for every script).
    Official,
}

impl Other {
    /// The `impl` / `implementation` value of its measurements.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Other::Node => "node",
            Other::Official => "official",
        }
    }

    /// Runs `script`'s scenario (Node's script name; the official binary dispatches on the
    /// argument's `mode`) and returns the JSON it printed.
    pub(crate) async fn run(self, script: &str, arg: &Value, redis_url: &str) -> Result<Value> {
        match self {
            Other::Node => node::run(script, arg, redis_url).await,
            Other::Official => official::run(arg, redis_url).await,
        }
    }
}
