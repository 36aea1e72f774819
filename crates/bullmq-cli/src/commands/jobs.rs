//! `bullmq jobs <queue> --state STATE`: the jobs in one state, a page at a time — id, name,
//! attempts, age, and per state what matters (failure reason, due time, priority).

use anyhow::{Context as _, Result};
use bullmq_protocol::state::JobState;
use clap::{Args, ValueEnum};
use ractor_bullmq::{Job, Queue};
use serde_json::{json, Value};

use super::job::{attempts_text, job_json};
use super::Context;
use crate::output::{print_json, table, Paint};
use crate::time_text::{format_relative, now_ms};

/// Arguments of `bullmq jobs`.
#[derive(Debug, Clone, Args)]
pub(crate) struct JobsArgs {
    /// Queue name.
    queue: String,
    /// Which jobs to list: completed and failed newest first, the others in the order they
    /// will run (as Node's getters).
    #[arg(long, value_enum, required_unless_present = "latest")]
    state: Option<StateArg>,
    /// The newest jobs whatever their state (bull-board's "latest"), newest added first.
    #[arg(long, conflicts_with_all = ["state", "name"])]
    latest: bool,
    /// At most this many jobs.
    #[arg(long, default_value_t = 20, value_parser = clap::value_parser!(u64).range(1..))]
    limit: u64,
    /// Skip this many jobs first (of those with `--name` when given).
    #[arg(long, default_value_t = 0)]
    offset: u64,
    /// Only jobs with this name.
    #[arg(long)]
    name: Option<String>,
}

/// The states a job can be listed in (Node's names).
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum StateArg {
    /// Ready to run, no priority (`wait`).
    Waiting,
    /// Held by a worker now.
    Active,
    /// To run later (retries with backoff too).
    Delayed,
    /// Ready to run, by priority.
    Prioritized,
    /// Flow parents waiting for their children.
    WaitingChildren,
    /// Finished successfully (as far as kept).
    Completed,
    /// Failed for good (as far as kept).
    Failed,
    /// The legacy `paused` list an old client may have left jobs in.
    Paused,
}

impl StateArg {
    fn state(self) -> JobState {
        match self {
            Self::Waiting => JobState::Waiting,
            Self::Active => JobState::Active,
            Self::Delayed => JobState::Delayed,
            Self::Prioritized => JobState::Prioritized,
            Self::WaitingChildren => JobState::WaitingChildren,
            Self::Completed => JobState::Completed,
            Self::Failed => JobState::Failed,
            Self::Paused => JobState::Paused,
        }
    }
}

/// Whether a state is listed oldest first, as Node's getters do: jobs still to run in the
/// order they will run, finished jobs most recent first (`getCompleted` / `getFailed`).
fn ascending(state: JobState) -> bool {
    !state.is_finished()
}

/// How many ids one read takes while filtering by name.
const NAME_SCAN_CHUNK: u64 = 500;

/// Runs `bullmq jobs`.
pub(crate) async fn run(ctx: &Context, args: JobsArgs) -> Result<()> {
    // Reading must not create anything, so the queue's `meta` is left alone.
    let queue = super::open_queue(ctx, &args.queue, super::Access::Existing).await?;
    let Some(state) = args.state.map(StateArg::state) else {
        let outcome = super::jobs_latest::run(ctx, &queue, args.offset, args.limit).await;
        queue.close().await?;
        return outcome;
    };
    let total = queue
        .get_job_counts_of(&[state])
        .await
        .context("counting the jobs")?
        .first()
        .map_or(0, |(_, n)| *n);
    let jobs = read_page(&queue, state, &args, total)
        .await
        .with_context(|| format!("reading the {state} jobs of queue {:?}", args.queue))?;
    queue.close().await?;
    if ctx.json {
        print_json(&json!({
            "queue": args.queue,
            "state": state.as_str(),
            "total": total,
            "offset": args.offset,
            "limit": args.limit,
            "jobs": jobs.iter().map(job_json).collect::<Vec<Value>>(),
        }));
    } else if jobs.is_empty() {
        println!("{}", nothing_text(&args, state, total));
    } else {
        print!("{}", as_text(state, &jobs, now_ms(), Paint::stdout()));
        if args.name.is_none() {
            let last = args.offset + jobs.len() as u64;
            if last < total {
                println!(
                    "{}-{} of {total} {state} jobs; --offset {last} for more",
                    args.offset + 1,
                    last
                );
            }
        }
    }
    Ok(())
}

/// The jobs of the requested page: positions `offset..offset + limit` of the state, or of the
/// jobs named `--name`, which are found by reading the state in chunks (names are not indexed).
async fn read_page(
    queue: &Queue,
    state: JobState,
    args: &JobsArgs,
    total: u64,
) -> Result<Vec<Job>> {
    let asc = ascending(state);
    let Some(name) = args.name.as_deref() else {
        let start = to_index(args.offset);
        let end = to_index(args.offset.saturating_add(args.limit - 1));
        return Ok(queue.get_jobs(&[state], start, end, asc).await?);
    };
    let mut skipped = 0;
    let mut page = Vec::new();
    let mut start = 0;
    while start < total && (page.len() as u64) < args.limit {
        let end = start + NAME_SCAN_CHUNK - 1;
        let chunk = queue
            .get_jobs(&[state], to_index(start), to_index(end), asc)
            .await?;
        for job in chunk.into_iter().filter(|job| job.name() == name) {
            if skipped < args.offset {
                skipped += 1;
            } else if (page.len() as u64) < args.limit {
                page.push(job);
            }
        }
        start += NAME_SCAN_CHUNK;
    }
    Ok(page)
}

