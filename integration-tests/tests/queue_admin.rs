//! Queue administration against a real Redis: pause/resume, counts, ordering, remove, drain,
//! clean, obliterate, progress/logs/data, script cache flushes.

mod common;

use std::time::Duration;

use anyhow::Result;
use bullmq_protocol::keys::{QueueKey, QueueKeys};
use bullmq_protocol::state::JobState;
use common::{cleanup, count_keys, now_ms, raw_client, read_events, unique_queue, StreamEvent};
use fred::prelude::{Client, HashesInterface, KeysInterface, ListInterface, SortedSetsInterface};
use ractor_bullmq::{Queue, QueueError, QueueOptions};

async fn open(name: &str) -> Result<Queue> {
    Ok(Queue::new(name, QueueOptions::from_env()?).await?)
}

fn events_named<'a>(events: &'a [StreamEvent], name: &str) -> Vec<&'a StreamEvent> {
    events.iter().filter(|e| e.event == name).collect()
}

/// Puts job `id` in a finished zset the way a worker leaves it.
async fn put_finished(
    raw: &Client,
    keys: &QueueKeys,
    id: &str,
    state: QueueKey,
    finished_on: u64,
) -> Result<()> {
    let ts = finished_on.saturating_sub(10).to_string();
    let fin = finished_on.to_string();
    let _: () = raw
        .hset(
            keys.job(id),
            [
                ("name", "done"),
                ("data", "{}"),
                ("opts", "{}"),
                ("timestamp", ts.as_str()),
                ("finishedOn", fin.as_str()),
            ],
        )
        .await?;
    let _: () = raw
        .zadd(
            keys.key(state),
            None,
            None,
            false,
            false,
            (finished_on as f64, id),
        )
        .await?;
    Ok(())
}

/// Moves job `id` to `active` with a lock, as a worker holding it would.
async fn make_active(raw: &Client, keys: &QueueKeys, id: &str) -> Result<()> {
    let _: i64 = raw.lrem(keys.key(QueueKey::Wait), 1, id).await?;
    let _: () = raw.lpush(keys.key(QueueKey::Active), id).await?;
    let _: () = raw.set(keys.lock(id), "token", None, None, false).await?;
    Ok(())
}

#[tokio::test]
async fn pause_and_resume_toggle_meta_marker_and_emit_events() -> Result<()> {
    let name = unique_queue("qad-pause");
    let queue = open(&name).await?;
    let raw = raw_client().await?;
    let marker = queue.keys().key(QueueKey::Marker);
    queue.add("a", 1).await?;
    assert!(!queue.is_paused().await?);

    queue.pause().await?;
    assert!(queue.is_paused().await?);
    assert!(queue.get_meta().await?.paused);
    assert!(
        !raw.exists::<bool, _>(&marker).await?,
        "marker removed on pause"
    );
    queue.add("b", 2).await?;
    assert!(
        !raw.exists::<bool, _>(&marker).await?,
        "no marker while paused"
    );
    assert_eq!(
        queue.get_job_counts().await?.waiting,
        2,
        "paused jobs stay in wait"
    );

    queue.resume().await?;
    assert!(!queue.is_paused().await?);
    let score: Option<f64> = raw.zscore(&marker, "0").await?;
    assert_eq!(score, Some(0.0), "base marker back on resume");

    let events = read_events(&name).await?;
    let toggles: Vec<&str> = events
        .iter()
        .filter(|e| e.event == "paused" || e.event == "resumed")
        .map(|e| e.event.as_str())
        .collect();
    assert_eq!(toggles, ["paused", "resumed"]);
    assert!(events_named(&events, "paused")[0].fields.is_empty());
    queue.close().await?;
    cleanup(&name).await?;
    Ok(())
}

#[tokio::test]
async fn resume_moves_jobs_of_the_legacy_paused_list_back_to_wait() -> Result<()> {
    let name = unique_queue("qad-legacy");
    let queue = open(&name).await?;
    let raw = raw_client().await?;
    queue.pause().await?;
    let _: () = raw
        .lpush(queue.keys().key(QueueKey::Paused), vec!["x", "y"])
        .await?;
    assert_eq!(queue.get_job_counts().await?.paused, 2);
    queue.resume().await?;
    let wait: Vec<String> = raw.lrange(queue.keys().key(QueueKey::Wait), 0, -1).await?;
    assert_eq!(wait, ["y", "x"]);
    assert!(
        !raw.exists::<bool, _>(queue.keys().key(QueueKey::Paused))
            .await?
    );
    queue.close().await?;
    cleanup(&name).await?;
    Ok(())
}

