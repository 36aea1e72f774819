//! What the per-job commands share (`retry`, `promote`, `remove`, `change-priority`,
//! `change-delay`): the "these ids or `--all`" target, one operation applied per job, and the
//! summary and exit status that follow.
//!
//! With ids, every id is tried in the order given; a job that does not exist or is in the wrong
//! state does not stop the others, and the exit status is that of the first id that failed (3
//! not found, 4 wrong state). With `--all`, the ids of the states the operation works on are
//! read first, a page at a time, then the operation is applied to each: a job that moved (or was
//! removed, or got locked) between the read and the operation is counted as skipped, which is
//! not an error.

use std::time::Duration;

use anyhow::{Context as _, Result};
use bullmq_protocol::state::JobState;
use clap::Args;
use ractor_bullmq::{Queue, QueueError, RetryFrom, RetryReset};
use serde_json::{json, Value};

use super::Context;
use crate::exit::Exit;
use crate::output::{print_json, Paint};

/// How many ids are read per round trip when `--all` pages through a state.
const PAGE: i64 = 1000;

/// The jobs a per-job command acts on: ids, or `--all`.
#[derive(Debug, Clone, Args)]
pub(crate) struct Target {
    /// Ids of the jobs.
    #[arg(required_unless_present = "all", conflicts_with = "all")]
    ids: Vec<String>,
    /// Every job in the state(s) the command works on.
    #[arg(long)]
    all: bool,
}

/// One per-job operation, with its arguments.
#[derive(Debug, Clone)]
pub(crate) enum JobOp {
    /// Move a finished job back to be processed (Node `job.retry(state)`).
    Retry(RetryFrom),
    /// Make a delayed job due now (Node `job.promote()`).
    Promote,
    /// Delete a job, its flow children and its keys (Node `job.remove()`); `--all` takes the
    /// state to empty.
    Remove(Option<JobState>),
    /// Set a job's priority, queueing a waiting or prioritized job again by it (Node
    /// `job.changePriority`).
    ChangePriority {
        /// 0 = none, 1 highest.
        priority: u32,
        /// Ahead of the jobs of the same priority.
        lifo: bool,
    },
    /// Make a delayed job due `delay` from now (Node `job.changeDelay`).
    ChangeDelay(Duration),
}

/// What became of one job.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Outcome {
    /// The operation was applied.
    Changed,
    /// No such job.
    NotFound,
    /// The job is not where the operation needs it (or is locked, or a scheduler's run); the
    /// text says why, naming the state.
    Refused(String),
}

impl JobOp {
    /// The verb of the summary line.
    fn verb(&self) -> &'static str {
        match self {
            JobOp::Retry(_) => "retried",
            JobOp::Promote => "promoted",
            JobOp::Remove(_) => "removed",
            JobOp::ChangePriority { .. } => "reprioritized",
            JobOp::ChangeDelay(_) => "rescheduled",
        }
    }

    /// The command's name, for `--json`.
    fn name(&self) -> &'static str {
        match self {
            JobOp::Retry(_) => "retry",
            JobOp::Promote => "promote",
            JobOp::Remove(_) => "remove",
            JobOp::ChangePriority { .. } => "change-priority",
            JobOp::ChangeDelay(_) => "change-delay",
        }
    }

    /// The states `--all` pages through.
    fn states(&self) -> Vec<JobState> {
        match self {
            JobOp::Retry(RetryFrom::Completed) => vec![JobState::Completed],
            JobOp::Retry(RetryFrom::Failed) => vec![JobState::Failed],
            JobOp::Promote | JobOp::ChangeDelay(_) => vec![JobState::Delayed],
            JobOp::Remove(state) => state.iter().copied().collect(),
            JobOp::ChangePriority { .. } => vec![JobState::Prioritized, JobState::Waiting],
        }
    }

    /// Applies the operation to one job: the one place that calls the library per job.
    async fn apply(&self, queue: &Queue, id: &str) -> Result<Outcome> {
        let result = match self {
            JobOp::Retry(from) => queue.retry_job(id, *from, RetryReset::none()).await,
            JobOp::Promote => queue.promote_job(id).await,
            JobOp::Remove(_) => match queue.remove(id).await {
                Ok(true) => Ok(()),
                Ok(false) => return Ok(Outcome::NotFound),
                Err(error) => Err(error),
            },
            JobOp::ChangePriority { priority, lifo } => {
                queue.change_priority(id, *priority, *lifo).await
            }
            JobOp::ChangeDelay(delay) => queue.change_delay(id, *delay).await,
        };
        match result {
            Ok(()) => Ok(Outcome::Changed),
            Err(QueueError::JobNotFound { .. }) => Ok(Outcome::NotFound),
            Err(
                refusal @ (QueueError::JobNotInState { .. }
                | QueueError::JobLocked { .. }
                | QueueError::SchedulerJob { .. }),
            ) => Ok(Outcome::Refused(refusal.to_string())),
            Err(other) => {
                Err(anyhow::Error::new(other).context(format!("{} job {id}", self.name())))
            }
        }
    }
}

