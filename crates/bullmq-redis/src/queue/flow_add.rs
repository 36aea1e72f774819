//! Adding whole flows (`add_flow.lua`) and reading one flow node back.

use bullmq_backend::flows::DependencyKind;
use bullmq_backend::{FlowAdded, FlowNodeInsert, FlowRefusal};
use bullmq_protocol::keys::{QueueKey, QueueKeys};
use fred::prelude::{Client, Value};

use super::add::{args_len, ParentArgs, ScriptArgs};
use super::flows::get_dependencies_page;
use super::reply::{array, string, unexpected};
use super::scripts::ADD_FLOW;
use crate::error::Result;

/// Script code: a record's parent neither exists nor is added earlier in the flow.
const PARENT_MISSING: i64 = -5;
/// Script code: a record's job exists as the child of another live parent.
const PARENT_CANNOT_BE_REPLACED: i64 = -7;

/// Adds every node of a flow (parents before children) in one script call: each node is
/// checked before the first write, so a [`FlowAdded::Refused`] flow wrote nothing. `now_ms` is
/// the time parents released at the end are stamped with (Node passes `Date.now()`).
///
/// # Errors
///
/// [`crate::RedisError::Command`] when the call fails (e.g. an `opts` is not JSON, which
/// fails before any write), or [`crate::RedisError::UnexpectedReply`].
///
/// # Cancel safety
///
/// Not cancel safe: dropping the future may or may not have added the flow (all of it or
/// nothing).
pub async fn add_flow(client: &Client, nodes: &[FlowNodeInsert], now_ms: u64) -> Result<FlowAdded> {
    if nodes.is_empty() {
        return Ok(FlowAdded::Ids(Vec::new()));
    }
    let keys: Vec<QueueKeys> = nodes.iter().map(|node| node.queue.keys()).collect();
    let parents: Vec<Option<ParentArgs>> = nodes
        .iter()
        .map(|node| node.job.parent.as_ref().map(ParentArgs::new))
        .collect();
    let bytes = nodes
        .iter()
        .zip(&keys)
        .zip(&parents)
        .map(|((node, keys), parent)| keys.base().len() + args_len(&node.job, parent.as_ref()) + 24)
        .sum::<usize>();
    let mut args = ScriptArgs::with_capacity(1 + 10 * nodes.len(), bytes + 20);
    args.push_u64(now_ms);
    for ((node, keys), parent) in nodes.iter().zip(&keys).zip(&parents) {
        let job = &node.job;
        args.push(keys.base());
        args.push(if node.waiting_children { "1" } else { "" });
        args.push(job.custom_id.as_deref().unwrap_or(""));
        args.push(&job.name);
        args.push(&job.data);
        args.push(&job.opts);
        args.push_u64(job.timestamp_ms);
        args.push(parent.as_ref().map_or("", |p| p.key.as_str()));
        args.push(parent.as_ref().map_or("", |p| p.json.as_str()));
        args.push(parent.as_ref().map_or("", |p| p.dependencies.as_str()));
    }
    let name = ADD_FLOW.name();
    // Only to route the call to the flow's slot on a cluster (the script reads no KEYS).
    let route = vec![keys[0].key(QueueKey::Meta)];
    let reply: Value = ADD_FLOW.run(client, route, args.into_values()).await?;
    let items = array(name, reply)?;
    if let Some(Value::Integer(code)) = items.first() {
        return refusal(*code, items).map(FlowAdded::Refused);
    }
    if items.len() != nodes.len() {
        return Err(unexpected(
            name,
            format!("{} results for {} jobs", items.len(), nodes.len()),
        ));
    }
    let ids = items
        .into_iter()
        .map(|item| string(name, item))
        .collect::<Result<Vec<_>>>()?;
    Ok(FlowAdded::Ids(ids))
}

fn refusal(code: i64, items: Vec<Value>) -> Result<FlowRefusal> {
    let name = ADD_FLOW.name();
    let mut items = items.into_iter().skip(1);
    let index = match items.next() {
        Some(Value::Integer(index)) => usize::try_from(index).unwrap_or(usize::MAX),
        other => return Err(unexpected(name, format!("refusal index {other:?}"))),
    };
    let mut job = || -> Result<bullmq_protocol::JobRef> {
        let key = match items.next() {
            Some(value) => string(name, value)?,
            None => return Err(unexpected(name, "refusal without its keys")),
        };
        crate::node_key::parse_job_key(&key)
            .ok_or_else(|| unexpected(name, format!("refusal key {key:?} is not a job key")))
    };
    match code {
        PARENT_MISSING => Ok(FlowRefusal::ParentMissing {
            index,
            parent: job()?,
        }),
        PARENT_CANNOT_BE_REPLACED => Ok(FlowRefusal::ParentCannotBeReplaced {
            index,
            job: job()?,
            existing_parent: job()?,
        }),
        other => Err(unexpected(name, format!("unknown code {other}"))),
    }
}

/// The keys of the children of `job_id` that Node's `getFlow` reads: the first page of each
/// kind (processed, unprocessed, failed, ignored — in that order), `max_children` each as
/// Node's `HSCAN` / `SSCAN` `COUNT` hint (so a page may hold more or fewer).
///
/// # Errors
///
/// As [`get_dependencies_page`].
pub async fn flow_children(
    client: &Client,
    keys: &QueueKeys,
    job_id: &str,
    max_children: u64,
) -> Result<Vec<String>> {
    let mut children = Vec::new();
    for kind in [
        DependencyKind::Processed,
        DependencyKind::Unprocessed,
        DependencyKind::Failed,
        DependencyKind::Ignored,
    ] {
        let page = get_dependencies_page(client, keys, job_id, kind, 0, max_children).await?;
        children.extend(page.entries.into_iter().map(|(key, _)| key));
    }
    Ok(children)
}
