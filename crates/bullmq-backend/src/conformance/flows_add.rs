//! Adding whole flows ([`FlowStore`](crate::FlowStore)): placement, existing ids, refusals.

use std::sync::Arc;

use bullmq_protocol::state::JobState;
use bullmq_protocol::{JobRef, QueueId};

use super::{Ctx, Retention};
use crate::flow_store::{FlowAdded, FlowNodeInsert, FlowRefusal};
use crate::queue::{NewJob, ParentFlags, ParentLink};
use crate::Backend;

fn node(
    queue: &QueueId,
    id: &str,
    parent: Option<(&QueueId, &str)>,
    waiting: bool,
) -> FlowNodeInsert {
    let mut job = NewJob::new(id, "{}", "{\"attempts\":0}", crate::now_ms()).with_custom_id(id);
    if let Some((parent_queue, parent_id)) = parent {
        let parent = JobRef::new(parent_queue.clone(), parent_id);
        job = job.with_parent(ParentLink::new(parent, ParentFlags::default()));
    }
    FlowNodeInsert::new(queue.clone(), job, waiting)
}

fn names(events: &[crate::EventEntry]) -> Vec<String> {
    events
        .iter()
        .map(|e| format!("{}:{}", e.fields[0].1, e.fields[1].1))
        .collect()
}

fn ids(added: FlowAdded) -> Vec<String> {
    match added {
        FlowAdded::Ids(ids) => ids,
        other => panic!("flow refused: {other:?}"),
    }
}

/// A three-level flow across two queues: parents wait in `waiting-children` with their
/// children as `:dependencies`, leaves wait, and events are `added` + `waiting-children` for
/// parents, `added` + `waiting` for leaves, in insert order.
pub async fn flow_add_places_parents_and_children(backend: Arc<dyn Backend>, queue: &str) {
    let a = Ctx::new(backend.clone(), queue).await;
    let b = Ctx::new(backend.clone(), &format!("{queue}-b")).await;
    let flows = backend.flow_store().await.expect("flow store");
    let nodes = [
        node(&a.id, "root", None, true),
        node(&b.id, "mid", Some((&a.id, "root")), true),
        node(&a.id, "leaf-1", Some((&b.id, "mid")), false),
        node(&b.id, "leaf-2", Some((&a.id, "root")), false),
    ];
    let added = ids(flows.add_flow(&nodes).await.expect("add_flow"));
    assert_eq!(added, ["root", "mid", "leaf-1", "leaf-2"]);
    assert_eq!(a.state("root").await, JobState::WaitingChildren);
    assert_eq!(b.state("mid").await, JobState::WaitingChildren);
    assert_eq!(a.state("leaf-1").await, JobState::Waiting);
    assert_eq!(b.state("leaf-2").await, JobState::Waiting);
    let root_deps = a.queue.get_dependencies("root").await.expect("deps");
    assert_eq!(
        root_deps.unprocessed,
        [b.job("leaf-2"), b.job("mid")],
        "root waits for mid and leaf-2"
    );
    let mid_deps = b.queue.get_dependencies("mid").await.expect("deps");
    assert_eq!(mid_deps.unprocessed, [a.job("leaf-1")]);
    let leaf = a.queue.get_job("leaf-1").await.unwrap().expect("leaf-1");
    assert_eq!(leaf.parent_key.as_deref(), Some(b.keys.job("mid").as_str()));

    assert_eq!(
        names(&a.all_events().await),
        [
            "added:root",
            "waiting-children:root",
            "added:leaf-1",
            "waiting:leaf-1"
        ]
    );
    assert_eq!(
        names(&b.all_events().await),
        [
            "added:mid",
            "waiting-children:mid",
            "added:leaf-2",
            "waiting:leaf-2"
        ]
    );

    // The leaf completes, then mid is released to wait.
    let job = a.fetch_one().await;
    assert_eq!(job.id, "leaf-1");
    a.complete(&job, Retention::default()).await;
    assert_eq!(b.state("mid").await, JobState::Waiting);
    let _ = flows.close().await;
    a.close().await;
    b.close().await;
}

