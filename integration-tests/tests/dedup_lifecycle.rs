//! The lifecycle of deduplication windows (`de:{id}`) and of duplicates kept for after an active
//! job (`dn:{id}`, keepLastIfActive), compared with Node BullMQ 6.7.0: the same steps (adds,
//! workers, removal, clean, drain, obliterate) run once through Node's Queue and Worker
//! (`node/dedup_steps.js`) and once through ours, and after each step both leave the same
//! `de:` / `dn:` keys (value, expiry or not), the same jobs in the same states and counter, and
//! the same add / deduplicated / removed / waiting / delayed events; every add returns the same
//! id on both sides.
//! Skipped (loudly) when `node` is missing.

mod common;
mod worker_common;

use std::collections::BTreeMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{anyhow, bail, Context, Result};
use bullmq_protocol::options::JobOptions;
use common::*;
use fred::prelude::SortedSetsInterface;
use fred::prelude::{Client, ClientLike, HashesInterface, KeysInterface, ListInterface};
use ractor_bullmq::worker::{Job, JobContext};
use ractor_bullmq::{Queue, Worker, WorkerArgs, WorkerCallbacks, WorkerHandle, WorkerOptions};
use serde_json::{json, Value as Json};
use tokio::sync::{Notify, Semaphore};

/// How long any wait of the scenario may take on a loaded machine.
const PATIENCE: Duration = Duration::from_secs(60);

/// Job hash fields compared (the rest holds times and worker names).
const JOB_FIELDS: [&str; 9] = [
    "name",
    "data",
    "opts",
    "deid",
    "delay",
    "priority",
    "atm",
    "returnvalue",
    "failedReason",
];

// ---------------------------------------------------------------------------------------------
// Steps (the contract of node/dedup_steps.js)

fn add(label: &str, data: Json, opts: Json) -> Json {
    json!({"op": "add", "label": label, "name": "job", "data": data, "opts": opts})
}

fn work(attempts: usize) -> Json {
    json!({"op": "work", "attempts": attempts})
}

fn hold(steps: Vec<Json>) -> Json {
    json!({"op": "hold", "steps": steps})
}

fn snap(label: &str) -> Json {
    json!({"op": "snap", "label": label})
}

fn with(mut opts: Json, extra: Json) -> Json {
    if let (Some(opts), Json::Object(extra)) = (opts.as_object_mut(), extra) {
        opts.extend(extra);
    }
    opts
}

/// Options deduplicating on `id` with the mode's settings.
fn dedup(mode: &Json, id: &str) -> Json {
    let mut de = mode.clone();
    de["id"] = json!(id);
    json!({ "deduplication": de })
}

/// A later add that only tells whether the window is still closed: delayed far enough that no
/// worker of the scenario runs it.
fn probe(label: &str, mode: &Json, id: &str) -> Json {
    add(
        label,
        json!({"probe": true}),
        with(dedup(mode, id), json!({"delay": 600_000})),
    )
}

/// Completion (job kept, job deleted by removeOnComplete), failure, retry, removal (waiting and finished jobs), clean (wait, completed,
/// failed), drain (waiting, then delayed) and obliterate, for one deduplication mode.
fn lifecycle_steps(mode: &Json) -> Vec<Json> {
    let retry = json!({"attempts": 2, "backoff": {"type": "fixed", "delay": 2000}});
    vec![
        add("c1", json!({}), dedup(mode, "c")),
        add("c2", json!({}), dedup(mode, "c")),
        work(1),
        snap("completed"),
        probe("c3", mode, "c"),
        add(
            "e1",
            json!({}),
            with(dedup(mode, "e"), json!({"removeOnComplete": true})),
        ),
        work(1),
        snap("completed-and-removed"),
        probe("e2", mode, "e"),
        add("f1", json!({"fail": true}), dedup(mode, "f")),
        work(1),
        snap("failed"),
        probe("f2", mode, "f"),
        add(
            "r1",
            json!({"failAttempts": 1}),
            with(dedup(mode, "r"), retry),
        ),
        work(1),
        snap("retrying"),
        work(1),
        snap("retried"),
        probe("r2", mode, "r"),
        add("m1", json!({}), dedup(mode, "m")),
        json!({"op": "remove", "ref": "m1"}),
        snap("removed"),
        probe("m2", mode, "m"),
        json!({"op": "remove", "ref": "c1"}),
        snap("removed-finished"),
        probe("c4", mode, "c"),
        add("l1", json!({}), dedup(mode, "l")),
        json!({"op": "clean", "type": "wait"}),
        snap("cleaned-wait"),
        probe("l2", mode, "l"),
        json!({"op": "clean", "type": "completed"}),
        json!({"op": "clean", "type": "failed"}),
        snap("cleaned-finished"),
        add("d1", json!({}), dedup(mode, "d")),
        json!({"op": "drain", "delayed": false}),
        snap("drained"),
        probe("d2", mode, "d"),
        json!({"op": "drain", "delayed": true}),
        snap("drained-delayed"),
        add("o1", json!({}), dedup(mode, "o")),
        json!({"op": "obliterate"}),
        snap("obliterated"),
        add("o2", json!({}), dedup(mode, "o")),
        snap("after-obliterate"),
    ]
}

