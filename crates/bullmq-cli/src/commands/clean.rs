//! `bullmq clean <queue> --state S --grace 1h [--limit N]`: remove the jobs of a state older
//! than the grace period (Node `queue.clean(grace, limit, state)`).

use std::time::Duration;

use anyhow::{Context as _, Result};
use bullmq_protocol::state::JobState;
use clap::Args;
use serde_json::json;

use super::Context;
use crate::output::{print_json, Paint};
use crate::time_text::{format_duration_ms, parse_duration_ms};

/// At most this many jobs per script call, as Node: one call never holds Redis for long.
const BATCH: u64 = 10_000;

/// Arguments of `bullmq clean`.
#[derive(Debug, Clone, Args)]
pub(crate) struct CleanArgs {
    /// Queue name.
    queue: String,
    /// The state to clean: completed, failed, delayed, waiting (or wait), prioritized, paused,
    /// active (jobs a worker holds stay) or waiting-children.
    #[arg(long, value_parser = super::parse_state)]
    state: JobState,
    /// Keep the jobs younger than this (by when they finished, else started, else were added):
    /// 30s, 5m, 1h, 2d; 0 removes them all.
    #[arg(long, value_parser = parse_duration_ms)]
    grace: u64,
    /// Remove at most this many jobs (0 or absent: no limit).
    #[arg(long, default_value_t = 0)]
    limit: u64,
}

/// Runs `bullmq clean`.
pub(crate) async fn run(ctx: &Context, args: CleanArgs) -> Result<()> {
    let queue = super::open_queue(ctx, &args.queue, true).await?;
    let grace = Duration::from_millis(args.grace);
    let mut removed: u64 = 0;
    loop {
        let want = match args.limit {
            0 => BATCH,
            limit => BATCH.min(limit - removed),
        };
        let ids = queue
            .clean(
                ractor_bullmq::CleanOptions::new(grace)
                    .limit(want)
                    .state(args.state),
            )
            .await
            .with_context(|| {
                format!("cleaning the {} jobs of queue {:?}", args.state, args.queue)
            })?;
        removed += ids.len() as u64;
        let limit_reached = args.limit != 0 && removed >= args.limit;
        if (ids.len() as u64) < want || limit_reached {
            break;
        }
    }
    queue.close().await?;
    if ctx.json {
        print_json(&json!({
            "queue": args.queue,
            "state": args.state.as_str(),
            "graceMs": args.grace,
            "removed": removed,
        }));
    } else {
        let paint = Paint::stdout();
        println!(
            "removed {} {} {} older than {} from queue {}",
            paint.green(&removed.to_string()),
            args.state,
            if removed == 1 { "job" } else { "jobs" },
            format_duration_ms(args.grace),
            paint.bold(&args.queue)
        );
    }
    Ok(())
}