/// Runs a per-job command on `queue_name`.
pub(crate) async fn run(ctx: &Context, queue_name: &str, target: Target, op: JobOp) -> Result<()> {
    // The operations write what they need; opening must not create a `meta` for a mistyped
    // queue name.
    let queue = super::open_queue(ctx, queue_name, super::Access::Existing).await?;
    let outcome = if target.all {
        run_all(ctx, &queue, &op).await
    } else {
        run_ids(ctx, &queue, &target.ids, &op).await
    };
    queue.close().await?;
    outcome
}

/// `--all`: every job of the operation's states as they were when the command started.
async fn run_all(ctx: &Context, queue: &Queue, op: &JobOp) -> Result<()> {
    let states = op.states();
    // The ids are read before any is changed: operations that keep a job in its state
    // (change-delay, change-priority) reorder it, so paging while changing would skip or
    // repeat jobs.
    let mut ids = Vec::new();
    for state in &states {
        ids.extend(ids_in(queue, *state).await?);
    }
    let (mut changed, mut skipped) = (Vec::new(), Vec::new());
    for id in &ids {
        // A failure part way says how far it got: the jobs before it stay changed.
        let outcome = op
            .apply(queue, id)
            .await
            .with_context(|| stopped_after(op, changed.len() as u64))?;
        match outcome {
            Outcome::Changed => changed.push(id.as_str()),
            Outcome::NotFound | Outcome::Refused(_) => skipped.push(id.as_str()),
        }
    }
    let state_names: Vec<&str> = states.iter().map(|s| s.as_str()).collect();
    if ctx.json {
        // The same shape as with ids: `changed` lists the ids, `count` counts them.
        print_json(&json!({
            "queue": queue.name(),
            "operation": op.name(),
            "states": state_names,
            "changed": changed,
            "count": changed.len(),
            "skipped": skipped,
        }));
    } else {
        println!(
            "{}",
            all_summary(
                Paint::stdout(),
                op,
                queue.name(),
                &state_names,
                changed.len() as u64,
                skipped.len() as u64
            )
        );
    }
    Ok(())
}

/// The ids in `state`, oldest (next to run) first, read [`PAGE`] at a time; an id seen twice
/// (the state changed while paging) is kept once.
async fn ids_in(queue: &Queue, state: JobState) -> Result<Vec<String>> {
    let mut ids = Vec::new();
    let mut seen = std::collections::HashSet::new();
    let mut start = 0;
    loop {
        let page = queue
            .get_job_ids(&[state], start, start + PAGE - 1, true)
            .await
            .with_context(|| format!("reading the {state} jobs of queue {:?}", queue.name()))?;
        let full = page.len() as i64 == PAGE;
        ids.extend(page.into_iter().filter(|id| seen.insert(id.clone())));
        if !full {
            return Ok(ids);
        }
        start += PAGE;
    }
}

