//! Garbage another client wrote into a queue's `meta` (`concurrency: "x"`, `max: "lots"`,
//! `duration: "-5"`, `opts.maxLenEvents: "abc"`): no script raises, every job finishes, and
//! the Worker reports each field once (`WorkerError::InvalidQueueMeta`). Where Node's Worker
//! finishes its jobs on the same garbage (`max` and `duration`; on `concurrency: "x"` and
//! `opts.maxLenEvents: "abc"` Node's scripts raise), the job hashes and per-job events are
//! Node's. A duration PEXPIRE cannot take, and a job counter (`id`) overwritten with text,
//! count as absent.

mod common;
mod scale_common;
mod worker_common;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::Result;
use common::{
    cleanup, eventually, node_available, open_queue, raw_client, read_events, run_node,
    unique_queue, StreamEvent, PREFIX,
};
use fred::prelude::{ClientLike, HashesInterface, KeysInterface};
use ractor_bullmq::worker::WorkerError;
use ractor_bullmq::{WorkerCallbacks, WorkerHandle, WorkerOptions};
use scale_common::{ids_of, node_outcomes};
use serde_json::{json, Value};
use worker_common::{spawn_worker, wait_finished};

type Reports = Arc<Mutex<Vec<(String, String)>>>;

async fn write_meta(queue: &str, fields: &[(&str, &str)]) -> Result<()> {
    let raw = raw_client().await?;
    let pairs: Vec<(String, String)> = fields
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect();
    let _: () = raw.hset(format!("{PREFIX}:{queue}:meta"), pairs).await?;
    raw.quit().await?;
    Ok(())
}

/// Our Worker (concurrency 2) on `queue`, collecting its `InvalidQueueMeta` reports.
async fn worker_reporting(queue: &str) -> Result<(WorkerHandle, Reports)> {
    let reports: Reports = Arc::default();
    let callbacks = WorkerCallbacks::new().on_error({
        let reports = reports.clone();
        move |error| {
            if let WorkerError::InvalidQueueMeta { field, value } = error {
                reports.lock().unwrap().push((field.clone(), value.clone()));
            }
        }
    });
    let worker = spawn_worker(queue, WorkerOptions::new().concurrency(2), callbacks).await?;
    Ok((worker, reports))
}

fn sorted(reports: &Reports) -> Vec<(String, String)> {
    let mut out = reports.lock().unwrap().clone();
    out.sort();
    out
}

fn jobs(n: usize) -> Value {
    (0..n)
        .map(|i| json!({"name": format!("j{i}"), "data": {"returnValue": {"i": i}}}))
        .collect()
}

#[tokio::test]
async fn garbage_in_meta_never_raises_and_is_reported_once_per_field() -> Result<()> {
    if !node_available() {
        return Ok(());
    }
    let queue = unique_queue("meta-garbage");
    let ids = ids_of(&run_node("add_jobs.js", &json!({"queue": queue, "jobs": jobs(4)})).await?);
    let garbage = [
        ("concurrency", "x"),
        ("max", "lots"),
        ("duration", "-5"),
        ("opts.maxLenEvents", "abc"),
    ];
    write_meta(&queue, &garbage).await?;
    let (worker, reports) = worker_reporting(&queue).await?;
    wait_finished(&queue, 4, Duration::from_secs(30)).await?;
    // No script overwrote the other client's values.
    let raw = raw_client().await?;
    let meta: std::collections::HashMap<String, String> =
        raw.hgetall(format!("{PREFIX}:{queue}:meta")).await?;
    for (field, value) in garbage {
        assert_eq!(meta.get(field).map(String::as_str), Some(value));
    }
    raw.quit().await?;
    // More jobs through our producer, more calls (a Queue handle writes `opts.maxLenEvents`
    // when it opens, as Node's does; the other fields stay garbage).
    let q = open_queue(&queue).await?;
    for i in 4..8 {
        q.add(format!("j{i}"), json!({"returnValue": {"i": i}}))
            .await?;
    }
    wait_finished(&queue, 8, Duration::from_secs(30)).await?;
    worker.close().await?;
    let expected: Vec<(String, String)> = {
        let mut e: Vec<_> = garbage
            .iter()
            .map(|(f, v)| ((*f).to_owned(), (*v).to_owned()))
            .collect();
        e.sort();
        e
    };
    assert_eq!(sorted(&reports), expected, "each field reported once");

    let jobs = node_outcomes(&queue, &ids).await?;
    for job in &jobs {
        assert_eq!(job["state"], json!("completed"), "{job}");
    }
    let counts = run_node("counts.js", &json!({"queue": queue})).await?;
    assert_eq!(counts["counts"]["completed"], json!(8), "{counts}");
    q.close().await?;
    cleanup(&queue).await
}

