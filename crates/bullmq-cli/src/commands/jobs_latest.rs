//! `bullmq jobs <queue> --latest`: the newest jobs whatever their state (bull-board's
//! "latest" tab), newest added first, each with its state.
//!
//! No key orders jobs across states, so the newest `offset + limit` of every state are read
//! (finished states newest first, the others from their end) and merged by when each job was
//! added (`timestamp`, then id).

use anyhow::{Context as _, Result};
use bullmq_protocol::state::JobState;
use ractor_bullmq::{Job, Queue};
use serde_json::{json, Value};

use super::job::{attempts_text, job_json};
use super::Context;
use crate::output::{print_json, table};
use crate::time_text::{format_relative, now_ms};

/// Every state a job can be listed in.
const STATES: [JobState; 8] = [
    JobState::Active,
    JobState::Waiting,
    JobState::Prioritized,
    JobState::Delayed,
    JobState::WaitingChildren,
    JobState::Paused,
    JobState::Completed,
    JobState::Failed,
];

/// Prints the page `offset..offset + limit` of the newest jobs of `queue`.
pub(crate) async fn run(ctx: &Context, queue: &Queue, offset: u64, limit: u64) -> Result<()> {
    let wanted = offset.saturating_add(limit);
    let end = i64::try_from(wanted.saturating_sub(1)).unwrap_or(i64::MAX);
    let mut jobs: Vec<(Job, JobState)> = Vec::new();
    for state in STATES {
        let newest = queue
            .get_jobs(&[state], 0, end, false)
            .await
            .with_context(|| format!("reading the {state} jobs of queue {:?}", queue.name()))?;
        jobs.extend(newest.into_iter().map(|job| (job, state)));
    }
    let page = newest_page(jobs, offset, limit);
    if ctx.json {
        let listed: Vec<Value> = page
            .iter()
            .map(|(job, state)| {
                let mut value = job_json(job);
                value["state"] = json!(state.as_str());
                value
            })
            .collect();
        print_json(&json!({
            "queue": queue.name(),
            "latest": true,
            "offset": offset,
            "limit": limit,
            "jobs": listed,
        }));
    } else if page.is_empty() {
        println!("no jobs in queue {} from offset {offset}", queue.name());
    } else {
        print!("{}", as_text(&page, now_ms()));
    }
    Ok(())
}

/// The jobs newest added first (ties: the larger id first), positions `offset..offset+limit`.
fn newest_page(mut jobs: Vec<(Job, JobState)>, offset: u64, limit: u64) -> Vec<(Job, JobState)> {
    jobs.sort_by(|(a, _), (b, _)| {
        (b.timestamp(), b.id().len(), b.id()).cmp(&(a.timestamp(), a.id().len(), a.id()))
    });
    jobs.into_iter()
        .skip(usize::try_from(offset).unwrap_or(usize::MAX))
        .take(usize::try_from(limit).unwrap_or(usize::MAX))
        .collect()
}

/// The aligned table: id, name, state, attempts, age.
fn as_text(jobs: &[(Job, JobState)], now: u64) -> String {
    let rows: Vec<Vec<String>> = jobs
        .iter()
        .map(|(job, state)| {
            vec![
                job.id().to_owned(),
                job.name().to_owned(),
                state.as_str().to_owned(),
                attempts_text(job),
                format_relative(job.timestamp(), now),
            ]
        })
        .collect();
    table(&["ID", "NAME", "STATE", "ATTEMPTS", "CREATED"], &rows)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn job(id: &str, timestamp: u64) -> Job {
        let fields: HashMap<String, String> = [
            ("name".to_owned(), format!("n{id}")),
            ("timestamp".to_owned(), timestamp.to_string()),
        ]
        .into_iter()
        .collect();
        Job::decode("q", id, &fields).unwrap()
    }

    #[test]
    fn newest_added_first_across_states() {
        let jobs = vec![
            (job("1", 100), JobState::Completed),
            (job("3", 300), JobState::Waiting),
            (job("2", 200), JobState::Failed),
            (job("10", 300), JobState::Delayed),
        ];
        let page = newest_page(jobs, 0, 3);
        let ids: Vec<&str> = page.iter().map(|(j, _)| j.id()).collect();
        assert_eq!(ids, ["10", "3", "2"]);
        let text = as_text(&page, 1_000);
        assert!(
            text.starts_with("ID  NAME  STATE    ATTEMPTS  CREATED\n"),
            "{text}"
        );
        assert!(text.contains("\n2   n2    failed "), "{text}");
        let second = newest_page(
            vec![
                (job("1", 1), JobState::Active),
                (job("2", 2), JobState::Active),
            ],
            1,
            5,
        );
        assert_eq!(second[0].0.id(), "1");
    }
}
