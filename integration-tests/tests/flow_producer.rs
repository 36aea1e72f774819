//! FlowProducer (issue 13, item 1), compared with Node's: the same flow added by Node's
//! `FlowProducer` and by ours (in separate queues; queue names and generated ids masked) leaves
//! the same raw Redis state — keys, hash fields, list and zset members and scores,
//! `:dependencies` sets, the events streams — for a three-level tree across two queues, each
//! failure policy, custom ids (an existing completed child, an existing parent id), per-queue
//! defaults, delayed / prioritized / LIFO children, deduplication, `addBulk`. Refusals (every
//! bad tree, a job id owned by another parent) write nothing. One parent with 10 000 children
//! is added in one call.

mod common;
mod flow_common;

use anyhow::Result;
use common::*;
use flow_common::*;
use ractor_bullmq::flow::{FlowError, FlowJob, FlowOptions, FlowValidationError};
use ractor_bullmq::protocol::{JobOptions, ValidationError};
use serde_json::{json, Value as Json};

/// Adds `spec` with ours and Node's producers into separate queues and asserts the same Redis
/// state; returns both trees (shaped, ids as returned).
async fn same_as_node(tag: &str, placeholders: &[&str], spec: &Json) -> Result<(Json, Json)> {
    same_as_node_with(tag, placeholders, spec, None, |_| async { Ok(()) }).await
}

async fn same_as_node_with<F, Fut>(
    tag: &str,
    placeholders: &[&str],
    spec: &Json,
    queues_options: Option<&Json>,
    setup: F,
) -> Result<(Json, Json)>
where
    F: Fn(String) -> Fut,
    Fut: std::future::Future<Output = Result<()>>,
{
    let ours = Queues::new(&format!("fpr-{tag}"), placeholders);
    let theirs = Queues::new(&format!("fpn-{tag}"), placeholders);
    for (_, real) in ours.0.iter().chain(theirs.0.iter()) {
        setup(real.clone()).await?;
    }
    let resolve_options = |queues: &Queues| {
        queues_options.map(|q| {
            let mut out = serde_json::Map::new();
            for (placeholder, value) in q.as_object().into_iter().flatten() {
                out.insert(queues.name(placeholder).to_owned(), value.clone());
            }
            Json::Object(out)
        })
    };

    let producer = producer().await?;
    let mut options = FlowOptions::new();
    if let Some(Json::Object(map)) = resolve_options(&ours) {
        for (queue, value) in map {
            let defaults = serde_json::from_value(value["defaultJobOptions"].clone())?;
            options = options.queue_defaults(queue, defaults);
        }
    }
    let tree = producer
        .add_with(to_flow(&ours.resolve(spec)), options)
        .await?;
    producer.close().await?;
    let ours_tree = shape(&tree);
    let node = node_add(&theirs.resolve(spec), resolve_options(&theirs).as_ref()).await?;
    assert!(node.get("error").is_none(), "Node refused the flow: {node}");
    let node_tree = node["tree"].clone();

    let (mut our_ids, mut node_ids) = (Vec::new(), Vec::new());
    ids_of(&ours_tree, &mut our_ids);
    ids_of(&node_tree, &mut node_ids);
    let mine = mask_ids(&snapshot(&ours).await?, &our_ids);
    let node_state = mask_ids(&snapshot(&theirs).await?, &node_ids);
    assert_same(&mine, &node_state, tag);
    assert_eq!(
        mask_ids(&ours.mask(&ours_tree), &our_ids),
        mask_ids(&theirs.mask(&node_tree), &node_ids),
        "{tag}: returned trees differ"
    );
    ours.cleanup().await?;
    theirs.cleanup().await?;
    Ok((ours_tree, node_tree))
}

fn ts(mut opts: Json) -> Json {
    opts["timestamp"] = json!(TS);
    opts
}

