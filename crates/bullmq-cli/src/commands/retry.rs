//! `bullmq retry <queue> <ids...> | --all [--state failed|completed]`: move finished jobs back
//! to be processed (Node `job.retry(state)`).

use anyhow::Result;
use clap::{Args, ValueEnum};
use ractor_bullmq::RetryFrom;

use super::per_job::{JobOp, Target};
use super::Context;

/// Arguments of `bullmq retry`.
#[derive(Debug, Clone, Args)]
pub(crate) struct RetryArgs {
    /// Queue name.
    queue: String,
    #[command(flatten)]
    target: Target,
    /// The set the jobs are retried from.
    #[arg(long, value_enum, default_value_t = FinishedState::Failed)]
    state: FinishedState,
}

/// The finished states a job can be retried from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum FinishedState {
    /// Jobs that failed for good.
    Failed,
    /// Jobs that completed.
    Completed,
}

/// Runs `bullmq retry`.
pub(crate) async fn run(ctx: &Context, args: RetryArgs) -> Result<()> {
    let from = match args.state {
        FinishedState::Failed => RetryFrom::Failed,
        FinishedState::Completed => RetryFrom::Completed,
    };
    super::per_job::run(ctx, &args.queue, args.target, JobOp::Retry(from)).await
}