/// The one-line summary of `--all`.
fn all_summary(
    paint: Paint,
    op: &JobOp,
    queue: &str,
    states: &[&str],
    changed: u64,
    skipped: u64,
) -> String {
    let mut line = format!(
        "{} {} {} on queue {}",
        op.verb(),
        paint.green(&changed.to_string()),
        jobs_word(states.join(" or "), changed),
        paint.bold(queue)
    );
    if skipped > 0 {
        line.push_str(&format!(
            " ({} skipped: moved, removed or locked meanwhile)",
            paint.yellow(&skipped.to_string())
        ));
    }
    line
}

/// `"failed job"` / `"failed jobs"` (no adjective when `kind` is empty).
fn jobs_word(kind: String, n: u64) -> String {
    let noun = if n == 1 { "job" } else { "jobs" };
    if kind.is_empty() {
        noun.to_owned()
    } else {
        format!("{kind} {noun}")
    }
}

/// Ids given on the command line: each tried in order, failures reported together.
async fn run_ids(ctx: &Context, queue: &Queue, ids: &[String], op: &JobOp) -> Result<()> {
    let mut results = Vec::with_capacity(ids.len());
    for id in ids {
        let outcome = op.apply(queue, id).await.with_context(|| {
            let changed = results
                .iter()
                .filter(|(_, outcome)| *outcome == Outcome::Changed)
                .count() as u64;
            stopped_after(op, changed)
        })?;
        results.push((id.clone(), outcome));
    }
    let report = ids_json(queue.name(), op, &results);
    match failure(queue.name(), &results, report) {
        // With --json the report travels in the error: one object either way.
        Some(error) if ctx.json => Err(error),
        outcome => {
            if ctx.json {
                print_json(&ids_json(queue.name(), op, &results));
            } else {
                println!(
                    "{}",
                    ids_summary(Paint::stdout(), op, queue.name(), &results)
                );
            }
            outcome.map_or(Ok(()), Err)
        }
    }
}

/// What an error part way through is prefixed with: `retried 3 jobs, then stopped`.
fn stopped_after(op: &JobOp, changed: u64) -> String {
    format!(
        "{} {changed} {}, then stopped",
        op.verb(),
        jobs_word(String::new(), changed)
    )
}

/// `--json` for ids: which changed, which do not exist, which were refused and why.
fn ids_json(queue: &str, op: &JobOp, results: &[(String, Outcome)]) -> Value {
    let pick = |wanted: fn(&Outcome) -> bool| -> Vec<&str> {
        results
            .iter()
            .filter(|(_, outcome)| wanted(outcome))
            .map(|(id, _)| id.as_str())
            .collect()
    };
    let refused: Vec<Value> = results
        .iter()
        .filter_map(|(id, outcome)| match outcome {
            Outcome::Refused(reason) => Some(json!({"id": id, "reason": reason})),
            _ => None,
        })
        .collect();
    let changed = pick(|o| *o == Outcome::Changed);
    json!({
        "queue": queue,
        "operation": op.name(),
        "count": changed.len(),
        "changed": changed,
        "notFound": pick(|o| *o == Outcome::NotFound),
        "refused": refused,
    })
}

/// `retried 2 of 3 jobs on queue emails`.
fn ids_summary(paint: Paint, op: &JobOp, queue: &str, results: &[(String, Outcome)]) -> String {
    let changed = results
        .iter()
        .filter(|(_, outcome)| *outcome == Outcome::Changed)
        .count() as u64;
    let total = results.len() as u64;
    let count = if changed == total {
        paint.green(&changed.to_string())
    } else {
        format!("{} of {total}", paint.red(&changed.to_string()))
    };
    format!(
        "{} {count} {} on queue {}",
        op.verb(),
        jobs_word(String::new(), total),
        paint.bold(queue)
    )
}

