//! A queue's raw Redis state as one comparable value, for differential tests that run the
//! same scenario on Node and on us in two queues: every key (but the events stream, compared
//! by event) with its type and content, queue names and run-dependent values replaced by
//! placeholders.
#![allow(dead_code, unreachable_pub)]

use std::collections::BTreeMap;

use anyhow::Result;
use fred::prelude::{ClientLike, HashesInterface, KeysInterface, ListInterface, SetsInterface};
use fred::types::{ClusterHash, CustomCommand};
use serde_json::{json, Value};

use super::common::{normalize_events, queue_keys, raw_client, read_events, PREFIX};

/// Hash fields whose values differ between runs by nature (clocks, worker names, traces whose
/// text is language-specific): kept as present, value replaced.
const RUN_DEPENDENT_FIELDS: &[&str] =
    &["timestamp", "processedOn", "finishedOn", "pb", "stacktrace"];

/// Keys whose whole value is a clock (the last stalled check's time): kept as present.
const RUN_DEPENDENT_KEYS: &[&str] = &["stalled-check"];

/// Keys left out: the wake-up marker, whose presence after a run only says whether a worker
/// blocked on it again before it stopped.
const TRANSIENT_KEYS: &[&str] = &["marker"];

/// Replaces every queue name of `names` (longest first) by its placeholder in `text`.
pub fn rename(text: &str, names: &[(&str, &str)]) -> String {
    let mut names = names.to_vec();
    names.sort_by_key(|(name, _)| std::cmp::Reverse(name.len()));
    let mut out = text.to_string();
    for (name, placeholder) in names {
        out = out.replace(name, placeholder);
    }
    out
}

/// The raw state of `queue`: key suffix (after `{PREFIX}:{queue}:`) → content. Hashes map
/// fields to values (run-dependent ones as `<run>`), sets and zsets list their members sorted
/// (zset scores left out: they hold clocks), lists keep their order, strings their value. The
/// events stream and the wake-up marker are left out. Every text goes through [`rename`] with `names`.
pub async fn snapshot(queue: &str, names: &[(&str, &str)]) -> Result<BTreeMap<String, Value>> {
    let client = raw_client().await?;
    let base = format!("{PREFIX}:{queue}:");
    let mut state = BTreeMap::new();
    for key in queue_keys(queue).await? {
        let suffix = rename(key.strip_prefix(&base).unwrap_or(&key), names);
        if suffix == "events" || TRANSIENT_KEYS.contains(&suffix.as_str()) {
            continue;
        }
        let kind: String = client.r#type(&key).await?;
        if RUN_DEPENDENT_KEYS.contains(&suffix.as_str()) {
            state.insert(suffix, json!({ kind: "<run>" }));
            continue;
        }
        let value = match kind.as_str() {
            "hash" => {
                let fields: BTreeMap<String, String> = client.hgetall(&key).await?;
                let fields: BTreeMap<String, String> = fields
                    .into_iter()
                    .map(|(field, value)| {
                        let value = if RUN_DEPENDENT_FIELDS.contains(&field.as_str()) {
                            "<run>".to_string()
                        } else {
                            rename(&value, names)
                        };
                        (rename(&field, names), value)
                    })
                    .collect();
                json!({ "hash": fields })
            }
            "set" => {
                let mut members: Vec<String> = client.smembers(&key).await?;
                members = members.iter().map(|m| rename(m, names)).collect();
                members.sort();
                json!({ "set": members })
            }
            "zset" => {
                let mut members: Vec<String> = client
                    .custom(
                        CustomCommand::new_static("ZRANGE", ClusterHash::FirstKey, false),
                        vec![key.clone(), "0".into(), "-1".into()],
                    )
                    .await?;
                members = members.iter().map(|m| rename(m, names)).collect();
                members.sort();
                json!({ "zset": members })
            }
            "list" => {
                let items: Vec<String> = client.lrange(&key, 0, -1).await?;
                let items: Vec<String> = items.iter().map(|m| rename(m, names)).collect();
                json!({ "list": items })
            }
            "string" => {
                let value: Option<String> = client.get(&key).await?;
                json!({ "string": value.map(|v| rename(&v, names)) })
            }
            other => json!({ "type": other }),
        };
        state.insert(suffix, value);
    }
    client.quit().await?;
    Ok(state)
}

/// Asserts two snapshots are equal key by key, naming the first key that differs.
pub fn assert_same_state(
    ours: &BTreeMap<String, Value>,
    theirs: &BTreeMap<String, Value>,
    what: &str,
) {
    let our_keys: Vec<&String> = ours.keys().collect();
    let their_keys: Vec<&String> = theirs.keys().collect();
    assert_eq!(our_keys, their_keys, "{what}: the keys differ");
    for (key, value) in ours {
        assert_eq!(Some(value), theirs.get(key), "{what}: key `{key}` differs");
    }
}

/// Per job id: the normalized events of `queue` (timestamps as placeholders), queue names
/// replaced through [`rename`] with `names`.
pub async fn per_job_events(
    queue: &str,
    names: &[(&str, &str)],
) -> Result<BTreeMap<String, Vec<String>>> {
    let events = read_events(queue).await?;
    let mut map: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for (event, line) in events
        .iter()
        .zip(normalize_events(&events, &|id| id.to_string()))
    {
        if let Some((_, id)) = event.fields.iter().find(|(k, _)| k == "jobId") {
            map.entry(id.clone())
                .or_default()
                .push(rename(&line, names));
        }
    }
    Ok(map)
}
