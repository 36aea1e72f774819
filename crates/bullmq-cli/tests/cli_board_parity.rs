//! What bull-board offers that the CLI now has too (issue 22 §4), each checked against Node
//! BullMQ 6.7.0 doing the same on the same input: the flow tree of any depth (`bullmq flow`,
//! Node's `getFlow`), `remove-unprocessed-children` (Node's `job.removeUnprocessedChildren()`:
//! same keys left, same `removed` events), editing a job's data (`update-data`, Node's
//! `job.updateData`: same stored bytes), each scheduler's next run (its job id as Node names
//! it), and the newest jobs across states (`jobs --latest`); plus `--help` kept short with the
//! connection forms on one `bullmq help connection` page.

mod common;

use common::*;

use bullmq_redis::fred::prelude::{ClientLike, HashesInterface, StreamsInterface};
use serde_json::{json, Value};

/// Runs `bullmq --prefix PREFIX ARGS…`.
fn under(prefix: &str, args: &[&str]) -> std::process::Output {
    let mut all = vec!["--prefix", prefix];
    all.extend_from_slice(args);
    bullmq(&all)
}

/// A flow four levels deep over two queues, with fixed ids: `root` (queue `parents`) waits
/// for `a` and `d` (queue `kids`); `a` waits for `b`, which waits for `c`.
fn deep_flow() -> Value {
    json!({
        "name": "root", "queueName": "parents", "data": {}, "opts": {"jobId": "root"},
        "children": [
            {"name": "a", "queueName": "kids", "data": {}, "opts": {"jobId": "a"},
             "children": [
                {"name": "b", "queueName": "kids", "data": {}, "opts": {"jobId": "b"},
                 "children": [
                    {"name": "c", "queueName": "kids", "data": {}, "opts": {"jobId": "c"}}
                 ]}
             ]},
            {"name": "d", "queueName": "kids", "data": {}, "opts": {"jobId": "d"}}
        ]
    })
}

fn add_flow(prefix: &str, flow: Value) {
    let out = node(
        "flows.js",
        &json!({"op": "add", "prefix": prefix, "flow": flow}),
    );
    assert!(out.get("error").is_none(), "{out}");
}

/// `(id, name, queue)` of every node, depth first with children sorted by id, and the depth.
fn shape(tree: &Value, depth: usize, out: &mut Vec<(String, String, String, usize)>) {
    out.push((
        tree["id"].as_str().unwrap().to_owned(),
        tree["name"].as_str().unwrap().to_owned(),
        tree["queueName"].as_str().unwrap().to_owned(),
        depth,
    ));
    let mut children: Vec<&Value> = tree["children"].as_array().unwrap().iter().collect();
    children.sort_by_key(|c| c["id"].as_str().unwrap().to_owned());
    for child in children {
        shape(child, depth + 1, out);
    }
}