#[tokio::test]
async fn a_three_level_tree_across_two_queues_is_stored_as_node_stores_it() -> Result<()> {
    if !node_available() {
        return Ok(());
    }
    // Generated ids (UUIDs on both sides), masked by position.
    let spec = json!({
        "name": "root", "queueName": "A", "data": {"r": 1}, "opts": ts(json!({})),
        "children": [
            {"name": "mid", "queueName": "B", "data": {"m": 1}, "opts": ts(json!({})),
             "children": [
                {"name": "leaf-a", "queueName": "A", "data": {"l": 1}, "opts": ts(json!({}))},
                {"name": "leaf-b", "queueName": "B", "data": {"l": 2}, "opts": ts(json!({}))}
             ]},
            {"name": "leaf-c", "queueName": "A", "data": {"l": 3}, "opts": ts(json!({"attempts": 3}))}
        ]
    });
    let (ours, _) = same_as_node("three", &["A", "B"], &spec).await?;
    let root_id = ours["id"].as_str().unwrap_or_default();
    assert_eq!(root_id.len(), 36, "a UUID: {root_id}");
    Ok(())
}

#[tokio::test]
async fn each_failure_policy_on_a_child_is_stored_as_node_stores_it() -> Result<()> {
    if !node_available() {
        return Ok(());
    }
    let child = |id: &str, policy: &str| json!({"name": id, "queueName": "A", "data": {}, "opts": ts(json!({"jobId": id, policy: true}))});
    let spec = json!({
        "name": "root", "queueName": "A", "data": {}, "opts": ts(json!({"jobId": "root"})),
        "children": [
            child("c-fpof", "failParentOnFailure"),
            child("c-cpof", "continueParentOnFailure"),
            child("c-idof", "ignoreDependencyOnFailure"),
            child("c-rdof", "removeDependencyOnFailure"),
        ]
    });
    same_as_node("policies", &["A"], &spec).await?;
    Ok(())
}

#[tokio::test]
async fn delayed_prioritized_and_lifo_nodes_are_placed_as_node_places_them() -> Result<()> {
    if !node_available() {
        return Ok(());
    }
    let leaf = |id: &str, opts: Json| {
        let mut opts = ts(opts);
        opts["jobId"] = json!(id);
        json!({"name": id, "queueName": "B", "data": {"id": id}, "opts": opts})
    };
    let spec = json!({
        "name": "root", "queueName": "A", "data": {},
        "opts": ts(json!({"jobId": "root", "priority": 4, "delay": 5000})),
        "children": [
            leaf("plain-1", json!({})),
            leaf("delayed-1", json!({"delay": 60000})),
            leaf("delayed-2", json!({"delay": 60000})),
            leaf("prio-1", json!({"priority": 7})),
            leaf("prio-2", json!({"priority": 2})),
            leaf("lifo-1", json!({"lifo": true})),
            leaf("plain-2", json!({})),
        ]
    });
    same_as_node("placement", &["A", "B"], &spec).await?;
    Ok(())
}

#[tokio::test]
async fn queue_defaults_apply_as_nodes_queues_options() -> Result<()> {
    if !node_available() {
        return Ok(());
    }
    let spec = json!({
        "name": "root", "queueName": "A", "data": {}, "opts": ts(json!({"jobId": "root"})),
        "children": [
            {"name": "c1", "queueName": "B", "data": {}, "opts": ts(json!({"jobId": "c1", "attempts": 9}))},
            {"name": "c2", "queueName": "B", "data": {}, "opts": ts(json!({"jobId": "c2"}))}
        ]
    });
    let defaults = json!({
        "A": {"defaultJobOptions": {"attempts": 2, "removeOnComplete": 5}},
        "B": {"defaultJobOptions": {"attempts": 4, "backoff": {"type": "fixed", "delay": 100}}}
    });
    same_as_node_with("defaults", &["A", "B"], &spec, Some(&defaults), |_| async {
        Ok(())
    })
    .await?;
    Ok(())
}

