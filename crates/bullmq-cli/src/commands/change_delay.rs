//! `bullmq change-delay <queue> --delay 5m <ids...> | --all`: make delayed jobs due that long
//! from now (Node `job.changeDelay`).

use std::time::Duration;

use anyhow::Result;
use clap::Args;

use super::per_job::{JobOp, Target};
use super::Context;
use crate::time_text::parse_duration_ms;

/// Arguments of `bullmq change-delay`.
#[derive(Debug, Clone, Args)]
pub(crate) struct ChangeDelayArgs {
    /// Queue name.
    queue: String,
    #[command(flatten)]
    target: Target,
    /// How long from now the jobs become due: 500ms, 30s, 5m, 1h, 2d, 1m30s (bare numbers are
    /// milliseconds).
    #[arg(long, value_parser = parse_duration_ms)]
    delay: u64,
}

/// Runs `bullmq change-delay`.
pub(crate) async fn run(ctx: &Context, args: ChangeDelayArgs) -> Result<()> {
    let op = JobOp::ChangeDelay(Duration::from_millis(args.delay));
    super::per_job::run(ctx, &args.queue, args.target, op).await
}
