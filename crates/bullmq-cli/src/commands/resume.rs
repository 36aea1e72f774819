//! `bullmq resume <queue> | --all`: workers take jobs from a paused queue again.

use anyhow::Result;
use clap::Args;

use super::pausing::PauseTarget;
use super::Context;

/// Arguments of `bullmq resume`.
#[derive(Debug, Clone, Args)]
pub(crate) struct ResumeArgs {
    #[command(flatten)]
    target: PauseTarget,
}

/// Runs `bullmq resume`.
pub(crate) async fn run(ctx: &Context, args: ResumeArgs) -> Result<()> {
    super::pausing::run(ctx, args.target, false).await
}