/// A node whose id exists: a completed job is recorded as the parent's processed child (the
/// parent, with no pending child left, is released to wait); a waiting job becomes a pending
/// dependency. Both emit `duplicated`.
pub async fn flow_add_attaches_existing_children(backend: Arc<dyn Backend>, queue: &str) {
    let c = Ctx::new(backend.clone(), queue).await;
    let flows = backend.flow_store().await.expect("flow store");
    c.add_job(NewJob::new("done", "{}", "{}", crate::now_ms()).with_custom_id("done"))
        .await;
    let job = c.fetch_one().await;
    c.complete(&job, Retention::default()).await;
    assert_eq!(c.state("done").await, JobState::Completed);

    let added = ids(flows
        .add_flow(&[
            node(&c.id, "p1", None, true),
            node(&c.id, "done", Some((&c.id, "p1")), false),
        ])
        .await
        .expect("add_flow"));
    assert_eq!(added, ["p1", "done"]);
    assert_eq!(
        c.state("p1").await,
        JobState::Waiting,
        "released: no pending child"
    );
    let deps = c.queue.get_dependencies("p1").await.expect("deps");
    assert_eq!(
        deps.processed.get(&c.job("done")),
        Some(&serde_json::json!({"ok": 1}))
    );
    assert!(deps.unprocessed.is_empty());

    c.add_job(NewJob::new("pending", "{}", "{}", crate::now_ms()).with_custom_id("pending"))
        .await;
    ids(flows
        .add_flow(&[
            node(&c.id, "p2", None, true),
            node(&c.id, "pending", Some((&c.id, "p2")), false),
        ])
        .await
        .expect("add_flow"));
    assert_eq!(c.state("p2").await, JobState::WaitingChildren);
    let deps = c.queue.get_dependencies("p2").await.expect("deps");
    assert_eq!(deps.unprocessed, [c.job("pending")]);
    assert_eq!(c.events_named("duplicated").await.len(), 2);
    let _ = flows.close().await;
    c.close().await;
}

/// Refusals write nothing: a root whose `parent` does not exist, and a node whose id exists as
/// the child of another parent that still exists.
pub async fn flow_add_refusals_write_nothing(backend: Arc<dyn Backend>, queue: &str) {
    let c = Ctx::new(backend.clone(), queue).await;
    let flows = backend.flow_store().await.expect("flow store");
    let refused = flows
        .add_flow(&[
            node(&c.id, "r", Some((&c.id, "nowhere")), true),
            node(&c.id, "c", Some((&c.id, "r")), false),
        ])
        .await
        .expect("add_flow");
    assert_eq!(
        refused,
        FlowAdded::Refused(FlowRefusal::ParentMissing {
            index: 0,
            parent: c.job("nowhere")
        })
    );
    assert_eq!(c.state("r").await, JobState::Unknown);
    assert_eq!(c.state("c").await, JobState::Unknown);

    // Malformed options on a later node fail the call before the first write.
    let mut bad = node(&c.id, "bad", Some((&c.id, "r2")), false);
    bad.job.opts = "not json".into();
    assert!(flows
        .add_flow(&[node(&c.id, "r2", None, true), bad])
        .await
        .is_err());
    assert_eq!(c.state("r2").await, JobState::Unknown, "nothing written");

    ids(flows
        .add_flow(&[
            node(&c.id, "owner", None, true),
            node(&c.id, "taken", Some((&c.id, "owner")), false),
        ])
        .await
        .expect("add_flow"));
    let before = c.all_events().await.len();
    let refused = flows
        .add_flow(&[
            node(&c.id, "other", None, true),
            node(&c.id, "fresh", Some((&c.id, "other")), false),
            node(&c.id, "taken", Some((&c.id, "other")), false),
        ])
        .await
        .expect("add_flow");
    assert_eq!(
        refused,
        FlowAdded::Refused(FlowRefusal::ParentCannotBeReplaced {
            index: 2,
            job: c.job("taken"),
            existing_parent: c.job("owner"),
        })
    );
    assert_eq!(c.state("other").await, JobState::Unknown, "nothing written");
    assert_eq!(c.state("fresh").await, JobState::Unknown, "nothing written");
    assert_eq!(c.all_events().await.len(), before, "no event");
    let _ = flows.close().await;
    c.close().await;
}

