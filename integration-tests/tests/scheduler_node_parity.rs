//! Job schedulers, differential against Node BullMQ 6.7.0: the same `upsertJobScheduler`
//! through Node (`node/schedulers.js`, on queue A) and through our `Queue` (queue B) leaves the
//! same raw Redis state — the `repeat` zset, the `repeat:{id}` hash, the pending iteration (id,
//! state, delayed score, hash, options) and its events — and both sides read, count and remove
//! each other's schedulers alike. Refusals are compared by Node's message text.
//!
//! The two runs happen a few hundred ms apart, so values derived from "now" differ: every
//! number inside the window `[before, after]` of its own run is replaced with `<now>`, an
//! iteration's `delay` is replaced with its ready-at time (`timestamp + delay`), and the phase
//! an `every` scheduler without offset stores (`now mod every`) with `<phase>`. Schedules are
//! chosen so that everything else is the same whenever the runs happen (slots far from now).

mod common;
mod scheduler_common;
mod worker_common;

use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

use anyhow::{Context, Result};
use bullmq_protocol::options::JobOptions;
use common::{
    cleanup, node_available, now_ms, open_queue, queue_keys, raw_client, read_events, run_node,
    unique_queue,
};
use fred::prelude::SortedSetsInterface;
use fred::prelude::{Client, ClientLike, HashesInterface, KeysInterface, ListInterface};
use ractor_bullmq::scheduler::{Repeat, SchedulerTemplate};
use ractor_bullmq::Queue;
use serde_json::{json, Value as Json};

const MINUTE: u64 = 60_000;
const DAY: u64 = 86_400_000;

/// The time window of one run: values derived from its "now" fall inside it.
#[derive(Debug, Clone, Copy)]
struct Window {
    lo: u64,
    hi: u64,
}

impl Window {
    fn contains(self, v: u64) -> bool {
        // 5 ms of slack: Lua's now and the caller's clock are read at different moments.
        v + 5 >= self.lo && v <= self.hi + 5
    }
}

/// The windows of every run on one queue: a value is now-derived when it is in any, unless
/// the test chose it itself (`.1`: a fixed start date can fall inside a slow run's window).
#[derive(Debug, Clone, Default)]
struct Windows(Vec<Window>, Vec<u64>);

impl Windows {
    fn contains(&self, v: u64) -> bool {
        !self.1.contains(&v) && self.0.iter().any(|w| w.contains(v))
    }
}

fn as_u64(v: &Json) -> Option<u64> {
    match v {
        Json::Number(n) => n.as_u64().or_else(|| n.as_f64().map(|f| f as u64)),
        Json::String(s) => s.parse().ok(),
        _ => None,
    }
}

/// Replaces now-derived numbers (and the millis of `repeat:{id}:{millis}` ids) with `<now>`.
fn normalize(v: &Json, w: &Windows) -> Json {
    match v {
        Json::Object(map) => Json::Object(
            map.iter()
                .map(|(k, v)| (normalize_str(k, w), normalize(v, w)))
                .collect(),
        ),
        Json::Array(items) => Json::Array(items.iter().map(|v| normalize(v, w)).collect()),
        Json::Number(_) => match as_u64(v) {
            Some(n) if w.contains(n) => json!("<now>"),
            _ => v.clone(),
        },
        Json::String(s) => json!(normalize_str(s, w)),
        other => other.clone(),
    }
}

fn normalize_str(s: &str, w: &Windows) -> String {
    if let Ok(n) = s.parse::<u64>() {
        return if w.contains(n) {
            "<now>".into()
        } else {
            s.into()
        };
    }
    if let Some((head, tail)) = s.rsplit_once(':') {
        if head.contains("repeat:") && tail.len() >= 12 {
            if let Ok(n) = tail.parse::<u64>() {
                if w.contains(n) {
                    return format!("{head}:<now>");
                }
            }
        }
    }
    s.into()
}

/// Every key of `queue` (suffix after `bull:{queue}:`) with comparable content, normalised
/// with the run's window.
async fn snapshot(raw: &Client, queue: &str, w: &Windows) -> Result<BTreeMap<String, Json>> {
    let base = format!("bull:{queue}:");
    let mut out = BTreeMap::new();
    let mut repeat_scores: HashMap<String, u64> = HashMap::new();
    let keys = queue_keys(queue).await?;
    if let Some(key) = keys.iter().find(|k| k.as_str() == format!("{base}repeat")) {
        let v: Vec<(String, f64)> = raw.zrange(key, 0, -1, None, false, None, true).await?;
        repeat_scores = v.into_iter().map(|(m, s)| (m, s as u64)).collect();
    }
    for key in keys {
        let suffix = key.trim_start_matches(&base).to_string();
        let kind: String = raw.r#type(&key).await?;
        let content = match kind.as_str() {
            "hash" => {
                let hash: HashMap<String, String> = raw.hgetall(&key).await?;
                let mut fields: serde_json::Map<String, Json> = hash
                    .into_iter()
                    .map(|(k, v)| {
                        let parsed = match k.as_str() {
                            "data" | "opts" => serde_json::from_str(&v).unwrap_or(Json::String(v)),
                            _ => Json::String(v),
                        };
                        (k, parsed)
                    })
                    .collect();
                if fields.contains_key("rjk") {
                    ready_at_for_delay(&mut fields);
                }
                if let Some(id) = suffix.strip_prefix("repeat:") {
                    phase_of_now(&mut fields, repeat_scores.get(id).copied(), w);
                }
                Json::Object(fields)
            }
            "list" => json!(raw.lrange::<Vec<String>, _>(&key, 0, -1).await?),
            "zset" => {
                let v: Vec<(String, f64)> =
                    raw.zrange(&key, 0, -1, None, false, None, true).await?;
                if suffix == "delayed" {
                    // Ready-at time and the same-millisecond counter of Node's delayed score.
                    json!(v
                        .iter()
                        .map(|(m, s)| json!([m, (*s as u64) >> 12, (*s as u64) & 0xfff]))
                        .collect::<Vec<_>>())
                } else {
                    json!(v)
                }
            }
            "string" => json!(raw.get::<String, _>(&key).await?),
            "stream" => {
                let events = read_events(queue).await?;
                json!(events
                    .iter()
                    .map(|e| (e.event.clone(), e.fields.clone()))
                    .collect::<Vec<_>>())
            }
            other => json!(other),
        };
        out.insert(normalize_str(&suffix, w), normalize(&content, w));
    }
    Ok(out)
}