#[tokio::test]
async fn counts_cover_every_state() -> Result<()> {
    let name = unique_queue("qad-counts");
    let queue = open(&name).await?;
    let raw = raw_client().await?;
    let keys = queue.keys().clone();
    for i in 0..3 {
        queue.add("w", i).await?;
    }
    let active = queue.add("act", 0).await?;
    make_active(&raw, &keys, active.id()).await?;
    queue.add("d", 0).delay(Duration::from_secs(60)).await?;
    queue.add("p", 0).priority(1).await?;
    queue.add("p", 0).priority(2).await?;
    put_finished(&raw, &keys, "c1", QueueKey::Completed, now_ms()).await?;
    put_finished(&raw, &keys, "f1", QueueKey::Failed, now_ms()).await?;
    put_finished(&raw, &keys, "f2", QueueKey::Failed, now_ms()).await?;
    let _: () = raw
        .zadd(
            keys.key(QueueKey::WaitingChildren),
            None,
            None,
            false,
            false,
            (1.0, "wc"),
        )
        .await?;

    let counts = queue.get_job_counts().await?;
    assert_eq!(
        (
            counts.waiting,
            counts.active,
            counts.delayed,
            counts.prioritized
        ),
        (3, 1, 1, 2)
    );
    assert_eq!(
        (
            counts.completed,
            counts.failed,
            counts.waiting_children,
            counts.paused
        ),
        (1, 2, 1, 0)
    );
    assert_eq!(counts.pending(), 7);
    assert_eq!(queue.count().await?, 7);
    assert_eq!(queue.get_job_state(active.id()).await?, JobState::Active);
    assert_eq!(queue.get_job_state("c1").await?, JobState::Completed);
    assert_eq!(queue.get_job_state("f1").await?, JobState::Failed);
    assert_eq!(queue.get_job_state("wc").await?, JobState::WaitingChildren);
    assert_eq!(queue.get_job_state("none").await?, JobState::Unknown);
    queue.close().await?;
    cleanup(&name).await?;
    Ok(())
}

#[tokio::test]
async fn get_jobs_orders_by_age_per_state() -> Result<()> {
    let name = unique_queue("qad-order");
    let queue = open(&name).await?;
    let raw = raw_client().await?;
    for i in 1..=4 {
        queue.add("w", i).await?;
    }
    let ids = |v: Vec<ractor_bullmq::Job>| v.iter().map(|j| j.id().to_string()).collect::<Vec<_>>();
    assert_eq!(
        ids(queue.get_jobs(&[JobState::Waiting], 0, -1, true).await?),
        ["1", "2", "3", "4"]
    );
    assert_eq!(
        ids(queue.get_jobs(&[JobState::Waiting], 0, -1, false).await?),
        ["4", "3", "2", "1"]
    );
    assert_eq!(
        ids(queue.get_jobs(&[JobState::Waiting], 0, 1, true).await?),
        ["1", "2"]
    );
    assert_eq!(
        ids(queue.get_jobs(&[JobState::Waiting], 1, 2, false).await?),
        ["3", "2"]
    );

    let keys = queue.keys().clone();
    put_finished(&raw, &keys, "c-old", QueueKey::Completed, 1_000).await?;
    put_finished(&raw, &keys, "c-new", QueueKey::Completed, 2_000).await?;
    assert_eq!(
        queue
            .get_job_ids(&[JobState::Completed, JobState::Waiting], 0, 0, false)
            .await?,
        ["c-new", "4"]
    );
    assert_eq!(
        queue
            .get_job_ids(&[JobState::Completed], 0, -1, true)
            .await?,
        ["c-old", "c-new"]
    );
    queue.close().await?;
    cleanup(&name).await?;
    Ok(())
}

