//! Event stream codec: degradation to `Custom`, accessors, and `to_fields`/decode round trips.

use bullmq_protocol::events::{name, Event, StreamEvent};
use proptest::prelude::*;
use serde_json::{json, Value};

fn fields(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}

#[test]
fn unknown_event_is_custom_with_raw_fields() {
    let e = StreamEvent::decode(
        "5-0",
        fields(&[("event", "my-event"), ("jobId", "3"), ("x", "y")]),
    );
    assert_eq!(
        e.event,
        Event::Custom {
            name: "my-event".into(),
            fields: fields(&[("jobId", "3"), ("x", "y")]),
        }
    );
    assert_eq!(e.event.name(), "my-event");
    assert_eq!(e.timestamp_ms(), Some(5));
    assert_eq!(StreamEvent::decode("x", Vec::new()).timestamp_ms(), None);
    assert_eq!(e.event.job_id(), Some("3"));
}

#[test]
fn malformed_known_events_degrade_to_custom() {
    for raw in [
        fields(&[
            ("event", "completed"),
            ("jobId", "1"),
            ("returnvalue", "{bad"),
        ]),
        fields(&[("event", "progress"), ("jobId", "1"), ("data", "")]),
        fields(&[("event", "delayed"), ("jobId", "1"), ("delay", "soon")]),
        fields(&[
            ("event", "retries-exhausted"),
            ("jobId", "1"),
            ("attemptsMade", "-1"),
        ]),
        fields(&[("event", "added"), ("jobId", "1")]),
        fields(&[("event", "stalled")]),
        fields(&[("event", "cleaned"), ("count", "x")]),
        fields(&[
            ("event", "deduplicated"),
            ("jobId", "1"),
            ("deduplicationId", "d"),
        ]),
    ] {
        let e = Event::from_fields(raw.clone());
        assert!(matches!(e, Event::Custom { .. }), "{raw:?} gave {e:?}");
        // nothing is lost: the fields come back as they were
        assert_eq!(e.to_fields(), raw);
    }
}

#[test]
fn event_field_may_come_later_or_be_missing() {
    let e = Event::from_fields(fields(&[("jobId", "2"), ("event", "stalled")]));
    assert_eq!(e, Event::Stalled { job_id: "2".into() });
    let e = Event::from_fields(fields(&[("jobId", "2")]));
    assert_eq!(
        e,
        Event::Custom {
            name: String::new(),
            fields: fields(&[("jobId", "2")]),
        }
    );
}

#[test]
fn lua_number_formats_are_read() {
    let e = Event::from_fields(fields(&[
        ("event", "delayed"),
        ("jobId", "1"),
        ("delay", "1.764e+12"),
    ]));
    assert_eq!(
        e,
        Event::Delayed {
            job_id: "1".into(),
            delay: 1_764_000_000_000
        }
    );
}

#[test]
fn accessors() {
    assert_eq!(Event::Drained.job_id(), None);
    assert_eq!(Event::Cleaned { count: 3 }.name(), name::CLEANED);
    assert_eq!(
        Event::Progress {
            job_id: "4".into(),
            data: json!({"p": 1})
        }
        .to_fields(),
        fields(&[
            ("event", "progress"),
            ("jobId", "4"),
            ("data", r#"{"p":1}"#)
        ])
    );
    assert_eq!(Event::Paused.to_fields(), fields(&[("event", "paused")]));
}

// ---------------------------------------------------------------------------------------------
// Property test: decode(to_fields(e)) == e

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

const KNOWN: [&str; 17] = [
    name::ADDED,
    name::WAITING,
    name::ACTIVE,
    name::DELAYED,
    name::PROGRESS,
    name::COMPLETED,
    name::FAILED,
    name::RETRIES_EXHAUSTED,
    name::WAITING_CHILDREN,
    name::STALLED,
    name::REMOVED,
    name::CLEANED,
    name::DRAINED,
    name::PAUSED,
    name::RESUMED,
    name::DUPLICATED,
    name::DEDUPLICATED,
];

fn event() -> impl Strategy<Value = Event> {
    let id = || "[a-z0-9:-]{1,12}";
    let text = || "[ -~\n]{0,16}";
    let prev = || proptest::option::of("[a-z-]{1,16}");
    prop_oneof![
        (id(), text()).prop_map(|(job_id, name)| Event::Added { job_id, name }),
        (id(), prev()).prop_map(|(job_id, prev)| Event::Waiting { job_id, prev }),
        (id(), prev()).prop_map(|(job_id, prev)| Event::Active { job_id, prev }),
        (id(), any::<u64>()).prop_map(|(job_id, delay)| Event::Delayed { job_id, delay }),
        (id(), json_value()).prop_map(|(job_id, data)| Event::Progress { job_id, data }),
        (id(), json_value(), prev()).prop_map(|(job_id, returnvalue, prev)| Event::Completed {
            job_id,
            returnvalue,
            prev
        }),
        (id(), text(), prev()).prop_map(|(job_id, failed_reason, prev)| Event::Failed {
            job_id,
            failed_reason,
            prev
        }),
        (id(), any::<u32>()).prop_map(|(job_id, attempts_made)| Event::RetriesExhausted {
            job_id,
            attempts_made
        }),
        (id(), prev()).prop_map(|(job_id, prev)| Event::WaitingChildren { job_id, prev }),
        id().prop_map(|job_id| Event::Stalled { job_id }),
        (id(), prev()).prop_map(|(job_id, prev)| Event::Removed { job_id, prev }),
        any::<u64>().prop_map(|count| Event::Cleaned { count }),
        Just(Event::Drained),
        Just(Event::Paused),
        Just(Event::Resumed),
        id().prop_map(|job_id| Event::Duplicated { job_id }),
        (id(), text(), id()).prop_map(|(job_id, deduplication_id, deduplicated_job_id)| {
            Event::Deduplicated {
                job_id,
                deduplication_id,
                deduplicated_job_id,
            }
        }),
        (
            "[a-z-]{0,12}".prop_filter("unknown name", |n| !KNOWN.contains(&n.as_str())),
            prop::collection::vec(("[a-zA-Z]{1,8}", text()), 0..4)
        )
            .prop_map(|(name, fields)| Event::Custom { name, fields }),
    ]
}

proptest! {
    #[test]
    fn to_fields_then_decode_is_identity(e in event(), id in "[0-9]{1,13}-[0-9]{1,3}") {
        let fields = e.to_fields();
        prop_assert_eq!(&fields[0], &("event".to_owned(), e.name().to_owned()));
        let back = StreamEvent::decode(id.clone(), fields);
        prop_assert_eq!(back.id, id);
        prop_assert_eq!(back.event, e);
    }
}