/// An iteration's `delay` (hash and opts) is `next - now`: replaced with the ready-at time
/// `timestamp + delay`, the same on both sides.
fn ready_at_for_delay(fields: &mut serde_json::Map<String, Json>) {
    let ts = fields.get("timestamp").and_then(as_u64).unwrap_or(0);
    let ready = |d: u64| {
        if d == 0 {
            json!(0)
        } else {
            json!({"readyAt": ts + d})
        }
    };
    if let Some(d) = fields.get("delay").and_then(as_u64) {
        fields.insert("delay".into(), ready(d));
    }
    if let Some(Json::Object(opts)) = fields.get_mut("opts") {
        if let Some(d) = opts.get("delay").and_then(as_u64) {
            opts.insert("delay".into(), ready(d));
        }
    }
}

/// The offset an `every` scheduler without one stores is the phase of its first run: `<phase>`
/// when that run was "now".
fn phase_of_now(fields: &mut serde_json::Map<String, Json>, score: Option<u64>, w: &Windows) {
    let (Some(score), Some(every), Some(offset)) = (
        score,
        fields.get("every").and_then(as_u64),
        fields.get("offset").and_then(as_u64),
    ) else {
        return;
    };
    if every > 0 && w.contains(score) && offset == score % every {
        fields.insert("offset".into(), json!("<phase>"));
    }
}

/// Our `Repeat` and `SchedulerTemplate` from the JSON Node takes.
fn ours(repeat: &Json, template: &Json) -> Result<(Repeat, SchedulerTemplate)> {
    let repeat: Repeat = serde_json::from_value(repeat.clone()).context("repeat")?;
    let mut t = match template["name"].as_str() {
        Some(name) => SchedulerTemplate::new(name),
        None => SchedulerTemplate::default(),
    };
    if !template["data"].is_null() {
        t = t.data(template["data"].clone());
    }
    if !template["opts"].is_null() {
        let opts: JobOptions = serde_json::from_value(template["opts"].clone())?;
        t = t.opts(opts);
    }
    Ok((repeat, t))
}

/// Node's upsert on `queue`: its output (`{result}` or `{error}`) and the run's window.
async fn node_upsert(
    queue: &str,
    id: &str,
    repeat: &Json,
    template: &Json,
) -> Result<(Json, Window)> {
    let lo = now_ms();
    let mut arg = json!({"queue": queue, "op": "upsert", "id": id, "repeat": repeat});
    if !template.is_null() {
        arg["template"] = template.clone();
    }
    let out = run_node("schedulers.js", &arg).await?;
    Ok((out, Window { lo, hi: now_ms() }))
}

/// Our upsert: `{result: {id, delay, name, data}}` or `{error}` as Node's script prints, and
/// the window.
async fn rust_upsert(
    q: &Queue,
    id: &str,
    repeat: &Json,
    template: &Json,
) -> Result<(Json, Window)> {
    let (r, t) = ours(repeat, template)?;
    let lo = now_ms();
    let outcome = q.upsert_job_scheduler(id, r, t).await;
    let w = Window { lo, hi: now_ms() };
    let out = match outcome {
        Ok(Some(job)) => json!({"result": {
            "id": job.id(), "delay": job.delay().as_millis() as u64,
            "name": job.name(), "data": job.data_value(),
        }}),
        Ok(None) => json!({"result": null}),
        Err(e) => json!({"error": e.to_string()}),
    };
    Ok((out, w))
}

/// The returned pending iteration, comparable: normalised id, name, data (delay checked apart).
fn returned(out: &Json, w: Window, fixed: &[u64]) -> Json {
    let r = &out["result"];
    if r.is_null() {
        return json!(null);
    }
    json!({"id": normalize_str(r["id"].as_str().unwrap_or(""), &Windows(vec![w], fixed.to_vec())), "name": r["name"], "data": r["data"]})
}

/// A pair of queues: A written by Node, B by us.
struct Pair {
    a: String,
    b: String,
    q: Queue,
    raw: Client,
    wa: Windows,
    wb: Windows,
}

impl Pair {
    async fn new(label: &str) -> Result<Self> {
        let a = unique_queue(&format!("sp-node-{label}"));
        let b = unique_queue(&format!("sp-rust-{label}"));
        let q = open_queue(&b).await?;
        Ok(Self {
            a,
            b,
            q,
            raw: raw_client().await?,
            wa: Windows::default(),
            wb: Windows::default(),
        })
    }

    /// Values this test chose (start dates, the slots they give), never taken for "now"
    /// even when a slow run's window reaches them; `&[]` once a worker ran, whose window
    /// then holds them on both sides alike.
    fn fix(&mut self, values: &[u64]) {
        self.wa.1 = values.to_vec();
        self.wb.1 = values.to_vec();
    }

    /// The same upsert on both sides; both outputs (normalised) must agree.
    async fn upsert(&mut self, id: &str, repeat: Json, template: Json) -> Result<Json> {
        let (n, wa) = node_upsert(&self.a, id, &repeat, &template).await?;
        let (r, wb) = rust_upsert(&self.q, id, &repeat, &template).await?;
        self.wa.0.push(wa);
        self.wb.0.push(wb);
        assert_eq!(
            n.get("error"),
            r.get("error"),
            "refusals differ for {id} {repeat}"
        );
        assert_eq!(
            returned(&n, wa, &self.wa.1),
            returned(&r, wb, &self.wb.1),
            "returned iteration of {id} {repeat}"
        );
        if let (Some(dn), Some(dr)) = (n["result"]["delay"].as_u64(), r["result"]["delay"].as_u64())
        {
            // next - now on each side: the same next, nows a run apart.
            let slack = (wa.hi - wa.lo) + (wb.hi - wb.lo) + (wb.hi.max(wa.hi) - wa.lo.min(wb.lo));
            assert!(
                dn.abs_diff(dr) <= slack,
                "delay node {dn} ours {dr} (slack {slack})"
            );
        }
        Ok(n)
    }

    /// Both queues' raw state, normalised, must be the same.
    async fn assert_same(&self, what: &str) -> Result<BTreeMap<String, Json>> {
        let node = snapshot(&self.raw, &self.a, &self.wa).await?;
        let mine = snapshot(&self.raw, &self.b, &self.wb).await?;
        assert_eq!(
            mine.keys().collect::<Vec<_>>(),
            node.keys().collect::<Vec<_>>(),
            "{what}: keys differ"
        );
        for (key, value) in &node {
            assert_eq!(&mine[key], value, "{what}: key `{key}` differs");
        }
        Ok(node)
    }

