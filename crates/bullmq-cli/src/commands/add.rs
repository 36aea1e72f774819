//! `bullmq add <queue> <name> --data JSON [options]`: add one job.

use std::time::Duration;

use anyhow::{bail, Context as _, Result};
use bullmq_protocol::options::{Backoff, JobOptions, KeepJobs};
use clap::Args;
use serde_json::{json, Value};

use super::Context;
use crate::output::print_json;

/// Arguments of `bullmq add`.
#[derive(Debug, Clone, Args)]
pub(crate) struct AddArgs {
    /// Queue name.
    queue: String,
    /// Job name.
    name: String,
    /// Job data as JSON.
    #[arg(long, default_value = "{}")]
    data: String,
    /// Full job options as BullMQ JSON (e.g. '{"attempts":3}'); the flags below override it.
    #[arg(long)]
    opts: Option<String>,
    /// Delay before the job can run, in milliseconds.
    #[arg(long, value_name = "MS")]
    delay: Option<u64>,
    /// Priority: 1 is the highest, larger is lower (0 or absent = no priority).
    #[arg(long)]
    priority: Option<u32>,
    /// Total attempts before the job fails for good.
    #[arg(long)]
    attempts: Option<u32>,
    /// Backoff between attempts: `fixed:MS` or `exponential:MS`.
    #[arg(long, value_name = "KIND:MS", value_parser = parse_backoff)]
    backoff: Option<Backoff>,
    /// Add to the front of the wait list (last in, first out).
    #[arg(long)]
    lifo: bool,
    /// Custom job id (not an integer; a duplicate id is not added twice).
    #[arg(long)]
    job_id: Option<String>,
    /// What to keep once completed: `true`, `false`, a count, or JSON `{"age":S,"count":N}`.
    #[arg(long, value_name = "KEEP", value_parser = parse_keep)]
    remove_on_complete: Option<KeepJobs>,
    /// What to keep once failed: `true`, `false`, a count, or JSON `{"age":S,"count":N}`.
    #[arg(long, value_name = "KEEP", value_parser = parse_keep)]
    remove_on_fail: Option<KeepJobs>,
}

/// Parses `fixed:MS` / `exponential:MS`.
fn parse_backoff(text: &str) -> Result<Backoff, String> {
    let (kind, ms) = text
        .split_once(':')
        .ok_or_else(|| format!("expected KIND:MS (fixed:1000, exponential:500), got {text:?}"))?;
    let ms: u64 = ms
        .trim()
        .parse()
        .map_err(|_| format!("backoff delay must be whole milliseconds, got {ms:?}"))?;
    match kind.trim() {
        "fixed" => Ok(Backoff::fixed(Duration::from_millis(ms))),
        "exponential" => Ok(Backoff::exponential(Duration::from_millis(ms))),
        other => Err(format!(
            "unknown backoff kind {other:?}: use fixed or exponential"
        )),
    }
}

/// Parses `true` / `false` / a count / a JSON policy.
fn parse_keep(text: &str) -> Result<KeepJobs, String> {
    serde_json::from_str(text).map_err(|_| {
        format!("expected true, false, a number or {{\"age\":S,\"count\":N}}, got {text:?}")
    })
}

impl AddArgs {
    /// The job data, parsed.
    fn data(&self) -> Result<Value> {
        serde_json::from_str(&self.data)
            .with_context(|| format!("--data is not JSON: {}", self.data))
    }

    /// The job options: `--opts` first, then each flag on top.
    fn options(&self) -> Result<JobOptions> {
        let mut opts = match &self.opts {
            Some(raw) => JobOptions::from_json(raw)
                .with_context(|| format!("--opts is not a BullMQ options object: {raw}"))?,
            None => JobOptions::new(),
        };
        if let Some(ms) = self.delay {
            opts = opts.delay(Duration::from_millis(ms));
        }
        if let Some(priority) = self.priority {
            opts = opts.priority(priority);
        }
        if let Some(attempts) = self.attempts {
            opts = opts.attempts(attempts);
        }
        if let Some(backoff) = &self.backoff {
            opts = opts.backoff(backoff.clone());
        }
        if self.lifo {
            opts = opts.lifo(true);
        }
        if let Some(id) = &self.job_id {
            if id.is_empty() {
                bail!("--job-id must not be empty");
            }
            opts = opts.job_id(id.clone());
        }
        if let Some(keep) = &self.remove_on_complete {
            opts = opts.remove_on_complete(keep.clone());
        }
        if let Some(keep) = &self.remove_on_fail {
            opts = opts.remove_on_fail(keep.clone());
        }
        Ok(opts)
    }
}