/// keepLastIfActive: duplicates of an active owner kept and queued when it completes or fails,
/// the latest one winning and its own options (priority, custom id) applied; a duplicate of a
/// waiting owner dropped; the kept payload surviving a retry and discarded with the owner
/// removed, cleaned or obliterated; with ttl, extend and replace.
fn keep_last_steps() -> Vec<Json> {
    let keep = |id: &str, extra: Json| {
        let mut de = with(json!({"id": id, "keepLastIfActive": true}), extra);
        de["id"] = json!(id);
        json!({ "deduplication": de })
    };
    let held = json!({"hold": true});
    // Held, then failed into a retry far enough away that the kept payload stays pending.
    let held_retried = json!({"hold": true, "failAttempts": 1});
    let retry_later = json!({"attempts": 2, "backoff": {"type": "fixed", "delay": 600_000}});
    vec![
        add("k1", held.clone(), keep("k", json!({}))),
        hold(vec![
            add("k2", json!({"v": 1}), keep("k", json!({}))),
            add(
                "k3",
                json!({"v": 2}),
                with(keep("k", json!({})), json!({"priority": 5})),
            ),
            snap("kept"),
        ]),
        snap("requeued"),
        add("k4", json!({"v": 3}), keep("k", json!({}))),
        snap("duplicate-of-waiting"),
        work(1),
        snap("released"),
        add(
            "k5",
            json!({}),
            with(keep("k", json!({})), json!({"delay": 600_000})),
        ),
        add(
            "f1",
            json!({"hold": true, "fail": true}),
            keep("f", json!({})),
        ),
        hold(vec![add("f2", json!({"v": 1}), keep("f", json!({})))]),
        snap("requeued-after-failure"),
        work(1),
        snap("released-after-failure"),
        add(
            "r1",
            json!({"hold": true, "failAttempts": 1}),
            with(
                keep("r", json!({})),
                json!({"attempts": 2, "backoff": {"type": "fixed", "delay": 600_000}}),
            ),
        ),
        hold(vec![add("r2", json!({"v": 1}), keep("r", json!({})))]),
        snap("kept-across-retry"),
        json!({"op": "remove", "ref": "r1"}),
        snap("removed-with-kept"),
        add("t1", held.clone(), keep("t", json!({"ttl": 60_000}))),
        hold(vec![add(
            "t2",
            json!({}),
            keep("t", json!({"ttl": 60_000})),
        )]),
        snap("ttl-requeued"),
        work(1),
        add(
            "x1",
            held.clone(),
            keep("x", json!({"ttl": 60_000, "extend": true})),
        ),
        hold(vec![add(
            "x2",
            json!({}),
            with(
                keep("x", json!({"ttl": 60_000, "extend": true})),
                json!({"jobId": "next-x"}),
            ),
        )]),
        snap("extend-requeued"),
        work(1),
        add("p1", held.clone(), keep("p", json!({"replace": true}))),
        hold(vec![add(
            "p2",
            json!({}),
            keep("p", json!({"replace": true})),
        )]),
        snap("replace-requeued"),
        work(1),
        add("b1", held.clone(), keep("b", json!({}))),
        hold(vec![json!({"op": "addBulk", "label": "b2", "jobs": [
            {"name": "job", "data": {"v": 1}, "opts": keep("b", json!({}))},
            {"name": "job", "data": {"v": 2}, "opts": keep("b", json!({}))},
            {"name": "job", "data": {"other": true}, "opts": {}},
        ]})]),
        snap("bulk-requeued"),
        json!({"op": "drain", "delayed": true}),
        snap("drained"),
        add(
            "l1",
            held_retried.clone(),
            with(keep("l", json!({})), retry_later.clone()),
        ),
        hold(vec![add("l2", json!({}), keep("l", json!({})))]),
        snap("kept-before-clean"),
        json!({"op": "clean", "type": "delayed"}),
        snap("cleaned-with-kept"),
        add("o1", held_retried, with(keep("o", json!({})), retry_later)),
        hold(vec![add("o2", json!({}), keep("o", json!({})))]),
        snap("kept-before-obliterate"),
        json!({"op": "obliterate"}),
        snap("obliterated-with-kept"),
    ]
}

