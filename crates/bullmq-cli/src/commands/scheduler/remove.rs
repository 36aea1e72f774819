//! `bullmq scheduler remove <queue> <id>`: remove a job scheduler.

use anyhow::{Context as _, Result};
use clap::Args;
use serde_json::json;

use super::Context;
use crate::output::print_json;

/// Arguments of `bullmq scheduler remove`.
#[derive(Debug, Clone, Args)]
pub(crate) struct RemoveArgs {
    /// Queue name.
    queue: String,
    /// Job scheduler id.
    id: String,
}

/// Runs `bullmq scheduler remove`: exit 0 when it removed the scheduler, 1 when there was none
/// (so a script can tell, as with `rm`); `--json` prints `{"removed": bool}` either way.
pub(crate) async fn run(ctx: &Context, args: RemoveArgs) -> Result<()> {
    // Removing writes nothing else: a queue that was never opened keeps no `meta`.
    let queue =
        crate::commands::open_queue(ctx, &args.queue, crate::commands::Access::Existing).await?;
    let removed = queue
        .remove_job_scheduler(&args.id)
        .await
        .with_context(|| {
            format!(
                "could not remove job scheduler {:?} from queue {:?}",
                args.id, args.queue
            )
        })?;
    queue.close().await?;
    if !removed {
        // With --json one object: `{"removed": false}` and the error.
        return Err(crate::exit::Exit::with_report(
            crate::exit::FAILED,
            format!("no job scheduler {:?} on queue {:?}", args.id, args.queue),
            Some(json!({ "removed": false })),
        ));
    }
    if ctx.json {
        print_json(&json!({ "removed": true }));
    } else {
        println!("removed job scheduler {} from {}", args.id, args.queue);
    }
    Ok(())
}
