//! Adding jobs and where they land: round trip, bulk, custom ids, deduplication, priorities,
//! LIFO, delays.

use std::sync::Arc;

use bullmq_protocol::state::JobState;

use super::{fields, sleep_ms, Ctx};
use crate::queue::JobEnd;
use crate::{AddResult, Backend, NewJob, Retention};

/// A job added to an empty queue gets id 1, waits, reads back as stored and is announced with
/// `added` then `waiting`; ids count up; the queue's meta is stamped on first touch.
pub async fn add_and_read_back(backend: Arc<dyn Backend>, queue: &str) {
    let c = Ctx::new(backend, queue).await;
    let ts = crate::now_ms();
    let job = NewJob::new("email", r#"{"to":"a@b.c"}"#, r#"{"attempts":3}"#, ts);
    assert_eq!(c.queue.add(&job).await.unwrap(), AddResult::Id("1".into()));
    assert_eq!(c.state("1").await, JobState::Waiting);
    let counts = c.queue.get_counts(&JobState::ALL_COUNTABLE).await.unwrap();
    // active completed delayed failed prioritized waiting waiting-children
    assert_eq!(counts, [0, 0, 0, 0, 0, 1, 0], "counts after one add");

    let record = c.queue.get_job("1").await.unwrap().expect("job 1 exists");
    assert_eq!(record.id, "1");
    assert_eq!(record.name, "email");
    assert_eq!(record.data["to"], "a@b.c");
    assert_eq!(record.opts.attempts, Some(3));
    assert_eq!(record.timestamp, ts);
    assert_eq!((record.delay, record.priority), (0, 0));
    assert_eq!((record.attempts_made, record.attempts_started), (0, 0));
    assert_eq!(record.processed_on, None);
    assert_eq!(record.finished_on, None);

    assert_eq!(c.queue.get_job("404").await.unwrap(), None);
    assert_eq!(c.state("404").await, JobState::Unknown);
    assert_eq!(c.queue.job_end("1").await.unwrap(), JobEnd::Unfinished);
    assert_eq!(c.queue.job_end("404").await.unwrap(), JobEnd::Missing);

    let events = c.all_events().await;
    let names: Vec<&str> = events.iter().map(|e| e.fields[0].1.as_str()).collect();
    assert_eq!(names, ["added", "waiting"], "events of one add");
    assert_eq!(
        super::in_profile_order(&events[0].fields),
        super::in_profile_order(
            &[("event", "added"), ("jobId", "1"), ("name", "email")]
                .map(|(k, v)| (k.to_owned(), v.to_owned()))
        )
    );
    assert_eq!(
        super::named(&events, "waiting")[0],
        fields(&[("event", "waiting"), ("jobId", "1")])
    );

    let meta = c.queue.get_meta().await.unwrap();
    if super::profile().add_stamps_meta {
        assert_eq!(
            meta.get("opts.maxLenEvents").map(String::as_str),
            Some("10000")
        );
        assert!(meta.contains_key("version"), "version stamped: {meta:?}");
    } else {
        assert!(meta.is_empty(), "only a Queue stamps the meta: {meta:?}");
    }

    assert_eq!(c.add("second", "{}").await, "2");
    let ascending = c
        .queue
        .get_ranges(&[JobState::Waiting], 0, -1, true)
        .await
        .unwrap();
    assert_eq!(ascending, [["1", "2"]], "oldest first");
    let descending = c
        .queue
        .get_ranges(&[JobState::Waiting], 0, -1, false)
        .await
        .unwrap();
    assert_eq!(descending, [["2", "1"]], "newest first");
    let first = c
        .queue
        .get_ranges(&[JobState::Waiting], 0, 0, true)
        .await
        .unwrap();
    assert_eq!(first, [["1"]]);
    c.close().await;
}

/// A bulk add ends as the same adds made one by one: ids in order, duplicates reported.
pub async fn bulk_add_keeps_order(backend: Arc<dyn Backend>, queue: &str) {
    let c = Ctx::new(backend, queue).await;
    let ts = crate::now_ms();
    let jobs = vec![
        NewJob::new("a", "{}", "{}", ts),
        NewJob::new("b", "{}", "{}", ts).with_custom_id("custom"),
        NewJob::new("c", "{}", "{}", ts).with_custom_id("custom"),
        NewJob::new("d", "{}", r#"{"priority":5}"#, ts),
    ];
    let results = c.queue.add_bulk(&jobs).await.unwrap();
    let last = if super::profile().custom_ids_take_a_number {
        "4"
    } else {
        "2"
    };
    let ids: Vec<AddResult> = ["1", "custom", "custom", last]
        .iter()
        .map(|id| AddResult::Id((*id).into()))
        .collect();
    assert_eq!(results, ids, "ids of a bulk add");
    let waiting = c
        .queue
        .get_ranges(&[JobState::Waiting], 0, -1, true)
        .await
        .unwrap();
    assert_eq!(waiting, [["1", "custom"]]);
    assert_eq!(c.state(last).await, JobState::Prioritized);
    assert_eq!(
        c.events_named("duplicated").await.len(),
        usize::from(super::profile().bulk_add_emits_duplicated)
    );
    assert_eq!(
        c.queue.get_job("custom").await.unwrap().unwrap().name,
        "b",
        "a duplicate does not overwrite"
    );
    c.close().await;
}

/// A custom id that exists already: nothing is written, `duplicated` is emitted and the
/// existing id returned; the id counter still moves.
pub async fn custom_id_duplicate(backend: Arc<dyn Backend>, queue: &str) {
    let c = Ctx::new(backend, queue).await;
    let ts = crate::now_ms();
    let first = NewJob::new("first", r#"{"v":1}"#, "{}", ts).with_custom_id("order-1");
    let second = NewJob::new("second", r#"{"v":2}"#, "{}", ts).with_custom_id("order-1");
    assert_eq!(c.add_job(first).await, "order-1");
    assert_eq!(c.add_job(second).await, "order-1");
    assert_eq!(c.count(JobState::Waiting).await, 1);
    let record = c.queue.get_job("order-1").await.unwrap().unwrap();
    assert_eq!(
        (record.name.as_str(), &record.data["v"]),
        ("first", &serde_json::json!(1))
    );
    let duplicated = c.events_named("duplicated").await;
    assert_eq!(
        duplicated,
        [fields(&[("event", "duplicated"), ("jobId", "order-1")])]
    );
    // Every add takes a number, custom id or not (Redis), or only generated ids do.
    let next = if super::profile().custom_ids_take_a_number {
        "3"
    } else {
        "1"
    };
    assert_eq!(c.add("plain", "{}").await, next);
    c.close().await;
}

/// A deduplication id absorbs later adds (`deduplicated`) until its job finishes.
pub async fn deduplication_window_and_release(backend: Arc<dyn Backend>, queue: &str) {
    let c = Ctx::new(backend, queue).await;
    let opts = r#"{"de":{"id":"d1"}}"#;
    let owner = c.add("a", opts).await;
    assert_eq!(owner, "1");
    assert_eq!(c.add("b", opts).await, "1", "absorbed by the owner");
    assert_eq!(c.count(JobState::Waiting).await, 1);
    let record = c.queue.get_job("1").await.unwrap().unwrap();
    assert_eq!(record.deduplication_id.as_deref(), Some("d1"));
    let deduplicated = c.events_named("deduplicated").await;
    assert_eq!(
        deduplicated,
        [fields(&[
            ("event", "deduplicated"),
            ("jobId", "1"),
            ("deduplicationId", "d1"),
            ("deduplicatedJobId", "2"),
        ])]
    );
    // Still absorbed while the owner runs, released once it completes.
    let job = c.fetch_one().await;
    assert_eq!(c.add("c", opts).await, "1");
    assert!(c.complete(&job, Retention::KEEP_ALL).await.is_ok());
    let next = c.add("d", opts).await;
    assert_eq!(next, "4", "the window was released on completion");
    assert_eq!(c.state(&next).await, JobState::Waiting);
    // Released on a final failure too.
    let job = c.fetch_one().await;
    let fail = crate::FinishAction::Fail {
        reason: "no".into(),
        stacktrace: None,
        attempts: 1,
        keep: Retention::KEEP_ALL,
    };
    assert!(c.finish(&job, fail).await.is_ok());
    assert_eq!(c.add("e", opts).await, "5", "released on failure");
    c.close().await;
}

/// With a ttl the window expires on its own, even while its job still waits.
pub async fn deduplication_ttl_expires(backend: Arc<dyn Backend>, queue: &str) {
    let c = Ctx::new(backend, queue).await;
    let opts = r#"{"de":{"id":"t1","ttl":300}}"#;
    assert_eq!(c.add("a", opts).await, "1");
    assert_eq!(c.add("b", opts).await, "1");
    sleep_ms(600).await;
    assert_eq!(c.add("c", opts).await, "3", "the window expired");
    assert_eq!(c.count(JobState::Waiting).await, 2);
    c.close().await;
}

/// Fetch order: the wait list first (LIFO jobs at its front, then FIFO), then prioritized by
/// priority, equal priorities in insertion order.
pub async fn priorities_and_lifo_order(backend: Arc<dyn Backend>, queue: &str) {
    let c = Ctx::new(backend, queue).await;
    let a = c.add("a", "{}").await;
    let b = c.add("b", r#"{"priority":2}"#).await;
    let cc = c.add("c", r#"{"priority":1}"#).await;
    let d = c.add("d", r#"{"priority":1}"#).await;
    let e = c.add("e", r#"{"lifo":true}"#).await;
    let f = c.add("f", "{}").await;
    assert_eq!(c.state(&b).await, JobState::Prioritized);
    assert_eq!(c.count(JobState::Prioritized).await, 3);
    assert_eq!(c.count(JobState::Waiting).await, 3);
    let record = c.queue.get_job(&b).await.unwrap().unwrap();
    assert_eq!(record.priority, 2);
    let ranges = c
        .queue
        .get_ranges(&[JobState::Prioritized, JobState::Waiting], 0, -1, true)
        .await
        .unwrap();
    assert_eq!(
        ranges,
        [
            vec![cc.clone(), d.clone(), b.clone()],
            vec![e.clone(), a.clone(), f.clone()]
        ],
        "one list per state: prioritized by score, wait from its taking end (LIFO first)"
    );

    let first = c.fetch(2).await;
    let rest = c.fetch(10).await;
    let order: Vec<String> = first
        .jobs
        .iter()
        .chain(rest.jobs.iter())
        .map(|j| j.id.clone())
        .collect();
    assert_eq!(order, [e, a, f, cc, d, b], "fetch order");
    assert_eq!(c.count(JobState::Active).await, 6);
    c.close().await;
}

/// A delayed job waits in `delayed` until due; a fetch after that promotes and takes it.
pub async fn delayed_job_promoted_when_due(backend: Arc<dyn Backend>, queue: &str) {
    let c = Ctx::new(backend, queue).await;
    let ts = crate::now_ms();
    let id = c
        .add_job(NewJob::new("later", "{}", r#"{"delay":400}"#, ts))
        .await;
    assert_eq!(c.state(&id).await, JobState::Delayed);
    assert_eq!(c.queue.get_job(&id).await.unwrap().unwrap().delay, 400);
    let delayed = c.events_named("delayed").await;
    let due = (ts + 400).to_string();
    assert_eq!(
        delayed,
        [fields(&[
            ("event", "delayed"),
            ("jobId", &id),
            ("delay", &due)
        ])]
    );
    assert!(
        c.events_named("waiting").await.is_empty(),
        "not waiting yet"
    );

    let early = c.fetch(1).await;
    assert!(early.jobs.is_empty(), "not due yet: {early:?}");
    assert_eq!(early.next_delayed_at, Some(ts + 400));

    sleep_ms(800).await;
    let job = c.fetch_one().await;
    assert_eq!(job.id, id);
    let record = job.job.clone().expect("readable");
    assert_eq!(record.delay, 0, "delay reset on promotion");
    let waiting = c.events_named("waiting").await;
    assert_eq!(
        waiting,
        [fields(&[
            ("event", "waiting"),
            ("jobId", &id),
            ("prev", "delayed")
        ])]
    );
    c.close().await;
}
