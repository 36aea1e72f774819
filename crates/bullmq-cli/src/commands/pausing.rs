//! What `bullmq pause` and `bullmq resume` share: one named queue (which must exist unless
//! `--create`), or `--all` queues under the prefix, paused or resumed one after the other.

use anyhow::{Context as _, Result};
use clap::Args;
use ractor_bullmq::Queue;
use serde_json::json;

use super::session::Session;
use super::{Access, Context};
use crate::output::{print_json, Paint};

/// The queues `pause` / `resume` act on.
#[derive(Debug, Clone, Args)]
pub(crate) struct PauseTarget {
    /// Queue name.
    #[arg(required_unless_present = "all", conflicts_with = "all")]
    queue: Option<String>,
    /// Every queue under `--prefix` (as `bullmq queues` lists them).
    #[arg(long)]
    all: bool,
    /// Make the queue when it does not exist yet (otherwise a missing queue is an error,
    /// exit 3, so a typo never creates one).
    #[arg(long, conflicts_with = "all")]
    create: bool,
}

/// Pauses (`paused`) or resumes the queues of `target` and says so.
pub(crate) async fn run(ctx: &Context, target: PauseTarget, paused: bool) -> Result<()> {
    let verb = if paused { "paused" } else { "resumed" };
    if target.all {
        let names = set_all(ctx, paused).await?;
        if ctx.json {
            print_json(&json!({"queues": names, "count": names.len(), "paused": paused}));
        } else {
            let paint = Paint::stdout();
            let count = names.len().to_string();
            let count = if paused {
                paint.yellow(&count)
            } else {
                paint.green(&count)
            };
            let word = if names.len() == 1 { "queue" } else { "queues" };
            match ctx.target()?.schema() {
                Some(schema) => println!("{verb} {count} {word} in schema {schema}"),
                None => println!("{verb} {count} {word} under prefix {}", ctx.prefix),
            }
        }
        return Ok(());
    }
    let name = target.queue.unwrap_or_default();
    let access = if target.create {
        Access::Create
    } else {
        Access::Existing
    };
    let queue = super::open_queue(ctx, &name, access).await?;
    let outcome = set(&queue, paused).await;
    queue.close().await?;
    outcome?;
    if ctx.json {
        print_json(&json!({"queue": name, "paused": paused}));
    } else {
        let paint = Paint::stdout();
        let shown = if paused {
            paint.yellow(&name)
        } else {
            paint.green(&name)
        };
        println!("{verb} queue {shown}");
    }
    Ok(())
}

/// Pauses or resumes one queue.
async fn set(queue: &Queue, paused: bool) -> Result<()> {
    let outcome = if paused {
        queue.pause().await
    } else {
        queue.resume().await
    };
    let doing = if paused { "pausing" } else { "resuming" };
    outcome.with_context(|| format!("{doing} queue {:?}", queue.name()))
}

/// Pauses or resumes every queue under the prefix on one connection; their names, sorted.
async fn set_all(ctx: &Context, paused: bool) -> Result<Vec<String>> {
    let session = Session::connect(ctx, None).await?;
    let outcome = async {
        let names = session.list_queues().await?;
        for (done, name) in names.iter().enumerate() {
            let queue = session.open(name).await?;
            let outcome = set(&queue, paused).await;
            let _ = queue.close().await;
            outcome.with_context(|| {
                let verb = if paused { "paused" } else { "resumed" };
                format!("{verb} {done} of {} queues, then stopped", names.len())
            })?;
        }
        Ok(names)
    }
    .await;
    session.close().await;
    outcome
}