fn per_job(events: &[StreamEvent], ids: &[Value]) -> BTreeMap<usize, Vec<String>> {
    ids.iter()
        .enumerate()
        .map(|(i, id)| {
            let id = id.as_str().unwrap_or_default();
            let of_job = events
                .iter()
                .filter(|e| e.fields.iter().any(|(k, v)| k == "jobId" && v == id))
                .map(|e| e.event.clone())
                .collect();
            (i, of_job)
        })
        .collect()
}

#[tokio::test]
async fn garbage_node_reads_leaves_the_same_jobs_and_events_as_node() -> Result<()> {
    if !node_available() {
        return Ok(());
    }
    // On these Node's scripts read `max` as no limit and `duration` as its absolute value.
    let garbage = [("max", "lots"), ("duration", "-5")];
    let node_queue = unique_queue("meta-garbage-node");
    let rust_queue = unique_queue("meta-garbage-rust");
    let mut ids = Vec::new();
    for queue in [&node_queue, &rust_queue] {
        ids.push(ids_of(
            &run_node("add_jobs.js", &json!({"queue": queue, "jobs": jobs(5)})).await?,
        ));
        write_meta(queue, &garbage).await?;
    }
    let out = run_node(
        "run_worker.js",
        &json!({"queue": node_queue, "concurrency": 2, "stopAfter": 5, "timeoutMs": 60000}),
    )
    .await?;
    assert_eq!(out["completed"].as_array().map(Vec::len), Some(5), "{out}");
    let (worker, reports) = worker_reporting(&rust_queue).await?;
    wait_finished(&rust_queue, 5, Duration::from_secs(30)).await?;
    eventually("both fields reported", Duration::from_secs(10), || {
        let n = reports.lock().unwrap().len();
        async move { n >= 2 }
    })
    .await?;
    worker.close().await?;
    assert_eq!(
        sorted(&reports),
        [
            ("duration".to_owned(), "-5".to_owned()),
            ("max".to_owned(), "lots".to_owned())
        ]
    );
    assert_eq!(
        node_outcomes(&rust_queue, &ids[1]).await?,
        node_outcomes(&node_queue, &ids[0]).await?
    );
    assert_eq!(
        per_job(&read_events(&rust_queue).await?, &ids[1]),
        per_job(&read_events(&node_queue).await?, &ids[0])
    );
    cleanup(&node_queue).await?;
    cleanup(&rust_queue).await
}

#[tokio::test]
async fn a_duration_pexpire_cannot_take_counts_as_absent() -> Result<()> {
    if !node_available() {
        return Ok(());
    }
    let queue = unique_queue("meta-garbage-big");
    run_node("add_jobs.js", &json!({"queue": queue, "jobs": jobs(3)})).await?;
    write_meta(&queue, &[("max", "1"), ("duration", "1e400")]).await?;
    let (worker, reports) = worker_reporting(&queue).await?;
    wait_finished(&queue, 3, Duration::from_secs(30)).await?;
    worker.close().await?;
    assert_eq!(
        sorted(&reports),
        [("duration".to_owned(), "1e400".to_owned())]
    );
    cleanup(&queue).await
}

#[tokio::test]
async fn a_job_counter_another_client_overwrote_starts_again_as_if_absent() -> Result<()> {
    let queue = unique_queue("meta-garbage-id");
    let raw = raw_client().await?;
    let id_key = format!("{PREFIX}:{queue}:id");
    let _: () = raw.set(&id_key, "abc", None, None, false).await?;
    let q = open_queue(&queue).await?;
    let opts = bullmq_protocol::options::JobOptions::new;
    let added = q
        .add_bulk([("a", json!({}), opts()), ("b", json!({}), opts())])
        .await?;
    let ids: Vec<&str> = added.iter().map(|job| job.id()).collect();
    assert_eq!(ids, ["1", "2"], "numbered as on a fresh queue");
    let counter: String = raw.get(&id_key).await?;
    assert_eq!(counter, "2");
    raw.quit().await?;
    q.close().await?;
    cleanup(&queue).await
}

#[tokio::test]
async fn a_paused_field_pauses_whatever_it_holds_as_in_node() -> Result<()> {
    use ractor_bullmq::store::{FetchRequest, RedisStore, Store};
    let queue = unique_queue("meta-garbage-paused");
    let q = open_queue(&queue).await?;
    q.add("a", json!({})).await?;
    write_meta(&queue, &[("paused", "no")]).await?;
    let config = worker_common::config();
    let store = RedisStore::connect(&config, PREFIX, &queue, None).await?;
    let fetched = store
        .fetch_batch(&FetchRequest::new(1, "tok", Duration::from_secs(30)))
        .await?;
    assert!(fetched.jobs.is_empty() && fetched.gated, "{fetched:?}");
    assert!(
        fetched.invalid_settings.is_empty(),
        "`paused` is not a number field"
    );
    store.close().await;
    q.close().await?;
    cleanup(&queue).await
}
