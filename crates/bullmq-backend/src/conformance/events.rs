//! The event log: cursors, blocking reads, trimming, custom events.

use std::sync::Arc;
use std::time::Duration;

use super::{named, sleep_ms, Ctx};
use crate::{Backend, NewJob};

/// The order of an entry id: Redis stream ids `{ms}-{seq}`, or a number.
fn parse(id: &str) -> (u64, u64) {
    match id.split_once('-') {
        Some((ms, seq)) => (ms.parse().expect("ms"), seq.parse().expect("seq")),
        None => (id.parse().expect("a numeric id"), 0),
    }
}

/// Entries have increasing ids; a read returns what follows its cursor, and a
/// blocking read waits for the next entry.
pub async fn event_log_read_from_a_cursor(backend: Arc<dyn Backend>, queue: &str) {
    let c = Ctx::new(backend, queue).await;
    assert_eq!(c.events.newest_id().await.unwrap(), None, "empty log");
    c.add("a", "{}").await;
    let newest = c.events.newest_id().await.unwrap().expect("an entry");
    let all = c.all_events().await;
    assert_eq!(all.len(), 2, "added + waiting: {all:?}");
    assert_eq!(all[1].id, newest);
    assert!(parse(&all[0].id) < parse(&all[1].id), "ids increase");

    let after_first = c
        .events
        .read(&all[0].id, Duration::from_millis(10), 100)
        .await
        .unwrap();
    assert_eq!(after_first, all[1..].to_vec(), "exclusive cursor");
    let limited = c
        .events
        .read("0-0", Duration::from_millis(10), 1)
        .await
        .unwrap();
    assert_eq!(limited, all[..1].to_vec(), "count caps a read");

    let nothing = c
        .events
        .read(&newest, Duration::from_millis(150), 100)
        .await
        .unwrap();
    assert!(nothing.is_empty(), "nothing after the newest: {nothing:?}");

    let stream = c.events.clone();
    let cursor = newest.clone();
    let reader =
        tokio::spawn(async move { stream.read(&cursor, Duration::from_secs(8), 100).await });
    sleep_ms(200).await;
    let id = c.add("b", "{}").await;
    let got = tokio::time::timeout(Duration::from_secs(10), reader)
        .await
        .expect("read returned")
        .expect("reader ran")
        .unwrap();
    assert!(!got.is_empty(), "the blocked read saw the add");
    assert_eq!(got[0].fields[0], ("event".to_owned(), "added".to_owned()));
    assert!(got[0].fields.contains(&("jobId".to_owned(), id)));
    assert!(parse(&got[0].id) > parse(&newest));
    c.close().await;
}

/// The log keeps about `opts.maxLenEvents` entries: at least that many, far fewer than
/// were written (Redis trims approximately, whole nodes at a time).
pub async fn event_log_trimmed_to_max_len(backend: Arc<dyn Backend>, queue: &str) {
    let c = Ctx::new(backend, queue).await;
    c.queue.set_meta(10).await.unwrap();
    let meta = c.queue.get_meta().await.unwrap();
    assert_eq!(
        meta.get("opts.maxLenEvents").map(String::as_str),
        Some("10")
    );
    let ts = crate::now_ms();
    let jobs: Vec<NewJob> = (0..300).map(|_| NewJob::new("x", "{}", "{}", ts)).collect();
    c.queue.add_bulk(&jobs).await.unwrap();
    let kept = c.all_events().await.len();
    if super::profile().bulk_add_trims_events {
        assert!((10..600).contains(&kept), "{kept} of 600 entries kept");
    } else {
        assert_eq!(kept, 600, "a bulk add does not trim on this protocol");
    }
    c.close().await;
}

/// A published event lands in the log with its fields in order.
pub async fn publish_custom_event(backend: Arc<dyn Backend>, queue: &str) {
    let c = Ctx::new(backend.clone(), queue).await;
    let publisher = backend.event_publisher(&c.id).await.unwrap();
    let fields = vec![
        ("event".to_owned(), "custom".to_owned()),
        ("k".to_owned(), "v".to_owned()),
        ("a".to_owned(), "1".to_owned()),
    ];
    let id = publisher.publish(fields.clone(), 100).await.unwrap();
    let all = c.all_events().await;
    let custom = named(&all, "custom");
    assert_eq!(custom.len(), 1);
    let entry = all.iter().find(|e| e.id == id).expect("entry by id");
    assert_eq!(
        super::in_profile_order(&entry.fields),
        super::in_profile_order(&fields)
    );
    publisher.close().await.unwrap();
    c.close().await;
}
