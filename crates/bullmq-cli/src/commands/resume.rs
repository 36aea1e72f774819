//! `bullmq resume <queue>`: workers take jobs from a paused queue again.

use anyhow::{Context as _, Result};
use clap::Args;
use serde_json::json;

use super::Context;
use crate::output::{print_json, Paint};

/// Arguments of `bullmq resume`.
#[derive(Debug, Clone, Args)]
pub(crate) struct ResumeArgs {
    /// Queue name.
    queue: String,
}

/// Runs `bullmq resume`.
pub(crate) async fn run(ctx: &Context, args: ResumeArgs) -> Result<()> {
    let queue = super::open_queue(ctx, &args.queue, true).await?;
    queue
        .resume()
        .await
        .with_context(|| format!("resuming queue {:?}", args.queue))?;
    queue.close().await?;
    if ctx.json {
        print_json(&json!({"queue": args.queue, "paused": false}));
    } else {
        println!("resumed queue {}", Paint::stdout().green(&args.queue));
    }
    Ok(())
}
