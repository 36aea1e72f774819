//! Golden tests: job hashes and event stream entries written by Node BullMQ 6.7.0 (captured
//! with `HGETALL` / `XRANGE` into `fixtures/node-6.7.0.json`) must decode, and re-encode to the
//! same data.

use std::collections::HashMap;

use bullmq_protocol::events::Event;
use bullmq_protocol::options::{BackoffKind, KeepJobs};
use bullmq_protocol::{JobOptions, JobRecord, StreamEvent};
use serde_json::{json, Value};

fn fixtures() -> Value {
    serde_json::from_str(include_str!("fixtures/node-6.7.0.json")).expect("fixture is JSON")
}

fn job(label: &str) -> (String, HashMap<String, String>) {
    let all = fixtures();
    let entry = &all["jobs"][label];
    let id = entry["id"].as_str().expect("id").to_owned();
    let hash = serde_json::from_value(entry["hash"].clone()).expect("hash of strings");
    (id, hash)
}

fn decode(label: &str) -> JobRecord {
    let (id, hash) = job(label);
    JobRecord::decode(&id, &hash).unwrap_or_else(|e| panic!("{label}: {e}"))
}

#[test]
fn every_node_job_hash_decodes_and_round_trips() {
    let all = fixtures();
    let labels: Vec<String> = all["jobs"]
        .as_object()
        .expect("jobs object")
        .keys()
        .cloned()
        .collect();
    assert_eq!(labels.len(), 10);
    for label in labels {
        let (id, hash) = job(&label);
        let record = JobRecord::decode(&id, &hash).unwrap_or_else(|e| panic!("{label}: {e}"));
        assert!(
            record.extra.is_empty(),
            "{label}: unknown fields {:?}",
            record.extra
        );

        // opts re-serialise to the same JSON (same keys and values; see opts_byte_identity for order)
        let stored: Value = serde_json::from_str(&hash["opts"]).expect("stored opts");
        let ours: Value = serde_json::from_str(&record.opts.to_json()).expect("our opts");
        assert_eq!(ours, stored, "{label}: opts differ");

        // decode(encode(x)) == x, and every field Node wrote is written back unchanged,
        // except JSON fields compared semantically
        let encoded = record.encode();
        let map: HashMap<String, String> = encoded.iter().cloned().collect();
        assert_eq!(
            JobRecord::decode(&id, &map).expect("re-decode"),
            record,
            "{label}"
        );
        for (k, v) in &hash {
            let ours = map
                .get(k)
                .unwrap_or_else(|| panic!("{label}: {k} not re-encoded"));
            if ["opts", "parent", "progress", "returnvalue", "stacktrace"].contains(&k.as_str()) {
                let a: Value = serde_json::from_str(v).expect("node json");
                let b: Value = serde_json::from_str(ours).expect("our json");
                assert_eq!(a, b, "{label}: field {k}");
            } else {
                assert_eq!(ours, v, "{label}: field {k}");
            }
        }
    }
}

#[test]
fn opts_byte_identity_where_node_order_is_fixed() {
    // Node packs opts with msgpack and its Lua re-encodes them with cjson, so the key order of
    // multi-key opts follows Lua's table hashing and is not reproducible. Single-key opts are.
    for label in ["plain", "flowParent", "failed"] {
        let (_, hash) = job(label);
        let opts = JobOptions::from_json(&hash["opts"]).expect("opts");
        assert_eq!(opts.to_json(), hash["opts"], "{label}");
    }
}

