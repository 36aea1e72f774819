//! Job options as the PostgreSQL protocol stores them: Node's long-form `JobsOptions`
//! (`deduplication`, `failParentOnFailure`, `keepLogs`, `telemetry`, …), which its SQL
//! functions read (`attempts`, `delay`, `lifo`, `deduplication`, the failure policies).
//!
//! On Redis the same options are stored with short keys (`de`, `fpof`, `kl`, `tm`, …); the
//! seam hands them over in that form, so they are renamed here.

use serde_json::{Map, Value};

/// Short key → long key, one level (Node's `optsDecodeMap`).
const RENAMES: &[(&str, &str)] = &[
    ("de", "deduplication"),
    ("fpof", "failParentOnFailure"),
    ("cpof", "continueParentOnFailure"),
    ("idof", "ignoreDependencyOnFailure"),
    ("rdof", "removeDependencyOnFailure"),
    ("kl", "keepLogs"),
];

/// The long form of a stored-options JSON object (short or long keys), with `attempts`
/// present as Node's `Job` always has it (0: one try). Anything that is not an object gives
/// an empty object plus `attempts`.
pub(crate) fn long_form(opts_json: &str) -> Map<String, Value> {
    try_long_form(opts_json).unwrap_or_else(|| with_attempts(Map::new()))
}

/// [`long_form`] of an options object; `None` when `opts_json` is not a JSON object (a flow
/// refuses such a node before it writes anything, as the Redis scripts do).
pub(crate) fn try_long_form(opts_json: &str) -> Option<Map<String, Value>> {
    match serde_json::from_str::<Value>(opts_json) {
        Ok(Value::Object(map)) => Some(with_attempts(long_keys(map))),
        _ => None,
    }
}

/// The options object `short` with Node's long keys, nothing added: what Node stores for the
/// options it passes as given (a scheduler's template, an iteration's options, which carry
/// `attempts` only when the template sets it).
pub(crate) fn long_keys(mut short: Map<String, Value>) -> Map<String, Value> {
    let mut long = Map::with_capacity(short.len() + 1);
    let metadata = short.remove("tm");
    let omit = short.remove("omc");
    for (key, value) in short {
        let key = RENAMES
            .iter()
            .find(|(s, _)| *s == key)
            .map_or(key, |(_, l)| (*l).to_string());
        long.insert(key, value);
    }
    if metadata.is_some() || omit.is_some() {
        let mut telemetry = Map::new();
        if let Some(m) = metadata {
            telemetry.insert("metadata".into(), m);
        }
        if let Some(o) = omit {
            telemetry.insert("omitContext".into(), o);
        }
        long.insert("telemetry".into(), Value::Object(telemetry));
    }
    long
}

/// The long form of an options JSON object (see [`long_keys`]); `{}` when it is not one.
pub(crate) fn long_keys_of(opts_json: &str) -> Map<String, Value> {
    match serde_json::from_str::<Value>(opts_json) {
        Ok(Value::Object(map)) => long_keys(map),
        _ => Map::new(),
    }
}

fn with_attempts(mut long: Map<String, Value>) -> Map<String, Value> {
    long.entry("attempts").or_insert(Value::from(0));
    long
}

/// A child's `parent` option as Node stores it on PostgreSQL: `{id, queue}` with the plain
/// parent queue name (Redis stores the qualified `{prefix}:{queue}` there).
pub(crate) fn set_plain_parent(long: &mut Map<String, Value>, parent_queue: &str) {
    if let Some(Value::Object(parent)) = long.get_mut("parent") {
        parent.insert("queue".into(), Value::from(parent_queue));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bullmq_protocol::JobOptions;

    #[test]
    fn short_keys_become_nodes_long_ones() {
        let long = long_form(
            r#"{"attempts":3,"de":{"id":"d","ttl":5},"fpof":true,"kl":10,"tm":"ctx","omc":true,"delay":5}"#,
        );
        assert_eq!(
            Value::Object(long),
            serde_json::json!({
                "attempts": 3, "deduplication": {"id": "d", "ttl": 5}, "failParentOnFailure": true,
                "keepLogs": 10, "telemetry": {"metadata": "ctx", "omitContext": true}, "delay": 5
            })
        );
    }

    #[test]
    fn attempts_default_to_nodes_zero_and_the_long_form_reads_back() {
        let long = Value::Object(long_form(r#"{"cpof":true,"lifo":true}"#)).to_string();
        let opts = JobOptions::from_json(&long).unwrap();
        assert_eq!(opts.attempts, Some(0));
        assert_eq!(opts.continue_parent_on_failure, Some(true));
        assert_eq!(opts.lifo, Some(true));
        assert_eq!(long_form("not json").get("attempts"), Some(&Value::from(0)));
        assert!(try_long_form("[1]").is_none());
    }

    #[test]
    fn templates_keep_their_keys_and_children_name_the_plain_parent_queue() {
        assert_eq!(long_keys_of("{}"), Map::new());
        assert_eq!(
            Value::Object(long_keys_of(r#"{"kl":5,"repeat":{"every":1000}}"#)),
            serde_json::json!({"keepLogs": 5, "repeat": {"every": 1000}})
        );
        let mut child = long_form(r#"{"parent":{"id":"p","queue":"bull:flows"}}"#);
        set_plain_parent(&mut child, "flows");
        assert_eq!(
            Value::Object(child),
            serde_json::json!({"parent": {"id": "p", "queue": "flows"}, "attempts": 0})
        );
    }
}