// ---------------------------------------------------------------------------------------------
// Our side

/// Lets the processor hold the first attempt of a `hold` job until the scenario releases it.
struct Gate {
    started: Notify,
    release: Semaphore,
}

impl Gate {
    fn new() -> Self {
        Self {
            started: Notify::new(),
            release: Semaphore::new(0),
        }
    }
}

fn truthy(value: Option<&Json>) -> bool {
    !matches!(value, None | Some(Json::Null) | Some(Json::Bool(false)))
}

/// The processor of node/dedup_steps.js.
async fn process(gate: Arc<Gate>, job: Job) -> Result<Json> {
    let data = job.data_value().clone();
    if truthy(data.get("hold")) && job.attempts_made() == 0 {
        gate.started.notify_one();
        gate.release.acquire().await?.forget();
    }
    if truthy(data.get("fail")) {
        bail!("failed on purpose");
    }
    if let Some(n) = data.get("failAttempts").and_then(Json::as_u64) {
        if u64::from(job.attempts_made()) < n {
            bail!("failing attempt {} on purpose", job.attempts_made() + 1);
        }
    }
    Ok(json!({"ok": true}))
}

struct Ours {
    name: String,
    queue: Queue,
    raw: Client,
    gate: Arc<Gate>,
    labels: BTreeMap<String, String>,
    results: Vec<Json>,
}

impl Ours {
    async fn open(name: &str) -> Result<Self> {
        Ok(Self {
            queue: open_queue(name).await?,
            raw: raw_client().await?,
            name: name.to_string(),
            gate: Arc::new(Gate::new()),
            labels: BTreeMap::new(),
            results: Vec::new(),
        })
    }

    async fn start_worker(&self, concurrency: usize) -> Result<(WorkerHandle, Arc<AtomicUsize>)> {
        let ended = Arc::new(AtomicUsize::new(0));
        let (on_done, on_failed) = (ended.clone(), ended.clone());
        let callbacks = WorkerCallbacks::new()
            .on_completed(move |_, _| {
                on_done.fetch_add(1, Ordering::SeqCst);
            })
            .on_failed(move |_| {
                on_failed.fetch_add(1, Ordering::SeqCst);
            });
        let gate = self.gate.clone();
        let processor = move |job: Job, _: JobContext| process(gate.clone(), job);
        let args = WorkerArgs::connect(
            &worker_common::config(),
            &self.name,
            processor,
            WorkerOptions::new().concurrency(concurrency),
        )
        .await?
        .callbacks(callbacks);
        Ok((Worker::spawn(args).await?, ended))
    }

    async fn ended_at_least(ended: &AtomicUsize, n: usize) -> Result<()> {
        eventually(&format!("{n} attempts ended"), PATIENCE, || async {
            ended.load(Ordering::SeqCst) >= n
        })
        .await
    }

    fn run<'a>(&'a mut self, steps: &'a [Json]) -> Pin<Box<dyn Future<Output = Result<()>> + 'a>> {
        Box::pin(async move {
            for step in steps {
                self.step(step)
                    .await
                    .with_context(|| format!("step {step}"))?;
            }
            Ok(())
        })
    }

