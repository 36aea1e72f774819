//! Queue upkeep ([`QueueMaintenance`](crate::QueueMaintenance)): the delayed count before a
//! time, the job-owned deduplication key, detaching a pending child, removing a parent's
//! pending children, orphaned jobs, the scheduler check.

use std::sync::Arc;

use bullmq_protocol::state::JobState;

use super::Ctx;
use crate::flow_store::{FlowAdded, FlowNodeInsert};
use crate::maintenance::ChildDependency;
use crate::queue::NewJob;
use crate::Backend;

/// A job `id` of `ctx`'s queue, a child of `parent` when given.
fn flow_node(ctx: &Ctx, id: &str, parent: Option<&str>, waiting: bool) -> FlowNodeInsert {
    let mut job = NewJob::new(id, "{}", r#"{"attempts":0}"#, crate::now_ms()).with_custom_id(id);
    if let Some(parent) = parent {
        job = job.with_parent(ctx.parent_link(parent));
    }
    FlowNodeInsert::new(ctx.id.clone(), job, waiting)
}

/// The delayed count counts jobs due strictly before the time; the job-owned dedup key goes
/// only while its job owns it; a pending child is detached once (its parent moving to `wait`
/// when it was the last), unknown jobs say so; removing a parent's pending children keeps the
/// locked ones; a consistent queue has no orphans; a job id is not a scheduler.
pub async fn maintenance_children_dedup_and_counts(backend: Arc<dyn Backend>, queue: &str) {
    let c = Ctx::new(backend.clone(), queue).await;
    let store = &c.queue;

    let now = crate::now_ms();
    c.add_job(NewJob::new("later", "{}", r#"{"delay":60000}"#, now).with_custom_id("d1"))
        .await;
    let due = now + 60_000;
    assert_eq!(store.get_delayed_count_before(due).await.unwrap(), 0);
    assert_eq!(store.get_delayed_count_before(due + 1).await.unwrap(), 1);

    c.add_job(NewJob::new("dd", "{}", r#"{"de":{"id":"k"}}"#, now).with_custom_id("o1"))
        .await;
    assert!(!store
        .remove_owned_deduplication_key("k", "other")
        .await
        .unwrap());
    assert!(store
        .remove_owned_deduplication_key("k", "o1")
        .await
        .unwrap());
    assert!(!store
        .remove_owned_deduplication_key("k", "o1")
        .await
        .unwrap());

    let flows = backend.flow_store().await.expect("flow store");
    let nodes = [
        flow_node(&c, "p", None, true),
        flow_node(&c, "c1", Some("p"), false),
        flow_node(&c, "c2", Some("p"), false),
    ];
    assert!(matches!(
        flows.add_flow(&nodes).await.expect("add_flow"),
        FlowAdded::Ids(_)
    ));
    let detach = |id: &'static str| async move { store.remove_child_dependency(id).await.unwrap() };
    assert_eq!(detach("c1").await, ChildDependency::Removed);
    assert_eq!(detach("c1").await, ChildDependency::NotPending);
    assert_eq!(detach("d1").await, ChildDependency::NotPending, "no parent");
    assert_eq!(detach("none").await, ChildDependency::JobMissing);
    assert_eq!(c.state("p").await, JobState::WaitingChildren);
    assert_eq!(detach("c2").await, ChildDependency::Removed);
    assert_eq!(c.state("p").await, JobState::Waiting, "its last child left");

    // Take everything waiting now, then add `q` with two children: the next fetch takes k1
    // (oldest first), so a worker holds it.
    c.fetch(10).await;
    let nodes = [
        flow_node(&c, "q", None, true),
        flow_node(&c, "k1", Some("q"), false),
        flow_node(&c, "k2", Some("q"), false),
    ];
    assert!(matches!(
        flows.add_flow(&nodes).await.expect("add_flow"),
        FlowAdded::Ids(_)
    ));
    let fetched = c.fetch(1).await;
    assert_eq!(
        fetched
            .jobs
            .iter()
            .map(|j| j.id.as_str())
            .collect::<Vec<_>>(),
        ["k1"]
    );
    let removed = store.remove_unprocessed_children("q").await.unwrap();
    assert_eq!(removed.len(), 1, "only the unlocked child: {removed:?}");
    assert_eq!(removed[0], c.job("k2"), "{removed:?}");
    assert_eq!(c.state("k1").await, JobState::Active, "locked: kept");
    assert_eq!(c.state("k2").await, JobState::Unknown);
    assert_eq!(c.state("q").await, JobState::WaitingChildren);

    assert_eq!(store.remove_orphaned_jobs(1000, 0).await.unwrap(), 0);
    assert!(!store.is_job_scheduler("p").await.unwrap());
    c.close().await;
}