#[tokio::test]
async fn flow_shows_the_tree_node_get_flow_returns_four_levels_deep() {
    if !node_available() {
        return;
    }
    let prefix = unique_prefix("flow");
    add_flow(&prefix, deep_flow());

    let ours = json_of(&under(&prefix, &["--json", "flow", "parents", "root"]));
    let theirs = node(
        "flows.js",
        &json!({"op": "getFlow", "prefix": prefix, "id": "root", "queueName": "parents"}),
    );
    let (mut a, mut b) = (Vec::new(), Vec::new());
    shape(&ours, 0, &mut a);
    shape(&theirs["tree"], 0, &mut b);
    assert_eq!(a, b, "ours {ours}\nNode's {theirs}");
    assert_eq!(a.iter().map(|n| n.3).max(), Some(3), "four levels");
    assert_eq!(ours["state"], "waiting-children");
    assert_eq!(ours["children"][0]["outcome"], "unprocessed", "{ours}");

    // Depth limits the walk as Node's `depth` does (levels, the job itself included).
    for depth in [1, 2, 3] {
        let shallow = json_of(&under(
            &prefix,
            &[
                "--json",
                "flow",
                "parents",
                "root",
                "--depth",
                &depth.to_string(),
            ],
        ));
        let theirs = node(
            "flows.js",
            &json!({"op": "getFlow", "prefix": prefix, "id": "root", "queueName": "parents", "depth": depth}),
        );
        let (mut a, mut b) = (Vec::new(), Vec::new());
        shape(&shallow, 0, &mut a);
        shape(&theirs["tree"], 0, &mut b);
        assert_eq!(a, b, "depth {depth}");
        assert_eq!(
            a.iter().map(|n| n.3).max(),
            Some(depth - 1),
            "depth {depth}"
        );
    }

    // Text: one line a job, the branches drawn.
    let shown = text(&under(&prefix, &["flow", "parents", "root"]).stdout);
    let lines: Vec<&str> = shown.lines().collect();
    assert_eq!(lines.len(), 5, "{shown}");
    assert!(
        lines[0].starts_with("root  root  queue parents  waiting-children"),
        "{shown}"
    );
    assert!(
        shown.contains("│  └─ b  b  queue kids  waiting-children  (unprocessed)"),
        "{shown}"
    );
    assert!(
        shown.contains("│     └─ c  c  queue kids  waiting  (unprocessed)"),
        "{shown}"
    );

    let missing = under(&prefix, &["flow", "parents", "nope"]);
    assert_eq!(missing.status.code(), Some(3));
    delete_under(&prefix).await;
}

/// The queues' keys with `prefix` cut off, sorted.
async fn keys_without(prefix: &str) -> Vec<String> {
    keys_under(prefix)
        .await
        .into_iter()
        .map(|k| k[prefix.len()..].to_owned())
        .collect()
}

/// `(event, jobId, prev)` of every event of `queue`'s stream after position `skip`, sorted.
async fn events_of(prefix: &str, queue: &str, skip: usize) -> Vec<(String, String, String)> {
    let client = connect().await;
    let entries: Vec<(String, std::collections::HashMap<String, String>)> = client
        .xrange(format!("{prefix}:{queue}:events"), "-", "+", None)
        .await
        .unwrap();
    client.quit().await.unwrap();
    let field = |m: &std::collections::HashMap<String, String>, k: &str| {
        m.get(k).cloned().unwrap_or_default()
    };
    let mut out: Vec<_> = entries
        .iter()
        .skip(skip)
        .map(|(_, m)| (field(m, "event"), field(m, "jobId"), field(m, "prev")))
        .collect();
    out.sort();
    out
}

async fn stream_len(prefix: &str, queue: &str) -> usize {
    let client = connect().await;
    let n: usize = client
        .xlen(format!("{prefix}:{queue}:events"))
        .await
        .unwrap();
    client.quit().await.unwrap();
    n
}

#[tokio::test]
async fn remove_unprocessed_children_leaves_what_node_leaves() {
    if !node_available() {
        return;
    }
    let node_prefix = unique_prefix("ruc-node");
    let our_prefix = unique_prefix("ruc-ours");
    for prefix in [&node_prefix, &our_prefix] {
        add_flow(prefix, deep_flow());
    }
    let before = (
        stream_len(&node_prefix, "kids").await,
        stream_len(&node_prefix, "parents").await,
    );
    assert_eq!(
        before,
        (
            stream_len(&our_prefix, "kids").await,
            stream_len(&our_prefix, "parents").await
        )
    );

    let theirs = node(
        "admin.js",
        &json!({"queue": "parents", "prefix": node_prefix, "op": "removeUnprocessedChildren", "id": "root"}),
    );
    assert_eq!(theirs["result"], Value::Null, "{theirs}");
    let ours = json_of(&under(
        &our_prefix,
        &["--json", "remove-unprocessed-children", "parents", "root"],
    ));
    assert_eq!(ours["count"], 4, "{ours}");

    assert_eq!(
        keys_without(&node_prefix).await,
        keys_without(&our_prefix).await
    );
    for (queue, skip) in [("kids", before.0), ("parents", before.1)] {
        assert_eq!(
            events_of(&node_prefix, queue, skip).await,
            events_of(&our_prefix, queue, skip).await,
            "events of {queue}"
        );
    }
    let states = |prefix: &str| {
        node(
            "read_jobs.js",
            &json!({"queue": "parents", "prefix": prefix, "ids": ["root"]}),
        )["jobs"][0]["state"]
            .clone()
    };
    assert_eq!(states(&node_prefix), states(&our_prefix));

    let missing = under(
        &our_prefix,
        &["remove-unprocessed-children", "parents", "nope"],
    );
    assert_eq!(missing.status.code(), Some(3));
    delete_under(&node_prefix).await;
    delete_under(&our_prefix).await;
}

