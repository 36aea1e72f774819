//! A stored job scheduler read back, differential against Node BullMQ 6.7.0: for the same raw
//! `repeat:{id}` hash (written here with every option a template can hold, in the short keys
//! Node stores), our `get_job_scheduler` / `get_job_schedulers` serialise to the same JSON as
//! Node's `getJobScheduler` / `getJobSchedulers`, key for key in Node's order — long option
//! names (`keepLogs`, `deduplication`, `telemetry.metadata` …), not the stored ones.

mod common;

use anyhow::Result;
use common::{cleanup, node_available, open_queue, raw_client, run_node, unique_queue, PREFIX};
use fred::prelude::{ClientLike, HashesInterface, SortedSetsInterface};
use serde_json::json;

/// Template options with every key Node can store for a scheduler's template.
const EVERY_OPTION: &str = r#"{"attempts":3,"backoff":{"type":"exponential","delay":500},"priority":4,"lifo":true,"removeOnComplete":{"age":3600,"count":10},"removeOnFail":7,"stackTraceLimit":2,"sizeLimit":1024,"de":{"id":"d1","ttl":5000,"extend":true,"replace":false},"fpof":true,"cpof":false,"idof":true,"rdof":false,"kl":50,"tm":"{\"traceparent\":\"00-ab\"}","omc":true,"custom":{"x":1}}"#;

/// A scheduler as written here: id, hash fields, `repeat` score.
type Stored = (&'static str, Vec<(&'static str, &'static str)>, f64);

#[tokio::test]
async fn template_options_read_back_with_node_names_as_node() -> Result<()> {
    if !node_available() {
        return Ok(());
    }
    let queue = unique_queue("sched-record");
    let raw = raw_client().await?;
    let schedulers: [Stored; 3] = [
        (
            "all-opts",
            vec![
                ("name", "every-option"),
                ("every", "60000"),
                ("offset", "17"),
                ("limit", "9"),
                ("ic", "2"),
                ("opts", EVERY_OPTION),
                ("data", r#"{"a":[1,2]}"#),
            ],
            4_102_444_800_000.0,
        ),
        (
            "cron-tm",
            vec![
                ("name", "c"),
                ("pattern", "0 * * * *"),
                ("tz", "Europe/Berlin"),
                ("startDate", "4102444800000"),
                ("endDate", "4102531200000"),
                ("ic", "1"),
                ("opts", r#"{"omc":false,"kl":1,"attempts":0}"#),
            ],
            4_102_448_400_000.0,
        ),
        (
            "bare",
            vec![("name", "b"), ("every", "1000"), ("ic", "1")],
            4_102_444_801_000.0,
        ),
    ];
    for (id, fields, next) in &schedulers {
        let key = format!("{PREFIX}:{queue}:repeat:{id}");
        let pairs: Vec<(String, String)> = fields
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        let _: () = raw.hset(key, pairs).await?;
        let _: () = raw
            .zadd(
                format!("{PREFIX}:{queue}:repeat"),
                None,
                None,
                false,
                false,
                (*next, *id),
            )
            .await?;
    }

    let q = open_queue(&queue).await?;
    for (id, _, _) in &schedulers {
        let node = run_node(
            "schedulers.js",
            &json!({"queue": queue, "op": "get", "id": id}),
        )
        .await?;
        let ours = serde_json::to_value(q.get_job_scheduler(id).await?)?;
        assert_eq!(ours, node["result"], "getJobScheduler({id})");
        // Key for key in Node's order too: the same text.
        assert_eq!(
            serde_json::to_string(&ours)?,
            serde_json::to_string(&node["result"])?,
            "getJobScheduler({id}) as text"
        );
    }
    let node = run_node(
        "schedulers.js",
        &json!({"queue": queue, "op": "list", "start": 0, "end": -1, "asc": true}),
    )
    .await?;
    let ours = serde_json::to_value(
        q.get_job_schedulers(ractor_bullmq::JobSchedulersRange::new().asc(true))
            .await?,
    )?;
    assert_eq!(ours, node["result"], "getJobSchedulers");
    assert_eq!(
        serde_json::to_string(&ours)?,
        serde_json::to_string(&node["result"])?
    );
    // The long names, spelled out once.
    let opts = &ours[0]["template"]["opts"];
    assert_eq!(opts["keepLogs"], json!(50));
    assert_eq!(opts["deduplication"]["id"], json!("d1"));
    assert_eq!(
        opts["telemetry"],
        json!({"metadata": "{\"traceparent\":\"00-ab\"}", "omitContext": true})
    );
    assert!(opts.get("kl").is_none() && opts.get("de").is_none());
    q.close().await?;
    raw.quit().await?;
    cleanup(&queue).await
}