/// A flow read back node by node: the job and its children's keys, processed first, then
/// pending; `None` for a missing job.
pub async fn flow_read_node_lists_children(backend: Arc<dyn Backend>, queue: &str) {
    let c = Ctx::new(backend.clone(), queue).await;
    let flows = backend.flow_store().await.expect("flow store");
    ids(flows
        .add_flow(&[
            node(&c.id, "root", None, true),
            node(&c.id, "k1", Some((&c.id, "root")), false),
            node(&c.id, "k2", Some((&c.id, "root")), false),
        ])
        .await
        .expect("add_flow"));
    let job = c.fetch_one().await;
    assert_eq!(job.id, "k1");
    c.complete(&job, Retention::default()).await;
    let read = flows
        .read_node(&c.id, "root", 20)
        .await
        .expect("read_node")
        .expect("root exists");
    assert_eq!(read.record.id, "root");
    assert_eq!(read.children, [c.job("k1"), c.job("k2")]);
    let leaf = flows.read_node(&c.id, "k2", 20).await.unwrap().expect("k2");
    assert_eq!(
        leaf.record.parent_key.as_deref(),
        Some(c.keys.job("root").as_str())
    );
    assert!(leaf.children.is_empty());
    assert!(flows.read_node(&c.id, "nope", 20).await.unwrap().is_none());
    let _ = flows.close().await;
    c.close().await;
}

/// Removing a flow parent: without its children they stay where they are, still naming the
/// parent; with them, each child detaches itself first, so the parent is released to `wait`
/// (its `waiting` event) just before it goes (`removed` prev `wait`), as Node's `removeJob`.
pub async fn flow_remove_with_or_without_children(backend: Arc<dyn Backend>, queue: &str) {
    let c = Ctx::new(backend.clone(), queue).await;
    let flows = backend.flow_store().await.expect("flow store");
    let nodes = [
        node(&c.id, "alone", None, true),
        node(&c.id, "kept", Some((&c.id, "alone")), false),
        node(&c.id, "whole", None, true),
        node(&c.id, "gone", Some((&c.id, "whole")), false),
    ];
    ids(flows.add_flow(&nodes[..2]).await.expect("add_flow"));
    ids(flows.add_flow(&nodes[2..]).await.expect("add_flow"));

    assert_eq!(
        c.queue.remove_job("alone", false).await.unwrap(),
        crate::RemoveOutcome::Removed
    );
    assert_eq!(c.state("alone").await, JobState::Unknown);
    assert_eq!(c.state("kept").await, JobState::Waiting, "the child stays");
    let kept = c.queue.get_job("kept").await.unwrap().expect("kept");
    assert_eq!(
        kept.parent_key.as_deref(),
        Some(c.keys.job("alone").as_str())
    );

    assert_eq!(
        c.queue.remove_job("whole", true).await.unwrap(),
        crate::RemoveOutcome::Removed
    );
    assert_eq!(c.state("whole").await, JobState::Unknown);
    assert_eq!(c.state("gone").await, JobState::Unknown);
    if super::profile().removed_event {
        let tail: Vec<String> = names(&c.all_events().await)
            .into_iter()
            .rev()
            .take(3)
            .collect();
        assert_eq!(tail, ["removed:whole", "removed:gone", "waiting:whole"]);
        let removed = c.events_named("removed").await;
        assert_eq!(removed.last().unwrap()["prev"], "wait");
    } else {
        // Node's PostgreSQL function deletes the subtree without a step or an event.
        assert!(c.events_named("removed").await.is_empty());
    }
    c.close().await;
}