#[tokio::test]
async fn update_data_stores_what_node_stores() {
    if !node_available() {
        return;
    }
    let node_prefix = unique_prefix("data-node");
    let our_prefix = unique_prefix("data-ours");
    let jobs = json!([{"name": "mail", "data": {"to": "a@b"}, "opts": {"jobId": "job-7"}}]);
    node_add(&node_prefix, "mail", jobs.clone());
    node_add(&our_prefix, "mail", jobs);
    let data = json!({"to": "c@d", "n": [1, 2.5, "x"], "nested": {"é": null}});
    node(
        "admin.js",
        &json!({"queue": "mail", "prefix": node_prefix, "op": "updateData", "id": "job-7", "data": data}),
    );
    let out = json_of(&under(
        &our_prefix,
        &[
            "--json",
            "update-data",
            "mail",
            "job-7",
            "--data",
            &data.to_string(),
        ],
    ));
    assert_eq!(out["data"], data);
    let client = connect().await;
    let theirs: String = client
        .hget(format!("{node_prefix}:mail:job-7"), "data")
        .await
        .unwrap();
    let ours: String = client
        .hget(format!("{our_prefix}:mail:job-7"), "data")
        .await
        .unwrap();
    client.quit().await.unwrap();
    assert_eq!(ours, theirs);

    let missing = under(&our_prefix, &["update-data", "mail", "8", "--data", "{}"]);
    assert_eq!(missing.status.code(), Some(3));
    let bad = under(
        &our_prefix,
        &["update-data", "mail", "job-7", "--data", "{nope"],
    );
    assert_eq!(bad.status.code(), Some(2));
    delete_under(&node_prefix).await;
    delete_under(&our_prefix).await;
}

#[tokio::test]
async fn schedulers_name_the_job_of_the_next_run_as_node_does() {
    if !node_available() {
        return;
    }
    let prefix = unique_prefix("next-run");
    let pending = node(
        "schedulers.js",
        &json!({"queue": "ticks", "prefix": prefix, "op": "upsert", "id": "hourly",
                "repeat": {"every": 3_600_000}, "template": {"name": "tick"}}),
    );
    let node_id = pending["result"]["id"]
        .as_str()
        .expect("Node made a pending run")
        .to_owned();

    let listed = json_of(&under(&prefix, &["--json", "schedulers", "ticks"]));
    let record = &listed[0];
    assert_eq!(record["nextJobId"], node_id.as_str(), "{listed}");
    assert_eq!(
        record["nextJobId"],
        format!("repeat:hourly:{}", record["next"])
    );
    let state = node(
        "admin.js",
        &json!({"queue": "ticks", "prefix": prefix, "op": "getJobState", "id": node_id}),
    );
    assert_eq!(record["nextJobState"], state["result"], "{listed}");

    let shown = text(&under(&prefix, &["schedulers", "ticks"]).stdout);
    assert!(
        shown.lines().next().unwrap().ends_with("NEXT JOB"),
        "{shown}"
    );
    assert!(
        shown.contains(&format!(
            "{node_id} ({})",
            state["result"].as_str().unwrap()
        )),
        "{shown}"
    );
    delete_under(&prefix).await;
}

