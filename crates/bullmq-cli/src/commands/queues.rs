//! `bullmq queues`: every queue under `--prefix` (on PostgreSQL: in the URL's schema), whoever
//! created it, with its job counts per state, paused flag and worker count.

use anyhow::{Context as _, Result};
use bullmq_protocol::state::JobState;
use clap::Args;
use ractor_bullmq::JobCounts;
use serde_json::{json, Map, Value};

use super::session::Session;
use super::Context;
use crate::output::{print_json, table, Paint};
use crate::target::Target;

/// Arguments of `bullmq queues` (none besides the global ones).
#[derive(Debug, Clone, Args)]
pub(crate) struct QueuesArgs {}

/// What one line of the listing shows.
#[derive(Debug, Clone)]
struct QueueSummary {
    name: String,
    counts: JobCounts,
    paused: bool,
    /// `None` when the server refuses `CLIENT LIST` (some hosted services do).
    workers: Option<usize>,
}

/// The counted states, in the order of the table's columns: what is still to run, then what
/// ran.
const STATES: [JobState; 7] = [
    JobState::Waiting,
    JobState::Active,
    JobState::Delayed,
    JobState::Prioritized,
    JobState::WaitingChildren,
    JobState::Completed,
    JobState::Failed,
];

/// Runs `bullmq queues`.
pub(crate) async fn run(ctx: &Context, _args: QueuesArgs) -> Result<()> {
    let session = Session::connect(ctx, None).await?;
    let summaries = summarise(&session).await;
    // The server's facts are worth the listing, but not its failure (INFO may be renamed).
    let server = match session.server_facts().await {
        Ok(facts) => Some(facts),
        Err(error) => {
            eprintln!(
                "warning: INFO failed, server facts unknown: {}",
                crate::output::error_chain(&error)
            );
            None
        }
    };
    // Close the connection whatever the reads did, then report them.
    session.close().await;
    let summaries = summaries?;
    if ctx.json {
        let mut value = as_json(&ctx.prefix, &summaries);
        if let Some(schema) = session.target().schema() {
            value["schema"] = json!(schema);
        }
        value["server"] = serde_json::to_value(&server)?;
        print_json(&value);
        return Ok(());
    }
    match (&server, session.target()) {
        (Some(server), Target::Redis(config)) => {
            println!("{} at {}", server.summary(), config.target());
        }
        (Some(server), Target::Postgres(config)) => {
            // The summary names the schema already: `host:port/db` is what is left to say.
            let target = config.display_target();
            let server_only = target.split(" schema ").next().unwrap_or(&target);
            println!("{} at {server_only}", server.summary());
        }
        (None, _) => {}
    }
    if summaries.is_empty() {
        println!("no queues {}", session.scope());
    } else {
        print!("{}", as_text(&summaries, Paint::stdout()));
    }
    Ok(())
}

/// Finds the queues (the seam's queue discovery) and reads each one's counts, paused flag and
/// workers (the seam's worker listing), all on the session's connection.
async fn summarise(session: &Session) -> Result<Vec<QueueSummary>> {
    let names = session.list_queues().await?;
    // Without worker listing (CLIENT LIST refused) the counts are still worth showing; only
    // the workers are unknown, and that is said once.
    let mut list_workers = true;
    let mut summaries = Vec::with_capacity(names.len());
    for name in names {
        // Reading must not create anything, so each queue's `meta` is left alone.
        let queue = session.open(&name).await?;
        let counts = queue
            .get_job_counts()
            .await
            .with_context(|| format!("counting the jobs of queue {name:?}"))?;
        let paused = queue
            .is_paused()
            .await
            .with_context(|| format!("reading whether queue {name:?} is paused"))?;
        let workers = if list_workers {
            match queue.get_workers().await {
                Ok(workers) => Some(workers.len()),
                Err(error) => {
                    let why = if session.redis_client().is_some() {
                        "CLIENT LIST failed, worker counts unknown (some hosted Redis services disable it)"
                    } else {
                        "listing the workers failed, worker counts unknown"
                    };
                    eprintln!("warning: {why}: {error}");
                    list_workers = false;
                    None
                }
            }
        } else {
            None
        };
        queue.close().await?;
        summaries.push(QueueSummary {
            name,
            counts,
            paused,
            workers,
        });
    }
    Ok(summaries)
}

fn as_json(prefix: &str, summaries: &[QueueSummary]) -> Value {
    let queues: Vec<Value> = summaries
        .iter()
        .map(|s| {
            let mut counts: Map<String, Value> = STATES
                .iter()
                .map(|state| (state.as_str().to_owned(), json!(s.counts.get(*state))))
                .collect();
            counts.insert("paused".into(), json!(s.counts.paused));
            json!({
                "queue": s.name,
                "counts": counts,
                "paused": s.paused,
                "workers": s.workers,
            })
        })
        .collect();
    json!({ "prefix": prefix, "queues": queues })
}

fn as_text(summaries: &[QueueSummary], paint: Paint) -> String {
    let mut headers = vec!["QUEUE", "PAUSED", "WORKERS"];
    let state_headers: Vec<String> = STATES
        .iter()
        .map(|state| state.as_str().to_uppercase())
        .collect();
    headers.extend(state_headers.iter().map(String::as_str));
    let rows: Vec<Vec<String>> = summaries
        .iter()
        .map(|s| {
            let mut row = vec![
                s.name.clone(),
                if s.paused {
                    paint.yellow("yes")
                } else {
                    "no".to_owned()
                },
                s.workers.map_or_else(|| "?".to_owned(), |n| n.to_string()),
            ];
            row.extend(STATES.iter().map(|state| {
                let n = s.counts.get(*state);
                match state {
                    JobState::Failed if n > 0 => paint.red(&n.to_string()),
                    _ => n.to_string(),
                }
            }));
            row
        })
        .collect();
    table(&headers, &rows)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn summary(name: &str, failed: u64, paused: bool) -> QueueSummary {
        let mut counts = JobCounts::default();
        counts.waiting = 3;
        counts.failed = failed;
        QueueSummary {
            name: name.into(),
            counts,
            paused,
            workers: Some(2),
        }
    }

    #[test]
    fn one_row_per_queue_with_every_state() {
        let text = as_text(
            &[summary("mail", 1, true), summary("reports", 0, false)],
            Paint::forced(false),
        );
        assert_eq!(
            text,
            "QUEUE    PAUSED  WORKERS  WAITING  ACTIVE  DELAYED  PRIORITIZED  WAITING-CHILDREN  COMPLETED  FAILED\n\
             mail     yes     2        3        0       0        0            0                 0          1\n\
             reports  no      2        3        0       0        0            0                 0          0\n"
        );
        let value = as_json("bull", &[summary("mail", 1, true)]);
        assert_eq!(value["prefix"], "bull");
        assert_eq!(value["queues"][0]["counts"]["failed"], 1);
        assert_eq!(value["queues"][0]["counts"]["waiting-children"], 0);
        assert_eq!(value["queues"][0]["paused"], true);
        assert_eq!(value["queues"][0]["workers"], 2);
        let mut unknown = summary("x", 0, false);
        unknown.workers = None;
        assert!(as_text(&[unknown.clone()], Paint::forced(false)).contains("x      no      ?  "));
        assert_eq!(
            as_json("bull", &[unknown])["queues"][0]["workers"],
            Value::Null
        );
    }
}