#[tokio::test]
async fn an_existing_completed_child_is_recorded_and_its_parent_released_as_node_does() -> Result<()>
{
    if !node_available() {
        return Ok(());
    }
    // Both children already exist and are completed: the parent has no pending child and goes
    // to wait at once (6.7's deferred parent release), not stuck in waiting-children.
    let spec = json!({
        "name": "root", "queueName": "A", "data": {}, "opts": ts(json!({"jobId": "root"})),
        "children": [
            {"name": "done", "queueName": "A", "data": {}, "opts": ts(json!({"jobId": "done-1"}))},
            {"name": "done", "queueName": "A", "data": {}, "opts": ts(json!({"jobId": "done-2"}))}
        ]
    });
    same_as_node_with("existing", &["A"], &spec, None, |queue| async move {
        write_completed(&queue, "done-1", "{\"v\":1}").await?;
        write_completed(&queue, "done-2", "{\"v\":2}").await
    })
    .await?;

    // One completed and one new child: the parent waits for the new one.
    let spec = json!({
        "name": "root", "queueName": "A", "data": {}, "opts": ts(json!({"jobId": "root"})),
        "children": [
            {"name": "done", "queueName": "A", "data": {}, "opts": ts(json!({"jobId": "done-1"}))},
            {"name": "new", "queueName": "A", "data": {}, "opts": ts(json!({"jobId": "new-1"}))}
        ]
    });
    same_as_node_with("existing-mixed", &["A"], &spec, None, |queue| async move {
        write_completed(&queue, "done-1", "{\"v\":1}").await
    })
    .await?;
    Ok(())
}

#[tokio::test]
async fn a_parent_id_that_exists_is_kept_and_its_children_attached_as_node_does() -> Result<()> {
    if !node_available() {
        return Ok(());
    }
    let spec = json!({
        "name": "root", "queueName": "A", "data": {"new": true}, "opts": ts(json!({"jobId": "root"})),
        "children": [
            {"name": "c1", "queueName": "A", "data": {}, "opts": ts(json!({"jobId": "c1"}))}
        ]
    });
    same_as_node_with("parent-exists", &["A"], &spec, None, |queue| async move {
        let q = open_queue(&queue).await?;
        q.add_job(
            "root",
            json!({"old": true}),
            JobOptions::new().job_id("root").timestamp_ms(TS),
        )
        .await?;
        q.close().await?;
        Ok(())
    })
    .await?;
    Ok(())
}

#[tokio::test]
async fn a_root_under_an_existing_parent_is_stored_as_node_stores_it() -> Result<()> {
    if !node_available() {
        return Ok(());
    }
    // The root names a parent outside the flow (`opts.parent`): it joins that parent's
    // dependencies, and its own children wait as usual.
    let same = |queue: String| async move {
        let q = open_queue(&queue).await?;
        q.add_job(
            "ext",
            json!({}),
            JobOptions::new().job_id("ext").timestamp_ms(TS),
        )
        .await?;
        q.close().await?;
        anyhow::Ok(())
    };
    let ours = Queues::new("fpr-ext", &["A"]);
    let theirs = Queues::new("fpn-ext", &["A"]);
    let spec = |queues: &Queues| {
        let q = queues.name("A");
        json!({"name": "root", "queueName": q, "data": {},
            "opts": ts(json!({"jobId": "root", "parent": {"id": "ext", "queue": format!("bull:{q}")}})),
            "children": [{"name": "c", "queueName": q, "data": {}, "opts": ts(json!({"jobId": "c"}))}]})
    };
    same(ours.name("A").to_owned()).await?;
    same(theirs.name("A").to_owned()).await?;
    let producer = producer().await?;
    producer.add(to_flow(&spec(&ours))).await?;
    producer.close().await?;
    let node = node_add(&spec(&theirs), None).await?;
    assert!(node.get("error").is_none(), "{node}");
    assert_same(
        &snapshot(&ours).await?,
        &snapshot(&theirs).await?,
        "external parent",
    );
    ours.cleanup().await?;
    theirs.cleanup().await?;
    Ok(())
}

#[tokio::test]
async fn deduplication_on_a_lone_root_is_stored_as_node_stores_it() -> Result<()> {
    if !node_available() {
        return Ok(());
    }
    let spec = json!({
        "name": "solo", "queueName": "A", "data": {}, "opts": ts(json!({"deduplication": {"id": "d1"}}))
    });
    same_as_node("dedup-root", &["A"], &spec).await?;
    Ok(())
}

