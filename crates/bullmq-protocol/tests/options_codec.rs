//! `JobOptions` JSON codec: short keys, aliases, typed shapes, unknown keys, round trips.

use std::time::Duration;

use bullmq_protocol::options::{Backoff, BackoffKind, Deduplication, KeepJobs, ParentRef};
use bullmq_protocol::JobOptions;
use proptest::prelude::*;
use serde_json::{json, Map, Value};

fn parse(v: Value) -> JobOptions {
    serde_json::from_value(v).expect("valid opts")
}

#[test]
fn empty_options_are_an_empty_object() {
    assert_eq!(JobOptions::new().to_json(), "{}");
    assert_eq!(JobOptions::from_json("").expect("empty"), JobOptions::new());
    assert_eq!(
        JobOptions::from_json("  ").expect("blank"),
        JobOptions::new()
    );
    assert_eq!(JobOptions::from_json("{}").expect("{}"), JobOptions::new());
}

#[test]
fn compressed_options_use_node_short_keys() {
    let opts = JobOptions::new()
        .deduplication(
            Deduplication::new("d")
                .ttl(Duration::from_secs(5))
                .extend(true),
        )
        .fail_parent_on_failure(true)
        .continue_parent_on_failure(false)
        .ignore_dependency_on_failure(true)
        .remove_dependency_on_failure(false)
        .keep_logs(10)
        .telemetry_metadata("tp")
        .omit_context(true);
    let v: Value = serde_json::from_str(&opts.to_json()).expect("json");
    assert_eq!(
        v,
        json!({
            "de": {"id": "d", "ttl": 5000, "extend": true},
            "fpof": true, "cpof": false, "idof": true, "rdof": false,
            "kl": 10, "tm": "tp", "omc": true
        })
    );
}

#[test]
fn long_options_use_camel_case() {
    let opts = JobOptions::new()
        .attempts(2)
        .delay(Duration::from_millis(1500))
        .priority(3)
        .lifo(true)
        .job_id("j")
        .remove_on_complete(KeepJobs::max_age(Duration::from_secs(60)))
        .remove_on_fail(KeepJobs::Count(-1))
        .stack_trace_limit(4)
        .size_limit(100)
        .timestamp_ms(7)
        .parent(ParentRef::new("p", "bull:q"));
    let v: Value = serde_json::from_str(&opts.to_json()).expect("json");
    assert_eq!(
        v,
        json!({
            "attempts": 2, "delay": 1500, "priority": 3, "lifo": true, "jobId": "j",
            "removeOnComplete": {"age": 60}, "removeOnFail": -1, "stackTraceLimit": 4,
            "sizeLimit": 100, "timestamp": 7, "parent": {"id": "p", "queue": "bull:q"}
        })
    );
    assert_eq!(opts.delay_duration(), Duration::from_millis(1500));
    assert_eq!(opts.max_attempts(), 2);
    assert_eq!(JobOptions::new().max_attempts(), 1);
}

#[test]
fn long_names_of_compressed_keys_are_accepted() {
    let opts = parse(json!({
        "deduplication": {"id": "x"},
        "failParentOnFailure": true,
        "continueParentOnFailure": true,
        "ignoreDependencyOnFailure": true,
        "removeDependencyOnFailure": true,
        "keepLogs": 3
    }));
    assert_eq!(opts.deduplication, Some(Deduplication::new("x")));
    assert_eq!(opts.fail_parent_on_failure, Some(true));
    assert_eq!(opts.continue_parent_on_failure, Some(true));
    assert_eq!(opts.ignore_dependency_on_failure, Some(true));
    assert_eq!(opts.remove_dependency_on_failure, Some(true));
    assert_eq!(opts.keep_logs, Some(3));
    assert!(opts.extra.is_empty());
    // and they are written back short
    let v: Value = serde_json::from_str(&opts.to_json()).expect("json");
    assert_eq!(v["kl"], 3);
    assert!(v.get("keepLogs").is_none());
}

#[test]
fn unknown_keys_round_trip_in_order() {
    let raw = r#"{"attempts":1,"zeta":{"a":[1,2]},"alpha":"x","debounce":{"id":"old"}}"#;
    let opts = JobOptions::from_json(raw).expect("opts");
    assert_eq!(opts.attempts, Some(1));
    let keys: Vec<&str> = opts.extra.keys().map(String::as_str).collect();
    assert_eq!(keys, ["zeta", "alpha", "debounce"]);
    assert_eq!(opts.to_json(), raw);
}

