//! `JobRecord` decoding tolerance, errors, `encode_new`, and encode/decode round trips.

use std::collections::HashMap;

use bullmq_protocol::job_record::{encode_new, field, ParentInfo};
use bullmq_protocol::options::Deduplication;
use bullmq_protocol::{DecodeReason, JobOptions, JobRecord};
use proptest::prelude::*;
use serde_json::{json, Value};

fn hash(pairs: &[(&str, &str)]) -> HashMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}

#[test]
fn empty_hash_reads_with_node_defaults() {
    let job = JobRecord::decode("9", &HashMap::new()).expect("empty hash");
    assert_eq!(job.id, "9");
    assert_eq!(job.name, "");
    assert_eq!(job.data, json!({}));
    assert_eq!(job.data_raw, "{}");
    assert_eq!(job.opts, JobOptions::new());
    assert_eq!(job.progress, json!(0));
    assert_eq!((job.timestamp, job.delay, job.priority), (0, 0, 0));
    assert_eq!(
        (job.attempts_made, job.attempts_started, job.stalled_counter),
        (0, 0, 0)
    );
    assert_eq!(job.processed_on, None);
    assert_eq!(job.returnvalue, None);
    assert!(job.stacktrace.is_empty());
    assert_eq!(job.max_attempts(), 1);
}

#[test]
fn lenient_numbers_and_corrupted_optional_fields() {
    let job = JobRecord::decode(
        "1",
        &hash(&[
            ("timestamp", "1764000000000.9"),
            ("delay", " 250 "),
            ("priority", "3"),
            ("processedOn", ""),
            ("finishedOn", "0"),
            ("returnvalue", "{not json"),
            ("stacktrace", "oops"),
            ("attemptsMade", "2"),
            ("stc", "-1"),
            ("parentKey", ""),
            ("progress", "42"),
            ("custom", "kept"),
        ]),
    )
    .expect("tolerated");
    assert_eq!(job.timestamp, 1_764_000_000_000);
    assert_eq!(job.delay, 250);
    assert_eq!(job.priority, 3);
    assert_eq!(job.processed_on, None);
    assert_eq!(job.finished_on, Some(0));
    assert_eq!(job.returnvalue, None);
    assert!(job.stacktrace.is_empty());
    // legacy long name of `atm`
    assert_eq!(job.attempts_made, 2);
    assert_eq!(job.stalled_counter, 0);
    assert_eq!(job.parent_key, None);
    assert_eq!(job.progress, json!(42));
    assert_eq!(job.extra.get("custom").map(String::as_str), Some("kept"));
}

