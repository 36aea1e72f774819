//! `bullmq scheduler upsert <queue> <id> (--every D | --cron P) [options]`: create or replace a
//! job scheduler and show its pending iteration.

use anyhow::{bail, Context as _, Result};
use bullmq_protocol::options::JobOptions;
use clap::Args;
use ractor_bullmq::scheduler::{cron, JobSchedulerRecord, Repeat, SchedulerTemplate};
use ractor_bullmq::Job;
use serde_json::{json, Value};

use super::Context;
use crate::output::print_json;
use crate::time_text::{local_time_and_relative, now_ms, parse_duration_ms, parse_instant_ms};

/// Arguments of `bullmq scheduler upsert`.
///
/// `--every` and `--cron` are not declared as conflicting: the library refuses both (or
/// neither) with Node's message, the same refusal a Node client gets.
#[derive(Debug, Clone, Args)]
pub(crate) struct UpsertArgs {
    /// Queue name.
    queue: String,
    /// Job scheduler id (upserting an existing id replaces that scheduler).
    id: String,
    /// Run every DURATION: 500ms, 5s, 1m, 1h, 1m30s (a bare number is milliseconds).
    #[arg(long, value_name = "DURATION", value_parser = parse_interval)]
    every: Option<u64>,
    /// Shift every `--every` slot by DURATION.
    #[arg(long, value_name = "DURATION", value_parser = parse_duration_ms)]
    offset: Option<u64>,
    /// Run on a cron PATTERN: 5 fields, or 6 with leading seconds ('0 9 * * 1-5').
    #[arg(long, value_name = "PATTERN")]
    cron: Option<String>,
    /// IANA time zone the `--cron` pattern is read in (UTC when absent).
    #[arg(long, value_name = "ZONE")]
    tz: Option<String>,
    /// Stop after N iterations.
    #[arg(long, value_name = "N")]
    limit: Option<u64>,
    /// No iteration before this time: RFC 3339 (2027-01-31T09:00:00Z) or ms since the epoch.
    #[arg(long, value_name = "WHEN", value_parser = parse_instant_ms)]
    start: Option<u64>,
    /// No iteration after this time: RFC 3339 or ms since the epoch.
    #[arg(long, value_name = "WHEN", value_parser = parse_instant_ms)]
    end: Option<u64>,
    /// Run the first iteration now rather than at the first slot.
    #[arg(long)]
    immediately: bool,
    /// Job name of every iteration (the scheduler id when absent).
    #[arg(long)]
    name: Option<String>,
    /// Data of every iteration, as JSON.
    #[arg(long)]
    data: Option<String>,
    /// Options of every iteration as BullMQ JSON (e.g. '{"attempts":3}'); jobId, delay and
    /// repeat are the scheduler's and are refused.
    #[arg(long)]
    opts: Option<String>,
}

/// Parses `--every`: a duration of at least 1 ms.
fn parse_interval(text: &str) -> Result<u64, String> {
    match parse_duration_ms(text)? {
        0 => Err("the interval must be at least 1ms".to_owned()),
        ms => Ok(ms),
    }
}

impl UpsertArgs {
    /// The schedule, checked for what only the command line can get wrong; the library checks
    /// the rest (Node's refusals) before writing anything.
    fn repeat(&self) -> Result<Repeat> {
        if self.offset.is_some() && self.every.is_none() {
            bail!("--offset shifts the slots of --every: give --every with it");
        }
        if self.tz.is_some() && self.cron.is_none() {
            bail!("--tz is the zone of a --cron pattern: give --cron with it");
        }
        if let Some(tz) = &self.tz {
            cron::validate_time_zone(tz).with_context(|| format!("--tz {tz:?}"))?;
        }
        let mut repeat = Repeat::default();
        repeat.every = self.every;
        repeat.offset = self.offset;
        repeat.pattern.clone_from(&self.cron);
        repeat.tz.clone_from(&self.tz);
        repeat.limit = self.limit;
        repeat.start_date = self.start;
        repeat.end_date = self.end;
        repeat.immediately = self.immediately.then_some(true);
        Ok(repeat)
    }

    /// The template of every iteration.
    fn template(&self) -> Result<SchedulerTemplate> {
        let mut template = SchedulerTemplate::default();
        template.name.clone_from(&self.name);
        if let Some(raw) = &self.data {
            let data: Value =
                serde_json::from_str(raw).with_context(|| format!("--data is not JSON: {raw}"))?;
            template.data = Some(data);
        }
        if let Some(raw) = &self.opts {
            template.opts = JobOptions::from_json(raw)
                .with_context(|| format!("--opts is not a BullMQ options object: {raw}"))?;
        }
        Ok(template)
    }
}