    async fn step(&mut self, step: &Json) -> Result<()> {
        let label = |field: &str| step[field].as_str().unwrap_or_default().to_string();
        match step["op"].as_str().unwrap_or_default() {
            "add" => {
                let opts: JobOptions = serde_json::from_value(step["opts"].clone())?;
                let job = self
                    .queue
                    .add_job(label("name"), step["data"].clone(), opts)
                    .await?;
                self.labels.insert(label("label"), job.id().to_string());
                self.results
                    .push(json!({"add": label("label"), "id": job.id()}));
            }
            "addBulk" => {
                let mut jobs = Vec::new();
                for job in step["jobs"].as_array().into_iter().flatten() {
                    let opts: JobOptions = serde_json::from_value(job["opts"].clone())?;
                    let name = job["name"].as_str().unwrap_or_default().to_string();
                    jobs.push((name, job["data"].clone(), opts));
                }
                let ids: Vec<String> = self
                    .queue
                    .add_bulk(jobs)
                    .await?
                    .iter()
                    .map(|job| job.id().to_string())
                    .collect();
                self.results
                    .push(json!({"add": label("label"), "ids": ids}));
            }
            "work" => {
                let (worker, ended) = self.start_worker(1).await?;
                let attempts = step["attempts"].as_u64().unwrap_or(1) as usize;
                Self::ended_at_least(&ended, attempts).await?;
                worker.close().await?;
            }
            "hold" => {
                let (worker, ended) = self.start_worker(1).await?;
                tokio::time::timeout(PATIENCE, self.gate.started.notified())
                    .await
                    .context("the held job did not start")?;
                let nested = step["steps"].as_array().cloned().unwrap_or_default();
                self.run(&nested).await?;
                // Paused first: the finishing job then fetches nothing, as Node's closing worker.
                worker.pause()?;
                self.gate.release.add_permits(1);
                Self::ended_at_least(&ended, 1).await?;
                worker.close().await?;
            }
            "snap" => {
                let state = snapshot(&self.raw, &self.name).await?;
                self.results
                    .push(json!({"snap": label("label"), "state": state}));
            }
            "remove" => {
                let id = self
                    .labels
                    .get(&label("ref"))
                    .ok_or_else(|| anyhow!("no add labelled {}", label("ref")))?;
                self.queue.remove(id).await?;
            }
            "clean" => {
                self.queue
                    .clean(
                        ractor_bullmq::CleanOptions::new(Duration::ZERO)
                            .limit(0)
                            .state(label("type").parse()?),
                    )
                    .await?;
            }
            "drain" => {
                self.queue
                    .drain(step["delayed"].as_bool().unwrap_or(false))
                    .await?;
            }
            "obliterate" => {
                self.queue.pause().await?;
                self.queue.obliterate(true).await?;
            }
            other => bail!("unknown step {other}"),
        }
        Ok(())
    }
}

