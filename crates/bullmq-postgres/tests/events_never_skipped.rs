//! The event reader delivers every stored event exactly once, in id order, while many writers
//! commit concurrently, including one that takes a low id and commits it late (the case a
//! reader of "ids above the last one seen" skips).

mod common;

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bullmq_backend::{Backend, NewJob};
use bullmq_protocol::QueueId;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_event_once_in_id_order_under_concurrent_late_commits() {
    let backend = common::backend().await;
    let schema = common::schema().await;
    let queue = format!("gap-{}", std::process::id());
    let keys = QueueId::new("bull", &queue);
    let stream = backend.event_stream(&keys).await.unwrap();

    // Late committers: each takes an event id, sleeps inside its transaction, then commits,
    // while the others keep committing higher ids.
    let url = common::pg_url();
    let mut writers = Vec::new();
    for _ in 0..4 {
        let (url, queue, schema) = (url.clone(), queue.clone(), schema.to_string());
        writers.push(tokio::spawn(async move {
            for _ in 0..5 {
                // A fresh session each time: its first insert is the slowest, which widens
                // the moment between taking an id and holding an xid.
                let (client, connection) = tokio_postgres::connect(&url, tokio_postgres::NoTls)
                    .await
                    .unwrap();
                tokio::spawn(connection);
                client
                    .batch_execute(&format!(
                        "BEGIN; SELECT \"{schema}\".publish_event('{queue}', 'late', '{{}}'::jsonb); \
                         SELECT pg_sleep(0.2); COMMIT"
                    ))
                    .await
                    .unwrap();
            }
        }));
    }
    // Fast committers: jobs added one at a time from 6 tasks (two events each).
    for w in 0..6 {
        let store = backend.queue_store(&keys).await.unwrap();
        writers.push(tokio::spawn(async move {
            for i in 0..40 {
                let job = NewJob::new(format!("w{w}-{i}"), "{}", "{}", bullmq_backend::now_ms());
                store.add(&job).await.unwrap();
            }
        }));
    }

    let reader = {
        let stream = stream.clone();
        tokio::spawn(async move {
            let mut seen = Vec::new();
            let mut cursor = "0".to_string();
            let deadline = Instant::now() + Duration::from_secs(60);
            while seen.len() < 6 * 40 * 2 + 4 * 5 && Instant::now() < deadline {
                let batch = stream
                    .read(&cursor, Duration::from_millis(500), 50)
                    .await
                    .unwrap();
                for entry in batch {
                    cursor = entry.id.clone();
                    seen.push(entry.id.parse::<i64>().unwrap());
                }
            }
            seen
        })
    };
    // For comparison, the naive reader (Node 6.7's): ids above the last one seen.
    let done = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let naive = {
        let (url, queue, schema) = (url.clone(), queue.clone(), schema.to_string());
        let done = done.clone();
        tokio::spawn(async move {
            let (client, connection) = tokio_postgres::connect(&url, tokio_postgres::NoTls)
                .await
                .unwrap();
            tokio::spawn(connection);
            let (mut cursor, mut seen) = (0_i64, 0_usize);
            let deadline = Instant::now() + Duration::from_secs(60);
            // One more pass after the fenced reader is done, so it has had every chance.
            let mut last_pass = false;
            while Instant::now() < deadline && !last_pass {
                last_pass = done.load(std::sync::atomic::Ordering::Acquire);
                let rows = client
                    .query(
                        &format!("SELECT id FROM \"{schema}\".event WHERE queue = $1 AND id > $2 ORDER BY id LIMIT 50"),
                        &[&queue, &cursor],
                    )
                    .await
                    .unwrap();
                for row in rows {
                    cursor = row.get(0);
                    seen += 1;
                }
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            seen
        })
    };
    for w in writers {
        w.await.unwrap();
    }
    let seen = reader.await.unwrap();
    done.store(true, std::sync::atomic::Ordering::Release);
    let naive_seen = naive.await.unwrap();
    eprintln!(
        "naive reader saw {naive_seen} of {} events; the fenced reader {}",
        6 * 40 * 2 + 4 * 5,
        seen.len()
    );

    let stored: Vec<i64> = common::psql(&format!(
        "SELECT string_agg(id::text, ',' ORDER BY id) FROM \"{schema}\".event WHERE queue = '{queue}'"
    ))
    .split(',')
    .map(|id| id.parse().unwrap())
    .collect();
    assert_eq!(stored.len(), 6 * 40 * 2 + 4 * 5);
    let unique: BTreeSet<i64> = seen.iter().copied().collect();
    assert_eq!(unique.len(), seen.len(), "nothing delivered twice");
    assert!(seen.windows(2).all(|w| w[0] < w[1]), "in id order");
    assert_eq!(seen, stored, "every stored event delivered");
    stream.close().await;
}
