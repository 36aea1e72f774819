//! `bullmq clean <queue> --state S --grace 1h [--limit N]`: remove the jobs of a state older
//! than the grace period (Node `queue.clean(grace, limit, state)`).

use std::time::Duration;

use anyhow::{Context as _, Result};
use bullmq_protocol::state::JobState;
use clap::Args;
use ractor_bullmq::Queue;
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
    let queue = super::open_queue(ctx, &args.queue, super::Access::Existing).await?;
    let grace = Duration::from_millis(args.grace);
    let outcome = clean_all(&queue, &args, grace).await;
    queue.close().await?;
    let removed_ids = outcome?;
    let removed = removed_ids.len() as u64;
    if ctx.json {
        print_json(&json!({
            "queue": args.queue,
            "state": args.state.as_str(),
            "graceMs": args.grace,
            "removed": removed_ids,
            "count": removed,
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

/// Cleans in batches of at most [`BATCH`] until fewer come back or `--limit` is reached; the
/// ids removed (Node's `clean` returns them too). The one place that calls `Queue::clean`.
async fn clean_all(queue: &Queue, args: &CleanArgs, grace: Duration) -> Result<Vec<String>> {
    let mut removed = Vec::new();
    loop {
        let want = match args.limit {
            0 => BATCH,
            limit => BATCH.min(limit - removed.len() as u64),
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
        let got = ids.len() as u64;
        removed.extend(ids);
        let limit_reached = args.limit != 0 && removed.len() as u64 >= args.limit;
        if got < want || limit_reached {
            return Ok(removed);
        }
    }
}