#[tokio::test]
async fn remove_deletes_every_key_refuses_locked_jobs_and_emits_removed() -> Result<()> {
    let name = unique_queue("qad-remove");
    let queue = open(&name).await?;
    let raw = raw_client().await?;
    let keys = queue.keys().clone();
    let job = queue.add("a", 1).await?;
    queue.add_job_log(job.id(), "line", None).await?;
    assert!(raw.exists::<bool, _>(keys.logs(job.id())).await?);

    assert!(queue.remove(job.id()).await?);
    assert!(!raw.exists::<bool, _>(keys.job(job.id())).await?);
    assert!(!raw.exists::<bool, _>(keys.logs(job.id())).await?);
    assert_eq!(queue.get_job_counts().await?.waiting, 0);
    let removed = read_events(&name).await?;
    let removed = events_named(&removed, "removed");
    assert_eq!(
        removed[0].fields,
        [
            ("jobId".to_string(), job.id().to_string()),
            ("prev".to_string(), "wait".to_string())
        ]
    );
    assert!(
        !queue.remove(job.id()).await?,
        "second remove finds nothing"
    );

    let locked = queue.add("b", 2).await?;
    make_active(&raw, &keys, locked.id()).await?;
    assert!(matches!(
        queue.remove(locked.id()).await,
        Err(QueueError::JobLocked { .. })
    ));
    assert_eq!(queue.get_job_state(locked.id()).await?, JobState::Active);
    queue.close().await?;
    cleanup(&name).await?;
    Ok(())
}

#[tokio::test]
async fn drain_removes_waiting_jobs_and_optionally_delayed_ones() -> Result<()> {
    let name = unique_queue("qad-drain");
    let queue = open(&name).await?;
    let raw = raw_client().await?;
    let keys = queue.keys().clone();
    queue.add("w", 1).await?;
    queue.add("w", 2).await?;
    queue.add("p", 3).priority(3).await?;
    let delayed = queue.add("d", 4).delay(Duration::from_secs(60)).await?;
    let active = queue.add("a", 5).await?;
    make_active(&raw, &keys, active.id()).await?;

    assert_eq!(queue.drain(false).await?, 3);
    let counts = queue.get_job_counts().await?;
    assert_eq!(
        (
            counts.waiting,
            counts.prioritized,
            counts.delayed,
            counts.active
        ),
        (0, 0, 1, 1)
    );
    assert!(!raw.exists::<bool, _>(keys.job("1")).await?);
    assert!(queue.get_job(delayed.id()).await?.is_some());

    assert_eq!(queue.drain(true).await?, 1);
    let counts = queue.get_job_counts().await?;
    assert_eq!((counts.delayed, counts.active), (0, 1));
    assert!(
        queue.get_job(active.id()).await?.is_some(),
        "active jobs survive a drain"
    );
    queue.close().await?;
    cleanup(&name).await?;
    Ok(())
}

#[tokio::test]
async fn clean_honours_grace_and_limit_and_emits_cleaned() -> Result<()> {
    let name = unique_queue("qad-clean");
    let queue = open(&name).await?;
    let raw = raw_client().await?;
    let keys = queue.keys().clone();
    let old = now_ms() - 3_600_000;
    for i in 0..5 {
        put_finished(
            &raw,
            &keys,
            &format!("old{i}"),
            QueueKey::Completed,
            old + i,
        )
        .await?;
    }
    put_finished(&raw, &keys, "fresh", QueueKey::Completed, now_ms()).await?;

    let first = queue
        .clean(
            ractor_bullmq::CleanOptions::new(Duration::from_secs(60))
                .limit(2)
                .state(JobState::Completed),
        )
        .await?;
    assert_eq!(first, ["old0", "old1"], "oldest first, at most the limit");
    let rest = queue
        .clean(
            ractor_bullmq::CleanOptions::new(Duration::from_secs(60))
                .limit(0)
                .state(JobState::Completed),
        )
        .await?;
    assert_eq!(rest, ["old2", "old3", "old4"]);
    assert_eq!(
        queue
            .get_job_ids(&[JobState::Completed], 0, -1, true)
            .await?,
        ["fresh"]
    );
    assert!(!raw.exists::<bool, _>(keys.job("old0")).await?);

    // Waiting jobs are aged by their timestamp: none is older than an hour.
    queue.add("w", 1).await?;
    assert!(queue
        .clean(
            ractor_bullmq::CleanOptions::new(Duration::from_secs(3600))
                .limit(0)
                .state(JobState::Waiting)
        )
        .await?
        .is_empty());
    assert_eq!(
        queue
            .clean(
                ractor_bullmq::CleanOptions::new(Duration::ZERO)
                    .limit(0)
                    .state(JobState::Waiting)
            )
            .await?,
        ["1"]
    );

    let events = read_events(&name).await?;
    let counts: Vec<&str> = events_named(&events, "cleaned")
        .iter()
        .map(|e| e.fields[0].1.as_str())
        .collect();
    assert_eq!(counts, ["2", "3", "0", "1"]);
    assert_eq!(events_named(&events, "cleaned")[0].fields[0].0, "count");
    queue.close().await?;
    cleanup(&name).await?;
    Ok(())
}

