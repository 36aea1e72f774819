//! `bullmq remove <queue> <ids...> | --all --state S`: delete jobs with their flow children
//! and keys (Node `job.remove()`); a job a worker holds is refused.

use anyhow::Result;
use bullmq_protocol::state::JobState;
use clap::Args;

use super::per_job::{JobOp, Target};
use super::Context;

/// Arguments of `bullmq remove`.
#[derive(Debug, Clone, Args)]
pub(crate) struct RemoveArgs {
    /// Queue name.
    queue: String,
    #[command(flatten)]
    target: Target,
    /// With `--all`: the state to empty (waiting, prioritized, delayed, completed, failed,
    /// waiting-children, paused or active; active jobs a worker holds are skipped).
    // `conflicts_with` rather than `requires = "all"`: a flag counts as present through its
    // default `false`, so clap would never enforce `requires`.
    #[arg(
        long,
        conflicts_with = "ids",
        required_if_eq("all", "true"),
        value_parser = super::parse_state
    )]
    state: Option<JobState>,
}

/// Runs `bullmq remove`.
pub(crate) async fn run(ctx: &Context, args: RemoveArgs) -> Result<()> {
    super::per_job::run(ctx, &args.queue, args.target, JobOp::Remove(args.state)).await
}
