//! `bullmq drain <queue> [--delayed]`: remove the jobs waiting to run (Node
//! `queue.drain(delayed)`); active and finished jobs stay.

use anyhow::{Context as _, Result};
use clap::Args;
use serde_json::json;

use super::Context;
use crate::output::{print_json, Paint};

/// Arguments of `bullmq drain`.
#[derive(Debug, Clone, Args)]
pub(crate) struct DrainArgs {
    /// Queue name.
    queue: String,
    /// Remove the delayed jobs too.
    #[arg(long)]
    delayed: bool,
}

/// Runs `bullmq drain`.
pub(crate) async fn run(ctx: &Context, args: DrainArgs) -> Result<()> {
    let queue = super::open_queue(ctx, &args.queue, super::Access::Existing).await?;
    let removed = queue
        .drain(args.delayed)
        .await
        .with_context(|| format!("draining queue {:?}", args.queue))?;
    queue.close().await?;
    if ctx.json {
        // `count` as every command that counts what it changed (the drain script gives no ids).
        print_json(&json!({"queue": args.queue, "delayed": args.delayed, "count": removed}));
    } else {
        let paint = Paint::stdout();
        let which = if args.delayed {
            "waiting, prioritized and delayed"
        } else {
            "waiting and prioritized"
        };
        println!(
            "drained queue {}: removed {} {which} {}",
            paint.bold(&args.queue),
            paint.green(&removed.to_string()),
            if removed == 1 { "job" } else { "jobs" }
        );
    }
    Ok(())
}