#[tokio::test]
async fn obliterate_refuses_active_jobs_unless_forced() -> Result<()> {
    let name = unique_queue("qad-obliterate");
    let queue = open(&name).await?;
    let raw = raw_client().await?;
    let keys = queue.keys().clone();
    for i in 0..5 {
        queue.add("w", i).await?;
    }
    queue.add("d", 0).delay(Duration::from_secs(60)).await?;
    put_finished(&raw, &keys, "c1", QueueKey::Completed, now_ms()).await?;
    let active = queue.add("a", 0).await?;
    make_active(&raw, &keys, active.id()).await?;
    queue.add_job_log(active.id(), "working", None).await?;

    match queue.obliterate(false).await {
        Err(QueueError::ActiveJobs { queue: q }) => assert_eq!(q, format!("bull:{name}")),
        other => panic!("expected ActiveJobs, got {other:?}"),
    }
    assert!(queue.get_job(active.id()).await?.is_some());

    queue.obliterate(true).await?;
    assert_eq!(count_keys(&name).await?, 0, "nothing of the queue is left");
    queue.close().await?;
    cleanup(&name).await?;
    Ok(())
}

#[tokio::test]
async fn progress_logs_and_data_updates() -> Result<()> {
    let name = unique_queue("qad-updates");
    let queue = open(&name).await?;
    let job = queue.add("a", serde_json::json!({"v": 1})).await?;

    queue.update_progress(job.id(), 42).await?;
    queue
        .update_progress(job.id(), serde_json::json!({"step": "two"}))
        .await?;
    let read = queue.get_job(job.id()).await?.expect("job");
    assert_eq!(read.progress(), &serde_json::json!({"step": "two"}));
    let events = read_events(&name).await?;
    let progress: Vec<&Vec<(String, String)>> = events_named(&events, "progress")
        .iter()
        .map(|e| &e.fields)
        .collect();
    assert_eq!(
        progress[0],
        &vec![
            ("jobId".to_string(), job.id().to_string()),
            ("data".to_string(), "42".to_string())
        ]
    );
    assert_eq!(progress[1][1].1, r#"{"step":"two"}"#);

    for i in 1..=4 {
        queue
            .add_job_log(job.id(), &format!("line {i}"), None)
            .await?;
    }
    assert_eq!(queue.add_job_log(job.id(), "line 5", Some(3)).await?, 3);
    let logs = queue.get_job_logs(job.id(), 0, -1, true).await?;
    assert_eq!(
        (logs.logs.as_slice(), logs.count),
        (
            &["line 3".to_string(), "line 4".into(), "line 5".into()][..],
            3
        )
    );
    let newest = queue.get_job_logs(job.id(), 0, 1, false).await?;
    assert_eq!(newest.logs, ["line 5", "line 4"]);

    queue
        .update_data(job.id(), serde_json::json!({"v": 2}))
        .await?;
    let read = queue.get_job(job.id()).await?.expect("job");
    assert_eq!(read.data_value(), &serde_json::json!({"v": 2}));

    assert!(matches!(
        queue.update_progress("missing", 1).await,
        Err(QueueError::JobNotFound { .. })
    ));
    assert!(matches!(
        queue.update_data("missing", 1).await,
        Err(QueueError::JobNotFound { .. })
    ));
    assert!(matches!(
        queue.add_job_log("missing", "x", None).await,
        Err(QueueError::JobNotFound { .. })
    ));
    queue.close().await?;
    cleanup(&name).await?;
    Ok(())
}
