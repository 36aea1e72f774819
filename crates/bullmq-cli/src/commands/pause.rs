//! `bullmq pause <queue>`: workers (of any client) stop taking jobs; adding still works.

use anyhow::{Context as _, Result};
use clap::Args;
use serde_json::json;

use super::Context;
use crate::output::{print_json, Paint};

/// Arguments of `bullmq pause`.
#[derive(Debug, Clone, Args)]
pub(crate) struct PauseArgs {
    /// Queue name.
    queue: String,
}

/// Runs `bullmq pause`.
pub(crate) async fn run(ctx: &Context, args: PauseArgs) -> Result<()> {
    let queue = super::open_queue(ctx, &args.queue, true).await?;
    queue
        .pause()
        .await
        .with_context(|| format!("pausing queue {:?}", args.queue))?;
    queue.close().await?;
    if ctx.json {
        print_json(&json!({"queue": args.queue, "paused": true}));
    } else {
        println!("paused queue {}", Paint::stdout().yellow(&args.queue));
    }
    Ok(())
}