/// A list position for Redis (`u64` beyond `i64::MAX` cannot be a position anyway).
fn to_index(position: u64) -> i64 {
    i64::try_from(position).unwrap_or(i64::MAX)
}

/// What to say when the page is empty.
fn nothing_text(args: &JobsArgs, state: JobState, total: u64) -> String {
    match (&args.name, total) {
        (_, 0) => format!("no {state} jobs in queue {}", args.queue),
        (Some(name), _) => format!(
            "no {state} jobs named {name:?} in queue {} (from offset {})",
            args.queue, args.offset
        ),
        (None, _) => format!(
            "no {state} jobs from offset {} (queue {} has {total})",
            args.offset, args.queue
        ),
    }
}

/// The first line of `text`, cut to `max` characters with an ellipsis.
fn one_line(text: &str, max: usize) -> String {
    let line = text.lines().next().unwrap_or("");
    if line.chars().count() <= max && !text.contains('\n') {
        line.to_owned()
    } else {
        let cut: String = line.chars().take(max.saturating_sub(1)).collect();
        format!("{cut}…")
    }
}

/// The header of the column that matters for jobs in `state`, if any.
fn extra_header(state: JobState) -> Option<&'static str> {
    match state {
        JobState::Failed => Some("FAILED REASON"),
        JobState::Delayed => Some("DUE"),
        JobState::Prioritized => Some("PRIORITY"),
        JobState::Active => Some("STARTED"),
        JobState::Completed => Some("FINISHED"),
        _ => None,
    }
}

/// The cell of [`extra_header`]'s column for `job`.
fn extra_cell(state: JobState, job: &Job, now: u64, paint: Paint) -> String {
    let ago = |at: Option<u64>| at.map_or_else(|| "-".to_owned(), |at| format_relative(at, now));
    match state {
        JobState::Failed => paint.red(&one_line(job.failed_reason().unwrap_or("-"), 100)),
        JobState::Delayed => {
            format_relative(job.timestamp().saturating_add(job.record().delay), now)
        }
        JobState::Prioritized => job.priority().to_string(),
        JobState::Active => ago(job.processed_on()),
        JobState::Completed => ago(job.finished_on()),
        _ => String::new(),
    }
}

/// The aligned table: id, name, attempts, age, and the column that matters for the state.
fn as_text(state: JobState, jobs: &[Job], now: u64, paint: Paint) -> String {
    let extra = extra_header(state);
    let mut headers = vec!["ID", "NAME", "ATTEMPTS", "CREATED"];
    headers.extend(extra);
    let rows: Vec<Vec<String>> = jobs
        .iter()
        .map(|job| {
            let mut row = vec![
                job.id().to_owned(),
                job.name().to_owned(),
                attempts_text(job),
                format_relative(job.timestamp(), now),
            ];
            if extra.is_some() {
                row.push(extra_cell(state, job, now, paint));
            }
            row
        })
        .collect();
    table(&headers, &rows)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn job(id: &str, fields: &[(&str, &str)]) -> Job {
        let fields: HashMap<String, String> = fields
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        Job::decode("q", id, &fields).unwrap()
    }

    #[test]
    fn failed_jobs_show_their_reason_on_one_line() {
        let now = 1_800_000_100_000;
        let jobs = vec![
            job(
                "1",
                &[
                    ("name", "send"),
                    ("timestamp", "1800000000000"),
                    ("atm", "2"),
                    ("opts", r#"{"attempts":2}"#),
                    ("failedReason", "smtp down"),
                ],
            ),
            job(
                "22",
                &[
                    ("name", "x"),
                    ("timestamp", "1800000099000"),
                    ("atm", "1"),
                    ("failedReason", "line one\nline two"),
                ],
            ),
        ];
        let text = as_text(JobState::Failed, &jobs, now, Paint::forced(false));
        assert_eq!(
            text,
            "ID  NAME  ATTEMPTS  CREATED     FAILED REASON\n\
             1   send  2/2       1m 40s ago  smtp down\n\
             22  x     1/1       1s ago      line one…\n"
        );
    }

    #[test]
    fn delayed_jobs_show_when_they_are_due() {
        let now = 1_800_000_000_000;
        let jobs = vec![job(
            "d",
            &[
                ("name", "later"),
                ("timestamp", "1800000000000"),
                ("delay", "60000"),
            ],
        )];
        let text = as_text(JobState::Delayed, &jobs, now, Paint::forced(false));
        assert!(text.contains("DUE"), "{text}");
        assert!(text.contains("in 1m"), "{text}");
    }

    #[test]
    fn finished_states_list_newest_first() {
        assert!(!ascending(JobState::Failed));
        assert!(!ascending(JobState::Completed));
        assert!(ascending(JobState::Waiting));
        assert!(ascending(JobState::Delayed));
    }
}