/// Runs `bullmq scheduler upsert`.
pub(crate) async fn run(ctx: &Context, args: UpsertArgs) -> Result<()> {
    let repeat = args.repeat()?;
    let template = args.template()?;
    let queue =
        crate::commands::open_queue(ctx, &args.queue, crate::commands::Access::Create).await?;
    let refused = || {
        format!(
            "could not upsert job scheduler {:?} on queue {:?}",
            args.id, args.queue
        )
    };
    let iteration = queue
        .upsert_job_scheduler(&args.id, repeat, template)
        .await
        .with_context(refused)?;
    let state = match &iteration {
        Some(job) => queue
            .get_job_state(job.id())
            .await
            .ok()
            .map(|s| s.as_str().to_owned()),
        None => None,
    };
    let record = queue
        .get_job_scheduler(&args.id)
        .await
        .with_context(|| format!("reading job scheduler {:?} back", args.id))?;
    queue.close().await?;
    if ctx.json {
        print_json(&as_json(iteration.as_ref(), record.as_ref())?);
    } else {
        print!(
            "{}",
            as_text(
                &args.queue,
                &args.id,
                iteration.as_ref(),
                state.as_deref(),
                now_ms()
            )
        );
    }
    Ok(())
}

/// `{"jobId", "delay", "scheduler"}`: the pending iteration (nulls when none was created) and
/// the scheduler as Node's `getJobScheduler` returns it.
fn as_json(iteration: Option<&Job>, record: Option<&JobSchedulerRecord>) -> Result<Value> {
    Ok(json!({
        "jobId": iteration.map(Job::id),
        "delay": iteration.map(|job| u64::try_from(job.delay().as_millis()).unwrap_or(u64::MAX)),
        "scheduler": serde_json::to_value(record)?,
    }))
}

/// What a person sees: the pending iteration, its state and when it runs.
fn as_text(
    queue: &str,
    id: &str,
    iteration: Option<&Job>,
    state: Option<&str>,
    now: u64,
) -> String {
    match iteration {
        Some(job) => {
            let delay = u64::try_from(job.delay().as_millis()).unwrap_or(u64::MAX);
            let runs_at = job.timestamp().saturating_add(delay);
            format!(
                "upserted job scheduler {id} on {queue}\n\
                 next iteration: job {} ({}), runs at {}\n",
                job.id(),
                state.unwrap_or("state unknown"),
                local_time_and_relative(runs_at, now),
            )
        }
        // Node writes no iteration then (and, for a new id, no scheduler either).
        None => format!(
            "no iteration created for job scheduler {id} on {queue}: its limit is reached or no \
             run is left before its end date\n"
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Debug, Parser)]
    struct Wrapper {
        #[command(flatten)]
        upsert: UpsertArgs,
    }

    fn parse(args: &[&str]) -> Result<UpsertArgs, clap::Error> {
        let mut argv = vec!["bullmq-scheduler-upsert", "q", "s"];
        argv.extend_from_slice(args);
        Wrapper::try_parse_from(argv).map(|w| w.upsert)
    }

    #[test]
    fn every_flags_become_a_repeat() {
        let args = parse(&[
            "--every",
            "500ms",
            "--offset",
            "100ms",
            "--limit",
            "3",
            "--start",
            "2027-01-31T09:00:00Z",
            "--end",
            "1901386000000",
            "--immediately",
        ])
        .unwrap();
        let repeat = serde_json::to_value(args.repeat().unwrap()).unwrap();
        assert_eq!(
            repeat,
            json!({"every": 500, "offset": 100, "limit": 3, "startDate": 1_801_386_000_000_u64,
                   "endDate": 1_901_386_000_000_u64, "immediately": true})
        );
    }

    #[test]
    fn cron_flags_become_a_repeat_and_a_template() {
        let args = parse(&[
            "--cron",
            "0 9 * * 1-5",
            "--tz",
            "Europe/Berlin",
            "--name",
            "report",
            "--data",
            r#"{"kind":"daily"}"#,
            "--opts",
            r#"{"attempts":3}"#,
        ])
        .unwrap();
        let repeat = serde_json::to_value(args.repeat().unwrap()).unwrap();
        assert_eq!(
            repeat,
            json!({"pattern": "0 9 * * 1-5", "tz": "Europe/Berlin"})
        );
        let template = args.template().unwrap();
        assert_eq!(template.name.as_deref(), Some("report"));
        assert_eq!(template.data, Some(json!({"kind": "daily"})));
        assert_eq!(serde_json::to_value(&template.opts).unwrap()["attempts"], 3);
    }

    #[test]
    fn command_line_mistakes_are_named() {
        let err = |args: &[&str]| parse(args).unwrap().repeat().unwrap_err().to_string();
        assert!(err(&["--cron", "* * * * *", "--offset", "1s"]).contains("--offset"));
        assert!(err(&["--every", "1s", "--tz", "UTC"]).contains("--tz"));
        let zone = parse(&["--cron", "* * * * *", "--tz", "Mars/Olympus"])
            .unwrap()
            .repeat()
            .unwrap_err();
        assert!(
            crate::output::error_chain(&zone).contains("unknown time zone \"Mars/Olympus\""),
            "{zone:#}"
        );
        let data = parse(&["--every", "1s", "--data", "{oops"])
            .unwrap()
            .template()
            .unwrap_err();
        assert!(data.to_string().contains("--data is not JSON"), "{data}");
        assert!(parse(&["--every", "0s"])
            .unwrap_err()
            .to_string()
            .contains("at least 1ms"));
        assert!(parse(&["--every", "soon"])
            .unwrap_err()
            .to_string()
            .contains("500ms, 5s"));
        assert!(parse(&["--cron", "* * * * *", "--end", "tomorrow"])
            .unwrap_err()
            .to_string()
            .contains("RFC 3339"));
    }
}
