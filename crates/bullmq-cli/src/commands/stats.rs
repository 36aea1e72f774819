//! `bullmq stats <queue>`: job counts per state, the paused flag and the connected workers.

use anyhow::{Context as _, Result};
use bullmq_protocol::state::JobState;
use clap::Args;
use serde_json::{json, Map, Value};

use super::workers::{list_workers, WorkerConnection};
use super::Context;
use crate::output::{print_json, two_columns};

/// Arguments of `bullmq stats`.
#[derive(Debug, Clone, Args)]
pub(crate) struct StatsArgs {
    /// Queue name.
    queue: String,
    /// Also list each worker connection.
    #[arg(long)]
    workers: bool,
}

/// Everything `stats` prints.
#[derive(Debug, Clone)]
struct Stats {
    counts: Vec<(JobState, u64)>,
    paused: bool,
    workers: Vec<WorkerConnection>,
}

/// The states `stats` reports, in Node `getJobCounts()` order plus the legacy `paused` list.
const STATES: [JobState; 8] = [
    JobState::Active,
    JobState::Completed,
    JobState::Delayed,
    JobState::Failed,
    JobState::Paused,
    JobState::Prioritized,
    JobState::Waiting,
    JobState::WaitingChildren,
];

/// Runs `bullmq stats`.
pub(crate) async fn run(ctx: &Context, args: StatsArgs) -> Result<()> {
    // Reading must not create anything, so the queue's `meta` is left alone.
    let queue = super::open_queue(ctx, &args.queue, super::Access::Existing).await?;
    let counts = queue.get_job_counts().await.context("reading job counts")?;
    let paused = queue.is_paused().await.context("reading the paused flag")?;
    let workers = list_workers(&queue).await?;
    // Redis: the qualified name (`bull:emails`); PostgreSQL: the name and its schema.
    let label = match ctx.target()?.schema() {
        Some(schema) => format!("{} (schema {schema})", args.queue),
        None => queue.keys().qualified_name().to_owned(),
    };
    let stats = Stats {
        counts: STATES
            .into_iter()
            .map(|state| (state, counts.get(state)))
            .collect(),
        paused,
        workers,
    };
    queue.close().await?;
    if ctx.json {
        print_json(&as_json(&args.queue, &stats));
    } else {
        print!("{}", as_text(&label, &stats, args.workers));
    }
    Ok(())
}

fn as_json(queue: &str, stats: &Stats) -> Value {
    let counts: Map<String, Value> = stats
        .counts
        .iter()
        .map(|(state, n)| (state.as_str().to_string(), json!(n)))
        .collect();
    json!({
        "queue": queue,
        "counts": counts,
        "paused": stats.paused,
        "workers": stats.workers.len(),
        "workerConnections": stats.workers,
    })
}

fn as_text(label: &str, stats: &Stats, list_workers: bool) -> String {
    let mut rows: Vec<(String, String)> = vec![("queue".into(), label.to_owned())];
    rows.extend(
        stats
            .counts
            .iter()
            .map(|(state, n)| (state.as_str().to_string(), n.to_string())),
    );
    rows.push(("queue paused".into(), stats.paused.to_string()));
    rows.push(("workers".into(), stats.workers.len().to_string()));
    let mut out = two_columns(&rows);
    if list_workers {
        for w in &stats.workers {
            out.push_str(&format!(
                "  {} {} (age {}s, idle {}s)\n",
                w.worker_name.as_deref().unwrap_or("<unnamed>"),
                w.addr,
                w.age_secs,
                w.idle_secs
            ));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_and_json_show_every_state() {
        let keys = bullmq_protocol::keys::QueueKeys::new("bull", "emails");
        let stats = Stats {
            counts: STATES.into_iter().zip(1..).collect(),
            paused: true,
            workers: vec![WorkerConnection {
                name: "bull:ZW1haWxz:w:w1".into(),
                worker_name: Some("w1".into()),
                addr: "127.0.0.1:1".into(),
                age_secs: 1,
                idle_secs: 0,
            }],
        };
        let text = as_text(keys.qualified_name(), &stats, true);
        assert!(
            text.starts_with("queue             bull:emails\n"),
            "{text}"
        );
        assert!(text.contains("waiting-children  8\n"), "{text}");
        assert!(text.contains("queue paused      true\n"), "{text}");
        assert!(text.contains("  w1 127.0.0.1:1"), "{text}");
        let value = as_json("emails", &stats);
        assert_eq!(value["counts"]["active"], 1);
        assert_eq!(value["counts"]["waiting"], 7);
        assert_eq!(value["workers"], 1);
    }
}
