//! Helpers of the flow tests: the same flow spec (Node's `FlowJob` JSON, queue names as
//! placeholders) added by Node's FlowProducer and by ours, and a Redis snapshot of a set of
//! queues with queue names (and, optionally, ids) replaced by placeholders.

#![allow(dead_code)]

use std::collections::{BTreeMap, HashMap};

use anyhow::{Context, Result};
use fred::prelude::{
    Client, ClientLike, HashesInterface, KeysInterface, ListInterface, SetsInterface,
    SortedSetsInterface,
};
use ractor_bullmq::flow::{FlowJob, FlowProducer, FlowProducerOptions, JobNode};
use ractor_bullmq::protocol::JobOptions;
use serde_json::{json, Value as Json};

use super::common::*;

/// A fixed creation time, so scores and delayed times are the same in both runs.
pub const TS: u64 = 1_900_000_000_000;

/// Placeholders -> real queue names of one run.
pub struct Queues(pub Vec<(String, String)>);

impl Queues {
    /// Fresh queue names for `placeholders` (e.g. `["A", "B"]`), named after `tag`.
    pub fn new(tag: &str, placeholders: &[&str]) -> Self {
        Self(
            placeholders
                .iter()
                .map(|p| {
                    (
                        (*p).to_owned(),
                        unique_queue(&format!("{tag}-{}", p.to_lowercase())),
                    )
                })
                .collect(),
        )
    }

    /// The real name of `placeholder`.
    pub fn name(&self, placeholder: &str) -> &str {
        &self
            .0
            .iter()
            .find(|(p, _)| p == placeholder)
            .unwrap_or_else(|| panic!("no queue {placeholder}"))
            .1
    }

    /// `spec` with every `queueName` placeholder replaced by its real name.
    pub fn resolve(&self, spec: &Json) -> Json {
        let mut out = spec.clone();
        if let Some(q) = out.get("queueName").and_then(Json::as_str) {
            let real = self.name(q).to_owned();
            out["queueName"] = json!(real);
        }
        if let Some(children) = out.get_mut("children").and_then(Json::as_array_mut) {
            for child in children.iter_mut() {
                *child = self.resolve(child);
            }
        }
        out
    }

    /// Real names back to placeholders in every string of `value`.
    pub fn mask(&self, value: &Json) -> Json {
        let mut text = value.to_string();
        let mut names: Vec<&(String, String)> = self.0.iter().collect();
        names.sort_by_key(|(_, real)| std::cmp::Reverse(real.len()));
        for (placeholder, real) in names {
            text = text.replace(real.as_str(), &format!("<{placeholder}>"));
        }
        serde_json::from_str(&text).expect("masking keeps JSON valid")
    }

    /// Deletes every key of every queue.
    pub async fn cleanup(&self) -> Result<()> {
        for (_, real) in &self.0 {
            cleanup(real).await?;
        }
        Ok(())
    }

    /// How many keys the queues hold in all.
    pub async fn key_count(&self) -> Result<usize> {
        let mut n = 0;
        for (_, real) in &self.0 {
            n += count_keys(real).await?;
        }
        Ok(n)
    }
}

/// Our `FlowJob` from a Node `FlowJob` spec (already resolved).
pub fn to_flow(spec: &Json) -> FlowJob {
    let mut job = FlowJob::new(
        spec["name"].as_str().unwrap_or_default(),
        spec["queueName"].as_str().unwrap_or_default(),
    );
    if let Some(data) = spec.get("data") {
        job = job.data(data.clone());
    }
    if let Some(opts) = spec.get("opts") {
        let opts: JobOptions = serde_json::from_value(opts.clone()).expect("valid options");
        job = job.opts(opts);
    }
    for child in spec
        .get("children")
        .and_then(Json::as_array)
        .into_iter()
        .flatten()
    {
        job = job.child(to_flow(child));
    }
    job
}

/// A producer on the test Redis.
pub async fn producer() -> Result<FlowProducer> {
    let config = ractor_bullmq::ConnectionConfig::from_url(&redis_url())?;
    Ok(FlowProducer::new(FlowProducerOptions::new(config)).await?)
}

/// Node's FlowProducer `add(flow, {queuesOptions})`: `{tree}` or `{error, code}`.
pub async fn node_add(flow: &Json, queues_options: Option<&Json>) -> Result<Json> {
    let mut arg = json!({"op": "add", "flow": flow});
    if let Some(q) = queues_options {
        arg["queuesOptions"] = q.clone();
    }
    run_node("flows.js", &arg).await
}

/// Node's FlowProducer `addBulk(flows)`.
pub async fn node_add_bulk(flows: &[Json]) -> Result<Json> {
    run_node("flows.js", &json!({"op": "addBulk", "flows": flows})).await
}

/// Our tree in the shape flows.js prints: `{id, name, queueName, children}`.
pub fn shape(node: &JobNode) -> Json {
    json!({
        "id": node.job.id(),
        "name": node.job.name(),
        "queueName": node.job.queue_name(),
        "children": node.children.iter().map(shape).collect::<Vec<_>>(),
    })
}