/// The state node/dedup_steps.js reports, read from our queue.
async fn snapshot(raw: &Client, queue: &str) -> Result<Json> {
    let base = format!("{PREFIX}:{queue}:");
    let (mut de, mut dn) = (serde_json::Map::new(), serde_json::Map::new());
    for key in queue_keys(queue).await? {
        if let Some(id) = key.strip_prefix(&format!("{base}de:")) {
            let value: Option<String> = raw.get(&key).await?;
            let pttl: i64 = raw.pttl(&key).await?;
            de.insert(id.to_string(), json!({"value": value, "ttl": pttl > 0}));
        } else if let Some(id) = key.strip_prefix(&format!("{base}dn:")) {
            let fields: BTreeMap<String, String> = raw.hgetall(&key).await?;
            let fields: serde_json::Map<String, Json> = fields
                .into_iter()
                .map(|(field, value)| {
                    let value = match field.as_str() {
                        "data" | "opts" => parsed(&value),
                        _ => Json::String(value),
                    };
                    (field, value)
                })
                .collect();
            dn.insert(id.to_string(), Json::Object(fields));
        }
    }
    let mut lists = serde_json::Map::new();
    let mut ids = std::collections::BTreeSet::new();
    for list in ["wait", "active"] {
        let members: Vec<String> = raw.lrange(format!("{base}{list}"), 0, -1).await?;
        ids.extend(members.iter().cloned());
        lists.insert(list.to_string(), json!(members));
    }
    for zset in ["delayed", "prioritized", "completed", "failed"] {
        let mut members: Vec<String> = raw
            .zrange(format!("{base}{zset}"), 0, -1, None, false, None, false)
            .await?;
        members.sort();
        ids.extend(members.iter().cloned());
        lists.insert(zset.to_string(), json!(members));
    }
    let counter: Option<String> = raw.get(format!("{base}id")).await?;
    let mut jobs = serde_json::Map::new();
    for id in ids {
        let values: Vec<Option<String>> = raw
            .hmget(format!("{base}{id}"), JOB_FIELDS.to_vec())
            .await?;
        let job: serde_json::Map<String, Json> = JOB_FIELDS
            .iter()
            .zip(values)
            .filter_map(|(field, value)| {
                let value = value?;
                let value = match *field {
                    "data" | "opts" | "returnvalue" => parsed(&value),
                    _ => Json::String(value),
                };
                Some((field.to_string(), value))
            })
            .collect();
        jobs.insert(id, Json::Object(job));
    }
    let events: Vec<Json> = read_events(queue)
        .await?
        .into_iter()
        .filter(|e| {
            matches!(
                e.event.as_str(),
                "added" | "deduplicated" | "removed" | "waiting" | "delayed"
            )
        })
        .map(|e| {
            let mut fields = serde_json::Map::new();
            fields.insert("event".into(), json!(e.event));
            for (k, v) in e.fields {
                let v = if k == "delay" {
                    "<time>".to_string()
                } else {
                    v
                };
                fields.insert(k, json!(v));
            }
            Json::Object(fields)
        })
        .collect();
    Ok(json!({"de": de, "dn": dn, "lists": lists, "id": counter, "jobs": jobs, "events": events}))
}

fn parsed(text: &str) -> Json {
    serde_json::from_str(text).unwrap_or_else(|_| Json::String(text.to_string()))
}

// ---------------------------------------------------------------------------------------------
// Comparison

/// Runs `steps` through Node and through us on fresh queues; returns (node, ours) reports.
async fn both(tag: &str, steps: &[Json]) -> Result<(Vec<Json>, Vec<Json>)> {
    let node_queue = unique_queue(&format!("dd-node-{tag}"));
    let node = run_node(
        "dedup_steps.js",
        &json!({"queue": node_queue, "steps": steps}),
    )
    .await?;
    let node = node["results"].as_array().cloned().unwrap_or_default();

    let name = unique_queue(&format!("dd-rust-{tag}"));
    let mut ours = Ours::open(&name).await?;
    ours.run(steps).await?;
    ours.queue.close().await?;
    ours.raw.quit().await?;
    cleanup(&node_queue).await?;
    cleanup(&name).await?;
    Ok((node, ours.results))
}

/// Asserts both sides reported the same, report by report (the first difference named).
fn assert_same(tag: &str, node: &[Json], ours: &[Json]) {
    assert_eq!(
        ours.len(),
        node.len(),
        "{tag}: {} reports from us, {} from Node",
        ours.len(),
        node.len()
    );
    for (theirs, mine) in node.iter().zip(ours) {
        if let Some(label) = theirs.get("add") {
            assert_eq!(mine.get("add"), Some(label), "{tag}: reports out of step");
            assert_eq!(
                mine["id"], theirs["id"],
                "{tag}: add {label} returned another id"
            );
            assert_eq!(
                mine["ids"], theirs["ids"],
                "{tag}: add {label} returned other ids"
            );
        } else {
            let label = &theirs["snap"];
            assert_eq!(&mine["snap"], label, "{tag}: reports out of step");
            for field in ["de", "dn", "lists", "id", "jobs", "events"] {
                assert_eq!(
                    mine["state"][field], theirs["state"][field],
                    "{tag}, snapshot {label}: `{field}` differs from Node's"
                );
            }
        }
    }
}

/// The report labelled `label` (an add's `id` or a snapshot's `state`).
fn report<'a>(reports: &'a [Json], label: &str) -> &'a Json {
    reports
        .iter()
        .find(|r| r["snap"] == label || r["add"] == label)
        .unwrap_or_else(|| panic!("no report {label}"))
}

