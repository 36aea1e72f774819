//! A job scheduler as stored: the `repeat:{id}` hash and its score in the `repeat` zset, read
//! back as Node's `JobSchedulerJson`.

use std::collections::HashMap;

use serde::Serialize;
use serde_json::Value;

use crate::options::JobOptions;

/// Fields of the `repeat:{id}` hash.
pub mod field {
    /// Job name of every iteration.
    pub const NAME: &str = "name";
    /// IANA time zone of the pattern.
    pub const TZ: &str = "tz";
    /// Maximum number of iterations.
    pub const LIMIT: &str = "limit";
    /// Cron pattern.
    pub const PATTERN: &str = "pattern";
    /// First allowed run, ms.
    pub const START_DATE: &str = "startDate";
    /// Last allowed run, ms.
    pub const END_DATE: &str = "endDate";
    /// Interval, ms.
    pub const EVERY: &str = "every";
    /// Offset of the `every` grid, ms.
    pub const OFFSET: &str = "offset";
    /// Template job options (JSON, short keys), absent when empty.
    pub const OPTS: &str = "opts";
    /// Template job data (JSON), absent when `{}`.
    pub const DATA: &str = "data";
    /// Iteration count: iterations created so far.
    pub const ITERATION_COUNT: &str = "ic";
}

/// The job template of a scheduler: what every iteration is created with.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[serde(into = "long_names::NodeTemplate")]
#[non_exhaustive]
pub struct TemplateRecord {
    /// Data of every iteration (`None` when the hash holds no `data`: `{}`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub data: Option<Value>,
    /// Options of every iteration (`None` when the hash holds no `opts`). Serialises with
    /// Node's long names, as Node's `getJobScheduler` returns them (`Job.optsFromJSON`): `de`
    /// is `deduplication`, `kl` `keepLogs`, `fpof` / `cpof` / `idof` / `rdof` the parent-failure
    /// policies, and `tm` / `omc` `telemetry.metadata` / `telemetry.omitContext`; keys come
    /// in the order the hash stored them, as in Node's object.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub opts: Option<JobOptions>,
    /// The keys of the stored `opts`, in their stored order (empty when not read from a hash).
    #[serde(skip)]
    opts_order: Vec<String>,
}

/// A job scheduler read back (Node's `JobSchedulerJson`): serialises with Node's field names.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct JobSchedulerRecord {
    /// Scheduler id.
    pub key: String,
    /// Job name of every iteration.
    pub name: String,
    /// Next run, ms since the Unix epoch (the `repeat` zset score).
    pub next: Option<u64>,
    /// Iterations created so far.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub iteration_count: Option<u64>,
    /// Maximum number of iterations.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub limit: Option<u64>,
    /// First allowed run, ms.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub start_date: Option<u64>,
    /// Last allowed run, ms.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub end_date: Option<u64>,
    /// IANA time zone of the pattern.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tz: Option<String>,
    /// Cron pattern.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pattern: Option<String>,
    /// Interval, ms.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub every: Option<u64>,
    /// Offset of the `every` grid, ms.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub offset: Option<u64>,
    /// Template of every iteration (absent when the hash holds neither data nor opts).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub template: Option<TemplateRecord>,
}

/// Why a scheduler hash could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SchedulerDecodeError {
    /// A field holds something that is not what Node writes there.
    #[error("job scheduler {id}: field `{field}` is not {expected}: {value:?}")]
    Field {
        /// Scheduler id.
        id: String,
        /// Field name.
        field: &'static str,
        /// What it should hold.
        expected: &'static str,
        /// What it holds.
        value: String,
    },
}

