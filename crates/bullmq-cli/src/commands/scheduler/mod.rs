//! `bullmq scheduler <upsert|remove>`: create, update and remove one job scheduler.

pub(crate) mod remove;
pub(crate) mod upsert;

use anyhow::Result;
use clap::{Args, Subcommand};

use super::Context;

/// Arguments of `bullmq scheduler`.
#[derive(Debug, Clone, Args)]
pub(crate) struct SchedulerArgs {
    #[command(subcommand)]
    action: Action,
}

/// What to do with the job scheduler.
#[derive(Debug, Clone, Subcommand)]
enum Action {
    /// Create the job scheduler, or replace it whole, and print its pending iteration.
    Upsert(Box<upsert::UpsertArgs>),
    /// Remove the job scheduler and its delayed iteration (exit 1 when there is none).
    Remove(remove::RemoveArgs),
}

/// Runs `bullmq scheduler …`.
pub(crate) async fn run(ctx: &Context, args: SchedulerArgs) -> Result<()> {
    match args.action {
        Action::Upsert(args) => upsert::run(ctx, *args).await,
        Action::Remove(args) => remove::run(ctx, args).await,
    }
}