fn created(reports: &[Json], label: &str, owner: &str) -> bool {
    report(reports, label)["id"] != report(reports, owner)["id"]
}

async fn lifecycle(tag: &str, mode: Json, released_on_finish: bool) -> Result<()> {
    if !node_available() {
        return Ok(());
    }
    let (node, ours) = both(tag, &lifecycle_steps(&mode)).await?;
    // What Node does, so the scenario shows what it is meant to show.
    let completed = &report(&node, "completed")["state"];
    assert_eq!(
        completed["de"].get("c").is_none(),
        released_on_finish,
        "{tag}: {completed}"
    );
    assert!(
        !created(&node, "c2", "c1"),
        "a waiting owner absorbs its duplicate"
    );
    assert_eq!(created(&node, "c3", "c1"), released_on_finish, "{tag}");
    assert_eq!(created(&node, "e2", "e1"), released_on_finish, "{tag}");
    assert_eq!(created(&node, "f2", "f1"), released_on_finish, "{tag}");
    assert_eq!(
        report(&node, "retrying")["state"]["de"]["r"]["value"],
        report(&node, "r1")["id"],
        "{tag}: a retry keeps the window"
    );
    assert!(created(&node, "m2", "m1"), "{tag}: removal releases");
    assert!(created(&node, "l2", "l1"), "{tag}: clean releases");
    assert!(created(&node, "d2", "d1"), "{tag}: drain releases");
    assert!(
        report(&node, "obliterated")["state"]["de"]
            .get("o")
            .is_none(),
        "{tag}: obliterate releases"
    );
    assert_same(tag, &node, &ours);
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn simple_mode_window_follows_node_through_every_lifecycle() -> Result<()> {
    lifecycle("simple", json!({}), true).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ttl_window_follows_node_through_every_lifecycle() -> Result<()> {
    lifecycle("ttl", json!({"ttl": 60_000}), false).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn extend_window_follows_node_through_every_lifecycle() -> Result<()> {
    lifecycle("extend", json!({"ttl": 60_000, "extend": true}), false).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replace_window_follows_node_through_every_lifecycle() -> Result<()> {
    lifecycle("replace", json!({"replace": true}), true).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reschedule_window_follows_node_through_every_lifecycle() -> Result<()> {
    lifecycle("reschedule", json!({"reschedule": true}), true).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keep_last_if_active_follows_node() -> Result<()> {
    if !node_available() {
        return Ok(());
    }
    let (node, ours) = both("keep-last", &keep_last_steps()).await?;
    let kept = &report(&node, "kept")["state"];
    assert_eq!(
        kept["dn"]["k"]["data"],
        json!({"v": 2}),
        "the latest wins: {kept}"
    );
    assert_eq!(report(&node, "k3")["id"], report(&node, "k1")["id"]);
    let requeued = &report(&node, "requeued")["state"];
    assert_eq!(requeued["de"]["k"]["value"], kept["dn"]["k"]["jid"]);
    assert!(requeued["dn"].as_object().is_some_and(|dn| dn.is_empty()));
    assert!(
        report(&node, "kept-across-retry")["state"]["dn"]
            .get("r")
            .is_some()
            && report(&node, "removed-with-kept")["state"]["dn"]
                .get("r")
                .is_none()
    );
    let bulk = &report(&node, "bulk-requeued")["state"];
    let kept_id = bulk["de"]["b"]["value"].as_str().unwrap_or_default();
    assert_eq!(bulk["jobs"][kept_id]["data"], json!({"v": 2}), "{bulk}");
    for (kept, gone, id) in [
        ("kept-before-clean", "cleaned-with-kept", "l"),
        ("kept-before-obliterate", "obliterated-with-kept", "o"),
    ] {
        assert!(
            report(&node, kept)["state"]["dn"].get(id).is_some(),
            "{kept}"
        );
        let state = &report(&node, gone)["state"];
        assert!(
            state["dn"].get(id).is_none() && state["de"].get(id).is_none(),
            "{gone}: {state}"
        );
    }
    assert_same("keep-last", &node, &ours);
    Ok(())
}

/// Node's finish script raises on a kept duplicate whose options are not JSON (after it has
/// written); ours must not, since it finishes a whole batch in one call: the payload becomes a
/// job holding the options verbatim (numbers out of range count as absent), which the worker
/// then fails as corrupted, a payload key of
/// another type is left alone, a window key of another type is not taken for this job's, and
/// every job of the batch is finished.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kept_duplicates_that_cannot_be_queued_never_stop_the_batch() -> Result<()> {
    let name = unique_queue("dd-corrupt");
    let ours = Ours::open(&name).await?;
    let base = format!("{PREFIX}:{name}:");
    let mut owners = BTreeMap::new();
    for id in ["a", "b", "c", "d"] {
        let opts: JobOptions = serde_json::from_value(dedup(&json!({}), id))?;
        owners.insert(
            id,
            ours.queue
                .add_job("job", json!({}), opts)
                .await?
                .id()
                .to_string(),
        );
    }
    let plain = ours
        .queue
        .add_job("job", json!({}), JobOptions::new())
        .await?;
    let raw = &ours.raw;
    let _: i64 = raw
        .hset(
            format!("{base}dn:a"),
            vec![
                ("name", "job"),
                ("data", "{}"),
                ("opts", "not json"),
                ("jid", "corrupt-a"),
            ],
        )
        .await?;
    let _: () = raw
        .set(format!("{base}dn:b"), "garbage", None, None, false)
        .await?;
    // Numbers no Redis command takes (cjson decodes 1e400 as infinity).
    let huge = r#"{"de":{"id":"c","ttl":1e400},"delay":1e400,"priority":1e400}"#;
    let _: i64 = raw
        .hset(
            format!("{base}dn:c"),
            vec![
                ("name", "job"),
                ("data", "{}"),
                ("opts", huge),
                ("jid", "huge-c"),
            ],
        )
        .await?;
    let _: i64 = raw.del(format!("{base}de:d")).await?;
    let _: i64 = raw
        .hset(format!("{base}de:d"), ("owner", "someone"))
        .await?;

    let (worker, ended) = ours.start_worker(10).await?;
    Ours::ended_at_least(&ended, 7).await?;
    worker.close().await?;

    let left: Option<String> = raw.get(format!("{base}dn:b")).await?;
    assert_eq!(left.as_deref(), Some("garbage"));
    let window: BTreeMap<String, String> = raw.hgetall(format!("{base}de:d")).await?;
    assert_eq!(window.get("owner").map(String::as_str), Some("someone"));
    // Out of the snapshot's way, which reads these keys as their usual types.
    let _: i64 = raw
        .del(vec![format!("{base}dn:b"), format!("{base}de:d")])
        .await?;
    let state = snapshot(raw, &name).await?;
    let mut finished: Vec<String> = owners.values().cloned().collect();
    finished.push(plain.id().to_string());
    finished.sort();
    assert_eq!(state["lists"]["completed"], json!(finished), "{state}");
    assert_eq!(
        state["lists"]["failed"],
        json!(["corrupt-a", "huge-c"]),
        "{state}"
    );
    assert_eq!(state["jobs"]["huge-c"]["delay"], json!("0"), "{state}");
    let corrupt = &state["jobs"]["corrupt-a"];
    assert_eq!(corrupt["opts"], json!("not json"), "{state}");
    assert_eq!(corrupt["deid"], json!("a"), "{state}");
    assert!(
        corrupt["failedReason"]
            .as_str()
            .is_some_and(|reason| reason.contains("opts")),
        "{state}"
    );
    assert_eq!(state["de"], json!({}), "{state}");
    assert_eq!(state["dn"], json!({}), "{state}");
    ours.queue.close().await?;
    ours.raw.quit().await?;
    cleanup(&name).await
}

/// A Node producer's duplicate of a job our Worker is running is kept by Node in `dn:` and
/// queued by our Worker when the job completes, with Node's data, options and id.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn our_worker_queues_the_duplicate_a_node_producer_kept() -> Result<()> {
    if !node_available() {
        return Ok(());
    }
    let name = unique_queue("dd-node-producer");
    let mut ours = Ours::open(&name).await?;
    let keep = json!({"deduplication": {"id": "k", "keepLastIfActive": true}});
    ours.run(&[add("k1", json!({"hold": true}), keep.clone())])
        .await?;
    let (worker, ended) = ours.start_worker(1).await?;
    tokio::time::timeout(PATIENCE, ours.gate.started.notified())
        .await
        .context("the held job did not start")?;
    let node = run_node(
        "dedup_steps.js",
        &json!({"queue": name, "steps": [
            add("k2", json!({"from": "node"}), with(keep.clone(), json!({"lifo": true}))),
            snap("kept"),
        ]}),
    )
    .await?;
    let reports = node["results"].as_array().cloned().unwrap_or_default();
    let next_id = report(&reports, "kept")["state"]["dn"]["k"]["jid"].clone();
    assert_eq!(report(&reports, "k2")["id"], json!(ours.labels["k1"]));
    worker.pause()?;
    ours.gate.release.add_permits(1);
    Ours::ended_at_least(&ended, 1).await?;
    worker.close().await?;

    let state = snapshot(&ours.raw, &name).await?;
    let id = next_id.as_str().context("no kept job id")?;
    assert_eq!(state["lists"]["wait"], json!([id]), "{state}");
    assert_eq!(
        state["de"]["k"],
        json!({"value": id, "ttl": false}),
        "{state}"
    );
    assert_eq!(state["dn"], json!({}), "{state}");
    let job = &state["jobs"][id];
    assert_eq!(job["data"], json!({"from": "node"}), "{state}");
    assert_eq!(job["opts"]["lifo"], json!(true), "{state}");
    assert_eq!(job["deid"], json!("k"), "{state}");
    // Node reads the job we queued as its own.
    let read = run_node("read_jobs.js", &json!({"queue": name, "ids": [id]})).await?;
    assert_eq!(read["jobs"][0]["data"], json!({"from": "node"}), "{read}");
    assert_eq!(read["jobs"][0]["state"], json!("waiting"), "{read}");
    ours.queue.close().await?;
    ours.raw.quit().await?;
    cleanup(&name).await
}

/// Our duplicate of a job a Node Worker is running is kept in `dn:` in the layout Node reads:
/// Node's Worker queues it with our data, options and id when the job completes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_worker_queues_the_duplicate_we_kept() -> Result<()> {
    if !node_available() {
        return Ok(());
    }
    let name = unique_queue("dd-rust-producer");
    let ours = Ours::open(&name).await?;
    let keep = json!({"deduplication": {"id": "k", "keepLastIfActive": true}});
    let steps = json!([
        add("k1", json!({"hold": true}), keep.clone()),
        hold(vec![json!({"op": "waitFor", "key": "dn:k"})]),
        snap("requeued"),
    ]);
    let args = json!({"queue": name, "steps": steps});
    let node = tokio::spawn(async move { run_node("dedup_steps.js", &args).await });
    let active = format!("{PREFIX}:{name}:active");
    eventually("Node runs the held job", PATIENCE, || async {
        let ids: Vec<String> = ours.raw.lrange(&active, 0, -1).await.unwrap_or_default();
        !ids.is_empty()
    })
    .await?;
    let opts: JobOptions = serde_json::from_value(with(keep, json!({"priority": 3})))?;
    let duplicate = ours
        .queue
        .add_job("job", json!({"from": "rust"}), opts)
        .await?;
    let node = node.await??;
    let reports = node["results"].as_array().cloned().unwrap_or_default();
    assert_eq!(duplicate.id(), report(&reports, "k1")["id"]);

    let state = &report(&reports, "requeued")["state"];
    let id = state["de"]["k"]["value"].as_str().context("no window")?;
    assert_ne!(id, duplicate.id(), "{state}");
    assert_eq!(state["lists"]["prioritized"], json!([id]), "{state}");
    assert_eq!(state["dn"], json!({}), "{state}");
    assert_eq!(
        state["jobs"][id]["data"],
        json!({"from": "rust"}),
        "{state}"
    );
    assert_eq!(state["jobs"][id]["priority"], json!("3"), "{state}");
    // And we read the job Node queued.
    let job = ours.queue.get_job(id).await?.context("queued job")?;
    assert_eq!(job.deduplication_id(), Some("k"));
    ours.queue.close().await?;
    ours.raw.quit().await?;
    cleanup(&name).await
}
