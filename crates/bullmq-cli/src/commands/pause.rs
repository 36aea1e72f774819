//! `bullmq pause <queue> | --all`: workers (of any client) stop taking jobs; adding still
//! works.

use anyhow::Result;
use clap::Args;

use super::pausing::PauseTarget;
use super::Context;

/// Arguments of `bullmq pause`.
#[derive(Debug, Clone, Args)]
pub(crate) struct PauseArgs {
    #[command(flatten)]
    target: PauseTarget,
}

/// Runs `bullmq pause`.
pub(crate) async fn run(ctx: &Context, args: PauseArgs) -> Result<()> {
    super::pausing::run(ctx, args.target, true).await
}