#[test]
fn null_returnvalue_and_non_string_traces() {
    let job = JobRecord::decode(
        "1",
        &hash(&[
            ("returnvalue", "null"),
            ("stacktrace", r#"["a", 1, null]"#),
            ("atm", "4"),
            ("attemptsMade", "9"),
        ]),
    )
    .expect("decode");
    assert_eq!(job.returnvalue, None);
    assert_eq!(job.stacktrace, ["a", "1", "null"]);
    // `atm` wins over the legacy name
    assert_eq!(job.attempts_made, 4);
}

type Pair<'a> = (&'a str, &'a str);

#[test]
fn errors_name_the_field() {
    let cases: [(&[Pair], &str, &str); 7] = [
        (&[("data", "{oops")], "data", "data holds invalid JSON: "),
        (&[("opts", "[1]")], "opts", "opts holds invalid JSON: "),
        (
            &[("progress", "{")],
            "progress",
            "progress holds invalid JSON",
        ),
        (&[("parent", "{}")], "parent", "parent holds invalid JSON"),
        (
            &[("timestamp", "soon")],
            "timestamp",
            "timestamp is \"soon\", not an integer",
        ),
        (
            &[("priority", "99999999999")],
            "priority",
            "priority is \"99999999999\", not an integer",
        ),
        (&[("ats", "NaN")], "ats", "ats is \"NaN\", not an integer"),
    ];
    for (pairs, name, message) in cases {
        let err = JobRecord::decode("1", &hash(pairs)).expect_err(name);
        assert_eq!(err.field, name);
        assert!(
            err.to_string().starts_with(message),
            "{err} should start with {message}"
        );
    }
    let err = JobRecord::decode("1", &hash(&[("delay", "x")])).expect_err("delay");
    assert_eq!(err.reason, DecodeReason::InvalidNumber("x".into()));
}

#[test]
fn encode_new_writes_what_node_stores_at_creation() {
    let mut opts = JobOptions::new()
        .attempts(0)
        .priority(5)
        .delay(std::time::Duration::from_millis(10))
        .deduplication(Deduplication::new("dd"));
    opts.repeat_job_key = Some("sched".into());
    let fields = encode_new("email", r#"{"a":1}"#, &opts, 1_000);
    let keys: Vec<&str> = fields.iter().map(|(k, _)| k.as_str()).collect();
    assert_eq!(
        keys,
        [
            "name",
            "data",
            "opts",
            "timestamp",
            "delay",
            "priority",
            "rjk",
            "deid"
        ]
    );
    let map: HashMap<String, String> = fields.into_iter().collect();
    assert_eq!(map["delay"], "10");
    assert_eq!(map["priority"], "5");
    assert_eq!(map["timestamp"], "1000");
    let job = JobRecord::decode("x", &map).expect("decode");
    assert_eq!(job.opts, opts);
    assert_eq!(job.deduplication_id.as_deref(), Some("dd"));
    assert_eq!(job.repeat_job_key.as_deref(), Some("sched"));
    assert_eq!(job.data, json!({"a": 1}));
}

#[test]
fn new_record_matches_decoded_creation_fields() {
    let opts = JobOptions::new().attempts(3).priority(2);
    let record = JobRecord::new("7", "n", json!([1, 2]), opts.clone(), 99);
    let map: HashMap<String, String> = encode_new("n", &record.data_raw, &opts, 99)
        .into_iter()
        .collect();
    assert_eq!(JobRecord::decode("7", &map).expect("decode"), record);
    assert_eq!(field::ALL.len(), 22);
}

// ---------------------------------------------------------------------------------------------
// Property test: decode(encode(record)) == record

fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        "[ -~]{0,8}".prop_map(Value::from),
    ];
    leaf.prop_recursive(2, 10, 3, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..3).prop_map(Value::from),
            prop::collection::btree_map("[a-z]{1,4}", inner, 0..3)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

fn opt_string() -> impl Strategy<Value = Option<String>> {
    proptest::option::of("[ -~\n]{0,12}")
}

prop_compose! {
    fn record()(
        id in "[a-z0-9:-]{1,10}",
        name in "[ -~]{0,10}",
        data in json_value(),
        attempts in proptest::option::of(0u32..10),
        timestamp in any::<u64>(),
        delay in any::<u64>(),
        priority in any::<u32>(),
        progress in json_value(),
        times in (proptest::option::of(any::<u64>()), proptest::option::of(any::<u64>())),
        returnvalue in proptest::option::of(json_value().prop_filter("null reads as none", |v| !v.is_null())),
        failed_reason in opt_string(),
        stacktrace in prop::collection::vec("[ -~\n]{0,20}", 0..3),
        counters in (any::<u32>(), any::<u32>(), any::<u32>()),
        strings in (opt_string(), proptest::option::of("[a-z:0-9]{1,12}"), opt_string(), opt_string(), opt_string()),
        parent in proptest::option::of(("[a-z0-9]{1,6}", "[a-z:]{1,8}", proptest::option::of(any::<bool>()))),
        extra in prop::collection::btree_map("x[a-z]{1,5}", "[ -~]{0,6}", 0..3),
    ) -> JobRecord {
        let mut opts = JobOptions::new();
        opts.attempts = attempts;
        let mut r = JobRecord::new(id, name, data, opts, timestamp);
        r.delay = delay;
        r.priority = priority;
        r.progress = progress;
        (r.processed_on, r.finished_on) = times;
        r.returnvalue = returnvalue;
        r.failed_reason = failed_reason;
        r.stacktrace = stacktrace;
        (r.attempts_made, r.attempts_started, r.stalled_counter) = counters;
        (r.processed_by, r.parent_key, r.repeat_job_key, r.deduplication_id, r.deferred_failure) = strings;
        r.parent = parent.map(|(id, queue_key, fpof)| ParentInfo { id, queue_key, fpof, rdof: None, idof: None, cpof: None });
        r.extra = extra;
        r
    }
}

proptest! {
    #[test]
    fn encode_then_decode_is_identity(r in record()) {
        let map: HashMap<String, String> = r.encode().into_iter().collect();
        let back = JobRecord::decode(&r.id, &map).expect("decode what we encoded");
        prop_assert_eq!(back, r);
    }
}
