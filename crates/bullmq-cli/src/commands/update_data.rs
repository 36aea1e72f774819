//! `bullmq update-data <queue> <id> --data JSON`: replace a job's data (Node
//! `job.updateData(data)`), as bull-board's "edit data" does.

use anyhow::{Context as _, Result};
use clap::Args;
use ractor_bullmq::QueueError;
use serde_json::{json, Value};

use super::{Access, Context};
use crate::exit::Exit;
use crate::output::{print_json, Paint};

/// Arguments of `bullmq update-data`.
#[derive(Debug, Clone, Args)]
pub(crate) struct UpdateDataArgs {
    /// Queue name.
    queue: String,
    /// Id of the job.
    id: String,
    /// The new data, a JSON document (it replaces the old data whole).
    #[arg(long, value_name = "JSON", value_parser = parse_json)]
    data: Value,
}

/// Reads `--data`: any JSON document.
fn parse_json(text: &str) -> Result<Value, String> {
    serde_json::from_str(text).map_err(|error| format!("--data is not JSON: {error}"))
}

/// Runs `bullmq update-data`.
pub(crate) async fn run(ctx: &Context, args: UpdateDataArgs) -> Result<()> {
    let queue = super::open_queue(ctx, &args.queue, Access::Existing).await?;
    let outcome = queue.update_data(&args.id, &args.data).await;
    queue.close().await?;
    match outcome {
        Ok(()) => {}
        Err(QueueError::JobNotFound { .. }) => {
            return Err(Exit::not_found(format!(
                "no job {:?} in queue {:?} (prefix {:?})",
                args.id, args.queue, ctx.prefix
            )))
        }
        Err(other) => {
            return Err(other).with_context(|| format!("updating the data of job {:?}", args.id))
        }
    }
    if ctx.json {
        print_json(&json!({"queue": args.queue, "id": args.id, "data": args.data}));
    } else {
        println!(
            "updated the data of job {} on queue {}",
            args.id,
            Paint::stdout().bold(&args.queue)
        );
    }
    Ok(())
}