impl JobSchedulerRecord {
    /// Reads the `repeat:{id}` hash `fields` with its zset score `next`; `None` when the hash
    /// is empty (a scheduler whose hash is gone, which Node's getters remove).
    ///
    /// Numbers are read as Node's `parseInt` would read what Node writes (integers; a float's
    /// fraction is dropped, since Lua may format a number as `1.5e+12`).
    ///
    /// # Errors
    ///
    /// [`SchedulerDecodeError`] naming the field when a number, `data` or `opts` is unreadable.
    pub fn decode(
        id: &str,
        fields: &HashMap<String, String>,
        next: Option<u64>,
    ) -> Result<Option<Self>, SchedulerDecodeError> {
        if fields.is_empty() {
            return Ok(None);
        }
        let text = |name: &str| fields.get(name).filter(|v| !v.is_empty()).cloned();
        let number = |name: &'static str| -> Result<Option<u64>, SchedulerDecodeError> {
            match fields.get(name).filter(|v| !v.is_empty()) {
                None => Ok(None),
                Some(raw) => parse_number(raw)
                    .map(Some)
                    .ok_or_else(|| field_error(id, name, "a non-negative number", raw.to_owned())),
            }
        };
        let data = match text(field::DATA) {
            None => None,
            Some(raw) => Some(
                serde_json::from_str::<Value>(&raw)
                    .map_err(|_| field_error(id, field::DATA, "JSON", raw))?,
            ),
        };
        let (opts, opts_order) = match text(field::OPTS) {
            None => (None, Vec::new()),
            Some(raw) => {
                let order = match serde_json::from_str::<Value>(&raw) {
                    Ok(Value::Object(stored)) => stored.keys().cloned().collect(),
                    _ => Vec::new(),
                };
                let opts = JobOptions::from_json(&raw).map_err(|_| {
                    field_error(id, field::OPTS, "a JSON object of job options", raw)
                })?;
                (Some(opts), order)
            }
        };
        let template = (data.is_some() || opts.is_some()).then_some(TemplateRecord {
            data,
            opts,
            opts_order,
        });
        Ok(Some(Self {
            key: id.to_owned(),
            name: text(field::NAME).unwrap_or_default(),
            next,
            iteration_count: number(field::ITERATION_COUNT)?,
            limit: number(field::LIMIT)?,
            start_date: number(field::START_DATE)?,
            end_date: number(field::END_DATE)?,
            tz: text(field::TZ),
            pattern: text(field::PATTERN),
            every: number(field::EVERY)?,
            offset: number(field::OFFSET)?,
            template,
        }))
    }
}

/// Template options with the long names Node's `Job.optsFromJSON` gives the stored short keys.
mod long_names {
    use serde::Serialize;
    use serde_json::{Map, Value};

    use super::TemplateRecord;
    use crate::options::JobOptions;

    /// A [`TemplateRecord`] as Node's `getJobScheduler` returns its template.
    #[derive(Serialize)]
    pub(super) struct NodeTemplate {
        #[serde(skip_serializing_if = "Option::is_none")]
        data: Option<Value>,
        #[serde(skip_serializing_if = "Option::is_none")]
        opts: Option<Value>,
    }

    impl From<TemplateRecord> for NodeTemplate {
        fn from(template: TemplateRecord) -> Self {
            Self {
                data: template.data,
                opts: template
                    .opts
                    .as_ref()
                    .map(|opts| to_node(opts, &template.opts_order)),
            }
        }
    }

    /// Node's name of the stored key `key` (`tm` and `omc` live under `telemetry`).
    fn node_name(key: &str) -> &str {
        match key {
            "tm" | "omc" => "telemetry",
            _ => DECODE
                .iter()
                .find(|(short, _)| *short == key)
                .map_or(key, |(_, long)| long),
        }
    }

    /// Stored short key → Node's name (Node's `optsDecodeMap`).
    const DECODE: [(&str, &str); 6] = [
        ("de", "deduplication"),
        ("fpof", "failParentOnFailure"),
        ("cpof", "continueParentOnFailure"),
        ("idof", "ignoreDependencyOnFailure"),
        ("kl", "keepLogs"),
        ("rdof", "removeDependencyOnFailure"),
    ];

    /// `opts` as Node reads it: each stored key renamed, in the stored `order` (keys it does
    /// not name come after, in ours); `tm` and `omc` folded into one `telemetry` object where
    /// the first of them stood.
    pub(super) fn to_node(opts: &JobOptions, order: &[String]) -> Value {
        let Ok(Value::Object(stored)) = serde_json::to_value(opts) else {
            return Value::Object(Map::new());
        };
        let mut out = Map::new();
        for (key, value) in stored {
            let telemetry_field = match key.as_str() {
                "tm" => Some("metadata"),
                "omc" => Some("omitContext"),
                _ => None,
            };
            if let Some(field) = telemetry_field {
                let entry = out
                    .entry("telemetry")
                    .or_insert_with(|| Value::Object(Map::new()));
                if !entry.is_object() {
                    *entry = Value::Object(Map::new());
                }
                if let Value::Object(telemetry) = entry {
                    telemetry.insert(field.to_owned(), value);
                }
                continue;
            }
            out.insert(node_name(&key).to_owned(), value);
        }
        let mut ordered = Map::new();
        for key in order {
            let name = node_name(key);
            if let Some(value) = out.shift_remove(name) {
                ordered.insert(name.to_owned(), value);
            }
        }
        ordered.append(&mut out);
        Value::Object(ordered)
    }
}

fn field_error(
    id: &str,
    field: &'static str,
    expected: &'static str,
    value: String,
) -> SchedulerDecodeError {
    SchedulerDecodeError::Field {
        id: id.to_owned(),
        field,
        expected,
        value,
    }
}