#[test]
fn backoff_shapes() {
    let fixed: Backoff = serde_json::from_value(json!(1000)).expect("number");
    assert_eq!(fixed, Backoff::fixed(Duration::from_secs(1)));
    assert_eq!(
        serde_json::to_value(&fixed).expect("ser"),
        json!({"type": "fixed", "delay": 1000})
    );
    let exp: Backoff =
        serde_json::from_value(json!({"type": "exponential", "delay": 10, "jitter": 0.2}))
            .expect("object");
    assert_eq!(exp.kind, BackoffKind::Exponential);
    assert_eq!((exp.delay, exp.jitter), (Some(10), Some(0.2)));
    let custom: Backoff = serde_json::from_value(json!({"type": "linear"})).expect("custom");
    assert_eq!(custom, Backoff::custom("linear"));
    assert_eq!(custom.kind.as_str(), "linear");
    assert_eq!(
        serde_json::to_value(&custom).expect("ser"),
        json!({"type": "linear"})
    );
    let err = serde_json::from_value::<Backoff>(json!("fast")).expect_err("string");
    assert!(err.to_string().contains("backoff must be"), "{err}");
    assert!(serde_json::from_value::<Backoff>(json!({"delay": 5})).is_err());
    assert_eq!(
        Backoff::custom("c")
            .with_delay(Duration::from_millis(9))
            .delay,
        Some(9)
    );
}

#[test]
fn keep_jobs_shapes() {
    for (v, expected) in [
        (json!(true), KeepJobs::Bool(true)),
        (json!(false), KeepJobs::Bool(false)),
        (json!(5), KeepJobs::Count(5)),
        (
            json!({"count": 3}),
            KeepJobs::Policy {
                age: None,
                count: Some(3),
                limit: None,
            },
        ),
        (
            json!({"age": 10, "count": 2, "limit": 100}),
            KeepJobs::Policy {
                age: Some(10),
                count: Some(2),
                limit: Some(100),
            },
        ),
    ] {
        let parsed: KeepJobs = serde_json::from_value(v.clone()).expect("keep");
        assert_eq!(parsed, expected);
        assert_eq!(serde_json::to_value(&parsed).expect("ser"), v);
    }
    assert!(serde_json::from_value::<KeepJobs>(json!("all")).is_err());
}

#[test]
fn invalid_shapes_are_errors_not_panics() {
    for raw in [
        "[]",
        "not json",
        r#"{"attempts":"3"}"#,
        r#"{"delay":"5"}"#,
        r#"{"priority":5000000000}"#,
        r#"{"kl":1e400}"#,
        r#"{"de":{"ttl":5}}"#,
        r#"{"parent":{"id":"x"}}"#,
    ] {
        assert!(JobOptions::from_json(raw).is_err(), "{raw} should fail");
    }
}

#[test]
fn loosely_written_numbers_are_tolerated() {
    // What another client might write; Node would still run these jobs.
    let opts = JobOptions::from_json(
        r#"{"delay":-5,"priority":2.9,"attempts":3.0,"timestamp":1764000000000.5,
            "backoff":1500.7,"de":{"id":"d","ttl":-1},"kl":null,"sizeLimit":null}"#,
    )
    .expect("lenient");
    assert_eq!(opts.delay, Some(0));
    assert_eq!(opts.priority, Some(2));
    assert_eq!(opts.attempts, Some(3));
    assert_eq!(opts.timestamp, Some(1_764_000_000_000));
    assert_eq!(
        opts.backoff,
        Some(Backoff::fixed(Duration::from_millis(1500)))
    );
    assert_eq!(opts.deduplication.as_ref().and_then(|d| d.ttl), Some(0));
    // `null` reads as absent and is not written back
    assert_eq!(opts.keep_logs, None);
    assert_eq!(opts.size_limit, None);
    assert!(!opts.to_json().contains("null"));
}

// ---------------------------------------------------------------------------------------------
// Property tests

const KNOWN_KEYS: [&str; 29] = [
    "attempts",
    "delay",
    "priority",
    "backoff",
    "lifo",
    "jobId",
    "removeOnComplete",
    "removeOnFail",
    "stackTraceLimit",
    "sizeLimit",
    "timestamp",
    "parent",
    "repeat",
    "prevMillis",
    "repeatJobKey",
    "de",
    "deduplication",
    "fpof",
    "failParentOnFailure",
    "cpof",
    "continueParentOnFailure",
    "idof",
    "ignoreDependencyOnFailure",
    "rdof",
    "removeDependencyOnFailure",
    "kl",
    "keepLogs",
    "tm",
    "omc",
];

fn json_leaf() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        "[a-z0-9 :\"\\\\]{0,8}".prop_map(Value::from),
    ]
}