#[tokio::test]
async fn add_bulk_is_stored_as_nodes_add_bulk() -> Result<()> {
    if !node_available() {
        return Ok(());
    }
    let specs = [
        json!({"name": "r1", "queueName": "A", "data": {}, "opts": ts(json!({"jobId": "r1"})),
               "children": [{"name": "c1", "queueName": "B", "data": {}, "opts": ts(json!({"jobId": "c1"}))}]}),
        json!({"name": "r2", "queueName": "B", "data": {}, "opts": ts(json!({"jobId": "r2"})),
               "children": [{"name": "c2", "queueName": "A", "data": {}, "opts": ts(json!({"jobId": "c2"}))},
                            {"name": "c3", "queueName": "A", "data": {}, "opts": ts(json!({"jobId": "c3"}))}]}),
    ];
    let ours = Queues::new("fpr-bulk", &["A", "B"]);
    let theirs = Queues::new("fpn-bulk", &["A", "B"]);
    let producer = producer().await?;
    let trees = producer
        .add_bulk(specs.iter().map(|s| to_flow(&ours.resolve(s))).collect())
        .await?;
    producer.close().await?;
    assert_eq!(trees.len(), 2);
    let node = node_add_bulk(&specs.iter().map(|s| theirs.resolve(s)).collect::<Vec<_>>()).await?;
    assert!(node.get("error").is_none(), "{node}");
    assert_same(
        &snapshot(&ours).await?,
        &snapshot(&theirs).await?,
        "addBulk",
    );
    assert_eq!(
        ours.mask(&json!(trees.iter().map(shape).collect::<Vec<_>>())),
        theirs.mask(&node["trees"])
    );
    ours.cleanup().await?;
    theirs.cleanup().await?;
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Refusals: nothing written
// ---------------------------------------------------------------------------------------------

#[tokio::test]
async fn a_child_id_owned_by_another_parent_refuses_the_whole_flow() -> Result<()> {
    if !node_available() {
        return Ok(());
    }
    let ours = Queues::new("fpr-owned", &["A"]);
    let theirs = Queues::new("fpn-owned", &["A"]);
    let first = json!({"name": "owner", "queueName": "A", "data": {}, "opts": ts(json!({"jobId": "owner"})),
        "children": [{"name": "taken", "queueName": "A", "data": {}, "opts": ts(json!({"jobId": "taken"}))}]});
    let second = json!({"name": "other", "queueName": "A", "data": {}, "opts": ts(json!({"jobId": "other"})),
    "children": [
        {"name": "fresh", "queueName": "A", "data": {}, "opts": ts(json!({"jobId": "fresh"}))},
        {"name": "taken", "queueName": "A", "data": {}, "opts": ts(json!({"jobId": "taken"}))}
    ]});
    let producer = producer().await?;
    producer.add(to_flow(&ours.resolve(&first))).await?;
    let before = snapshot(&ours).await?;
    let err = producer
        .add(to_flow(&ours.resolve(&second)))
        .await
        .unwrap_err();
    match &err {
        FlowError::ParentCannotBeReplaced {
            path,
            job_key,
            existing_parent_key,
        } => {
            assert_eq!(path.to_string(), "root.children[1]");
            assert!(job_key.ends_with(":taken"), "{job_key}");
            assert!(
                existing_parent_key.ends_with(":owner"),
                "{existing_parent_key}"
            );
        }
        other => panic!("unexpected {other:?}"),
    }
    assert_same(
        &snapshot(&ours).await?,
        &before,
        "nothing written on refusal",
    );
    producer.close().await?;

    // Node does not refuse: only the root's reply is checked, so the child's -7
    // (`ParentJobCannotBeReplaced`) is dropped; the other jobs of its transaction stay written
    // and the new parent waits for the children it did get ("taken" keeps its old parent).
    node_add(&theirs.resolve(&first), None).await?;
    let node = node_add(&theirs.resolve(&second), None).await?;
    assert!(
        node.get("error").is_none(),
        "Node 6.7 reports no error: {node}"
    );
    let raw = raw_client().await?;
    let q = theirs.name("A");
    use fred::prelude::{ClientLike, HashesInterface, SetsInterface};
    let taken_parent: String = raw.hget(format!("bull:{q}:taken"), "parentKey").await?;
    assert!(taken_parent.ends_with(":owner"), "{taken_parent}");
    let other_deps: Vec<String> = raw.smembers(format!("bull:{q}:other:dependencies")).await?;
    assert_eq!(other_deps, [format!("bull:{q}:fresh")]);
    raw.quit().await?;
    ours.cleanup().await?;
    theirs.cleanup().await?;
    Ok(())
}

#[tokio::test]
async fn a_root_whose_parent_is_missing_writes_nothing() -> Result<()> {
    let ours = Queues::new("fpr-noparent", &["A"]);
    let queue = ours.name("A").to_owned();
    let producer = producer().await?;
    let tree = FlowJob::new("root", queue.as_str())
        .opts(
            JobOptions::new().parent(ractor_bullmq::protocol::ParentRef::new(
                "nowhere",
                format!("bull:{queue}"),
            )),
        )
        .child(FlowJob::new("c", queue.as_str()));
    let err = producer.add(tree).await.unwrap_err();
    assert!(
        matches!(&err, FlowError::ParentNotFound { parent_key, .. } if parent_key.ends_with(":nowhere")),
        "{err:?}"
    );
    assert_eq!(ours.key_count().await?, 0, "nothing written");
    producer.close().await?;
    Ok(())
}

/// What a refusal case expects of the error.
type Expect = fn(&FlowError) -> bool;

#[tokio::test]
async fn every_bad_tree_is_refused_before_anything_is_written() -> Result<()> {
    let ours = Queues::new("fpr-bad", &["A", "B"]);
    let (a, b) = (ours.name("A").to_owned(), ours.name("B").to_owned());
    let producer = producer().await?;
    let ok = |name: &str| FlowJob::new(name, a.as_str());
    let mut keep_last = ractor_bullmq::protocol::Deduplication::new("d");
    keep_last.keep_last_if_active = Some(true);
    let cases: Vec<(&str, FlowJob, Expect)> = vec![
        ("empty name", ok("root").child(ok("")), |e| {
            matches!(e, FlowError::Invalid(FlowValidationError::EmptyName { .. }))
        }),
        (
            "empty queue",
            ok("root").child(FlowJob::new("c", "")),
            |e| {
                matches!(
                    e,
                    FlowError::Invalid(FlowValidationError::EmptyQueueName { .. })
                )
            },
        ),
        (
            "two policies",
            ok("root").child(
                ok("c").opts(
                    JobOptions::new()
                        .fail_parent_on_failure(true)
                        .remove_dependency_on_failure(true),
                ),
            ),
            |e| {
                matches!(
                    e,
                    FlowError::Invalid(FlowValidationError::InvalidOptions {
                        source: ValidationError::ExclusiveOptions { .. },
                        ..
                    })
                )
            },
        ),
        (
            "dedup with children",
            ok("root")
                .opts(
                    JobOptions::new()
                        .deduplication(ractor_bullmq::protocol::Deduplication::new("d")),
                )
                .child(ok("c")),
            |e| {
                matches!(
                    e,
                    FlowError::Invalid(FlowValidationError::DeduplicationWithChildren { .. })
                )
            },
        ),
        (
            "keepLastIfActive on a child",
            ok("root").child(ok("c").opts(JobOptions::new().deduplication(keep_last.clone()))),
            |e| {
                matches!(
                    e,
                    FlowError::Invalid(FlowValidationError::KeepLastIfActiveWithParent { .. })
                )
            },
        ),
        (
            "dedup on a child",
            ok("root").child(ok("c").opts(
                JobOptions::new().deduplication(ractor_bullmq::protocol::Deduplication::new("d")),
            )),
            |e| {
                matches!(
                    e,
                    FlowError::Invalid(FlowValidationError::InvalidOptions {
                        source: ValidationError::DeduplicationWithParent,
                        ..
                    })
                )
            },
        ),
        (
            "parent on a child",
            ok("root").child(ok("c").opts(JobOptions::new().parent(
                ractor_bullmq::protocol::ParentRef::new("x", format!("bull:{a}")),
            ))),
            |e| {
                matches!(
                    e,
                    FlowError::Invalid(FlowValidationError::ParentOnChild { .. })
                )
            },
        ),
        (
            "integer id",
            ok("root").child(ok("c").opts(JobOptions::new().job_id("7"))),
            |e| {
                matches!(
                    e,
                    FlowError::Invalid(FlowValidationError::InvalidOptions {
                        source: ValidationError::JobIdInteger { .. },
                        ..
                    })
                )
            },
        ),
        (
            "cross slot",
            ok("root").child(FlowJob::new("c", b.as_str()).prefix("{tagged}")),
            |e| matches!(e, FlowError::Invalid(FlowValidationError::CrossSlot { .. })),
        ),
    ];
    for (what, tree, expected) in cases {
        let err = producer.add(tree).await.expect_err(what);
        assert!(expected(&err), "{what}: unexpected {err:?}");
        assert_eq!(ours.key_count().await?, 0, "{what}: nothing written");
    }
    // A refused node of an add_bulk refuses every flow of it.
    let err = producer
        .add_bulk(vec![ok("fine").child(ok("c")), ok("bad").child(ok(""))])
        .await
        .unwrap_err();
    assert!(
        matches!(&err, FlowError::Invalid(FlowValidationError::EmptyName { path }) if path.to_string() == "root.children[1].children[0]"),
        "{err:?}"
    );
    assert_eq!(ours.key_count().await?, 0, "add_bulk: nothing written");
    producer.close().await?;
    Ok(())
}

#[tokio::test]
async fn node_refuses_the_same_deduplicated_child_and_keep_last_if_active() -> Result<()> {
    if !node_available() {
        return Ok(());
    }
    let theirs = Queues::new("fpn-dedup", &["A"]);
    let child = |dedup: Json| {
        theirs.resolve(&json!({"name": "root", "queueName": "A", "data": {},
            "children": [{"name": "c", "queueName": "A", "data": {}, "opts": {"deduplication": dedup}}]}))
    };
    let node = node_add(&child(json!({"id": "d"})), None).await?;
    assert_eq!(
        node["error"],
        json!("Deduplication and parent options cannot be used together")
    );
    let node = node_add(&child(json!({"id": "d", "keepLastIfActive": true})), None).await?;
    assert_eq!(
        node["error"],
        json!("keepLastIfActive deduplication cannot be used on flow nodes with a parent")
    );
    assert_eq!(theirs.key_count().await?, 0, "Node wrote nothing either");
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Size
// ---------------------------------------------------------------------------------------------

#[tokio::test]
async fn one_parent_with_ten_thousand_children_is_added_in_one_call() -> Result<()> {
    let ours = Queues::new("fpr-10k", &["A", "B"]);
    let (a, b) = (ours.name("A").to_owned(), ours.name("B").to_owned());
    let children = (0..10_000).map(|i| FlowJob::new("child", b.as_str()).data(json!({ "i": i })));
    let tree = FlowJob::new("parent", a.as_str()).children(children);
    let producer = producer().await?;
    let added = producer.add(tree).await?;
    producer.close().await?;
    assert_eq!(added.children.len(), 10_000);
    let raw = raw_client().await?;
    use fred::prelude::{ClientLike, ListInterface, SetsInterface, SortedSetsInterface};
    let waiting: u64 = raw.llen(format!("bull:{b}:wait")).await?;
    let parents: u64 = raw.zcard(format!("bull:{a}:waiting-children")).await?;
    let deps: u64 = raw
        .scard(format!("bull:{a}:{}:dependencies", added.job.id()))
        .await?;
    raw.quit().await?;
    assert_eq!((waiting, parents, deps), (10_000, 1, 10_000));
    ours.cleanup().await?;
    Ok(())
}

#[tokio::test]
async fn a_chain_five_hundred_levels_deep_is_added_in_one_call() -> Result<()> {
    let ours = Queues::new("fpr-deep", &["A"]);
    let a = ours.name("A").to_owned();
    let mut tree = FlowJob::new("leaf", a.as_str());
    for level in 0..499 {
        tree = FlowJob::new(format!("level-{level}"), a.as_str()).child(tree);
    }
    let producer = producer().await?;
    let added = producer.add(tree).await?;
    producer.close().await?;
    let mut depth = 1;
    let mut node = &added;
    while let Some(child) = node.children.first() {
        depth += 1;
        node = child;
    }
    assert_eq!(depth, 500);
    let raw = raw_client().await?;
    use fred::prelude::{ClientLike, ListInterface, SortedSetsInterface};
    let waiting: u64 = raw.llen(format!("bull:{a}:wait")).await?;
    let parents: u64 = raw.zcard(format!("bull:{a}:waiting-children")).await?;
    raw.quit().await?;
    assert_eq!((waiting, parents), (1, 499));
    ours.cleanup().await?;
    Ok(())
}