/// A stored number (a hash field, a zset score): an integer, or a finite non-negative float
/// (Lua's or Redis' formatting) truncated.
pub fn parse_score(raw: &str) -> Option<u64> {
    parse_number(raw)
}

/// A BullMQ 5 repeatable job was found where a job scheduler was asked for; BullMQ 6 (and
/// this crate) cannot run it. The message is Node's.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("Legacy repeatable job metadata is not supported in BullMQ v6 (key: \"{0}\"). Migrate legacy repeatable jobs to Job Schedulers before upgrading. See https://docs.bullmq.io/guide/migrations/migrate-from-v5-to-v6")]
pub struct LegacyRepeatableJob(pub String);

fn parse_number(raw: &str) -> Option<u64> {
    if let Ok(n) = raw.parse::<u64>() {
        return Some(n);
    }
    let f: f64 = raw.parse().ok()?;
    // Truncation is intended: Node reads these with parseInt.
    #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
    (f.is_finite() && (0.0..1.8e19).contains(&f)).then_some(f as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hash(pairs: &[(&str, &str)]) -> HashMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    #[test]
    fn reads_what_node_writes_for_an_every_scheduler() {
        // As Node 6.7.0 stored `upsertJobScheduler('ev', {every: 1000}, {name: 'tick',
        // data: {a: 1}, opts: {attempts: 3, removeOnComplete: 5}})`.
        let fields = hash(&[
            ("name", "tick"),
            ("every", "1000"),
            ("offset", "904"),
            ("opts", r#"{"removeOnComplete":5,"attempts":3}"#),
            ("data", r#"{"a":1}"#),
            ("ic", "1"),
        ]);
        let record = JobSchedulerRecord::decode("ev", &fields, Some(1_796_139_681_904))
            .unwrap()
            .unwrap();
        assert_eq!(
            serde_json::to_value(&record).unwrap(),
            serde_json::json!({"key":"ev","name":"tick","next":1_796_139_681_904_u64,
                "iterationCount":1,"every":1000,"offset":904,
                "template":{"data":{"a":1},"opts":{"removeOnComplete":5,"attempts":3}}})
        );
    }

    #[test]
    fn template_options_read_back_with_node_names() {
        // Every option a template can hold, stored with the short keys; the expected JSON is
        // Node 6.7.0's `Job.optsFromJSON` of the same text (as `getJobScheduler` returns it).
        let stored = r#"{"attempts":3,"backoff":{"type":"exponential","delay":500},"priority":4,"lifo":true,"removeOnComplete":{"age":3600,"count":10},"removeOnFail":7,"stackTraceLimit":2,"sizeLimit":1024,"de":{"id":"d1","ttl":5000,"extend":true,"replace":false},"fpof":true,"cpof":false,"idof":true,"rdof":false,"kl":50,"tm":"{\"traceparent\":\"00-ab\"}","omc":true,"prevMillis":12,"custom":{"x":1}}"#;
        let node = r#"{"attempts":3,"backoff":{"type":"exponential","delay":500},"priority":4,"lifo":true,"removeOnComplete":{"age":3600,"count":10},"removeOnFail":7,"stackTraceLimit":2,"sizeLimit":1024,"deduplication":{"id":"d1","ttl":5000,"extend":true,"replace":false},"failParentOnFailure":true,"continueParentOnFailure":false,"ignoreDependencyOnFailure":true,"removeDependencyOnFailure":false,"keepLogs":50,"telemetry":{"metadata":"{\"traceparent\":\"00-ab\"}","omitContext":true},"prevMillis":12,"custom":{"x":1}}"#;
        let fields = hash(&[("name", "n"), ("every", "1000"), ("opts", stored)]);
        let record = JobSchedulerRecord::decode("s", &fields, Some(5))
            .unwrap()
            .unwrap();
        let json = serde_json::to_value(&record).unwrap();
        let expected: Value = serde_json::from_str(node).unwrap();
        assert_eq!(json["template"]["opts"], expected);
        // In the stored order, as Node's object: the same text.
        assert_eq!(
            serde_json::to_string(&json["template"]["opts"]).unwrap(),
            serde_json::to_string(&expected).unwrap()
        );
    }

    #[test]
    fn an_empty_hash_is_no_scheduler() {
        assert_eq!(
            JobSchedulerRecord::decode("x", &HashMap::new(), Some(1)),
            Ok(None)
        );
    }

    #[test]
    fn an_unreadable_field_is_named() {
        let fields = hash(&[("name", "n"), ("every", "soon")]);
        let err = JobSchedulerRecord::decode("x", &fields, None).unwrap_err();
        assert!(err.to_string().contains("`every`"), "{err}");
        assert_eq!(parse_number("1.5e+3"), Some(1500));
    }
}
