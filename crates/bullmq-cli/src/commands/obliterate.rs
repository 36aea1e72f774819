//! `bullmq obliterate <queue> [--force] [--yes]`: delete a queue and all its jobs (Node
//! `queue.obliterate({force})`).
//!
//! Without `--yes` a person at a terminal is asked to type the queue's name; anything else
//! (a script, a pipe, a cron job) is refused with exit 4 before Redis is even contacted, so a
//! forgotten flag never deletes a queue.

use std::io::{BufRead as _, IsTerminal as _, Write as _};

use anyhow::{Context as _, Result};
use clap::Args;
use ractor_bullmq::QueueError;
use serde_json::json;

use super::Context;
use crate::exit::Exit;
use crate::output::{print_json, Paint};

/// Arguments of `bullmq obliterate`.
#[derive(Debug, Clone, Args)]
pub(crate) struct ObliterateArgs {
    /// Queue name.
    queue: String,
    /// Delete active jobs too (a worker processing one will fail to finish it).
    #[arg(long)]
    force: bool,
    /// Do not ask for confirmation (required when stdin is not a terminal).
    #[arg(long)]
    yes: bool,
}

/// Runs `bullmq obliterate`.
pub(crate) async fn run(ctx: &Context, args: ObliterateArgs) -> Result<()> {
    // A mistyped name is "no such queue" (exit 3) before anything is asked.
    let queue = super::open_queue(ctx, &args.queue, super::Access::Existing).await?;
    if !args.yes {
        if let Err(error) = confirm(&ctx.prefix, &args.queue).await {
            queue.close().await?;
            return Err(error);
        }
    }
    let outcome = queue.obliterate(args.force).await;
    queue.close().await?;
    match outcome {
        Ok(()) => {}
        Err(QueueError::ActiveJobs { queue }) => {
            // Node pauses first too, and so leaves the queue paused after this refusal.
            return Err(Exit::refused(format!(
                "queue {queue} has active jobs, not obliterated (it is left paused; --force \
                 deletes active jobs too)"
            )));
        }
        Err(other) => {
            return Err(other).with_context(|| format!("obliterating queue {:?}", args.queue))
        }
    }
    if ctx.json {
        print_json(&json!({"queue": args.queue, "obliterated": true}));
    } else {
        println!("obliterated queue {}", Paint::stdout().bold(&args.queue));
    }
    Ok(())
}

/// Asks the person at the terminal to type the queue's name; refuses (exit 4) when stdin is
/// not a terminal or the answer differs.
async fn confirm(prefix: &str, queue: &str) -> Result<()> {
    if !std::io::stdin().is_terminal() {
        return Err(Exit::refused(format!(
            "not obliterating queue {queue}: stdin is not a terminal, pass --yes to confirm"
        )));
    }
    let prompt = format!(
        "This deletes queue {prefix}:{queue} and every job in it.\n\
         Type the queue name ({queue}) to confirm: "
    );
    // Reading stdin blocks; keep it off the runtime's worker threads.
    let answer = tokio::task::spawn_blocking(move || -> std::io::Result<String> {
        let mut stderr = std::io::stderr();
        stderr.write_all(prompt.as_bytes())?;
        stderr.flush()?;
        let mut line = String::new();
        std::io::stdin().lock().read_line(&mut line)?;
        Ok(line)
    })
    .await
    .context("the confirmation prompt stopped")?
    .context("reading the confirmation")?;
    if confirmed(&answer, queue) {
        Ok(())
    } else {
        Err(Exit::refused(format!(
            "not obliterating queue {queue}: the name typed did not match"
        )))
    }
}

/// Whether `answer` (a line read from the terminal) is the queue's name.
fn confirmed(answer: &str, queue: &str) -> bool {
    answer.trim_end_matches(['\r', '\n']) == queue
}

#[cfg(test)]
mod tests {
    use super::confirmed;

    #[test]
    fn only_the_exact_name_confirms() {
        assert!(confirmed("emails\n", "emails"));
        assert!(confirmed("emails\r\n", "emails"));
        assert!(!confirmed("\n", "emails"));
        assert!(!confirmed("y\n", "emails"));
        assert!(!confirmed("Emails\n", "emails"));
        assert!(!confirmed("emails", "emails2"));
    }
}