#[test]
fn plain_job() {
    let job = decode("plain");
    assert_eq!(job.id, "1");
    assert_eq!(job.name, "email");
    assert_eq!(job.data, json!({"to": "a@b.c", "n": 1}));
    assert_eq!(job.data_raw, r#"{"to":"a@b.c","n":1}"#);
    // Node's constructor default
    assert_eq!(job.opts.attempts, Some(0));
    assert_eq!(job.opts.max_attempts(), 1);
    assert_eq!(job.progress, json!(0));
    assert_eq!((job.delay, job.priority, job.attempts_made), (0, 0, 0));
    assert!(job.timestamp > 1_700_000_000_000);
    assert_eq!(job.processed_on, None);
    assert_eq!(job.returnvalue, None);
    assert!(job.stacktrace.is_empty());
}

#[test]
fn job_with_every_long_option() {
    let job = decode("full");
    let o = &job.opts;
    assert_eq!(job.id, "custom-1");
    assert_eq!(o.job_id.as_deref(), Some("custom-1"));
    assert_eq!(o.delay, Some(5000));
    assert_eq!(job.delay, 5000);
    assert_eq!(o.attempts, Some(3));
    let backoff = o.backoff.as_ref().expect("backoff");
    assert_eq!(backoff.kind, BackoffKind::Exponential);
    assert_eq!((backoff.delay, backoff.jitter), (Some(1000), Some(0.5)));
    assert_eq!(
        o.remove_on_complete,
        Some(KeepJobs::Policy {
            age: Some(3600),
            count: Some(10),
            limit: None
        })
    );
    assert_eq!(o.remove_on_fail, Some(KeepJobs::Count(50)));
    assert_eq!(o.stack_trace_limit, Some(5));
    assert_eq!(o.size_limit, Some(10_000));
    assert_eq!(o.keep_logs, Some(20));
    assert_eq!(o.lifo, Some(true));
    assert_eq!(o.timestamp, Some(1_764_000_000_000));
    assert_eq!(job.timestamp, 1_764_000_000_000);
    assert!(o.extra.is_empty());
}

#[test]
fn prioritized_job_with_numeric_backoff_and_bool_keep() {
    let job = decode("prio");
    assert_eq!(job.priority, 7);
    assert_eq!(job.opts.priority, Some(7));
    assert_eq!(job.data, json!("str"));
    // Node normalised `backoff: 2000` to a fixed object before storing
    let backoff = job.opts.backoff.as_ref().expect("backoff");
    assert_eq!(backoff.kind, BackoffKind::Fixed);
    assert_eq!(backoff.delay, Some(2000));
    assert_eq!(job.opts.remove_on_complete, Some(KeepJobs::Bool(true)));
    assert_eq!(job.opts.remove_on_fail, Some(KeepJobs::Bool(false)));
}

#[test]
fn deduplicated_job_with_telemetry_short_keys() {
    let job = decode("dedup");
    assert_eq!(job.data, Value::Null);
    assert_eq!(job.deduplication_id.as_deref(), Some("dd1"));
    let de = job.opts.deduplication.as_ref().expect("de");
    assert_eq!(de.id, "dd1");
    assert_eq!(de.ttl, Some(60_000));
    assert_eq!(de.extend, Some(true));
    assert_eq!(de.replace, Some(false));
    assert_eq!(job.opts.telemetry_metadata.as_deref(), Some("meta"));
    assert_eq!(job.opts.omit_context, Some(true));
}

#[test]
fn completed_job() {
    let job = decode("completed");
    assert_eq!(job.returnvalue, Some(json!({"ok": true, "n": 5})));
    assert_eq!(job.progress, json!({"pct": 50}));
    assert_eq!((job.attempts_made, job.attempts_started), (1, 1));
    assert_eq!(job.processed_by.as_deref(), Some("golden-worker"));
    assert!(job.finished_on.expect("finishedOn") >= job.processed_on.expect("processedOn"));
    assert_eq!(job.opts.remove_on_complete, Some(KeepJobs::Bool(false)));
}

#[test]
fn failed_and_retried_jobs() {
    let failed = decode("failed");
    assert_eq!(failed.failed_reason.as_deref(), Some("boom"));
    assert_eq!(failed.stacktrace.len(), 1);
    assert!(failed.stacktrace[0].starts_with("Error: boom\n"));
    assert!(failed.finished_on.is_some());

    let retried = decode("retried");
    assert_eq!(retried.failed_reason.as_deref(), Some("again"));
    assert_eq!(retried.attempts_made, 1);
    // moveToDelayed stores the backoff delay in the hash's `delay`
    assert_eq!(retried.delay, 60_000);
    assert_eq!(retried.opts.delay, None);
    assert_eq!(retried.finished_on, None);
}

#[test]
fn flow_parent_and_child() {
    let parent = decode("flowParent");
    let child = decode("flowChild");
    let info = child.parent.as_ref().expect("parent field");
    assert_eq!(info.id, parent.id);
    assert!(info.queue_key.starts_with("bull:protogold-"));
    assert_eq!(info.fpof, Some(true));
    assert_eq!(
        child.parent_key.as_deref(),
        Some(format!("{}:{}", info.queue_key, parent.id).as_str())
    );
    let opts_parent = child.opts.parent.as_ref().expect("opts.parent");
    assert_eq!(opts_parent.id, parent.id);
    assert_eq!(
        opts_parent.job_key(),
        child.parent_key.clone().expect("key")
    );
    assert_eq!(child.opts.fail_parent_on_failure, Some(true));
}

#[test]
fn scheduler_job() {
    let job = decode("scheduled");
    assert_eq!(job.repeat_job_key.as_deref(), Some("sched"));
    assert_eq!(job.opts.repeat_job_key.as_deref(), Some("sched"));
    assert_eq!(job.opts.repeat, Some(json!({"every": 60000, "count": 1})));
    assert_eq!(job.opts.delay, Some(0));
    assert!(job.id.starts_with("repeat:sched:"));
    assert_eq!(job.opts.job_id.as_deref(), Some(job.id.as_str()));
}

#[test]
fn every_node_event_decodes_typed_and_re_encodes_identically() {
    let all = fixtures();
    let events = all["events"].as_array().expect("events");
    assert!(events.len() > 50);
    let mut names = std::collections::BTreeSet::new();
    for entry in events {
        let id = entry[0].as_str().expect("id");
        let flat: Vec<String> = serde_json::from_value(entry[1].clone()).expect("fields");
        let fields: Vec<(String, String)> = flat
            .chunks(2)
            .map(|kv| (kv[0].clone(), kv[1].clone()))
            .collect();
        let decoded = StreamEvent::decode(id, fields.clone());
        assert_eq!(decoded.id, id);
        assert!(
            !matches!(decoded.event, Event::Custom { .. }),
            "{fields:?} decoded as Custom"
        );
        assert_eq!(decoded.event.to_fields(), fields, "{id}");
        names.insert(decoded.event.name().to_owned());
    }
    let expected = [
        "active",
        "added",
        "cleaned",
        "completed",
        "deduplicated",
        "delayed",
        "drained",
        "duplicated",
        "failed",
        "paused",
        "progress",
        "removed",
        "resumed",
        "retries-exhausted",
        "waiting",
        "waiting-children",
    ];
    assert_eq!(
        names.iter().map(String::as_str).collect::<Vec<_>>(),
        expected
    );
}

#[test]
fn node_event_fields_typed() {
    let fields = |pairs: &[(&str, &str)]| {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect::<Vec<_>>()
    };
    let e = StreamEvent::decode(
        "1-0",
        fields(&[
            ("event", "deduplicated"),
            ("jobId", "3"),
            ("deduplicationId", "k1"),
            ("deduplicatedJobId", "4"),
        ]),
    );
    assert_eq!(
        e.event,
        Event::Deduplicated {
            job_id: "3".into(),
            deduplication_id: "k1".into(),
            deduplicated_job_id: "4".into()
        }
    );
    let e = StreamEvent::decode(
        "1-1",
        fields(&[
            ("event", "delayed"),
            ("jobId", "1"),
            ("delay", "1795944348558"),
        ]),
    );
    assert_eq!(
        e.event,
        Event::Delayed {
            job_id: "1".into(),
            delay: 1_795_944_348_558
        }
    );
    let e = StreamEvent::decode(
        "1-2",
        fields(&[("event", "removed"), ("jobId", "5"), ("prev", "wait")]),
    );
    assert_eq!(
        e.event,
        Event::Removed {
            job_id: "5".into(),
            prev: Some("wait".into())
        }
    );
}

/// Messages Node BullMQ 6.7.0's `Queue.add('job', {abc: 1}, opts)` threw for these options
/// (`null`: accepted). The same options, read as `JobOptions`, must get the same verdict.
#[test]
fn validation_matches_node_verdicts() {
    let node: &[(&str, Option<&str>)] = &[
        (r#"{"jobId":"0"}"#, Some("JobId cannot be '0' or start with '0:'")),
        (r#"{"jobId":"0:a"}"#, Some("JobId cannot be '0' or start with '0:'")),
        (r#"{"jobId":"12"}"#, Some("Custom Id cannot be integers")),
        (r#"{"jobId":"-12"}"#, Some("Custom Id cannot be integers")),
        (r#"{"jobId":"12345678901234567000"}"#, Some("Custom Id cannot be integers")),
        (r#"{"jobId":"12345678901234567891"}"#, None),
        (r#"{"jobId":"007"}"#, None),
        (r#"{"jobId":"a:b"}"#, Some("Custom Id cannot contain :")),
        (r#"{"jobId":"a:b:c:d"}"#, Some("Custom Id cannot contain :")),
        (r#"{"jobId":"a:b:c"}"#, None),
        (r#"{"sizeLimit":5}"#, Some("The size of job job exceeds the limit 5 bytes")),
        (r#"{"priority":2097152}"#, Some("Priority should be between 0 and 2097151")),
        (r#"{"priority":2097151}"#, None),
        // Node's case had no id at all; our type requires one, so the empty id stands in
        (r#"{"deduplication":{"id":""}}"#, Some("Deduplication id must be provided")),
        (
            r#"{"deduplication":{"id":"x"},"parent":{"id":"p","queue":"bull:q"}}"#,
            Some("Deduplication and parent options cannot be used together"),
        ),
        (
            r#"{"debounce":{"id":"x"}}"#,
            Some("Debounce option has been removed. Use deduplication option instead"),
        ),
        (
            r#"{"backoff":{"type":"fixed","delay":1,"jitter":1.5}}"#,
            Some("Jitter should be between 0 and 1"),
        ),
        (
            r#"{"failParentOnFailure":true,"removeDependencyOnFailure":true,"continueParentOnFailure":true}"#,
            Some("The following options cannot be used together: removeDependencyOnFailure, failParentOnFailure, continueParentOnFailure"),
        ),
    ];
    let data = r#"{"abc":1}"#;
    for (raw, expected) in node {
        let opts = JobOptions::from_json(raw).expect("options parse");
        let got = bullmq_protocol::validation::validate_job_at(
            "job",
            data.len(),
            &opts,
            1_764_000_000_000,
        )
        .err()
        .map(|e| e.to_string());
        assert_eq!(got.as_deref(), *expected, "{raw}");
    }
}

/// Delays Node BullMQ 6.7.0's `Backoffs.calculate` returned with `Math.random` fixed at 0.37.
#[test]
fn backoff_matches_node_strategies() {
    use bullmq_protocol::backoff::{backoff_delay, BackoffDelay};
    use bullmq_protocol::Backoff;
    let node: &[(&str, u32, u64)] = &[
        (r#"{"type":"fixed","delay":1000}"#, 1, 1000),
        (r#"{"type":"fixed","delay":1000}"#, 10, 1000),
        (r#"{"type":"fixed","delay":1000,"jitter":0.3}"#, 1, 811),
        (r#"{"type":"fixed","delay":1000,"jitter":0.3}"#, 10, 811),
        (r#"{"type":"exponential","delay":1000}"#, 1, 1000),
        (r#"{"type":"exponential","delay":1000}"#, 2, 2000),
        (r#"{"type":"exponential","delay":1000}"#, 3, 4000),
        (r#"{"type":"exponential","delay":1000}"#, 10, 512_000),
        (r#"{"type":"exponential","delay":333,"jitter":0.5}"#, 1, 228),
        (r#"{"type":"exponential","delay":333,"jitter":0.5}"#, 2, 456),
        (r#"{"type":"exponential","delay":333,"jitter":0.5}"#, 3, 912),
        (
            r#"{"type":"exponential","delay":333,"jitter":0.5}"#,
            10,
            116_789,
        ),
        (r#"{"type":"exponential","delay":7}"#, 3, 28),
        (r#"{"type":"exponential","delay":7}"#, 10, 3584),
    ];
    for (raw, attempts, expected) in node {
        let backoff: Backoff = serde_json::from_str(raw).expect("backoff");
        assert_eq!(
            backoff_delay(&backoff, *attempts, 0.37),
            BackoffDelay::After(std::time::Duration::from_millis(*expected)),
            "{raw} after {attempts} attempts"
        );
    }
}

/// Scores Node BullMQ 6.7.0 wrote: three jobs due in the same millisecond (ts 1795945866418
/// + 60000), one a millisecond later, and priorities 5, 5, 1 with `pc` counting 1, 2, 3.
#[test]
fn scores_match_node() {
    use bullmq_protocol::score::{next_delayed_score, priority_score, ready_at_from_score};
    let ready = 1_795_945_866_418 + 60_000;
    let mut current = None;
    let mut ours = Vec::new();
    for _ in 0..3 {
        let s = next_delayed_score(ready, current);
        current = Some(s);
        ours.push(s);
    }
    ours.push(next_delayed_score(ready + 1, None));
    assert_eq!(
        ours,
        [
            7_356_194_514_608_128,
            7_356_194_514_608_129,
            7_356_194_514_608_130,
            7_356_194_514_612_224
        ]
    );
    assert_eq!(ready_at_from_score(7_356_194_514_608_130.0), ready);
    assert_eq!(priority_score(5, 1), 21_474_836_481);
    assert_eq!(priority_score(5, 2), 21_474_836_482);
    assert_eq!(priority_score(1, 3), 4_294_967_299);
}