    /// Neither side wrote anything but the queue's `meta` (which a Node `Queue` writes in
    /// the background when it opens, and may not have written before it was closed).
    async fn assert_nothing_written(&self, what: &str) -> Result<()> {
        for queue in [&self.a, &self.b] {
            let keys: Vec<String> = queue_keys(queue)
                .await?
                .into_iter()
                .filter(|k| !k.ends_with(":meta"))
                .collect();
            assert!(keys.is_empty(), "{what}: {queue} has {keys:?}");
        }
        Ok(())
    }

    async fn close(self) -> Result<()> {
        self.q.close().await?;
        self.raw.quit().await?;
        cleanup(&self.a).await?;
        cleanup(&self.b).await
    }
}

/// An offset that puts the next `every` slot about half an interval away from now, so both
/// runs land on the same slot.
fn far_offset(every: u64) -> u64 {
    let phase = (now_ms() % every + every / 2) % every;
    phase.max(1)
}

/// Waits while `now` is within `margin` ms of a multiple of `period` (a cron boundary), so
/// two runs a moment apart see the same next run.
async fn away_from_boundary(period: u64, margin: u64) {
    loop {
        let phase = now_ms() % period;
        if phase > margin && phase < period - margin {
            return;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// One scheduler created through each side: same raw state.
async fn single(
    label: &str,
    id: &str,
    repeat: Json,
    template: Json,
) -> Result<BTreeMap<String, Json>> {
    let mut pair = Pair::new(label).await?;
    let out = pair.upsert(id, repeat.clone(), template).await?;
    assert!(out.get("error").is_none(), "Node refused {repeat}: {out}");
    let snap = pair.assert_same(label).await?;
    pair.close().await?;
    Ok(snap)
}

#[tokio::test]
async fn every_leaves_the_same_state_as_node() -> Result<()> {
    if !node_available() {
        return Ok(());
    }
    let snap = single(
        "every",
        "ev",
        json!({"every": MINUTE}),
        json!({"name": "tick", "data": {"a": 1}}),
    )
    .await?;
    // First run now: waiting, with the phase of now stored as the offset.
    assert_eq!(snap["wait"], json!(["repeat:ev:<now>"]), "{snap:?}");
    assert_eq!(snap["repeat:ev"]["offset"], json!("<phase>"), "{snap:?}");
    let events: Vec<&str> = snap["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e[0].as_str().unwrap())
        .collect();
    assert_eq!(events, ["added", "waiting"]);
    Ok(())
}

#[tokio::test]
async fn every_with_offset_leaves_the_same_state_as_node() -> Result<()> {
    if !node_available() {
        return Ok(());
    }
    let offset = far_offset(MINUTE);
    let snap = single(
        "every-off",
        "evo",
        json!({"every": MINUTE, "offset": offset}),
        json!({"name": "tick", "data": {"n": [1, 2]}, "opts": {"attempts": 2, "removeOnComplete": 3}}),
    )
    .await?;
    assert_eq!(snap["repeat:evo"]["offset"], json!(offset.to_string()));
    assert!(snap.contains_key("delayed"), "{snap:?}");
    let opts = &snap
        .iter()
        .find(|(k, _)| k.starts_with("repeat:evo:"))
        .unwrap()
        .1["opts"];
    assert_eq!(opts["attempts"], json!(2), "{opts}");
    assert_eq!(opts["repeat"]["offset"], json!(offset), "{opts}");
    Ok(())
}

#[tokio::test]
async fn every_without_attempts_stores_none() -> Result<()> {
    if !node_available() {
        return Ok(());
    }
    // No template options: Node stores no `opts` field on the scheduler and no `attempts` on
    // the iteration.
    let snap = single(
        "every-bare",
        "bare",
        json!({"every": 5 * MINUTE, "offset": far_offset(5 * MINUTE)}),
        json!(null),
    )
    .await?;
    let hash = &snap["repeat:bare"];
    assert!(
        hash.get("opts").is_none() && hash.get("data").is_none(),
        "{hash}"
    );
    assert_eq!(hash["name"], json!("bare"), "the name defaults to the id");
    let job = snap
        .iter()
        .find(|(k, _)| k.starts_with("repeat:bare:"))
        .unwrap()
        .1;
    assert!(job["opts"].get("attempts").is_none(), "{job}");
    Ok(())
}

#[tokio::test]
async fn cron_without_tz_leaves_the_same_state_as_node() -> Result<()> {
    if !node_available() {
        return Ok(());
    }
    away_from_boundary(3_600_000, 20_000).await;
    let snap = single(
        "cron",
        "hourly",
        json!({"pattern": "0 * * * *"}),
        json!({"name": "report", "data": {"k": "v"}, "opts": {"attempts": 3, "backoff": {"type": "fixed", "delay": 100}}}),
    )
    .await?;
    let next = now_ms() / 3_600_000 * 3_600_000 + 3_600_000;
    assert_eq!(snap["repeat"], json!([["hourly", next as f64]]), "{snap:?}");
    assert!(
        snap.contains_key(&format!("repeat:hourly:{next}")),
        "{snap:?}"
    );
    Ok(())
}

#[tokio::test]
async fn cron_with_time_zones_leaves_the_same_state_as_node() -> Result<()> {
    if !node_available() {
        return Ok(());
    }
    single(
        "cron-berlin",
        "berlin",
        json!({"pattern": "30 9 * * 1-5", "tz": "Europe/Berlin"}),
        json!({"name": "b"}),
    )
    .await?;
    single(
        "cron-ny",
        "ny",
        json!({"pattern": "0 0 1 * *", "tz": "America/New_York"}),
        json!({"name": "n", "data": {"x": null}}),
    )
    .await?;
    // `immediately`: a cron scheduler's first run is now (and the flag is not stored).
    let snap = single(
        "cron-now",
        "now",
        json!({"pattern": "0 0 * * *", "immediately": true}),
        json!({"name": "n"}),
    )
    .await?;
    assert_eq!(snap["wait"], json!(["repeat:now:<now>"]), "{snap:?}");
    // With `every` it changes nothing (Node only warns).
    single(
        "every-now",
        "evnow",
        json!({"every": MINUTE, "offset": far_offset(MINUTE), "immediately": true}),
        json!({"name": "n"}),
    )
    .await?;
    // Seconds field.
    away_from_boundary(60_000, 10_000).await;
    single(
        "cron-sec",
        "sec",
        json!({"pattern": "30 0 * * * *", "tz": "America/New_York"}),
        json!({"name": "s"}),
    )
    .await?;
    Ok(())
}

#[tokio::test]
async fn limit_start_and_end_dates_leave_the_same_state_as_node() -> Result<()> {
    if !node_available() {
        return Ok(());
    }
    let snap = single(
        "limit",
        "lim",
        json!({"every": MINUTE, "offset": far_offset(MINUTE), "limit": 3}),
        json!({"name": "l"}),
    )
    .await?;
    assert_eq!(snap["repeat:lim"]["limit"], json!("3"));
    // A fixed start far in the future, whole seconds.
    let start = (now_ms() + 3 * DAY) / 1000 * 1000 + 123;
    let snap = single(
        "start",
        "st",
        json!({"every": MINUTE, "startDate": start}),
        json!({"name": "s"}),
    )
    .await?;
    assert_eq!(snap["repeat"], json!([["st", start as f64]]), "{snap:?}");
    single(
        "start-cron",
        "stc",
        json!({"pattern": "15 4 * * *", "startDate": start, "tz": "Europe/Berlin"}),
        json!({"name": "s"}),
    )
    .await?;
    let end = now_ms() + 2 * DAY;
    away_from_boundary(3_600_000, 20_000).await;
    let snap = single(
        "end",
        "en",
        json!({"pattern": "0 * * * *", "endDate": end, "limit": 10}),
        json!({"name": "e"}),
    )
    .await?;
    assert_eq!(snap["repeat:en"]["endDate"], json!(end.to_string()));
    single(
        "end-every",
        "ene",
        json!({"every": MINUTE, "offset": far_offset(MINUTE), "endDate": end}),
        json!({"name": "e"}),
    )
    .await?;
    // A count given by the user: the iteration is number count + 1.
    let snap = single(
        "count",
        "cnt",
        json!({"every": MINUTE, "offset": far_offset(MINUTE), "limit": 5, "count": 3}),
        json!({"name": "c"}),
    )
    .await?;
    let job = snap
        .iter()
        .find(|(k, _)| k.starts_with("repeat:cnt:"))
        .unwrap()
        .1;
    assert_eq!(job["opts"]["repeat"]["count"], json!(4), "{job}");
    // A limit already reached (count = limit) creates nothing on either side.
    let mut pair = Pair::new("limit-reached").await?;
    let out = pair
        .upsert(
            "done",
            json!({"every": MINUTE, "limit": 2, "count": 2}),
            json!({"name": "d"}),
        )
        .await?;
    assert_eq!(out, json!({"result": null}));
    pair.assert_nothing_written("limit reached").await?;
    pair.close().await?;
    Ok(())
}

#[tokio::test]
async fn updates_replace_the_pending_iteration_as_node_does() -> Result<()> {
    if !node_available() {
        return Ok(());
    }
    let mut pair = Pair::new("update").await?;
    let offset = far_offset(MINUTE);
    let every = json!({"every": MINUTE, "offset": offset});
    pair.upsert(
        "up",
        every.clone(),
        json!({"name": "one", "data": {"v": 1}}),
    )
    .await?;
    let first = pair.assert_same("first upsert").await?;
    let first_id = first
        .keys()
        .find(|k| k.starts_with("repeat:up:"))
        .cloned()
        .unwrap();

    // Same every, new data and options: the pending iteration is replaced in the same slot.
    pair.upsert(
        "up",
        every.clone(),
        json!({"name": "two", "data": {"v": 2}, "opts": {"attempts": 4, "priority": 3}}),
    )
    .await?;
    let second = pair.assert_same("same every, new template").await?;
    assert!(second.contains_key(&first_id), "same slot: {second:?}");
    assert_eq!(second[&first_id]["data"], json!({"v": 2}));
    assert_eq!(second[&first_id]["name"], json!("two"));
    assert_eq!(second["repeat:up"]["ic"], json!("1"));

    // A changed interval starts a new series.
    let offset2 = far_offset(2 * MINUTE);
    pair.upsert(
        "up",
        json!({"every": 2 * MINUTE, "offset": offset2}),
        json!({"name": "three"}),
    )
    .await?;
    let third = pair.assert_same("changed every").await?;
    assert_eq!(third["repeat:up"]["every"], json!((2 * MINUTE).to_string()));

    // From every to a cron pattern.
    away_from_boundary(3_600_000, 20_000).await;
    pair.upsert(
        "up",
        json!({"pattern": "0 * * * *", "tz": "Europe/Berlin"}),
        json!({"name": "four"}),
    )
    .await?;
    let fourth = pair.assert_same("to cron").await?;
    assert_eq!(
        fourth
            .keys()
            .filter(|k| k.starts_with("repeat:up:"))
            .count(),
        1,
        "one pending iteration: {fourth:?}"
    );
    // And the cron pattern updated with data only: same slot again.
    pair.upsert(
        "up",
        json!({"pattern": "0 * * * *", "tz": "Europe/Berlin"}),
        json!({"name": "five", "data": [1]}),
    )
    .await?;
    pair.assert_same("cron, new data").await?;
    pair.close().await
}

#[tokio::test]
async fn refusals_have_node_wording() -> Result<()> {
    if !node_available() {
        return Ok(());
    }
    let past = now_ms() - 60_000;
    let future = now_ms() + DAY;
    // Node's own refusals: the same text.
    let cases = [
        json!({"every": 1000, "endDate": past}),
        json!({"every": 1000, "pattern": "* * * * *"}),
        json!({}),
        json!({"pattern": "* * * * *", "immediately": true, "startDate": future}),
        // `limit: 0` is no refusal: nothing is created (`{result: null}` on both sides).
        json!({"every": 1000, "limit": 0}),
    ];
    let pair = Pair::new("refuse").await?;
    for repeat in cases {
        let (n, _) = node_upsert(&pair.a, "r", &repeat, &json!({"name": "r"})).await?;
        let (r, _) = rust_upsert(&pair.q, "r", &repeat, &json!({"name": "r"})).await?;
        if repeat.get("limit").is_some() {
            assert_eq!(
                (&n, &r),
                (&json!({"result": null}), &json!({"result": null}))
            );
            continue;
        }
        let message = n["error"]
            .as_str()
            .unwrap_or_else(|| panic!("Node accepted {repeat}: {n}"));
        assert_eq!(r["error"].as_str(), Some(message), "for {repeat}");
    }
    // Malformed patterns: cron-parser's text, after the pattern.
    for pattern in ["61 * * * *", "bad", "* * * * * * *", "*/0 * * * *"] {
        let repeat = json!({ "pattern": pattern });
        let (n, _) = node_upsert(&pair.a, "r", &repeat, &json!({"name": "r"})).await?;
        let (r, _) = rust_upsert(&pair.q, "r", &repeat, &json!({"name": "r"})).await?;
        let message = n["error"]
            .as_str()
            .unwrap_or_else(|| panic!("Node accepted {repeat}: {n}"));
        let ours = r["error"]
            .as_str()
            .unwrap_or_else(|| panic!("we accepted {repeat}: {r}"));
        assert!(
            ours.contains(message),
            "for {pattern}: ours {ours:?}, Node {message:?}"
        );
    }
    pair.assert_nothing_written("refusals").await?;
    pair.close().await
}

/// Node's reading of `queue`: get each id, list in both orders and a sub-range, count.
async fn node_reads(queue: &str, ids: &[&str]) -> Result<Json> {
    let mut gets = serde_json::Map::new();
    for id in ids {
        let out = run_node(
            "schedulers.js",
            &json!({"queue": queue, "op": "get", "id": id}),
        )
        .await?;
        gets.insert((*id).into(), out["result"].clone());
    }
    let mut lists = Vec::new();
    for (start, end, asc) in [(0, -1, true), (0, -1, false), (1, 2, true), (0, 0, false)] {
        let out = run_node(
            "schedulers.js",
            &json!({"queue": queue, "op": "list", "start": start, "end": end, "asc": asc}),
        )
        .await?;
        lists.push(out["result"].clone());
    }
    let count = run_node("schedulers.js", &json!({"queue": queue, "op": "count"})).await?;
    Ok(json!({"get": gets, "list": lists, "count": count["result"]}))
}

/// Our reading of `queue`, in the shape of [`node_reads`].
async fn rust_reads(queue: &str, ids: &[&str]) -> Result<Json> {
    let q = open_queue(queue).await?;
    let mut gets = serde_json::Map::new();
    for id in ids {
        gets.insert(
            (*id).into(),
            serde_json::to_value(q.get_job_scheduler(id).await?)?,
        );
    }
    let mut lists = Vec::new();
    for (start, end, asc) in [(0, -1, true), (0, -1, false), (1, 2, true), (0, 0, false)] {
        lists.push(serde_json::to_value(
            q.get_job_schedulers(
                ractor_bullmq::JobSchedulersRange::new()
                    .range(start, end)
                    .asc(asc),
            )
            .await?,
        )?);
    }
    let count = q.get_job_schedulers_count().await?;
    q.close().await?;
    Ok(json!({"get": gets, "list": lists, "count": count}))
}

#[tokio::test]
async fn getters_count_and_remove_agree_across_implementations() -> Result<()> {
    if !node_available() {
        return Ok(());
    }
    away_from_boundary(3_600_000, 20_000).await;
    let mut pair = Pair::new("getters").await?;
    let start = (now_ms() + 5 * DAY) / 1000 * 1000;
    let schedulers = [
        (
            "g-every",
            json!({"every": MINUTE, "offset": far_offset(MINUTE), "limit": 7}),
            json!({"name": "ge", "data": {"a": 1}, "opts": {"attempts": 2, "removeOnComplete": 4, "removeOnFail": {"age": 60}}}),
        ),
        (
            "g-cron",
            json!({"pattern": "0 * * * *", "tz": "America/New_York", "endDate": start + DAY}),
            json!({"name": "gc"}),
        ),
        (
            "g-start",
            json!({"every": 2 * MINUTE, "startDate": start}),
            json!({"data": {"b": [true]}}),
        ),
    ];
    for (id, repeat, template) in &schedulers {
        pair.upsert(id, repeat.clone(), template.clone()).await?;
    }
    pair.assert_same("three schedulers").await?;
    let ids = ["g-every", "g-cron", "g-start", "missing"];

    // Each queue read by Node and by us: the same answers.
    let node_a = node_reads(&pair.a, &ids).await?;
    let rust_a = rust_reads(&pair.a, &ids).await?;
    assert_eq!(rust_a, node_a, "Node's schedulers read by us and by Node");
    let node_b = node_reads(&pair.b, &ids).await?;
    let rust_b = rust_reads(&pair.b, &ids).await?;
    assert_eq!(rust_b, node_b, "our schedulers read by Node and by us");
    // And the two queues hold the same schedulers (the slot of g-every is the same).
    assert_eq!(node_a, node_b);
    assert_eq!(node_a["count"], json!(3));
    let asc: Vec<&str> = node_a["list"][0]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["key"].as_str().unwrap())
        .collect();
    assert_eq!(asc, ["g-every", "g-cron", "g-start"], "soonest first");
    assert_eq!(
        node_a["get"]["g-every"]["template"]["opts"]["attempts"],
        json!(2)
    );

    // Removal across: Node removes from our queue, we remove from Node's.
    let a_iteration = pending_iteration(&pair.raw, &pair.a, "g-every").await?;
    let b_iteration = pending_iteration(&pair.raw, &pair.b, "g-every").await?;
    let removed = run_node(
        "schedulers.js",
        &json!({"queue": pair.b, "op": "remove", "id": "g-every"}),
    )
    .await?;
    assert_eq!(removed["result"], json!(true));
    let q_a = open_queue(&pair.a).await?;
    assert!(q_a.remove_job_scheduler("g-every").await?);
    // Absent now: both say so.
    assert!(!q_a.remove_job_scheduler("g-every").await?);
    let again = run_node(
        "schedulers.js",
        &json!({"queue": pair.b, "op": "remove", "id": "g-every"}),
    )
    .await?;
    assert_eq!(again["result"], json!(false));
    for (queue, iteration) in [(&pair.a, &a_iteration), (&pair.b, &b_iteration)] {
        let exists: i64 = pair.raw.exists(format!("bull:{queue}:{iteration}")).await?;
        assert_eq!(exists, 0, "{iteration} of {queue} deleted");
        let events = read_events(queue).await?;
        let last = events.last().unwrap();
        assert_eq!(last.event, "removed");
        assert_eq!(
            last.fields,
            vec![
                ("jobId".to_string(), iteration.clone()),
                ("prev".to_string(), "delayed".to_string())
            ]
        );
    }
    pair.assert_same("after cross removal").await?;
    assert_eq!(q_a.get_job_schedulers_count().await?, 2);
    q_a.close().await?;
    pair.close().await
}

/// The id of the pending iteration of scheduler `id` (from its `repeat` score).
async fn pending_iteration(raw: &Client, queue: &str, id: &str) -> Result<String> {
    let score: Option<f64> = raw.zscore(format!("bull:{queue}:repeat"), id).await?;
    let score = score.context("no such scheduler")?;
    Ok(format!("repeat:{id}:{}", score as u64))
}

/// Creates a bare job hash at `bull:{queue}:{job_id}` (an earlier scheduler's finished
/// iteration, for the collision checks of an upsert).
async fn occupy(raw: &Client, queue: &str, job_id: &str) -> Result<()> {
    let _: i64 = raw
        .hset(format!("bull:{queue}:{job_id}"), ("name", "old"))
        .await?;
    Ok(())
}

const HOUR: u64 = 3_600_000;

#[tokio::test]
async fn iteration_id_collisions_are_handled_as_node_does() -> Result<()> {
    if !node_available() {
        return Ok(());
    }
    let mut pair = Pair::new("collide").await?;
    // Cron: the next run's id is taken: refused (Node -10), nothing stored.
    let start = (now_ms() + 3 * DAY) / HOUR * HOUR + 600_000;
    let next = start - 600_000 + HOUR;
    for queue in [&pair.a, &pair.b] {
        occupy(&pair.raw, queue, &format!("repeat:c:{next}")).await?;
    }
    let cron = json!({"pattern": "0 * * * *", "startDate": start});
    let (n, _) = node_upsert(&pair.a, "c", &cron, &json!({"name": "c"})).await?;
    let (r, _) = rust_upsert(&pair.q, "c", &cron, &json!({"name": "c"})).await?;
    let message = n["error"]
        .as_str()
        .unwrap_or_else(|| panic!("Node accepted: {n}"));
    assert!(message.starts_with("Cannot create job scheduler iteration - job ID already exists"));
    assert!(
        r["error"].as_str().unwrap_or("").starts_with(message),
        "ours: {r}, Node: {message}"
    );

    // Every: taken slots are walked past, up to 32 of them.
    let every = MINUTE;
    for i in 0..31 {
        for queue in [&pair.a, &pair.b] {
            occupy(&pair.raw, queue, &format!("repeat:w:{}", start + i * every)).await?;
        }
    }
    let walk = json!({"every": every, "startDate": start});
    pair.upsert("w", walk, json!({"name": "w"})).await?;
    let snap = pair.assert_same("slots walked").await?;
    assert_eq!(
        snap["repeat"],
        json!([["w", (start + 31 * every) as f64]]),
        "{snap:?}"
    );

    // 33 taken slots: refused (Node -11).
    for i in 0..33 {
        for queue in [&pair.a, &pair.b] {
            occupy(
                &pair.raw,
                queue,
                &format!("repeat:busy:{}", start + i * every),
            )
            .await?;
        }
    }
    let busy = json!({"every": every, "startDate": start});
    let (n, _) = node_upsert(&pair.a, "busy", &busy, &json!({"name": "b"})).await?;
    let (r, _) = rust_upsert(&pair.q, "busy", &busy, &json!({"name": "b"})).await?;
    let message = n["error"]
        .as_str()
        .unwrap_or_else(|| panic!("Node accepted: {n}"));
    assert!(message.starts_with("Cannot create job scheduler iteration - current and next"));
    assert!(
        r["error"].as_str().unwrap_or("").starts_with(message),
        "ours: {r}, Node: {message}"
    );
    pair.assert_same("after the refusals").await?;
    pair.close().await
}

/// The keys about scheduler `id` and its iteration at `millis` in a snapshot: the scheduler,
/// its score, the iteration's hash, the delayed set and the iteration's events.
fn iteration_view(snap: &BTreeMap<String, Json>, id: &str, millis: u64) -> Json {
    let job_id = format!("repeat:{id}:{millis}");
    let events: Vec<&Json> = snap["events"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|e| e[1].to_string().contains(&job_id))
        .collect();
    json!({
        "repeat": snap.get("repeat"),
        "scheduler": snap.get(&format!("repeat:{id}")),
        "iteration": snap.get(&job_id),
        "delayed": snap.get("delayed"),
        "events": events,
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn next_iterations_created_by_our_worker_match_node_workers() -> Result<()> {
    if !node_available() {
        return Ok(());
    }
    // First runs at a fixed time a few seconds ahead, so the iteration each worker creates
    // when it starts the first one is deterministic: one interval (or cron step) later.
    let start = (now_ms() + 4000) / 5000 * 5000 + 1000;
    let template = json!({"name": "it", "data": {"d": [1, {"x": true}]},
        "opts": {"attempts": 3, "backoff": {"type": "exponential", "delay": 100},
                 "removeOnComplete": 10, "removeOnFail": {"count": 5}}});
    let cases = [
        (
            "ev",
            json!({"every": MINUTE, "startDate": start, "limit": 5, "endDate": start + DAY}),
            start,
            start + MINUTE,
        ),
        // First match after the start, then the next one.
        (
            "cr",
            json!({"pattern": "*/5 * * * * *", "tz": "Europe/Berlin", "startDate": start}),
            start + 4000,
            start + 9000,
        ),
    ];
    for (id, repeat, first, second) in cases {
        let mut pair = Pair::new(&format!("next-{id}")).await?;
        pair.fix(&[start, start + DAY, first]);
        pair.upsert(id, repeat.clone(), template.clone()).await?;
        let before = pair.assert_same("first iteration").await?;
        assert!(
            before.contains_key(&format!("repeat:{id}:{first}")),
            "{before:?}"
        );
        pair.fix(&[]);

        let lo = now_ms();
        let node_queue = pair.a.clone();
        let node = tokio::spawn(async move {
            run_node(
                "run_worker.js",
                &json!({"queue": node_queue, "stopAfter": 1, "timeoutMs": 60000}),
            )
            .await
        });
        let (worker, log) = scheduler_common::recording_worker(&pair.b, "rust").await?;
        worker_common::wait_finished(&pair.b, 1, Duration::from_secs(60)).await?;
        let report = node.await??;
        worker.close().await?;
        let w = Window { lo, hi: now_ms() };
        pair.wa.0.push(w);
        pair.wb.0.push(w);
        assert_eq!(report["stoppedBy"], json!("count"), "{report}");
        assert_eq!(scheduler_common::started_of(&log).len(), 1);

        let node_snap = snapshot(&pair.raw, &pair.a, &pair.wa).await?;
        let our_snap = snapshot(&pair.raw, &pair.b, &pair.wb).await?;
        let theirs = iteration_view(&node_snap, id, second);
        assert!(
            !theirs["iteration"].is_null(),
            "Node created no {second}: {node_snap:?}"
        );
        assert_eq!(iteration_view(&our_snap, id, second), theirs, "{repeat}");
        assert_eq!(theirs["iteration"]["opts"]["repeat"]["count"], json!(2));
        assert_eq!(theirs["scheduler"]["ic"], json!("2"));
        pair.close().await?;
    }
    Ok(())
}

/// Updating a scheduler whose pending iteration waits in a paused queue. Node 6.7.0's
/// `addJobScheduler` looks for it in the legacy `paused` list (BullMQ 6 keeps paused jobs in
/// `wait`), does not find it, and adds a second iteration one interval later, leaving the old
/// one waiting with the old data; the old one then runs once and the series goes on from the
/// new one (its start is not the scheduler's current iteration). We do the same, so a queue
/// updated by both clients stays one series.
#[tokio::test]
async fn updates_in_a_paused_queue_keep_the_waiting_iteration_as_node_does() -> Result<()> {
    if !node_available() {
        return Ok(());
    }
    let pair = Pair::new("paused").await?;
    run_node("admin.js", &json!({"queue": pair.a, "op": "pause"})).await?;
    pair.q.pause().await?;
    let repeat = json!({"every": MINUTE});
    for v in [1, 2] {
        let template = json!({"name": "p", "data": {"v": v}});
        node_upsert(&pair.a, "p", &repeat, &template).await?;
        rust_upsert(&pair.q, "p", &repeat, &template).await?;
    }
    for queue in [&pair.a, &pair.b] {
        let wait: Vec<String> = pair.raw.lrange(format!("bull:{queue}:wait"), 0, -1).await?;
        let delayed: Vec<String> = pair
            .raw
            .zrange(
                format!("bull:{queue}:delayed"),
                0,
                -1,
                None,
                false,
                None,
                false,
            )
            .await?;
        assert_eq!(
            (wait.len(), delayed.len()),
            (1, 1),
            "{queue}: stale waiting + new delayed"
        );
        let data = |id: &str| {
            let raw = pair.raw.clone();
            let key = format!("bull:{queue}:{id}");
            async move { raw.hget::<Option<String>, _, _>(key, "data").await }
        };
        assert_eq!(
            data(&wait[0]).await?.as_deref(),
            Some(r#"{"v":1}"#),
            "{queue}"
        );
        assert_eq!(
            data(&delayed[0]).await?.as_deref(),
            Some(r#"{"v":2}"#),
            "{queue}"
        );
        let (w, d) = (millis_of_id(&wait[0]), millis_of_id(&delayed[0]));
        assert_eq!(d, w + MINUTE, "{queue}: the new one a slot later");
    }
    pair.close().await
}

fn millis_of_id(id: &str) -> u64 {
    id.rsplit(':')
        .next()
        .and_then(|m| m.parse().ok())
        .unwrap_or(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_update_while_an_iteration_runs_replaces_the_next_one_as_node_does() -> Result<()> {
    if !node_available() {
        return Ok(());
    }
    let start = (now_ms() + 3000) / 1000 * 1000;
    let mut pair = Pair::new("active").await?;
    let repeat = json!({"every": MINUTE, "startDate": start});
    pair.fix(&[start]);
    pair.upsert(
        "act",
        repeat.clone(),
        json!({"name": "a", "data": {"sleepMs": 6000}}),
    )
    .await?;
    pair.fix(&[]);
    let lo = now_ms();
    let node_queue = pair.a.clone();
    let node = tokio::spawn(async move {
        run_node(
            "run_worker.js",
            &json!({"queue": node_queue, "stopAfter": 1, "timeoutMs": 60000}),
        )
        .await
    });
    let (worker, _log) = scheduler_common::recording_worker(&pair.b, "rust").await?;
    // Both first iterations running, and their next ones created by the workers.
    for queue in [pair.a.clone(), pair.b.clone()] {
        common::eventually("iteration running", Duration::from_secs(30), || {
            let queue = queue.clone();
            async move {
                worker_common::count(&queue, "active").await.unwrap_or(0) == 1
                    && worker_common::count(&queue, "delayed").await.unwrap_or(0) == 1
            }
        })
        .await?;
    }
    // The update replaces the delayed next iteration in its slot; the running one goes on.
    pair.upsert("act", repeat, json!({"name": "b", "data": {"v": 2}}))
        .await?;
    let w = Window { lo, hi: now_ms() };
    pair.wa.0.push(w);
    pair.wb.0.push(w);
    let node_snap = snapshot(&pair.raw, &pair.a, &pair.wa).await?;
    let our_snap = snapshot(&pair.raw, &pair.b, &pair.wb).await?;
    let second = start + MINUTE;
    let theirs = iteration_view(&node_snap, "act", second);
    assert_eq!(
        theirs["iteration"]["data"],
        json!({"v": 2}),
        "{node_snap:?}"
    );
    assert_eq!(iteration_view(&our_snap, "act", second), theirs);
    assert_eq!(our_snap.get("active"), node_snap.get("active"));
    node.await??;
    worker_common::wait_finished(&pair.b, 1, Duration::from_secs(30)).await?;
    worker.close().await?;
    pair.close().await
}

#[tokio::test]
async fn stale_and_legacy_entries_are_read_as_node_does() -> Result<()> {
    if !node_available() {
        return Ok(());
    }
    let pair = Pair::new("legacy").await?;
    let far = (now_ms() + 9 * DAY) as f64;
    for queue in [&pair.a, &pair.b] {
        // A scheduler whose hash is gone, and a BullMQ 5 repeatable job (no hash either).
        let _: i64 = pair
            .raw
            .zadd(
                format!("bull:{queue}:repeat"),
                None,
                None,
                false,
                false,
                (far, "stale"),
            )
            .await?;
        let _: i64 = pair
            .raw
            .zadd(
                format!("bull:{queue}:repeat"),
                None,
                None,
                false,
                false,
                (far + 1.0, "name:id::UTC:5000"),
            )
            .await?;
    }
    for queue in [&pair.a, &pair.b] {
        let q = open_queue(queue).await?;
        // One legacy key: Node's getter refuses it with the migration message.
        let node = run_node(
            "schedulers.js",
            &json!({"queue": queue, "op": "get", "id": "name:id::UTC:5000"}),
        )
        .await?;
        let message = node["error"]
            .as_str()
            .unwrap_or_else(|| panic!("Node read it: {node}"));
        let ours = q.get_job_scheduler("name:id::UTC:5000").await;
        let ours = ours
            .expect_err("a legacy repeatable job is not a scheduler")
            .to_string();
        assert!(ours.contains(message), "ours: {ours}\nNode: {message}");
        // A stale id reads as none.
        let node = run_node(
            "schedulers.js",
            &json!({"queue": queue, "op": "get", "id": "stale"}),
        )
        .await?;
        assert_eq!(node["result"], json!(null));
        assert!(q.get_job_scheduler("stale").await?.is_none());
        let count = run_node("schedulers.js", &json!({"queue": queue, "op": "count"})).await?;
        assert_eq!(json!(q.get_job_schedulers_count().await?), count["result"]);
        q.close().await?;
    }
    // Listing: a legacy entry in the range fails the whole read with the migration message,
    // and is left in place. (Node also starts deleting the stale entry, but its script closes
    // the connection on the error first; we delete it.)
    let node = run_node("schedulers.js", &json!({"queue": pair.a, "op": "list"})).await?;
    let q = open_queue(&pair.b).await?;
    let ours = q
        .get_job_schedulers(ractor_bullmq::JobSchedulersRange::new().asc(true))
        .await;
    let message = node["error"]
        .as_str()
        .unwrap_or_else(|| panic!("Node listed {node}"));
    let ours = ours
        .expect_err("the legacy entry fails the listing")
        .to_string();
    assert!(ours.contains(message), "ours: {ours}\nNode: {message}");
    q.close().await?;
    for queue in [&pair.a, &pair.b] {
        let left: Vec<String> = pair
            .raw
            .zrange(
                format!("bull:{queue}:repeat"),
                0,
                -1,
                None,
                false,
                None,
                false,
            )
            .await?;
        assert!(
            left.contains(&"name:id::UTC:5000".to_owned()),
            "{queue}: {left:?}"
        );
    }
    pair.close().await
}

#[tokio::test]
async fn removal_leaves_a_waiting_iteration_as_node_does() -> Result<()> {
    if !node_available() {
        return Ok(());
    }
    // A first run due now waits in `wait`: removing the scheduler leaves it there (only a
    // delayed pending iteration is deleted, with a `removed` event).
    let mut pair = Pair::new("rm-wait").await?;
    pair.upsert("rw", json!({"every": MINUTE}), json!({"name": "w"}))
        .await?;
    let removed = run_node(
        "schedulers.js",
        &json!({"queue": pair.a, "op": "remove", "id": "rw"}),
    )
    .await?;
    assert_eq!(removed["result"], json!(true));
    assert!(pair.q.remove_job_scheduler("rw").await?);
    let snap = pair.assert_same("removed with a waiting iteration").await?;
    assert_eq!(snap["wait"], json!(["repeat:rw:<now>"]), "{snap:?}");
    assert!(
        !snap.contains_key("repeat") && !snap.contains_key("repeat:rw"),
        "{snap:?}"
    );
    pair.close().await
}

/// Unknown time zones. With a pattern both refuse (Node's text is cron-parser's
/// `CronDate: unhandled timestamp: …`, which names the current date; ours names the zone).
/// With `every` Node 6.7.0 accepts and stores the zone unused; we refuse it — a known
/// divergence, pinned here.
#[tokio::test]
async fn unknown_time_zones_are_refused() -> Result<()> {
    if !node_available() {
        return Ok(());
    }
    let pair = Pair::new("tz").await?;
    let cron = json!({"pattern": "* * * * *", "tz": "Mars/Olympus"});
    let (n, _) = node_upsert(&pair.a, "t", &cron, &json!({"name": "t"})).await?;
    let (r, _) = rust_upsert(&pair.q, "t", &cron, &json!({"name": "t"})).await?;
    assert!(
        n["error"]
            .as_str()
            .is_some_and(|m| m.starts_with("CronDate")),
        "{n}"
    );
    let ours = r["error"]
        .as_str()
        .unwrap_or_else(|| panic!("we accepted: {r}"));
    assert!(ours.contains("Mars/Olympus"), "{ours}");
    let every = json!({"every": 1000, "tz": "Mars/Olympus"});
    let (n, _) = node_upsert(&pair.a, "e", &every, &json!({"name": "e"})).await?;
    let (r, _) = rust_upsert(&pair.q, "e", &every, &json!({"name": "e"})).await?;
    assert!(n["result"]["id"].is_string(), "Node accepts it: {n}");
    assert!(
        r["error"]
            .as_str()
            .is_some_and(|m| m.contains("Mars/Olympus")),
        "{r}"
    );
    pair.close().await
}

#[tokio::test]
async fn template_options_are_stored_as_node_stores_them() -> Result<()> {
    if !node_available() {
        return Ok(());
    }
    let opts = json!({
        "attempts": 5,
        "backoff": {"type": "exponential", "delay": 1000, "jitter": 0.5},
        "removeOnComplete": {"age": 3600, "count": 10},
        "removeOnFail": true,
        "keepLogs": 20,
        "stackTraceLimit": 3,
        "sizeLimit": 10000,
        "priority": 2,
        "lifo": true,
    });
    // Due now: prioritized (priority counter, marker).
    let snap = single(
        "opts-now",
        "on",
        json!({"every": MINUTE}),
        json!({"name": "o", "data": {"big": "x".repeat(200)}, "opts": opts}),
    )
    .await?;
    assert!(snap.contains_key("prioritized"), "{snap:?}");
    // Delayed.
    single(
        "opts-later",
        "ol",
        json!({"every": MINUTE, "offset": far_offset(MINUTE)}),
        json!({"name": "o", "opts": opts}),
    )
    .await?;
    // Without priority, due now and lifo: pushed at the other end of `wait`.
    let mut lifo = opts.clone();
    lifo.as_object_mut().unwrap().remove("priority");
    single(
        "opts-lifo",
        "lf",
        json!({"every": MINUTE}),
        json!({"name": "o", "opts": lifo}),
    )
    .await?;
    Ok(())
}
