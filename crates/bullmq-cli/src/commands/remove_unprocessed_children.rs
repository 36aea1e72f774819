//! `bullmq remove-unprocessed-children <queue> <id>`: remove the children of a flow parent that
//! have not been processed yet, with their own unprocessed children (Node
//! `job.removeUnprocessedChildren()`).
//!
//! One library call, [`ractor_bullmq::Queue::remove_unprocessed_children`]: every child still
//! pending is removed depth first (its own pending children before it), except a child a worker
//! holds and a failed one; each emits `removed` in its queue as Node's does.

use anyhow::{Context as _, Result};
use clap::Args;
use serde_json::json;

use super::{Access, Context};
use crate::exit::Exit;
use crate::output::{print_json, Paint};

/// Arguments of `bullmq remove-unprocessed-children`.
#[derive(Debug, Clone, Args)]
pub(crate) struct RemoveUnprocessedChildrenArgs {
    /// Queue of the parent job.
    queue: String,
    /// Id of the parent job.
    id: String,
}

/// Runs `bullmq remove-unprocessed-children`.
pub(crate) async fn run(ctx: &Context, args: RemoveUnprocessedChildrenArgs) -> Result<()> {
    let queue = super::open_queue(ctx, &args.queue, Access::Existing).await?;
    let outcome = async {
        if queue.get_job(&args.id).await?.is_none() {
            return Err(Exit::not_found(format!(
                "no job {:?} in queue {:?} (prefix {:?})",
                args.id, args.queue, ctx.prefix
            )));
        }
        queue
            .remove_unprocessed_children(&args.id)
            .await
            .with_context(|| format!("removing the unprocessed children of job {:?}", args.id))
    }
    .await;
    queue.close().await?;
    let removed = outcome?;
    if ctx.json {
        print_json(&json!({
            "queue": args.queue,
            "id": args.id,
            "removed": removed,
            "count": removed.len(),
        }));
    } else {
        let word = if removed.len() == 1 {
            "child"
        } else {
            "children"
        };
        println!(
            "removed {} unprocessed {word} of job {} on queue {}",
            Paint::stdout().green(&removed.len().to_string()),
            args.id,
            Paint::stdout().bold(&args.queue)
        );
    }
    Ok(())
}
