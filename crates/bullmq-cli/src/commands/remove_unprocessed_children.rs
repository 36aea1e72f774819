//! `bullmq remove-unprocessed-children <queue> <id>`: remove the children of a flow parent that
//! have not been processed yet, with their own unprocessed children (Node
//! `job.removeUnprocessedChildren()`).
//!
//! What Node does, and so this: every child still in the parent's `:dependencies` set is
//! removed depth first (its unprocessed children before it), except a child a worker holds (a
//! `:lock` key: skipped with its subtree) and a child in its queue's failed set; processed
//! children stay. Each removal is Node's `job.remove()` without children (the children were
//! handled first), so it frees the parent and emits `removed` as Node's does.
//!
//! The runtime has no call for this yet; this is the one place that does it, through
//! [`remove_unprocessed`], so switching to `Queue::remove_unprocessed_children` is one edit.

use std::future::Future;
use std::pin::Pin;

use anyhow::{Context as _, Result};
use bullmq_protocol::state::JobState;
use bullmq_redis::fred::prelude::KeysInterface;
use clap::Args;
use ractor_bullmq::{Queue, QueueError, RemoveOptions};
use serde_json::json;

use super::sibling_queues::{split_key, SiblingQueues};
use super::{Access, Context};
use crate::exit::Exit;
use crate::output::{print_json, Paint};

/// Arguments of `bullmq remove-unprocessed-children`.
#[derive(Debug, Clone, Args)]
pub(crate) struct RemoveUnprocessedChildrenArgs {
    /// Queue of the parent job.
    queue: String,
    /// Id of the parent job.
    id: String,
}

/// Runs `bullmq remove-unprocessed-children`.
pub(crate) async fn run(ctx: &Context, args: RemoveUnprocessedChildrenArgs) -> Result<()> {
    let queue = super::open_queue(ctx, &args.queue, Access::Existing).await?;
    let outcome = async {
        if queue.get_job(&args.id).await?.is_none() {
            return Err(Exit::not_found(format!(
                "no job {:?} in queue {:?} (prefix {:?})",
                args.id, args.queue, ctx.prefix
            )));
        }
        let mut queues = SiblingQueues::new(ctx.prefix.clone(), queue.clone());
        let removed = remove_unprocessed(&mut queues, queue.clone(), &args.id).await;
        queues.close().await;
        removed
    }
    .await;
    queue.close().await?;
    let removed = outcome?;
    if ctx.json {
        print_json(&json!({
            "queue": args.queue,
            "id": args.id,
            "removed": removed,
            "count": removed.len(),
        }));
    } else {
        let word = if removed.len() == 1 {
            "child"
        } else {
            "children"
        };
        println!(
            "removed {} unprocessed {word} of job {} on queue {}",
            Paint::stdout().green(&removed.len().to_string()),
            args.id,
            Paint::stdout().bold(&args.queue)
        );
    }
    Ok(())
}

/// Removes the unprocessed children of job `id` of `queue` as Node's
/// `removeUnprocessedChildren` does; the keys (`{prefix}:{queue}:{id}`) of the jobs removed,
/// deepest first.
fn remove_unprocessed<'a>(
    queues: &'a mut SiblingQueues,
    queue: Queue,
    id: &'a str,
) -> Pin<Box<dyn Future<Output = Result<Vec<String>>> + Send + 'a>> {
    Box::pin(async move {
        let mut removed = Vec::new();
        let children = queue
            .get_dependencies(id)
            .await
            .with_context(|| format!("reading the children of job {id:?}"))?
            .unprocessed;
        for key in children {
            let Some((child_queue, child_id)) = split_key(&key, queues.prefix()) else {
                continue;
            };
            let child = queues.get(child_queue).await?;
            if locked(&child, child_id).await? {
                continue;
            }
            if child.get_job_state(child_id).await? == JobState::Failed {
                continue;
            }
            removed.extend(remove_unprocessed(queues, child.clone(), child_id).await?);
            match child
                .remove_with(child_id, RemoveOptions::new().remove_children(false))
                .await
            {
                Ok(true) => removed.push(key.clone()),
                // Gone meanwhile, or taken by a worker since the check: left, as Node leaves a
                // locked child.
                Ok(false) | Err(QueueError::JobLocked { .. } | QueueError::SchedulerJob { .. }) => {
                }
                Err(other) => {
                    return Err(other).with_context(|| format!("removing child {key}"));
                }
            }
        }
        Ok(removed)
    })
}

/// Whether a worker holds job `id` (its `:lock` key exists).
async fn locked(queue: &Queue, id: &str) -> Result<bool> {
    let Some(client) = queue.redis_client() else {
        return Ok(false);
    };
    let found: u64 = client
        .exists(queue.keys().lock(id))
        .await
        .with_context(|| format!("reading the lock of job {id:?}"))?;
    Ok(found > 0)
}
