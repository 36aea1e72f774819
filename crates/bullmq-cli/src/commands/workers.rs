//! `bullmq workers <queue>`: the workers connected to a queue, found the way Node's
//! `Queue.getWorkers()` finds them — by the names their Redis connections were given with
//! `CLIENT SETNAME`, or on PostgreSQL the `application_name` of their LISTEN sessions in
//! `pg_stat_activity` (also used by `stats`).

use anyhow::{Context as _, Result};
use clap::Args;
use serde::Serialize;
use serde_json::json;

use super::Context;
use crate::output::{print_json, table};
use crate::time_text::format_duration_ms;

/// Arguments of `bullmq workers`.
#[derive(Debug, Clone, Args)]
pub(crate) struct WorkersArgs {
    /// Queue name.
    queue: String,
}

/// Runs `bullmq workers`.
pub(crate) async fn run(ctx: &Context, args: WorkersArgs) -> Result<()> {
    let queue = super::open_queue(ctx, &args.queue, super::Access::Existing).await?;
    let workers = list_workers(&queue).await?;
    queue.close().await?;
    if ctx.json {
        print_json(&json!({ "queue": args.queue, "workers": workers }));
    } else if workers.is_empty() {
        println!("no workers connected to queue {}", args.queue);
    } else {
        print!("{}", as_text(&workers));
    }
    Ok(())
}

/// Whole seconds as `1m15s` (`0s`, not `0ms`: Redis counts in seconds).
fn seconds_text(secs: u64) -> String {
    if secs == 0 {
        "0s".to_owned()
    } else {
        format_duration_ms(secs.saturating_mul(1000))
    }
}

/// One row per connection: the worker's name, its address, how long it has been connected
/// and since when it has been quiet (a blocked fetch counts as a command in progress).
fn as_text(workers: &[WorkerConnection]) -> String {
    let rows: Vec<Vec<String>> = workers
        .iter()
        .map(|w| {
            vec![
                w.worker_name
                    .clone()
                    .unwrap_or_else(|| "<unnamed>".to_owned()),
                w.addr.clone(),
                seconds_text(w.age_secs),
                seconds_text(w.idle_secs),
            ]
        })
        .collect();
    table(&["NAME", "ADDRESS", "CONNECTED FOR", "IDLE"], &rows)
}

/// One worker connection found in `CLIENT LIST` (PostgreSQL: one session).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct WorkerConnection {
    /// The raw connection name (`{prefix}:{base64(queue)}[:w:{worker name}]`; PostgreSQL:
    /// `{queue}[:w:{worker name}]`).
    pub(crate) name: String,
    /// The worker's own name, when it has one (the part after `:w:`).
    pub(crate) worker_name: Option<String>,
    /// Client address as the server reports it (`local` for a PostgreSQL Unix socket).
    pub(crate) addr: String,
    /// Seconds since the connection was opened.
    pub(crate) age_secs: u64,
    /// Seconds since the connection's last command.
    pub(crate) idle_secs: u64,
}

impl From<ractor_bullmq::WorkerInfo> for WorkerConnection {
    fn from(info: ractor_bullmq::WorkerInfo) -> Self {
        Self {
            name: info.raw_name,
            worker_name: info.worker_name,
            addr: info.addr,
            age_secs: info.age.as_secs(),
            idle_secs: info.idle.as_secs(),
        }
    }
}

/// The worker connections of a queue, read by [`ractor_bullmq::Queue::get_workers`] (the
/// library owns Node's matching rule; this keeps the CLI's own output shape).
pub(crate) async fn list_workers(queue: &ractor_bullmq::Queue) -> Result<Vec<WorkerConnection>> {
    let workers = match queue.redis_client() {
        Some(_) => queue
            .get_workers()
            .await
            .context("CLIENT LIST failed (some hosted Redis services disable it)")?,
        None => queue
            .get_workers()
            .await
            .context("listing the workers failed")?,
    };
    Ok(workers.into_iter().map(WorkerConnection::from).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_names_each_worker() {
        let workers = vec![
            WorkerConnection {
                name: "bull:cQ==:w:node-1".into(),
                worker_name: Some("node-1".into()),
                addr: "127.0.0.1:5000".into(),
                age_secs: 75,
                idle_secs: 0,
            },
            WorkerConnection {
                name: "bull:cQ==".into(),
                worker_name: None,
                addr: "127.0.0.1:5001".into(),
                age_secs: 3,
                idle_secs: 1,
            },
        ];
        assert_eq!(
            as_text(&workers),
            "NAME       ADDRESS         CONNECTED FOR  IDLE\n\
             node-1     127.0.0.1:5000  1m15s          0s\n\
             <unnamed>  127.0.0.1:5001  3s             1s\n"
        );
    }
}
