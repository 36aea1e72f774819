//! `bullmq flow <queue> <id>`: the flow tree under a job, to any depth (Node's
//! `FlowProducer.getFlow`): each job with its name, queue, state and how it ended for its
//! parent, children in Node's order (processed, unprocessed, failed, ignored), children in other
//! queues of the same prefix followed too.

use std::future::Future;
use std::pin::Pin;

use anyhow::{Context as _, Result};
use bullmq_protocol::state::JobState;
use clap::Args;
use serde::Serialize;

use super::sibling_queues::{split_key, SiblingQueues};
use super::{Access, Context};
use crate::exit::Exit;
use crate::output::print_json;

/// Arguments of `bullmq flow`.
#[derive(Debug, Clone, Args)]
pub(crate) struct FlowArgs {
    /// Queue of the job the tree starts from.
    queue: String,
    /// Id of that job.
    id: String,
    /// How many levels the tree shows, the job itself included (Node's `depth`, default 10:
    /// 1 is the job alone).
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u32).range(1..))]
    depth: u32,
    /// At most this many children of each outcome per job (Node's `maxChildren`, default 20;
    /// 0: all).
    #[arg(long, default_value_t = 20)]
    max_children: usize,
}

/// One job of the tree.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
struct FlowNode {
    id: String,
    name: String,
    queue_name: String,
    state: String,
    /// How the job counts for its parent: `processed`, `unprocessed`, `failed` or `ignored`
    /// (`None` for the job the tree starts from).
    #[serde(skip_serializing_if = "Option::is_none")]
    outcome: Option<&'static str>,
    /// The key of a child that no longer exists (removed, or its queue obliterated).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    missing: bool,
    children: Vec<FlowNode>,
}

/// Runs `bullmq flow`.
pub(crate) async fn run(ctx: &Context, args: FlowArgs) -> Result<()> {
    let root = super::open_queue(ctx, &args.queue, Access::Existing).await?;
    let mut walk = Walk {
        queues: SiblingQueues::new(ctx.prefix.clone(), root.clone(), ctx.backend().await?),
        max_children: args.max_children,
    };
    let tree = walk.node(&args.queue, &args.id, None, args.depth).await;
    walk.queues.close().await;
    root.close().await?;
    let tree = match tree? {
        Some(tree) => tree,
        None => {
            return Err(Exit::not_found(format!(
                "no job {:?} in queue {:?} (prefix {:?})",
                args.id, args.queue, ctx.prefix
            )))
        }
    };
    if ctx.json {
        print_json(&serde_json::to_value(&tree)?);
    } else {
        print!("{}", as_text(&tree));
    }
    Ok(())
}

/// What the walk down the tree keeps: the queues opened so far.
struct Walk {
    queues: SiblingQueues,
    max_children: usize,
}

impl Walk {
    /// The job `id` of `queue_name` and its children, `depth` levels in all (this one
    /// included); `None` when the job does not exist.
    fn node<'a>(
        &'a mut self,
        queue_name: &'a str,
        id: &'a str,
        outcome: Option<&'static str>,
        depth: u32,
    ) -> Pin<Box<dyn Future<Output = Result<Option<FlowNode>>> + Send + 'a>> {
        Box::pin(async move {
            let queue = self.queues.get(queue_name).await?;
            let Some(job) = queue
                .get_job(id)
                .await
                .with_context(|| format!("reading job {id:?} of queue {queue_name:?}"))?
            else {
                return Ok(None);
            };
            let state = queue
                .get_job_state(id)
                .await
                .with_context(|| format!("reading the state of job {id:?}"))?;
            let mut node = FlowNode {
                id: id.to_owned(),
                name: job.name().to_owned(),
                queue_name: queue_name.to_owned(),
                state: state_name(state),
                outcome,
                missing: false,
                children: Vec::new(),
            };
            // As Node's getFlow: children only while levels are left below this one.
            if depth <= 1 {
                return Ok(Some(node));
            }
            let deps = queue
                .get_dependencies(id)
                .await
                .with_context(|| format!("reading the children of job {id:?}"))?;
            let max_children = self.max_children;
            let take = |keys: Vec<String>| -> Vec<String> {
                match max_children {
                    0 => keys,
                    n => keys.into_iter().take(n).collect(),
                }
            };
            // Node's order: processed, unprocessed, failed, ignored.
            let mut children: Vec<(String, &'static str)> = Vec::new();
            for (keys, outcome) in [
                (take(deps.processed.into_keys().collect()), "processed"),
                (take(deps.unprocessed), "unprocessed"),
                (take(deps.failed), "failed"),
                (take(deps.ignored.into_keys().collect()), "ignored"),
            ] {
                children.extend(keys.into_iter().map(|key| (key, outcome)));
            }
            for (key, outcome) in children {
                let child = match split_key(&key, self.queues.prefix()) {
                    Some((child_queue, child_id)) => {
                        self.node(child_queue, child_id, Some(outcome), depth - 1)
                            .await?
                    }
                    None => None,
                };
                node.children.push(child.unwrap_or_else(|| FlowNode {
                    id: key.clone(),
                    name: String::new(),
                    queue_name: String::new(),
                    state: JobState::Unknown.as_str().to_owned(),
                    outcome: Some(outcome),
                    missing: true,
                    children: Vec::new(),
                }));
            }
            Ok(Some(node))
        })
    }
}

/// Node's name of `state`.
fn state_name(state: JobState) -> String {
    state.as_str().to_owned()
}

/// The tree drawn with box characters, one job a line:
/// `id  name  queue  state  (outcome)`.
fn as_text(tree: &FlowNode) -> String {
    let mut out = String::new();
    line(&mut out, tree, "", "");
    out
}

fn line(out: &mut String, node: &FlowNode, lead: &str, child_lead: &str) {
    let outcome = node
        .outcome
        .map_or_else(String::new, |o| format!("  ({o})"));
    if node.missing {
        out.push_str(&format!("{lead}{}  missing{outcome}\n", node.id));
    } else {
        out.push_str(&format!(
            "{lead}{}  {}  queue {}  {}{outcome}\n",
            node.id, node.name, node.queue_name, node.state
        ));
    }
    let last = node.children.len().saturating_sub(1);
    for (i, child) in node.children.iter().enumerate() {
        let (branch, rest) = if i == last {
            ("└─ ", "   ")
        } else {
            ("├─ ", "│  ")
        };
        line(
            out,
            child,
            &format!("{child_lead}{branch}"),
            &format!("{child_lead}{rest}"),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(id: &str, outcome: Option<&'static str>, children: Vec<FlowNode>) -> FlowNode {
        FlowNode {
            id: id.into(),
            name: format!("n{id}"),
            queue_name: "q".into(),
            state: "waiting-children".into(),
            outcome,
            missing: false,
            children,
        }
    }

    #[test]
    fn the_tree_is_drawn_with_branches() {
        let tree = node(
            "1",
            None,
            vec![
                node(
                    "2",
                    Some("unprocessed"),
                    vec![node("4", Some("processed"), vec![])],
                ),
                node("3", Some("unprocessed"), vec![]),
            ],
        );
        assert_eq!(
            as_text(&tree),
            "1  n1  queue q  waiting-children\n\
             ├─ 2  n2  queue q  waiting-children  (unprocessed)\n\
             │  └─ 4  n4  queue q  waiting-children  (processed)\n\
             └─ 3  n3  queue q  waiting-children  (unprocessed)\n"
        );
    }
}