/// The error for the ids that failed, with the exit status of the first of them; `None` when
/// every id was changed.
fn failure(queue: &str, results: &[(String, Outcome)], report: Value) -> Option<anyhow::Error> {
    let mut messages = Vec::new();
    // Whether the first failure is a "not found" (exit 3) rather than a refusal (exit 4).
    let mut first_not_found = None;
    for (id, outcome) in results {
        match outcome {
            Outcome::Changed => continue,
            Outcome::NotFound => {
                first_not_found.get_or_insert(true);
                messages.push(format!("job {id} does not exist on queue {queue}"));
            }
            Outcome::Refused(reason) => {
                first_not_found.get_or_insert(false);
                messages.push(reason.clone());
            }
        }
    }
    let message = messages.join("; ");
    first_not_found.map(|not_found| {
        let code = if not_found {
            crate::exit::NOT_FOUND
        } else {
            crate::exit::REFUSED
        };
        Exit::with_report(code, message, Some(report))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plain() -> Paint {
        Paint::forced(false)
    }

    #[test]
    fn the_first_failing_id_sets_the_exit_status() {
        let results = vec![
            ("1".to_string(), Outcome::Changed),
            ("9".to_string(), Outcome::NotFound),
            (
                "3".to_string(),
                Outcome::Refused("job 3 is not failed, it is completed".into()),
            ),
        ];
        let error = failure("q", &results, json!({})).unwrap();
        assert_eq!(
            crate::exit::code_of(&error),
            std::process::ExitCode::from(crate::exit::NOT_FOUND)
        );
        assert_eq!(
            error.to_string(),
            "job 9 does not exist on queue q; job 3 is not failed, it is completed"
        );
        let refused_first = vec![results[2].clone(), results[1].clone()];
        let error = failure("q", &refused_first, json!({})).unwrap();
        assert_eq!(
            crate::exit::code_of(&error),
            std::process::ExitCode::from(crate::exit::REFUSED)
        );
        assert!(failure("q", &results[..1], json!({})).is_none());
    }

    #[test]
    fn summaries_count_what_changed() {
        let op = JobOp::Retry(RetryFrom::Failed);
        let results = vec![
            ("1".to_string(), Outcome::Changed),
            ("2".to_string(), Outcome::NotFound),
        ];
        assert_eq!(
            ids_summary(plain(), &op, "mail", &results),
            "retried 1 of 2 jobs on queue mail"
        );
        assert_eq!(
            ids_summary(plain(), &op, "mail", &results[..1]),
            "retried 1 job on queue mail"
        );
        assert_eq!(
            all_summary(plain(), &op, "mail", &["failed"], 3, 0),
            "retried 3 failed jobs on queue mail"
        );
        assert_eq!(
            all_summary(
                plain(),
                &JobOp::ChangePriority {
                    priority: 2,
                    lifo: false
                },
                "mail",
                &["prioritized", "waiting"],
                1,
                2
            ),
            "reprioritized 1 prioritized or waiting job on queue mail \
             (2 skipped: moved, removed or locked meanwhile)"
        );
        assert_eq!(stopped_after(&op, 3), "retried 3 jobs, then stopped");
        let json = ids_json("mail", &op, &results);
        assert_eq!(json["changed"], json!(["1"]));
        assert_eq!(json["count"], 1);
        assert_eq!(json["notFound"], json!(["2"]));
        assert_eq!(json["refused"], json!([]));
    }

    #[test]
    fn all_pages_the_states_each_operation_works_on() {
        assert_eq!(
            JobOp::Retry(RetryFrom::Completed).states(),
            [JobState::Completed]
        );
        assert_eq!(JobOp::Retry(RetryFrom::Failed).states(), [JobState::Failed]);
        assert_eq!(JobOp::Promote.states(), [JobState::Delayed]);
        assert_eq!(
            JobOp::ChangeDelay(Duration::from_secs(1)).states(),
            [JobState::Delayed]
        );
        assert_eq!(
            JobOp::Remove(Some(JobState::Active)).states(),
            [JobState::Active]
        );
    }
}