fn json_value() -> impl Strategy<Value = Value> {
    json_leaf().prop_recursive(2, 12, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::from),
            prop::collection::btree_map("[a-z]{1,5}", inner, 0..4)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

fn keep_jobs() -> impl Strategy<Value = KeepJobs> {
    prop_oneof![
        any::<bool>().prop_map(KeepJobs::Bool),
        any::<i64>().prop_map(KeepJobs::Count),
        (
            proptest::option::of(any::<u64>()),
            proptest::option::of(any::<i64>()),
            proptest::option::of(any::<u64>())
        )
            .prop_map(|(age, count, limit)| KeepJobs::Policy { age, count, limit }),
    ]
}

fn backoff() -> impl Strategy<Value = Backoff> {
    let kind = prop_oneof![
        Just(BackoffKind::Fixed),
        Just(BackoffKind::Exponential),
        "[a-z]{1,8}"
            .prop_filter("custom name", |n| n != "fixed" && n != "exponential")
            .prop_map(BackoffKind::Custom),
    ];
    (
        kind,
        proptest::option::of(any::<u64>()),
        proptest::option::of((0u32..=100).prop_map(|n| f64::from(n) / 100.0)),
    )
        .prop_map(|(kind, delay, jitter)| Backoff {
            kind,
            delay,
            jitter,
        })
}

fn deduplication() -> impl Strategy<Value = Deduplication> {
    (
        "[a-z0-9]{0,6}",
        proptest::option::of(any::<u64>()),
        proptest::option::of(any::<bool>()),
        proptest::option::of(any::<bool>()),
        proptest::option::of(any::<bool>()),
        proptest::option::of(any::<bool>()),
    )
        .prop_map(|(id, ttl, extend, replace, reschedule, keep)| {
            let mut d = Deduplication::new(id);
            d.ttl = ttl;
            d.extend = extend;
            d.replace = replace;
            d.reschedule = reschedule;
            d.keep_last_if_active = keep;
            d
        })
}

fn extra() -> impl Strategy<Value = Map<String, Value>> {
    prop::collection::vec(
        (
            "[a-zA-Z]{1,10}".prop_filter("not a known key", |k| !KNOWN_KEYS.contains(&k.as_str())),
            json_value(),
        ),
        0..4,
    )
    .prop_map(|kv| kv.into_iter().collect())
}

prop_compose! {
    fn job_options()(
        a in (
            proptest::option::of(any::<u32>()),
            proptest::option::of(any::<u64>()),
            proptest::option::of(any::<u32>()),
            proptest::option::of(backoff()),
            proptest::option::of(any::<bool>()),
            proptest::option::of("[a-z0-9:-]{0,10}"),
            proptest::option::of(keep_jobs()),
            proptest::option::of(keep_jobs()),
        ),
        b in (
            proptest::option::of(any::<u32>()),
            proptest::option::of(any::<u64>()),
            proptest::option::of(any::<u64>()),
            proptest::option::of(("[a-z0-9]{1,6}", "[a-z:]{1,8}").prop_map(|(i, q)| ParentRef::new(i, q))),
            // `null` reads back as absent, as for every optional key
            proptest::option::of(json_value().prop_filter("not null", |v| !v.is_null())),
            proptest::option::of(any::<u64>()),
            proptest::option::of("[a-z:0-9]{0,10}"),
        ),
        c in (
            proptest::option::of(deduplication()),
            proptest::option::of(any::<bool>()),
            proptest::option::of(any::<bool>()),
            proptest::option::of(any::<bool>()),
            proptest::option::of(any::<bool>()),
            proptest::option::of(any::<u64>()),
            proptest::option::of("[ -~]{0,12}"),
            proptest::option::of(any::<bool>()),
        ),
        extra in extra(),
    ) -> JobOptions {
        let mut o = JobOptions::new();
        (o.attempts, o.delay, o.priority, o.backoff, o.lifo, o.job_id, o.remove_on_complete, o.remove_on_fail) = a;
        (o.stack_trace_limit, o.size_limit, o.timestamp, o.parent, o.repeat, o.prev_millis, o.repeat_job_key) = b;
        (
            o.deduplication,
            o.fail_parent_on_failure,
            o.continue_parent_on_failure,
            o.ignore_dependency_on_failure,
            o.remove_dependency_on_failure,
            o.keep_logs,
            o.telemetry_metadata,
            o.omit_context,
        ) = c;
        o.extra = extra;
        o
    }
}

proptest! {
    #[test]
    fn json_round_trip_is_identity(opts in job_options()) {
        let json = opts.to_json();
        let back = JobOptions::from_json(&json).expect("re-parse");
        prop_assert_eq!(&back, &opts);
        // and serialising again is byte-identical (stable key order)
        prop_assert_eq!(back.to_json(), json);
    }

    #[test]
    fn unknown_keys_survive_next_to_known_ones(opts in job_options(), key in "[A-Z][a-z]{1,6}", value in json_value()) {
        let mut v: Value = serde_json::from_str(&opts.to_json()).expect("json");
        v.as_object_mut().expect("object").insert(key.clone(), value.clone());
        let parsed: JobOptions = serde_json::from_value(v.clone()).expect("parse");
        prop_assert_eq!(parsed.extra.get(&key), Some(&value));
        let again: Value = serde_json::from_str(&parsed.to_json()).expect("json");
        prop_assert_eq!(again, v);
    }
}
