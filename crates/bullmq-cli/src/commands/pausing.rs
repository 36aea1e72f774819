//! What `bullmq pause` and `bullmq resume` share: one named queue (which must exist unless
//! `--create`), or `--all` queues under the prefix, paused or resumed one after the other.

use anyhow::{Context as _, Result};
use bullmq_redis::fred::prelude::ClientLike as _;
use clap::Args;
use ractor_bullmq::{Queue, QueueOptions};
use serde_json::json;

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
            println!("{verb} {count} {word} under prefix {}", ctx.prefix);
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
    let config = super::connection_config(ctx)?;
    let target = config.target();
    let client = config
        .connect(None)
        .await
        .with_context(|| format!("cannot connect to Redis at {target}"))?;
    let outcome = async {
        let backend = bullmq_redis::RedisBackend::new(config.clone());
        let names = super::queue_lookup::queue_names(&backend, &ctx.prefix)
            .await
            .with_context(|| format!("listing the queues under prefix {:?}", ctx.prefix))?;
        for (done, name) in names.iter().enumerate() {
            let options = QueueOptions::new(config.clone())
                .prefix(ctx.prefix.clone())
                .skip_meta_update(true);
            let queue = Queue::with_client(name.clone(), client.clone(), options).await?;
            set(&queue, paused).await.with_context(|| {
                let verb = if paused { "paused" } else { "resumed" };
                format!("{verb} {done} of {} queues, then stopped", names.len())
            })?;
        }
        Ok(names)
    }
    .await;
    let _ = client.quit().await;
    outcome
}