#[tokio::test]
async fn jobs_latest_lists_the_newest_across_states() {
    if !node_available() {
        return;
    }
    let prefix = unique_prefix("latest");
    // Added one after another: each a later timestamp.
    for job in [
        json!({"name": "done", "data": {}}),
        json!({"name": "broken", "data": {"fail": "no"}}),
    ] {
        node_add(&prefix, "mixed", json!([job]));
    }
    node_work(&prefix, "mixed", 2, json!({}));
    for job in [
        json!({"name": "later", "data": {}, "opts": {"delay": 3_600_000}}),
        json!({"name": "next", "data": {}}),
    ] {
        std::thread::sleep(std::time::Duration::from_millis(5));
        node_add(&prefix, "mixed", json!([job]));
    }
    let listed = json_of(&under(&prefix, &["--json", "jobs", "mixed", "--latest"]));
    let got: Vec<(&str, &str)> = listed["jobs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|j| (j["name"].as_str().unwrap(), j["state"].as_str().unwrap()))
        .collect();
    assert_eq!(
        got,
        [
            ("next", "waiting"),
            ("later", "delayed"),
            ("broken", "failed"),
            ("done", "completed")
        ],
        "{listed}"
    );
    // Node reads the same states for the same ids.
    let ids: Vec<Value> = listed["jobs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|j| j["id"].clone())
        .collect();
    let theirs = node(
        "read_jobs.js",
        &json!({"queue": "mixed", "prefix": prefix, "ids": ids}),
    );
    let node_states: Vec<&str> = theirs["jobs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|j| j["state"].as_str().unwrap())
        .collect();
    assert_eq!(node_states, ["waiting", "delayed", "failed", "completed"]);

    let page = json_of(&under(
        &prefix,
        &[
            "--json", "jobs", "mixed", "--latest", "--offset", "1", "--limit", "2",
        ],
    ));
    let names: Vec<&str> = page["jobs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|j| j["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["later", "broken"]);
    let shown = text(&under(&prefix, &["jobs", "mixed", "--latest"]).stdout);
    assert!(shown.starts_with("ID "), "{shown}");
    assert!(shown.lines().nth(1).unwrap().contains(" next "), "{shown}");
    // --latest and --state are one or the other.
    assert_eq!(
        under(&prefix, &["jobs", "mixed", "--latest", "--state", "failed"])
            .status
            .code(),
        Some(2)
    );
    delete_under(&prefix).await;
}

#[test]
fn help_names_the_connection_once_and_the_forms_live_on_one_page() {
    for args in [&["--help"][..], &["stats", "--help"], &["top", "--help"]] {
        let out = bullmq(args);
        assert!(out.status.success());
        let shown = text(&out.stdout);
        // One line for the option (its default on it), none of the long URL forms; its old
        // name --redis-url on one line of its own.
        let about_url: Vec<&str> = shown.lines().filter(|l| l.contains("--url <")).collect();
        assert_eq!(about_url.len(), 1, "{args:?}: {shown}");
        assert_eq!(shown.matches("redis://").count(), 1, "{args:?}: {shown}");
        assert!(about_url[0].contains("bullmq help connection"), "{shown}");
        assert_eq!(
            shown
                .lines()
                .filter(|l| l.contains("--redis-url <"))
                .count(),
            1,
            "{args:?}: {shown}"
        );
        assert!(!shown.contains("sentinelServiceName"), "{args:?}: {shown}");
    }
    let page = text(&bullmq(&["help", "connection"]).stdout);
    for form in [
        "redis://[user:pass@]host[:port][/db]",
        "redis-cluster://",
        "redis-sentinel://",
        "sentinelServiceName=NAME",
        "tls_ca=CA.pem",
        "valkey",
        "postgres://",
        "schema=NAME",
        "BULLMQ_URL beats --redis-url / REDIS_URL",
    ] {
        assert!(page.contains(form), "{form} missing: {page}");
    }
    let same = text(&bullmq(&["connection"]).stdout);
    assert!(same.contains("redis-sentinel://"), "{same}");
}