/// Runs `bullmq add`.
pub(crate) async fn run(ctx: &Context, args: AddArgs) -> Result<()> {
    let data = args.data()?;
    let opts = args.options()?;
    let queue = super::open_queue(ctx, &args.queue, super::Access::Create).await?;
    let job = queue
        .add(args.name.as_str(), &data)
        .opts(opts)
        .await
        .with_context(|| format!("could not add {:?} to queue {:?}", args.name, args.queue))?;
    let state = queue.get_job_state(job.id()).await.ok();
    if ctx.json {
        print_json(
            &json!({"queue": args.queue, "id": job.id(), "state": state.map(|s| s.as_str())}),
        );
    } else {
        match state {
            Some(state) => println!(
                "added job {} to {} ({})",
                job.id(),
                args.queue,
                state.as_str()
            ),
            None => println!("added job {} to {}", job.id(), args.queue),
        }
    }
    queue.close().await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Debug, Parser)]
    struct Wrapper {
        #[command(flatten)]
        add: AddArgs,
    }

    fn parse(args: &[&str]) -> AddArgs {
        let mut argv = vec!["bullmq-add"];
        argv.extend_from_slice(args);
        Wrapper::parse_from(argv).add
    }

    #[test]
    fn flags_become_bullmq_options() {
        let args = parse(&[
            "emails",
            "welcome",
            "--data",
            r#"{"to":"a@b.c"}"#,
            "--delay",
            "1500",
            "--priority",
            "3",
            "--attempts",
            "5",
            "--backoff",
            "exponential:200",
            "--lifo",
            "--job-id",
            "w-1",
            "--remove-on-complete",
            "10",
            "--remove-on-fail",
            r#"{"age":3600}"#,
        ]);
        assert_eq!(args.data().unwrap(), json!({"to": "a@b.c"}));
        let opts = serde_json::to_value(args.options().unwrap()).unwrap();
        assert_eq!(opts["delay"], 1500);
        assert_eq!(opts["priority"], 3);
        assert_eq!(opts["attempts"], 5);
        assert_eq!(
            opts["backoff"],
            json!({"type": "exponential", "delay": 200})
        );
        assert_eq!(opts["lifo"], true);
        assert_eq!(opts["jobId"], "w-1");
        assert_eq!(opts["removeOnComplete"], 10);
        assert_eq!(opts["removeOnFail"], json!({"age": 3600}));
    }

    #[test]
    fn flags_override_opts_json() {
        let args = parse(&[
            "q",
            "n",
            "--opts",
            r#"{"attempts":2,"delay":10}"#,
            "--attempts",
            "7",
        ]);
        let opts = serde_json::to_value(args.options().unwrap()).unwrap();
        assert_eq!(opts["attempts"], 7);
        assert_eq!(opts["delay"], 10);
    }

    #[test]
    fn bad_values_are_rejected_with_a_hint() {
        assert!(parse_backoff("linear:5")
            .unwrap_err()
            .contains("fixed or exponential"));
        assert!(parse_backoff("fixed").unwrap_err().contains("KIND:MS"));
        assert!(parse_backoff("fixed:soon")
            .unwrap_err()
            .contains("milliseconds"));
        assert!(parse_keep("maybe").is_err());
        assert_eq!(parse_keep("true").unwrap(), KeepJobs::Bool(true));
        let args = parse(&["q", "n", "--data", "{not json"]);
        assert!(args.data().unwrap_err().to_string().contains("not JSON"));
    }
}
