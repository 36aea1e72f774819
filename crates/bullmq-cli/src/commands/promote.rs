//! `bullmq promote <queue> <ids...> | --all`: make delayed jobs due now (Node `job.promote()`).

use anyhow::Result;
use clap::Args;

use super::per_job::{JobOp, Target};
use super::Context;

/// Arguments of `bullmq promote`.
#[derive(Debug, Clone, Args)]
pub(crate) struct PromoteArgs {
    /// Queue name.
    queue: String,
    #[command(flatten)]
    target: Target,
}

/// Runs `bullmq promote`.
pub(crate) async fn run(ctx: &Context, args: PromoteArgs) -> Result<()> {
    super::per_job::run(ctx, &args.queue, args.target, JobOp::Promote).await
}
