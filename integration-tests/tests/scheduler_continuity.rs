//! Job schedulers keep running across implementations: a scheduler created by Node BullMQ
//! and run only by our Worker, created by us and run only by a Node Worker, and run by both
//! at once, produces its iterations `repeat:{id}:{millis}` on the schedule, each once; `limit`,
//! `end_date` and removal stop it; a cron scheduler with seconds keeps running; a retried
//! iteration does not create a second next one.
//!
//! No speed assertions: a slow machine may skip slots (a scheduler skips missed runs, as
//! Node's does), so the series is checked to stay on its grid rather than to be gapless, and
//! "each created iteration runs once" is checked against the `added` events.

mod common;
mod scheduler_common;
mod worker_common;

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{Context, Result};
use bullmq_protocol::JobOptions;
use common::*;
use ractor_bullmq::scheduler::{Repeat, SchedulerTemplate};
use scheduler_common::*;
use serde_json::{json, Value as Json};

async fn node_upsert(queue: &str, id: &str, repeat: Json, template: Json) -> Result<Json> {
    let out = run_node(
        "schedulers.js",
        &json!({"queue": queue, "op": "upsert", "id": id, "repeat": repeat, "template": template}),
    )
    .await?;
    assert!(out.get("error").is_none(), "Node refused: {out}");
    Ok(out)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn node_scheduler_runs_on_our_worker() -> Result<()> {
    if !node_available() {
        return Ok(());
    }
    let queue = unique_queue("sc-node-rust");
    node_upsert(
        &queue,
        "n2r",
        json!({"every": 400}),
        json!({"name": "tick", "data": {"k": 1}}),
    )
    .await?;
    let (worker, log) = recording_worker(&queue, "rust").await?;
    wait_for("8 iterations", 60, || started_of(&log).len() >= 8).await?;
    let q = open_queue(&queue).await?;
    assert!(q.remove_job_scheduler("n2r").await?);
    settled(&queue).await?;
    worker.close().await?;
    let starts = started_of(&log);
    let millis = assert_on_schedule("n2r", 400, &starts);
    assert!(millis.len() >= 8, "{millis:?}");
    q.close().await?;
    cleanup(&queue).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn our_scheduler_runs_on_a_node_worker() -> Result<()> {
    if !node_available() {
        return Ok(());
    }
    let queue = unique_queue("sc-rust-node");
    let q = open_queue(&queue).await?;
    q.upsert_job_scheduler(
        "r2n",
        Repeat::every(Duration::from_millis(400)),
        SchedulerTemplate::new("tick").data(json!({"k": 2})),
    )
    .await?;
    let report = run_node(
        "run_worker.js",
        &json!({"queue": queue, "stopAfter": 9, "timeoutMs": 60000}),
    )
    .await?;
    assert_eq!(report["stoppedBy"], json!("count"), "{report}");
    assert!(q.remove_job_scheduler("r2n").await?);
    let starts = started_of_node(&report);
    let millis = assert_on_schedule("r2n", 400, &starts);
    assert!(millis.len() >= 8, "{millis:?}");
    assert!(report["failed"].as_array().unwrap().is_empty(), "{report}");
    q.close().await?;
    cleanup(&queue).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn node_and_rust_workers_run_each_iteration_once() -> Result<()> {
    if !node_available() {
        return Ok(());
    }
    let queue = unique_queue("sc-mixed");
    let q = open_queue(&queue).await?;
    q.upsert_job_scheduler(
        "mix",
        Repeat::every(Duration::from_millis(300)),
        SchedulerTemplate::new("tick"),
    )
    .await?;
    let node_queue = queue.clone();
    let node = tokio::spawn(async move {
        run_node(
            "run_worker.js",
            &json!({"queue": node_queue, "idleMs": 4000, "timeoutMs": 90000, "name": "node"}),
        )
        .await
    });
    let (worker, log) = recording_worker(&queue, "rust").await?;
    worker_common::wait_finished(&queue, 24, Duration::from_secs(90)).await?;
    assert!(q.remove_job_scheduler("mix").await?);
    settled(&queue).await?;
    let report = node.await??;
    worker.close().await?;

    let rust = started_of(&log);
    let node_starts = started_of_node(&report);
    let mut runs: HashMap<String, Vec<&str>> = HashMap::new();
    for (side, starts) in [("rust", &rust), ("node", &node_starts)] {
        for s in starts.iter() {
            runs.entry(s.id.clone()).or_default().push(side);
        }
    }
    for (id, sides) in &runs {
        assert_eq!(sides.len(), 1, "{id} ran on {sides:?}");
    }
    // Every iteration the scheduler created ran (the pending one was removed with it).
    let created = added(&queue).await?;
    let created: BTreeSet<String> = created.into_iter().collect();
    let ran: BTreeSet<String> = runs.keys().cloned().collect();
    let not_run: Vec<&String> = created.difference(&ran).collect();
    assert!(not_run.len() <= 1, "created but never run: {not_run:?}");
    assert!(ran.is_subset(&created));
    let mut all = rust.clone();
    all.extend(node_starts.iter().cloned());
    let millis = assert_on_schedule("mix", 300, &all);
    assert!(millis.len() >= 24, "{millis:?}");
    eprintln!(
        "mixed: {} iterations, {} on rust, {} on node",
        millis.len(),
        rust.len(),
        node_starts.len()
    );
    assert!(
        !rust.is_empty() && !node_starts.is_empty(),
        "both workers took part"
    );
    q.close().await?;
    cleanup(&queue).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn limit_stops_the_series_on_both_sides() -> Result<()> {
    if !node_available() {
        return Ok(());
    }
    // Created by us, run by Node.
    let queue = unique_queue("sc-limit-rn");
    let q = open_queue(&queue).await?;
    q.upsert_job_scheduler(
        "lim",
        Repeat::every(Duration::from_millis(300)).limit(4),
        SchedulerTemplate::new("l"),
    )
    .await?;
    let report = run_node(
        "run_worker.js",
        &json!({"queue": queue, "idleMs": 3000, "timeoutMs": 60000}),
    )
    .await?;
    let millis = assert_on_schedule("lim", 300, &started_of_node(&report));
    assert_eq!(millis.len(), 4, "{report}");
    assert_eq!(added(&queue).await?.len(), 4);
    // The scheduler stays, as Node leaves it, with its count at the limit.
    let record = q.get_job_scheduler("lim").await?.context("scheduler")?;
    assert_eq!(record.iteration_count, Some(4));
    q.close().await?;
    cleanup(&queue).await?;

    // Created by Node, run by us.
    let queue = unique_queue("sc-limit-nr");
    node_upsert(
        &queue,
        "lim",
        json!({"every": 300, "limit": 4}),
        json!({"name": "l"}),
    )
    .await?;
    let (worker, log) = recording_worker(&queue, "rust").await?;
    wait_for("4 iterations", 30, || started_of(&log).len() >= 4).await?;
    // Long enough for a fifth to have run if one had been created.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    worker.close().await?;
    let millis = assert_on_schedule("lim", 300, &started_of(&log));
    assert_eq!(millis.len(), 4);
    assert_eq!(added(&queue).await?.len(), 4);
    let node_view = run_node(
        "schedulers.js",
        &json!({"queue": queue, "op": "get", "id": "lim"}),
    )
    .await?;
    assert_eq!(
        node_view["result"]["iterationCount"],
        json!(4),
        "{node_view}"
    );
    cleanup(&queue).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn end_date_stops_the_series() -> Result<()> {
    if !node_available() {
        return Ok(());
    }
    let queue = unique_queue("sc-end");
    let end = now_ms() + 2500;
    node_upsert(
        &queue,
        "end",
        json!({"every": 300, "endDate": end}),
        json!({"name": "e"}),
    )
    .await?;
    let (worker, log) = recording_worker(&queue, "rust").await?;
    // Past the end date, and long enough for iterations after it to show.
    let wait = end.saturating_sub(now_ms()) + 2000;
    tokio::time::sleep(Duration::from_millis(wait)).await;
    settled(&queue).await?;
    worker.close().await?;
    let millis = assert_on_schedule("end", 300, &started_of(&log));
    assert!(millis.len() >= 2, "{millis:?}");
    // The iteration planned by the last start before the end date may fall after it (Node
    // checks the end date when an iteration starts); none is planned after that.
    let after: Vec<&u64> = millis.iter().filter(|m| **m > end).collect();
    assert!(
        after.len() <= 1,
        "iterations after the end date: {after:?} (end {end})"
    );
    assert!(
        millis.iter().all(|m| *m <= end + 300),
        "{millis:?} end {end}"
    );
    let delayed = worker_common::count(&queue, "delayed").await?;
    assert_eq!(delayed, 0, "nothing pending after the end date");
    cleanup(&queue).await?;

    // Created by us, run by Node.
    let queue = unique_queue("sc-end-rn");
    let q = open_queue(&queue).await?;
    let end = now_ms() + 2500;
    q.upsert_job_scheduler(
        "end",
        Repeat::every(Duration::from_millis(300))
            .end_date(std::time::UNIX_EPOCH + Duration::from_millis(end)),
        SchedulerTemplate::new("e"),
    )
    .await?;
    let report = run_node(
        "run_worker.js",
        &json!({"queue": queue, "idleMs": 2000, "timeoutMs": 60000}),
    )
    .await?;
    let millis = assert_on_schedule("end", 300, &started_of_node(&report));
    assert!(millis.len() >= 2, "{millis:?}");
    assert!(
        millis.iter().filter(|m| **m > end).count() <= 1,
        "{millis:?} end {end}"
    );
    assert!(
        millis.iter().all(|m| *m <= end + 300),
        "{millis:?} end {end}"
    );
    assert_eq!(worker_common::count(&queue, "delayed").await?, 0);
    q.close().await?;
    cleanup(&queue).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn removal_deletes_the_pending_iteration_and_nothing_more_runs() -> Result<()> {
    if !node_available() {
        return Ok(());
    }
    let queue = unique_queue("sc-remove");
    node_upsert(&queue, "rm", json!({"every": 2000}), json!({"name": "r"})).await?;
    let (worker, log) = recording_worker(&queue, "rust").await?;
    wait_for("2 iterations", 30, || started_of(&log).len() >= 2).await?;
    worker_common::wait_finished(&queue, 2, Duration::from_secs(10)).await?;
    // The third is delayed about 2 s from now.
    let raw = raw_client().await?;
    let pending: Vec<String> = fred::prelude::SortedSetsInterface::zrange(
        &raw,
        format!("bull:{queue}:delayed"),
        0,
        -1,
        None,
        false,
        None,
        false,
    )
    .await?;
    assert_eq!(pending.len(), 1, "{pending:?}");
    let q = open_queue(&queue).await?;
    assert!(q.remove_job_scheduler("rm").await?);
    let exists: i64 =
        fred::prelude::KeysInterface::exists(&raw, format!("bull:{queue}:{}", pending[0])).await?;
    assert_eq!(exists, 0, "pending iteration deleted");
    let events = read_events(&queue).await?;
    assert!(
        events
            .iter()
            .any(|e| e.event == "removed"
                && e.fields.contains(&("jobId".into(), pending[0].clone()))),
        "{events:?}"
    );
    tokio::time::sleep(Duration::from_millis(3500)).await;
    worker.close().await?;
    assert_eq!(started_of(&log).len(), 2, "nothing ran after the removal");
    assert_eq!(q.get_job_schedulers_count().await?, 0);
    fred::prelude::ClientLike::quit(&raw).await?;
    q.close().await?;
    cleanup(&queue).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cron_with_seconds_keeps_running_on_our_worker() -> Result<()> {
    let queue = unique_queue("sc-cron");
    let q = open_queue(&queue).await?;
    q.upsert_job_scheduler(
        "sec",
        Repeat::cron("*/1 * * * * *"),
        SchedulerTemplate::new("s"),
    )
    .await?;
    let (worker, log) = recording_worker(&queue, "rust").await?;
    wait_for("5 iterations", 60, || started_of(&log).len() >= 5).await?;
    assert!(q.remove_job_scheduler("sec").await?);
    settled(&queue).await?;
    worker.close().await?;
    let millis = assert_on_schedule("sec", 1000, &started_of(&log));
    assert!(millis.len() >= 5);
    assert!(
        millis.iter().all(|m| m % 1000 == 0),
        "on whole seconds: {millis:?}"
    );
    q.close().await?;
    cleanup(&queue).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_retried_iteration_creates_no_second_next_one() -> Result<()> {
    let queue = unique_queue("sc-retry");
    let q = open_queue(&queue).await?;
    // Each iteration fails its first attempt and is retried at once.
    q.upsert_job_scheduler(
        "retry",
        Repeat::every(Duration::from_millis(700)),
        SchedulerTemplate::new("r")
            .data(json!({"failAttempts": 1}))
            .opts(JobOptions::new().attempts(2)),
    )
    .await?;
    let (worker, log) = recording_worker(&queue, "rust").await?;
    wait_for("4 retried iterations", 60, || {
        started_of(&log)
            .iter()
            .filter(|s| s.attempts_made == 1)
            .count()
            >= 4
    })
    .await?;
    assert!(q.remove_job_scheduler("retry").await?);
    settled(&queue).await?;
    worker.close().await?;
    let starts = started_of(&log);
    let millis = assert_on_schedule("retry", 700, &starts);
    let created = added(&queue).await?;
    let distinct: BTreeSet<&String> = created.iter().collect();
    assert_eq!(
        distinct.len(),
        created.len(),
        "an iteration was created twice: {created:?}"
    );
    // One next iteration per first attempt (the last one removed with the scheduler).
    assert!(
        created.len() <= millis.len() + 1,
        "created {created:?} for {millis:?}"
    );
    let events = read_events(&queue).await?;
    assert!(
        !events.iter().any(|e| e.event == "duplicated"),
        "a retry tried to create an iteration again"
    );
    for s in starts.iter().filter(|s| s.attempts_made == 1) {
        assert!(starts.iter().any(|f| f.id == s.id && f.attempts_made == 0));
    }
    q.close().await?;
    cleanup(&queue).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cron_schedulers_cross_implementations() -> Result<()> {
    if !node_available() {
        return Ok(());
    }
    // Created by Node in a time zone, with iterations removed on completion: our Worker.
    let queue = unique_queue("sc-cron-nr");
    node_upsert(
        &queue,
        "tz",
        json!({"pattern": "*/1 * * * * *", "tz": "America/New_York"}),
        json!({"name": "c", "opts": {"removeOnComplete": true}}),
    )
    .await?;
    let (worker, log) = recording_worker(&queue, "rust").await?;
    wait_for("5 iterations", 60, || started_of(&log).len() >= 5).await?;
    let q = open_queue(&queue).await?;
    assert!(q.remove_job_scheduler("tz").await?);
    settled(&queue).await?;
    worker.close().await?;
    let millis = assert_on_schedule("tz", 1000, &started_of(&log));
    assert!(
        millis.len() >= 5 && millis.iter().all(|m| m % 1000 == 0),
        "{millis:?}"
    );
    assert_eq!(
        worker_common::count(&queue, "completed").await?,
        0,
        "removed on completion"
    );
    q.close().await?;
    cleanup(&queue).await?;

    // Created by us: a Node Worker.
    let queue = unique_queue("sc-cron-rn");
    let q = open_queue(&queue).await?;
    q.upsert_job_scheduler(
        "tz",
        Repeat::cron("*/1 * * * * *").tz("Europe/Berlin"),
        SchedulerTemplate::new("c"),
    )
    .await?;
    let report = run_node(
        "run_worker.js",
        &json!({"queue": queue, "stopAfter": 6, "timeoutMs": 60000}),
    )
    .await?;
    assert!(q.remove_job_scheduler("tz").await?);
    let millis = assert_on_schedule("tz", 1000, &started_of_node(&report));
    assert!(millis.len() >= 5, "{report}");
    q.close().await?;
    cleanup(&queue).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_scheduler_id_shaped_like_a_legacy_key_keeps_running() -> Result<()> {
    if !node_available() {
        return Ok(());
    }
    // `name:id:endDate:tz:every` is the shape of a BullMQ 5 repeatable-job key: workers check
    // the scheduler hash (`ic`) before iterating, as Node's does.
    let id = "daily:report::UTC:300";
    let queue = unique_queue("sc-shape");
    node_upsert(&queue, id, json!({"every": 300}), json!({"name": "r"})).await?;
    let errors = Arc::new(Mutex::new(Vec::<String>::new()));
    let (worker, log) = recording_worker_with_errors(&queue, errors.clone()).await?;
    wait_for("4 iterations", 60, || started_of(&log).len() >= 4).await?;
    let q = open_queue(&queue).await?;
    assert!(q.remove_job_scheduler(id).await?);
    settled(&queue).await?;
    worker.close().await?;
    let millis = assert_on_schedule(id, 300, &started_of(&log));
    assert!(millis.len() >= 4);
    assert!(
        errors.lock().unwrap().is_empty(),
        "{:?}",
        errors.lock().unwrap()
    );
    q.close().await?;
    cleanup(&queue).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_legacy_repeatable_job_runs_once_and_is_reported() -> Result<()> {
    // A BullMQ 5 repeatable job: the `repeat` entry has no hash and the job's `rjk` is a
    // legacy key. It runs, but no next iteration is created, and the worker reports Node's
    // migration message as an error (Node's Worker emits `error` with it).
    let queue = unique_queue("sc-legacy");
    let key = "tick:tick::UTC:1000";
    let millis = now_ms();
    let job_id = format!("repeat:{key}:{millis}");
    let raw = raw_client().await?;
    let _: i64 = fred::prelude::SortedSetsInterface::zadd(
        &raw,
        format!("bull:{queue}:repeat"),
        None,
        None,
        false,
        false,
        (millis as f64, key),
    )
    .await?;
    let opts = json!({"repeat": {"every": 1000, "count": 1}, "jobId": job_id, "repeatJobKey": key,
                      "timestamp": millis, "delay": 0});
    let _: i64 = fred::prelude::HashesInterface::hset(
        &raw,
        format!("bull:{queue}:{job_id}"),
        vec![
            ("name", "tick".to_owned()),
            ("data", "{}".to_owned()),
            ("opts", opts.to_string()),
            ("timestamp", millis.to_string()),
            ("delay", "0".to_owned()),
            ("priority", "0".to_owned()),
            ("rjk", key.to_owned()),
        ],
    )
    .await?;
    let _: i64 =
        fred::prelude::ListInterface::lpush(&raw, format!("bull:{queue}:wait"), job_id.as_str())
            .await?;
    let errors = Arc::new(Mutex::new(Vec::<String>::new()));
    let (worker, log) = recording_worker_with_errors(&queue, errors.clone()).await?;
    wait_for("the legacy job ran", 30, || started_of(&log).len() == 1).await?;
    let seen = errors.clone();
    wait_for("the error reported", 30, move || {
        !seen.lock().unwrap().is_empty()
    })
    .await?;
    tokio::time::sleep(Duration::from_millis(1500)).await;
    worker.close().await?;
    assert_eq!(started_of(&log).len(), 1, "no next iteration");
    let reported = errors.lock().unwrap().join("\n");
    assert!(
        reported.contains(&format!(
            "Legacy repeatable job metadata is not supported in BullMQ v6 (key: \"{key}\")"
        )),
        "{reported}"
    );
    assert_eq!(added(&queue).await?.len(), 0, "nothing created");
    fred::prelude::ClientLike::quit(&raw).await?;
    cleanup(&queue).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn missed_runs_are_skipped_not_replayed() -> Result<()> {
    if !node_available() {
        return Ok(());
    }
    // No worker for several intervals: the first start creates the next iteration on the
    // next slot after now (on the scheduler's grid), as Node's does, not one per missed slot.
    for (label, on_node) in [("rust", false), ("node", true)] {
        let queue = unique_queue(&format!("sc-missed-{label}"));
        node_upsert(&queue, "late", json!({"every": 400}), json!({"name": "l"})).await?;
        tokio::time::sleep(Duration::from_millis(2200)).await;
        let resumed = now_ms();
        let starts = if on_node {
            let report = run_node(
                "run_worker.js",
                &json!({"queue": queue, "stopAfter": 4, "timeoutMs": 60000}),
            )
            .await?;
            started_of_node(&report)
        } else {
            let (worker, log) = recording_worker(&queue, "rust").await?;
            wait_for("4 iterations", 60, || started_of(&log).len() >= 4).await?;
            worker.close().await?;
            started_of(&log)
        };
        let q = open_queue(&queue).await?;
        q.remove_job_scheduler("late").await?;
        let millis = assert_on_schedule("late", 400, &starts);
        assert!(millis.len() >= 4, "{label}: {millis:?}");
        assert!(
            millis[0] < resumed && millis[1] > resumed,
            "{label}: {millis:?} resumed {resumed}"
        );
        q.close().await?;
        cleanup(&queue).await?;
    }
    Ok(())
}
