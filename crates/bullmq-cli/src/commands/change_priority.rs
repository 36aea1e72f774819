//! `bullmq change-priority <queue> --priority N [--lifo] <ids...> | --all`: set jobs' priority
//! (Node `job.changePriority`). A waiting or prioritized job is queued again by it; a job in
//! another state keeps its place and takes the priority when it is next queued, as in Node.
//! `--all` works on the prioritized and waiting jobs.

use anyhow::Result;
use clap::Args;

use super::per_job::{JobOp, Target};
use super::Context;

/// Arguments of `bullmq change-priority`.
#[derive(Debug, Clone, Args)]
pub(crate) struct ChangePriorityArgs {
    /// Queue name.
    queue: String,
    #[command(flatten)]
    target: Target,
    /// The new priority: 1 is the highest, larger is lower, 0 = none (at most 2097151).
    #[arg(long, value_parser = clap::value_parser!(u32).range(0..=2_097_151))]
    priority: u32,
    /// Queue ahead of the jobs of the same priority (the front of `wait` for 0).
    #[arg(long)]
    lifo: bool,
}

/// Runs `bullmq change-priority`.
pub(crate) async fn run(ctx: &Context, args: ChangePriorityArgs) -> Result<()> {
    let op = JobOp::ChangePriority {
        priority: args.priority,
        lifo: args.lifo,
    };
    super::per_job::run(ctx, &args.queue, args.target, op).await
}