/// Every id of a shaped tree, depth first.
pub fn ids_of(tree: &Json, out: &mut Vec<String>) {
    if let Some(id) = tree["id"].as_str() {
        out.push(id.to_owned());
    }
    for child in tree["children"].as_array().into_iter().flatten() {
        ids_of(child, out);
    }
}

/// Replaces each id of `ids` by `<id{n}>` in every string of `value`.
pub fn mask_ids(value: &Json, ids: &[String]) -> Json {
    let mut text = value.to_string();
    let mut sorted: Vec<(usize, &String)> = ids.iter().enumerate().collect();
    sorted.sort_by_key(|(_, id)| std::cmp::Reverse(id.len()));
    for (n, id) in sorted {
        text = text.replace(id.as_str(), &format!("<id{n}>"));
    }
    serde_json::from_str(&text).expect("masking keeps JSON valid")
}

/// Every key of every queue: key (without prefix) -> comparable content. Hash fields holding
/// JSON are parsed; the events stream is listed as `[event, fields]` without ids.
pub async fn snapshot(queues: &Queues) -> Result<Json> {
    let raw = raw_client().await?;
    let mut out = BTreeMap::new();
    for (_, real) in &queues.0 {
        for key in queue_keys(real).await? {
            out.insert(key.clone(), content(&raw, real, &key).await?);
        }
    }
    raw.quit().await?;
    Ok(queues.mask(&serde_json::to_value(out)?))
}

async fn content(raw: &Client, queue: &str, key: &str) -> Result<Json> {
    let kind: String = raw.r#type(key).await?;
    Ok(match kind.as_str() {
        "hash" => {
            let hash: HashMap<String, String> = raw.hgetall(key).await?;
            let fields: serde_json::Map<String, Json> = hash
                .into_iter()
                .map(|(k, v)| {
                    let parsed = match k.as_str() {
                        "data" | "opts" | "parent" | "returnvalue" => {
                            serde_json::from_str(&v).unwrap_or(Json::String(v))
                        }
                        _ => Json::String(v),
                    };
                    (k, parsed)
                })
                .collect();
            Json::Object(fields)
        }
        "list" => json!(raw.lrange::<Vec<String>, _>(key, 0, -1).await?),
        "set" => {
            let mut members: Vec<String> = raw.smembers(key).await?;
            members.sort();
            json!(members)
        }
        "zset" => {
            let v: Vec<(String, f64)> = raw.zrange(key, 0, -1, None, false, None, true).await?;
            json!(v)
        }
        "string" => json!(raw.get::<String, _>(key).await?),
        "stream" => {
            let events = read_events(queue).await?;
            json!(events
                .iter()
                .map(|e| (e.event.clone(), e.fields.clone()))
                .collect::<Vec<_>>())
        }
        other => json!(other),
    })
}

/// The keys on which two snapshots differ, with both values, for a readable failure.
pub fn diff(ours: &Json, node: &Json) -> String {
    let (Some(a), Some(b)) = (ours.as_object(), node.as_object()) else {
        return format!("ours {ours}\nnode {node}");
    };
    let mut out = String::new();
    let keys: std::collections::BTreeSet<&String> = a.keys().chain(b.keys()).collect();
    for key in keys {
        if a.get(key) != b.get(key) {
            out.push_str(&format!(
                "{key}:\n  ours {}\n  node {}\n",
                a.get(key).map_or("<absent>".into(), Json::to_string),
                b.get(key).map_or("<absent>".into(), Json::to_string)
            ));
        }
    }
    out
}

/// Asserts both snapshots are equal, naming the keys that differ.
pub fn assert_same(ours: &Json, node: &Json, what: &str) {
    assert!(
        ours == node,
        "{what}: Redis state differs from Node's:\n{}",
        diff(ours, node)
    );
}

/// A raw write of a completed job `id` in `queue` (as any client may have left it).
pub async fn write_completed(queue: &str, id: &str, returnvalue: &str) -> Result<()> {
    let raw = raw_client().await?;
    let key = format!("{PREFIX}:{queue}:{id}");
    let _: () = raw
        .hset(
            &key,
            [
                ("name", "done"),
                ("data", "{}"),
                ("opts", "{\"attempts\":0}"),
                ("timestamp", &TS.to_string()),
                ("delay", "0"),
                ("priority", "0"),
                ("processedOn", &TS.to_string()),
                ("finishedOn", &TS.to_string()),
                ("returnvalue", returnvalue),
                ("atm", "1"),
            ],
        )
        .await
        .context("hset")?;
    let _: () = raw
        .zadd(
            format!("{PREFIX}:{queue}:completed"),
            None,
            None,
            false,
            false,
            (TS as f64, id),
        )
        .await?;
    raw.quit().await?;
    Ok(())
}
